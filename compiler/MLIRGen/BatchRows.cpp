//===- BatchRows.cpp - Does a model compute each batch row on its own? ----===//
//
// A forward dataflow over the loom ops of the whole-batch model: each value
// is free of the batch, holds the batch in one dim (each slice along it
// depends on that row of the batch only), or mixes rows. Ops follow their
// own rules (a reduction over the batch dim mixes, one over another dim
// moves it); an op without a rule mixes any batch it is given.
//
//===----------------------------------------------------------------------===//

#include "MLIRGen/BatchRows.h"

#include "Loom/IR/LoomDialect.h"
#include "Loom/IR/LoomOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"

#include <numeric>
#include <string>

using namespace mlir;
using namespace mlir::loom;

namespace {

/// What a value holds of the batch.
struct Rows {
  enum Kind { Free, Batch, Mixed } kind = Free;
  int64_t dim = -1; // Batch: the dim holding the batch's rows
  /// Mixed: the op that first combined rows, and how.
  Operation *origin = nullptr;
  std::string why;
  /// Mixed only as a loss op's mean over the batch's rows: what the loss
  /// itself may be.
  bool meanOfRows = false;

  static Rows batch(int64_t dim) { return {Batch, dim, nullptr, {}, false}; }
};

int64_t rankOf(Value v) { return cast<ShapedType>(v.getType()).getRank(); }
ArrayRef<int64_t> shapeOf(Value v) {
  return cast<ShapedType>(v.getType()).getShape();
}

class RowFlow {
public:
  RowFlow(func::FuncOp whole, func::FuncOp micro, int64_t count)
      : count(count) {
    lineUp(whole, micro);
    for (BlockArgument arg : whole.getArguments())
      if (whole.getArgAttr(arg.getArgNumber(), attr::kInput) && rankOf(arg) > 0)
        rows[arg] = Rows::batch(0);
    visit(whole.getBody().front());
  }

  const Rows &of(Value v) const {
    static const Rows free;
    auto it = rows.find(v);
    return it == rows.end() ? free : it->second;
  }

  /// Marks `v` mixed by `op` (unless it already is, from an operand).
  void mix(Value v, Operation *op, const Twine &why) {
    Rows &r = rows[v];
    if (r.kind == Rows::Mixed)
      return;
    r = {Rows::Mixed, -1, op, why.str(), false};
  }

private:
  /// Pairs `whole`'s ops with `micro`'s where both walks list the same ops
  /// (a model whose ops the batch size changes is compared by rules only).
  void lineUp(func::FuncOp whole, func::FuncOp micro) {
    SmallVector<Operation *> wholeOps, microOps;
    whole.walk([&](Operation *op) { wholeOps.push_back(op); });
    micro.walk([&](Operation *op) { microOps.push_back(op); });
    for (auto [w, m] : llvm::zip(wholeOps, microOps))
      if (w->getName() != m->getName() ||
          w->getNumResults() != m->getNumResults()) {
        unlined = w;
        return;
      }
    // One walk is a prefix of the other: the longer one's next op.
    if (wholeOps.size() != microOps.size()) {
      size_t first = std::min(wholeOps.size(), microOps.size());
      unlined = first < wholeOps.size() ? wholeOps[first] : wholeOps.back();
      return;
    }
    for (auto [w, m] : llvm::zip(wholeOps, microOps))
      microOf[w] = m;
  }

public:
  /// Where the whole batch's and a microbatch's builds stop having the same
  /// ops (a loop over a batch dim), if they do.
  Operation *unlined = nullptr;

private:

  void visit(Block &block) {
    for (Operation &op : block) {
      if (auto stage = dyn_cast<StageOp>(op)) {
        visit(stage.getBody().front());
        auto yield = cast<YieldOp>(stage.getBody().front().getTerminator());
        for (auto [result, yielded] :
             llvm::zip(stage.getResults(), yield.getOperands())) {
          Rows copy = of(yielded); // before the insertion may move it
          rows[result] = copy;
        }
        continue;
      }
      transfer(op);
      compareShapes(op);
    }
  }

