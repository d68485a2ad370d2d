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

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
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

/// A norm's statistics over the last axis of `x`, as f32 tensors without
/// that axis: the mean (`centered` only) and the second moment,
/// E[(x - mean)^2] for layernorm, E[x^2] for rmsnorm.
struct NormStatistics {
  Value mean, second;
};

static NormStatistics normStatistics(OpBuilder &b, Location loc, Value x, bool centered) {
  NormStatistics stats;
  SmallVector<Value> mean;
  if (centered) {
    stats.mean = rowMean(b, loc, x, {},
                         [](OpBuilder &, Location, ValueRange in) { return in[0]; });
    mean.push_back(stats.mean);
  }
  stats.second = rowMean(b, loc, x, mean, [](OpBuilder &nb, Location l, ValueRange in) -> Value {
    Value d = in.size() > 1 ? arith::SubFOp::create(nb, l, in[0], in[1]) : in[0];
    return arith::MulFOp::create(nb, l, d, d);
  });
  return stats;
}

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

    auto [mean, second] = normStatistics(rewriter, loc, x, centered);
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

/// What loom.norm_grad needs of each row, as f32 tensors over the rows:
/// the mean (layernorm only), rstd, and the sums of g and of g * x_hat
/// (g = dy * scale; the sum of g layernorm only).
struct NormRows {
  Value mean, rstd, sumG, sumGXHat;

  /// The values present, in order (a loop carries them).
  SmallVector<Value> present() const {
    SmallVector<Value> values;
    for (Value v : {mean, rstd, sumG, sumGXHat})
      if (v)
        values.push_back(v);
    return values;
  }
  /// The inverse of present(): `values` in order, of a layernorm's
  /// (`centered`, all four) or an rmsnorm's (rstd and sumGXHat).
  static NormRows of(ArrayRef<Value> values, bool centered) {
    return centered ? NormRows{values[0], values[1], values[2], values[3]}
                    : NormRows{Value(), values[0], Value(), values[1]};
  }
};

/// One element's values: dy, g = dy * scale, x_hat and its row's rstd.
struct NormElement {
  Value dy, g, xHat, rstd;
};

/// The operands a step of loom.norm_grad reads over [..., D] (x, dy, the
/// scale, the row's mean and rstd) with their maps, and the element's
/// values recomputed from them inside the step: no step reads a
/// full-size intermediate.
struct NormOperands {
  SmallVector<Value> values;
  SmallVector<AffineMap> maps;
  bool hasScale, hasMean;

  NormOperands(Value x, Value dy, Value scale, Value mean, Value rstd)
      : hasScale(scale), hasMean(mean) {
    MLIRContext *context = x.getContext();
    int64_t rank = shapeOf(x).getRank();
    AffineMap full = identity(rank, context);
    AffineMap row = dropDimMap(rank, rank - 1, context);
    values = {x, dy};
    maps = {full, full};
    if (scale) {
      values.push_back(scale);
      maps.push_back(AffineMap::get(rank, 0, getAffineDimExpr(rank - 1, context), context));
    }
    if (mean) {
      values.push_back(mean);
      maps.push_back(row);
    }
    values.push_back(rstd);
    maps.push_back(row);
  }

  NormElement element(OpBuilder &b, Location l, ValueRange in) const {
    unsigned i = 0;
    Value x = in[i++], dy = in[i++];
    Value g = hasScale ? arith::MulFOp::create(b, l, dy, in[i++]).getResult() : dy;
    if (hasMean)
      x = arith::SubFOp::create(b, l, x, in[i++]);
    Value rstd = in[i++];
    return {dy, g, arith::MulFOp::create(b, l, x, rstd), rstd};
  }

  /// The sum over the loops `reduced` of `term(element)`, as f32.
  Value sum(OpBuilder &b, Location loc, ArrayRef<bool> reduced,
            function_ref<Value(OpBuilder &, Location, const NormElement &)> term) const {
    return buildReduction(b, loc, shapeOf(values[0]).getShape(), reduced, values, maps, 0.0,
                          [&](OpBuilder &nb, Location l, Value acc, ValueRange in) -> Value {
                            return arith::AddFOp::create(nb, l, acc, term(nb, l, element(nb, l, in)));
                          });
  }
};

