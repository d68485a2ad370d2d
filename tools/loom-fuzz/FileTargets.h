//===- FileTargets.h - The runtime's readers, one untrusted file each -*- C++ -*-===//
//
// Each target reads one file the way an executable does (a plan, a
// safetensors weights file, a .npy input) and returns whether the reader
// accepted it; a reader may reject any input, but must never crash, read
// out of bounds or hang. Shared by loom-fuzz-files (bounded mutation
// fuzzing, in make test) and the libFuzzer targets (make fuzz).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TOOLS_FUZZ_FILETARGETS_H
#define LOOM_TOOLS_FUZZ_FILETARGETS_H

#include <string>
#include <string_view>

namespace loom::fuzz {

enum class FileTarget { Plan, Safetensors, Npy };

/// Parses "plan", "safetensors" or "npy".
bool parseFileTarget(std::string_view name, FileTarget &target);

/// Runs `target`'s reader on `bytes`, written to `path` first for the
/// readers that take a file. `planText` is a valid plan whose params the
/// safetensors target loads (empty: the header only). Returns whether the
/// reader accepted the input; `error` holds its message otherwise.
bool runFileTarget(FileTarget target, std::string_view bytes, const std::string &path,
                   std::string_view planText, std::string &error);

} // namespace loom::fuzz

#endif // LOOM_TOOLS_FUZZ_FILETARGETS_H
