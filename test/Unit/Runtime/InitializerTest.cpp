//===- InitializerTest.cpp - Deterministic, order-independent params ------===//
//
// The golden values come from an independent Python implementation of the
// algorithm runtime/README.md documents; if they change, so must the README.
//
//===----------------------------------------------------------------------===//

#include "TestUtil.h"

#include "loom/runtime/exec/Initializer.h"
#include "loom/runtime/support/Random.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

using namespace loom::runtime;
using loom::test::sealLines;

namespace {
std::vector<uint32_t> f32Bits(const std::vector<float> &values) {
  std::vector<uint32_t> bits(values.size());
  std::memcpy(bits.data(), values.data(), values.size() * 4);
  return bits;
}

std::vector<float> normalValues(uint64_t seed, const char *name, double std,
                                size_t count) {
  std::vector<float> values(count);
  initializeTensor({InitKind::Normal, std, 0}, DType::F32, count, seed, name,
                   values.data());
  return values;
}

struct Moments {
  double mean = 0;
  double std = 0;
};

Moments momentsOf(const std::vector<float> &values) {
  Moments m;
  for (float v : values)
    m.mean += v;
  m.mean /= static_cast<double>(values.size());
  for (float v : values)
    m.std += (v - m.mean) * (v - m.mean);
  m.std = std::sqrt(m.std / static_cast<double>(values.size()));
  return m;
}
} // namespace

TEST(Initializer, GeneratorsMatchTheDocumentedAlgorithm) {
  EXPECT_EQ(tensorStreamSeed(0, ""), 0x8fc5e37bc9b65d29ull);
  EXPECT_EQ(tensorStreamSeed(5, "w1"), 0x941ce9e1816c046cull);
  Xoshiro256 rng(0);
  EXPECT_EQ(rng.next(), 0x99ec5f36cb75f2b4ull);

  EXPECT_EQ(f32Bits(normalValues(0, "w", 0.02, 5)),
            (std::vector<uint32_t>{0x3c5a95f8, 0xbcbaadc7, 0x378515c6,
                                   0xbbdeedd8, 0xbc1f1d42}));
  std::vector<float> uniform(4);
  initializeTensor({InitKind::Uniform, -1.0, 3.0}, DType::F32, 4, 42, "u",
                   uniform.data());
  EXPECT_EQ(f32Bits(uniform), (std::vector<uint32_t>{0xbe2336cf, 0x3faab999,
                                                     0x3f0eeb26, 0x3fd3a27b}));
}

TEST(Initializer, SameSeedAndNameGiveTheSameValues) {
  EXPECT_EQ(normalValues(3, "w1", 0.02, 1000),
            normalValues(3, "w1", 0.02, 1000));
  EXPECT_NE(normalValues(3, "w1", 0.02, 1000),
            normalValues(3, "w2", 0.02, 1000));
  EXPECT_NE(normalValues(3, "w1", 0.02, 1000),
            normalValues(4, "w1", 0.02, 1000));
  // A prefix of a longer tensor is the shorter tensor.
  std::vector<float> longer = normalValues(3, "w1", 0.02, 1001);
  longer.pop_back();
  EXPECT_EQ(longer, normalValues(3, "w1", 0.02, 1000));
}

TEST(Initializer, ValuesDoNotDependOnDeclarationOrder) {
  Plan first, second;
  std::string error;
  ASSERT_TRUE(
      parsePlan(sealLines({"loom-plan 1", "model m", "device cpu", "arena 512",
                           "buffer 0 a param f32 16 0 normal 1",
                           "buffer 1 b param bf16 16 64 uniform 0 1"}),
                first, error))
      << error;
  ASSERT_TRUE(
      parsePlan(sealLines({"loom-plan 1", "model m", "device cpu", "arena 512",
                           "buffer 0 b param bf16 16 0 uniform 0 1",
                           "buffer 1 x input f32 8 64",
                           "buffer 2 a param f32 16 128 normal 1"}),
                second, error))
      << error;
  std::vector<char> arenaFirst(512), arenaSecond(512);
  initializeParams(first, arenaFirst.data(), 9);
  initializeParams(second, arenaSecond.data(), 9);
  EXPECT_EQ(std::memcmp(arenaFirst.data(), arenaSecond.data() + 128, 64), 0);
  EXPECT_EQ(std::memcmp(arenaFirst.data() + 64, arenaSecond.data(), 32), 0);
}

