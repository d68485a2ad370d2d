//===- Partition.cpp - Per-rank (SPMD) programs with explicit collectives -===//
//
// Walks a copy of each model in program order. Every value gets a Sharding:
// arguments from their `shard.shard` annotations, results from a rule per op
// (a matmul's split contraction makes partial sums, a reduction needs its
// axis whole, reshapes and transposes carry splits along). Where an op needs
// its operand laid out otherwise, `reshard` inserts the upstream `shard`
// collective that moves the data, and the op is left computing its rank's
// block: its result type becomes the local type.
//
//===----------------------------------------------------------------------===//

#include "Loom/Transforms/DeadOps.h"
#include "Loom/Transforms/Passes.h"
#include "Partitioner.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMPARTITION
#include "Loom/Transforms/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

static int64_t normalizeAxis(int64_t axis, int64_t rank) {
  return axis < 0 ? axis + rank : axis;
}

static int64_t bytesOf(RankedTensorType type) {
  return type.getNumElements() * (type.getElementTypeBitWidth() / 8);
}

void Partitioner::setResult(Value result, const Sharding &sharding) {
  RankedTensorType global = globalType(result);
  globals[result] = global;
  shardings[result] = sharding;
  result.setType(grid.localType(global, sharding));
}

Value Partitioner::collective(Operation *created, Value result,
                              const Sharding &sharding, RankedTensorType global,
                              Location loc, StringRef why) {
  globals[result] = global;
  shardings[result] = sharding;
  if (remarks) {
    std::string kind = created->getName().stripDialect().str();
    for (char &c : kind)
      c = c == '_' ? '-' : c;
    auto axes = created->getAttrOfType<DenseI16ArrayAttr>("grid_axes");
    emitRemark(loc) << kind << " over "
                    << grid.format(axes ? axes.asArrayRef() : ArrayRef<int16_t>())
                    << " (" << why << "): "
                    << bytesOf(cast<RankedTensorType>(result.getType()))
                    << " bytes per rank";
  }
  return result;
}

/// Reduces pending partial sums (into a split dim of `target` when it asks
/// for one over exactly those axes), then rounds to the value's type.
Value Partitioner::materialize(Value value, const Sharding &target,
                               Operation *user) {
  Sharding current = shardingOf(value);
  if (current.partial.empty())
    return value;
  RankedTensorType global = globalType(value);
  Operation *def = value.getDefiningOp();
  Location loc = def ? def->getLoc() : user->getLoc();
  OpBuilder builder(user);
  auto gridRef = FlatSymbolRefAttr::get(grid.op.getSymNameAttr());
  GridAxes axes = current.partial;
  current.partial.clear();
  // The reduced block keeps the partial sums' element type (f32 for a
  // 16-bit matmul's), not the value's global one.
  auto reducedType = [&](const Sharding &s) {
    return RankedTensorType::get(grid.localType(global, s).getShape(),
                                 cast<RankedTensorType>(value.getType())
                                     .getElementType());
  };
  std::optional<int64_t> scatter;
  for (auto [d, want] : llvm::enumerate(target.dims))
    if (want == axes && current.dims[d].empty() &&
        global.getDimSize(d) % grid.ways(axes) == 0)
      scatter = d;
  Value reduced;
  if (scatter) {
    current.dims[*scatter] = axes;
    auto op = shard::ReduceScatterOp::create(
        builder, loc, reducedType(current), gridRef,
        builder.getDenseI16ArrayAttr(axes), value,
        shard::ReductionKindAttr::get(builder.getContext(),
                                      shard::ReductionKind::Sum),
        builder.getIndexAttr(*scatter));
    reduced = collective(op, op.getResult(), current, global, loc,
                         "partial sums, kept split");
  } else {
    auto op = shard::AllReduceOp::create(builder, loc, reducedType(current),
                                         gridRef.getValue(), axes, value);
    reduced = collective(op, op.getResult(), current, global, loc,
                         "partial sums");
  }
  // Partial sums of a 16-bit matmul are kept in f32 until here, so the
  // result is rounded once, as on one rank.
  Type element = global.getElementType();
  if (cast<RankedTensorType>(reduced.getType()).getElementType() != element) {
    RankedTensorType local = grid.localType(global, current);
    auto cast = CastOp::create(builder, loc, local, reduced);
    globals[cast.getResult()] = global;
    shardings[cast.getResult()] = current;
    reduced = cast.getResult();
  }
  return reduced;
}

/// Whether `axes` split over `head` first (then perhaps more).
static bool isPrefix(ArrayRef<int16_t> head, ArrayRef<int16_t> axes) {
  return head.size() <= axes.size() && axes.take_front(head.size()) == head;
}

