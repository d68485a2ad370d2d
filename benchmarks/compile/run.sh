#!/usr/bin/env bash
# Compile time against depth: examples/gpt.loom with its two stages' layer
# loops set to 2+2, 6+6 and 24+24 layers, and examples/gpt-train.loom (no
# pipeline) with its layer loop set to 4, 12 and 48, built the way a GPU user builds
# it (`loomc --train --gpu -o`: the one-rank and per-rank plans, the host
# kernels and the sm_90a cubin; without ptxas, `loomc --train -o`). Prints
# the wall seconds of each (the best of RUNS cold compiles: loomc keeps no
# cache), the distinct kernels loomc reports, and the ratio 48 / 4 layers,
# the measure of how much depth costs (identical kernels compile once).
#   benchmarks/compile/run.sh [build-dir] [runs]
set -euo pipefail
build=${1:-build}
runs=${2:-${RUNS:-2}}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
loomc=$build/bin/loomc
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The GPU build needs ptxas (the CUDA toolkit); without it, the CPU one.
mode=(--train --gpu)
what="loomc --train --gpu -o (every plan, sm_90a cubin)"
if ! "$loomc" --gpu "$root/examples/mlp.loom" -o "$work/probe" > /dev/null 2>&1; then
  mode=(--train)
  what="loomc --train -o (every plan; no CUDA toolkit: no cubin)"
fi
echo "compile time: $what, $(nproc) cores, best of $runs cold runs"
# gpt.loom (a pipeline of 2 stages over dp x tp) and gpt-train.loom (no
# pipeline: dp x tp), their layer loops set to LAYERS in all.
depth() {
  local model=$1 layers=$2 half=$(($2 / 2))
  case $model in
    gpt) sed -e "s/for i in 0\.\.2 {/for i in 0..$half {/" -e "s/for i in 2\.\.4 {/for i in $half..$layers {/" ;;
    gpt-train) sed -e "s/for i in 0\.\.2 {/for i in 0..$layers {/" ;;
  esac < "$root/examples/$model.loom"
}
printf '%-10s %-8s %9s %9s\n' model layers seconds kernels
declare -A best
for model in gpt gpt-train; do
  for layers in 4 12 48; do
    depth "$model" "$layers" > "$work/$model$layers.loom"
    seconds=""
    for _ in $(seq "$runs"); do
      start=$(date +%s.%N)
      "$loomc" "${mode[@]}" "$work/$model$layers.loom" -o "$work/$model$layers" 2> "$work/loomc.err" ||
        { cat "$work/loomc.err" >&2; exit 1; }
      end=$(date +%s.%N)
      seconds=$(awk -v s="$start" -v e="$end" -v b="$seconds" 'BEGIN { t = e - s; if (b == "" || t < b) b = t; printf "%.2f", b }')
    done
    kernels=$(grep -o '([0-9]* kernels' "$work/loomc.err" | grep -o '[0-9]*')
    best[$model$layers]=$seconds
    printf '%-10s %-8s %9s %9s\n' "$model" "$layers" "$seconds" "$kernels"
  done
  awk -v m="$model" -v a="${best[${model}4]}" -v b="${best[${model}48]}" -v c="${best[${model}12]}" 'BEGIN {
    printf "%s: 48 / 4 layers: %.2f (goal <= 1.5); 12 layers: %.2f s (goal <= 15 s on 2 cores)\n", m, b / a, c }'
done
