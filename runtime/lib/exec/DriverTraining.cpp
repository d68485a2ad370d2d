//===- DriverTraining.cpp - A training run's steps, held-out loss, stops --===//
//
// Driver's members for `./model train` beyond the loop itself: the step's
// progress line and log, the held-out loss (--eval-data), checkpoints and
// what SIGINT/SIGTERM do (RunDriver.h).
//
//===----------------------------------------------------------------------===//

#include "exec/RunDriver.h"

#include <csignal>
#include <cstring>
#include <mutex>

using namespace loom::runtime;

namespace loom::runtime::detail {

namespace {
/// Set by the first SIGINT, SIGTERM or SIGUSR1 of a training run: the step
/// in progress finishes, its checkpoint is written (with --save) and the
/// run ends; a second signal ends the process at once. (mpirun, sent
/// SIGTERM or SIGINT, kills the ranks a few seconds later, whatever they
/// are doing; it passes SIGUSR1 on and waits.)
volatile std::sig_atomic_t interruptSignal = 0;
extern "C" void onInterrupt(int signal) {
  if (interruptSignal) {
    std::signal(signal, SIG_DFL);
    std::raise(signal);
    return;
  }
  interruptSignal = signal;
}

// Ranks that are threads of one process (the unit tests) share the
// handlers: the first scope installs them, the last puts the previous back.
std::mutex handlersMutex;
int handlersUsers = 0;
void (*previousInt)(int) = SIG_DFL;
void (*previousTerm)(int) = SIG_DFL;
void (*previousUsr1)(int) = SIG_DFL;
} // namespace

InterruptScope::InterruptScope(bool install) : installed(install) {
  if (!installed)
    return;
  std::lock_guard<std::mutex> lock(handlersMutex);
  if (handlersUsers++ == 0) {
    interruptSignal = 0;
    previousInt = std::signal(SIGINT, onInterrupt);
    previousTerm = std::signal(SIGTERM, onInterrupt);
    previousUsr1 = std::signal(SIGUSR1, onInterrupt);
  }
}

InterruptScope::~InterruptScope() {
  if (!installed)
    return;
  std::lock_guard<std::mutex> lock(handlersMutex);
  if (--handlersUsers == 0) {
    std::signal(SIGINT, previousInt);
    std::signal(SIGTERM, previousTerm);
    std::signal(SIGUSR1, previousUsr1);
  }
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
  evaluation.lossSum = 0;
  // A held-out loss is the model's, dropping nothing (torch's eval()).
  executor.setDropoutOff(true);
  cuda.setDropoutOff(true);
  struct DropoutOn {
    Driver &driver;
    ~DropoutOn() {
      driver.executor.setDropoutOff(false);
      driver.cuda.setDropoutOff(false);
    }
  } restore{*this};
  for (uint64_t batch = 1; batch <= evaluation.batches; ++batch) {
    auto place = [&](uint64_t microbatch) {
      // On one rank the step's temps may have overwritten the other inputs'
      // bytes after their last use, as the training step's did: read them
      // again (several ranks take theirs from the staging arena, which no
      // kernel writes).
      if (!multiRank && microbatch == 0 && !loadInputs(stage, stageArena))
        return false;
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
    evaluation.lossSum += loss;
  }
  // The next step's tokens/s counts from here, not from the step before.
  stepEnd = std::chrono::steady_clock::now();
  if (rank != 0)
    return true;
  double mean = evaluation.lossSum / static_cast<double>(evaluation.batches);
  // Under the progress bar, over the bar's line (the next step draws it
  // again below).
  bool overBar = drawsProgressBar() && step != numSteps();
  std::fprintf(out, "%seval after step %llu: %s%s\n", overBar ? "\r" : "",
               static_cast<unsigned long long>(step), evalSummary().c_str(),
               overBar ? "\033[K" : "");
  std::fflush(out);
  return !log || writeLog({{"step", step},
                           {"eval_loss", std::isfinite(mean) ? Json(mean) : Json()},
                           {"eval_tokens", tokensPerRun() * evaluation.batches}});
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

/// The lines of the JSONL log at `path` whose "step" is at most `step` (a
/// file that cannot be read has none).
static std::string logLinesUpTo(const std::string &path, uint64_t step) {
  std::string text, kept, ignored;
  FilePtr file;
  uint64_t size = 0;
  if (openForReading(path, file, size, ignored)) {
    text.resize(size);
    if (!readAt(file.get(), 0, text.data(), size))
      text.clear();
  }
  for (size_t at = 0; at < text.size();) {
    size_t end = text.find('\n', at);
    if (end == std::string::npos)
      break; // a torn last line (the run was killed while writing it)
    Json line;
    if (parseJson(std::string_view(text).substr(at, end - at), line, ignored) &&
        line.is_object() && line.contains("step") && line["step"].is_number_unsigned() &&
        line["step"].get<uint64_t>() <= step)
      kept.append(text, at, end + 1 - at);
    at = end + 1;
  }
  return kept;
}

bool Driver::openLog() {
  if (options.log.empty() || rank != 0)
    return true;
  // A resumed run continues its log: it keeps the lines of the steps up to
  // the checkpoint's (a run stopped after its last checkpoint logged more)
  // and appends its own.
  std::string kept = options.resume.empty() ? std::string() : logLinesUpTo(options.log, train.step);
  if (!openForWriting(options.log, log, error))
    return fail(error);
  return kept.empty() || writeAll(log.get(), kept.data(), kept.size()) ||
         fail(writeError(options.log));
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
  uint64_t perStep = tokensPerRun();
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
  return writeLog({{"step", step},
                   {"loss", number(hasLoss, loss)},
                   {"lr", lr},
                   {"grad_norm", number(hasNorm, gradNorm)},
                   {"loss_scale", lossScale},
                   {"skipped", !applied},
                   {"tokens_per_s", tokensPerSecond}});
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
  stepEnd = std::chrono::steady_clock::now(); // as after a held-out loss
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

} // namespace loom::runtime::detail
