//===- DropoutToLinalg.cpp - loom.dropout: a counter-based mask -----------===//
//
// The mask is a hash of the step's keys, the op's stream and each
// element's global positions, computed where the element is: no random
// state, no mask tensor kept for the backward (its dropout hashes the same
// positions), and a partitioned program draws what one rank would. The
// hash is lowbias32 (C. Wellons' 32-bit integer mix, full avalanche),
// chained; docs/language.md spells it out for references to reproduce.
//
//===----------------------------------------------------------------------===//

#include "Conversion/LoomToLinalg/LinalgBuilders.h"
#include "Conversion/LoomToLinalg/LoomToLinalg.h"
#include "Loom/IR/LoomOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::loom;

namespace {
Value i32Constant(OpBuilder &b, Location loc, uint32_t value) {
  return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(static_cast<int32_t>(value)));
}

/// lowbias32: x ^= x >> 16; x *= 0x7feb352d; x ^= x >> 15;
/// x *= 0x846ca68b; x ^= x >> 16 (wrapping u32 arithmetic).
Value mix(OpBuilder &b, Location loc, Value x) {
  auto shiftXor = [&](Value v, uint32_t shift) -> Value {
    return arith::XOrIOp::create(b, loc, v,
                                 arith::ShRUIOp::create(b, loc, v, i32Constant(b, loc, shift)));
  };
  x = shiftXor(x, 16);
  x = arith::MulIOp::create(b, loc, x, i32Constant(b, loc, 0x7feb352d));
  x = shiftXor(x, 15);
  x = arith::MulIOp::create(b, loc, x, i32Constant(b, loc, 0x846ca68b));
  return shiftXor(x, 16);
}

struct DropoutLowering : OpConversionPattern<DropoutOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(DropoutOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    // A forward or a gradient program drops nothing.
    if (adaptor.getKeys().empty()) {
      rewriter.replaceOp(op, adaptor.getInput());
      return success();
    }
    MLIRContext *context = rewriter.getContext();
    RankedTensorType type = op.getType();
    int64_t rank = type.getRank();
    SmallVector<Value> inputs{adaptor.getInput()};
    SmallVector<AffineMap> maps{AffineMap::getMultiDimIdentityMap(rank, context)};
    for (auto [d, positions] : llvm::enumerate(adaptor.getPositions())) {
      inputs.push_back(positions);
      maps.push_back(AffineMap::get(rank, 0, getAffineDimExpr(d, context)));
    }
    for (Value key : adaptor.getKeys()) {
      inputs.push_back(key);
      maps.push_back(AffineMap::get(rank, 0, context));
    }
    double p = op.getProbability().convertToDouble();
    uint32_t stream = static_cast<uint32_t>(op.getStream());
    Value result = buildElementwise(
        rewriter, op.getLoc(), type, inputs, maps,
        [&](OpBuilder &b, Location loc, ValueRange args) -> Value {
          Value x = args[0];
          Value seed = args[1 + rank], microbatch = args[2 + rank];
          Type i32 = b.getI32Type();
          // h = mix(mix(seed + stream * golden) + microbatch), then each
          // dim's position in turn.
          Value h = arith::BitcastOp::create(b, loc, i32, seed);
          h = mix(b, loc, arith::AddIOp::create(b, loc, h,
                                                i32Constant(b, loc, stream * 0x9e3779b9u)));
          Value index = arith::FPToSIOp::create(b, loc, i32, microbatch);
          h = mix(b, loc, arith::AddIOp::create(b, loc, h, index));
          for (int64_t d = 0; d < rank; ++d)
            h = mix(b, loc, arith::AddIOp::create(b, loc, h, args[1 + d]));
          // u = (h >> 8) / 2^24 in [0, 1), exact in f32; kept where u >= p.
          Value top = arith::ShRUIOp::create(b, loc, h, i32Constant(b, loc, 8));
          Value u = arith::MulFOp::create(b, loc, arith::UIToFPOp::create(b, loc, b.getF32Type(), top),
                                          f32Constant(b, loc, 0x1p-24));
          Value keep = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGE, u,
                                             f32Constant(b, loc, static_cast<float>(p)));
          Value factor = arith::SelectOp::create(
              b, loc, keep, f32Constant(b, loc, static_cast<float>(1.0 / (1.0 - p))),
              f32Constant(b, loc, 0.0));
          // A held-out loss (microbatch -1) keeps everything, unscaled.
          Value training = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, index,
                                                 i32Constant(b, loc, 0));
          factor = arith::SelectOp::create(b, loc, training, factor, f32Constant(b, loc, 1.0));
          // x * 0 (torch's x * mask * scale): NaN stays NaN, -x gives -0.
          return arith::MulFOp::create(b, loc, x, factor);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};
} // namespace

void mlir::loom::populateDropoutToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<DropoutLowering>(patterns.getContext());
}
