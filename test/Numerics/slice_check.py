#!/usr/bin/env python3
"""Checks Inputs/slice.loom's outputs and gradient against NumPy float64.

usage: slice_check.py DIR

DIR holds x.npy, t.npy (the inputs), w.safetensors (the params) and the
executable's first, cols, mid, loss and grad.w .npy files. Prints a line
per value and PASS or FAIL; f32 values within 1e-5 of the float64 ones
(relative to the largest term's size).
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
    w = read_safetensors(os.path.join(d, "w.safetensors"))["w"][0].astype(np.float64)
    y = x @ w
    s = y[:, 2:5, :][:, :, 1:5]
    # mse's gradient, zero outside the two slices.
    dy = np.zeros_like(y)
    dy[:, 2:5, 1:5] = 2 * (s - t) / s.size
    want = {
        "first": x[:, 0:1, :],
        "cols": x[:, :, 3:7],
        "mid": y[:, -4:-1, :],
        "loss": np.array(np.mean((s - t) ** 2)),
        "grad.w": np.einsum("btk,btn->kn", x, dy),
    }
    scale = {"first": 1, "cols": 1, "mid": np.abs(x).max() * np.abs(w).max() * 8,
             "loss": np.abs(s - t).max() ** 2 + 1, "grad.w": np.abs(x).max() * np.abs(dy).max() * 24}
    failed = False
    for name, ref in want.items():
        got = load(name)
        ok = got.shape == ref.shape and np.all(np.abs(got - ref) <= 1e-5 * scale[name])
        print(f"{name}: {list(got.shape)} {'PASS' if ok else 'FAIL'}")
        failed |= not ok
    print("FAIL" if failed else "PASS")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
