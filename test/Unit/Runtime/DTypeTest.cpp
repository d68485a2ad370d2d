//===- DTypeTest.cpp - Element sizes and f32 <-> f16/bf16 rounding --------===//
//
// Expected bit patterns are worked out by hand in the comments; a sweep
// checks nearest-even rounding against double arithmetic, and where the
// compiler has a native _Float16 its conversion is a second reference.
//
//===----------------------------------------------------------------------===//

#include "loom/runtime/support/DType.h"
#include "loom/runtime/support/Shape.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

using namespace loom::runtime;

namespace {
float fromBits(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, 4);
  return value;
}

uint32_t toBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  return bits;
}

bool isHalfNaN(uint16_t bits) {
  return (bits & 0x7c00) == 0x7c00 && (bits & 0x3ff);
}

bool isBF16NaN(uint16_t bits) {
  return (bits & 0x7f80) == 0x7f80 && (bits & 0x7f);
}
} // namespace

TEST(DType, NamesAndSizes) {
  struct Case {
    DType dtype;
    const char *name;
    size_t size;
    bool isFloat;
  };
  const Case cases[] = {{DType::F32, "f32", 4, true},
                        {DType::F16, "f16", 2, true},
                        {DType::BF16, "bf16", 2, true},
                        {DType::I32, "i32", 4, false},
                        {DType::I64, "i64", 8, false}};
  for (const Case &c : cases) {
    EXPECT_STREQ(dtypeName(c.dtype), c.name);
    EXPECT_EQ(dtypeSize(c.dtype), c.size);
    EXPECT_EQ(isFloatDType(c.dtype), c.isFloat);
    DType parsed;
    ASSERT_TRUE(parseDType(c.name, parsed));
    EXPECT_EQ(parsed, c.dtype);
  }
  DType parsed;
  EXPECT_FALSE(parseDType("f64", parsed));
  EXPECT_FALSE(parseDType("", parsed));
  EXPECT_FALSE(parseDType("F32", parsed));
}

TEST(DType, ShapeArithmetic) {
  uint64_t count = 0, bytes = 0;
  EXPECT_TRUE(numElements({}, count));
  EXPECT_EQ(count, 1u);
  EXPECT_TRUE(byteSize(DType::BF16, {64, 512}, bytes));
  EXPECT_EQ(bytes, 65536u);
  EXPECT_TRUE(numElements({1ll << 40, 0, 1ll << 40}, count));
  EXPECT_EQ(count, 0u);
  EXPECT_FALSE(numElements({1ll << 31, 1ll << 31, 2}, count));
  EXPECT_FALSE(numElements({-1}, count));
  EXPECT_FALSE(byteSize(DType::I64, {1ll << 60}, bytes));
  EXPECT_EQ(formatShape({64, 512}), "[64, 512]");
  EXPECT_EQ(formatShape({7}), "[7]");
  EXPECT_EQ(formatShape({}), "[]");
}

TEST(DType, BF16RoundsToNearestEven) {
  EXPECT_EQ(floatToBF16(1.0f), 0x3f80);
  EXPECT_EQ(floatToBF16(-2.0f), 0xc000);
  EXPECT_EQ(floatToBF16(0.0f), 0x0000);
  EXPECT_EQ(floatToBF16(-0.0f), 0x8000);
  // 0x3f808000 lies exactly between 0x3f80 and 0x3f81: the even one wins.
  EXPECT_EQ(floatToBF16(fromBits(0x3f808000)), 0x3f80);
  // Between 0x3f81 (odd) and 0x3f82: up to the even one.
  EXPECT_EQ(floatToBF16(fromBits(0x3f818000)), 0x3f82);
  // Just above and below the halfway point.
  EXPECT_EQ(floatToBF16(fromBits(0x3f808001)), 0x3f81);
  EXPECT_EQ(floatToBF16(fromBits(0x3f807fff)), 0x3f80);
  EXPECT_EQ(floatToBF16(fromBits(0xbf818000)), 0xbf82);
  // A carry out of the mantissa moves to the next binade: 0x3fffffff is
  // just below 2.0 and rounds to 2.0 (0x4000).
  EXPECT_EQ(floatToBF16(fromBits(0x3fffffff)), 0x4000);
}

