//===- AttentionToLinalg.cpp - loom.attention in blocks of queries and keys ===//
//
// A chunk of heads at a time (the batch dims folded into one; as many as
// keep a score tile within 16 KiB), and per block of queries two passes
// over the blocks of keys, each computing that block's scores again: the
// first finds each row's maximum and sum of exponentials (online, rescaling
// the sum when the maximum grows), the second forms the probabilities,
// rounded as the softmax rounds them, and accumulates `@ value`. The scores
// live one [chunk, block, block] tile at a time, so attention needs memory
// linear in the sequence instead of
// quadratic; a causal row's key blocks stop at its diagonal block. Two
// passes instead of FlashAttention's one keep the op's rounding points:
// a 16-bit probability is rounded after its division by the row's full sum.
// The backward (loom.attention_grad) runs the same way, in one pass per
// block of queries (FlashAttention-2's): the probabilities from the
// forward's rows' log-sum-exp (loom.attention's `lse`), the softmax
// gradient's row sums from its result.
//
//===----------------------------------------------------------------------===//

#include "Conversion/LoomToLinalg/LinalgBuilders.h"
#include "Conversion/LoomToLinalg/LoomToLinalg.h"
#include "Loom/IR/LoomOps.h"

#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/DialectConversion.h"

#include <algorithm>
#include <limits>

using namespace mlir;
using namespace mlir::loom;

/// The slice of a [batch, sequence(, f)] tensor of `shape` from (batchStart,
/// rowStart(, 0)): offsets, sizes and strides.
struct SliceFrom {
  SliceFrom(OpBuilder &b, ArrayRef<int64_t> shape, OpFoldResult batchStart,
            OpFoldResult rowStart)
      : offsets{batchStart, rowStart}, strides(shape.size(), b.getIndexAttr(1)) {
    offsets.resize(shape.size(), b.getIndexAttr(0));
    for (int64_t size : shape)
      sizes.push_back(b.getIndexAttr(size));
  }
  SmallVector<OpFoldResult> offsets, sizes, strides;
};

/// `part` [n, rows(, f)] into `target` [batch, sequence(, f)] at
/// (batchStart, rowStart(, 0)): blocks of the results, and of the rows'
/// log-sum-exp.
static Value insertPart(OpBuilder &b, Location loc, Value part, Value target,
                        OpFoldResult batchStart, OpFoldResult rowStart) {
  SliceFrom slice(b, cast<RankedTensorType>(part.getType()).getShape(), batchStart, rowStart);
  return tensor::InsertSliceOp::create(b, loc, part, target, slice.offsets, slice.sizes,
                                       slice.strides);
}

/// `count` rows from `rowStart` of the `batch` entries from `batchStart`
/// of `source` [batch, sequence(, f)].
static Value slicePart(OpBuilder &b, Location loc, Value source, OpFoldResult batchStart,
                       int64_t batch, OpFoldResult rowStart, int64_t count) {
  SmallVector<int64_t> shape(cast<RankedTensorType>(source.getType()).getShape());
  shape[0] = batch;
  shape[1] = count;
  SliceFrom slice(b, shape, batchStart, rowStart);
  return tensor::ExtractSliceOp::create(b, loc, source, slice.offsets, slice.sizes,
                                        slice.strides);
}

/// `rows` [batch, block, n] into `target` [batch, sequence, n] at `start`.
static Value insertRows(OpBuilder &b, Location loc, Value rows, Value target,
                        Value start) {
  return insertPart(b, loc, rows, target, b.getIndexAttr(0), start);
}

/// Entries [start, start + count) of the leading dim of `source`
/// [batch, sequence(, f)].
static Value batchSlice(OpBuilder &b, Location loc, Value source, Value start,
                        int64_t count) {
  return slicePart(b, loc, source, start, count, b.getIndexAttr(0),
                   cast<RankedTensorType>(source.getType()).getShape()[1]);
}

