//===- AttentionToLinalg.cpp - loom.attention in blocks of queries and keys ===//
//
// Per block of queries, two passes over the blocks of keys, each computing
// that block's scores again: the first finds each row's maximum and sum of
// exponentials (online, rescaling the sum when the maximum grows), the
// second forms the probabilities, rounded as the softmax rounds them, and
// accumulates `@ value`. The scores live one [batch, block, block] tile at
// a time, so attention needs memory linear in the sequence instead of
// quadratic; a causal row's key blocks stop at its diagonal block. Two
// passes instead of FlashAttention's one keep the op's rounding points:
// a 16-bit probability is rounded after its division by the row's full sum.
//
//===----------------------------------------------------------------------===//

#include "Conversion/LoomToLinalg/LinalgBuilders.h"
#include "Conversion/LoomToLinalg/LoomToLinalg.h"
#include "Loom/IR/LoomOps.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/DialectConversion.h"

#include <limits>
#include <numeric>

using namespace mlir;
using namespace mlir::loom;

/// Queries and keys per block: the largest divisor of both sequence lengths
/// up to 64 (a 64 x 64 f32 score tile per batch entry stays in L2).
static int64_t attentionBlock(int64_t queries, int64_t keys) {
  int64_t common = std::gcd(queries, keys);
  for (int64_t block = std::min<int64_t>(common, 64); block > 1; --block)
    if (common % block == 0)
      return block;
  return 1;
}

namespace {
/// Builds the loops of one attention op on [batch, sequence, features]
/// tensors (the op's batch dims collapsed into one).
struct AttentionBuilder {
  OpBuilder &b;
  Location loc;
  Type element, accumulate;
  int64_t batch, block, features;
  Value query, key, value;
  Value scale; // f32 scalar, or null
  bool causal;

  Type f32() const { return b.getF32Type(); }
  MLIRContext *context() const { return b.getContext(); }

  AffineMap map(unsigned dims, ArrayRef<unsigned> results) const {
    SmallVector<AffineExpr> exprs;
    for (unsigned d : results)
      exprs.push_back(getAffineDimExpr(d, context()));
    return AffineMap::get(dims, 0, exprs, context());
  }

  Value filled(ArrayRef<int64_t> shape, Type type, double v) const {
    return filledTensor(b, loc, RankedTensorType::get(shape, type),
                        b.getFloatAttr(type, v));
  }

  /// Rows [start, start + block) of `source` ([batch, sequence, n]).
  Value rows(Value source, Value start) const {
    int64_t n = cast<RankedTensorType>(source.getType()).getShape().back();
    SmallVector<OpFoldResult> offsets{b.getIndexAttr(0), start, b.getIndexAttr(0)};
    SmallVector<OpFoldResult> sizes{b.getIndexAttr(batch), b.getIndexAttr(block),
                                    b.getIndexAttr(n)};
    SmallVector<OpFoldResult> strides(3, b.getIndexAttr(1));
    return tensor::ExtractSliceOp::create(b, loc, source, offsets, sizes, strides);
  }

  /// `lhs[n, i, d] * rhs[...]` summed over d into `acc` (accumulation
  /// type), with the maps of the three operands over (n, i, j, d).
  Value contract(Value lhs, Value rhs, Value acc, ArrayRef<AffineMap> maps) const {
    SmallVector<utils::IteratorType> iterators(3, utils::IteratorType::parallel);
    iterators.push_back(utils::IteratorType::reduction);
    Type type = accumulate;
    auto generic = linalg::GenericOp::create(
        b, loc, acc.getType(), ValueRange{lhs, rhs}, acc, maps, iterators,
        [&](OpBuilder &nb, Location l, ValueRange args) {
          auto contractFlag = arith::FastMathFlags::contract;
          Value x = convertScalar(nb, l, args[0], type);
          Value y = convertScalar(nb, l, args[1], type);
          Value sum = arith::AddFOp::create(
              nb, l, args[2], arith::MulFOp::create(nb, l, x, y, contractFlag),
              contractFlag);
          linalg::YieldOp::create(nb, l, sum);
        });
    return generic.getResult(0);
  }

