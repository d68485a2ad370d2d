//===- Passes.td - Codegen shared by the CPU and GPU targets --------------===//

#ifndef LOOM_CODEGEN_COMMON_PASSES_TD
#define LOOM_CODEGEN_COMMON_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomHoistKernelAllocs : Pass<"loom-hoist-kernel-allocs", "mlir::ModuleOp"> {
  let summary = "Turn a bufferized kernel's temporary buffers into arguments";
  let description = [{
    After bufferization, a kernel may still allocate temporaries (a matmul's
    f32 accumulator before rounding, a softmax's row statistics). Each
    statically shaped `memref.alloc` at the top of a kernel function becomes
    a new trailing argument (and its `memref.dealloc` goes away), so that
    the plan places it in the arena like any other buffer: kernels never
    call malloc, and a GPU kernel's temporaries live in device memory.
    Results that are already destination arguments (written in place) stop
    being returned, and copies of a buffer onto itself are dropped.
  }];
  let options = [
    Option<"everyFunction", "every-function", "bool", "false",
           "Treat every function as a kernel (after bufferization the "
           "module holds only kernels, without their loom.kernel mark): "
           "the CPU tiles' temporaries">,
  ];
  let dependentDialects = ["mlir::memref::MemRefDialect"];
}

def LoomLowerStridedCopies : Pass<"loom-lower-strided-copies", "mlir::func::FuncOp"> {
  let summary = "Strided memref.copy as loops";
  let description = [{
    A copy between dense buffers or dense views (one contiguous run, as a
    1-D concat's slot) becomes one memcpy; a copy from or to a strided
    view (a column block) would otherwise become a call into MLIR's C
    runner library, which executables do not link. Those become loops of
    loads and stores instead.
  }];
  let dependentDialects = ["mlir::scf::SCFDialect", "mlir::memref::MemRefDialect",
                           "mlir::arith::ArithDialect"];
}

def LoomKernelDestinations : Pass<"loom-kernel-destinations", "mlir::ModuleOp"> {
  let summary = "Kernels write their results into destination arguments";
  let description = [{
    Gives every tensor result of a kernel function a destination argument
    (after the inputs) and returns the result materialized into it. After
    empty-tensor elimination the op producing a result writes straight
    into the plan's output buffer, and bufferization drops the then
    equivalent results: no scratch copy and no memcpy per kernel. The
    arguments keep the plan's order: inputs, outputs, scratch.
  }];
  let dependentDialects = ["mlir::bufferization::BufferizationDialect"];
}

def LoomFuseUpdateProducers : Pass<"loom-fuse-update-producers", "mlir::func::FuncOp"> {
  let summary = "Recompute an update kernel's shared elementwise terms in each consumer";
  let description = [{
    In a kernel holding an update bucket (`loom.update_kernel`), fuses every
    elementwise `linalg.generic` into each of its consumers, also when it
    has several (upstream's elementwise fusion takes single-use producers
    only). A param's clipped gradient `g * c`, which Adam's two moments
    read, is then recomputed in each instead of stored to a temporary: one
    loop per new value, which loom-fuse-update-loops flattens into the
    bucket's one GPU launch. Runs before `loom-fuse-elementwise`.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect"];
}

def LoomFuseElementwise : Pass<"loom-fuse-elementwise", "mlir::func::FuncOp"> {
  let summary = "Upstream's elementwise fusion, with a bound on the fused body";
  let description = [{
    `linalg-fuse-elementwise-ops`' patterns and cost function (a producer
    with one use is fused into its consumer; reshapes folded by expansion,
    constants folded), except that a fusion whose two bodies hold more
    than `max-ops` operations together is not made. Each fusion copies the
    producer's body into the consumer's, so a chain of N elementwise ops
    cost O(N^2) copies: 2048 `h = gelu(h)` compiled in 15 s, 4096 in
    minutes. A chain is now cut into kernels of at most `max-ops`
    operations.
  }];
  let options = [
    Option<"maxOps", "max-ops", "int64_t", /*default=*/"512",
           "The most operations a fused body may hold">,
  ];
  let dependentDialects = ["mlir::affine::AffineDialect",
                           "mlir::linalg::LinalgDialect",
                           "mlir::memref::MemRefDialect"];
}

def LoomInPlaceUpdates : Pass<"loom-in-place-updates", "mlir::ModuleOp"> {
  let summary = "Optimizer updates written over their params";
  let description = [{
    On kernels on tensors (after loom-to-linalg), in CPU builds: marks
    kernel result `r` with `loom.in_place = a` where every call of the
    kernel returns `r` as the new value of a param (`loom.updates`) that
    the call reads once, as operand `a`, and no later op reads, outside
    loss scaling (whose overflowing steps keep the old params), and where
    writing `r` into `a`'s bytes cannot change what the kernel computes:
    `r` is made by an all-parallel `linalg.generic` into a `tensor.empty`,
    identity-indexed, which reads `a` identity-indexed, and every other op
    reading `a` comes before it. loom-kernel-destinations then writes `r`
    into `a`, and the plan builder gives `r`'s buffer the param's bytes:
    an optimizer step with no copy after it and no bytes for new values.
  }];
  let dependentDialects = ["mlir::linalg::LinalgDialect"];
}

#endif // LOOM_CODEGEN_COMMON_PASSES_TD
