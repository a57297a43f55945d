#!/bin/sh
# test_aarch64.sh RUNNER [suite ...]: run the aarch64 test runner under qemu-user once per forced
# ARM kernel path, then the dispatcher checks on emulated CPUs without dotprod / without i8mm.
# Called by `make test-aarch64` (owner: arm). Environment: QEMU (default
# "qemu-aarch64"; see the Makefile on -L), TERN_SHARED (fixtures), TERN_A64_PASS_LIMIT (seconds
# the first pass may run, default 900, half that for the others; a pass past its limit is run
# once more, then counted as failed).
#
# Passes (each prints the runner's closing line; the last line here is their sum):
#   1. -cpu max,        TERN_ISA=i8mm     every suite but the heavy model-level ones (or the ones
#                                         named); tests that run the tern binary get the aarch64
#                                         one under qemu through TERN_BIN; then the cheap
#                                         model-level tests by name (see "heavy" below)
#   2. -cpu max,        TERN_ISA=dotprod  the kernel oracle (kernels, arm), engine, qwen35 first-8;
#                                         without the tests whose subject is not the forced path,
#                                         which pass 1 ran on this same emulated CPU: the kernels
#                                         suite's table comparisons (test_isa_*, test_row16_splits
#                                         compare every table the CPU can run with ref whatever is
#                                         forced)
#   3. -cpu max,        TERN_ISA=neon     the same
#   4. -cpu cortex-a72  (ARMv8.0: no dotprod, no i8mm) unforced: the dispatcher must pick neon;
#                       the kernel suites run every table this CPU can run, so an sdot/smmla
#                       leaking into the plain-NEON path dies here with SIGILL
#   5. -cpu cortex-a76  (dotprod, no i8mm) unforced: the dispatcher must pick dotprod
#   6. -cpu max         unforced: the dispatcher must pick i8mm
# The arm suite reads TERN_EXPECT_ISA and checks kern_isa() against it.
set -u
runner=${1:?usage: test_aarch64.sh RUNNER [suite ...]}
shift
QEMU=${QEMU:-qemu-aarch64}
export TERN_SHARED="${TERN_SHARED:-../shared}"

avail=$($QEMU -cpu max "$runner" --list) || { echo "test-aarch64: cannot run $runner under qemu"; exit 1; }
pick() { # pick ERE: the runner's suites whose whole name matches, in runner order
    echo "$avail" | grep -xE "$1" | tr '\n' ' '
}
# Tests that run the tern binary find it through TERN_BIN: point it at a wrapper that runs the
# aarch64 binary under the same qemu CPU (one wrapper per CPU, next to the binary).
bindir=$(cd "$(dirname "$runner")/.." && pwd)
wrap() { # wrap <cpu>: prints the wrapper path
    w="$bindir/tern-qemu-$1"
    printf '#!/bin/sh\nexec %s -cpu %s "%s" "$@"\n' "$QEMU" "$1" "$bindir/tern" >"$w"
    chmod +x "$w"
    echo "$w"
}

