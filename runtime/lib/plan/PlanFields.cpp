//===- PlanFields.cpp - The plan's fields: numbers, names, lists ----------===//

#include "PlanParser.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

using namespace loom::runtime;
using namespace loom::runtime::plan_text;

namespace loom::runtime::plan_text {

/// Records that appear at most once (loom-plan, model, device and arena
/// also must appear; mesh and gpu-image need not).
bool isSingle(int rank) {
  return rank <= RankArena || rank == RankGpuImage || rank == RankOptimizer ||
         rank == RankMicrobatches;
}

/// The next record that must appear after a record of rank `stage` (below
/// RankArena): model, device and arena are required, the mesh is not.
int nextRequired(int stage) {
  return stage == RankDevice || stage == RankMesh || stage == RankPipeline
             ? RankArena
             : stage + 1;
}

Record recordOf(std::string_view name) {
  for (int record = RecordHeader; record < RecordNone; ++record)
    if (name == kRecords[record].name)
      return static_cast<Record>(record);
  return RecordNone;
}

/// A decimal integer with an optional '-', within [lo, hi].
bool parseInt(std::string_view text, int64_t lo, int64_t hi, int64_t &value,
              bool &inRange) {
  inRange = false;
  bool negative = !text.empty() && text[0] == '-';
  uint64_t magnitude;
  if (!parseUnsigned(negative ? text.substr(1) : text, magnitude))
    return false;
  constexpr uint64_t kMinMagnitude = static_cast<uint64_t>(INT64_MAX) + 1;
  if (negative) {
    if (magnitude > kMinMagnitude)
      return true;
    value = magnitude == kMinMagnitude ? INT64_MIN
                                       : -static_cast<int64_t>(magnitude);
  } else {
    if (magnitude > static_cast<uint64_t>(INT64_MAX))
      return true;
    value = static_cast<int64_t>(magnitude);
  }
  inRange = value >= lo && value <= hi;
  return true;
}

/// Whether `text` has only the characters of a decimal float (digits, '.',
/// an exponent, signs), so that strtof/strtod take nothing else: no hex,
/// "inf", "nan" or leading spaces.
bool isDecimalText(std::string_view text) {
  if (text.empty() || text.size() > 64)
    return false;
  for (char c : text)
    if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' ||
          c == '+' || c == '-'))
      return false;
  return true;
}

/// An f32 as %.9g writes it: decimal, or inf, -inf, nan, -nan (printf's
/// spellings of the values a float constant may hold). `inRange` is false
/// for a finite number beyond the f32 range.
bool parseF32(std::string_view text, float &value, bool &inRange) {
  inRange = true;
  std::string_view magnitude = text;
  bool negative = !magnitude.empty() && magnitude[0] == '-';
  if (negative)
    magnitude.remove_prefix(1);
  if (magnitude == "inf" || magnitude == "nan") {
    value = magnitude == "inf" ? INFINITY : NAN;
    value = negative ? -value : value;
    return true;
  }
  if (!isDecimalText(text))
    return false;
  std::string copy(text);
  char *end = nullptr;
  float result = std::strtof(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size())
    return false;
  inRange = std::isfinite(result);
  value = result;
  return true;
}

/// A finite decimal float as %.17g writes it (strtod alone would also take
/// hex, "inf", "nan" and leading spaces).
bool parseFloat(std::string_view text, double &value) {
  if (!isDecimalText(text))
    return false;
  std::string copy(text);
  char *end = nullptr;
  double result = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size() || !std::isfinite(result))
    return false;
  value = result;
  return true;
}

bool isValidName(std::string_view name) {
  if (name.empty())
    return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '_' || c == '.'))
      return false;
  return true;
}

/// Mesh axis names: [A-Za-z_][A-Za-z0-9_]* (no '.', so that they never
/// read as numbers or collide with the spec syntax).
bool isValidAxisName(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9'))
    return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '_'))
      return false;
  return true;
}

/// Splits `text` at every `separator`; empty pieces are kept.
std::vector<std::string_view> splitAt(std::string_view text, char separator) {
  std::vector<std::string_view> pieces;
  size_t start = 0;
  while (true) {
    size_t at = text.find(separator, start);
    pieces.push_back(text.substr(start, at - start));
    if (at == std::string_view::npos)
      return pieces;
    start = at + 1;
  }
}

/// Decimal digits only: true with `value`, UINT64_MAX if they do not fit
/// (so that a huge number is out of range rather than malformed).
bool parseDigits(std::string_view text, uint64_t &value) {
  if (text.empty() ||
      text.find_first_not_of("0123456789") != std::string_view::npos)
    return false;
  if (!parseUnsigned(text, value))
    value = UINT64_MAX;
  return true;
}

/// A tensor map's DIMS, STRIDES or BOX: numbers joined by 'x', or "-" for
/// none.
bool parseExtents(std::string_view text, std::vector<uint64_t> &values) {
  values.clear();
  if (text == "-")
    return true;
  for (std::string_view piece : splitAt(text, 'x')) {
    uint64_t value;
    if (!parseDigits(piece, value))
      return false;
    values.push_back(value);
  }
  return true;
}

/// "1 dim", "2 dims".
std::string countOf(size_t count, const char *noun) {
  return std::to_string(count) + " " + noun + (count == 1 ? "" : "s");
}

/// How far into its buffer a tensor map's tensor reaches: OFFSET, the
/// innermost dim's bytes, and (DIMS[i] - 1) * STRIDES[i - 1] for the others;
/// UINT64_MAX if that does not fit.
uint64_t tensorMapSpan(const TensorMapArg &map) {
  // Each term is below 2^72 (dims at most 2^32, strides below 2^40).
  unsigned __int128 span = map.offset;
  span += static_cast<unsigned __int128>(map.dims[0]) * dtypeSize(map.dtype);
  for (unsigned i = 1; i < map.rank; ++i)
    span +=
        static_cast<unsigned __int128>(map.dims[i] - 1) * map.strides[i - 1];
  return span > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(span);
}

/// Splits on single spaces; false if a field is empty (doubled, leading or
/// trailing space).
bool splitFields(std::string_view line, std::vector<std::string_view> &fields) {
  fields.clear();
  size_t start = 0;
  while (true) {
    size_t space = line.find(' ', start);
    std::string_view field = line.substr(start, space - start);
    if (field.empty())
      return false;
    fields.push_back(field);
    if (space == std::string_view::npos)
      return true;
    start = space + 1;
  }
}

} // namespace loom::runtime::plan_text
