#!/usr/bin/env bash
# GPT forward speed: the GPTs of examples/gpt-train.loom (2 blocks, B=16,
# T=32, D=64, byte vocabulary) and examples/gpt.loom (4 blocks, B=8, T=64,
# D=256, V=1024; its pipeline stages run on one rank here), forward only,
# on one CPU thread, in f32 and in bf16 (the script's precision line set to
# f32 or bf16 accumulate f32),
# Loom's executable against the same model in PyTorch (benchmarks/gpt/
# baseline.py), both measured in this run on the same weights and tokens.
# Loom's time per forward is warm (loom_time.py: --repeat N+1 against
# --repeat 1, best of 3), so start-up and initialization drop out.
# Prints ms per forward of each, the ratio pytorch/loom (> 1: Loom is
# faster), the kernels' CPU path (--info) and how far the two logits are
# apart. Needs Debian's python3-torch (`make bench-deps`).
#   benchmarks/gpt/run.sh [build-dir] [repeats]
set -euo pipefail
# One thread for the baselines too: Debian's PyTorch does f32 matmuls in
# OpenBLAS's pthread build, whose own pool torch.set_num_threads(1) does not
# bound (measured: 2 threads, 190 vs 101 GFLOP/s at 1024^3 on 2 cores).
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
build=${1:-build}
repeats=${2:-200}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "run.sh: needs PyTorch for /usr/bin/python3 (apt-get install python3-torch, or make bench-deps)" >&2
  exit 1
fi
printf '%-10s %-6s %12s %12s %8s  %s\n' model dtype "loom ms" "pytorch ms" ratio "logits rel. diff"
for model in gpt-train gpt; do
  # Tokens of the model's batch and vocabulary.
  /usr/bin/python3 - "$work/tokens-$model.npy" "$model" <<'PY'
import sys, numpy as np
shape, vocab = {"gpt-train": ((16, 32), 256), "gpt": ((8, 64), 1024)}[sys.argv[2]]
np.save(sys.argv[1], np.random.default_rng(5).integers(0, vocab, shape).astype(np.int32))
PY
  for dtype in f32 bf16; do
    name=$model-$dtype
    sed "s/^precision [a-z0-9]* accumulate f32/precision $dtype accumulate f32/" \
      "$root/examples/$model.loom" > "$work/$name.loom"
    "$build/bin/loomc" "$work/$name.loom" -o "$work/$name" > /dev/null 2> "$work/loomc.err" \
      || { cat "$work/loomc.err" >&2; exit 1; }
    tokens=$work/tokens-$model.npy
    args=(--input tokens="$tokens" --input labels="$tokens")
    "$work/$name" "${args[@]}" --save-weights "$work/w-$name.safetensors" \
      --output logits="$work/logits-$name.npy" > /dev/null
    best=$(/usr/bin/python3 "$here/loom_time.py" "$repeats" "$work/$name" "${args[@]}")
    ref=$(/usr/bin/python3 "$here/baseline.py" "$work/w-$name.safetensors" "$tokens" \
      "$work/logits-$name.npy" "$dtype" "$repeats" "$model")
    /usr/bin/python3 - "$model" "$dtype" "$best" "$ref" <<'PY'
import json, sys
model, dtype, loom, ref = sys.argv[1], sys.argv[2], float(sys.argv[3]), json.loads(sys.argv[4])
torch_ms = ref["torch_ms"]
print(f"{model:10} {dtype:6} {loom:12.3f} {torch_ms:12.3f} {torch_ms / loom:8.2f}  {ref['logits_rel_diff']:.1e}")
PY
  done
done
"$work/gpt-train-f32" --info | grep '^cpu' || true
echo "pytorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)'), 1 thread; host CPU flags: $(grep -o -w 'avx512f\|avx512_bf16\|amx_bf16\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
