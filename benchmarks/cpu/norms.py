#!/usr/bin/python3
"""Layernorm and rmsnorm, forward and backward, on one CPU thread: Loom's
kernel time against PyTorch's (one thread), both measured in this run.

Each case is the gradient program (`loomc --gradients`) of
`mse(norm(a), t)` for a param `a` of SHAPE and f32 scale (and bias): the
norm's forward, the loss and its gradient, and the norm's backward
(`loom.norm_grad`: dx and the scale and bias gradients). torch runs the
same with autograd (`layer_norm`, or rmsnorm written out as
`x * rsqrt(mean(x^2) + eps) * scale`, which is how torch 1.13 has it).
Loom's time is the best of REPEAT runs of all the program's kernels
(`--repeat`, from `--trace`); torch's the best of as many calls.
ratio = torch / loom (above 1: Loom faster).

  benchmarks/cpu/norms.py [BUILD-DIR] [--repeat N]
"""
import os
import sys
import tempfile

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import best_ms, loom_kernels_ms, parse_args  # noqa: E402

CASES = [
    # norm, precision, shape of a
    ("layernorm", "f32", [4096, 1024]),
    ("layernorm", "bf16", [4096, 1024]),
    ("layernorm", "f32", [8, 512, 768]),
    ("rmsnorm", "f32", [4096, 1024]),
    ("rmsnorm", "bf16", [8, 512, 4096]),
]


def loom_ms(build, work, norm, precision, shape, repeat):
    d = shape[-1]
    call = "layernorm(a, g, b)" if norm == "layernorm" else "rmsnorm(a, g)"
    bias = f"  param b : f32[{d}] init normal(0.1)\n" if norm == "layernorm" else ""
    return loom_kernels_ms(
        build, work,
        f"precision {precision} accumulate f32\nmodel n {{\n"
        f"  input t : {shape}\n  param a : {shape} init normal(1)\n"
        f"  param g : f32[{d}] init uniform(0.5, 1.5)\n{bias}"
        f"  output l = mse({call}, t)\n"
        f"  train {{\n    loss = l\n    optimizer sgd(lr = 0.1)\n  }}\n}}\n",
        repeat, loomc_args=["--gradients"])


def torch_ms(norm, precision, shape, repeat):
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    d = shape[-1]
    a = torch.randn(shape, dtype=dtype, requires_grad=True)
    t = torch.randn(shape, dtype=dtype)
    g = torch.empty(d).uniform_(0.5, 1.5).requires_grad_()
    b = (0.1 * torch.randn(d)).requires_grad_()

    def step():
        if norm == "layernorm":
            y = torch.nn.functional.layer_norm(a.float(), (d,), g, b, 1e-5)
        else:
            x = a.float()
            y = x * torch.rsqrt((x * x).mean(-1, keepdim=True) + 1e-5) * g
        loss = ((y.to(dtype).float() - t.float()) ** 2).mean()
        torch.autograd.grad(loss, [a, g] + ([b] if norm == "layernorm" else []))

    return best_ms(step, repeat)


def main():
    args = parse_args(__doc__)
    torch.set_num_threads(1)
    print(f"{'case':10s} {'dtype':5s} {'shape':16s} {'loom ms':>9s} {'torch ms':>9s} {'ratio':>6s}")
    with tempfile.TemporaryDirectory() as work:
        for norm, precision, shape in CASES:
            loom = loom_ms(args.build, work, norm, precision, shape, args.repeat)
            base = torch_ms(norm, precision, shape, args.repeat)
            print(f"{norm:10s} {precision:5s} {str(shape):16s} {loom:9.2f} {base:9.2f} "
                  f"{base / loom:6.2f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
