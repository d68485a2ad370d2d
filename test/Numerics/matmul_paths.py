#!/usr/bin/env python3
"""The reference of test/Numerics/cpu-matmul-paths.test: the bf16 matmuls of
Inputs/matmul-paths.loom, c = a @ b and d = a @ bt^T, computed in float64
from the bf16-rounded inputs and compared with the executable's outputs.

usage: matmul_paths.py A.npy B.npy BT.npy C.npy D.npy [--perturb]

The outputs are bf16 (the script's compute type), accumulated in f32: each
element may differ from the exact product by half a bf16 ulp of itself (the
final rounding) plus the f32 accumulation's error, at most K f32 ulps of
sum |a| |b|; anything more is FAIL. --perturb changes one element of a by
1/16 first, which the check must catch (it prints FAIL).
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import round_bf16  # noqa: E402


def check(name, got, a, b):
    exact = a.astype(np.float64) @ b.astype(np.float64)
    magnitude = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
    k = a.shape[1]
    # Half a bf16 ulp of |exact| (2^-8 relative), as an upper bound.
    allowed = np.abs(exact) * 2.0 ** -8 + k * 2.0 ** -23 * magnitude
    err = np.abs(got.astype(np.float64) - exact)
    worst = float(np.max(err / np.maximum(allowed, 1e-30)))
    verdict = "PASS" if np.all(err <= allowed) else "FAIL"
    print(f"{name}: bf16{list(got.shape)} worst error {worst:.3f} of the allowance: {verdict}")
    return verdict == "PASS"


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    if len(args) != 5:
        sys.exit(__doc__)
    a, b, bt, c, d = (np.load(path).astype(np.float32) for path in args)
    a, b, bt = round_bf16(a), round_bf16(b), round_bf16(bt)
    if "--perturb" in sys.argv:
        a = a.copy()
        a[3, 5] += 1.0 / 16
    ok = check("c", c, a, b) & check("d", d, a, bt.T)
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
