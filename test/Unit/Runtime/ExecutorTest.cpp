//===- ExecutorTest.cpp - Running a hand-built plan with fake kernels -----===//

#include "TestUtil.h"

#include "loom/runtime/exec/Executor.h"
#include "loom/runtime/exec/Initializer.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

using namespace loom::runtime;
using loom::test::sealLines;

namespace {
constexpr int kN = loom::test::kFakeElements;

const LoomKernel kKernels[] = {{"add", 3, loom::test::fakeAddF32},
                               {"copy", 2, loom::test::fakeCopyF32},
                               {nullptr, 0, nullptr}};

/// out = (x + y) + w, where the temp s reuses x's bytes and out reuses y's,
/// as the compiler's lifetime packing may do.
std::string sharingPlan() {
  return sealLines({"loom-plan 1", "model adder", "device cpu", "arena 256",
                    "buffer 0 x input f32 8 0", "buffer 1 y input f32 8 64",
                    "buffer 2 w param f32 8 128 ones",
                    "buffer 3 t temp f32 8 192", "buffer 4 s temp f32 8 0",
                    "buffer 5 out output f32 8 64", "kernel add 3",
                    "kernel copy 2", "step add 0 1 3", "step add 3 2 4",
                    "step copy 4 5"});
}
} // namespace

TEST(Executor, RunsStepsInOrderOverSharedArenaBytes) {
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(sharingPlan(), plan, error)) << error;
  Executor executor;
  ASSERT_TRUE(executor.init(plan, kKernels, error)) << error;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(executor.arena()) % 64, 0u);
  EXPECT_EQ(executor.buffer(4), executor.buffer(0));
  EXPECT_EQ(executor.buffer(5), executor.arena() + 64);

  initializeParams(plan, executor.arena(), 0);
  float x[kN], y[kN];
  for (int i = 0; i < kN; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = 10.0f * static_cast<float>(i);
  }
  std::memcpy(executor.buffer(0), x, sizeof(x));
  std::memcpy(executor.buffer(1), y, sizeof(y));
  TraceRecorder trace;
  ASSERT_TRUE(executor.run(&trace, error)) << error;
  float out[kN];
  std::memcpy(out, executor.buffer(5), sizeof(out));
  for (int i = 0; i < kN; ++i)
    EXPECT_EQ(out[i], 11.0f * static_cast<float>(i) + 1.0f) << i;

  ASSERT_EQ(trace.size(), 3u);
  std::string json = trace.toJson();
  EXPECT_EQ(json.find("{\"traceEvents\":["), 0u) << json;
  EXPECT_NE(json.find("{\"name\":\"add\",\"cat\":\"kernel\",\"ph\":"
                      "\"X\",\"ts\":"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"name\":\"copy\""), std::string::npos);
  // The bytes of s (read) and out (written).
  EXPECT_NE(json.find("\"args\":{\"step\":2,\"bytes_read\":32,"
                      "\"bytes_written\":32}"),
            std::string::npos)
      << json;

  // Running again without a trace works the same way (inputs re-copied).
  std::memcpy(executor.buffer(0), x, sizeof(x));
  std::memcpy(executor.buffer(1), y, sizeof(y));
  ASSERT_TRUE(executor.run(nullptr, error)) << error;
  std::memcpy(out, executor.buffer(5), sizeof(out));
  EXPECT_EQ(out[3], 34.0f);
}

TEST(Executor, ReportsMissingKernels) {
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(sharingPlan(), plan, error)) << error;
  const LoomKernel onlyAdd[] = {{"add", 3, loom::test::fakeAddF32},
                                {nullptr, 0, nullptr}};
  Executor executor;
  EXPECT_FALSE(executor.init(plan, onlyAdd, error));
  EXPECT_EQ(error, "plan:12: kernel 'copy' is not provided by this executable");
  EXPECT_FALSE(executor.init(plan, nullptr, error));
  EXPECT_EQ(error, "plan:11: kernel 'add' is not provided by this executable");
}

TEST(Executor, ArenaIsAlignedAndZeroed) {
  Arena arena;
  std::string error;
  ASSERT_TRUE(arena.allocate(1000, error)) << error;
  EXPECT_EQ(reinterpret_cast<uintptr_t>(arena.data()) % 64, 0u);
  EXPECT_EQ(arena.size(), 1000u);
  for (int i = 0; i < 1000; ++i)
    ASSERT_EQ(arena.data()[i], 0);
  ASSERT_TRUE(arena.allocate(0, error)) << error;
  EXPECT_NE(arena.data(), nullptr);
  EXPECT_FALSE(arena.allocate(UINT64_MAX - 10, error));
  EXPECT_EQ(error.find("cannot allocate the arena of "), 0u) << error;
}

