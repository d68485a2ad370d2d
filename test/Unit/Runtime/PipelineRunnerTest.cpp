//===- PipelineRunnerTest.cpp - The memory of a pipeline's values in flight ===//
//
// planInFlight gives each pipeline rank one block, planned before the first
// step: a slot per microbatch it holds at once under its schedule, an
// offset in a slot for each value it saves or receives, and one copy of
// what only one backward at a time needs.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "loom/runtime/exec/PipelineRunner.h"

#include <gtest/gtest.h>

using namespace loom::runtime;
using loom::test::sealLines;

namespace {
/// Two stages on pp=2: stage 0 computes `a` (64 B) and carries it forward;
/// stage 1 reads it and computes `b`, whose gradient `g` goes back. With
/// `carriesB`, stage 0 computes `b` (16 B) too and carries both.
Plan twoStagePlan(bool carriesB = false) {
  Plan plan;
  std::string error;
  std::vector<std::string> lines = {
      "loom-plan 1", "model m", "device cpu", "mesh g pp=2", "pipeline pp 2 1f1b",
      "arena 512", "buffer 0 x input f32 4 0", "buffer 1 a temp f32 16 64",
      "buffer 2 b temp f32 4 128", "buffer 3 g temp f32 16 192",
      "buffer 4 y output f32 16 256", "kernel k 2", "section forward 0", "step k 0 1"};
  if (carriesB)
    lines.push_back("step k 0 2");
  for (const char *line : {"section forward 1", "step k 1 2", "section backward 1",
                           "step k 2 3", "section backward 0", "step k 3 4"})
    lines.push_back(line);
  lines.push_back(carriesB ? "carry forward 0 1 2" : "carry forward 0 1");
  lines.push_back("carry backward 1 3");
  EXPECT_TRUE(parsePlan(sealLines(lines), plan, error)) << error;
  return plan;
}

InFlightLayout layoutFor(const Plan &plan, ScheduleKind kind, unsigned rank) {
  Schedule schedule;
  std::string error;
  EXPECT_TRUE(buildSchedule(kind, 2, 2, 4, schedule, error)) << error;
  PipelineValues values = analyzePipelineValues(plan, analyzeStepAccess(plan), !schedule.splitsBackward());
  return planInFlight(plan, values, schedule, rank);
}
/// Four stages on pp=2 under the interleaved schedule: the header, input x
/// (buffer 0), then `lines`.
std::string interleavedPlan(std::vector<std::string> lines) {
  std::vector<std::string> all = {"loom-plan 1", "model m", "device cpu", "mesh g pp=2",
                                  "pipeline pp 4 interleaved", "arena 1024",
                                  "buffer 0 x input f32 4 0"};
  all.insert(all.end(), lines.begin(), lines.end());
  return sealLines(all);
}
} // namespace

TEST(PipelineRunner, PlansOneSlotPerMicrobatchInFlight) {
  Plan plan = twoStagePlan();
  // 1F1B: the first stage holds p = 2 microbatches, reusing their slots as
  // backwards finish; the last stage one at a time.
  // One stage a rank: one pool.
  InFlightLayout first = layoutFor(plan, ScheduleKind::OneFOneB, 0);
  ASSERT_EQ(first.pools.size(), 1u);
  EXPECT_EQ(first.pools[0].slots, 2u);
  EXPECT_EQ(first.pools[0].slotOf, (std::vector<unsigned>{0, 1, 0, 1}));
  InFlightLayout last = layoutFor(plan, ScheduleKind::OneFOneB, 1);
  ASSERT_EQ(last.pools.size(), 1u);
  EXPECT_EQ(last.pools[0].slots, 1u);
  EXPECT_EQ(last.pools[0].slotOf, (std::vector<unsigned>{0, 0, 0, 0}));
  // GPipe: all four forwards before the first backward.
  EXPECT_EQ(layoutFor(plan, ScheduleKind::GPipe, 0).slots(), 4u);
  EXPECT_EQ(layoutFor(plan, ScheduleKind::GPipe, 1).slots(), 4u);
}

