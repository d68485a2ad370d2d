#!/usr/bin/env bash
# GPT forward speed: the GPT of examples/gpt-train.loom (2 blocks, B=16,
# T=32, D=64, byte vocabulary), forward only, on one CPU thread, in f32 and
# in bf16 (the script's precision line switched to bf16 accumulate f32),
# Loom's executable against the same model in PyTorch (benchmarks/gpt/
# baseline.py), both measured in this run on the same weights and tokens.
# Loom's time per forward is warm (loom_time.py: --repeat N+1 against
# --repeat 1, best of 3), so start-up and initialization drop out.
# Prints ms per forward of each, the ratio pytorch/loom (> 1: Loom is
# faster), the kernels' CPU path (--info) and how far the two logits are
# apart. Needs Debian's python3-torch (`make bench-deps`).
#   benchmarks/gpt/run.sh [build-dir] [repeats]
set -euo pipefail
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
/usr/bin/python3 - "$work/tokens.npy" <<'PY'
import sys, numpy as np
np.save(sys.argv[1], np.random.default_rng(5).integers(0, 256, (16, 32)).astype(np.int32))
PY

printf '%-6s %12s %12s %8s  %s\n' dtype "loom ms" "pytorch ms" ratio "logits rel. diff"
for dtype in f32 bf16; do
  script=$work/gpt-$dtype.loom
  sed "s/^precision f32 accumulate f32/precision $dtype accumulate f32/" \
    "$root/examples/gpt-train.loom" > "$script"
  "$build/bin/loomc" "$script" -o "$work/gpt-$dtype" > /dev/null 2>&1
  args=(--input tokens="$work/tokens.npy" --input labels="$work/tokens.npy")
  "$work/gpt-$dtype" "${args[@]}" --save-weights "$work/w-$dtype.safetensors" \
    --output logits="$work/logits-$dtype.npy" > /dev/null
  best=$(/usr/bin/python3 "$here/loom_time.py" "$repeats" "$work/gpt-$dtype" "${args[@]}")
  ref=$(/usr/bin/python3 "$here/baseline.py" "$work/w-$dtype.safetensors" "$work/tokens.npy" \
    "$work/logits-$dtype.npy" "$dtype" "$repeats")
  /usr/bin/python3 - "$dtype" "$best" "$ref" <<'PY'
import json, sys
dtype, loom, ref = sys.argv[1], float(sys.argv[2]), json.loads(sys.argv[3])
torch_ms = ref["torch_ms"]
print(f"{dtype:6} {loom:12.3f} {torch_ms:12.3f} {torch_ms / loom:8.2f}  {ref['logits_rel_diff']:.1e}")
PY
done
"$work/gpt-f32" --info | grep '^cpu' || true
echo "pytorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)'), 1 thread; host CPU flags: $(grep -o -w 'avx512f\|avx512_bf16\|amx_bf16\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')"
