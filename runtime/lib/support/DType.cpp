//===- DType.cpp - Element types, their sizes and conversions -------------===//

#include "loom/runtime/support/DType.h"

#include <cmath>
#include <cstring>

using namespace loom::runtime;

const char *loom::runtime::dtypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::BF16:
    return "bf16";
  case DType::I32:
    return "i32";
  case DType::I64:
    return "i64";
  }
  return "?";
}

bool loom::runtime::parseDType(std::string_view name, DType &dtype) {
  for (DType candidate :
       {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64}) {
    if (name == dtypeName(candidate)) {
      dtype = candidate;
      return true;
    }
  }
  return false;
}

size_t loom::runtime::dtypeSize(DType dtype) {
  switch (dtype) {
  case DType::F16:
  case DType::BF16:
    return 2;
  case DType::F32:
  case DType::I32:
    return 4;
  case DType::I64:
    return 8;
  }
  return 0;
}

bool loom::runtime::isFloatDType(DType dtype) {
  return dtype == DType::F32 || dtype == DType::F16 || dtype == DType::BF16;
}

static uint32_t floatBits(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, sizeof(bits));
  return bits;
}

static float bitsToFloat(uint32_t bits) {
  float value;
  std::memcpy(&value, &bits, sizeof(value));
  return value;
}

uint16_t loom::runtime::floatToBF16(float value) {
  uint32_t bits = floatBits(value);
  // NaN: truncating could clear every payload bit left and make it Inf, so
  // force the quiet bit.
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((bits >> 16) | 0x0040u);
  // Adding 0x7fff plus the lowest kept bit rounds to nearest, ties to even;
  // a carry out of the mantissa bumps the exponent, which turns the largest
  // finite values into Inf exactly when they should overflow.
  uint32_t lsb = (bits >> 16) & 1u;
  bits += 0x7fffu + lsb;
  return static_cast<uint16_t>(bits >> 16);
}

float loom::runtime::bf16ToFloat(uint16_t bits) {
  return bitsToFloat(static_cast<uint32_t>(bits) << 16);
}

/// Shifts `value` right by `shift` (1..31) bits, rounding to nearest even.
static uint32_t shiftRightRNE(uint32_t value, unsigned shift) {
  uint32_t kept = value >> shift;
  uint32_t rest = value & ((1u << shift) - 1);
  uint32_t half = 1u << (shift - 1);
  if (rest > half || (rest == half && (kept & 1u)))
    ++kept;
  return kept;
}

uint16_t loom::runtime::floatToHalf(float value) {
  uint32_t bits = floatBits(value);
  uint16_t sign = static_cast<uint16_t>((bits >> 16) & 0x8000u);
  uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u) {
    if (abs == 0x7f800000u)
      return sign | 0x7c00u;
    // Quiet NaN keeping the top of the payload.
    return static_cast<uint16_t>(sign | 0x7e00u | ((abs >> 13) & 0x3ffu));
  }
  // 65520 is halfway between the largest half (65504) and 2^16; the tie goes
  // to the even neighbour, 2^16, which is Inf.
  if (abs >= 0x477ff000u)
    return sign | 0x7c00u;
  if (abs >= 0x38800000u) {
    // Normal half (>= 2^-14): rebias the exponent from 127 to 15 and drop 13
    // mantissa bits; a rounding carry correctly bumps the exponent.
    return static_cast<uint16_t>(sign | shiftRightRNE(abs - 0x38000000u, 13));
  }
  // Subnormal half (or zero): the result counts units of 2^-24. With the
  // implicit bit, the f32 is mantissa * 2^(exponent - 150), so the result is
  // mantissa >> (126 - exponent); f32 subnormals have exponent field 0 but
  // scale like exponent 1.
  uint32_t exponent = abs >> 23;
  uint32_t mantissa = (abs & 0x7fffffu) | (exponent ? 0x800000u : 0u);
  unsigned shift = 126 - (exponent ? exponent : 1);
  // Beyond 24, the value is below 2^-25 (half the smallest subnormal), which
  // rounds to zero (2^-25 itself ties to the even zero).
  if (shift > 24)
    return sign;
  return static_cast<uint16_t>(sign | shiftRightRNE(mantissa, shift));
}

float loom::runtime::halfToFloat(uint16_t bits) {
  uint32_t sign = static_cast<uint32_t>(bits & 0x8000u) << 16;
  uint32_t exponent = (bits >> 10) & 0x1fu;
  uint32_t mantissa = bits & 0x3ffu;
  if (exponent == 0x1f)
    return bitsToFloat(sign | 0x7f800000u | (mantissa << 13));
  if (exponent == 0) {
    if (mantissa == 0)
      return bitsToFloat(sign);
    // Subnormal half: normalize, since every one is a normal f32.
    uint32_t floatExponent = 127 - 14;
    while (!(mantissa & 0x400u)) {
      mantissa <<= 1;
      --floatExponent;
    }
    mantissa &= 0x3ffu;
    return bitsToFloat(sign | (floatExponent << 23) | (mantissa << 13));
  }
  return bitsToFloat(sign | ((exponent + 112) << 23) | (mantissa << 13));
}

double loom::runtime::loadElement(DType dtype, const void *data,
                                  uint64_t index) {
  const char *base = static_cast<const char *>(data);
  switch (dtype) {
  case DType::F32: {
    float value;
    std::memcpy(&value, base + index * 4, 4);
    return value;
  }
  case DType::F16:
  case DType::BF16: {
    uint16_t bits;
    std::memcpy(&bits, base + index * 2, 2);
    return dtype == DType::F16 ? halfToFloat(bits) : bf16ToFloat(bits);
  }
  case DType::I32: {
    int32_t value;
    std::memcpy(&value, base + index * 4, 4);
    return value;
  }
  case DType::I64: {
    int64_t value;
    std::memcpy(&value, base + index * 8, 8);
    return static_cast<double>(value);
  }
  }
  return 0;
}

/// Rounds half to even and clamps to [lo, hi]; NaN gives 0.
static double roundAndClamp(double value, double lo, double hi) {
  if (std::isnan(value))
    return 0;
  double rounded = std::nearbyint(value); // default mode: ties to even
  return rounded < lo ? lo : rounded > hi ? hi : rounded;
}

void loom::runtime::storeElement(DType dtype, void *data, uint64_t index,
                                 double value) {
  char *base = static_cast<char *>(data);
  switch (dtype) {
  case DType::F32: {
    float narrow = static_cast<float>(value);
    std::memcpy(base + index * 4, &narrow, 4);
    return;
  }
  case DType::F16:
  case DType::BF16: {
    float narrow = static_cast<float>(value);
    uint16_t bits =
        dtype == DType::F16 ? floatToHalf(narrow) : floatToBF16(narrow);
    std::memcpy(base + index * 2, &bits, 2);
    return;
  }
  case DType::I32: {
    int32_t narrow =
        static_cast<int32_t>(roundAndClamp(value, -2147483648.0, 2147483647.0));
    std::memcpy(base + index * 4, &narrow, 4);
    return;
  }
  case DType::I64: {
    // 2^63 is not an int64; the largest double below it is 2^63 - 1024.
    int64_t narrow = static_cast<int64_t>(
        roundAndClamp(value, -9223372036854775808.0, 9223372036854774784.0));
    std::memcpy(base + index * 8, &narrow, 8);
    return;
  }
  }
}
