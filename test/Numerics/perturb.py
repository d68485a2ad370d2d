#!/usr/bin/env python3
"""Changes one element of one tensor of a .safetensors file (test helper).

usage: perturb.py IN.safetensors OUT.safetensors NAME INDEX DELTA

INDEX is a flat element index; DELTA is added to the element's value, which
is then stored back in the tensor's dtype (F32, F16 or BF16; the 16-bit
types rounded to nearest even). The rest of the file is copied unchanged.
Fails if the stored element does not change.
"""
import json
import struct
import sys

import numpy as np


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__.strip().splitlines()[2])
    src, dst, name, index, delta = sys.argv[1:]
    index, delta = int(index), float(delta)
    with open(src, "rb") as f:
        blob = bytearray(f.read())
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    if name not in header or name == "__metadata__":
        sys.exit(f"perturb.py: no tensor '{name}' in {src}")
    info = header[name]
    dtype = info["dtype"]
    size = {"F32": 4, "F16": 2, "BF16": 2}.get(dtype)
    if size is None:
        sys.exit(f"perturb.py: {name} is {dtype}, not a float tensor")
    begin, end = info["data_offsets"]
    if not 0 <= index < (end - begin) // size:
        sys.exit(f"perturb.py: index {index} out of range for {name}")
    at = 8 + n + begin + index * size
    raw = bytes(blob[at:at + size])
    if dtype == "F32":
        old = float(np.frombuffer(raw, "<f4")[0])
        new = np.array([old + delta], "<f4").tobytes()
    elif dtype == "F16":
        old = float(np.frombuffer(raw, "<f2")[0])
        new = np.array([old + delta], "<f2").tobytes()
    else:
        bits = int(np.frombuffer(raw, "<u2")[0])
        old = float(np.array([bits << 16], np.uint32).view(np.float32)[0])
        f32 = int(np.array([old + delta], np.float32).view(np.uint32)[0])
        f32 = (f32 + 0x7FFF + ((f32 >> 16) & 1)) >> 16
        new = np.array([f32], "<u2").tobytes()
    if new == raw:
        sys.exit(f"perturb.py: {name}[{index}] = {old} does not change by {delta} in {dtype}")
    blob[at:at + size] = new
    with open(dst, "wb") as f:
        f.write(blob)
    print(f"perturb.py: {name}[{index}]: {old!r} -> {old + delta!r} ({dtype})")


if __name__ == "__main__":
    main()
