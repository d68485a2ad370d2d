#!/usr/bin/env python3
"""Compares .npy files of two runs: DIR_A/NAME.npy against DIR_B/NAME.npy.

usage: compare_npy.py DIR_A DIR_B NAME... [--rtol R] [--ulps U --dtype bf16]
       [--max-diff-fraction F]

f32: |a - b| <= RTOL * (|b| + rms(b)). 16-bit: |a - b| <= ULPS ulp(|b|) +
ULPS ulp(rms(b)), and fewer than F of the elements differ. Prints one line
per name and PASS or FAIL.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import ulp  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("a")
    parser.add_argument("b")
    parser.add_argument("names", nargs="+")
    parser.add_argument("--dtype", default="f32", choices=["f32", "bf16", "f16"])
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--ulps", type=float, default=2)
    parser.add_argument("--max-diff-fraction", type=float, default=0.05)
    args = parser.parse_args()
    failed = False
    for name in args.names:
        a = np.load(os.path.join(args.a, name + ".npy")).astype(np.float64)
        b = np.load(os.path.join(args.b, name + ".npy")).astype(np.float64)
        rms = float(np.sqrt(np.mean(b * b)))
        err = np.abs(a - b)
        if args.dtype == "f32":
            tol = args.rtol * (np.abs(b) + rms)
        else:
            tol = args.ulps * (ulp(args.dtype, b) + ulp(args.dtype, np.float64(rms)))
        over = int(np.sum(err > tol))
        differ = float(np.mean(a != b))
        ok = a.shape == b.shape and over == 0 and (args.dtype == "f32" or differ < args.max_diff_fraction)
        print(f"{name}: {list(a.shape)} max abs err {err.max():.3g}, {over} over, "
              f"{100 * differ:.2f}% differing: {'PASS' if ok else 'FAIL'}")
        failed = failed or not ok
    print("FAIL" if failed else "PASS")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
