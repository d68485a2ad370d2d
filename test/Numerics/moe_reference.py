#!/usr/bin/env python3
"""An independent NumPy implementation of Loom's MoE semantics (docs/moe.md).

usage: moe_reference.py --weights W.safetensors --input x=X.npy --output y=Y.npy
                        --block NAME --experts E --top-k K --capacity-factor F
                        [--body relu-bias|gelu] [--residual] [--drops D]
                        [--target t=T.npy --loss L.npy --aux-loss W --z-loss Z]
                        [--stats moe_stats.NAME=S.npy]

Computes `y = [x +] moe(x)` for one MoE block NAME whose expert body is
`relu(x @ w1 + b1) @ w2` (relu-bias) or `gelu(x @ w1) @ w2` (gelu), all in
f32, with the routing rules written down in docs/moe.md: the router in
f32, softmax, top-k (ties to the lower expert), k = 2 gates renormalized,
capacity C = ceil(F k N / E), first choices claim slots before second
choices, each in token order, and a full expert drops the choice. Prints
the capacity, the choices dropped (token, k, expert), and the largest
error of the executable's output; exits 1 when the error exceeds 1e-5
(relative to the output's scale) or when --drops D does not match the
number of choices the reference dropped. With --target and --loss it also
checks the loss of a trained model, `mse(y, t) + W * aux + Z * z` with
Switch's load-balancing loss `aux = E * sum_e f_e * P_e` (f_e the fraction
of first choices routed to e, P_e the mean router probability of e) and
ST-MoE's router z-loss `z = mean_n logsumexp(logits_n)^2`. With --stats it
checks the executable's routing counts (the `moe_stats.NAME` output, per
expert: choices routed to it, and of them dropped) exactly.
"""
import argparse
import math
import sys

import numpy as np

from gradcheck import read_safetensors


def route(probs, top_k, capacity):
    tokens, experts = probs.shape
    # A stable sort of -p keeps the lower expert first among equal probs.
    order = np.argsort(-probs, axis=1, kind="stable")[:, :top_k]
    fill = [0] * experts
    slot = -np.ones((tokens, top_k), dtype=np.int64)
    for k in range(top_k):
        for n in range(tokens):
            e = order[n, k]
            if fill[e] < capacity:
                slot[n, k] = e * capacity + fill[e]
                fill[e] += 1
    gates = np.take_along_axis(probs, order, axis=1)
    if top_k > 1:
        gates = gates / gates.sum(axis=1, keepdims=True)
    return order, slot, gates


def expert(body, tile, w):
    if body == "relu-bias":
        return np.maximum(tile @ w["w1"] + w["b1"], 0) @ w["w2"]
    return gelu(tile @ w["w1"]) @ w["w2"]


def gelu(x):
    return 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


