//===- TrainingTest.cpp - Training plans: records, scalars, data ----------===//

#include "TestUtil.h"

#include "loom/runtime/exec/Training.h"
#include "loom/runtime/plan/Plan.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <string>
#include <vector>

using namespace loom::runtime;
using loom::test::sealLines;

namespace {
/// A training step of one param w (and its optimizer state m) and the
/// scalar inputs of Adam.
std::vector<std::string> trainingPlanLines() {
  return {
      "loom-plan 1",
      "model m",
      "device cpu",
      "arena 4096",
      "buffer 0 x input f32 4 0",
      "buffer 1 w param f32 4 64 normal 0.02",
      "buffer 2 opt.m.w param f32 4 128 zeros",
      "buffer 3 opt.step_size input f32 scalar 192",
      "buffer 4 opt.bc2_sqrt input f32 scalar 256",
      "buffer 5 loss output f32 scalar 320",
      "buffer 6 next.w output f32 4 384",
      "buffer 7 next.opt.m.w output f32 4 448",
      "kernel k 8",
      "step k 0 1 2 3 4 5 6 7",
      "optimizer adam 10 lr=0.001 beta1=0.9 beta2=0.999",
      "update 6 1",
      "update 7 2",
  };
}

std::string errorWith(const std::vector<std::string> &lines) {
  return loom::test::planErrorOf(lines);
}

std::string errorWithLine(size_t index, const std::string &line) {
  std::vector<std::string> lines = trainingPlanLines();
  lines[index] = line;
  return errorWith(lines);
}
} // namespace

TEST(Training, ParsesOptimizerAndUpdates) {
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(sealLines(trainingPlanLines()), plan, error)) << error;
  EXPECT_EQ(plan.optimizer.kind, "adam");
  EXPECT_EQ(plan.optimizer.steps, 10u);
  EXPECT_EQ(plan.optimizer.get("beta2", 0), 0.999);
  EXPECT_EQ(plan.optimizer.get("eps", 7), 7);
  ASSERT_EQ(plan.updates.size(), 2u);
  EXPECT_EQ(plan.updates[0].output, 6u);
  EXPECT_EQ(plan.updates[0].param, 1u);
  EXPECT_TRUE(isStepScalar(plan, plan.buffers[3]));
  EXPECT_FALSE(isStepScalar(plan, plan.buffers[0]));
  EXPECT_TRUE(isUpdateOutput(plan, plan.buffers[7]));
  EXPECT_FALSE(isUpdateOutput(plan, plan.buffers[5]));
  // The writer keeps both records.
  Plan again;
  ASSERT_TRUE(parsePlan(writePlan(plan), again, error)) << error;
  EXPECT_EQ(again.updates.size(), 2u);
  EXPECT_EQ(again.optimizer.get("lr", 0), 0.001);
}

TEST(Training, RejectsBadRecords) {
  EXPECT_EQ(errorWithLine(14, "optimizer lamb 10"),
            "plan:15: unknown optimizer 'lamb' (expected sgd, adam or adamw)");
  EXPECT_EQ(errorWithLine(14, "optimizer adam 0"),
            "plan:15: bad number of steps '0' (expected a positive integer)");
  EXPECT_EQ(errorWithLine(14, "optimizer adam 1 lr=-1"),
            "plan:15: bad hyperparameter 'lr=-1' (expected NAME=VALUE, a number >= 0)");
  EXPECT_EQ(errorWithLine(14, "optimizer adam 1 lr=nan"),
            "plan:15: bad hyperparameter 'lr=nan' (expected NAME=VALUE, a number >= 0)");
  EXPECT_EQ(errorWithLine(14, "optimizer adam 1 lr=1 lr=2"),
            "plan:15: hyperparameter 'lr' given twice");
  EXPECT_EQ(errorWithLine(15, "update 5 1"),
            "plan:16: output 'loss' cannot update param 'w': their dtype, "
            "shape, sharding or holding ranks differ");
  EXPECT_EQ(errorWithLine(15, "update 0 1"),
            "plan:16: an update copies an output into a param ('x' is input, "
            "'w' param)");
  EXPECT_EQ(errorWithLine(16, "update 7 1"),
            "plan:17: param 'w' or output 'next.opt.m.w' is in two updates");
  EXPECT_EQ(errorWithLine(15, "update 9 1"),
            "plan:16: update names unknown buffer 9 (the plan has 8 buffers)");
  std::vector<std::string> lines = trainingPlanLines();
  lines.erase(lines.begin() + 14);
  EXPECT_EQ(errorWith(lines), "plan:15: 'update' without an 'optimizer' record");
  lines = trainingPlanLines();
  lines.insert(lines.begin() + 15, "step k 0 1 2 3 4 5 6 7");
  EXPECT_EQ(errorWith(lines).find("plan:16: 'step' record out of order"), 0u)
      << errorWith(lines);
}