TEST(PipelineRunner, PlacesWhatARankSavesAndReceives) {
  Plan plan = twoStagePlan();
  // Stage 0 saves `a` (read by stage 1) and receives `g`; stage 1 receives
  // `a`, saves `b` for its backward and `g` for the carry. Each value has a
  // 64-byte-aligned place; the input never does. What only one
  // microbatch's backward needs (`g`, received or sent) has one place
  // after the slots, which every microbatch reuses.
  InFlightLayout first = layoutFor(plan, ScheduleKind::OneFOneB, 0);
  EXPECT_NE(first.offset[1], InFlightLayout::kNone);
  EXPECT_NE(first.offset[3], InFlightLayout::kNone);
  EXPECT_EQ(first.offset[0], InFlightLayout::kNone);
  EXPECT_EQ(first.offset[2], InFlightLayout::kNone);
  EXPECT_FALSE(first.transient[1]);
  EXPECT_TRUE(first.transient[3]);
  EXPECT_EQ(first.pools[0].slotBytes, 64u);
  EXPECT_EQ(first.transientBytes, 64u);
  EXPECT_EQ(first.bytes(), 2 * 64u + 64u);
  InFlightLayout last = layoutFor(plan, ScheduleKind::OneFOneB, 1);
  for (unsigned id : {1u, 2u, 3u}) {
    EXPECT_NE(last.offset[id], InFlightLayout::kNone) << id;
    EXPECT_EQ(last.offset[id] % kBufferAlignment, 0u) << id;
  }
  EXPECT_TRUE(last.transient[3]);
  EXPECT_EQ(last.pools[0].slotBytes, 128u);
  EXPECT_EQ(last.bytes(), 192u);
  // GPipe's four microbatches in flight keep `a` four times, `g` once.
  EXPECT_EQ(layoutFor(plan, ScheduleKind::GPipe, 0).bytes(), 4 * 64u + 64u);
}

TEST(PipelineRunner, KeepsWhatAnotherStagesBackwardReadsInSlots) {
  // Four stages on pp=2 (interleaved): rank 0 runs stages 0 and 2. `t`,
  // which stage 2's backward writes and stage 0's reads (a tied param's
  // gradient part), lives from one backward to the other: in the slots.
  // `g`, which stage 2's backward sends to stage 1, has the one place.
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(
      interleavedPlan({"buffer 1 a temp f32 16 64",
                 "buffer 2 b temp f32 16 128", "buffer 3 c temp f32 16 192",
                 "buffer 4 g temp f32 16 256", "buffer 5 t temp f32 16 320",
                 "buffer 6 h temp f32 16 384", "buffer 7 y output f32 16 448",
                 "kernel k 2", "kernel k3 3",
                 "section forward 0", "step k 0 1",
                 "section forward 1", "step k 1 2",
                 "section forward 2", "step k 2 3",
                 "section backward 2", "step k3 3 4 5",
                 "section backward 1", "step k 4 6",
                 "section backward 0", "step k3 6 5 7",
                 "carry forward 0 1", "carry forward 1 2",
                 "carry backward 2 4", "carry backward 1 6"}),
      plan, error))
      << error;
  Schedule order;
  ASSERT_TRUE(buildSchedule(ScheduleKind::Interleaved, 2, 4, 2, order, error)) << error;
  PipelineValues values = analyzePipelineValues(plan, analyzeStepAccess(plan), !order.splitsBackward());
  InFlightLayout first = planInFlight(plan, values, order, 0);
  EXPECT_NE(first.offset[5], InFlightLayout::kNone);
  EXPECT_FALSE(first.transient[5]);
  EXPECT_TRUE(first.transient[4]);
  // `t` is the two stages' (a pool of its own, a slot per microbatch,
  // living from stage 2's backward to stage 0's); `a`, which stage 0 saves
  // and sends, stage 0's alone (the pool of a slot per stage and
  // microbatch).
  ASSERT_NE(first.poolOf[5], InFlightLayout::kNoPool);
  EXPECT_FALSE(first.pools[first.poolOf[5]].perStage);
  EXPECT_EQ(first.pools[first.poolOf[5]].stages, (std::vector<unsigned>{0, 2}));
  ASSERT_NE(first.poolOf[1], InFlightLayout::kNoPool);
  EXPECT_TRUE(first.pools[first.poolOf[1]].perStage);
}

