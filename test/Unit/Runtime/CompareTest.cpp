//===- CompareTest.cpp - The tolerance of --check-kernels -----------------===//

#include "loom/runtime/exec/Compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

using namespace loom::runtime;

namespace {
std::vector<uint16_t> bf16(const std::vector<float> &values) {
  std::vector<uint16_t> bits;
  for (float value : values)
    bits.push_back(floatToBF16(value));
  return bits;
}

std::vector<uint16_t> f16(const std::vector<float> &values) {
  std::vector<uint16_t> bits;
  for (float value : values)
    bits.push_back(floatToHalf(value));
  return bits;
}

template <typename T>
TensorComparison compare(DType dtype, const std::vector<T> &got,
                         const std::vector<T> &reference) {
  EXPECT_EQ(got.size(), reference.size());
  return compareTensors(dtype, got.data(), reference.data(), got.size());
}

constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();
constexpr float kInf = std::numeric_limits<float>::infinity();
} // namespace

TEST(Compare, UlpIsTheSpacingOfTheDtype) {
  EXPECT_EQ(ulpOf(DType::F32, 1.0), std::ldexp(1.0, -23));
  EXPECT_EQ(ulpOf(DType::BF16, 1.0), std::ldexp(1.0, -7));
  EXPECT_EQ(ulpOf(DType::BF16, -1.99), std::ldexp(1.0, -7));
  EXPECT_EQ(ulpOf(DType::BF16, 2.0), std::ldexp(1.0, -6));
  EXPECT_EQ(ulpOf(DType::BF16, 0.999), std::ldexp(1.0, -8));
  EXPECT_EQ(ulpOf(DType::F16, 1.0), std::ldexp(1.0, -10));
  EXPECT_EQ(ulpOf(DType::F16, 65504.0), 32.0);
  // Below the smallest normal: the subnormal spacing.
  EXPECT_EQ(ulpOf(DType::F16, 0.0), std::ldexp(1.0, -24));
  EXPECT_EQ(ulpOf(DType::F16, 1e-6), std::ldexp(1.0, -24));
  EXPECT_EQ(ulpOf(DType::BF16, 0.0), std::ldexp(1.0, -133));
  EXPECT_EQ(ulpOf(DType::F32, 0.0), std::ldexp(1.0, -149));
  // Just below a power of two (where floor(log2(m)) would round up).
  EXPECT_EQ(ulpOf(DType::F32, std::nextafter(4.0, 0.0)), std::ldexp(1.0, -22));
}

TEST(Compare, SixteenBitRuleIsTwoUlpAtTheValuePlusOneAtRms) {
  // 2 ulp(bf16, 1) + 1 ulp(bf16, rms 1) = 3/128.
  EXPECT_EQ(toleranceOf(DType::BF16, -1.0, 1.0), 3.0 / 128);
  // A small value in a large tensor: the rms term dominates.
  EXPECT_EQ(toleranceOf(DType::BF16, 0.01, 8.0),
            2 * std::ldexp(1.0, -14) + std::ldexp(1.0, -4));
  EXPECT_EQ(toleranceOf(DType::F16, 1.0, 1.0), 3.0 / 1024);

  std::vector<float> ref = {1, -1, 1, -1};
  TensorComparison same = compare(DType::BF16, bf16(ref), bf16(ref));
  EXPECT_TRUE(same.passed());
  EXPECT_EQ(same.elements, 4u);
  EXPECT_EQ(same.rms, 1.0);
  EXPECT_EQ(same.maxAbsError, 0.0);

  // 3 ulp away passes; 4 ulp does not.
  TensorComparison three = compare(
      DType::BF16, bf16({1 + 3.0f / 128, -1, 1, -1 - 3.0f / 128}), bf16(ref));
  EXPECT_TRUE(three.passed());
  EXPECT_EQ(three.maxUlps, 3.0);
  EXPECT_EQ(three.maxAbsError, 3.0 / 128);
  TensorComparison four = compare(
      DType::BF16, bf16({1, -1 - 4.0f / 128, 1 + 5.0f / 128, -1}), bf16(ref));
  EXPECT_FALSE(four.passed());
  EXPECT_EQ(four.over, 2u);
  EXPECT_EQ(four.worst, 2u); // the furthest beyond the tolerance
  EXPECT_EQ(four.maxUlps, 5.0);
  EXPECT_EQ(four.nonfinite, 0u);

  // f16 has 10 mantissa bits: 3/1024 passes, 4/1024 not.
  EXPECT_TRUE(compare(DType::F16, f16({1 + 3.0f / 1024}), f16({1})).passed());
  EXPECT_FALSE(compare(DType::F16, f16({1 + 4.0f / 1024}), f16({1})).passed());
}