TEST(DType, BF16InfinitiesOverflowAndNaN) {
  float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(floatToBF16(inf), 0x7f80);
  EXPECT_EQ(floatToBF16(-inf), 0xff80);
  // FLT_MAX is above the largest bf16 (0x7f7f) by more than half an ulp.
  EXPECT_EQ(floatToBF16(std::numeric_limits<float>::max()), 0x7f80);
  EXPECT_EQ(floatToBF16(-std::numeric_limits<float>::max()), 0xff80);
  // The tie between 0x7f7f and Inf goes to Inf (even).
  EXPECT_EQ(floatToBF16(fromBits(0x7f7f8000)), 0x7f80);
  EXPECT_EQ(floatToBF16(fromBits(0x7f7f7fff)), 0x7f7f);
  // NaNs stay NaNs, keep their sign, and become quiet, even when all their
  // payload bits would be truncated away.
  EXPECT_EQ(floatToBF16(fromBits(0x7fc00000)), 0x7fc0);
  EXPECT_EQ(floatToBF16(fromBits(0x7f800001)), 0x7fc0);
  EXPECT_EQ(floatToBF16(fromBits(0xff800001)), 0xffc0);
  EXPECT_TRUE(isBF16NaN(floatToBF16(std::nanf(""))));
  EXPECT_TRUE(std::isnan(bf16ToFloat(0x7fc0)));
  EXPECT_EQ(bf16ToFloat(0xff80), -inf);
}

TEST(DType, BF16Subnormals) {
  // bf16 shares f32's exponent range: subnormals round within the mantissa.
  EXPECT_EQ(floatToBF16(fromBits(0x00010000)), 0x0001);
  EXPECT_EQ(floatToBF16(fromBits(0x00008000)), 0x0000); // tie to even zero
  EXPECT_EQ(floatToBF16(fromBits(0x00008001)), 0x0001);
  EXPECT_EQ(floatToBF16(fromBits(0x00018000)), 0x0002); // tie, odd -> up
  EXPECT_EQ(floatToBF16(fromBits(0x807fffff)), 0x8080); // to -FLT_MIN
  EXPECT_EQ(bf16ToFloat(0x0001), fromBits(0x00010000));
}

