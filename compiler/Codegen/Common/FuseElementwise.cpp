//===- FuseElementwise.cpp - Elementwise fusion with a bounded body -------===//
//
// Upstream's linalg-fuse-elementwise-ops, pattern for pattern, with one
// more condition on a fusion: the fused body stays within a bound. Each
// fusion clones the producer's body into the consumer's, so a chain of
// elementwise ops (an unrolled `for i in 0..N { h = gelu(h) }`) cost O(N^2)
// clones: 2048 links took 15 s, 4096 minutes. Cut every `max-ops`
// operations, the chain costs O(N * max-ops) and a few stores.
//
//===----------------------------------------------------------------------===//

#include "Codegen/Common/Passes.h"

#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Linalg/Transforms/Transforms.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/Dialect/Tensor/Transforms/Transforms.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMFUSEELEMENTWISE
#include "Codegen/Common/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;

/// The operations in the body of `op` (its payload), if it is a generic.
static int64_t bodyOps(Operation *op) {
  auto generic = dyn_cast_or_null<linalg::GenericOp>(op);
  return generic ? static_cast<int64_t>(generic.getBody()->getOperations().size()) : 0;
}

namespace {
struct LoomFuseElementwise
    : public loom::impl::LoomFuseElementwiseBase<LoomFuseElementwise> {
  using Base::Base;
  void runOnOperation() override {
    MLIRContext *context = &getContext();
    RewritePatternSet patterns(context);
    // Upstream's cost function: a producer with one use.
    linalg::ControlFusionFn oneUse = [](OpOperand *fused) {
      Operation *producer = fused->get().getDefiningOp();
      return producer && producer->hasOneUse();
    };
    int64_t limit = maxOps;
    linalg::ControlFusionFn bounded = [oneUse, limit](OpOperand *fused) {
      return oneUse(fused) &&
             bodyOps(fused->get().getDefiningOp()) + bodyOps(fused->getOwner()) <= limit;
    };
    linalg::populateElementwiseOpsFusionPatterns(patterns, bounded);
    linalg::populateFoldReshapeOpsByExpansionPatterns(patterns, oneUse);
    tensor::populateBubbleUpExpandShapePatterns(patterns);
    affine::AffineApplyOp::getCanonicalizationPatterns(patterns, context);
    linalg::GenericOp::getCanonicalizationPatterns(patterns, context);
    tensor::ExpandShapeOp::getCanonicalizationPatterns(patterns, context);
    tensor::CollapseShapeOp::getCanonicalizationPatterns(patterns, context);
    context->getLoadedDialect<linalg::LinalgDialect>()->getCanonicalizationPatterns(patterns);
    linalg::populateConstantFoldLinalgOperations(patterns, oneUse);
    // Top-down, as upstream, for compile time.
    (void)applyPatternsGreedily(getOperation(), std::move(patterns),
                                GreedyRewriteConfig().setUseTopDownTraversal());
  }
};
} // namespace
