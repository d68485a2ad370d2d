//===- SpmdPlanTest.cpp - mesh, shard and collective records --------------===//

#include "TestUtil.h"

#include "loom/runtime/plan/Plan.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace loom::runtime;
using loom::test::examplePlanLines;
using loom::test::sealLines;

namespace {
/// A partitioned version of docs/plan-format.md's example over dp=2 tp=2,
/// without its `end` record (buffers laid out one after the other).
std::vector<std::string> spmdLines() {
  return {
      "loom-plan 1",                                         // 1
      "model mlp",                                           // 2
      "device cpu",                                          // 3
      "mesh gpus dp=2 tp=2",                                 // 4
      "arena 2461696",                                       // 5
      "buffer 0 x input bf16 32,512 2101248",                // 6
      "shard 0 dp,-",                                        // 7
      "buffer 1 w1 param bf16 512,1024 0 normal 0.02",       // 8
      "shard 1 -,tp",                                        // 9
      "buffer 2 b1 param f32 1024 2097152 zeros",            // 10
      "shard 2 tp",                                          // 11
      "buffer 3 w2 param bf16 1024,512 1048576 normal 0.02", // 12
      "shard 3 tp,-",                                        // 13
      "buffer 4 t4 temp bf16 32,1024 2134016",               // 14
      "buffer 5 s5 temp f32 32,1024 2199552",                // 15
      "buffer 6 p6 temp bf16 32,512 2330624",                // 16
      "buffer 7 y output bf16 32,512 2363392",               // 17
      "shard 7 dp,-",                                        // 18
      "buffer 8 s8 temp f32 32,512 2396160",                 // 19
      "kernel mlp_spmd_k0 5",                                // 20
      "kernel mlp_spmd_k1 4",                                // 21
      "step mlp_spmd_k0 0 1 2 4 5",                          // 22
      "step mlp_spmd_k1 4 3 6 8",                            // 23
      "collective all-reduce tp - 6 7",                      // 24
  };
}


/// Parses `lines` with line `index` (0-based) replaced by `line`, or
/// removed if `line` is empty; returns the error, empty if it parsed.
std::string errorWith(std::vector<std::string> lines, size_t index,
                      const std::string &line) {
  if (line.empty())
    lines.erase(lines.begin() + static_cast<long>(index));
  else
    lines[index] = line;
  Plan plan;
  std::string error;
  if (parsePlan(sealLines(lines), plan, error))
    return "";
  return error;
}

std::string errorWithLine(size_t index, const std::string &line) {
  return errorWith(spmdLines(), index, line);
}

/// Parses `lines` with `line` inserted before line `index` (0-based).
std::string errorWithInserted(size_t index, const std::string &line) {
  std::vector<std::string> lines = spmdLines();
  lines.insert(lines.begin() + static_cast<long>(index), line);
  Plan plan;
  std::string error;
  if (parsePlan(sealLines(lines), plan, error))
    return "";
  return error;
}

Plan parse(const std::vector<std::string> &lines) {
  Plan plan;
  std::string error;
  EXPECT_TRUE(parsePlan(sealLines(lines), plan, error)) << error;
  return plan;
}

const std::string kOrder =
    " record out of order (records come in the order loom-plan, model, "
    "device, mesh, pipeline, arena, gpu-image, buffer (each followed by its shard, bound, held and view), "
    "kernel (each followed by its terms), launch, step, collective, accumulate, section, carry and transfer, microbatches, assemble, optimizer, update, end)";
} // namespace

