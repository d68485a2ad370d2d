//===- loomc.cpp - The Loom compiler driver ------------------------------===//
//
// `loomc model.loom -o model` builds an executable; `--emit=STAGE` prints
// one stage instead. Stages are ordered: each lowers further than the one
// before it (ast, loom, kernels, linalg, tiled, llvm; gpu, nvvm, ptx; plan).
//
//===----------------------------------------------------------------------===//

#include "Driver/Driver.h"
#include "Driver/SourceCarets.h"
#include "Pipeline/Pipeline.h"
#include "loom/runtime/Version.h"
#include "loom/runtime/plan/Plan.h"
#include "loom/runtime/plan/Schedule.h"

#include "mlir/IR/AsmState.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/ToolUtilities.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSet.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/thread.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Process.h"
#include "llvm/Support/ToolOutputFile.h"

#include <cctype>
#include <cmath>

using namespace llvm;
using loom::Stage;

namespace {
cl::OptionCategory loomCategory("Loom options");

cl::opt<std::string> inputFile(cl::Positional, cl::desc("<model.loom>"),
                               cl::Required, cl::cat(loomCategory));
cl::opt<std::string> outputFile(
    "o", cl::desc("The executable (default a.out), or where --emit prints "
                  "(default stdout)"),
    cl::value_desc("file"), cl::cat(loomCategory));
cl::opt<Stage> emitStage(
    "emit", cl::desc("Print this stage instead of building an executable"),
    cl::values(
        clEnumValN(Stage::AST, "ast", "the syntax tree"),
        clEnumValN(Stage::Loom, "loom", "the checked model in the loom dialect"),
        clEnumValN(Stage::Schedule, "schedule",
                   "a pipelined model's schedule: each pp rank's steps, verified"),
        clEnumValN(Stage::Autodiff, "autodiff",
                   "a trained model with the gradients of its loss (as --gradients)"),
        clEnumValN(Stage::Partitioned, "partitioned",
                   "and each model's per-rank program with its collectives"),
        clEnumValN(Stage::Kernels, "kernels",
                   "the single-rank model as calls to outlined kernels"),
        clEnumValN(Stage::Linalg, "linalg",
                   "kernels on linalg/tensor, elementwise ops fused"),
        clEnumValN(Stage::Tiled, "tiled",
                   "CPU kernels on buffers: matmuls in vectorized register tiles"),
        clEnumValN(Stage::LLVM, "llvm",
                   "CPU kernels in the LLVM dialect (bare-pointer ABI)"),
        clEnumValN(Stage::GPU, "gpu",
                   "GPU kernels: blocks, threads, shared-memory tiles"),
        clEnumValN(Stage::NVVM, "nvvm", "GPU kernels in the NVVM dialect"),
        clEnumValN(Stage::PTX, "ptx", "GPU kernels as PTX for --gpu-arch"),
        clEnumValN(Stage::Plan, "plan",
                   "the runtime plan: buffers, arena offsets, steps")),
    cl::cat(loomCategory));
cl::opt<std::string> dumpDir(
    "dump-dir", cl::desc("Write every stage reached to numbered files in DIR"),
    cl::value_desc("dir"), cl::cat(loomCategory));
cl::opt<std::string> modelName(
    "model", cl::desc("The model to build when the script has several"),
    cl::value_desc("name"), cl::cat(loomCategory));
cl::opt<std::string> gpuArch(
    "gpu-arch", cl::desc("NVIDIA architecture of the GPU stages: sm_50 to "
                         "sm_90a (tensor cores from sm_80, wgmma and TMA on "
                         "sm_90a; default sm_90a)"),
    cl::init("sm_90a"), cl::value_desc("sm_50..sm_90a"),
    cl::cat(loomCategory));
cl::opt<std::string> cpu(
    "cpu", cl::desc("CPU the executable's kernels are compiled for: native "
                    "(this machine, the default) or an LLVM CPU name such as "
                    "x86-64-v3 for executables that run elsewhere"),
    cl::init("native"), cl::value_desc("name"), cl::cat(loomCategory));
cl::opt<std::string> bf16Matmul(
    "bf16-matmul",
    cl::desc("How bf16 matmuls run on the CPU: auto (AMX tiles on a CPU with "
             "amx-bf16, where Linux grants the tile state; avx512_bf16 dot "
             "products on AMD Zen, where they outrun the FMA tiles; elsewhere "
             "the FMA tiles on operands widened to f32), dot, fma, amx (AMX "
             "tiles, on a CPU with amx-bf16) or amx-emulated (the AMX kernels "
             "with their tiles emulated in vector code, for tests)"),
    cl::init("auto"), cl::value_desc("auto|dot|fma|amx|amx-emulated"), cl::cat(loomCategory));
cl::opt<bool> embedGpu(
    "gpu", cl::desc("Also compile the kernels for --gpu-arch into the "
                    "executable (run with --device cuda)"),
    cl::init(false), cl::cat(loomCategory));
/// The forms of the reports (--kernel-report, --explain): `--NAME` alone
/// is text, or --format's.
enum class ReportForm { Unnamed, Text, Json };
auto reportFormats() {
  return cl::values(
      clEnumValN(ReportForm::Unnamed, "", "as text (the default), or as --format says"),
      clEnumValN(ReportForm::Text, "text", "as text"),
      clEnumValN(ReportForm::Json, "json", "as JSON"));
}
cl::opt<ReportForm> kernelReport(
    "kernel-report",
    cl::desc("Print what each GPU launch costs on --gpu-device (grid, "
             "registers, occupancy, FLOPs, bytes, roofline time) instead of "
             "building an executable"),
    cl::ValueOptional,
    reportFormats(),
    cl::cat(loomCategory));
cl::opt<std::string> gpuDevice(
    "gpu-device",
    cl::desc("The GPU --kernel-report and --explain model: a100, a10, l4, "
             "h100 or h200 (default h200)"),
    cl::init("h200"), cl::value_desc("name"), cl::cat(loomCategory));
cl::opt<int64_t> gpuSharedLimit(
    "gpu-shared-limit",
    cl::desc("Shared memory one block of a tensor-core matmul may use, "
             "within the --gpu-arch's limit (0: that limit); by default "
             "49152 on mma.sync alone (static shared memory, measured "
             "fastest on an H200), the limit where wgmma is used"),
    cl::value_desc("bytes"), cl::cat(loomCategory));
cl::opt<loom::GpuMma> gpuMma(
    "gpu-mma",
    cl::desc("The tensor-core instructions of bf16/f16 matmuls on the GPU"),
    cl::values(clEnumValN(loom::GpuMma::Auto, "auto",
                          "wgmma on sm_90a, mma.sync elsewhere (the default)"),
               clEnumValN(loom::GpuMma::MmaSync, "mma.sync",
                          "warp-level mma.sync fed by cp.async (sm_80 and "
                          "later)"),
               clEnumValN(loom::GpuMma::Wgmma, "wgmma",
                          "warpgroup wgmma fed by TMA (sm_90a; matmuls a "
                          "tensor map cannot read stay on mma.sync)"),
               clEnumValN(loom::GpuMma::WgmmaPersistent, "wgmma-persistent",
                          "wgmma in persistent warp-specialized kernels: a "
                          "block per SM loops over tiles, a producer "
                          "warpgroup issues the TMA loads (sm_90a)"),
               clEnumValN(loom::GpuMma::WgmmaPingpong, "wgmma-pingpong",
                          "as wgmma-persistent, the two consumer warpgroups "
                          "taking 128 x 128 tiles and the tensor cores by "
                          "turns, one's write-back under the other's wgmmas "
                          "(sm_90a; not yet measured on a GPU)")),
    cl::init(loom::GpuMma::Auto), cl::cat(loomCategory));
cl::opt<bool> gpuTmaStore(
    "gpu-tma-store",
    cl::desc("wgmma matmuls (sm_90a) write their 16-bit results back "
             "through shared memory by TMA stores, 64 x 64 boxes at a time, "
             "instead of each thread's global stores (not yet measured on a "
             "GPU: off by default)"),
    cl::init(false), cl::cat(loomCategory));
cl::opt<bool> gpuTmaMulticast(
    "gpu-tma-multicast",
    cl::desc("With --gpu-mma=wgmma-persistent: clusters of two blocks whose "
             "output tiles share B's columns, each copying half of B's "
             "tiles into both by TMA multicast (not yet measured on a GPU: "
             "off by default)"),
    cl::init(false), cl::cat(loomCategory));
cl::opt<loom::GpuAttention> gpuAttention(
    "gpu-attention",
    cl::desc("The tensor-core instructions of the attention kernels on the GPU"),
    cl::values(clEnumValN(loom::GpuAttention::Auto, "auto",
                          "wgmma on sm_90a, mma.sync elsewhere (the default)"),
               clEnumValN(loom::GpuAttention::MmaSync, "mma.sync",
                          "warp-level FlashAttention-2 kernels (sm_80 and later)"),
               clEnumValN(loom::GpuAttention::Wgmma, "wgmma",
                          "forward and backward on wgmma fed by TMA where "
                          "their shapes allow (sm_90a)")),
    cl::init(loom::GpuAttention::Auto), cl::cat(loomCategory));
cl::opt<std::string> schedule(
    "schedule",
    cl::desc("The pipeline schedule, instead of the train section's: gpipe, "
             "1f1b, interleaved or zero_bubble"),
    cl::value_desc("kind"), cl::cat(loomCategory));
cl::opt<std::string> scheduleSvg(
    "schedule-svg",
    cl::desc("Draw the pipeline schedule's timeline (uniform stage costs) as an SVG"),
    cl::value_desc("file"), cl::cat(loomCategory));
enum class Recompute { None, Layers };
cl::opt<Recompute> recompute(
    "recompute",
    cl::desc("Which activations the backward recomputes instead of keeping "
             "(besides the layer instances marked 'recompute' in the script)"),
    cl::values(clEnumValN(Recompute::None, "none", "only the marked ones (the default)"),
               clEnumValN(Recompute::Layers, "layers",
                          "every layer instance's; each keeps its input")),
    cl::init(Recompute::None), cl::cat(loomCategory));
// Lists: `--dim B=1 --dim V=64` is `--dim B=1,V=64` (a second --dim had
// replaced the first).
cl::list<std::string> meshSizes(
    "mesh", cl::desc("Replace the script's mesh axis sizes, e.g. dp=2,tp=4 "
                     "(size 1 turns an axis off)"),
    cl::value_desc("axis=size,..."), cl::cat(loomCategory));
cl::list<std::string> dimSizes(
    "dim", cl::desc("Replace the values of the script's top-level dims, "
                    "e.g. B=1,T=128 (a batch of one for generate, another sequence length)"),
    cl::value_desc("dim=size,..."), cl::cat(loomCategory));
enum class Remarks { Collectives };
cl::list<Remarks> remarks(
    "remarks", cl::desc("Report what the compiler decided, as remarks at "
                        "script locations"),
    cl::values(clEnumValN(Remarks::Collectives, "collectives",
                          "every collective the partitioner inserts: its "
                          "kind, mesh axes and bytes per rank")),
    cl::CommaSeparated, cl::cat(loomCategory));
cl::opt<bool> gradients(
    "gradients",
    cl::desc("Build the gradient program of the model's train section: the "
             "executable also outputs grad.<param>, the loss's gradient for "
             "every param"),
    cl::init(false), cl::cat(loomCategory));
cl::opt<bool> train(
    "train",
    cl::desc("Build a training step of the model's train section (the "
             "gradients, then the optimizer's update): run it with "
             "./model train --steps N"),
    cl::init(false), cl::cat(loomCategory));
cl::opt<double> gradBucketMb(
    "grad-bucket-mb",
    cl::desc("With --gradients or --train: sum the data-parallel gradients in buckets "
             "of at most this many MiB, one all-reduce each, in the order "
             "the backward produces them (default 25; 0: one all-reduce per gradient)"),
    cl::init(25.0), cl::value_desc("MiB"), cl::cat(loomCategory));
cl::opt<bool> fuseAttention(
    "fuse-attention",
    cl::desc("Compile softmax(causal_mask(q @ transpose(k) * s)) @ v as one "
             "attention kernel that never holds the [queries, keys] scores "
             "(the default; GPU builds: 16-bit attention the GPU kernels "
             "run). =false keeps the five ops"),
    cl::init(true), cl::cat(loomCategory));
cl::opt<bool> sequenceParallel(
    "sequence-parallel",
    cl::desc("Sequence parallelism: split the residual stream along the "
             "sequence over the axis of the row-parallel matmuls "
             "(reduce-scatter and all-gather instead of all-reduce)"),
    cl::init(false), cl::cat(loomCategory));
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
cl::opt<ReportForm> explain(
    "explain",
    cl::desc("Print what the plan needs and costs on --gpu-device instead of "
             "building anything: the mesh, memory per rank, collectives per "
             "step, the pipeline's bubble and a modelled step time and MFU "
             "(docs/explain.md)"),
    cl::ValueOptional,
    reportFormats(),
    cl::cat(loomCategory));
cl::opt<ReportForm> outputFormat(
    "format", cl::desc("The form of --explain, --kernel-report and --search-mesh"),
    cl::values(clEnumValN(ReportForm::Text, "text", "as text"),
               clEnumValN(ReportForm::Json, "json", "as JSON")),
    cl::cat(loomCategory));
cl::opt<std::string> memoryLimit(
    "memory-limit",
    cl::desc("A plan needing more bytes on some rank is an error naming the "
             "rank, its largest tensors and a change that fits (with "
             "--explain the default is --gpu-device's memory); K, M, G and T "
             "suffixes are powers of 1024"),
    cl::value_desc("bytes"), cl::cat(loomCategory));
cl::opt<int64_t> searchMesh(
    "search-mesh",
    cl::desc("Rank the meshes of N devices (every factorization into the "
             "script's axes, with recomputation and microbatches as knobs) "
             "by modelled step time under the memory limit"),
    cl::value_desc("N"), cl::init(0), cl::cat(loomCategory));
cl::opt<std::string> meshSvg(
    "mesh-svg",
    cl::desc("Draw the mesh (a box per rank, colored by pipeline stage) and "
             "each param's split into FILE, an SVG"),
    cl::value_desc("file"), cl::cat(loomCategory));
cl::opt<double> intraNodeBw(
    "intra-node-bw",
    cl::desc("Explain's bandwidth between the GPUs of a node, per GPU and "
             "direction (default: --gpu-device's NVLink)"),
    cl::value_desc("GB/s"), cl::cat(loomCategory));
cl::opt<double> interNodeBw(
    "inter-node-bw",
    cl::desc("Explain's bandwidth between nodes, per GPU and direction "
             "(default: --gpu-device's InfiniBand HCA)"),
    cl::value_desc("GB/s"), cl::cat(loomCategory));
cl::opt<double> intraNodeLatency(
    "intra-node-latency", cl::desc("Explain's latency of one hop in a node"),
    cl::init(2), cl::value_desc("us"), cl::cat(loomCategory));
cl::opt<double> interNodeLatency(
    "inter-node-latency", cl::desc("Explain's latency of one hop between nodes"),
    cl::init(5), cl::value_desc("us"), cl::cat(loomCategory));
cl::opt<int64_t> gpusPerNode(
    "gpus-per-node", cl::desc("Consecutive ranks share a node, this many"),
    cl::init(8), cl::value_desc("n"), cl::cat(loomCategory));
cl::opt<bool> zero(
    "zero", cl::desc("ZeRO-1 (the optimizer state split over the "
                     "data-parallel axes), whatever the train section says"),
    cl::init(false), cl::cat(loomCategory));
cl::opt<int64_t> microbatches(
    "microbatches", cl::desc("The train section's microbatches replaced; a forward of a pipelined model runs this many through its stages"),
    cl::value_desc("n"), cl::cat(loomCategory));
cl::opt<bool> timing(
    "timing", cl::desc("Print the time of every stage and pass (MLIR's "
                       "pass timing) to stderr"),
    cl::init(false), cl::cat(loomCategory));
cl::opt<bool> progress(
    "progress", cl::desc("Say each stage as it starts, with the seconds so far, once "
                         "the build has run 2 s (the default on a terminal; "
                         "--progress=false never, --progress always from the start)"),
    cl::cat(loomCategory));
cl::opt<std::string> printIrAfter(
    "print-ir-after",
    cl::desc("Print the IR after every run of the pass PASS (its "
             "command-line name, e.g. loom-partition) to stderr"),
    cl::value_desc("pass"), cl::cat(loomCategory));
cl::opt<bool> dumpAfterEachPass(
    "dump-after-each-pass",
    cl::desc("With --dump-dir: also write the IR after every pass that "
             "changes it, as numbered files under DIR/passes"),
    cl::init(false), cl::cat(loomCategory));

/// Options the build given would not read are said, not ignored (as
/// --schedule and --microbatches are by the driver, which knows the model).
void warnIdleOptions() {
  auto idle = [](const cl::Option &option, StringRef why) {
    if (option.getNumOccurrences())
      errs() << "loomc: warning: --" << option.ArgStr << " has no effect: " << why << "\n";
  };
  // --explain and --search-mesh explain a train section's step.
  bool trains = train || explain.getNumOccurrences() || searchMesh.getNumOccurrences();
  if (!trains)
    idle(zero, "ZeRO-1 splits the optimizer state of a --train build");
  if (!trains && !gradients) {
    idle(gradBucketMb, "gradient buckets group a --train or --gradients build's sums");
    if (recompute == Recompute::Layers)
      idle(recompute, "a forward build keeps no activations for a backward");
  }
  // The GPU options shape GPU kernels, which only --gpu, --kernel-report
  // and the GPU stages build; --gpu-device also prices --explain.
  bool explains = explain.getNumOccurrences() || searchMesh.getNumOccurrences();
  bool buildsGpu = embedGpu || kernelReport.getNumOccurrences() ||
                   (emitStage.getNumOccurrences() && emitStage >= Stage::GPU &&
                    emitStage <= Stage::PTX);
  if (!buildsGpu) {
    for (const cl::Option *kernels : std::initializer_list<const cl::Option *>{
             &gpuArch, &gpuMma, &gpuAttention, &gpuSharedLimit, &gpuTmaStore,
             &gpuTmaMulticast})
      idle(*kernels, "it shapes GPU kernels, which --gpu, --kernel-report and "
                     "--emit=gpu|nvvm|ptx build");
    if (!explains)
      idle(gpuDevice, "the GPU it names sizes GPU kernels and prices "
                      "--kernel-report and --explain");
  }
  if (!explains)
    for (const cl::Option *network :
         std::initializer_list<const cl::Option *>{&intraNodeBw, &interNodeBw, &intraNodeLatency,
                                                   &interNodeLatency, &gpusPerNode})
      idle(*network, "the network model prices --explain and --search-mesh");
}

/// "80G", "1.5T", "123456": bytes, the suffixes powers of 1024; `tooLarge`
/// says a number past what int64 counts.
std::optional<int64_t> parseBytes(StringRef text, bool &tooLarge) {
  double scale = 1;
  if (!text.empty()) {
    char unit = static_cast<char>(std::toupper(text.back()));
    size_t power = StringRef("KMGT").find(unit);
    if (power != StringRef::npos) {
      scale = static_cast<double>(1ll << (10 * (power + 1)));
      text = text.drop_back();
    }
  }
  // strtod, which must read every character: StringRef::getAsDouble read
  // "16E" (exabytes?) and "3e" as 16 and 3 bytes.
  std::string digits = text.str();
  char *end = nullptr;
  double value = digits.empty() || std::isspace(static_cast<unsigned char>(digits[0]))
                     ? 0
                     : std::strtod(digits.c_str(), &end);
  // NaN (failing value > 0), inf and what rounds to no byte or past int64
  // are no limit (nan had become -2^63 bytes, 0.5 became 0, which turned
  // the limit off).
  if (!end || *end != '\0' || !(value > 0) || value * scale < 1)
    return std::nullopt;
  // 2^63, exactly a double: below it every value fits int64 (9.2e18 had
  // refused 8388607T, which does).
  if (value * scale >= 9223372036854775808.0) {
    tooLarge = std::isfinite(value);
    return std::nullopt;
  }
  return static_cast<int64_t>(value * scale);
}

/// "loomc: error: MESSAGE" (or warning, note) for a diagnostic without a
/// source location, then its notes the same way.
void printUnlocatedDiagnostic(mlir::Diagnostic &diag) {
  auto severity = [](mlir::DiagnosticSeverity kind) {
    switch (kind) {
    case mlir::DiagnosticSeverity::Error:
      return "error";
    case mlir::DiagnosticSeverity::Warning:
      return "warning";
    case mlir::DiagnosticSeverity::Remark:
      return "remark";
    case mlir::DiagnosticSeverity::Note:
      return "note";
    }
    return "error";
  };
  errs() << "loomc: " << severity(diag.getSeverity()) << ": " << diag.str() << "\n";
  for (mlir::Diagnostic &note : diag.getNotes())
    errs() << "loomc: note: " << note.str() << "\n";
}
/// Whether the command line gave MLIR's --mlir-print-op-on-diagnostic.
bool printOpOnDiagnosticGiven() {
  auto &options = cl::getRegisteredOptions();
  auto found = options.find("mlir-print-op-on-diagnostic");
  return found != options.end() && found->second->getNumOccurrences() > 0;
}
} // namespace

