//===- ContractionToLinalg.cpp - Matmul with its accumulation type --------===//

#include "Conversion/LoomToLinalg/LinalgBuilders.h"
#include "Conversion/LoomToLinalg/LoomToLinalg.h"
#include "Loom/IR/LoomOps.h"
#include "Loom/IR/Tf32.h"

#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::loom;

namespace {
/// `[b..., M, K] x [b..., K, N]` (or `x [K, N]`) as one linalg.generic over
/// (b..., m, n, k) (an operand read through a transpose of its last two
/// dims where it is one), accumulating in the op's accumulation type (the
/// operands first rounded to tf32 with `multiply tf32`), then rounding to
/// the operand type when that is narrower.
struct MatmulLowering : OpConversionPattern<MatmulOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MatmulOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *context = rewriter.getContext();
    RankedTensorType resultType = op.getType();
    ArrayRef<int64_t> lhs = op.getLhs().getType().getShape();
    ArrayRef<int64_t> rhs = op.getRhs().getType().getShape();
    ArrayRef<int64_t> result = resultType.getShape();
    int64_t batch = result.size() - 2;
    int64_t loops = batch + 3;
    AffineExpr m = getAffineDimExpr(batch, context);
    AffineExpr n = getAffineDimExpr(batch + 1, context);
    AffineExpr k = getAffineDimExpr(batch + 2, context);

    // Batch dimensions of an operand align with the result's trailing batch
    // dimensions; a size-1 one broadcasts.
    auto batchExprs = [&](ArrayRef<int64_t> batchShape) {
      SmallVector<AffineExpr> exprs;
      int64_t offset = batch - batchShape.size();
      for (auto [i, size] : llvm::enumerate(batchShape))
        exprs.push_back(size == 1 && result[offset + i] != 1
                            ? getAffineConstantExpr(0, context)
                            : getAffineDimExpr(offset + i, context));
      return exprs;
    };
    // An operand that is a transpose of its last two dims (A = x^T in the
    // backward's `x^T @ dy`: [b..., K, M]; B in `q @ transpose(k)` or
    // `h @ transpose(wte)`: [b..., N, K]) is read in place through its
    // indexing map instead of being copied first; the kernel outlining puts
    // such a transpose in the matmul's kernel.
    auto operand = [&](Value value, ArrayRef<int64_t> shape, AffineExpr outer,
                       AffineExpr inner,
                       SmallVectorImpl<AffineExpr> &exprs) -> Value {
      exprs = batchExprs(shape.drop_back(2));
      auto transpose = value.getDefiningOp<linalg::TransposeOp>();
      if (transpose && swapsLastTwoDims(transpose.getPermutation())) {
        exprs.append({inner, outer});
        return transpose.getInput();
      }
      exprs.append({outer, inner});
      return value;
    };
    SmallVector<AffineExpr> lhsExprs, rhsExprs;
    Value lhsValue = operand(adaptor.getLhs(), lhs, m, k, lhsExprs);
    Value rhsValue = operand(adaptor.getRhs(), rhs, k, n, rhsExprs);
    SmallVector<AffineExpr> outExprs;
    for (int64_t d = 0; d < batch + 2; ++d)
      outExprs.push_back(getAffineDimExpr(d, context));
    SmallVector<AffineMap> maps = {
        AffineMap::get(loops, 0, lhsExprs, context),
        AffineMap::get(loops, 0, rhsExprs, context),
        AffineMap::get(loops, 0, outExprs, context)};
    SmallVector<utils::IteratorType> iterators(loops,
                                               utils::IteratorType::parallel);
    iterators.back() = utils::IteratorType::reduction;

    Type accumulate = op.getAccumulate();
    bool tf32 = op.getMultiply().has_value();
    Value zero = arith::ConstantOp::create(rewriter, loc,
                                           rewriter.getFloatAttr(accumulate, 0.0));
    Value empty = tensor::EmptyOp::create(rewriter, loc, result, accumulate);
    Value acc = linalg::FillOp::create(rewriter, loc, zero, empty).getResult(0);
    auto product = linalg::GenericOp::create(
        rewriter, loc, acc.getType(), ValueRange{lhsValue, rhsValue},
        acc, maps, iterators,
        [&](OpBuilder &b, Location nloc, ValueRange args) {
          Value a = convertScalar(b, nloc, args[0], accumulate);
          Value c = convertScalar(b, nloc, args[1], accumulate);
          if (tf32) {
            a = roundToTf32(b, nloc, a);
            c = roundToTf32(b, nloc, c);
          }
          linalg::YieldOp::create(b, nloc, multiplyAccumulate(b, nloc, args[2], a, c));
        });
    Value out = product.getResult(0);
    if (accumulate != resultType.getElementType())
      out = buildConverted(rewriter, loc, resultType, out);
    rewriter.replaceOp(op, out);
    return success();
  }
};
} // namespace

void mlir::loom::populateContractionToLinalgPatterns(
    RewritePatternSet &patterns) {
  patterns.add<MatmulLowering>(patterns.getContext());
}