/// A tensor of `shape` in a buffer of its own (`bufferization.alloc_tensor`),
/// filled with `fill` if given. Two kinds of tensors need one. Those the
/// loops carry (the output, the gradients, their accumulators): as a
/// tensor.empty, where nothing reshapes the loop's result on its way out (a
/// batch of one dim), eliminate-empty-tensors would make the kernel's
/// destination the loop's init, which one-shot bufferization then rejects
/// (`'scf.for' op not bufferizable under the given constraints: cannot
/// avoid RaW conflict`, upstream's analysis of `materialize_in_destination
/// %loop in %dest` with %dest the loop's init); its own buffer costs one
/// copy of the result into the destination, as a reshaped result already
/// did. And a block's accumulator written into the result: in the
/// output's buffer the register tiles could not keep it in registers
/// through their k loop (they stored it every k step: a kernel argument
/// may alias the operands they read).
static Value carriedTensor(OpBuilder &b, Location loc, ArrayRef<int64_t> shape,
                           Type element, std::optional<double> fill = {}) {
  Value tensor = bufferization::AllocTensorOp::create(
      b, loc, RankedTensorType::get(shape, element), ValueRange{});
  return fill ? filledTensor(b, loc, tensor, b.getFloatAttr(element, *fill)) : tensor;
}

