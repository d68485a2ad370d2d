#!/usr/bin/env python3
"""Trains the MLP of Inputs/mlp-train-f32.loom in float64, by hand, and
compares its losses with those an executable logged (test helper).

usage: mlp_train.py W.safetensors X.npy T.npy LOG.jsonl OPTIMIZER [NAME=VALUE...]

OPTIMIZER is sgd, adam or adamw; NAME=VALUE are its hyperparameters as the
script gives them (the rest take torch.optim's defaults), and the train
settings clip_grad_norm=C (torch.nn.utils.clip_grad_norm_: the gradients
times min(1, C / (norm + 1e-6))) and warmup=W min_lr=L steps=S (the
warmup_cosine schedule of docs/runtime.md, "Training"); rtol=R (the
tolerance, 1e-5 by default: f32) and loss_scale=dynamic|static.

With loss scaling, the steps the log says were skipped (inf/nan gradients)
must leave the params as they were (the same loss again) and not count for
Adam's bias correction, and the logged scale must follow GradScaler: x0.5
after a skipped step (dynamic), unchanged otherwise. The update rules
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


def schedule(lr, h, step):
    """warmup_cosine: linear warmup over W steps, then a half cosine from lr
    to min_lr at step S."""
    warmup, total = h["warmup"], h["steps"]
    if step <= warmup:
        return lr * step / warmup
    progress = min(1.0, (step - warmup) / (total - warmup))
    return h["min_lr"] + (lr - h["min_lr"]) * (1 + np.cos(np.pi * progress)) / 2


def main():
    weights, xpath, tpath, logpath, kind, *hyper = sys.argv[1:]
    h = dict(DEFAULTS[kind])
    words = {"dynamic": 1.0, "static": 2.0}
    h.update({k: words.get(v, None) or float(v)
              for k, v in (item.split("=") for item in hyper)})
    base_lr = h["lr"]
    rtol = h.pop("rtol", 1e-5)
    scaling = {1.0: "dynamic", 2.0: "static"}.get(h.pop("loss_scale", 0.0), "none")
    w = read_safetensors(weights)
    w = {name: w[name] for name in ("w1", "b1", "w2")}
    x, t = np.load(xpath).astype(np.float64), np.load(tpath).astype(np.float64)
    logged = [json.loads(line) for line in open(logpath)]
    state = {name: {} for name in w}
    ok = True
    applied = 0
    for i, entry in enumerate(logged):
        step = entry["step"]
        loss, grads = loss_and_grads(w, x, t)
        rel = abs(entry["loss"] - loss) / abs(loss)
        if "warmup" in h:
            h["lr"] = schedule(base_lr, h, step)
        lr_rel = abs(entry["lr"] - h["lr"]) / h["lr"]
        if entry["skipped"]:
            following = logged[i + 1]["loss_scale"] if i + 1 < len(logged) else None
            expected = entry["loss_scale"] * (0.5 if scaling == "dynamic" else 1)
            good = (scaling != "none" and rel <= rtol and lr_rel <= 1e-12 and
                    following in (None, expected))
            ok &= good
            print(f"step {step}: skipped at loss scale {entry['loss_scale']:g}, "
                  f"loss {entry['loss']:.8g} reference {loss:.8g} (unchanged "
                  f"params): {'ok' if good else 'FAIL'}")
            continue
        applied += 1
        norm = np.sqrt(sum(np.sum(g * g) for g in grads.values()))
        norm_rel = abs(entry["grad_norm"] - norm) / norm
        good = rel <= rtol and norm_rel <= rtol and lr_rel <= 1e-12
        ok &= good
        print(f"step {step}: loss {entry['loss']:.8g} reference {loss:.8g} "
              f"rel err {rel:.1e}, grad norm rel err {norm_rel:.1e}, "
              f"lr {h['lr']:.6g}: {'ok' if good else 'FAIL'}")
        if "clip_grad_norm" in h:
            coefficient = min(1.0, h["clip_grad_norm"] / (norm + 1e-6))
            grads = {name: g * coefficient for name, g in grads.items()}
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
            bc1, bc2 = 1 - h["beta1"] ** applied, 1 - h["beta2"] ** applied
            w[name] = p - (h["lr"] / bc1) * st["m"] / (np.sqrt(st["v"]) / np.sqrt(bc2) + h["eps"])
    ok &= applied > 0
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
