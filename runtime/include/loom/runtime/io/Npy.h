//===- Npy.h - Reading and writing NumPy .npy files -------------*- C++ -*-===//
//
// Format versions 1.0 and 2.0, little-endian, C order. bf16 has no NumPy
// dtype, so bf16 tensors are written as '<f4' (exactly) and f16/bf16
// tensors accept '<f4' files (rounded to nearest even).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_IO_NPY_H
#define LOOM_RUNTIME_IO_NPY_H

#include "loom/runtime/support/DType.h"
#include "loom/runtime/support/Shape.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace loom::runtime {

/// What a .npy header says.
struct NpyHeader {
  unsigned majorVersion = 1;
  std::string descr; // e.g. "<f4"
  bool fortranOrder = false;
  Shape shape;
  /// Offset of the data: magic, version, length field and header dict.
  uint64_t dataOffset = 0;
};

/// Parses the magic, version and header dict at the start of `bytes` (which
/// may hold more, e.g. the data). False with a message if malformed or
/// truncated.
bool parseNpyHeader(std::string_view bytes, NpyHeader &header,
                    std::string &error);

/// The NumPy descr a tensor of `dtype` is written with ("<f4" for bf16).
const char *npyDescrFor(DType dtype);

/// Checks that `path` is a readable .npy file whose header fits a tensor of
/// `dtype` and `shape` and whose size matches, without reading the data.
/// `what` names the tensor in errors, e.g. "input 'x'".
bool checkNpy(const std::string &path, std::string_view what, DType dtype,
              const Shape &shape, std::string &error);

/// Reads `path` into `data` (room for the elements of `shape` in `dtype`).
/// Accepted file dtypes: the buffer's own, or '<f4' for f16 and bf16;
/// `overflows`, if given, counts the finite '<f4' values that became inf.
bool readNpy(const std::string &path, std::string_view what, DType dtype,
             const Shape &shape, void *data, std::string &error,
             uint64_t *overflows = nullptr);

/// The magic, version, length field and padded header dict of a .npy file
/// holding a tensor of `dtype` and `shape` (version 1.0 unless the dict
/// needs 2.0; bf16 is described as '<f4').
std::string encodeNpyHeader(DType dtype, const Shape &shape);

/// Writes `data` (the elements of `shape` in `dtype`) to `path` as a .npy
/// file; bf16 is widened to '<f4' exactly.
bool writeNpy(const std::string &path, DType dtype, const Shape &shape,
              const void *data, std::string &error);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_IO_NPY_H
