#!/usr/bin/python3
"""Odd-shaped matmuls on one CPU thread: Loom's kernel time against PyTorch's
(one thread), both measured in this run.

The shapes are those that fall outside whole register tiles (8 x 32 on
AVX-512): attention scores `q @ transpose(k)` at sequence lengths that are
not multiples of 32, narrow outputs (a regression head, a 16-class
classifier), an odd vocabulary, and an odd square. Loom's time is the best
of REPEAT runs of the kernel (`--repeat`, from `--trace`); torch's the
best of as many calls. ratio = torch / loom (above 1: Loom faster).

  benchmarks/cpu/shapes.py [BUILD-DIR] [--repeat N]
"""
import os
import sys
import tempfile

# Debian's torch runs f32 matmuls in OpenBLAS's pthread build, whose pool
# set_num_threads does not bound (benchmarks/README.md).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import torch  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from timing import best_ms, loom_kernels_ms, parse_args  # noqa: E402

CASES = [
    # name, precision, a shape, b shape, transpose b
    ("scores T=1000 hd=32", "f32", [1, 8, 1000, 32], [1, 8, 1000, 32], True),
    ("scores T=1000 hd=64", "f32", [1, 8, 1000, 64], [1, 8, 1000, 64], True),
    ("scores T=200 hd=32", "f32", [4, 8, 200, 32], [4, 8, 200, 32], True),
    ("scores T=200 hd=128", "f32", [4, 8, 200, 128], [4, 8, 200, 128], True),
    ("scores T=1000 hd=64", "bf16", [1, 8, 1000, 64], [1, 8, 1000, 64], True),
    ("regression N=1", "f32", [4096, 512], [512, 1], False),
    ("classes N=16", "f32", [4096, 512], [512, 16], False),
    ("N=48", "f32", [4096, 512], [512, 48], False),
    ("vocab 50257", "f32", [64, 256], [256, 50257], False),
    ("vocab 50257", "bf16", [64, 256], [256, 50257], False),
    ("1023^3", "f32", [1023, 1023], [1023, 1023], False),
    ("1023^3", "bf16", [1023, 1023], [1023, 1023], False),
]


def loom_ms(build, work, precision, a, b, transposed, repeat):
    return loom_kernels_ms(
        build, work,
        f"precision {precision} accumulate f32\nmodel m {{\n"
        f"  input a : {a}\n  input b : {b}\n"
        f"  output c = a @ {'transpose(b)' if transposed else 'b'}\n}}\n", repeat)


def torch_ms(precision, a, b, transposed, repeat):
    dtype = torch.bfloat16 if precision == "bf16" else torch.float32
    x, y = torch.randn(a, dtype=dtype), torch.randn(b, dtype=dtype)
    return best_ms(lambda: x @ (y.transpose(-1, -2) if transposed else y), repeat)


def main():
    args = parse_args(__doc__)
    torch.set_num_threads(1)
    print(f"{'case':22s} {'dtype':5s} {'loom ms':>9s} {'torch ms':>9s} {'ratio':>6s}")
    with tempfile.TemporaryDirectory() as work:
        for name, precision, a, b, transposed in CASES:
            loom = loom_ms(args.build, work, precision, a, b, transposed, args.repeat)
            base = torch_ms(precision, a, b, transposed, args.repeat)
            print(f"{name:22s} {precision:5s} {loom:9.2f} {base:9.2f} {base / loom:6.2f}", flush=True)


if __name__ == "__main__":
    sys.exit(main())
