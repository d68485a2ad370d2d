#!/usr/bin/env bash
# Builds, on a machine without a GPU, what the GPU check runs: executables
# that each carry CPU kernels and an sm_90a cubin (needs the CUDA toolkit),
# the kernel reports of the bandwidth check's models, and the scripts.
#   benchmarks/gpu/prepare.sh [build-dir]   -> build/gpu/*
set -euo pipefail
build=${1:-build}
root=$(cd "$(dirname "$0")/../.." && pwd)
out="$build/gpu"
mkdir -p "$out"
arch=${GPU_ARCH:-sm_90a}
# x86-64-v3 (AVX2): the GPU machine's CPU need not be this one.
loomc="$build/bin/loomc --gpu --gpu-arch=$arch --cpu=x86-64-v3"
$loomc "$root/examples/mlp.loom" -o "$out/mlp"
$loomc "$root/test/Numerics/Inputs/gpt-bf16.loom" -o "$out/gpt"
$loomc "$root/benchmarks/gpu/memory.loom" -o "$out/memory"
# Full reductions of 4 M f32 terms (an mse, a sum, a max): the GPU's
# grid-strided reductions against the CPU's blocked sums.
$loomc "$root/test/Numerics/Inputs/long-sums.loom" -o "$out/sums"
for size in 4096 8192; do
  sed "s/SIZE/$size/g; s/PRECISION/bf16/" "$root/benchmarks/cpu/matmul.loom" > "$out/matmul$size.loom"
  $loomc "$out/matmul$size.loom" -o "$out/matmul$size"
done
# B given as [N, K] (`a @ transpose(b)`, the transpose folded into the
# matmul): a K-contiguous B, which wgmma reads K-major.
sed 's/a @ b/a @ transpose(b)/' "$out/matmul4096.loom" > "$out/matmul4096-bt.loom"
$loomc "$out/matmul4096-bt.loom" -o "$out/matmul4096-bt"
# A given as [K, M] (`transpose(a) @ b`, the backward's x^T @ dy): an
# M-contiguous A, which wgmma reads M-major (imm-trans-a).
sed 's/a @ b/transpose(a) @ b/' "$out/matmul4096.loom" > "$out/matmul4096-at.loom"
$loomc "$out/matmul4096-at.loom" -o "$out/matmul4096-at"
# Fused attention (the issue's shapes: causal, bf16, 16 heads of 128
# features, one sequence of 2048 or 8192): one launch of the GPU attention
# kernel each.
for size in 2048 8192; do
  sed -e 's/^precision f32/precision bf16/' -e 's/^dim H = .*/dim H = 16/' \
      -e "s/^dim T = .*/dim T = $size/" -e 's/^dim E = .*/dim E = 128/' \
      -e 's/\* 0.125/* 0.08838834764831845/' \
      "$root/benchmarks/attention/attention.loom" > "$out/attention$size.loom"
  $loomc "$out/attention$size.loom" -o "$out/attention$size"
  # Its backward at the same shapes: q, k and v as params of an mse loss
  # (--gradients: one forward and backward), and which kernels are the
  # attention's (marked loom.gpu_attention; the backward's carry
  # result_grad), whose launches run.sh times.
  sed -e 's/^precision f32/precision bf16/' -e 's/^dim B = .*/dim B = 1/' \
      -e 's/^dim H = .*/dim H = 16/' -e "s/^dim T = .*/dim T = $size/" \
      -e 's/^dim E = .*/dim E = 128/' -e 's/\* 0.25/* 0.08838834764831845/' \
      "$root/test/Numerics/Inputs/attention-grad.loom" > "$out/attention-grad$size.loom"
  $loomc --gradients "$out/attention-grad$size.loom" -o "$out/attention-grad$size"
  "$build/bin/loomc" --emit=gpu --gradients --gpu-arch="$arch" "$out/attention-grad$size.loom" \
    | awk '/func.func @.*loom.gpu_attention/ {
             name = $2; sub(/^@/, "", name); sub(/\(.*/, "", name)
             print (/result_grad/ ? "backward" : "forward"), name }' > "$out/attention-grad$size.kernels"