FailureOr<Value> Partitioner::reshard(Value value, const Sharding &target,
                                      Operation *user) {
  if (shardingOf(value) == target)
    return value;
  std::string key = grid.format(target) + "|" + grid.format(target.partial);
  if (Value copy = copies[value].lookup(key))
    return copy;
  // Partial sums gathered, cut or moved over other axes stay partial sums
  // (of the gathered block, of the slice): they need not be summed first.
  auto touches = [](const Sharding &s, ArrayRef<int16_t> axes) {
    return llvm::any_of(s.dims, [&](const GridAxes &split) {
      return llvm::any_of(split, [&](int16_t a) { return llvm::is_contained(axes, a); });
    });
  };
  const Sharding &from = shardingOf(value);
  bool keepsPartial = !target.partial.empty() && from.partial == target.partial &&
                      !touches(from, target.partial) && !touches(target, target.partial);
  Value current = keepsPartial ? value : materialize(value, target, user);
  if (!target.partial.empty() && !keepsPartial && shardingOf(current) != target)
    return user->emitError("cannot make a partial sum here (internal)");
  RankedTensorType global = globalType(value);
  OpBuilder builder(user);
  Location loc = user->getLoc();
  auto gridRef = grid.op.getSymName();
  // Axes moving whole from one dim to another are one all_to_all: each
  // rank sends the blocks of the new split dim to their owners, instead of
  // gathering everything and slicing.
  for (size_t from = 0; from < target.dims.size(); ++from) {
    Sharding now = shardingOf(current);
    GridAxes axes = now.dims[from];
    if (axes.empty() || !target.dims[from].empty())
      continue;
    for (size_t to = 0; to < target.dims.size(); ++to) {
      if (to == from || target.dims[to] != axes || !now.dims[to].empty())
        continue;
      Sharding next = now;
      next.dims[from].clear();
      next.dims[to] = axes;
      auto op = shard::AllToAllOp::create(
          builder, loc, grid.localType(global, next), gridRef, axes, current,
          llvm::APInt(64, to), llvm::APInt(64, from));
      current = collective(op, op.getResult(), next, global, loc,
                           "the split moves from dimension " +
                               std::to_string(from) + " to " +
                               std::to_string(to));
      break;
    }
  }
  // A split over axes A then B (major first) holds the blocks of the split
  // over A alone, cut again: going between the two gathers or slices over
  // B only.
  for (size_t d = 0; d < target.dims.size(); ++d) {
    Sharding now = shardingOf(current);
    if (isPrefix(now.dims[d], target.dims[d]))
      continue;
    Sharding next = now;
    next.dims[d].clear();
    if (isPrefix(target.dims[d], now.dims[d]))
      next.dims[d] = target.dims[d];
    ArrayRef<int16_t> gathered = ArrayRef<int16_t>(now.dims[d]).drop_front(next.dims[d].size());
    auto op = shard::AllGatherOp::create(
        builder, loc, grid.localType(global, next), gridRef, gathered,
        current, llvm::APInt(64, d));
    current = collective(op, op.getResult(), next, global, loc,
                         "needs dimension " + std::to_string(d) +
                             (next.dims[d].empty() ? " whole" : " split over fewer axes"));
  }
  for (size_t d = 0; d < target.dims.size(); ++d) {
    Sharding now = shardingOf(current);
    if (now.dims[d] == target.dims[d])
      continue;
    Sharding next = now;
    next.dims[d] = target.dims[d];
    ArrayRef<int16_t> sliced = ArrayRef<int16_t>(target.dims[d]).drop_front(now.dims[d].size());
    auto op = shard::AllSliceOp::create(
        builder, loc, grid.localType(global, next), gridRef, sliced,
        current, llvm::APInt(64, d));
    current = collective(op, op.getResult(), next, global, loc,
                         "a replicated value meets a split one; no data moves");
  }
  copies[value][key] = current;
  return current;
}

Sharding Partitioner::withWhole(Value input, ArrayRef<int64_t> whole) {
  Sharding s = shardingOf(input);
  s.partial.clear();
  for (int64_t d : whole)
    s.dims[d].clear();
  return s;
}

LogicalResult Partitioner::apply(Operation *op, ArrayRef<Sharding> operands,
                                 ArrayRef<Sharding> results) {
  for (auto [i, want] : llvm::enumerate(operands)) {
    FailureOr<Value> local = reshard(op->getOperand(i), want, op);
    if (failed(local))
      return failure();
    op->setOperand(i, *local);
  }
  for (auto [result, sharding] : llvm::zip(op->getResults(), results))
    setResult(result, sharding);
  return success();
}

LogicalResult Partitioner::annotate(shard::ShardOp annotation) {
  auto shardingOp = annotation.getSharding().getDefiningOp<shard::ShardingOp>();
  if (!shardingOp)
    return annotation.emitError("sharding annotation without a shard.sharding");
  Sharding target = Sharding::replicated(globalType(annotation.getSrc()).getRank());
  for (auto [d, axes] : llvm::enumerate(shardingOp.getSplitAxes().getAxes()))
    if (d < target.dims.size())
      target.dims[d] = grid.effective(axes.asArrayRef());
  // The front end checks this at the script; hand-written IR is checked
  // here (upstream's verifier had reported the shard op this pass built).
  RankedTensorType global = globalType(annotation.getSrc());
  for (auto [d, axes] : llvm::enumerate(target.dims))
    if (!axes.empty() && global.getDimSize(d) % grid.ways(axes) != 0)
      return annotation.emitError("dimension ")
             << d << " of size " << global.getDimSize(d) << " is not divisible by "
             << grid.ways(axes) << ", the number of shards of its grid axes";
  Value src = annotation.getSrc();
  Value result;
  auto arg = dyn_cast<BlockArgument>(src);
  if (arg && !assignedArgs.contains(arg) && src.hasOneUse()) {
    // An argument is given to each rank already laid out as annotated.
    assignedArgs.insert(arg);
    setResult(arg, target);
    result = arg;
  } else {
    FailureOr<Value> resharded = reshard(src, target, annotation);
    if (failed(resharded))
      return failure();
    result = *resharded;
  }
  annotation.replaceAllUsesWith(result);
  annotation.erase();
  return success();
}

/// Whether `fine` splits each dim over `coarse`'s axes and then more, and
/// some dim over more (a refinement reached by slicing alone).
static bool refines(const Sharding &fine, const Sharding &coarse) {
  if (!fine.partial.empty() || !coarse.partial.empty() ||
      fine.dims.size() != coarse.dims.size() || fine == coarse)
    return false;
  return llvm::all_of(llvm::zip(fine.dims, coarse.dims), [](const auto &dims) {
    return isPrefix(std::get<1>(dims), std::get<0>(dims));
  });
}

