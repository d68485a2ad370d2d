//===- FrontEndRunner.cpp - Runs the whole front end on one script --------===//

#include "FrontEndRunner.h"

#include "Frontend/Parser.h"
#include "Loom/IR/LoomDialect.h"
#include "MLIRGen/MLIRGen.h"
#include "Pipeline/Pipeline.h"
#include "Plan/GpuLaunches.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include "mlir/Pass/PassManager.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/SourceMgr.h"

#include <cstdlib>

using namespace loom;

FrontEndOutcome loom::runFrontEnd(mlir::MLIRContext &context,
                                  llvm::StringRef script, bool lower) {
  llvm::SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(
      llvm::MemoryBuffer::getMemBufferCopy(script, "fuzz.loom"), llvm::SMLoc());
  bool internalError = false, verifierError = false;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &diag) {
    std::string text = diag.str();
    internalError |= llvm::StringRef(text).contains("internal error");
    // The IR verifier's "'loom.x' op ..." (a pass built invalid IR).
    verifierError |= llvm::Regex("^'[a-z_.]+' op ").match(text);
    // LOOM_FUZZ_VERBOSE=1 shows why mutants are rejected.
    if (std::getenv("LOOM_FUZZ_VERBOSE"))
      llvm::errs() << diag.str() << "\n";
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
  if (!module)
    return FrontEndOutcome::Rejected;
  if (lower) {
    // A failure to partition is a Loom bug when it is IR the verifier
    // rejects or an internal error; the partitioner's own errors at the
    // script (an op an MoE expert body cannot hold yet) reject the mutant.
    mlir::PassManager partition(&context);
    // As a GPU build of loomc (both paths run below): only the attention
    // the GPU kernel runs fused.
    PartitionOptions options;
    options.fuseAttention = AttentionFusion::GpuKernel;
    buildPartitionPipeline(partition, options);
    if (mlir::failed(partition.run(*module)))
      return internalError || verifierError ? FrontEndOutcome::InternalError
                                            : FrontEndOutcome::Rejected;
    // The CPU path, stage by stage, as loomc runs it.
    mlir::PassManager pm(&context);
    buildKernelsPipeline(pm);
    buildLinalgPipeline(pm);
    if (mlir::failed(pm.run(*module)))
      return internalError ? FrontEndOutcome::InternalError
                           : FrontEndOutcome::Rejected;
    for (mlir::Operation &op : llvm::make_early_inc_range(module->getOps())) {
      auto func = llvm::dyn_cast<mlir::func::FuncOp>(op);
      if (func && func->hasAttr(mlir::loom::attr::kKernel))
        func.setPublic();
      else
        op.erase();
    }
    mlir::PassManager bufferize(&context);
    buildBufferizePipeline(bufferize);
    if (mlir::failed(bufferize.run(*module)))
      return FrontEndOutcome::Rejected;
    // The GPU path on a copy, as loomc runs it, down to the NVVM dialect
    // (no ptxas): tensor cores and an H200's SMs; by turns on mma.sync
    // with 48 KiB a block (loomc --gpu-mma=mma.sync), on wgmma with the
    // architecture's shared memory (loomc's sm_90a default), on persistent
    // wgmma kernels in clusters sharing B, writing back by TMA stores
    // (--gpu-mma=wgmma-persistent --gpu-tma-multicast --gpu-tma-store), on
    // wgmma with TMA stores, and on ping-pong kernels with TMA stores
    // (--gpu-mma=wgmma-pingpong --gpu-tma-store). Where the CPU path accepts
    // a kernel the GPU path, and the plan's launch records, must too.
    static unsigned scripts = 0;
    unsigned variant = scripts++ % 5;
    bool wgmma = variant != 0;
    mlir::OwningOpRef<mlir::ModuleOp> gpu = module->clone();
    mlir::PassManager gpuStages(&context);
    GpuKernelsOptions kernels;
    kernels.tensorCores = true;
    kernels.sharedPerBlock = wgmma ? 227 * 1024 : 48 * 1024;
    kernels.warpgroupMma = wgmma;
    kernels.persistentWarpgroupMma = variant == 2 || variant == 4;
    kernels.pingpongWarpgroupMma = variant == 4;
    kernels.tmaMulticast = variant == 2;
    kernels.tmaStoreEpilogue = variant >= 2;
    kernels.warpgroupAttentionShared = wgmma ? 227 * 1024 : 0;
    buildGpuKernelsPipeline(gpuStages, kernels);
    if (mlir::failed(gpuStages.run(*gpu)) ||
        mlir::failed(collectGpuLaunches(*gpu)))
      return FrontEndOutcome::InternalError;
    for (mlir::Operation &op : llvm::make_early_inc_range(gpu->getOps()))
      if (!llvm::isa<mlir::gpu::GPUModuleOp>(op))
        op.erase();
    mlir::PassManager nvvm(&context);
    buildNvvmPipeline(nvvm, GpuTarget());
    if (mlir::failed(nvvm.run(*gpu)))
      return FrontEndOutcome::InternalError;
    for (auto func : module->getOps<mlir::func::FuncOp>())
      func->removeAttr(mlir::loom::attr::kKernel);
    mlir::PassManager lowering(&context);
    // The widest tiles and the bf16 dots: every CPU tiling path (nothing runs).
    buildCpuTilingPipeline(lowering, /*vectorBits=*/512, Bf16MatmulPath::Dot);
    buildCpuLoweringPipeline(lowering);
    if (mlir::failed(lowering.run(*module)))
      return FrontEndOutcome::Rejected;
  }
  return internalError ? FrontEndOutcome::InternalError
                       : FrontEndOutcome::Accepted;
}