// A model large enough for initializeParams to fill its params on several
// threads (one per core and per 4 M elements) gets the bytes each param's
// own stream gives, as one thread would.
TEST(Initializer, ThreadsFillTheBytesOfOneThread) {
  constexpr uint64_t kElements = uint64_t(1) << 20;
  std::vector<std::string> lines = {"loom-plan 1", "model m", "device cpu",
                                    "arena " + std::to_string(6 * 4 * kElements)};
  for (int i = 0; i < 6; ++i)
    lines.push_back("buffer " + std::to_string(i) + " w" + std::to_string(i) +
                    " param f32 " + std::to_string(kElements) + " " +
                    std::to_string(i * 4 * kElements) +
                    (i % 2 ? " uniform -1 1" : " normal 0.5"));
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(sealLines(lines), plan, error)) << error;
  std::vector<char> arena(6 * 4 * kElements), expected(6 * 4 * kElements);
  initializeParams(plan, arena.data(), 11);
  for (const PlanBuffer &buffer : plan.buffers)
    initializeTensor(buffer.init, buffer.dtype, buffer.numElements, 11, buffer.name,
                     expected.data() + buffer.offset);
  EXPECT_EQ(std::memcmp(arena.data(), expected.data(), arena.size()), 0);
}

TEST(Initializer, NormalHasTheRequestedStd) {
  Moments m = momentsOf(normalValues(0, "w", 0.02, 100000));
  EXPECT_NEAR(m.mean, 0.0, 4 * 0.02 / std::sqrt(100000.0));
  EXPECT_NEAR(m.std, 0.02, 0.02 * 0.02);
  Moments unit = momentsOf(normalValues(123, "big", 1.0, 100000));
  EXPECT_NEAR(unit.std, 1.0, 0.02);
}

TEST(Initializer, UniformStaysInBounds) {
  std::vector<float> values(100000);
  initializeTensor({InitKind::Uniform, -1.0, 3.0}, DType::F32, values.size(), 5,
                   "u", values.data());
  float lo = values[0], hi = values[0];
  for (float v : values) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
  }
  EXPECT_GE(lo, -1.0f);
  EXPECT_LE(hi, 3.0f);
  EXPECT_LT(lo, -0.99f);
  EXPECT_GT(hi, 2.99f);
  Moments m = momentsOf(values);
  EXPECT_NEAR(m.mean, 1.0, 0.02);
  EXPECT_NEAR(m.std, 4.0 / std::sqrt(12.0), 0.02);
}

TEST(Initializer, RoundsF32ValuesToTheStorageDType) {
  std::vector<float> f32 = normalValues(1, "w", 0.02, 257);
  std::vector<uint16_t> bf16(257), f16(257);
  initializeTensor({InitKind::Normal, 0.02, 0}, DType::BF16, 257, 1, "w",
                   bf16.data());
  initializeTensor({InitKind::Normal, 0.02, 0}, DType::F16, 257, 1, "w",
                   f16.data());
  for (size_t i = 0; i < f32.size(); ++i) {
    EXPECT_EQ(bf16[i], floatToBF16(f32[i]));
    EXPECT_EQ(f16[i], floatToHalf(f32[i]));
  }
}

