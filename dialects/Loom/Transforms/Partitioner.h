//===- Partitioner.h - The state of loom-partition over one model -*- C++ -*-===//
//
// Private to the pass: the walk over a model copy (Partition.cpp) and its
// expert-parallel rules (PartitionMoe.cpp) share this class.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TRANSFORMS_PARTITIONER_H
#define LOOM_TRANSFORMS_PARTITIONER_H

#include "Loom/IR/LoomOps.h"
#include "Loom/Transforms/Sharding.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"

namespace mlir::loom {

/// Moves each all_slice of the per-rank program `func` above the
/// broadcasts, reshapes and elementwise ops that feed only it,
/// so the rank computes its block rather than the whole value
/// (SliceEarly.cpp).
void sliceEarly(func::FuncOp func);

class Partitioner {
public:
  Partitioner(const Grid &grid, func::FuncOp func, bool remarks,
              bool sequenceParallel)
      : grid(grid), func(func), remarks(remarks),
        sequenceParallel(sequenceParallel) {}

  LogicalResult run();
  /// Whether --sequence-parallel split some residual stream along its
  /// sequence dim (it applies only where partial sums meet one).
  bool splitsSequence() const { return sequenceSplit; }
  /// Whether some value of the program is split or partial over `axis`.
  bool splitsOver(int16_t axis) const {
    return llvm::any_of(shardings, [&](const auto &entry) {
      return entry.second.uses(axis);
    });
  }

private:
  LogicalResult partition(Operation *op);
  LogicalResult annotate(shard::ShardOp annotation);
  LogicalResult partitionElementwise(Operation *op);
  /// Reshards the gradients an optimizer op reads that are split finer
  /// than their params to the params' layout.
  LogicalResult gradientsInParamLayout(Operation *update);
  LogicalResult partitionMatmul(MatmulOp op);
  LogicalResult partitionReshape(ReshapeOp op);
  LogicalResult partitionLoss(Operation *op);
  LogicalResult partitionCrossEntropyGrad(CrossEntropyGradOp op);
  // Embeddings (PartitionEmbedding.cpp).
  LogicalResult partitionEmbedding(EmbeddingOp op);
  LogicalResult partitionEmbeddingGrad(EmbeddingGradOp op);
  /// The rank's block of 0, ..., size - 1 split over `axes` (a
  /// vocab-parallel table's row ids, a cross-entropy's class ids): an
  /// arange sliced, no data moves.
  FailureOr<Value> rankRowIds(int64_t size, const GridAxes &axes, Operation *user);
  /// The axes splitting the rows of the param whose gradient `value`
  /// becomes (through adds, casts and the microbatches' accumulate), if any.
  GridAxes paramRowAxes(Value value);
  /// How a loss lays out its operands: both split alike on their shared
  /// (row) dims, over `rows`; a cross-entropy's classes whole, or split over
  /// `classes` when the logits come so (vocab-parallel).
  struct LossLayout {
    Sharding first, second;
    GridAxes rows, classes;
  };
  LossLayout lossLayout(Operation *op);
  /// A vocab-parallel cross-entropy's row statistics (local values, rows
  /// laid out as the labels): the rows' maxima over every rank, their sums
  /// of exponentials and label logits summed over the ranks, and the
  /// rank's class ids. Built at the forward, reused by the backward.
  struct VocabStats {
    Value max, sumExp, target, ids;
  };
  FailureOr<VocabStats> vocabStatsOf(Operation *op, const LossLayout &layout);
  LogicalResult partitionReduction(Operation *op);
  /// Runs `op` whole on every rank: its operands gathered, partial sums
  /// reduced (ops without a rule of their own).
  LogicalResult partitionWhole(Operation *op);

