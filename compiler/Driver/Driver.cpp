//===- Driver.cpp - loomc's stages, from script to executable -------------===//

#include "Driver/Driver.h"

#include "Backend/Executable.h"
#include "Backend/HostObject.h"
#include "Frontend/Parser.h"
#include "Loom/IR/LoomOps.h"
#include "MLIRGen/MLIRGen.h"
#include "Pipeline/Pipeline.h"
#include "Plan/PlanBuilder.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

llvm::StringRef (::loom::stageName)(Stage stage) {
  switch (stage) {
  case Stage::AST: return "ast";
  case Stage::Loom: return "loom";
  case Stage::Partitioned: return "partitioned";
  case Stage::Kernels: return "kernels";
  case Stage::Linalg: return "linalg";
  case Stage::Tiled: return "tiled";
  case Stage::LLVM: return "llvm";
  case Stage::GPU: return "gpu";
  case Stage::NVVM: return "nvvm";
  case Stage::PTX: return "ptx";
  case Stage::Plan: return "plan";
  case Stage::Executable: return "executable";
  }
  return "";
}

namespace {
/// Runs the stages in order, printing or dumping each as asked.
class Driver {
public:
  Driver(MLIRContext &context, llvm::SourceMgr &sourceMgr,
         const ::loom::DriverOptions &options, llvm::raw_ostream &os)
      : context(context), sourceMgr(sourceMgr), options(options), os(os) {}

  LogicalResult run();

private:
  /// Prints `text` if `stage` is the one asked for, and dumps it; returns
  /// true when compilation stops here.
  bool reached(::loom::Stage stage, llvm::function_ref<void(llvm::raw_ostream &)> print);
  LogicalResult runPipeline(void (*build)(OpPassManager &));
  LogicalResult runPipeline(ModuleOp target,
                            llvm::function_ref<void(OpPassManager &)> build);
  LogicalResult runGpuStages(std::optional<::loom::GpuCode> &code,
                             ::loom::KernelReport *report);
  FailureOr<::loom::KernelReport> makeKernelReport();
  FailureOr<const ::loom::DeviceSpec *> gpuDevice();
  LogicalResult parseMeshSizes(llvm::StringMap<int64_t> &sizes);
  FailureOr<func::FuncOp> selectModel();

  MLIRContext &context;
  llvm::SourceMgr &sourceMgr;
  const ::loom::DriverOptions &options;
  llvm::raw_ostream &os;
  OwningOpRef<ModuleOp> module;
  unsigned dumped = 0;
};
} // namespace

bool Driver::reached(::loom::Stage stage,
                     llvm::function_ref<void(llvm::raw_ostream &)> print) {
  if (!options.dumpDir.empty()) {
    llvm::SmallString<128> path(options.dumpDir);
    std::string file = llvm::formatv("{0:2}-{1}.{2}", ++dumped,
                                     ::loom::stageName(stage),
                                     stage == ::loom::Stage::AST ||
                                             stage == ::loom::Stage::Plan
                                         ? "txt"
                                     : stage == ::loom::Stage::PTX ? "ptx"
                                                                   : "mlir")
                           .str();
    for (char &c : file)
      c = c == ' ' ? '0' : c;
    llvm::sys::path::append(path, file);
    std::error_code ec = llvm::sys::fs::create_directories(options.dumpDir);
    llvm::raw_fd_ostream dump(path, ec);
    if (!ec)
      print(dump);
    else
      llvm::errs() << "loomc: warning: cannot write " << path << ": "
                   << ec.message() << "\n";
  }
  if (options.emit != stage)
    return false;
  print(os);
  return true;
}

LogicalResult Driver::runPipeline(void (*build)(OpPassManager &)) {
  return runPipeline(*module, build);
}

LogicalResult Driver::runPipeline(ModuleOp target,
                                  llvm::function_ref<void(OpPassManager &)> build) {
  PassManager pm(&context);
  // --mlir-print-ir-after-all and friends, for debugging a stage.
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  build(pm);
  return pm.run(target);
}

