//===- LoomStructureOps.td - Pipeline stages, MoE blocks, training -------===//

#ifndef LOOM_STRUCTURE_OPS_TD
#define LOOM_STRUCTURE_OPS_TD

def Loom_StageOp : Loom_Op<"stage", [SingleBlock]> {
  let summary = "The ops of one pipeline stage";
  let description = [{
    The region's ops run on the ranks of pipeline stage `stage` (a
    coordinate of the pipeline mesh axis). Values it yields flow to later
    stages; the partitioner turns those edges into send/recv pairs.

    ```mlir
    %h = loom.stage 0 -> tensor<8x16x64xf32> {
      %y = loom.gelu %x : tensor<8x16x64xf32>
      loom.yield %y : tensor<8x16x64xf32>
    }
    ```
  }];
  let arguments = (ins I64Attr:$stage);
  let results = (outs Variadic<AnyType>:$results);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat =
      "$stage (`->` type($results)^)? attr-dict-with-keyword $body";
  let hasVerifier = 1;
}

def Loom_MoeOp : Loom_Op<"moe", [IsolatedFromAbove, SingleBlock]> {
  let summary = "A mixture-of-experts block with top-k routing";
  let description = [{
    Each token of `input[..., D]` is routed by `softmax(input @ router)` to
    its `top_k` best experts (at most `capacity` tokens per expert,
    `capacity = ceil(top_k * tokens * capacity_factor / experts)`); the
    outputs are combined weighted by the router probabilities. The body is
    one expert: its first argument is the `[capacity, D]` token tile, the
    others are that expert's slices of `expert_params`, whose leading
    dimension is the expert index (split over the mesh axis `axis`).
    A positive `aux_loss` adds that multiple of Switch's load-balancing
    loss to the trained model's loss, a positive `z_loss` that multiple of
    ST-MoE's router z-loss (docs/moe.md).

    ```mlir
    %y = loom.moe %x router %r params(%w) {axis = "ep", capacity = 8 : i64,
                   capacity_factor = 1.0 : f64, experts = 4 : i64, top_k = 2 : i64}
        : (tensor<16x32xf32>, tensor<32x4xf32>, tensor<4x32x32xf32>) -> tensor<16x32xf32> {
    ^bb0(%t: tensor<8x32xf32>, %we: tensor<32x32xf32>):
      %o = loom.matmul %t, %we accumulate f32
          : (tensor<8x32xf32>, tensor<32x32xf32>) -> tensor<8x32xf32>
      loom.yield %o : tensor<8x32xf32>
    }
    ```
  }];
  let arguments = (ins Loom_FloatTensor:$input, Loom_FloatTensor:$router,
                       Variadic<Loom_FloatTensor>:$expert_params,
                       I64Attr:$experts, I64Attr:$top_k,
                       F64Attr:$capacity_factor, I64Attr:$capacity,
                       StrAttr:$axis,
                       DefaultValuedAttr<F64Attr, "0.0">:$aux_loss,
                       DefaultValuedAttr<F64Attr, "0.0">:$z_loss);
  let results = (outs Loom_FloatTensor:$result);
  let regions = (region SizedRegion<1>:$body);
  let assemblyFormat = [{
    $input `router` $router (`params` `(` $expert_params^ `)`)? attr-dict `:`
    functional-type(operands, results) $body
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The capacity the front end derives from the routing parameters.
    static int64_t computeCapacity(int64_t tokens, int64_t experts,
                                   int64_t topK, double capacityFactor);
  }];
}

def Loom_YieldOp : Loom_Op<"yield", [Pure, Terminator, ReturnLike,
    ParentOneOf<["StageOp", "MoeOp"]>]> {
  let summary = "Ends a stage or expert body, giving its results";
  let description = [{
    ```mlir
    loom.yield %y : tensor<8x16x64xf32>
    ```
  }];
  let arguments = (ins Variadic<AnyType>:$values);
  let assemblyFormat = "($values^ `:` type($values))? attr-dict";
}

def Loom_AccumulateOp : Loom_Op<"accumulate", [SameOperandsAndResultType]> {
  let summary = "The mean of a value over a training step's microbatches";
  let description = [{
    With `microbatches m` in the train section, the step's program up to
    its accumulates runs once per microbatch and the rest once per step:
    an accumulate's result is the mean of its input over the m runs (a sum
    in f32, in microbatch order, divided by m once). loom-optimizer-step
    puts one on each gradient and on the loss; it stays in the model as a
    plan step of its own (`accumulate IN OUT`), like a collective, and
    keeps its input's layout, partial sums included, so a gradient's
    data-parallel sum runs once per step, after the last microbatch.

    ```mlir
    %g = loom.accumulate %dw over 4 microbatches : tensor<64x256xf32>
    ```
  }];
  let arguments = (ins RankedTensorOf<[F32]>:$input, I64Attr:$microbatches);
  let results = (outs RankedTensorOf<[F32]>:$result);
  let assemblyFormat = [{
    $input `over` $microbatches `microbatches` attr-dict `:` type($input)
  }];
  let hasVerifier = 1;
}

def Loom_TrainOp : Loom_Op<"train", [HasParent<"ModuleOp">,
    DeclareOpInterfaceMethods<SymbolUserOpInterface>]> {
  let summary = "How a model is trained";
  let description = [{
    Names the model function (whose `loom.loss` result is minimized), the
    optimizer and its hyperparameters, microbatching, the pipeline schedule
    and loss scaling (`none`, `static` with `initial_scale`, or `dynamic`).
    The learning-rate schedule (`constant`, or `warmup_cosine` or
    `warmup_linear` with `warmup` steps and `min_lr`), gradient clipping (`clip_grad_norm`, a global
    L2 norm) and ZeRO (`zero = 1`: the optimizer state split over the
    data-parallel axes) are optional attributes.

    ```mlir
    loom.train @gpt optimizer "adamw" {lr = 3.0e-4, weight_decay = 0.1}
        microbatches 4 schedule "1f1b" loss_scale "none" steps 10
        {lr_schedule = "warmup_cosine", warmup = 100.0, min_lr = 3.0e-5,
         clip_grad_norm = 1.0}
    ```
  }];
  let arguments = (ins FlatSymbolRefAttr:$model, StrAttr:$optimizer,
                       DictionaryAttr:$hyperparameters, I64Attr:$microbatches,
                       StrAttr:$schedule, StrAttr:$loss_scale,
                       OptionalAttr<F64Attr>:$initial_scale, I64Attr:$steps,
                       OptionalAttr<StrAttr>:$lr_schedule,
                       OptionalAttr<F64Attr>:$warmup,
                       OptionalAttr<F64Attr>:$min_lr,
                       OptionalAttr<F64Attr>:$clip_grad_norm,
                       OptionalAttr<I64Attr>:$zero);
  let assemblyFormat = [{
    $model `optimizer` $optimizer $hyperparameters `microbatches` $microbatches
    `schedule` $schedule `loss_scale` $loss_scale
    (`initial_scale` $initial_scale^)? `steps` $steps attr-dict
  }];
  let hasVerifier = 1;
  let extraClassDeclaration = [{
    /// The hyperparameters `optimizer` understands; empty if it is unknown.
    static ::llvm::ArrayRef<::llvm::StringRef>
    hyperparametersOf(::llvm::StringRef optimizer);
    /// torch.optim's learning rate for `optimizer` when the script sets none.
    static double defaultLearningRate(::llvm::StringRef optimizer);
  }];
}

#endif // LOOM_STRUCTURE_OPS_TD
