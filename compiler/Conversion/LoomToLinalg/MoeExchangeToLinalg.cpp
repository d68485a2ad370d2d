//===- MoeExchangeToLinalg.cpp - Expert parallelism's counts and maps -----===//
//
// The pieces loom-partition adds for all-to-all expert parallelism
// (PartitionMoe.cpp): a rank's choice counts, every rank's offsets, and
// the maps between received rows and expert slots. Like the rest of the
// MoE lowerings, each is a linalg.generic; the priorities (top_k) and the
// ranks are few, so the maps unroll over the priorities.
//
//===----------------------------------------------------------------------===//

#include "Loom/IR/LoomOps.h"
#include "LinalgBuilders.h"
#include "LoomToLinalg.h"
#include "MoeBuilders.h"

#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::moe;

namespace {
/// result[0, k, e]: tokens whose k-th choice is e.
struct MoeCountsLowering : OpConversionPattern<MoeCountsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MoeCountsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *context = getContext();
    RankedTensorType type = op.getType();
    auto flat = RankedTensorType::get(type.getShape().drop_front(), type.getElementType());
    Value counts = generic(
        rewriter, loc, flat, {adaptor.getExpert()},
        filledTensor(rewriter, loc, flat, rewriter.getI32IntegerAttr(0)),
        {mapOf(context, 3, {2, 0}), mapOf(context, 3, {0, 1})}, 3, 2,
        [&](OpBuilder &b, Location l, ValueRange args) {
          Scalars s{b, l};
          Value hit = s.cmp(arith::CmpIPredicate::eq, args[0], s.asI32(s.index(1)));
          Value one = arith::AddIOp::create(b, l, args[1], s.i32(1));
          linalg::YieldOp::create(b, l, ValueRange{s.select(hit, one, args[1])});
        });
    rewriter.replaceOpWithNewOp<tensor::ExpandShapeOp>(
        op, type, counts, ArrayRef<ReassociationIndices>{{0, 1}, {2}});
    return success();
  }
};

/// result[r, k, e] = sum of counts[q, j, e] over (j < k, q != r) and
/// (j == k, q < r).
struct MoeOffsetsLowering : OpConversionPattern<MoeOffsetsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MoeOffsetsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    MLIRContext *context = getContext();
    RankedTensorType type = op.getType();
    Value result = generic(
        rewriter, op.getLoc(), type, {adaptor.getCounts()},
        filledTensor(rewriter, op.getLoc(), type, rewriter.getI32IntegerAttr(0)),
        {mapOf(context, 5, {3, 4, 2}), mapOf(context, 5, {0, 1, 2})}, 5, 3,
        [&](OpBuilder &b, Location l, ValueRange args) {
          Scalars s{b, l};
          Value r = s.index(0), k = s.index(1), q = s.index(3), j = s.index(4);
          Value lower = arith::AndIOp::create(b, l, s.cmp(arith::CmpIPredicate::ult, j, k),
                                              s.cmp(arith::CmpIPredicate::ne, q, r));
          Value same = arith::AndIOp::create(b, l, s.cmp(arith::CmpIPredicate::eq, j, k),
                                             s.cmp(arith::CmpIPredicate::ult, q, r));
          Value ahead = arith::OrIOp::create(b, l, lower, same);
          Value add = arith::AddIOp::create(b, l, args[1], args[0]);
          linalg::YieldOp::create(b, l, ValueRange{s.select(ahead, add, args[1])});
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// For each received row (rank r, local expert e, index j): rank r's kept
/// choices of e within the rank's slot block [first, first + width) are,
/// per priority k, the slots [lo_k, hi_k) where its choices of priority k,
/// positions [start_k, start_k + counts[r, k, e]) plus offsets[r, k, e],
/// meet the block and the capacity; row j is the j-th of them in priority
/// order (unrolled over the priorities). Then the inverse map.
struct MoeExchangeMapLowering : OpConversionPattern<MoeExchangeMapOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MoeExchangeMapOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *context = getContext();
    Value counts = adaptor.getCounts(), offsets = adaptor.getOffsets();
    Value blockIndex = adaptor.getBlock();
    int64_t topK = typeOf(counts).getDimSize(1), experts = typeOf(counts).getDimSize(2);
    int64_t capacity = op.getCapacity(), buffer = op.getBuffer();
    int64_t width = capacity / op.getBlocks().value_or(1);
    TypedAttr none = rewriter.getI32IntegerAttr(-1);
    RankedTensorType slotType = op.getSlot().getType();
    Value slot = generic(
        rewriter, loc, slotType, {}, filledTensor(rewriter, loc, slotType, none),
        {mapOf(context, 2, {0, 1})}, 2, 2, [&](OpBuilder &b, Location l, ValueRange) {
          Scalars s{b, l};
          Value row = s.index(0);
          Value rank = arith::DivUIOp::create(b, l, row, s.constIndex(experts * buffer));
          Value e = arith::RemUIOp::create(
              b, l, arith::DivUIOp::create(b, l, row, s.constIndex(buffer)),
              s.constIndex(experts));
          Value j = s.asI32(arith::RemUIOp::create(b, l, row, s.constIndex(buffer)));
          Value first = s.i32(0);
          if (blockIndex)
            first = arith::MulIOp::create(b, l, s.extract(blockIndex, {s.constIndex(0)}),
                                          s.i32(width));
          Value last = arith::AddIOp::create(b, l, first, s.i32(width));
          Value result = s.i32(-1), position = s.i32(0), taken = s.i32(0);
          for (int64_t k = 0; k < topK; ++k) {
            Value count = s.extract(counts, {rank, s.constIndex(k), e});
            Value begin = arith::AddIOp::create(
                b, l, position, s.extract(offsets, {rank, s.constIndex(k), e}));
            Value end = arith::AddIOp::create(b, l, begin, count);
            Value lo = arith::MaxSIOp::create(b, l, begin, first);
            Value hi = arith::MinSIOp::create(
                b, l, end, arith::MinSIOp::create(b, l, last, s.i32(capacity)));
            Value here = arith::MaxSIOp::create(b, l, arith::SubIOp::create(b, l, hi, lo),
                                                s.i32(0));
            Value upto = arith::AddIOp::create(b, l, taken, here);
            Value mine = arith::AndIOp::create(b, l, s.cmp(arith::CmpIPredicate::sge, j, taken),
                                               s.cmp(arith::CmpIPredicate::slt, j, upto));
            Value global = arith::AddIOp::create(
                b, l, lo, arith::SubIOp::create(b, l, j, taken));
            Value at = arith::AddIOp::create(
                b, l, arith::MulIOp::create(b, l, s.asI32(e), s.i32(width)),
                arith::SubIOp::create(b, l, global, first));
            result = s.select(mine, at, result);
            position = arith::AddIOp::create(b, l, position, count);
            taken = upto;
          }
          linalg::YieldOp::create(b, l, ValueRange{result});
        });
    // source[s]: the row holding slot s, or -1.
    RankedTensorType sourceType = op.getSource().getType();
    Value source = invertSlots(rewriter, loc, slot, sourceType,
                               filledTensor(rewriter, loc, sourceType, none));
    rewriter.replaceOp(op, {slot, source});
    return success();
  }
};
} // namespace

void mlir::loom::populateMoeExchangeToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<MoeCountsLowering, MoeOffsetsLowering, MoeExchangeMapLowering>(
      patterns.getContext());
}