done
# The backward's other wgmma forms, checked kernel by kernel: heads of 64
# (the query side's full overlap, the key side's blocks of 64 queries),
# and causal cross attention with fewer queries than keys (the query side
# on mma.sync, the key side on wgmma with a key block reaching past the
# last query).
sed -e 's/^precision f32/precision bf16/' -e 's/^dim H = .*/dim H = 4/' \
    -e 's/^dim T = .*/dim T = 1024/' -e 's/^dim E = .*/dim E = 64/' -e 's/\* 0.25/* 0.125/' \
    "$root/test/Numerics/Inputs/attention-grad.loom" > "$out/attention-grad-h64.loom"
$loomc --gradients "$out/attention-grad-h64.loom" -o "$out/attention-grad-h64"
$loomc --gradients "$root/benchmarks/gpu/attention-cross-grad.loom" -o "$out/attention-cross-grad"
# Attention whose first key block scores -inf for every query of head 0
# (f16 products past 65504: test/Numerics/attention-inf.test at shapes the
# GPU kernels take), with its inputs in attention-inf.inputs/: checked
# kernel by kernel from them (the running maximum taken as 0 while -inf).
sed 's/\[1, 2, 96, 4\]/[1, 2, 256, 64]/' "$root/test/Numerics/Inputs/attention-inf.loom" \
  > "$out/attention-inf.loom"
$loomc "$out/attention-inf.loom" -o "$out/attention-inf"
mkdir -p "$out/attention-inf.inputs"
${PYTHON:-/usr/bin/python3} - "$out/attention-inf.inputs" <<'PY'
import sys
import numpy as np
r = np.random.default_rng(5)
q, k, v = (r.standard_normal((1, 2, 256, 64)).astype(np.float32) for _ in range(3))
q[0, 0] = 300
k[0, 0, :64] = -300
for name, a in zip("qkv", (q, k, v)):
    np.save(f"{sys.argv[1]}/{name}.npy", a)
PY
# Grouped-query attention's gradient (two key/value heads for four query
# heads, test/Numerics/attention-gqa.test's model in bf16): the keys and
# values broadcast over the query heads, one attention and its gradient,
# the keys' and values' gradients summed back over the groups.
sed 's/^precision f32 accumulate f32/precision bf16 accumulate f32/' \
  "$root/test/Numerics/Inputs/attention-gqa.loom" > "$out/attention-gqa-grad.loom"
$loomc --gradients "$out/attention-gqa-grad.loom" -o "$out/attention-gqa-grad"
# The training step (forward, backward, AdamW) of examples/gpt-train.loom in
# bf16: checked kernel by kernel, and 20 steps on the GPU against 20 on the
# CPU on the GPL (carried as gpl.txt). And the same script at a size that
# fills the GPU (width 2048, 32 heads of 64, 16 layers, 4 x 2048 tokens a
# step, 0.8 B params; heads of 64 so that the attention's backward is fused
# too) for its tokens/s against PyTorch's eager step with SDPA.
sed 's/^precision f32 accumulate f32/precision bf16 accumulate f32/' \
  "$root/examples/gpt-train.loom" > "$out/gpt-train.loom"
$loomc --train "$out/gpt-train.loom" -o "$out/gpt-train"
# The same step in 2 microbatches: its accumulates run as the runtime's
# own kernel (loom_accumulate) on the device.
sed 's/^    steps 300$/    microbatches 2\n    steps 300/' "$out/gpt-train.loom" > "$out/gpt-train-mb.loom"
$loomc --train "$out/gpt-train-mb.loom" -o "$out/gpt-train-mb"
sed -e 's/^dim B = .*/dim B = 4/' -e 's/^dim T = .*/dim T = 2048/' \
    -e 's/^dim D = .*/dim D = 2048/' -e 's/^dim H = .*/dim H = 32/' \
    -e 's/for i in 0\.\.2 {/for i in 0..16 {/' -e 's/\* 0\.25)/* 0.125)/' \
    "$out/gpt-train.loom" > "$out/gpt-train-big.loom"
$loomc --train --mesh=dp=1,tp=1 "$out/gpt-train-big.loom" -o "$out/gpt-train-big"
cp /usr/share/common-licenses/GPL-3 "$out/gpl.txt"
# examples/llama.loom in bf16 (the rotary tables cast to it, as the script
# says, so that its attention is fused): sin and cos by libdevice, RMSNorm
# and SwiGLU, checked kernel by kernel and trained against the CPU.
sed -e 's/^precision f32 accumulate f32/precision bf16 accumulate f32/' \
    -e 's/let c = cos(angle)/let c = cast(cos(angle), bf16)/' \
    -e 's/let s = sin(angle)/let s = cast(sin(angle), bf16)/' \
  "$root/examples/llama.loom" > "$out/llama-train.loom"
