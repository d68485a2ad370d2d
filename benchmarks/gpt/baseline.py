#!/usr/bin/env python3
"""The forward pass of examples/gpt-train.loom's GPT in PyTorch on one
thread, on the weights and tokens a Loom run used: the baseline of
benchmarks/gpt/run.sh.

usage: baseline.py WEIGHTS.safetensors TOKENS.npy LOOM_LOGITS.npy DTYPE REPEATS [MODEL]

MODEL is gpt-train (the default) or gpt (examples/gpt.loom's sizes: 4
blocks, B=8, T=64, D=256, 8 heads, V=1024).

The model is test/Numerics/gpt_train_torch.py's (logits_of). DTYPE is f32
or bf16 (the weights and activations in it, as the script's
precision line; layernorm and softmax in torch's own kernels for that
dtype). Prints a JSON line: the median milliseconds of a forward after
warm-up, torch's version, and the largest difference of torch's logits from
Loom's relative to their largest magnitude (a check that both ran the same
model).
"""
import json
import os
import sys
import time

# Before numpy or torch loads OpenBLAS (Debian's f32 matmuls in both): its
# pthread pool is not bounded by torch.set_num_threads(1).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../test/Numerics"))
from gpt_train_torch import logits_of, use_sizes  # noqa: E402
from mlp_gradients import read_safetensors  # noqa: E402


def main():
    weights, tokens_path, logits_path, dtype, repeats = sys.argv[1:6]
    use_sizes(sys.argv[6] if len(sys.argv) > 6 else "gpt-train")
    torch.set_num_threads(1)
    kind = {"f32": torch.float32, "bf16": torch.bfloat16}[dtype]
    p = {name: torch.from_numpy(np.array(value, dtype=np.float32)).to(kind)
         for name, value in read_safetensors(weights).items()}
    tokens = torch.from_numpy(np.load(tokens_path).astype(np.int64))
    times = []
    with torch.no_grad():
        for _ in range(int(repeats) + 3):
            start = time.perf_counter()
            logits = logits_of(p, tokens)
            times.append(time.perf_counter() - start)
    times = sorted(times[3:])
    loom = np.load(logits_path).astype(np.float32)
    ours = logits.float().numpy()
    print(json.dumps({
        "torch_ms": 1000 * times[len(times) // 2],
        "torch_version": torch.__version__,
        "logits_rel_diff": float(np.abs(ours - loom).max() / np.abs(ours).max()),
    }))


if __name__ == "__main__":
    main()