/// The loops of `x` ([..., D]) that reduce its last axis, or all but it.
static SmallVector<bool> normLoops(Value x, bool lastAxis) {
  SmallVector<bool> reduced(shapeOf(x).getRank(), !lastAxis);
  reduced.back() = lastAxis;
  return reduced;
}

/// The rows' statistics again (two row reductions of x), their rstd, and
/// their sums of g and g * x_hat.
static NormRows buildNormRows(OpBuilder &b, Location loc, Value x, Value dy, Value scale,
                              bool centered, double eps) {
  NormRows rows;
  auto [mean, second] = normStatistics(b, loc, x, centered);
  rows.mean = mean;
  rows.rstd = buildElementwise(
      b, loc, shapeOf(second), {second}, {identity(shapeOf(second).getRank(), b.getContext())},
      [=](OpBuilder &nb, Location l, ValueRange in) -> Value {
        return math::RsqrtOp::create(
            nb, l, arith::AddFOp::create(nb, l, in[0], f32Constant(nb, l, eps)));
      });
  NormOperands operands(x, dy, scale, rows.mean, rows.rstd);
  SmallVector<bool> lastAxis = normLoops(x, /*lastAxis=*/true);
  if (centered)
    rows.sumG = operands.sum(b, loc, lastAxis,
                             [](OpBuilder &, Location, const NormElement &e) { return e.g; });
  rows.sumGXHat = operands.sum(b, loc, lastAxis,
                               [](OpBuilder &nb, Location l, const NormElement &e) -> Value {
                                 return arith::MulFOp::create(nb, l, e.g, e.xHat);
                               });
  return rows;
}

/// The scale and bias gradients: sums over the rows of dy * x_hat and of
/// dy, where asked for (null otherwise).
static std::pair<Value, Value> buildNormColumns(OpBuilder &b, Location loc, Value x, Value dy,
                                                const NormRows &rows, bool wantScale,
                                                bool wantBias) {
  NormOperands operands(x, dy, Value(), rows.mean, rows.rstd);
  SmallVector<bool> overRows = normLoops(x, /*lastAxis=*/false);
  Value scale, bias;
  if (wantScale)
    scale = operands.sum(b, loc, overRows, [](OpBuilder &nb, Location l, const NormElement &e) -> Value {
      return arith::MulFOp::create(nb, l, e.dy, e.xHat);
    });
  if (wantBias)
    bias = operands.sum(b, loc, overRows,
                        [](OpBuilder &, Location, const NormElement &e) { return e.dy; });
  return {scale, bias};
}

/// dx = rstd * (g - sumG / D - x_hat * sumGXHat / D), of `type`.
static Value buildNormInputGrad(OpBuilder &b, Location loc, Value x, Value dy, Value scale,
                                const NormRows &rows, RankedTensorType type) {
  NormOperands operands(x, dy, scale, rows.mean, rows.rstd);
  size_t count = operands.values.size();
  AffineMap row = dropDimMap(type.getRank(), type.getRank() - 1, b.getContext());
  SmallVector<Value> inputs(operands.values);
  SmallVector<AffineMap> maps(operands.maps);
  for (Value sum : {rows.sumG, rows.sumGXHat})
    if (sum) {
      inputs.push_back(sum);
      maps.push_back(row);
    }
  bool centered = (bool)rows.sumG;
  int64_t features = type.getShape().back();
  return buildElementwise(
      b, loc, type, inputs, maps, [=](OpBuilder &nb, Location l, ValueRange in) -> Value {
        NormElement e = operands.element(nb, l, in.take_front(count));
        Value d = f32Constant(nb, l, features);
        Value centeredG = e.g;
        unsigned i = count;
        if (centered)
          centeredG = arith::SubFOp::create(nb, l, e.g, arith::DivFOp::create(nb, l, in[i++], d));
        Value projection =
            arith::MulFOp::create(nb, l, e.xHat, arith::DivFOp::create(nb, l, in[i++], d));
        return arith::MulFOp::create(nb, l, e.rstd,
                                     arith::SubFOp::create(nb, l, centeredG, projection));
      });
}

