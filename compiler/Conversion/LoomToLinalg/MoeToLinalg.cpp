//===- MoeToLinalg.cpp - Routing, slot gathers and gate gradients ---------===//
//
// Every piece is a parallel linalg.generic (with reductions where a count
// or a dot product is needed), so the kernels tile and bufferize like any
// other, but for routing's slots: one sequential scan over the choices in
// priority order with a running count per expert (an scf.for, linear in
// the tokens; on a GPU it runs on one thread). Every integer read from a
// routing tensor is clamped before it indexes, so no value, however
// produced, reads outside a tensor.
//
//===----------------------------------------------------------------------===//

#include "Loom/IR/LoomOps.h"
#include "LinalgBuilders.h"
#include "LoomToLinalg.h"
#include "MoeBuilders.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Transforms/DialectConversion.h"

using namespace mlir;
using namespace mlir::loom;
using namespace mlir::loom::moe;

namespace {
struct MoeRouteLowering : OpConversionPattern<MoeRouteOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MoeRouteOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    MLIRContext *context = getContext();
    Value probs = adaptor.getProbs();
    int64_t tokens = typeOf(probs).getDimSize(0), experts = typeOf(probs).getDimSize(1);
    int64_t topK = op.getTopK(), capacity = op.getCapacity();
    TypedAttr zero = rewriter.getI32IntegerAttr(0), none = rewriter.getI32IntegerAttr(-1);
    auto choices = op.getExpert().getType();

