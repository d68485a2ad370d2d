//===- Layout.h - Ranks on the mesh, blocks of sharded tensors --*- C++ -*-===//
//
// The geometry of a partitioned plan (docs/plan-format.md, `mesh` and
// `shard`): a rank's coordinates on the mesh (row-major, the last axis
// varies fastest), its group over some axes, and the block of a tensor it
// holds. Tensors are dense row-major; the copies work on any dtype by its
// element size.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_PLAN_LAYOUT_H
#define LOOM_RUNTIME_PLAN_LAYOUT_H

#include "loom/runtime/comm/Communicator.h"
#include "loom/runtime/plan/Plan.h"
#include "loom/runtime/support/Shape.h"

#include <cstddef>
#include <cstdint>
#include <vector>

namespace loom::runtime {

/// Rank `rank`'s coordinate on every axis of `mesh`: for dp=2 tp=2, rank 1
/// is {0, 1} and rank 2 {1, 0}.
std::vector<unsigned> meshCoordinates(const PlanMesh &mesh, unsigned rank);
/// The rank at `coordinates` (one per axis).
unsigned meshRank(const PlanMesh &mesh,
                  const std::vector<unsigned> &coordinates);

/// The product of the sizes of `axes` (indices into mesh.axes).
unsigned axesSize(const PlanMesh &mesh, const std::vector<unsigned> &axes);
/// `coordinates` on `axes` linearized with the first axis major: the block
/// index along a dim split over `axes`, or the index in a group over them.
unsigned axesIndex(const PlanMesh &mesh,
                   const std::vector<unsigned> &coordinates,
                   const std::vector<unsigned> &axes);
/// Every axis of `mesh`, in order: a group over them is the whole world.
std::vector<unsigned> allAxes(const PlanMesh &mesh);

/// Rank `rank`'s group over `axes`: the ranks that share its coordinates on
/// every other axis, ordered by axesIndex over `axes`; its color is the
/// linearized coordinates on the other axes.
CommGroup meshGroup(const PlanMesh &mesh, unsigned rank,
                    const std::vector<unsigned> &axes);

/// Whether rank `rank` holds `buffer`'s bytes: always, but for a pipelined
/// plan's buffer with a `held` record, which only the ranks at those
/// pipeline coordinates hold.
bool holdsBuffer(const Plan &plan, const PlanBuffer &buffer, unsigned rank);
/// The same for the ranks at `coordinate` of the pipeline axis.
bool heldAt(const PlanBuffer &buffer, unsigned coordinate);
/// The rank a gather takes `buffer`'s replicated blocks from, for the one
/// whose coordinates are all 0: the same rank, but at the first holding
/// pipeline coordinate for a buffer with a `held` record.
unsigned holderOfBlock(const Plan &plan, const PlanBuffer &buffer,
                       unsigned rank);

/// Per dim of `buffer`, the index of rank `rank`'s block along it (0 for a
/// whole dim): the rank holds elements [index * shape[d], (index + 1) *
/// shape[d]) of global dim d.
std::vector<uint64_t> shardBlockIndex(const PlanMesh &mesh,
                                      const PlanBuffer &buffer, unsigned rank);

/// Copies the block of shape `blockShape` at block index `index` (per dim;
/// it starts at element index[d] * blockShape[d]) out of `whole`, a tensor
/// of shape `wholeShape`, into `block` (dense). Every blockShape[d] times
/// (index[d] + 1) must be at most wholeShape[d].
void copyBlockOut(const void *whole, const Shape &wholeShape, void *block,
                  const Shape &blockShape, const std::vector<uint64_t> &index,
                  size_t elementSize);
/// The inverse: writes `block` into its place in `whole`.
void copyBlockIn(void *whole, const Shape &wholeShape, const void *block,
                 const Shape &blockShape, const std::vector<uint64_t> &index,
                 size_t elementSize);

/// A block index that is `index` along `dim` and 0 elsewhere, for `rank`
/// dims: the blocks collectives split and concatenate along one dim.
std::vector<uint64_t> blockAlong(size_t rank, unsigned dim, uint64_t index);

/// Rank `rank`'s block of `buffer` (buffer.bytes) out of the whole tensor
/// (buffer.globalBytes); a replicated buffer's block is the whole.
void extractShard(const PlanMesh &mesh, const PlanBuffer &buffer, unsigned rank,
                  const void *whole, void *block);
/// The whole tensor from every rank's block: `blocks` holds mesh.numRanks
/// blocks of buffer.bytes, in rank order. Ranks holding copies of the same
/// block (those that differ only on axes the buffer is not split over)
/// contribute one of them: that of rank `replica`'s coordinates on those
/// axes (rank 0: coordinate 0; holderOfBlock for a `held` buffer).
void assembleShards(const PlanMesh &mesh, const PlanBuffer &buffer,
                    const void *blocks, void *whole, unsigned replica = 0);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_PLAN_LAYOUT_H
