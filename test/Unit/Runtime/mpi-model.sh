#!/usr/bin/env bash
# Runs LoomMpiModel (the test MLP) under mpirun against one rank without it:
# the same output files, summaries and saved weights; errors on any rank stop
# every rank with a non-zero status, one message, no hang; one trace per rank.
# usage: mpi-model.sh MODEL DIR MPIRUN [MPIRUN ARGS...]
set -eu
model=$1 dir=$2
shift 2
mpirun=("$@")
fail() {
  echo "FAIL: $*" >&2
  exit 1
}
ranks() { timeout 120 "${mpirun[@]}" -np "$@"; }
rm -rf "$dir" && mkdir -p "$dir"

"$model" write-exact "$dir/w.safetensors" "$dir/x.npy"
common=(--weights "$dir/w.safetensors" --input "x=$dir/x.npy")
outputs() { echo --output "y=$dir/y$1.npy" --output "hid=$dir/hid$1.npy" --output "y2=$dir/y2$1.npy"; }
"$model" 0 "${common[@]}" $(outputs 1)
"$model" 0 "${common[@]}" >"$dir/summary1.txt"
for run in "0 4" "1 2" "2 4"; do
  read -r variant count <<<"$run"
  ranks "$count" "$model" "$variant" "${common[@]}" $(outputs "-$variant") ||
    fail "variant $variant on $count ranks"
  for output in y hid y2; do
    cmp "$dir/${output}1.npy" "$dir/${output}-$variant.npy" ||
      fail "variant $variant: $output differs"
  done
  ranks "$count" "$model" "$variant" "${common[@]}" >"$dir/summary-$variant.txt" ||
    fail "variant $variant on $count ranks (summaries)"
  cmp "$dir/summary1.txt" "$dir/summary-$variant.txt" ||
    fail "variant $variant: summaries differ"
done

# Params initialized whole: 4 ranks save the file 1 rank saves.
"$model" 0 --seed 3 --random-inputs --save-weights "$dir/r1.safetensors" >/dev/null
ranks 4 "$model" 0 --seed 3 --random-inputs --save-weights "$dir/r4.safetensors" >/dev/null ||
  fail "initialized weights"
cmp "$dir/r1.safetensors" "$dir/r4.safetensors" || fail "saved weights differ"

# One trace per rank.
ranks 4 "$model" 0 --random-inputs --trace "$dir/t.json" >/dev/null || fail "traces"
for file in t.json t.rank1.json t.rank2.json t.rank3.json; do
  grep -q '"cat":"collective"' "$dir/$file" || fail "trace $file"
done

# Errors: non-zero, the message once, within the timeout.
expect_error() {
  local count=$1 message=$2
  shift 2
  local status=0
  ranks "$count" "$model" "$@" >/dev/null 2>"$dir/err.txt" || status=$?
  [ "$status" -ne 0 ] || fail "no error: $*"
  [ "$status" -ne 124 ] || fail "timed out: $*"
  [ "$(grep -cF "$message" "$dir/err.txt")" = 1 ] ||
    { cat "$dir/err.txt" >&2; fail "expected '$message' once: $*"; }
}
expect_error 3 "this run has 3 ranks, but this executable runs on 1 rank or on 4 (mesh 'gpus' dp=2 tp=2)" \
  0 --random-inputs
expect_error 4 "input 'x': cannot open $dir/missing.npy: No such file or directory" \
  0 --input "x=$dir/missing.npy"
expect_error 4 "output 'y': cannot write $dir/no/y.npy: No such file or directory" \
  0 --random-inputs --output "y=$dir/no/y.npy"
expect_error 4 "this executable was built without GPU kernels" \
  0 --random-inputs --device cuda
echo PASS
