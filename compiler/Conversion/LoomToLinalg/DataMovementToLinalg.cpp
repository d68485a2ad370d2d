//===- DataMovementToLinalg.cpp - Indexing, layout changes, masking -------===//

#include "Conversion/LoomToLinalg/LinalgBuilders.h"
#include "Conversion/LoomToLinalg/LoomToLinalg.h"
#include "Loom/IR/LoomOps.h"

#include "mlir/Transforms/DialectConversion.h"

#include <limits>

using namespace mlir;
using namespace mlir::loom;

namespace {
/// A generic over the result's shape whose body reads the table directly:
/// result[i..., d] = table[clamp(ids[i...]), d]; a vocab-parallel table's
/// rows held elsewhere read as zeros.
struct EmbeddingLowering : OpConversionPattern<EmbeddingOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(EmbeddingOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *context = rewriter.getContext();
    RankedTensorType type = op.getType();
    int64_t rank = type.getRank();
    Value table = adaptor.getTable();
    int64_t rows = cast<RankedTensorType>(table.getType()).getDimSize(0);
    AffineMap idsMap = dropDimMap(rank, rank - 1, context);
    auto generic = linalg::GenericOp::create(
        rewriter, loc, type, ValueRange{adaptor.getIds()},
        ValueRange{tensor::EmptyOp::create(rewriter, loc, type.getShape(),
                                           type.getElementType())},
        ArrayRef<AffineMap>{idsMap, AffineMap::getMultiDimIdentityMap(rank, context)},
        SmallVector<utils::IteratorType>(rank, utils::IteratorType::parallel),
        [&](OpBuilder &b, Location l, ValueRange args) {
          Value id = tableRow(b, l, args[0], rows, adaptor.getRows(), op.getVocab());
          Value d = linalg::IndexOp::create(b, l, rank - 1);
          if (!adaptor.getRows()) {
            linalg::YieldOp::create(
                b, l, tensor::ExtractOp::create(b, l, table, ValueRange{id, d}).getResult());
            return;
          }
          // Unsigned: a row before the first held is negative, so huge.
          Value held = arith::CmpIOp::create(b, l, arith::CmpIPredicate::ult, id,
                                             arith::ConstantIndexOp::create(b, l, rows));
          Value safe = arith::SelectOp::create(b, l, held, id,
                                               arith::ConstantIndexOp::create(b, l, 0));
          Value value = tensor::ExtractOp::create(b, l, table, ValueRange{safe, d});
          Value zero = arith::ConstantOp::create(
              b, l, b.getZeroAttr(type.getElementType()));
          linalg::YieldOp::create(
              b, l, arith::SelectOp::create(b, l, held, value, zero).getResult());
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

struct ArangeLowering : OpConversionPattern<ArangeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ArangeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = op.getType();
    Location loc = op.getLoc();
    auto generic = linalg::GenericOp::create(
        rewriter, loc, type, ValueRange{},
        ValueRange{tensor::EmptyOp::create(rewriter, loc, type.getShape(),
                                           type.getElementType())},
        ArrayRef<AffineMap>{AffineMap::getMultiDimIdentityMap(1, getContext())},
        SmallVector<utils::IteratorType>{utils::IteratorType::parallel},
        [&](OpBuilder &b, Location l, ValueRange) {
          Value i = linalg::IndexOp::create(b, l, 0);
          linalg::YieldOp::create(
              b, l, arith::IndexCastOp::create(b, l, type.getElementType(), i).getResult());
        });
    rewriter.replaceOp(op, generic.getResult(0));
    return success();
  }
};

struct TransposeLowering : OpConversionPattern<TransposeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(TransposeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = op.getType();
    // A scalar's (or a vector's) transpose is itself: linalg.transpose
    // takes no empty permutation (transpose(s) of a scalar crashed).
    if (type.getRank() < 2) {
      rewriter.replaceOp(op, adaptor.getInput());
      return success();
    }
    Value init = tensor::EmptyOp::create(rewriter, op.getLoc(), type.getShape(),
                                         type.getElementType());
    auto transpose = linalg::TransposeOp::create(
        rewriter, op.getLoc(), adaptor.getInput(), init, op.getPermutation());
    rewriter.replaceOp(op, transpose.getResult());
    return success();
  }
};

/// Any reshape is a collapse to one dimension and an expansion from it:
/// both are views of the same row-major bytes.
struct ReshapeLowering : OpConversionPattern<ReshapeOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ReshapeOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType from = op.getInput().getType(), to = op.getType();
    auto all = [](int64_t rank) {
      ReassociationIndices group;
      for (int64_t d = 0; d < rank; ++d)
        group.push_back(d);
      return SmallVector<ReassociationIndices>(rank ? 1 : 0, group);
    };
    Value value = adaptor.getInput();
    // To or from a scalar: all dimensions are 1, and no groups are needed.
    if (from.getRank() == 0 || to.getRank() == 0) {
      if (from == to)
        rewriter.replaceOp(op, value);
      else if (from.getRank() == 0)
        rewriter.replaceOpWithNewOp<tensor::ExpandShapeOp>(
            op, to, value, SmallVector<ReassociationIndices>{});
      else
        rewriter.replaceOpWithNewOp<tensor::CollapseShapeOp>(
            op, to, value, SmallVector<ReassociationIndices>{});
      return success();
    }
    auto flat = RankedTensorType::get({from.getNumElements()}, from.getElementType());
    if (from.getRank() != 1)
      value = tensor::CollapseShapeOp::create(rewriter, loc, flat, value,
                                              all(from.getRank()));
    if (to.getRank() != 1)
      value = tensor::ExpandShapeOp::create(rewriter, loc, to, value, all(to.getRank()));
    rewriter.replaceOp(op, value);
    return success();
  }
};

