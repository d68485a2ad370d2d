#!/usr/bin/env python3
"""The reference of test/Numerics/cpu-matvec.test: the products of
Inputs/matvec.loom (r = x @ w, r2 = x2 @ w, s = x @ wt^T, c = m @ v, b = q @ kt),
computed in float64 from the inputs (rounded to bf16 for --dtype bf16) and
compared with the executable's outputs.

usage: matvec_check.py DIR [--dtype bf16] [--perturb]

DIR holds the inputs and outputs as NAME.npy. Each element may differ from
the exact product by the f32 accumulation's error, K f32 ulps of
sum |a| |b|, plus, in bf16, half a bf16 ulp of itself (the final rounding).
--perturb changes one element of each left operand by 1/16 first, which the
check must catch (it prints FAIL).
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import round_bf16  # noqa: E402

PRODUCTS = {"r": ("x", "w", False), "r2": ("x2", "w", False), "s": ("x", "wt", True),
            "c": ("m", "v", False), "b": ("q", "kt", False)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dir")
    parser.add_argument("--dtype", default="f32", choices=["f32", "bf16"])
    parser.add_argument("--perturb", action="store_true")
    args = parser.parse_args()
    bf16 = args.dtype == "bf16"
    load = lambda name: np.load(os.path.join(args.dir, name + ".npy")).astype(np.float32)
    ok = True
    for out, (left, right, transposed) in PRODUCTS.items():
        a, b = load(left), load(right)
        if bf16:
            a, b = round_bf16(a), round_bf16(b)
        if args.perturb:
            a = a.copy()
            a.reshape(-1)[a.size // 2] += 1.0 / 16
        if transposed:
            b = np.swapaxes(b, -1, -2)
        exact = a.astype(np.float64) @ b.astype(np.float64)
        magnitude = np.abs(a).astype(np.float64) @ np.abs(b).astype(np.float64)
        allowed = a.shape[-1] * 2.0 ** -23 * magnitude + 1e-30
        if bf16:
            allowed += np.abs(exact) * 2.0 ** -8
        got = load(out).astype(np.float64)
        if got.shape != exact.shape:
            print(f"{out}: shape {list(got.shape)}, expected {list(exact.shape)}: FAIL")
            ok = False
            continue
        err = np.abs(got - exact)
        worst = float(np.max(err / allowed))
        verdict = "PASS" if np.all(err <= allowed) else "FAIL"
        print(f"{out}: {list(got.shape)} worst error {worst:.3f} of the allowance: {verdict}")
        ok &= verdict == "PASS"
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