LogicalResult Partitioner::partitionElementwise(Operation *op) {
  // A 16-bit param's lookup gathers rows from its f32 master and casts them
  // (loom-master-weights): cast before the sum, the vocab-parallel lookup's
  // all-reduce moves 16-bit rows (it had moved f32, twice the bytes: 192
  // all-reduces of 96 MiB a step for gpt3-175b's bf16 embedding, on tp).
  // Narrowing casts only: a widening one reads the sum already made.
  if (auto cast = dyn_cast<CastOp>(op);
      cast && disjointPartials.contains(cast.getInput()) &&
      isa<FloatType>(cast.getType().getElementType()) &&
      cast.getType().getElementTypeBitWidth() <
          cast.getInput().getType().getElementTypeBitWidth()) {
    Sharding s = shardingOf(cast.getInput());
    disjointPartials.insert(cast.getResult());
    return apply(op, {s}, {s});
  }
  // A sum of partial sums over the same axes is one too: adding first saves
  // a collective (the backward's input gradients of several column-parallel
  // matmuls: one all-reduce, as Megatron does). f32 only: a 16-bit add
  // would round each rank's part before the ranks' parts are added.
  // When one is split further (a tied embedding's gradient parts: the
  // head's, split over the vocabulary, and the lookup's whole table), the
  // other is cut alike, which moves no data.
  if (auto add = dyn_cast<AddOp>(op)) {
    Sharding lhs = shardingOf(add.getLhs()), rhs = shardingOf(add.getRhs());
    auto coarse = [](Sharding s) {
      s.partial.clear();
      return s;
    };
    if (!lhs.partial.empty() && lhs.partial == rhs.partial &&
        globalType(add.getLhs()) == add.getType() &&
        globalType(add.getRhs()) == add.getType() &&
        add.getType().getElementType().isF32()) {
      if (refines(coarse(rhs), coarse(lhs)))
        lhs = rhs;
      if (lhs == rhs || refines(coarse(lhs), coarse(rhs)))
        return apply(op, {lhs, lhs}, {lhs});
    }
  }
  auto resultType = cast<RankedTensorType>(op->getResult(0).getType());
  int64_t rank = resultType.getRank();
  ArrayRef<int64_t> shape = resultType.getShape();
  Sharding result = Sharding::replicated(rank);
  auto claim = [&](int64_t d, ArrayRef<int16_t> axes) {
    if (axes.empty() || !result.dims[d].empty() ||
        llvm::any_of(axes, [&](int16_t a) { return result.uses(a); }) ||
        shape[d] % grid.ways(axes) != 0)
      return;
    result.dims[d].assign(axes.begin(), axes.end());
  };
  // Sequence parallelism: partial sums (a row-parallel matmul) meeting the
  // residual stream are reduce-scattered along the sequence dim, where no
  // operand splits that dim already (a [B, D] stream's rows over dp: the
  // claim had replaced dp's split, and the dp ranks computed the same
  // rows).
  bool sequenceDimSplit = rank >= 2 && llvm::any_of(op->getOperands(), [&](Value operand) {
    const Sharding &s = shardingOf(operand);
    return globalType(operand).getRank() == rank && !s.dims[rank - 2].empty();
  });
  if (sequenceParallel && rank >= 2 && !sequenceDimSplit)
    for (Value operand : op->getOperands())
      if (!shardingOf(operand).partial.empty() &&
          globalType(operand).getRank() == rank) {
        claim(rank - 2, shardingOf(operand).partial);
        sequenceSplit |= result.dims[rank - 2] == shardingOf(operand).partial;
      }
  for (Value operand : op->getOperands()) {
    const Sharding &s = shardingOf(operand);
    int64_t offset = rank - (int64_t)s.dims.size();
    for (auto [d, axes] : llvm::enumerate(s.dims))
      if (globalType(operand).getDimSize(d) == shape[offset + d])
        claim(offset + d, axes);
  }
  SmallVector<Sharding> operands;
  for (Value operand : op->getOperands()) {
    RankedTensorType type = globalType(operand);
    Sharding s = Sharding::replicated(type.getRank());
    int64_t offset = rank - type.getRank();
    for (int64_t d = 0; d < type.getRank(); ++d)
      if (type.getDimSize(d) == shape[offset + d])
        s.dims[d] = result.dims[offset + d];
    operands.push_back(s);
  }
  return apply(op, operands, {result});
}

LogicalResult Partitioner::partitionMatmul(MatmulOp op) {
  RankedTensorType resultType = op.getType();
  int64_t rank = resultType.getRank(), batch = rank - 2;
  ArrayRef<int64_t> shape = resultType.getShape();
  Sharding lhs = shardingOf(op.getLhs()), rhs = shardingOf(op.getRhs());
  int64_t lhsRank = lhs.dims.size(), rhsRank = rhs.dims.size();
  Sharding result = Sharding::replicated(rank);
  GridAxes used;
  auto free = [&](ArrayRef<int16_t> axes) {
    return llvm::none_of(axes, [&](int16_t a) { return llvm::is_contained(used, a); });
  };
  // Batch dims first (heads over tp, batch over dp), then the contraction
  // (partial sums), then the columns (a column-parallel weight keeps its
  // split), then the rows.
  for (int64_t d = 0; d < batch; ++d) {
    for (const auto &[s, r, v] :
         {std::tuple(&lhs, lhsRank, op.getLhs()), std::tuple(&rhs, rhsRank, op.getRhs())}) {
      int64_t od = d - (batch - (r - 2));
      if (od < 0 || !result.dims[d].empty())
        continue;
      const GridAxes &axes = s->dims[od];
      if (!axes.empty() && free(axes) &&
          globalType(v).getDimSize(od) == shape[d]) {
        result.dims[d] = axes;
        used.append(axes.begin(), axes.end());
      }
    }
  }
  GridAxes k = !lhs.dims[lhsRank - 1].empty() ? lhs.dims[lhsRank - 1]
                                               : rhs.dims[rhsRank - 2];
  if (!free(k))
    k.clear();
  used.append(k.begin(), k.end());
  GridAxes n = rhs.dims[rhsRank - 1];
  if (!free(n))
    n.clear();
  used.append(n.begin(), n.end());
  GridAxes m = lhs.dims[lhsRank - 2];
  if (!free(m))
    m.clear();
  result.dims[batch] = m;
  result.dims[batch + 1] = n;
  result.partial = k;

  auto operandSharding = [&](Value v, int64_t r, ArrayRef<int16_t> row,
                             ArrayRef<int16_t> col) {
    Sharding s = Sharding::replicated(r);
    for (int64_t od = 0; od < r - 2; ++od) {
      int64_t d = od + (batch - (r - 2));
      if (globalType(v).getDimSize(od) == shape[d])
        s.dims[od] = result.dims[d];
    }
    s.dims[r - 2].assign(row.begin(), row.end());
    s.dims[r - 1].assign(col.begin(), col.end());
    return s;
  };
  Sharding wantLhs = operandSharding(op.getLhs(), lhsRank, m, k);
  Sharding wantRhs = operandSharding(op.getRhs(), rhsRank, k, n);
  if (failed(apply(op, {wantLhs, wantRhs}, {result})))
    return failure();
  // Partial sums stay in the accumulation type until they are reduced.
  if (!k.empty() && op.getAccumulate().isF32() &&
      !resultType.getElementType().isF32()) {
    auto local = cast<RankedTensorType>(op.getType());
    op.getResult().setType(
        RankedTensorType::get(local.getShape(), op.getAccumulate()));
  }
  return success();
}

