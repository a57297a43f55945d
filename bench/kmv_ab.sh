#!/bin/sh
# kmv_ab.sh OLD_COMMIT [ROWS K REPEATS INNER [THREADS]]: build bench/kmv_ab.c against this tree's
# build/rel/libtern.a (run `make` first) and OLD_COMMIT's src/kernels/x86/avx2.c (its table renamed
# kern_table_avx2_old), then run it. Example (session 2's matvec, in L2, 1 thread):
#   sh bench/kmv_ab.sh 8460e59 256 5120 21 200
set -e
old=$1; shift
[ $# -gt 0 ] || set -- 256 5120 21 200
out=${TMPDIR:-/tmp}/kmv_ab.$$
mkdir -p "$out"
trap 'rm -rf "$out"' EXIT
F="-std=c11 -D_GNU_SOURCE -O2 -ffp-contract=off -fno-math-errno -pthread -Iinclude -Isrc"
git show "$old:src/kernels/x86/avx2.c" | sed 's/kern_table_avx2\b/kern_table_avx2_old/g' > "$out/avx2_old.c"
cc $F -mavx2 -mfma -mf16c -c "$out/avx2_old.c" -o "$out/avx2_old.o"
cc $F -c bench/kmv_ab.c -o "$out/kmv_ab.o"
cc "$out/kmv_ab.o" "$out/avx2_old.o" build/rel/libtern.a -lutf8proc -lm -pthread -o "$out/kmv_ab"
"$out/kmv_ab" "$@"