    // rank[n, e]: how many experts beat e for token n (ties: lower index).
    // NaN ranks above every number, as in torch.topk: the order must be
    // total, or a NaN row (from a NaN or infinite logit) ranks every expert
    // first and its choices sum to no expert at all.
    auto ranks = RankedTensorType::get({tokens, experts}, rewriter.getI32Type());
    Value rank = generic(
        rewriter, loc, ranks, {probs, probs}, filledTensor(rewriter, loc, ranks, zero),
        {mapOf(context, 3, {0, 1}), mapOf(context, 3, {0, 2}), mapOf(context, 3, {0, 1})},
        3, 2, [&](OpBuilder &b, Location l, ValueRange args) {
          Scalars s{b, l};
          Value e = s.index(1), f = s.index(2);
          auto compare = [&](arith::CmpFPredicate predicate, Value x, Value y) -> Value {
            return arith::CmpFOp::create(b, l, predicate, x, y);
          };
          Value eIsNan = compare(arith::CmpFPredicate::UNO, args[0], args[0]);
          Value fIsNan = compare(arith::CmpFPredicate::UNO, args[1], args[1]);
          Value eIsNumber = compare(arith::CmpFPredicate::ORD, args[0], args[0]);
          // f > e or f NaN, e a number; f == e or both NaN.
          Value greater = arith::AndIOp::create(
              b, l, compare(arith::CmpFPredicate::UGT, args[1], args[0]), eIsNumber);
          Value equal = arith::OrIOp::create(
              b, l, compare(arith::CmpFPredicate::OEQ, args[1], args[0]),
              arith::AndIOp::create(b, l, eIsNan, fIsNan));
          Value before = s.cmp(arith::CmpIPredicate::ult, f, e);
          Value beats = arith::OrIOp::create(b, l, greater,
                                             arith::AndIOp::create(b, l, equal, before));
          linalg::YieldOp::create(
              b, l, ValueRange{arith::AddIOp::create(b, l, args[2],
                                                     s.select(beats, s.i32(1), s.i32(0)))});
        });
    // expert[n, k]: the expert of rank k.
    Value expert = generic(
        rewriter, loc, choices, {rank}, filledTensor(rewriter, loc, choices, zero),
        {mapOf(context, 3, {0, 2}), mapOf(context, 3, {0, 1})}, 3, 2,
        [&](OpBuilder &b, Location l, ValueRange args) {
          Scalars s{b, l};
          Value hit = s.cmp(arith::CmpIPredicate::eq, args[0], s.asI32(s.index(1)));
          Value add = arith::AddIOp::create(b, l, args[1], s.asI32(s.index(2)));
          linalg::YieldOp::create(b, l, ValueRange{s.select(hit, add, args[1])});
        });
    // slot in one pass over the choices in GShard's priority order (every
    // first choice in token order, then every second): a running count per
    // expert is each choice's position among the earlier choices of its
    // expert, so routing is linear in the tokens. A choice is kept unless
    // its position plus the other ranks' earlier choices (offsets) reaches
    // the capacity (slot -1). A kept choice's slot is its index among the
    // kept choices of its expert and slot block (a second running count),
    // after `buffer` rows for every earlier (expert, block): with one block
    // that index is its position, as kept choices are a prefix of them.
    int64_t buffer = op.getBuffer().value_or(capacity);
    int64_t blocks = op.getBlocks().value_or(1), width = capacity / blocks;
    Value offsets = adaptor.getOffsets();
    auto i32 = rewriter.getI32Type();
    Value claimed = filledTensor(rewriter, loc, RankedTensorType::get({experts}, i32), zero);
    Value kept = filledTensor(rewriter, loc, RankedTensorType::get({experts * blocks}, i32), zero);
    Value slot = filledTensor(rewriter, loc, choices, none);
    Value lower = arith::ConstantIndexOp::create(rewriter, loc, 0);
    Value upper = arith::ConstantIndexOp::create(rewriter, loc, tokens);
    Value step = arith::ConstantIndexOp::create(rewriter, loc, 1);
    for (int64_t k = 0; k < topK; ++k) {
      auto scan = scf::ForOp::create(
          rewriter, loc, lower, upper, step, ValueRange{claimed, kept, slot},
          [&](OpBuilder &b, Location l, Value n, ValueRange state) {
            Scalars s{b, l};
            Value choice = s.constIndex(k);
            Value e = clampedIndex(b, l, s.extract(expert, {n, choice}), experts);
            Value position = s.extract(state[0], {e});
            Value counted = tensor::InsertOp::create(
                b, l, arith::AddIOp::create(b, l, position, s.i32(1)), state[0], e);
            Value global = position;
            if (offsets)
              global = arith::AddIOp::create(
                  b, l, global, s.extract(offsets, {s.constIndex(0), choice, e}));
            Value keeps = s.cmp(arith::CmpIPredicate::slt, global, s.i32(capacity));
            // The block of a dropped choice is clamped; it counts nothing.
            Value key = s.asI32(e);
            if (blocks > 1) {
              Value block = arith::MinSIOp::create(
                  b, l, arith::DivSIOp::create(b, l, global, s.i32(width)), s.i32(blocks - 1));
              key = arith::AddIOp::create(
                  b, l, arith::MulIOp::create(b, l, key, s.i32(blocks)), block);
            }
            Value keyIndex = arith::IndexCastOp::create(b, l, b.getIndexType(), key);
            Value index = s.extract(state[1], {keyIndex});
            Value next = s.select(keeps, arith::AddIOp::create(b, l, index, s.i32(1)), index);
            Value keptCounted = tensor::InsertOp::create(b, l, next, state[1], keyIndex);
            Value at = arith::AddIOp::create(
                b, l, arith::MulIOp::create(b, l, key, s.i32(buffer)), index);
            Value slotted = tensor::InsertOp::create(
                b, l, s.select(keeps, at, s.i32(-1)), state[2], ValueRange{n, choice});
            scf::YieldOp::create(b, l, ValueRange{counted, keptCounted, slotted});
          });
      claimed = scan.getResult(0);
      kept = scan.getResult(1);
      slot = scan.getResult(2);
    }
    // source[s]: the choice n * top_k + k holding slot s, or -1.
    auto sourceType = op.getSource().getType();
    Value source = invertSlots(rewriter, loc, slot, sourceType,
                               filledTensor(rewriter, loc, sourceType, none));
    // first_counts[e]: first choices of e.
    auto countType = op.getFirstCounts().getType();
    AffineMap firstChoice = AffineMap::get(
        2, 0, {getAffineDimExpr(1, context), getAffineConstantExpr(0, context)}, context);
    Value counts = generic(
        rewriter, loc, countType, {expert},
        filledTensor(rewriter, loc, countType, rewriter.getF32FloatAttr(0)),
        {firstChoice, mapOf(context, 2, {0})}, 2, 1,
        [&](OpBuilder &b, Location l, ValueRange args) {
          Scalars s{b, l};
          Value hit = s.cmp(arith::CmpIPredicate::eq, args[0], s.asI32(s.index(0)));
          Value one = arith::AddFOp::create(b, l, args[1], f32Constant(b, l, 1.0));
          linalg::YieldOp::create(b, l, ValueRange{s.select(hit, one, args[1])});
        });
    rewriter.replaceOp(op, {expert, slot, source, counts});
    return success();
  }
};

/// probs[n, expert[n, j]] for each choice j of token n, and their sum.
struct ChosenProbs {
  SmallVector<Value> experts, probs;
  Value sum;
};

ChosenProbs chosenProbs(Scalars &s, Value probs, Value expert, Value n) {
  int64_t experts = typeOf(probs).getDimSize(1), topK = typeOf(expert).getDimSize(1);
  ChosenProbs chosen;
  for (int64_t j = 0; j < topK; ++j) {
    Value e = clampedIndex(s.b, s.loc, s.extract(expert, {n, s.constIndex(j)}), experts);
    chosen.experts.push_back(e);
    chosen.probs.push_back(s.extract(probs, {n, e}));
    chosen.sum = chosen.sum ? arith::AddFOp::create(s.b, s.loc, chosen.sum, chosen.probs.back())
                            : chosen.probs.back();
  }
  return chosen;
}