TEST(SpmdPlan, ParsesTheDocumentedExample) {
  // The partitioned plan of examples/mlp.loom in docs/plan-format.md.
  std::vector<std::string> lines = {
      "loom-plan 1",
      "model mlp",
      "device cpu",
      "mesh gpus dp=2 tp=2",
      "arena 2330624",
      "buffer 0 x input bf16 32,512 2293760",
      "shard 0 dp,-",
      "buffer 1 w1 param bf16 512,1024 0 normal 0.02",
      "shard 1 -,tp",
      "buffer 2 b1 param f32 1024 2326528 zeros",
      "shard 2 tp",
      "buffer 3 w2 param bf16 1024,512 1048576 normal 0.02",
      "shard 3 tp,-",
      "buffer 4 t4 temp bf16 32,1024 2228224",
      "buffer 5 s5 temp f32 32,1024 2097152",
      "buffer 6 t6 temp f32 32,512 2097152",
      "buffer 7 t7 temp f32 32,512 2162688",
      "buffer 8 y output bf16 32,512 2097152",
      "shard 8 dp,-",
      "kernel mlp_spmd_k0 5",
      "kernel mlp_spmd_k1 3",
      "kernel mlp_spmd_k2 2",
      "step mlp_spmd_k0 0 1 2 4 5",
      "step mlp_spmd_k1 4 3 6",
      "collective all-reduce tp - 6 7",
      "step mlp_spmd_k2 7 8"};
  std::string text = sealLines(lines);
  EXPECT_EQ(text.substr(text.size() - 13), "end 31f1e621\n");
  Plan plan = parse(lines);
  EXPECT_EQ(plan.buffers[0].globalShape, (Shape{64, 512}));
  EXPECT_EQ(plan.buffers[1].globalShape, (Shape{512, 2048}));
  EXPECT_EQ(plan.buffers[8].globalShape, (Shape{64, 512}));
  ASSERT_EQ(plan.steps.size(), 4u);
  EXPECT_EQ(plan.steps[2].kind, StepKind::Collective);
  EXPECT_EQ(writePlan(plan), text);
  std::string error;
  EXPECT_TRUE(checkPartitionedPlan(parse(examplePlanLines()), plan, error)) << error;
}

TEST(SpmdPlan, ParsesMeshShardsAndCollectives) {
  Plan plan = parse(spmdLines());
  const PlanMesh &mesh = plan.mesh;
  EXPECT_TRUE(mesh.present);
  EXPECT_EQ(mesh.name, "gpus");
  ASSERT_EQ(mesh.axes.size(), 2u);
  EXPECT_EQ(mesh.axes[0].name, "dp");
  EXPECT_EQ(mesh.axes[0].size, 2u);
  EXPECT_EQ(mesh.axes[1].name, "tp");
  EXPECT_EQ(mesh.numRanks, 4u);
  EXPECT_EQ(mesh.line, 4u);
  EXPECT_EQ(mesh.findAxis("tp"), 1);
  EXPECT_EQ(mesh.findAxis("pp"), -1);

  ASSERT_EQ(plan.buffers.size(), 9u);
  const PlanBuffer &x = plan.buffers[0];
  EXPECT_EQ(x.shape, (Shape{32, 512}));
  EXPECT_EQ(x.globalShape, (Shape{64, 512}));
  EXPECT_EQ(x.bytes, 32u * 512 * 2);
  EXPECT_EQ(x.globalElements, 64u * 512);
  EXPECT_EQ(x.globalBytes, 64u * 512 * 2);
  EXPECT_EQ(x.shard, (std::vector<std::vector<unsigned>>{{0}, {}}));
  EXPECT_EQ(x.shardLine, 7u);
  EXPECT_TRUE(x.isSharded());
  EXPECT_EQ(plan.buffers[1].globalShape, (Shape{512, 2048}));
  EXPECT_EQ(plan.buffers[1].line, 8u);
  EXPECT_EQ(plan.buffers[2].globalShape, (Shape{2048}));
  EXPECT_EQ(plan.buffers[3].globalShape, (Shape{2048, 512}));
  // Without a shard record: replicated, global == local.
  const PlanBuffer &t4 = plan.buffers[4];
  EXPECT_TRUE(t4.shard.empty());
  EXPECT_FALSE(t4.isSharded());
  EXPECT_EQ(t4.globalShape, t4.shape);
  EXPECT_EQ(t4.globalBytes, t4.bytes);
  EXPECT_EQ(t4.shardLine, 0u);

  ASSERT_EQ(plan.steps.size(), 3u);
  EXPECT_EQ(plan.steps[0].kind, StepKind::Kernel);
  EXPECT_EQ(plan.steps[1].kernel, 1u);
  const PlanStep &reduce = plan.steps[2];
  EXPECT_EQ(reduce.kind, StepKind::Collective);
  EXPECT_EQ(reduce.line, 24u);
  EXPECT_EQ(reduce.buffers, (std::vector<unsigned>{6, 7}));
  EXPECT_EQ(reduce.collective.kind, CollectiveKind::AllReduce);
  EXPECT_EQ(reduce.collective.axes, (std::vector<unsigned>{1}));
  EXPECT_EQ(reduce.collective.groupSize, 2u);
  EXPECT_EQ(plan.numCollectives(), 1u);

  // A plan without a mesh has one rank and no collectives.
  Plan whole = parse(examplePlanLines());
  EXPECT_FALSE(whole.mesh.present);
  EXPECT_EQ(whole.mesh.numRanks, 1u);
  EXPECT_EQ(whole.numCollectives(), 0u);
  EXPECT_EQ(whole.buffers[0].globalShape, whole.buffers[0].shape);
}

