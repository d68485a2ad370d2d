#!/usr/bin/env python3
"""Runs a gradient program (loomc --gradients) with every gradient as an
output file, or compares two such runs (test helper).

  gradients.py run W.safetensors DIR -- COMMAND...
      runs COMMAND (an executable and its arguments, under a launcher or
      not) with `--output loss=DIR/loss.npy` and
      `--output grad.P=DIR/grad.P.npy` for every tensor P of W
  gradients.py compare --dtype f32 W.safetensors ONE_DIR MANY_DIR
      compares the two runs' loss and gradients as compare.py does

The param names come from W, a weights file the same executable saved.
"""
import json
import os
import struct
import subprocess
import sys


def params(path):
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    return [name for name in json.loads(blob[8:8 + n]) if name != "__metadata__"]


def main():
    if len(sys.argv) < 2 or sys.argv[1] not in ("run", "compare"):
        sys.exit(__doc__.strip())
    if sys.argv[1] == "run":
        weights, out, sep, *command = sys.argv[2:]
        if sep != "--" or not command:
            sys.exit(__doc__.strip())
        os.makedirs(out, exist_ok=True)
        outputs = ["--output", f"loss={out}/loss.npy"]
        for p in params(weights):
            outputs += ["--output", f"grad.{p}={out}/grad.{p}.npy"]
        sys.exit(subprocess.run(command + outputs).returncode)
    dtype_flag, dtype, weights, one, many = sys.argv[2:7]
    pairs = [f"loss={one}/loss.npy:{many}/loss.npy"]
    pairs += [f"grad.{p}={one}/grad.{p}.npy:{many}/grad.{p}.npy" for p in params(weights)]
    compare = os.path.join(os.path.dirname(os.path.abspath(__file__)), "compare.py")
    sys.exit(subprocess.run([sys.executable, compare, dtype_flag, dtype] + pairs).returncode)


if __name__ == "__main__":
    main()