LogicalResult Partitioner::partitionReshape(ReshapeOp op) {
  Value input = op.getInput();
  SmallVector<int64_t> gather;
  Sharding in = withWhole(input, {});
  reshapeSharding(grid, globalType(input).getShape(), op.getType().getShape(),
                  in, gather);
  for (int64_t d : gather)
    in.dims[d].clear();
  SmallVector<int64_t> none;
  Sharding out = reshapeSharding(grid, globalType(input).getShape(),
                                 op.getType().getShape(), in, none);
  return apply(op, {in}, {out});
}

Partitioner::LossLayout Partitioner::lossLayout(Operation *op) {
  Value first = op->getOperand(0), second = op->getOperand(1);
  bool isCrossEntropy = isa<CrossEntropyOp, CrossEntropyGradOp>(op);
  int64_t rank = globalType(second).getRank();
  LossLayout layout{withWhole(first, {}), Sharding::replicated(rank), {}, {}};
  Sharding &a = layout.first, &b = layout.second;
  if (isCrossEntropy) {
    layout.classes = a.dims.back();
    a.dims.back().clear();
  }
  // Both operands split alike on their shared dims.
  GridAxes &split = layout.rows;
  for (int64_t d = 0; d < rank; ++d) {
    GridAxes axes = a.dims[d];
    if (axes.empty())
      axes = shardingOf(second).dims[d];
    if (llvm::any_of(axes, [&](int16_t x) {
          return llvm::is_contained(split, x) ||
                 llvm::is_contained(layout.classes, x);
        }))
      axes.clear();
    a.dims[d] = b.dims[d] = axes;
    split.append(axes.begin(), axes.end());
  }
  if (isCrossEntropy)
    a.dims.back() = layout.classes;
  return layout;
}

/// A mean loss over split dims: each rank's mean of its block, scaled by
/// 1/shards, is a partial sum of the global mean (the blocks are equal).
/// Logits split over their classes stay split (vocabStatsOf).
LogicalResult Partitioner::partitionLoss(Operation *op) {
  LossLayout layout = lossLayout(op);
  Sharding loss = Sharding::replicated(0);
  if (layout.classes.empty()) {
    if (failed(apply(op, {layout.first, layout.second}, {loss})))
      return failure();
    if (!layout.rows.empty())
      makePartialMean(op, layout.rows, loss);
    return success();
  }
  FailureOr<VocabStats> stats = vocabStatsOf(op, layout);
  if (failed(stats))
    return failure();
  OpBuilder builder(op);
  auto scalar = RankedTensorType::get({}, builder.getF32Type());
  auto mean = VocabLossOp::create(builder, op->getLoc(), scalar, stats->max,
                                  stats->sumExp, stats->target);
  globals[mean.getResult()] = scalar;
  shardings[mean.getResult()] = loss;
  op->getResult(0).replaceAllUsesWith(mean.getResult());
  op->erase();
  if (!layout.rows.empty())
    makePartialMean(mean, layout.rows, loss);
  return success();
}

