#!/usr/bin/env bash
# Training speed: one AdamW step of examples/gpt-train.loom on one CPU rank,
# Loom's executable against the same model in PyTorch on one thread
# (test/Numerics/gpt_train_torch.py), both measured in this run, on the same weights and data
# windows; prints tokens/s of each, the ratio, and how far the two runs'
# losses are apart over the first 20 steps (a check that both train the
# same model). Loom's kernels are compiled for the host CPU (loomc's
# default, --cpu native); the script prints which vector extensions it has.
# Needs Debian's python3-torch (`make bench-deps`).
#   benchmarks/train/run.sh [build-dir] [steps]
set -euo pipefail
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

echo "compiling examples/gpt-train.loom ..."
"$build/bin/loomc" "$root/examples/gpt-train.loom" --train -o "$work/gpt" > /dev/null
# One thread: the CPU kernels are single-threaded; the baseline is too.
OMP_NUM_THREADS=1 "$work/gpt" train --steps "$steps" --data "$data" \
  --save-weights "$work/w.safetensors" --log "$work/loom.jsonl" > /dev/null
loom=$(/usr/bin/python3 -c "
import json, sys
rates = sorted(json.loads(l)['tokens_per_s'] for l in open(sys.argv[1]))[5:]
print(rates[len(rates) // 2])" "$work/loom.jsonl")
# The reference's loss check is the test's business; a difference shows below.
torch_json=$(OMP_NUM_THREADS=1 /usr/bin/python3 "$root/test/Numerics/gpt_train_torch.py" \
  "$work/w.safetensors" "$data" "$work/loom.jsonl" "$steps" 1 | tail -1)
isa=$(grep -o -w 'avx512f\|avx512_bf16\|amx_bf16\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')
/usr/bin/python3 - "$loom" "$torch_json" "$isa" <<'PY'
import json, sys
loom = float(sys.argv[1]); ref = json.loads(sys.argv[2])
print(f"host CPU: {sys.argv[3].strip() or 'no AVX2'}")
torch_rate = ref["torch_tokens_per_s"]
print(f"{'':28} {'tokens/s':>10}")
print(f"{'loom (1 rank, f32)':28} {loom:10.0f}")
print(f"{'pytorch ' + ref['torch_version'] + ' (1 thread)':28} {torch_rate:10.0f}")
print(f"ratio loom/pytorch: {loom / torch_rate:.2f}")
print(f"losses of the first 20 steps: max relative difference {ref['loss_rel_err_first_20']:.1e}")
PY
