//===- Layout.cpp - Ranks on the mesh, blocks of sharded tensors ----------===//
//
// A block is a box inside a row-major tensor. Its innermost dims that are
// whole (block dim == tensor dim) are contiguous together with the first
// split dim's run, so a copy moves one run of `run` bytes per position of
// the remaining outer dims.
//
//===----------------------------------------------------------------------===//

#include "loom/runtime/plan/Layout.h"

#include <algorithm>
#include <cstring>

using namespace loom::runtime;

std::vector<unsigned> loom::runtime::meshCoordinates(const PlanMesh &mesh,
                                                     unsigned rank) {
  std::vector<unsigned> coordinates(mesh.axes.size(), 0);
  for (size_t i = mesh.axes.size(); i-- > 0;) {
    coordinates[i] = rank % mesh.axes[i].size;
    rank /= mesh.axes[i].size;
  }
  return coordinates;
}

unsigned loom::runtime::meshRank(const PlanMesh &mesh,
                                 const std::vector<unsigned> &coordinates) {
  unsigned rank = 0;
  for (size_t i = 0; i < mesh.axes.size(); ++i)
    rank = rank * mesh.axes[i].size + coordinates[i];
  return rank;
}

unsigned loom::runtime::axesSize(const PlanMesh &mesh,
                                 const std::vector<unsigned> &axes) {
  unsigned size = 1;
  for (unsigned axis : axes)
    size *= mesh.axes[axis].size;
  return size;
}

unsigned loom::runtime::axesIndex(const PlanMesh &mesh,
                                  const std::vector<unsigned> &coordinates,
                                  const std::vector<unsigned> &axes) {
  unsigned index = 0;
  for (unsigned axis : axes)
    index = index * mesh.axes[axis].size + coordinates[axis];
  return index;
}

std::vector<unsigned> loom::runtime::allAxes(const PlanMesh &mesh) {
  std::vector<unsigned> axes;
  for (unsigned i = 0; i < mesh.axes.size(); ++i)
    axes.push_back(i);
  return axes;
}

CommGroup loom::runtime::meshGroup(const PlanMesh &mesh, unsigned rank,
                                   const std::vector<unsigned> &axes) {
  std::vector<unsigned> coordinates = meshCoordinates(mesh, rank);
  std::vector<bool> inGroup(mesh.axes.size(), false);
  for (unsigned axis : axes)
    inGroup[axis] = true;
  std::vector<unsigned> others;
  for (unsigned i = 0; i < mesh.axes.size(); ++i)
    if (!inGroup[i])
      others.push_back(i);

  CommGroup group;
  group.axes = axes;
  group.index = axesIndex(mesh, coordinates, axes);
  group.color = axesIndex(mesh, coordinates, others);
  unsigned size = axesSize(mesh, axes);
  // Member j: this rank's coordinates with `axes` set to j's digits (the
  // last axis of `axes` varies fastest).
  for (unsigned j = 0; j < size; ++j) {
    std::vector<unsigned> member = coordinates;
    unsigned rest = j;
    for (size_t i = axes.size(); i-- > 0;) {
      member[axes[i]] = rest % mesh.axes[axes[i]].size;
      rest /= mesh.axes[axes[i]].size;
    }
    group.ranks.push_back(meshRank(mesh, member));
  }
  return group;
}

std::vector<uint64_t> loom::runtime::shardBlockIndex(const PlanMesh &mesh,
                                                     const PlanBuffer &buffer,
                                                     unsigned rank) {
  std::vector<uint64_t> index(buffer.shape.size(), 0);
  if (buffer.shard.empty())
    return index;
  std::vector<unsigned> coordinates = meshCoordinates(mesh, rank);
  for (size_t d = 0; d < buffer.shard.size(); ++d)
    index[d] = axesIndex(mesh, coordinates, buffer.shard[d]);
  return index;
}

