//===- Driver.cpp - The main program of compiled executables --------------===//
//
// Everything that can be checked is checked before the arena is allocated:
// the plans, the kernel table, the command line and the input files' headers.
//
// A multi-rank run keeps the files whole: rank 0 alone reads and writes
// them, holding the whole params, inputs and outputs in a staging arena laid
// out after the unpartitioned plan, and the ranks exchange blocks through
// the Communicator. Every phase in which some rank may fail alone ends with
// an agreement (an all-gather of one byte), so that all ranks stop together
// with status 1 instead of waiting for one that gave up.
//
//===----------------------------------------------------------------------===//

#include "loom/runtime/exec/Driver.h"

#include "exec/Report.h"
#include "io/File.h"
#include "loom/runtime/exec/Checkpoint.h"
#include "loom/runtime/exec/CpuTarget.h"
#include "loom/runtime/exec/Generation.h"
#include "loom/runtime/exec/Training.h"
#include "loom/runtime/Version.h"
#include "loom/runtime/io/Json.h"
#include "loom/runtime/comm/Communicator.h"
#include "loom/runtime/comm/Watchdog.h"
#include "loom/runtime/exec/Cuda.h"
#include "loom/runtime/exec/CudaPipeline.h"
#include "loom/runtime/exec/Executor.h"
#include "loom/runtime/exec/AssembledOutputs.h"
#include "loom/runtime/exec/PipelineRunner.h"
#include "loom/runtime/exec/Initializer.h"
#include "loom/runtime/exec/KernelCheck.h"
#include "loom/runtime/plan/Layout.h"
#include "loom/runtime/comm/Nccl.h"
#include "loom/runtime/io/Npy.h"
#include "loom/runtime/support/Options.h"
#include "loom/runtime/plan/Plan.h"
#include "loom/runtime/io/Safetensors.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <unistd.h>

using namespace loom::runtime;

/// argv[0] without its directory.
static std::string programName(int argc, char **argv) {
  const char *path = argc > 0 && argv[0] ? argv[0] : "loom-model";
  const char *slash = std::strrchr(path, '/');
  return slash ? slash + 1 : path;
}

/// Rewrites a "plan:LINE: ..." error of the partitioned plan as
/// "spmd-plan:LINE: ...".
static std::string inSpmdPlan(const std::string &error);

namespace {
/// Set by the first SIGINT or SIGTERM of a training run: the step in
/// progress finishes, its checkpoint is written (with --save) and the run
/// ends; a second signal ends the process at once.
volatile std::sig_atomic_t interruptSignal = 0;
extern "C" void onInterrupt(int signal) {
  if (interruptSignal) {
    std::signal(signal, SIG_DFL);
    std::raise(signal);
    return;
  }
  interruptSignal = signal;
}

/// Installs onInterrupt for a training run, and the previous handlers back
/// when the run ends (ranks that are threads of one process, in the unit
/// tests, share them: the last to leave restores them).
class InterruptHandlers {
public:
  explicit InterruptHandlers(bool install) : installed(install) {
    if (!installed)
      return;
    std::lock_guard<std::mutex> lock(mutex());
    if (users()++ == 0) {
      interruptSignal = 0;
      previousInt = std::signal(SIGINT, onInterrupt);
      previousTerm = std::signal(SIGTERM, onInterrupt);
    }
  }
  ~InterruptHandlers() {
    if (!installed)
      return;
    std::lock_guard<std::mutex> lock(mutex());
    if (--users() == 0) {
      std::signal(SIGINT, previousInt);
      std::signal(SIGTERM, previousTerm);
    }
  }

private:
  static std::mutex &mutex() {
    static std::mutex m;
    return m;
  }
  static int &users() {
    static int n = 0;
    return n;
  }
  static inline void (*previousInt)(int) = SIG_DFL;
  static inline void (*previousTerm)(int) = SIG_DFL;
  bool installed;
};

/// Runs one executable invocation (one rank of it); each step returns false
/// after reporting.
class Driver {
public:
  Driver(int argc, char **argv, const Executable &executable,
         Communicator *comm, std::FILE *out, std::FILE *err)
      : argc(argc), argv(argv), executable(executable), comm(comm), out(out),
        err(err), program(programName(argc, argv)) {
    rank = comm ? comm->rank() : 0;
    numRanks = comm ? comm->size() : 1;
  }

  /// False after reporting an error.
  bool run();

private:
  /// Reports an error. While every rank fails alike (`uniform`: the command
  /// line, the plans), only rank 0 does; later, the failing rank, naming
  /// itself.
  bool fail(const std::string &message) {
    if (rank == 0)
      std::fprintf(err, "%s: error: %s\n", program.c_str(), message.c_str());
    else if (!uniform)
      std::fprintf(err, "%s: error: rank %u: %s\n", program.c_str(), rank,
                   message.c_str());
    return false;
  }
  void warn(const std::string &message) {
    std::fprintf(err, "%s: warning: %s\n", program.c_str(), message.c_str());
  }
  bool parsePlans();
  bool selectPlan();
  bool checkDevice();
  bool collectFiles(const NamedFiles &given, BufferRole role,
                    std::map<unsigned, std::string> &files);
  // On `plan`'s buffers at their offsets in `arena`: the executor's arena
  // on one rank, rank 0's staging arena on several.
  bool checkInputs(const Plan &plan);
  bool prepareParams(const Plan &plan, char *arena);
  bool loadInputs(const Plan &plan, char *arena);
  bool finishOutputs(const Plan &plan, char *arena);
  bool execute(TraceRecorder *trace);
  /// --check-numerics: false after reporting the first non-finite step of
  /// the run (this rank's).
  bool checkedNumerics();
  // Training: how many runs; after each, the updates and the loss's report.
  uint64_t numSteps() const;
  bool openLog();
  bool finishStep(const Plan &plan, uint64_t step);
  /// Whether step `step` ends with a checkpoint (--save, --save-every).
  bool savesAfter(uint64_t step) const {
    return !options.save.empty() &&
           (step == numSteps() || (options.saveEvery && step % options.saveEvery == 0));
  }
  /// Whether training progress is a bar redrawn in place: on a terminal,
  /// and on one rank (under a launcher a rank's stdout may be a
  /// pseudo-terminal even when the launcher's own output is piped).
  bool drawsProgressBar() const { return numRanks == 1 && isatty(fileno(out)); }
  /// Writes the checkpoint of `plan`'s params in `arena` (rank 0's).
  bool saveCheckpointOf(const Plan &plan, const char *arena);
  /// Training on cuda: the params and optimizer state of `plan` (this
  /// rank's) stay on the device between steps; the update outputs nobody
  /// asked for stay there too.
  void keepTrainingOnDevice(const Plan &plan);
  /// On cuda, the params back into this rank's host arena (before they are
  /// collected or saved); nothing to do on the CPU.
  bool paramsToHost() {
    return !onCuda || cuda.downloadParams(executor.arena(), error) ||
           fail(multiRank ? inSpmdPlan(error) : error);
  }
  /// Whether --data fills `buffer` (tokens, labels) instead of a file, or
  /// generate's window (tokens).
  bool fromData(const PlanBuffer &buffer) const {
    return (!options.data.empty() &&
            (buffer.name == "tokens" || buffer.name == "labels")) ||
           (options.generate && buffer.name == "tokens");
  }
  /// generate: after a run whose logits are in `arena` (`plan`'s offsets),
  /// the next byte, printed as it comes (rank 0).
  bool printNextByte(const Plan &plan, const char *arena) {
    // A forward in microbatches (a pipelined one) assembled its logits.
    const PlanBuffer &logits = *plan.findBuffer("logits");
    const char *data = whole.forwardMicrobatches() ? assembled.data(logits)
                                                   : arena + logits.offset;
    int64_t byte;
    if (!generator.advance(data, byte, error)) {
      std::fputc('\n', out);
      return fail(error);
    }
    std::fputc(static_cast<unsigned char>(byte), out);
    std::fflush(out);
    return true;
  }
  /// Microbatch `microbatch` of step `step`'s batch into `plan`'s buffers
  /// in `arena`: the --data rows, and with microbatches those of the
  /// microbatched inputs' whole batch (inputBytes). Without microbatches,
  /// microbatch 0 is the step's batch.
  void placeMicrobatch(const Plan &plan, char *arena, uint64_t step,
                       uint64_t microbatch, const TokenData *tokens = nullptr);
  /// train --eval-data: whether the held-out loss follows step `step`
  /// (after the last step, once its outputs are reported: the held-out
  /// runs overwrite them).
  bool evaluatesAfter(uint64_t step) const {
    return !options.evalData.empty() &&
           (step == numSteps() || (options.evalEvery && step % options.evalEvery == 0));
  }
  /// train --eval-data after step `step`: the step's program (this rank's
  /// `plan`) on each held-out batch, its updates discarded (the in-place
  /// ones restored; the others are applied only by finishStep), and the
  /// mean loss reported by rank 0. `stage` places the inputs: the
  /// executor's arena on one rank, rank 0's staging arena on several.
  bool evaluateHeldOut(const Plan &plan, const Plan &stage, char *stageArena,
                       uint64_t step);
  /// The steps of `plan` (this rank's) that a held-out batch needs: up to
  /// the last that writes the loss, where no step before it writes a param
  /// or an update's output; 0 (the whole program) for pipelined and
  /// microbatched plans, or a loss written after an update.
  size_t lossPrefix(const Plan &plan) const;
  /// One run of the plan (this rank's, whose inputs are in place); with
  /// microbatches, its steps up to the last accumulate once per
  /// microbatch, each after `place(microbatch)`, then the rest.
  bool runPlanOnce(const Plan &plan, TraceRecorder *trace,
                   const std::function<bool(uint64_t)> &place);
  /// A forward in microbatches: the program once per microbatch (or the
  /// pipeline's schedule of them), each microbatch's outputs taken into
  /// `assembled` (on rank 0 of several, gathered first).
  bool runForwardMicrobatches(const Plan &plan, TraceRecorder *trace,
                              const std::function<bool(uint64_t)> &place);
  // --check-kernels, after the params and inputs are in the host arena.
  bool checkAgainstCpu();
  bool runSingle();

