#!/usr/bin/env bash
# `make demo`: compiles the flagship example to an executable and runs it on
# one rank, then on the mesh's 4 ranks under mpirun, and compares the two.
set -euo pipefail
build=$1
loomc="$build/bin/loomc"
example=examples/mlp.loom
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Open MPI refuses root without these; --oversubscribe: more ranks than cores.
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
mpirun=(mpirun --oversubscribe --bind-to none -np 4)

echo "== $example"
cat "$example"
echo
echo "== loomc $example -o mlp --remarks=collectives"
"$loomc" "$example" -o "$work/mlp" --remarks=collectives
echo
echo "== ./mlp --info   (both plans: one rank, and the per-rank program for 4)"
"$work/mlp" --info
echo
echo "== ./mlp --seed 1 --random-inputs --output y=y1.npy   (one rank)"
"$work/mlp" --seed 1 --random-inputs --output y="$work/y1.npy" --trace "$work/trace.json"
echo
echo "== ${mpirun[*]} ./mlp --seed 1 --random-inputs --output y=y4.npy"
"${mpirun[@]}" "$work/mlp" --seed 1 --random-inputs --output y="$work/y4.npy" \
  --trace "$work/trace4.json"
echo
echo "== the 4-rank output against the one-rank output"
/usr/bin/python3 - "$work/y1.npy" "$work/y4.npy" <<'PY'
import sys
import numpy as np
one, four = (np.load(p).astype(np.float32) for p in sys.argv[1:3])
diff = np.abs(one - four)
print(f"   y: {list(one.shape)}, max |1 rank - 4 ranks| = {diff.max():.3g}, "
      f"elements differing: {int((diff > 0).sum())} of {one.size}")
print(f"   first values: 1 rank {one.ravel()[:4]}, 4 ranks {four.ravel()[:4]}")
if diff.max() > 0:
    print("   (the tensor-parallel partial sums are added in another order, so a few")
    print("    bf16 results round the other way: one ulp; docs/precision.md)")
PY
steps=$(grep -o '"ph": *"X"' "$work/trace.json" | wc -l)
echo "   ($steps steps traced on one rank; the 4-rank run wrote trace4.json and"
echo "    trace4.rank1..3.json; open them in chrome://tracing or Perfetto)"
echo
echo "Every stage: loomc $example --emit=STAGE (docs/pipeline.md); the per-rank"
echo "program and its collectives: --emit=partitioned (docs/partitioning.md)."

# Training: the byte-level GPT of examples/gpt-train.loom on a text every
# Debian machine has, on the mesh's 4 ranks (dp x tp), then its first steps
# again on one rank.
text=/usr/share/common-licenses/GPL-3
[ -r "$text" ] || text=README.md
train=examples/gpt-train.loom
echo
echo "== loomc $train --train -o gpt   (forward, backward and AdamW as one step)"
"$loomc" "$train" --train -o "$work/gpt"
echo
echo "== ${mpirun[*]} ./gpt train --data $text --log gpt4.jsonl --save gpt.ckpt   (every 25th step shown)"
"${mpirun[@]}" "$work/gpt" train --data "$text" --log "$work/gpt4.jsonl" --save "$work/gpt.ckpt" \
  | awk '/^step/ { n++; if (n == 1 || n % 25 == 0) print "   " $0; next } { print "   " $0 }'
echo
echo "== the first 20 steps on one rank against the 4-rank run"
"$work/gpt" train --steps 20 --data "$text" --log "$work/gpt1.jsonl" > /dev/null
/usr/bin/python3 - "$work/gpt1.jsonl" "$work/gpt4.jsonl" <<'PY'
import json, sys
one, four = ([json.loads(line) for line in open(p)] for p in sys.argv[1:3])
worst = max(abs(a["loss"] - b["loss"]) / a["loss"] for a, b in zip(one, four))
print(f"   20 steps: max relative difference of the losses {worst:.1e} (f32; the ranks")
print(f"   add partial sums in another order)")
print(f"   loss: step 1 {four[0]['loss']:.3f}, step {len(four)} {four[-1]['loss']:.3f}"
      f" (ln 256 = 5.545: a uniform guess over the bytes)")
PY

# The trained model writes: its forward, given the checkpoint, extends a
# prompt byte by byte (a sample at temperature 0.6; ./gptf generate
# --help). Built for one row (--dim B=1; dp = 1 then, the heads still
# split over tp = 2 ranks): generate reads one row's logits.
generate=(mpirun --oversubscribe --bind-to none -np 2)
echo
echo "== loomc $train --dim B=1 --mesh dp=1 -o gptf; ${generate[*]} ./gptf generate --weights gpt.ckpt --prompt \"This License \" --tokens 160 --temperature 0.6"
"$loomc" "$train" --dim B=1 --mesh dp=1 -o "$work/gptf" > /dev/null
# Its messages (the checkpoint's optimizer state is ignored) after the
# text, not in the middle of it.
"${generate[@]}" "$work/gptf" generate --weights "$work/gpt.ckpt" --prompt "This License " \
  --tokens 160 --temperature 0.6 2> "$work/generate.err" | sed 's/^/   /' \
  || { sed 's/^/   /' "$work/generate.err"; exit 1; }
sed 's/^/   /' "$work/generate.err"
echo "   (a 2-block byte model after 300 steps, loss near 2.6 nats a byte: word-like, not yet words)"
