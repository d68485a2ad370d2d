#!/usr/bin/env bash
# CPU matmul speed: Loom's kernel against numpy's single-threaded f32 matmul,
# both measured in this run on this machine; prints the ratio. bf16-bt is
# `a @ transpose(b)` (a K-contiguous B, which Loom copies once before its
# register tiles), against numpy's `a @ b.T`.
#   benchmarks/cpu/run.sh [build-dir] [size...]
set -euo pipefail
build=${1:-build}
shift || true
sizes=${*:-256 512 1024}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

printf '%-6s %-7s %12s %12s %10s\n' size dtype "loom GFLOP/s" "numpy GFLOP/s" ratio
for size in $sizes; do
  for variant in f32 bf16 bf16-bt; do
    precision=${variant%-bt}
    sed "s/SIZE/$size/g; s/PRECISION/$precision/" "$here/matmul.loom" > "$work/m.loom"
    [ "$variant" = bf16-bt ] && sed -i 's/a @ b/a @ transpose(b)/' "$work/m.loom"
    "$build/bin/loomc" "$work/m.loom" -o "$work/m" 2>/dev/null
    # The kernel's own time, from the trace (best of 5 runs).
    best=""
    for run in 1 2 3 4 5; do
      "$work/m" --random-inputs --seed "$run" --trace "$work/t.json" > /dev/null
      us=$(/usr/bin/python3 -c "import json,sys; print(sum(e['dur'] for e in json.load(open(sys.argv[1]))['traceEvents'] if e.get('ph')=='X'))" "$work/t.json")
      best=$(/usr/bin/python3 -c "print(min(float('$us'), float('${best:-inf}')))")
    done
    OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 /usr/bin/python3 - "$size" "$variant" "$best" <<'PY'
import sys, time
import numpy as np
n, variant, loom_us = int(sys.argv[1]), sys.argv[2], float(sys.argv[3])
a = np.random.rand(n, n).astype(np.float32)
b = np.random.rand(n, n).astype(np.float32)
if variant.endswith("-bt"):
    b = b.T
best = float("inf")
for _ in range(5):
    t = time.perf_counter(); a @ b; best = min(best, time.perf_counter() - t)
flops = 2.0 * n ** 3
loom = flops / (loom_us * 1e-6) / 1e9
ref = flops / best / 1e9
print(f"{n:<6} {variant:<7} {loom:12.2f} {ref:12.2f} {loom / ref:10.2f}")
PY
  done
done
