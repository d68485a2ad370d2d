//===- GenerationTest.cpp - generate's window and choice of the next byte -===//

#include "TestUtil.h"

#include "loom/runtime/exec/Generation.h"
#include "loom/runtime/plan/Plan.h"
#include "loom/runtime/support/DType.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

using namespace loom::runtime;
using loom::test::sealLines;

namespace {
/// A language model's buffers: tokens [2, 4] of ids below 6, logits
/// [2, 4, 8] (2 of its 8 classes are not ids).
std::vector<std::string> modelLines() {
  return {
      "loom-plan 1",       "model lm",
      "device cpu",        "arena 1024",
      "buffer 0 tokens input i32 2,4 0",
      "bound 0 6",
      "buffer 1 logits output f32 2,4,8 64",
      "kernel k 2",        "step k 0 1",
  };
}

Plan planOf(const std::vector<std::string> &lines) {
  Plan plan;
  std::string error;
  EXPECT_TRUE(parsePlan(sealLines(lines), plan, error)) << error;
  return plan;
}

/// Sets the logits of row 0, position `position` in `arena`.
void setLogits(const Plan &plan, std::vector<char> &arena, uint64_t position,
               const std::vector<float> &values) {
  const PlanBuffer &logits = *plan.findBuffer("logits");
  for (size_t v = 0; v < values.size(); ++v)
    storeElement(DType::F32, arena.data() + logits.offset, position * 8 + v, values[v]);
}

std::vector<int32_t> tokensIn(const Plan &plan, const std::vector<char> &arena) {
  std::vector<int32_t> ids(8);
  std::memcpy(ids.data(), arena.data() + plan.findBuffer("tokens")->offset, 32);
  return ids;
}

constexpr int kSamples = 40000;

/// How often each of the 8 ids is drawn in kSamples bytes generated from
/// `logits` (the same at every position) with `sampling`.
std::vector<int> sampleCounts(const Plan &plan, std::vector<char> &arena,
                              const std::vector<float> &logits,
                              const Sampling &sampling, uint64_t seed) {
  TextGenerator generator;
  std::string error;
  std::vector<int> counts(8, 0);
  EXPECT_TRUE(generator.start(plan, "", sampling, seed, error)) << error;
  for (int i = 0; i < kSamples; ++i) {
    setLogits(plan, arena, std::min<uint64_t>(generator.text().size(), 3), logits);
    int64_t next = -1;
    if (!generator.advance(arena.data() + plan.findBuffer("logits")->offset, next, error)) {
      ADD_FAILURE() << error;
      break;
    }
    ++counts[next];
  }
  return counts;
}
} // namespace

TEST(Generation, RejectsModelsWithoutTokensAndLogits) {
  TextGenerator generator;
  std::string error;
  std::vector<std::string> lines = modelLines();
  lines[4] = "buffer 0 ids input i32 2,4 0";
  lines[5] = "bound 0 6";
  EXPECT_FALSE(generator.start(planOf(lines), "", Sampling(), 0, error));
  EXPECT_EQ(error, "generate needs a model with an integer input 'tokens' [B, T] "
                   "(model 'lm' has no input 'tokens')");

  lines = modelLines();
  lines[6] = "buffer 1 logits output f32 2,3,8 64";
  EXPECT_FALSE(generator.start(planOf(lines), "", Sampling(), 0, error));
  EXPECT_EQ(error, "generate needs a float output 'logits' [2, 4, V] beside the "
                   "input 'tokens' (model 'lm' has 'logits' f32 [2, 3, 8])");

  EXPECT_FALSE(generator.start(planOf(modelLines()), "\x01\x02\x05\x06", Sampling(), 0, error));
  EXPECT_EQ(error, "--prompt: byte 3 is 6, outside the vocabulary of input "
                   "'tokens' (ids 0 to 5)");

  lines = modelLines();
  lines[5] = "bound 0 300";
  EXPECT_FALSE(generator.start(planOf(lines), "", Sampling(), 0, error));
  EXPECT_EQ(error, "generate extends a text of bytes, but input 'tokens' takes ids "
                   "up to 299 (a byte-level model has at most 256)");
}

