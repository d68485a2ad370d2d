//===- ReductionsToLinalg.cpp - Softmax, norms, reductions and losses -----===//
//
// All of these accumulate in f32 whatever the storage type, and compute
// statistics before normalizing (two passes over the row), which keeps
// softmax and the norms stable for large inputs.
//
//===----------------------------------------------------------------------===//

#include "Conversion/LoomToLinalg/LinalgBuilders.h"
#include "Conversion/LoomToLinalg/LoomToLinalg.h"
#include "Loom/IR/LoomOps.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Transforms/DialectConversion.h"

#include <limits>

using namespace mlir;
using namespace mlir::loom;

static Value maxCombine(OpBuilder &b, Location loc, Value acc, ValueRange in) {
  return arith::MaximumFOp::create(b, loc, acc, in[0]);
}
/// The row maximum of a softmax: maxnumf, which skips NaN, where
/// maxCombine's maximumf returns it. A softmax's outputs are the same
/// either way (a NaN element still makes exp(x - max), the sum and so every
/// output of its row NaN; rows of infinities give the same NaN), and LLVM
/// vectorizes a maxnum reduction, not a maximum one.
static Value softmaxMaxCombine(OpBuilder &b, Location loc, Value acc, ValueRange in) {
  return arith::MaxNumFOp::create(b, loc, acc, in[0]);
}
static Value sumCombine(OpBuilder &b, Location loc, Value acc, ValueRange in) {
  return arith::AddFOp::create(b, loc, acc, in[0]);
}

static AffineMap identity(int64_t rank, MLIRContext *context) {
  return AffineMap::getMultiDimIdentityMap(rank, context);
}

static RankedTensorType shapeOf(Value v) {
  return cast<RankedTensorType>(v.getType());
}

/// `total / count` (f32), stored as `type` (rounded once). A division, not
/// a product with 1/count: 1/7 rounds, and the mean of a row of 3s would be
/// 3.0000002 (a layernorm of a constant row then is not 0).
static Value averaged(OpBuilder &b, Location loc, RankedTensorType type,
                      Value total, int64_t count) {
  return buildBroadcastElementwise(
      b, loc, type, {total}, [&](OpBuilder &nb, Location l, ValueRange in) -> Value {
        return count == 1 ? in[0]
                          : arith::DivFOp::create(nb, l, in[0],
                                                  f32Constant(nb, l, count));
      });
}

/// Mean over the last axis of `f(x, stats...)`, as an f32 tensor.
static Value rowMean(OpBuilder &b, Location loc, Value x, ValueRange stats,
                     function_ref<Value(OpBuilder &, Location, ValueRange)> f) {
  ArrayRef<int64_t> shape = shapeOf(x).getShape();
  int64_t rank = shape.size(), axis = rank - 1;
  MLIRContext *context = b.getContext();
  SmallVector<Value> inputs{x};
  inputs.append(stats.begin(), stats.end());
  SmallVector<AffineMap> maps{identity(rank, context)};
  for (size_t i = 0; i < stats.size(); ++i)
    maps.push_back(dropDimMap(rank, axis, context));
  Value sum = buildAxisReduction(
      b, loc, shape, axis, inputs, maps, 0.0,
      [&](OpBuilder &nb, Location nloc, Value acc, ValueRange in) -> Value {
        return arith::AddFOp::create(nb, nloc, acc, f(nb, nloc, in));
      });
  return averaged(b, loc, shapeOf(sum), sum, shape.back());
}

/// The statistics of a stable softmax along `axis`: the maximum and the sum
/// of exp(x - max), as f32 tensors without that axis.
struct SoftmaxStatistics {
  Value max, sumExp;
};

