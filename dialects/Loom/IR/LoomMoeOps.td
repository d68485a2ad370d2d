//===- LoomMoeOps.td - The routed pieces a loom.moe expands into ----------===//
//
// loom-expand-moe rewrites each loom.moe into ordinary loom ops (the f32
// router matmul, its softmax, the experts as one batched computation over
// an [experts, capacity, ...] buffer) and these five: the routing decision,
// the gate weights, the gather of tokens into expert slots, the weighted
// gather back, and the gates' gradient. A slot is `expert * capacity + c`;
// a choice is `token * top_k + k`. Integer results carry no gradient.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_MOE_OPS_TD
#define LOOM_MOE_OPS_TD

def Loom_MoeRouteOp : Loom_Op<"moe_route", [Pure, DeclareOpInterfaceMethods<Loom_VjpOpInterface>]> {
  let summary = "Top-k expert choices and capacity slots of every token";
  let description = [{
    From router probabilities `probs[N, E]`: `expert[n, k]` is token n's
    k-th best expert (ties to the lower index); `slot[n, k]` is the slot
    that choice got, or -1 where its expert was already full. Slots are
    claimed first by every token's first choice in token order, then by
    every second choice (GShard's priority). `source[s]` is the choice
    `n * top_k + k` holding slot s, or -1 for an empty slot, and
    `first_counts[e]` the number of first choices of expert e (kept or
    not), for the load-balancing loss. Its gradient is zero: the counts
    are piecewise constant in the probabilities.

    In a per-rank program whose tokens are split over the expert axis
    (and perhaps data-parallel axes; loom-partition) the op routes the
    rank's tokens only. `offsets[0, k,
    e]` counts the choices of the other ranks that claim slots of expert e
    before this rank's priority-k choices do (loom.moe_offsets), so a
    choice is kept when its position among the rank's own choices of e
    plus that offset is below `capacity`, exactly as on one rank. Slots
    are then numbered in the rank's send buffer, `expert * buffer + c`,
    where `buffer` bounds the choices one rank can keep for one expert.
    With `blocks` B, each expert's slots are B blocks of `capacity / B`
    (held by B ranks), and a kept choice's send row is
    `(expert * B + block) * buffer + c`, c its index among the rank's kept
    choices of that expert and block.

    ```mlir
    %e, %s, %src, %cnt = loom.moe_route %p top_k 2 capacity 5
        : tensor<16x4xf32> -> tensor<16x2xi32>, tensor<16x2xi32>, tensor<20xi32>, tensor<4xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32]>:$probs,
                       Optional<RankedTensorOf<[I32]>>:$offsets, I64Attr:$top_k,
                       I64Attr:$capacity, OptionalAttr<I64Attr>:$buffer,
                       OptionalAttr<I64Attr>:$blocks);
  let results = (outs RankedTensorOf<[I32]>:$expert, RankedTensorOf<[I32]>:$slot,
                      RankedTensorOf<[I32]>:$source,
                      RankedTensorOf<[F32]>:$first_counts);
  let assemblyFormat = [{
    $probs (`offsets` $offsets^)? `top_k` $top_k `capacity` $capacity
    (`buffer` $buffer^)? (`blocks` $blocks^)? attr-dict `:` type($probs)
    (`,` type($offsets)^)? `->`
    type($expert) `,` type($slot) `,` type($source) `,` type($first_counts)
  }];
  let hasVerifier = 1;
}

