"""erf.test's check: each executable's erf against float64's on the same
(rounded) inputs, and the f32 build's exact GELU against torch's; prints
one line per check and PASS or FAIL. --scale multiplies the results (the
check's own test)."""
import argparse
import math

import numpy as np
import torch

import reference


def report(name, got, exact, tolerance, xs, signed_zero=False):
    """One line: the worst error and whether every element is within (and,
    with `signed_zero`, whether each exact zero has its sign)."""
    nan = np.isnan(exact)
    with np.errstate(invalid="ignore"):
        error = np.where(nan | (got == exact), 0.0, np.abs(got - exact))
    tolerance = np.where(nan, np.inf, tolerance)
    bad = ~(error <= tolerance) | (nan & ~np.isnan(got)) | (~nan & np.isnan(got))
    if signed_zero:
        bad |= (exact == 0) & (np.signbit(got) != np.signbit(exact))
    with np.errstate(invalid="ignore", divide="ignore"):
        worst = int(np.argmax(np.nan_to_num(error / tolerance)))
    print(f"{name}: max error {error.max():.3g}, worst at x = {xs.flat[worst]:g}: "
          f"{got.flat[worst]:.9g} against {exact.flat[worst]:.9g}"
          + (f": {int(bad.sum())} over FAIL" if bad.any() else ": ok"))
    return not bad.any()


def ulp(values, unit, least):
    """The spacing of a format with `unit` (2^-p) at each exact value, at
    least `least` (its subnormals')."""
    magnitude = np.maximum(np.abs(values), 1e-300)
    return np.maximum(2.0 ** np.floor(np.log2(magnitude)) * unit, least)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("work")
    parser.add_argument("--scale", type=float, default=1.0)
    args = parser.parse_args()
    x = np.load(f"{args.work}/x.npy").astype(np.float64)
    erf = np.vectorize(math.erf)
    ok = True
    for name, dtype, unit, least in (("f32", np.float32, 2.0 ** -23, 2.0 ** -149),
                                     ("bf16", "bf16", 2.0 ** -7, 2.0 ** -133),
                                     ("f16", np.float16, 2.0 ** -10, 2.0 ** -24)):
        xs = (reference.round_bf16(x) if dtype == "bf16" else x.astype(dtype)).astype(np.float64)
        exact = erf(xs)
        got = np.load(f"{args.work}/{name}.npy").astype(np.float64) * args.scale
        # f32: 5 ulps of the polynomial (4.78 at worst near 1.85); 16-bit:
        # one rounding (half an ulp) of a value within those, so an ulp.
        spread = 5 if name == "f32" else 1
        ok &= report(name, got, exact, spread * ulp(exact, unit, least), xs, signed_zero=True)
    xs = x.astype(np.float32).astype(np.float64)
    finite = np.isfinite(xs)
    exact = torch.nn.functional.gelu(torch.from_numpy(np.where(finite, xs, 0))).numpy()
    exact = np.where(finite, exact, np.where(np.isnan(xs), np.nan, np.maximum(xs, 0)))
    exact = np.where(xs == -np.inf, np.nan, exact)  # -inf * (1 + -1) is NaN
    got = np.load(f"{args.work}/gelu.npy").astype(np.float64) * args.scale
    # A few f32 roundings of the formula (x / sqrt(2), erf, 1 + ., 0.5 x .),
    # and below -3 the 1 + erf cancels: an absolute 2^-23 of |x| there.
    magnitude = np.where(finite, np.abs(xs), 0)
    tolerance = 8 * ulp(exact, 2.0 ** -23, 2.0 ** -149) + 2.0 ** -23 * magnitude * (xs < 0)
    ok &= report("exact gelu", got, exact, np.where(finite, tolerance, 0), xs)
    print("PASS" if ok else "FAIL")
    raise SystemExit(0 if ok else 1)


if __name__ == "__main__":
    main()
