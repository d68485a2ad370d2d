//===- FrontEndRunner.h - Runs the whole front end on one script in memory -===//

#ifndef LOOM_FUZZ_FRONTENDRUNNER_H
#define LOOM_FUZZ_FRONTENDRUNNER_H

#include "mlir/IR/MLIRContext.h"
#include "llvm/ADT/StringRef.h"

namespace loom {

/// What the front end made of one script.
enum class FrontEndOutcome { Accepted, Rejected, InternalError };

/// Parses, checks and elaborates `script`, swallowing diagnostics. An
/// accepted script whose IR does not verify is an internal error. With
/// `lower`, an accepted script also goes through every CPU stage down to
/// the LLVM dialect; a stage may reject it with a diagnostic, but an
/// "internal error" diagnostic or a crash is a failure.
FrontEndOutcome runFrontEnd(mlir::MLIRContext &context, llvm::StringRef script,
                            bool lower = false);

} // namespace loom

#endif // LOOM_FUZZ_FRONTENDRUNNER_H