TEST(Executor, TraceIsWritten) {
  TraceRecorder trace;
  EXPECT_EQ(trace.toJson(),
            "{\"traceEvents\":[],\"displayTimeUnit\":\"ms\"}\n");
  trace.addStep(0, "k\"0", 1.5, 2.25, 1024, 512);
  EXPECT_EQ(trace.toJson(),
            "{\"traceEvents\":[{\"name\":\"k\\\"0\",\"cat\":\"kernel\","
            "\"ph\":\"X\",\"ts\":1.5,\"dur\":2.25,\"pid\":0,\"tid\":0,"
            "\"args\":{\"step\":0,\"bytes_read\":1024,"
            "\"bytes_written\":512}}],\"displayTimeUnit\":\"ms\"}\n");
  loom::test::TempDir dir;
  std::string error;
  ASSERT_TRUE(trace.write(dir.path("t.json"), error)) << error;
  EXPECT_EQ(loom::test::readFile(dir.path("t.json")), trace.toJson());
  EXPECT_FALSE(trace.write(dir.path("missing/t.json"), error));
}

TEST(Executor, TraceNamesTheScriptLine) {
  // Kernel names (m_k4) do not say what a kernel runs; its source does.
  TraceRecorder trace;
  trace.addStep(3, "m_k4", 1.0, 2.0, 8, 4, "ln.loom:9:18");
  trace.addLaunch(3, "m_k4", "m_k4_launch0", 1.0, 2.0, 8, 4, "ln.loom:9:18");
  std::string json = trace.toJson();
  EXPECT_NE(json.find("\"args\":{\"step\":3,\"bytes_read\":8,\"bytes_written\":4,"
                      "\"source\":\"ln.loom:9:18\"}"),
            std::string::npos)
      << json;
  EXPECT_NE(json.find("\"args\":{\"step\":3,\"kernel\":\"m_k4\",\"bytes_read\":8,"
                      "\"bytes_written\":4,\"source\":\"ln.loom:9:18\"}"),
            std::string::npos)
      << json;
}

TEST(Executor, StepAccessFollowsTheStepOrder) {
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(sharingPlan(), plan, error)) << error;
  using A = BufferAccess;
  std::vector<StepAccess> steps = analyzeStepAccess(plan);
  ASSERT_EQ(steps.size(), 3u);
  // Inputs and params are read; a temp is written by its first step and
  // read by the later ones; an output is written.
  EXPECT_EQ(steps[0].buffers, (std::vector<A>{A::Read, A::Read, A::Written}));
  EXPECT_EQ(steps[1].buffers, (std::vector<A>{A::Read, A::Read, A::Written}));
  EXPECT_EQ(steps[2].buffers, (std::vector<A>{A::Read, A::Written}));
  EXPECT_EQ(steps[0].bytesRead, 64u);
  EXPECT_EQ(steps[0].bytesWritten, 32u);

  // A kernel's scratch buffer (a temp no later step reads) counts in
  // neither; an output nothing reads is still written.
  ASSERT_TRUE(parsePlan(
      sealLines({"loom-plan 1", "model m", "device cpu", "arena 320",
                 "buffer 0 x input f32 8 0", "buffer 1 w param f32 8 64 ones",
                 "buffer 2 h temp f32 8 128", "buffer 3 s temp f32 16 192",
                 "buffer 4 out output f32 8 0", "kernel k1 4", "kernel k2 2",
                 "step k1 0 1 2 3", "step k2 2 4"}),
      plan, error))
      << error;
  steps = analyzeStepAccess(plan);
  EXPECT_EQ(steps[0].buffers,
            (std::vector<A>{A::Read, A::Read, A::Written, A::Scratch}));
  EXPECT_EQ(steps[0].bytesRead, 64u);
  EXPECT_EQ(steps[0].bytesWritten, 32u);
  EXPECT_EQ(steps[1].buffers, (std::vector<A>{A::Read, A::Written}));
}

TEST(Executor, AccumulatesTheMeanOverMicrobatches) {
  // g = x + w per microbatch; gm, its mean over 2 microbatches, is what
  // the step after the accumulate reads: next = w + gm.
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(
      sealLines({"loom-plan 1", "model m", "device cpu", "arena 320",
                 "buffer 0 x input f32 8 0", "buffer 1 w param f32 8 64 ones",
                 "buffer 2 g temp f32 8 128", "buffer 3 gm temp f32 8 192",
                 "buffer 4 next.w output f32 8 256", "kernel add 3",
                 "step add 0 1 2", "accumulate 2 3", "step add 1 3 4",
                 "optimizer sgd 1 lr=0.1 microbatches=2", "update 4 1"}),
      plan, error))
      << error;
  EXPECT_EQ(plan.microbatchSteps(), 2u);
  EXPECT_TRUE(plan.isMicrobatched(plan.buffers[0]));
  Executor executor;
  ASSERT_TRUE(executor.init(plan, kKernels, error)) << error;
  initializeParams(plan, executor.arena(), 0);
  float x[kN];
  for (uint64_t microbatch = 0; microbatch < 2; ++microbatch) {
    for (int i = 0; i < kN; ++i)
      x[i] = microbatch == 0 ? static_cast<float>(i) : 3.0f;
    std::memcpy(executor.buffer(0), x, sizeof(x));
    ASSERT_TRUE(executor.runSteps(0, 2, microbatch, nullptr, error)) << error;
  }
  ASSERT_TRUE(executor.runSteps(2, 3, 1, nullptr, error)) << error;
  float next[kN];
  std::memcpy(next, executor.buffer(4), sizeof(next));
  for (int i = 0; i < kN; ++i)
    EXPECT_EQ(next[i], 1.0f + ((static_cast<float>(i) + 1.0f) + 4.0f) / 2.0f) << i;
}