static int loomcMain(int argc, char **argv);

/// Whether an option that takes a value was given an empty one
/// (`--grad-bucket-mb=`, `-o ''`): LLVM's parsers read an empty number as
/// 0 and an empty string as unset, so a build script's unset $VAR changed
/// the build without a word (27 all-reduces instead of 2). Said here.
static bool rejectEmptyValues(int argc, char **argv) {
  auto &registered = cl::getRegisteredOptions();
  for (int i = 1; i < argc; ++i) {
    StringRef arg = argv[i];
    if (arg == "--")
      break;
    if (!arg.starts_with("-") || arg == "-")
      continue;
    auto [name, value] = arg.ltrim('-').split('=');
    auto found = registered.find(name);
    if (found == registered.end())
      continue;
    cl::Option *option = found->second;
    bool attached = arg.contains('=');
    bool empty = attached ? value.empty()
                          : option->getValueExpectedFlag() == cl::ValueRequired &&
                                i + 1 < argc && StringRef(argv[i + 1]).empty();
    if (empty && option->getValueExpectedFlag() != cl::ValueOptional &&
        option->getValueExpectedFlag() != cl::ValueDisallowed) {
      errs() << "loomc: error: " << (name.size() == 1 ? "-" : "--") << name
             << " was given an empty value\n";
      return true;
    }
  }
  return false;
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  // The elaborator recurses through layer calls and expressions: scripts
  // within the language's limits (200 nested calls, each of a statement of
  // 1000 operators) went past the default 8 MiB stack and loomc died of
  // SIGSEGV. The compiler runs on a thread with 1 GiB of stack, reserved
  // rather than used.
  int status = 1;
  llvm::thread compiler(std::optional<unsigned>(1u << 30),
                        [&] { status = loomcMain(argc, argv); });
  compiler.join();
  return status;
}