FailureOr<Partitioner::VocabStats>
Partitioner::vocabStatsOf(Operation *op, const LossLayout &layout) {
  Value logits = op->getOperand(0), labels = op->getOperand(1);
  auto key = std::make_pair(logits, labels);
  if (auto it = vocabStats.find(key); it != vocabStats.end())
    return it->second;
  FailureOr<Value> x = reshard(logits, layout.first, op);
  FailureOr<Value> ids = reshard(labels, layout.second, op);
  if (failed(x) || failed(ids))
    return failure();
  OpBuilder builder(op);
  Location loc = op->getLoc();
  RankedTensorType global = globalType(logits);
  int64_t rank = global.getRank(), axis = rank - 1;
  auto local = cast<RankedTensorType>(x->getType());
  auto gridRef = grid.op.getSymName();
  Type f32 = builder.getF32Type();
  // The rows, as the labels are laid out.
  RankedTensorType rowsGlobal = RankedTensorType::get(global.getShape().drop_back(), f32);
  RankedTensorType rowsLocal = grid.localType(rowsGlobal, layout.second);
  auto rowsSharding = [&](Value v) {
    globals[v] = rowsGlobal;
    shardings[v] = layout.second;
    return v;
  };
  // The rows' maxima: each rank's, gathered, then their maximum (exact in
  // any element type).
  SmallVector<int64_t> kept(rowsLocal.getShape());
  kept.push_back(1);
  Value mine = MaxOp::create(builder, loc,
                             RankedTensorType::get(kept, local.getElementType()),
                             *x, axis, true);
  Sharding keptSharding = layout.first;
  keptSharding.dims.back().clear();
  SmallVector<int64_t> keptGlobal(global.getShape().drop_back());
  keptGlobal.push_back(1);
  globals[mine] = RankedTensorType::get(keptGlobal, local.getElementType());
  shardings[mine] = keptSharding;
  kept.back() = grid.ways(layout.classes);
  auto gather = shard::AllGatherOp::create(
      builder, loc, RankedTensorType::get(kept, local.getElementType()), gridRef,
      layout.classes, mine, llvm::APInt(64, axis));
  Value all = collective(gather, gather.getResult(), keptSharding,
                         cast<RankedTensorType>(globals[mine]), loc,
                         "vocab-parallel cross-entropy: the rows' maxima");
  Value max = MaxOp::create(builder, loc, rowsLocal.clone(local.getElementType()),
                            all, axis, false);
  if (!local.getElementType().isF32())
    max = CastOp::create(builder, loc, rowsLocal, max);
  rowsSharding(max);
  // The rank's classes: its block of 0, ..., V - 1 (no data moves).
  FailureOr<Value> classIds = rankRowIds(global.getShape().back(), layout.classes, op);
  if (failed(classIds))
    return failure();
  auto sums = VocabStatsOp::create(builder, loc, TypeRange{rowsLocal, rowsLocal},
                                   *x, *ids, *classIds, max);
  auto total = [&](Value part, StringRef what) {
    auto sum = shard::AllReduceOp::create(builder, loc, rowsLocal, gridRef,
                                          layout.classes, part);
    return collective(sum, sum.getResult(), layout.second, rowsGlobal, loc,
                      ("vocab-parallel cross-entropy: " + what).str());
  };
  VocabStats stats{max, total(sums.getSumExp(), "the sums of exponentials"),
                   total(sums.getTarget(), "the label logits"), *classIds};
  vocabStats[key] = stats;
  return stats;
}

/// Each rank's rows are 1/shards of those its gradient divides by; logits
/// split over their classes use the forward's statistics.
LogicalResult Partitioner::partitionCrossEntropyGrad(CrossEntropyGradOp op) {
  LossLayout layout = lossLayout(op);
  OpBuilder builder(op);
  Location loc = op.getLoc();
  Value scale = op.getGrad();
  if (!layout.rows.empty()) {
    auto scalar = RankedTensorType::get({}, builder.getF32Type());
    Value factor = ConstantOp::create(builder, loc, scalar,
                                      builder.getF64FloatAttr(1.0 / grid.ways(layout.rows)));
    scale = MulOp::create(builder, loc, scale, factor);
    for (Value v : {factor, scale}) {
      globals[v] = scalar;
      shardings[v] = Sharding::replicated(0);
    }
  }
  if (layout.classes.empty()) {
    op.getGradMutable().assign(scale);
    return apply(op, {layout.first, layout.second, Sharding::replicated(0)},
                 {layout.first});
  }
  FailureOr<VocabStats> stats = vocabStatsOf(op, layout);
  FailureOr<Value> x = reshard(op.getLogits(), layout.first, op);
  FailureOr<Value> labels = reshard(op.getLabels(), layout.second, op);
  if (failed(stats) || failed(x) || failed(labels))
    return failure();
  RankedTensorType global = globalType(op.getResult());
  auto grad = VocabGradOp::create(builder, loc, x->getType(), *x, *labels,
                                  stats->ids, stats->max, stats->sumExp, scale);
  globals[grad.getResult()] = global;
  shardings[grad.getResult()] = layout.first;
  op.getResult().replaceAllUsesWith(grad.getResult());
  op.erase();
  return success();
}

void Partitioner::makePartialMean(Operation *op, ArrayRef<int16_t> split,
                                  Sharding sharding) {
  Value result = op->getResult(0);
  OpBuilder builder(op->getContext());
  builder.setInsertionPointAfter(op);
  auto scalar = RankedTensorType::get({}, builder.getF32Type());
  auto scale = ConstantOp::create(builder, op->getLoc(), scalar,
                                  builder.getF64FloatAttr(1.0 / grid.ways(split)));
  auto scaled = MulOp::create(builder, op->getLoc(), result, scale);
  result.replaceAllUsesExcept(scaled.getResult(), scaled);
  shardings[scale.getResult()] = Sharding::replicated(0);
  globals[scaled.getResult()] = globalType(result);
  sharding.addPartial(split);
  shardings[scaled.getResult()] = sharding;
}

/// sum, mean and max along one axis. An f32 sum or mean over a split axis
/// reduces each rank's block and leaves partial sums (a mean's scaled by
/// 1/shards: the blocks are equal), so only the result moves; a max, or a
/// 16-bit result that would round before the ranks' values are added, needs
/// the axis whole. Sums and means are linear, so an f32 one keeps the
/// partial sums it is given (a weight gradient summed over the batch, then
/// the sequence, then the microbatches, is summed over the ranks once).
LogicalResult Partitioner::partitionReduction(Operation *op) {
  Value input = op->getOperand(0);
  int64_t rank = globalType(input).getRank();
  int64_t axis =
      normalizeAxis(op->getAttrOfType<IntegerAttr>("axis").getInt(), rank);
  GridAxes split = shardingOf(input).dims[axis];
  bool linear = isa<SumOp, MeanOp>(op) &&
                globalType(op->getResult(0)).getElementType().isF32();
  bool partial = !split.empty() && linear;
  Sharding in = withWhole(input, partial ? ArrayRef<int64_t>{}
                                         : ArrayRef<int64_t>{axis});
  if (linear)
    in.partial = shardingOf(input).partial;
  Sharding out = in;
  if (op->hasAttr("keepdim"))
    out.dims[axis].clear();
  else
    out.dims.erase(out.dims.begin() + axis);
  if (failed(apply(op, {in}, {out})))
    return failure();
  if (!partial)
    return success();
  if (isa<MeanOp>(op)) {
    makePartialMean(op, split, out);
  } else {
    out.addPartial(split);
    shardings[op->getResult(0)] = out;
  }
  return success();
}

