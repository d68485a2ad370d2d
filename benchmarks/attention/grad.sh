#!/usr/bin/env bash
# Causal attention's gradients on one CPU thread (B=1, H=8, head dim 64,
# causal, scale 1/8, an mse loss): Loom's fused attention with --gradients
# (the forward keeping its rows' log-sum-exp, one loom.attention_grad:
# blocks of 64, one pass over the key blocks per block of queries) against
# PyTorch 1.13's eager autograd of the same composition on one thread
# (baseline_grad.py), in f32 and bf16, on the same params. With a second
# build directory, that build's loomc is timed too (a before/after of a
# change, in the same run). Prints warm ms of a forward + backward each, the
# ratio pytorch/loom (> 1: Loom is faster) and the gradients' largest
# difference from PyTorch's.
#   benchmarks/attention/grad.sh [build-dir] [repeats] [other-build-dir] [T...]
set -euo pipefail
build=${1:-build}
repeats=${2:-5}
other=${3:-}
shift $(( $# > 3 ? 3 : $# ))
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(512 1024 2048)
source "$(dirname "$0")/setup.sh"
printf '%-6s %-5s %10s %10s %10s %7s  %s\n' T dtype "loom ms" "other ms" "torch ms" ratio "rel. diff"
for t in "${sizes[@]}"; do
  d=$work/$t
  mkdir -p "$d"
  /usr/bin/python3 - "$d" "$t" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(3)
np.save(f"{sys.argv[1]}/target.npy", rng.standard_normal((1, 8, int(sys.argv[2]), 64)).astype(np.float32))
PY
  for dtype in f32 bf16; do
    sed -e "s/^dim T = .*/dim T = $t/" -e "s/^precision f32/precision $dtype/" \
      "$here/grad.loom" > "$d/$dtype.loom"
    compile() { local out; out=$("$@" 2>&1) || { echo "$out" >&2; exit 1; }; }
    compile "$build/bin/loomc" --gradients "$d/$dtype.loom" -o "$d/$dtype"
    args=(--seed 1 --input target="$d/target.npy")
    (cd "$d" && "./$dtype" "${args[@]}" --save-weights "$d/w.safetensors" \
       --output grad.q="$d/grad.q.npy" --output grad.k="$d/grad.k.npy" \
       --output grad.v="$d/grad.v.npy" > /dev/null)
    loom=$(/usr/bin/python3 "$here/../gpt/loom_time.py" "$repeats" "$d/$dtype" "${args[@]}")
    before=nan
    if [ -n "$other" ]; then
      compile "$other/bin/loomc" --gradients "$d/$dtype.loom" -o "$d/$dtype-other"
      before=$(/usr/bin/python3 "$here/../gpt/loom_time.py" "$repeats" "$d/$dtype-other" "${args[@]}")
    fi
    ref=$(/usr/bin/python3 "$here/baseline_grad.py" "$d" "$dtype" "$repeats")
    /usr/bin/python3 - "$t" "$dtype" "$loom" "$before" "$ref" <<'PY'
import json, sys
t, dtype, loom, before, ref = sys.argv[1:]
ref = json.loads(ref)
loom = float(loom)
print(f"{t:6} {dtype:5} {loom:10.2f} {float(before):10.2f} {ref['torch_ms']:10.2f} "
      f"{ref['torch_ms'] / loom:7.2f}  {ref['rel_diff']:.1e}")
PY
  done
done
"$work/${sizes[0]}/f32" --info | grep '^cpu' || true
echo "pytorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)'), 1 thread"