TEST(Training, StepScalarsFollowTorch) {
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(sealLines(trainingPlanLines()), plan, error)) << error;
  std::vector<char> arena(plan.arenaBytes, 0);
  auto scalar = [&](unsigned id) {
    float value;
    std::memcpy(&value, arena.data() + plan.buffers[id].offset, sizeof(value));
    return value;
  };
  // The third step, after two applied: t = 3.
  TrainState state = initialTrainState(plan.optimizer);
  state.step = state.applied = 2;
  fillStepScalars(plan, arena.data(), state, 0);
  EXPECT_EQ(scalar(3), static_cast<float>(0.001 / (1 - std::pow(0.9, 3))));
  EXPECT_EQ(scalar(4), static_cast<float>(std::sqrt(1 - std::pow(0.999, 3))));
  EXPECT_EQ(scalar(0), 0.0f); // not a step scalar
  // A skipped step does not count for the bias correction: t stays 2 + 1.
  state.step = 5;
  fillStepScalars(plan, arena.data(), state, 0);
  EXPECT_EQ(scalar(3), static_cast<float>(0.001 / (1 - std::pow(0.9, 3))));
}

TEST(Training, DropoutKeys) {
  // The step's key is the hash docs/language.md defines: these are
  // test/Numerics/dropout_reference.py's seed_key(0, 1), (7, 2) and
  // (5 << 32 | 9, 3).
  EXPECT_EQ(dropoutSeedBits(0, 1), 1753845952u);
  EXPECT_EQ(dropoutSeedBits(7, 2), 3788636316u);
  EXPECT_EQ(dropoutSeedBits((5ull << 32) | 9, 3), 1734215512u);
  std::vector<std::string> lines = trainingPlanLines();
  lines.insert(lines.begin() + 12, {"buffer 8 opt.dropout_seed input f32 scalar 512",
                                    "buffer 9 opt.dropout_microbatch input f32 scalar 576"});
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(sealLines(lines), plan, error)) << error;
  std::vector<char> arena(plan.arenaBytes, 0);
  // The second step (one run) of seed 7: its key's bits, not a number.
  TrainState state = initialTrainState(plan.optimizer);
  state.step = state.applied = 1;
  fillStepScalars(plan, arena.data(), state, 7);
  uint32_t bits;
  std::memcpy(&bits, arena.data() + plan.buffers[8].offset, sizeof(bits));
  EXPECT_EQ(bits, 3788636316u);
  // Each part of the step writes its microbatch; a held-out loss -1.
  auto microbatch = [&] {
    float value;
    std::memcpy(&value, arena.data() + plan.buffers[9].offset, sizeof(value));
    return value;
  };
  const PlanBuffer *key = dropoutMicrobatchKey(plan);
  ASSERT_EQ(key, &plan.buffers[9]);
  fillDropoutMicrobatch(key, arena.data(), 3);
  EXPECT_EQ(microbatch(), 3.0f);
  fillDropoutMicrobatch(key, arena.data(), -1);
  EXPECT_EQ(microbatch(), -1.0f);
  // A plan without dropout has no key.
  Plan plain;
  ASSERT_TRUE(parsePlan(sealLines(trainingPlanLines()), plain, error)) << error;
  EXPECT_EQ(dropoutMicrobatchKey(plain), nullptr);
}