LogicalResult Partitioner::gradientsInParamLayout(Operation *update) {
  // A gradient split finer than its param (an expert's, whole on one rank
  // of its ep x dp block) is gathered once here, not once per optimizer
  // op that reads it.
  for (OpOperand &operand : update->getOpOperands()) {
    Operation *def = operand.get().getDefiningOp();
    auto name = def ? def->getAttrOfType<StringAttr>(attr::kGradientOf) : nullptr;
    Value param = name ? params.lookup(name.getValue()) : Value();
    if (!param || !refines(shardingOf(operand.get()), shardingOf(param)))
      continue;
    FailureOr<Value> gathered = reshard(operand.get(), shardingOf(param), update);
    if (failed(gathered))
      return failure();
    operand.set(*gathered);
  }
  return success();
}

LogicalResult Partitioner::partition(Operation *op) {
  if (isa<shard::ShardingOp>(op))
    return success();
  if (op->hasAttr(attr::kUpdateBucket) && failed(gradientsInParamLayout(op)))
    return failure();
  if (auto annotation = dyn_cast<shard::ShardOp>(op))
    return annotate(annotation);
  // A broadcast keeps its input's splits where it does not repeat a dim,
  // as an elementwise op keeps a broadcast operand's (a grouped-query
  // attention's keys split over tp by their heads stay so).
  if (isElementwise(op) || isa<BroadcastOp>(op))
    return partitionElementwise(op);
  if (auto dropout = dyn_cast<DropoutOp>(op)) {
    // Elementwise on whole values (a partial sum is reduced first), each
    // dim's positions split as the dim is: each rank hashes the global
    // positions of its elements, and draws the mask one rank would.
    Sharding in = withWhole(dropout.getInput(), {});
    // Sequence parallelism, as an elementwise op's: a row-parallel
    // matmul's partial sums on their way to the residual stream (Megatron's
    // dropout there) are reduce-scattered along the sequence dim.
    const Sharding &given = shardingOf(dropout.getInput());
    int64_t rank = dropout.getType().getRank();
    if (sequenceParallel && rank >= 2 && !given.partial.empty() &&
        in.dims[rank - 2].empty() &&
        llvm::none_of(given.partial, [&](int16_t a) { return in.uses(a); }) &&
        globalType(dropout.getInput()).getDimSize(rank - 2) % grid.ways(given.partial) == 0) {
      in.dims[rank - 2].assign(given.partial.begin(), given.partial.end());
      sequenceSplit = true;
    }
    SmallVector<Sharding> operands{in};
    for (const GridAxes &axes : in.dims) {
      Sharding positions = Sharding::replicated(1);
      positions.dims[0] = axes;
      operands.push_back(positions);
    }
    operands.append(dropout.getKeys().size(), Sharding::replicated(0));
    return apply(op, operands, {in});
  }
  // A mean over microbatches is linear: it keeps any layout, partial sums
  // included, so a gradient's sum over the ranks runs once, after it.
  if (auto accumulate = dyn_cast<AccumulateOp>(op)) {
    Sharding s = shardingOf(accumulate.getInput());
    return apply(op, {s}, {s});
  }
  if (auto matmul = dyn_cast<MatmulOp>(op))
    return partitionMatmul(matmul);
  if (auto reshape = dyn_cast<ReshapeOp>(op))
    return partitionReshape(reshape);
  if (isa<CrossEntropyOp, MseOp>(op))
    return partitionLoss(op);
  if (auto grad = dyn_cast<CrossEntropyGradOp>(op))
    return partitionCrossEntropyGrad(grad);
  if (auto grad = dyn_cast<EmbeddingGradOp>(op))
    return partitionEmbeddingGrad(grad);
  if (auto transpose = dyn_cast<TransposeOp>(op)) {
    // Moving elements is linear: an f32 partial sum stays one.
    Sharding in = withWhole(transpose.getInput(), {});
    if (transpose.getType().getElementType().isF32())
      in.partial = shardingOf(transpose.getInput()).partial;
    Sharding out = Sharding::replicated(in.dims.size());
    out.partial = in.partial;
    for (auto [d, from] : llvm::enumerate(transpose.getPermutation()))
      out.dims[d] = in.dims[from];
    return apply(op, {in}, {out});
  }
  if (isa<SumOp, MeanOp, MaxOp>(op))
    return partitionReduction(op);
  if (isa<AttentionOp, AttentionGradOp>(op)) {
    // Whole (query, feature) and (key, feature) planes; the batch dims
    // (sequences, heads) split alike in every tensor operand and result,
    // the rows' log-sum-exp ([..., queries]) included.
    Value query = op->getOperand(0);
    int64_t rank = globalType(query).getRank();
    Sharding in = withWhole(query, {rank - 2, rank - 1});
    Sharding rows = in;
    rows.dims.pop_back();
    auto shardingOf = [&](Value v) {
      int64_t r = globalType(v).getRank();
      return r == 0 ? Sharding::replicated(0) : r == rank - 1 ? rows : in;
    };
    SmallVector<Sharding> operands, results;
    for (Value operand : op->getOperands())
      operands.push_back(shardingOf(operand));
    for (Value result : op->getResults())
      results.push_back(shardingOf(result));
    return apply(op, operands, results);
  }
  if (auto softmax = dyn_cast<SoftmaxOp>(op)) {
    int64_t rank = softmax.getType().getRank();
    Sharding in = withWhole(softmax.getInput(),
                            {normalizeAxis(softmax.getAxis(), rank)});
    return apply(op, {in}, {in});
  }
  if (isa<LayerNormOp, RmsNormOp, CausalMaskOp, CausalMaskGradOp>(op)) {
    // Normalizations need whole rows; the mask, whole (query, key) planes.
    Value input = op->getOperand(0);
    int64_t rank = globalType(input).getRank();
    SmallVector<int64_t> whole{rank - 1};
    if (isa<CausalMaskOp, CausalMaskGradOp>(op))
      whole.push_back(rank - 2);
    Sharding in = withWhole(input, whole);
    SmallVector<Sharding> operands{in};
    for (Value other : op->getOperands().drop_front())
      operands.push_back(Sharding::replicated(globalType(other).getRank()));
    return apply(op, operands, {in});
  }
  if (auto norm = dyn_cast<NormGradOp>(op)) {
    // Whole rows, split alike in the input and its gradient; the scale and
    // bias gradients are sums over the rows, so each rank's are partial
    // sums over the axes that split the rows.
    int64_t rank = globalType(norm.getInput()).getRank();
    Sharding rows = withWhole(norm.getInput(), {rank - 1});
    SmallVector<Sharding> operands{rows, rows};
    if (norm.getScale())
      operands.push_back(Sharding::replicated(1));
    Sharding feature = Sharding::replicated(1);
    for (const GridAxes &axes : ArrayRef(rows.dims).drop_back())
      feature.addPartial(axes);
    return apply(op, operands, {rows, feature, feature});
  }
  if (auto embedding = dyn_cast<EmbeddingOp>(op))
    return partitionEmbedding(embedding);
  if (auto split = dyn_cast<SplitOp>(op)) {
    int64_t rank = globalType(split.getInput()).getRank();
    Sharding in = withWhole(split.getInput(), {normalizeAxis(split.getAxis(), rank)});
    SmallVector<Sharding> outs(op->getNumResults(), in);
    return apply(op, {in}, outs);
  }
  if (auto concat = dyn_cast<ConcatOp>(op)) {
    int64_t rank = concat.getType().getRank();
    Sharding in = withWhole(concat.getInputs().front(),
                            {normalizeAxis(concat.getAxis(), rank)});
    SmallVector<Sharding> ins(op->getNumOperands(), in);
    return apply(op, ins, {in});
  }
  if (auto ret = dyn_cast<func::ReturnOp>(op)) {
    // Outputs may stay split (the runtime gathers them); never partial. A
    // param's new value is laid out as the param (one read both through
    // an annotation and directly stays whole, and its update came split:
    // a plan the runtime refused).
    for (OpOperand &operand : ret->getOpOperands()) {
      Sharding want = withWhole(operand.get(), {});
      auto updates = func.getResultAttrOfType<StringAttr>(operand.getOperandNumber(),
                                                          attr::kUpdates);
      if (Value param = updates ? params.lookup(updates.getValue()) : Value())
        want = withWhole(param, {});
      FailureOr<Value> local = reshard(operand.get(), want, op);
      if (failed(local))
        return failure();
      operand.set(*local);
    }
    return success();
  }
  if (isa<MoeRouteOp, MoeGateOp, MoeGateGradOp, MoeDispatchOp, MoeCombineOp,
          MoeSlotDotOp, MoeStatsOp>(op))
    return partitionMoe(op);
  // Anything else (constants, arange, ops without a rule) runs whole on
  // every rank.
  return partitionWhole(op);
}

