#!/usr/bin/env python3
"""Counts an optimizer step's update buckets and their GPU launches:

  update_launches.py KERNELS.mlir REPORT.txt

KERNELS.mlir (--emit=kernels): the kernel functions carrying
`loom.update_kernel` (an update bucket's whole update, from
loom-optimizer-step and loom-outline-kernels), and the calls of them in
each model program (one rank, per rank). REPORT.txt (--kernel-report): per
program, one row per launch, the kernel function's name first. Prints the
distinct update kernels, then per program the update calls (one per
bucket) and the most launches one call takes (a kernel's launches in the
program over its calls there).
"""
import re
import sys
from collections import Counter, defaultdict

FUNC = re.compile(r"^\s*func\.func (?:private )?@(\S+)\(.*loom\.update_kernel")
CALL = re.compile(r"call @(\S+)\(")
MODEL = re.compile(r"^\s*func\.func @(\S+)\(")
HEADER = re.compile(r"^(\S+) \((?:1 rank|each of \d+ ranks)\)")


def main():
    updates, current = set(), None
    calls = defaultdict(Counter)  # program -> update kernel -> calls
    for line in open(sys.argv[1]):
        f = FUNC.match(line)
        if f:
            updates.add(f.group(1))
            continue
        m = MODEL.match(line)
        if m:
            current = m.group(1)
            calls[current]
            continue
        c = CALL.search(line)
        if c and current is not None and c.group(1) in updates:
            calls[current][c.group(1)] += 1
    launches, program = defaultdict(Counter), None
    for line in open(sys.argv[2]):
        header = HEADER.match(line)
        if header:
            program = header.group(1)
            continue
        row = line.split()
        if program and row and row[0] in updates:
            launches[program][row[0]] += 1
    print(f"update kernels: {len(updates)}")
    for name, kernels in calls.items():
        per_call = [launches[name][k] / n for k, n in kernels.items()]
        most = max(per_call) if per_call else 0
        print(f"program {name}: {sum(kernels.values())} update calls of "
              f"{len(kernels)} kernels, most launches a call: {most:g}")


if __name__ == "__main__":
    main()
