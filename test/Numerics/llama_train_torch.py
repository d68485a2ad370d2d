#!/usr/bin/env python3
"""The Llama of examples/llama.loom trained in PyTorch: an independent
reference for its training step (test/Examples/llama-train.test).

usage: llama_train_torch.py WEIGHTS.safetensors DATA LOOM_LOG.jsonl STEPS [RTOL]

The same model written with torch's own ops (RMSNorm as x / sqrt(mean(x^2)
+ 1e-5) * g, rotary embeddings by the rotate-half convention with angles
position x 10000^(-2i/E), SwiGLU, an untied head), trained by
gpt_train_torch.py's loop: torch.optim.AdamW with weight decay on rank >= 2
params only, clip_grad_norm_ and the warmup-cosine schedule, on the same
data windows, one CPU thread. Prints Loom's logged loss and gradient norm
against torch's per step, then PASS or FAIL.
"""
import math

import torch

import gpt_train_torch as loop

B, T, V, D, H, F, LAYERS = 16, 32, 256, 64, 4, 192, 2
E = D // H


def rms_norm(x, g):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * g


def rotate(x, c, s):
    x1, x2 = x.chunk(2, -1)
    return x * c + torch.cat((-x2, x1), -1) * s


def logits_of(p, tokens):
    """The model's logits [b, T, V] for tokens [b, T]."""
    b = tokens.shape[0]
    position = torch.arange(T, dtype=torch.float32).reshape(T, 1)
    # The script's constant, -ln(10000) * 2 / E rounded as it writes it.
    frequency = torch.exp(torch.arange(E // 2, dtype=torch.float32).reshape(1, -1) * -1.1512925)
    angle = torch.cat((position @ frequency, position @ frequency), -1)
    c, s = torch.cos(angle), torch.sin(angle)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), 1)
    h = p["embed"][tokens]
    for i in range(LAYERS):
        q = lambda name: p[f"block.{i}.{name}"]  # noqa: E731
        a = rms_norm(h, q("attn_norm"))
        heads = [(a @ q(w)).reshape(b, T, H, E).transpose(1, 2) for w in ("wq", "wk", "wv")]
        query, key = rotate(heads[0], c, s), rotate(heads[1], c, s)
        scores = (query @ key.transpose(-1, -2) * (1 / math.sqrt(E))).masked_fill(mask, float("-inf"))
        attn = (torch.softmax(scores, -1) @ heads[2]).transpose(1, 2).reshape(b, T, D)
        r = h + attn @ q("wo")
        m = rms_norm(r, q("mlp_norm"))
        h = r + (torch.nn.functional.silu(m @ q("w_gate")) * (m @ q("w_up"))) @ q("w_down")
    return rms_norm(h, p["final_norm"]) @ p["head"]


if __name__ == "__main__":
    loop.B, loop.T, loop.V, loop.D, loop.H, loop.F, loop.LAYERS = B, T, V, D, H, F, LAYERS
    loop.logits_of = logits_of
    loop.main()