  /// One microbatch's op must give a value free of the batch its whole
  /// shape and a value of the batch its shape with the batch dim divided
  /// by the count. Anything else (an `arange(B)`: the positions of the
  /// microbatch's rows, not of the batch's) mixes rows.
  void compareShapes(Operation &op) {
    Operation *micro = microOf.lookup(&op);
    if (!micro)
      return;
    // A dropout's positions are its microbatch's: the microbatch keys its
    // mask (each draws its own), they pick no rows.
    if (isa<ArangeOp>(op) && !op.use_empty() &&
        llvm::all_of(op.getUsers(), [](Operation *user) { return isa<DropoutOp>(user); }))
      return;
    // A splat is the same in any shape, but not in any value: a batch dim
    // used as a number (`x * B`) is 4 in one build and 2 in the other.
    if (auto constant = dyn_cast<ConstantOp>(op)) {
      double wholeValue = constant.getValue().convertToDouble(),
             oneValue = cast<ConstantOp>(micro).getValue().convertToDouble();
      if (wholeValue != oneValue)
        mix(constant.getResult(), &op,
            llvm::formatv("is a number a batch dim gives ({0} for the whole "
                          "batch, {1} for a microbatch)",
                          llvm::format("%g", wholeValue), llvm::format("%g", oneValue))
                .str());
      return;
    }
    for (auto [whole, one] : llvm::zip(op.getResults(), micro->getResults())) {
      Rows r = of(whole);
      if (r.kind == Rows::Mixed || !isa<ShapedType>(whole.getType()) ||
          !isa<ShapedType>(one.getType()))
        continue;
      SmallVector<int64_t> expected(shapeOf(whole));
      if (r.kind == Rows::Batch)
        expected[r.dim] /= count;
      if (shapeOf(one) == ArrayRef<int64_t>(expected))
        continue;
      if (r.kind == Rows::Free)
        mix(whole, &op, "is sized by a batch dim but not computed from the "
                        "batch's rows, so one microbatch's differs from those "
                        "rows of the whole batch's");
      else
        mix(whole, &op, "is built with another shape for one microbatch");
    }
  }

  /// The first mixed operand's state, if any (a copy: inserting the
  /// results may move the map's entries).
  std::optional<Rows> mixedOperand(Operation &op) {
    for (Value operand : op.getOperands())
      if (of(operand).kind == Rows::Mixed)
        return of(operand);
    return std::nullopt;
  }

  /// Sets `result` to hold the batch in `dim`, or mixed where operands
  /// already gave it another dim.
  void join(Value result, int64_t dim, Operation &op) {
    Rows &r = rows[result];
    if (r.kind == Rows::Mixed)
      return;
    if (r.kind == Rows::Batch && r.dim != dim) {
      r = {Rows::Mixed, -1, &op,
           "combines rows of the batch held in two different dims", false};
      return;
    }
    r = Rows::batch(dim);
  }

  /// An operand holding the batch in `dim` of rank `rank`, right-aligned
  /// into a result of rank `resultRank` (broadcasting).
  void joinAligned(Value result, const Rows &operand, int64_t rank,
                   Operation &op) {
    if (operand.kind == Rows::Batch)
      join(result, rankOf(result) - rank + operand.dim, op);
  }