  // Multi-rank runs.
  bool runRanks();
  /// LOOM_FAULT_INJECT=hang@R or die@R (test aids): before its first step
  /// rank R stops answering, as a hung rank would, or exits with status 3
  /// and no word, as a crashed one would.
  void injectFault() const {
    const char *fault = std::getenv("LOOM_FAULT_INJECT");
    std::string at = "@" + std::to_string(rank);
    if (fault && std::string(fault) == "hang" + at)
      for (;;)
        std::this_thread::sleep_for(std::chrono::hours(1));
    if (fault && std::string(fault) == "die" + at)
      std::_Exit(3);
  }
  bool agree(bool ok);
  /// Whether `mine` holds on any rank (into `any`); false after reporting
  /// a failed exchange.
  bool anyRank(bool mine, bool &any);
  /// train: whether this rank was asked to stop (SIGINT, SIGTERM, or the
  /// test aid LOOM_FAULT_INTERRUPT=S or S@R: as if interrupted in step S,
  /// on rank R) by the end of step `step`.
  bool stopRequested(uint64_t step) const;
  /// train, interrupted: the run ends after step `step` (its checkpoint
  /// written with --save), with a message saying how to go on.
  bool stoppedAfter(uint64_t step);
  bool openCudaRanks();
  bool loadCudaRanks();
  bool allocateRanks();
  bool distribute(BufferRole role);
  /// The whole outputs (or params) into rank 0's staging arena.
  bool collect(BufferRole role);
  /// A pipelined training run's params are whole on their own stages only:
  /// onto every rank before they are collected (PipelineRunner::syncUpdates).
  /// On cuda the broadcasts write device memory: the outputs come back to
  /// the host arena after them (the params, where needed, by paramsToHost).
  bool syncPipelinedParams() {
    if (!spmd.pipeline.present || !options.train)
      return true;
    if (!pipeline.syncUpdates(error))
      return fail(error);
    return !onCuda || cuda.finish(executor.arena(), error) || fail(inSpmdPlan(error));
  }
  std::string tracePath() const;

  int argc;
  char **argv;
  const Executable &executable;
  Communicator *comm; // null on one rank without a launcher
  std::FILE *out;
  std::FILE *err;
  std::string program;
  std::string error;
  RunOptions options;
  unsigned rank = 0;
  unsigned numRanks = 1;
  bool multiRank = false; // running the SPMD plan on numRanks ranks
  bool uniform = true;    // whether a failure so far happens on every rank
  Plan whole;             // loom_plan
  Plan spmd;              // loom_spmd_plan; no mesh if there is none
  Executor executor;      // of the plan this run runs
  PipelineRunner pipeline; // a pipelined plan's stages on this rank
  bool onCuda = false;
  CudaExecutor cuda;
  // After `cuda`, so that it goes first, while the device's context is
  // still held.
  NcclCollectives nccl;
  // What the pipeline runner runs on (after `nccl`, whose memory it uses).
  std::unique_ptr<PipelineDevice> pipelineDevice;
  std::map<unsigned, std::string> inputFiles;  // whole's buffer id -> .npy
  std::map<unsigned, std::string> outputFiles; // whole's buffer id -> .npy
  // Multi-rank: the world group; rank 0's staging plan (whole's buffers,
  // the inputs, params and outputs at offsets of their own) and arena; the
  // blocks in transit (on rank 0 the gathered outputs, elsewhere the
  // broadcast inputs and params).
  CommGroup world;
  /// --collective-timeout: `comm` behind a watchdog.
  std::unique_ptr<TimedCommunicator> timedComm;
  Plan staging;
  Arena stagingArena;
  Arena transfer;
  FilePtr log; // --log, on rank 0
  /// When training started, and when the last step ended.
  std::chrono::steady_clock::time_point trainStart, stepEnd;
  TokenData data; // --data, on rank 0
  TokenData heldOut; // train --eval-data, on rank 0
  /// Inputs read once (from a file or --random-inputs), by buffer id:
  /// with microbatches, the whole batch of each input that --data does not
  /// fill (of the unpartitioned plan, on rank 0; placeMicrobatch copies
  /// each microbatch's rows in); and each other input's bytes when more
  /// runs follow, copied in again by a later step or repeat instead of
  /// read and converted again (at 12 MB of f32 .npy into bf16, 10% of a
  /// benchmark's attention run).
  std::map<unsigned, std::vector<char>> inputBytes;
  TrainState train; // training: the step, the loss scale
  /// Without `train`: the params the plan's kernels update in place, as
  /// they were before the first run (every run starts from them).
  std::vector<char> untrained;
  void keepParams(const Plan &plan, uint64_t step);
  /// This rank's coordinate for holdsBuffer in `plan` (a one-rank plan's
  /// buffers are all rank 0's).
  unsigned holderIn(const Plan &plan) const { return plan.mesh.present ? rank : 0; }
  AssembledOutputs assembled; // a forward in microbatches: its whole outputs
  TextGenerator generator;    // generate: the text so far (rank 0)
  /// evaluate: the batches, and (rank 0) the sum of their losses.
  struct {
    uint64_t batches = 0;
    double lossSum = 0;
  } evaluation;
  /// evaluate: batch `batch`'s loss from `plan`'s output at its offset in
  /// `arena` (a forward in microbatches: the assembled one), printed and
  /// added up (rank 0).
  void addEvalLoss(const Plan &plan, const char *arena, uint64_t batch) {
    const PlanBuffer &loss = *plan.findScalarOutput("loss");
    const char *data = whole.forwardMicrobatches() ? assembled.data(loss)
                                                   : arena + loss.offset;
    float value;
    std::memcpy(&value, data, sizeof(value));
    evaluation.lossSum += value;
    std::fprintf(out, "batch %llu/%llu  loss %.7g\n",
                 static_cast<unsigned long long>(batch),
                 static_cast<unsigned long long>(evaluation.batches), value);
    std::fflush(out);
  }
  /// evaluate: the mean loss, its perplexity and the tokens it covers.
  void printEvalSummary() {
    const PlanBuffer *tokens = whole.findBuffer("tokens");
    uint64_t perBatch = tokens->globalElements * whole.optimizer.microbatches;
    double mean = evaluation.lossSum / static_cast<double>(evaluation.batches);
    std::fprintf(out, "eval loss %.7g over %llu batches (%llu tokens), perplexity %.5g\n",
                 mean, static_cast<unsigned long long>(evaluation.batches),
                 static_cast<unsigned long long>(perBatch * evaluation.batches),
                 std::exp(mean));
    std::fflush(out);
  }
  uint64_t resumedAt = 0; // the step this run starts after (--resume)
};
} // namespace

