#!/usr/bin/env python3
"""arm_insns.py: instruction counts per 64 weights of the ARM kernels, from the disassembly.

Usage: python3 bench/arm_insns.py [build/aarch64]   (after `make cross-aarch64`)

For each ISA object and kernel entry it finds the innermost loop (a backward branch) that holds
the integer dot instructions (sdot / smmla / smlal), counts the instructions of that loop body
by class, and divides by the weights one iteration covers:
  row-pair block, one column:  4 rows x 128 weights = 512 weights = 8 x 64
  row-pair block, 4-col tile:  512 weights x 4 columns (counted per 64 weights per column)
  PTQ1_0 decode loop:          one row x 128 weights (the decode, outside the column loop)
No timing: nothing here runs ARM code.
"""
import re
import subprocess
import sys
from collections import Counter

B = sys.argv[1] if len(sys.argv) > 1 else "build/aarch64"
OBJDUMP = "aarch64-linux-gnu-objdump"
DOT = ("sdot", "smmla", "smlal", "smlal2", "smull", "smull2")
CLASSES = {   # vector instructions by role; loads of any kind; everything else is scalar bookkeeping
    "dot": DOT,
    "mask/shift": ("and", "ushr", "sshr"),
    "trit decode": ("cmhs", "cmhi", "mul", "sub", "shl", "orr", "mvn", "mvni", "movi", "not"),
    "dup/insert": ("dup", "mov", "ins", "zip1", "zip2", "uzp1", "uzp2"),
    "widen/reduce": ("saddlp", "addp", "sadalp", "ssra", "add", "addv", "saddlv"),
    "float": ("fmla", "fmul", "fmadd", "scvtf", "fcvtl", "fcvt", "fadd"),
    "load": ("ldr", "ldp", "ldur", "ld1", "ld1r", "ld2", "ld4"),
}


def disasm(obj):
    out = subprocess.run([OBJDUMP, "-d", "--no-show-raw-insn", obj], capture_output=True, text=True,
                         check=True).stdout
    funcs, cur = {}, None
    for line in out.splitlines():
        m = re.match(r"^([0-9a-f]+) <(\S+)>:", line)
        if m:
            cur = m.group(2)
            funcs[cur] = []
            continue
        m = re.match(r"^\s+([0-9a-f]+):\s+(\S+)\s*(.*)$", line)
        if m and cur:
            funcs[cur].append((int(m.group(1), 16), m.group(2), m.group(3)))
    return funcs


def loops(insns):
    """(start, end) address ranges of loops closed by a backward branch."""
    res = []
    for addr, op, args in insns:
        if op.startswith("b") or op.startswith("cb") or op.startswith("tb"):
            m = re.search(r"\b([0-9a-f]+) <", args)
            if m and int(m.group(1), 16) <= addr:
                res.append((int(m.group(1), 16), addr))
    return res


def body(insns, lo, hi):
    return [(a, o, g) for a, o, g in insns if lo <= a <= hi]


def classify(ops):
    c = Counter()
    for _, o, args in ops:
        vec = re.search(r"\bv\d+\.", args) is not None or re.match(r"[qd]\d+", args) is not None
        for k, names in CLASSES.items():
            if o in names and (vec or k in ("load", "float")):
                c[k] += 1
                break
        else:
            c["other"] += 1
    return c


def report(obj, fn, per64, what, need=DOT):
    funcs = disasm(obj)
    ins = funcs.get(fn)
    if not ins:
        print(f"| {fn} | (not found) |")
        return
    best = None
    for lo, hi in loops(ins):
        b = body(ins, lo, hi)
        n_dot = sum(1 for _, o, _ in b if o in need)
        if n_dot == 0:
            continue
        if best is None or (hi - lo) < (best[1] - best[0]):
            best = (lo, hi, b)
    if not best:
        print(f"| {fn} | no dot loop found |")
        return
    c = classify(best[2])
    total = sum(c.values())
    cells = " | ".join(f"{c.get(k, 0) / per64:.2f}" for k in list(CLASSES) + ["other"])
    print(f"| {fn} ({what}; loop 0x{best[0]:x}-0x{best[1]:x}) | {total / per64:.2f} | {cells} |")