$loomc --train "$out/llama-train.loom" -o "$out/llama-train"
# Its f32 forward, for generate on cuda against the cpu, from 150 steps of
# the f32 training run here (carried as llama.ckpt).
$loomc "$root/examples/llama.loom" -o "$out/llama"
"$build/bin/loomc" --train "$root/examples/llama.loom" -o "$out/llama-cpu-train"
"$out/llama-cpu-train" train --steps 150 --data /usr/share/common-licenses/GPL-3 \
  --save "$out/llama.ckpt" > /dev/null
rm "$out/llama-cpu-train"
# The numerics GPT under `precision tf32`: its f32 matmuls on tf32 tensor
# cores.
sed 's/^precision f32.*/precision tf32/' "$root/test/Numerics/Inputs/gpt-f32.loom" > "$out/gpt-tf32.loom"
$loomc "$out/gpt-tf32.loom" -o "$out/gpt-tf32"
# Fused epilogues evaluated on pairs of accumulators (the fourteenth
# session): an odd N with a bias (the second column of the last pair read
# at N - 1, stored guarded), a bias and gelu after the product's rounding,
# and an odd-N f16 matmul; with the TMA-store epilogue too on sm_90a.
$loomc "$root/test/Codegen/GPU/wgmma-epilogue-pairs.loom" -o "$out/epilogue-pairs"
# On sm_90a the matmuls above run on wgmma fed by TMA (loomc's default
# there); the -mma-sync executables keep them on mma.sync, the kernel of
# sm_80 to sm_89, checked and timed in the same run.
if [ "$arch" = sm_90a ]; then
  $loomc --gpu-mma=mma.sync "$root/examples/mlp.loom" -o "$out/mlp-mma-sync"
  $loomc --gpu-mma=mma.sync "$root/test/Numerics/Inputs/gpt-bf16.loom" -o "$out/gpt-mma-sync"
  for size in 4096 8192; do
    $loomc --gpu-mma=mma.sync "$out/matmul$size.loom" -o "$out/matmul$size-mma-sync"
  done
  # The persistent warp-specialized wgmma kernels (a block per SM, a
  # producer warpgroup issuing TMA, setmaxnreg), not yet loomc's default:
  # every operand layout, checked and timed against cuBLAS beside the
  # one-block-per-tile kernels.
  for name in matmul4096 matmul8192 matmul4096-bt matmul4096-at; do
    $loomc --gpu-mma=wgmma-persistent "$out/$name.loom" -o "$out/$name-persistent"
  done
  # And every matmul of the numerics GPT and of the training step (small,
  # batched, transposed operands) on them: --check-kernels must pass these
  # before the persistent kernel can be sm_90a's default.
  $loomc --gpu-mma=wgmma-persistent "$root/test/Numerics/Inputs/gpt-bf16.loom" -o "$out/gpt-persistent"
  $loomc --gpu-mma=wgmma-persistent --train "$out/gpt-train.loom" -o "$out/gpt-train-persistent"
  # The big training step on it too, timed beside gpt-train-big: what the
  # step gains if it becomes the default.
  $loomc --gpu-mma=wgmma-persistent --train --mesh=dp=1,tp=1 "$out/gpt-train-big.loom" \
    -o "$out/gpt-train-big-persistent"
  # Not yet measured: both wgmma kernels writing their tiles back by TMA
  # stores through shared memory (--gpu-tma-store), the persistent one in
  # clusters of two blocks sharing B by TMA multicast (--gpu-tma-multicast),
  # alone and with the TMA stores, and its ping-pong form: checked (4096^3,
  # and the numerics GPT's matmuls with bias epilogues, ragged and batched
  # shapes) and timed beside the kernels above.
  $loomc --gpu-tma-store "$out/matmul4096.loom" -o "$out/matmul4096-tma-store"
  $loomc --gpu-tma-store "$root/test/Codegen/GPU/wgmma-epilogue-pairs.loom" -o "$out/epilogue-pairs-tma-store"
  for name in matmul4096 matmul8192; do
    $loomc --gpu-mma=wgmma-persistent --gpu-tma-store "$out/$name.loom" -o "$out/$name-persistent-tma-store"
    $loomc --gpu-mma=wgmma-persistent --gpu-tma-multicast "$out/$name.loom" -o "$out/$name-persistent-multicast"
  done
  for name in matmul4096 matmul8192 matmul4096-bt; do
    $loomc --gpu-mma=wgmma-persistent --gpu-tma-multicast --gpu-tma-store "$out/$name.loom" \
      -o "$out/$name-persistent-multicast-tma-store"
  done
  # And the ping-pong consumers (--gpu-mma=wgmma-pingpong), alone and with
  # the TMA stores.
  for name in matmul4096 matmul8192; do
    $loomc --gpu-mma=wgmma-pingpong "$out/$name.loom" -o "$out/$name-pingpong"
    $loomc --gpu-mma=wgmma-pingpong --gpu-tma-store "$out/$name.loom" -o "$out/$name-pingpong-tma-store"
  done
  $loomc --gpu-mma=wgmma-pingpong --gpu-tma-store "$root/test/Numerics/Inputs/gpt-bf16.loom" -o "$out/gpt-pingpong-tma-store"
  $loomc --gpu-mma=wgmma-persistent --gpu-tma-store "$root/test/Numerics/Inputs/gpt-bf16.loom" -o "$out/gpt-persistent-tma-store"
  $loomc --gpu-mma=wgmma-persistent --gpu-tma-multicast --gpu-tma-store \
    "$root/test/Numerics/Inputs/gpt-bf16.loom" -o "$out/gpt-persistent-multicast-tma-store"
  # The attention forward and backward on mma.sync (the kernels of sm_80 to
  # sm_89; on sm_90a the defaults above run wgmma fed by TMA): checked and
  # timed against SDPA beside them, and the big training step with them.
  for size in 2048 8192; do
    $loomc --gpu-attention=mma.sync "$out/attention$size.loom" -o "$out/attention$size-mma-sync"
    $loomc --gpu-attention=mma.sync --gradients "$out/attention-grad$size.loom" -o "$out/attention-grad$size-mma-sync"
    cp "$out/attention-grad$size.kernels" "$out/attention-grad$size-mma-sync.kernels"
  done
  $loomc --gpu-attention=mma.sync --train --mesh=dp=1,tp=1 "$out/gpt-train-big.loom" -o "$out/gpt-train-big-mma-sync"
