//===- LayoutTest.cpp - Mesh coordinates, groups and tensor blocks --------===//

#include "TestUtil.h"

#include "loom/runtime/plan/Layout.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <set>
#include <string>
#include <vector>

using namespace loom::runtime;
using loom::test::linear;
using loom::test::next;
using loom::test::product;
using loom::test::sealLines;

namespace {
/// A plan with mesh `axes` and one buffer of `dtype` and local `shape`,
/// sharded by `spec` (none if empty).
Plan planWith(const std::string &axes, const std::string &dtype,
              const std::string &shape, const std::string &spec) {
  std::vector<std::string> lines = {
      "loom-plan 1",   "model m",
      "device cpu",    "mesh g " + axes,
      "arena 1048576", "buffer 0 t temp " + dtype + " " + shape + " 0"};
  if (!spec.empty())
    lines.push_back("shard 0 " + spec);
  Plan plan;
  std::string error;
  EXPECT_TRUE(parsePlan(sealLines(lines), plan, error)) << error;
  return plan;
}

/// Element `index` of a test tensor: its bytes spell the index (low byte
/// first), so that every element of a whole tensor differs.
void fillIndexed(std::vector<unsigned char> &data, size_t elementSize) {
  for (size_t i = 0; i < data.size() / elementSize; ++i)
    for (size_t b = 0; b < elementSize; ++b)
      data[i * elementSize + b] =
          static_cast<unsigned char>((i >> (8 * (b % 4))) + 7 * b);
}


/// Every divisor of `n`.
std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> result;
  for (int64_t d = 1; d <= n; ++d)
    if (n % d == 0)
      result.push_back(d);
  return result;
}
} // namespace

TEST(Layout, CoordinatesAreRowMajor) {
  Plan plan = planWith("dp=2 tp=2", "f32", "4", "");
  const PlanMesh &mesh = plan.mesh;
  EXPECT_EQ(meshCoordinates(mesh, 0), (std::vector<unsigned>{0, 0}));
  EXPECT_EQ(meshCoordinates(mesh, 1), (std::vector<unsigned>{0, 1}));
  EXPECT_EQ(meshCoordinates(mesh, 2), (std::vector<unsigned>{1, 0}));
  EXPECT_EQ(meshCoordinates(mesh, 3), (std::vector<unsigned>{1, 1}));

  Plan three = planWith("a=2 b=3 c=4", "f32", "4", "");
  const PlanMesh &cube = three.mesh;
  EXPECT_EQ(cube.numRanks, 24u);
  EXPECT_EQ(meshCoordinates(cube, 1), (std::vector<unsigned>{0, 0, 1}));
  EXPECT_EQ(meshCoordinates(cube, 4), (std::vector<unsigned>{0, 1, 0}));
  EXPECT_EQ(meshCoordinates(cube, 12), (std::vector<unsigned>{1, 0, 0}));
  EXPECT_EQ(meshCoordinates(cube, 23), (std::vector<unsigned>{1, 2, 3}));
  for (unsigned rank = 0; rank < cube.numRanks; ++rank)
    EXPECT_EQ(meshRank(cube, meshCoordinates(cube, rank)), rank);

  std::vector<unsigned> at = {1, 2, 3};
  EXPECT_EQ(axesSize(cube, {0, 2}), 8u);
  EXPECT_EQ(axesSize(cube, {}), 1u);
  EXPECT_EQ(axesIndex(cube, at, {0, 2}), 1u * 4 + 3);
  EXPECT_EQ(axesIndex(cube, at, {2, 0}), 3u * 2 + 1);
  EXPECT_EQ(axesIndex(cube, at, {1}), 2u);
  EXPECT_EQ(axesIndex(cube, at, {0, 1, 2}), 23u);
  EXPECT_EQ(axesIndex(cube, at, {}), 0u);
  EXPECT_EQ(allAxes(cube), (std::vector<unsigned>{0, 1, 2}));
}

