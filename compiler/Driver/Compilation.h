//===- Compilation.h - The state of one loomc run, stage by stage -*- C++ -*-===//
//
// Private to compiler/Driver: what the rows of the stage table (Driver.cpp)
// read and write as a script is lowered. Each step is one member function;
// the GPU and kernel-report steps live in GpuStages.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_DRIVER_COMPILATION_H
#define LOOM_DRIVER_COMPILATION_H

#include "Backend/CpuTarget.h"
#include "Backend/HostObject.h"
#include "Driver/Driver.h"
#include "Frontend/AST.h"
#include "Pipeline/Pipeline.h"
#include "Plan/PlanBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/Support/Timing.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/StringMap.h"

#include <memory>
#include <optional>

namespace loom {

class Compilation {
public:
  Compilation(mlir::MLIRContext &context, llvm::SourceMgr &sourceMgr,
              const DriverOptions &options, llvm::raw_ostream &os)
      : context(context), sourceMgr(sourceMgr), options(options), os(os) {}
  ~Compilation();

  /// Runs the stage table top to bottom.
  mlir::LogicalResult run();

  // The steps, in the table's order (Driver.cpp).
  mlir::LogicalResult parse();
  mlir::LogicalResult generateLoom();
  /// Warns of --schedule and --microbatches where they change nothing.
  void warnOfIdleOptions();
  mlir::LogicalResult planSchedule();
  mlir::LogicalResult differentiate();
  mlir::LogicalResult partition();
  mlir::LogicalResult outlineKernels();
  /// --explain, --memory-limit, --search-mesh (ExplainStage.cpp).
  mlir::LogicalResult explainPlan();
  mlir::LogicalResult lowerToLinalg();
  mlir::LogicalResult bufferizeKernels();
  /// The GPU options that contradict each other or --gpu-arch, before any
  /// stage runs (they had been said after the whole CPU compile).
  mlir::LogicalResult checkGpuCommandLine();
  mlir::LogicalResult checkGpuOptions();
  mlir::LogicalResult lowerToGpu();
  mlir::LogicalResult lowerToNvvm();
  mlir::LogicalResult emitPtx();
  mlir::LogicalResult buildGpuImage();
  mlir::LogicalResult buildPlans();
  /// A pipelined per-rank program's schedule can be built and verified for
  /// its stages, ranks and microbatches (ScheduleStage.cpp).
  mlir::LogicalResult checkPipelineSchedule(mlir::func::FuncOp spmd);
  mlir::LogicalResult printKernelReport();
  mlir::LogicalResult tileForCpu();
  /// Whether the CPU kernels are compiled (not for --kernel-report).
  bool wantsCpuKernels() const;
  mlir::LogicalResult lowerForCpu();
  /// Starts the host object's code generation in the background.
  mlir::LogicalResult startHostObject();
  mlir::LogicalResult linkExecutable();

  // When a row runs.
  bool wantsGradients() const;
  /// A --gradients build without --train: the whole batch differentiated
  /// at once, whatever the train section's microbatches.
  bool gradientsOnly() const { return options.gradients && !options.train; }
  /// Why a --gradients build cannot run schedule `kindName`, appended to
  /// the schedule's error (empty where it can).
  std::string gradientsNote(llvm::StringRef kindName, llvm::StringRef axis,
                            unsigned stages, unsigned ranks) const;
  bool wantsSchedule() const {
    return options.emit == Stage::Schedule || !options.scheduleSvg.empty();
  }
  bool wantsGpu() const;
  /// --gpu-arch's number: 90 for sm_90a.
  unsigned gpuSmVersion() const;
  /// Which attention loom-fuse-attention forms (--fuse-attention): any in
  /// CPU builds; in GPU builds what the GPU kernels run (with gradients,
  /// the backward's too).
  AttentionFusion fusesAttention() const;
  bool wantsPlans() const;
  bool wantsReport() const { return report.has_value(); }
  /// Whether the run ends in an executable (no --emit, no report).
  bool wantsExecutable() const { return !options.emit && !options.kernelReport; }
  bool wantsExplain() const {
    return options.explain || options.memoryLimit || options.probe ||
           options.searchMesh || !options.meshSvg.empty();
  }

  /// The iterations of the loops loopLimit cut (ElaborationOptions).
  int64_t loopTripCount = 0;

  /// The explain report, once explainPlan ran.
  const std::optional<ExplainReport> &explainReport() const { return explained; }

