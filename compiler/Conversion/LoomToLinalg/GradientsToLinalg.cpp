//===- GradientsToLinalg.cpp - The ops only gradients need, on linalg -----===//

#include "Conversion/LoomToLinalg/LinalgBuilders.h"
#include "Conversion/LoomToLinalg/LoomToLinalg.h"
#include "Loom/IR/LoomOps.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Transforms/DialectConversion.h"

#include <cmath>

using namespace mlir;
using namespace mlir::loom;

/// 1 / (1 + exp(-z)), in f32.
static Value sigmoid(OpBuilder &b, Location loc, Value z) {
  Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, z));
  return arith::DivFOp::create(
      b, loc, f32Constant(b, loc, 1.0),
      arith::AddFOp::create(b, loc, f32Constant(b, loc, 1.0), e));
}

/// f'(x) of the activations as Loom computes them (ElementwiseToLinalg):
/// gelu(x) = x s with s = sigmoid(2u), u = sqrt(2/pi) (x + 0.044715 x^3),
/// so gelu' = s + 2 x u' s (1 - s); silu' = s (1 + x (1 - s)) with
/// s = sigmoid(x); relu' = [not x <= 0]. Written with s (1 - s) rather than
/// exp(-2u) / (1 + exp(-2u))^2, which is inf / inf where u is very negative,
/// and gelu' is s where s (1 - s) is 0.
static Value derivative(OpBuilder &b, Location loc, StringRef activation,
                        Value x) {
  auto mul = [&](Value l, Value r) -> Value {
    return arith::MulFOp::create(b, loc, l, r);
  };
  auto cst = [&](double v) { return f32Constant(b, loc, v); };
  if (activation == "relu") {
    // Unordered: a NaN input passes its gradient on, as torch's
    // threshold_backward (0 only where x <= 0) does; it had been 0, which
    // hid the NaN from the gradient norm.
    Value positive = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UGT,
                                           x, cst(0.0));
    return arith::SelectOp::create(b, loc, positive, cst(1.0), cst(0.0));
  }
  if (activation == "abs") {
    // sign(x): 0 at 0 as torch's; a NaN input passes on as NaN (as relu's).
    Value positive = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, x, cst(0.0));
    Value negative = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, x, cst(0.0));
    Value zeroOrNaN = arith::MulFOp::create(b, loc, x, cst(0.0));
    return arith::SelectOp::create(
        b, loc, positive, cst(1.0),
        arith::SelectOp::create(b, loc, negative, cst(-1.0), zeroOrNaN));
  }
  if (activation == "silu") {
    Value s = sigmoid(b, loc, x);
    Value oneMinusS = arith::SubFOp::create(b, loc, cst(1.0), s);
    return mul(s, arith::AddFOp::create(b, loc, cst(1.0), mul(x, oneMinusS)));
  }
  double k = std::sqrt(2.0 / M_PI);
  Value x2 = mul(x, x);
  Value u = mul(cst(k), arith::AddFOp::create(b, loc, x, mul(cst(0.044715), mul(x2, x))));
  Value du = mul(cst(k), arith::AddFOp::create(b, loc, cst(1.0),
                                               mul(cst(3.0 * 0.044715), x2)));
  Value s = sigmoid(b, loc, mul(cst(2.0), u));
  Value oneMinusS = arith::SubFOp::create(b, loc, cst(1.0), s);
  Value spread = mul(s, oneMinusS);
  // Where s (1 - s) is 0 (|x| above ~10) the derivative is s: for |x| of
  // 1e13 and more, x u' overflows, and inf * 0 had made the gradient NaN.
  Value flat = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, spread,
                                     cst(0.0));
  Value slope = arith::AddFOp::create(b, loc, s,
                                      mul(mul(cst(2.0), mul(x, spread)), du));
  return arith::SelectOp::create(b, loc, flat, s, slope);
}

namespace {
struct BroadcastLowering : OpConversionPattern<BroadcastOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(BroadcastOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(
        op, buildConverted(rewriter, op.getLoc(), op.getType(), adaptor.getInput()));
    return success();
  }
};

struct ActivationGradLowering : OpConversionPattern<ActivationGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ActivationGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    StringRef activation = op.getActivation();
    rewriter.replaceOp(
        op, buildBroadcastElementwise(
                rewriter, op.getLoc(), op.getType(),
                {adaptor.getInput(), adaptor.getGrad()},
                [&](OpBuilder &b, Location l, ValueRange in) -> Value {
                  return arith::MulFOp::create(
                      b, l, derivative(b, l, activation, in[0]), in[1]);
                }));
    return success();
  }
};

