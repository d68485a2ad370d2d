//===- loomc.cpp - The Loom compiler driver ------------------------------===//
//
// Reads a model script and prints the stage named by --emit. Stages are
// ordered: each one lowers further than the one before it.
//
//===----------------------------------------------------------------------===//

#include "Frontend/Parser.h"
#include "MLIRGen/MLIRGen.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/ToolUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/ToolOutputFile.h"

using namespace llvm;

namespace {
enum class Stage { AST, Loom };

cl::OptionCategory loomCategory("Loom options");

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.loom>"),
                               cl::Required, cl::cat(loomCategory));
cl::opt<std::string> outputFile("o", cl::desc("Output file (default: stdout)"),
                                cl::value_desc("file"), cl::init("-"),
                                cl::cat(loomCategory));
cl::opt<Stage> emitStage(
    "emit", cl::desc("The stage to print"), cl::init(Stage::Loom),
    cl::values(clEnumValN(Stage::AST, "ast", "the syntax tree"),
               clEnumValN(Stage::Loom, "loom",
                          "the checked model in the loom dialect")),
    cl::cat(loomCategory));
cl::opt<bool> splitInputFile(
    "split-input-file",
    cl::desc("Compile each '// -----' separated chunk as its own script "
             "(for tests)"),
    cl::init(false), cl::cat(loomCategory));
cl::opt<bool> verifyDiagnostics(
    "verify-diagnostics",
    cl::desc("Check the script's diagnostics against its "
             "'expected-error {{...}}' comments (for tests)"),
    cl::init(false), cl::cat(loomCategory));
} // namespace

/// Parses, checks and prints; diagnostics go through the context's handler.
static LogicalResult compile(mlir::MLIRContext &context, SourceMgr &sourceMgr,
                             raw_ostream &os) {
  auto emitError = [&](SMLoc loc, const Twine &message) {
    mlir::emitError(loom::toLocation(context, sourceMgr, loc)) << message;
  };
  StringRef buffer =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID())->getBuffer();
  loom::Parser parser(buffer, emitError);
  std::unique_ptr<loom::Module> ast = parser.parseModule();
  if (!ast)
    return failure();
  if (emitStage == Stage::AST) {
    loom::dumpAST(*ast, sourceMgr, os);
    return success();
  }
  mlir::OwningOpRef<mlir::ModuleOp> module =
      loom::mlirGen(context, *ast, sourceMgr);
  if (!module)
    return failure();
  module->print(os);
  return success();
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  cl::HideUnrelatedOptions(loomCategory);
  cl::ParseCommandLineOptions(argc, argv,
                              "loomc: compiles Loom model scripts\n");

  ErrorOr<std::unique_ptr<MemoryBuffer>> file =
      MemoryBuffer::getFileOrSTDIN(inputFile, /*IsText=*/true);
  if (std::error_code ec = file.getError()) {
    errs() << "loomc: error: cannot read '" << inputFile << "': "
           << ec.message() << "\n";
    return 1;
  }
  std::error_code ec;
  ToolOutputFile output(outputFile, ec, sys::fs::OF_TextWithCRLF);
  if (ec) {
    errs() << "loomc: error: cannot write '" << outputFile << "': "
           << ec.message() << "\n";
    return 1;
  }

  // Each chunk is an independent script with its own context and diagnostics.
  auto processChunk = [](std::unique_ptr<MemoryBuffer> chunk,
                         raw_ostream &os) -> LogicalResult {
    SourceMgr sourceMgr;
    sourceMgr.AddNewSourceBuffer(std::move(chunk), SMLoc());
    mlir::MLIRContext context(mlir::MLIRContext::Threading::DISABLED);
    if (verifyDiagnostics) {
      mlir::SourceMgrDiagnosticVerifierHandler handler(sourceMgr, &context);
      (void)compile(context, sourceMgr, os);
      return handler.verify();
    }
    mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
    return compile(context, sourceMgr, os);
  };
  if (failed(mlir::splitAndProcessBuffer(
          std::move(*file), processChunk, output.os(),
          splitInputFile ? mlir::kDefaultSplitMarker : "", "// -----")))
    return 1;
  output.keep();
  return 0;
}