TEST(Training, WarmupCosineSchedule) {
  PlanOptimizer optimizer;
  optimizer.kind = "adamw";
  optimizer.steps = 110;
  optimizer.lrSchedule = "warmup_cosine";
  optimizer.hyperparameters = {{"lr", 1.0}, {"warmup", 10}, {"min_lr", 0.1}};
  EXPECT_DOUBLE_EQ(learningRate(optimizer, 1), 0.1);
  EXPECT_DOUBLE_EQ(learningRate(optimizer, 5), 0.5);
  EXPECT_DOUBLE_EQ(learningRate(optimizer, 10), 1.0);
  // Half way through the decay: the mean of lr and min_lr.
  EXPECT_DOUBLE_EQ(learningRate(optimizer, 60), 0.55);
  EXPECT_DOUBLE_EQ(learningRate(optimizer, 110), 0.1);
  EXPECT_DOUBLE_EQ(learningRate(optimizer, 500), 0.1);
  // warmup_linear: the same warmup, then a straight line to min_lr.
  optimizer.lrSchedule = "warmup_linear";
  EXPECT_DOUBLE_EQ(learningRate(optimizer, 5), 0.5);
  EXPECT_DOUBLE_EQ(learningRate(optimizer, 35), 0.775); // a quarter down
  EXPECT_DOUBLE_EQ(learningRate(optimizer, 60), 0.55);
  EXPECT_DOUBLE_EQ(learningRate(optimizer, 110), 0.1);
  EXPECT_DOUBLE_EQ(learningRate(optimizer, 500), 0.1);
  // A warmup longer than the section's steps: past them the floor (a
  // --steps past S had gone on warming up: 0.109... at step 12).
  optimizer.hyperparameters = {{"lr", 1.0}, {"warmup", 120}, {"min_lr", 0.1}};
  EXPECT_DOUBLE_EQ(learningRate(optimizer, 110), 110.0 / 120);
  EXPECT_DOUBLE_EQ(learningRate(optimizer, 111), 0.1);
  EXPECT_DOUBLE_EQ(learningRate(optimizer, 120), 0.1);
  optimizer.lrSchedule = "constant";
  EXPECT_DOUBLE_EQ(learningRate(optimizer, 500), 1.0);
}

TEST(Training, DynamicLossScaleFollowsGradScaler) {
  PlanOptimizer optimizer;
  optimizer.kind = "adamw";
  optimizer.lossScale = "dynamic";
  TrainState state = initialTrainState(optimizer);
  EXPECT_EQ(state.lossScale, 65536.0);
  // An overflow: skipped, the scale halves, the step still counts for the
  // data and the schedule but not for Adam's t.
  EXPECT_FALSE(advanceTrainState(optimizer, state, INFINITY));
  EXPECT_FALSE(advanceTrainState(optimizer, state, NAN));
  EXPECT_EQ(state.lossScale, 16384.0);
  EXPECT_EQ(state.step, 2u);
  EXPECT_EQ(state.applied, 0u);
  for (int i = 0; i < 1999; ++i)
    ASSERT_TRUE(advanceTrainState(optimizer, state, 1.0));
  EXPECT_EQ(state.lossScale, 16384.0);
  EXPECT_TRUE(advanceTrainState(optimizer, state, 1.0));
  EXPECT_EQ(state.lossScale, 32768.0); // 2000 clean steps in a row
  EXPECT_EQ(state.applied, 2000u);
  // Without loss scaling nothing is skipped, and the scale stays 1.
  optimizer.lossScale = "none";
  state = initialTrainState(optimizer);
  EXPECT_TRUE(advanceTrainState(optimizer, state, NAN));
  EXPECT_EQ(state.lossScale, 1.0);
}