  // How a stage prints.
  void printAST(llvm::raw_ostream &out);
  void printModule(llvm::raw_ostream &out);
  void printGpuModule(llvm::raw_ostream &out);
  void printPtx(llvm::raw_ostream &out) { out << ptx; }
  void printPlans(llvm::raw_ostream &out);
  void printSchedule(llvm::raw_ostream &out);

  /// Prints (and dumps) `stage`; true when it is the --emit stage.
  bool reached(Stage stage, void (Compilation::*print)(llvm::raw_ostream &));

  /// Set by a step after which nothing more is to be done (the report).
  bool finished = false;

  /// What a rank of the built plan allocates (its arena and, pipelined,
  /// its microbatches' activation slots), as --memory-limit checks it; 0
  /// before the plan stage.
  int64_t allocatedBytes = 0;

private:
  mlir::LogicalResult runPipeline(void (*build)(mlir::OpPassManager &));
  mlir::LogicalResult
  runPipeline(mlir::ModuleOp target,
              llvm::function_ref<void(mlir::OpPassManager &)> build);
  mlir::FailureOr<KernelReport> makeKernelReport();
  mlir::FailureOr<const DeviceSpec *> gpuDevice();
  /// --cpu resolved once (the tiling and code generation both need it).
  mlir::FailureOr<const CpuTarget *> cpuTarget();
  /// "NAME=SIZE,..." of `flag` (--mesh, --dim) into `sizes`, sizes >= 1.
  mlir::LogicalResult parseSizes(llvm::StringRef text, llvm::StringRef flag,
                                 llvm::StringRef example,
                                 llvm::StringMap<int64_t> &sizes);
  mlir::FailureOr<mlir::func::FuncOp> selectModel();
  mlir::FailureOr<ExplainReport> makeExplainReport();
  mlir::LogicalResult checkMemoryLimit(const ExplainReport &report);
  mlir::LogicalResult searchMeshes();
  /// The passes whose IR --print-ir-after could name (those that ran).
  llvm::SetVector<llvm::StringRef> passesRun;
  bool printedAfter = false;
  std::optional<mlir::DefaultTimingManager> timingManager;
  mlir::TimingScope timingRoot;
  mlir::TimingScope *timingStep = nullptr;
  /// The step running now, and the pipelines --dump-after-each-pass wrote.
  const char *stepName = "";
  unsigned passDumps = 0;
  /// Whether the run ends in an executable (or prints its plan).
  bool executable() const {
    return !options.emit || *options.emit >= Stage::Plan;
  }

  mlir::MLIRContext &context;
  llvm::SourceMgr &sourceMgr;
  /// A copy: --explain turns on --train for a model with a train section.
  DriverOptions options;
  llvm::raw_ostream &os;
  unsigned dumped = 0;

  std::unique_ptr<Module> ast;
  /// The script's IR; from bufferization on, only its kernels.
  mlir::OwningOpRef<mlir::ModuleOp> module;
  /// The model functions at the linalg stage, which become the plans.
  mlir::OwningOpRef<mlir::ModuleOp> models;
  /// Per kernel, the scratch arguments past its inputs and results.
  llvm::StringMap<llvm::SmallVector<mlir::ShapedType>> scratch;

  // The GPU stages work on copies of the bufferized kernels.
  mlir::OwningOpRef<mlir::ModuleOp> gpuModule;
  GpuTarget gpuTarget;
  llvm::StringMap<std::vector<GpuLaunch>> launches;
  /// Per attention forward kernel, its values' argument (GpuCode::termsArgs).
  llvm::StringMap<unsigned> termsArgs;
  std::string ptx;
  std::optional<GpuCode> gpuCode;
  std::optional<KernelReport> report;
  std::optional<ExplainReport> explained;

  std::optional<CpuTarget> cpu;
  /// The host objects, compiled in the background from the llvm stage on
  /// (after `module`, so that they are joined before the module goes).
  HostObjectJob hostObject;

  std::optional<Plan> plan, spmdPlan;
  /// The pipeline schedule's text and its summary (ScheduleStage.cpp).
  std::string schedule;
  mlir::func::FuncOp planned, spmd;
};

/// The per-rank program of `model`, if it has one.
mlir::func::FuncOp spmdProgramOf(mlir::ModuleOp module, mlir::func::FuncOp model);

} // namespace loom

#endif // LOOM_DRIVER_COMPILATION_H
