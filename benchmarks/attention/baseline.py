#!/usr/bin/env python3
"""PyTorch's causal attention on the inputs of a Loom run (benchmarks/attention).

usage: baseline.py DIR DTYPE REPEATS

Reads DIR/q.npy, k.npy, v.npy and Loom's output DIR/o.npy, computes
softmax(causal_mask(q @ k^T * 0.125)) @ v with PyTorch on one thread (1.13
has no scaled_dot_product_attention: the eager composition a user writes,
in DTYPE), and prints JSON: the best warm milliseconds of REPEATS runs, the
largest difference from Loom's output relative to the output's largest
magnitude, and the bytes of the [T, T] scores PyTorch holds per tensor.
"""
import json
import os
import sys
import time

# Before numpy or torch loads OpenBLAS (Debian's f32 matmuls in both): its
# pthread pool is not bounded by torch.set_num_threads(1).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402
import torch  # noqa: E402


def main():
    d, dtype, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
    torch.set_num_threads(1)
    tdtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
    q, k, v = (torch.from_numpy(np.load(f"{d}/{n}.npy")).to(tdtype) for n in "qkv")
    t = q.shape[-2]
    mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)

    def attention():
        s = (q @ k.transpose(-1, -2)) * 0.125
        s = s.masked_fill(mask, float("-inf"))
        return torch.softmax(s.float(), dim=-1).to(tdtype) @ v

    with torch.no_grad():
        out = attention()
        best = float("inf")
        for _ in range(repeats):
            start = time.perf_counter()
            attention()
            best = min(best, time.perf_counter() - start)
    loom = np.load(f"{d}/o.npy").astype(np.float64)
    ref = out.float().numpy().astype(np.float64)
    diff = float(np.abs(loom - ref).max() / np.abs(ref).max())
    scores = q.shape[0] * q.shape[1] * t * t * 4
    print(json.dumps({"torch_ms": 1000 * best, "rel_diff": diff, "scores_bytes": scores}))


if __name__ == "__main__":
    main()
