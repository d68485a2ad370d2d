//===- LoomGradOps.td - Ops that only gradients need ----------------------===//
//
// What the VJP rules cannot write with the forward ops: broadcasting to a
// shape, derivatives of activations, scatter-adds and the fused gradient of
// the softmax cross-entropy. loom-autodiff creates them; scripts cannot,
// but for broadcasting (the `broadcast` builtin). Also the pieces of a
// vocab-parallel cross-entropy, which loom-partition creates in a per-rank
// program.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_GRAD_OPS_TD
#define LOOM_GRAD_OPS_TD

def Loom_BroadcastOp : Loom_Op<"broadcast", [DeclareOpInterfaceMethods<Loom_VjpOpInterface>, Pure]> {
  let summary = "Broadcasts a tensor to a shape (numpy rules)";
  let description = [{
    The gradient of a reduction or of a broadcast operand goes back to the
    shape it came from: dims are aligned at the trailing end, missing
    leading dims are added and dims of size 1 repeat.

    ```mlir
    %b = loom.broadcast %g : tensor<16x1xf32> -> tensor<16x64xf32>
    ```
  }];
  let arguments = (ins Loom_Tensor:$input);
  let results = (outs Loom_Tensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($input) `->` type($result)";
  let hasVerifier = 1;
}

def Loom_MaxMaskOp : Loom_Op<"max_mask", [Pure]> {
  let summary = "1 where an element equals its row's maximum, else 0 (f32)";
  let description = [{
    The gradient of loom.max goes to the elements equal to the maximum
    (`max` is the reduction's result with the axis kept as size 1,
    broadcast against `input`), shared evenly among ties, as PyTorch's
    amax does.

    ```mlir
    %m = loom.max_mask %x, %max : (tensor<16x8xf32>, tensor<16x1xf32>) -> tensor<16x8xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$max);
  let results = (outs RankedTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $input `,` $max attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_ActivationGradOp : Loom_Op<"activation_grad", [Pure]> {
  let summary = "dy * f'(x) for an activation f (gelu, relu, silu or abs)";
  let description = [{
    The derivative of the activation, computed in f32 from `x` and
    multiplied by `dy` (the result has `dy`'s type). relu' and abs' are 0
    at 0, as in PyTorch.

    ```mlir
    %dx = loom.activation_grad "gelu" %x, %dy
        : (tensor<16x256xf32>, tensor<16x256xf32>) -> tensor<16x256xf32>
    ```
  }];
  let arguments = (ins StrAttr:$activation, Loom_FloatTensor:$input,
                       Loom_FloatTensor:$grad);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $activation $input `,` $grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_NormGradOp : Loom_Op<"norm_grad", [Pure]> {
  let summary = "The gradients of a layernorm or rmsnorm, row by row";
  let description = [{
    From the norm's input `x` (`[..., D]`), the gradient `dy` of its result
    (of `x`'s shape, any float type: a bf16 norm's f32 result has an f32
    gradient) and its optional `scale` (`[D]`): the gradient of `x` (of
    `x`'s type)
    and, in f32, the gradients of the scale (`sum of dy * x_hat` over the
    rows) and of the bias (`sum of dy`). The statistics are recomputed from
    `x` in f32 (`centered`: layernorm's mean and variance; otherwise
    rmsnorm's mean square), and with `g = dy * scale`:
    `dx = rstd * (g - mean(g) - x_hat * mean(g * x_hat))`, without the
    `mean(g)` term for rmsnorm. One op instead of the dozen elementwise
    ops and reductions of the formula: their full-size intermediates (six
    passes over `[..., D]`) were the backward's cost on the CPU.

    ```mlir
    %dx, %dg, %db = loom.norm_grad %x, %dy scale %g epsilon 1.000000e-05 centered
        : (tensor<64x512xbf16>, tensor<64x512xbf16>, tensor<512xf32>)
        -> (tensor<64x512xbf16>, tensor<512xf32>, tensor<512xf32>)
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$grad,
                       Optional<Loom_FloatTensor>:$scale, F64Attr:$epsilon,
                       UnitAttr:$centered);
  let results = (outs Loom_FloatTensor:$input_grad, RankedTensorOf<[F32]>:$scale_grad,
                      RankedTensorOf<[F32]>:$bias_grad);
  let assemblyFormat = [{
    $input `,` $grad (`scale` $scale^)? `epsilon` $epsilon (`centered` $centered^)?
    attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_CausalMaskGradOp : Loom_Op<"causal_mask_grad",
                                    [Pure, SameOperandsAndResultType]> {
  let summary = "Zeroes entries above the diagonal of the last two dims";
  let description = [{
    The gradient through `loom.causal_mask`: the masked entries do not
    depend on the input.

    ```mlir
    %d = loom.causal_mask_grad %g : tensor<2x4x16x16xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = "$input attr-dict `:` type($result)";
}

def Loom_AttentionGradOp : Loom_Op<"attention_grad", [Pure]> {
  let summary = "Gradients of loom.attention's query, key and value";
  let description = [{
    What the VJP rules of the five ops `loom.attention` stands for give,
    from the recomputed scores: `dp = result_grad @ transpose(value)` (in
    f32 when accumulating in f32, as loom-autodiff widens a gradient matmul
    that is read in f32), `ds = p * (dp - dot)` (0 above the diagonal when
    causal, times the scale), `query_grad = ds @ key`, `key_grad =
    transpose(ds) @ query`, `value_grad = transpose(p) @ result_grad`. The
    softmax rule's row sums `dot = rowsum(dp * p)` are taken as
    FlashAttention-2 takes them, `rowsum(result_grad * output)` in f32 from
    the forward's result, `output` (equal but for that result's rounding:
    `dp * p` summed over the keys is `result_grad` times `p @ value`), so
    that no pass over the keys is spent on them; and `p` is `exp(s - lse)`
    from the forward's rows' log-sum-exp (`loom.attention`'s `lse`), not
    `exp(s - m) / l` from statistics found again (equal but for f32
    rounding), so that the scores are formed once. On the CPU it runs in
    blocks, as the forward does, and never holds the [queries, keys]
    scores.

    ```mlir
    %dq, %dk, %dv = loom.attention_grad %q, %k, %v, %o, %lse, %do scale %s causal accumulate f32
        : (tensor<2x64x16xbf16>, tensor<2x64x16xbf16>, tensor<2x64x16xbf16>,
           tensor<2x64x16xbf16>, tensor<2x64xf32>, tensor<2x64x16xbf16>, tensor<bf16>)
        -> (tensor<2x64x16xbf16>, tensor<2x64x16xbf16>, tensor<2x64x16xbf16>)
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$query, Loom_FloatTensor:$key,
                       Loom_FloatTensor:$value, Loom_FloatTensor:$output,
                       Loom_FloatTensor:$lse, Loom_FloatTensor:$result_grad,
                       Optional<Loom_FloatTensor>:$scale, UnitAttr:$causal,
                       TypeAttrOf<AnyFloat>:$accumulate);
  let results = (outs Loom_FloatTensor:$query_grad, Loom_FloatTensor:$key_grad,
                      Loom_FloatTensor:$value_grad);
  let assemblyFormat = [{
    $query `,` $key `,` $value `,` $output `,` $lse `,` $result_grad (`scale` $scale^)?
    (`causal` $causal^)? `accumulate` $accumulate attr-dict
    `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_EmbeddingGradOp : Loom_Op<"embedding_grad", [Pure]> {
  let summary = "Scatter-add of row gradients into a table[V, D]";
  let description = [{
    `result[v, :] = sum of grad[p, :] over the positions p with ids[p] = v`,
    accumulated in f32 (ids are clamped into the table, as the lookup does).
    With `rows %r of V` (vocab-parallel, built by loom-partition) the
    result holds consecutive rows `r[0]`, `r[0] + 1`, ... of a table of
    `V` rows: ids are clamped into `[0, V)` and those of other rows add
    nothing.

    ```mlir
    %dt = loom.embedding_grad %ids, %g
        : (tensor<2x16xi32>, tensor<2x16x64xf32>) -> tensor<1000x64xf32>
    %dh = loom.embedding_grad %ids, %g rows %r of 1000
        : (tensor<2x16xi32>, tensor<2x16x64xf32>, tensor<500xi32>) -> tensor<500x64xf32>
    ```
  }];
  let arguments = (ins Loom_IndexTensor:$ids, Loom_FloatTensor:$grad,
                       Optional<Loom_IndexTensor>:$rows, OptionalAttr<I64Attr>:$vocab);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $ids `,` $grad (`rows` $rows^ `of` $vocab)? attr-dict `:` functional-type(operands, results)
  }];
  let builders = [
    OpBuilder<(ins "Type":$type, "Value":$ids, "Value":$grad), [{
      build($_builder, $_state, type, ids, grad, Value(), IntegerAttr());
    }]>
  ];
  let hasVerifier = 1;
}

def Loom_CrossEntropyGradOp : Loom_Op<"cross_entropy_grad", [Pure]> {
  let summary = "d loss / d logits of the mean softmax cross-entropy";
  let description = [{
    `(softmax(logits) - onehot(labels)) * grad / rows`, statistics in f32,
    where `grad` is the rank-0 gradient of the loss.

    ```mlir
    %dl = loom.cross_entropy_grad %logits, %labels, %g
        : (tensor<2x16x96xf32>, tensor<2x16xi32>, tensor<f32>) -> tensor<2x16x96xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$logits, Loom_IndexTensor:$labels,
                       0DTensorOf<[F32]>:$grad);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `,` $grad attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

//===----------------------------------------------------------------------===//
// Vocab-parallel cross-entropy (Megatron): logits split over the classes
// are never gathered. Each rank reduces its classes; the ranks' row maxima
// are gathered and their sums of exponentials and label logits summed.
//===----------------------------------------------------------------------===//

def Loom_VocabStatsOp : Loom_Op<"vocab_stats", [Pure]> {
  let summary = "One rank's softmax sums of logits split over the classes";
  let description = [{
    The rank holds the classes `ids` (their global indices) of each row.
    Per row, in f32: `sum_exp = sum(exp(logits - max))` over those classes,
    `max` being the row's maximum over all ranks, and `target`, the label's
    logit if this rank holds the label's class, else 0. Their sums over the
    ranks are the row's sum of exponentials and its label logit.

    ```mlir
    %s, %t = loom.vocab_stats %logits, %labels, %ids, %max
        : (tensor<8x32x128xf32>, tensor<8x32xi32>, tensor<128xi32>, tensor<8x32xf32>)
        -> (tensor<8x32xf32>, tensor<8x32xf32>)
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$logits, Loom_IndexTensor:$labels,
                       Loom_IndexTensor:$ids, RankedTensorOf<[F32]>:$max);
  let results = (outs RankedTensorOf<[F32]>:$sum_exp,
                      RankedTensorOf<[F32]>:$target);
  let assemblyFormat = [{
    $logits `,` $labels `,` $ids `,` $max attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_VocabLossOp : Loom_Op<"vocab_loss", [Pure]> {
  let summary = "Mean cross-entropy from the rows' statistics";
  let description = [{
    The mean over the rows of `log(sum_exp) - (target - max)`: the softmax
    cross-entropy of rows whose statistics the ranks have summed.

    ```mlir
    %l = loom.vocab_loss %max, %sum_exp, %target
        : (tensor<8x32xf32>, tensor<8x32xf32>, tensor<8x32xf32>) -> tensor<f32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32]>:$max, RankedTensorOf<[F32]>:$sum_exp,
                       RankedTensorOf<[F32]>:$target);
  let results = (outs 0DTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $max `,` $sum_exp `,` $target attr-dict `:` functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

def Loom_VocabGradOp : Loom_Op<"vocab_grad", [Pure]> {
  let summary = "d loss / d logits of a vocab-parallel cross-entropy";
  let description = [{
    `(exp(logits - max) / sum_exp - onehot) * grad / rows` on one rank's
    classes `ids`, from the statistics of the forward (summed over the
    ranks), where `onehot` is 1 where `ids` is the row's label.

    ```mlir
    %d = loom.vocab_grad %logits, %labels, %ids, %max, %sum_exp, %g
        : (tensor<8x32x128xf32>, tensor<8x32xi32>, tensor<128xi32>, tensor<8x32xf32>,
           tensor<8x32xf32>, tensor<f32>) -> tensor<8x32x128xf32>
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$logits, Loom_IndexTensor:$labels,
                       Loom_IndexTensor:$ids, RankedTensorOf<[F32]>:$max,
                       RankedTensorOf<[F32]>:$sum_exp, 0DTensorOf<[F32]>:$grad);
  let results = (outs Loom_FloatTensor:$result);
  let assemblyFormat = [{
    $logits `,` $labels `,` $ids `,` $max `,` $sum_exp `,` $grad attr-dict `:`
    functional-type(operands, results)
  }];
  let hasVerifier = 1;
}

#endif // LOOM_GRAD_OPS_TD
