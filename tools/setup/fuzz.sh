#!/usr/bin/env bash
# make fuzz: a longer fuzzing pass than make test's, over every target: the
# front end (loom-fuzz), the runtime's plan, safetensors and .npy readers
# (loom-fuzz-files, AddressSanitizer and UBSan), and, with clang, the
# coverage-guided libFuzzer targets of the same readers and of the front
# end, FUZZ_SECONDS each (default 60), then FUZZ_PROGRAMS (default 300)
# random scripts against PyTorch: forward, gradients, training steps,
# gradients on a 2 x 2 mesh and in 2 pipeline stages, training in 4, layer
# loops and MoE blocks, microbatches pipelined in 2 stages, MoE on 2 dp ranks,
# training on 2 dp ranks x 2 stages, and checkpoints resumed on the 2 x 2
# mesh (differential.py).
# Prints the executions per target; the first crash stops it with the input
# saved in $BUILD/fuzz/ (a wrong answer: the script in fuzz/differential/).
set -euo pipefail
BUILD=${1:-build}
SECONDS_EACH=${FUZZ_SECONDS:-60}
ITERATIONS=${FUZZ_ITERATIONS:-200000}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
BIN=$(cd "$BUILD" && pwd)/bin
WORK=$BUILD/fuzz
rm -rf "$WORK" && mkdir -p "$WORK"/{plan,safetensors,npy,frontend}

echo "fuzz: seeds from the examples"
for script in "$ROOT"/examples/mlp.loom "$ROOT"/examples/gpt.loom "$ROOT"/test/Numerics/Inputs/moe-f32.loom; do
  name=$(basename "$script" .loom)
  "$BIN"/loomc "$script" --emit=plan -o "$WORK/$name.plans"
  awk -v p="$WORK/plan/$name" '/^loom-plan/{n++} NF{print > (p n ".plan")}' "$WORK/$name.plans"
done
"$BIN"/loomc "$ROOT"/test/Numerics/Inputs/moe-f32.loom -o "$WORK/moe" > /dev/null
"$WORK/moe" --random-inputs --seed 1 --save-weights "$WORK/safetensors/moe.safetensors" > /dev/null
/usr/bin/python3 "$ROOT"/test/Numerics/gen_inputs.py --seed 7 "$WORK/npy" x:f32:8,4,16 ids:int64:4,8 t:f32:3
cp "$ROOT"/examples/*.loom "$WORK/frontend/"

echo "fuzz: loom-fuzz (front end), $ITERATIONS mutants"
"$BIN"/loom-fuzz --seed "$RANDOM" --iterations "$ITERATIONS" --crash-file "$WORK/crash.loom" \
  "$WORK"/frontend/*.loom "$ROOT"/test/Frontend/*.loom
for target in plan safetensors npy; do
  plan=()
  [ "$target" = safetensors ] && plan=(--plan "$WORK/plan/moe-f321.plan")
  echo "fuzz: loom-fuzz-files --target $target, $ITERATIONS mutants"
  "$BIN"/loom-fuzz-files --target "$target" --seed "$RANDOM" --iterations "$ITERATIONS" \
    "${plan[@]}" --crash-file "$WORK/crash.$target" "$WORK/$target"/*
done

# (grep reads all of ninja's output: under pipefail, grep -q's early exit
# would fail the pipe.)
# LLVM's BumpPtrAllocator poisons its slabs in code compiled with ASan, not
# in Debian's MLIR libraries, and the front end's target links both: no
# user poisoning (docs/runtime.md, Sanitizers).
export ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}allow_user_poisoning=0
if [ "$(ninja -C "$BUILD" -t targets all 2>/dev/null | grep -c '^loom-libfuzzer-plan:')" != 0 ]; then
  ninja -C "$BUILD" --quiet loom-libfuzzer loom-libfuzzer-plan loom-libfuzzer-safetensors loom-libfuzzer-npy
  for target in frontend plan safetensors npy; do
    binary=loom-libfuzzer-$target
    [ "$target" = frontend ] && binary=loom-libfuzzer
    mkdir -p "$WORK/corpus-$target" && cp "$WORK/$target"/* "$WORK/corpus-$target/"
    echo "fuzz: $binary for ${SECONDS_EACH}s"
    if ! (cd "$WORK" && "$BIN/$binary" -max_total_time="$SECONDS_EACH" \
            -print_final_stats=1 "corpus-$target" > "libfuzzer-$target.log" 2>&1); then
      tail -40 "$WORK/libfuzzer-$target.log"
      echo "fuzz: $binary found a crash (its input is in $WORK)"
      exit 1
    fi
    grep 'stat::number_of_executed_units' "$WORK/libfuzzer-$target.log"
  done
else
  echo "fuzz: no libFuzzer targets (they need clang)"
fi
# Differential: random valid scripts against PyTorch (float64), forward
# and gradients, from a random first seed (test/Fuzz/differential.py).
if /usr/bin/python3 -c "import torch" 2> /dev/null; then
  PROGRAMS=${FUZZ_PROGRAMS:-300}
  first=$((RANDOM * 1000))
  for mode in "" --gradients --train "--gradients --shard" "--gradients --stages 2" "--train --stages 4" \
              "--gradients --layers --moe" "--train --microbatches 2 --layers --stages 2" \
              "--train --batch --moe --ranks 2" "--train --batch --layers --ranks 2 --stages 2" \
              "--train --resume --shard --layers"; do
    echo "fuzz: differential${mode:+ $mode}, seeds $first:$((first + PROGRAMS))"
    /usr/bin/python3 "$ROOT"/test/Fuzz/differential.py --loomc "$BIN"/loomc --work "$WORK/differential" \
      --seeds "$first:$((first + PROGRAMS))" $mode
  done
else
  echo "fuzz: no PyTorch for /usr/bin/python3: the differential pass is skipped"
fi
echo "fuzz: done, no crashes"
