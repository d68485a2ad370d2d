//===- SourceCarets.h - Carets under script lines with non-ASCII text -*- C++ -*-===//
//
// llvm::SourceMgr prints no caret line under a source line holding any
// non-ASCII byte (a `×` or `µs` in a comment is enough), so such errors
// lost their caret. This handler prints those diagnostics itself, in
// SourceMgr's layout, with the caret under the character the column names.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DRIVER_SOURCECARETS_H
#define LOOM_DRIVER_SOURCECARETS_H

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

namespace loom {

/// Handles the context's diagnostics located at a line of `sourceMgr` with
/// non-ASCII text (and their notes); leaves all others to the next handler.
class SourceCaretHandler : public mlir::ScopedDiagnosticHandler {
public:
  SourceCaretHandler(llvm::SourceMgr &sourceMgr, mlir::MLIRContext *context,
                     llvm::raw_ostream &os = llvm::errs());

private:
  /// The line of `loc` in the source, when it has a file location there.
  std::optional<llvm::StringRef> lineOf(mlir::Location loc, unsigned &line,
                                        unsigned &column, llvm::StringRef &file);
  void print(mlir::Location loc, mlir::DiagnosticSeverity severity,
             llvm::StringRef message);

  llvm::SourceMgr &sourceMgr;
  llvm::raw_ostream &os;
};

} // namespace loom

#endif // LOOM_DRIVER_SOURCECARETS_H
