#!/usr/bin/env python3
"""Checks Inputs/slice.loom's outputs and gradients against NumPy float64.

usage: slice_check.py DIR

DIR holds x.npy, t.npy (the inputs), w.safetensors (the params) and the
executable's first, cols, mid, h, loss, grad.w and grad.cls .npy files. Prints a line
per value and PASS or FAIL; f32 values within 1e-5 (|ref| + rms(ref)) of
the float64 ones, as compare_npy.py's f32 rule (a bound from the largest
terms' product had let a loss 0.2% off pass).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import read_safetensors  # noqa: E402


def main():
    d = sys.argv[1]
    load = lambda name: np.load(os.path.join(d, name + ".npy")).astype(np.float64)
    x, t = load("x"), load("t")
    params = read_safetensors(os.path.join(d, "w.safetensors"))
    w = params["w"][0].astype(np.float64)
    cls = params["cls"][0].astype(np.float64)
    h = np.concatenate([np.broadcast_to(cls, (4, 1, 8)), x], axis=1)
    y = h @ w
    s = y[:, 0:3, :][:, :, 1:5]
    # mse's gradient, zero outside the two slices; the token's mean's.
    dy = np.zeros_like(y)
    dy[:, 0:3, 1:5] = 2 * (s - t) / s.size
    dh = dy @ w.T
    dh[:, 0:1, :] += 1 / (4 * 8)
    want = {
        "first": x[:, 0:1, :],
        "cols": x[:, :, 3:7],
        "mid": (x @ w)[:, -4:-1, :],
        "h": h,
        "loss": np.array(np.mean((s - t) ** 2) + np.mean(h[:, 0:1, :])),
        "grad.w": np.einsum("btk,btn->kn", h, dy),
        "grad.cls": dh[:, 0:1, :].sum(axis=0, keepdims=True),
    }
    failed = False
    for name, ref in want.items():
        got = load(name)
        rms = np.sqrt(np.mean(ref ** 2))
        ok = got.shape == ref.shape and bool(np.all(np.abs(got - ref) <= 1e-5 * (np.abs(ref) + rms)))
        print(f"{name}: {list(got.shape)} {'PASS' if ok else 'FAIL'}")
        failed |= not ok
    print("FAIL" if failed else "PASS")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