/// loom.norm_grad as steps that each read x and dy and the rows' values,
/// never a full-size intermediate (its formula as separate loom ops had
/// made six [..., D] tensors). With `rowBlockBytes`, the rows' values and
/// the parameters' gradients come from an scf.for over blocks of rows
/// whose x and dy take about that many bytes, so that the steps over a
/// block read it from the cache: unblocked, each of those six passes went
/// to memory (9 ms for a 4096 x 1024 f32 norm on one core, torch 3.5 ms).
/// dx follows in one pass over all rows, straight into its destination.
struct NormGradLowering : OpConversionPattern<NormGradOp> {
  NormGradLowering(MLIRContext *context, int64_t rowBlockBytes)
      : OpConversionPattern(context), rowBlockBytes(rowBlockBytes) {}

  LogicalResult
  matchAndRewrite(NormGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType type = op.getInputGrad().getType();
    ArrayRef<int64_t> shape = type.getShape();
    int64_t features = shape.back(), rank = shape.size();
    int64_t rows = ShapedType::getNumElements(shape.drop_back());
    bool wantScale = !op.getScaleGrad().use_empty(), wantBias = !op.getBiasGrad().use_empty();
    Value x = adaptor.getInput(), dy = adaptor.getGrad(), scale = adaptor.getScale();
    bool centered = op.getCentered();
    double eps = op.getEpsilon().convertToDouble();

    auto bytesOf = [](Value v) { return shapeOf(v).getElementTypeBitWidth() / 8; };
    int64_t rowBytes = features * (bytesOf(x) + bytesOf(dy));
    int64_t block = rowBlockBytes > 0 ? std::max<int64_t>(1, rowBlockBytes / rowBytes) : rows;
    NormRows rowValues;
    Value scaleGrad, biasGrad, dx;
    if (block >= rows) {
      rowValues = buildNormRows(rewriter, loc, x, dy, scale, centered, eps);
      std::tie(scaleGrad, biasGrad) =
          buildNormColumns(rewriter, loc, x, dy, rowValues, wantScale, wantBias);
      dx = buildNormInputGrad(rewriter, loc, x, dy, scale, rowValues, type);
    } else {
      // Over [rows, D] views.
      SmallVector<ReassociationIndices> toRows{
          llvm::to_vector(llvm::seq<int64_t>(0, rank - 1)), {rank - 1}};
      auto flat = [&](Value v) -> Value {
        return rank == 2 ? v : tensor::CollapseShapeOp::create(rewriter, loc, v, toRows).getResult();
      };
      Value xRows = flat(x), dyRows = flat(dy);
      std::tie(rowValues, scaleGrad, biasGrad) = buildBlocked(
          rewriter, loc, xRows, dyRows, scale, centered, eps, block, wantScale, wantBias);
      dx = buildNormInputGrad(rewriter, loc, xRows, dyRows, scale, rowValues,
                              RankedTensorType::get({rows, features}, type.getElementType()));
      if (rank != 2)
        dx = tensor::ExpandShapeOp::create(rewriter, loc, type, dx, toRows);
    }
    auto orEmpty = [&](Value grad) -> Value {
      return grad ? grad
                  : tensor::EmptyOp::create(rewriter, loc, ArrayRef<int64_t>{features},
                                            rewriter.getF32Type())
                        .getResult();
    };
    rewriter.replaceOp(op, {dx, orEmpty(scaleGrad), orEmpty(biasGrad)});
    return success();
  }