struct MoeGateLowering : OpConversionPattern<MoeGateOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MoeGateOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType type = op.getType();
    int64_t topK = type.getDimSize(1);
    Value probs = adaptor.getProbs(), expert = adaptor.getExpert();
    Value gate = generic(
        rewriter, loc, type, {}, filledTensor(rewriter, loc, type, rewriter.getF32FloatAttr(0)),
        {mapOf(getContext(), 2, {0, 1})}, 2, 2,
        [&](OpBuilder &b, Location l, ValueRange) {
          Scalars s{b, l};
          ChosenProbs chosen = chosenProbs(s, probs, expert, s.index(0));
          Value k = s.index(1);
          Value mine = chosen.probs[0];
          for (int64_t j = 1; j < topK; ++j)
            mine = s.select(s.cmp(arith::CmpIPredicate::eq, k, s.constIndex(j)),
                            chosen.probs[j], mine);
          if (topK > 1)
            mine = arith::DivFOp::create(b, l, mine, chosen.sum);
          linalg::YieldOp::create(b, l, ValueRange{mine});
        });
    rewriter.replaceOp(op, gate);
    return success();
  }
};

struct MoeGateGradLowering : OpConversionPattern<MoeGateGradOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MoeGateGradOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType type = op.getType();
    Value probs = adaptor.getProbs(), expert = adaptor.getExpert(), grad = adaptor.getGrad();
    int64_t topK = typeOf(expert).getDimSize(1);
    Value result = generic(
        rewriter, loc, type, {}, filledTensor(rewriter, loc, type, rewriter.getF32FloatAttr(0)),
        {mapOf(getContext(), 2, {0, 1})}, 2, 2,
        [&](OpBuilder &b, Location l, ValueRange) {
          Scalars s{b, l};
          Value n = s.index(0), e = s.index(1);
          ChosenProbs chosen = chosenProbs(s, probs, expert, n);
          SmallVector<Value> g;
          for (int64_t j = 0; j < topK; ++j)
            g.push_back(s.extract(grad, {n, s.constIndex(j)}));
          // d gate_j / d p_i = [i == j] / S - p_j / S^2 (for top_k >= 2).
          Value weighted;
          if (topK > 1)
            for (int64_t j = 0; j < topK; ++j) {
              Value t = arith::MulFOp::create(b, l, g[j], chosen.probs[j]);
              weighted = weighted ? arith::AddFOp::create(b, l, weighted, t) : t;
            }
          Value out = f32Constant(b, l, 0.0);
          for (int64_t j = 0; j < topK; ++j) {
            Value d = g[j];
            if (topK > 1) {
              Value sq = arith::MulFOp::create(b, l, chosen.sum, chosen.sum);
              d = arith::SubFOp::create(b, l, arith::DivFOp::create(b, l, g[j], chosen.sum),
                                        arith::DivFOp::create(b, l, weighted, sq));
            }
            out = s.select(s.cmp(arith::CmpIPredicate::eq, e, chosen.experts[j]), d, out);
          }
          linalg::YieldOp::create(b, l, ValueRange{out});
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// result[s, :] = weights[src] * input[src / top_k, :], zero where src < 0.
struct MoeDispatchLowering : OpConversionPattern<MoeDispatchOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MoeDispatchOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType type = op.getType();
    Value input = adaptor.getInput(), weights = adaptor.getWeights();
    int64_t tokens = typeOf(input).getDimSize(0);
    int64_t topK = typeOf(adaptor.getSlot()).getDimSize(1);
    Type element = type.getElementType();
    Value result = generic(
        rewriter, loc, type, {adaptor.getSource()},
        filledTensor(rewriter, loc, type, rewriter.getZeroAttr(element)),
        {mapOf(getContext(), 2, {0}), mapOf(getContext(), 2, {0, 1})}, 2, 2,
        [&](OpBuilder &b, Location l, ValueRange args) {
          Scalars s{b, l};
          Value src = args[0];
          Value kept = s.cmp(arith::CmpIPredicate::sge, src, s.i32(0));
          Value choice = clampedIndex(b, l, src, tokens * topK);
          Value k = s.constIndex(topK);
          Value n = arith::DivUIOp::create(b, l, choice, k);
          Value v = widen(b, l, s.extract(input, {n, s.index(1)}));
          if (weights)
            v = arith::MulFOp::create(
                b, l, v, s.extract(weights, {n, arith::RemUIOp::create(b, l, choice, k)}));
          Value out = s.select(kept, v, f32Constant(b, l, 0.0));
          linalg::YieldOp::create(b, l, ValueRange{convertScalar(b, l, out, element)});
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// result[n, :] = sum_k weights[n, k] * input[slot[n, k], :] over kept k.
struct MoeCombineLowering : OpConversionPattern<MoeCombineOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MoeCombineOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType type = op.getType();
    Value input = adaptor.getInput(), slot = adaptor.getSlot(), weights = adaptor.getWeights();
    int64_t slots = typeOf(input).getDimSize(0), topK = typeOf(slot).getDimSize(1);
    Type element = type.getElementType();
    Value result = generic(
        rewriter, loc, type, {}, filledTensor(rewriter, loc, type, rewriter.getZeroAttr(element)),
        {mapOf(getContext(), 2, {0, 1})}, 2, 2,
        [&](OpBuilder &b, Location l, ValueRange) {
          Scalars s{b, l};
          Value n = s.index(0), d = s.index(1);
          Value sum = f32Constant(b, l, 0.0);
          for (int64_t k = 0; k < topK; ++k) {
            Value at = s.extract(slot, {n, s.constIndex(k)});
            Value kept = s.cmp(arith::CmpIPredicate::sge, at, s.i32(0));
            Value v = widen(b, l, s.extract(input, {clampedIndex(b, l, at, slots), d}));
            if (weights)
              v = arith::MulFOp::create(b, l, v, s.extract(weights, {n, s.constIndex(k)}));
            sum = s.select(kept, arith::AddFOp::create(b, l, sum, v), sum);
          }
          linalg::YieldOp::create(b, l, ValueRange{convertScalar(b, l, sum, element)});
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

/// result[n, k] = dot(tokens[n, :], slots[slot[n, k], :]), 0 if dropped.
struct MoeSlotDotLowering : OpConversionPattern<MoeSlotDotOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MoeSlotDotOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    Location loc = op.getLoc();
    RankedTensorType type = op.getType();
    Value slots = adaptor.getSlots();
    int64_t count = typeOf(slots).getDimSize(0);
    MLIRContext *context = getContext();
    Value result = generic(
        rewriter, loc, type, {adaptor.getSlot(), adaptor.getTokens()},
        filledTensor(rewriter, loc, type, rewriter.getF32FloatAttr(0)),
        {mapOf(context, 3, {0, 1}), mapOf(context, 3, {0, 2}), mapOf(context, 3, {0, 1})},
        3, 2, [&](OpBuilder &b, Location l, ValueRange args) {
          Scalars s{b, l};
          Value kept = s.cmp(arith::CmpIPredicate::sge, args[0], s.i32(0));
          Value v = widen(b, l, s.extract(slots, {clampedIndex(b, l, args[0], count), s.index(2)}));
          Value product = arith::MulFOp::create(b, l, widen(b, l, args[1]), v);
          Value add = arith::AddFOp::create(b, l, args[2], product);
          linalg::YieldOp::create(b, l, ValueRange{s.select(kept, add, args[2])});
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};
/// result[e, j] = choices of expert e (j = 0), of them dropped (j = 1).
struct MoeStatsLowering : OpConversionPattern<MoeStatsOp> {
  using OpConversionPattern::OpConversionPattern;
  LogicalResult
  matchAndRewrite(MoeStatsOp op, OpAdaptor adaptor,
                  ConversionPatternRewriter &rewriter) const override {
    RankedTensorType type = op.getType();
    MLIRContext *context = getContext();
    Value result = generic(
        rewriter, op.getLoc(), type, {adaptor.getExpert(), adaptor.getSlot()},
        filledTensor(rewriter, op.getLoc(), type, rewriter.getF32FloatAttr(0)),
        {mapOf(context, 4, {2, 3}), mapOf(context, 4, {2, 3}), mapOf(context, 4, {0, 1})},
        4, 2, [&](OpBuilder &b, Location l, ValueRange args) {
          Scalars s{b, l};
          Value mine = s.cmp(arith::CmpIPredicate::eq, args[0], s.asI32(s.index(0)));
          Value dropped = s.cmp(arith::CmpIPredicate::slt, args[1], s.i32(0));
          Value counting = s.cmp(arith::CmpIPredicate::eq, s.index(1), s.constIndex(0));
          Value counts = arith::AndIOp::create(
              b, l, mine, arith::OrIOp::create(b, l, counting, dropped));
          Value one = arith::AddFOp::create(b, l, args[2], f32Constant(b, l, 1.0));
          linalg::YieldOp::create(b, l, ValueRange{s.select(counts, one, args[2])});
        });
    rewriter.replaceOp(op, result);
    return success();
  }
};

} // namespace

void mlir::loom::populateMoeToLinalgPatterns(RewritePatternSet &patterns) {
  populateMoeExchangeToLinalgPatterns(patterns);
  patterns.add<MoeRouteLowering, MoeGateLowering, MoeGateGradLowering,
               MoeDispatchLowering, MoeCombineLowering, MoeSlotDotLowering,
               MoeStatsLowering>(
      patterns.getContext());
}
