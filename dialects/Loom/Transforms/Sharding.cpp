//===- Sharding.cpp - How a tensor is laid out over the device grid -------===//

#include "Loom/Transforms/Sharding.h"

#include "Loom/IR/LoomDialect.h"

using namespace mlir;
using namespace mlir::loom;

bool Sharding::isReplicated() const {
  return partial.empty() &&
         llvm::all_of(dims, [](const GridAxes &axes) { return axes.empty(); });
}

bool Sharding::uses(int16_t axis) const {
  return llvm::is_contained(partial, axis) ||
         llvm::any_of(dims, [&](const GridAxes &axes) {
           return llvm::is_contained(axes, axis);
         });
}

void Sharding::addPartial(ArrayRef<int16_t> axes) {
  partial.append(axes.begin(), axes.end());
  llvm::sort(partial);
}

Grid::Grid(shard::GridOp op) : op(op) {
  auto names = op->getAttrOfType<ArrayAttr>(attr::kAxes);
  for (auto [i, size] : llvm::enumerate(op.getShape())) {
    sizes.push_back(size);
    if (names && i < names.size())
      this->names.push_back(cast<StringAttr>(names[i]).str());
    else
      this->names.push_back("axis" + std::to_string(i));
  }
}

int64_t Grid::ways(ArrayRef<int16_t> axes) const {
  int64_t n = 1;
  for (int16_t axis : axes)
    n *= sizes[axis];
  return n;
}

std::string Grid::format(ArrayRef<int16_t> axes, StringRef separator) const {
  std::string text;
  for (int16_t axis : axes)
    text += (text.empty() ? "" : separator.str()) + names[axis];
  return text.empty() ? "-" : text;
}

std::string Grid::format(const Sharding &sharding) const {
  std::string text;
  for (auto [d, axes] : llvm::enumerate(sharding.dims))
    text += (d ? "," : "") + format(axes);
  return text;
}

GridAxes Grid::effective(ArrayRef<int16_t> split) const {
  GridAxes axes;
  for (int16_t axis : split)
    if (sizes[axis] > 1)
      axes.push_back(axis);
  return axes;
}

RankedTensorType Grid::localType(RankedTensorType global,
                                 const Sharding &sharding) const {
  SmallVector<int64_t> shape(global.getShape());
  for (auto [d, axes] : llvm::enumerate(sharding.dims))
    shape[d] /= ways(axes);
  return RankedTensorType::get(shape, global.getElementType());
}

ArrayAttr mlir::loom::shardingAttr(Builder &builder, const Sharding &sharding) {
  SmallVector<Attribute> dims;
  for (const GridAxes &axes : sharding.dims)
    dims.push_back(builder.getDenseI16ArrayAttr(axes));
  return builder.getArrayAttr(dims);
}

Sharding mlir::loom::shardingFromAttr(ArrayAttr attr) {
  Sharding sharding = Sharding::replicated(attr.size());
  for (auto [d, dim] : llvm::enumerate(attr))
    sharding.dims[d].assign(cast<DenseI16ArrayAttr>(dim).asArrayRef().begin(),
                            cast<DenseI16ArrayAttr>(dim).asArrayRef().end());
  return sharding;
}

Sharding mlir::loom::reshapeSharding(const Grid &grid, ArrayRef<int64_t> in,
                                     ArrayRef<int64_t> out,
                                     const Sharding &input,
                                     SmallVectorImpl<int64_t> &gather) {
  // Dims group into runs with equal products on both sides ([D] and
  // [H, D/H]). A run keeps its split only when just its outermost input dim
  // is split and its outermost output dim divides into as many blocks: then
  // each rank's contiguous block of the input is a contiguous block of the
  // output too.
  Sharding result = Sharding::replicated(out.size());
  size_t i = 0, j = 0;
  while (i < in.size() || j < out.size()) {
    size_t gi = i, gj = j;
    int64_t pi = i < in.size() ? in[i++] : 1;
    int64_t pj = j < out.size() ? out[j++] : 1;
    while (pi != pj) {
      if (pi < pj && i < in.size())
        pi *= in[i++];
      else if (pj < pi && j < out.size())
        pj *= out[j++];
      else
        break; // the shapes disagree; the verifier reports it
    }
    SmallVector<int64_t> split;
    for (size_t d = gi; d < i; ++d)
      if (!input.dims[d].empty())
        split.push_back(d);
    if (split.empty())
      continue;
    // The first dims of size 1 on either side do not change the layout.
    size_t firstIn = gi, firstOut = gj;
    while (firstIn + 1 < i && in[firstIn] == 1)
      ++firstIn;
    while (firstOut + 1 < j && out[firstOut] == 1)
      ++firstOut;
    const GridAxes &axes = input.dims[split.front()];
    if (split.size() == 1 && split.front() == (int64_t)firstIn && firstOut < j) {
      if (out[firstOut] % grid.ways(axes) == 0) {
        result.dims[firstOut] = axes;
        continue;
      }
      // Axes A1 then A2 on a merged dim ([E*C] over [ep, dp]) split it
      // into exactly out[firstOut] blocks by A1, each cut by A2: A1 goes
      // to the outer dim, A2 to the next ([E, C] over [[ep], [dp]]).
      bool cut = false;
      for (size_t n = 1; n < axes.size() && !cut && firstOut + 1 < j; ++n) {
        ArrayRef<int16_t> outer = ArrayRef<int16_t>(axes).take_front(n);
        ArrayRef<int16_t> inner = ArrayRef<int16_t>(axes).drop_front(n);
        if (grid.ways(outer) == out[firstOut] &&
            out[firstOut + 1] % grid.ways(inner) == 0) {
          result.dims[firstOut].assign(outer.begin(), outer.end());
          result.dims[firstOut + 1].assign(inner.begin(), inner.end());
          cut = true;
        }
      }
      if (cut)
        continue;
    }
    // The converse: an outer dim split into exactly its size by A1 and the
    // next by A2 merge into one dim split over A1 then A2.
    if (split.size() == 2 && split[0] == (int64_t)firstIn &&
        split[1] == split[0] + 1 && firstOut < j &&
        grid.ways(input.dims[split[0]]) == in[split[0]] &&
        in[split[1]] % grid.ways(input.dims[split[1]]) == 0 &&
        out[firstOut] % (in[split[0]] * in[split[1]]) == 0) {
      result.dims[firstOut] = input.dims[split[0]];
      result.dims[firstOut].append(input.dims[split[1]].begin(),
                                   input.dims[split[1]].end());
      continue;
    }
    gather.append(split.begin(), split.end());
  }
  return result;
}
