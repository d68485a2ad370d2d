//===- Passes.td - Loom's transformations on the loom dialect ------------===//

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

def LoomHoistKernelAllocs : Pass<"loom-hoist-kernel-allocs", "mlir::ModuleOp"> {
  let summary = "Turn a bufferized kernel's temporary buffers into arguments";
  let description = [{
    After bufferization, a kernel may still allocate temporaries (a matmul's
    f32 accumulator before rounding, a softmax's row statistics). Each
    statically shaped `memref.alloc` at the top of a kernel function becomes
    a new trailing argument (and its `memref.dealloc` goes away), so that
    the plan places it in the arena like any other buffer: kernels never
    call malloc, and a GPU kernel's temporaries live in device memory.
  }];
  let dependentDialects = ["mlir::memref::MemRefDialect"];
}

#endif // LOOM_TRANSFORMS_PASSES_TD
