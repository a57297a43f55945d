#!/bin/sh
# deps.sh: check the build and test dependencies and install the missing ones with apt-get
# (Debian/Ubuntu; uses sudo when not root). `sh scripts/deps.sh [--ci]`: --ci adds the extra
# tools CI uses (clang + libFuzzer runtime, the aarch64 cross compiler and qemu-user).
# --cross (owner: arm) adds the arm64 build of the libraries for `make cross-aarch64`, through
# Debian multiarch (dpkg --add-architecture arm64), plus the cross compiler and qemu-user.
# --windows adds the mingw-w64 cross compiler (posix threads: winpthreads) and wine for
# `make windows` / `make test-windows`; the libraries come from scripts/win_deps.sh.
# --build: only what building ./tern and libtern needs (compiler, make, pkg-config, cJSON,
# utf8proc, libmicrohttpd): `make deps run` passes it; the test tools (cmocka, Python modules,
# HAProxy, Node.js and npm packages, Chromium) come with `make deps test` or a plain `make deps`.
set -eu
ci=0; cross=0; windows=0; build_only=0
for a in "$@"; do
    case "$a" in
        --ci) ci=1 ;;
        --cross) cross=1 ;;
        --windows) windows=1 ;;
        --build) build_only=1 ;;
        *) echo "deps: unknown option $a (use --build, --ci, --cross, --windows)" >&2; exit 2 ;;
    esac
done
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
need /usr/include/cjson/cJSON.h libcjson-dev
need /usr/include/utf8proc.h libutf8proc-dev
need /usr/include/microhttpd.h libmicrohttpd-dev
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive
if [ "$build_only" = 1 ]; then
    if [ -z "$pkgs" ]; then echo "deps: the build packages are present"; exit 0; fi
    echo "deps: installing:$pkgs"
    $SUDO apt-get install -y -q $pkgs || { $SUDO apt-get update -q && $SUDO apt-get install -y -q $pkgs; }
    exit 0
fi
need /usr/include/cmocka.h libcmocka-dev
if [ "$ci" = 1 ]; then
    need clang clang
    need /usr/lib/llvm-14/lib/clang/14.0.6/lib/linux/libclang_rt.fuzzer-x86_64.a libclang-rt-14-dev
    need aarch64-linux-gnu-gcc gcc-aarch64-linux-gnu
    need qemu-aarch64 qemu-user
fi
if [ "$cross" = 1 ]; then
    need aarch64-linux-gnu-gcc gcc-aarch64-linux-gnu
    need qemu-aarch64 qemu-user
    a64=/usr/lib/aarch64-linux-gnu
    need $a64/libutf8proc.so libutf8proc-dev:arm64
    need $a64/libcmocka.so libcmocka-dev:arm64
    need $a64/libcjson.so libcjson-dev:arm64
    need $a64/libmicrohttpd.so libmicrohttpd-dev:arm64
    case "$pkgs" in
        *:arm64*)
            if ! dpkg --print-foreign-architectures | grep -qx arm64; then
                echo "deps: adding the arm64 architecture (multiarch)"
                $SUDO dpkg --add-architecture arm64
                $SUDO apt-get update -q
            fi ;;
    esac
fi
if [ "$windows" = 1 ]; then
    need x86_64-w64-mingw32-gcc-posix gcc-mingw-w64-x86-64
    need wine wine
    need wine64 wine64
fi
# The Python package's tests (part of make test): the system Python 3 with pytest, and setuptools,
# wheel and pip for the offline install check (pip install --no-build-isolation ./python).
need /usr/bin/python3 python3
pymod() { # pymod <module> <package>: a module the system Python must import
    /usr/bin/python3 -c "import $1" >/dev/null 2>&1 || pkgs="$pkgs $2"
}
pymod pytest python3-pytest
pymod setuptools python3-setuptools
pymod wheel python3-wheel
pymod pip python3-pip
# The router-metrics test parses /metrics with the Prometheus client library's own parser; the
# load-balancer test runs HAProxy in front of three replicas; the deployment test reads the
# Kubernetes manifests with PyYAML.
pymod prometheus_client python3-prometheus-client
pymod yaml python3-yaml
need /usr/sbin/haproxy haproxy
# The server's client tests: Node.js + npm (the official openai client, playwright-core) and
# Debian's Chromium (the chat page test).
need node nodejs
need npm npm
need chromium chromium
if [ -z "$pkgs" ]; then
    echo "deps: all packages present"
else
    echo "deps: installing:$pkgs"
    $SUDO apt-get install -y -q $pkgs || { $SUDO apt-get update -q && $SUDO apt-get install -y -q $pkgs; }
fi
# npm packages of tests/server, from its lock file, into tests/server/node_modules (gitignored).
here=$(cd "$(dirname "$0")/.." && pwd)
if [ -f "$here/tests/server/package-lock.json" ] && [ ! -d "$here/tests/server/node_modules/openai" ]; then
    echo "deps: npm ci in tests/server"
    (cd "$here/tests/server" && npm ci --no-audit --no-fund)
fi
