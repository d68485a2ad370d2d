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
        if a.shape != b.shape:
            print(f"{name}: shapes {list(a.shape)} and {list(b.shape)}: FAIL")
            failed = True
            continue
        # A NaN fails (it compares false with any tolerance: an all-NaN
        # result had passed); infinities must match each other exactly.
        nonfinite = int(np.sum(np.isnan(a) | np.isnan(b))) + \
            int(np.sum(np.isinf(a) != np.isinf(b))) + \
            int(np.sum(np.isinf(a) & np.isinf(b) & (a != b)))
        finite = np.isfinite(a) & np.isfinite(b)
        a, b = np.where(finite, a, 0.0), np.where(finite, b, 0.0)
        rms = float(np.sqrt(np.mean(b * b))) if b.size else 0.0
        err = np.abs(a - b)
        if args.dtype == "f32":
            tol = args.rtol * (np.abs(b) + rms)
        else:
            tol = args.ulps * (ulp(args.dtype, b) + ulp(args.dtype, np.float64(rms)))
        over = int(np.sum(~(err <= tol))) + nonfinite
        differ = float(np.mean(a != b)) if a.size else 0.0
        ok = over == 0 and (args.dtype == "f32" or differ < args.max_diff_fraction)
        print(f"{name}: {list(a.shape)} max abs err {err.max() if err.size else 0:.3g}, "
              f"{over} over ({nonfinite} non-finite apart), "
              f"{100 * differ:.2f}% differing: {'PASS' if ok else 'FAIL'}")
        failed = failed or not ok
    print("FAIL" if failed else "PASS")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
