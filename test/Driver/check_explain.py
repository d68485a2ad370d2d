"""Checks loomc --explain=json figures against values computed by hand.

usage: check_explain.py CASE < report.json

Each case recomputes, from the script's dims, what the report must say:
parameter counts, the bytes each rank holds, the bytes of each collective
and its alpha-beta time, the pipeline's activations in flight and bubble.
It prints "CASE: ok" or fails with the first figure that differs.
"""

import json
import sys

report = json.load(sys.stdin)
case = sys.argv[1]
F32, BF16 = 4, 2


def expect(what, got, want, rel=0.0):
    if rel:
        ok = abs(got - want) <= rel * abs(want)
    else:
        ok = got == want
    if not ok:
        sys.exit(f"{case}: {what}: got {got}, want {want}")


def ring_all_reduce(nbytes, n, gbs=450.0, hop_us=2.0):
    """2(n-1)/n S/B + 2(n-1) alpha, NVLink defaults of the h200."""
    return 2 * (n - 1) / n * nbytes / (gbs * 1e9) + 2 * (n - 1) * hop_us * 1e-6


def send(nbytes, gbs=450.0, hop_us=2.0):
    return nbytes / (gbs * 1e9) + hop_us * 1e-6


def collectives(kind, group):
    return [c for c in report["collectives"] if c["kind"] == kind and c["group"] == group]


