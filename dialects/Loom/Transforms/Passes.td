//===- Passes.td - Loom's transformations on the loom dialect ---------------===//

#ifndef LOOM_TRANSFORMS_PASSES_TD
#define LOOM_TRANSFORMS_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomInlineStages : Pass<"loom-inline-stages", "mlir::func::FuncOp"> {
  let summary = "Inline pipeline stages (the single-rank program)";
  let description = [{
    Replaces each `loom.stage` by its body and the stage's results by the
    values its `loom.yield` gives: on one rank every stage runs in order.
  }];
  let dependentDialects = ["mlir::loom::LoomDialect"];
}

def LoomStripShardings : Pass<"loom-strip-shardings", "mlir::func::FuncOp"> {
  let summary = "Drop sharding annotations (the single-rank program)";
  let description = [{
    Replaces each `shard.shard` by its operand and erases the then unused
    `shard.sharding` ops: on one rank every tensor is whole.
  }];
  let dependentDialects = ["mlir::shard::ShardDialect"];
}

def LoomStripDropout : Pass<"loom-strip-dropout", "mlir::func::FuncOp"> {
  let summary = "Replace each loom.dropout outside a training step by its input";
  let description = [{
    A `loom.dropout` without keys (a forward, a gradient program, whose
    dropouts loom-optimizer-step did not key) drops nothing: it is replaced
    by its input, and its positions' unused `loom.arange`s are erased.
  }];
}

def LoomExpandMoe : Pass<"loom-expand-moe", "mlir::func::FuncOp"> {
  let summary = "Rewrite each loom.moe into routing, slot gathers and batched experts";
  let description = [{
    Replaces a `loom.moe` by the router's f32 matmul and softmax,
    `loom.moe_route` (top-k choices and capacity slots), `loom.moe_gate`,
    `loom.moe_dispatch` of the tokens into an `[experts * capacity, D]`
    buffer, the expert body run once over `[experts, capacity, ...]` (each
    body value gains a leading expert dim, as the expert params have) and
    `loom.moe_combine` of each token's weighted expert outputs. The result
    is ordinary loom IR, so autodiff and partitioning need nothing
    MoE-specific (docs/moe.md).
  }];
  let dependentDialects = ["mlir::loom::LoomDialect"];
}

def LoomFuseAttention : Pass<"loom-fuse-attention", "mlir::func::FuncOp"> {
  let summary = "Form loom.attention from softmax(causal_mask(q @ transpose(k) * s)) @ v";
  let description = [{
    Replaces the five ops of scaled dot-product attention (`loom.matmul` of
    the queries with the transposed keys, an optional `loom.mul` by a
    scalar, an optional `loom.causal_mask`, `loom.softmax` along the last
    axis and `loom.matmul` with the values) by one `loom.attention`, where
    the scores and probabilities have no other use (a model output that
    reads them keeps the ops as they are). Both matmuls must accumulate in
    the same type without `multiply`, all operands have one element type
    and the same batch dimensions, and the two sequence lengths share a
    block of at least 16 (or neither exceeds 64). The result is the same computation with
    the same rounding points; the CPU lowering then never materializes the
    [queries, keys] scores. With `gpu-kernel` (GPU builds) only attention
    the GPU kernel runs is fused (`gpuRunsAttention`: 16-bit operands
    accumulated in f32, sequences and feature sizes multiples of 16,
    features at most 128; its backward too).
  }];
  let options = [
    Option<"gpuKernel", "gpu-kernel", "bool", "false",
           "Fuse only the attention the GPU attention kernel runs">,
  ];
  let dependentDialects = ["mlir::loom::LoomDialect"];
}

def LoomAutodiff : Pass<"loom-autodiff", "mlir::ModuleOp"> {
  let summary = "Gradients of each trained model's loss with respect to its params";
  let description = [{
    For each `loom.train @M`, appends to `@M` the gradient of its loss
    (the `loom.loss` result) with respect to every float param, as results
    named `grad.<param>` (`loom.output`), in param order. The backward pass
    is loom IR built from each op's `VjpOpInterface` rule, in reverse
    program order; gradients of values used several times are summed, and
    only values that depend on a param are differentiated. It runs on the
    global program, before partitioning: the gradient collectives then
    follow from the sharding rules (a dp-replicated weight's gradient is a
    partial sum over dp). Stages must be inlined first.

    With `scale-loss` (a training step) and a train section that scales
    its loss (`loss_scale static(S)` or `dynamic`), the backward starts
    from the rank-0 f32 input `opt.loss_scale` instead of 1, so that every
    gradient is scaled (loom-optimizer-step unscales them).
  }];
  let options = [
    Option<"scaleLoss", "scale-loss", "bool", /*default=*/"false",
           "Seed the backward with the input opt.loss_scale where the train "
           "section scales its loss">,
  ];
  let dependentDialects = ["mlir::loom::LoomDialect"];
}

