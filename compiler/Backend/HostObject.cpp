//===- HostObject.cpp - LLVM dialect kernels to host object code ----------===//

#include "Backend/HostObject.h"
#include "Backend/TemporaryFile.h"
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

#include <algorithm>

using namespace mlir;

::loom::HostObjectJob::HostObjectJob() = default;

::loom::HostObjectJob::~HostObjectJob() {
  join();
  for (const std::unique_ptr<Part> &part : parts)
    llvm::sys::fs::remove(part->path);
}

void ::loom::HostObjectJob::join() {
  for (const std::unique_ptr<Part> &part : parts)
    if (part->worker.joinable())
      part->worker.join();
}

std::vector<std::string> (::loom::HostObjectJob::objects)() const {
  std::vector<std::string> paths;
  for (const std::unique_ptr<Part> &part : parts)
    paths.push_back(part->path);
  return paths;
}

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

/// The kernels of `module` dealt into at most `count` parts of about equal
/// size (operations), the largest first: each part's functions. One part
/// when the kernels are not independent (a call between functions, a
/// global), which separate objects could not share.
static std::vector<std::vector<LLVM::LLVMFuncOp>> dealKernels(ModuleOp module,
                                                              unsigned count) {
  std::vector<std::pair<size_t, LLVM::LLVMFuncOp>> sized;
  bool independent = true;
  for (Operation &op : module.getOps()) {
    auto func = dyn_cast<LLVM::LLVMFuncOp>(op);
    if (!func) {
      independent = false;
      continue;
    }
    if (func.isExternal())
      continue;
    size_t size = 0;
    func.walk([&](Operation *inner) {
      ++size;
      independent &= !isa<LLVM::CallOp>(inner);
    });
    sized.push_back({size, func});
  }
  if (!independent || sized.size() < 2)
    count = 1;
  count = std::max<unsigned>(1, std::min<unsigned>(count, sized.size()));
  // The largest first; equal sizes in module order (a stable order, so
  // that a build is the same every time).
  std::vector<size_t> order(sized.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return sized[a].first != sized[b].first ? sized[a].first > sized[b].first : a < b;
  });
  std::vector<std::vector<LLVM::LLVMFuncOp>> parts(count);
  std::vector<size_t> load(count, 0);
  for (size_t i : order) {
    size_t lightest = std::min_element(load.begin(), load.end()) - load.begin();
    parts[lightest].push_back(sized[i].second);
    load[lightest] += sized[i].first;
  }
  return parts;
}

LogicalResult (::loom::HostObjectJob::start)(ModuleOp mlirModule,
                                             const ::loom::CpuTarget &cpu,
                                             unsigned maxParts) {
  llvm::InitializeNativeTarget();
  llvm::InitializeNativeTargetAsmPrinter();

  // `loom.scratch` marks kernel temporaries for the GPU fusion; LLVM has no
  // parameter attribute for it (the translation would warn about it).
  mlirModule.walk([](LLVM::LLVMFuncOp func) {
    for (unsigned i = 0, e = func.getNumArguments(); i < e; ++i)
      func.removeArgAttr(i, mlir::loom::attr::kScratch);
  });
  std::string tripleName = llvm::sys::getDefaultTargetTriple();
  llvm::Triple triple(tripleName);
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return emitError(mlirModule.getLoc(), "no LLVM target for ")
           << tripleName << ": " << error;

  // LLVM's -O3 and code generation take most of a CPU build: with the
  // kernels in parts, each on a core, the build waits for the largest
  // part only.
  std::vector<std::vector<LLVM::LLVMFuncOp>> dealt =
      dealKernels(mlirModule, std::min(8u, maxParts));
  for (const std::vector<LLVM::LLVMFuncOp> &functions : dealt) {
    auto part = std::make_unique<Part>();
    llvm::SmallString<128> path;
    if (failed(::loom::createTemporaryFile(mlirModule.getLoc(), "loom-kernels", "o", path)))
      return failure();
    part->path = path.str().str();
    parts.push_back(std::move(part));
    Part &p = *parts.back();
    // One part: the module itself. Several: a module of the part's
    // kernels (with the module's attributes, the data layout among them).
    OwningOpRef<ModuleOp> partModule;
    ModuleOp translated = mlirModule;
    if (dealt.size() > 1) {
      OpBuilder builder(mlirModule.getContext());
      partModule = ModuleOp::create(mlirModule.getLoc());
      partModule->getOperation()->setAttrs(mlirModule->getAttrDictionary());
      builder.setInsertionPointToEnd(partModule->getBody());
      for (LLVM::LLVMFuncOp func : functions)
        builder.clone(*func);
      translated = *partModule;
    }
    p.context = std::make_unique<llvm::LLVMContext>();
    p.module = translateModuleToLLVMIR(translated, *p.context);
    if (!p.module)
      return emitError(mlirModule.getLoc(), "cannot translate the kernels to LLVM IR");
    llvm::TargetOptions options;
    p.machine.reset(target->createTargetMachine(triple, cpu.name, cpu.featureText, options,
                                                llvm::Reloc::PIC_, std::nullopt,
                                                llvm::CodeGenOptLevel::Aggressive));
    p.module->setTargetTriple(triple);
    p.module->setDataLayout(p.machine->createDataLayout());
  }
  // The threads start once every part is translated: translation uses
  // the MLIR context, which is this thread's.
  for (const std::unique_ptr<Part> &part : parts)
    part->worker = std::thread([&p = *part] {
      p.error = optimizeAndEmit(*p.module, p.machine.get(), p.path);
    });
  return success();
}

LogicalResult (::loom::HostObjectJob::wait)(Location loc) {
  join();
  std::string error;
  for (const std::unique_ptr<Part> &part : parts) {
    if (error.empty())
      error = part->error;
    part->module.reset();
    part->machine.reset();
    part->context.reset();
  }
  if (!error.empty())
    return emitError(loc, error);
  return success();
}