if case == "mlp":
    # mlp.loom on dp=2 x tp=2: x[64, 512] bf16, w1[512, 2048] bf16 split
    # on columns, b1[2048] f32 split, w2[2048, 512] bf16 split on rows.
    B, D, F, dp, tp = 64, 512, 2048, 2, 2
    expect("param elements", report["param_elements"], D * F + F + F * D)
    expect("param bytes", report["param_bytes"], (D * F + F * D) * BF16 + F * F32)
    (rank,) = report["memory"]
    expect("params per rank", rank["params"], (D * F // tp + F * D // tp) * BF16 + F // tp * F32)
    expect("inputs per rank", rank["inputs"], B // dp * D * BF16)
    expect("gradients", rank["gradients"], 0)
    expect("activations", rank["activations"], 0)
    # The row-parallel matmul's partial sums, in f32 (its accumulation).
    (reduce,) = collectives("all-reduce", "tp")
    expect("all-reduce bytes", reduce["bytes"], B // dp * D * F32)
    expect("all-reduce calls", reduce["count"], 1)
    expect("all-reduce time", reduce["seconds"], ring_all_reduce(B // dp * D * F32, tp), 1e-9)
    expect("collectives", len(report["collectives"]), 1)

elif case in ("gpt-train", "gpt-train-zero"):
    # gpt-train.loom on dp=2 x tp=2, AdamW, f32: two blocks.
    B, T, V, D, F, L, dp, tp = 16, 32, 256, 64, 256, 2, 2, 2
    block = 4 * D + 4 * D * D + D * F + F + F * D
    expect("param elements", report["param_elements"], V * D + T * D + 2 * D + L * block)
    local_block = 4 * D + 4 * D * D // tp + D * F // tp + F // tp + F * D // tp
    params = (V * D + T * D + 2 * D + L * local_block) * F32
    (rank,) = report["memory"]
    expect("params per rank", rank["params"], params)
    expect("gradients per rank", rank["gradients"], params)
    # AdamW keeps m and v. ZeRO-1 splits them over dp on the first dim
    # not split already: every param has one but b1 ([F], split over tp).
    b1 = L * F // tp * F32
    expect("optimizer state", rank["optimizer"],
           2 * (params - b1) // dp + 2 * b1 if case == "gpt-train-zero" else 2 * params)
    # Megatron's forward all-reduces: the attention output and the MLP
    # output of each block, [B/dp, T, D] partial sums.
    ar = B // dp * T * D * F32
    forward_tp = [c for c in collectives("all-reduce", "tp") if c["phase"] == "forward"]
    expect("forward tp all-reduce calls", sum(c["count"] for c in forward_tp), 2 * L)
    for c in forward_tp:
        expect("forward tp all-reduce bytes", c["bytes"], ar)
        expect("forward tp all-reduce time", c["seconds"], ring_all_reduce(ar, tp), 1e-9)

elif case == "gpt":
    # examples/gpt.loom: bf16 with f32 masters, dp=2 x pp=2 x tp=2, four
    # blocks in two stages, 4 microbatches, 1F1B, tied embedding.
    B, T, V, D, F, dp, tp, m = 8, 64, 1024, 256, 1024, 2, 2, 4
    block = 4 * D + 4 * D * D + 2 * D * F + F
    expect("param elements", report["param_elements"], V * D + T * D + 2 * D + 4 * block)
    local_block = (4 * D + 3 * D * D // tp + D * D // tp + 2 * D * F // tp + F // tp) * F32
    # Stage 0 reads the embeddings, stage 1 the final norm and the tied
    # wte, whose bf16 copy it casts itself (rather than receiving stage
    # 0's every microbatch). Each stage accumulates its part of wte's
    # gradient; once a step they exchange them and both update wte alike
    # (Megatron-LM's embedding group), so both hold its master and state.
    stage_params = [V * D * F32 + T * D * F32 + 2 * local_block,
                    2 * local_block + 2 * D * F32 + V * D * F32]
    for rank, params in zip(report["memory"], stage_params):
        where = f"pp={rank['coordinate']}"
        expect(f"{where} params", rank["params"], params)
        expect(f"{where} gradients", rank["gradients"], params)
        expect(f"{where} AdamW state", rank["optimizer"], 2 * params)
    expect("microbatches in flight", [r["in_flight"] for r in report["memory"]], [2, 1])
    expect("uniform bubble", report["pipeline"]["uniform_bubble"], 1 / 5, 1e-9)
    # Per rank: 2 blocks x 2 forward all-reduces x 4 microbatches of one
    # [B/dp/m, T, D] f32 partial sum.
    forward_tp = [c for c in collectives("all-reduce", "tp") if c["phase"] == "forward"]
    expect("forward tp all-reduce calls", sum(c["count"] for c in forward_tp), 2 * 2 * m)
    for c in forward_tp:
        expect("forward tp all-reduce bytes", c["bytes"], B // dp // m * T * D * F32)
    # The activation between the stages, in bf16, once per microbatch.
    activation = [c for c in collectives("send/recv", "pp 0->1") if c["bytes"] == B // dp // m * T * D * BF16]
    expect("activation sends", [c["count"] for c in activation], [m])

elif case in ("stages-1f1b", "stages-gpipe"):
    # gpt-stages2.loom on pp=2 alone: 4 microbatches of B/4 = 4 rows.
    B, T, V, D, m, p = 16, 16, 96, 32, 4, 2
    pipe = report["pipeline"]
    # The textbook bubble of GPipe and 1F1B with uniform stages.
    expect("uniform bubble", pipe["uniform_bubble"], (p - 1) / (m + p - 1), 1e-9)
    held = {"stages-1f1b": [2, 1], "stages-gpipe": [4, 4]}[case]
    for rank, in_flight in zip(report["memory"], held):
        expect(f"pp={rank['coordinate']} microbatches in flight", rank["in_flight"], in_flight)
        # Each stage holds the same bytes for every microbatch in flight:
        # the backward's peak. What the runtime allocates (the figure) is a
        # slot per microbatch in flight, each at least that microbatch's,
        # and one place for one backward's values at a time.
        where = f"pp={rank['coordinate']}"
        expect(f"{where} peak activations", rank["live_activations"],
               in_flight * rank["activations_per_microbatch"])
        # One stage a rank: one pool, of that stage.
        pools = rank["activation_pools"]
        expect(f"{where} pools", [p["stages"] for p in pools], [[rank["coordinate"]]])
        expect(f"{where} slots", pools[0]["slots"], in_flight)
        expect(f"{where} allocated activations", rank["activations"],
               sum(p["slots"] * p["slot_bytes"] for p in pools)
               + rank["activation_transient_bytes"])
        expect(f"{where} slot holds a microbatch's",
               pools[0]["slot_bytes"] >= rank["activations_per_microbatch"], True)
    activation = B // m * T * D * F32
    transfers = collectives("send/recv", "pp 0->1") + collectives("send/recv", "pp 1->0")
    sends = [c for c in transfers if c["phase"] != "update"]
    expect("pipeline transfers", len(sends), 2)
    for c in transfers:
        expect("transfer time", c["seconds"], send(c["bytes"]), 1e-9)
    for c in sends:
        expect("transfers per step", c["count"], m)
    by_phase = {(c["group"], c["phase"]): c for c in sends if c["bytes"] == activation}
    expect("activation forward", ("pp 0->1", "forward") in by_phase, True)
    expect("its gradient back", ("pp 1->0", "backward") in by_phase, True)
    # The tied embedding: each stage accumulates its part of wte's
    # gradient over the microbatches; once a step, each sends its sum to
    # the other (both update wte).
    tied = sorted((c["group"], c["count"]) for c in transfers
                  if c["phase"] == "update" and c["bytes"] == V * D * F32)
    expect("tied embedding gradient parts", tied, [("pp 0->1", 1), ("pp 1->0", 1)])

else:
    sys.exit(f"unknown case {case}")

print(f"{case}: ok")