  void transfer(Operation &op) {
    if (std::optional<Rows> mixed = mixedOperand(op)) {
      mixed->meanOfRows = false; // used in more than the loss's own mean
      for (Value result : op.getResults())
        rows[result] = *mixed;
      return;
    }
    auto batchDim = [&](Value v) -> std::optional<int64_t> {
      const Rows &r = of(v);
      return r.kind == Rows::Batch ? std::optional<int64_t>(r.dim) : std::nullopt;
    };
    auto mixAll = [&](const Twine &why) {
      for (Value result : op.getResults())
        mix(result, &op, why);
    };
    auto onlyIfFree = [&](ValueRange operands, const Twine &why) {
      for (Value operand : operands)
        if (batchDim(operand)) {
          mixAll(why);
          return false;
        }
      return true;
    };

    if (isa<ConstantOp, ArangeOp, shard::ShardingOp>(op))
      return; // free; an arange the batch sizes is caught by the shapes
    if (auto annotation = dyn_cast<shard::ShardOp>(op)) {
      if (auto d = batchDim(annotation.getSrc()))
        join(annotation.getResult(), *d, op);
      return;
    }
    if (auto broadcast = dyn_cast<BroadcastOp>(op)) {
      // Repeating a value free of the batch along a batch-sized dim (a
      // class token or bias made [B, ...]) gives every row the same
      // value: the dim the microbatch's build divides holds the batch.
      Value input = broadcast.getInput();
      if (of(input).kind == Rows::Free)
        if (Operation *micro = microOf.lookup(&op)) {
          ArrayRef<int64_t> whole = shapeOf(broadcast.getResult()),
                            one = shapeOf(micro->getResult(0));
          int64_t lead = rankOf(broadcast.getResult()) - rankOf(input);
          for (int64_t d = 0; d < int64_t(whole.size()) && one.size() == whole.size(); ++d)
            if (whole[d] != one[d] && whole[d] == one[d] * count &&
                (d < lead || shapeOf(input)[d - lead] == 1)) {
              join(broadcast.getResult(), d, op);
              break;
            }
          return;
        }
      joinAligned(broadcast.getResult(), of(input), rankOf(input), op);
      return;
    }
    if (isBroadcastBinary(&op)) {
      for (Value operand : op.getOperands())
        joinAligned(op.getResult(0), of(operand), rankOf(operand), op);
      return;
    }
    if (auto matmul = dyn_cast<MatmulOp>(op)) {
      // Rows (M), columns (N) and batch dims all align right with the
      // result's; only the contracted K mixes.
      Value lhs = matmul.getLhs(), rhs = matmul.getRhs();
      if (auto d = batchDim(lhs); d && *d == rankOf(lhs) - 1)
        return mixAll("contracts over the batch (dim " + Twine(*d) +
                      " of its left operand)");
      if (auto d = batchDim(rhs); d && *d == rankOf(rhs) - 2)
        return mixAll("contracts over the batch (dim " + Twine(*d) +
                      " of its right operand)");
      for (Value operand : {lhs, rhs})
        joinAligned(matmul.getResult(), of(operand), rankOf(operand), op);
      return;
    }
    if (auto reduce = dyn_cast<SumOp>(op))
      return reduceAxis(op, reduce.getAxis(), reduce.getKeepdim());
    if (auto reduce = dyn_cast<MeanOp>(op))
      return reduceAxis(op, reduce.getAxis(), reduce.getKeepdim());
    if (auto reduce = dyn_cast<MaxOp>(op))
      return reduceAxis(op, reduce.getAxis(), reduce.getKeepdim());
    if (auto softmax = dyn_cast<SoftmaxOp>(op)) {
      auto d = batchDim(softmax.getInput());
      if (d && *d == int64_t(softmax.getAxis()))
        return mixAll("normalizes over the batch (its axis " + Twine(*d) + ")");
      if (d)
        join(softmax.getResult(), *d, op);
      return;
    }
    if (isa<LayerNormOp, RmsNormOp>(op)) {
      Value input = op.getOperand(0);
      if (!onlyIfFree(op.getOperands().drop_front(),
                      "takes its gain or bias from the batch"))
        return;
      auto d = batchDim(input);
      if (d && *d == rankOf(input) - 1)
        return mixAll("normalizes over the batch (its last dim)");
      if (d)
        join(op.getResult(0), *d, op);
      return;
    }
    if (auto mask = dyn_cast<CausalMaskOp>(op)) {
      auto d = batchDim(mask.getInput());
      if (d && *d >= rankOf(mask.getInput()) - 2)
        return mixAll("masks by position within the batch (dim " + Twine(*d) +
                      ")");
      if (d)
        join(mask.getResult(), *d, op);
      return;
    }
    if (auto attention = dyn_cast<AttentionOp>(op)) {
      if (attention.getScale() &&
          !onlyIfFree(attention.getScale(), "takes its scale from the batch"))
        return;
      for (Value operand : {attention.getQuery(), attention.getKey(),
                            attention.getValue()}) {
        auto d = batchDim(operand);
        if (!d)
          continue;
        int64_t rank = rankOf(operand);
        if (*d >= rank - 2)
          return mixAll("attends across the batch (dim " + Twine(*d) + ")");
        for (Value result : op.getResults())
          join(result, rankOf(result) - (result == attention.getResult() ? rank : rank - 1) + *d, op);
      }
      return;
    }
    if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
      if (!onlyIfFree(embedding.getTable(), "looks rows up in a table made from the batch"))
        return;
      if (auto d = batchDim(embedding.getIds()))
        join(embedding.getResult(), *d, op);
      return;
    }
    if (auto transpose = dyn_cast<TransposeOp>(op)) {
      if (auto d = batchDim(transpose.getInput())) {
        ArrayRef<int64_t> perm = transpose.getPermutation();
        auto to = llvm::find(perm, *d);
        join(transpose.getResult(),
             to == perm.end() ? *d : to - perm.begin(), op);
      }
      return;
    }
    if (auto reshape = dyn_cast<ReshapeOp>(op))
      return reshapeRows(reshape);
    if (auto split = dyn_cast<SplitOp>(op)) {
      if (auto d = batchDim(split.getInput())) {
        if (*d == int64_t(split.getAxis()))
          return mixAll("splits the batch dim");
        for (Value result : split.getResults())
          join(result, *d, op);
      }
      return;
    }
    if (auto concat = dyn_cast<ConcatOp>(op)) {
      for (Value input : concat.getInputs())
        if (auto d = batchDim(input)) {
          if (*d == int64_t(concat.getAxis()))
            return mixAll("concatenates along the batch dim");
          join(concat.getResult(), *d, op);
        }
      return;
    }
    if (auto moe = dyn_cast<MoeOp>(op)) {
      // Each token is routed on its own (capacity and the auxiliary losses
      // are the microbatch's, docs/moe.md): the tokens' dims keep the batch.
      SmallVector<Value> weights{moe.getRouter()};
      llvm::append_range(weights, moe.getExpertParams());
      if (!onlyIfFree(weights, "takes its router or experts from the batch"))
        return;
      auto d = batchDim(moe.getInput());
      if (d && *d == rankOf(moe.getInput()) - 1)
        return mixAll("routes the batch's dim as features");
      if (d)
        join(moe.getResult(), *d, op);
      return;
    }
    // A loss averages its rows: fine as the loss itself where each row
    // pairs the same row of the batch in both operands (the microbatches'
    // mean of it is the whole batch's), but a mean over the batch wherever
    // else it is used (checkMicrobatchRows tells the two apart).
    if (auto loss = dyn_cast<CrossEntropyOp>(op)) {
      auto logits = batchDim(loss.getLogits()), labels = batchDim(loss.getLabels());
      if (logits && *logits == rankOf(loss.getLogits()) - 1)
        return mixAll("normalizes over the batch (the last dim of its logits)");
      if (logits && labels && *logits != *labels)
        return mixAll("pairs logits and labels of different rows of the batch");
      return meanOverBatch(op);
    }
    if (auto loss = dyn_cast<MseOp>(op)) {
      auto prediction = batchDim(loss.getPrediction()),
           target = batchDim(loss.getTarget());
      if (prediction && target && *prediction != *target)
        return mixAll("pairs predictions and targets of different rows of the batch");
      return meanOverBatch(op);
    }
    if (auto dropout = dyn_cast<DropoutOp>(op)) {
      if (auto d = batchDim(dropout.getInput()))
        join(dropout.getResult(), *d, op);
      return;
    }
    // Elementwise ops of one operand (activations; softmax and the causal
    // mask, of the same trait, are above) and casts keep its layout.
    if ((op.hasTrait<OpTrait::SameOperandsAndResultType>() &&
         op.getNumOperands() == 1) ||
        isa<CastOp>(op)) {
      if (auto d = batchDim(op.getOperand(0)))
        join(op.getResult(0), *d, op);
      return;
    }
    onlyIfFree(op.getOperands(), "has no rule for keeping batch rows apart");
  }