static int loomcMain(int argc, char **argv) {
  mlir::registerAsmPrinterCLOptions();
  mlir::registerMLIRContextCLOptions();
  mlir::registerPassManagerCLOptions();
  cl::HideUnrelatedOptions(loomCategory);
  cl::SetVersionPrinter([](raw_ostream &os) {
    os << "loomc (Loom) " << loom::kLoomVersion << ", plan format "
       << loom::runtime::kPlanVersion << ", on LLVM and MLIR " << LLVM_VERSION_STRING
       << "\n";
  });
  if (rejectEmptyValues(argc, argv))
    return 1;
  cl::ParseCommandLineOptions(argc, argv,
                              "loomc: compiles Loom model scripts\n");

  ErrorOr<std::unique_ptr<MemoryBuffer>> file =
      MemoryBuffer::getFileOrSTDIN(inputFile, /*IsText=*/true);
  if (std::error_code ec = file.getError()) {
    errs() << "loomc: error: cannot read '" << inputFile << "': "
           << ec.message() << "\n";
    return 1;
  }

  loom::DriverOptions options;
  if (emitStage.getNumOccurrences())
    options.emit = emitStage;
  options.dumpDir = dumpDir;
  options.model = modelName;
  options.gpuArch = gpuArch;
  options.embedGpu = embedGpu;
  options.cpu = cpu;
  options.bf16Matmul = bf16Matmul;
  options.mesh = llvm::join(meshSizes, ",");
  options.dims = llvm::join(dimSizes, ",");
  options.remarkCollectives = llvm::is_contained(remarks, Remarks::Collectives);
  options.sequenceParallel = sequenceParallel;
  options.fuseAttention = fuseAttention;
  options.recomputeLayers = recompute == Recompute::Layers;
  // A misspelt kind was only caught where a pipelined model used it.
  loom::runtime::ScheduleKind scheduleKind;
  if (!schedule.empty() && !loom::runtime::parseScheduleKind(schedule, scheduleKind)) {
    errs() << "loomc: error: unknown --schedule '" << schedule
           << "' (expected gpipe, 1f1b, interleaved or zero_bubble)\n";
    return 1;
  }
  options.schedule = schedule;
  options.scheduleSvg = scheduleSvg;
  options.gradients = gradients;
  options.train = train;
  // Negative or NaN had silently meant 0 (one all-reduce a gradient).
  if (!(gradBucketMb >= 0) || !std::isfinite(gradBucketMb)) {
    errs() << "loomc: error: --grad-bucket-mb=" << format("%g", double(gradBucketMb))
           << ": expected a size in MiB >= 0 (0: one all-reduce per gradient)\n";
    return 1;
  }
  options.gradBucketMb = gradBucketMb;
  // A report's form: --format's, or the one its own option names (the
  // two disagreeing is an error: --format had won silently).
  auto formOf = [](const cl::opt<ReportForm> &report) -> std::optional<ReportForm> {
    if (!outputFormat.getNumOccurrences())
      return report.getValue();
    if (report != ReportForm::Unnamed && report != outputFormat) {
      errs() << "loomc: error: --" << report.ArgStr << "="
             << (report == ReportForm::Json ? "json" : "text") << " and --format="
             << (outputFormat == ReportForm::Json ? "json" : "text") << " disagree\n";
      return std::nullopt;
    }
    return outputFormat.getValue();
  };
  auto reportFormat = [](ReportForm form) {
    return form == ReportForm::Json ? loom::KernelReportFormat::Json
                                    : loom::KernelReportFormat::Text;
  };
  // --format formats three reports: alone, or with --emit, it was
  // silently ignored.
  if (outputFormat.getNumOccurrences() && !kernelReport.getNumOccurrences() &&
      !explain.getNumOccurrences() && !searchMesh.getNumOccurrences()) {
    errs() << "loomc: error: --format formats --explain, --kernel-report and "
              "--search-mesh: give one of them\n";
    return 1;
  }
  for (auto [report, into] : {std::pair(&kernelReport, &options.kernelReport),
                              std::pair(&explain, &options.explain)}) {
    if (!report->getNumOccurrences())
      continue;
    std::optional<ReportForm> form = formOf(*report);
    if (!form)
      return 1;
    *into = reportFormat(*form);
  }
  options.gpuDevice = gpuDevice;
  if (gpuSharedLimit.getNumOccurrences())
    options.gpuSharedLimit = gpuSharedLimit;
  options.gpuMma = gpuMma;
  options.gpuTmaStore = gpuTmaStore;
  options.gpuTmaMulticast = gpuTmaMulticast;
  options.gpuAttention = gpuAttention;
  // --search-mesh's table is JSON with --format=json or --explain=json.
  if (searchMesh.getNumOccurrences() && !explain.getNumOccurrences() &&
      outputFormat.getNumOccurrences())
    options.searchJson = outputFormat == ReportForm::Json;
  else if (options.explain)
    options.searchJson = *options.explain == loom::KernelReportFormat::Json;
  // Given, even empty (`--memory-limit=` had meant no limit, silently).
  if (memoryLimit.getNumOccurrences()) {
    bool tooLarge = false;
    options.memoryLimit = parseBytes(memoryLimit, tooLarge);
    if (!options.memoryLimit) {
      errs() << "loomc: error: --memory-limit=" << memoryLimit
             << (tooLarge ? ": more bytes than a limit can be (under 2^63, "
                            "8388608T)\n"
                          : ": expected a positive number of bytes, e.g. 80G\n");
      return 1;
    }
  }
  options.searchMesh = searchMesh;
  if (searchMesh.getNumOccurrences() && searchMesh < 1) {
    errs() << "loomc: error: --search-mesh needs a number of devices >= 1\n";
    return 1;
  }
  // Each mesh of the search is compiled: a million devices has meshes
  // enough (10^12 had hung in the divisors' search).
  if (searchMesh > (int64_t(1) << 20)) {
    errs() << "loomc: error: --search-mesh takes at most 1048576 devices, got "
           << searchMesh << "\n";
    return 1;
  }
  if (intraNodeBw.getNumOccurrences())
    options.intraNodeGBs = intraNodeBw;
  if (interNodeBw.getNumOccurrences())
    options.interNodeGBs = interNodeBw;
  // NaN fails these too (it priced every collective at nan us and the
  // step at 0), and inf, which means nothing here. Each names its option
  // and value.
  auto refuseLink = [](const cl::opt<double> &option, bool positive) {
    double v = option;
    if (std::isfinite(v) && (positive ? v > 0 : v >= 0))
      return false;
    errs() << "loomc: error: --" << option.ArgStr << "=" << format("%g", v) << ": expected "
           << (positive ? "a positive" : "a non-negative") << " finite number\n";
    return true;
  };
  if ((intraNodeBw.getNumOccurrences() && refuseLink(intraNodeBw, true)) ||
      (interNodeBw.getNumOccurrences() && refuseLink(interNodeBw, true)) ||
      refuseLink(intraNodeLatency, false) || refuseLink(interNodeLatency, false))
    return 1;
  if (gpusPerNode < 1) {
    errs() << "loomc: error: --gpus-per-node=" << gpusPerNode << ": expected 1 or more\n";
    return 1;
  }
  options.intraNodeLatencyUs = intraNodeLatency;
  options.interNodeLatencyUs = interNodeLatency;
  options.gpusPerNode = gpusPerNode;
  options.zero = zero;
  if (microbatches.getNumOccurrences()) {
    if (microbatches < 1) {
      errs() << "loomc: error: --microbatches needs a number >= 1\n";
      return 1;
    }
    if (microbatches > 1 && gradients && !train) {
      errs() << "loomc: error: --microbatches splits a training step "
                "(--train) or a pipelined forward; a --gradients build "
                "differentiates the whole batch at once\n";
      return 1;
    }
    options.microbatches = microbatches;
  }
  options.meshSvg = meshSvg;
  options.timing = timing;
  // Unset: on a terminal, once the build is long; given: always or never.
  options.progress = progress.getNumOccurrences()
                         ? (progress ? loom::ProgressLines::Always : loom::ProgressLines::Never)
                         : (errs().is_displayed() ? loom::ProgressLines::Long : loom::ProgressLines::Never);
  warnIdleOptions();
  options.printIrAfter = printIrAfter;
  options.dumpAfterEachPass = dumpAfterEachPass;
  // A stage or a report is printed; otherwise an executable is linked.
  bool prints = options.emit || options.kernelReport || options.explain ||
                options.searchMesh;
  if (!prints) {
    options.output = outputFile.empty() ? std::string("a.out") : outputFile.getValue();
    // Said now, not by the linker after the whole compile.
    SmallString<128> parent(options.output);
    sys::path::remove_filename(parent);
    bool isDirectory = sys::fs::is_directory(options.output);
    if (isDirectory || (!parent.empty() && !sys::fs::is_directory(parent))) {
      errs() << "loomc: error: cannot write the executable '" << options.output << "': "
             << (isDirectory ? "it is a directory" : "no directory '" + parent.str().str() + "'")
             << "\n";
      return 1;
    }
  }

  // A file loomc writes naming the script would truncate it before it is
  // read (loomc --emit=loom s.loom -o s.loom deleted a script with an
  // error); two naming one file would leave only the last.
  auto same = [](StringRef a, StringRef b) {
    bool sameFile = false;
    return a == b || (!sys::fs::equivalent(a, b, sameFile) && sameFile);
  };
  std::pair<StringRef, StringRef> written[] = {
      {"-o", outputFile}, {"--mesh-svg", meshSvg}, {"--schedule-svg", scheduleSvg}};
  for (auto [i, file] : llvm::enumerate(written)) {
    if (file.second.empty() || file.second == "-")
      continue;
    if (inputFile != "-" && same(inputFile, file.second)) {
      errs() << "loomc: error: " << file.first << " '" << file.second
             << "' is the script itself\n";
      return 1;
    }
    for (const auto &earlier : ArrayRef(written).take_front(i))
      if (!earlier.second.empty() && same(earlier.second, file.second)) {
        errs() << "loomc: error: " << earlier.first << " and " << file.first
               << " both name '" << file.second << "'\n";
        return 1;
      }
    // The dump's own names (NN-stage files, passes/, chunk-N/) in
    // --dump-dir: the dump had silently overwritten the -o file.
    SmallString<128> parent(file.second);
    sys::path::remove_filename(parent);
    StringRef name = sys::path::filename(file.second);
    bool dumpName = name == "passes" || name.starts_with("chunk-") ||
                    (name.size() > 3 && isDigit(name[0]) && isDigit(name[1]) && name[2] == '-');
    if (!dumpDir.empty() && dumpName && same(parent.empty() ? "." : parent.str(), dumpDir)) {
      errs() << "loomc: error: " << file.first << " '" << file.second
             << "' is a file --dump-dir '" << dumpDir << "' writes\n";
      return 1;
    }
  }

  // Printed stages go to -o (or stdout); an executable is written by the linker.
  std::error_code ec;
  std::string printTo =
      prints && !outputFile.empty() ? outputFile.getValue() : std::string("-");
  // A file is written beside its name and renamed onto it once the
  // compilation succeeded: a failed --emit had left an existing -o file
  // truncated (as a failed link now does not). Stdout and device files
  // (/dev/null) are written in place.
  SmallString<128> staged;
  sys::fs::file_status status;
  bool inPlace = printTo == "-" || (!sys::fs::status(printTo, status) &&
                                    status.type() != sys::fs::file_type::regular_file);
  if (!inPlace) {
    int fd = -1;
    ec = sys::fs::createUniqueFile(printTo + ".loom-%%%%%%", fd, staged);
    if (!ec)
      sys::Process::SafelyCloseFileDescriptor(fd);
  }
  std::optional<ToolOutputFile> printed;
  if (!ec)
    printed.emplace(inPlace ? StringRef(printTo) : StringRef(staged), ec,
                    sys::fs::OF_TextWithCRLF);
  if (ec) {
    errs() << "loomc: error: cannot write '" << printTo << "': "
           << ec.message() << "\n";
    return 1;
  }
  ToolOutputFile &output = *printed;

  mlir::DialectRegistry registry;
  loom::registerLoomCompilerDialects(registry);
  // Each chunk is an independent script with its own context and diagnostics,
  // and its own --dump-dir/chunk-N (each chunk's files had overwritten the
  // last one's).
  int chunkNumber = 0;
  auto processChunk = [&](std::unique_ptr<MemoryBuffer> chunk,
                          raw_ostream &os) -> LogicalResult {
    loom::DriverOptions chunkOptions = options;
    if (splitInputFile && !options.dumpDir.empty())
      chunkOptions.dumpDir = (options.dumpDir + "/chunk-" + Twine(++chunkNumber)).str();
    SourceMgr sourceMgr;
    sourceMgr.AddNewSourceBuffer(std::move(chunk), SMLoc());
    mlir::MLIRContext context(registry, mlir::MLIRContext::Threading::DISABLED);
    // A diagnostic at a script's line does not print the op behind it (the
    // user wrote a script, not IR) unless asked for with
    // --mlir-print-op-on-diagnostic.
    if (!printOpOnDiagnosticGiven())
      context.printOpOnDiagnostic(false);
    if (verifyDiagnostics) {
      mlir::SourceMgrDiagnosticVerifierHandler handler(sourceMgr, &context);
      (void)loom::runDriver(context, sourceMgr, chunkOptions, os);
      return handler.verify();
    }
    mlir::SourceMgrDiagnosticHandler handler(sourceMgr, &context);
    // Lines with non-ASCII text get their caret from this one.
    loom::SourceCaretHandler carets(sourceMgr, &context);
    // Errors of the command line (--cpu, --mesh, ...) have no place in the
    // script: they read "loomc: error: ...", as the options' own do.
    mlir::ScopedDiagnosticHandler commandLine(&context, [](mlir::Diagnostic &diag) {
      if (!isa<mlir::UnknownLoc>(diag.getLocation()))
        return failure();
      printUnlocatedDiagnostic(diag);
      return success();
    });
    // A warning or error about a script line is said once: each instance
    // of a layer, and each program built (one rank, per rank), would repeat
    // it word for word (--gpu-shared-limit's error came twice for a meshed
    // model). (Remarks are counted: --remarks=collectives gives one per
    // collective.)
    llvm::StringSet<> said;
    mlir::ScopedDiagnosticHandler once(&context, [&said](mlir::Diagnostic &diag) {
      if (diag.getSeverity() != mlir::DiagnosticSeverity::Warning &&
          diag.getSeverity() != mlir::DiagnosticSeverity::Error)
        return failure();
      std::string key;
      llvm::raw_string_ostream os(key);
      os << diag.getLocation() << '\n' << diag.str();
      return success(!said.insert(key).second);
    });
    return loom::runDriver(context, sourceMgr, chunkOptions, os);
  };
  if (failed(mlir::splitAndProcessBuffer(
          std::move(*file), processChunk, output.os(),
          splitInputFile ? mlir::kDefaultSplitMarker : "", "// -----")))
    return 1;
  if (std::error_code failed = loom::flushChecked(output.os())) {
    errs() << "loomc: error: cannot write '" << printTo << "': " << failed.message()
           << "\n";
    return 1;
  }
  output.keep();
  if (!inPlace)
    if (std::error_code failed = sys::fs::rename(staged, printTo)) {
      sys::fs::remove(staged);
      errs() << "loomc: error: cannot write '" << printTo << "': " << failed.message() << "\n";
      return 1;
    }
  return 0;
}
