#!/usr/bin/env python3
"""Checks `./model evaluate` against the same model in PyTorch
(test/Driver/evaluate.test).

usage: evaluate_torch.py gpt-train|llama WEIGHTS.safetensors DATA OUTPUT...

Each OUTPUT is what one evaluate run printed (`batch k/N  loss L` lines,
then `eval loss M over N batches (X tokens), perplexity P`). The windows
are train --data's (docs/runtime.md): batch s (from 0), row b starts at
((s B + b) T) mod (len - T - 1) of DATA's bytes, tokens the first T of the
T + 1 bytes there and labels the last T. Each batch's loss, computed by
gpt_train_torch.py's (or llama_train_torch.py's) model in f32, must equal
Loom's within 1e-5 relative, and the mean, the token count and the
perplexity must follow from them. Prints one line per mismatch and PASS or
FAIL.
"""
import math
import re
import sys

import numpy as np
import torch

import gpt_train_torch as gpt
import llama_train_torch as llama


def parse(text):
    losses = [float(m.group(2)) for m in re.finditer(r"^batch (\d+)/\d+  loss (\S+)$", text, re.M)]
    summary = re.search(r"^eval loss (\S+) over (\d+) batches \((\d+) tokens\), perplexity (\S+)$",
                        text, re.M)
    return losses, summary


def main():
    model, weights, data_path, outputs = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    torch.set_num_threads(1)
    module = gpt if model == "gpt-train" else llama
    batch, length = module.B, module.T
    p = gpt.params_of(weights)
    data = np.frombuffer(open(data_path, "rb").read(), np.uint8).astype(np.int64)
    span = len(data) - length - 1
    ok = True
    for path in outputs:
        losses, summary = parse(open(path).read())
        if not losses or not summary:
            print(f"{path}: no batch lines or no summary")
            ok = False
            continue
        with torch.no_grad():
            for s, got in enumerate(losses):
                starts = [((s * batch + b) * length) % span for b in range(batch)]
                rows = np.stack([data[start:start + length + 1] for start in starts])
                want = float(torch.nn.functional.cross_entropy(
                    module.logits_of(p, torch.from_numpy(rows[:, :-1])).reshape(-1, module.V),
                    torch.from_numpy(rows[:, 1:]).reshape(-1)))
                # Written so that a NaN loss fails (every comparison with
                # NaN is false).
                if not abs(got - want) <= 1e-5 * want:
                    ok = False
                    print(f"{path}: batch {s + 1}: loss {got} torch {want:.7g}")
        mean, count, tokens, perplexity = (float(summary.group(1)), int(summary.group(2)),
                                           int(summary.group(3)), float(summary.group(4)))
        exact = sum(losses) / len(losses)
        if (count != len(losses) or tokens != count * batch * length
                or not abs(mean - exact) <= 1e-6 * exact
                or not abs(perplexity - math.exp(mean)) <= 1e-4 * perplexity):
            ok = False
            print(f"{path}: summary {summary.group(0)!r} does not follow from {len(losses)} "
                  f"batches of mean {exact:.7g}")
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
