#!/usr/bin/env python3
"""Checks Inputs/attention-gqa.loom's output and gradients against torch.

usage: gqa_check.py DIR

DIR holds w.safetensors (the run's params, --save-weights), x.npy and t.npy
(its inputs) and y.npy, loss.npy, grad.wq.npy, grad.wk.npy, grad.wv.npy
(its outputs). torch's autograd in float64 computes the same model with the
key/value heads repeated for their query heads (repeat_interleave, as
Llama's reference code does) and gives the exact values; f32 results must
be within rtol 1e-5 of their rms.
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import check_outputs, read_safetensors  # noqa: E402

KV, G, E = 2, 2, 16


def main():
    d = sys.argv[1]
    saved = read_safetensors(os.path.join(d, "w.safetensors"))
    w = {name: torch.tensor(arr.astype(np.float64), requires_grad=True)
         for name, (arr, _) in saved.items()}
    x = torch.tensor(np.load(os.path.join(d, "x.npy")).astype(np.float64))
    t = torch.tensor(np.load(os.path.join(d, "t.npy")).astype(np.float64))
    b, n, _ = x.shape

    def heads(h, count):  # [B, T, count * E] -> [B, count, T, E]
        return h.reshape(b, n, count, E).transpose(1, 2)

    q = heads(x @ w["wq"], KV * G)
    k = heads(x @ w["wk"], KV).repeat_interleave(G, dim=1)
    v = heads(x @ w["wv"], KV).repeat_interleave(G, dim=1)
    s = (q @ k.transpose(-1, -2)) * 0.25
    s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    y = (torch.softmax(s, dim=-1) @ v).transpose(1, 2).reshape(b, n, KV * G * E)
    loss = torch.mean((y - t) ** 2)
    loss.backward()
    want = {"y": y.detach(), "loss": loss.detach(), "grad.wq": w["wq"].grad,
            "grad.wk": w["wk"].grad, "grad.wv": w["wv"].grad}
    check_outputs(d, {name: ref.numpy() for name, ref in want.items()}, 1e-5)


if __name__ == "__main__":
    main()
