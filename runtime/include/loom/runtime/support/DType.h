//===- DType.h - Element types, sizes, conversions --------------*- C++ -*-===//

#ifndef LOOM_RUNTIME_SUPPORT_DTYPE_H
#define LOOM_RUNTIME_SUPPORT_DTYPE_H

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace loom::runtime {

/// The element types of plan buffers. f16 and bf16 are stored as their raw
/// 16-bit patterns.
enum class DType : uint8_t { F32, F16, BF16, I32, I64 };

/// The plan spelling: "f32", "f16", "bf16", "i32" or "i64".
const char *dtypeName(DType dtype);
/// Parses a plan spelling; false if `name` is not one.
bool parseDType(std::string_view name, DType &dtype);
/// Bytes per element.
size_t dtypeSize(DType dtype);
/// True for f32, f16 and bf16.
bool isFloatDType(DType dtype);

/// f32 -> bf16, rounding to nearest, ties to even. Overflow gives Inf; NaN
/// stays a (quiet) NaN with its sign.
uint16_t floatToBF16(float value);
/// bf16 -> f32 (exact).
float bf16ToFloat(uint16_t bits);
/// f32 -> IEEE binary16, rounding to nearest, ties to even, including into
/// and out of the subnormal range. Magnitudes >= 65520 give Inf; NaN stays
/// a (quiet) NaN with its sign.
uint16_t floatToHalf(float value);
/// IEEE binary16 -> f32 (exact).
float halfToFloat(uint16_t bits);

/// Element `index` of an array of `dtype`, as a double (exact except for
/// i64 values beyond 2^53).
double loadElement(DType dtype, const void *data, uint64_t index);
/// Stores `value` into element `index`. Float types round it to f32 first,
/// then (RNE) to the storage type; integer types round to nearest, ties to
/// even, and saturate (NaN stores 0).
void storeElement(DType dtype, void *data, uint64_t index, double value);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_SUPPORT_DTYPE_H
