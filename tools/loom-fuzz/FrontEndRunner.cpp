//===- FrontEndRunner.cpp - Runs the whole front end on one script --------===//

#include "FrontEndRunner.h"

#include "Frontend/Parser.h"
#include "MLIRGen/MLIRGen.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

using namespace loom;

FrontEndOutcome loom::runFrontEnd(mlir::MLIRContext &context,
                                  llvm::StringRef script) {
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(script, "fuzz.loom"), llvm::SMLoc());
  bool internalError = false;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    internalError |= llvm::StringRef(diag.str()).contains("internal error");
    return mlir::success();
  });
  auto emitError = [&](llvm::SMLoc loc, const llvm::Twine &message) {
    mlir::emitError(toLocation(context, sourceMgr, loc)) << message;
  };
  llvm::StringRef buffer = sourceMgr.getMemoryBuffer(1)->getBuffer();
  std::unique_ptr<Module> ast = Parser(buffer, emitError).parseModule();
  if (!ast)
    return FrontEndOutcome::Rejected;
  std::string dump;
  llvm::raw_string_ostream os(dump);
  dumpAST(*ast, sourceMgr, os);
  mlir::OwningOpRef<mlir::ModuleOp> module = mlirGen(context, *ast, sourceMgr);
  if (internalError)
    return FrontEndOutcome::InternalError;
  return module ? FrontEndOutcome::Accepted : FrontEndOutcome::Rejected;
}
