#!/usr/bin/env python3
"""Checks long-sums.test's outputs against NumPy's float64 sums.

usage: long_sums.py DIR RTOL

DIR holds a.npy and t.npy (the inputs) and loss.npy, total.npy and
largest.npy (the executable's outputs). Each output must be within RTOL of
the exact value, relative; prints one line each and PASS or FAIL.
"""
import os
import sys

import numpy as np


def main():
    folder, rtol = sys.argv[1], float(sys.argv[2])
    a = np.load(os.path.join(folder, "a.npy")).astype(np.float64)
    t = np.load(os.path.join(folder, "t.npy")).astype(np.float64)
    exact = {"loss": np.mean((a - t) ** 2), "total": np.sum(a * a), "largest": np.max(a)}
    failed = False
    for name, value in exact.items():
        got = float(np.load(os.path.join(folder, name + ".npy")))
        error = abs(got - value) / abs(value)
        ok = error <= rtol
        failed |= not ok
        print(f"{name}: {got:.9g} exact {value:.9g} relative error {error:.2e}: {'ok' if ok else 'FAIL'}")
    print("FAIL" if failed else "PASS")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
