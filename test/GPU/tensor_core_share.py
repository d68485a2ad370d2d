#!/usr/bin/env python3
"""Counts the 16-bit matmuls of a model and the GPU kernels running them on
tensor cores, from two loomc stages of the same script:

  tensor_core_share.py KERNELS.mlir GPU.mlir

KERNELS.mlir (--emit=kernels): every `loom.matmul` whose operands are bf16
or f16, with its FLOPs (2 * batch * M * N * K from its types). GPU.mlir
(--emit=gpu): every gpu.func, whether it runs `nvvm.mma.sync`, and the
shape of the matmul it runs (the f32 accumulator it stores, the first
argument). Prints the matmul count, how many GPU kernels use mma.sync, and
the share of the matmul FLOPs those kernels carry.
"""
import re
import sys
from math import prod

MATMUL = re.compile(r"loom\.matmul .*: \(tensor<([0-9x]+)x(bf16|f16)>, "
                    r"tensor<([0-9x]+)x(?:bf16|f16)>\) -> tensor<([0-9x]+)x(?:bf16|f16|f32)>")
FUNC = re.compile(r"^\s*gpu\.func @(\S+)\((.*?)\)")


def dims(text):
    return [int(d) for d in text.split("x")]


def main():
    kernels, gpu = sys.argv[1], sys.argv[2]
    flops = []
    for line in open(kernels):
        m = MATMUL.search(line)
        if m:
            a, result = dims(m.group(1)), dims(m.group(4))
            flops.append(2 * prod(result) * a[-1])
    funcs, current = [], None
    for line in open(gpu):
        m = FUNC.match(line)
        if m:
            current = {"name": m.group(1), "mma": 0, "acc": None}
            acc = re.search(r"memref<([0-9x]+)xf32>", m.group(2))
            current["acc"] = acc.group(1) if acc else None
            funcs.append(current)
        elif current is not None and "nvvm.mma.sync" in line:
            current["mma"] += 1
    mma = [f for f in funcs if f["mma"]]
    # Each mma kernel runs one matmul: its FLOPs are those of a matmul whose
    # result has the accumulator's shape (matched by element count).
    covered = 0
    remaining = list(flops)
    for f in mma:
        size = prod(dims(f["acc"])) if f["acc"] else 0
        for i, fl in enumerate(remaining):
            # 2 * elements * K: the result has `size` elements.
            if size and fl % (2 * size) == 0:
                covered += fl
                del remaining[i]
                break
    total = sum(flops)
    share = 100.0 * covered / total if total else 0.0
    print(f"16-bit matmuls: {len(flops)}, GPU kernels on mma.sync: {len(mma)}, "
          f"matmul FLOPs on tensor cores: {covered}/{total} ({share:.1f}%)")


if __name__ == "__main__":
    main()
