//===- Shape.h - Element counts, byte sizes, printing -----------*- C++ -*-===//

#ifndef LOOM_RUNTIME_SUPPORT_SHAPE_H
#define LOOM_RUNTIME_SUPPORT_SHAPE_H

#include "loom/runtime/support/DType.h"

#include <cstdint>
#include <string>
#include <vector>

namespace loom::runtime {

/// Dimensions, outermost first; empty for a scalar.
using Shape = std::vector<int64_t>;

/// The product of the dimensions (1 for a scalar). False if a dimension is
/// negative or the product overflows 2^62 (no real tensor is that large, and
/// the bound leaves room to multiply by an element size).
bool numElements(const Shape &shape, uint64_t &count);
/// numElements times the element size, with the same overflow check.
bool byteSize(DType dtype, const Shape &shape, uint64_t &bytes);
/// "[64, 512]"; "[]" for a scalar.
std::string formatShape(const Shape &shape);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_SUPPORT_SHAPE_H
