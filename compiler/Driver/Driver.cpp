//===- Driver.cpp - loomc's stages, from script to executable -------------===//
//
// loomc is one ordered table of stages (kStages): each row names the step
// that reaches it, when the step runs, and, for an --emit stage, how the
// stage prints. Adding a stage is adding a row.
//
//===----------------------------------------------------------------------===//

#include "Driver/Compilation.h"
#include "Driver/InvalidIr.h"

#include "Backend/Executable.h"
#include "Backend/HostObject.h"
#include "Frontend/Parser.h"
#include "Loom/IR/LoomOps.h"
#include "MLIRGen/MLIRGen.h"
#include "loom/runtime/plan/InFlight.h"

#include "mlir/Pass/Pass.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>
#include <thread>

using namespace mlir;

namespace loom {

namespace {
/// One row of the stage table.
struct StageRow {
  /// What --timing calls the step.
  const char *name;
  /// The --emit stage the step reaches; none for a step that prints nothing.
  std::optional<Stage> stage;
  LogicalResult (Compilation::*step)();
  /// When the step runs; null for always.
  bool (Compilation::*runs)() const;
  void (Compilation::*print)(llvm::raw_ostream &);
};

using C = Compilation;
/// The stages in the order they run. The GPU rows work on a copy of the
/// bufferized kernels; the CPU rows, first, lower the kernels themselves.
const StageRow kStages[] = {
    {"parse", Stage::AST, &C::parse, nullptr, &C::printAST},
    {"loom", Stage::Loom, &C::generateLoom, nullptr, &C::printModule},
    {"schedule", Stage::Schedule, &C::planSchedule, &C::wantsSchedule, &C::printSchedule},
    {"autodiff", Stage::Autodiff, &C::differentiate, &C::wantsGradients, &C::printModule},
    {"partition", Stage::Partitioned, &C::partition, nullptr, &C::printModule},
    {"kernels", Stage::Kernels, &C::outlineKernels, nullptr, &C::printModule},
    {"explain", std::nullopt, &C::explainPlan, &C::wantsExplain, nullptr},
    {"linalg", Stage::Linalg, &C::lowerToLinalg, nullptr, &C::printModule},
    {"bufferize", std::nullopt, &C::bufferizeKernels, nullptr, nullptr},
    // The CPU tiles may add scratch buffers (B's panels): before the plan.
    {"tile", Stage::Tiled, &C::tileForCpu, &C::wantsCpuKernels, &C::printModule},
    {"llvm", Stage::LLVM, &C::lowerForCpu, &C::wantsCpuKernels, &C::printModule},
    // The host object compiles on a thread of its own (HostObjectJob) while
    // the GPU stages, ptxas and the plans run: on 2 cores that overlaps the
    // two longest parts of a GPU build.
    {"host-object", std::nullopt, &C::startHostObject, &C::wantsExecutable, nullptr},
    {"gpu", Stage::GPU, &C::lowerToGpu, &C::wantsGpu, &C::printGpuModule},
    {"nvvm", Stage::NVVM, &C::lowerToNvvm, &C::wantsGpu, &C::printGpuModule},
    {"ptx", Stage::PTX, &C::emitPtx, &C::wantsGpu, &C::printPtx},
    {"gpu-image", std::nullopt, &C::buildGpuImage, &C::wantsGpu, nullptr},
    {"plan", std::nullopt, &C::buildPlans, &C::wantsPlans, nullptr},
    {"kernel-report", std::nullopt, &C::printKernelReport, &C::wantsReport, nullptr},
    {"print-plan", Stage::Plan, nullptr, nullptr, &C::printPlans},
    {"link", Stage::Executable, &C::linkExecutable, nullptr, nullptr},
};
} // namespace

llvm::StringRef stageName(Stage stage) {
  switch (stage) {
  case Stage::AST: return "ast";
  case Stage::Loom: return "loom";
  case Stage::Schedule: return "schedule";
  case Stage::Autodiff: return "autodiff";
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

Compilation::~Compilation() {
  // (The host object job removes its temporary objects as it goes.)
  // The root scope ends before its manager prints the report.
  timingRoot = TimingScope();
}

namespace rt = ::loom::runtime;

/// The most bytes a pipeline rank of the pipelined plan `planText` keeps
/// for its microbatches, in the blocks the runtime allocates beside its
/// arena before the first step (a step's values in flight in the plan's own
/// schedule, a forward's, and the buffer its carries are received into:
/// runtime/plan/InFlight.h, as explain's figure); 0 for a plan without a
/// pipeline.
static uint64_t pipelineActivationBytes(const std::string &planText) {
  rt::Plan plan;
  rt::Schedule schedule;
  rt::ScheduleKind kind;
  std::string error;
  if (!rt::parsePlan(planText, plan, error) || !plan.pipeline.present)
    return 0;
  // As the runtime runs it (runtime/lib/exec/Driver.cpp): a step with a
  // backward (training, or a gradient program) in its schedule; a forward
  // in microbatches keeps each one's outputs (they had been left out: a
  // forward's [B, T, V] logits in 8 microbatches took 8 copies beside an
  // arena the limit had passed).
  if (!plan.hasBackward()) {
    std::vector<uint64_t> ranks = rt::forwardPipelineBytes(
        plan, plan.forwardMicrobatches() ? static_cast<unsigned>(plan.optimizer.microbatches) : 1);
    return *std::max_element(ranks.begin(), ranks.end()) + rt::pipelineMessageBytes(plan);
  }
  if (!rt::parseScheduleKind(plan.pipeline.schedule, kind))
    return 0;
  unsigned ranks = plan.mesh.axes[plan.pipeline.axis].size;
  if (!rt::buildSchedule(kind, ranks, plan.pipeline.stages,
                         static_cast<unsigned>(plan.optimizer.microbatches), schedule, error))
    return 0;
  uint64_t most = 0;
  for (const rt::InFlightLayout &layout : rt::planInFlightRanks(plan, schedule))
    most = std::max<uint64_t>(most, layout.bytes());
  return most + rt::pipelineMessageBytes(plan);
}

LogicalResult Compilation::run() {
  if (options.kernelReport && options.emit)
    return emitError(UnknownLoc::get(&context),
                     "--kernel-report prints a report instead of a stage; "
                     "drop --emit");
  if ((options.explain || options.searchMesh) && (options.emit || options.kernelReport))
    return emitError(UnknownLoc::get(&context))
           << (options.explain ? "--explain" : "--search-mesh")
           << " prints a report instead of a stage; drop --emit and --kernel-report";
  // The drawing is made after the kernels stage (explainPlan), which an
  // --emit of kernels or earlier stops before.
  if (!options.meshSvg.empty() && options.emit && *options.emit <= Stage::Kernels)
    return emitError(UnknownLoc::get(&context),
                     "--mesh-svg draws the per-rank program after the kernels "
                     "stage: --emit=")
           << stageName(*options.emit) << " stops before it";
  if (!options.scheduleSvg.empty() && options.emit && *options.emit < Stage::Schedule)
    return emitError(UnknownLoc::get(&context),
                     "--schedule-svg draws the schedule stage: --emit=")
           << stageName(*options.emit) << " stops before it";
  // Said now: each stage's dump had warned and the compile gone on.
  if (!options.dumpDir.empty() && llvm::sys::fs::exists(options.dumpDir) &&
      !llvm::sys::fs::is_directory(options.dumpDir))
    return emitError(UnknownLoc::get(&context), "--dump-dir '")
           << options.dumpDir << "' is a file, not a directory";
  // Made now: a directory that cannot be made (under a file, in /proc)
  // had been a warning per stage, and the compile had gone on.
  if (!options.dumpDir.empty())
    if (std::error_code ec = llvm::sys::fs::create_directories(options.dumpDir))
      return emitError(UnknownLoc::get(&context), "--dump-dir '")
             << options.dumpDir << "': cannot create it: " << ec.message();
  // The remarks come from the partitioner, which an earlier --emit stops
  // before: they were silently missing.
  if (options.remarkCollectives && options.emit && *options.emit < Stage::Partitioned)
    return emitError(UnknownLoc::get(&context),
                     "--remarks=collectives reports what the partitioner "
                     "inserts: --emit=")
           << stageName(*options.emit) << " stops before it";
  if (failed(checkGpuCommandLine()))
    return failure();
  // Looked for now, not after the whole compile.
  if (wantsExecutable() && !options.explain && !options.searchMesh &&
      failed(findRuntimeLibraries(UnknownLoc::get(&context))))
    return failure();
  if (options.dumpAfterEachPass && options.dumpDir.empty())
    return emitError(UnknownLoc::get(&context),
                     "--dump-after-each-pass writes into --dump-dir: give one");
  if (options.timing) {
    timingManager.emplace();
    timingManager->setEnabled(true);
    timingRoot = timingManager->getRootScope();
  }
  // The search explains sampled copies of the script, not the script.
  if (options.searchMesh && !options.probe)
    return failure(failed(parse()) || failed(searchMeshes()));
  LogicalResult result = success();
  // A deep model's build is minutes of silence otherwise (800 layers: 56 s).
  auto started = std::chrono::steady_clock::now();
  for (const StageRow &row : kStages) {
    if (row.runs && !(this->*row.runs)())
      continue;
    double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    if (row.step && !options.probe && (options.progress == ProgressLines::Always ||
                           (options.progress == ProgressLines::Long && seconds >= 2))) {
      llvm::errs() << llvm::formatv("loomc: {0} ({1:f1} s)\n", row.name, seconds);
      llvm::errs().flush();
    }
    TimingScope scope = timingRoot.nest(row.name);
    timingStep = &scope;
    stepName = row.name;
    if (row.step && failed((this->*row.step)())) {
      result = failure();
      break;
    }
    if (finished || (row.print && reached(*row.stage, row.print)))
      break;
  }
  timingStep = nullptr;
  if (!options.printIrAfter.empty() && !printedAfter && succeeded(result)) {
    InFlightDiagnostic diag = emitWarning(UnknownLoc::get(&context))
                              << "--print-ir-after=" << options.printIrAfter
                              << ": no pass of that name ran; the passes that ran: ";
    llvm::interleave(passesRun, [&](StringRef name) { diag << name; },
                     [&] { diag << ", "; });
  }
  return result;
}

bool Compilation::reached(Stage stage,
                          void (Compilation::*print)(llvm::raw_ostream &)) {
  if (!options.dumpDir.empty()) {
    llvm::SmallString<128> path(options.dumpDir);
    std::string file = llvm::formatv("{0:2}-{1}.{2}", ++dumped,
                                     stageName(stage),
                                     stage == Stage::AST || stage == Stage::Plan ||
                                             stage == Stage::Schedule
                                         ? "txt"
                                     : stage == Stage::PTX ? "ptx"
                                                                   : "mlir")
                           .str();
    for (char &c : file)
      c = c == ' ' ? '0' : c;
    llvm::sys::path::append(path, file);
    std::error_code ec = llvm::sys::fs::create_directories(options.dumpDir);
    llvm::raw_fd_ostream dump(path, ec);
    if (!ec) {
      (this->*print)(dump);
      ec = flushChecked(dump);
    }
    if (ec)
      llvm::errs() << "loomc: warning: cannot write " << path << ": "
                   << ec.message() << "\n";
  }
  if (options.emit != stage)
    return false;
  (this->*print)(os);
  return true;
}

LogicalResult Compilation::runPipeline(void (*build)(OpPassManager &)) {
  return runPipeline(*module, build);
}

LogicalResult
Compilation::runPipeline(ModuleOp target,
                         llvm::function_ref<void(OpPassManager &)> build) {
  PassManager pm(&context);
  // --mlir-print-ir-after-all and friends, for debugging a stage.
  if (failed(applyPassManagerCLOptions(pm)))
    return failure();
  auto never = [](Pass *, Operation *) { return false; };
  if (!options.printIrAfter.empty())
    pm.enableIRPrinting(
        never,
        [this](Pass *pass, Operation *) {
          passesRun.insert(pass->getArgument());
          bool hit = pass->getArgument() == options.printIrAfter;
          printedAfter |= hit;
          return hit;
        },
        /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false,
        /*printAfterOnlyOnFailure=*/false, llvm::errs());
  if (options.dumpAfterEachPass) {
    // One directory per pipeline run, numbered in order and named by the
    // loomc step: the pass numbers start again in each.
    llvm::SmallString<128> tree(options.dumpDir);
    llvm::sys::path::append(
        tree, "passes",
        llvm::formatv("{0:2}-{1}", ++passDumps, stepName).str());
    for (char &c : tree)
      c = c == ' ' ? '0' : c;
    if (std::error_code ec = llvm::sys::fs::create_directories(tree))
      llvm::errs() << "loomc: warning: cannot write " << tree << ": "
                   << ec.message() << "\n";
    // Each pass writes the op it ran on (a function pass: one function) and
    // only where it changed it: the whole module after every function pass
    // had written 7.8 GB for gpt-train's training step.
    pm.enableIRPrintingToFileTree(
        never, [](Pass *, Operation *) { return true; },
        /*printModuleScope=*/false, /*printAfterOnlyOnChange=*/true,
        /*printAfterOnlyOnFailure=*/false, tree);
  }
  // A search's trial compilations are of a script that compiled already.
  if (options.probe)
    pm.enableVerifier(false);
  build(pm);
  // Timing goes last, so that it times the passes and not the printing.
  if (timingStep)
    pm.enableTiming(*timingStep);
  InvalidIrAfterPass invalidIr(pm);
  LogicalResult result = pm.run(target);
  invalidIr.flush();
  return result;
}

LogicalResult Compilation::parse() {
  auto emitError = [&](llvm::SMLoc loc, const llvm::Twine &message) {
    mlir::emitError(toLocation(context, sourceMgr, loc)) << message;
  };
  llvm::StringRef buffer =
      sourceMgr.getMemoryBuffer(sourceMgr.getMainFileID())->getBuffer();
  ast = Parser(buffer, emitError).parseModule();
  if (!ast)
    return failure();
  // Malformed --mesh and --dim entries are errors at every stage (--emit=ast
  // had ignored them); their names are checked against the script's
  // declarations where it is elaborated.
  {
    ElaborationOptions sizes;
    if (failed(parseSizes(options.mesh, "--mesh", "dp=2,tp=4", sizes.meshSizes)) ||
        failed(parseSizes(options.dims, "--dim", "B=1,T=128", sizes.dimSizes)))
      return failure();
  }
  // Said at the first stage too (--emit=ast had printed the script, status
  // 0, for a --model no model has).
  if (!options.model.empty() &&
      llvm::none_of(ast->models, [&](const ModelDecl &decl) {
        return decl.name.text == options.model;
      }))
  {
    std::string names;
    for (const ModelDecl &decl : ast->models)
      names += (names.empty() ? "" : ", ") + decl.name.text;
    return mlir::emitError(UnknownLoc::get(&context), "the script has no model named '")
           << options.model << "' (its models: " << (names.empty() ? "none" : names) << ")";
  }
  return success();
}

void Compilation::printAST(llvm::raw_ostream &out) {
  dumpAST(*ast, sourceMgr, out);
}

void Compilation::printModule(llvm::raw_ostream &out) { module->print(out); }

LogicalResult Compilation::generateLoom() {
  ElaborationOptions elaboration;
  if (failed(parseSizes(options.mesh, "--mesh", "dp=2,tp=4", elaboration.meshSizes)) ||
      failed(parseSizes(options.dims, "--dim", "B=1,T=128", elaboration.dimSizes)))
    return failure();
  // Explaining a model with a train section explains its training step.
  if (options.explain || options.probe || options.searchMesh)
    for (const ModelDecl &decl : ast->models)
      if (options.model.empty() || decl.name.text == options.model)
        for (const StmtPtr &stmt : decl.body)
          options.train |= stmt->kind == Stmt::Kind::Train;
  elaboration.recomputeLayers = options.recomputeLayers;
  elaboration.trainStep = options.train;
  elaboration.microbatches = options.microbatches;
  elaboration.loopLimit = options.loopLimit;
  elaboration.loopTripCount = &loopTripCount;
  module = mlirGen(context, *ast, sourceMgr, elaboration);
  if (module && options.zero)
    module->walk([&](mlir::loom::TrainOp train) {
      train.setZeroAttr(Builder(&context).getI64IntegerAttr(1));
    });
  if (!module)
    return failure();
  warnOfIdleOptions();
  // An unknown --model is an error at every stage (the early stages print
  // every model, and printed them all for a misspelled name).
  if (!options.model.empty() &&
      !llvm::any_of(module->getOps<func::FuncOp>(), [&](func::FuncOp func) {
        return func.getSymName() == options.model && func.isPublic();
      }))
    return failed(selectModel()) ? failure() : success();
  return success();
}

/// Options that change nothing of this build are said to, rather than
/// ignored: a user who asked for a schedule or microbatches expects them.
void Compilation::warnOfIdleOptions() {
  for (auto func : module->getOps<func::FuncOp>()) {
    if (!func.isPublic() ||
        (!options.model.empty() && func.getSymName() != options.model))
      continue;
    if (!options.schedule.empty() && !func->hasAttr(mlir::loom::attr::kPipelineAxis))
      emitWarning(func.getLoc())
          << "--schedule=" << options.schedule << " has no effect: model '"
          << func.getSymName()
          << "' is not pipelined (no 'pipeline AXIS' line and stages)";
    if (options.microbatches && !options.train &&
        !func->hasAttr(mlir::loom::attr::kForwardMicrobatches))
      emitWarning(func.getLoc())
          << "--microbatches " << *options.microbatches
          << " has no effect: a forward build of model '" << func.getSymName()
          << "' runs the whole batch at once (microbatches split a --train "
             "step, or a forward pipelined over several ranks)";
  }
}

bool Compilation::wantsGradients() const {
  return options.gradients || options.train || options.emit == Stage::Autodiff;
}

AttentionFusion Compilation::fusesAttention() const {
  if (!options.fuseAttention)
    return AttentionFusion::None;
  // --explain models the plan a GPU build runs, and so do its probes (the
  // fit note's and --search-mesh's candidates, which reset `explain`: they
  // fused f32 attention the GPU leaves unfused, and disagreed with
  // --explain of the same configuration).
  if (!wantsGpu() && !options.explain && !options.probe)
    return AttentionFusion::Any;
  // A GPU build fuses what the GPU kernels run (forward and backward):
  // nothing below sm_80, which has no attention kernel (a fused op became
  // the CPU's blocked loop, a launch inside a kernel, and failed to lower).
  if (wantsGpu() && gpuSmVersion() < 80)
    return AttentionFusion::None;
  return AttentionFusion::GpuKernel;
}

LogicalResult Compilation::differentiate() {
  return runPipeline(*module, [&](OpPassManager &pm) {
    buildAutodiffPipeline(pm, options.train, options.gradBucketMb,
                          fusesAttention());
  });
}

LogicalResult Compilation::partition() {
  PartitionOptions partition;
  partition.remarks = options.remarkCollectives;
  partition.sequenceParallel = options.sequenceParallel;
  partition.fuseAttention = fusesAttention();
  partition.schedule = options.schedule;
  // Buckets group gradient sums: only the gradient program has them.
  partition.gradBucketMb =
      options.gradients || options.train ? options.gradBucketMb : 0;
  return runPipeline(*module, [&](OpPassManager &pm) {
    buildPartitionPipeline(pm, partition);
  });
}

LogicalResult Compilation::outlineKernels() {
  return runPipeline(buildKernelsPipeline);
}

LogicalResult Compilation::lowerToLinalg() {
  // Executables and plans need exactly one model: say so before lowering.
  if ((executable() || !options.dumpDir.empty()) && failed(selectModel()))
    return failure();
  // bf16 attention multiplies bf16 blocks where the CPU's dots or AMX
  // tiles run them; not in GPU builds, whose attention kernels become GPU
  // launches that take the widened lowering's f32 scratch for their
  // statistics.
  bool bf16Operands = false;
  if (!wantsGpu()) {
    FailureOr<const CpuTarget *> target = cpuTarget();
    if (failed(target))
      return failure();
    Bf16MatmulPath path = (*target)->bf16Path;
    bf16Operands = path == Bf16MatmulPath::Dot || path == Bf16MatmulPath::Amx ||
                   path == Bf16MatmulPath::EmulatedAmx;
  }
  // GPU builds keep the copies: loom-fuse-update-loops rewrites their
  // update kernels, and one plan runs on either device.
  // On the CPU a norm's gradient runs in blocks of rows that stay in a
  // core's L2 cache (1 MiB on these Zen 4 cores, 2 MiB on Sapphire Rapids)
  // with room for their dx; the GPU's row kernels take the rows unblocked.
  constexpr int64_t kCpuNormRowBlockBytes = 256 * 1024;
  return runPipeline(*module, [&](OpPassManager &pm) {
    buildLinalgPipeline(pm, bf16Operands, /*inPlaceUpdates=*/!wantsGpu(),
                        wantsGpu() ? 0 : kCpuNormRowBlockBytes);
  });
}

LogicalResult Compilation::bufferizeKernels() {
  // Only the kernels are compiled: the model functions become the plan.
  models = module->clone();
  for (Operation &op : llvm::make_early_inc_range(module->getOps())) {
    auto func = dyn_cast<func::FuncOp>(op);
    if (func && func->hasAttr(mlir::loom::attr::kKernel))
      func.setPublic();
    else
      op.erase();
  }
  if (failed(runPipeline(buildBufferizePipeline)))
    return failure();
  // Arguments past a kernel's tensor-level inputs and results are scratch.
  for (auto kernel : models->getOps<func::FuncOp>()) {
    if (!kernel->hasAttr(mlir::loom::attr::kKernel))
      continue;
    auto lowered = module->lookupSymbol<func::FuncOp>(kernel.getSymName());
    unsigned used = kernel.getNumArguments() + kernel.getNumResults();
    for (Type type : lowered.getArgumentTypes().drop_front(used))
      scratch[kernel.getSymName()].push_back(cast<ShapedType>(type));
    lowered->removeAttr(mlir::loom::attr::kKernel);
  }
  if (failed(checkGpuOptions()))
    return failure();
  // The GPU stages start from the bufferized kernels, which the CPU stages
  // (run first, so that the host object compiles beside the GPU stages)
  // then tile in place.
  if (wantsGpu())
    gpuModule = module->clone();
  return success();
}

bool Compilation::wantsCpuKernels() const {
  // Not for the report, nor for a GPU stage's --emit.
  return !options.kernelReport &&
         !(options.emit && (*options.emit == Stage::GPU ||
                            *options.emit == Stage::NVVM || *options.emit == Stage::PTX));
}

bool Compilation::wantsPlans() const {
  return executable() || !options.dumpDir.empty();
}

func::FuncOp spmdProgramOf(ModuleOp module, func::FuncOp model) {
  for (auto func : module.getOps<func::FuncOp>())
    if (auto of = func->getAttrOfType<StringAttr>(mlir::loom::attr::kPartitionOf))
      if (of.getValue() == model.getSymName())
        return func;
  return {};
}

LogicalResult Compilation::buildPlans() {
  std::swap(module, models);
  FailureOr<func::FuncOp> model = selectModel();
  std::swap(module, models);
  if (failed(model))
    return failure();
  planned = *model;
  const GpuCode *gpu = gpuCode ? &*gpuCode : nullptr;
  FailureOr<Plan> built = buildPlan(*model, scratch, gpu);
  if (failed(built))
    return failure();
  plan = std::move(*built);
  if ((spmd = spmdProgramOf(*models, *model))) {
    FailureOr<Plan> perRank = buildPlan(spmd, scratch, gpu);
    if (failed(perRank) || failed(checkPipelineSchedule(spmd)))
      return failure();
    spmdPlan = std::move(*perRank);
  }
  // The limit was checked against explain's model, which counts params,
  // gradients, optimizer state and saved activations but not a step's
  // working temps: the built plan's arena is what a rank allocates, and a
  // pipelined training step's rank its microbatches' activations beside it
  // (they had been left out: gpt.loom on pp=2 passed a limit of 40M and
  // allocated 48.9 MiB).
  const Plan &perRank = spmdPlan ? *spmdPlan : *plan;
  uint64_t activations = spmdPlan ? pipelineActivationBytes(spmdPlan->text) : 0;
  int64_t allocated = perRank.arenaBytes + static_cast<int64_t>(activations);
  allocatedBytes = allocated;
  if (options.memoryLimit && allocated > *options.memoryLimit)
    return emitError(model->getLoc())
           << "the plan of model '" << model->getSymName() << "' allocates "
           << allocated << " bytes (" << formatBytes(allocated)
           << (activations ? ", with what it holds for its microbatches in flight and "
                          "its pipeline's receive buffer"
                        : "")
           << ") on " << (spmdPlan ? "each rank" : "its rank")
           << ", more than the memory limit of " << *options.memoryLimit
           << " bytes (" << formatBytes(*options.memoryLimit)
           << ", --memory-limit; the estimate checked before the build leaves "
              "out a step's temporaries)";
  return success();
}

FailureOr<const CpuTarget *> Compilation::cpuTarget() {
  if (!cpu) {
    FailureOr<CpuTarget> resolved = resolveCpuTarget(module->getLoc(), options.cpu, options.bf16Matmul);
    if (failed(resolved))
      return failure();
    cpu = std::move(*resolved);
  }
  return &*cpu;
}

LogicalResult Compilation::tileForCpu() {
  FailureOr<const CpuTarget *> target = cpuTarget();
  if (failed(target))
    return failure();
  llvm::StringMap<unsigned> arguments;
  for (auto kernel : module->getOps<func::FuncOp>())
    arguments[kernel.getSymName()] = kernel.getNumArguments();
  if (failed(runPipeline(*module, [&](OpPassManager &pm) {
        buildCpuTilingPipeline(pm, (*target)->vectorBits(), (*target)->bf16Path);
      })))
    return failure();
  // The tiles' temporaries became trailing arguments: scratch for the plan.
  for (auto kernel : module->getOps<func::FuncOp>()) {
    auto known = arguments.find(kernel.getSymName());
    if (known == arguments.end())
      continue;
    for (Type type : kernel.getArgumentTypes().drop_front(known->second))
      scratch[kernel.getSymName()].push_back(cast<ShapedType>(type));
  }
  return success();
}

LogicalResult Compilation::lowerForCpu() {
  return runPipeline(buildCpuLoweringPipeline);
}

/// The per-rank plan follows the one-rank plan, as a second document.
void Compilation::printPlans(llvm::raw_ostream &out) {
  out << plan->text;
  if (spmdPlan)
    out << "\n" << spmdPlan->text;
}

LogicalResult Compilation::startHostObject() {
  FailureOr<const CpuTarget *> target = cpuTarget();
  if (failed(target))
    return failure();
  // The GPU stages, which run meanwhile, keep a core busy: the host
  // object takes the others (on 2 cores, one part).
  unsigned cores = std::max(1u, std::thread::hardware_concurrency());
  return hostObject.start(*module, **target,
                          wantsGpu() ? std::max(1u, cores - 1) : cores);
}

LogicalResult Compilation::linkExecutable() {
  if (!hostObject.started() && failed(startHostObject()))
    return failure();
  FailureOr<const CpuTarget *> target = cpuTarget();
  if (failed(target))
    return failure();
  LogicalResult result = hostObject.wait(module->getLoc());
  if (succeeded(result))
    result = ::loom::linkExecutable(module->getLoc(), *plan,
                                    spmdPlan ? &*spmdPlan : nullptr,
                                    gpuCode ? gpuCode->image : std::string(),
                                    (*target)->describe(),
                                    hostObject.objects(), options.output);
  if (failed(result))
    return failure();
  // The executable's kernels: the two programs share their equal ones
  // (loom-dedup-kernels), so the count is of distinct names.
  llvm::StringSet<> kernels;
  for (const Plan *each : {&*plan, spmdPlan ? &*spmdPlan : nullptr})
    if (each)
      for (const KernelSignature &kernel : each->kernels)
        kernels.insert(kernel.name);
  llvm::errs() << "loomc: wrote " << options.output << " ("
               << kernels.size() << " kernels"
               << (gpuCode ? ", " + gpuCode->arch + " " + gpuCode->format : "")
               << ", arena "
               << llvm::format("%.2f", plan->arenaBytes / 1048576.0) << " MiB";
  if (spmdPlan)
    llvm::errs() << "; runs on 1 rank or on " << spmdPlan->ranks
                 << " ranks, arena "
                 << llvm::format("%.2f", spmdPlan->arenaBytes / 1048576.0)
                 << " MiB per rank";
  llvm::errs() << ")\n";
  return success();
}

LogicalResult Compilation::parseSizes(llvm::StringRef text, llvm::StringRef flag,
                                      llvm::StringRef example,
                                      llvm::StringMap<int64_t> &sizes) {
  if (text.empty())
    return success();
  bool mesh = flag == "--mesh";
  SmallVector<llvm::StringRef> entries;
  text.split(entries, ',');
  for (llvm::StringRef entry : entries) {
    auto [name, value] = entry.trim().split('=');
    int64_t size = 0;
    // The script's integers stop at 2^40 (language.md): --dim
    // A=9223372036854775807 had wrapped a dim derived from it to 4.
    constexpr int64_t kMost = int64_t(1) << 40;
    if (name.trim().empty() || value.trim().getAsInteger(10, size) || size < 1 ||
        size > kMost)
      return mlir::emitError(UnknownLoc::get(&context))
             << flag << " takes " << (mesh ? "AXIS" : "DIM")
             << "=SIZE,... with sizes from 1 to 2^40 (e.g. " << flag << " " << example
             << "), got '" << entry << "'";
    if (!sizes.try_emplace(name.trim(), size).second)
      return mlir::emitError(UnknownLoc::get(&context))
             << flag << " sets " << (mesh ? "axis" : "dim") << " '" << name.trim()
             << "' twice";
  }
  return success();
}

FailureOr<func::FuncOp> Compilation::selectModel() {
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
  std::string names;
  for (func::FuncOp model : models)
    names += (names.empty() ? "" : ", ") + model.getSymName().str();
  return emitError(loc, "the script has ")
         << models.size() << " models (" << names << "); choose one with --model NAME";
}

LogicalResult runDriver(MLIRContext &context, llvm::SourceMgr &sourceMgr,
                        const DriverOptions &options, llvm::raw_ostream &os) {
  return Compilation(context, sourceMgr, options, os).run();
}

} // namespace loom

namespace loom {
std::error_code flushChecked(llvm::raw_fd_ostream &out) {
  out.flush(); // (not close(): stdout's stream must not be closed)
  std::error_code ec = out.error();
  out.clear_error();
  return ec;
}
} // namespace loom
