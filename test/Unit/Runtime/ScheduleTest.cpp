//===- ScheduleTest.cpp - Pipeline schedules: bubbles, memory, errors -----===//

#include "loom/runtime/plan/Schedule.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>

using namespace loom::runtime;

namespace {
Schedule built(ScheduleKind kind, unsigned p, unsigned stages, unsigned m) {
  Schedule s;
  std::string error;
  EXPECT_TRUE(buildSchedule(kind, p, stages, m, s, error)) << error;
  EXPECT_TRUE(verifySchedule(s, error)) << scheduleKindName(kind) << " p " << p
                                        << " m " << m << ": " << error;
  return s;
}

std::vector<StageCost> uniform(const Schedule &s) {
  return {uniformStageCost(s)};
}

std::string errorOf(const std::string &text) {
  Schedule s;
  std::string error;
  if (!parseSchedule(text, s, error))
    return error;
  EXPECT_FALSE(verifySchedule(s, error)) << text;
  return error;
}
} // namespace

TEST(Schedule, TooLargeSchedulesAreErrorsNotAllocations) {
  // 100000 stages and microbatches asked for terabytes (std::bad_alloc);
  // more than 4096 ranks built a schedule its text form could not hold.
  Schedule s;
  std::string error;
  EXPECT_FALSE(buildSchedule(ScheduleKind::GPipe, 100000, 100000, 100000, s, error));
  EXPECT_EQ(error, "100000 stages x 100000 microbatches on 100000 ranks is too "
                   "large a schedule (at most 4194304 stage-microbatches, 4096 ranks)");
  EXPECT_FALSE(buildSchedule(ScheduleKind::OneFOneB, 5000, 5000, 1, s, error));
  EXPECT_TRUE(buildSchedule(ScheduleKind::OneFOneB, 4096, 4096, 2, s, error)) << error;
  EXPECT_TRUE(verifySchedule(s, error)) << error;
}

TEST(Schedule, BubbleOfGPipeAnd1F1BIsExact) {
  for (unsigned p : {2u, 4u, 8u})
    for (unsigned m : {1u, 4u, 8u, 32u})
      for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB}) {
        Schedule s = built(kind, p, p, m);
        ScheduleTimeline t = simulateSchedule(s, uniform(s));
        EXPECT_NEAR(t.bubble, double(p - 1) / (m + p - 1), 1e-12)
            << scheduleKindName(kind) << " p " << p << " m " << m;
      }
}

TEST(Schedule, BubbleOfInterleavedIsExact) {
  for (unsigned p : {2u, 4u, 8u})
    for (unsigned v : {2u, 4u})
      for (unsigned m : {4u, 8u, 32u}) {
        if (m % p)
          continue;
        Schedule s = built(ScheduleKind::Interleaved, p, v * p, m);
        ScheduleTimeline t = simulateSchedule(s, uniform(s));
        EXPECT_NEAR(t.bubble, double(p - 1) / (v * m + p - 1), 1e-12)
            << "p " << p << " v " << v << " m " << m;
      }
}

TEST(Schedule, ZeroBubbleBeats1F1B) {
  for (unsigned p : {2u, 4u, 8u})
    for (unsigned m : {1u, 4u, 8u, 32u}) {
      Schedule one = built(ScheduleKind::OneFOneB, p, p, m);
      Schedule zero = built(ScheduleKind::ZeroBubble, p, p, m);
      double bubble1f1b = simulateSchedule(one, uniform(one)).bubble;
      double bubbleZero = simulateSchedule(zero, uniform(zero)).bubble;
      EXPECT_LT(bubbleZero, bubble1f1b) << "p " << p << " m " << m;
    }
}

TEST(Schedule, OneFOneBHoldsAtMostPMicrobatches) {
  for (unsigned p : {2u, 4u, 8u})
    for (unsigned m : {4u, 8u, 32u}) {
      Schedule gpipe = built(ScheduleKind::GPipe, p, p, m);
      Schedule one = built(ScheduleKind::OneFOneB, p, p, m);
      EXPECT_EQ(simulateSchedule(gpipe, uniform(gpipe)).peakActivations[0], m);
      EXPECT_EQ(simulateSchedule(one, uniform(one)).peakActivations[0],
                std::min(p, m));
    }
}