TEST(SpmdPlan, ParsesEveryCollectiveAndMultiAxisShards) {
  std::vector<std::string> lines = spmdLines();
  lines[3] = "mesh m dp=2 tp=2 pp=3";
  // Split over two axes (dp major) and over three; any order of axes.
  lines[6] = "shard 0 dp+tp,-";
  lines[8] = "shard 1 pp,tp+dp";
  lines.insert(lines.end(), {"collective all-gather tp 1 6 4",
                             "collective reduce-scatter tp 1 4 6",
                             "collective all-slice tp 1 4 6",
                             "collective all-to-all dp,tp 1:1 6 7",
                             "collective broadcast pp,dp - 6 7",
                             "collective all-reduce tp,dp,pp - 7 6"});
  Plan plan = parse(lines);
  ASSERT_EQ(plan.mesh.numRanks, 12u);
  EXPECT_EQ(plan.buffers[0].shard,
            (std::vector<std::vector<unsigned>>{{0, 1}, {}}));
  EXPECT_EQ(plan.buffers[0].globalShape, (Shape{128, 512}));
  EXPECT_EQ(plan.buffers[1].shard,
            (std::vector<std::vector<unsigned>>{{2}, {1, 0}}));
  EXPECT_EQ(plan.buffers[1].globalShape, (Shape{1536, 4096}));
  ASSERT_EQ(plan.steps.size(), 9u);
  const PlanCollective &gather = plan.steps[3].collective;
  EXPECT_EQ(gather.kind, CollectiveKind::AllGather);
  EXPECT_EQ(gather.dim, 1u);
  EXPECT_EQ(plan.steps[4].collective.kind, CollectiveKind::ReduceScatter);
  EXPECT_EQ(plan.steps[5].collective.kind, CollectiveKind::AllSlice);
  const PlanCollective &toAll = plan.steps[6].collective;
  EXPECT_EQ(toAll.kind, CollectiveKind::AllToAll);
  EXPECT_EQ(toAll.axes, (std::vector<unsigned>{0, 1}));
  EXPECT_EQ(toAll.groupSize, 4u);
  EXPECT_EQ(toAll.dim, 1u);
  EXPECT_EQ(toAll.concatDim, 1u);
  const PlanCollective &broadcast = plan.steps[7].collective;
  EXPECT_EQ(broadcast.kind, CollectiveKind::Broadcast);
  EXPECT_EQ(broadcast.axes, (std::vector<unsigned>{2, 0}));
  EXPECT_EQ(broadcast.groupSize, 6u);
  EXPECT_EQ(plan.steps[8].collective.groupSize, 12u);
  EXPECT_EQ(plan.numCollectives(), 7u);
  EXPECT_EQ(formatShardSpec(plan.mesh, plan.buffers[1]), "pp,tp+dp");
  EXPECT_EQ(formatAxes(plan.mesh, broadcast.axes), "pp,dp");
  EXPECT_EQ(formatMeshAxes(plan.mesh), "dp=2 tp=2 pp=3");
  EXPECT_EQ(writePlan(plan), sealLines(lines));

  // all-to-all with different dims, over dims that change size.
  std::vector<std::string> other = spmdLines();
  other[15] = "buffer 6 p6 temp bf16 64,512 2330624";
  other[23] = "collective all-to-all tp 1:0 4 6";
  plan = parse(other);
  EXPECT_EQ(plan.steps.back().collective.dim, 1u);
  EXPECT_EQ(plan.steps.back().collective.concatDim, 0u);
  EXPECT_EQ(writePlan(plan), sealLines(other));
}

