"""sigmoid.test's check: each executable's sigmoid against float64's on the
same (rounded) inputs; prints one line per precision and PASS or FAIL."""
import sys

import numpy as np

import reference


def main():
    work = sys.argv[1]
    x = np.load(f"{work}/x.npy").astype(np.float64)
    ok = True
    for name, dtype, unit in (("f32", np.float32, None), ("bf16", "bf16", 2.0 ** -8),
                              ("f16", np.float16, 2.0 ** -11)):
        xs = (reference.round_bf16(x) if dtype == "bf16" else x.astype(dtype)).astype(np.float64)
        exact = 1 / (1 + np.exp(-xs))
        got = np.load(f"{work}/{name}.npy").astype(np.float64)
        if unit is None:
            tolerance = 4e-7 * exact + 1e-30
        else:
            # One rounding of the f32 formula's value: an ulp of the format
            # at the exact value, and among the subnormals their spacing
            # (f16 2^-24, bf16 2^-133).
            tolerance = np.maximum(2.0 ** np.floor(np.log2(np.maximum(exact, 1e-300))) * unit * 2,
                                   2.0 ** -24 if name == "f16" else 2.0 ** -133)
        error = np.abs(got - exact)
        bad = ~(error <= tolerance)
        worst = int(np.argmax(error / tolerance))
        line = (f"{name}: max error {error.max():.3g}, worst at x = {xs.flat[worst]:g}: "
                f"{got.flat[worst]:.9g} against {exact.flat[worst]:.9g}")
        print(line + (f": {int(bad.sum())} over FAIL" if bad.any() else ": ok"))
        ok &= not bad.any()
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
