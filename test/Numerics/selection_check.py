#!/usr/bin/env python3
"""Inputs and torch's reference for Inputs/selection.loom (selection.test).

usage: selection_check.py inputs DIR     writes a.npy, b.npy, t.npy with ties
       selection_check.py check DIR      checks y, loss, grad.w1..w5

The inputs tie on purpose: a quarter of a's entries equal b's in their
column (where abs(a - b) meets its kink too), some equal 0.25 (minimum's
other operand), some are 0 or -0, one row is b itself. torch's autograd in float64 on the
same model (every param ones) gives the gradients; PyTorch's maximum and
minimum share a tie's gradient evenly and abs' is 0 at 0. f32 results
must be within rtol 1e-6 of their rms.
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from reference import check_outputs  # noqa: E402

N, D = 8, 16


def make_inputs(d):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((N, D)).astype(np.float32)
    b = rng.standard_normal(D).astype(np.float32)
    ties = rng.random((N, D)) < 0.25
    a[ties] = np.broadcast_to(b, (N, D))[ties]
    a[rng.random((N, D)) < 0.15] = 0.25
    a[rng.random((N, D)) < 0.1] = 0.0
    a[0, :4] = -0.0
    a[1] = b
    t = rng.standard_normal((N, D)).astype(np.float32)
    for name, value in (("a", a), ("b", b), ("t", t)):
        np.save(os.path.join(d, name + ".npy"), value)


def check(d):
    load = lambda name: torch.tensor(np.load(os.path.join(d, name + ".npy")).astype(np.float64))
    a, b, t = load("a"), load("b"), load("t")
    w = {"w1": torch.ones(D), "w2": torch.ones(N, D), "w3": torch.ones(D), "w4": torch.ones(D),
         "w5": torch.ones(D)}
    w = {k: v.double().requires_grad_() for k, v in w.items()}
    quarter = torch.tensor(0.25, dtype=torch.float64)
    y = (torch.maximum(a * w["w1"], b * w["w4"]) + 2 * torch.minimum(a * w["w2"], quarter)
         + 3 * torch.abs(a * w["w3"] - b * w["w5"]))
    loss = torch.mean((y - t) ** 2)
    loss.backward()
    want = {"y": y.detach(), "loss": loss.detach()}
    want.update({"grad." + k: v.grad for k, v in w.items()})
    check_outputs(d, {name: ref.numpy() for name, ref in want.items()}, 1e-6)


if __name__ == "__main__":
    (make_inputs if sys.argv[1] == "inputs" else check)(sys.argv[2])
