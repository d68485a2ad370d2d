//===- Compare.h - A tensor against a reference, elementwise ---*- C++ -*-===//
//
// The tolerance --check-kernels applies to a GPU kernel's results against
// the CPU kernel's, the rule of test/Numerics/reference.py's Checker: f32
// within 1e-5 x (|ref| + rms(ref)), since the two kernels sum in different
// orders; f16 and bf16 within 2 ulp of the dtype at |ref| plus 1 ulp at
// rms(ref); integers exact; NaN and infinities where the reference has them.
// A kernel whose outputs are sums of nonnegative weights times one input
// (an attention: softmax weights times values) also gets 2 ulp of the
// terms' size, sum |weight x value|, per element: there two correct
// kernels round the weights differently, and a row of few terms that
// cancel differs by far more than its own ulps (docs/precision.md).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_EXEC_COMPARE_H
#define LOOM_RUNTIME_EXEC_COMPARE_H

#include "loom/runtime/support/DType.h"

#include <cstdint>
#include <string>

namespace loom::runtime {

/// The relative tolerance of f32 results.
constexpr double kF32Tolerance = 1e-5;
/// f16 and bf16 results: ulps at |ref| and at rms(ref).
constexpr double kHalfUlps = 2;
constexpr double kHalfScaleUlps = 1;
/// f16 and bf16 results that are sums of terms: ulps at the terms' size.
constexpr double kTermsUlps = 2;

/// The spacing of float `dtype` at |magnitude|: 2^(e - mantissa bits) for
/// the exponent e of |magnitude|, and the subnormal spacing below the
/// smallest normal (as reference.py's ulp).
double ulpOf(DType dtype, double magnitude);

/// The largest |got - ref| accepted for an element whose reference is `ref`
/// (finite) in a tensor whose finite reference elements have root mean
/// square `rms`; 0 for integers.
/// `terms` (>= 0), where given, is the size of the terms the element sums:
/// f32 adds 1e-5 x terms, f16 and bf16 kTermsUlps ulp(terms).
double toleranceOf(DType dtype, double ref, double rms, double terms = -1);

/// The rule in words: "2 ulp(bf16, |cpu|) + 1 ulp(bf16, rms 0.871)",
/// "1e-05 x (|cpu| + rms 0.871)" or "exact"; with `terms`, the terms' part
/// too ("... + 2 ulp(bf16, terms)").
std::string describeTolerance(DType dtype, double rms, bool terms = false);

/// How far `got` is from `reference` (both `count` elements of `dtype`).
struct TensorComparison {
  uint64_t elements = 0;
  /// Elements beyond the tolerance, non-finite mismatches included.
  uint64_t over = 0;
  /// Elements where one side is NaN or infinite and the other is not the
  /// same (any NaN matches any NaN).
  uint64_t nonfinite = 0;
  /// Over the elements finite on both sides.
  double maxAbsError = 0;
  /// max |got - ref| / ulpOf(dtype, ref), for float dtypes.
  double maxUlps = 0;
  /// Of the reference's finite elements.
  double rms = 0;
  /// When over > 0: the first non-finite mismatch, else the element
  /// furthest beyond its tolerance.
  uint64_t worst = 0;

  bool passed() const { return over == 0; }
};

/// Compares `got` with `reference` elementwise by the rule above; `terms`,
/// if not null, holds each element's terms' size (`count` elements of
/// `dtype`).
TensorComparison compareTensors(DType dtype, const void *got,
                                const void *reference, uint64_t count,
                                const void *terms = nullptr);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_EXEC_COMPARE_H
