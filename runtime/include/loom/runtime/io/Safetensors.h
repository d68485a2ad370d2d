//===- Safetensors.h - Reading and writing weights --------------*- C++ -*-===//
//
// Layout: an 8-byte little-endian header length N, N bytes of JSON header
// {"NAME": {"dtype": ..., "shape": [...], "data_offsets": [BEGIN, END]},
// "__metadata__": {...}}, then the data; offsets are relative to the data.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_IO_SAFETENSORS_H
#define LOOM_RUNTIME_IO_SAFETENSORS_H

#include "loom/runtime/support/DType.h"
#include "loom/runtime/plan/Plan.h"
#include "loom/runtime/support/Shape.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::runtime {

/// Header lengths above this are rejected before anything is allocated.
constexpr uint64_t kMaxSafetensorsHeader = 100u << 20;

/// One tensor entry of a safetensors header.
struct SafetensorsTensor {
  std::string name;
  std::string dtype; // the file's spelling, e.g. "BF16"
  Shape shape;
  uint64_t begin = 0; // data_offsets, relative to the data section
  uint64_t end = 0;
};

/// The `__metadata__` entries whose values are strings, in file order.
using SafetensorsMetadata = std::vector<std::pair<std::string, std::string>>;

/// A validated header: its tensors in file order and where the data lies.
struct SafetensorsHeader {
  std::vector<SafetensorsTensor> tensors;
  SafetensorsMetadata metadata;
  uint64_t dataOffset = 0; // 8 + N
  uint64_t dataBytes = 0;

  /// The tensor called `name`, or null.
  const SafetensorsTensor *find(std::string_view name) const;
  /// The value of metadata entry `key`, or null.
  const std::string *metadataValue(std::string_view key) const;
};

/// The safetensors spelling of `dtype`: "F32", "F16", "BF16", "I32", "I64".
const char *safetensorsDTypeName(DType dtype);
/// Maps a safetensors spelling to a DType; false for types Loom has not.
bool parseSafetensorsDType(std::string_view name, DType &dtype);

/// Parses and validates the JSON header `json` for a data section of
/// `dataBytes` bytes: dtypes known, shapes match the byte ranges, and the
/// ranges tile the data section exactly (no gaps, no overlaps).
bool parseSafetensorsHeader(std::string_view json, uint64_t dataBytes,
                            SafetensorsHeader &header, std::string &error);

/// Reads and validates the header of the file `path`.
bool readSafetensorsHeader(const std::string &path, SafetensorsHeader &header,
                           std::string &error);

/// Loads every param of `plan` from `path` into `arena` (at the params'
/// offsets). Each must be present with the same dtype and shape; tensors
/// the plan does not use are reported in `warnings`, or, if `strict`, are
/// an error.
bool loadWeights(const Plan &plan, char *arena, const std::string &path,
                 std::vector<std::string> &warnings, std::string &error,
                 bool strict = false);

/// How saveWeights writes.
struct WeightsWriteOptions {
  /// Entries added to `__metadata__` after "model" and "producer".
  SafetensorsMetadata metadata;
};

/// Writes every param of `plan` from `arena` to `path`, sorted by name,
/// with the header padded by spaces to a multiple of 8 bytes: through
/// `path.tmp`, flushed to the disk, then renamed to `path` (a crash or a
/// failed write leaves the old file or the new one, never a torn one).
bool saveWeights(const Plan &plan, const char *arena, const std::string &path,
                 std::string &error, const WeightsWriteOptions &how = {});

} // namespace loom::runtime

#endif // LOOM_RUNTIME_IO_SAFETENSORS_H
