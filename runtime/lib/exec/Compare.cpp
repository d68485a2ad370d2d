//===- Compare.cpp - A tensor against a reference, elementwise -----------===//

#include "loom/runtime/exec/Compare.h"

#include <cmath>
#include <cstdio>
#include <cstring>

using namespace loom::runtime;

double loom::runtime::ulpOf(DType dtype, double magnitude) {
  int mantissaBits = 23, minNormalExponent = -126;
  if (dtype == DType::F16) {
    mantissaBits = 10;
    minNormalExponent = -14;
  } else if (dtype == DType::BF16) {
    mantissaBits = 7;
  }
  double m = std::fabs(magnitude);
  // ilogb is exact where floor(log2(m)) may round up just below a power of 2.
  int exponent = m >= std::ldexp(1.0, minNormalExponent) ? std::ilogb(m)
                                                         : minNormalExponent;
  return std::ldexp(1.0, exponent - mantissaBits);
}

double loom::runtime::toleranceOf(DType dtype, double ref, double rms,
                                  double terms) {
  switch (dtype) {
  case DType::F32:
    return kF32Tolerance * (std::fabs(ref) + rms + std::fmax(terms, 0.0));
  case DType::F16:
  case DType::BF16:
    return kHalfUlps * ulpOf(dtype, ref) + kHalfScaleUlps * ulpOf(dtype, rms) +
           (terms > 0 ? kTermsUlps * ulpOf(dtype, terms) : 0);
  case DType::I32:
  case DType::I64:
    return 0;
  }
  return 0;
}

std::string loom::runtime::describeTolerance(DType dtype, double rms, bool terms) {
  char text[160];
  if (dtype == DType::F32) {
    std::snprintf(text, sizeof(text), "%g x (|cpu| + rms %.3g%s)", kF32Tolerance,
                  rms, terms ? " + terms" : "");
    return text;
  }
  if (!isFloatDType(dtype))
    return "exact";
  const char *name = dtypeName(dtype);
  int length = std::snprintf(text, sizeof(text),
                             "%g ulp(%s, |cpu|) + %g ulp(%s, rms %.3g)", kHalfUlps,
                             name, kHalfScaleUlps, name, rms);
  if (terms)
    std::snprintf(text + length, sizeof(text) - length, " + %g ulp(%s, terms)",
                  kTermsUlps, name);
  return text;
}

/// Element `index` of an i64 array, exactly (loadElement rounds beyond 2^53).
static int64_t loadI64(const void *data, uint64_t index) {
  int64_t value;
  std::memcpy(&value, static_cast<const char *>(data) + 8 * index, 8);
  return value;
}

/// Whether two non-finite-involving values agree: any NaN matches any NaN,
/// an infinity only itself.
static bool sameNonFinite(double got, double ref) {
  if (std::isnan(ref))
    return std::isnan(got);
  return got == ref;
}

TensorComparison loom::runtime::compareTensors(DType dtype, const void *got,
                                               const void *reference,
                                               uint64_t count,
                                               const void *terms) {
  TensorComparison result;
  result.elements = count;
  if (!isFloatDType(dtype)) {
    for (uint64_t i = 0; i < count; ++i) {
      bool differ;
      double error;
      if (dtype == DType::I64) {
        int64_t g = loadI64(got, i), r = loadI64(reference, i);
        differ = g != r;
        error = std::fabs(static_cast<double>(g) - static_cast<double>(r));
      } else {
        double g = loadElement(dtype, got, i),
               r = loadElement(dtype, reference, i);
        differ = g != r;
        error = std::fabs(g - r);
      }
      if (!differ)
        continue;
      if (result.over++ == 0 || error > result.maxAbsError)
        result.worst = i;
      result.maxAbsError = std::fmax(result.maxAbsError, error);
    }
    return result;
  }

  // The tolerance scales with the reference's root mean square: a first pass.
  double sumSquares = 0;
  uint64_t finite = 0;
  for (uint64_t i = 0; i < count; ++i) {
    double r = loadElement(dtype, reference, i);
    if (std::isfinite(r)) {
      sumSquares += r * r;
      ++finite;
    }
  }
  result.rms = finite ? std::sqrt(sumSquares / static_cast<double>(finite)) : 0;
  double worstExcess = -1;
  for (uint64_t i = 0; i < count; ++i) {
    double g = loadElement(dtype, got, i), r = loadElement(dtype, reference, i);
    if (!std::isfinite(g) || !std::isfinite(r)) {
      if (sameNonFinite(g, r))
        continue;
      if (result.nonfinite++ == 0)
        result.worst = i;
      ++result.over;
      continue;
    }
    double error = std::fabs(g - r);
    result.maxAbsError = std::fmax(result.maxAbsError, error);
    result.maxUlps = std::fmax(result.maxUlps, error / ulpOf(dtype, r));
    double tolerance =
        toleranceOf(dtype, r, result.rms,
                    terms ? std::fabs(loadElement(dtype, terms, i)) : -1);
    if (error <= tolerance)
      continue;
    ++result.over;
    if (!result.nonfinite && error - tolerance > worstExcess) {
      worstExcess = error - tolerance;
      result.worst = i;
    }
  }
  return result;
}