TEST(Layout, GroupsShareTheOtherCoordinates) {
  Plan plan = planWith("dp=2 tp=2", "f32", "4", "");
  const PlanMesh &mesh = plan.mesh;
  CommGroup tp = meshGroup(mesh, 3, {1});
  EXPECT_EQ(tp.ranks, (std::vector<unsigned>{2, 3}));
  EXPECT_EQ(tp.index, 1u);
  EXPECT_EQ(tp.color, 1u);
  EXPECT_EQ(tp.axes, (std::vector<unsigned>{1}));
  CommGroup dp = meshGroup(mesh, 1, {0});
  EXPECT_EQ(dp.ranks, (std::vector<unsigned>{1, 3}));
  EXPECT_EQ(dp.index, 0u);
  EXPECT_EQ(dp.color, 1u);
  CommGroup all = meshGroup(mesh, 2, {0, 1});
  EXPECT_EQ(all.ranks, (std::vector<unsigned>{0, 1, 2, 3}));
  EXPECT_EQ(all.index, 2u);
  EXPECT_EQ(all.color, 0u);
  // Group order follows the axes as given, the first major.
  CommGroup swapped = meshGroup(mesh, 2, {1, 0});
  EXPECT_EQ(swapped.ranks, (std::vector<unsigned>{0, 2, 1, 3}));
  EXPECT_EQ(swapped.index, 1u);

  // On a 3-D mesh, for every axis list: the groups partition the world, a
  // member's index is its coordinates over the axes, every member sees the
  // same group, and the color tells the groups apart.
  Plan three = planWith("a=2 b=3 c=4", "f32", "4", "");
  const PlanMesh &cube = three.mesh;
  const std::vector<std::vector<unsigned>> axisLists = {
      {0}, {1}, {2}, {0, 1}, {2, 0}, {1, 2}, {2, 1, 0}, {0, 1, 2}};
  for (const std::vector<unsigned> &axes : axisLists) {
    std::set<unsigned> colors;
    for (unsigned rank = 0; rank < cube.numRanks; ++rank) {
      CommGroup group = meshGroup(cube, rank, axes);
      ASSERT_EQ(group.size(), axesSize(cube, axes));
      EXPECT_EQ(group.ranks[group.index], rank);
      colors.insert(group.color);
      std::vector<unsigned> mine = meshCoordinates(cube, rank);
      for (unsigned j = 0; j < group.size(); ++j) {
        std::vector<unsigned> theirs = meshCoordinates(cube, group.ranks[j]);
        EXPECT_EQ(axesIndex(cube, theirs, axes), j);
        for (unsigned axis = 0; axis < 3; ++axis)
          if (std::find(axes.begin(), axes.end(), axis) == axes.end())
            EXPECT_EQ(theirs[axis], mine[axis]);
        CommGroup seen = meshGroup(cube, group.ranks[j], axes);
        EXPECT_EQ(seen.ranks, group.ranks);
        EXPECT_EQ(seen.color, group.color);
        EXPECT_EQ(seen.index, j);
      }
    }
    EXPECT_EQ(colors.size(), cube.numRanks / axesSize(cube, axes));
  }
}

TEST(Layout, BlockIndicesFollowTheShardSpec) {
  Plan plan = planWith("dp=2 tp=2", "f32", "4,8", "dp,-");
  const PlanBuffer &rows = plan.buffers[0];
  EXPECT_EQ(shardBlockIndex(plan.mesh, rows, 0), (std::vector<uint64_t>{0, 0}));
  EXPECT_EQ(shardBlockIndex(plan.mesh, rows, 1), (std::vector<uint64_t>{0, 0}));
  EXPECT_EQ(shardBlockIndex(plan.mesh, rows, 2), (std::vector<uint64_t>{1, 0}));
  // `+`: tp major, dp minor.
  plan = planWith("dp=2 tp=2", "f32", "4,8", "-,tp+dp");
  const PlanBuffer &cols = plan.buffers[0];
  EXPECT_EQ(cols.globalShape, (Shape{4, 32}));
  EXPECT_EQ(shardBlockIndex(plan.mesh, cols, 0)[1], 0u);
  EXPECT_EQ(shardBlockIndex(plan.mesh, cols, 1)[1], 2u); // dp 0, tp 1
  EXPECT_EQ(shardBlockIndex(plan.mesh, cols, 2)[1], 1u); // dp 1, tp 0
  EXPECT_EQ(shardBlockIndex(plan.mesh, cols, 3)[1], 3u);
  // Replicated: every index 0.
  plan = planWith("dp=2 tp=2", "f32", "4,8", "");
  EXPECT_EQ(shardBlockIndex(plan.mesh, plan.buffers[0], 3),
            (std::vector<uint64_t>{0, 0}));
}

