"""accumulate-16bit.test's inputs and check: the sequential 16-bit sum
(round the product, then the partial sum, one term after another)."""
import sys

import numpy as np

import reference

SHAPES = {"20x64x33": (20, 64, 33), "16x64x1": (16, 64, 1), "1x64x16": (1, 64, 16)}
ROUND = {"bf16": reference.round_bf16, "f16": lambda x: x.astype(np.float16).astype(np.float32)}


def sequential(a, b, rounded):
    out = np.zeros((a.shape[0], b.shape[1]), np.float32)
    for k in range(a.shape[1]):
        product = rounded((a[:, k:k + 1] * b[k:k + 1, :]).astype(np.float32))
        out = rounded(out + product)
    return out


def main():
    work, mode = sys.argv[1], sys.argv[2]
    rng = np.random.default_rng(40)
    ok = True
    for name, (m, k, n) in SHAPES.items():
        a = rng.standard_normal((m, k)).astype(np.float32)
        b = rng.standard_normal((k, n)).astype(np.float32)
        for precision, rounded in ROUND.items():
            if mode == "make":
                np.save(f"{work}/a-{name}.npy", a)
                np.save(f"{work}/b-{name}.npy", b)
                with open(f"{work}/{precision}-{name}.loom", "w") as f:
                    f.write(f"precision {precision} accumulate {precision}\nmodel m {{\n"
                            f"  input a : [{m}, {k}]\n  input b : [{k}, {n}]\n"
                            f"  output o = a @ b\n}}\n")
                continue
            want = sequential(rounded(a), rounded(b), rounded)
            for target in ("native", "v3"):
                got = np.load(f"{work}/{precision}-{name}-{target}.npy").astype(np.float32)
                differ = int(np.sum(got != want))
                print(f"{precision} {name} {target}: " +
                      ("identical" if not differ else f"{differ} of {want.size} differ FAIL"))
                ok &= not differ
    if mode == "check":
        print("PASS" if ok else "FAIL")
        sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