TEST(DType, HalfRoundsToNearestEven) {
  EXPECT_EQ(floatToHalf(1.0f), 0x3c00);
  EXPECT_EQ(floatToHalf(-2.0f), 0xc000);
  EXPECT_EQ(floatToHalf(0.5f), 0x3800);
  EXPECT_EQ(floatToHalf(0.0f), 0x0000);
  EXPECT_EQ(floatToHalf(-0.0f), 0x8000);
  // 1 + 2^-11 is halfway between 1 (0x3c00) and 1 + 2^-10 (0x3c01).
  EXPECT_EQ(floatToHalf(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // 1 + 3*2^-11 is halfway between 0x3c01 (odd) and 0x3c02.
  EXPECT_EQ(floatToHalf(1.0f + 3 * std::ldexp(1.0f, -11)), 0x3c02);
  EXPECT_EQ(floatToHalf(std::nextafter(1.0f + std::ldexp(1.0f, -11), 2.0f)),
            0x3c01);
  // Around 2048 the half ulp is 2: 2049 ties down to 2048 (0x6800), 2051
  // ties up to 2052 (0x6802).
  EXPECT_EQ(floatToHalf(2049.0f), 0x6800);
  EXPECT_EQ(floatToHalf(2051.0f), 0x6802);
  EXPECT_EQ(floatToHalf(-2051.0f), 0xe802);
  // 0.1 = 0x3dcccccd rounds to 0x2e66.
  EXPECT_EQ(floatToHalf(0.1f), 0x2e66);
}

TEST(DType, HalfOverflowInfinitiesAndNaN) {
  float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(floatToHalf(65504.0f), 0x7bff); // the largest half
  EXPECT_EQ(floatToHalf(65519.0f), 0x7bff);
  EXPECT_EQ(floatToHalf(fromBits(0x477fefff)), 0x7bff); // just below 65520
  EXPECT_EQ(floatToHalf(65520.0f), 0x7c00);             // tie with 2^16: to Inf
  EXPECT_EQ(floatToHalf(-65520.0f), 0xfc00);
  EXPECT_EQ(floatToHalf(1e10f), 0x7c00);
  EXPECT_EQ(floatToHalf(std::numeric_limits<float>::max()), 0x7c00);
  EXPECT_EQ(floatToHalf(inf), 0x7c00);
  EXPECT_EQ(floatToHalf(-inf), 0xfc00);
  EXPECT_EQ(floatToHalf(fromBits(0x7fc00000)), 0x7e00);
  // A NaN whose payload lies only in the dropped bits stays a NaN.
  EXPECT_EQ(floatToHalf(fromBits(0x7f800001)), 0x7e00);
  EXPECT_EQ(floatToHalf(fromBits(0xffc00000)), 0xfe00);
  EXPECT_TRUE(isHalfNaN(floatToHalf(fromBits(0x7fffffff))));
  EXPECT_EQ(halfToFloat(0x7c00), inf);
  EXPECT_EQ(halfToFloat(0xfc00), -inf);
  EXPECT_TRUE(std::isnan(halfToFloat(0x7e00)));
  EXPECT_TRUE(std::isnan(halfToFloat(0x7c01)));
  EXPECT_EQ(halfToFloat(0x7bff), 65504.0f);
}

TEST(DType, HalfSubnormals) {
  float tiny = std::ldexp(1.0f, -24); // the smallest subnormal half
  EXPECT_EQ(floatToHalf(tiny), 0x0001);
  EXPECT_EQ(floatToHalf(-tiny), 0x8001);
  // 2^-25 is halfway between 0 and 2^-24: ties to the even zero.
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -25)), 0x0000);
  EXPECT_EQ(floatToHalf(-std::ldexp(1.0f, -25)), 0x8000);
  EXPECT_EQ(floatToHalf(std::nextafter(std::ldexp(1.0f, -25), 1.0f)), 0x0001);
  // 1.5 * 2^-24 ties up to 2 (even); 2.5 * 2^-24 ties down to 2.
  EXPECT_EQ(floatToHalf(1.5f * tiny), 0x0002);
  EXPECT_EQ(floatToHalf(2.5f * tiny), 0x0002);
  EXPECT_EQ(floatToHalf(3.5f * tiny), 0x0004);
  // The largest subnormal, and the tie between it and the smallest normal.
  EXPECT_EQ(floatToHalf(1023.0f * tiny), 0x03ff);
  EXPECT_EQ(floatToHalf(1023.5f * tiny), 0x0400);
  EXPECT_EQ(floatToHalf(1022.5f * tiny), 0x03fe);
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -14)), 0x0400);
  // f32 values far below the half range, f32 subnormals included.
  EXPECT_EQ(floatToHalf(std::ldexp(1.0f, -30)), 0x0000);
  EXPECT_EQ(floatToHalf(fromBits(0x00000001)), 0x0000);
  EXPECT_EQ(floatToHalf(fromBits(0x80000001)), 0x8000);
  EXPECT_EQ(halfToFloat(0x0001), tiny);
  EXPECT_EQ(halfToFloat(0x03ff), 1023.0f * tiny);
  EXPECT_EQ(halfToFloat(0x8001), -tiny);
  EXPECT_TRUE(std::signbit(halfToFloat(0x8000)));
}

TEST(DType, SixteenBitPatternsRoundTripExactly) {
  for (uint32_t bits = 0; bits <= 0xffff; ++bits) {
    uint16_t pattern = static_cast<uint16_t>(bits);
    if (!isHalfNaN(pattern)) {
      float value = halfToFloat(pattern);
      EXPECT_EQ(floatToHalf(value), pattern) << std::hex << bits;
    }
    if (!isBF16NaN(pattern)) {
      EXPECT_EQ(toBits(bf16ToFloat(pattern)), bits << 16);
      EXPECT_EQ(floatToBF16(bf16ToFloat(pattern)), pattern) << std::hex << bits;
    }
  }
}

