#!/usr/bin/env bash
# `make demo`: compiles the flagship example to an executable and runs it.
set -euo pipefail
build=$1
loomc="$build/bin/loomc"
example=examples/mlp.loom
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

echo "== $example"
cat "$example"
echo
echo "== loomc $example -o mlp"
"$loomc" "$example" -o "$work/mlp"
echo
echo "== ./mlp --info   (the plan: buffers in one arena, kernels, steps)"
"$work/mlp" --info
echo
echo "== ./mlp --random-inputs --seed 1 --trace trace.json"
"$work/mlp" --random-inputs --seed 1 --trace "$work/trace.json"
steps=$(grep -o '"ph": *"X"' "$work/trace.json" | wc -l)
echo "   ($steps kernel steps traced; open a trace in chrome://tracing or Perfetto)"
echo
echo "The same script runs on several ranks once the partitioner lands (issue 4);"
echo "see docs/pipeline.md for every stage: loomc $example --emit=STAGE."
