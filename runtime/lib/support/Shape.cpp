//===- Shape.cpp - Tensor shapes: element counts, byte sizes, printing ----===//

#include "loom/runtime/support/Shape.h"

using namespace loom::runtime;

static constexpr uint64_t kMaxCount = uint64_t(1) << 62;

bool loom::runtime::numElements(const Shape &shape, uint64_t &count) {
  bool empty = false;
  for (int64_t dim : shape) {
    if (dim < 0)
      return false;
    empty |= dim == 0;
  }
  // A zero dimension makes the tensor empty however large the others are.
  if (empty) {
    count = 0;
    return true;
  }
  uint64_t product = 1;
  for (int64_t dim : shape) {
    if (static_cast<uint64_t>(dim) > kMaxCount / product)
      return false;
    product *= static_cast<uint64_t>(dim);
  }
  count = product;
  return true;
}

bool loom::runtime::byteSize(DType dtype, const Shape &shape, uint64_t &bytes) {
  uint64_t count;
  if (!numElements(shape, count))
    return false;
  // count <= 2^62 and sizes <= 8 could still overflow 2^64 for i64; keep the
  // same bound on bytes.
  if (count > kMaxCount / dtypeSize(dtype))
    return false;
  bytes = count * dtypeSize(dtype);
  return true;
}

std::string loom::runtime::formatShape(const Shape &shape) {
  std::string text = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i)
      text += ", ";
    text += std::to_string(shape[i]);
  }
  return text + "]";
}
