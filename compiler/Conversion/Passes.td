//===- Passes.td - Conversions out of the loom dialect -------------------===//

#ifndef LOOM_CONVERSION_PASSES_TD
#define LOOM_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertLoomToLinalg : Pass<"convert-loom-to-linalg", "mlir::ModuleOp"> {
  let summary = "Lower loom tensor ops to linalg, tensor, arith and math";
  let description = [{
    Every loom op becomes linalg (generic, fill, transpose) and tensor ops on
    value semantics. Elementwise math runs in f32 and rounds to the result's
    storage type; matmuls accumulate in their `accumulate` type; reductions
    (softmax, norms, sum/mean/max, losses) accumulate in f32.

    With `norm-row-block-bytes`, a `loom.norm_grad` runs in an `scf.for`
    over blocks of rows whose input and gradient take about that many
    bytes, so that its passes over a block read the cache, not memory (the
    CPU pipeline's choice; the GPU's row kernels take the rows unblocked).
  }];
  let options = [
    Option<"normRowBlockBytes", "norm-row-block-bytes", "int64_t", /*default=*/"0",
           "Run a norm's gradient in blocks of rows of about this many bytes of "
           "input and gradient (0: all rows at once)">,
  ];
  let dependentDialects = [
    "mlir::linalg::LinalgDialect", "mlir::tensor::TensorDialect",
    "mlir::arith::ArithDialect", "mlir::math::MathDialect",
    "mlir::scf::SCFDialect", "mlir::bufferization::BufferizationDialect"
  ];
}

def ConvertLoomAttentionToLinalg : Pass<"convert-loom-attention-to-linalg", "mlir::ModuleOp"> {
  let summary = "Lower loom.attention and loom.attention_grad to blocked loops";
  let description = [{
    Each becomes an `scf.for` over blocks of queries with loops over the
    blocks of keys inside, on linalg ops (docs/pipeline.md, "Attention").
    It runs after linalg's elementwise fusion, which would otherwise fuse
    the probabilities into the `@ value` contraction and compute each
    exponential once per value feature, and keep that contraction from
    the CPU's register tiles.
  }];
  let options = [
    Option<"bf16Operands", "bf16-operands", "bool", /*default=*/"false",
           "bf16 attention's block contractions on bf16 operands, for a CPU "
           "whose bf16 dot products or AMX tiles multiply them (not on f32 "
           "copies)">,
  ];
  let dependentDialects = [
    "mlir::linalg::LinalgDialect", "mlir::tensor::TensorDialect",
    "mlir::arith::ArithDialect", "mlir::math::MathDialect",
    "mlir::scf::SCFDialect", "mlir::bufferization::BufferizationDialect"
  ];
}

#endif // LOOM_CONVERSION_PASSES_TD