print("| kernel (loop counted) | total | " + " | ".join(list(CLASSES) + ["other"]) + " |")
print("|---|---|" + "---|" * (len(CLASSES) + 1))
report(f"{B}/src/kernels/arm/neon.o", "neon_mm_pq2_fast", 8, "PQ2_0 matvec, smlal")
report(f"{B}/src/kernels/arm/neon_dot.o", "dotprod_mm_pq2_fast", 8, "PQ2_0 matvec, sdot")
report(f"{B}/src/kernels/arm/neon_i8mm.o", "i8mm_mm_pq2_fast", 8 * 4, "PQ2_0 4-col tile, smmla; per 64 w x 1 col",
       need=("smmla",))
# PTQ1_0 direct: the block loop (the base-3 decode once per row and block, with the column loop
# nested in it once: the matvec cost) and the column loop alone (each further column).
report(f"{B}/src/kernels/arm/neon.o", "neon_mm_ptq_fast", 2, "PTQ1_0 direct matvec: decode + 1 column", need=("cmhs", "cmhi"))
report(f"{B}/src/kernels/arm/neon.o", "neon_mm_ptq_fast", 2, "PTQ1_0 each further column, smlal")
report(f"{B}/src/kernels/arm/neon_dot.o", "dotprod_mm_ptq_fast", 2, "PTQ1_0 direct matvec: decode + 1 column", need=("cmhs", "cmhi"))
report(f"{B}/src/kernels/arm/neon_dot.o", "dotprod_mm_ptq_fast", 2, "PTQ1_0 each further column, sdot")

# Float weights (neon.c arm_mm_f32/f16/bf16, the entries of all three tables): every innermost
# loop holding fmla. One fmla = 4 (weight, column) products; the tile is told by the fmla count
# (16: 2 rows x 2 columns, 8: 2 x 1 or 1 x 2, 4: 1 x 1), each iteration covering 16 weights of
# each of its rows. "stack" counts sp-relative loads/stores (register spills).
print()
print("| float kernel (loop counted) | fmla | tile | body | insns per (weight, column) product | "
      "conversions (fcvtl/shll) | loads | stack |")
print("|---|---|---|---|---|---|---|---|")
for fn in ("arm_mm_f32", "arm_mm_f16", "arm_mm_bf16"):
    ins = disasm(f"{B}/src/kernels/arm/neon.o").get(fn)
    if not ins:
        print(f"| {fn} | (not found) |")
        continue
    lps = loops(ins)
    for lo, hi in sorted(lps):
        if any(lo <= l2 and h2 <= hi and (l2, h2) != (lo, hi) for l2, h2 in lps):
            continue   # not innermost
        b = body(ins, lo, hi)
        n_fmla = sum(1 for _, o, _ in b if o == "fmla")
        if n_fmla == 0:
            continue
        conv = sum(1 for _, o, _ in b if o in ("fcvtl", "fcvtl2", "shll", "shll2", "ushll", "ushll2"))
        tile = {16: "2 x 2", 8: "2 x 1 / 1 x 2", 4: "1 x 1"}.get(n_fmla, "?")
        if n_fmla == 8 and conv:   # F16/BF16: 4 conversions per row of the tile
            tile = "2 x 1" if conv == 8 else "1 x 2"
        loads = sum(1 for _, o, _ in b if o in CLASSES["load"])
        stack = sum(1 for _, o, g in b if "sp" in re.split(r"[\[\],\s]+", g) and (o.startswith("ld") or o.startswith("st")))
        print(f"| {fn} (loop 0x{lo:x}-0x{hi:x}) | {n_fmla} | {tile} | {len(b)} | {len(b) / (4 * n_fmla):.2f} | "
              f"{conv} | {loads} | {stack} |")
