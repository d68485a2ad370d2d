//===- GpuStages.cpp - loomc's GPU rows: gpu, nvvm, ptx, image, report ----===//
//
// The GPU stages branch off the bufferized kernels: they lower a copy, so
// the CPU rows of the stage table still see the kernels as bufferized.
//
//===----------------------------------------------------------------------===//

#include "Driver/Compilation.h"

#include "KernelReport/Ptxas.h"
#include "Loom/IR/LoomDialect.h"
#include "Plan/GpuLaunches.h"
#include "Plan/PlanBuilder.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringExtras.h"


using namespace mlir;

namespace loom {

/// Whether this compilation runs the GPU stages. It also decides what the
/// CPU stages build (a GPU build fuses only the attention the GPU kernels
/// run and keeps the optimizer's copies), so --dump-dir, which only writes
/// what a compilation reaches, has no say in it: it dumps the GPU stages of
/// a --gpu build. Nor does --emit: `--gpu --emit=kernels` prints the
/// kernels stage of the --gpu build (it printed a CPU build's, with
/// attention fused where the GPU kernels do not fuse it).
bool Compilation::wantsGpu() const {
  return (options.emit && *options.emit >= Stage::GPU &&
          *options.emit <= Stage::PTX) ||
         (options.embedGpu && (executable() || options.emit)) ||
         options.kernelReport;
}

unsigned Compilation::gpuSmVersion() const {
  unsigned smVersion = 0;
  llvm::StringRef(options.gpuArch)
      .drop_front(3)
      .take_while([](char ch) { return ch >= '0' && ch <= '9'; })
      .getAsInteger(10, smVersion);
  return smVersion;
}

namespace {
/// The tensor-core kernels the GPU options choose, which the option check
/// and the GPU stage both read.
struct TensorCoreChoice {
  bool sm90a, pingpong, persistent, warpgroupMma, warpgroupAttention;
};
} // namespace

static TensorCoreChoice tensorCoreChoice(const DriverOptions &options) {
  TensorCoreChoice c;
  // wgmma and the TMA unit exist on sm_90a only (not even sm_90, whose
  // PTX lacks them); there they are the default.
  c.sm90a = options.gpuArch == "sm_90a";
  c.pingpong = options.gpuMma == GpuMma::WgmmaPingpong;
  c.persistent = options.gpuMma == GpuMma::WgmmaPersistent || c.pingpong;
  c.warpgroupMma = options.gpuMma == GpuMma::Wgmma || c.persistent ||
                   (options.gpuMma == GpuMma::Auto && c.sm90a);
  // The wgmma attention kernels are sm_90a's default: on an H200
  // (2026-12-04) 1.18 and 0.89 of SDPA's forward at T = 2048 and 8192
  // where mma.sync's are 0.87 and 0.49, 2-4 times mma.sync's backward.
  c.warpgroupAttention = options.gpuAttention == GpuAttention::Wgmma ||
                         (options.gpuAttention == GpuAttention::Auto && c.sm90a);
  return c;
}

LogicalResult Compilation::checkGpuCommandLine() {
  if (!wantsGpu() && !options.embedGpu)
    return success();
  // PTX ISA 8.0 (what the GPU stages emit) covers sm_50 to sm_90a; of
  // those, the NVPTX back end knows these (another, sm_81, made it drop
  // the processor and then fail to select cp.async: a crash).
  static constexpr llvm::StringLiteral kArchs[] = {
      "sm_50", "sm_52", "sm_53", "sm_60", "sm_61", "sm_62", "sm_70", "sm_72",
      "sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_90", "sm_90a"};
  if (!llvm::is_contained(kArchs, options.gpuArch))
    return emitError(UnknownLoc::get(&context), "--gpu-arch must be one of ")
           << llvm::join(llvm::ArrayRef<llvm::StringLiteral>(kArchs), ", ") << ", got '" << options.gpuArch << "'";
  const TensorCoreChoice c = tensorCoreChoice(options);
  if ((options.gpuMma == GpuMma::Wgmma || c.persistent) && !c.sm90a)
    return emitError(UnknownLoc::get(&context), "--gpu-mma=")
           << (c.pingpong     ? "wgmma-pingpong"
               : c.persistent ? "wgmma-persistent"
                              : "wgmma")
           << " needs --gpu-arch=sm_90a (got " << options.gpuArch << ")";
  // mma.sync's tensor cores start at sm_80: asked for below, it had built
  // SIMT kernels with no word.
  if (gpuSmVersion() < 80 && (options.gpuMma == GpuMma::MmaSync ||
                              options.gpuAttention == GpuAttention::MmaSync))
    return emitError(UnknownLoc::get(&context), "--gpu-")
           << (options.gpuMma == GpuMma::MmaSync ? "mma" : "attention")
           << "=mma.sync needs --gpu-arch=sm_80 or later (got " << options.gpuArch
           << "; below it the kernels run without tensor cores: leave it out)";
  if (options.gpuAttention == GpuAttention::Wgmma && !c.sm90a)
    return emitError(UnknownLoc::get(&context), "--gpu-attention=wgmma needs ")
           << "--gpu-arch=sm_90a (got " << options.gpuArch << ")";
  if (options.gpuSharedLimit.value_or(0) < 0)
    return emitError(UnknownLoc::get(&context), "--gpu-shared-limit must be a ")
           << "number of bytes, or 0 for the --gpu-arch's limit (got "
           << *options.gpuSharedLimit << ")";
  if (options.gpuTmaStore && !c.warpgroupMma)
    return emitError(UnknownLoc::get(&context), "--gpu-tma-store needs wgmma ")
           << "matmuls (--gpu-arch=sm_90a, not --gpu-mma=mma.sync; got "
           << (c.sm90a ? "--gpu-mma=mma.sync" : "--gpu-arch=" + options.gpuArch)
           << ")";
  if (options.gpuTmaMulticast && (!c.persistent || c.pingpong))
    return emitError(UnknownLoc::get(&context), "--gpu-tma-multicast needs ")
           << "the persistent wgmma kernels (--gpu-mma=wgmma-persistent)";
  return success();
}

LogicalResult Compilation::checkGpuOptions() {
  if (options.embedGpu && llvm::StringRef(LOOM_CUDA_PATH).empty())
    return module->emitError("--gpu needs a CUDA toolkit, and Loom was built "
                             "without one");
  if (!options.kernelReport)
    return success();
  FailureOr<KernelReport> made = makeKernelReport();
  if (failed(made))
    return failure();
  report.emplace(std::move(*made));
  return success();
}

void Compilation::printGpuModule(llvm::raw_ostream &out) {
  gpuModule->print(out);
}

/// Tensor cores (mma.sync) from sm_80 (Ampere) on, wgmma on sm_90a; their
/// tiles are sized for the SMs of --gpu-device (h200 by default).
LogicalResult Compilation::lowerToGpu() {
  if (!gpuModule) // made by bufferizeKernels
    gpuModule = module->clone();
  if (report)
    report->countWork(*gpuModule);
  unsigned smVersion = gpuSmVersion();
  FailureOr<const DeviceSpec *> device = gpuDevice();
  if (failed(device))
    return failure();
  // (The options were checked before any stage: checkGpuCommandLine.)
  auto [sm90a, pingpong, persistent, warpgroupMma, warpgroupAttention] =
      tensorCoreChoice(options);
  // Shared memory for the tensor-core pipelines: the --gpu-arch's limits
  // (the binary runs on any GPU of that architecture), at most
  // --gpu-shared-limit per block (unset: 48 KiB for mma.sync alone, the
  // architecture's limit with wgmma).
  int64_t sharedLimit =
      options.gpuSharedLimit.value_or(warpgroupMma ? 0 : 48 * 1024);
  int64_t sharedPerBlock = 48 * 1024, sharedPerSM = 228 * 1024,
          reservedPerBlock = 1024;
  if (const ArchSpec *arch = lookupArch(options.gpuArch)) {
    sharedPerBlock = arch->maxSharedBytesPerBlock;
    sharedPerSM = arch->sharedBytesPerSM;
    reservedPerBlock = arch->reservedSharedBytesPerBlock;
  }
  // The wgmma attention kernels take the architecture's limit unless told
  // less: its default 48 KiB for mma.sync matmuls is no limit of its own.
  int64_t attentionShared = 0;
  if (warpgroupAttention)
    attentionShared = options.gpuSharedLimit.value_or(0) > 0
                          ? std::min(sharedPerBlock, *options.gpuSharedLimit)
                          : sharedPerBlock;
  if (sharedLimit > 0)
    sharedPerBlock = std::min(sharedPerBlock, sharedLimit);
  GpuKernelsOptions kernels;
  kernels.tensorCores = smVersion >= 80;
  kernels.multiprocessors = (*device)->sms;
  kernels.sharedPerBlock = sharedPerBlock;
  kernels.sharedPerSM = sharedPerSM;
  kernels.reservedSharedPerBlock = reservedPerBlock;
  kernels.warpgroupMma = warpgroupMma;
  kernels.persistentWarpgroupMma = persistent;
  kernels.pingpongWarpgroupMma = pingpong;
  kernels.tmaStoreEpilogue = options.gpuTmaStore;
  kernels.tmaMulticast = options.gpuTmaMulticast;
  kernels.warpgroupAttentionShared = attentionShared;
  // The mma.sync attention kernels' staged operands, within the limit too
  // (they had taken 16-32 KiB whatever the limit; stagingBuffers keeps
  // them within static shared memory's 48 KiB).
  if (options.gpuSharedLimit.value_or(0) > 0)
    kernels.attentionStagingShared = *options.gpuSharedLimit;
  return runPipeline(*gpuModule, [&](OpPassManager &pm) {
    buildGpuKernelsPipeline(pm, kernels);
  });
}

LogicalResult Compilation::lowerToNvvm() {
  if (report)
    report->readLaunches(*gpuModule);
  FailureOr<llvm::StringMap<std::vector<GpuLaunch>>> collected =
      collectGpuLaunches(*gpuModule);
  if (failed(collected))
    return failure();
  launches = std::move(*collected);
  // An attention forward sums softmax weights times its values.
  for (auto func : gpuModule->getOps<func::FuncOp>())
    if (auto mark = func->getAttrOfType<DictionaryAttr>(mlir::loom::attr::kGpuAttention))
      if (!mark.get("result_grad"))
        if (auto value = mark.getAs<IntegerAttr>("value"))
          termsArgs[func.getSymName()] = value.getInt();
  gpuTarget.chip = options.gpuArch;
  gpuTarget.toolkitPath = LOOM_CUDA_PATH;
  // Only the device code goes on: the launches are in the plan.
  for (Operation &op : llvm::make_early_inc_range(gpuModule->getOps()))
    if (!isa<gpu::GPUModuleOp>(op))
      op.erase();
  return runPipeline(*gpuModule, [&](OpPassManager &pm) {
    buildNvvmPipeline(pm, gpuTarget);
  });
}

/// The device image of every gpu.binary in `binaries`.
static std::string imageOf(ModuleOp binaries) {
  std::string image;
  for (auto binary : binaries.getOps<gpu::BinaryOp>())
    for (Attribute object : binary.getObjects())
      image += cast<gpu::ObjectAttr>(object).getObject().getValue().str();
  return image;
}

LogicalResult Compilation::emitPtx() {
  if (failed(runPipeline(*gpuModule, [&](OpPassManager &pm) {
        buildGpuBinaryPipeline(pm, gpuTarget, "isa");
      })))
    return failure();
  ptx = imageOf(*gpuModule);
  return success();
}

/// A kernel report reads the PTX (ptxas runs on it) and needs no image; an
/// executable carries a cubin (ptxas runs here), or PTX without ptxas.
LogicalResult Compilation::buildGpuImage() {
  if (report)
    return report->readPtx(ptx, module->getLoc());
  if (!options.embedGpu)
    return success();
  gpuCode.emplace();
  gpuCode->arch = options.gpuArch;
  gpuCode->launches = std::move(launches);
  gpuCode->termsArgs = std::move(termsArgs);
  if (llvm::StringRef(LOOM_PTXAS).empty()) {
    gpuCode->format = "ptx";
    gpuCode->image = std::move(ptx);
    return success();
  }
  // ptxas on the PTX the ptx stage printed: gpu-module-to-binary would
  // run LLVM's NVPTX backend over the module again, half this stage's time.
  // (ptxas -split-compile 2 made whole compiles slower on 2 cores: the
  // host object compiles on the other one meanwhile.)
  FailureOr<::loom::AssembledPtx> assembled =
      ::loom::assemblePtx(LOOM_PTXAS, options.gpuArch, ptx, {}, module->getLoc());
  if (failed(assembled))
    return failure();
  gpuCode->format = "cubin";
  gpuCode->image = std::move(assembled->cubin);
  return success();
}

/// The model's launches in step order, then one rank's of its per-rank
/// program; nothing is compiled for the CPU after the report.
LogicalResult Compilation::printKernelReport() {
  auto programOf = [](func::FuncOp func, int64_t ranks) {
    ReportedProgram program{func.getSymName().str(), ranks, {}};
    func.walk([&](func::CallOp call) {
      if (!::loom::isViewStep(call)) // the plan's views launch nothing
        program.kernels.push_back(call.getCallee().str());
    });
    return program;
  };
  SmallVector<ReportedProgram> programs = {programOf(planned, 1)};
  if (spmd)
    programs.push_back(programOf(spmd, spmdPlan->ranks));
  report->print(os, *options.kernelReport, programs);
  finished = true;
  return success();
}

/// The --gpu-device row of the specification table.
FailureOr<const ::loom::DeviceSpec *> Compilation::gpuDevice() {
  if (const ::loom::DeviceSpec *device = ::loom::lookupDevice(options.gpuDevice))
    return device;
  InFlightDiagnostic diag = emitError(UnknownLoc::get(&context),
                                      "unknown --gpu-device '")
                            << options.gpuDevice << "' (known: ";
  llvm::interleaveComma(::loom::deviceSpecs(), diag,
                        [&](const ::loom::DeviceSpec &known) { diag << known.name; });
  return diag << ")";
}

/// The report's GPU (--gpu-device) and architecture row (--gpu-arch), and
/// ptxas: $LOOM_PTXAS when set (empty for none), else the toolkit's.
FailureOr<::loom::KernelReport> Compilation::makeKernelReport() {
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

} // namespace loom