TEST(Schedule, PeakActivationBytesFollowEachStagesBytes) {
  // Interleaved over 2 ranks and 4 stages: rank r holds stages r and r + 2,
  // whose microbatches keep 1000 and 10 bytes (r = 0), 100 and 1 (r = 1).
  Schedule s = built(ScheduleKind::Interleaved, 2, 4, 4);
  std::vector<StageCost> costs = {{1, 2, 0, 1000}, {1, 2, 0, 100},
                                  {1, 2, 0, 10}, {1, 2, 0, 1}};
  ScheduleTimeline t = simulateSchedule(s, costs);
  // Replay each rank's steps: what is held after every step, at most.
  for (unsigned r = 0; r < 2; ++r) {
    double held = 0, peak = 0;
    for (const PipeStep &step : s.steps[r]) {
      if (step.op == PipeOp::Forward)
        held += costs[step.stage].activationBytes;
      else if (step.op == PipeOp::Backward)
        held -= costs[step.stage].activationBytes;
      peak = std::max(peak, held);
    }
    EXPECT_EQ(t.peakActivationBytes[r], peak) << "rank " << r;
    EXPECT_GT(peak, 0);
  }
  // GPipe holds every microbatch of its one stage.
  Schedule gpipe = built(ScheduleKind::GPipe, 2, 2, 4);
  ScheduleTimeline g = simulateSchedule(gpipe, {{1, 2, 0, 64}, {1, 2, 0, 32}});
  EXPECT_EQ(g.peakActivationBytes[0], 4 * 64);
  EXPECT_EQ(g.peakActivationBytes[1], 4 * 32);
}

TEST(Schedule, TextRoundTrips) {
  Schedule s = built(ScheduleKind::Interleaved, 2, 4, 4);
  Schedule again;
  std::string error;
  ASSERT_TRUE(parseSchedule(formatSchedule(s), again, error)) << error;
  EXPECT_EQ(formatSchedule(again), formatSchedule(s));
  EXPECT_TRUE(verifySchedule(again, error)) << error;
}

TEST(Schedule, BuildErrors) {
  Schedule s;
  std::string error;
  EXPECT_FALSE(buildSchedule(ScheduleKind::OneFOneB, 2, 4, 4, s, error));
  EXPECT_EQ(error, "schedule '1f1b' runs one stage per rank, but 4 stages are "
                   "on 2 pipeline ranks (use 'interleaved' for several per rank)");
  EXPECT_FALSE(buildSchedule(ScheduleKind::Interleaved, 2, 4, 3, s, error));
  EXPECT_EQ(error, "schedule 'interleaved' needs the stages (4) and the "
                   "microbatches (3) to be multiples of the pipeline ranks (2)");
}