/// gpu, nvvm and ptx, from a copy of the bufferized kernels; with a CUDA
/// toolkit, also the device image and launches an executable carries. A
/// kernel report reads each stage on the way and stops after the PTX.
LogicalResult Driver::runGpuStages(std::optional<::loom::GpuCode> &code,
                                   ::loom::KernelReport *report) {
  OwningOpRef<ModuleOp> gpu = module->clone();
  if (report)
    report->countWork(*gpu);
  auto print = [&](llvm::raw_ostream &out) { gpu->print(out); };
  // Tensor cores (mma.sync) from sm_80 (Ampere) on; their tiles are sized
  // for the SMs of --gpu-device (h200 by default).
  unsigned smVersion = 0;
  llvm::StringRef(options.gpuArch)
      .drop_front(3)
      .take_while([](char ch) { return ch >= '0' && ch <= '9'; })
      .getAsInteger(10, smVersion);
  FailureOr<const ::loom::DeviceSpec *> device = gpuDevice();
  if (failed(device))
    return failure();
  // wgmma and the TMA unit exist on sm_90a only (not even sm_90, whose
  // PTX lacks them); there they are the default.
  bool sm90a = options.gpuArch == "sm_90a";
  if (options.gpuMma == ::loom::GpuMma::Wgmma && !sm90a)
    return emitError(UnknownLoc::get(&context), "--gpu-mma=wgmma needs ")
           << "--gpu-arch=sm_90a (got " << options.gpuArch << ")";
  bool warpgroupMma = options.gpuMma == ::loom::GpuMma::Wgmma ||
                      (options.gpuMma == ::loom::GpuMma::Auto && sm90a);
  // Shared memory for the tensor-core pipelines: the --gpu-arch's limits
  // (the binary runs on any GPU of that architecture), at most
  // --gpu-shared-limit per block (unset: 48 KiB for mma.sync alone, the
  // architecture's limit with wgmma).
  int64_t sharedLimit =
      options.gpuSharedLimit.value_or(warpgroupMma ? 0 : 48 * 1024);
  if (sharedLimit < 0)
    return emitError(UnknownLoc::get(&context), "--gpu-shared-limit must be a ")
           << "number of bytes, or 0 for the --gpu-arch's limit (got "
           << sharedLimit << ")";
  int64_t sharedPerBlock = 48 * 1024, sharedPerSM = 228 * 1024,
          reservedPerBlock = 1024;
  if (const ::loom::ArchSpec *arch = ::loom::lookupArch(options.gpuArch)) {
    sharedPerBlock = arch->maxSharedBytesPerBlock;
    sharedPerSM = arch->sharedBytesPerSM;
    reservedPerBlock = arch->reservedSharedBytesPerBlock;
  }
  if (sharedLimit > 0)
    sharedPerBlock = std::min(sharedPerBlock, sharedLimit);
  if (failed(runPipeline(*gpu, [&](OpPassManager &pm) {
        ::loom::buildGpuKernelsPipeline(pm, smVersion >= 80, (*device)->sms,
                                        sharedPerBlock, sharedPerSM,
                                        reservedPerBlock, warpgroupMma);
      })))
    return failure();
  if (reached(::loom::Stage::GPU, print))
    return success();
  if (report)
    report->readLaunches(*gpu);
  FailureOr<llvm::StringMap<std::vector<::loom::GpuLaunch>>> launches =
      ::loom::collectGpuLaunches(*gpu);
  if (failed(launches))
    return failure();
  ::loom::GpuTarget target;
  target.chip = options.gpuArch;
  target.toolkitPath = LOOM_CUDA_PATH;
  // Only the device code goes on: the launches are in the plan.
  for (Operation &op : llvm::make_early_inc_range(gpu->getOps()))
    if (!isa<gpu::GPUModuleOp>(op))
      op.erase();
  if (failed(runPipeline(*gpu, [&](OpPassManager &pm) {
        ::loom::buildNvvmPipeline(pm, target);
      })))
    return failure();
  if (reached(::loom::Stage::NVVM, print))
    return success();
  OwningOpRef<ModuleOp> nvvm = gpu->clone();
  auto imageOf = [](ModuleOp binaries) {
    std::string image;
    for (auto binary : binaries.getOps<gpu::BinaryOp>())
      for (Attribute object : binary.getObjects())
        image += cast<gpu::ObjectAttr>(object).getObject().getValue().str();
    return image;
  };
  if (failed(runPipeline(*gpu, [&](OpPassManager &pm) {
        ::loom::buildGpuBinaryPipeline(pm, target, "isa");
      })))
    return failure();
  std::string ptx = imageOf(*gpu);
  if (reached(::loom::Stage::PTX, [&](llvm::raw_ostream &out) { out << ptx; }))
    return success();
  if (report)
    return report->readPtx(ptx, module->getLoc());

  if (!options.embedGpu)
    return success();
  // An executable carries a cubin (ptxas runs here), or PTX without ptxas.
  code.emplace();
  code->arch = options.gpuArch;
  code->launches = std::move(*launches);
  if (llvm::StringRef(LOOM_PTXAS).empty()) {
    code->format = "ptx";
    code->image = std::move(ptx);
    return success();
  }
  if (failed(runPipeline(*nvvm, [&](OpPassManager &pm) {
        ::loom::buildGpuBinaryPipeline(pm, target, "bin");
      })))
    return failure();
  code->format = "cubin";
  code->image = imageOf(*nvvm);
  return success();
}

