#!/usr/bin/env python3
"""PyTorch's causal attention gradients on the params of a Loom run
(benchmarks/attention/grad.sh).

usage: baseline_grad.py DIR DTYPE REPEATS

Reads the params Loom saved (DIR/w.safetensors: q, k, v), the input
DIR/target.npy and Loom's gradients DIR/grad.{q,k,v}.npy; computes
mse(softmax(causal_mask(q @ k^T * 0.125)) @ v, target) and its gradients
with PyTorch's eager autograd on one thread (in DTYPE, the softmax in f32
as Loom's), and prints JSON: the best warm milliseconds of REPEATS forward
+ backward runs, and the largest difference of the three gradients from
Loom's, relative to each gradient's largest magnitude.
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

# The .safetensors reader of the numerics tests' reference.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                                "test", "Numerics"))
from reference import read_safetensors  # noqa: E402


def main():
    d, dtype, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
    torch.set_num_threads(1)
    tdtype = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
    params = read_safetensors(f"{d}/w.safetensors")
    q, k, v = (torch.from_numpy(params[n][0].copy()).to(tdtype).requires_grad_() for n in "qkv")
    target = torch.from_numpy(np.load(f"{d}/target.npy")).to(tdtype)
    t = q.shape[-2]
    mask = torch.triu(torch.ones(t, t, dtype=torch.bool), diagonal=1)

    def step():
        for p in (q, k, v):
            p.grad = None
        s = ((q @ k.transpose(-1, -2)) * 0.125).masked_fill(mask, float("-inf"))
        y = torch.softmax(s.float(), dim=-1).to(tdtype) @ v
        loss = ((y.float() - target.float()) ** 2).mean()
        loss.backward()

    step()
    best = float("inf")
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        best = min(best, time.perf_counter() - start)
    diff = 0.0
    for name, p in zip("qkv", (q, k, v)):
        loom = np.load(f"{d}/grad.{name}.npy").astype(np.float64)
        ref = p.grad.float().numpy().astype(np.float64)
        diff = max(diff, float(np.abs(loom - ref).max() / np.abs(ref).max()))
    print(json.dumps({"torch_ms": 1000 * best, "rel_diff": diff}))


if __name__ == "__main__":
    main()