  /// The scores of queries [qStart, +block) against keys [kStart, +block)
  /// as the unfused ops leave them: q @ k^T rounded to the operand type,
  /// times the scale rounded again, -inf above the diagonal; held in f32.
  Value scores(Value queries, Value qStart, Value kStart) const {
    Value keys = rows(key, kStart);
    Value product = contract(
        queries, keys, filled({batch, block, block}, accumulate, 0.0),
        {map(4, {0, 1, 3}), map(4, {0, 2, 3}), map(4, {0, 1, 2})});
    auto type = RankedTensorType::get({batch, block, block}, f32());
    Type operand = element;
    Value factor = scale;
    bool mask = causal;
    auto rounded = [operand](OpBuilder &nb, Location l, Value x) {
      return convertScalar(nb, l, convertScalar(nb, l, x, operand), nb.getF32Type());
    };
    return buildElementwise(
        b, loc, type, {product}, {map(3, {0, 1, 2})},
        [&](OpBuilder &nb, Location l, ValueRange in) -> Value {
          Value x = rounded(nb, l, in[0]);
          if (factor)
            x = rounded(nb, l, arith::MulFOp::create(nb, l, x, factor));
          if (!mask)
            return x;
          Value i = arith::AddIOp::create(nb, l, qStart, linalg::IndexOp::create(nb, l, 1));
          Value j = arith::AddIOp::create(nb, l, kStart, linalg::IndexOp::create(nb, l, 2));
          Value above = arith::CmpIOp::create(nb, l, arith::CmpIPredicate::sgt, j, i);
          Value minusInf = f32Constant(nb, l, -std::numeric_limits<double>::infinity());
          return arith::SelectOp::create(nb, l, above, minusInf, x);
        });
  }

  /// Reduces the key axis of `s` [batch, block, block] into `init`
  /// [batch, block]: `acc = combine(acc, s, stats...)`, stats read per row.
  Value rowReduce(Value s, ValueRange stats, Value init,
                  function_ref<Value(OpBuilder &, Location, Value, ValueRange)> combine) const {
    SmallVector<Value> inputs{s};
    inputs.append(stats.begin(), stats.end());
    SmallVector<AffineMap> maps{map(3, {0, 1, 2})};
    for (size_t i = 0; i < stats.size(); ++i)
      maps.push_back(map(3, {0, 1}));
    maps.push_back(map(3, {0, 1}));
    SmallVector<utils::IteratorType> iterators{utils::IteratorType::parallel,
                                               utils::IteratorType::parallel,
                                               utils::IteratorType::reduction};
    auto generic = linalg::GenericOp::create(
        b, loc, init.getType(), inputs, init, maps, iterators,
        [&](OpBuilder &nb, Location l, ValueRange args) {
          linalg::YieldOp::create(nb, l, combine(nb, l, args.back(), args.drop_back()));
        });
    return generic.getResult(0);
  }

  /// `target[n, i] = update(target[n, i], inputs[n, i]...)` in place, on
  /// [batch, block] f32 tensors.
  Value updateRows(Value target, ValueRange inputs,
                   function_ref<Value(OpBuilder &, Location, Value, ValueRange)> update) const {
    SmallVector<AffineMap> maps(inputs.size() + 1, map(2, {0, 1}));
    SmallVector<utils::IteratorType> iterators(2, utils::IteratorType::parallel);
    auto generic = linalg::GenericOp::create(
        b, loc, target.getType(), inputs, target, maps, iterators,
        [&](OpBuilder &nb, Location l, ValueRange args) {
          linalg::YieldOp::create(nb, l, update(nb, l, args.back(), args.drop_back()));
        });
    return generic.getResult(0);
  }

  /// The keys a block of queries starting at `qStart` reads: all of them,
  /// or (causal) up to the end of its diagonal block.
  Value keyEnd(Value qStart, int64_t keys) const {
    Value all = arith::ConstantIndexOp::create(b, loc, keys);
    if (!causal)
      return all;
    Value diagonalEnd = arith::AddIOp::create(
        b, loc, qStart, arith::ConstantIndexOp::create(b, loc, block));
    return arith::MinSIOp::create(b, loc, diagonalEnd, all);
  }