/// The report's GPU (--gpu-device) and architecture row (--gpu-arch), and
/// ptxas: $LOOM_PTXAS when set (empty for none), else the toolkit's.
/// The --gpu-device row of the specification table.
FailureOr<const ::loom::DeviceSpec *> Driver::gpuDevice() {
  if (const ::loom::DeviceSpec *device = ::loom::lookupDevice(options.gpuDevice))
    return device;
  InFlightDiagnostic diag = emitError(UnknownLoc::get(&context),
                                      "unknown --gpu-device '")
                            << options.gpuDevice << "' (known: ";
  llvm::interleaveComma(::loom::deviceSpecs(), diag,
                        [&](const ::loom::DeviceSpec &known) { diag << known.name; });
  return diag << ")";
}

FailureOr<::loom::KernelReport> Driver::makeKernelReport() {
  Location loc = UnknownLoc::get(&context);
  FailureOr<const ::loom::DeviceSpec *> found = gpuDevice();
  if (failed(found))
    return failure();
  const ::loom::DeviceSpec *device = *found;
  const ::loom::ArchSpec *arch = ::loom::lookupArch(options.gpuArch);
  if (!arch) {
    InFlightDiagnostic diag = emitError(loc, "--kernel-report has no GPU "
                                             "specification for --gpu-arch=")
                              << options.gpuArch << " (known: ";
    // The architectures of the devices (sm_20 is a reference row only).
    llvm::SetVector<llvm::StringRef> archs;
    for (const ::loom::DeviceSpec &known : ::loom::deviceSpecs())
      archs.insert(known.arch);
    llvm::interleaveComma(archs, diag);
    return diag << ")";
  }
  if (arch->name != device->arch)
    mlir::emitWarning(loc, "--gpu-device=")
        << device->name << " is an " << device->arch
        << " GPU, but the kernels are for " << options.gpuArch
        << ": the report uses its SMs, peaks and bandwidth with the "
        << arch->name << " limits";
  const char *fromEnvironment = std::getenv("LOOM_PTXAS");
  return ::loom::KernelReport(*arch, options.gpuArch, *device,
                              fromEnvironment ? fromEnvironment : LOOM_PTXAS);
}

LogicalResult Driver::parseMeshSizes(llvm::StringMap<int64_t> &sizes) {
  if (options.mesh.empty())
    return success();
  SmallVector<llvm::StringRef> entries;
  llvm::StringRef(options.mesh).split(entries, ',');
  for (llvm::StringRef entry : entries) {
    auto [name, value] = entry.trim().split('=');
    int64_t size = 0;
    if (name.trim().empty() || value.trim().getAsInteger(10, size) || size < 1)
      return mlir::emitError(UnknownLoc::get(&context),
                             "--mesh takes AXIS=SIZE,... with sizes >= 1 "
                             "(e.g. --mesh dp=2,tp=4), got '")
             << entry << "'";
    if (!sizes.try_emplace(name.trim(), size).second)
      return mlir::emitError(UnknownLoc::get(&context), "--mesh sets axis '")
             << name.trim() << "' twice";
  }
  return success();
}

/// The per-rank program of `model`, if it has one.
static func::FuncOp spmdProgramOf(ModuleOp module, func::FuncOp model) {
  for (auto func : module.getOps<func::FuncOp>())
    if (auto of = func->getAttrOfType<StringAttr>(mlir::loom::attr::kPartitionOf))
      if (of.getValue() == model.getSymName())
        return func;
  return {};
}

