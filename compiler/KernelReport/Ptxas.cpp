//===- Ptxas.cpp - Assembling PTX with the CUDA toolkit's ptxas -----------===//

#include "KernelReport/Ptxas.h"
#include "Backend/TemporaryFile.h"

#include "mlir/IR/Diagnostics.h"

#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallString.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

FailureOr<loom::AssembledPtx> loom::assemblePtx(llvm::StringRef ptxas,
                                                llvm::StringRef arch,
                                                llvm::StringRef ptx,
                                                llvm::ArrayRef<std::string> args,
                                                Location loc) {
  llvm::SmallString<128> input, cubin, log;
  for (auto [path, suffix] :
       {std::pair{&input, "ptx"}, std::pair{&cubin, "cubin"},
        std::pair{&log, "txt"}})
    if (failed(::loom::createTemporaryFile(loc, "loom-ptxas", suffix, *path)))
      return failure();
  llvm::scope_exit cleanup([&] {
    for (llvm::StringRef path : {input.str(), cubin.str(), log.str()})
      llvm::sys::fs::remove(path);
  });
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(input, ec);
    if (ec)
      return emitError(loc, "cannot write ") << input << ": " << ec.message();
    out << ptx;
  }
  std::string archFlag = "-arch=" + arch.str();
  llvm::SmallVector<llvm::StringRef> argv{ptxas, archFlag};
  for (const std::string &arg : args)
    argv.push_back(arg);
  argv.append({input.str(), "-o", cubin.str()});
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, log.str(), log.str()};
  std::string message;
  int status = llvm::sys::ExecuteAndWait(ptxas, argv, std::nullopt, redirects,
                                         /*SecondsToWait=*/0, /*MemoryLimit=*/0,
                                         &message);
  AssembledPtx result;
  if (auto text = llvm::MemoryBuffer::getFile(log))
    result.log = (*text)->getBuffer().str();
  // CUDA 13's ptxas dropped architectures the PTX still targets (sm_50 to
  // sm_72): say so plainly rather than pass on its option error.
  if (status != 0 &&
      llvm::StringRef(result.log).contains("is not defined for option 'gpu-name'"))
    return emitError(loc, "the CUDA toolkit's ptxas (")
           << ptxas << ") cannot assemble for --gpu-arch=" << arch
           << ": choose an architecture it supports (Loom's tensor-core "
              "kernels: sm_80, sm_86, sm_89, sm_90 or sm_90a); --emit=ptx still "
              "prints the PTX";
  if (status != 0) {
    InFlightDiagnostic diag = emitError(loc, "ptxas failed (exit ") << status << "): ";
    llvm::interleave(llvm::ArrayRef<llvm::StringRef>(argv).drop_back(3), diag, " ");
    return diag << (message.empty() ? "" : ": " + message)
                << (result.log.empty() ? "" : "\n")
                << llvm::StringRef(result.log).take_front(2000);
  }
  auto bytes = llvm::MemoryBuffer::getFile(cubin, /*IsText=*/false,
                                           /*RequiresNullTerminator=*/false);
  if (!bytes)
    return emitError(loc, "cannot read ptxas's output ") << cubin << ": "
                                                         << bytes.getError().message();
  result.cubin = (*bytes)->getBuffer().str();
  return result;
}