TEST(Compare, TermsAddTwoUlpOfTheirSize) {
  // An attention row of few keys whose terms cancel: the output 0.01, its
  // terms 2 in size. 2 ulp(bf16, 2) = 1/32 more.
  EXPECT_EQ(toleranceOf(DType::BF16, 0.01, 0.01, 2.0),
            toleranceOf(DType::BF16, 0.01, 0.01) + 2.0 / 64);
  EXPECT_EQ(toleranceOf(DType::F32, 1.0, 1.0, 100.0), 1e-5 * 102);
  std::vector<uint16_t> ref = bf16({0.01f, 1}), got = bf16({0.03f, 1});
  std::vector<uint16_t> terms = bf16({2, 1});
  EXPECT_FALSE(compareTensors(DType::BF16, got.data(), ref.data(), 2).passed());
  EXPECT_TRUE(
      compareTensors(DType::BF16, got.data(), ref.data(), 2, terms.data()).passed());
  std::vector<uint16_t> far = bf16({0.05f, 1});
  EXPECT_FALSE(
      compareTensors(DType::BF16, far.data(), ref.data(), 2, terms.data()).passed());
  EXPECT_EQ(describeTolerance(DType::BF16, 0.5, true),
            "2 ulp(bf16, |cpu|) + 1 ulp(bf16, rms 0.5) + 2 ulp(bf16, terms)");
}

TEST(Compare, F32RuleIsRelativeToTheValuePlusRms) {
  std::vector<float> ones = {1, 1, 1, 1};
  EXPECT_TRUE(compare(DType::F32, std::vector<float>{1, 1.000019f, 1, 1}, ones)
                  .passed());
  TensorComparison over =
      compare(DType::F32, std::vector<float>{1, 1, 1.000021f, 1}, ones);
  EXPECT_EQ(over.over, 1u);
  EXPECT_EQ(over.worst, 2u);
  EXPECT_NEAR(over.maxUlps, 0.000021 / std::ldexp(1.0, -23), 1.0);

  // Near zero the tolerance is 1e-5 x rms (70.7 here), not 1e-5 x 0.
  std::vector<float> ref = {0, 100};
  EXPECT_TRUE(
      compare(DType::F32, std::vector<float>{5e-4f, 100}, ref).passed());
  EXPECT_FALSE(
      compare(DType::F32, std::vector<float>{1e-3f, 100}, ref).passed());
  EXPECT_EQ(describeTolerance(DType::F32, 70.71), "1e-05 x (|cpu| + rms 70.7)");
  EXPECT_EQ(describeTolerance(DType::BF16, 0.5),
            "2 ulp(bf16, |cpu|) + 1 ulp(bf16, rms 0.5)");
  EXPECT_EQ(describeTolerance(DType::I64, 3), "exact");
}

TEST(Compare, NaNAndInfinitiesMustMatch) {
  std::vector<float> ref = {kNaN, kInf, -kInf, 1};
  // Any NaN matches any NaN; infinities only themselves. The reference's
  // non-finite elements do not count in its rms.
  std::vector<float> got = {-kNaN, kInf, -kInf, 1};
  TensorComparison same = compare(DType::F32, got, ref);
  EXPECT_TRUE(same.passed());
  EXPECT_EQ(same.rms, 1.0);

  TensorComparison wrong =
      compare(DType::F32, std::vector<float>{1, kInf, kInf, kNaN}, ref);
  EXPECT_EQ(wrong.over, 3u);
  EXPECT_EQ(wrong.nonfinite, 3u);
  EXPECT_EQ(wrong.worst, 0u); // the first mismatch
  EXPECT_EQ(wrong.maxAbsError, 0.0);

  // A finite value where the reference overflowed, and the other way.
  EXPECT_EQ(compare(DType::F32, std::vector<float>{3e38f}, {kInf}).nonfinite,
            1u);
  TensorComparison bf = compare(DType::BF16, bf16({2, kInf}), bf16({2, 4}));
  EXPECT_EQ(bf.over, 1u);
  EXPECT_EQ(bf.worst, 1u);
  // A non-finite mismatch is the worst even after a larger finite error.
  TensorComparison mixed =
      compare(DType::F32, std::vector<float>{50, 1, kNaN}, {1, 1, 1});
  EXPECT_EQ(mixed.over, 2u);
  EXPECT_EQ(mixed.worst, 2u);
}

TEST(Compare, IntegersAreExact) {
  TensorComparison same = compare(DType::I32, std::vector<int32_t>{1, -2, 3},
                                  std::vector<int32_t>{1, -2, 3});
  EXPECT_TRUE(same.passed());
  EXPECT_EQ(same.maxUlps, 0.0);
  TensorComparison off = compare(DType::I32, std::vector<int32_t>{1, 7, 4},
                                 std::vector<int32_t>{1, 2, 3});
  EXPECT_EQ(off.over, 2u);
  EXPECT_EQ(off.worst, 1u);
  EXPECT_EQ(off.maxAbsError, 5.0);
  // Beyond 2^53, where doubles cannot tell the values apart.
  int64_t big = (int64_t(1) << 53) + 1;
  TensorComparison wide = compare(DType::I64, std::vector<int64_t>{big},
                                  std::vector<int64_t>{big - 1});
  EXPECT_EQ(wide.over, 1u);
  EXPECT_TRUE(
      compare(DType::I64, std::vector<int64_t>{big}, std::vector<int64_t>{big})
          .passed());
}