  /// The output rows [qStart, +block), [batch, block, value features].
  Value outputBlock(Value qStart, int64_t keys, int64_t valueFeatures) {
    Value queries = rows(query, qStart);
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    Value step = arith::ConstantIndexOp::create(b, loc, block);
    Value end = keyEnd(qStart, keys);

    // Pass 1: each row's maximum and sum of exp(score - maximum).
    Value max0 = filled({batch, block}, f32(), -std::numeric_limits<double>::infinity());
    Value sum0 = filled({batch, block}, f32(), 0.0);
    auto statistics = scf::ForOp::create(
        b, loc, zero, end, step, ValueRange{max0, sum0},
        [&](OpBuilder &nb, Location l, Value kStart, ValueRange carried) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
          Value s = scores(queries, qStart, kStart);
          Value blockMax = rowReduce(
              s, {}, filled({batch, block}, f32(), -std::numeric_limits<double>::infinity()),
              [](OpBuilder &rb, Location rl, Value acc, ValueRange in) -> Value {
                return arith::MaxNumFOp::create(rb, rl, acc, in[0]);
              });
          // Updated in place (the loop's tensors stay one buffer each): the
          // sum so far rescaled to the new maximum, the maximum, then this
          // block's exponentials added.
          Value sum = updateRows(carried[1], {carried[0], blockMax},
                                 [](OpBuilder &rb, Location rl, Value sum, ValueRange in) -> Value {
                                   Value max = arith::MaxNumFOp::create(rb, rl, in[0], in[1]);
                                   Value shift = math::ExpOp::create(
                                       rb, rl, arith::SubFOp::create(rb, rl, in[0], max));
                                   return arith::MulFOp::create(rb, rl, sum, shift);
                                 });
          Value max = updateRows(carried[0], {blockMax},
                                 [](OpBuilder &rb, Location rl, Value max, ValueRange in) -> Value {
                                   return arith::MaxNumFOp::create(rb, rl, max, in[0]);
                                 });
          sum = rowReduce(s, {max}, sum,
                          [](OpBuilder &rb, Location rl, Value acc, ValueRange in) -> Value {
                            Value e = math::ExpOp::create(
                                rb, rl, arith::SubFOp::create(rb, rl, in[0], in[1]));
                            return arith::AddFOp::create(rb, rl, acc, e);
                          });
          scf::YieldOp::create(b, l, ValueRange{max, sum});
        });
    Value max = statistics.getResult(0), sum = statistics.getResult(1);

    // Pass 2: the probabilities, rounded as the softmax's output is, times
    // the values, accumulated over the key blocks.
    Value acc0 = filled({batch, block, valueFeatures}, accumulate, 0.0);
    auto weighted = scf::ForOp::create(
        b, loc, zero, end, step, ValueRange{acc0},
        [&](OpBuilder &nb, Location l, Value kStart, ValueRange carried) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
          Value s = scores(queries, qStart, kStart);
          Value p = buildElementwise(
              b, l, RankedTensorType::get({batch, block, block}, element),
              {s, max, sum}, {map(3, {0, 1, 2}), map(3, {0, 1}), map(3, {0, 1})},
              [](OpBuilder &rb, Location rl, ValueRange in) -> Value {
                Value e = math::ExpOp::create(rb, rl, arith::SubFOp::create(rb, rl, in[0], in[1]));
                return arith::DivFOp::create(rb, rl, e, in[2]);
              });
          Value values = rows(value, kStart);
          Value acc = contract(p, values, carried[0],
                               {map(4, {0, 1, 3}), map(4, {0, 3, 2}), map(4, {0, 1, 2})});
          scf::YieldOp::create(b, l, acc);
        });
    Value acc = weighted.getResult(0);
    if (accumulate == element)
      return acc;
    return buildElementwise(b, loc, RankedTensorType::get({batch, block, valueFeatures}, element),
                            {acc}, {map(3, {0, 1, 2})},
                            [](OpBuilder &, Location, ValueRange in) { return in[0]; });
  }
};

