//===- Ptxas.h - Assembling PTX with the CUDA toolkit's ptxas ----*- C++ -*-===//
//
// One ptxas run on PTX text: the kernel report reads its -v lines (registers,
// spills, warnings), the GPU image stage embeds its cubin. Both assemble the
// PTX the ptx stage already printed, so LLVM's NVPTX backend runs once.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_KERNELREPORT_PTXAS_H
#define LOOM_KERNELREPORT_PTXAS_H

#include "mlir/IR/Location.h"
#include "mlir/Support/LLVM.h"

#include <string>

namespace loom {

/// What a ptxas run gave: the cubin's bytes and everything it printed.
struct AssembledPtx {
  std::string cubin;
  std::string log;
};

/// Runs `ptxas -arch=ARCH ARGS... IN.ptx -o OUT.cubin` on `ptx` (through
/// temporary files). Fails, with an error at `loc` that quotes ptxas's
/// output, where it cannot run or exits non-zero.
mlir::FailureOr<AssembledPtx> assemblePtx(llvm::StringRef ptxas, llvm::StringRef arch,
                                          llvm::StringRef ptx,
                                          llvm::ArrayRef<std::string> args,
                                          mlir::Location loc);

} // namespace loom

#endif // LOOM_KERNELREPORT_PTXAS_H