/// Whether entry (i, j) of the score block of queries from `qStart` and
/// keys from `kStart` lies above the diagonal (inside a linalg.generic
/// over [batch, block, block]).
static Value aboveDiagonal(OpBuilder &b, Location loc, Value qStart, Value kStart) {
  Value i = arith::AddIOp::create(b, loc, qStart, linalg::IndexOp::create(b, loc, 1));
  Value j = arith::AddIOp::create(b, loc, kStart, linalg::IndexOp::create(b, loc, 2));
  return arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sgt, j, i);
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
  /// Whether the contractions take bf16 operands (query, key, value and
  /// the result gradient as given, the rounded probabilities and score
  /// gradients narrowed back, exactly): on a CPU with bf16 dots, which
  /// multiply them twice as fast as f32 FMAs do f32 copies, or AMX tiles
  /// (T = 2048, head dim 64: 87.6 -> 50.9 ms). Otherwise the
  /// operands are widened once and the blocks stay f32 (no contraction
  /// makes widening copies).
  bool narrowOperands = false;

  Type f32() const { return b.getF32Type(); }

  /// This builder on the batch entries [start, start + count).
  AttentionBuilder part(Value start, int64_t count) const {
    AttentionBuilder part = *this;
    part.batch = count;
    part.query = batchSlice(b, loc, query, start, count);
    part.key = batchSlice(b, loc, key, start, count);
    part.value = batchSlice(b, loc, value, start, count);
    return part;
  }

  /// `x` (f32) rounded to the operand type and held in f32 again: the
  /// blocks' tensors are f32 whatever the operand type, so that their
  /// contractions need no widening copies (exact: a 16-bit value is an
  /// f32 one).
  Value roundTrip(OpBuilder &nb, Location l, Value x) const {
    return convertScalar(nb, l, convertScalar(nb, l, x, element), nb.getF32Type());
  }
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

  /// Rows [start, start + block) of `source` ([batch, sequence(, n)]).
  Value rows(Value source, Value start) const {
    return slicePart(b, loc, source, b.getIndexAttr(0), batch, start, block);
  }

  /// `lhs[n, i, d] * rhs[...]` summed over d into `acc` (accumulation
  /// type), with the maps of the three operands over (n, i, j, d).
  Value contract(Value lhs, Value rhs, Value acc, ArrayRef<AffineMap> maps) const {
    SmallVector<utils::IteratorType> iterators(3, utils::IteratorType::parallel);
    iterators.push_back(utils::IteratorType::reduction);
    auto generic = linalg::GenericOp::create(
        b, loc, acc.getType(), ValueRange{lhs, rhs}, acc, maps, iterators,
        [&](OpBuilder &nb, Location l, ValueRange args) {
          linalg::YieldOp::create(nb, l, multiplyAccumulate(nb, l, args[2], args[0], args[1]));
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
    return buildElementwise(
        b, loc, type, {product}, {map(3, {0, 1, 2})},
        [&](OpBuilder &nb, Location l, ValueRange in) -> Value {
          Value x = roundTrip(nb, l, in[0]);
          if (scale)
            x = roundTrip(nb, l, arith::MulFOp::create(nb, l, x, scale));
          if (!causal)
            return x;
          Value minusInf = f32Constant(nb, l, -std::numeric_limits<double>::infinity());
          return arith::SelectOp::create(nb, l, aboveDiagonal(nb, l, qStart, kStart),
                                         minusInf, x);
        });
  }

  /// A row's running maximum as the online softmax subtracts it: 0 while
  /// it is -inf (exp(-inf - 0) = 0 then, where -inf - -inf is NaN).
  static Value finiteMax(OpBuilder &rb, Location rl, Value max) {
    Value minusInf = f32Constant(rb, rl, -std::numeric_limits<double>::infinity());
    Value none = arith::CmpFOp::create(rb, rl, arith::CmpFPredicate::OEQ, max, minusInf);
    return arith::SelectOp::create(rb, rl, none, f32Constant(rb, rl, 0.0), max);
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

  /// Each row's maximum and sum of exp(score - maximum) over the keys
  /// [0, end) of the queries [qStart, +block): one pass over the key
  /// blocks, the sum rescaled when the maximum grows. While a row's
  /// maximum is -inf (its scores so far all -inf: masked, or past a 16-bit
  /// type's range) the exponentials are taken from 0 instead, as
  /// FlashAttention's do: exp(-inf - -inf) had made the row NaN where the
  /// five ops give its later keys' softmax.
  std::pair<Value, Value> rowStatistics(Value queries, Value qStart, Value end) {
    Value max0 = filled({batch, block}, f32(), -std::numeric_limits<double>::infinity());
    Value sum0 = filled({batch, block}, f32(), 0.0);
    auto statistics = overKeyBlocks(end, {max0, sum0}, [&](Value kStart, ValueRange carried) {
      Value s = scores(queries, qStart, kStart);
      Value blockMax = rowReduce(
          s, {}, filled({batch, block}, f32(), -std::numeric_limits<double>::infinity()),
          [](OpBuilder &rb, Location rl, Value acc, ValueRange in) -> Value {
            return arith::MaxNumFOp::create(rb, rl, acc, in[0]);
          });
      // Updated in place (the loop's tensors stay one buffer each): the sum
      // so far rescaled to the new maximum, the maximum, then this block's
      // exponentials added.
      Value sum = updateRows(carried[1], {carried[0], blockMax},
                             [](OpBuilder &rb, Location rl, Value sum, ValueRange in) -> Value {
                               Value max = arith::MaxNumFOp::create(rb, rl, in[0], in[1]);
                               Value shift = math::ExpOp::create(
                                   rb, rl, arith::SubFOp::create(rb, rl, in[0], finiteMax(rb, rl, max)));
                               return arith::MulFOp::create(rb, rl, sum, shift);
                             });
      Value max = updateRows(carried[0], {blockMax},
                             [](OpBuilder &rb, Location rl, Value max, ValueRange in) -> Value {
                               return arith::MaxNumFOp::create(rb, rl, max, in[0]);
                             });
      sum = rowReduce(s, {max}, sum,
                      [](OpBuilder &rb, Location rl, Value acc, ValueRange in) -> Value {
                        Value e = math::ExpOp::create(
                            rb, rl, arith::SubFOp::create(rb, rl, in[0], finiteMax(rb, rl, in[1])));
                        return arith::AddFOp::create(rb, rl, acc, e);
                      });
      return SmallVector<Value>{max, sum};
    });
    return {statistics.getResult(0), statistics.getResult(1)};
  }

  /// The softmax's output for the scores `s`: exp(s - max) / sum, rounded
  /// to the operand type, [batch, block, block] (f32).
  Value probabilities(Value s, Value max, Value sum) const {
    return buildElementwise(
        b, loc, RankedTensorType::get({batch, block, block}, f32()), {s, max, sum},
        {map(3, {0, 1, 2}), map(3, {0, 1}), map(3, {0, 1})},
        [&](OpBuilder &rb, Location rl, ValueRange in) -> Value {
          Value e = math::ExpOp::create(rb, rl, arith::SubFOp::create(rb, rl, in[0], in[1]));
          return roundTrip(rb, rl, arith::DivFOp::create(rb, rl, e, in[2]));
        });
  }

  /// The probabilities from the rows' log-sum-exp `lse` ([batch, block]):
  /// exp(s - lse), rounded to the operand type, [batch, block, block] (f32).
  Value probabilitiesFromLse(Value s, Value lse) const {
    return buildElementwise(
        b, loc, RankedTensorType::get({batch, block, block}, f32()), {s, lse},
        {map(3, {0, 1, 2}), map(3, {0, 1})},
        [&](OpBuilder &rb, Location rl, ValueRange in) -> Value {
          return roundTrip(rb, rl,
                           math::ExpOp::create(rb, rl, arith::SubFOp::create(rb, rl, in[0], in[1])));
        });
  }

  /// The rows' log-sum-exp from their statistics: max + log(sum),
  /// [batch, block] (f32).
  Value logSumExp(Value max, Value sum) const {
    return buildElementwise(b, loc, RankedTensorType::get({batch, block}, f32()), {max, sum},
                            {map(2, {0, 1}), map(2, {0, 1})},
                            [&](OpBuilder &rb, Location rl, ValueRange in) -> Value {
                              return arith::AddFOp::create(
                                  rb, rl, in[0], math::LogOp::create(rb, rl, in[1]));
                            });
  }

  /// A block tensor (f32 holding values rounded to the operand type) as a
  /// contraction's operand: narrowed to the operand type, exactly, where
  /// the contractions take it.
  Value operand(Value x) const {
    if (!narrowOperands)
      return x;
    auto type = cast<RankedTensorType>(x.getType());
    return buildConverted(b, loc, RankedTensorType::get(type.getShape(), element), x);
  }

  /// `x` [batch, rows, n] in the accumulation type rounded to the operand
  /// type (unchanged when they are one type).
  Value rounded(Value x) const {
    if (accumulate == element)
      return x;
    auto type = cast<RankedTensorType>(x.getType());
    return buildConverted(b, loc, RankedTensorType::get(type.getShape(), element), x);
  }

  /// A loop over the key blocks [0, end) carrying `init`.
  scf::ForOp overKeyBlocks(Value end, ValueRange init,
                           function_ref<SmallVector<Value>(Value kStart, ValueRange carried)> body) {
    Value zero = arith::ConstantIndexOp::create(b, loc, 0);
    Value step = arith::ConstantIndexOp::create(b, loc, block);
    return scf::ForOp::create(
        b, loc, zero, end, step, init,
        [&](OpBuilder &nb, Location l, Value kStart, ValueRange carried) {
          OpBuilder::InsertionGuard guard(b);
          b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
          scf::YieldOp::create(b, l, body(kStart, carried));
        });
  }

  /// The output rows [qStart, +block), [batch, block, value features], and
  /// their log-sum-exp, [batch, block] (f32).
  std::pair<Value, Value> outputBlock(Value qStart, int64_t keys, int64_t valueFeatures) {
    Value queries = rows(query, qStart);
    Value end = keyEnd(qStart, keys);
    std::pair<Value, Value> statistics = rowStatistics(queries, qStart, end);
    Value max = statistics.first, sum = statistics.second;
    // The probabilities, rounded as the softmax's output is, times the
    // values, accumulated over the key blocks.
    Value acc0 = carriedTensor(b, loc, {batch, block, valueFeatures}, accumulate, 0.0);
    auto weighted = overKeyBlocks(end, {acc0}, [&](Value kStart, ValueRange carried) {
      Value p = probabilities(scores(queries, qStart, kStart), max, sum);
      return SmallVector<Value>{contract(operand(p), rows(value, kStart), carried[0],
                                         {map(4, {0, 1, 3}), map(4, {0, 3, 2}), map(4, {0, 1, 2})})};
    });
    return {rounded(weighted.getResult(0)), logSumExp(max, sum)};
  }

  /// `rows(target, start) += contraction` in place: [batch, block, n] rows
  /// of an accumulator for the whole sequence.
  Value accumulateRows(Value target, Value start, Value lhs, Value rhs,
                       ArrayRef<AffineMap> maps) const {
    Value sum = contract(lhs, rhs, rows(target, start), maps);
    return insertRows(b, loc, sum, target, start);
  }

  /// sum over the features of `x * y` ([batch, block, n] each, held in
  /// f32 or the operand type), [batch, block] in f32.
  Value rowDots(Value x, Value y) const {
    SmallVector<utils::IteratorType> iterators{utils::IteratorType::parallel,
                                               utils::IteratorType::parallel,
                                               utils::IteratorType::reduction};
    auto generic = linalg::GenericOp::create(
        b, loc, RankedTensorType::get({batch, block}, f32()), ValueRange{x, y},
        filled({batch, block}, f32(), 0.0),
        SmallVector<AffineMap>{map(3, {0, 1, 2}), map(3, {0, 1, 2}), map(3, {0, 1})},
        iterators, [](OpBuilder &nb, Location l, ValueRange args) {
          Value product =
              arith::MulFOp::create(nb, l, widen(nb, l, args[0]), widen(nb, l, args[1]));
          Value sum = arith::AddFOp::create(nb, l, args[2], product);
          linalg::YieldOp::create(nb, l, sum);
        });
    return generic.getResult(0);
  }

  /// The backward of the query rows [qStart, +block): their query
  /// gradient (rounded), and `keyGrads`/`valueGrads` (whole-sequence
  /// accumulators) with this block's share added.
  SmallVector<Value> gradBlock(Value output, Value lse, Value resultGrad, Value qStart,
                               int64_t keys, Value keyGrads, Value valueGrads) {
    Value queries = rows(query, qStart), grads = rows(resultGrad, qStart);
    Value end = keyEnd(qStart, keys);
    // The rows' log-sum-exp, as the forward found it.
    Value rowLse = rows(lse, qStart);
    // dp = result_grad @ value^T. The softmax's rule reads it in f32, so
    // loom-autodiff makes that gradient matmul one into f32 (its
    // accumulation type) instead of rounding it to 16 bits and widening it
    // again: the same here.
    auto probabilityGrads = [&](Value kStart) {
      Value product = contract(grads, rows(value, kStart),
                               filled({batch, block, block}, accumulate, 0.0),
                               {map(4, {0, 1, 3}), map(4, {0, 2, 3}), map(4, {0, 1, 2})});
      return accumulate.isF32() ? product : rounded(product);
    };
    // The softmax gradient's row sums, sum over the keys of dp * p, as
    // FlashAttention-2 takes them: the result's gradient times the result
    // (p @ value) over the features, in f32.
    Value dot = rowDots(grads, rows(output, qStart));
    Value queryAcc0 = carriedTensor(b, loc, {batch, block, features}, accumulate, 0.0);
    auto backward = overKeyBlocks(
        end, {queryAcc0, keyGrads, valueGrads}, [&](Value kStart, ValueRange carried) {
          Value p = probabilitiesFromLse(scores(queries, qStart, kStart), rowLse);
          Value dp = probabilityGrads(kStart);
          // ds = p * (dp - dot), rounded; 0 above the diagonal; times the
          // scale, rounded again.
          Value ds = buildElementwise(
              b, loc, RankedTensorType::get({batch, block, block}, f32()), {p, dp, dot},
              {map(3, {0, 1, 2}), map(3, {0, 1, 2}), map(3, {0, 1})},
              [&](OpBuilder &nb, Location l, ValueRange in) -> Value {
                Value x = arith::MulFOp::create(nb, l, in[0],
                                                arith::SubFOp::create(nb, l, in[1], in[2]));
                if (causal)
                  x = arith::SelectOp::create(nb, l, aboveDiagonal(nb, l, qStart, kStart),
                                              f32Constant(nb, l, 0.0), x);
                if (scale)
                  x = arith::MulFOp::create(nb, l, roundTrip(nb, l, x), scale);
                return roundTrip(nb, l, x);
              });
          Value dsOperand = operand(ds);
          Value queryAcc = contract(dsOperand, rows(key, kStart), carried[0],
                                    {map(4, {0, 1, 3}), map(4, {0, 3, 2}), map(4, {0, 1, 2})});
          Value keyAcc = accumulateRows(carried[1], kStart, dsOperand, queries,
                                        {map(4, {0, 3, 1}), map(4, {0, 3, 2}), map(4, {0, 1, 2})});
          Value valueAcc = accumulateRows(carried[2], kStart, operand(p), grads,
                                          {map(4, {0, 3, 1}), map(4, {0, 3, 2}), map(4, {0, 1, 2})});
          return SmallVector<Value>{queryAcc, keyAcc, valueAcc};
        });
    return {rounded(backward.getResult(0)), backward.getResult(1), backward.getResult(2)};
  }
};

/// The reassociation folding the leading dims of a tensor of `rank` into
/// one and keeping its last `kept` (none leading: a unit dim is added in
/// front, see `toBatched`).
static SmallVector<ReassociationIndices> batchReassociation(int64_t rank, int64_t kept) {
  int64_t batchDims = rank - kept;
  SmallVector<ReassociationIndices> groups;
  if (batchDims == 0) {
    groups.push_back({0, 1});
    for (int64_t d = 1; d < kept; ++d)
      groups.push_back({d + 1});
    return groups;
  }
  groups.emplace_back();
  for (int64_t d = 0; d < batchDims; ++d)
    groups.back().push_back(d);
  for (int64_t d = batchDims; d < rank; ++d)
    groups.push_back({d});
  return groups;
}

/// `x` [b..., s, f] as [prod(b...), s, f]; with `kept` = 1, a rows tensor
/// (an attention's log-sum-exp) [b..., s] as [prod(b...), s].
static Value toBatched(OpBuilder &b, Location loc, Value x, int64_t kept = 2) {
  auto type = cast<RankedTensorType>(x.getType());
  int64_t rank = type.getRank();
  if (rank == kept + 1)
    return x;
  if (rank == kept) {
    SmallVector<int64_t> shape{1};
    llvm::append_range(shape, type.getShape());
    return tensor::ExpandShapeOp::create(
        b, loc, RankedTensorType::get(shape, type.getElementType()), x,
        batchReassociation(rank, kept));
  }
  return tensor::CollapseShapeOp::create(b, loc, x, batchReassociation(rank, kept));
}

/// `x` [b..., s, f] as [prod(b...), s, f] in f32, widened once here (a
/// 16-bit operand) rather than per block by the contractions.
static Value widenedBatched(OpBuilder &b, Location loc, Value x) {
  Value batched = toBatched(b, loc, x);
  auto type = cast<RankedTensorType>(batched.getType());
  if (type.getElementType().isF32())
    return batched;
  return buildConverted(b, loc, RankedTensorType::get(type.getShape(), b.getF32Type()),
                        batched);
}

/// An operand `x` [b..., s, f] as the blocks read it, [prod(b...), s, f]:
/// as given where the contractions take 16-bit operands (`narrow`: the
/// builder's narrowOperands), else widened to f32 once.
static Value blockOperand(OpBuilder &b, Location loc, Value x, bool narrow) {
  return narrow ? toBatched(b, loc, x) : widenedBatched(b, loc, x);
}

/// The inverse of toBatched, to `type`.
static Value fromBatched(OpBuilder &b, Location loc, Value x, RankedTensorType type,
                         int64_t kept = 2) {
  int64_t rank = type.getRank();
  if (rank == kept + 1)
    return x;
  if (rank == kept)
    return tensor::CollapseShapeOp::create(b, loc, type, x, batchReassociation(rank, kept));
  return tensor::ExpandShapeOp::create(b, loc, type, x, batchReassociation(rank, kept));
}

/// The builder of `op` (loom.attention or loom.attention_grad) on its
/// operands folded to [batch, sequence, features].
template <typename OpT>
static AttentionBuilder builderFor(OpT op, typename OpT::Adaptor adaptor, OpBuilder &b,
                                   bool bf16Operands) {
  Location loc = op.getLoc();
  ArrayRef<int64_t> q = op.getQuery().getType().getShape();
  ArrayRef<int64_t> k = op.getKey().getType().getShape();
  int64_t batchDims = q.size() - 2;
  int64_t batch = 1;
  for (int64_t size : q.take_front(batchDims))
    batch *= size;
  Value scale;
  if (adaptor.getScale())
    scale = widen(b, loc, tensor::ExtractOp::create(b, loc, adaptor.getScale(), ValueRange{}));
  bool narrow = bf16Operands && op.getQuery().getType().getElementType().isBF16();
  auto operand = [&](Value x) { return blockOperand(b, loc, x, narrow); };
  return AttentionBuilder{b,
                          loc,
                          op.getQuery().getType().getElementType(),
                          op.getAccumulate(),
                          batch,
                          attentionBlockSize(q[batchDims], k[batchDims]),
                          q.back(),
                          operand(adaptor.getQuery()),
                          operand(adaptor.getKey()),
                          operand(adaptor.getValue()),
                          scale,
                          op.getCausal(),
                          narrow};
}

/// A loop over [0, size) in steps of `step` (the blocks of queries, the
/// chunks of the batch) carrying `init`; `body` gives the carried values of
/// the next iteration.
static scf::ForOp overBlocks(OpBuilder &b, Location loc, int64_t size, int64_t step,
                             ValueRange init,
                             function_ref<SmallVector<Value>(Value, ValueRange)> body) {
  return scf::ForOp::create(
      b, loc, arith::ConstantIndexOp::create(b, loc, 0),
      arith::ConstantIndexOp::create(b, loc, size),
      arith::ConstantIndexOp::create(b, loc, step), init,
      [&](OpBuilder &nb, Location l, Value start, ValueRange carried) {
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(nb.getInsertionBlock(), nb.getInsertionPoint());
        scf::YieldOp::create(b, l, body(start, carried));
      });
}

/// How many batch entries (heads) the blocks hold at a time: the most that
/// divide the batch with a [chunk, block, block] score tile of at most 4096
/// elements (16 KiB in f32). With every head at once a block's tensors
/// outgrow the caches (gpt.loom: 64 heads of 64 x 64 scores, 1 MiB a
/// tensor), and each pass over one goes to memory.
static int64_t batchChunk(int64_t batch, int64_t block) {
  int64_t chunk = std::clamp<int64_t>(4096 / (block * block), 1, batch);
  while (batch % chunk != 0)
    --chunk;
  return chunk;
}

/// `body` for each chunk of `chunk` batch entries from `nStart`, carrying
/// `init`: a loop, or one call where the chunk is the whole batch.
static SmallVector<Value>
overBatchChunks(OpBuilder &b, Location loc, int64_t batch, int64_t chunk, ValueRange init,
                function_ref<SmallVector<Value>(Value nStart, ValueRange carried)> body) {
  if (chunk == batch)
    return body(arith::ConstantIndexOp::create(b, loc, 0), init);
  auto loop = overBlocks(b, loc, batch, chunk, init, body);
  return SmallVector<Value>(loop.getResults());
}

struct AttentionLowering : OpConversionPattern<AttentionOp> {
  AttentionLowering(MLIRContext *context, bool bf16Operands)
      : OpConversionPattern(context), bf16Operands(bf16Operands) {}
  bool bf16Operands;
  LogicalResult
  matchAndRewrite(AttentionOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType resultType = op.getResult().getType();
    AttentionBuilder builder = builderFor(op, adaptor, rewriter, bf16Operands);
    int64_t queries = op.getQuery().getType().getShape().drop_back().back();
    int64_t keys = op.getKey().getType().getShape().drop_back().back();
    int64_t valueFeatures = resultType.getShape().back();
    SmallVector<Value> init{carriedTensor(rewriter, loc, {builder.batch, queries, valueFeatures},
                                          resultType.getElementType())};
    // With `lse`, the rows' log-sum-exp too (the backward's statistics).
    bool lse = static_cast<bool>(op.getLse());
    if (lse)
      init.push_back(carriedTensor(rewriter, loc, {builder.batch, queries}, rewriter.getF32Type()));
    int64_t chunk = batchChunk(builder.batch, builder.block);
    SmallVector<Value> result = overBatchChunks(
        rewriter, loc, builder.batch, chunk, init, [&](Value nStart, ValueRange outer) {
          AttentionBuilder part = builder.part(nStart, chunk);
          auto loop = overBlocks(
              rewriter, loc, queries, part.block, outer, [&](Value qStart, ValueRange carried) {
                auto [out, rowLse] = part.outputBlock(qStart, keys, valueFeatures);
                SmallVector<Value> next{
                    insertPart(rewriter, loc, out, carried[0], nStart, qStart)};
                if (lse)
                  next.push_back(insertPart(rewriter, loc, rowLse, carried[1], nStart, qStart));
                return next;
              });
          return SmallVector<Value>(loop.getResults());
        });
    SmallVector<Value> replacements{fromBatched(rewriter, loc, result[0], resultType)};
    if (lse)
      replacements.push_back(fromBatched(rewriter, loc, result[1], op.getLse().getType(), /*kept=*/1));
    rewriter.replaceOp(op, replacements);
    return success();
  }
};

/// The backward in blocks: per block of queries, the softmax gradient's
/// row sums (from the result), then one pass for the gradients (p from
/// the forward's log-sum-exp), the query block's rounded at its end, the
/// keys' and values' accumulated over all query blocks (in the
/// accumulation type, [batch, sequence, features]: linear in the
/// sequence) and rounded at the end.
struct AttentionGradLowering : OpConversionPattern<AttentionGradOp> {
  AttentionGradLowering(MLIRContext *context, bool bf16Operands)
      : OpConversionPattern(context), bf16Operands(bf16Operands) {}
  bool bf16Operands;
  LogicalResult
  matchAndRewrite(AttentionGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    AttentionBuilder builder = builderFor(op, adaptor, rewriter, bf16Operands);
    ArrayRef<int64_t> q = op.getQuery().getType().getShape();
    ArrayRef<int64_t> k = op.getKey().getType().getShape();
    int64_t batchDims = q.size() - 2;
    int64_t queries = q[batchDims], keys = k[batchDims];
    int64_t features = builder.features;
    int64_t valueFeatures = op.getValue().getType().getShape().back();
    Value resultGrad = blockOperand(rewriter, loc, adaptor.getResultGrad(), builder.narrowOperands);
    Value output = blockOperand(rewriter, loc, adaptor.getOutput(), builder.narrowOperands);
    Value lse = toBatched(rewriter, loc, adaptor.getLse(), /*kept=*/1);
    Type element = builder.element, accumulate = builder.accumulate;
    Value queryGrads = carriedTensor(rewriter, loc, {builder.batch, queries, features}, element);
    Value keyGrads = carriedTensor(rewriter, loc, {builder.batch, keys, features}, element);
    Value valueGrads = carriedTensor(rewriter, loc, {builder.batch, keys, valueFeatures}, element);
    int64_t chunk = batchChunk(builder.batch, builder.block);
    // A chunk's key and value gradients, accumulated over its query blocks
    // in the accumulation type: one buffer each, zeroed per chunk.
    Value keyAcc = carriedTensor(rewriter, loc, {chunk, keys, features}, accumulate);
    Value valueAcc = carriedTensor(rewriter, loc, {chunk, keys, valueFeatures}, accumulate);
    FloatAttr zero = rewriter.getFloatAttr(accumulate, 0.0);
    OpFoldResult first = rewriter.getIndexAttr(0);
    SmallVector<Value> grads = overBatchChunks(
        rewriter, loc, builder.batch, chunk, {queryGrads, keyGrads, valueGrads, keyAcc, valueAcc},
        [&](Value nStart, ValueRange outer) {
          AttentionBuilder part = builder.part(nStart, chunk);
          Value partResultGrad = batchSlice(rewriter, loc, resultGrad, nStart, chunk);
          Value partOutput = batchSlice(rewriter, loc, output, nStart, chunk);
          Value partLse = batchSlice(rewriter, loc, lse, nStart, chunk);
          auto loop = overBlocks(
              rewriter, loc, queries, part.block,
              {outer[0], filledTensor(rewriter, loc, outer[3], zero),
               filledTensor(rewriter, loc, outer[4], zero)},
              [&](Value qStart, ValueRange carried) {
                SmallVector<Value> grads =
                    part.gradBlock(partOutput, partLse, partResultGrad, qStart, keys,
                                   carried[1], carried[2]);
                return SmallVector<Value>{
                    insertPart(rewriter, loc, grads[0], carried[0], nStart, qStart), grads[1],
                    grads[2]};
              });
          Value keyAccumulated = loop.getResult(1), valueAccumulated = loop.getResult(2);
          return SmallVector<Value>{
              loop.getResult(0),
              insertPart(rewriter, loc, part.rounded(keyAccumulated), outer[1], nStart, first),
              insertPart(rewriter, loc, part.rounded(valueAccumulated), outer[2], nStart, first),
              keyAccumulated, valueAccumulated};
        });
    rewriter.replaceOp(op, {fromBatched(rewriter, loc, grads[0], op.getQuery().getType()),
                            fromBatched(rewriter, loc, grads[1], op.getKey().getType()),
                            fromBatched(rewriter, loc, grads[2], op.getValue().getType())});
    return success();
  }
};
} // namespace

void mlir::loom::populateAttentionToLinalgPatterns(RewritePatternSet &patterns,
                                                   bool bf16Operands) {
  patterns.add<AttentionLowering, AttentionGradLowering>(patterns.getContext(), bf16Operands);
}