TEST(SpmdPlan, WriterRoundTrips) {
  std::string text = sealLines(spmdLines());
  Plan plan = parse(spmdLines());
  EXPECT_EQ(writePlan(plan), text);
  // Collectives interleave with steps, in program order.
  std::vector<std::string> lines = spmdLines();
  std::swap(lines[22], lines[23]);
  lines[22] = "collective all-gather tp 1 6 4";
  lines[23] = "step mlp_spmd_k1 4 3 6 8";
  plan = parse(lines);
  EXPECT_EQ(plan.steps[1].kind, StepKind::Collective);
  EXPECT_EQ(plan.steps[2].kind, StepKind::Kernel);
  EXPECT_EQ(writePlan(plan), sealLines(lines));
  // A shard record of whole dims only is kept (and written back).
  lines[17] = "shard 7 -,-";
  plan = parse(lines);
  EXPECT_FALSE(plan.buffers[7].isSharded());
  EXPECT_EQ(plan.buffers[7].shard.size(), 2u);
  EXPECT_EQ(writePlan(plan), sealLines(lines));
}

TEST(SpmdPlan, RejectsBadMeshRecords) {
  const std::string axis = "' (expected AXIS=SIZE: a name "
                           "[A-Za-z_][A-Za-z0-9_]* and a positive size)";
  struct Case {
    size_t index;
    std::string line;
    std::string error;
  };
  const Case cases[] = {
      {3, "mesh gpus", "plan:4: expected 'mesh NAME AXIS=SIZE...'"},
      {3, "mesh", "plan:4: expected 'mesh NAME AXIS=SIZE...'"},
      {3, "mesh g-p dp=2 tp=2",
       "plan:4: bad name 'g-p' (names are [A-Za-z0-9_.]+)"},
      {3, "mesh gpus dp tp=2", "plan:4: bad mesh axis 'dp" + axis},
      {3, "mesh gpus dp=0 tp=2", "plan:4: bad mesh axis 'dp=0" + axis},
      {3, "mesh gpus dp=-1 tp=2", "plan:4: bad mesh axis 'dp=-1" + axis},
      {3, "mesh gpus dp=x tp=2", "plan:4: bad mesh axis 'dp=x" + axis},
      {3, "mesh gpus dp= tp=2", "plan:4: bad mesh axis 'dp=" + axis},
      {3, "mesh gpus =2 tp=2", "plan:4: bad mesh axis '=2" + axis},
      {3, "mesh gpus 2dp=2 tp=2", "plan:4: bad mesh axis '2dp=2" + axis},
      {3, "mesh gpus d.p=2 tp=2", "plan:4: bad mesh axis 'd.p=2" + axis},
      {3, "mesh gpus dp=2=2 tp=2", "plan:4: bad mesh axis 'dp=2=2" + axis},
      {3, "mesh gpus dp=2 dp=2", "plan:4: duplicate mesh axis 'dp'"},
      {3, "mesh gpus dp=65536 tp=32768",
       "plan:4: mesh 'gpus' has more than 2147483647 ranks"},
      {3, "mesh gpus dp=99999999999999999999 tp=2",
       "plan:4: bad mesh axis 'dp=99999999999999999999" + axis},
      {2, "", "plan:3: missing 'device' record before 'mesh'"},
      {4, "mesh again a=1", "plan:5: duplicate 'mesh' record"},
  };
  for (const Case &c : cases)
    EXPECT_EQ(errorWithLine(c.index, c.line), c.error)
        << "line " << c.index << ": '" << c.line << "'";
  // After the arena: out of order.
  std::vector<std::string> late = spmdLines();
  std::swap(late[3], late[4]);
  EXPECT_EQ(errorWith(late, 0, "loom-plan 1"), "plan:5: 'mesh'" + kOrder);
  // The largest mesh, and axes named like the spec's characters allow.
  EXPECT_EQ(errorWithLine(3, "mesh gpus _dp=2 tp=1073741823"),
            "plan:7: shard spec 'dp,-' names unknown mesh axis 'dp' (the "
            "mesh's axes: _dp, tp)");
  // Mesh without arena: the arena is still required.
  EXPECT_EQ(errorWith({"loom-plan 1", "model m", "device cpu", "mesh g a=2"}, 0,
                      "loom-plan 1"),
            "plan:5: missing 'arena' record");
}