/// Rewrites a "plan:LINE: ..." error of the partitioned plan as
/// "spmd-plan:LINE: ...".
static std::string inSpmdPlan(const std::string &error) {
  return error.compare(0, 5, "plan:") == 0 ? "spmd-" + error : error;
}

bool Driver::parsePlans() {
  std::vector<const LoomKernel *> bound;
  if (!parsePlan(executable.plan ? executable.plan : "", whole, error) ||
      !bindKernels(whole, executable.kernels, bound, error))
    return fail(error);
  if (whole.mesh.present)
    return fail("plan:" + std::to_string(whole.mesh.line) +
                ": the unpartitioned plan has a 'mesh' record");
  if (!executable.spmdPlan || !*executable.spmdPlan)
    return true;
  if (!parsePlan(executable.spmdPlan, spmd, error) ||
      !bindKernels(spmd, executable.kernels, bound, error) ||
      !checkPartitionedPlan(whole, spmd, error))
    return fail(inSpmdPlan(error));
  return true;
}

bool Driver::selectPlan() {
  const Plan *plan = &whole;
  if (numRanks > 1) {
    if (!spmd.mesh.present)
      return fail("this run has " + std::to_string(numRanks) +
                  " ranks, but this executable is not partitioned: run it "
                  "on 1 rank");
    if (numRanks != spmd.mesh.numRanks)
      return fail("this run has " + std::to_string(numRanks) +
                  " ranks, but this executable runs on 1 rank or on " +
                  std::to_string(spmd.mesh.numRanks) + " (mesh '" +
                  spmd.mesh.name + "' " + formatMeshAxes(spmd.mesh) + ")");
    plan = &spmd;
    multiRank = true;
    world = meshGroup(spmd.mesh, rank, allAxes(spmd.mesh));
    executor.setCommunicator(comm);
  }
  executor.setCheckNumerics(options.checkNumerics);
  if (!executor.bind(*plan, executable.kernels, error))
    return fail(multiRank ? inSpmdPlan(error) : error);
  return true;
}

bool Driver::checkDevice() {
  std::string device =
      options.device.empty() ? deviceName(whole.device) : options.device;
  if (device == "cpu" && whole.device != Device::CPU)
    return fail("this executable was built for cuda; its kernels cannot run "
                "with --device cpu");
  if (options.checkKernels && device != "cuda")
    return fail("--check-kernels compares the GPU's kernels with the CPU's: "
                "it needs --device cuda");
  if (options.checkKernels && multiRank)
    return fail("--check-kernels runs the unpartitioned plan: run it on 1 "
                "rank");
  if (options.checkNumerics && device == "cuda")
    return fail("--check-numerics looks at the CPU's kernels: run with "
                "--device cpu");
  if (device != "cuda")
    return true;
  // The GPU kernels are the gpu-image's; the CPU kernel table stays bound
  // (and checked) either way. Several ranks run the partitioned plan's
  // launches, with the same image.
  const Plan &plan = multiRank ? spmd : whole;
  std::string planName = multiRank ? "spmd-plan:" : "plan:";
  if (!plan.gpuImage.present)
    return fail("this executable was built without GPU kernels");
  if (plan.gpuImage.bytes != executable.gpuImageSize || !executable.gpuImage)
    return fail(planName + std::to_string(plan.gpuImage.line) +
                ": the gpu-image record says " +
                std::to_string(plan.gpuImage.bytes) +
                " bytes, but this executable carries a GPU image of " +
                std::to_string(executable.gpuImageSize) + " bytes");
  if (!cudaSupported())
    return fail("this runtime was built without CUDA support");
  onCuda = true;
  return true;
}

/// The names of the buffers of `role`, for error messages.
static std::string namesOf(const Plan &plan, BufferRole role) {
  std::string names;
  for (const PlanBuffer &buffer : plan.buffers)
    if (buffer.role == role)
      names += (names.empty() ? "" : ", ") + buffer.name;
  return names.empty() ? "none" : names;
}

bool Driver::collectFiles(const NamedFiles &given, BufferRole role,
                          std::map<unsigned, std::string> &files) {
  const char *kind = roleName(role);
  for (const auto &[name, path] : given) {
    const PlanBuffer *buffer = whole.findBuffer(name);
    if (!buffer || buffer->role != role)
      return fail(std::string("model '") + whole.model + "' has no " + kind +
                  " named '" + name + "' (its " + kind +
                  "s: " + namesOf(whole, role) + ")");
    if (!files.emplace(buffer->id, path).second)
      return fail(std::string(kind) + " '" + name + "' is given twice");
  }
  return true;
}

bool Driver::checkInputs(const Plan &plan) {
  // What the run writes at its end (or after its last step), checked
  // before its first: a checkpoint whose directory is missing must not
  // cost the whole training run. (Other ranks' traces go beside rank 0's.)
  for (const std::string &path : {options.save, options.saveWeights, options.trace})
    if (!path.empty() && !checkWritable(path, error))
      return fail(error);
  for (const auto &[id, path] : outputFiles)
    if (!checkWritable(path, error))
      return fail("output '" + whole.buffers[id].name + "': " + error);
  if (options.generate &&
      !generator.start(plan, options.prompt,
                       Sampling{options.temperature, options.topK, options.topP},
                       options.seed, error))
    return fail(error);
  // Every row of the batch (of every microbatch) computes the same window;
  // one row's logits are read.
  uint64_t rows = generator.batchRows() *
                  (plan.forwardMicrobatches() ? plan.optimizer.microbatches : 1);
  if (options.generate && rows > 1)
    warn("generate runs all " + std::to_string(rows) +
         " rows of the batch for one row's logits: build the forward with a batch of "
         "one (loomc --dim B=1, B the script's batch dim) for about " +
         std::to_string(rows) + " times less work");
  if (!options.data.empty()) {
    const PlanBuffer *tokens, *labels;
    if (!loadTokenData(options.data, data, error) ||
        !findBatchInputs(plan, data, tokens, labels, error))
      return fail(error);
    data.shuffled = options.shuffle;
    data.seed = options.seed;
    if (options.evaluate)
      evaluation.batches = options.batches ? options.batches
                                           : batchesIn(data, *tokens, plan.optimizer.microbatches);
  }
  if (!options.evalData.empty()) {
    const PlanBuffer *tokens, *labels;
    if (!loadTokenData(options.evalData, heldOut, error) ||
        !findBatchInputs(plan, heldOut, tokens, labels, error))
      return fail("--eval-data: " + error);
    evaluation.batches = options.evalBatches
                             ? options.evalBatches
                             : batchesIn(heldOut, *tokens, plan.optimizer.microbatches);
  }
  for (const PlanBuffer &buffer : plan.buffers) {
    if (buffer.role != BufferRole::Input || isStepScalar(plan, buffer) ||
        fromData(buffer))
      continue;
    auto file = inputFiles.find(buffer.id);
    if (file == inputFiles.end()) {
      if (options.randomInputs || options.generate)
        continue;
      return fail("input '" + buffer.name + "' (" + dtypeName(buffer.dtype) +
                  " " + formatShape(buffer.shape) +
                  ") is not given: pass --input " + buffer.name +
                  "=FILE.npy, or --random-inputs");
    }
    // A microbatched input's file holds the whole batch.
    PlanBuffer whole = buffer;
    if (plan.isMicrobatched(buffer) &&
        !wholeBatchOf(buffer, plan.optimizer.microbatches, whole))
      return fail("input '" + buffer.name + "' is too large");
    if (!checkNpy(file->second, "input '" + buffer.name + "'", buffer.dtype,
                  whole.shape, error))
      return fail(error);
  }
  return true;
}

