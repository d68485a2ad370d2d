//===- Sharding.h - How a tensor is laid out over the device grid -*- C++ -*-===//
//
// The partitioner's view of a value: per dimension, the grid axes that split
// it, and the axes over which it is a partial sum. Axes of size 1 never
// appear (splitting over one device is no split), so "replicated" means
// every rank holds the whole tensor.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TRANSFORMS_SHARDING_H
#define LOOM_TRANSFORMS_SHARDING_H

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinTypes.h"
#include "llvm/ADT/SmallVector.h"

#include <string>

namespace mlir::loom {

using GridAxes = SmallVector<int16_t, 2>;

struct Sharding {
  /// dims[d]: the axes splitting dim d, major first (empty: whole).
  SmallVector<GridAxes, 4> dims;
  /// The value is the sum over these axes of the ranks' values.
  GridAxes partial;

  static Sharding replicated(int64_t rank) {
    Sharding s;
    s.dims.resize(rank);
    return s;
  }
  bool isReplicated() const;
  /// Whether `axis` splits some dim or is partial.
  bool uses(int16_t axis) const;
  /// Makes the value partial over `axes` too, kept in axis order: partial
  /// sums over a set of axes reached in either order (a gradient split
  /// [dp, tp] summed dim by dim, another split [tp, dp]) compare equal, so
  /// their adds wait for one all-reduce (ZeRO's grad norm had one 4-byte
  /// all-reduce a param).
  void addPartial(ArrayRef<int16_t> axes);
  bool operator==(const Sharding &other) const {
    return dims == other.dims && partial == other.partial;
  }
  bool operator!=(const Sharding &other) const { return !(*this == other); }
};

/// The grid a model is partitioned over: axis names and sizes.
struct Grid {
  mutable shard::GridOp op; // ODS accessors are not const
  SmallVector<std::string> names;
  SmallVector<int64_t> sizes;

  explicit Grid(shard::GridOp op);
  /// The number of ranks the axes span together.
  int64_t ways(ArrayRef<int16_t> axes) const;
  /// "tp", "dp+tp" (major first; "-" for none).
  std::string format(ArrayRef<int16_t> axes, StringRef separator = "+") const;
  /// One entry per dim: "-" or the axes ("dp,-").
  std::string format(const Sharding &sharding) const;
  /// `split` without axes of size 1.
  GridAxes effective(ArrayRef<int16_t> split) const;
  /// One rank's block of a tensor of `global` type.
  RankedTensorType localType(RankedTensorType global,
                             const Sharding &sharding) const;
};

/// The `loom.sharding` attribute of a per-rank program's argument or
/// result (per dim, an array of grid axes), and back.
ArrayAttr shardingAttr(Builder &builder, const Sharding &sharding);
Sharding shardingFromAttr(ArrayAttr attr);

/// For `reshape` from `in` to `out`: the result's sharding when the input is
/// split as `input`, or failure when some split cannot stay split through
/// the reshape (the caller gathers those dims first). `gather` receives the
/// input dims that must be whole.
Sharding reshapeSharding(const Grid &grid, ArrayRef<int64_t> in,
                         ArrayRef<int64_t> out, const Sharding &input,
                         SmallVectorImpl<int64_t> &gather);

} // namespace mlir::loom

#endif // LOOM_TRANSFORMS_SHARDING_H
