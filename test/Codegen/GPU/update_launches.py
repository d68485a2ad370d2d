#!/usr/bin/env python3
"""Counts an optimizer step's update buckets and their GPU launches:

  update_launches.py KERNELS.mlir REPORT.txt

KERNELS.mlir (--emit=kernels): the kernel functions carrying
`loom.update_bucket` (a bucket's whole update, from loom-optimizer-step and
loom-outline-kernels). REPORT.txt (--kernel-report): one row per launch,
the kernel function's name first. Prints, per program of the report (one
rank, then per rank), the update kernels' count, how many of their calls
the program makes (one per bucket), and their launches in all, then the
most launches one such call takes.
"""
import re
import sys

FUNC = re.compile(r"^\s*func\.func (?:private )?@(\S+)\(.*loom\.update_bucket")
CALL = re.compile(r"call @(\S+)\(")
MODEL = re.compile(r"^\s*func\.func @(\S+)\(")


def main():
    updates, calls, current = set(), {}, None
    for line in open(sys.argv[1]):
        f = FUNC.match(line)
        if f:
            updates.add(f.group(1))
            continue
        m = MODEL.match(line)
        if m:
            current = m.group(1)
            calls[current] = 0
            continue
        c = CALL.search(line)
        if c and current is not None and c.group(1) in updates:
            calls[current] += 1
    # The report's rows per program: a program's header names it, then its
    # launches, each row starting with its kernel function.
    launches, program = {}, None
    for line in open(sys.argv[2]):
        header = re.match(r"^(\S+) \((?:1 rank|each of \d+ ranks)\)", line)
        if header:
            program = line.strip()
            launches[program] = {}
            continue
        row = line.split()
        if program and row and row[0] in updates:
            launches[program][row[0]] = launches[program].get(row[0], 0) + 1
    print(f"update kernels: {len(updates)}")
    for name, count in calls.items():
        print(f"program {name}: {count} update calls")
    for program, rows in launches.items():
        most = max(rows.values()) if rows else 0
        print(f"report {program}: {len(rows)} update kernels, most launches a kernel: {most}")


if __name__ == "__main__":
    main()