bool Driver::prepareParams(const Plan &plan, char *arena) {
  if (!options.resume.empty()) {
    if (!loadCheckpoint(plan, arena, options.resume, train, options.seed, error))
      return fail(error);
    data.seed = options.seed; // --shuffle draws from the run's seed
    if (train.step >= numSteps())
      return fail(options.resume + " is at step " + std::to_string(train.step) +
                  ": a run of " + std::to_string(numSteps()) +
                  " steps has nothing left to do (raise --steps)");
  } else if (options.weights.empty()) {
    initializeParams(plan, arena, options.seed);
  } else {
    std::vector<std::string> warnings;
    if (!loadWeights(plan, arena, options.weights, warnings, error))
      return fail(error);
    for (const std::string &warning : warnings)
      warn(warning);
  }
  if (!options.saveWeights.empty() &&
      !saveWeights(plan, arena, options.saveWeights, error))
    return fail(error);
  return true;
}

bool Driver::loadInputs(const Plan &plan, char *arena) {
  // Inputs are live from the start: they share arena bytes only with
  // buffers written after their last use, never with params or other
  // inputs, so reading them before the run is safe in any order.
  for (const PlanBuffer &buffer : plan.buffers) {
    if (buffer.role != BufferRole::Input || isStepScalar(plan, buffer) ||
        fromData(buffer))
      continue;
    bool microbatched = plan.isMicrobatched(buffer);
    auto cached = inputBytes.find(buffer.id);
    if (cached != inputBytes.end()) {
      if (!microbatched)
        std::memcpy(arena + buffer.offset, cached->second.data(), cached->second.size());
      continue;
    }
    PlanBuffer whole = buffer;
    char *target = arena + buffer.offset;
    // A microbatched input: the whole batch, once, off the arena
    // (placeMicrobatch copies each microbatch's rows in).
    if (microbatched) {
      wholeBatchOf(buffer, plan.optimizer.microbatches, whole); // checkInputs
      std::vector<char> &rows = inputBytes[buffer.id];
      rows.resize(whole.bytes);
      target = rows.data();
    }
    auto file = inputFiles.find(buffer.id);
    if (file == inputFiles.end() && options.generate && !options.randomInputs) {
      std::memset(target, 0, whole.bytes); // generate: inputs not given are zeros
    } else if (file == inputFiles.end()) {
      fillRandomInput(whole, options.seed, target);
    } else {
      std::string what = "input '" + buffer.name + "'";
      if (!readNpy(file->second, what, whole.dtype, whole.shape, target, error) ||
          !checkIndexBound(whole, target, what + " (" + file->second + ")", error))
        return fail(error);
    }
    if (numSteps() > 1 && !microbatched)
      inputBytes[buffer.id].assign(target, target + whole.bytes);
  }
  return true;
}

bool Driver::finishOutputs(const Plan &plan, char *arena) {
  for (const PlanBuffer &planned : plan.buffers) {
    if (planned.role != BufferRole::Output)
      continue;
    // A forward in microbatches reports the whole batch's outputs.
    const char *data = arena + planned.offset;
    PlanBuffer buffer = planned;
    if (plan.forwardMicrobatches()) {
      data = assembled.data(planned);
      buffer = assembled.whole(planned);
    }
    auto file = outputFiles.find(buffer.id);
    // The new params and optimizer state went back into them.
    if (options.train && file == outputFiles.end() && isUpdateOutput(plan, buffer))
      continue;
    if (file == outputFiles.end()) {
      // Routing counts are a table on request, not a summary line.
      if (isMoeStats(buffer)) {
        if (options.moeStats)
          printMoeStats(out, buffer, data);
        continue;
      }
      printSummary(out, buffer, data);
      continue;
    }
    if (!writeNpy(file->second, buffer.dtype, buffer.shape, data, error))
      return fail("output '" + buffer.name + "': " + error);
  }
  return true;
}

bool Driver::execute(TraceRecorder *trace) {
  if (!onCuda) {
    // The CPU kernels (launch records do not apply) and the collectives.
    if (!executor.run(trace, error))
      return fail(multiRank ? inSpmdPlan(error) : error);
    return checkedNumerics();
  }
  // The params and inputs are in the host arena, as for the CPU; the
  // outputs come back to their offsets in it.
  if (!cuda.run(executor.arena(), trace, error))
    return fail(multiRank ? inSpmdPlan(error) : error);
  return true;
}

void Driver::placeMicrobatch(const Plan &plan, char *arena, uint64_t step,
                             uint64_t microbatch, const TokenData *tokens) {
  for (const auto &[id, rows] : inputBytes) {
    const PlanBuffer &buffer = plan.buffers[id];
    if (!plan.isMicrobatched(buffer))
      continue;
    std::memcpy(arena + buffer.offset, rows.data() + microbatch * buffer.bytes,
                buffer.bytes);
  }
  // checkInputs checked both inputs and every id of the data, once.
  if (!tokens && !options.data.empty())
    tokens = &data;
  if (tokens)
    fillBatch(*tokens, *plan.findBuffer("tokens"), *plan.findBuffer("labels"),
              arena, step - 1, plan.optimizer.microbatches, microbatch);
}

bool Driver::runForwardMicrobatches(const Plan &plan, TraceRecorder *trace,
                                    const std::function<bool(uint64_t)> &place) {
  uint64_t count = plan.optimizer.microbatches;
  assembled.reset(whole, count);
  auto take = [&](uint64_t microbatch) {
    if (!multiRank) {
      assembled.take(whole, microbatch, executor.arena());
      return true;
    }
    if (!agree(collect(BufferRole::Output)))
      return false;
    if (rank == 0)
      assembled.take(staging, microbatch, stagingArena.data());
    return true;
  };
  if (plan.pipeline.present) {
    // The schedule pipelines every microbatch; then each one's outputs
    // come to every rank of the pipeline, one microbatch at a time.
    if (!pipeline.run(place, trace, error))
      return fail(inSpmdPlan(error));
    if (!checkedNumerics())
      return false;
    for (uint64_t microbatch = 0; microbatch < count; ++microbatch)
      if (!(pipeline.putOutputs(microbatch, error) || fail(inSpmdPlan(error))) ||
          !take(microbatch))
        return false;
    return true;
  }
  for (uint64_t microbatch = 0; microbatch < count; ++microbatch)
    if (!place(microbatch) || !execute(trace) || !take(microbatch))
      return false;
  return true;
}

