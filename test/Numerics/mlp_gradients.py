#!/usr/bin/env python3
"""The gradients of Inputs/mlp-train-f32.loom, by hand in float64 (test helper).

usage: mlp_gradients.py W.safetensors X.npy T.npy DIR

Recomputes loss = mean((gelu(x @ w1 + b1) @ w2 - t)^2) and its gradients
with respect to w1, b1 and w2 with a backward pass written out below (not
derived from Loom's IR), and compares them with DIR/loss.npy and
DIR/grad.<param>.npy written by the executable (loomc --gradients).

GELU is Loom's tanh approximation, gelu(h) = h s with s = sigmoid(2u),
u = sqrt(2/pi) (h + 0.044715 h^3), whose derivative is
s + 2 h u' s (1 - s).

Tolerance: |got - ref| <= 1e-4 (|ref| + rms(ref)) per element; f32
sums of up to 256 products and a chain of six ops stay far inside it
(docs/precision.md, "Gradients").
"""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402


def read_safetensors(path):
    """{name: float64 array} of the weights file (reference.py's reader)."""
    return {name: array.astype(np.float64)
            for name, (array, _) in reference.read_safetensors(path).items()}


def main():
    weights, xpath, tpath, out = sys.argv[1:5]
    w = read_safetensors(weights)
    x = np.load(xpath).astype(np.float64)
    t = np.load(tpath).astype(np.float64)
    k = np.sqrt(2 / np.pi)
    h = x @ w["w1"] + w["b1"]
    u = k * (h + 0.044715 * h ** 3)
    s = 1 / (1 + np.exp(-2 * u))
    a = h * s
    y = a @ w["w2"]
    loss = np.mean((y - t) ** 2)
    dy = 2 * (y - t) / y.size
    ref = {"w2": a.T @ dy}
    da = dy @ w["w2"].T
    dh = da * (s + 2 * h * k * (1 + 3 * 0.044715 * h ** 2) * s * (1 - s))
    ref["w1"] = x.T @ dh
    ref["b1"] = dh.sum(axis=0)
    ok = True
    got_loss = float(np.load(f"{out}/loss.npy"))
    good = abs(got_loss - loss) <= 1e-5 * abs(loss)
    ok &= good
    print(f"loss: {got_loss:.8g} reference {loss:.8g}: {'ok' if good else 'FAIL'}")
    for name, want in ref.items():
        got = np.load(f"{out}/grad.{name}.npy").astype(np.float64)
        if got.shape != want.shape:
            print(f"grad.{name}: shape {got.shape}, expected {want.shape}: FAIL")
            ok = False
            continue
        rms = np.sqrt(np.mean(want ** 2))
        err = np.max(np.abs(got - want) / (np.abs(want) + rms))
        good = err <= 1e-4
        ok &= good
        print(f"grad.{name}: {list(want.shape)} max |err| / (|ref| + rms) {err:.2e}: "
              f"{'ok' if good else 'FAIL'}")
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
