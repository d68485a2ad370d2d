//===- LoomToLinalgPass.cpp - The convert-loom-to-linalg pass -------------===//

#include "Conversion/LoomToLinalg/LoomToLinalg.h"
#include "Conversion/Passes.h"
#include "Loom/IR/LoomOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::loom {
#define GEN_PASS_DEF_CONVERTLOOMTOLINALG
#define GEN_PASS_DEF_CONVERTLOOMATTENTIONTOLINALG
#include "Conversion/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

void mlir::loom::populateLoomToLinalgPatterns(RewritePatternSet &patterns) {
  populateElementwiseToLinalgPatterns(patterns);
  populateContractionToLinalgPatterns(patterns);
  populateReductionsToLinalgPatterns(patterns);
  populateDataMovementToLinalgPatterns(patterns);
  populateGradientsToLinalgPatterns(patterns);
  populateMoeToLinalgPatterns(patterns);
}

namespace {
struct ConvertLoomToLinalg
    : public loom::impl::ConvertLoomToLinalgBase<ConvertLoomToLinalg> {
  void runOnOperation() override {
    MLIRContext *context = &getContext();
    ConversionTarget target(*context);
    target.addLegalDialect<linalg::LinalgDialect, tensor::TensorDialect,
                           arith::ArithDialect, math::MathDialect,
                           scf::SCFDialect, func::FuncDialect>();
    // Structure ops stay: stages and MoE blocks are lowered elsewhere.
    target.addIllegalDialect<LoomDialect>();
    target.addLegalOp<StageOp, MoeOp, YieldOp, TrainOp, AccumulateOp>();
    // Lowered after the elementwise fusion (convert-loom-attention-to-linalg).
    target.addLegalOp<AttentionOp, AttentionGradOp>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(context);
    populateLoomToLinalgPatterns(patterns);
    if (failed(applyPartialConversion(getOperation(), target, std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace

namespace {
struct ConvertLoomAttentionToLinalg
    : public loom::impl::ConvertLoomAttentionToLinalgBase<ConvertLoomAttentionToLinalg> {
  void runOnOperation() override {
    MLIRContext *context = &getContext();
    ConversionTarget target(*context);
    target.addIllegalOp<AttentionOp, AttentionGradOp>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(context);
    populateAttentionToLinalgPatterns(patterns);
    if (failed(applyPartialConversion(getOperation(), target, std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