  /// A cross_entropy or mse of the batch's rows: its value is their mean.
  void meanOverBatch(Operation &op) {
    if (llvm::none_of(op.getOperands(),
                      [&](Value v) { return of(v).kind == Rows::Batch; }))
      return;
    mix(op.getResult(0), &op, "is a mean over the batch");
    rows[op.getResult(0)].meanOfRows = true;
  }

  void reduceAxis(Operation &op, int64_t axis, bool keepdim) {
    Rows input = of(op.getOperand(0));
    if (input.kind != Rows::Batch)
      return;
    if (input.dim == axis)
      return mix(op.getResult(0), &op,
                 "reduces over the batch (its axis " + Twine(axis) + ")");
    join(op.getResult(0), keepdim || input.dim < axis ? input.dim : input.dim - 1,
         op);
  }

  /// A reshape keeps the batch where each microbatch's rows stay one
  /// contiguous run of one result dim: the dims before it hold as many
  /// elements as those before the batch's dim, and the count divides it
  /// (a batch dim is the batch's rows times whole inner rows, outermost).
  void reshapeRows(ReshapeOp reshape) {
    Rows input = of(reshape.getInput());
    if (input.kind != Rows::Batch)
      return;
    ArrayRef<int64_t> in = shapeOf(reshape.getInput()),
                      out = shapeOf(reshape.getResult());
    auto product = [](ArrayRef<int64_t> dims) {
      return std::accumulate(dims.begin(), dims.end(), int64_t(1),
                             std::multiplies<int64_t>());
    };
    int64_t before = product(in.take_front(input.dim));
    for (int64_t r = 0; r < int64_t(out.size()); ++r) {
      int64_t outBefore = product(out.take_front(r));
      if (outBefore > before)
        break;
      if (outBefore == before && out[r] % count == 0) {
        join(reshape.getResult(), r, *reshape);
        return;
      }
    }
    mix(reshape.getResult(), reshape,
        "reshapes the batch's dim " + Twine(input.dim) + " (of " +
            Twine(in[input.dim]) + ") so that no dim holds each of " +
            Twine(count) + " microbatches' rows whole");
  }

