#!/usr/bin/env python3
"""Counts the matmul operands that a transpose kernel copies first, in a
model's --emit=kernels output:

  transpose_copies.py KERNELS.mlir

A transpose kernel holds one `loom.transpose` of the last two dims and
nothing else. An operand of a `loom.matmul` that is an argument of its
kernel function is copied first when, at a call of that kernel, the
argument is the result of a call of a transpose kernel. Prints the number
of matmul operands, of calls, and of those copied first (0 when every
transposed operand is read in place).
"""
import re
import sys

FUNC = re.compile(r"^\s*func\.func (?:private )?@(\S+)\((.*)$")
TRANSPOSE = re.compile(r"loom\.transpose \S+ perm \[([0-9, ]+)\]")
MATMUL = re.compile(r"loom\.matmul (%[\w#]+), (%[\w#]+)")
CALL = re.compile(r"^\s*(%[\w]+)(?::\d+)? = call @(\S+)\((.*?)\) :")


def swaps_last_two(perm):
    p = [int(x) for x in perm.split(",")]
    n = len(p)
    return n >= 2 and p[:n - 2] == list(range(n - 2)) and p[n - 2:] == [n - 1, n - 2]


def main():
    bodies, order = {}, []
    current = None
    for line in open(sys.argv[1]):
        f = FUNC.match(line)
        if f:
            current = f.group(1)
            bodies[current] = []
            order.append(current)
        elif current is not None:
            bodies[current].append(line)
    transposes = set()
    matmul_args = {}  # kernel -> argument indices a matmul reads
    for name, lines in bodies.items():
        ops = [l for l in lines if re.search(r"= loom\.", l)]
        t = TRANSPOSE.search(ops[0]) if len(ops) == 1 else None
        if t and swaps_last_two(t.group(1)):
            transposes.add(name)
        for l in lines:
            m = MATMUL.search(l)
            if m:
                for operand in m.groups():
                    a = re.fullmatch(r"%arg(\d+)", operand)
                    if a:
                        matmul_args.setdefault(name, []).append(int(a.group(1)))
    operands = sum(len(re.findall(r"loom\.matmul", "".join(b))) for b in bodies.values()) * 2
    calls = copied = 0
    for name in order:
        produced = {}  # value -> kernel whose call made it
        for line in bodies[name]:
            c = CALL.match(line)
            if not c:
                continue
            result, callee, args = c.groups()
            produced[result] = callee
            calls += 1
            values = [a.strip() for a in args.split(",")] if args.strip() else []
            for index in matmul_args.get(callee, []):
                value = values[index].split("#")[0]
                if produced.get(value) in transposes:
                    copied += 1
    print(f"matmul operands: {operands}, calls: {calls}, "
          f"copied by a transpose kernel first: {copied}")


if __name__ == "__main__":
    main()