/// Checks floatToHalf / floatToBF16 against a wide sweep of f32 patterns
/// using double arithmetic as the reference: the result must be one of the
/// two neighbours, the nearer one, and the even one on a tie.
TEST(DType, RoundingMatchesAReference) {
  auto check = [](uint32_t bits) {
    float value = fromBits(bits);
    if (std::isnan(value))
      return;
    for (int format = 0; format < 2; ++format) {
      bool half = format == 0;
      uint16_t got = half ? floatToHalf(value) : floatToBF16(value);
      double result = half ? halfToFloat(got) : bf16ToFloat(got);
      double largest = half ? 65504.0 : std::numeric_limits<float>::max();
      if (std::isinf(result)) {
        // Overflow: |value| must be at least halfway to the next binade.
        double limit =
            half ? 65520.0 : static_cast<double>(fromBits(0x7f7f8000));
        ASSERT_GE(std::fabs(static_cast<double>(value)), limit)
            << std::hex << bits;
        continue;
      }
      ASSERT_LE(std::fabs(result), largest);
      // The neighbour on the other side of `value`.
      uint16_t magnitude = got & 0x7fff;
      bool sameSign =
          std::signbit(result) == std::signbit(value) || result == 0;
      ASSERT_TRUE(sameSign) << std::hex << bits;
      double error = std::fabs(static_cast<double>(value) - result);
      uint16_t up = static_cast<uint16_t>((got & 0x8000) | (magnitude + 1));
      uint16_t down =
          magnitude ? static_cast<uint16_t>((got & 0x8000) | (magnitude - 1))
                    : got;
      for (uint16_t other : {up, down}) {
        double alternative = half ? halfToFloat(other) : bf16ToFloat(other);
        if (std::isinf(alternative) || std::isnan(alternative))
          continue;
        double otherError = std::fabs(static_cast<double>(value) - alternative);
        ASSERT_LE(error, otherError) << std::hex << bits;
        if (error == otherError && other != got)
          ASSERT_EQ(got & 1, 0) << "tie not to even: " << std::hex << bits;
      }
    }
  };
  // Every 4099th pattern (a prime stride visits all residues of the low
  // bits), plus every pattern in the neighbourhood of the half range's ends.
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 4099)
    check(static_cast<uint32_t>(bits));
  for (uint32_t bits = 0x33000000 - 4096; bits < 0x38800000 + 4096; bits += 61)
    check(bits);
  for (uint32_t bits = 0x477f0000; bits < 0x47800000 + 4096; ++bits)
    check(bits);
}

#if defined(__FLT16_MANT_DIG__)
TEST(DType, HalfMatchesTheCompiler) {
  for (uint64_t bits = 0; bits <= 0xffffffffull; bits += 997) {
    float value = fromBits(static_cast<uint32_t>(bits));
    if (std::isnan(value))
      continue;
    _Float16 native = static_cast<_Float16>(value);
    uint16_t expected;
    std::memcpy(&expected, &native, 2);
    ASSERT_EQ(floatToHalf(value), expected) << std::hex << bits;
  }
}
#endif

TEST(DType, LoadAndStoreElements) {
  unsigned char buffer[16] = {};
  storeElement(DType::BF16, buffer, 1, 1.0);
  EXPECT_EQ(buffer[2], 0x80);
  EXPECT_EQ(buffer[3], 0x3f);
  EXPECT_EQ(loadElement(DType::BF16, buffer, 1), 1.0);
  storeElement(DType::F16, buffer, 0, 65520.0);
  EXPECT_TRUE(std::isinf(loadElement(DType::F16, buffer, 0)));
  storeElement(DType::F32, buffer, 2, 0.1);
  EXPECT_EQ(loadElement(DType::F32, buffer, 2), static_cast<double>(0.1f));
  // Integers round half to even and saturate; NaN stores 0.
  storeElement(DType::I32, buffer, 0, 2.5);
  EXPECT_EQ(loadElement(DType::I32, buffer, 0), 2.0);
  storeElement(DType::I32, buffer, 0, 3.5);
  EXPECT_EQ(loadElement(DType::I32, buffer, 0), 4.0);
  storeElement(DType::I32, buffer, 0, -2.5);
  EXPECT_EQ(loadElement(DType::I32, buffer, 0), -2.0);
  storeElement(DType::I32, buffer, 0, 1e20);
  EXPECT_EQ(loadElement(DType::I32, buffer, 0), 2147483647.0);
  storeElement(DType::I32, buffer, 0, -1e20);
  EXPECT_EQ(loadElement(DType::I32, buffer, 0), -2147483648.0);
  storeElement(DType::I32, buffer, 0, std::nan(""));
  EXPECT_EQ(loadElement(DType::I32, buffer, 0), 0.0);
  storeElement(DType::I64, buffer, 1, -7.0);
  int64_t value;
  std::memcpy(&value, buffer + 8, 8);
  EXPECT_EQ(value, -7);
  storeElement(DType::I64, buffer, 1, 1e300);
  std::memcpy(&value, buffer + 8, 8);
  EXPECT_EQ(value, 9223372036854774784ll);
}