TEST(Initializer, ConstantsInEveryDType) {
  uint16_t half[3], brain[3];
  initializeTensor({InitKind::Ones, 0, 0}, DType::F16, 3, 0, "h", half);
  initializeTensor({InitKind::Ones, 0, 0}, DType::BF16, 3, 0, "b", brain);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(half[i], 0x3c00);
    EXPECT_EQ(brain[i], 0x3f80);
  }
  float f32[4] = {1, 1, 1, 1};
  initializeTensor({InitKind::Zeros, 0, 0}, DType::F32, 4, 0, "z", f32);
  for (float v : f32)
    EXPECT_EQ(v, 0.0f);
  initializeTensor({InitKind::Constant, 0.1, 0}, DType::F32, 4, 0, "c", f32);
  for (float v : f32)
    EXPECT_EQ(v, 0.1f);
  int32_t i32[2];
  initializeTensor({InitKind::Constant, 2.5, 0}, DType::I32, 2, 0, "i", i32);
  EXPECT_EQ(i32[0], 2);
  EXPECT_EQ(i32[1], 2);
  int64_t i64[2];
  // Integer constants are not squeezed through f32.
  initializeTensor({InitKind::Constant, 123456789012.0, 0}, DType::I64, 2, 0,
                   "l", i64);
  EXPECT_EQ(i64[1], 123456789012ll);
}

TEST(Initializer, RandomInputs) {
  Plan plan;
  std::string error;
  ASSERT_TRUE(
      parsePlan(sealLines({"loom-plan 1", "model m", "device cpu",
                           "arena 1048576", "buffer 0 x input f32 100000 0",
                           "buffer 1 ids input i32 1000 400000",
                           "buffer 2 h input bf16 10 404032"}),
                plan, error))
      << error;
  std::vector<float> x(100000);
  fillRandomInput(plan.buffers[0], 0, x.data());
  Moments m = momentsOf(x);
  EXPECT_NEAR(m.mean, 0.0, 0.02);
  EXPECT_NEAR(m.std, 1.0, 0.02);
  std::vector<float> again(100000);
  fillRandomInput(plan.buffers[0], 0, again.data());
  EXPECT_EQ(x, again);
  fillRandomInput(plan.buffers[0], 1, again.data());
  EXPECT_NE(x, again);

  std::vector<int32_t> ids(1000);
  fillRandomInput(plan.buffers[1], 0, ids.data());
  int ones = 0;
  for (int32_t id : ids) {
    EXPECT_TRUE(id == 0 || id == 1) << id;
    ones += id;
  }
  EXPECT_GT(ones, 400);
  EXPECT_LT(ones, 600);

  uint16_t h[10];
  fillRandomInput(plan.buffers[2], 0, h);
  std::vector<float> reference = normalValues(0, "h", 1.0, 10);
  for (int i = 0; i < 10; ++i)
    EXPECT_EQ(h[i], floatToBF16(reference[i]));
}

TEST(Initializer, IndexBoundNamesTheFirstBadElement) {
  PlanBuffer ids;
  ids.name = "tokens";
  ids.role = BufferRole::Input;
  ids.dtype = DType::I32;
  ids.shape = {2, 3};
  ids.numElements = 6;
  ids.bound = 10;
  int32_t good[6] = {0, 1, 9, 3, 4, 5};
  std::string error;
  EXPECT_TRUE(checkIndexBound(ids, good, "input 'tokens'", error)) << error;
  int32_t high[6] = {0, 1, 9, 3, 10, 5};
  EXPECT_FALSE(checkIndexBound(ids, high, "input 'tokens'", error));
  EXPECT_EQ(error, "input 'tokens': element [1, 1] is 10, outside [0, 10) "
                   "(the rows or classes it indexes)");
  int64_t negative[6] = {0, -1, 0, 0, 0, 0};
  ids.dtype = DType::I64;
  EXPECT_FALSE(checkIndexBound(ids, negative, "input 'tokens'", error));
  EXPECT_EQ(error.find("element [0, 1] is -1"), 16u) << error;
  ids.bound = 0; // no bound: anything goes
  EXPECT_TRUE(checkIndexBound(ids, negative, "input 'tokens'", error));
}
