#!/bin/sh
# test_aarch64.sh RUNNER [suite ...]: run the aarch64 test runner under qemu-user once per forced
# ARM kernel path, then the dispatcher checks on emulated CPUs without dotprod / without i8mm.
# Called by `make test-aarch64` (owner: arm). Environment: QEMU (default
# "qemu-aarch64"; see the Makefile on -L), TERN_SHARED (fixtures).
#
# Passes (each prints the runner's closing line; the last line here is their sum):
#   1. -cpu max,        TERN_ISA=i8mm     every suite (or the ones named); tests that run the tern
#                                         binary get the aarch64 one under qemu through TERN_BIN
#   2. -cpu max,        TERN_ISA=dotprod  the ISA-sensitive suites (kernel oracle, model-level)
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

if [ $# -gt 0 ]; then
    all_suites="$*"
    isa_suites="$*"
else
    all_suites=""   # empty = every suite
    # the kernel oracle (kernels, arm) and the model-level suites whose outputs go through
    # kern_matmul, i.e. through the forced table
    isa_suites=$(pick 'kernels|arm|(model|golden|engine|qwen35|qwen3|llama|stories)(_.*)?')
fi
disp_suites=$(pick arm)
if [ $# -gt 0 ]; then a72_suites="$*"; else a72_suites=$(pick 'arm|kernels'); fi

p=0; f=0; k=0; status=0
log=$(mktemp "${TMPDIR:-/tmp}/tern-aarch64-XXXXXX")
trap 'rm -f "$log"' EXIT INT TERM
pass() { # pass <label> <cpu> <isa or -> <expect or -> suites...
    label=$1; cpu=$2; isa=$3; expect=$4; shift 4
    echo "=== test-aarch64: $label: qemu -cpu $cpu, TERN_ISA=$isa, suites: ${*:-all}"
    (
        unset TERN_ISA TERN_EXPECT_ISA
        [ "$isa" = - ] || export TERN_ISA="$isa"
        [ "$expect" = - ] || export TERN_EXPECT_ISA="$expect"
        TERN_BIN=$(wrap "$cpu")
        export TERN_BIN
        # shellcheck disable=SC2086
        exec $QEMU -cpu "$cpu" "$runner" "$@"
    ) >"$log" 2>&1
    rc=$?
    cat "$log"
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
pass "forced i8mm" max i8mm - $all_suites
if [ -n "$isa_suites" ]; then
    # shellcheck disable=SC2086
    pass "forced dotprod" max dotprod - $isa_suites
    # shellcheck disable=SC2086
    pass "forced neon" max neon - $isa_suites
fi
if [ -n "$a72_suites" ]; then
    # shellcheck disable=SC2086
    pass "dispatch cortex-a72" cortex-a72 - neon $a72_suites
fi
if [ -n "$disp_suites" ]; then
    # shellcheck disable=SC2086
    pass "dispatch cortex-a76" cortex-a76 - dotprod $disp_suites
    # shellcheck disable=SC2086
    pass "dispatch max" max - i8mm $disp_suites
fi

echo "test-aarch64: totals over all passes"
echo "$p passed, $f failed, $k skipped"
exit $status
