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


def check(folder, rtol, exact):
    """Compares each output NAME.npy in `folder` with exact[NAME] (its
    largest relative error); prints a line each and PASS or FAIL, and
    exits 1 on FAIL."""
    failed = False
    for name, value in exact.items():
        got = np.load(os.path.join(folder, name + ".npy")).astype(np.float64)
        error = float(np.max(np.abs(got - value) / np.abs(value)))
        ok = error <= rtol
        failed |= not ok
        shown = f"{float(got):.9g} exact {float(value):.9g} " if got.size == 1 else ""
        print(f"{name}: {shown}relative error {error:.2e}: {'ok' if ok else 'FAIL'}")
    print("FAIL" if failed else "PASS")
    sys.exit(1 if failed else 0)


def main():
    folder, rtol = sys.argv[1], float(sys.argv[2])
    a = np.load(os.path.join(folder, "a.npy")).astype(np.float64)
    t = np.load(os.path.join(folder, "t.npy")).astype(np.float64)
    check(folder, rtol, {"loss": np.mean((a - t) ** 2), "total": np.sum(a * a),
                         "largest": np.max(a)})


if __name__ == "__main__":
    main()
