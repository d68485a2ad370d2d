//===- InvalidIr.h - A pass's invalid IR said to be the compiler's fault -*- C++ -*-===//
//
// The pass manager verifies the IR after every pass and reports a failure
// at the failing op's location. Loom's ops carry the script's locations, so
// a lowering pass that built invalid IR (a value used before it is defined)
// read as an error in the user's line. This names the pass instead, as an
// internal error.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DRIVER_INVALIDIR_H
#define LOOM_DRIVER_INVALIDIR_H

#include "mlir/IR/Diagnostics.h"
#include "mlir/Pass/PassManager.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace loom {

/// While alive, holds back the context's errors and watches `pm`'s passes.
/// `flush()` (after `pm.run`) says the held errors in order; the one the
/// verifier gave after a pass reads `internal error: the IR after <pass> is
/// invalid (...): <message>`.
class InvalidIrAfterPass {
public:
  explicit InvalidIrAfterPass(mlir::PassManager &pm);
  ~InvalidIrAfterPass();
  void flush();

  /// The state the pass manager's instrumentation shares with this object.
  struct Watch {
    std::vector<mlir::Diagnostic> errors;
    /// errors.size() when each pass now running began.
    std::vector<size_t> starts;
    /// The held error that is the verifier's, and the pass before it.
    std::optional<size_t> verifierError;
    std::string pass;
  };

private:
  mlir::MLIRContext *context;
  std::shared_ptr<Watch> watch;
  std::optional<mlir::ScopedDiagnosticHandler> holder;
};

} // namespace loom

#endif // LOOM_DRIVER_INVALIDIR_H