bool Driver::runPlanOnce(const Plan &plan, TraceRecorder *trace,
                         const std::function<bool(uint64_t)> &place) {
  if (plan.forwardMicrobatches())
    return runForwardMicrobatches(plan, trace, place);
  if (plan.pipeline.present) {
    if (!pipeline.run(place, trace, error))
      return fail(inSpmdPlan(error));
    return checkedNumerics();
  }
  size_t perMicrobatch = plan.microbatchSteps();
  if (!perMicrobatch)
    return place(0) && execute(trace);
  uint64_t count = plan.optimizer.microbatches;
  if (onCuda) {
    // The microbatches' steps queued on the device, the accumulates as the
    // runtime's kernel; the outputs come back once, at the end.
    char *arena = executor.arena();
    for (uint64_t microbatch = 0; microbatch < count; ++microbatch)
      if (!place(microbatch) ||
          !(cuda.runSteps(arena, 0, perMicrobatch, microbatch, error) ||
            fail(multiRank ? inSpmdPlan(error) : error)))
        return false;
    if (!cuda.runSteps(arena, perMicrobatch, plan.steps.size(), count - 1, error) ||
        !cuda.finish(arena, error))
      return fail(multiRank ? inSpmdPlan(error) : error);
    return true;
  }
  for (uint64_t microbatch = 0; microbatch < count; ++microbatch) {
    if (!place(microbatch))
      return false;
    if (!executor.runSteps(0, perMicrobatch, microbatch, trace, error))
      return fail(multiRank ? inSpmdPlan(error) : error);
  }
  if (!executor.runSteps(perMicrobatch, plan.steps.size(), count - 1, trace, error))
    return fail(multiRank ? inSpmdPlan(error) : error);
  return checkedNumerics();
}

size_t Driver::lossPrefix(const Plan &plan) const {
  const PlanBuffer *loss = plan.findScalarOutput("loss");
  if (!loss || plan.pipeline.present || plan.microbatchSteps() || plan.forwardMicrobatches())
    return 0;
  std::set<unsigned> updated;
  for (const PlanUpdate &update : plan.updates)
    updated.insert({update.param, update.output});
  const std::vector<StepAccess> &access = executor.stepAccess();
  size_t end = 0;
  bool updateSeen = false, updateBeforeLoss = false;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    bool writesLoss = false, writesUpdate = false;
    for (size_t b = 0; b < plan.steps[i].buffers.size(); ++b) {
      unsigned id = plan.steps[i].buffers[b];
      if (access[i].buffers[b] != BufferAccess::Written)
        continue;
      writesLoss |= id == loss->id;
      writesUpdate |= updated.count(id) || plan.buffers[id].role == BufferRole::Param;
    }
    updateSeen |= writesUpdate;
    if (writesLoss) {
      end = i + 1;
      updateBeforeLoss = updateSeen;
    }
  }
  return updateBeforeLoss ? 0 : end;
}

bool Driver::evaluateHeldOut(const Plan &plan, const Plan &stage, char *stageArena,
                             uint64_t step) {
  // On the CPU, where the loss is written before any update, only the steps
  // up to it run. Otherwise the whole step runs, and as its update kernels
  // may write the params and optimizer state in place, every batch starts
  // from them again, and so does the next step.
  size_t prefix = onCuda ? 0 : lossPrefix(plan);
  std::vector<char> saved;
  if (!onCuda && !prefix)
    saved = saveInPlaceParams(plan, executor, holderIn(plan));
  double sum = 0;
  for (uint64_t batch = 1; batch <= evaluation.batches; ++batch) {
    auto place = [&](uint64_t microbatch) {
      if (rank == 0)
        placeMicrobatch(stage, stageArena, batch, microbatch, &heldOut);
      return !multiRank || agree(distribute(BufferRole::Input));
    };
    bool ran = prefix ? place(0) &&
                            (executor.runSteps(0, prefix, 0, nullptr, error) ||
                             fail(multiRank ? inSpmdPlan(error) : error)) &&
                            checkedNumerics()
                      : runPlanOnce(plan, nullptr, place);
    if (multiRank ? !agree(ran) : !ran)
      return false;
    if (!onCuda && !prefix)
      restoreInPlaceParams(plan, executor, holderIn(plan), saved);
    double loss = 0;
    readScalarOutput(plan, executor, "loss", loss);
    sum += loss;
  }
  if (rank != 0)
    return true;
  const PlanBuffer *tokens = whole.findBuffer("tokens");
  uint64_t count = tokens->globalElements * whole.optimizer.microbatches * evaluation.batches;
  double mean = sum / static_cast<double>(evaluation.batches);
  // Under the progress bar, over the bar's line (the next step draws it
  // again below).
  bool overBar = drawsProgressBar() && step != numSteps();
  std::fprintf(out, "%seval after step %llu: loss %.7g over %llu batches (%llu tokens), perplexity %.5g%s\n",
               overBar ? "\r" : "", static_cast<unsigned long long>(step), mean,
               static_cast<unsigned long long>(evaluation.batches),
               static_cast<unsigned long long>(count), std::exp(mean), overBar ? "\033[K" : "");
  std::fflush(out);
  if (!log)
    return true;
  Json line = {{"step", step},
               {"eval_loss", std::isfinite(mean) ? Json(mean) : Json()},
               {"eval_tokens", count}};
  std::string text = dumpJson(line) + "\n";
  if (!writeAll(log.get(), text.data(), text.size()) || std::fflush(log.get()))
    return fail("cannot write " + options.log);
  return true;
}

bool Driver::checkedNumerics() {
  std::string failure = executor.takeNumericsFailure();
  if (failure.empty())
    return true;
  uniform = false; // this rank's values
  return fail(failure);
}

void Driver::keepParams(const Plan &plan, uint64_t step) {
  // A training step's kernels may write new params over the old (in-place
  // updates): --repeat without `train` runs the same step N times.
  if (options.train || onCuda)
    return;
  if (step == resumedAt + 1)
    untrained = saveInPlaceParams(plan, executor, holderIn(plan));
  else
    restoreInPlaceParams(plan, executor, holderIn(plan), untrained);
}

uint64_t Driver::numSteps() const {
  if (options.generate)
    return options.tokens;
  if (options.evaluate)
    return evaluation.batches;
  if (!options.train)
    return options.repeat;
  return options.steps ? options.steps : whole.optimizer.steps;
}

bool Driver::openLog() {
  if (options.log.empty() || rank != 0)
    return true;
  return openForWriting(options.log, log, error) || fail(error);
}

