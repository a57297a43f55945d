#!/bin/sh
# fuzz/run.sh SECONDS: build the libFuzzer target (clang, ASan+UBSan), generate the seed corpus
# with our writer, fuzz for SECONDS, and print the runner-style closing line (CI tallies it).
# A crash, sanitizer report or leak fails (exit 1); the reproducer is left in build/fuzz/.
set -u
secs=${1:-60}
CC=${FUZZ_CC:-clang}
out=build/fuzz
mkdir -p "$out/corpus"
srcs="src/format/gguf.c src/format/qtypes.c src/format/budget.c src/core/core.c src/core/os.c"
flags="-std=c11 -D_GNU_SOURCE -g -O1 -Iinclude -Isrc -ffp-contract=off -fno-sanitize-recover=undefined"
shared=${TERN_SHARED:-../shared}
if ! $CC $flags -fsanitize=fuzzer,address,undefined fuzz/fuzz_gguf.c $srcs -lm -o "$out/fuzz_gguf" ||
   ! $CC $flags -fsanitize=address,undefined fuzz/gen_seeds.c $srcs -lm -o "$out/gen_seeds"; then
    echo "fuzz: build failed"; echo "0 passed, 1 failed, 0 skipped"; exit 1
fi
stories="$shared/data/stories260k/stories260K.gguf"
[ -f "$stories" ] || stories=""
if ! "$out/gen_seeds" "$out/corpus" $stories; then
    echo "fuzz: seed generation failed"; echo "0 passed, 1 failed, 0 skipped"; exit 1
fi
echo "fuzz: $(ls "$out/corpus" | wc -l) corpus files, ${secs}s"
if (cd "$out" && ./fuzz_gguf -max_total_time="$secs" -max_len=65536 -rss_limit_mb=2048 -timeout=10 \
        -print_final_stats=1 corpus); then
    echo "1 passed, 0 failed, 0 skipped"
else
    echo "fuzz: the target crashed; reproducer in $out (crash-*/leak-*/timeout-*)"
    echo "0 passed, 1 failed, 0 skipped"
    exit 1
fi