TEST(SpmdPlan, RejectsBadShardRecords) {
  const std::string badSpec = "' (expected one entry per dim: '-' or mesh "
                              "axes joined by '+')";
  struct Case {
    size_t index;
    std::string line;
    std::string error;
  };
  const Case cases[] = {
      {6, "shard 0", "plan:7: expected 'shard ID SPEC'"},
      {6, "shard 0 dp -", "plan:7: expected 'shard ID SPEC'"},
      {6, "shard x dp,-", "plan:7: bad number 'x'"},
      {6, "shard 1 dp,-",
       "plan:7: 'shard' record for buffer 1 does not directly follow that "
       "buffer's record"},
      {8, "shard 0 -,tp",
       "plan:9: 'shard' record for buffer 0 does not directly follow that "
       "buffer's record"},
      {6, "shard 0 dp",
       "plan:7: shard spec 'dp' has 1 entry, but buffer 'x' has 2 dims"},
      {6, "shard 0 dp,-,-",
       "plan:7: shard spec 'dp,-,-' has 3 entries, but buffer 'x' has 2 "
       "dims"},
      {10, "shard 2 tp,dp",
       "plan:11: shard spec 'tp,dp' has 2 entries, but buffer 'b1' has 1 "
       "dim"},
      {6, "shard 0 dp,", "plan:7: bad shard spec 'dp," + badSpec},
      {6, "shard 0 ,dp", "plan:7: bad shard spec ',dp" + badSpec},
      {6, "shard 0 dp+,-", "plan:7: bad shard spec 'dp+,-" + badSpec},
      {6, "shard 0 +dp,-", "plan:7: bad shard spec '+dp,-" + badSpec},
      {6, "shard 0 dp++tp,-", "plan:7: bad shard spec 'dp++tp,-" + badSpec},
      {6, "shard 0 pp,-",
       "plan:7: shard spec 'pp,-' names unknown mesh axis 'pp' (the mesh's "
       "axes: dp, tp)"},
      {6, "shard 0 -+dp,-",
       "plan:7: shard spec '-+dp,-' names unknown mesh axis '-' (the mesh's "
       "axes: dp, tp)"},
      {6, "shard 0 dp,dp",
       "plan:7: mesh axis 'dp' appears twice in shard spec 'dp,dp'"},
      {6, "shard 0 dp+tp+dp,-",
       "plan:7: mesh axis 'dp' appears twice in shard spec 'dp+tp+dp,-'"},
      {3, "", "plan:6: 'shard' record without a 'mesh' record"},
  };
  for (const Case &c : cases)
    EXPECT_EQ(errorWithLine(c.index, c.line), c.error)
        << "line " << c.index << ": '" << c.line << "'";
  EXPECT_EQ(errorWithInserted(7, "shard 0 -,dp"),
            "plan:8: duplicate 'shard' record for buffer 0");
  EXPECT_EQ(errorWithInserted(5, "shard 0 dp,-"),
            "plan:6: 'shard' record for buffer 0 does not directly follow "
            "that buffer's record");
  EXPECT_EQ(errorWithInserted(20, "shard 8 dp,-"), "plan:21: 'shard'" + kOrder);

  // Scalars cannot be sharded; global shapes must not overflow.
  std::vector<std::string> small = {
      "loom-plan 1",         "model m",  "device cpu",
      "mesh g a=2147483647", "arena 64", "buffer 0 s temp f32 scalar 0"};
  EXPECT_EQ(errorWith(small, 0, "loom-plan 1"), "");
  small.push_back("shard 0 -");
  EXPECT_EQ(errorWith(small, 0, "loom-plan 1"),
            "plan:7: buffer 's' is a scalar and cannot be sharded");
  small[4] = "arena 34359738368";
  small[5] = "buffer 0 big temp f32 8589934592 0";
  small[6] = "shard 0 a";
  EXPECT_EQ(errorWith(small, 0, "loom-plan 1"),
            "plan:7: buffer 'big' is too large");
  small[5] = "buffer 0 big temp f32 2147483648,2 0";
  small[6] = "shard 0 a,-";
  EXPECT_EQ(errorWith(small, 0, "loom-plan 1"),
            "plan:7: buffer 'big' is too large");
  small[6] = "shard 0 -,-";
  EXPECT_EQ(errorWith(small, 0, "loom-plan 1"), "");
}