struct SplitLowering : OpConversionPattern<SplitOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(SplitOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    int64_t axis = op.getAxis(), offset = 0;
    int64_t rank = op.getInput().getType().getRank();
    SmallVector<Value> pieces;
    for (Type type : op.getResultTypes()) {
      auto piece = cast<RankedTensorType>(type);
      SmallVector<int64_t> offsets(rank, 0), strides(rank, 1);
      offsets[axis] = offset;
      offset += piece.getDimSize(axis);
      pieces.push_back(tensor::ExtractSliceOp::create(
          rewriter, op.getLoc(), piece, adaptor.getInput(), ValueRange{},
          ValueRange{}, ValueRange{}, offsets, piece.getShape(), strides));
    }
    rewriter.replaceOp(op, pieces);
    return success();
  }
};

/// A few inputs: a chain of insert_slices into an empty tensor, which
/// empty-tensor elimination turns into the kernel's destination, so the
/// inputs are copied once, into the output. A tensor.concat allocates its
/// result and the kernel then copied it into the output: three passes over
/// the bytes, not two (concat of 3 x [4096, 256] f32: 1.4-1.8 ms against
/// torch's 0.37). Many inputs: one tensor.concat, since one-shot
/// bufferization analyses a chain of n insert_slices in about n^4 (150,
/// the gradient bucket of a 24-layer stage: 17 s; 300: 5 min) and one
/// concat in linear time.
struct ConcatLowering : OpConversionPattern<ConcatOp> {
  using OpConversionPattern::OpConversionPattern;
  static constexpr size_t kMostInsertedSlices = 16;
  LogicalResult
  matchAndRewrite(ConcatOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    if (adaptor.getInputs().size() > kMostInsertedSlices) {
      rewriter.replaceOpWithNewOp<tensor::ConcatOp>(op, op.getType(), op.getAxis(),
                                                    adaptor.getInputs());
      return success();
    }
    RankedTensorType type = op.getType();
    int64_t rank = type.getRank(), axis = op.getAxis();
    Value result = tensor::EmptyOp::create(rewriter, op.getLoc(), type.getShape(),
                                           type.getElementType());
    int64_t offset = 0;
    for (Value input : adaptor.getInputs()) {
      auto piece = cast<RankedTensorType>(input.getType());
      SmallVector<int64_t> offsets(rank, 0), strides(rank, 1);
      offsets[axis] = offset;
      offset += piece.getDimSize(axis);
      result = tensor::InsertSliceOp::create(rewriter, op.getLoc(), input, result,
                                             ValueRange{}, ValueRange{}, ValueRange{},
                                             offsets, piece.getShape(), strides);
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// x[..., i, j] for j <= i, -inf above the diagonal.
struct CausalMaskLowering : OpConversionPattern<CausalMaskOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(CausalMaskOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    int64_t rank = op.getType().getRank();
    Value result = buildBroadcastElementwise(
        rewriter, op.getLoc(), op.getType(), {adaptor.getInput()},
        [&](OpBuilder &b, Location l, ValueRange in) -> Value {
          Value i = linalg::IndexOp::create(b, l, rank - 2);
          Value j = linalg::IndexOp::create(b, l, rank - 1);
          Value above = arith::CmpIOp::create(b, l, arith::CmpIPredicate::ugt, j, i);
          Value ninf = f32Constant(b, l, -std::numeric_limits<double>::infinity());
          return arith::SelectOp::create(b, l, above, ninf, in[0]);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};
} // namespace

void mlir::loom::populateDataMovementToLinalgPatterns(
    RewritePatternSet &patterns) {
  patterns.add<EmbeddingLowering, ArangeLowering, TransposeLowering,
               ReshapeLowering, SplitLowering, ConcatLowering,
               CausalMaskLowering>(patterns.getContext());
}
