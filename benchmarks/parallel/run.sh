#!/usr/bin/env bash
# Multi-rank scaling on CPU ranks: the GPT forward of examples/gpt.loom
# (benchmarks/parallel/gpt.loom: without its pipeline stages) compiled for
# several meshes (loomc --mesh), each run under mpirun on its
# ranks and on one rank, timed in the same run. Prints the time per forward
# of each mesh, its speedup over one rank, and the share of the per-rank
# step time spent in collectives (from the traces).
#   benchmarks/parallel/run.sh [build] [repeats]
set -euo pipefail
build=${1:-build}
repeats=${2:-5}
root=$(cd "$(dirname "$0")/../.." && pwd)
loomc="$build/bin/loomc"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
cores=$(nproc)

# Seconds per forward: the best of `repeats` runs' summed step times.
time_run() {
  local trace=$1
  /usr/bin/python3 - "$trace" <<'PY'
import json, sys
events = json.load(open(sys.argv[1]))["traceEvents"]
steps = [e for e in events if e.get("ph") == "X"]
total = sum(e["dur"] for e in steps)
coll = sum(e["dur"] for e in steps if e.get("cat") == "collective")
print(f"{total / 1e6:.6f} {coll / max(total, 1e-9):.3f}")
PY
}

best() { sort -n | head -1; }

echo "GPT forward (4 blocks, B=8, T=64, D=256, bf16), $cores cores, best of $repeats runs"
printf "%-12s %5s %12s %9s %12s\n" mesh ranks "ms/forward" speedup collectives
base=""
for mesh in "dp=1,tp=1" "dp=2,tp=1" "dp=1,tp=2" "dp=2,tp=2"; do
  ranks=$(echo "$mesh" | tr ',' '\n' | cut -d= -f2 | paste -sd'*' | bc)
  "$loomc" "$root/benchmarks/parallel/gpt.loom" --mesh "$mesh" -o "$work/gpt" 2> "$work/loomc.err" \
    || { cat "$work/loomc.err" >&2; exit 1; }
  results=()
  for ((r = 0; r < repeats; ++r)); do
    if [ "$ranks" = 1 ]; then
      "$work/gpt" --random-inputs --seed 1 --trace "$work/t.json" > /dev/null
    else
      mpirun --oversubscribe --bind-to none -np "$ranks" "$work/gpt" \
        --random-inputs --seed 1 --trace "$work/t.json" > /dev/null
    fi
    results+=("$(time_run "$work/t.json")")
  done
  line=$(printf "%s\n" "${results[@]}" | best)
  seconds=${line% *} share=${line#* }
  [ -z "$base" ] && base=$seconds
  printf "%-12s %5d %12.3f %8.2fx %11.0f%%\n" "$mesh" "$ranks" \
    "$(echo "$seconds * 1000" | bc -l)" "$(echo "$base / $seconds" | bc -l)" \
    "$(echo "$share * 100" | bc -l)"
done
echo "(rank 0's trace; with more ranks than cores the ranks share cores, so"
echo " speedups above $cores are not expected here)"
