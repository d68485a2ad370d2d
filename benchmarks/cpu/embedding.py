#!/usr/bin/python3
"""Embedding lookups, forward and gradient, on one CPU thread: Loom's
kernel time against PyTorch's (one thread), both measured in this run.

Each case looks up N ids, uniform over a table of V rows of D, given as
a .npy file (`--random-inputs` gives ids 0 and 1 only, two rows always in
the cache). `forward` is `embedding(t, ids)`; `gradient` is the
`--gradients` program of `mse(embedding(t, ids), u)`: the lookup, the
loss, and the table's gradient (each row's sum of the gradients of the
positions that picked it; loom-scatter-embedding-gradients). torch runs
`F.embedding` and its autograd of the same. Loom's time is the best of
REPEAT runs of all the program's kernels (`--repeat`, from `--trace`);
torch's the best of as many calls. ratio = torch / loom (above 1: Loom
faster).

  benchmarks/cpu/embedding.py [BUILD-DIR] [--repeat N]
"""
import os
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import best_ms, loom_kernels_ms, parse_args  # noqa: E402

CASES = [
    # precision, V, D, N
    ("f32", 50257, 768, 4096),
    ("bf16", 50257, 768, 4096),
    ("f32", 256, 64, 512),
]


def loom_ms(build, work, precision, v, d, n, gradient, repeat):
    ids = os.path.join(work, "ids.npy")
    np.save(ids, np.random.default_rng(0).integers(0, v, n, dtype=np.int32))
    head = (f"precision {precision} accumulate f32\nmodel m {{\n"
            f"  input ids : i32[{n}]\n  param t : [{v}, {d}]\n")
    if gradient:
        text = (head + f"  input u : [{n}, {d}]\n  output l = mse(embedding(t, ids), u)\n"
                "  train {\n    loss = l\n    optimizer sgd(lr = 0.1)\n  }\n}\n")
    else:
        text = head + "  output y = embedding(t, ids)\n}\n"
    return loom_kernels_ms(build, work, text, repeat,
                           loomc_args=["--gradients"] if gradient else [],
                           run_args=["--input", f"ids={ids}"])


def torch_ms(precision, v, d, n, gradient, repeat):
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    table = torch.randn(v, d, dtype=dtype)
    ids = torch.from_numpy(np.random.default_rng(0).integers(0, v, n))
    if not gradient:
        return best_ms(lambda: torch.nn.functional.embedding(ids, table), repeat)
    table.requires_grad_()
    u = torch.randn(n, d, dtype=dtype)

    def step():
        y = torch.nn.functional.embedding(ids, table)
        loss = ((y.float() - u.float()) ** 2).mean()
        torch.autograd.grad(loss, [table])

    return best_ms(step, repeat)


def main():
    args = parse_args(__doc__)
    torch.set_num_threads(1)
    print(f"{'case':9s} {'dtype':5s} {'V x D, N':20s} {'loom ms':>9s} {'torch ms':>9s} {'ratio':>6s}")
    with tempfile.TemporaryDirectory() as work:
        for precision, v, d, n in CASES:
            for gradient in (False, True):
                loom = loom_ms(args.build, work, precision, v, d, n, gradient, args.repeat)
                base = torch_ms(precision, v, d, n, gradient, args.repeat)
                case = "gradient" if gradient else "forward"
                print(f"{case:9s} {precision:5s} {f'{v} x {d}, {n}':20s} {loom:9.3f} "
                      f"{base:9.3f} {base / loom:6.2f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