  // Expert parallelism (PartitionMoe.cpp). A routing whose experts split
  // over an axis moves tokens to their experts and back by all-to-alls
  // (the tokens split over that axis, or over data-parallel axes and it);
  // otherwise its pieces run whole.
  /// One routing's exchange: the axes its tokens split over (in token
  /// order) and those its experts and the all-to-alls split over, the
  /// capacity rows per expert and the rows one rank sends per expert, and
  /// the expert side's maps (loom.moe_exchange_map).
  struct MoeExchange {
    GridAxes tokenAxes, expertAxes;
    int64_t capacity, buffer;
    Value rowSlot, slotRow;
  };
  LogicalResult partitionMoe(Operation *op);
  LogicalResult partitionMoeRoute(MoeRouteOp route);
  /// The exchange of the routing whose results `op` reads, or null.
  const MoeExchange *moeExchangeOf(Operation *op);
  /// The slot buffer `slots` (split over the experts) back at the token
  /// side, in the rank's send layout: one all-to-all, once per value.
  Value moeRowsAtTokens(Value slots, const MoeExchange &exchange, Operation *user);
  /// The send buffer `rows` exchanged over `axes` (one shard.all_to_all).
  Value moeAllToAll(OpBuilder &b, Location loc, Value rows, const GridAxes &axes,
                    StringRef why);
  /// `value` (local, outside any global layout) recorded as itself.
  void setLocal(Value value);
  /// Marks `op`'s f32 result, each rank's mean over its equal block of the
  /// `split` axes, as partial sums of the global mean: scaled by 1/shards.
  void makePartialMean(Operation *op, ArrayRef<int16_t> split,
                       Sharding sharding);
  /// Requires the operand shardings given, and gives `op`'s results theirs.
  LogicalResult apply(Operation *op, ArrayRef<Sharding> operands,
                      ArrayRef<Sharding> results);
  /// Operand `input` with dims `whole` gathered, partial sums reduced.
  Sharding withWhole(Value input, ArrayRef<int64_t> whole);

  FailureOr<Value> reshard(Value value, const Sharding &target, Operation *user);
  Value materialize(Value value, const Sharding &target, Operation *user);
  Value collective(Operation *created, Value result, const Sharding &sharding,
                   RankedTensorType global, Location loc, StringRef why);
  void setResult(Value result, const Sharding &sharding);

  /// A copy: a reference into the map would dangle at the next insertion.
  Sharding shardingOf(Value value) {
    auto it = shardings.find(value);
    if (it == shardings.end())
      it = shardings
               .try_emplace(value, Sharding::replicated(globalType(value).getRank()))
               .first;
    return it->second;
  }
  RankedTensorType globalType(Value value) {
    auto it = globals.find(value);
    return it != globals.end() ? it->second
                               : cast<RankedTensorType>(value.getType());
  }

  const Grid &grid;
  func::FuncOp func;
  bool remarks;
  bool sequenceParallel;
  bool sequenceSplit = false;
  DenseMap<Value, Sharding> shardings;
  DenseMap<Value, RankedTensorType> globals;
  /// The resharded copies made so far: one value per layout is enough.
  DenseMap<Value, llvm::StringMap<Value>> copies;
  /// By (logits, labels) of the forward cross-entropy.
  DenseMap<std::pair<Value, Value>, VocabStats> vocabStats;
  llvm::SmallPtrSet<Value, 8> assignedArgs;
  /// The model's params by name (loom.param), for their gradients.
  llvm::StringMap<Value> params;
  /// By the (per-rank) loom.moe_route.
  DenseMap<Operation *, MoeExchange> moeExchanges;
  DenseMap<Value, Value> moeTokenRows;
  /// Partial sums whose every element is one rank's value, zeros on the
  /// others (a vocab-parallel lookup): rounding each rank's part rounds
  /// the sum exactly, so a cast keeps them partial and the all-reduce
  /// moves the narrow type.
  llvm::SmallPtrSet<Value, 8> disjointPartials;
};

} // namespace mlir::loom

#endif // LOOM_TRANSFORMS_PARTITIONER_H
