//===- LibFuzzerTarget.cpp - Coverage-guided fuzzing entry (make fuzz) ----===//

#include "FrontEndRunner.h"

#include <cstdlib>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  static mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
  llvm::StringRef script(reinterpret_cast<const char *>(data), size);
  if (loom::runFrontEnd(context, script) == loom::FrontEndOutcome::InternalError)
    std::abort();
  return 0;
}
