//===- Json.h - Strict JSON reading for untrusted file headers --*- C++ -*-===//
//
// nlohmann-json parses; this adds what a header from an untrusted file needs
// beyond it: duplicate keys are errors (JSON leaves them undefined), nesting
// is bounded, and errors name the byte where reading stopped. Values keep
// their file order (ordered_json), so the first bad entry is reported first.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_IO_JSON_H
#define LOOM_RUNTIME_IO_JSON_H

#include <nlohmann/json.hpp>

#include <string>
#include <string_view>

namespace loom::runtime {

/// JSON values in file (or insertion) order.
using Json = nlohmann::ordered_json;

/// Parses `text` (one value, surrounded by optional whitespace) into
/// `value`. Malformed input, duplicate object keys and nesting deeper than
/// `maxDepth` are errors: "bad JSON at byte N: ...".
bool parseJson(std::string_view text, Json &value, std::string &error,
               unsigned maxDepth = 64);

/// `value` as compact JSON text; invalid UTF-8 in strings is replaced by
/// U+FFFD rather than aborting (the runtime has no exceptions).
std::string dumpJson(const Json &value);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_IO_JSON_H
