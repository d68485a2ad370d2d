#!/usr/bin/env bash
# The GPU check (on a machine with an NVIDIA GPU), from benchmarks/gpu/prepare.sh:
# 1. numerics: every kernel of every executable on --device cuda against its
#    CPU kernel on the same inputs (--check-kernels), then each whole run on
#    cuda against the cpu (same seed, inputs and weights; needs numpy), and
#    `generate` of examples/llama.loom (greedy) on cuda against the cpu;
# 2. bf16 matmul 4096^3 and 8192^3: Loom's kernel time (CUDA events, from
#    --trace) against torch.matmul (cuBLAS) measured in the same run, printed
#    as time(cuBLAS)/time(Loom);
# 3. fused attention forward and backward (sequence 2048 and 8192, 16
#    heads of 128, causal, bf16): Loom's one launch (two backward) against
#    torch's scaled_dot_product_attention (and its backward) on the same
#    GPU, time(SDPA)/time(Loom);
# 4. the bf16 training step of gpt-train: every kernel (backward and
#    AdamW included) against the CPU, 20 steps' losses on cuda against the
#    CPU's; and at a size that fills the GPU, tokens/s and MFU against
#    PyTorch's eager step (SDPA) on the same GPU (GPU_CHECK_SKIP_BIG=1
#    leaves the big one out); examples/llama.loom's step in bf16 (sin, cos,
#    RMSNorm, SwiGLU) kernel by kernel and against the CPU's losses too;
# 5. bandwidth: the memory-bound kernels of the memory and gpt executables
#    (bytes from the trace, time from CUDA events) against a device-to-device
#    copy measured in the same run (bandwidth.py).
# Exit status 1 if a kernel or a run failed. On an H200 (2026-12-04, second
# run, mma.sync variants included) its sections took: matmul 90 s, attention
# 34 s, attention-grad 38 s, throughput 140 s, kernels 140 s, runs 48 s,
# training 2 s, bandwidth 20 s, NCU=1's profiles 25 s. Since then the
# mma.sync variants run only with GPU_CHECK_MMA_SYNC=1, and the big
# model's params initialize on every core (its host-side init had been
# ~25 s a run). Run it in parts where a device call has a time limit:
#   run.sh [SECTION...]   (none: all) sections: kernels runs matmul
#   attention attention-grad training throughput bandwidth sanitizer
#   torch-compile
# e.g. `run.sh kernels attention matmul`, then `run.sh runs training ...`.
set -uo pipefail
sections="kernels runs matmul attention attention-grad training throughput bandwidth sanitizer torch-compile"
for wanted in "$@"; do
  case " $sections " in
    *" $wanted "*) ;;
    *) echo "run.sh: unknown section '$wanted' (sections: $sections)" >&2; exit 2 ;;
  esac
