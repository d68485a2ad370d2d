//===- HostObject.cpp - LLVM dialect kernels to host object code ----------===//

#include "Backend/HostObject.h"
#include "Loom/IR/LoomDialect.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

#include "mlir/Target/LLVMIR/Export.h"
#include "llvm/IR/LegacyPassManager.h"
#include "llvm/IR/Module.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Passes/PassBuilder.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/Support/raw_ostream.h"
#include "llvm/Target/TargetMachine.h"
#include "llvm/TargetParser/Host.h"

using namespace mlir;

::loom::HostObjectJob::HostObjectJob() = default;

::loom::HostObjectJob::~HostObjectJob() { join(); }

/// -O3 on `module`, then code generation into `path` by `machine`; an
/// error as text. Touches no global LLVM state (the target registry, which
/// the GPU stages extend meanwhile, was read before).
static std::string optimizeAndEmit(llvm::Module &module, llvm::TargetMachine *machine,
                                   const std::string &path) {
  llvm::LoopAnalysisManager lam;
  llvm::FunctionAnalysisManager fam;
  llvm::CGSCCAnalysisManager cgam;
  llvm::ModuleAnalysisManager mam;
  llvm::PassBuilder builder(machine);
  builder.registerModuleAnalyses(mam);
  builder.registerCGSCCAnalyses(cgam);
  builder.registerFunctionAnalyses(fam);
  builder.registerLoopAnalyses(lam);
  builder.crossRegisterProxies(lam, fam, cgam, mam);
  builder.buildPerModuleDefaultPipeline(llvm::OptimizationLevel::O3).run(module, mam);

  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec, llvm::sys::fs::OF_None);
  if (ec)
    return "cannot write " + path + ": " + ec.message();
  llvm::legacy::PassManager codegen;
  if (machine->addPassesToEmitFile(codegen, os, nullptr,
                                   llvm::CodeGenFileType::ObjectFile))
    return "the host target cannot emit object files";
  codegen.run(module);
  return "";
}

LogicalResult (::loom::HostObjectJob::start)(ModuleOp mlirModule, llvm::StringRef path,
                                         const ::loom::CpuTarget &cpu) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();

  // `loom.scratch` marks kernel temporaries for the GPU fusion; LLVM has no
  // parameter attribute for it (the translation would warn about it).
  mlirModule.walk([](LLVM::LLVMFuncOp func) {
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
      func.removeArgAttr(i, mlir::loom::attr::kScratch);
  });
  context = std::make_unique<llvm::LLVMContext>();
  module = translateModuleToLLVMIR(mlirModule, *context);
  if (!module)
    return emitError(mlirModule.getLoc(), "cannot translate the kernels to LLVM IR");
  std::string tripleName = llvm::sys::getDefaultTargetTriple();
  llvm::Triple triple(tripleName);
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return emitError(mlirModule.getLoc(), "no LLVM target for ")
           << tripleName << ": " << error;
  llvm::TargetOptions options;
  machine.reset(target->createTargetMachine(triple, cpu.name, cpu.featureText, options,
                                            llvm::Reloc::PIC_, std::nullopt,
                                            llvm::CodeGenOptLevel::Aggressive));
  module->setTargetTriple(triple);
  module->setDataLayout(machine->createDataLayout());
  worker = std::thread([this, file = path.str()] {
    this->error = optimizeAndEmit(*module, machine.get(), file);
  });
  return success();
}

LogicalResult (::loom::HostObjectJob::wait)(Location loc) {
  join();
  done = true;
  module.reset();
  machine.reset();
  context.reset();
  if (!error.empty())
    return emitError(loc, error);
  return success();
}

LogicalResult (::loom::writeHostObject)(ModuleOp module, llvm::StringRef path,
                                        const CpuTarget &cpu) {
  HostObjectJob job;
  if (failed(job.start(module, path, cpu)))
    return failure();
  return job.wait(module.getLoc());
}
