#!/bin/sh
# win_deps.sh: the three C libraries the Windows build links (utf8proc, cJSON, cmocka for the test
# runner), which Debian ships for Linux only, cross-compiled with mingw-w64 from Debian's source
# packages into a static prefix: `sh scripts/win_deps.sh OUTDIR` gives OUTDIR/include and
# OUTDIR/lib/lib{utf8proc,cjson,cmocka}.a. The sources come through `apt-get source` with a
# private deb-src list and state directory under OUTDIR, so the system's apt setup is not changed.
# Nothing is rebuilt when OUTDIR/lib/libcmocka.a exists. Libmicrohttpd is not built (see README).
set -eu
out=${1:?usage: win_deps.sh OUTDIR}
CC=${WIN_CC:-x86_64-w64-mingw32-gcc-posix}
AR=${WIN_AR:-x86_64-w64-mingw32-ar}
[ -f "$out/lib/libcmocka.a" ] && exit 0
mkdir -p "$out/src/lists/partial" "$out/include/cjson" "$out/lib" "$out/obj"
out=$(cd "$out" && pwd)
src=$out/src
echo "deb-src http://deb.debian.org/debian bookworm main" > "$src/sources.list"
O="-o Dir::Etc::SourceList=$src/sources.list -o Dir::Etc::SourceParts=/dev/null -o Dir::State::Lists=$src/lists"
if ! ls "$src"/cmocka_*.orig.tar.* >/dev/null 2>&1; then
    # shellcheck disable=SC2086
    apt-get $O update -q >/dev/null
    # shellcheck disable=SC2086
    (cd "$src" && apt-get $O source --download-only -q utf8proc cjson cmocka >/dev/null 2>&1)
fi
cd "$src"
for t in utf8proc_*.orig.tar.gz cjson_*.orig.tar.gz cmocka_*.orig.tar.xz; do tar xf "$t"; done
u=$(ls -d utf8proc-*/ | head -n 1); j=$(ls -d cJSON-*/ | head -n 1); m=$(ls -d cmocka-*/ | head -n 1)
F="-O2 -std=gnu11 -w"
$CC $F -DUTF8PROC_STATIC -c "${u}utf8proc.c" -o "$out/obj/utf8proc.o"
$AR rcs "$out/lib/libutf8proc.a" "$out/obj/utf8proc.o"
cp "${u}utf8proc.h" "$out/include/"
$CC $F -DCJSON_HIDE_SYMBOLS -c "${j}cJSON.c" -o "$out/obj/cJSON.o"
$AR rcs "$out/lib/libcjson.a" "$out/obj/cJSON.o"
cp "${j}cJSON.h" "$out/include/cjson/"
# cmocka's CMake config header, reduced to what mingw-w64 has (cmocka.c tests these macros).
cat > "$out/obj/config.h" <<'H'
#define HAVE_STDARG_H 1
#define HAVE_STDDEF_H 1
#define HAVE_STDINT_H 1
#define HAVE_INTTYPES_H 1
#define HAVE_MALLOC_H 1
#define HAVE_SETJMP_H 1
#define HAVE_SIGNAL_H 1
#define HAVE_STRINGS_H 1
#define HAVE_TIME_H 1
#define HAVE_IO_H 1
#define HAVE_CLOCK_GETTIME 1
#define HAVE_STRUCT_TIMESPEC 1
#define HAVE_VSNPRINTF 1
#define HAVE_SNPRINTF 1
#define HAVE_GCC_THREAD_LOCAL_STORAGE 1
H
$CC $F -D__USE_MINGW_ANSI_STDIO=1 -DHAVE_CONFIG_H -I"$out/obj" -I"${m}include" -c "${m}src/cmocka.c" -o "$out/obj/cmocka.o"
$AR rcs "$out/lib/libcmocka.a" "$out/obj/cmocka.o"
# cmocka.h declares its printf-style functions with the msvcrt archetype; both sides use
# mingw-w64's C99 printf (%zu), so the header names that one.
sed "s/__format__ (__printf__/__format__ (gnu_printf/" "${m}include/cmocka.h" > "$out/include/cmocka.h"
echo "win_deps: utf8proc, cJSON, cmocka in $out"