struct MaxMaskLowering : OpConversionPattern<MaxMaskOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MaxMaskOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    rewriter.replaceOp(
        op, buildBroadcastElementwise(
                rewriter, op.getLoc(), op.getType(), {adaptor.getInput(), adaptor.getMax()},
                [](OpBuilder &b, Location l, ValueRange in) -> Value {
                  Value equal = arith::CmpFOp::create(b, l, arith::CmpFPredicate::OEQ,
                                                      in[0], in[1]);
                  return arith::SelectOp::create(b, l, equal, f32Constant(b, l, 1.0),
                                                 f32Constant(b, l, 0.0));
                }));
    return success();
  }
};

struct CausalMaskGradLowering : OpConversionPattern<CausalMaskGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(CausalMaskGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    int64_t rank = op.getType().getRank();
    rewriter.replaceOp(
        op, buildBroadcastElementwise(
                rewriter, op.getLoc(), op.getType(), {adaptor.getInput()},
                [&](OpBuilder &b, Location l, ValueRange in) -> Value {
                  Value i = linalg::IndexOp::create(b, l, rank - 2);
                  Value j = linalg::IndexOp::create(b, l, rank - 1);
                  Value above = arith::CmpIOp::create(
                      b, l, arith::CmpIPredicate::ugt, j, i);
                  return arith::SelectOp::create(b, l, above,
                                                 f32Constant(b, l, 0.0), in[0]);
                }));
    return success();
  }
};

/// A reduction over the id positions: table[v, d] = sum_p [ids[p] = v]
/// grad[p, d], accumulated in f32. It reads every (v, p) pair, which is
/// V times the work of a scatter: the GPU runs it so, one thread per
/// (v, d); the CPU makes it a scatter (loom-scatter-embedding-gradients).
struct EmbeddingGradLowering : OpConversionPattern<EmbeddingGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(EmbeddingGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *context = rewriter.getContext();
    RankedTensorType type = op.getType();
    int64_t positions = cast<RankedTensorType>(adaptor.getIds().getType()).getRank();
    int64_t loops = 2 + positions, rows = type.getDimSize(0);
    // Loops (v, d, p...).
    SmallVector<AffineExpr> p, pd;
    for (int64_t i = 0; i < positions; ++i)
      p.push_back(getAffineDimExpr(2 + i, context));
    pd = p;
    pd.push_back(getAffineDimExpr(1, context));
    SmallVector<AffineMap> maps{
        AffineMap::get(loops, 0, p, context),
        AffineMap::get(loops, 0, pd, context),
        AffineMap::get(loops, 0,
                       {getAffineDimExpr(0, context), getAffineDimExpr(1, context)},
                       context)};
    SmallVector<utils::IteratorType> iterators(2, utils::IteratorType::parallel);
    iterators.append(positions, utils::IteratorType::reduction);
    auto f32 = RankedTensorType::get(type.getShape(), rewriter.getF32Type());
    Value init = linalg::FillOp::create(
                     rewriter, loc, ValueRange{f32Constant(rewriter, loc, 0.0)},
                     ValueRange{tensor::EmptyOp::create(rewriter, loc, f32.getShape(),
                                                        f32.getElementType())})
                     .getResult(0);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, f32, ValueRange{adaptor.getIds(), adaptor.getGrad()},
        ValueRange{init}, maps, iterators,
        [&](OpBuilder &b, Location l, ValueRange args) {
          // Ids are clamped into the table, as the lookup clamps them (a
          // vocab-parallel table's other rows never match).
          Value id = tableRow(b, l, args[0], rows, adaptor.getRows(), op.getVocab());
          Value v = linalg::IndexOp::create(b, l, 0);
          Value hit = arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, id, v);
          Value add = arith::AddFOp::create(b, l, args[2], widen(b, l, args[1]));
          linalg::YieldOp::create(
              b, l, arith::SelectOp::create(b, l, hit, add, args[2]).getResult());
        });
    Value result = generic.getResult(0);
    if (type != f32)
      result = buildConverted(rewriter, loc, type, result);
    rewriter.replaceOp(op, result);
    return success();
  }
};
} // namespace

void mlir::loom::populateGradientsToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<BroadcastLowering, ActivationGradLowering, MaxMaskLowering,
               CausalMaskGradLowering,
               EmbeddingGradLowering>(patterns.getContext());
}