TEST(Generation, PlacesTheLastBytesOfTheTextInEveryRow) {
  Plan plan = planOf(modelLines());
  TextGenerator generator;
  std::string error;
  ASSERT_TRUE(generator.start(plan, std::string("\x01\x02", 2), Sampling(), 0, error)) << error;
  std::vector<char> arena(1024, 7);
  generator.place(plan, arena.data());
  EXPECT_EQ(tokensIn(plan, arena), (std::vector<int32_t>{1, 2, 0, 0, 1, 2, 0, 0}));

  // The next byte comes from position 1 (the window's last), the most
  // likely among the ids (6 and 7 are not).
  setLogits(plan, arena, 0, {9, 9, 9, 9, 9, 9, 9, 9});
  setLogits(plan, arena, 1, {0, 1, 5, 3, 5, 0, 50, 60});
  int64_t next = -1;
  ASSERT_TRUE(generator.advance(arena.data() + plan.findBuffer("logits")->offset, next, error)) << error;
  EXPECT_EQ(next, 2); // the lower of a tie
  for (int i = 0; i < 3; ++i) {
    setLogits(plan, arena, std::min(2 + i, 3), {0, 0, 0, 4.0f + i, 0, 0, 0, 0});
    ASSERT_TRUE(generator.advance(arena.data() + plan.findBuffer("logits")->offset, next, error)) << error;
    EXPECT_EQ(next, 3);
  }
  // Past T bytes the window slides: the last 4.
  EXPECT_EQ(generator.text(), (std::vector<int64_t>{1, 2, 2, 3, 3, 3}));
  generator.place(plan, arena.data());
  EXPECT_EQ(tokensIn(plan, arena), (std::vector<int32_t>{2, 3, 3, 3, 2, 3, 3, 3}));

  // A NaN among the logits is never chosen, and said once per text
  // (it was silent: the model's likeliest byte could go missing).
  float nan = std::nanf("");
  EXPECT_EQ(generator.takeWarning(), "");
  setLogits(plan, arena, 3, {1, nan, 0, 0, 0, 0, 0, 0});
  ASSERT_TRUE(generator.advance(arena.data() + plan.findBuffer("logits")->offset, next, error)) << error;
  EXPECT_EQ(next, 0);
  EXPECT_EQ(generator.takeWarning(), "the logits for byte 6 include NaN, never chosen "
                                     "(--check-numerics names the first step that wrote one)");
  ASSERT_TRUE(generator.advance(arena.data() + plan.findBuffer("logits")->offset, next, error)) << error;
  EXPECT_EQ(generator.takeWarning(), "");
  // Logits that are all NaN have no next byte.
  setLogits(plan, arena, 3, {nan, nan, nan, nan, nan, nan, nan, nan});
  EXPECT_FALSE(generator.advance(arena.data() + plan.findBuffer("logits")->offset, next, error));
  EXPECT_EQ(error, "the logits for byte 8 are all NaN (--check-numerics names the "
                   "first step that wrote one)");
  // Nor do logits that are all -inf (with NaN or without): it had been
  // byte 0.
  float inf = INFINITY;
  setLogits(plan, arena, 3, {-inf, -inf, nan, -inf, -inf, -inf, -inf, -inf});
  EXPECT_FALSE(generator.advance(arena.data() + plan.findBuffer("logits")->offset, next, error));
  EXPECT_EQ(error, "the logits for byte 8 are all -inf (or NaN): no byte has a chance "
                   "(--check-numerics names the first step that wrote one)");

  // Sampling takes a +inf logit without sampling, and says so once.
  TextGenerator sampler;
  ASSERT_TRUE(sampler.start(plan, "", Sampling{1.0}, 7, error)) << error;
  setLogits(plan, arena, 0, {0, 1, inf, 0, 0, 0, 0, 0});
  ASSERT_TRUE(sampler.advance(arena.data() + plan.findBuffer("logits")->offset, next, error)) << error;
  EXPECT_EQ(next, 2);
  EXPECT_EQ(sampler.takeWarning(), "the logits for byte 0 include +inf, chosen without "
                                   "sampling (--check-numerics names the first step that "
                                   "wrote one)");
}

TEST(Generation, SamplesTheSoftmaxOverTheTemperature) {
  Plan plan = planOf(modelLines());
  std::vector<char> arena(1024, 0);
  // The most likely id (1) is not the last: every probability is
  // relative to its logit.
  std::vector<float> logits = {0.5f, 2.0f, -1.0f, 1.0f, 0.0f, 1.5f, 9.0f, 9.0f};
  for (double temperature : {1.0, 0.5}) {
    std::vector<double> expected(6);
    double total = 0;
    for (int v = 0; v < 6; ++v)
      total += expected[v] = std::exp(logits[v] / temperature);
    std::vector<int> counts = sampleCounts(plan, arena, logits, Sampling{temperature}, 42);
    EXPECT_EQ(counts[6] + counts[7], 0);
    for (int v = 0; v < 6; ++v)
      EXPECT_NEAR(counts[v] / double(kSamples), expected[v] / total, 0.01)
          << "id " << v << " at temperature " << temperature;
  }
}

TEST(Generation, SamplesAmongTheTopKAndTheNucleus) {
  // Probabilities 0.5, 0.3, 0.15, 0.05 at temperature 1 (ids 0, 1, 3, 2;
  // 4 and 5 next to nothing): top-k 2 keeps ids 0 and 1 (0.625, 0.375 once
  // renormalized); top-p 0.8 the same two (0.5 + 0.3 reaches 0.8); top-p
  // 0.9 also id 3; top-k 3 with top-p 0.9 the nucleus of those three
  // (0.5 / 0.95 + 0.3 / 0.95 = 0.84 < 0.9: all three).
  Plan plan = planOf(modelLines());
  std::vector<char> arena(1024, 0);
  float tiny = -60.0f;
  std::vector<float> logits = {std::log(0.5f), std::log(0.3f), std::log(0.05f),
                               std::log(0.15f), tiny, tiny, 9.0f, 9.0f};
  struct Case {
    Sampling sampling;
    std::vector<double> expected; // ids 0..3
  };
  const Case cases[] = {
      {{1.0, 2, 1}, {0.625, 0.375, 0, 0}},
      {{1.0, 0, 0.8}, {0.625, 0.375, 0, 0}},
      {{1.0, 0, 0.9}, {0.5 / 0.95, 0.3 / 0.95, 0, 0.15 / 0.95}},
      {{1.0, 3, 0.9}, {0.5 / 0.95, 0.3 / 0.95, 0, 0.15 / 0.95}},
      {{1.0, 1, 1}, {1, 0, 0, 0}},
  };
  for (const Case &c : cases) {
    std::vector<int> counts = sampleCounts(plan, arena, logits, c.sampling, 7);
    for (int v = 0; v < 4; ++v)
      EXPECT_NEAR(counts[v] / double(kSamples), c.expected[v], 0.01)
          << "id " << v << ", top-k " << c.sampling.topK << ", top-p " << c.sampling.topP;
    EXPECT_EQ(counts[4] + counts[5] + counts[6] + counts[7], 0);
  }
}