bool Driver::finishStep(const Plan &plan, uint64_t step) {
  // Every rank decides alike: grad_norm is replicated.
  double gradNorm = 0, loss = 0;
  bool hasNorm = readScalarOutput(plan, executor, "grad_norm", gradNorm);
  double lossScale = train.lossScale;
  bool applied = advanceTrainState(plan.optimizer, train, gradNorm);
  unsigned holder = holderIn(plan);
  if (applied && !onCuda)
    applyUpdates(plan, executor, holder);
  if (applied && onCuda &&
      !cuda.applyUpdates(
          [&](const PlanBuffer &param) { return holdsBuffer(plan, param, holder); },
          error))
    return fail(multiRank ? inSpmdPlan(error) : error);
  bool hasLoss = readScalarOutput(plan, executor, "loss", loss);
  if (rank != 0)
    return true;
  auto now = std::chrono::steady_clock::now();
  uint64_t first = resumedAt + 1, done = step - resumedAt;
  if (step == first)
    trainStart = stepEnd; // the end of the set-up, recorded before it
  double seconds = std::chrono::duration<double>(now - stepEnd).count();
  double total = std::chrono::duration<double>(now - trainStart).count();
  stepEnd = now;
  // The tokens of a step: the elements of the (whole) tokens input, or the
  // rows of the first input.
  const PlanBuffer *tokens = whole.findBuffer("tokens");
  uint64_t perStep =
      tokens ? tokens->globalElements * whole.optimizer.microbatches : 0;
  double tokensPerSecond = seconds > 0 ? perStep / seconds : 0;
  double lr = learningRate(whole.optimizer, step);
  uint64_t steps = numSteps();
  char progress[256];
  int used = std::snprintf(progress, sizeof(progress), "step %llu/%llu",
                           static_cast<unsigned long long>(step),
                           static_cast<unsigned long long>(steps));
  if (hasLoss)
    used += std::snprintf(progress + used, sizeof(progress) - used,
                          "  loss %.7g", loss);
  used += std::snprintf(progress + used, sizeof(progress) - used, "  lr %.4g", lr);
  if (perStep)
    used += std::snprintf(progress + used, sizeof(progress) - used,
                          "  %.0f tokens/s", tokensPerSecond);
  if (!applied)
    used += std::snprintf(progress + used, sizeof(progress) - used,
                          "  skipped (inf/nan gradients; loss scale now %g)",
                          train.lossScale);
  else if (hasNorm && !std::isfinite(gradNorm))
    // Without loss scaling nothing skips the step: its params are now
    // inf/nan too, which the loss shows only a step later.
    used += std::snprintf(progress + used, sizeof(progress) - used,
                          "  applied inf/nan gradients (loss_scale dynamic would skip the step)");
  if (drawsProgressBar()) {
    // A bar that redraws itself, with the time left at the mean step time.
    const int width = 24;
    int filled = static_cast<int>(width * step / steps);
    double eta = total / done * (steps - step);
    std::fprintf(out, "\r[%.*s%.*s] %s  ETA %.0fs\033[K", filled,
                 "########################", width - filled,
                 "                        ", progress, eta);
    if (step == steps)
      std::fprintf(out, "\n");
  } else {
    std::fprintf(out, "%s\n", progress);
  }
  std::fflush(out);
  if (!log)
    return true;
  // JSON has no inf or nan: a non-finite value is null.
  auto number = [](bool present, double value) {
    return present && std::isfinite(value) ? Json(value) : Json();
  };
  Json line = {{"step", step},
               {"loss", number(hasLoss, loss)},
               {"lr", lr},
               {"grad_norm", number(hasNorm, gradNorm)},
               {"loss_scale", lossScale},
               {"skipped", !applied},
               {"tokens_per_s", tokensPerSecond}};
  std::string text = dumpJson(line) + "\n";
  if (!writeAll(log.get(), text.data(), text.size()) || std::fflush(log.get()))
    return fail("cannot write " + options.log);
  return true;
}

void Driver::keepTrainingOnDevice(const Plan &plan) {
  if (!onCuda || !options.train)
    return;
  std::set<std::string> requested;
  for (const auto &[id, path] : outputFiles)
    requested.insert(whole.buffers[id].name);
  std::vector<uint32_t> deviceOnly;
  for (const PlanUpdate &update : plan.updates)
    if (!requested.count(plan.buffers[update.output].name))
      deviceOnly.push_back(update.output);
  cuda.keepParamsOnDevice(deviceOnly);
}

bool Driver::saveCheckpointOf(const Plan &plan, const char *arena) {
  if (!saveCheckpoint(plan, arena, options.save, train, options.seed, error))
    return fail(error);
  // A line of its own, except under the progress bar, which it would break.
  if (!drawsProgressBar())
    std::fprintf(out, "checkpoint %s (step %llu)\n", options.save.c_str(),
                 static_cast<unsigned long long>(train.step));
  return true;
}

bool Driver::checkAgainstCpu() {
  KernelCheckResult result;
  if (!checkKernels(whole, executor, cuda, out, result, error, options.checkDump))
    return fail(error);
  if (result.failed)
    return fail("check-kernels: " + std::to_string(result.failed) + " of " +
                std::to_string(result.steps) +
                " kernel steps differ from the CPU beyond tolerance (the "
                "first: step " +
                std::to_string(result.firstFailed) + ", kernel '" +
                result.firstKernel + "')");
  return true;
}

bool Driver::runSingle() {
  if (!checkInputs(whole))
    return false;
  // The driver, the device, the image and the device arena before any work
  // on the host.
  if (onCuda && !cuda.open(whole, executable.gpuImage, executable.gpuImageSize,
                           executable.cudaDriver, error))
    return fail(error);
  keepTrainingOnDevice(whole);

  if (!executor.allocate(error))
    return fail(error);
  if (!prepareParams(whole, executor.arena()) ||
      !loadInputs(whole, executor.arena()))
    return false;
  // A forward in microbatches is checked on its first.
  if (options.checkKernels) {
    placeMicrobatch(whole, executor.arena(), 1, 0);
    return checkAgainstCpu();
  }
  TraceRecorder trace;
  if (!openLog())
    return false;
  resumedAt = train.step;
  stepEnd = std::chrono::steady_clock::now();
  if (options.generate)
    std::fputs(options.prompt.c_str(), out);
  for (uint64_t step = resumedAt + 1, steps = numSteps(); step <= steps; ++step) {
    // A run may reuse the inputs' bytes once they are read: read them again.
    if (step > resumedAt + 1 && !loadInputs(whole, executor.arena()))
      return false;
    keepParams(whole, step);
    fillStepScalars(whole, executor.arena(), train);
    if (options.generate)
      generator.place(whole, executor.arena());
    auto place = [&](uint64_t microbatch) {
      placeMicrobatch(whole, executor.arena(), step, microbatch);
      return true;
    };
    if (!runPlanOnce(whole, options.trace.empty() ? nullptr : &trace, place) ||
        (options.train && !finishStep(whole, step)))
      return false;
    bool stopping = options.train && stopRequested(step);
    if (options.train && evaluatesAfter(step) && step != numSteps() && !stopping &&
        !evaluateHeldOut(whole, whole, executor.arena(), step))
      return false;
    if (options.generate && !printNextByte(whole, executor.arena()))
      return false;
    if (options.evaluate)
      addEvalLoss(whole, executor.arena(), step);
    if (options.train && (savesAfter(step) || (stopping && !options.save.empty())) &&
        (!paramsToHost() || !saveCheckpointOf(whole, executor.arena())))
      return false;
    if (stopping)
      return stoppedAfter(step);
  }
  if (options.generate)
    std::fputc('\n', out);
  else if (options.evaluate)
    printEvalSummary();
  else if (!finishOutputs(whole, executor.arena()))
    return false;
  if (options.train && evaluatesAfter(numSteps()) &&
      !evaluateHeldOut(whole, whole, executor.arena(), numSteps()))
    return false;
  if (!options.trace.empty() && !trace.write(options.trace, error))
    return fail(error);
  return true;
}

bool Driver::anyRank(bool mine, bool &any) {
  char flag = mine ? 1 : 0;
  std::vector<char> all(numRanks, 0);
  if (!comm->allGather(world, &flag, 1, all.data(), error))
    return fail(error);
  any = std::find(all.begin(), all.end(), 1) != all.end();
  return true;
}

bool Driver::stopRequested(uint64_t step) const {
  if (const char *fault = std::getenv("LOOM_FAULT_INTERRUPT")) {
    std::string at = fault;
    size_t sign = at.find('@');
    bool here = sign == std::string::npos || at.substr(sign + 1) == std::to_string(rank);
    if (here && std::strtoull(at.c_str(), nullptr, 10) == step)
      std::raise(SIGINT);
  }
  return interruptSignal != 0;
}

bool Driver::stoppedAfter(uint64_t step) {
  if (rank == 0 && drawsProgressBar() && step != numSteps())
    std::fputc('\n', out);
  std::string how = options.save.empty()
                        ? "nothing is kept (train with --save CKPT to keep the params)"
                        : "continue with --resume " + options.save;
  return fail("interrupted after step " + std::to_string(step) + " of " +
              std::to_string(numSteps()) + ": " + how);
}

bool Driver::agree(bool ok) {
  char mine = ok ? 1 : 0;
  std::vector<char> all(numRanks, 0);
  if (!comm->allGather(world, &mine, 1, all.data(), error))
    return fail(error);
  for (char each : all)
    if (!each)
      return false; // the failing rank has reported
  return true;
}

