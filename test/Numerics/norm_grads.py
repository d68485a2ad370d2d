#!/usr/bin/env python3
"""Checks the gradients of Inputs/norm-grad.loom against torch's autograd
in float64 (test helper).

usage: norm_grads.py W.safetensors T.npy DIR [RTOL]

Recomputes l = mse(layernorm(a, g, b), t) + mse(rmsnorm(c, h) * 0.5, t)
+ mse(layernorm(c), t) (epsilon 1e-5; rmsnorm as x / sqrt(mean(x^2) + eps)
* h) with torch.nn.functional.layer_norm and autograd, and compares it
and the gradients of a, c, g, b and h with DIR/l.npy and
DIR/grad.<param>.npy from the executable (loomc --gradients).

Tolerance: |got - ref| <= RTOL (|ref| + rms(ref)) per element, RTOL 1e-4
by default (f32 row sums of 256 terms).
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import reference  # noqa: E402


def main():
    weights, tpath, out = sys.argv[1:4]
    rtol = float(sys.argv[4]) if len(sys.argv) > 4 else 1e-4
    torch.set_num_threads(1)
    params = {name: torch.tensor(array.astype(np.float64), requires_grad=True)
              for name, (array, _) in reference.read_safetensors(weights).items()}
    t = torch.tensor(np.load(tpath).astype(np.float64))
    a, c, g, b, h = (params[n] for n in "acgbh")
    features = a.shape[-1]
    rms = c / torch.sqrt((c * c).mean(dim=-1, keepdim=True) + 1e-5) * h
    loss = (((torch.nn.functional.layer_norm(a, (features,), g, b, 1e-5) - t) ** 2).mean()
            + ((rms * 0.5 - t) ** 2).mean()
            + ((torch.nn.functional.layer_norm(c, (features,), eps=1e-5) - t) ** 2).mean())
    loss.backward()
    refs = {"l": loss.detach().numpy()}
    refs.update({f"grad.{n}": params[n].grad.numpy() for n in "acgbh"})
    ok = True
    for name, ref in refs.items():
        got = np.load(os.path.join(out, name + ".npy")).astype(np.float64)
        if got.shape != ref.shape:
            print(f"{name}: shape {list(got.shape)}, expected {list(ref.shape)}: FAIL")
            ok = False
            continue
        scale = np.abs(ref) + np.sqrt(np.mean(ref * ref))
        err = float(np.max(np.abs(got - ref) / scale)) if ref.size else 0.0
        good = bool(np.all(np.isfinite(got))) and err <= rtol
        ok &= good
        print(f"{name}: {list(ref.shape)} max relative error {err:.2e}: {'ok' if good else 'FAIL'}")
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
