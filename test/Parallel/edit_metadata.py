"""Rewrites __metadata__ strings of a safetensors file (a checkpoint's
checksum covers its tensors only), keeping the tensors' bytes:

    edit_metadata.py IN OUT KEY=VALUE [KEY=VALUE ...]
"""
import json
import struct
import sys


def main():
    source, target, edits = sys.argv[1], sys.argv[2], sys.argv[3:]
    raw = open(source, "rb").read()
    (length,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + length])
    for edit in edits:
        key, value = edit.split("=", 1)
        header["__metadata__"][key] = value
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)  # the data stays 8-byte aligned
    open(target, "wb").write(struct.pack("<Q", len(text)) + text + raw[8 + length:])


if __name__ == "__main__":
    main()
