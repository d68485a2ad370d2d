#!/usr/bin/env python3
"""Writes and reads small .npy files (format 1.0) without numpy.

  npy.py write FILE DTYPE SHAPE [VALUES]
      DTYPE is f4, f2, i4 or i8 (little endian); SHAPE is comma-separated
      dims (empty for a scalar); VALUES is comma-separated numbers, cycled
      to fill the tensor (default 0).
  npy.py read FILE
      prints `descr <d> shape <dims>` and then the values, one per line
      (floats with %.9g).
"""

import ast
import struct
import sys

FORMATS = {"f4": "f", "f2": "e", "i4": "i", "i8": "q"}


def write(path, dtype, shape, values):
    dims = [int(d) for d in shape.split(",") if d]
    count = 1
    for d in dims:
        count *= d
    numbers = [float(v) if dtype[0] == "f" else int(v)
               for v in values.split(",") if v] or [0]
    data = [numbers[i % len(numbers)] for i in range(count)]
    shape_text = "(" + "".join("%d, " % d for d in dims)[:-2] + \
        ("," if len(dims) == 1 else "") + ")"
    header = "{'descr': '<%s', 'fortran_order': False, 'shape': %s, }" % (
        dtype, shape_text)
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)))
        f.write(header.encode("latin1"))
        f.write(struct.pack("<%d%s" % (count, FORMATS[dtype]), *data))


def read(path):
    data = open(path, "rb").read()
    if data[:6] != b"\x93NUMPY":
        sys.exit("not a .npy file")
    major = data[6]
    if major == 1:
        length, start = struct.unpack("<H", data[8:10])[0], 10
    else:
        length, start = struct.unpack("<I", data[8:12])[0], 12
    header = ast.literal_eval(data[start:start + length].decode("latin1"))
    descr, dims = header["descr"], header["shape"]
    count = 1
    for d in dims:
        count *= d
    body = data[start + length:]
    values = struct.unpack("<%d%s" % (count, FORMATS[descr[1:]]),
                           body[:count * struct.calcsize(FORMATS[descr[1:]])])
    print("descr %s shape %s" % (descr, ",".join(str(d) for d in dims)))
    for v in values:
        print("%.9g" % v if isinstance(v, float) else v)


if __name__ == "__main__":
    if sys.argv[1] == "write":
        write(sys.argv[2], sys.argv[3], sys.argv[4],
              sys.argv[5] if len(sys.argv) > 5 else "")
    else:
        read(sys.argv[2])