  /// The rows' values of [rows, D] `x` and `dy`, and the parameters'
  /// gradients where asked for, from an scf.for over whole blocks of
  /// `block` rows (the rows' values inserted block by block, the gradients
  /// summed across blocks) and then the remaining rows.
  static std::tuple<NormRows, Value, Value>
  buildBlocked(OpBuilder &b, Location loc, Value x, Value dy, Value scale, bool centered,
               double eps, int64_t block, bool wantScale, bool wantBias) {
    int64_t rows = shapeOf(x).getDimSize(0), features = shapeOf(x).getDimSize(1);
    // The carried tensors are allocations of their own: one-shot
    // bufferization rejects a loop whose init is also a destination
    // (AttentionToLinalg.cpp's carriedTensor), and tensor.empty ops CSE.
    auto carried = [&](int64_t size, bool zero) -> Value {
      Value t = bufferization::AllocTensorOp::create(
          b, loc, RankedTensorType::get({size}, b.getF32Type()), ValueRange{});
      return zero ? filledTensor(b, loc, t, b.getF32FloatAttr(0.0)) : t;
    };
    // Carried: the rows' values (NormRows::present), then the scale and
    // bias gradients where asked for.
    size_t rowValueCount = centered ? 4 : 2;
    SmallVector<Value> init;
    for (size_t i = 0; i < rowValueCount; ++i)
      init.push_back(carried(rows, /*zero=*/false));
    for (bool want : {wantScale, wantBias})
      if (want)
        init.push_back(carried(features, /*zero=*/true));

    // The rows [start, start + count) into the carried values.
    auto step = [&](OpBuilder &nb, Value start, int64_t count, ValueRange carry) {
      auto slice2d = [&](Value v) {
        return tensor::ExtractSliceOp::create(
                   nb, loc, v, ArrayRef<OpFoldResult>{start, nb.getIndexAttr(0)},
                   ArrayRef<OpFoldResult>{nb.getIndexAttr(count), nb.getIndexAttr(features)},
                   ArrayRef<OpFoldResult>{nb.getIndexAttr(1), nb.getIndexAttr(1)})
            .getResult();
      };
      Value xs = slice2d(x), dys = slice2d(dy);
      NormRows part = buildNormRows(nb, loc, xs, dys, scale, centered, eps);
      auto [scalePart, biasPart] = buildNormColumns(nb, loc, xs, dys, part, wantScale, wantBias);
      SmallVector<Value> next;
      unsigned i = 0;
      for (Value rowValue : part.present())
        next.push_back(tensor::InsertSliceOp::create(
            nb, loc, rowValue, carry[i++], ArrayRef<OpFoldResult>{start},
            ArrayRef<OpFoldResult>{nb.getIndexAttr(count)},
            ArrayRef<OpFoldResult>{nb.getIndexAttr(1)}));
      for (Value sum : {scalePart, biasPart})
        if (sum) {
          // Added into the carried total in place (a loop's carried tensors
          // stay in their buffers only so).
          AffineMap same = identity(1, nb.getContext());
          auto add = linalg::GenericOp::create(
              nb, loc, carry[i].getType(), ValueRange{sum}, ValueRange{carry[i]},
              ArrayRef<AffineMap>{same, same}, ArrayRef{utils::IteratorType::parallel},
              [](OpBuilder &eb, Location l, ValueRange args) {
                linalg::YieldOp::create(eb, l,
                                        ValueRange{arith::AddFOp::create(eb, l, args[1], args[0])});
              });
          ++i;
          next.push_back(add.getResult(0));
        }
      return next;
    };
    int64_t whole = rows / block * block;
    auto loop = scf::ForOp::create(
        b, loc, arith::ConstantIndexOp::create(b, loc, 0),
        arith::ConstantIndexOp::create(b, loc, whole),
        arith::ConstantIndexOp::create(b, loc, block), init,
        [&](OpBuilder &nb, Location l, Value start, ValueRange carry) {
          scf::YieldOp::create(nb, l, step(nb, start, block, carry));
        });
    SmallVector<Value> results(loop.getResults());
    if (whole < rows)
      results = step(b, arith::ConstantIndexOp::create(b, loc, whole), rows - whole, results);

    NormRows rowValues = NormRows::of(ArrayRef(results).take_front(rowValueCount), centered);
    size_t i = rowValueCount;
    Value scaleGrad = wantScale ? results[i++] : Value();
    Value biasGrad = wantBias ? results[i++] : Value();
    return {rowValues, scaleGrad, biasGrad};
  }

  int64_t rowBlockBytes;
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

void mlir::loom::populateReductionsToLinalgPatterns(RewritePatternSet &patterns,
                                                    int64_t normRowBlockBytes) {
  patterns.add<NormGradLowering>(patterns.getContext(), normRowBlockBytes);
  patterns.add<SoftmaxLowering, NormLowering<LayerNormOp>,
               NormLowering<RmsNormOp>, ReduceLowering<SumOp>,
               ReduceLowering<MeanOp>, ReduceLowering<MaxOp>,
               CrossEntropyLowering, CrossEntropyGradLowering,
               VocabStatsLowering, VocabLossLowering, VocabGradLowering,
               MseLowering>(patterns.getContext());
}
