//===- RunDriver.h - One invocation of a compiled executable ---*- C++ -*-===//
//
// Private to runtime/lib/exec: the class behind runMain, its members split
// by concern: Driver.cpp (the plans, the devices, the one- and multi-rank
// runs), DriverFiles.cpp (inputs, params, outputs, the data's batches),
// DriverTraining.cpp (a step's progress, the held-out loss, checkpoints,
// interruption).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_LIB_EXEC_RUNDRIVER_H
#define LOOM_RUNTIME_LIB_EXEC_RUNDRIVER_H

#include "exec/Report.h"
#include "io/File.h"
#include "loom/runtime/Version.h"
#include "loom/runtime/comm/Communicator.h"
#include "loom/runtime/comm/Nccl.h"
#include "loom/runtime/comm/Watchdog.h"
#include "loom/runtime/exec/AssembledOutputs.h"
#include "loom/runtime/exec/Checkpoint.h"
#include "loom/runtime/exec/CpuTarget.h"
#include "loom/runtime/exec/Cuda.h"
#include "loom/runtime/exec/CudaPipeline.h"
#include "loom/runtime/exec/Driver.h"
#include "loom/runtime/exec/Executor.h"
#include "loom/runtime/exec/Generation.h"
#include "loom/runtime/exec/Initializer.h"
#include "loom/runtime/exec/KernelCheck.h"
#include "loom/runtime/exec/PipelineRunner.h"
#include "loom/runtime/exec/Training.h"
#include "loom/runtime/io/Json.h"
#include "loom/runtime/io/Npy.h"
#include "loom/runtime/io/Safetensors.h"
#include "loom/runtime/plan/Layout.h"
#include "loom/runtime/plan/Plan.h"
#include "loom/runtime/support/Hash.h"
#include "loom/runtime/support/Options.h"

#include <algorithm>
#include <chrono>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <unistd.h>

namespace loom::runtime::detail {

/// argv[0] without its directory.
std::string programName(int argc, char **argv);
/// Rewrites a "plan:LINE: ..." error of the partitioned plan as
/// "spmd-plan:LINE: ...".
std::string inSpmdPlan(const std::string &error);

/// While it lives, a training run's SIGINT and SIGTERM finish the step in
/// progress and stop the run (Driver::stopRequested); the previous
/// handlers come back after it (DriverTraining.cpp).
class InterruptScope {
public:
  explicit InterruptScope(bool install);
  ~InterruptScope();
  InterruptScope(const InterruptScope &) = delete;
  InterruptScope &operator=(const InterruptScope &) = delete;

private:
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
    everyone = worldGroup(rank, numRanks);
  }

  /// False after reporting an error.
  bool run();

private:
  /// Reports an error. While every rank fails alike (`uniform`: the command
  /// line, the plans), only rank 0 does; later, the failing rank, naming
  /// itself.
  bool fail(const std::string &message) {
    if (deferFailures) {
      if (deferred.empty())
        deferred = message;
      return false;
    }
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
  /// Everything before the run itself: the command line, the plans, the
  /// device, the files' names; `done` after --help, --version or --info.
  bool startUp(bool &done);
  /// Several ranks: whether every rank started up (a failure's message is
  /// printed here: once if every rank's is the same, else by each failing
  /// rank), runs the same build and was given the same options
  /// (rankSharedOptions); false after reporting.
  bool agreeOnStartUp(bool ok);
  /// Every rank's `mine`, in rank order, over `everyone`.
  bool allGatherText(const std::string &mine, std::vector<std::string> &all);
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
    if (std::string warning = generator.takeWarning(); !warning.empty())
      warn(warning);
    std::fputc(static_cast<unsigned char>(byte), out);
    // A closed pipe (`generate ... | head -c 100`) ends the generation,
    // whose text nothing reads any more (it had sampled every token first).
    if (std::fflush(out) != 0 || std::ferror(out))
      return fail(std::string("cannot write the standard output: ") +
                  std::strerror(errno ? errno : EIO));
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
  /// As agree, for a failure not yet reported (its message in `error`):
  /// when every rank failed with the same message (no driver on any node),
  /// rank 0 says it once; otherwise each failing rank, naming itself.
  bool agreeOrReport(bool ok) { return agreeOrReport(ok, world); }
  bool agreeOrReport(bool ok, const CommGroup &group);
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
  /// While the ranks start up: fail() keeps the first message in
  /// `deferred` for agreeOnStartUp, which reports it.
  bool deferFailures = false;
  std::string deferred;
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
  /// Every rank, before there is a plan's mesh (the start-up agreement).
  CommGroup everyone;
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
  /// The tokens of a step's (or a held-out batch's) run: the elements of
  /// the whole tokens input, every microbatch's; 0 without one.
  uint64_t tokensPerRun() const {
    const PlanBuffer *tokens = whole.findBuffer("tokens");
    return tokens ? tokens->globalElements * whole.optimizer.microbatches : 0;
  }
  /// "loss L over N batches (X tokens), perplexity P": the mean of
  /// evaluation.lossSum (evaluate, train --eval-data).
  std::string evalSummary() const {
    double mean = evaluation.lossSum / static_cast<double>(evaluation.batches);
    char text[160];
    std::snprintf(text, sizeof(text), "loss %.7g over %llu batches (%llu tokens), perplexity %.5g",
                  mean, static_cast<unsigned long long>(evaluation.batches),
                  static_cast<unsigned long long>(tokensPerRun() * evaluation.batches),
                  std::exp(mean));
    return text;
  }
  /// evaluate's last line.
  void printEvalSummary() {
    std::fprintf(out, "eval %s\n", evalSummary().c_str());
    std::fflush(out);
  }
  /// --log: one JSON object a line; false after reporting a failed write.
  bool writeLog(const Json &line) {
    std::string text = dumpJson(line) + "\n";
    if (!writeAll(log.get(), text.data(), text.size()) || std::fflush(log.get()))
      return fail(writeError(options.log));
    return true;
  }
  uint64_t resumedAt = 0; // the step this run starts after (--resume)
};

} // namespace loom::runtime::detail

#endif // LOOM_RUNTIME_LIB_EXEC_RUNDRIVER_H