def Loom_MoeGateOp : Loom_Op<"moe_gate", [Pure, DeclareOpInterfaceMethods<Loom_VjpOpInterface>]> {
  let summary = "The combine weight of each expert choice";
  let description = [{
    `gate[n, k] = probs[n, expert[n, k]]`, renormalized over the k choices
    to sum to 1 when `top_k` is 2 or more (dropped choices included, as in
    GShard: a dropped choice's weight is lost, not given to the other).

    ```mlir
    %g = loom.moe_gate %p[%e] : (tensor<16x4xf32>, tensor<16x2xi32>) -> tensor<16x2xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32]>:$probs, RankedTensorOf<[I32]>:$expert);
  let results = (outs RankedTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $probs `[` $expert `]` attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_MoeGateGradOp : Loom_Op<"moe_gate_grad", [Pure]> {
  let summary = "d loss / d probs through loom.moe_gate";
  let description = [{
    With `g` the gradient of the gates: for top_k 1, `g` at the chosen
    expert; otherwise, with `S` the sum of the chosen probabilities,
    `g[n, k] / S - sum_j g[n, j] * probs[n, expert[n, j]] / S^2` at each
    chosen expert, zero elsewhere.

    ```mlir
    %dp = loom.moe_gate_grad %p[%e], %g
        : (tensor<16x4xf32>, tensor<16x2xi32>, tensor<16x2xf32>) -> tensor<16x4xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32]>:$probs, RankedTensorOf<[I32]>:$expert,
                       RankedTensorOf<[F32]>:$grad);
  let results = (outs RankedTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $probs `[` $expert `]` `,` $grad attr-dict `:` functional-type(operands, results)
  }];
}

