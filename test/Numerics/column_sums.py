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

sys.path.insert(0, os.path.dirname(__file__))
from long_sums import check  # noqa: E402


def main():
    folder, rtol = sys.argv[1], float(sys.argv[2])
    p = np.load(os.path.join(folder, "p.npy")).astype(np.float64)
    w = np.load(os.path.join(folder, "w.npy")).astype(np.float64)
    soft = np.exp(p - p.max(axis=0))
    soft /= soft.sum(axis=0)
    check(folder, rtol, {"s": np.exp(p).sum(axis=0), "m": (w * w).mean(axis=0), "soft": soft})


if __name__ == "__main__":
    main()