def LoomMasterWeights : Pass<"loom-master-weights", "mlir::ModuleOp"> {
  let summary = "f32 master copies of a trained model's 16-bit params";
  let description = [{
    For each `loom.train @M`, every bf16 or f16 param of `@M` becomes an
    f32 param (the master weight, which the optimizer updates), and the
    forward reads its `loom.cast` to the param's compute type, after its
    sharding annotation. loom-autodiff then differentiates through the
    cast: each gradient arrives in f32 (accumulated in f32, rounded to the
    compute type only where the forward computes in it), and the compute
    copy is re-rounded from the master at every step.
  }];
  let dependentDialects = ["mlir::loom::LoomDialect", "mlir::shard::ShardDialect"];
}

def LoomOptimizerStep : Pass<"loom-optimizer-step", "mlir::ModuleOp"> {
  let summary = "The optimizer update of a training step, after loom-autodiff";
  let description = [{
    For each `loom.train @M` whose gradients loom-autodiff appended, feeds
    every `grad.<param>` into the update rule of the train section's
    optimizer, with torch.optim's arithmetic: `sgd` (momentum, weight decay
    added to the gradient), `adam` (weight decay added to the gradient) and
    `adamw` (decoupled: the param scaled by `1 - lr wd` first). Weight decay
    applies only to params of rank >= 2. Hyperparameters the script leaves
    out take torch's defaults (sgd: lr 0.01; adam and adamw: lr 1e-3,
    beta1 0.9, beta2 0.999, eps 1e-8; weight decay 0, 0.01 for adamw).

    The optimizer state (`opt.momentum.<p>`, `opt.m.<p>`, `opt.v.<p>`)
    becomes params initialized to zeros and laid out as their param; the
    per-step scalars become rank-0 f32 inputs the runtime fills (`opt.lr`,
    `opt.step_size` = lr / (1 - beta1^t), `opt.bc2_sqrt` =
    sqrt(1 - beta2^t), `opt.decay` = 1 - lr wd). The `grad.*` results are
    replaced by `next.<name>` results with `loom.updates = "<name>"`: the
    new value of each param and state. f32 params only: 16-bit params get
    f32 masters from loom-master-weights first.

    Before the update, the gradients are unscaled (divided by the input
    `opt.loss_scale`, where loom-autodiff scaled them), their global L2
    norm becomes the result `grad_norm` (the runtime's inf/nan check for
    loss scaling, and its log), and with `clip_grad_norm = C` they are
    multiplied by min(1, C / (norm + 1e-6)), as
    torch.nn.utils.clip_grad_norm_ does.

    The params' updates are grouped in order into update buckets of at most
    `bucket-mb` MiB of params (one larger is a bucket of its own; 0: no
    limit), cut where the layer instance (the param name before its last
    dot) changes: each op of a param's update carries
    `loom.update_bucket = N`, and loom-outline-kernels makes each bucket one
    kernel, the same kernel for every layer.

    Last, what the step's results no longer read goes (an unused MoE
    block's routing, which only the forward's `moe_stats` output read, was
    computed after the microbatches, from one microbatch's values).
  }];
  let options = [
    Option<"bucketMb", "bucket-mb", "double", /*default=*/"25.0",
           "The most params an update bucket holds, in MiB (0: one bucket)">,
  ];
  let dependentDialects = ["mlir::loom::LoomDialect", "mlir::shard::ShardDialect"];
}

def LoomPartition : Pass<"loom-partition", "mlir::ModuleOp"> {
  let summary = "Partition each model into a per-rank (SPMD) program";
  let description = [{
    For each model function `@M` of a module with a `shard.grid` of more
    than one device, adds its per-rank program `@M_spmd` (attribute
    `loom.partition_of = "M"`): every tensor gets a sharding, from the
    script's `shard.shard` annotations forward through the ops, each op
    computes its rank's block of its result, and the data movement between
    shardings is explicit as upstream `shard` collectives: `all_reduce` of
    the partial sums of a matmul whose contraction dimension is split,
    `all_gather` where an op needs a whole dimension, `all_slice` where a
    replicated value meets a split one, `reduce_scatter` under sequence
    parallelism. The unpartitioned `@M` stays: it is the one-rank program.

    Loom partitions the `loom` ops itself instead of running upstream
    `sharding-propagation` and `shard-partition`: in MLIR 22 those crash or
    produce invalid IR on several reshardings Loom needs (see
    docs/partitioning.md). The result uses only upstream `shard` ops, so
    it still reads as an upstream SPMD program.
  }];
  let options = [
    Option<"remarks", "remarks", "bool", /*default=*/"false",
           "Emit a remark at the script location of every collective">,
    Option<"sequenceParallel", "sequence-parallel", "bool", /*default=*/"false",
           "Keep residual streams split along the sequence dimension: "
           "reduce-scatter and all-gather instead of all-reduce">
  ];
  let dependentDialects = ["mlir::loom::LoomDialect", "mlir::shard::ShardDialect",
                           "mlir::func::FuncDialect"];
}