bool Driver::openCudaRanks() {
  // Each phase ends with an agreement: the NCCL ids go through collective
  // calls that a rank which failed before would never make.
  if (!agree(loadCudaRanks()) ||
      !agree(nccl.shareIds(error) || fail(inSpmdPlan(error))) ||
      !agree(nccl.connect(error) || fail(inSpmdPlan(error))))
    return false;
  // From here a rank may wait on its GPU for collectives of peers that
  // died or hang: the NCCL watchdog ends it.
  nccl.watch(options.collectiveTimeout, program, rank, err);
  return true;
}

bool Driver::loadCudaRanks() {
  // NCCL first (a missing library is the likeliest failure), then the
  // device: local rank % device count, one GPU per rank of a node.
  unsigned localRank = 0;
  if (!comm->localRank(localRank, error) ||
      !nccl.load(spmd, *comm, executable.ncclLibrary, executable.cudaDriver,
                 error))
    return fail(error);
  cuda.setRank(localRank, &nccl);
  if (!cuda.open(spmd, executable.gpuImage, executable.gpuImageSize,
                 executable.cudaDriver, error))
    return fail(inSpmdPlan(error));
  return true;
}

bool Driver::allocateRanks() {
  if (!executor.allocate(error))
    return fail(inSpmdPlan(error));
  if (spmd.pipeline.present) {
    if (onCuda)
      pipelineDevice = std::make_unique<CudaPipelineDevice>(spmd, cuda, nccl, executor);
    else
      pipelineDevice = std::make_unique<CpuPipelineDevice>(executor, *executor.communicator());
    // A gradient program (loomc --gradients: a backward, no optimizer)
    // runs its schedule as a training step does: the forward-only chain
    // would leave its gradients unwritten.
    bool backward = std::any_of(spmd.steps.begin(), spmd.steps.end(), [](const PlanStep &step) {
      return step.phase == StepPhase::Backward || step.phase == StepPhase::Weight;
    });
    if (!pipeline.prepare(spmd, *pipelineDevice, *executor.communicator(),
                          options.train || spmd.forwardMicrobatches()
                              ? spmd.optimizer.microbatches
                              : 1,
                          options.train || backward, options.schedule, error))
      return fail(inSpmdPlan(error));
  }
  uint64_t transferBytes = 0;
  auto atLeast = [&](uint64_t bytes) {
    transferBytes = bytes > transferBytes ? bytes : transferBytes;
  };
  if (rank != 0) {
    // The inputs and params arrive whole.
    for (const PlanBuffer &buffer : spmd.buffers)
      if (buffer.role == BufferRole::Input || buffer.role == BufferRole::Param)
        atLeast(buffer.globalBytes);
    if (!transfer.allocate(transferBytes, error))
      return fail(error);
    return true;
  }
  // Rank 0: every input, param and output whole, 64-byte aligned like the
  // arena's buffers, and every rank's block of a sharded output.
  staging = whole;
  uint64_t offset = 0;
  for (PlanBuffer &buffer : staging.buffers) {
    if (buffer.role == BufferRole::Temp)
      continue;
    buffer.offset = offset;
    uint64_t padded = alignedBytes(buffer.bytes);
    if (padded < buffer.bytes || offset + padded < offset)
      return fail("the whole inputs, params and outputs are too large");
    offset += padded;
  }
  staging.arenaBytes = offset;
  // Checkpoints gather the params as the end gathers the outputs.
  for (const PlanBuffer &buffer : spmd.buffers) {
    bool gathered = buffer.role == BufferRole::Output ||
                    (buffer.role == BufferRole::Param && !options.save.empty());
    if (!gathered || (!buffer.isSharded() && buffer.held.empty()))
      continue;
    if (buffer.bytes > UINT64_MAX / numRanks)
      return fail("output '" + buffer.name + "' is too large to gather");
    atLeast(numRanks * buffer.bytes);
  }
  if (!stagingArena.allocate(staging.arenaBytes, error) ||
      !transfer.allocate(transferBytes, error))
    return fail(error);
  return true;
}

bool Driver::distribute(BufferRole role) {
  for (const PlanBuffer &buffer : spmd.buffers) {
    if (buffer.role != role)
      continue;
    // Whole on every rank, which keeps its block.
    char *data = rank == 0 ? stagingArena.data() +
                                 staging.findBuffer(buffer.name)->offset
                           : transfer.data();
    if (!comm->broadcast(world, 0, data, buffer.globalBytes, error))
      return fail(error);
    // A rank that does not hold it uses its bytes for other buffers.
    if (holdsBuffer(spmd, buffer, rank))
      extractShard(spmd.mesh, buffer, rank, data, executor.buffer(buffer.id));
  }
  return true;
}

bool Driver::collect(BufferRole role) {
  for (const PlanBuffer &buffer : spmd.buffers) {
    if (buffer.role != role)
      continue;
    char *target = rank == 0 ? stagingArena.data() +
                                   staging.findBuffer(buffer.name)->offset
                             : nullptr;
    // Replicated blocks come from the first rank that holds them: rank 0,
    // or for a pipelined plan's stage-placed buffer, its first stage's.
    unsigned replica = holderOfBlock(spmd, buffer, 0);
    if (!buffer.isSharded() && replica == 0) {
      if (rank == 0)
        std::memcpy(target, executor.buffer(buffer.id), buffer.bytes);
      continue;
    }
    // The ranks that do not hold it send bytes of their own buffers,
    // which assembleShards passes over.
    if (!comm->gather(world, 0, executor.buffer(buffer.id), buffer.bytes,
                      rank == 0 ? transfer.data() : nullptr, error))
      return fail(error);
    if (rank == 0)
      assembleShards(spmd.mesh, buffer, transfer.data(), target, replica);
  }
  return true;
}

std::string Driver::tracePath() const {
  if (rank == 0)
    return options.trace;
  std::string suffix = ".rank" + std::to_string(rank);
  const std::string &path = options.trace;
  if (path.size() > 5 && path.compare(path.size() - 5, 5, ".json") == 0)
    return path.substr(0, path.size() - 5) + suffix + ".json";
  return path + suffix;
}

