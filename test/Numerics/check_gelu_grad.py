#!/usr/bin/env python3
"""Checks gelu's gradient (grad.p of Inputs/gelu-extremes.loom, p = 0, so
gelu'(x)) against the tanh form's derivative in float64: within 1e-5
(absolute, the gradient lies in [-0.17, 1.13]) and never NaN.

  check_gelu_grad.py X.npy GRAD.npy
"""
import sys

import numpy as np


def gelu_grad(x):
    k = np.sqrt(2.0 / np.pi)
    u = k * (x + 0.044715 * x**3)
    t = np.tanh(u)
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * k * (1 + 3 * 0.044715 * x * x)


def main():
    x = np.load(sys.argv[1]).astype(np.float64)
    got = np.load(sys.argv[2]).astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        want = gelu_grad(x)
    # zip stops at the shorter: a short result had passed.
    ok = got.shape == x.shape
    if not ok:
        print(f"shape {list(got.shape)}, want {list(x.shape)}: FAIL")
    for xi, g, w in zip(x, got, want):
        good = np.isfinite(g) and abs(g - w) <= 1e-5
        ok &= bool(good)
        print(f"x {xi:.3g}: got {g:.7g} want {w:.7g}: {'ok' if good else 'FAIL'}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
