//===- AssembledOutputsTest.cpp - A forward's microbatches and outputs ----===//

#include "TestUtil.h"

#include "loom/runtime/exec/AssembledOutputs.h"
#include "loom/runtime/plan/Plan.h"

#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

using namespace loom::runtime;
using loom::test::sealLines;

namespace {
/// A forward of 2 microbatches: rows of y, the mean of loss, the sum of
/// the counts.
const std::vector<std::string> kLines = {
    "loom-plan 1",
    "model m",
    "device cpu",
    "arena 4096",
    "buffer 0 x input f32 2,3 0",
    "buffer 1 y output f32 2,3 64",
    "buffer 2 loss output f32 scalar 128",
    "buffer 3 counts output i32 2 192",
    "kernel k 4",
    "step k 0 1 2 3",
    "microbatches 2",
    "assemble 1 rows",
    "assemble 2 mean",
    "assemble 3 sum",
};

std::string errorWith(const std::vector<std::string> &lines) {
  return loom::test::planErrorOf(lines);
}
std::string errorWithLine(size_t index, const std::string &line) {
  std::vector<std::string> lines = kLines;
  lines[index] = line;
  return errorWith(lines);
}
} // namespace

TEST(AssembledOutputs, ParsesAndWritesTheRecords) {
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(sealLines(kLines), plan, error)) << error;
  EXPECT_TRUE(plan.forwardMicrobatches());
  EXPECT_EQ(plan.optimizer.microbatches, 2u);
  EXPECT_TRUE(plan.isMicrobatched(plan.buffers[0]));
  EXPECT_EQ(plan.microbatchSteps(), 0u);
  EXPECT_EQ(plan.buffers[1].assembly, Assembly::Rows);
  EXPECT_EQ(plan.buffers[2].assembly, Assembly::Mean);
  EXPECT_EQ(plan.buffers[3].assembly, Assembly::Sum);
  Plan again;
  ASSERT_TRUE(parsePlan(writePlan(plan), again, error)) << error;
  EXPECT_EQ(again.forwardMicrobatchesLine, 11u);
  EXPECT_EQ(again.buffers[3].assembly, Assembly::Sum);
}

TEST(AssembledOutputs, RejectsBadRecords) {
  EXPECT_EQ(errorWithLine(10, "microbatches 1"),
            "plan:11: bad microbatches '1' (expected an integer from 2 to 1048576)");
  EXPECT_EQ(errorWithLine(10, "microbatches"), "plan:11: expected 'microbatches M'");
  EXPECT_EQ(errorWithLine(11, "assemble 0 rows"),
            "plan:12: an assemble belongs to an output, not to input 'x'");
  EXPECT_EQ(errorWithLine(12, "assemble 1 mean"),
            "plan:13: output 'y' is assembled twice");
  EXPECT_EQ(errorWithLine(12, "assemble 2 rows"),
            "plan:13: output 'loss' (f32 []) cannot be assembled by 'rows' "
            "(rows: a tensor of rank >= 1; mean: f32; sum: f32, i32 or i64)");
  EXPECT_EQ(errorWithLine(13, "assemble 3 mean"),
            "plan:14: output 'counts' (i32 [2]) cannot be assembled by 'mean' "
            "(rows: a tensor of rank >= 1; mean: f32; sum: f32, i32 or i64)");
  EXPECT_EQ(errorWithLine(13, "assemble 3 max"),
            "plan:14: output 'counts' (i32 [2]) cannot be assembled by 'max' "
            "(rows: a tensor of rank >= 1; mean: f32; sum: f32, i32 or i64)");
  EXPECT_EQ(errorWithLine(13, "assemble 9 sum"),
            "plan:14: assemble names unknown buffer 9 (the plan has 4 buffers)");
  // Every output says how; none without microbatches; no training step.
  std::vector<std::string> lines = kLines;
  lines.pop_back();
  EXPECT_EQ(errorWith(lines),
            "plan:14: output 'counts' of a forward in microbatches has no "
            "'assemble' record");
  lines = kLines;
  lines.erase(lines.begin() + 10);
  EXPECT_EQ(errorWith(lines),
            "plan:11: 'assemble' without a 'microbatches' record");
  lines = kLines;
  lines.push_back("optimizer sgd 1 lr=0.1");
  EXPECT_EQ(errorWith(lines),
            "plan:15: a training step gives its microbatches as microbatches= "
            "of its 'optimizer' record, not as a 'microbatches' record");
  // A forward's microbatches accumulate nothing.
  lines = kLines;
  lines[7] = "buffer 3 g temp f32 scalar 192";
  lines.insert(lines.begin() + 10, "accumulate 3 2");
  lines.pop_back();
  EXPECT_EQ(errorWith(lines),
            "plan:11: an 'accumulate' step in a forward with a 'microbatches' "
            "record (a training step gives them as microbatches= of its "
            "'optimizer' record)");
}

TEST(AssembledOutputs, StacksAveragesAndAdds) {
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(sealLines(kLines), plan, error)) << error;
  AssembledOutputs outputs;
  outputs.reset(plan, 2);
  std::vector<char> arena(4096, 0);
  auto put = [&](unsigned id, const void *data, size_t bytes) {
    std::memcpy(arena.data() + plan.buffers[id].offset, data, bytes);
  };
  const float y0[6] = {1, 2, 3, 4, 5, 6}, y1[6] = {7, 8, 9, 10, 11, 12};
  const float l0 = 1.5f, l1 = 2.5f;
  const int32_t c0[2] = {3, 1}, c1[2] = {2, 0};
  put(1, y0, sizeof(y0));
  put(2, &l0, sizeof(l0));
  put(3, c0, sizeof(c0));
  outputs.take(plan, 0, arena.data());
  EXPECT_FALSE(outputs.complete());
  put(1, y1, sizeof(y1));
  put(2, &l1, sizeof(l1));
  put(3, c1, sizeof(c1));
  outputs.take(plan, 1, arena.data());
  ASSERT_TRUE(outputs.complete());

  PlanBuffer y = outputs.whole(plan.buffers[1]);
  EXPECT_EQ(y.shape, (Shape{4, 3}));
  EXPECT_EQ(y.bytes, 48u);
  float rows[12];
  std::memcpy(rows, outputs.data(plan.buffers[1]), sizeof(rows));
  for (int i = 0; i < 12; ++i)
    EXPECT_EQ(rows[i], static_cast<float>(i + 1));
  float loss;
  std::memcpy(&loss, outputs.data(plan.buffers[2]), sizeof(loss));
  EXPECT_EQ(loss, 2.0f);
  EXPECT_EQ(outputs.whole(plan.buffers[2]).shape, Shape{});
  int32_t counts[2];
  std::memcpy(counts, outputs.data(plan.buffers[3]), sizeof(counts));
  EXPECT_EQ(counts[0], 5);
  EXPECT_EQ(counts[1], 1);
  EXPECT_EQ(outputs.data(plan.buffers[0]), nullptr);
}