FailureOr<func::FuncOp> Driver::selectModel() {
  SmallVector<func::FuncOp> models;
  for (auto func : module->getOps<func::FuncOp>())
    if (func.isPublic() && !func->hasAttr(mlir::loom::attr::kPartitionOf) &&
        (options.model.empty() || func.getSymName() == options.model))
      models.push_back(func);
  if (models.size() == 1)
    return models.front();
  Location loc = UnknownLoc::get(&context);
  if (models.empty())
    return emitError(loc, "the script has no model named '")
           << options.model << "'";
  return emitError(loc, "the script has ")
         << models.size() << " models; choose one with --model NAME";
}

LogicalResult Driver::run() {
  if (options.kernelReport && options.emit)
    return mlir::emitError(UnknownLoc::get(&context),
                           "--kernel-report prints a report instead of a "
                           "stage; drop --emit");
  auto emitError = [&](llvm::SMLoc loc, const llvm::Twine &message) {
    mlir::emitError(::loom::toLocation(context, sourceMgr, loc)) << message;
  };
  llvm::StringRef buffer =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID())->getBuffer();
  std::unique_ptr<::loom::Module> ast = ::loom::Parser(buffer, emitError).parseModule();
  if (!ast)
    return failure();
  if (reached(::loom::Stage::AST, [&](llvm::raw_ostream &out) {
        ::loom::dumpAST(*ast, sourceMgr, out);
      }))
    return success();

  llvm::StringMap<int64_t> meshSizes;
  if (failed(parseMeshSizes(meshSizes)))
    return failure();
  module = ::loom::mlirGen(context, *ast, sourceMgr, meshSizes);
  if (!module)
    return failure();
  auto printModule = [&](llvm::raw_ostream &out) { module->print(out); };
  if (reached(::loom::Stage::Loom, printModule))
    return success();

  ::loom::PartitionOptions partition;
  partition.remarks = options.remarkCollectives;
  partition.sequenceParallel = options.sequenceParallel;
  if (failed(runPipeline(*module, [&](OpPassManager &pm) {
        ::loom::buildPartitionPipeline(pm, partition);
      })))
    return failure();
  if (reached(::loom::Stage::Partitioned, printModule))
    return success();

  if (failed(runPipeline(::loom::buildKernelsPipeline)))
    return failure();
  if (reached(::loom::Stage::Kernels, printModule))
    return success();
  // Executables and plans need exactly one model: say so before lowering.
  bool executable = !options.emit || *options.emit >= ::loom::Stage::Plan;
  if ((executable || !options.dumpDir.empty()) && failed(selectModel()))
    return failure();

  if (failed(runPipeline(::loom::buildLinalgPipeline)))
    return failure();
  if (reached(::loom::Stage::Linalg, printModule))
    return success();

  // Only the kernels are compiled: the model functions become the plan.
  OwningOpRef<ModuleOp> models = module->clone();
  for (Operation &op : llvm::make_early_inc_range(module->getOps())) {
    auto func = dyn_cast<func::FuncOp>(op);
    if (func && func->hasAttr(mlir::loom::attr::kKernel))
      func.setPublic();
    else
      op.erase();
  }
  if (failed(runPipeline(::loom::buildBufferizePipeline)))
    return failure();
  // Arguments past a kernel's tensor-level inputs and results are scratch.
  llvm::StringMap<SmallVector<ShapedType>> scratch;
  for (auto kernel : models->getOps<func::FuncOp>()) {
    if (!kernel->hasAttr(mlir::loom::attr::kKernel))
      continue;
    auto lowered = module->lookupSymbol<func::FuncOp>(kernel.getSymName());
    unsigned used = kernel.getNumArguments() + kernel.getNumResults();
    for (Type type : lowered.getArgumentTypes().drop_front(used))
      scratch[kernel.getSymName()].push_back(cast<ShapedType>(type));
    lowered->removeAttr(mlir::loom::attr::kKernel);
  }

  bool wantsGpu = (options.emit && *options.emit >= ::loom::Stage::GPU &&
                   *options.emit <= ::loom::Stage::PTX) ||
                  (!options.dumpDir.empty() &&
                   !llvm::StringRef(LOOM_CUDA_PATH).empty()) ||
                  (executable && options.embedGpu) || options.kernelReport;
  // PTX ISA 8.0 (what the GPU stages emit) covers sm_50 to sm_90a.
  if (wantsGpu && !llvm::Regex("^sm_[5-9][0-9]a?$").match(options.gpuArch))
    return mlir::emitError(UnknownLoc::get(&context),
                           "--gpu-arch must be sm_50 ... sm_90a (e.g. sm_80, "
                           "sm_90a), got '")
           << options.gpuArch << "'";
  if (options.embedGpu && llvm::StringRef(LOOM_CUDA_PATH).empty())
    return module->emitError("--gpu needs a CUDA toolkit, and Loom was built "
                             "without one");
  std::optional<::loom::KernelReport> report;
  if (options.kernelReport) {
    FailureOr<::loom::KernelReport> made = makeKernelReport();
    if (failed(made))
      return failure();
    report.emplace(std::move(*made));
  }
  std::optional<::loom::GpuCode> gpuCode;
  if (wantsGpu) {
    if (failed(runGpuStages(gpuCode, report ? &*report : nullptr)))
      return failure();
    if (options.emit && *options.emit <= ::loom::Stage::PTX &&
        *options.emit >= ::loom::Stage::GPU)
      return success();
  }

  std::optional<::loom::Plan> plan, spmdPlan;
  func::FuncOp planned, spmd;
  if (executable || !options.dumpDir.empty()) {
    std::swap(module, models);
    FailureOr<func::FuncOp> model = selectModel();
    std::swap(module, models);
    if (failed(model))
      return failure();
    planned = *model;
    const ::loom::GpuCode *gpu = gpuCode ? &*gpuCode : nullptr;
    FailureOr<::loom::Plan> built = ::loom::buildPlan(*model, scratch, gpu);
    if (failed(built))
      return failure();
    plan = std::move(*built);
    if ((spmd = spmdProgramOf(*models, *model))) {
      FailureOr<::loom::Plan> perRank = ::loom::buildPlan(spmd, scratch, gpu);
      if (failed(perRank))
        return failure();
      spmdPlan = std::move(*perRank);
    }
  }

  if (report) {
    // The model's launches in step order, then one rank's of its per-rank
    // program.
    auto programOf = [](func::FuncOp func, int64_t ranks) {
      ::loom::ReportedProgram program{func.getSymName().str(), ranks, {}};
      func.walk([&](func::CallOp call) {
        program.kernels.push_back(call.getCallee().str());
      });
      return program;
    };
    SmallVector<::loom::ReportedProgram> programs = {programOf(planned, 1)};
    if (spmd)
      programs.push_back(programOf(spmd, spmdPlan->ranks));
    report->print(os, *options.kernelReport, programs);
    return success();
  }

  if (failed(runPipeline(::loom::buildCpuTilingPipeline)))
    return failure();
  if (reached(::loom::Stage::Tiled, printModule))
    return success();
  if (failed(runPipeline(::loom::buildCpuLoweringPipeline)))
    return failure();
  if (reached(::loom::Stage::LLVM, printModule))
    return success();

  // The per-rank plan follows the one-rank plan, as a second document.
  if (reached(::loom::Stage::Plan, [&](llvm::raw_ostream &out) {
        out << plan->text;
        if (spmdPlan)
          out << "\n" << spmdPlan->text;
      }))
    return success();

  llvm::SmallString<128> object;
  if (std::error_code ec =
          llvm::sys::fs::createTemporaryFile("loom-kernels", "o", object))
    return module->emitError("cannot create a temporary file: ") << ec.message();
  LogicalResult result = ::loom::writeHostObject(*module, object, options.cpu);
  if (succeeded(result))
    result = ::loom::linkExecutable(module->getLoc(), *plan,
                                    spmdPlan ? &*spmdPlan : nullptr,
                                    gpuCode ? gpuCode->image : std::string(),
                                    object, options.output);
  llvm::sys::fs::remove(object);
  if (succeeded(result))
    llvm::errs() << "loomc: wrote " << options.output << " ("
                 << plan->kernels.size() << " kernels"
                 << (gpuCode ? ", " + gpuCode->arch + " " + gpuCode->format : "")
                 << ", arena "
                 << llvm::format("%.2f", plan->arenaBytes / 1048576.0) << " MiB";
  if (succeeded(result) && spmdPlan)
    llvm::errs() << "; runs on 1 rank or on " << spmdPlan->ranks
                 << " ranks, arena "
                 << llvm::format("%.2f", spmdPlan->arenaBytes / 1048576.0)
                 << " MiB per rank";
  if (succeeded(result))
    llvm::errs() << ")\n";
  return result;
}

LogicalResult (::loom::runDriver)(MLIRContext &context, llvm::SourceMgr &sourceMgr,
                              const DriverOptions &options, llvm::raw_ostream &os) {
  return Driver(context, sourceMgr, options, os).run();
}
