#!/usr/bin/env bash
# Builds, on a machine without a GPU, the executables the GPU check runs:
# each carries CPU kernels and an sm_90a cubin (needs the CUDA toolkit).
#   benchmarks/gpu/prepare.sh [build-dir]   -> build/gpu/*
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$build/gpu"
mkdir -p "$out"
# x86-64-v3 (AVX2): the GPU machine's CPU need not be this one.
loomc="$build/bin/loomc --gpu --gpu-arch=${GPU_ARCH:-sm_90a} --cpu=x86-64-v3"
$loomc "$root/examples/mlp.loom" -o "$out/mlp"
$loomc "$root/test/Numerics/Inputs/gpt-bf16.loom" -o "$out/gpt"
for size in 4096 8192; do
  sed "s/SIZE/$size/g; s/PRECISION/bf16/" "$root/benchmarks/cpu/matmul.loom" > "$out/matmul$size.loom"
  $loomc "$out/matmul$size.loom" -o "$out/matmul$size"
done
cp "$root/benchmarks/gpu/run.sh" "$root/benchmarks/gpu/compare.py" "$out/"
echo "prepared $out: carry it to the GPU machine and run $out/run.sh"
