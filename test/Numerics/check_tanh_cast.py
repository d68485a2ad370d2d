"""tanh-cast.test's check: each executable's tanh against float64's on the
same (rounded) inputs, and float-to-integer casts against NumPy's astype
(toward zero) with the range's ends for values past it and 0 for NaN;
prints one line per check and PASS or FAIL."""
import sys

import numpy as np

import reference


def check_tanh(work, name, dtype, unit):
    x = np.load(f"{work}/x.npy").astype(np.float64)
    xs = (reference.round_bf16(x) if dtype == "bf16" else x.astype(dtype)).astype(np.float64)
    exact = np.tanh(xs)
    got = np.load(f"{work}/tanh-{name}.npy").astype(np.float64)
    if unit is None:
        # A few f32 ulps, relative: tanh(x) ~ x for small |x| keeps them.
        tolerance = 4e-7 * np.abs(exact) + 1e-45
    else:
        magnitude = np.maximum(np.abs(exact), 1e-300)
        tolerance = np.maximum(2.0 ** np.floor(np.log2(magnitude)) * unit * 2,
                               2.0 ** -24 if name == "f16" else 2.0 ** -133)
    error = np.abs(got - exact)
    bad = ~(error <= tolerance)
    worst = int(np.argmax(error / tolerance))
    line = (f"tanh {name}: max relative error {np.max(error / np.maximum(np.abs(exact), 1e-300)):.3g}, "
            f"worst at x = {xs.flat[worst]:g}: {got.flat[worst]:.9g} against {exact.flat[worst]:.9g}")
    print(line + (f": {int(bad.sum())} over FAIL" if bad.any() else ": ok"))
    return not bad.any()


def check_cast(work, name, dtype):
    info = np.iinfo(dtype)
    expected = []  # Python integers: float64 cannot hold the i64 range's ends
    for value in np.load(f"{work}/c.npy").astype(np.float64).tolist():
        if value != value:
            expected.append(0)
        elif value >= 2.0 ** (info.bits - 1):
            expected.append(int(info.max))
        elif value < -(2.0 ** (info.bits - 1)):
            expected.append(int(info.min))
        else:
            expected.append(int(value))  # toward zero
    got = np.load(f"{work}/cast-{name}.npy")
    ok = got.dtype == dtype and got.tolist() == expected
    print(f"cast {name}: " + ("ok" if ok else f"FAIL: {got.tolist()} against {expected}"))
    return ok


def main():
    work = sys.argv[1]
    ok = True
    for name, dtype, unit in (("f32", np.float32, None), ("bf16", "bf16", 2.0 ** -8),
                              ("f16", np.float16, 2.0 ** -11)):
        ok &= check_tanh(work, name, dtype, unit)
    ok &= check_cast(work, "i32", np.int32)
    ok &= check_cast(work, "i64", np.int64)
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
