//===- ElementwiseToLinalg.cpp - Constants, arithmetic, activations, casts ===//

#include "Conversion/LoomToLinalg/LinalgBuilders.h"
#include "Conversion/LoomToLinalg/LoomToLinalg.h"
#include "Loom/IR/LoomOps.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Transforms/DialectConversion.h"

#include <cmath>

using namespace mlir;
using namespace mlir::loom;

namespace {
struct ConstantLowering : OpConversionPattern<ConstantOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ConstantOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = op.getType();
    Type element = type.getElementType();
    double value = op.getValue().convertToDouble();
    Attribute scalar =
        isa<FloatType>(element)
            ? Attribute(FloatAttr::get(element, value))
            : Attribute(IntegerAttr::get(element, (int64_t)value));
    rewriter.replaceOpWithNewOp<arith::ConstantOp>(
        op, type, DenseElementsAttr::get(type, scalar));
    return success();
  }
};

/// Binary arithmetic with broadcasting, computed in f32.
template <typename LoomOp, typename ArithOp>
struct BinaryLowering : OpConversionPattern<LoomOp> {
  using OpConversionPattern<LoomOp>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(LoomOp op, typename LoomOp::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Value result = buildBroadcastElementwise(
        rewriter, op.getLoc(), op.getType(),
        {adaptor.getLhs(), adaptor.getRhs()},
        [](OpBuilder &b, Location loc, ValueRange args) -> Value {
          return ArithOp::create(b, loc, args[0], args[1]);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// The scalar f32 formula of each activation. `fastmath` is `afn` where
/// the result is a 16-bit float: approximate exp and division (a few f32
/// ulps, up to about 2^-18 relative for the exp of large arguments,
/// against a bf16 half-ulp of 2^-9 and an f16 one of 2^-12) vanish in the
/// rounding, and on the GPU they are what makes a GELU
/// as fast as a copy (ex2.approx and div.approx instead of the libdevice
/// exp and a full-precision division).
Value gelu(OpBuilder &b, Location loc, Value x, arith::FastMathFlags fastmath) {
  // The tanh approximation, 0.5 x (1 + tanh(u)) with
  // u = sqrt(2/pi) (x + 0.044715 x^3), written as x / (1 + exp(-2u)): the
  // same function without tanh, and without 1 + tanh(u)'s cancellation
  // where u is very negative (there exp overflows to inf and x / inf is
  // the limit, -0).
  Value x3 = arith::MulFOp::create(b, loc, x, arith::MulFOp::create(b, loc, x, x));
  Value inner = arith::AddFOp::create(
      b, loc, x,
      arith::MulFOp::create(b, loc, f32Constant(b, loc, 0.044715), x3));
  Value minusTwoU = arith::MulFOp::create(
      b, loc, f32Constant(b, loc, -2.0 * std::sqrt(2.0 / M_PI)), inner);
  Value e = math::ExpOp::create(b, loc, minusTwoU, fastmath);
  return arith::DivFOp::create(
      b, loc, x, arith::AddFOp::create(b, loc, f32Constant(b, loc, 1.0), e),
      fastmath);
}

Value silu(OpBuilder &b, Location loc, Value x, arith::FastMathFlags fastmath) {
  Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x),
                                fastmath);
  return arith::DivFOp::create(
      b, loc, x, arith::AddFOp::create(b, loc, f32Constant(b, loc, 1.0), e),
      fastmath);
}

/// 1 / (1 + exp(-x)): exp overflows to inf for very negative x, and 1 / inf
/// is the limit, 0; in f32, whatever the operand type (one rounding).
Value sigmoidOf(OpBuilder &b, Location loc, Value x, arith::FastMathFlags fastmath) {
  Value e = math::ExpOp::create(b, loc, arith::NegFOp::create(b, loc, x), fastmath);
  return arith::DivFOp::create(b, loc, f32Constant(b, loc, 1.0),
                               arith::AddFOp::create(b, loc, f32Constant(b, loc, 1.0), e),
                               fastmath);
}

template <typename LoomOp>
struct UnaryLowering : OpConversionPattern<LoomOp> {
  using Formula = Value (*)(OpBuilder &, Location, Value, arith::FastMathFlags);
  UnaryLowering(MLIRContext *context, Formula formula)
      : OpConversionPattern<LoomOp>(context), formula(formula) {}
  LogicalResult
  matchAndRewrite(LoomOp op, typename LoomOp::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Type element = op.getType().getElementType();
    arith::FastMathFlags fastmath =
        isa<FloatType>(element) && element.getIntOrFloatBitWidth() == 16
            ? arith::FastMathFlags::afn
            : arith::FastMathFlags::none;
    Value result = buildBroadcastElementwise(
        rewriter, op.getLoc(), op.getType(), {adaptor.getInput()},
        [&](OpBuilder &b, Location loc, ValueRange args) {
          return formula(b, loc, args[0], fastmath);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
  Formula formula;
};

struct CastLowering : OpConversionPattern<CastOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(CastOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    // One rounding from f32: f32 -> bf16 rounds to nearest even once.
    rewriter.replaceOp(op, buildConverted(rewriter, op.getLoc(), op.getType(),
                                          adaptor.getInput()));
    return success();
  }
};
} // namespace

void mlir::loom::populateElementwiseToLinalgPatterns(
    RewritePatternSet &patterns) {
  MLIRContext *context = patterns.getContext();
  patterns.add<ConstantLowering, CastLowering,
               BinaryLowering<AddOp, arith::AddFOp>,
               BinaryLowering<SubOp, arith::SubFOp>,
               BinaryLowering<MulOp, arith::MulFOp>,
               BinaryLowering<DivOp, arith::DivFOp>,
               BinaryLowering<MaximumOp, arith::MaximumFOp>,
               BinaryLowering<MinimumOp, arith::MinimumFOp>>(context);
  patterns.add<UnaryLowering<NegOp>>(
      context,
      [](OpBuilder &b, Location loc, Value x, arith::FastMathFlags fastmath) -> Value {
        return arith::NegFOp::create(b, loc, x);
      });
  patterns.add<UnaryLowering<GeluOp>>(context, gelu);
  patterns.add<UnaryLowering<SiluOp>>(context, silu);
  patterns.add<UnaryLowering<SigmoidOp>>(context, sigmoidOf);
  patterns.add<UnaryLowering<ReluOp>>(
      context,
      [](OpBuilder &b, Location loc, Value x, arith::FastMathFlags fastmath) -> Value {
        return arith::MaximumFOp::create(b, loc, x, f32Constant(b, loc, 0.0));
      });
  patterns.add<UnaryLowering<ExpOp>>(
      context,
      [](OpBuilder &b, Location loc, Value x, arith::FastMathFlags fastmath) -> Value {
        return math::ExpOp::create(b, loc, x, fastmath);
      });
  patterns.add<UnaryLowering<LogOp>>(
      context,
      [](OpBuilder &b, Location loc, Value x, arith::FastMathFlags fastmath) -> Value {
        return math::LogOp::create(b, loc, x, fastmath);
      });
  patterns.add<UnaryLowering<TanhOp>>(
      context,
      [](OpBuilder &b, Location loc, Value x, arith::FastMathFlags fastmath) -> Value {
        return math::TanhOp::create(b, loc, x);
      });
  patterns.add<UnaryLowering<SqrtOp>>(
      context,
      [](OpBuilder &b, Location loc, Value x, arith::FastMathFlags fastmath) -> Value {
        return math::SqrtOp::create(b, loc, x);
      });
  // Without fast-math flags: libm's (CPU) and libdevice's (GPU) sine and
  // cosine reduce large arguments exactly, which a rotary embedding's
  // angles (positions up to the sequence length, in radians) need.
  patterns.add<UnaryLowering<SinOp>>(
      context, [](OpBuilder &b, Location loc, Value x, arith::FastMathFlags) -> Value {
        return math::SinOp::create(b, loc, x);
      });
  patterns.add<UnaryLowering<CosOp>>(
      context, [](OpBuilder &b, Location loc, Value x, arith::FastMathFlags) -> Value {
        return math::CosOp::create(b, loc, x);
      });
  patterns.add<UnaryLowering<AbsOp>>(
      context, [](OpBuilder &b, Location loc, Value x, arith::FastMathFlags) -> Value {
        return math::AbsFOp::create(b, loc, x);
      });
  // The CPU's polynomial (ApproximateMathForCpu) and libdevice's erff are
  // within a few ulps; an exact GELU, 0.5 x (1 + erf(x / sqrt(2))), is
  // torch's default. erf is odd and keeps the sign of its argument, which
  // the polynomial loses at -0 (it gave +0): the sign is x's.
  patterns.add<UnaryLowering<ErfOp>>(
      context, [](OpBuilder &b, Location loc, Value x, arith::FastMathFlags) -> Value {
        return math::CopySignOp::create(b, loc, math::ErfOp::create(b, loc, x), x);
      });
}
