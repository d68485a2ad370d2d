#!/usr/bin/env python3
"""Trains the MLP of Inputs/mlp-train-f32.loom in float64, by hand, and
compares its losses with those an executable logged (test helper).

usage: mlp_train.py W.safetensors X.npy T.npy LOG.jsonl OPTIMIZER [NAME=VALUE...]

OPTIMIZER is sgd, adam or adamw; NAME=VALUE are its hyperparameters as the
script gives them (the rest take torch.optim's defaults). The update rules
are written out below from the torch.optim documentation, not from Loom's
IR: SGD (weight decay added to the gradient, momentum buffer started at the
first gradient), Adam (weight decay added to the gradient) and AdamW
(decoupled decay p *= 1 - lr wd), with bias correction; weight decay
applies to matrices only (w1, w2), not to the bias b1 (docs/runtime.md,
"Training"). The gradients are mlp_gradients.py's backward pass.

Tolerance: the executable computes in f32; over 5 to 20 steps its loss
stays within 1e-5 relative of the float64 run (docs/precision.md,
"Gradients").
"""
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from mlp_gradients import read_safetensors  # noqa: E402

DEFAULTS = {"sgd": {"lr": 1e-2, "momentum": 0.0, "weight_decay": 0.0},
            "adam": {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
                     "weight_decay": 0.0},
            "adamw": {"lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8,
                      "weight_decay": 1e-2}}


def loss_and_grads(w, x, t):
    k = np.sqrt(2 / np.pi)
    h = x @ w["w1"] + w["b1"]
    s = 1 / (1 + np.exp(-2 * k * (h + 0.044715 * h ** 3)))
    a = h * s
    y = a @ w["w2"]
    dy = 2 * (y - t) / y.size
    da = dy @ w["w2"].T
    dh = da * (s + 2 * h * k * (1 + 3 * 0.044715 * h ** 2) * s * (1 - s))
    return np.mean((y - t) ** 2), {"w1": x.T @ dh, "b1": dh.sum(axis=0), "w2": a.T @ dy}


def main():
    weights, xpath, tpath, logpath, kind, *hyper = sys.argv[1:]
    h = dict(DEFAULTS[kind])
    h.update({k: float(v) for k, v in (item.split("=") for item in hyper)})
    w = read_safetensors(weights)
    w = {name: w[name] for name in ("w1", "b1", "w2")}
    x, t = np.load(xpath).astype(np.float64), np.load(tpath).astype(np.float64)
    logged = [json.loads(line) for line in open(logpath)]
    state = {name: {} for name in w}
    ok = True
    for entry in logged:
        step = entry["step"]
        loss, grads = loss_and_grads(w, x, t)
        rel = abs(entry["loss"] - loss) / abs(loss)
        good = rel <= 1e-5
        ok &= good
        print(f"step {step}: loss {entry['loss']:.8g} reference {loss:.8g} "
              f"rel err {rel:.1e}: {'ok' if good else 'FAIL'}")
        for name, p in w.items():
            g, st = grads[name], state[name]
            decay = h["weight_decay"] if p.ndim >= 2 else 0.0
            if kind == "sgd":
                g = g + decay * p
                if h["momentum"]:
                    st["buf"] = g if "buf" not in st else h["momentum"] * st["buf"] + g
                    g = st["buf"]
                w[name] = p - h["lr"] * g
                continue
            if kind == "adam":
                g = g + decay * p
            else:
                p = p * (1 - h["lr"] * decay)
            st["m"] = h["beta1"] * st.get("m", 0) + (1 - h["beta1"]) * g
            st["v"] = h["beta2"] * st.get("v", 0) + (1 - h["beta2"]) * g * g
            bc1, bc2 = 1 - h["beta1"] ** step, 1 - h["beta2"] ** step
            w[name] = p - (h["lr"] / bc1) * st["m"] / (np.sqrt(st["v"]) / np.sqrt(bc2) + h["eps"])
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
