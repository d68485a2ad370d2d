//===- Json.h - A small, strict JSON reader for file headers ----*- C++ -*-===//
//
// Enough JSON for safetensors headers: it rejects anything malformed with a
// message, never crashes, and bounds nesting so hostile input cannot exhaust
// the stack.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_JSON_H
#define LOOM_RUNTIME_JSON_H

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::runtime {

/// A parsed JSON value.
struct JsonValue {
  enum class Kind : uint8_t { Null, Bool, Number, String, Array, Object };
  Kind kind = Kind::Null;
  bool boolean = false;
  /// Numbers: the value as a double, and, when the literal is a non-negative
  /// integer without fraction or exponent that fits, exactly.
  double number = 0;
  bool isUnsigned = false;
  uint64_t unsignedValue = 0;
  /// Strings: the decoded UTF-8 text.
  std::string string;
  /// Arrays: the elements. Objects: the values, with `keys` beside them in
  /// file order.
  std::vector<JsonValue> elements;
  std::vector<std::string> keys;

  /// The member `key` of an object, or null.
  const JsonValue *find(std::string_view key) const;
};

/// Parses `text` (one value, surrounded by optional whitespace). Duplicate
/// object keys and nesting deeper than `maxDepth` are errors.
bool parseJson(std::string_view text, JsonValue &value, std::string &error,
               unsigned maxDepth = 64);

/// `text` as a JSON string literal, quotes included.
std::string jsonQuote(std::string_view text);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_JSON_H
