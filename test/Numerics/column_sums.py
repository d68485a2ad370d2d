#!/usr/bin/env python3
"""Checks long-sums.test's column sums (Inputs/column-sums.loom) against
NumPy's float64 values.

usage: column_sums.py DIR RTOL

DIR holds p.npy and w.npy (the inputs) and s.npy, m.npy and soft.npy (the
outputs); every element must be within RTOL of the exact value, relative.
Prints one line per output and PASS or FAIL.
"""
import os
import sys

import numpy as np


def main():
    folder, rtol = sys.argv[1], float(sys.argv[2])
    p = np.load(os.path.join(folder, "p.npy")).astype(np.float64)
    w = np.load(os.path.join(folder, "w.npy")).astype(np.float64)
    soft = np.exp(p - p.max(axis=0))
    soft /= soft.sum(axis=0)
    exact = {"s": np.exp(p).sum(axis=0), "m": (w * w).mean(axis=0), "soft": soft}
    failed = False
    for name, value in exact.items():
        got = np.load(os.path.join(folder, name + ".npy")).astype(np.float64)
        error = float(np.max(np.abs(got - value) / np.abs(value)))
        ok = error <= rtol
        failed |= not ok
        print(f"{name}: largest relative error {error:.2e}: {'ok' if ok else 'FAIL'}")
    print("FAIL" if failed else "PASS")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
