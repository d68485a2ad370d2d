#!/usr/bin/env python3
"""Compares the outputs of a multi-rank run with those of the one-rank run
of the same executable, with the tolerances of docs/precision.md (the
comparison of test/Numerics/reference.py): f32 within rtol 1e-5 of
(|one-rank| + rms); f16/bf16 within 2 ulp + 1 ulp at the rms, with fewer
than 5% of the elements differing.

  compare.py --dtype bf16 y=ONE_RANK.npy:N_RANKS.npy [...]

A NaN in the one-rank run fails unless --allow-nan (both runs' NaN in the
same places had passed: a model broken on every rank count).

Prints one report per output and PASS or FAIL last; exits 1 on FAIL.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "Numerics"))
from reference import Checker, FLOAT_TYPES  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dtype", required=True, choices=FLOAT_TYPES)
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--ulps", type=float, default=2.0)
    parser.add_argument("--scale-ulps", type=float, default=1.0)
    parser.add_argument("--max-diff-fraction", type=float, default=0.05)
    parser.add_argument("--allow-nan", action="store_true",
                        help="a NaN the one-rank run gives is expected (the N-rank run must match it)")
    parser.add_argument("pairs", nargs="+", metavar="NAME=ONE.npy:MANY.npy")
    args = parser.parse_args()
    checker = Checker(args.ulps, args.scale_ulps, args.rtol, args.max_diff_fraction,
                      allow_nan=args.allow_nan)
    for pair in args.pairs:
        name, _, files = pair.partition("=")
        one, _, many = files.partition(":")
        if not name or not one or not many:
            sys.exit(f"compare.py: bad pair '{pair}' (expected NAME=ONE.npy:MANY.npy)")
        ref = np.load(one).astype(np.float32)
        got = np.load(many).astype(np.float32)
        if ref.ndim == 0:
            tol = args.rtol * abs(float(ref)) if args.dtype == "f32" else \
                2 * float(np.abs(ref)) * 2.0 ** -7
            checker.compare_scalar(name, got, ref, tol, f"{args.dtype} scalar")
        else:
            checker.compare(name, got, ref, args.dtype)
    print("FAIL" if checker.failed else "PASS")
    sys.exit(1 if checker.failed else 0)


if __name__ == "__main__":
    main()