static SoftmaxStatistics softmaxStatistics(OpBuilder &b, Location loc, Value x,
                                           int64_t axis) {
  MLIRContext *context = b.getContext();
  ArrayRef<int64_t> shape = shapeOf(x).getShape();
  int64_t rank = shape.size();
  AffineMap full = identity(rank, context);
  AffineMap reduced = dropDimMap(rank, axis, context);
  Value max = buildAxisReduction(b, loc, shape, axis, {x}, {full},
                                 -std::numeric_limits<double>::infinity(),
                                 softmaxMaxCombine);
  Value sum = buildAxisReduction(
      b, loc, shape, axis, {x, max}, {full, reduced}, 0.0,
      [](OpBuilder &nb, Location l, Value acc, ValueRange in) -> Value {
        Value e = math::ExpOp::create(nb, l, arith::SubFOp::create(nb, l, in[0], in[1]));
        return arith::AddFOp::create(nb, l, acc, e);
      });
  return {max, sum};
}

namespace {
struct SoftmaxLowering : OpConversionPattern<SoftmaxOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(SoftmaxOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *context = rewriter.getContext();
    Value x = adaptor.getInput();
    ArrayRef<int64_t> shape = op.getType().getShape();
    int64_t rank = shape.size(), axis = op.getAxis();
    AffineMap full = identity(rank, context);
    AffineMap reduced = dropDimMap(rank, axis, context);
    // max, then sum(exp(x - max)), then exp(x - max) / sum.
    auto [max, sum] = softmaxStatistics(rewriter, loc, x, axis);
    Value result = buildElementwise(
        rewriter, loc, op.getType(), {x, max, sum}, {full, reduced, reduced},
        [](OpBuilder &b, Location l, ValueRange in) -> Value {
          Value e = math::ExpOp::create(b, l, arith::SubFOp::create(b, l, in[0], in[1]));
          return arith::DivFOp::create(b, l, e, in[2]);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// Layernorm and rmsnorm over the last dimension.
template <typename NormOp>
struct NormLowering : OpConversionPattern<NormOp> {
  using OpConversionPattern<NormOp>::OpConversionPattern;
  static constexpr bool centered = std::is_same_v<NormOp, LayerNormOp>;

  LogicalResult
  matchAndRewrite(NormOp op, typename NormOp::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *context = rewriter.getContext();
    Value x = adaptor.getInput();
    int64_t rank = op.getType().getRank();
    double eps = op.getEpsilon().convertToDouble();
    AffineMap full = identity(rank, context);
    AffineMap reduced = dropDimMap(rank, rank - 1, context);
    AffineMap feature = AffineMap::get(
        rank, 0, getAffineDimExpr(rank - 1, context), context);

    Value mean;
    SmallVector<Value> stats;
    if constexpr (centered) {
      mean = rowMean(rewriter, loc, x, {},
                     [](OpBuilder &, Location, ValueRange in) { return in[0]; });
      stats.push_back(mean);
    }
    // E[(x - mean)^2] for layernorm, E[x^2] for rmsnorm.
    Value second = rowMean(
        rewriter, loc, x, stats,
        [](OpBuilder &b, Location l, ValueRange in) -> Value {
          Value d = in.size() > 1 ? arith::SubFOp::create(b, l, in[0], in[1])
                                  : in[0];
          return arith::MulFOp::create(b, l, d, d);
        });

    SmallVector<Value> inputs{x};
    SmallVector<AffineMap> maps{full};
    if (mean) {
      inputs.push_back(mean);
      maps.push_back(reduced);
    }
    inputs.push_back(second);
    maps.push_back(reduced);
    Value scale = adaptor.getScale(), bias;
    if constexpr (centered)
      bias = adaptor.getBias();
    for (Value param : {scale, bias})
      if (param) {
        inputs.push_back(param);
        maps.push_back(feature);
      }
    bool hasMean = (bool)mean, hasScale = (bool)scale, hasBias = (bool)bias;
    Value result = buildElementwise(
        rewriter, loc, op.getType(), inputs, maps,
        [=](OpBuilder &b, Location l, ValueRange in) -> Value {
          unsigned i = 0;
          Value v = in[i++];
          if (hasMean)
            v = arith::SubFOp::create(b, l, v, in[i++]);
          Value var = arith::AddFOp::create(b, l, in[i++], f32Constant(b, l, eps));
          v = arith::MulFOp::create(b, l, v, math::RsqrtOp::create(b, l, var));
          if (hasScale)
            v = arith::MulFOp::create(b, l, v, in[i++]);
          if (hasBias)
            v = arith::AddFOp::create(b, l, v, in[i++]);
          return v;
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// sum, mean and max over one axis, with keepdim.
template <typename ReduceOp>
struct ReduceLowering : OpConversionPattern<ReduceOp> {
  using OpConversionPattern<ReduceOp>::OpConversionPattern;
  LogicalResult
  matchAndRewrite(ReduceOp op, typename ReduceOp::Adaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    Value x = adaptor.getInput();
    ArrayRef<int64_t> shape = shapeOf(x).getShape();
    int64_t axis = op.getAxis();
    bool isMax = std::is_same_v<ReduceOp, MaxOp>;
    Value acc = buildAxisReduction(
        rewriter, loc, shape, axis, {x},
        {identity(shape.size(), rewriter.getContext())},
        isMax ? -std::numeric_limits<double>::infinity() : 0.0,
        isMax ? maxCombine : sumCombine);
    int64_t count = std::is_same_v<ReduceOp, MeanOp> ? shape[axis] : 1;
    // Round to the storage type, then restore the kept dimension.
    auto flat = RankedTensorType::get(shapeOf(acc).getShape(),
                                      op.getType().getElementType());
    Value result = averaged(rewriter, loc, flat, acc, count);
    if (op.getKeepdim()) {
      SmallVector<ReassociationIndices> groups;
      for (int64_t d = 0, rank = shape.size(); d < rank; ++d)
        if (d != axis)
          groups.push_back({d});
      // The kept unit dimension joins its neighbour's group; a reduction to
      // a scalar expands with no groups at all.
      if (!groups.empty() && axis == 0)
        groups.front().insert(groups.front().begin(), 0);
      else if (!groups.empty())
        groups[axis - 1].push_back(axis);
      result = tensor::ExpandShapeOp::create(rewriter, loc, op.getType(),
                                             result, groups);
    }
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// A row's cross-entropy, log(sum) - (logit - max), from its maximum, its
/// sum of exp(x - max) and the label's logit. Measuring the logit from the
/// maximum first keeps the small terms: log(sum) + max - logit rounded
/// them away at large logits (rows near 1e8, where f32 steps by 8, gave 0
/// for a loss of ln 8).
static Value lossFromStatistics(OpBuilder &b, Location l, Value max, Value sum,
                                Value logit) {
  return arith::SubFOp::create(b, l, math::LogOp::create(b, l, sum),
                               arith::SubFOp::create(b, l, logit, max));
}

/// mean over rows of logsumexp(logits[row]) - logits[row, label[row]].
struct CrossEntropyLowering : OpConversionPattern<CrossEntropyOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(CrossEntropyOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *context = rewriter.getContext();
    Value logits = adaptor.getLogits(), labels = adaptor.getLabels();
    ArrayRef<int64_t> shape = shapeOf(logits).getShape();
    int64_t rank = shape.size(), axis = rank - 1, classes = shape.back();
    auto [max, sum] = softmaxStatistics(rewriter, loc, logits, axis);
    ArrayRef<int64_t> rows = shapeOf(max).getShape();
    int64_t count = 1;
    for (int64_t d : rows)
      count *= d;
    AffineMap rowMap = identity(rows.size(), context);
    Value total = buildTotalSum(
        rewriter, loc, rows, {max, sum, labels}, {rowMap, rowMap, rowMap},
        [&](OpBuilder &b, Location l, ValueRange in) -> Value {
          // The label's logit, read directly; labels are clamped into range
          // so a bad label cannot read outside the tensor.
          SmallVector<Value> index;
          for (int64_t d = 0; d < (int64_t)rows.size(); ++d)
            index.push_back(linalg::IndexOp::create(b, l, d));
          index.push_back(clampedIndex(b, l, in[2], classes));
          Value logit = widen(b, l, tensor::ExtractOp::create(b, l, logits, index));
          return lossFromStatistics(b, l, in[0], in[1], logit);
        });
    rewriter.replaceOp(op, averaged(rewriter, loc, op.getType(), total, count));
    return success();
  }
};

/// (exp(x - max) / sum - [hit]) * grad / rows: a cross-entropy's gradient
/// at one logit, from its row's f32 statistics.
static Value softmaxMinusOnehot(OpBuilder &b, Location l, Value x, Value max,
                                Value sum, Value hit, Value grad, int64_t rows) {
  Value e = math::ExpOp::create(b, l, arith::SubFOp::create(b, l, x, max));
  Value p = arith::DivFOp::create(b, l, e, sum);
  Value target = arith::SelectOp::create(b, l, hit, f32Constant(b, l, 1.0),
                                         f32Constant(b, l, 0.0));
  Value scale = arith::MulFOp::create(b, l, grad, f32Constant(b, l, 1.0 / rows));
  return arith::MulFOp::create(b, l, arith::SubFOp::create(b, l, p, target), scale);
}

/// (softmax(logits) - onehot(labels)) * grad / rows, from the same f32
/// statistics as the forward.
struct CrossEntropyGradLowering : OpConversionPattern<CrossEntropyGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(CrossEntropyGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *context = rewriter.getContext();
    Value logits = adaptor.getLogits();
    ArrayRef<int64_t> shape = shapeOf(logits).getShape();
    int64_t rank = shape.size(), axis = rank - 1, classes = shape.back();
    auto [max, sum] = softmaxStatistics(rewriter, loc, logits, axis);
    int64_t count = shapeOf(max).getNumElements();
    AffineMap full = identity(rank, context);
    AffineMap reduced = dropDimMap(rank, axis, context);
    AffineMap scalarMap = AffineMap::get(rank, 0, {}, context);
    Value result = buildElementwise(
        rewriter, loc, op.getType(),
        {logits, max, sum, adaptor.getLabels(), adaptor.getGrad()},
        {full, reduced, reduced, reduced, scalarMap},
        [&](OpBuilder &b, Location l, ValueRange in) -> Value {
          // The label clamped into range, as the forward reads it.
          Value label = clampedIndex(b, l, in[3], classes);
          Value j = linalg::IndexOp::create(b, l, axis);
          Value hit = arith::CmpIOp::create(b, l, arith::CmpIPredicate::eq, j, label);
          return softmaxMinusOnehot(b, l, in[0], in[1], in[2], hit, in[4], count);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// Whether class `ids[j]` (the class of the loop's last index) is the
/// row's label, comparing the two integers in i64.
static Value isLabel(OpBuilder &b, Location loc, Value label, Value id) {
  auto i64 = b.getI64Type();
  auto wide = [&](Value v) {
    return v.getType() == i64 ? v : arith::ExtSIOp::create(b, loc, i64, v).getResult();
  };
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, wide(label), wide(id));
}

/// The map of a vocab-parallel op's `ids`, the last loop's classes.
static AffineMap classMap(int64_t rank, MLIRContext *context) {
  return AffineMap::get(rank, 0, {getAffineDimExpr(rank - 1, context)}, context);
}

struct VocabStatsLowering : OpConversionPattern<VocabStatsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(VocabStatsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *context = rewriter.getContext();
    Value logits = adaptor.getLogits();
    ArrayRef<int64_t> shape = shapeOf(logits).getShape();
    int64_t rank = shape.size(), axis = rank - 1;
    AffineMap full = identity(rank, context);
    AffineMap reduced = dropDimMap(rank, axis, context);
    Value sumExp = buildAxisReduction(
        rewriter, loc, shape, axis, {logits, adaptor.getMax()}, {full, reduced}, 0.0,
        [](OpBuilder &b, Location l, Value acc, ValueRange in) -> Value {
          Value e = math::ExpOp::create(b, l, arith::SubFOp::create(b, l, in[0], in[1]));
          return arith::AddFOp::create(b, l, acc, e);
        });
    Value target = buildAxisReduction(
        rewriter, loc, shape, axis,
        {logits, adaptor.getLabels(), adaptor.getIds()},
        {full, reduced, classMap(rank, context)}, 0.0,
        [](OpBuilder &b, Location l, Value acc, ValueRange in) -> Value {
          Value hit = isLabel(b, l, in[1], in[2]);
          return arith::SelectOp::create(b, l, hit, arith::AddFOp::create(b, l, acc, in[0]),
                                         acc);
        });
    rewriter.replaceOp(op, {sumExp, target});
    return success();
  }
};

/// mean over rows of log(sum_exp) - (target - max).
struct VocabLossLowering : OpConversionPattern<VocabLossOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(VocabLossOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    ArrayRef<int64_t> rows = shapeOf(adaptor.getMax()).getShape();
    AffineMap rowMap = identity(rows.size(), rewriter.getContext());
    Value total = buildTotalSum(
        rewriter, loc, rows,
        {adaptor.getMax(), adaptor.getSumExp(), adaptor.getTarget()},
        {rowMap, rowMap, rowMap},
        [](OpBuilder &b, Location l, ValueRange in) -> Value {
          return lossFromStatistics(b, l, in[0], in[1], in[2]);
        });
    int64_t count = shapeOf(adaptor.getMax()).getNumElements();
    rewriter.replaceOp(op, averaged(rewriter, loc, op.getType(), total, count));
    return success();
  }
};

/// (exp(logits - max) / sum_exp - onehot) * grad / rows.
struct VocabGradLowering : OpConversionPattern<VocabGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(VocabGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *context = rewriter.getContext();
    int64_t rank = op.getType().getRank(), axis = rank - 1;
    int64_t count = shapeOf(adaptor.getMax()).getNumElements();
    AffineMap full = identity(rank, context);
    AffineMap reduced = dropDimMap(rank, axis, context);
    AffineMap scalarMap = AffineMap::get(rank, 0, {}, context);
    Value result = buildElementwise(
        rewriter, loc, op.getType(),
        {adaptor.getLogits(), adaptor.getMax(), adaptor.getSumExp(),
         adaptor.getLabels(), adaptor.getIds(), adaptor.getGrad()},
        {full, reduced, reduced, reduced, classMap(rank, context), scalarMap},
        [&](OpBuilder &b, Location l, ValueRange in) -> Value {
          return softmaxMinusOnehot(b, l, in[0], in[1], in[2],
                                    isLabel(b, l, in[3], in[4]), in[5], count);
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

struct MseLowering : OpConversionPattern<MseOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MseOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    ArrayRef<int64_t> shape = shapeOf(adaptor.getPrediction()).getShape();
    AffineMap full = identity(shape.size(), rewriter.getContext());
    int64_t count = 1;
    for (int64_t d : shape)
      count *= d;
    Value total = buildTotalSum(
        rewriter, loc, shape, {adaptor.getPrediction(), adaptor.getTarget()},
        {full, full}, [](OpBuilder &b, Location l, ValueRange in) -> Value {
          Value d = arith::SubFOp::create(b, l, in[0], in[1]);
          return arith::MulFOp::create(b, l, d, d);
        });
    rewriter.replaceOp(op, averaged(rewriter, loc, op.getType(), total, count));
    return success();
  }
};
} // namespace

void mlir::loom::populateReductionsToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<SoftmaxLowering, NormLowering<LayerNormOp>,
               NormLowering<RmsNormOp>, ReduceLowering<SumOp>,
               ReduceLowering<MeanOp>, ReduceLowering<MaxOp>,
               CrossEntropyLowering, CrossEntropyGradLowering,
               VocabStatsLowering, VocabLossLowering, VocabGradLowering,
               MseLowering>(patterns.getContext());
}
