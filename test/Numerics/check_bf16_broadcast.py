#!/usr/bin/env python3
"""Checks bf16-dot-broadcast.test's outputs against NumPy: the products of
the bf16-rounded inputs in float64, each output within 2 bf16 ulps of its
value plus one at the result's rms (the sum is f32, rounded once to bf16).

  check_bf16_broadcast.py DIR
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import round_bf16, ulp  # noqa: E402


def main():
    d = sys.argv[1]
    load = lambda n: np.load(os.path.join(d, n + ".npy")).astype(np.float64)
    q = lambda n: round_bf16(np.load(os.path.join(d, n + ".npy"))).astype(np.float64)
    refs = {"x": q("a") @ q("b"), "y": q("c") @ q("d") + 1, "z": q("e") @ q("f"),
            "w": q("g") @ q("h"), "v": q("i") @ q("j")}
    failed = False
    for name, ref in refs.items():
        got = load(name)
        rms = float(np.sqrt(np.mean(ref * ref)))
        tol = 2 * (ulp("bf16", ref) + ulp("bf16", np.float64(rms)))
        ok = got.shape == ref.shape and bool(np.all(np.abs(got - ref) <= tol))
        failed |= not ok
        print(f"{name}: {'ok' if ok else 'FAIL'} (worst {np.nanmax(np.abs(got - ref)) if got.shape == ref.shape else 'shape'})")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