namespace {
enum class Direction { Out, In };

/// Moves the block between `whole` and `block` (see copyBlockOut).
void copyBlock(Direction direction, char *whole, const Shape &wholeShape,
               char *block, const Shape &blockShape,
               const std::vector<uint64_t> &index, size_t elementSize) {
  size_t rank = wholeShape.size();
  // The contiguous run: the innermost whole dims, times the next dim's
  // block extent.
  size_t inner = rank; // dims [inner, rank) are in the run
  uint64_t run = elementSize;
  while (inner > 0 && blockShape[inner - 1] == wholeShape[inner - 1]) {
    --inner;
    run *= static_cast<uint64_t>(wholeShape[inner]);
  }
  // Strides in bytes of the whole tensor, and the block's start.
  std::vector<uint64_t> stride(rank, 0);
  uint64_t step = elementSize;
  for (size_t d = rank; d-- > 0;) {
    stride[d] = step;
    step *= static_cast<uint64_t>(wholeShape[d]);
  }
  uint64_t start = 0;
  for (size_t d = 0; d < rank; ++d)
    start += index[d] * static_cast<uint64_t>(blockShape[d]) * stride[d];
  size_t outer = inner; // dims [0, outer) are iterated, [outer] in the run
  if (inner > 0) {
    outer = inner - 1;
    run *= static_cast<uint64_t>(blockShape[outer]);
  }
  uint64_t runs = 1;
  for (size_t d = 0; d < outer; ++d)
    runs *= static_cast<uint64_t>(blockShape[d]);

  std::vector<uint64_t> position(outer, 0); // an odometer over [0, outer)
  for (uint64_t r = 0; r < runs; ++r) {
    uint64_t offset = start;
    for (size_t d = 0; d < outer; ++d)
      offset += position[d] * stride[d];
    char *inWhole = whole + offset;
    char *inBlock = block + r * run;
    if (direction == Direction::Out)
      std::memcpy(inBlock, inWhole, run);
    else
      std::memcpy(inWhole, inBlock, run);
    for (size_t d = outer; d-- > 0;) {
      if (++position[d] < static_cast<uint64_t>(blockShape[d]))
        break;
      position[d] = 0;
    }
  }
}
} // namespace

void loom::runtime::copyBlockOut(const void *whole, const Shape &wholeShape,
                                 void *block, const Shape &blockShape,
                                 const std::vector<uint64_t> &index,
                                 size_t elementSize) {
  copyBlock(Direction::Out, static_cast<char *>(const_cast<void *>(whole)),
            wholeShape, static_cast<char *>(block), blockShape, index,
            elementSize);
}

void loom::runtime::copyBlockIn(void *whole, const Shape &wholeShape,
                                const void *block, const Shape &blockShape,
                                const std::vector<uint64_t> &index,
                                size_t elementSize) {
  copyBlock(Direction::In, static_cast<char *>(whole), wholeShape,
            static_cast<char *>(const_cast<void *>(block)), blockShape, index,
            elementSize);
}

std::vector<uint64_t> loom::runtime::blockAlong(size_t rank, unsigned dim,
                                                uint64_t index) {
  std::vector<uint64_t> blocks(rank, 0);
  blocks[dim] = index;
  return blocks;
}

void loom::runtime::extractShard(const PlanMesh &mesh, const PlanBuffer &buffer,
                                 unsigned rank, const void *whole,
                                 void *block) {
  if (!buffer.isSharded()) {
    std::memcpy(block, whole, buffer.bytes);
    return;
  }
  copyBlockOut(whole, buffer.globalShape, block, buffer.shape,
               shardBlockIndex(mesh, buffer, rank), dtypeSize(buffer.dtype));
}

bool loom::runtime::heldAt(const PlanBuffer &buffer, unsigned coordinate) {
  return buffer.held.empty() ||
         std::find(buffer.held.begin(), buffer.held.end(), coordinate) != buffer.held.end();
}

bool loom::runtime::holdsBuffer(const Plan &plan, const PlanBuffer &buffer,
                                unsigned rank) {
  return buffer.held.empty() ||
         heldAt(buffer, meshCoordinates(plan.mesh, rank)[plan.pipeline.axis]);
}

unsigned loom::runtime::holderOfBlock(const Plan &plan, const PlanBuffer &buffer,
                                      unsigned rank) {
  if (buffer.held.empty())
    return rank;
  std::vector<unsigned> at = meshCoordinates(plan.mesh, rank);
  if (!holdsBuffer(plan, buffer, rank))
    at[plan.pipeline.axis] = buffer.held.front();
  return meshRank(plan.mesh, at);
}

void loom::runtime::assembleShards(const PlanMesh &mesh,
                                   const PlanBuffer &buffer, const void *blocks,
                                   void *whole, unsigned replica) {
  const char *bytes = static_cast<const char *>(blocks);
  if (!buffer.isSharded()) {
    std::memcpy(whole, bytes + replica * buffer.bytes, buffer.bytes);
    return;
  }
  std::vector<bool> split(mesh.axes.size(), false);
  for (const std::vector<unsigned> &axes : buffer.shard)
    for (unsigned axis : axes)
      split[axis] = true;
  std::vector<unsigned> source = meshCoordinates(mesh, replica);
  for (unsigned rank = 0; rank < mesh.numRanks; ++rank) {
    std::vector<unsigned> coordinates = meshCoordinates(mesh, rank);
    bool first = true;
    for (size_t axis = 0; axis < mesh.axes.size(); ++axis)
      first &= split[axis] || coordinates[axis] == source[axis];
    if (first)
      copyBlockIn(whole, buffer.globalShape, bytes + rank * buffer.bytes,
                  buffer.shape, shardBlockIndex(mesh, buffer, rank),
                  dtypeSize(buffer.dtype));
  }
}
