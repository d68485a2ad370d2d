#!/usr/bin/env python3
"""Counts the 16-bit matmuls of a model and the GPU kernels running them on
tensor cores, from two loomc stages of the same script:

  tensor_core_share.py KERNELS.mlir GPU.mlir

KERNELS.mlir (--emit=kernels): every `loom.matmul` whose operands are bf16
or f16, with its FLOPs (2 * batch * M * N * K from its types), and every
16-bit `loom.attention` with the FLOPs of its two products (2 * batch *
queries * keys * (features + value features), causal or not) and every
16-bit `loom.attention_grad` with those of the scores and its four
products, grouped by the kernel function holding it. GPU.mlir (--emit=gpu): every gpu.func
(named after its kernel function, `NAME_kernel`) and whether it runs
`nvvm.mma.sync` or `nvvm.wgmma.mma_async`. A kernel function's matmuls
count as on tensor cores when it has at least as many tensor-core
launches as 16-bit matmuls (otherwise only as many of its matmuls as it
has such launches, the smallest first). Prints the matmul count, how many
GPU kernels use mma.sync and wgmma, and the share of the matmul FLOPs
those kernels carry.
"""
import re
import sys
from collections import defaultdict
from math import prod

MATMUL = re.compile(r"loom\.matmul .*: \(tensor<([0-9x]+)x(bf16|f16)>, "
                    r"tensor<([0-9x]+)x(?:bf16|f16)>\) -> tensor<([0-9x]+)x(?:bf16|f16|f32)>")
ATTENTION = re.compile(r"loom\.attention(_grad)? .*: \(tensor<([0-9x]+)x(?:bf16|f16)>, "
                       r"tensor<([0-9x]+)x(?:bf16|f16)>, tensor<([0-9x]+)x(?:bf16|f16)>")
KERNEL = re.compile(r"^\s*func\.func (?:private )?@(\S+)\(")
GPU_FUNC = re.compile(r"^\s*gpu\.func @(\S+)_kernel\(")


def dims(text):
    return [int(d) for d in text.split("x")]


def main():
    kernels, gpu = sys.argv[1], sys.argv[2]
    flops = defaultdict(list)  # kernel function -> its matmuls' FLOPs
    attentions = gradients = 0
    current = None
    for line in open(kernels):
        k = KERNEL.match(line)
        if k:
            current = k.group(1)
        m = MATMUL.search(line)
        if m:
            a, result = dims(m.group(1)), dims(m.group(4))
            flops[current].append(2 * prod(result) * a[-1])
        at = ATTENTION.search(line)
        if at:
            q, k, v = dims(at.group(2)), dims(at.group(3)), dims(at.group(4))
            # The backward's products: dp, dq, dk, dv (and the scores).
            products = (2 * q[-1] + 3 * v[-1]) if at.group(1) else (q[-1] + v[-1])
            flops[current].append(2 * prod(q[:-1]) * k[-2] * products)
            if at.group(1):
                gradients += 1
            else:
                attentions += 1
    mma = defaultdict(int)  # kernel function -> its tensor-core launches
    kinds = {"mma.sync": 0, "wgmma": 0}
    current, counted = None, False
    for line in open(gpu):
        g = GPU_FUNC.match(line)
        if g:
            current, counted = g.group(1), False
            continue
        kind = ("mma.sync" if "nvvm.mma.sync" in line else
                "wgmma" if "nvvm.wgmma.mma_async" in line else None)
        if current is not None and not counted and kind:
            mma[current] += 1
            kinds[kind] += 1
            counted = True
    total = sum(sum(f) for f in flops.values())
    covered = sum(sum(sorted(f)[:mma[name]]) for name, f in flops.items())
    share = 100.0 * covered / total if total else 0.0
    print(f"16-bit matmuls: {sum(len(f) for f in flops.values()) - attentions - gradients}, "
          f"attention: {attentions}, attention gradients: {gradients}, "
          f"GPU kernels on mma.sync: {kinds['mma.sync']}, "
          f"on wgmma: {kinds['wgmma']}, "
          f"matmul and attention FLOPs on tensor cores: {covered}/{total} ({share:.1f}%)")


if __name__ == "__main__":
    main()
