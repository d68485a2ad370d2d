#!/usr/bin/env bash
# The GPU check (on a machine with an NVIDIA GPU), from benchmarks/gpu/prepare.sh:
# 1. numerics: every executable on --device cuda against --device cpu, same
#    seed, inputs and weights; 2. bf16 matmul 4096^3 and 8192^3: Loom's kernel
#    time (CUDA events, from --trace) against torch.matmul (cuBLAS) measured
#    in the same run, printed as time(cuBLAS)/time(Loom).
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-python3}
work=$(mktemp -d)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader || true

echo "== numerics: cuda vs cpu"
for exe in mlp gpt matmul4096; do
  "$here/$exe" --device cpu --random-inputs --seed 7 --save-weights "$work/$exe.w" \
      $("$here/$exe" --info | awk '$3 == "output" {printf "--output %s=%s/%s.cpu.%s.npy ", $2, "'"$work"'", "'"$exe"'", $2}') > /dev/null
  "$here/$exe" --device cuda --random-inputs --seed 7 --weights "$work/$exe.w" \
      $("$here/$exe" --info | awk '$3 == "output" {printf "--output %s=%s/%s.gpu.%s.npy ", $2, "'"$work"'", "'"$exe"'", $2}') > /dev/null \
    || { echo "$exe: cuda run failed"; continue; }
  $py "$here/compare.py" "$work" "$exe"
done

echo "== bf16 matmul: Loom vs cuBLAS (torch)"
for size in 4096 8192; do
  best=""
  for run in 1 2 3; do
    "$here/matmul$size" --device cuda --random-inputs --seed $run --trace "$work/t.json" > /dev/null || break
    us=$($py -c "import json,sys; print(sum(e['dur'] for e in json.load(open(sys.argv[1]))['traceEvents'] if e.get('ph')=='X'))" "$work/t.json")
    best=$($py -c "print(min(float('$us'), float('${best:-inf}')))")
  done
  $py - "$size" "${best:-nan}" <<'PY'
import sys
n, loom_us = int(sys.argv[1]), float(sys.argv[2])
try:
    import torch
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3): a @ b
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(10):
        start.record(); a @ b; stop.record(); torch.cuda.synchronize()
        best = min(best, start.elapsed_time(stop) * 1e3)
except Exception as e:  # no torch or no GPU: report Loom's figure alone
    print(f"{n}: loom {2*n**3/loom_us/1e6:.1f} TFLOP/s; cuBLAS baseline unavailable ({e})")
    sys.exit(0)
flops = 2.0 * n ** 3
print(f"{n}: loom {flops/loom_us/1e6:8.1f} TFLOP/s  cuBLAS {flops/best/1e6:8.1f} TFLOP/s"
      f"  time(cuBLAS)/time(Loom) = {best/loom_us:.3f}")
PY
done
rm -rf "$work"
