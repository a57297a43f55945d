#!/bin/sh
# deps.sh: check the build and test dependencies and install the missing ones with apt-get
# (Debian/Ubuntu; uses sudo when not root). `sh scripts/deps.sh [--ci]`: --ci adds the extra
# tools CI uses (clang + libFuzzer runtime, the aarch64 cross compiler and qemu-user).
set -eu
pkgs=""
need() { # need <header-or-command> <package>
    case "$1" in
        /*) [ -e "$1" ] || pkgs="$pkgs $2" ;;
        *) command -v "$1" >/dev/null 2>&1 || pkgs="$pkgs $2" ;;
    esac
}
need cc gcc
need make make
need pkg-config pkg-config
need /usr/include/cmocka.h libcmocka-dev
need /usr/include/cjson/cJSON.h libcjson-dev
need /usr/include/utf8proc.h libutf8proc-dev
need /usr/include/microhttpd.h libmicrohttpd-dev
if [ "${1:-}" = "--ci" ]; then
    need clang clang
    need /usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a libclang-rt-14-dev
    need aarch64-linux-gnu-gcc gcc-aarch64-linux-gnu
    need qemu-aarch64 qemu-user
fi
if [ -z "$pkgs" ]; then
    echo "deps: all present"
    exit 0
fi
echo "deps: installing:$pkgs"
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get install -y -q $pkgs || { $SUDO apt-get update -q && $SUDO apt-get install -y -q $pkgs; }
