//===- InvalidIr.cpp - A pass's invalid IR said to be the compiler's fault -===//
//
// A pass's failure and the verifier's after it both reach the pass manager
// as "the pass failed"; they are told apart by verifying again: when the
// first error said during the pass is the one the verifier gives now, the
// pass returned and its IR did not verify.
//
//===----------------------------------------------------------------------===//

#include "Driver/InvalidIr.h"

#include "mlir/IR/Verifier.h"
#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassInstrumentation.h"

using namespace mlir;

namespace loom {

namespace {
class WatchPasses : public PassInstrumentation {
public:
  explicit WatchPasses(std::shared_ptr<InvalidIrAfterPass::Watch> watch)
      : watch(std::move(watch)) {}

  void runBeforePass(Pass *, Operation *) override {
    watch->starts.push_back(watch->errors.size());
  }
  void runAfterPass(Pass *, Operation *) override {
    if (!watch->starts.empty())
      watch->starts.pop_back();
  }
  void runAfterPassFailed(Pass *pass, Operation *op) override {
    if (watch->starts.empty())
      return;
    size_t start = watch->starts.back();
    watch->starts.pop_back();
    // The innermost failed pass is the one to name (its pass manager's
    // adaptor fails after it).
    if (watch->verifierError || start >= watch->errors.size())
      return;
    std::optional<std::pair<Location, std::string>> again;
    {
      ScopedDiagnosticHandler capture(op->getContext(), [&](Diagnostic &diag) {
        if (!again && diag.getSeverity() == DiagnosticSeverity::Error)
          again.emplace(diag.getLocation(), diag.str());
        return success();
      });
      if (succeeded(verify(op)))
        return;
    }
    const Diagnostic &said = watch->errors[start];
    if (!again || again->first != said.getLocation() || again->second != said.str())
      return;
    watch->verifierError = start;
    watch->pass = pass->getArgument().empty() ? pass->getName().str()
                                              : pass->getArgument().str();
  }

private:
  std::shared_ptr<InvalidIrAfterPass::Watch> watch;
};
} // namespace

InvalidIrAfterPass::InvalidIrAfterPass(PassManager &pm)
    : context(pm.getContext()), watch(std::make_shared<Watch>()) {
  pm.addInstrumentation(std::make_unique<WatchPasses>(watch));
  // Errors only: warnings and remarks keep their place among the passes'
  // other output.
  holder.emplace(context, [watch = watch](Diagnostic &diag) {
    if (diag.getSeverity() != DiagnosticSeverity::Error)
      return failure();
    watch->errors.push_back(std::move(diag));
    return success();
  });
}

InvalidIrAfterPass::~InvalidIrAfterPass() { flush(); }

void InvalidIrAfterPass::flush() {
  holder.reset();
  DiagnosticEngine &engine = context->getDiagEngine();
  for (auto [index, diag] : llvm::enumerate(watch->errors)) {
    if (index != watch->verifierError) {
      engine.emit(std::move(diag));
      continue;
    }
    Diagnostic internal(diag.getLocation(), DiagnosticSeverity::Error);
    internal << "internal error: the IR after " << watch->pass
             << " is invalid (a compiler bug, not the script's): " << diag.str();
    for (Diagnostic &note : diag.getNotes())
      internal.attachNote(note.getLocation()) << note.str();
    engine.emit(std::move(internal));
  }
  watch->errors.clear();
  watch->verifierError.reset();
}

} // namespace loom
