#!/usr/bin/env python3
"""Trains Inputs/unread-param.loom's model with torch.optim in float64 from
the executable's initial weights and compares the trained params (test
helper).

usage: check_unread_param.py W0.safetensors TRAINED.safetensors X.npy T.npy OPTIMIZER STEPS

OPTIMIZER is the torch.optim class name with its keyword settings as the
script gives them, e.g. "AdamW(lr=0.1, weight_decay=0.5)". Weight decay
applies to both params (rank 2). `spare` gets no .grad, so torch.optim
leaves it: it must come back bit for bit; `w` within 1e-5 relative.
"""
import os
import sys

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gradcheck import read_safetensors  # noqa: E402


def main():
    w0_path, trained_path, x_path, t_path, optimizer, steps = sys.argv[1:]
    _, initial = read_safetensors(w0_path)
    _, trained = read_safetensors(trained_path)
    x = torch.tensor(np.load(x_path).astype(np.float64))
    t = torch.tensor(np.load(t_path).astype(np.float64))
    params = {name: torch.tensor(initial[name].astype(np.float64), requires_grad=True)
              for name in ("w", "spare")}
    name, _, settings = optimizer.partition("(")
    step = getattr(torch.optim, name)(list(params.values()), **eval(f"dict({settings}"))
    for _ in range(int(steps)):
        step.zero_grad(set_to_none=True)
        loss = torch.mean((x @ params["w"] - t) ** 2)
        loss.backward()
        step.step()
    ok = True
    same = np.array_equal(trained["spare"], initial["spare"])
    print(f"spare: {'as initialized' if same else 'changed'}: {'ok' if same else 'FAIL'}")
    ok &= same
    want = params["w"].detach().numpy()
    err = float(np.abs(trained["w"] - want).max() / np.abs(want).max())
    print(f"w: rel err {err:.3g} against torch.optim.{name}: {'ok' if err < 1e-5 else 'FAIL'}")
    ok &= err < 1e-5
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