LogicalResult Partitioner::partitionWhole(Operation *op) {
  SmallVector<Sharding> operands, results;
  for (Value operand : op->getOperands())
    operands.push_back(Sharding::replicated(
        isa<RankedTensorType>(operand.getType()) ? globalType(operand).getRank() : 0));
  for (Value result : op->getResults())
    results.push_back(Sharding::replicated(
        isa<RankedTensorType>(result.getType())
            ? cast<RankedTensorType>(result.getType()).getRank()
            : 0));
  return apply(op, operands, results);
}

LogicalResult Partitioner::run() {
  Block &body = func.getBody().front();
  // Hand-written IR (loom-opt) may hold what the front end never builds:
  // values other than static tensors, a split over an axis the grid lacks.
  // Each is a diagnostic here (they had crashed the partitioner, or left a
  // type of size kDynamic / 2 in its output).
  auto check = [&](Value value, Location loc) -> LogicalResult {
    Type type = value.getType();
    auto tensor = dyn_cast<RankedTensorType>(type);
    if (isa<shard::ShardingType>(type) || (tensor && tensor.hasStaticShape()))
      return success();
    return emitError(loc, "loom-partition splits tensors of static shapes, not ") << type;
  };
  for (BlockArgument arg : body.getArguments())
    if (failed(check(arg, func.getLoc())))
      return failure();
  WalkResult checked = func.walk([&](Operation *op) {
    for (Value result : op->getResults())
      if (failed(check(result, op->getLoc())))
        return WalkResult::interrupt();
    if (isa<func::ReturnOp>(op))
      for (Value operand : op->getOperands())
        if (!isa<RankedTensorType>(operand.getType())) {
          op->emitError("loom-partition splits a model's tensor results, not ")
              << operand.getType();
          return WalkResult::interrupt();
        }
    if (auto sharding = dyn_cast<shard::ShardingOp>(op))
      for (shard::GridAxesAttr axes : sharding.getSplitAxes().getAxes())
        for (int16_t axis : axes.asArrayRef())
          if (axis < 0 || axis >= static_cast<int16_t>(grid.sizes.size())) {
            op->emitError("split over grid axis ")
                << axis << ", but the grid has " << grid.sizes.size() << " axes";
            return WalkResult::interrupt();
          }
    return WalkResult::advance();
  });
  if (checked.wasInterrupted())
    return failure();
  for (BlockArgument arg : body.getArguments())
    if (auto name = func.getArgAttrOfType<StringAttr>(arg.getArgNumber(), attr::kParam))
      params[name.getValue()] = arg;
  SmallVector<Operation *> ops;
  for (Operation &op : body)
    ops.push_back(&op);
  for (Operation *op : ops)
    if (failed(partition(op)))
      return failure();
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(body)))
    if (isa<shard::ShardingOp>(op) && op.use_empty())
      op.erase();

  // The per-rank signature, and how each argument and result is split.
  // All at once: a setArgAttr per argument rebuilds the array of every
  // argument's attributes (quadratic in a deep model's params).
  Builder builder(func.getContext());
  auto withSharding = [&](DictionaryAttr attrs, const Sharding &sharding) {
    if (sharding.isReplicated())
      return attrs;
    NamedAttrList list(attrs);
    list.set(attr::kSharding, shardingAttr(builder, sharding));
    return list.getDictionary(func.getContext());
  };
  SmallVector<DictionaryAttr> argAttrs, resultAttrs;
  func.getAllArgAttrs(argAttrs);
  for (BlockArgument arg : body.getArguments())
    argAttrs[arg.getArgNumber()] = withSharding(argAttrs[arg.getArgNumber()], shardingOf(arg));
  func.setAllArgAttrs(argAttrs);
  auto ret = cast<func::ReturnOp>(body.getTerminator());
  func.getAllResultAttrs(resultAttrs);
  for (auto [i, value] : llvm::enumerate(ret.getOperands()))
    resultAttrs[i] = withSharding(resultAttrs[i], shardingOf(value));
  func.setAllResultAttrs(resultAttrs);
  func.setFunctionType(builder.getFunctionType(body.getArgumentTypes(),
                                               ret.getOperandTypes()));
  return success();
}

