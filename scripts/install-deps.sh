#!/usr/bin/env bash
# Installs what ringloop needs to build, test and bench, on Debian or Ubuntu.
# Idempotent: it installs only missing packages and says nothing when all is
# there. Run as root, or as a user with sudo.
#
#   scripts/install-deps.sh            build + test + bench needs
#   scripts/install-deps.sh --extra    also valgrind, clang, qemu-user and the
#                                      aarch64 cross compiler (CI, fuzzing)
#   scripts/install-deps.sh --fio      also fio (make bench-fio)
#   scripts/install-deps.sh --net      also wrk, nginx (light) and curl
#   scripts/install-deps.sh --node     also nodejs and npm (make bench-peers)
set -eu

need=(liburing-dev libcriterion-dev pkg-config gnuplot-nox g++)
if [ "${1:-}" = "--extra" ]; then
	need+=(clang-format valgrind clang libclang-rt-14-dev gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user)
fi
[ "${1:-}" = "--fio" ] && need+=(fio)
[ "${1:-}" = "--net" ] && need+=(wrk nginx-light curl)
[ "${1:-}" = "--node" ] && need+=(nodejs npm)

missing=()
for p in "${need[@]}"; do
	dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if ! command -v apt-get >/dev/null 2>&1; then
	echo "install-deps: apt-get not found; install these by hand: ${missing[*]}" >&2
	exit 1
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then
	command -v sudo >/dev/null 2>&1 || {
		echo "install-deps: not root and no sudo; install: ${missing[*]}" >&2
		exit 1
	}
	sudo="sudo"
fi
echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq >/dev/null
$sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