fi
# Which steps are matmuls (tensor-core launches), for bandwidth.py.
"$build/bin/loomc" --kernel-report=json --gpu-arch="$arch" "$root/benchmarks/gpu/memory.loom" -o "$out/memory.report.json"
"$build/bin/loomc" --kernel-report=json --gpu-arch="$arch" "$root/test/Numerics/Inputs/gpt-bf16.loom" -o "$out/gpt.report.json"
# The executables link Open MPI (for multi-rank CPU runs); the GPU machine
# need not have it, so its libraries travel in lib/ (run.sh puts lib/ on
# LD_LIBRARY_PATH). The C and C++ runtimes stay the GPU machine's own.
mkdir -p "$out/lib"
ldd "$out/mlp" | awk '$3 ~ /^\// {print $3}' \
  | grep -Ev '/(libc|libm|libstdc\+\+|libgcc_s|ld-linux[^/]*)\.so' \
  | while read -r lib; do cp -L "$lib" "$out/lib/"; done
cp "$root/benchmarks/gpu/run.sh" "$root/benchmarks/gpu/compare.py" "$root/benchmarks/gpu/bandwidth.py" \
   "$root/test/Parallel/compare_losses.py" "$root/test/Numerics/gpt_train_torch.py" \
   "$root/test/Numerics/reference.py" "$out/"
# The same as one archive (about 25 MiB of 65): what a carry limit (the
# lent device machine's is 64 MiB) lets through.
tar czf "$build/gpu.tgz" -C "$build" gpu
echo "prepared $out ($(du -sh "$out" | cut -f1); $build/gpu.tgz $(du -sh "$build/gpu.tgz" | cut -f1)): carry the directory (or the archive) to the GPU machine and run $out/run.sh"