def LoomBucketGradients : Pass<"loom-bucket-gradients", "mlir::ModuleOp"> {
  let summary = "Group the data-parallel gradient sums into buckets";
  let description = [{
    In each per-rank program (`loom.partition_of`), the `shard.all_reduce`
    ops whose results only the function returns (the sums of the gradients
    over dp) are grouped, in the order the backward produces their
    operands, into buckets of at most `bucket-mb` MiB (a gradient larger
    than that is a bucket of its own), separately per grid axes and element
    type. The all-reduces of each bucket of two or more move, in order,
    right after the last of its gradients is computed, each marked
    `loom.gradient_bucket = N`; the plan builder makes them one collective
    of several buffers, which the runtime sums as one message. The values
    are unchanged: the sums are elementwise. `bucket-mb` 0 leaves one
    all-reduce per gradient.
  }];
  let options = [
    Option<"bucketMb", "bucket-mb", "double", /*default=*/"25.0",
           "The most a bucket holds, in MiB (0: no buckets)">,
    Option<"remarks", "remarks", "bool", /*default=*/"false",
           "A remark at each bucket: its gradients and bytes per rank">,
  ];
  let dependentDialects = ["mlir::loom::LoomDialect", "mlir::shard::ShardDialect"];
}

def LoomPlaceStages : Pass<"loom-place-stages", "mlir::ModuleOp"> {
  let summary = "Place every op of a pipelined per-rank program on its stages";
  let description = [{
    In each per-rank program (`loom.partition_of`) of a model with a
    `pipeline AXIS` whose axis has more than one rank, gives every op its
    place in the per-stage (MPMD) programs:

    - The per-microbatch program (what the accumulates read, or, without
      microbatches, the forward and the backward): `loom.stage` (the stage
      block an op came from, which its gradient ops inherit; an op without
      one, such as a collective the partitioner added or the loss, takes the
      stage of its first reader, or else of its operands) and `loom.phase`,
      `"forward"` or `"backward"`.
    - The rest, once per step after the microbatches (`loom.phase =
      "update"`): `loom.stages`, the stages whose ranks compute it, those
      holding all its operands (an op that reads only params and step
      scalars runs where its readers do; one whose operands lie on
      different stages runs on each of them, and the plan moves the
      operands).

    The function gets `loom.stages_count` and `loom.schedule` (the train
    section's, or `schedule` when given). Errors: fewer stages than ranks on
    the axis, or a number of stages the ranks do not divide.
  }];
  let options = [
    Option<"schedule", "schedule", "std::string", /*default=*/"\"\"",
           "The pipeline schedule instead of the train section's">
  ];
  let dependentDialects = ["mlir::loom::LoomDialect"];
}

def LoomOutlineKernels : Pass<"loom-outline-kernels", "mlir::ModuleOp"> {
  let summary = "Group the ops of each model into kernels";
  let description = [{
    Walks each model function in order and groups its ops into kernels: an
    op that reads memory in a pattern of its own (matmul, softmax, the
    norms, reductions, data movement, losses) starts a kernel, and the
    elementwise ops that consume its result join it as an epilogue (bias,
    activation, residual add, cast). Scalar constants and `arange` are
    cloned into the kernels that use them. Each kernel becomes a private
    function `@<model>_kN` and the model a sequence of calls to them, in
    which every call is one step of the plan.
  }];
  let dependentDialects = ["mlir::loom::LoomDialect", "mlir::func::FuncDialect"];
}

def LoomDedupKernels : Pass<"loom-dedup-kernels", "mlir::ModuleOp"> {
  let summary = "Compile each distinct kernel once";
  let description = [{
    Kernels with the same signature and structurally equal bodies (the
    same ops, types and attributes; locations aside), found across layer
    instances, across a model's one-rank and per-rank programs and across
    forward and backward, become one: the calls of the later ones call the
    first, and the later ones are erased. A deep model then lowers and
    compiles about one layer's kernels.
  }];
  let dependentDialects = ["mlir::func::FuncDialect"];
}

#endif // LOOM_TRANSFORMS_PASSES_TD