TEST(Schedule, VerifierRejections) {
  const std::string head = "schedule gpipe ranks 2 stages 2 microbatches 1\n";
  const std::string good = head +
                           "0 forward 0 0\n0 send-act 0 0 1\n0 recv-grad 0 1 1\n"
                           "0 backward 0 0\n"
                           "1 recv-act 0 0 0\n1 forward 0 1\n1 backward 0 1\n"
                           "1 send-grad 0 1 0\n";
  Schedule s;
  std::string error;
  ASSERT_TRUE(parseSchedule(good, s, error)) << error;
  EXPECT_TRUE(verifySchedule(s, error)) << error;
  // A swapped order: rank 0 waits for the gradient before it sends the
  // activation the gradient needs.
  EXPECT_EQ(errorOf(head + "0 forward 0 0\n0 recv-grad 0 1 1\n0 send-act 0 0 1\n"
                           "0 backward 0 0\n"
                           "1 recv-act 0 0 0\n1 forward 0 1\n1 backward 0 1\n"
                           "1 send-grad 0 1 0\n"),
            "deadlock: every unfinished rank waits for a message no rank will "
            "send first: rank 0 step 1 (recv-grad mb 0 stage 1 from rank 1), "
            "rank 1 step 0 (recv-act mb 0 stage 0 from rank 0)");
  // A missing receive.
  EXPECT_EQ(errorOf(head + "0 forward 0 0\n0 send-act 0 0 1\n0 recv-grad 0 1 1\n"
                           "0 backward 0 0\n"
                           "1 forward 0 1\n1 backward 0 1\n1 send-grad 0 1 0\n"),
            "rank 0 step 1 (send-act mb 0 stage 0 to rank 1): no matching "
            "receive on rank 1");
  // A mismatched microbatch.
  const std::string two = "schedule gpipe ranks 2 stages 2 microbatches 2\n";
  EXPECT_EQ(errorOf(two + "0 forward 0 0\n0 send-act 0 0 1\n0 forward 1 0\n"
                          "0 send-act 1 0 1\n0 recv-grad 0 1 1\n0 backward 0 0\n"
                          "0 recv-grad 1 1 1\n0 backward 1 0\n"
                          "1 recv-act 0 0 0\n1 forward 0 1\n1 recv-act 0 0 0\n"
                          "1 forward 1 1\n1 backward 0 1\n1 send-grad 0 1 0\n"
                          "1 backward 1 1\n1 send-grad 1 1 0\n"),
            "rank 1 step 2 (recv-act mb 0 stage 0 from rank 0): the same message twice");
  EXPECT_EQ(errorOf(head + "0 forward 0 0\n1 forward 0 0\n"),
            "rank 1 step 0 (forward mb 0 stage 0): stage 0 runs on rank 0");
  EXPECT_EQ(errorOf(head + "0 forward 0 0\n0 send-act 0 0 0\n"),
            "rank 0 step 1 (send-act mb 0 stage 0 to rank 0): this message "
            "goes from rank 0 to rank 1");
  EXPECT_EQ(errorOf(head + "0 backward 0 0\n0 forward 0 0\n"),
            "rank 1 never runs forward of mb 0 stage 1");
  EXPECT_EQ(errorOf("schedule 1f1b ranks 1 stages 1 microbatches 1\n"
                    "0 backward 0 0\n0 forward 0 0\n"),
            "rank 0 step 0 (backward mb 0 stage 0): comes before its forward");
  EXPECT_EQ(errorOf("schedule 1f1b ranks 1 stages 1 microbatches 1\n"
                    "0 forward 0 0\n0 weight 0 0\n0 backward 0 0\n"),
            "rank 0 step 1 (weight mb 0 stage 0): a weight-gradient step in a "
            "schedule whose backward is not split (only zero_bubble splits it)");
  EXPECT_EQ(errorOf("schedule 1f1b ranks 2\n"),
            "schedule:1: expected 'schedule KIND ranks P stages S microbatches "
            "M' (KIND gpipe, 1f1b, interleaved or zero_bubble; P at most 4096)");
  EXPECT_EQ(errorOf(head + "0 jump 0 0\n"),
            "schedule:2: expected 'RANK OP MICROBATCH STAGE [PEER]' (OP "
            "forward, backward, weight, send-act, recv-act, send-grad or "
            "recv-grad; PEER for sends and receives)");
}

TEST(Schedule, MutantsAreRejectedOrRunToTheEnd) {
  // Swapped, dropped and rewritten steps of generated schedules: the
  // verifier rejects each with a message, or the mutant is a valid
  // schedule that the simulation runs to its last step on every rank.
  uint64_t state = 12345;
  auto next = [&](uint64_t n) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    return (state >> 33) % n;
  };
  unsigned rejected = 0, accepted = 0;
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                            ScheduleKind::Interleaved, ScheduleKind::ZeroBubble})
    for (int trial = 0; trial < 250; ++trial) {
      unsigned p = 2 + next(3), m = p * (1 + next(2));
      unsigned stages = kind == ScheduleKind::Interleaved ? 2 * p : p;
      Schedule s;
      std::string error;
      ASSERT_TRUE(buildSchedule(kind, p, stages, m, s, error)) << error;
      std::vector<PipeStep> &steps = s.steps[next(p)];
      size_t i = next(steps.size()), j = next(steps.size());
      switch (next(4)) {
      case 0: std::swap(steps[i], steps[j]); break;
      case 1: steps.erase(steps.begin() + static_cast<long>(i)); break;
      case 2: steps[i].microbatch = static_cast<unsigned>(next(m + 1)); break;
      default: steps[i].peer = static_cast<unsigned>(next(p + 1)); break;
      }
      if (!verifySchedule(s, error)) {
        EXPECT_FALSE(error.empty());
        ++rejected;
        continue;
      }
      ++accepted;
      ScheduleTimeline t = simulateSchedule(s, {});
      for (unsigned r = 0; r < p; ++r)
        EXPECT_EQ(t.steps[r].size(), s.steps[r].size()) << formatSchedule(s);
    }
  EXPECT_GT(rejected, 500u);
  EXPECT_GT(accepted, 0u); // swapping two independent steps keeps it valid
}