TEST(Training, DataWindowsAndErrors) {
  loom::test::TempDir dir;
  std::string path = dir.path("text.txt");
  loom::test::writeFile(path, "abcdefghij");
  TokenData data;
  std::string error;
  ASSERT_TRUE(loadTokenData(path, data, error)) << error;
  ASSERT_EQ(data.tokens.size(), 10u);
  EXPECT_EQ(data.tokens[0], 'a');
  Plan plan;
  plan.model = "m";
  PlanBuffer tokens, labels;
  tokens.id = 0, labels.id = 1;
  tokens.name = "tokens", labels.name = "labels";
  tokens.role = labels.role = BufferRole::Input;
  tokens.dtype = labels.dtype = DType::I32;
  tokens.shape = labels.shape = {2, 3};
  labels.offset = 64;
  plan.buffers = {tokens, labels};
  const PlanBuffer *t, *l;
  ASSERT_TRUE(findBatchInputs(plan, data, t, l, error)) << error;
  std::vector<char> arena(128, 0);
  // Step 1 (from 0): rows start at (1*2 + b) * 3 mod (10 - 3 - 1) = 0, 3.
  fillBatch(data, *t, *l, arena.data(), 1);
  int32_t row[6];
  std::memcpy(row, arena.data(), sizeof(row));
  EXPECT_EQ(std::string(row, row + 6), std::string("abcdef"));
  std::memcpy(row, arena.data() + 64, sizeof(row));
  EXPECT_EQ(std::string(row, row + 6), std::string("bcdefg"));

  loom::test::writeFile(path, "abc");
  ASSERT_TRUE(loadTokenData(path, data, error));
  EXPECT_FALSE(findBatchInputs(plan, data, t, l, error));
  EXPECT_EQ(error, path + ": 3 tokens, but a row of tokens and labels needs "
                          "T + 1 = 4 and the offsets need one more");
  // i32 tokens and i64 labels: each is written in its own dtype (a model
  // of the two had been refused, as if it had no such inputs).
  loom::test::writeFile(path, "abcdefghij");
  ASSERT_TRUE(loadTokenData(path, data, error)) << error;
  plan.buffers[1].dtype = DType::I64;
  ASSERT_TRUE(findBatchInputs(plan, data, t, l, error)) << error;
  std::fill(arena.begin(), arena.end(), 0);
  fillBatch(data, *t, *l, arena.data(), 1);
  std::memcpy(row, arena.data(), sizeof(row));
  EXPECT_EQ(std::string(row, row + 6), std::string("abcdef"));
  int64_t wide[6];
  std::memcpy(wide, arena.data() + 64, sizeof(wide));
  EXPECT_EQ(std::string(wide, wide + 6), std::string("bcdefg"));
  // Other shapes say what the model has.
  plan.buffers[1].shape = {6};
  EXPECT_FALSE(findBatchInputs(plan, data, t, l, error));
  EXPECT_EQ(error, "--data fills the inputs 'tokens' and 'labels' (integers of one "
                   "shape [B, T]), but model 'm' has tokens i32 [2, 3] and labels i64 [6]");
  plan.buffers[1].shape = {2, 3};
  plan.buffers[1].dtype = DType::I32;
  plan.buffers[1].name = "targets";
  EXPECT_FALSE(findBatchInputs(plan, data, t, l, error));
  EXPECT_EQ(error, "--data fills the inputs 'tokens' and 'labels' (integers of one "
                   "shape [B, T]), which model 'm' does not have");
  EXPECT_FALSE(loadTokenData(dir.path("none"), data, error));

  // A .npy of ids: C order, and nothing past them (trailing bytes were
  // read as nothing, as an --input's are refused).
  auto npy = [](const std::string &dict, const std::string &data) {
    std::string header = dict;
    while ((10 + header.size() + 1) % 64)
      header += ' ';
    header += '\n';
    std::string bytes("\x93NUMPY\x01\x00", 8);
    bytes += static_cast<char>(header.size() & 0xff);
    bytes += static_cast<char>(header.size() >> 8);
    return bytes + header + data;
  };
  std::string ids("\x01\x00\x02\x00\x03\x00", 6);
  std::string ok = npy("{'descr': '<u2', 'fortran_order': False, 'shape': (3,), }", ids);
  loom::test::writeFile(path, ok);
  ASSERT_TRUE(loadTokenData(path, data, error)) << error;
  EXPECT_EQ(data.tokens.size(), 3u);
  loom::test::writeFile(path, ok + "xy");
  EXPECT_FALSE(loadTokenData(path, data, error));
  EXPECT_EQ(error, path + ": the file has 8 data bytes, expected 6 for its 3 ids");
  loom::test::writeFile(
      path, npy("{'descr': '<u2', 'fortran_order': True, 'shape': (3,), }", ids));
  EXPECT_FALSE(loadTokenData(path, data, error));
  EXPECT_EQ(error, path + ": --data takes a 1-D .npy array of integers (<i8, <i4, <i2, "
                          "<u2, |u1 or |i1) in C order, got <u2 [3] in Fortran order");
}