done
# want SECTION: whether this run includes SECTION (every one without
# arguments).
want() {
  [ $# -eq 1 ] || return 1
  [ ${#requested[@]} -eq 0 ] && return 0
  case " ${requested[*]} " in *" $1 "*) return 0 ;; esac
  return 1
}
requested=("$@")
here=$(cd "$(dirname "$0")" && pwd)
py=${PYTHON:-python3}
work=$(mktemp -d)
# GPU_CHECK_KEEP=DIR keeps the full --check-kernels tables (DIR/checks.tgz),
# e.g. to study a failing kernel's worst elements after the GPU is gone.
keep() {
  if [ -n "${GPU_CHECK_KEEP:-}" ]; then
    tar czf "$GPU_CHECK_KEEP/checks.tgz" -C "$work" $(cd "$work" && ls -- *.check 2>/dev/null) \
      || echo "GPU_CHECK_KEEP: could not write $GPU_CHECK_KEEP/checks.tgz"
  fi
  rm -rf "$work"
}
trap keep EXIT
# Every function loaded with the image: a lazy load at a function's first
# launch would land between its CUDA events and inflate its time.
export CUDA_MODULE_LOADING=EAGER
# Open MPI's libraries, carried by prepare.sh (single-rank runs never
# initialize MPI, but the executables link it).
export LD_LIBRARY_PATH="$here/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
status=0

# Runs an executable with a time limit of GPU_CHECK_LIMIT seconds (default
# 120: a hung kernel must not hang the check); its stderr goes to $work/err.
seconds=${GPU_CHECK_LIMIT:-120}
limit=""
# -k: a training executable takes the first SIGTERM as "finish this step,
# then stop" (docs/runtime.md), so a hung step's kernel outlived a plain
# timeout; KILL follows 10 s after.
command -v timeout > /dev/null && limit="timeout -k 10 $seconds"
run() {
  $limit "$@" 2> "$work/err"
  local rc=$?
  { [ $rc -eq 124 ] || [ $rc -eq 137 ]; } && echo "timed out after $seconds s" >> "$work/err"
  return $rc
}
# best_kernel_us EXE [PREFIX]: the best of 3 runs in one process (--repeat
# 3: the inputs are made once) of EXE's launch time on cuda (CUDA events,
# from --trace), in us: the launches whose names start with PREFIX (all
# without one), summed per run; nothing (and status 1) if the run fails.
best_kernel_us() {
  local exe=$1 prefix=${2:-}
  run "$here/$exe" --device cuda --random-inputs --seed 1 --repeat 3 --trace "$work/t.json" > /dev/null \
    || { echo "$exe: Loom's cuda run failed:" >&2; errors >&2; return 1; }
  $py - "$work/t.json" "$prefix" <<'PY'
import json, sys
events = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
runs = 3  # --repeat: each run writes the same launches, in order
size = len(events) // runs
print(min(sum(e["dur"] for e in events[r * size:(r + 1) * size] if e["name"].startswith(sys.argv[2]))
          for r in range(runs)))
PY
}
# ratio EXE FLOPS LOOM_US NAME BASE_US: Loom's TFLOP/s against the
# baseline NAME's measured in this run, and time(NAME)/time(Loom); BASE_US
# may be the reason the baseline is unavailable.
ratio() {
  $py - "$@" <<'PY'
import sys
exe, flops, loom_us, name, base = sys.argv[1], eval(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
line = f"{exe:20s}: loom {flops/loom_us/1e6:8.1f} TFLOP/s ({loom_us:.1f} us)"
try:
    base_us = float(base)
except ValueError:
    print(f"{line}; {name} baseline {base}")
    sys.exit(0)
print(f"{line}  {name} {flops/base_us/1e6:8.1f} TFLOP/s  time({name})/time(Loom) = {base_us/loom_us:.3f}")
PY
}
# skip EXE: whether to leave EXE out: not prepared (the -mma-sync ones
# exist for sm_90a builds only), or an -mma-sync one without
# GPU_CHECK_MMA_SYNC=1 (sm_90a runs wgmma by default; the mma.sync
# variants, sm_80's kernels, add about 2 minutes to the check).
skip() {
  [ ! -x "$here/$1" ] || { [[ $1 == *-mma-sync* ]] && [ -z "${GPU_CHECK_MMA_SYNC:-}" ]; }
}
# The attention backward's kernel of EXE (from prepare.sh's EXE.kernels).
backward_of() { awk '$1 == "backward" {print $2}' "$here/$1.kernels" 2>/dev/null; }
# Prints the last error of run, indented.
errors() { sed 's/^/    /' "$work/err" | tail -5; }

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null \
  || echo "nvidia-smi: not found or failed (no NVIDIA driver here?)"
for exe in mlp gpt gpt-tf32 epilogue-pairs epilogue-pairs-tma-store matmul4096 matmul4096-bt matmul4096-at matmul8192 memory attention2048 attention8192 attention-grad2048 attention-grad8192 gpt-train gpt-train-big; do
  skip $exe && { echo "missing $here/$exe: run benchmarks/gpu/prepare.sh"; exit 1; }
done

if want kernels; then
echo "== numerics: every kernel on cuda against the cpu, from the cpu's inputs (--check-kernels)"
# Printed: each executable's header and summary, and every FAIL row with its
# worst elements (the full tables are kept only with GPU_CHECK_KEEP).
first=1
for exe in mlp gpt gpt-tf32 epilogue-pairs epilogue-pairs-tma-store matmul4096 matmul4096-bt matmul4096-at memory sums attention2048 attention-inf attention-grad2048 attention-grad-h64 attention-cross-grad attention-gqa-grad gpt-train llama-train mlp-mma-sync gpt-mma-sync matmul4096-mma-sync \
           matmul4096-persistent matmul4096-bt-persistent matmul4096-at-persistent gpt-persistent \
           gpt-train-persistent matmul4096-tma-store matmul4096-persistent-tma-store gpt-persistent-tma-store \
           matmul4096-persistent-multicast-tma-store matmul4096-bt-persistent-multicast-tma-store \
           gpt-persistent-multicast-tma-store matmul4096-pingpong matmul4096-pingpong-tma-store \
           gpt-pingpong-tma-store attention2048-mma-sync attention-grad2048-mma-sync; do
  skip $exe && continue
  # With GPU_CHECK_KEEP, the training steps' failing kernels (small: their
  # attention backward is the open tolerance question) keep their buffers.
  dump=()
  case "${GPU_CHECK_KEEP:+$exe}" in
    gpt-train|llama-train|gpt-train-persistent) dump=(--check-dump "$GPU_CHECK_KEEP/dump-$exe") ;;
  esac
  # Its inputs from EXE.inputs/NAME.npy where prepare.sh wrote them.
  inputs=(--random-inputs --seed 7)
  for npy in "$here/$exe.inputs"/*.npy; do
    [ -f "$npy" ] && inputs+=(--input "$(basename "$npy" .npy)=$npy")
  done
  run "$here/$exe" --device cuda --check-kernels "${dump[@]}" "${inputs[@]}" > "$work/$exe.check"
  rc=$?
  echo "-- $exe"
  awk -v first=$first '/^check-kernels:/ || /^tolerance:/ && first {print; next}
       /^step / {head = $0; next}
       / FAIL$/ {if (head != "") print head; head = ""; print; next}
       /^      / {print}' "$work/$exe.check"
  first=0
  if [ $rc -ne 0 ]; then
    echo "$exe: --check-kernels failed (exit $rc):"; errors; status=1
  fi
done
fi  # kernels

if want runs; then
echo "== numerics: whole runs, cuda against cpu (same seed, inputs and weights)  [${SECONDS} s]"
if ! $py -c "import numpy" 2>/dev/null; then
  echo "numpy not found: skipped"
else
  # Not the attention executables: their one kernel is the whole run, and
  # --check-kernels compares it with the tolerance its rounding needs (2
  # ulp of each element's terms, docs/precision.md), which compare.py's
  # elementwise rule does not know.
  for exe in mlp gpt gpt-tf32 matmul4096 memory mlp-mma-sync matmul4096-mma-sync; do
    skip $exe && continue
    outputs() {  # --output NAME=WORK/EXE.DEVICE.NAME.npy for every output, one word a line
      "$here/$exe" --info | awk -v dir="$work" -v exe="$exe" -v device="$1" \
        '$3 == "output" {printf "--output\n%s=%s/%s.%s.%s.npy\n", $2, dir, exe, device, $2}'
    }
    mapfile -t cpu < <(outputs cpu)
    mapfile -t gpu < <(outputs gpu)
    run "$here/$exe" --device cpu --random-inputs --seed 7 --save-weights "$work/$exe.w" \
        "${cpu[@]}" > /dev/null || { echo "$exe: cpu run failed:"; errors; status=1; continue; }
    run "$here/$exe" --device cuda --random-inputs --seed 7 --weights "$work/$exe.w" \
        "${gpu[@]}" > /dev/null || { echo "$exe: cuda run failed:"; errors; status=1; continue; }
    $py "$here/compare.py" "$work" "$exe" || status=1
    rm -f "$work/$exe".*.npy "$work/$exe.w"
  done
fi
echo "== generate: examples/llama.loom's f32 forward extends a text by 40 bytes (greedy) on cuda as on the cpu  [${SECONDS} s]"
if skip llama; then
  echo "llama: not prepared"
else
  for device in cpu cuda; do
    run "$here/llama" generate --device $device --weights "$here/llama.ckpt" \
        --prompt "This License " --tokens 40 > "$work/llama.$device.txt" \
      || { echo "llama: generate on $device failed:"; errors; status=1; }
  done
  if cmp -s "$work/llama.cpu.txt" "$work/llama.cuda.txt"; then
    echo "PASS: $(cat "$work/llama.cuda.txt")"
  else
    echo "DIFFER (a near tie of f32 logits, or a bug): cpu '$(cat "$work/llama.cpu.txt")', cuda '$(cat "$work/llama.cuda.txt")'"
  fi
fi
fi  # runs

if want matmul; then
echo "== bf16 matmul: Loom vs cuBLAS (torch); targets time(cuBLAS)/time(Loom) >= 0.6 (wgmma: matmulN on sm_90a), >= 0.45 (mma.sync: matmulN-mma-sync), >= 0.9 (persistent wgmma: matmulN-persistent)  [${SECONDS} s]"
# cuBLAS's best of 10 (CUDA events, after 3 warm-ups) per size, measured once.
declare -A cublas
for size in 4096 8192; do
  cublas[$size]=$($py - "$size" <<'PY' 2>/dev/null | tail -1
import sys
n = int(sys.argv[1])
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
    print(best)
except Exception as e:  # no torch or no GPU: Loom's figure alone
    print(f"unavailable ({e})")
PY
)
done
# Loom's time: the best of 3 runs of the step's launches (CUDA events, from
# --trace). On sm_90a matmulN runs wgmma fed by TMA and matmulN-mma-sync
# the mma.sync pipeline; matmul4096-bt multiplies by a B given as [N, K]
# (`a @ transpose(b)`), which wgmma reads K-major, and matmul4096-at an A
# given as [K, M] (`transpose(a) @ b`), which it reads M-major. The
# -persistent ones run the same matmuls in persistent warp-specialized
# kernels (--gpu-mma=wgmma-persistent; the issue's goal is >= 0.9); the
# -tma-store ones write their tiles back by TMA stores (--gpu-tma-store),
# the -multicast ones run in clusters of two sharing B (--gpu-tma-multicast),
# the -pingpong ones with ping-pong consumers (--gpu-mma=wgmma-pingpong).
for exe in matmul4096 matmul8192 matmul4096-bt matmul4096-at matmul4096-mma-sync matmul8192-mma-sync \
           matmul4096-persistent matmul8192-persistent matmul4096-bt-persistent matmul4096-at-persistent \
           matmul4096-tma-store matmul4096-persistent-tma-store matmul8192-persistent-tma-store \
           matmul4096-persistent-multicast matmul8192-persistent-multicast \
           matmul4096-persistent-multicast-tma-store matmul8192-persistent-multicast-tma-store \
           matmul4096-bt-persistent-multicast-tma-store matmul4096-pingpong matmul8192-pingpong \
           matmul4096-pingpong-tma-store matmul8192-pingpong-tma-store; do
  skip $exe && continue
  size=${exe#matmul}; size=${size%%-*}
  best=$(best_kernel_us "$exe") || { status=1; continue; }
  ratio "$exe" "2.0 * $size ** 3" "$best" cuBLAS "${cublas[$size]}"
done
fi  # matmul

if want attention; then
echo "== attention forward: Loom vs torch SDPA, bf16, causal, [1, 16, T, 128]; goal time(SDPA)/time(Loom) >= 0.8  [${SECONDS} s]"
# SDPA's best of 10 (CUDA events, after 3 warm-ups) per size; Loom's best
# of 3 runs of its one launch (--trace). The FLOPs counted are both
# products over the pairs on or below the diagonal, 2 * H * T(T+1)/2 * 256.
declare -A sdpa
for size in 2048 8192; do
  sdpa[$size]=$($py - "$size" <<'PY' 2>/dev/null | tail -1
import sys
t = int(sys.argv[1])
try:
    import torch
    import torch.nn.functional as F
    q, k, v = (torch.randn(1, 16, t, 128, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    for _ in range(3): F.scaled_dot_product_attention(q, k, v, is_causal=True)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for _ in range(10):
        start.record(); F.scaled_dot_product_attention(q, k, v, is_causal=True); stop.record()
        torch.cuda.synchronize()
        best = min(best, start.elapsed_time(stop) * 1e3)
    print(best)
except Exception as e:  # no torch 2.x or no GPU: Loom's figure alone
    print(f"unavailable ({e})")
PY
)
done
# attentionT runs sm_90a's default, the forward on wgmma fed by TMA;
# attentionT-mma-sync the mma.sync kernel (--gpu-attention=mma.sync).
for exe in attention2048 attention8192 attention2048-mma-sync attention8192-mma-sync; do
  skip $exe && continue
  size=${exe#attention}; size=${size%%-*}
  best=$(best_kernel_us "$exe") || { status=1; continue; }
  ratio "$exe" "2.0 * 16 * $size * ($size + 1) / 2 * 256" "$best" SDPA "${sdpa[$size]}"
done
fi  # attention

if want attention-grad; then
echo "== attention backward: Loom vs torch SDPA's backward, bf16, causal, [1, 16, T, 128]; goal time(SDPA)/time(Loom) >= 0.8  [${SECONDS} s]"
# SDPA: the best of 10 of out.backward(grad) alone (CUDA events around the
# backward, after 3 warm-ups). Loom: the best of 3 runs of the summed
# launches of the backward's kernel (its query and key sides; names from
# attention-gradT.kernels) in a --gradients run. FLOPs: FlashAttention's
# convention, 2.5 times the forward's (Loom's kernels compute more: they
# recompute the scores on both sides).
declare -A sdpa_backward
for size in 2048 8192; do
  sdpa_backward[$size]=$($py - "$size" <<'PY' 2>/dev/null | tail -1
import sys
t = int(sys.argv[1])
try:
    import torch
    import torch.nn.functional as F
    q, k, v = (torch.randn(1, 16, t, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True) for _ in range(3))
    g = torch.randn(1, 16, t, 128, device="cuda", dtype=torch.bfloat16)
    start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    best = float("inf")
    for i in range(13):
        o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        torch.cuda.synchronize()
        start.record(); o.backward(g); stop.record(); torch.cuda.synchronize()
        if i >= 3: best = min(best, start.elapsed_time(stop) * 1e3)
    print(best)
except Exception as e:  # no torch 2.x or no GPU: Loom's figure alone
    print(f"unavailable ({e})")
PY
)
done
# attention-gradT runs the forward and the backward on wgmma (sm_90a's
# default), attention-gradT-mma-sync on mma.sync.
for exe in attention-grad2048 attention-grad8192 attention-grad2048-mma-sync attention-grad8192-mma-sync; do
  skip $exe && continue
  size=${exe#attention-grad}; size=${size%%-*}
  backward=$(backward_of "$exe")
  # (A summed time of 0 from a missing backward name would divide by 0.)
  [ -n "$backward" ] || { echo "$exe: no backward kernel in $here/$exe.kernels: run prepare.sh"; status=1; continue; }
  best=$(best_kernel_us "$exe" "${backward}_kernel") || { status=1; continue; }
  ratio "$exe" "2.5 * 2.0 * 16 * $size * ($size + 1) / 2 * 256" "$best" SDPA "${sdpa_backward[$size]}"
  # Each side's launch in the best run (its query side first): the one-pass
  # query side was predicted at about half its three-pass time.
  $py - "$work/t.json" "${backward}_kernel" <<'PY'
import json, sys
events = [e for e in json.load(open(sys.argv[1]))["traceEvents"] if e.get("ph") == "X"]
size = len(events) // 3
runs = [[e for e in events[r * size:(r + 1) * size] if e["name"].startswith(sys.argv[2])] for r in range(3)]
best = min(runs, key=lambda run: sum(e["dur"] for e in run))
print("  " + "; ".join(f"{e['name']} {e['dur']:.1f} us" for e in best))
PY
done
fi  # attention-grad

# train_against_cpu EXE: 20 steps of EXE on the cpu and on cuda from the
# same initial weights and data; their losses and gradient norms within
# 1.6e-2 (compare_losses.py).
train_against_cpu() {
  local exe=$1
  if skip "$exe"; then
    echo "$exe: not prepared"
  elif run "$here/$exe" train --steps 20 --data "$here/gpl.txt" --log "$work/$exe.cpu.jsonl" > /dev/null \
     && run "$here/$exe" train --device cuda --steps 20 --data "$here/gpl.txt" --log "$work/$exe.cuda.jsonl" > /dev/null; then
    $py "$here/compare_losses.py" --rtol 1.6e-2 "$work/$exe.cpu.jsonl" "$work/$exe.cuda.jsonl" | tail -4 || status=1
  else
    echo "$exe: training run failed:"; errors; status=1
  fi
}
if want training; then
echo "== training: gpt-train (bf16), 20 steps on cuda against 20 on the cpu (losses and gradient norms within 1.6e-2)  [${SECONDS} s]"
train_against_cpu gpt-train
echo "== training in 2 microbatches: gpt-train-mb (bf16), the same, its accumulates on the device  [${SECONDS} s]"
train_against_cpu gpt-train-mb
echo "== training: llama-train (bf16; rotary embeddings, RMSNorm, SwiGLU), the same  [${SECONDS} s]"
train_against_cpu llama-train
fi  # training

# throughput_line EXE LOG TORCH_JSON: EXE's tokens/s (median after 2 steps
# of warm-up in its train --log LOG) and MFU, against the PyTorch run's
# (gpt_train_torch.py's last line, or why there is none).
throughput_line() {
  $py - "$@" <<'PY'
import json, sys
log = [json.loads(line) for line in open(sys.argv[2])]
rates = sorted(entry["tokens_per_s"] for entry in log[2:])  # after warm-up
loom = rates[len(rates) // 2]
# FLOPs a token: 6 per param of the matmuls (12 D^2 a layer, the tied
# output V D) and causal attention's 6 L T D (half of 12 L T D).
L, D, T, V = 16, 2048, 2048, 256
flops = 6 * (12 * L * D * D + V * D) + 6 * L * T * D
peak = 989e12  # H100/H200 dense bf16
line = f"{sys.argv[1]:20s}: loom {loom:9.0f} tokens/s  MFU {loom * flops / peak:.3f}"
try:
    ref = json.loads(sys.argv[3])
    torch_rate, mode = ref["torch_tokens_per_s"], ref.get("torch_mode", "eager")
    line += (f"   torch {ref['torch_version']} {mode}+SDPA {torch_rate:9.0f} tokens/s"
             f"  MFU {torch_rate * flops / peak:.3f}   loom/torch = {loom / torch_rate:.3f}")
except (ValueError, KeyError):
    line += f"   PyTorch baseline unavailable: {sys.argv[3][:200]}"
print(line)
PY
}
# big_torch_json EXE STEPS [PREFIX...]: gpt_train_torch.py's last line for
# gpt-train-big's model on cuda from EXE's saved weights; PREFIX (VAR=VALUE
# settings, then a command such as timeout) comes before the interpreter.
big_torch_json() {
  local exe=$1 steps=$2 out rc
  shift 2
  out=$(env LOOM_TORCH_DEVICE=cuda LOOM_GPT_SIZES=4,2048,256,2048,32,8192,16 "$@" \
    $py "$here/gpt_train_torch.py" "$work/$exe.safetensors" "$here/gpl.txt" "$work/$exe.jsonl" $steps inf bf16 2>&1)
  rc=$?
  # timeout's status: say so rather than show the last line PyTorch printed.
  if [ $rc -eq 124 ]; then echo "timed out: $* ran past its limit"; else echo "$out" | tail -1; fi
}

if want throughput && [ -z "${GPU_CHECK_SKIP_BIG:-}" ]; then
  echo "== training throughput: gpt-train-big (bf16, width 2048, 32 heads of 64, 16 layers, 4 x 2048 tokens) vs PyTorch eager + SDPA  [${SECONDS} s]"
  # gpt-train-big runs sm_90a's defaults (wgmma attention, one block a
  # matmul tile), gpt-train-big-persistent every matmul on the persistent
  # kernel, and gpt-train-big-mma-sync the mma.sync attention kernels
  # (--gpu-attention=mma.sync; with GPU_CHECK_MMA_SYNC=1).
  # PyTorch's step is measured once, from the first run's weights.
  steps=8
  torch_json=""
  for exe in gpt-train-big gpt-train-big-persistent gpt-train-big-mma-sync; do
    skip $exe && continue
    if ! run "$here/$exe" train --device cuda --steps $steps --data "$here/gpl.txt" \
         --save-weights "$work/$exe.safetensors" --log "$work/$exe.jsonl" > /dev/null; then
      echo "$exe: training run failed:"; errors; status=1; continue
    fi
    [ -n "$torch_json" ] || torch_json=$(big_torch_json $exe $steps)
    rm -f "$work/$exe.safetensors"
    throughput_line $exe "$work/$exe.jsonl" "$torch_json"
  done
fi  # throughput

# The issue's second baseline: the same PyTorch model with its forward and
# backward under torch.compile (Inductor, which needs Triton and a host C
# compiler on the device machine: where it fails, the line says why).
# Compiling 16 layers takes a minute or more, hence a section of its own,
# with its own limit (GPU_CHECK_COMPILE_LIMIT, default 300 s).
if want torch-compile && [ -z "${GPU_CHECK_SKIP_BIG:-}" ]; then
  echo "== training throughput: gpt-train-big vs PyTorch torch.compile + SDPA  [${SECONDS} s]"
  exe=gpt-train-big steps=10
  if ! run "$here/$exe" train --device cuda --steps $steps --data "$here/gpl.txt" \
       --save-weights "$work/$exe.safetensors" --log "$work/$exe.jsonl" > /dev/null; then
    echo "$exe: training run failed:"; errors; status=1
  else
    compile_limit=""
    command -v timeout > /dev/null && compile_limit="timeout ${GPU_CHECK_COMPILE_LIMIT:-300}"
    throughput_line $exe "$work/$exe.jsonl" \
      "$(big_torch_json $exe $steps LOOM_TORCH_COMPILE=1 $compile_limit)"
  fi
fi  # torch-compile

if want bandwidth; then
echo "== bandwidth: memory-bound kernels against a device-to-device copy (target >= 0.85)  [${SECONDS} s]"
for exe in memory gpt; do
  for seed in 1 2; do
    run "$here/$exe" --device cuda --random-inputs --seed $seed --trace "$work/$exe.trace$seed.json" > /dev/null \
      || { echo "$exe: cuda run failed:"; errors; status=1; rm -f "$work/$exe".trace*.json; break; }
  done
done
$py "$here/bandwidth.py" "$here" "$work" memory gpt || status=1
fi  # bandwidth

if want sanitizer; then
echo "== memory and race checks (compute-sanitizer, where it works) on mlp and mlp-mma-sync  [${SECONDS} s]"
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null || true)
if [ -z "$sanitizer" ]; then
  echo "compute-sanitizer not found: skipped"
else
  for exe in mlp mlp-mma-sync; do
    skip $exe && continue
    for tool in memcheck racecheck; do
      echo "-- $exe: $tool"
      $limit "$sanitizer" --tool $tool --report-api-errors no --error-exitcode 9 "$here/$exe" --device cuda \
        --random-inputs --seed 7 > "$work/$tool" 2>&1
      rc=$?
      grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Invalid|Race|hazard" "$work/$tool" | head -8
      [ $rc -eq 9 ] && { echo "$exe: $tool found errors"; status=1; }
      [ $rc -ne 0 ] && [ $rc -ne 9 ] && { echo "$exe under $tool: exit $rc"; tail -3 "$work/$tool"; }
    done
  done
fi
fi  # sanitizer

# NCU=1: Nsight Compute's speed-of-light, occupancy and warp-state sections
# for one launch each of the 4096^3 matmul (wgmma, persistent and mma.sync)
# and of the (wgmma) attention at T = 8192 (the forward, then the backward's
# two sides); --clock-control none leaves the clocks as they are. Where the
# hardware counters cannot be read (gVisor), ncu says so and the check
# goes on.
if [ -n "${NCU:-}" ]; then
  echo "== Nsight Compute: matmul4096{,-persistent,-persistent-multicast-tma-store,-pingpong-tma-store,-mma-sync}, attention8192, attention-grad8192's backward (wgmma)  [${SECONDS} s]"
  ncu=$(command -v ncu || ls /usr/local/cuda/bin/ncu 2>/dev/null || true)
  if [ -z "$ncu" ]; then
    echo "ncu not found: skipped"
  else
    backward=$(backward_of attention-grad8192)
    # EXE:LAUNCHES[:KERNEL-REGEX]
    for profile in matmul4096:1 matmul4096-persistent:1 matmul4096-persistent-multicast-tma-store:1 \
                   matmul4096-pingpong-tma-store:1 matmul4096-mma-sync:1 attention8192:1 \
                   "attention-grad8192:2:regex:${backward:-none}_kernel"; do
      IFS=: read -r exe count filter <<< "$profile"
      skip $exe && continue
      echo "-- $exe"
      $limit "$ncu" --clock-control none --launch-count "$count" ${filter:+-k "$filter"} \
        --section SpeedOfLight --section Occupancy --section WarpStateStats \
        --section MemoryWorkloadAnalysis --section ComputeWorkloadAnalysis "$here/$exe" --device cuda \
        --random-inputs --seed 1 2>&1 \
        | grep -E "==PROF==|==ERROR==|^  [a-z_0-9]+_kernel|Duration|Throughput|Registers|Achieved Occupancy|Theoretical Occupancy|Warp Cycles Per Issued|Stall|Block Limit|L2 Hit|Mem Busy|Max Bandwidth|Issue Slots Busy|Executed Ipc|Pipe" \
        | head -60
    done
  fi
fi

echo "== done in ${SECONDS} s; exit status $status"
exit $status
