//===- LoomToLinalgPass.cpp - The convert-loom-to-linalg pass -------------===//

#include "Conversion/LoomToLinalg/LoomToLinalg.h"
#include "Conversion/Passes.h"
#include "Loom/IR/LoomOps.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Transforms/DialectConversion.h"

namespace mlir::loom {
#define GEN_PASS_DEF_CONVERTLOOMTOLINALG
#define GEN_PASS_DEF_CONVERTLOOMATTENTIONTOLINALG
#include "Conversion/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

void mlir::loom::populateLoomToLinalgPatterns(RewritePatternSet &patterns,
                                              int64_t normRowBlockBytes) {
  populateElementwiseToLinalgPatterns(patterns);
  populateDropoutToLinalgPatterns(patterns);
  populateContractionToLinalgPatterns(patterns);
  populateReductionsToLinalgPatterns(patterns, normRowBlockBytes);
  populateDataMovementToLinalgPatterns(patterns);
  populateGradientsToLinalgPatterns(patterns);
  populateMoeToLinalgPatterns(patterns);
}

namespace {
struct ConvertLoomToLinalg
    : public loom::impl::ConvertLoomToLinalgBase<ConvertLoomToLinalg> {
  using ConvertLoomToLinalgBase::ConvertLoomToLinalgBase;
  void runOnOperation() override {
    MLIRContext *context = &getContext();
    // The lowerings size their tensors from static shapes, which is all
    // the front end builds; a dynamic dim in hand-written IR is said here
    // (it had crashed a reshape's lowering and built invalid tensor.empty
    // ops elsewhere).
    WalkResult shapes = getOperation()->walk([](Operation *op) {
      if (!isa_and_nonnull<LoomDialect>(op->getDialect()))
        return WalkResult::advance();
      for (Type type : llvm::concat<Type>(op->getOperandTypes(), op->getResultTypes()))
        if (auto tensor = dyn_cast<RankedTensorType>(type); tensor && !tensor.hasStaticShape()) {
          op->emitOpError("needs static shapes to lower to linalg, got ") << tensor;
          return WalkResult::interrupt();
        }
      return WalkResult::advance();
    });
    if (shapes.wasInterrupted())
      return signalPassFailure();
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
    if (normRowBlockBytes < 0) {
      getOperation().emitError() << "convert-loom-to-linalg: norm-row-block-bytes="
                                 << static_cast<int64_t>(normRowBlockBytes)
                                 << " (expected 0 or more bytes)";
      return signalPassFailure();
    }
    RewritePatternSet patterns(context);
    populateLoomToLinalgPatterns(patterns, normRowBlockBytes);
    if (failed(applyPartialConversion(getOperation(), target, std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace

/// Marks `kernel` `loom.gpu_attention` when it is one loom.attention (or
/// loom.attention_grad) the GPU kernels run and nothing else: its operands
/// the kernel's arguments, its scale a constant, its results the kernel's
/// results in order. The GPU stages then replace the kernel's body (this
/// lowering, bufferized) by launches built from the mark and the
/// arguments.
static void markGpuAttention(func::FuncOp kernel) {
  if (!kernel->hasAttr(attr::kKernel) || !kernel.getBody().hasOneBlock())
    return;
  Block &body = kernel.front();
  Operation *attention = nullptr;
  for (Operation &op : body) {
    if (isa<AttentionOp, AttentionGradOp>(op)) {
      if (attention)
        return;
      attention = &op;
    } else if (!op.hasTrait<OpTrait::ConstantLike>() && !isa<func::ReturnOp>(op)) {
      return;
    }
  }
  if (!attention)
    return;
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  if (ret.getOperands() != ValueRange(attention->getResults()))
    return;
  auto forward = dyn_cast<AttentionOp>(attention);
  auto backward = dyn_cast<AttentionGradOp>(attention);
  Value query = forward ? forward.getQuery() : backward.getQuery();
  Value key = forward ? forward.getKey() : backward.getKey();
  Value value = forward ? forward.getValue() : backward.getValue();
  Value scale = forward ? forward.getScale() : backward.getScale();
  Type accumulate = forward ? forward.getAccumulate() : backward.getAccumulate();
  bool causal = forward ? forward.getCausal() : backward.getCausal();
  auto typeOf = [](Value v) { return cast<RankedTensorType>(v.getType()); };
  if (!gpuRunsAttention(typeOf(query), typeOf(key), typeOf(value), accumulate))
    return;
  Builder b(kernel.getContext());
  SmallVector<NamedAttribute> spec;
  SmallVector<std::pair<StringRef, Value>> operands{
      {"query", query}, {"key", key}, {"value", value}};
  if (backward) {
    operands.push_back({"output", backward.getOutput()});
    operands.push_back({"lse", backward.getLse()});
    operands.push_back({"result_grad", backward.getResultGrad()});
  }
  for (auto [name, operand] : operands) {
    auto argument = dyn_cast<BlockArgument>(operand);
    if (!argument || argument.getOwner() != &body)
      return;
    spec.push_back(b.getNamedAttr(name, b.getI64IntegerAttr(argument.getArgNumber())));
  }
  if (scale) {
    DenseElementsAttr constant;
    if (!matchPattern(scale, m_Constant(&constant)))
      return;
    // The scale as the op rounded it to the operand type, held in f32.
    double rounded = constant.getSplatValue<APFloat>().convertToDouble();
    spec.push_back(b.getNamedAttr("scale", b.getF32FloatAttr(rounded)));
  }
  spec.push_back(b.getNamedAttr("inputs", b.getI64IntegerAttr(kernel.getNumArguments())));
  if (causal)
    spec.push_back(b.getNamedAttr("causal", b.getUnitAttr()));
  kernel->setAttr(attr::kGpuAttention, b.getDictionaryAttr(spec));
}

namespace {
struct ConvertLoomAttentionToLinalg
    : public loom::impl::ConvertLoomAttentionToLinalgBase<ConvertLoomAttentionToLinalg> {
  using ConvertLoomAttentionToLinalgBase::ConvertLoomAttentionToLinalgBase;
  void runOnOperation() override {
    getOperation().walk([](func::FuncOp kernel) { markGpuAttention(kernel); });
    MLIRContext *context = &getContext();
    ConversionTarget target(*context);
    target.addIllegalOp<AttentionOp, AttentionGradOp>();
    target.markUnknownOpDynamicallyLegal([](Operation *) { return true; });
    RewritePatternSet patterns(context);
    populateAttentionToLinalgPatterns(patterns, bf16Operands);
    if (failed(applyPartialConversion(getOperation(), target, std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
