//===- LibFuzzerFiles.cpp - Coverage-guided fuzzing of a runtime reader ---===//
//
// One binary per reader (LOOM_FUZZ_TARGET is plan, safetensors or npy);
// make fuzz runs them, seeded from the examples' plans, weights and
// inputs.
//
//===----------------------------------------------------------------------===//

#include "FileTargets.h"

#include "loom/runtime/plan/Plan.h"

#include <cstdint>
#include <string>
#include <unistd.h>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  loom::fuzz::FileTarget target;
  if (!loom::fuzz::parseFileTarget(LOOM_FUZZ_TARGET, target))
    return 0;
  static const std::string path =
      "/tmp/loom-libfuzzer-" + std::to_string(getpid()) + "." LOOM_FUZZ_TARGET;
  std::string bytes(reinterpret_cast<const char *>(data), size);
  // Half the plans get their checksum made right, to reach the records.
  if (target == loom::fuzz::FileTarget::Plan && size % 2 == 0) {
    size_t end = bytes.rfind("\nend");
    bytes = loom::runtime::sealPlan(end == std::string::npos ? bytes : bytes.substr(0, end + 1));
  }
  std::string error;
  loom::fuzz::runFileTarget(target, bytes, path, "", error);
  return 0;
}
