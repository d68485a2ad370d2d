#!/usr/bin/env bash
# Causal attention on one CPU thread (B=1, H=8, head dim 64, causal, scale
# 1/8): Loom's fused attention (loom-fuse-attention: blocks of 64 queries
# and keys, the [T, T] scores never held) against PyTorch 1.13's eager
# composition on one thread (baseline.py; 1.13 has no SDPA), in f32 and
# bf16, both measured in this run on the same inputs; also Loom with
# --fuse-attention=false (the five ops, [T, T] scores in the arena).
# Prints warm ms of each, the ratio pytorch/loom (> 1: Loom is faster),
# Loom's arena fused and not, and the outputs' largest difference.
#   benchmarks/attention/run.sh [build-dir] [repeats] [T...]
set -euo pipefail
build=${1:-build}
repeats=${2:-10}
shift $(( $# > 2 ? 2 : $# ))
sizes=("$@")
[ ${#sizes[@]} -gt 0 ] || sizes=(512 1024 2048)
source "$(dirname "$0")/setup.sh"
arena() { sed -n 's/.*arena \([0-9.]*\) MiB.*/\1/p'; }
printf '%-6s %-5s %10s %12s %10s %7s %12s %14s  %s\n' T dtype "loom ms" "unfused ms" "torch ms" ratio "arena MiB" "unfused MiB" "rel. diff"
for t in "${sizes[@]}"; do
  d=$work/$t
  mkdir -p "$d"
  /usr/bin/python3 - "$d" "$t" <<'PY'
import sys, numpy as np
rng = np.random.default_rng(3)
for n in "qkv":
    np.save(f"{sys.argv[1]}/{n}.npy", rng.standard_normal((1, 8, int(sys.argv[2]), 64)).astype(np.float32))
PY
  for dtype in f32 bf16; do
    sed -e "s/^dim T = .*/dim T = $t/" -e "s/^precision f32/precision $dtype/" \
      "$here/attention.loom" > "$d/$dtype.loom"
    fused=$("$build/bin/loomc" "$d/$dtype.loom" -o "$d/$dtype" 2>&1 | arena)
    unfused=$("$build/bin/loomc" "$d/$dtype.loom" --fuse-attention=false -o "$d/$dtype-unfused" 2>&1 | arena)
    args=(--input q="$d/q.npy" --input k="$d/k.npy" --input v="$d/v.npy")
    (cd "$d" && "./$dtype" "${args[@]}" --output o="$d/o.npy" > /dev/null)
    loom=$(/usr/bin/python3 "$here/../gpt/loom_time.py" "$repeats" "$d/$dtype" "${args[@]}")
    plain=$(/usr/bin/python3 "$here/../gpt/loom_time.py" "$repeats" "$d/$dtype-unfused" "${args[@]}")
    ref=$(/usr/bin/python3 "$here/baseline.py" "$d" "$dtype" "$repeats")
    /usr/bin/python3 - "$t" "$dtype" "$loom" "$plain" "$fused" "$unfused" "$ref" <<'PY'
import json, sys
t, dtype, loom, plain, fused, unfused, ref = sys.argv[1:]
ref = json.loads(ref)
loom, plain = float(loom), float(plain)
print(f"{t:6} {dtype:5} {loom:10.2f} {plain:12.2f} {ref['torch_ms']:10.2f} "
      f"{ref['torch_ms'] / loom:7.2f} {float(fused):12.2f} {float(unfused):14.2f}  {ref['rel_diff']:.1e}")
PY
  done
done
"$work/${sizes[0]}/f32" --info | grep '^cpu' || true
echo "pytorch $(/usr/bin/python3 -c 'import torch; print(torch.__version__)'), 1 thread"
