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
  }];
  let dependentDialects = [
    "mlir::linalg::LinalgDialect", "mlir::tensor::TensorDialect",
    "mlir::arith::ArithDialect", "mlir::math::MathDialect",
    "mlir::scf::SCFDialect"
  ];
}

#endif // LOOM_CONVERSION_PASSES_TD
