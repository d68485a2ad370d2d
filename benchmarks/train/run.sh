#!/usr/bin/env bash
# Training speed: one AdamW step of examples/gpt-train.loom (and of
# examples/llama.loom, f32) on one CPU rank,
# at its own size and at examples/gpt.loom's, in f32 and in bf16 (precision bf16 accumulate f32), Loom's executable
# against the same model in PyTorch on one thread (test/Numerics/
# gpt_train_torch.py; bf16 under torch.cpu.amp.autocast), both measured in
# this run, on the same weights and data windows; prints tokens/s of each,
# the ratio, and how far the two runs' losses are apart over the first 20
# steps (a check that both train the same model). Loom's kernels are compiled for the host CPU (loomc's
# default, --cpu native); the script prints which vector extensions it has.
# Needs Debian's python3-torch (`make bench-deps`).
#   benchmarks/train/run.sh [build-dir] [steps]
set -euo pipefail
# One thread for the baselines too: Debian's PyTorch does f32 matmuls in
# OpenBLAS's pthread build, whose own pool torch.set_num_threads(1) does not
# bound (measured: 2 threads, 190 vs 101 GFLOP/s at 1024^3 on 2 cores).
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
build=${1:-build}
steps=${2:-60}
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
data=/usr/share/common-licenses/GPL-3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "run.sh: needs PyTorch for /usr/bin/python3 (apt-get install python3-torch, or make bench-deps)" >&2
  exit 1
fi

isa=$(grep -o -w 'avx512f\|avx512_bf16\|amx_bf16\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')
echo "host CPU: ${isa:-no AVX2}"
printf '%-40s %10s %10s %6s %s\n' "" "loom" "pytorch" "ratio" "losses, first 20 steps"
# Two sizes of the one model: examples/gpt-train.loom's own, and
# examples/gpt.loom's (the same blocks: B=8, T=64, V=1024, D=256, 8 heads,
# 4 layers; its script edited to those dims, its train section kept), the
# baseline sized alike (LOOM_GPT_SIZES). f32, then bf16 (precision bf16
# accumulate f32; torch under bf16 autocast).
gpt_size=(-e 's/^dim B = .*/dim B = 8/' -e 's/^dim T = .*/dim T = 64/'
  -e 's/^dim V = .*/dim V = 1024/' -e 's/^dim D = .*/dim D = 256/'
  -e 's/^dim H = .*/dim H = 8/' -e 's/for i in 0\.\.2 {/for i in 0..4 {/'
  -e 's/\* 0\.25)/* 0.17677669529)/')
# row LABEL SCRIPT REFERENCE [ARG...]: SCRIPT's step built and trained
# $steps steps, then the same model in PyTorch (REFERENCE, a
# test/Numerics/*_train_torch.py, with ARGs after its rtol) from the same
# weights on the same windows; one row of the table.
row() {
  local label=$1 script=$2 reference=$3
  shift 3
  "$build/bin/loomc" "$script" --train -o "$work/step" \
    > /dev/null 2> "$work/loomc.err" || { cat "$work/loomc.err" >&2; exit 1; }
  # One thread (exported above): the CPU kernels are single-threaded.
  "$work/step" train --steps "$steps" --data "$data" \
    --save-weights "$work/w.safetensors" --log "$work/loom.jsonl" > /dev/null
  local loom torch_json
  loom=$(/usr/bin/python3 -c "
import json, sys
rates = sorted(json.loads(l)['tokens_per_s'] for l in open(sys.argv[1]))[5:]
print(rates[len(rates) // 2])" "$work/loom.jsonl")
  # The reference's loss check is the test's business (rtol inf here: it
  # never fails); the difference shows in the last column.
  torch_json=$(/usr/bin/python3 "$root/test/Numerics/$reference" \
    "$work/w.safetensors" "$data" "$work/loom.jsonl" "$steps" inf "$@" | tail -1)
  /usr/bin/python3 - "$label" "$loom" "$torch_json" <<'PY'
import json, sys
label, loom, ref = sys.argv[1], float(sys.argv[2]), json.loads(sys.argv[3])
torch_rate = ref["torch_tokens_per_s"]
label = f"{label} step, tokens/s (torch {ref['torch_version']})"
print(f"{label:40} {loom:10.0f} {torch_rate:10.0f} {loom / torch_rate:6.2f} "
      f"max rel diff {ref['loss_rel_err_first_20']:.1e}")
PY
}
for model in gpt-train gpt; do
  case $model in
    gpt-train) edit=(); sizes=16,32,256,64,4,256,2 ;;
    gpt) edit=("${gpt_size[@]}"); sizes=8,64,1024,256,8,1024,4 ;;
  esac
  for precision in f32 bf16; do
    name=$model-$precision
    sed "${edit[@]}" -e "s/^precision f32 accumulate f32/precision $precision accumulate f32/" \
      "$root/examples/gpt-train.loom" > "$work/$name.loom"
    LOOM_GPT_SIZES=$sizes row "$model $precision" "$work/$name.loom" gpt_train_torch.py "$precision"
  done
done
# examples/llama.loom's step (f32: RMSNorm, rotary embeddings, SwiGLU)
# against the same Llama in PyTorch.
row "llama f32" "$root/examples/llama.loom" llama_train_torch.py