TEST(Layout, CopiesEveryBlockOfOneToFourDims) {
  const std::vector<Shape> shapes = {{12},         {4, 6},       {2, 3, 4},
                                     {2, 4, 3, 6}, {1, 6, 1, 4}, {3, 1, 2}};
  size_t checked = 0;
  for (const Shape &whole : shapes) {
    for (size_t element : {size_t(1), size_t(2), size_t(4), size_t(8)}) {
      std::vector<unsigned char> data(product(whole) * element);
      fillIndexed(data, element);
      // Every block shape: per dim a divisor of the whole dim.
      Shape block(whole.size(), 1);
      std::vector<std::vector<int64_t>> options;
      for (int64_t dim : whole)
        options.push_back(divisors(dim));
      std::vector<uint64_t> choice(whole.size(), 0);
      Shape choices;
      for (const auto &option : options)
        choices.push_back(static_cast<int64_t>(option.size()));
      do {
        Shape counts(whole.size());
        for (size_t d = 0; d < whole.size(); ++d) {
          block[d] = options[d][choice[d]];
          counts[d] = whole[d] / block[d];
        }
        std::vector<unsigned char> assembled(data.size(), 0);
        std::vector<uint64_t> index(whole.size(), 0);
        do {
          // Out: the block's elements, by the definition.
          std::vector<unsigned char> out(product(block) * element, 0xee);
          copyBlockOut(data.data(), whole, out.data(), block, index, element);
          std::vector<uint64_t> at(whole.size(), 0);
          bool same = true;
          do {
            std::vector<uint64_t> source(whole.size());
            for (size_t d = 0; d < whole.size(); ++d)
              source[d] = index[d] * static_cast<uint64_t>(block[d]) + at[d];
            same &= std::memcmp(out.data() + linear(block, at) * element,
                                data.data() + linear(whole, source) * element,
                                element) == 0;
          } while (next(block, at));
          EXPECT_TRUE(same) << formatShape(whole) << " block "
                            << formatShape(block) << " element " << element;
          // In: writes only its box.
          std::vector<unsigned char> target(data.size(), 0);
          copyBlockIn(target.data(), whole, out.data(), block, index, element);
          size_t written = 0;
          for (unsigned char byte : target)
            written += byte != 0;
          size_t expected = 0;
          for (unsigned char byte : out)
            expected += byte != 0;
          EXPECT_EQ(written, expected);
          copyBlockIn(assembled.data(), whole, out.data(), block, index,
                      element);
          ++checked;
        } while (next(counts, index));
        EXPECT_EQ(assembled, data)
            << formatShape(whole) << " block " << formatShape(block);
      } while (next(choices, choice));
    }
  }
  EXPECT_GT(checked, 1000u);
}

TEST(Layout, ExtractsAndAssemblesShards) {
  struct Case {
    const char *axes;
    const char *dtype;
    const char *shape;
    const char *spec;
  };
  const Case cases[] = {
      {"a=2 b=3 c=2", "bf16", "2,3,4", "b,-,c+a"},
      {"a=2 b=3 c=2", "f32", "2,3,4", "b,-,-"},
      {"a=2 b=3 c=2", "i64", "2,3,4", "a+b+c,-,-"},
      {"a=2 b=3 c=2", "f16", "5", "c+b"},
      {"dp=2 tp=2", "i32", "2,2,2,2", "dp,tp,-,-"},
      {"dp=2 tp=2", "f32", "3,4", ""},
      {"dp=4", "f32", "1,1,1,3", "-,-,-,dp"},
  };
  for (const Case &c : cases) {
    Plan plan = planWith(c.axes, c.dtype, c.shape, c.spec);
    const PlanMesh &mesh = plan.mesh;
    const PlanBuffer &buffer = plan.buffers[0];
    size_t element = dtypeSize(buffer.dtype);
    std::vector<unsigned char> whole(buffer.globalBytes);
    fillIndexed(whole, element);
    std::vector<unsigned char> blocks(mesh.numRanks * buffer.bytes);
    for (unsigned rank = 0; rank < mesh.numRanks; ++rank) {
      unsigned char *block = blocks.data() + rank * buffer.bytes;
      extractShard(mesh, buffer, rank, whole.data(), block);
      // By the contract: dim d's block index is the rank's coordinates
      // over the dim's axes, first major.
      std::vector<unsigned> coordinates = meshCoordinates(mesh, rank);
      std::vector<uint64_t> at(buffer.shape.size(), 0);
      bool same = true;
      do {
        std::vector<uint64_t> global(at.size());
        for (size_t d = 0; d < at.size(); ++d) {
          uint64_t index = 0;
          if (!buffer.shard.empty())
            for (unsigned axis : buffer.shard[d])
              index = index * mesh.axes[axis].size + coordinates[axis];
          global[d] = index * static_cast<uint64_t>(buffer.shape[d]) + at[d];
        }
        same &= std::memcmp(block + linear(buffer.shape, at) * element,
                            whole.data() +
                                linear(buffer.globalShape, global) * element,
                            element) == 0;
      } while (next(buffer.shape, at));
      EXPECT_TRUE(same) << c.spec << " rank " << rank;
    }
    // Assembling takes one copy of each block: spoil the other copies.
    std::vector<bool> split(mesh.axes.size(), false);
    for (const auto &axes : buffer.shard)
      for (unsigned axis : axes)
        split[axis] = true;
    for (unsigned rank = 0; rank < mesh.numRanks; ++rank) {
      std::vector<unsigned> coordinates = meshCoordinates(mesh, rank);
      for (size_t axis = 0; axis < split.size(); ++axis)
        if (!split[axis] && coordinates[axis] != 0)
          std::memset(blocks.data() + rank * buffer.bytes, 0xab, buffer.bytes);
    }
    std::vector<unsigned char> assembled(buffer.globalBytes, 0);
    assembleShards(mesh, buffer, blocks.data(), assembled.data());
    EXPECT_EQ(assembled, whole) << c.spec;
  }
}
