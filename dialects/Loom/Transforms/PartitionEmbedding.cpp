//===- PartitionEmbedding.cpp - Vocab-parallel lookups and their gradients ===//
//
// A table whose rows are split over some axes (`wte shard [tp, _]`) stays
// split, as in Megatron-LM's VocabParallelEmbedding: each rank looks its
// ids up among the rows it holds (zeros for the others') and the result is
// a partial sum over those axes, summed where it is read, so the [.., D]
// activations move rather than the whole table once per microbatch. Its
// gradient is scattered into the rank's rows only, split like the param
// it updates. Otherwise the table is gathered whole; the gradient's
// scatter-add of each rank's positions is a partial sum over their axes.
//
//===----------------------------------------------------------------------===//

#include "Partitioner.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"

using namespace mlir;
using namespace mlir::loom;

FailureOr<Value> Partitioner::rankRowIds(int64_t size, const GridAxes &axes,
                                         Operation *user) {
  // One per user: in a pipeline, users on two stages would otherwise
  // exchange it once per microbatch.
  OpBuilder builder(user);
  auto idsType = RankedTensorType::get({size}, builder.getI32Type());
  Value every = ArangeOp::create(builder, user->getLoc(), idsType);
  globals[every] = idsType;
  shardings[every] = Sharding::replicated(1);
  Sharding split = Sharding::replicated(1);
  split.dims[0] = axes;
  return reshard(every, split, user);
}

GridAxes Partitioner::paramRowAxes(Value value) {
  while (true) {
    Operation *def = value.getDefiningOp();
    if (auto name = def ? def->getAttrOfType<StringAttr>(attr::kGradientOf) : nullptr) {
      Value param = params.lookup(name.getValue());
      return param ? shardingOf(param).dims.front() : GridAxes();
    }
    if (!value.hasOneUse())
      return {};
    OpOperand &use = *value.use_begin();
    Operation *user = use.getOwner();
    if (isa<func::ReturnOp>(user)) {
      auto name = func.getResultAttrOfType<StringAttr>(use.getOperandNumber(),
                                                       attr::kOutput);
      Value param = name && name.getValue().starts_with("grad.")
                        ? params.lookup(name.getValue().drop_front(5))
                        : Value();
      return param ? shardingOf(param).dims.front() : GridAxes();
    }
    if (!isa<AddOp, CastOp, AccumulateOp>(user) ||
        globalType(user->getResult(0)).getShape() != globalType(value).getShape())
      return {};
    value = user->getResult(0);
  }
}

/// Whether a table of `vocab` rows can be split over `rows` beside ids and
/// row gradients laid out as `ids` and `other`.
static bool vocabParallel(const Grid &grid, int64_t vocab, const GridAxes &rows,
                          const Sharding &ids, const Sharding &other) {
  return !rows.empty() && vocab % grid.ways(rows) == 0 &&
         llvm::none_of(rows, [&](int16_t axis) {
           return ids.uses(axis) || other.uses(axis);
         });
}

LogicalResult Partitioner::partitionEmbedding(EmbeddingOp op) {
  Sharding ids = withWhole(op.getIds(), {});
  Sharding table = withWhole(op.getTable(), {});
  GridAxes rows = table.dims.front();
  int64_t vocab = globalType(op.getTable()).getDimSize(0);
  Sharding features = Sharding::replicated(1);
  features.dims[0] = table.dims.back();
  if (op.getRows() || !vocabParallel(grid, vocab, rows, ids, features)) {
    Sharding out = ids;
    out.dims.emplace_back();
    return apply(op, {Sharding::replicated(2), ids}, {out});
  }
  FailureOr<Value> held = rankRowIds(vocab, rows, op);
  if (failed(held))
    return failure();
  op.getRowsMutable().assign(*held);
  op.setVocab(vocab);
  // The result's features keep the table's column split up to an axis the
  // ids split too: a result split twice by one axis (ids [b, _], table
  // [a, b]) had each rank compute the diagonal of its blocks only, wrong
  // values with no error (or a verifier error where nothing asked for the
  // result's layout). Dropping the trailing axes gathers only them.
  GridAxes &columns = table.dims.back();
  columns.erase(llvm::find_if(columns, [&](int16_t axis) { return ids.uses(axis); }),
                columns.end());
  // Each result element is one rank's row, zeros on the others: their sum
  // is exact in any element type.
  Sharding out = ids;
  out.dims.push_back(columns);
  out.partial = rows;
  disjointPartials.insert(op.getResult());
  return apply(op, {table, ids, shardingOf(*held)}, {out});
}

/// The scatter-add of each rank's rows of the gradient is a partial sum of
/// the table's (f32 only: a 16-bit table would round each rank's part),
/// so the rows stay split (instead of gathering ids and gradients) and the
/// table's sum over the ranks comes with the gradient's others. The table
/// of a param split by rows is the rank's rows only (vocab-parallel).
LogicalResult Partitioner::partitionEmbeddingGrad(EmbeddingGradOp op) {
  int64_t rank = globalType(op.getIds()).getRank();
  Sharding ids = withWhole(op.getIds(), {});
  Sharding grad = withWhole(op.getGrad(), {});
  // A scatter-add is linear: an f32 gradient's partial sums (a broadcast
  // position embedding's, summed over the split batch) stay partial.
  bool wide = op.getType().getElementType().isF32();
  if (wide && globalType(op.getGrad()).getElementType().isF32())
    grad.partial = shardingOf(op.getGrad()).partial;
  GridAxes positions;
  for (int64_t d = 0; d < rank; ++d) {
    if (llvm::any_of(ids.dims[d], [&](int16_t x) { return grad.uses(x); }) &&
        grad.dims[d] != ids.dims[d])
      ids.dims[d].clear();
    grad.dims[d] = ids.dims[d];
    positions.append(ids.dims[d].begin(), ids.dims[d].end());
  }
  // A 16-bit table takes the rows whole.
  if (!wide) {
    ids = Sharding::replicated(rank);
    for (int64_t d = 0; d < rank; ++d)
      grad.dims[d].clear();
    positions.clear();
  }
  Sharding table = Sharding::replicated(2);
  table.dims[1] = grad.dims.back();
  table.partial = positions;
  table.partial.append(grad.partial.begin(), grad.partial.end());
  GridAxes rows = paramRowAxes(op.getResult());
  int64_t vocab = op.getType().getDimSize(0);
  if (!wide || op.getRows() || !vocabParallel(grid, vocab, rows, ids, grad))
    return apply(op, {ids, grad}, {table});
  FailureOr<Value> held = rankRowIds(vocab, rows, op);
  if (failed(held))
    return failure();
  op.getRowsMutable().assign(*held);
  op.setVocab(vocab);
  table.dims[0] = rows;
  return apply(op, {ids, grad, shardingOf(*held)}, {table});
}
