#!/usr/bin/env bash
# CPU matmul speed on one thread: Loom's kernel against the baselines a user
# would pick, both measured in this run on this machine (baseline.py):
# f32 against OpenBLAS's sgemm, bf16 against PyTorch's bf16 matmul (oneDNN),
# and bf16 against Loom's own f32 figure. The -bt variants are `a @
# transpose(b)` (a K-contiguous B, as the backward's `dy @ w^T`), against
# sgemm with B transposed and torch's `a @ b.t()`. Prints the CPU path each
# figure used (loom's executable --info) and the host's vector extensions.
# bf16 runs on the path loomc picks for the host (AMX tiles on a CPU with
# amx-bf16). "of peak" is the rate over the core's ceiling for its path
# measured in this run (peak.c: f32 FMAs, the bf16 dots for the
# avx512-bf16-dot path, tdpbf16ps for amx-bf16).
#   benchmarks/cpu/run.sh [build-dir] [size...]
#   QUICK=1: two runs each (make bench-quick, which make test runs)
set -euo pipefail
build=${1:-build}
shift || true
sizes=${*:-256 512 1024 2048}
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
variants=${VARIANTS:-f32 f32-bt bf16 bf16-bt}

isa=$(grep -o -w 'avx512f\|avx512_bf16\|amx_bf16\|avx2' /proc/cpuinfo | sort -u | tr '\n' ' ')
echo "host CPU: ${isa:-no AVX2}; OpenBLAS kernels: $(/usr/bin/python3 "$here/baseline.py" openblas-core)"
peak_fma=- peak_dot=- peak_amx=-
if ${CC:-clang-22} -O2 -march=native "$here/peak.c" -o "$work/peak" 2> /dev/null; then
  read -r peak_fma peak_dot peak_amx < <("$work/peak")
fi
# The dots' ceiling over the FMAs' bounds what "vs f32" can reach.
echo "core ceiling, one thread (peak.c): f32 FMA $peak_fma GFLOP/s, bf16 dot $peak_dot GFLOP/s$(
  [ "$peak_dot" = - ] || awk -v d="$peak_dot" -v f="$peak_fma" 'BEGIN { printf " (%.2f x)", d / f }')$(
  [ "$peak_amx" = - ] || echo ", AMX bf16 $peak_amx GFLOP/s")"
printf '%-6s %-8s %-16s %10s %10s %-22s %6s %8s %8s\n' size dtype "loom path" "loom GF/s" "base GF/s" baseline ratio "vs f32" "of peak"
for size in $sizes; do
  f32_rate=""
  for variant in $variants; do
    precision=${variant%-bt}
    sed "s/SIZE/$size/g; s/PRECISION/$precision/" "$here/matmul.loom" > "$work/m.loom"
    case $variant in *-bt) sed -i 's/a @ b/a @ transpose(b)/' "$work/m.loom" ;; esac
    "$build/bin/loomc" "$work/m.loom" -o "$work/m" > /dev/null 2> "$work/loomc.err" \
      || { cat "$work/loomc.err" >&2; exit 1; }
    # --info: "cpu  NAME kernels; matmul f32: PATH, bf16: PATH".
    path=$("$work/m" --info | sed -n "s/^cpu .*matmul f32: \([^,]*\), bf16: \([^;]*\).*/\1 \2/p")
    if [ "$precision" = f32 ]; then path=${path%% *}; else path=${path##* }; fi
    # About half a second of runs (at 100 GFLOP/s), as the baselines take
    # the best of half a second: a best of a few runs of a small matmul
    # caught this VM's slow moments (256^3: 90-150 GFLOP/s between runs).
    runs=$(( 50000000000 / (2 * size * size * size) ))
    runs=$(( runs < 10 ? 10 : runs > 2000 ? 2000 : runs ))
    [ -n "${QUICK:-}" ] && runs=2
    # The kernel's own time, from the trace: the best of the runs of one
    # process (--repeat), warm like the baselines' (the first run of a
    # process also pays for the arena's first-touch page faults).
    "$work/m" --random-inputs --repeat "$runs" --trace "$work/t.json" > /dev/null
    best=$(/usr/bin/python3 -c "
import json, sys
print(min(e['dur'] for e in json.load(open(sys.argv[1]))['traceEvents'] if e.get('ph') == 'X'))" "$work/t.json")
    case $variant in
      f32*) base_name="OpenBLAS sgemm" ;;
      *) base_name="PyTorch $( /usr/bin/python3 -c 'import torch; print(torch.__version__)' 2>/dev/null || echo '?') bf16" ;;
    esac
    base=$(OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1 /usr/bin/python3 "$here/baseline.py" "$variant" "$size")
    case $path in
      *dot*) peak=$peak_dot ;;
      amx-bf16) peak=$peak_amx ;;
      *amx*|"") peak=- ;;
      *) peak=$peak_fma ;;
    esac
    line=$(/usr/bin/python3 - "$size" "$best" "$base" "${f32_rate:--}" "$peak" <<'PY'
import sys
n, loom_us, base_us = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
flops = 2.0 * n ** 3
loom, base = flops / loom_us / 1e3, flops / base_us / 1e3
vs = f"{loom / float(sys.argv[4]):.2f}" if sys.argv[4] != "-" else "-"
peak = f"{loom / float(sys.argv[5]):.2f}" if sys.argv[5] != "-" else "-"
print(f"{loom:.2f} {base:.2f} {loom / base:.2f} {vs} {peak}")
PY
)
    read -r loom_rate base_rate ratio vs of_peak <<< "$line"
    [ "$variant" = f32 ] && f32_rate=$loom_rate
    [ "$precision" = f32 ] && vs=""
    printf '%-6s %-8s %-16s %10s %10s %-22s %6s %8s %8s\n' "$size" "$variant" "${path:-?}" \
      "$loom_rate" "$base_rate" "$base_name" "$ratio" "$vs" "$of_peak"
  done
done