namespace {
struct LoomPartition : public loom::impl::LoomPartitionBase<LoomPartition> {
  using LoomPartitionBase::LoomPartitionBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto grids = llvm::to_vector(module.getOps<shard::GridOp>());
    if (grids.empty())
      return;
    Grid grid(grids.front());
    if (grid.ways(llvm::to_vector(llvm::seq<int16_t>(0, grid.sizes.size()))) == 1)
      return; // one device: the model itself is the per-rank program
    SmallVector<func::FuncOp> models;
    for (auto func : module.getOps<func::FuncOp>())
      if (func.isPublic() && !func.isExternal() &&
          !func->hasAttr(attr::kPartitionOf) && !func->hasAttr(attr::kKernel))
        models.push_back(func);
    for (func::FuncOp model : models) {
      if (module.lookupSymbol((model.getSymName() + "_spmd").str()))
        continue; // already partitioned
      // A stage's ops are partitioned where they are inlined (they had been
      // copied unsplit, and a sharded script's failed with type errors).
      WalkResult stages = model.walk([&](StageOp stage) {
        stage.emitError("'loom.stage' must be inlined (loom-inline-stages) before "
                        "loom-partition");
        return WalkResult::interrupt();
      });
      if (stages.wasInterrupted())
        return signalPassFailure();
      func::FuncOp spmd = model.clone();
      spmd.setSymName((model.getSymName() + "_spmd").str());
      spmd->setAttr(attr::kPartitionOf, model.getSymNameAttr());
      spmd->setAttr(attr::kGrid,
                    FlatSymbolRefAttr::get(grid.op.getSymNameAttr()));
      module.getBody()->getOperations().insertAfter(model->getIterator(), spmd);
      Partitioner partitioner(grid, spmd, remarks, sequenceParallel);
      if (failed(partitioner.run()))
        return signalPassFailure();
      // Said rather than silently a no-op, as the driver's idle options are.
      if (sequenceParallel && !partitioner.splitsSequence())
        emitWarning(model.getLoc())
            << "--sequence-parallel has no effect on model '" << model.getSymName()
            << "': no row-parallel matmul's partial sums meet a residual stream "
               "whose sequence dim (the second to last) the ranks divide and "
               "no other axis splits";
      // What the partitioning built and nothing reads goes: an unused MoE
      // block's token exchange map (its routing still feeding the aux
      // loss) had no phase but the update's, and the plan computed it
      // after the microbatches from one microbatch's values.
      sliceEarly(spmd);
      eraseDeadOps(spmd.getBody().front());
      // The executable runs on every rank of the grid; say when some do
      // nothing of their own (a pipeline axis splits the stages instead).
      auto pipelineAxis = model->getAttrOfType<StringAttr>(attr::kPipelineAxis);
      for (auto [axis, size] : llvm::enumerate(grid.sizes)) {
        if (size <= 1 || partitioner.splitsOver(axis) ||
            (pipelineAxis && pipelineAxis.getValue() == grid.names[axis]))
          continue;
        InFlightDiagnostic warning = emitWarning(grid.op.getLoc())
                                     << "mesh axis '" << grid.names[axis] << "' (" << size
                                     << " ranks) splits no tensor of model '"
                                     << model.getSymName()
                                     << "': its ranks compute the same values";
        // Stages on the default axis `pp` place their ops, but only a
        // `pipeline AXIS` line runs them pipelined: say so where it is
        // missing.
        if (!pipelineAxis && grid.names[axis] == "pp" &&
            model.walk([](Operation *op) {
                   return op->hasAttr(attr::kStage) ? WalkResult::interrupt()
                                                    : WalkResult::advance();
                 }).wasInterrupted())
          warning << "; its stages run pipelined only with a 'pipeline pp' line";
      }
    }
  }
};
} // namespace
