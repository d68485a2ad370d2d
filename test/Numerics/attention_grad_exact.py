#!/usr/bin/env python3
"""Measures gradients of Inputs/attention-grad.loom against exact ones.

usage: attention_grad_exact.py WEIGHTS.safetensors T.npy DIR... [--most R]

Computes in float64 the exact gradients of
mse(softmax(causal_mask(q @ transpose(k) * 0.25)) @ v, t) from the params
the run saved (--save-weights) and its input t, then prints, for each DIR
(grad.q.npy, grad.k.npy, grad.v.npy from a run), each gradient's rms error
relative to the exact gradient's rms. With --most R, fails unless the first
DIR's relative error is at most R times the second's (plus 1e-6): the fused
backward's rounding points (the softmax gradient's row sums from the
rounded result) must cost no accuracy against the five ops'.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import read_safetensors, round_bf16  # noqa: E402


def exact_gradients(q, k, v, t):
    s = q @ np.swapaxes(k, -1, -2) * 0.25
    n = s.shape[-1]
    s = np.where(np.triu(np.ones((n, n), dtype=bool), 1), -np.inf, s)
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    p /= p.sum(axis=-1, keepdims=True)
    y = p @ v
    dy = 2.0 * (y - t) / y.size
    dv = np.swapaxes(p, -1, -2) @ dy
    dp = dy @ np.swapaxes(v, -1, -2)
    ds = p * (dp - np.sum(dp * p, axis=-1, keepdims=True)) * 0.25
    return {"grad.q": ds @ k, "grad.k": np.swapaxes(ds, -1, -2) @ q, "grad.v": dv}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("weights")
    parser.add_argument("t")
    parser.add_argument("dirs", nargs="+")
    parser.add_argument("--most", type=float)
    args = parser.parse_args()
    saved = read_safetensors(args.weights)
    params = {name: arr.astype(np.float64) for name, (arr, _) in saved.items()}
    t = np.load(args.t).astype(np.float32)
    if saved["q"][1] == "BF16":  # the executable rounds a bf16 input as it reads it
        t = round_bf16(t)
    t = t.astype(np.float64)
    exact = exact_gradients(params["q"], params["k"], params["v"], t)
    errors = []
    for d in args.dirs:
        errs = {}
        for name, want in exact.items():
            got = np.load(os.path.join(d, name + ".npy")).astype(np.float64)
            errs[name] = float(np.sqrt(np.mean((got - want) ** 2)) / np.sqrt(np.mean(want ** 2)))
        errors.append(errs)
        print(os.path.basename(d.rstrip("/")) + ": " +
              ", ".join(f"{name} {e:.3e}" for name, e in errs.items()))
    if args.most is None:
        return
    ok = all(errors[0][name] <= args.most * errors[1][name] + 1e-6 for name in exact)
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
