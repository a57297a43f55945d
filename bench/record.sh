#!/bin/sh
# bench/record.sh: the figures of record in bench/RESULTS.md, in one run on a quiet machine.
# Prints the machine (CPU model, flags, load) and, before every figure, the exact command.
# Usage: sh bench/record.sh [OUTDIR]   (default build/record: the synthetic models are made there)
# Needs ./tern (make) and about 8 GB of disk for the 27B-shaped model; takes about 15 minutes on
# 2 cores. Speed figures are ratios to ceilings measured by the same commands (bandwidth probe,
# int8 peak), so compare ratios across machines, not absolute t/s.
set -u
D=${1:-build/record}
T=./tern
S=${TERN_SHARED:-../shared}
mkdir -p "$D"
run() { echo; echo "\$ $*"; "$@"; }

echo "# tern figures of record, $(date -u '+%Y-%m-%d %H:%M UTC'), $(git rev-parse --short HEAD 2>/dev/null)"
echo "cpu: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) CPUs"
echo "flags: $(grep -o -w 'avx2\|avx512f\|avx512bw\|avx512vl\|avx512_vnni\|avx_vnni\|amx_int8' /proc/cpuinfo | sort -u | tr '\n' ' ')"
echo "load: $(cut -d' ' -f1-3 /proc/loadavg)"

[ -f "$D/b17.gguf" ] || $T synth --arch bonsai-1.7b --seed 1 -o "$D/b17.gguf" >/dev/null
[ -f "$D/b17-ptq.gguf" ] || $T synth --arch bonsai-1.7b --type ptq1_0 --seed 1 -o "$D/b17-ptq.gguf" >/dev/null
[ -f "$D/b27.gguf" ] || $T synth --arch bonsai2-27b --seed 1 -o "$D/b27.gguf" >/dev/null

# kernels: bandwidth, int8 peak, PQ2_0 matvec and the 17408x5120 matmul at 4/16/64 columns
run $T bench-kernel
# dense model: prefill and decode, 1 and 2 threads, default path and AVX2
run $T bench -m "$D/b17.gguf" -p 512 -n 128 -t 1,2 -r 3
run env TERN_ISA=avxvnni $T bench -m "$D/b17.gguf" -p 512 -n 128 -t 2 -r 3
run env TERN_ISA=avx2 $T bench -m "$D/b17.gguf" -p 512 -n 128 -t 2 -r 3
# PTQ1_0 against PQ2_0 tg: ten alternating pairs, so both see the same bus (a VM's bus can move
# by 1.5x within seconds); the figure is the median of the pairs' ratios
echo; echo "\$ for i in 1..10: $T bench -m b17.gguf, then b17-ptq.gguf, -p 0 -n 128 -t 2 -r 2 --json"
for i in 1 2 3 4 5 6 7 8 9 10; do
    for m in b17 b17-ptq; do $T bench -m "$D/$m.gguf" -p 0 -n 128 -t 2 -r 2 --json --no-progress | grep '"tg'; done
done
# batched forward cost in decode steps (speculative verification, batched decode)
run $T bench-spec -m "$D/b17.gguf" --cost -t 2 --reps 7 --draft-max 8 -c 256
run $T bench-spec -m "$D/b27.gguf" --cost -t 2 --reps 3 --draft-max 4 -c 256
# a busy machine: a pinned busy-loop competitor, -t 2 against -t 1 under the same competitor, their
# repeats interleaved so that both rows see the same seconds of a shared host
run $T bench -m "$S/data/stories260k/stories260K.gguf" -p 0 -n 128 -t 1,2 -r 5 --interleave --busy-cpu 0
run $T bench -m "$D/b17.gguf" -p 0 -n 64 -t 1,2 -r 3 --interleave --busy-cpu 0
# oversubscription and a smaller affinity mask
run $T bench -m "$S/data/stories260k/stories260K.gguf" -p 0 -n 128 -t 1,2,3,8 -r 5
run taskset -c 0 $T bench -m "$S/data/stories260k/stories260K.gguf" -p 0 -n 128 -t 1,2 -r 5
# the sampler, per token
run $T bench-kernel --sampler
