# mk/stress.mk - the hostile cases of issue 12 on this machine (included
# by the Makefile).
#
#   make stress        builds the library and tests/stress/hostile.c, runs
#                      every case on every backend configuration, prints a
#                      pass/fail table (scripts/stress.sh; a minute or two)

.PHONY: stress

stress:
	scripts/stress.sh