TEST(SpmdPlan, RejectsBadCollectiveRecords) {
  struct Case {
    std::string line; // replaces the all-reduce (line 24)
    std::string error;
  };
  const std::string at = "plan:24: ";
  const Case cases[] = {
      {"collective all-reduce tp - 6",
       at + "expected 'collective all-reduce AXES - IN OUT [IN OUT]...'"},
      {"collective all-reduce tp - 6 7 8",
       at + "expected 'collective all-reduce AXES - IN OUT [IN OUT]...'"},
      {"collective all-gather tp 0 6 7 8",
       at + "expected 'collective KIND AXES DIMS IN OUT'"},
      // A bucket's pairs: one dtype, same shapes, no buffer twice.
      {"collective all-reduce tp - 6 7 4 5",
       at + "collective 'all-reduce' sums bf16 buffers, but pair 't4' -> "
            "'s5' is bf16 -> f32 (one message holds every pair)"},
      {"collective all-reduce tp - 6 7 0 4",
       at + "collective 'all-reduce' turns buffer 'x' [32, 512] into buffer "
            "'t4' [32, 1024] (the shapes must agree)"},
      {"collective all-reduce tp - 6 7 0 6",
       at + "collective 'all-reduce' names buffer 'p6' twice"},
      {"collective all-reduce tp - 6 7 4 4",
       at + "collective 'all-reduce' names buffer 't4' twice"},
      {"collective all-reduce tp - 6 7 4 x", at + "bad number 'x'"},
      {"collective all-sum tp - 6 7",
       at + "unknown collective 'all-sum' (expected all-reduce, all-gather, "
            "reduce-scatter, all-slice, all-to-all or broadcast)"},
      {"collective all-reduce pp - 6 7",
       at + "collective names unknown mesh axis 'pp' (the mesh's axes: dp, "
            "tp)"},
      {"collective all-reduce tp,tp - 6 7",
       at + "mesh axis 'tp' appears twice in 'tp,tp'"},
      {"collective all-reduce tp, - 6 7",
       at + "bad mesh axes 'tp,' (expected axis names separated by ',')"},
      {"collective all-reduce dp+tp - 6 7",
       at + "collective names unknown mesh axis 'dp+tp' (the mesh's axes: "
            "dp, tp)"},
      {"collective all-reduce tp - 6 9",
       at + "collective names unknown buffer 9 (the plan has 9 buffers)"},
      {"collective all-reduce tp - x 7", at + "bad number 'x'"},
      {"collective all-reduce tp - 6 -7", at + "bad number '-7'"},
      {"collective all-reduce tp - 6 6",
       at + "collective reads and writes the same buffer 6"},
      {"collective all-reduce tp - 6 8",
       at + "collective 'all-reduce' from bf16 buffer 'p6' into f32 buffer "
            "'s8' (the dtypes must agree)"},
      {"collective all-reduce tp 0 6 7",
       at + "collective 'all-reduce' takes '-' for DIMS, got '0'"},
      {"collective broadcast tp 1:1 6 7",
       at + "collective 'broadcast' takes '-' for DIMS, got '1:1'"},
      {"collective all-reduce tp - 6 4",
       at + "collective 'all-reduce' over tp (2 ranks) turns buffer 'p6' "
            "[32, 512] into [32, 512], but buffer 't4' is [32, 1024]"},
      {"collective broadcast dp,tp - 4 6",
       at + "collective 'broadcast' over dp,tp (4 ranks) turns buffer 't4' "
            "[32, 1024] into [32, 1024], but buffer 'p6' is [32, 512]"},
      {"collective all-gather tp 0 6 4",
       at + "collective 'all-gather' over tp (2 ranks) turns buffer 'p6' "
            "[32, 512] into [64, 512], but buffer 't4' is [32, 1024]"},
      {"collective all-gather dp,tp 1 6 4",
       at + "collective 'all-gather' over dp,tp (4 ranks) turns buffer 'p6' "
            "[32, 512] into [32, 2048], but buffer 't4' is [32, 1024]"},
      {"collective all-gather tp 2 6 4",
       at + "dim 2 is out of range for buffer 'p6' [32, 512]"},
      {"collective all-gather tp - 6 4", at + "bad number '-'"},
      {"collective reduce-scatter dp,tp 1 4 6",
       at + "collective 'reduce-scatter' over dp,tp (4 ranks) turns buffer "
            "'t4' [32, 1024] into [32, 256], but buffer 'p6' is [32, 512]"},
      {"collective reduce-scatter tp 0 4 6",
       at + "collective 'reduce-scatter' over tp (2 ranks) turns buffer 't4' "
            "[32, 1024] into [16, 1024], but buffer 'p6' is [32, 512]"},
      {"collective all-slice tp 0 4 6",
       at + "collective 'all-slice' over tp (2 ranks) turns buffer 't4' "
            "[32, 1024] into [16, 1024], but buffer 'p6' is [32, 512]"},
      {"collective all-to-all tp 1 6 7",
       at + "collective 'all-to-all' takes 'S:C' for DIMS (the split and the "
            "concatenation dims), got '1'"},
      {"collective all-to-all tp 1:2 6 7",
       at + "concatenation dim 2 is out of range for buffer 'p6' [32, 512]"},
      {"collective all-to-all tp 2:1 6 7",
       at + "split dim 2 is out of range for buffer 'p6' [32, 512]"},
      {"collective all-to-all tp x:1 6 7", at + "bad number 'x'"},
      {"collective all-to-all tp 1: 6 7", at + "bad number ''"},
      {"collective all-to-all tp 0:1 6 4",
       at + "collective 'all-to-all' over tp (2 ranks) turns buffer 'p6' "
            "[32, 512] into [16, 1024], but buffer 't4' is [32, 1024]"},
  };
  for (const Case &c : cases)
    EXPECT_EQ(errorWithLine(23, c.line), c.error) << c.line;

  // No two of a collective's buffers share arena bytes: y (line 17) moved
  // into the last 16 KiB of p6's 32 KiB, then a bucket whose pairs
  // overlap (s8, the OUT of x's pair, moved into x's bytes).
  std::vector<std::string> lines = spmdLines();
  lines[16] = "buffer 7 y output bf16 32,512 2347008";
  EXPECT_EQ(errorWith(lines, 23, "collective all-reduce tp - 6 7"),
            "plan:24: collective 'all-reduce' buffers 'p6' and 'y' share arena "
            "bytes");
  lines = spmdLines();
  lines[18] = "buffer 8 s8 temp bf16 32,512 2117632";
  EXPECT_EQ(errorWith(lines, 23, "collective all-reduce tp - 6 7 0 8"),
            "plan:24: collective 'all-reduce' buffers 'x' and 's8' share arena "
            "bytes");

  // Valid forms of each kind (shapes per the kind's rule).
  for (const char *good :
       {"collective all-gather tp 1 6 4", "collective reduce-scatter tp 1 4 6",
        "collective all-slice tp 1 4 6", "collective all-to-all tp 1:1 6 7",
        "collective all-to-all tp 0:0 6 7", "collective broadcast dp,tp - 6 7",
        "collective all-reduce tp,dp - 6 7"})
    EXPECT_EQ(errorWithLine(23, good), "") << good;

  // Divisibility, with an axis of size 3.
  std::vector<std::string> odd = {"loom-plan 1",
                                  "model m",
                                  "device cpu",
                                  "mesh g a=3",
                                  "arena 128",
                                  "buffer 0 i temp i32 2,4 0",
                                  "buffer 1 o temp i32 2,4 64"};
  for (const char *line :
       {"collective reduce-scatter a 1 0 1", "collective all-slice a 0 0 1",
        "collective all-to-all a 1:0 0 1"}) {
    std::vector<std::string> lines = odd;
    lines.push_back(line);
    EXPECT_EQ(errorWith(lines, 0, "loom-plan 1"),
              std::string("plan:8: dim ") +
                  (std::string(line).find(" 0 0 1") != std::string::npos
                       ? "0 of buffer 'i' [2, 4] is not divisible by the "
                         "group size 3 (a)"
                       : "1 of buffer 'i' [2, 4] is not divisible by the "
                         "group size 3 (a)"))
        << line;
  }

  // Collectives need a mesh, and come among the steps.
  EXPECT_EQ(
      errorWith({"loom-plan 1", "model m", "device cpu", "arena 128",
                 "buffer 0 i temp i32 2,4 0", "buffer 1 o temp i32 2,4 64",
                 "collective all-reduce a - 0 1"},
                0, "loom-plan 1"),
      "plan:7: 'collective' record without a 'mesh' record");
  EXPECT_EQ(errorWithInserted(19, "collective all-reduce tp - 6 7"),
            "plan:21: 'kernel'" + kOrder);
  EXPECT_EQ(errorWithInserted(24, "buffer 9 z temp f32 1 0"),
            "plan:25: 'buffer'" + kOrder);
}