bool Driver::runRanks() {
  // Rank 0 reads every file; the others wait for its verdict.
  if (!agree(rank != 0 || checkInputs(whole)))
    return false;
  uniform = false;
  // The driver, NCCL, the device, the image, the device arena and the NCCL
  // communicators before any work on the host.
  if ((onCuda && !openCudaRanks()) || !agree(allocateRanks()))
    return false;
  keepTrainingOnDevice(spmd);
  if (!agree(rank != 0 || prepareParams(staging, stagingArena.data())) ||
      !agree(openLog()) || !agree(distribute(BufferRole::Param)))
    return false;

  // A resumed run's state is rank 0's (it read the checkpoint).
  if (!options.resume.empty() &&
      !agree(comm->broadcast(world, 0, &train, sizeof(train), error) || fail(error)))
    return false;
  // evaluate, train --eval-data: rank 0 counted the held-out batches.
  if ((options.evaluate || !options.evalData.empty()) &&
      !agree(comm->broadcast(world, 0, &evaluation.batches, sizeof(evaluation.batches), error) ||
             fail(error)))
    return false;
  resumedAt = train.step;
  injectFault();
  TraceRecorder trace;
  trace.setProcess(rank);
  stepEnd = std::chrono::steady_clock::now();
  if (options.generate && rank == 0)
    std::fputs(options.prompt.c_str(), out);
  for (uint64_t step = resumedAt + 1, steps = numSteps(); step <= steps; ++step) {
    // Rank 0 reads the inputs (again: a run may reuse their bytes) and
    // computes the step's scalars; every rank gets its blocks.
    if (!agree(rank != 0 || loadInputs(staging, stagingArena.data())))
      return false;
    keepParams(spmd, step);
    if (rank == 0)
      fillStepScalars(staging, stagingArena.data(), train);
    if (rank == 0 && options.generate)
      generator.place(staging, stagingArena.data());
    // Each microbatch's rows (or the step's batch) go out to the ranks.
    auto place = [&](uint64_t microbatch) {
      if (rank == 0)
        placeMicrobatch(staging, stagingArena.data(), step, microbatch);
      return agree(distribute(BufferRole::Input));
    };
    if (!agree(runPlanOnce(spmd, options.trace.empty() ? nullptr : &trace, place)) ||
        !agree(!options.train || finishStep(spmd, step)))
      return false;
    // Every rank stops after the same step, if any was interrupted.
    bool stopping = false;
    if (options.train && !anyRank(stopRequested(step), stopping))
      return false;
    if (options.train && evaluatesAfter(step) && step != numSteps() && !stopping &&
        !evaluateHeldOut(spmd, staging, stagingArena.data(), step))
      return false;
    if (options.generate) {
      if ((!whole.forwardMicrobatches() && !agree(collect(BufferRole::Output))) ||
          !agree(rank != 0 || printNextByte(staging, stagingArena.data())))
        return false;
    }
    // A forward in microbatches gathered its outputs already.
    if (options.evaluate) {
      if (!whole.forwardMicrobatches() && !agree(collect(BufferRole::Output)))
        return false;
      if (rank == 0)
        addEvalLoss(staging, stagingArena.data(), step);
    }
    if (options.train && (savesAfter(step) || (stopping && !options.save.empty())) &&
        (!agree(syncPipelinedParams()) || !agree(paramsToHost()) ||
         !agree(collect(BufferRole::Param)) ||
         !agree(rank != 0 || saveCheckpointOf(staging, stagingArena.data()))))
      return false;
    if (stopping) {
      uniform = true; // one message, rank 0's
      return stoppedAfter(step);
    }
  }
  if (options.generate || options.evaluate) {
    if (rank == 0 && options.generate)
      std::fputc('\n', out);
    if (rank == 0 && options.evaluate)
      printEvalSummary();
    return agree(options.trace.empty() || trace.write(tracePath(), error) ||
                 fail(error));
  }
  // A forward in microbatches gathered each microbatch's outputs already.
  if (!agree(syncPipelinedParams()) ||
      (!spmd.forwardMicrobatches() && !agree(collect(BufferRole::Output))) ||
      !agree(rank != 0 || finishOutputs(staging, stagingArena.data())))
    return false;
  if (options.train && evaluatesAfter(numSteps()) &&
      !evaluateHeldOut(spmd, staging, stagingArena.data(), numSteps()))
    return false;
  return agree(options.trace.empty() || trace.write(tracePath(), error) ||
               fail(error));
}

bool Driver::run() {
  if (!parseOptions(argc, argv, options, error))
    return fail(error);
  if (options.help) {
    if (rank == 0)
      printUsage(out, program.c_str());
    return true;
  }
  if (options.version) {
    if (rank == 0)
      std::fprintf(out, "%s: Loom %s runtime, plan format %u\n", program.c_str(),
                   loom::kLoomVersion, kPlanVersion);
    return true;
  }
  // A collective that waits too long for the others ends the run: another
  // rank died, failed alone or hangs.
  if (comm && numRanks > 1 && options.collectiveTimeout > 0) {
    timedComm = std::make_unique<TimedCommunicator>(*comm, options.collectiveTimeout,
                                                    program, err);
    comm = timedComm.get();
  }
  if (!parsePlans() || !selectPlan() || !checkDevice())
    return false;
  // The CPU kernels use the vector extensions of the CPU they were
  // compiled for: refuse to run them on one without (an illegal
  // instruction, otherwise, somewhere in the first kernel).
  CpuTargetInfo cpuTarget;
  if (executable.cpuTarget && *executable.cpuTarget &&
      !parseCpuTarget(executable.cpuTarget, cpuTarget, error))
    return fail("loom_cpu_target: " + error);
  std::string cpuMismatch =
      cpuMismatchMessage(cpuTarget, missingCpuFeatures(cpuTarget, hostHasCpuFeature));
  if (options.info) {
    if (rank == 0) {
      printPlanInfo(out, whole);
      if (!cpuTarget.cpu.empty())
        std::fprintf(out, "cpu      %s kernels; matmul f32: %s, bf16: %s%s%s\n",
                     cpuTarget.cpu.c_str(), cpuTarget.f32Path.c_str(),
                     cpuTarget.bf16Path.c_str(), cpuMismatch.empty() ? "" : "; cannot run here: ",
                     cpuMismatch.c_str());
      if (spmd.mesh.present) {
        printPartitionedInfo(out, spmd);
        printPipelineInfo(out, spmd, options.schedule);
      }
    }
    return true;
  }
  if (!cpuMismatch.empty() && (!onCuda || options.checkKernels))
    return fail(cpuMismatch);
  bool amxKernels = std::find(cpuTarget.needs.begin(), cpuTarget.needs.end(), "amx-tile") !=
                    cpuTarget.needs.end();
  if (amxKernels && (!onCuda || options.checkKernels) && !enableAmxTiles(error))
    return fail(error);
  if (options.train && whole.optimizer.kind.empty())
    return fail("this executable does not train: build it with loomc --train "
                "(from a script with a train section)");
  if (!options.schedule.empty() && !(multiRank && spmd.pipeline.present) &&
      rank == 0)
    warn("--schedule has no effect: this run is not pipelined (a pipelined "
         "executable pipelines on its mesh's ranks, under mpirun)");
  if (options.train && options.checkKernels)
    return fail("--check-kernels checks one run; drop it to train");
  if (options.generate && !whole.optimizer.kind.empty())
    return fail("generate runs a model's forward, and this executable is a "
                "training step: build the script without --train, and give it "
                "the trained params with --weights CKPT");
  if (options.evaluate && !whole.optimizer.kind.empty())
    return fail("evaluate runs a model's forward, and this executable is a "
                "training step: build the script without --train, and give it "
                "the trained params with --weights CKPT");
  if (options.evaluate && !whole.findScalarOutput("loss"))
    return fail("evaluate needs a forward with a scalar f32 output 'loss' (a "
                "script with a train section, built without --train)");
  train = initialTrainState(whole.optimizer);
  if (!collectFiles(options.inputs, BufferRole::Input, inputFiles) ||
      !collectFiles(options.outputs, BufferRole::Output, outputFiles))
    return false;
  InterruptHandlers handlers(options.train);
  return multiRank ? runRanks() : runSingle();
}

int loom::runtime::runMain(int argc, char **argv, const Executable &executable,
                           std::FILE *out, std::FILE *err) {
  Communicator *comm = executable.communicator;
  std::unique_ptr<Communicator> mpi; // MPI_Finalize when it goes
  if (!comm) {
    // MPI only under a launcher that says there is more than one rank.
    LauncherInfo launcher = detectLauncher();
    if (launcher.present && launcher.size != 1) {
      std::string error;
      if (!openMpi(&argc, &argv, mpi, error)) {
        if (!mpiSupported())
          error += launcher.size > 1
                       ? "; it cannot run on " + std::to_string(launcher.size) +
                             " ranks (run it without mpirun)"
                       : std::string("; it cannot run under an MPI launcher");
        // Every rank fails alike; one message is enough.
        if (launcher.rank <= 0)
          std::fprintf(err, "%s: error: %s\n", programName(argc, argv).c_str(),
                       error.c_str());
        return 1;
      }
      comm = mpi.get();
    }
  }
  bool ok = Driver(argc, argv, executable, comm, out, err).run();
  std::fflush(out);
  return ok ? 0 : 1;
}

int loom::runtime::runMain(int argc, char **argv, const LoomKernel *kernels,
                           const char *planText, std::FILE *out,
                           std::FILE *err) {
  Executable executable;
  executable.kernels = kernels;
  executable.plan = planText;
  return runMain(argc, argv, executable, out, err);
}