  int64_t count;
  llvm::DenseMap<Operation *, Operation *> microOf;
  llvm::DenseMap<Value, Rows> rows;
};

} // namespace

namespace loom {
/// `v` through any pipeline stage that yields it.
Value throughStages(Value v) {
  while (auto result = dyn_cast<OpResult>(v)) {
    auto stage = dyn_cast<StageOp>(result.getOwner());
    if (!stage)
      break;
    v = stage.getBody().front().getTerminator()->getOperand(
        result.getResultNumber());
  }
  return v;
}
} // namespace loom
using ::loom::throughStages;

namespace {

/// The value whose rows the loss averages: the cross_entropy or mse (whose
/// own rule checks its operands' rows) or the innermost of its means.
Value averagedOf(Value loss) {
  loss = throughStages(loss);
  if (auto cast = loss.getDefiningOp<CastOp>())
    loss = throughStages(cast.getInput());
  while (auto mean = loss.getDefiningOp<MeanOp>())
    loss = throughStages(mean.getInput());
  return loss;
}

} // namespace

namespace loom {

Value nonAveragingTerm(Value loss, llvm::function_ref<bool(Value)> free,
                       llvm::function_ref<bool(Value)> mean,
                       llvm::function_ref<Value(Value)> look) {
  auto at = [&](Value v) { return look ? look(v) : v; };
  loss = at(loss);
  if (free(loss) || mean(loss))
    return nullptr;
  Operation *def = loss.getDefiningOp();
  auto term = [&](unsigned i) { return nonAveragingTerm(def->getOperand(i), free, mean, look); };
  auto isFree = [&](unsigned i) { return free(at(def->getOperand(i))); };
  if (isa_and_nonnull<AddOp, SubOp>(def)) {
    Value lhs = term(0);
    return lhs ? lhs : term(1);
  }
  if (isa_and_nonnull<MulOp>(def) && (isFree(0) || isFree(1)))
    return term(isFree(0) ? 1 : 0);
  if (isa_and_nonnull<DivOp>(def) && isFree(1))
    return term(0);
  if (isa_and_nonnull<NegOp, CastOp>(def))
    return term(0);
  return loss;
}

LogicalResult
checkMicrobatchRows(func::FuncOp whole, func::FuncOp micro, int64_t count,
                    bool outputsToo, Location where,
                    llvm::function_ref<Location(unsigned result)> resultLoc) {
  RowFlow flow(whole, micro, count);
  // Without ops that line up, shapes the batch sizes (an arange(B) in a
  // loop over B) cannot be told from the model's own.
  if (flow.unlined) {
    InFlightDiagnostic diag = emitError(where)
        << "with " << count << " microbatches the model must be built from the "
        << "same ops for one microbatch, but its ops change with the batch size";
    diag.attachNote(flow.unlined->getLoc()) << "the first op that differs";
    return failure();
  }
  auto *returnOp = whole.getBody().front().getTerminator();
  // One error per op that mixes rows, with a note at each result it reaches.
  llvm::MapVector<Operation *, std::pair<Rows, SmallVector<unsigned>>> mixers;
  for (auto [i, result] : llvm::enumerate(returnOp->getOperands())) {
    bool isLoss = bool(whole.getResultAttr(i, attr::kLoss));
    if (!isLoss && !outputsToo)
      continue;
    // The loss may be a mean over the rows (a cross_entropy or mse of the
    // rows themselves, or means of a value that holds them), and sums and
    // multiples of such means and of terms free of the batch.
    const Rows *bad = &flow.of(result);
    if (isLoss) {
      Value term = nonAveragingTerm(
          result, [&](Value v) { return flow.of(v).kind == Rows::Free; },
          [&](Value v) {
            const Rows &r = flow.of(averagedOf(v));
            return r.kind != Rows::Mixed || r.meanOfRows;
          },
          throughStages);
      bad = term ? &flow.of(averagedOf(term)) : nullptr;
    }
    if (!bad || bad->kind != Rows::Mixed)
      continue;
    auto &entry = mixers[bad->origin];
    entry.first = *bad;
    entry.second.push_back(i);
  }
  for (auto &[origin, entry] : mixers) {
    InFlightDiagnostic diag = emitError(origin->getLoc())
        << "with " << count << " microbatches each row of the batch must be "
        << "computed on its own, but this '" << origin->getName().stripDialect()
        << "' " << entry.first.why;
    for (unsigned i : entry.second) {
      bool isLoss = bool(whole.getResultAttr(i, attr::kLoss));
      auto name = whole.getResultAttrOfType<StringAttr>(
          i, isLoss ? attr::kLoss : attr::kOutput);
      diag.attachNote(resultLoc(i))
          << (isLoss ? "the loss '" : "output '")
          << (name ? name.getValue() : StringRef("?"))
          << "' depends on it, so the microbatches' "
          << (isLoss ? "mean" : "stacked outputs") << " would not be the whole "
          << "batch's";
    }
  }
  return success(mixers.empty());
}

} // namespace loom
