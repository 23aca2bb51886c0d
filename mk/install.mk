# mk/install.mk - ringloop as a library users install (included by the
# Makefile).
#
#   make test-install   install into a temporary DESTDIR (PREFIX=/usr) and,
#                       against that tree only, with pkg-config: check the
#                       files, the soname and the exported symbols, build
#                       every example and the C++ test of the public
#                       headers shared and static, run them
#                       (tests/install/run.sh); then the CET marking of the
#                       x86-64 context switch (tests/install/cet.sh).
#                       Part of `make test`; a few seconds.
#   make examples       the programs in examples/, built against this
#                       tree's static library, in $(BUILD)/examples/.

EXAMPLES_SRC := $(wildcard examples/*.c)
EXAMPLES_BIN := $(patsubst examples/%.c,$(BUILD)/examples/%,$(EXAMPLES_SRC))

.PHONY: test-install examples

test-install: lib
	@CC='$(CC)' CXX='$(CXX)' MAKE='$(MAKE)' tests/install/run.sh
	@CC='$(CC)' MAKE='$(MAKE)' tests/install/cet.sh

examples: $(EXAMPLES_BIN)

$(BUILD)/examples/%: examples/%.c $(BUILD)/libringloop.a $(PUB_HDRS)
	@mkdir -p $(dir $@)
	$(CC) -Wall -Wextra $(if $(filter 1,$(WERROR)),-Werror) -g -O2 -Iinclude \
	  $(ALL_LDFLAGS) -o $@ $< $(BUILD)/libringloop.a $(LIBS)