TEST(Training, TokenIdsKeepTheFilesWidth) {
  // Ids stay as the file stores them: a header's bytes, then 2-byte
  // unsigned ids (a .npy '<u2'), read at their width, signed or not.
  std::string bytes = "HDR";
  for (uint16_t id : {7, 65535, 300}) {
    char pair[2];
    std::memcpy(pair, &id, 2);
    bytes.append(pair, 2);
  }
  TokenIds ids;
  ids.adopt(bytes, 3, 3, 2, false);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0], 7);
  EXPECT_EQ(ids[1], 65535);
  EXPECT_EQ(ids[2], 300);
  ids.adopt(bytes, 3, 3, 2, true);
  EXPECT_EQ(ids[1], -1);
  ids.adopt(std::string("\x05\xff", 2), 0, 2, 1, false);
  EXPECT_EQ(ids[1], 255);
  // Appending widens to 8-byte ids, keeping the others.
  ids.push_back(1LL << 40);
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[0], 5);
  EXPECT_EQ(ids[1], 255);
  EXPECT_EQ(ids[2], 1LL << 40);
  ids.assign(4, 9);
  EXPECT_EQ(ids.size(), 4u);
  EXPECT_EQ(ids[3], 9);
}

TEST(Training, MicrobatchRecords) {
  // grad runs per microbatch; the update reads the accumulated mean.
  std::vector<std::string> lines = {
      "loom-plan 1",
      "model m",
      "device cpu",
      "arena 4096",
      "buffer 0 x input f32 2,4 0",
      "buffer 1 w param f32 4 64 zeros",
      "buffer 2 g temp f32 4 128",
      "buffer 3 l temp f32 scalar 192",
      "buffer 4 gm temp f32 4 256",
      "buffer 5 loss output f32 scalar 320",
      "buffer 6 next.w output f32 4 384",
      "kernel grad 4",
      "kernel sgd 3",
      "step grad 0 1 2 3",
      "accumulate 2 4",
      "accumulate 3 5",
      "step sgd 1 4 6",
      "optimizer sgd 1 lr=0.1 microbatches=2",
      "update 6 1",
  };
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(sealLines(lines), plan, error)) << error;
  EXPECT_EQ(plan.optimizer.microbatches, 2u);
  EXPECT_EQ(plan.microbatchSteps(), 3u);
  EXPECT_TRUE(plan.isMicrobatched(plan.buffers[0]));
  PlanBuffer whole;
  ASSERT_TRUE(wholeBatchOf(plan.buffers[0], 2, whole));
  EXPECT_EQ(whole.shape, (Shape{4, 4}));
  EXPECT_EQ(whole.bytes, 64u);
  Plan again;
  ASSERT_TRUE(parsePlan(writePlan(plan), again, error)) << error;
  EXPECT_EQ(again.optimizer.microbatches, 2u);
  EXPECT_EQ(again.microbatchSteps(), 3u);

  auto with = [&](size_t index, const std::string &line) {
    std::vector<std::string> bad = lines;
    bad[index] = line;
    return errorWith(bad);
  };
  EXPECT_EQ(with(14, "accumulate 0 4"),
            "plan:15: an accumulate reads a temp and writes a temp or an "
            "output ('x' is input, 'gm' temp)");
  EXPECT_EQ(with(14, "accumulate 2 5"),
            "plan:15: an accumulate needs two f32 buffers of one shape ('g' "
            "is f32 [4], 'loss' f32 [])");
  EXPECT_EQ(with(14, "accumulate 2 2"),
            "plan:15: accumulate reads and writes the same buffer 2");
  EXPECT_EQ(with(15, "accumulate 3 4"),
            "plan:16: an accumulate needs two f32 buffers of one shape ('l' "
            "is f32 [], 'gm' f32 [4])");
  EXPECT_EQ(with(16, "step sgd 1 2 6"),
            "plan:17: this step reads buffer 'g', which a step of the "
            "microbatches wrote: past the last 'accumulate' only "
            "accumulates' results carry values");
  EXPECT_EQ(with(17, "optimizer sgd 1 lr=0.1"),
            "plan:16: an 'accumulate' step needs an 'optimizer' record with "
            "microbatches=M, M >= 2");
  EXPECT_EQ(with(17, "optimizer sgd 1 lr=0.1 microbatches=0"),
            "plan:18: bad microbatches '0' (expected an integer from 1 to "
            "1048576)");
  EXPECT_EQ(with(14, "accumulate 2"), "plan:15: expected 'accumulate IN OUT'");
  lines.erase(lines.begin() + 14, lines.begin() + 16);
  lines[14] = "step sgd 1 2 6";
  EXPECT_EQ(errorWith(lines), "plan:18: microbatches=2 without an 'accumulate' step");
}

