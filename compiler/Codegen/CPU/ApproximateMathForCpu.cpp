//===- ApproximateMathForCpu.cpp - Vectorizable exp, log, tanh, erf -------===//
//
// LLVM lowers math.exp and its kin to scalar libm calls, which it cannot
// vectorize without a vector math library: a softmax row paid one call per
// element (twice: for the sum and for the output), a GELU one per
// activation. Upstream's polynomial approximations are straight-line
// arithmetic (range reduction, a polynomial, bit casts) that the loop
// vectorizer widens like any other, within a few ulp of libm: the
// approximation IREE and XLA use on CPUs too.
//
//===----------------------------------------------------------------------===//

#include "Codegen/CPU/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMAPPROXIMATEMATHFORCPU
#include "Codegen/CPU/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;

namespace {
struct LoomApproximateMathForCpu
    : public loom::impl::LoomApproximateMathForCpuBase<LoomApproximateMathForCpu> {
  void runOnOperation() override {
    // Not sin and cos: upstream's polynomial reduces the argument by one
    // f32 multiple of pi/2, and a rotary embedding's angles reach thousands
    // of radians; libm reduces them exactly.
    auto approximated = [](StringRef name) {
      return llvm::is_contained(
          {math::ExpOp::getOperationName(), math::ExpM1Op::getOperationName(),
           math::LogOp::getOperationName(), math::Log1pOp::getOperationName(),
           math::Log2Op::getOperationName(), math::TanhOp::getOperationName(),
           math::ErfOp::getOperationName(), math::ErfcOp::getOperationName()},
          name);
    };
    RewritePatternSet patterns(&getContext());
    // 16-bit operands are widened to f32 around the approximation.
    populateMathF32ExpansionPatterns(patterns, approximated);
    populateMathPolynomialApproximationPatterns(patterns, approximated);
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