/// The reassociation folding a tensor's `batchDims` leading dims into one
/// (none: a unit dim is added in front, see `toBatched`).
static SmallVector<ReassociationIndices> batchReassociation(int64_t batchDims) {
  if (batchDims == 0)
    return {{0, 1}, {2}};
  ReassociationIndices leading;
  for (int64_t d = 0; d < batchDims; ++d)
    leading.push_back(d);
  return {leading, {batchDims}, {batchDims + 1}};
}

/// `x` [b..., s, f] as [prod(b...), s, f].
static Value toBatched(OpBuilder &b, Location loc, Value x, int64_t batchDims) {
  auto type = cast<RankedTensorType>(x.getType());
  ArrayRef<int64_t> shape = type.getShape();
  if (batchDims == 1)
    return x;
  if (batchDims == 0)
    return tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get({1, shape[0], shape[1]}, type.getElementType()),
        x, batchReassociation(0));
  return tensor::CollapseShapeOp::create(b, loc, x, batchReassociation(batchDims));
}

/// The inverse of toBatched, to `type`.
static Value fromBatched(OpBuilder &b, Location loc, Value x, RankedTensorType type) {
  int64_t batchDims = type.getRank() - 2;
  if (batchDims == 1)
    return x;
  if (batchDims == 0)
    return tensor::CollapseShapeOp::create(b, loc, type, x, batchReassociation(0));
  return tensor::ExpandShapeOp::create(b, loc, type, x, batchReassociation(batchDims));
}

struct AttentionLowering : OpConversionPattern<AttentionOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(AttentionOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType resultType = op.getType();
    ArrayRef<int64_t> q = op.getQuery().getType().getShape();
    ArrayRef<int64_t> k = op.getKey().getType().getShape();
    int64_t batchDims = resultType.getRank() - 2;
    int64_t batch = 1;
    for (int64_t size : q.take_front(batchDims))
      batch *= size;
    int64_t queries = q[batchDims], keys = k[batchDims];
    int64_t valueFeatures = resultType.getShape().back();
    Value scale;
    if (adaptor.getScale())
      scale = widen(rewriter, loc, tensor::ExtractOp::create(rewriter, loc, adaptor.getScale(),
                                                             ValueRange{}));
    AttentionBuilder builder{rewriter,
                             loc,
                             resultType.getElementType(),
                             op.getAccumulate(),
                             batch,
                             attentionBlock(queries, keys),
                             q.back(),
                             toBatched(rewriter, loc, adaptor.getQuery(), batchDims),
                             toBatched(rewriter, loc, adaptor.getKey(), batchDims),
                             toBatched(rewriter, loc, adaptor.getValue(), batchDims),
                             scale,
                             op.getCausal()};
    Value init = tensor::EmptyOp::create(
        rewriter, loc, ArrayRef<int64_t>{batch, queries, valueFeatures},
        resultType.getElementType());
    auto loop = scf::ForOp::create(
        rewriter, loc, arith::ConstantIndexOp::create(rewriter, loc, 0),
        arith::ConstantIndexOp::create(rewriter, loc, queries),
        arith::ConstantIndexOp::create(rewriter, loc, builder.block), ValueRange{init},
        [&](OpBuilder &nb, Location l, Value qStart, ValueRange carried) {
          OpBuilder::InsertionGuard guard(rewriter);
          rewriter.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
          Value out = builder.outputBlock(qStart, keys, valueFeatures);
          SmallVector<OpFoldResult> offsets{rewriter.getIndexAttr(0), qStart,
                                            rewriter.getIndexAttr(0)};
          SmallVector<OpFoldResult> sizes{rewriter.getIndexAttr(batch),
                                          rewriter.getIndexAttr(builder.block),
                                          rewriter.getIndexAttr(valueFeatures)};
          SmallVector<OpFoldResult> strides(3, rewriter.getIndexAttr(1));
          Value updated = tensor::InsertSliceOp::create(rewriter, l, out, carried[0],
                                                        offsets, sizes, strides);
          scf::YieldOp::create(rewriter, l, updated);
        });
    rewriter.replaceOp(op, fromBatched(rewriter, loc, loop.getResult(0), resultType));
    return success();
  }
};
} // namespace

void mlir::loom::populateAttentionToLinalgPatterns(RewritePatternSet &patterns) {
  patterns.add<AttentionLowering>(patterns.getContext());
}