TEST(PipelineRunner, PlansASlotPerStageAndMicrobatch) {
  // Four stages on pp=2, interleaved, 4 microbatches: rank 0 runs stages 0
  // and 2. Stage 0's values (`a`, saved for its backward and sent) live
  // from a microbatch's first forward to its last backward on the rank;
  // stage 2's (`b`, received; `d`, saved) only from its forward of stage 2
  // to its backward of stage 2. A slot holds one (stage, microbatch)'s
  // values, so the slots are the most such pairs in flight at once; with a
  // slot per microbatch for both stages' values, every microbatch in
  // flight held room for both.
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(
      interleavedPlan({"buffer 1 a temp f32 16 64",
                 "buffer 2 b temp f32 16 128", "buffer 3 c temp f32 16 192",
                 "buffer 4 d temp f32 32 256", "buffer 5 e temp f32 16 384",
                 "buffer 6 f temp f32 16 448", "buffer 7 y output f32 16 512",
                 "kernel k 2",
                 "section forward 0", "step k 0 1",
                 "section forward 1", "step k 1 2",
                 "section forward 2", "step k 2 3", "step k 3 4",
                 "section forward 3", "step k 4 5",
                 "section backward 3", "step k 5 6",
                 "section backward 2", "step k 4 6",
                 "section backward 1", "step k 2 6",
                 "section backward 0", "step k 1 7",
                 "carry forward 0 1", "carry forward 1 2", "carry forward 2 4"}),
      plan, error))
      << error;
  Schedule order;
  ASSERT_TRUE(buildSchedule(ScheduleKind::Interleaved, 2, 4, 4, order, error)) << error;
  PipelineValues values =
      analyzePipelineValues(plan, analyzeStepAccess(plan), !order.splitsBackward());
  InFlightLayout first = planInFlight(plan, values, order, 0);
  ASSERT_EQ(first.pools.size(), 1u);
  const InFlightLayout::Pool &pool = first.pools[0];
  EXPECT_TRUE(pool.perStage);
  EXPECT_EQ(pool.stages, (std::vector<unsigned>{0, 2}));
  EXPECT_EQ(first.poolOf[3], InFlightLayout::kNoPool); // read in its section
  // Stage 2's values from the slot's start, as stage 0's: the slot is as
  // large as the larger stage's (b and d: 64 + 128 bytes).
  EXPECT_EQ(first.offset[1], 0u);
  EXPECT_EQ(first.offset[first.offset[2] == 0 ? 2 : 4], 0u);
  EXPECT_EQ(pool.slotBytes, 192u);
  // The most (stage, microbatch) pairs in flight at once, from the order.
  const std::vector<PipeStep> &mine = order.steps[0];
  auto span = [&](unsigned stage, unsigned mb) {
    size_t firstStep = mine.size(), lastStep = 0;
    for (size_t j = 0; j < mine.size(); ++j) {
      const PipeStep &step = mine[j];
      unsigned local = step.op == PipeOp::RecvActivation ? step.stage + 1
                       : step.op == PipeOp::RecvGradient ? step.stage - 1
                                                         : step.stage;
      if (step.microbatch == mb && local == stage) {
        firstStep = std::min(firstStep, j);
        lastStep = j;
      }
    }
    if (mb + 1 == order.microbatches)
      lastStep = mine.size();
    return std::make_pair(firstStep, lastStep);
  };
  unsigned most = 0;
  for (size_t k = 0; k <= mine.size(); ++k) {
    unsigned live = 0;
    for (unsigned stage : {0u, 2u})
      for (unsigned mb = 0; mb < order.microbatches; ++mb) {
        auto [from, to] = span(stage, mb);
        live += from <= k && k <= to;
      }
    most = std::max(most, live);
  }
  EXPECT_EQ(pool.slots, most);
  EXPECT_LT(pool.slots, 2 * order.microbatches);
  // No two pairs in flight together share a slot.
  for (unsigned s1 = 0; s1 < 2; ++s1)
    for (unsigned m1 = 0; m1 < order.microbatches; ++m1)
      for (unsigned s2 = 0; s2 < 2; ++s2)
        for (unsigned m2 = 0; m2 < order.microbatches; ++m2) {
          if (s1 * order.microbatches + m1 >= s2 * order.microbatches + m2)
            continue;
          auto [f1, l1] = span(s1 ? 2 : 0, m1);
          auto [f2, l2] = span(s2 ? 2 : 0, m2);
          bool together = f1 <= l2 && f2 <= l1;
          if (together)
            EXPECT_NE(pool.slotOf[s1 * order.microbatches + m1],
                      pool.slotOf[s2 * order.microbatches + m2])
                << s1 << "," << m1 << " and " << s2 << "," << m2;
        }
  EXPECT_EQ(first.bytes(), pool.bytes() + first.transientBytes);
}

