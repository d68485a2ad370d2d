#!/usr/bin/env python3
"""Writes deterministic .npy inputs for the numerics tests (test/Numerics).

usage: gen_inputs.py --seed N DIR SPEC...

Each SPEC is NAME:KIND:SHAPE, SHAPE a comma-separated list of sizes:

  x:f32:16,64        standard normal, saved as float32 ('<f4')
  x:bf16:16,64       standard normal, saved as float32 (NumPy has no bf16;
                     the executable rounds to bf16 when it reads the file,
                     and the reference does the same rounding)
  x:f16:16,64        standard normal, saved as float16 ('<f2')
  ids:int96:2,16     integers uniform in [0, 96), saved as int32

The file is DIR/NAME.npy. Each input gets its own generator, seeded from
--seed and its position in the list, so adding an input does not change the
others.
"""
import argparse
import os
import sys

import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("dir")
    parser.add_argument("specs", nargs="+")
    args = parser.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    for index, spec in enumerate(args.specs):
        try:
            name, kind, shape_text = spec.split(":")
            shape = tuple(int(s) for s in shape_text.split(","))
        except ValueError:
            sys.exit(f"gen_inputs.py: bad spec '{spec}' (expected NAME:KIND:SHAPE)")
        rng = np.random.default_rng([args.seed, index])
        if kind in ("f32", "bf16"):
            value = rng.standard_normal(shape).astype(np.float32)
        elif kind == "f16":
            value = rng.standard_normal(shape).astype(np.float16)
        elif kind.startswith("int"):
            high = int(kind[3:])
            value = rng.integers(0, high, size=shape, dtype=np.int32)
        else:
            sys.exit(f"gen_inputs.py: unknown kind '{kind}' in '{spec}'")
        np.save(os.path.join(args.dir, name + ".npy"), value)


if __name__ == "__main__":
    main()
