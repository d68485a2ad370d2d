#!/usr/bin/env python3
"""Checks the outputs of Inputs/attention.loom against reference.py's ops.

usage: attention_check.py --precision P DIR [checker options]

DIR holds q.npy, k.npy, v.npy (the inputs) and causal.npy, full.npy (the
executable's outputs). The reference composes reference.py's matmul, mul,
causal_mask and softmax as the script writes them, with their rounding
points (docs/precision.md), and compares with reference.py's Checker.
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference as R  # noqa: E402


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--precision", required=True, choices=["f32", "bf16", "f16"])
    parser.add_argument("dir")
    parser.add_argument("--ulps", type=float, default=2)
    parser.add_argument("--scale-ulps", type=float, default=1)
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("--max-diff-fraction", type=float, default=0.05)
    parser.add_argument("--allow-nan", action="store_true",
                        help="the reference's NaN are expected (rows with no finite score)")
    args = parser.parse_args()
    dtype = args.precision

    def load(name):
        data = np.load(os.path.join(args.dir, name + ".npy")).astype(np.float32)
        return R.Val(R.round_to(data, dtype), dtype, exact=True)

    q, k, v = load("q"), load("k"), load("v")
    rank = q.data.ndim  # any layout: [..., T, E]
    scores = R.matmul(q, R.transpose(k, tuple(range(rank - 2)) + (rank - 1, rank - 2)))
    causal = R.matmul(R.softmax(R.causal_mask(R.mul(scores, R.const(0.25, dtype)))), v)
    full = R.matmul(R.softmax(scores), v)

    checker = R.Checker(args.ulps, args.scale_ulps, args.rtol, args.max_diff_fraction,
                        allow_nan=args.allow_nan)
    for name, ref in (("causal", causal), ("full", full)):
        got = np.load(os.path.join(args.dir, name + ".npy"))
        checker.compare(name, got, ref.data, dtype)
    print("FAIL" if checker.failed else "PASS")
    sys.exit(1 if checker.failed else 0)


if __name__ == "__main__":
    main()