TEST(PipelineRunner, KeepsWhatAWaitingWeightPartReadsInSlots) {
  // Zero-bubble runs a microbatch's weight part after later backwards: its
  // backward's values outlive the next microbatch's, and stay in the slots.
  // (An order where the last stage's two backwards come before their
  // weight parts and sends.)
  Plan plan = twoStagePlan();
  Schedule order;
  order.kind = ScheduleKind::ZeroBubble;
  order.ranks = order.stages = order.microbatches = 2;
  using Op = PipeOp;
  order.steps = {{}, {{Op::RecvActivation, 0, 0, 0}, {Op::Forward, 0, 1, 0},
                      {Op::RecvActivation, 1, 0, 0}, {Op::Forward, 1, 1, 0},
                      {Op::Backward, 0, 1, 0}, {Op::Backward, 1, 1, 0},
                      {Op::WeightGrad, 0, 1, 0}, {Op::SendGradient, 0, 1, 0},
                      {Op::WeightGrad, 1, 1, 0}, {Op::SendGradient, 1, 1, 0}}};
  PipelineValues values = analyzePipelineValues(plan, analyzeStepAccess(plan), !order.splitsBackward());
  InFlightLayout last = planInFlight(plan, values, order, 1);
  EXPECT_FALSE(last.transient[3]);
  EXPECT_EQ(last.transientBytes, 0u);
  ASSERT_EQ(last.pools.size(), 1u);
  EXPECT_EQ(last.pools[0].slots, 2u);
  EXPECT_EQ(last.pools[0].slotBytes, 192u);
}

TEST(PipelineRunner, LeavesTheWeightPartsValuesInTheArena) {
  // Stage 1's backward writes `u`, which its weight part reads. Every
  // schedule but zero-bubble runs the weight part right after the backward:
  // `u` is still in the arena and takes no place; zero-bubble's weight part
  // waits, and `u` is kept.
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(sealLines({"loom-plan 1", "model m", "device cpu",
                                   "mesh g pp=2", "pipeline pp 2 1f1b",
                                   "arena 1024", "buffer 0 x input f32 4 0",
                                   "buffer 1 a temp f32 16 64",
                                   "buffer 2 b temp f32 4 128",
                                   "buffer 3 g temp f32 16 192",
                                   "buffer 4 y output f32 16 256",
                                   "buffer 5 u temp f32 16 320",
                                   "buffer 6 dw output f32 16 384",
                                   "kernel k 2", "section forward 0",
                                   "step k 0 1", "section forward 1",
                                   "step k 1 2", "section backward 1",
                                   "step k 2 3", "step k 2 5",
                                   "section weight 1", "step k 5 6",
                                   "section backward 0", "step k 3 4",
                                   "carry forward 0 1", "carry backward 1 3"}),
                        plan, error))
      << error;
  for (ScheduleKind kind : {ScheduleKind::OneFOneB, ScheduleKind::GPipe,
                            ScheduleKind::ZeroBubble}) {
    Schedule order;
    ASSERT_TRUE(buildSchedule(kind, 2, 2, 4, order, error)) << error;
    PipelineValues values =
        analyzePipelineValues(plan, analyzeStepAccess(plan), !order.splitsBackward());
    InFlightLayout last = planInFlight(plan, values, order, 1);
    EXPECT_EQ(last.offset[5] != InFlightLayout::kNone, kind == ScheduleKind::ZeroBubble)
        << scheduleKindName(kind);
  }
}

TEST(PipelineRunner, ReceivesCarriesIntoOneBufferOfTheLargest) {
  // Stage 0 carries a (64 B) and b (16 B) forward, stage 1 g (64 B) back:
  // the buffer every rank receives into holds the larger carry, both
  // values of the forward's.
  EXPECT_EQ(pipelineMessageBytes(twoStagePlan(/*carriesB=*/true)), 80u);
  EXPECT_EQ(pipelineMessageBytes(twoStagePlan()), 64u);
}