def Loom_MoeDispatchOp : Loom_Op<"moe_dispatch", [Pure, DeclareOpInterfaceMethods<Loom_VjpOpInterface>]> {
  let summary = "Gathers tokens into their expert slots";
  let description = [{
    `result[s, :] = input[source[s] / top_k, :]` (times `weights` at that
    choice, when given), and zero for an empty slot. `slot` is the inverse
    map (loom.moe_route's), which the gradient, a loom.moe_combine, reads.

    ```mlir
    %t = loom.moe_dispatch %x[%src, %s]
        : (tensor<16x32xf32>, tensor<20xi32>, tensor<16x2xi32>) -> tensor<20x32xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input, RankedTensorOf<[I32]>:$source,
                       RankedTensorOf<[I32]>:$slot,
                       Optional<RankedTensorOf<[F32]>>:$weights);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input `[` $source `,` $slot `]` (`weights` $weights^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_MoeCombineOp : Loom_Op<"moe_combine", [Pure, DeclareOpInterfaceMethods<Loom_VjpOpInterface>]> {
  let summary = "Sums each token's expert outputs, weighted by its gates";
  let description = [{
    `result[n, :] = sum over k with slot[n, k] >= 0 of
    weights[n, k] * input[slot[n, k], :]`, accumulated in f32 in k order
    and rounded to the input's element type; a token whose choices were
    all dropped gets zeros. Without `weights` every weight is 1.

    ```mlir
    %y = loom.moe_combine %o[%src, %s] weights %g
        : (tensor<20x32xf32>, tensor<20xi32>, tensor<16x2xi32>, tensor<16x2xf32>) -> tensor<16x32xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input, RankedTensorOf<[I32]>:$source,
                       RankedTensorOf<[I32]>:$slot,
                       Optional<RankedTensorOf<[F32]>>:$weights);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $input `[` $source `,` $slot `]` (`weights` $weights^)? attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_MoeSlotDotOp : Loom_Op<"moe_slot_dot", [Pure]> {
  let summary = "Per choice, the dot product of a token row and its slot row";
  let description = [{
    `result[n, k] = dot(tokens[n, :], slots[slot[n, k], :])` in f32, or 0
    where the choice was dropped: the gradient of the weights of a
    loom.moe_combine or loom.moe_dispatch.

    ```mlir
    %dg = loom.moe_slot_dot %dy, %o[%s]
        : (tensor<16x32xf32>, tensor<20x32xf32>, tensor<16x2xi32>) -> tensor<16x2xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$tokens, Loom_FloatTensor:$slots,
                       RankedTensorOf<[I32]>:$slot);
  let results = (outs RankedTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $tokens `,` $slots `[` $slot `]` attr-dict `:` functional-type(operands, results)
  }];
}

def Loom_MoeStatsOp : Loom_Op<"moe_stats", [Pure]> {
  let summary = "Choices routed to and dropped by each expert";
  let description = [{
    `result[e, 0]` counts the choices (of any rank k) routed to expert e and
    `result[e, 1]` those of them that found e full, as f32: the model output
    `moe_stats.BLOCK` the executable's `--moe-stats` prints.

    ```mlir
    %st = loom.moe_stats %e, %s : (tensor<16x2xi32>, tensor<16x2xi32>) -> tensor<4x2xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[I32]>:$expert, RankedTensorOf<[I32]>:$slot);
  let results = (outs RankedTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $expert `,` $slot attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Expert parallelism: the pieces loom-partition adds to a per-rank program
// whose tokens and experts are split over one axis, so that tokens reach
// their experts by two all-to-alls and only routing counts are gathered.
//===----------------------------------------------------------------------===//

def Loom_MoeCountsOp : Loom_Op<"moe_counts", [Pure]> {
  let summary = "A rank's choices per priority and expert";
  let description = [{
    `result[0, k, e]` counts the tokens whose k-th choice is expert e: one
    rank's row of the counts every rank all-gathers.

    ```mlir
    %c = loom.moe_counts %e : tensor<4x2xi32> -> tensor<1x2x8xi32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[I32]>:$expert);
  let results = (outs RankedTensorOf<[I32]>:$result);
  let assemblyFormat = "$expert attr-dict `:` type($expert) `->` type($result)";
  let hasVerifier = 1;
}

def Loom_MoeOffsetsOp : Loom_Op<"moe_offsets", [Pure]> {
  let summary = "Per rank, the choices of other ranks ahead of its own";
  let description = [{
    From every rank's counts `counts[r, k, e]` (ranks in token order):
    `result[r, k, e]` is the number of choices that claim slots of expert
    e before rank r's priority-k choices do: every other rank's choices of
    a lower priority, and the priority-k choices of the ranks before r.

    ```mlir
    %o = loom.moe_offsets %all : tensor<4x2x8xi32> -> tensor<4x2x8xi32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[I32]>:$counts);
  let results = (outs RankedTensorOf<[I32]>:$result);
  let assemblyFormat = "$counts attr-dict `:` type($counts) `->` type($result)";
  let hasVerifier = 1;
}

def Loom_MoeExchangeMapOp : Loom_Op<"moe_exchange_map", [Pure]> {
  let summary = "Where the rows an all-to-all brings go in the expert slots";
  let description = [{
    An expert rank receives from each rank r (in the all-to-all's member
    order), for each of its E local experts, `buffer` rows: row `(r * E + e) * buffer + j` is rank r's j-th
    kept choice of local expert e. From the counts and offsets of the local
    experts (`[ranks, top_k, E]`, as loom.moe_counts and loom.moe_offsets
    give them), `slot[row, 0]` is that row's slot `e * capacity + c` of
    the local experts' buffer (c its position on one rank), or -1 for a
    padding row, and `source[slot]` the row back, or -1. A loom.moe_dispatch
    through these maps fills the experts' slots, a loom.moe_combine empties
    them. With `blocks` B the rank holds block `block[0]` of `capacity / B`
    slots of each local expert (loom.moe_route's `blocks`): row j is rank
    r's j-th kept choice of e within that block, and its slot
    `e * (capacity / B) + c` counts from the block's first slot.

    ```mlir
    %slot, %src = loom.moe_exchange_map %c, %o capacity 6 buffer 4
        : tensor<4x2x2xi32>, tensor<4x2x2xi32> -> tensor<32x1xi32>, tensor<12xi32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[I32]>:$counts, RankedTensorOf<[I32]>:$offsets,
                       Optional<RankedTensorOf<[I32]>>:$block,
                       I64Attr:$capacity, I64Attr:$buffer,
                       OptionalAttr<I64Attr>:$blocks);
  let results = (outs RankedTensorOf<[I32]>:$slot, RankedTensorOf<[I32]>:$source);
  let assemblyFormat = [{
    $counts `,` $offsets (`block` $block^)? `capacity` $capacity `buffer` $buffer
    (`blocks` $blocks^)? attr-dict `:` type($counts) `,` type($offsets)
    (`,` type($block)^)? `->` type($slot) `,` type($source)
  }];
  let hasVerifier = 1;
}

#endif // LOOM_MOE_OPS_TD