def moe(x, params, block, experts, top_k, factor, body):
    d = x.shape[-1]
    tokens = x.reshape(-1, d).astype(np.float64)
    n = tokens.shape[0]
    capacity = max(1, math.ceil(top_k * n * factor / experts))
    logits = tokens @ params[f"{block}.router"].astype(np.float64)
    top = logits.max(axis=1, keepdims=True)
    lse = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))
    z = float(np.mean(lse ** 2))
    logits -= top
    probs = np.exp(logits)
    probs /= probs.sum(axis=1, keepdims=True)
    order, slot, gates = route(probs, top_k, capacity)
    buffer = np.zeros((experts * capacity, d))
    for i in range(n):
        for k in range(top_k):
            if slot[i, k] >= 0:
                buffer[slot[i, k]] = tokens[i]
    outs = []
    for e in range(experts):
        w = {name: params[f"{block}.{name}"][e].astype(np.float64)
             for name in ("w1", "b1", "w2") if f"{block}.{name}" in params}
        outs.append(expert(body, buffer[e * capacity:(e + 1) * capacity], w))
    out = np.concatenate(outs)
    y = np.zeros((n, out.shape[1]))
    for i in range(n):
        for k in range(top_k):
            if slot[i, k] >= 0:
                y[i] += gates[i, k] * out[slot[i, k]]
    dropped = [(i, k, int(order[i, k])) for i in range(n) for k in range(top_k)
               if slot[i, k] < 0]
    fraction = np.bincount(order[:, 0], minlength=experts) / n
    aux = experts * float(np.sum(fraction * probs.mean(axis=0)))
    stats = np.zeros((experts, 2))
    for i in range(n):
        for k in range(top_k):
            stats[order[i, k], 0] += 1
            stats[order[i, k], 1] += slot[i, k] < 0
    return y.reshape(x.shape[:-1] + (out.shape[1],)), capacity, dropped, aux, z, stats


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--weights", required=True)
    parser.add_argument("--input", required=True)
    parser.add_argument("--output", required=True)
    parser.add_argument("--block", required=True)
    parser.add_argument("--experts", type=int, required=True)
    parser.add_argument("--top-k", type=int, required=True)
    parser.add_argument("--capacity-factor", type=float, required=True)
    parser.add_argument("--body", default="relu-bias", choices=["relu-bias", "gelu"])
    parser.add_argument("--residual", action="store_true")
    parser.add_argument("--drops", type=int)
    parser.add_argument("--target")
    parser.add_argument("--loss")
    parser.add_argument("--aux-loss", type=float, default=0.0)
    parser.add_argument("--z-loss", type=float, default=0.0)
    parser.add_argument("--stats")
    args = parser.parse_args()
    _, params = read_safetensors(args.weights)
    x = np.load(args.input.split("=", 1)[1])
    got = np.load(args.output.split("=", 1)[1])
    want, capacity, dropped, aux, z, stats = moe(x, params, args.block, args.experts, args.top_k,
                                  args.capacity_factor, args.body)
    if args.residual:
        want = want + x
    print(f"capacity {capacity}, {len(dropped)} choices dropped")
    for token, k, e in dropped:
        print(f"  dropped: token {token} choice {k} (expert {e})")
    # A token with a NaN input has a NaN row (its routing is still defined:
    # an all-NaN row's stable sort keeps expert order); every other row is
    # compared.
    nan_got, nan_want = np.isnan(got), np.isnan(want)
    finite = ~nan_want
    err = float(np.abs(got[finite].astype(np.float64) - want[finite]).max())
    scale = max(1.0, float(np.abs(want[finite]).max()))
    ok = err <= 1e-5 * scale and bool(np.all(nan_got == nan_want))
    nan_note = f", {int(nan_want.sum())} NaN as the reference's" if nan_want.any() else ""
    if np.any(nan_got != nan_want):
        nan_note = f", NaN at {int(nan_got.sum())} elements, the reference's {int(nan_want.sum())}"
    print(f"y: max abs err {err:.3g} (scale {scale:.3g}){nan_note}: {'ok' if ok else 'FAIL'}")
    if args.stats:
        got_stats = np.load(args.stats.split("=", 1)[1])
        good = got_stats.shape == stats.shape and bool(np.all(got_stats == stats))
        ok &= good
        print(f"routing counts: {int(stats[:, 0].sum())} routed, "
              f"{int(stats[:, 1].sum())} dropped: {'ok' if good else 'FAIL'}")
    if args.target and args.loss:
        t = np.load(args.target.split("=", 1)[1]).astype(np.float64)
        want_loss = float(np.mean((want - t) ** 2)) + args.aux_loss * aux + args.z_loss * z
        got_loss = float(np.load(args.loss))
        rel = abs(got_loss - want_loss) / abs(want_loss)
        good = rel <= 1e-5
        ok &= good
        print(f"loss: {got_loss:.7g} against {want_loss:.7g} (aux {aux:.7g}, z {z:.7g}) "
              f"rel err {rel:.2g}: {'ok' if good else 'FAIL'}")
    if args.drops is not None and args.drops != len(dropped):
        print(f"expected {args.drops} drops: FAIL")
        ok = False
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