# The model-level suites take minutes per suite under emulation: their cheap tests run by name
# (TERN_TEST_FILTER) instead - stories260K greedy (F32, once), the tiny PQ2_0 qwen3 greedy in
# ggml numerics (once: 80 s emulated), the tiny qwen35 PQ2_0 first-8 logits in ggml numerics
# (per forced path): all compared with the official runtime's golden outputs.
# tok (no ISA-specific code, 90 s emulated) stays out to keep the CI step bounded, and so do the
# suites that drive whole programs or many model runs without ISA-specific code of their own:
# spec (greedy equality over three models and many prompts), cli (one emulated tern process per
# option case), chat and server_http (emulated model servers): together they would take the
# first pass past the CI step's 900 s. They run natively and under ASan in the other CI steps.
# So do cli_input (an emulated tern process per bad-input case), server_mixed (mixed
# prefill/decode passes on three models: scheduler code, no ISA code) and model_prefill (45-token
# batches at 1-3 threads in every numerics mode; the ARM kernels' exactness at those widths is the
# kernel suites' job): they would add about 4 minutes to the first pass.
heavy='golden|model|qwen35|tok|spec|cli|chat|server_http|cli_input|server_mixed|model_prefill'
if [ $# -gt 0 ]; then
    all_suites="$*"
    isa_suites="$*"
    cheap=""
else
    all_suites=$(echo "$avail" | grep -vxE "$heavy" | tr '\n' ' ')
    isa_suites=$(pick 'kernels|arm|engine')
    cheap=yes
fi
disp_suites=$(pick arm)
if [ $# -gt 0 ]; then a72_suites="$*"; else a72_suites=$(pick 'arm|kernels'); fi

p=0; f=0; k=0; status=0
# Time limit of one pass under qemu, in seconds: the first pass (every cheap suite) takes about
# 6 minutes on a 2-core Zen 3 beside the ASan step (the kernels suite 2 of them), each later pass
# seconds to 2 minutes.
first_limit=${TERN_A64_PASS_LIMIT:-900}
pass_limit=$first_limit
log=$(mktemp "${TMPDIR:-/tmp}/tern-aarch64-XXXXXX")
trap 'rm -f "$log"' EXIT
trap 'exit 143' INT TERM   # stop on a signal (a trap that only removed the log let the passes run on)
# Left out of every pass: a memory-bandwidth measurement with a physical lower bound
# (meaningless under emulation), and the engine's two models run at once on two threads: a check
# for state shared between models, which has no ARM code of its own (its kernels are the ones the
# other suites check) and cannot find more under qemu-user than natively (emulated ARM loads and
# stores keep the x86 host's ordering); it took 2-2.5 minutes of the first pass under emulation and
# runs natively and under ASan in the other CI steps. $skip_more: further tests left out of the
# next passes.
skip_more=""
pass() { # pass <label> <cpu> <isa or -> <expect or -> <test filter or -> suites...
    label=$1; cpu=$2; isa=$3; expect=$4; filter=$5; shift 5
    [ -n "$*" ] || return 0
    echo "=== test-aarch64: $label: qemu -cpu $cpu, TERN_ISA=$isa, filter $filter, suites: $*"
    t0=$(date +%s)
    try=1
    while :; do
    (
        unset TERN_ISA TERN_EXPECT_ISA TERN_TEST_FILTER TERN_TEST_SKIP
        [ "$isa" = - ] || export TERN_ISA="$isa"
        [ "$expect" = - ] || export TERN_EXPECT_ISA="$expect"
        [ "$filter" = - ] || export TERN_TEST_FILTER="$filter"
        export TERN_TEST_SKIP="test_membw,test_two_models_two_threads$skip_more"
        TERN_BIN=$(wrap "$cpu")
        export TERN_BIN
        # shellcheck disable=SC2086
        exec timeout -k 10 "$pass_limit" $QEMU -cpu "$cpu" "$runner" "$@"
    ) >"$log" 2>&1
    rc=$?
    cat "$log"
    # 124/137: the pass ran past its limit. Every pass takes well under half its limit here, so
    # that is an emulator hang (qemu-user 7.2 has thread-start hangs, see the Makefile), not a
    # slow test: say so and run the pass once more; a second hang fails it.
    if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
        echo "test-aarch64: $label: no result after ${pass_limit} s under qemu (attempt $try)"
        if [ "$try" = 1 ]; then try=2; continue; fi
    fi
    break
    done
    echo "test-aarch64: $label: $(( $(date +%s) - t0 )) s (exit $rc)"
    line=$(grep -E '^[0-9]+ passed, [0-9]+ failed' "$log" | tail -n 1)
    if [ -z "$line" ]; then
        echo "test-aarch64: $label: no closing line (exit $rc)"
        f=$((f + 1)); status=1; return
    fi
    p=$((p + $(echo "$line" | sed -E 's/^([0-9]+) passed.*/\1/')))
    f=$((f + $(echo "$line" | sed -E 's/.* ([0-9]+) failed.*/\1/')))
    sk=$(echo "$line" | sed -nE 's/.* ([0-9]+) skipped.*/\1/p')
    k=$((k + ${sk:-0}))
    [ "$rc" = 0 ] || status=1
}

# shellcheck disable=SC2086
{
pass "forced i8mm" max i8mm - - $all_suites
pass_limit=$(( first_limit / 2 ))
if [ -n "$cheap" ]; then
    pass "forced i8mm, stories260K greedy" max i8mm - 'test_stories_greedy_f32' $(pick model)
    pass "forced i8mm, qwen3-tiny PQ2_0 ggml greedy" max i8mm - 'test_pq2_ggml' $(pick golden)
fi
for isa in i8mm dotprod neon; do
    skip_more=,test_isa_*,test_row16_splits
    [ "$isa" = i8mm ] || pass "forced $isa" max $isa - - $isa_suites
    skip_more=""
    [ -n "$cheap" ] && pass "forced $isa, qwen35-tiny PQ2_0 ggml first 8" max $isa - 'test_golden_first8_ggml' $(pick qwen35)
done
pass "dispatch cortex-a72" cortex-a72 - neon - $a72_suites
pass "dispatch cortex-a76" cortex-a76 - dotprod - $disp_suites
pass "dispatch max" max - i8mm - $disp_suites
}

echo "test-aarch64: totals over all passes"
echo "$p passed, $f failed, $k skipped"
exit $status