TEST(Training, MicrobatchDataRows) {
  // Microbatch mb of step s holds rows [mb B/m, (mb + 1) B/m) of the
  // step's B rows: the same tokens as the whole batch.
  TokenData data;
  for (int i = 0; i < 1000; ++i)
    data.tokens.push_back(i % 251);
  auto buffer = [](unsigned id, uint64_t rows, uint64_t offset) {
    PlanBuffer b;
    b.id = id;
    b.dtype = DType::I32;
    b.shape = {static_cast<int64_t>(rows), 5};
    b.offset = offset;
    return b;
  };
  // evaluate's default: the steps whose windows do not wrap, (1000 - 5 -
  // 1) / (4 x 5) = 49; a step of 2 microbatches of 2 rows is the same.
  EXPECT_EQ(batchesIn(data, buffer(0, 4, 0)), 49u);
  EXPECT_EQ(batchesIn(data, buffer(0, 2, 0), 2), 49u);
  // Step 48's last row starts at 975 of the 994 offsets; step 49's would
  // wrap around to 1.
  std::vector<char> last(2 * 4 * 5 * 4);
  int32_t id;
  for (uint64_t step : {48, 49}) {
    fillBatch(data, buffer(0, 4, 0), buffer(1, 4, 80), last.data(), step);
    std::memcpy(&id, last.data() + 3 * 5 * 4, sizeof(id)); // row 3's first
    EXPECT_EQ(id, step == 48 ? 975 % 251 : 1);
  }
  // A window does not wrap while its start is below the span, which need
  // not hold a whole window more: 1040 tokens of [16, 32] batches have a
  // span of 1007 and 32 windows (starts 0 to 992), 2 batches (the count
  // was span / (B T) = 1).
  TokenData gpl;
  gpl.tokens.assign(1040, 7);
  auto wide = [](uint64_t rows) {
    PlanBuffer b;
    b.dtype = DType::I32;
    b.shape = {static_cast<int64_t>(rows), 32};
    return b;
  };
  EXPECT_EQ(batchesIn(gpl, wide(16)), 2u);
  EXPECT_EQ(batchesIn(gpl, wide(8), 2), 2u);
  gpl.tokens.assign(1025, 7); // span 992: 31 windows
  EXPECT_EQ(batchesIn(gpl, wide(16)), 1u);
  // A stream shorter than one batch still gives one.
  TokenData short_;
  short_.tokens.assign(12, 0);
  EXPECT_EQ(batchesIn(short_, buffer(0, 4, 0)), 1u);
  std::vector<char> whole(2 * 4 * 5 * 4), half(2 * 2 * 5 * 4);
  fillBatch(data, buffer(0, 4, 0), buffer(1, 4, 80), whole.data(), 3);
  for (uint64_t microbatch = 0; microbatch < 2; ++microbatch) {
    fillBatch(data, buffer(0, 2, 0), buffer(1, 2, 40), half.data(), 3, 2,
              microbatch);
    EXPECT_EQ(std::memcmp(half.data(), whole.data() + microbatch * 40, 40), 0);
    EXPECT_EQ(std::memcmp(half.data() + 40, whole.data() + 80 + microbatch * 40, 40), 0);
  }
}