namespace {
/// checkPartitionedPlan's error for the SPMD plan with line `index`
/// replaced (the whole plan as given).
std::string partitionError(size_t index, const std::string &line) {
  std::vector<std::string> lines = spmdLines();
  if (line.empty())
    lines.erase(lines.begin() + static_cast<long>(index));
  else
    lines[index] = line;
  Plan whole = parse(examplePlanLines());
  Plan spmd = parse(lines);
  std::string error;
  if (checkPartitionedPlan(whole, spmd, error))
    return "";
  return error;
}
} // namespace

TEST(SpmdPlan, ChecksThePartitionedPlanAgainstTheWholeOne) {
  EXPECT_EQ(partitionError(0, "loom-plan 1"), "");
  EXPECT_EQ(partitionError(1, "model other"),
            "plan:2: model 'other' differs from the unpartitioned plan's "
            "'mlp'");
  EXPECT_EQ(partitionError(6, "shard 0 -,-"),
            "plan:6: input 'x' is bf16 [32, 512] as a whole (bf16 [32, 512] "
            "per rank), but bf16 [64, 512] in the unpartitioned plan");
  EXPECT_EQ(partitionError(6, "shard 0 tp,-"), ""); // any split of 64
  EXPECT_EQ(partitionError(10, "shard 2 dp+tp"),
            "plan:10: param 'b1' is f32 [4096] as a whole (f32 [1024] per "
            "rank), but f32 [2048] in the unpartitioned plan");
  EXPECT_EQ(
      partitionError(7, "buffer 1 w1 param bf16 512,1024 0 normal 0.03"),
      "plan:8: param 'w1' is initialized with normal 0.029999999999999999, "
      "but with normal 0.02 in the unpartitioned plan");
  EXPECT_EQ(partitionError(9, "buffer 2 b1 param f32 1024 2097152 ones"),
            "plan:10: param 'b1' is initialized with ones, but with zeros in "
            "the unpartitioned plan");
  EXPECT_EQ(partitionError(5, "buffer 0 x input f16 32,512 2101248"),
            "plan:6: input 'x' is f16 [64, 512] as a whole (f16 [32, 512] "
            "per rank), but bf16 [64, 512] in the unpartitioned plan");
  EXPECT_EQ(partitionError(5, "buffer 0 x temp bf16 32,512 2101248"),
            "plan:6: the unpartitioned plan's input 'x' (bf16 [64, 512]) is "
            "missing");
  EXPECT_EQ(partitionError(5, "buffer 0 z input bf16 32,512 2101248"),
            "plan:6: input 'z' is not an input of the unpartitioned plan");
  EXPECT_EQ(partitionError(13, "buffer 4 t4 output bf16 32,1024 2134016"),
            "plan:14: output 't4' is not an output of the unpartitioned plan");
  EXPECT_EQ(partitionError(16, "buffer 7 y param bf16 32,512 2363392 zeros"),
            "plan:17: param 'y' is not a param of the unpartitioned plan");
  EXPECT_EQ(partitionError(16, "buffer 7 yy output bf16 32,512 2363392"),
            "plan:17: output 'yy' is not an output of the unpartitioned plan");

  Plan whole = parse(examplePlanLines());
  std::string error;
  EXPECT_FALSE(checkPartitionedPlan(whole, whole, error));
  EXPECT_EQ(error, "plan: a partitioned plan needs a 'mesh' record");
  // A whole plan with an extra output the partitioned plan lacks.
  std::vector<std::string> extra = examplePlanLines();
  extra.insert(extra.begin() + 10, "buffer 6 z output f32 2 64");
  Plan bigger = parse(extra);
  EXPECT_FALSE(checkPartitionedPlan(bigger, parse(spmdLines()), error));
  EXPECT_EQ(error,
            "plan: the unpartitioned plan's output 'z' (f32 [2]) is missing");
}
