//===- Executor.h - Running a plan's steps on the CPU -----------*- C++ -*-===//

#ifndef LOOM_RUNTIME_EXEC_EXECUTOR_H
#define LOOM_RUNTIME_EXEC_EXECUTOR_H

#include "loom/runtime/comm/Communicator.h"
#include "loom/runtime/plan/KernelABI.h"
#include "loom/runtime/plan/Plan.h"
#include "loom/runtime/support/Trace.h"

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace loom::runtime {

/// Finds each of the plan's kernels in `table` (terminated by a null name).
/// Fails, naming the plan line, when one is missing or takes a different
/// number of buffers. `bound[i]` is the entry for plan.kernels[i].
bool bindKernels(const Plan &plan, const LoomKernel *table,
                 std::vector<const LoomKernel *> &bound, std::string &error);

/// One 64-byte-aligned, zero-filled block of memory.
class Arena {
public:
  Arena() = default;
  Arena(const Arena &) = delete;
  Arena &operator=(const Arena &) = delete;
  ~Arena();

  /// Allocates `bytes` (at least 64); false with a message if out of memory.
  bool allocate(uint64_t bytes, std::string &error);
  char *data() const { return base; }
  uint64_t size() const { return bytes; }

private:
  void *block = nullptr; // what calloc returned
  char *base = nullptr;  // the first 64-byte boundary in it
  uint64_t bytes = 0;
};

/// Runs a parsed plan: binds its kernels, owns its arena, and calls the
/// kernels step by step with pointers into the arena. A partitioned plan
/// runs as one rank of a Communicator, its collective steps between the
/// kernel steps.
class Executor {
public:
  /// Binds the plan's kernels to `table` (see bindKernels). `plan` must
  /// outlive the executor.
  bool bind(const Plan &plan, const LoomKernel *table, std::string &error);
  /// The ranks a plan with collectives runs on (before allocate); its size
  /// must be the mesh's. Must outlive the executor.
  void setCommunicator(Communicator *communicator) { comm = communicator; }
  /// Allocates the arena and the collectives' scratch memory (after bind),
  /// so that a caller can validate everything else before committing the
  /// memory. Fails for a plan with collectives without a fitting
  /// communicator.
  bool allocate(std::string &error);
  /// bind, then allocate.
  bool init(const Plan &plan, const LoomKernel *table, std::string &error);

  /// The arena bytes of buffer `id`.
  char *buffer(unsigned id) const;
  char *arena() const { return memory.data(); }

  /// Runs every step in plan order; with `trace`, records one event per
  /// step. Fails only in a collective (the communicator's error, with the
  /// plan line).
  bool run(TraceRecorder *trace, std::string &error) {
    return runSteps(0, plan->steps.size(), 0, trace, error);
  }
  /// Runs steps [begin, end) as run does, an accumulate step as part of
  /// microbatch `microbatch` (its first sets the mean's sum, the others
  /// add to it, the last divides it by the number of microbatches).
  bool runSteps(size_t begin, size_t end, uint64_t microbatch,
                TraceRecorder *trace, std::string &error);
  /// --check-numerics: after every kernel step, look for NaN and Inf in
  /// what it wrote. The first step that wrote one is recorded (and the run
  /// goes on, so that every rank reaches its collectives).
  void setCheckNumerics(bool on) { checkNumerics = on; }
  /// A held-out loss: runSteps gives the dropouts microbatch -1, where
  /// they keep everything (fillDropoutMicrobatch).
  void setDropoutOff(bool off) { dropoutOff = off; }
  /// The first non-finite step's description since the last call, or
  /// empty; clears it.
  std::string takeNumericsFailure() {
    std::string first = std::move(numericsFailure);
    numericsFailure.clear();
    return first;
  }
  /// Runs kernel step `index` alone (--check-kernels runs the steps one by
  /// one on both devices).
  void runKernelStep(size_t index);
  /// Per step, what it reads and writes (analyzeStepAccess; after bind).
  const std::vector<StepAccess> &stepAccess() const { return access; }
  /// The communicator the collectives run on (null on one rank).
  Communicator *communicator() const { return comm; }

private:
  void accumulate(const PlanStep &step, uint64_t microbatch);
  void checkFinite(size_t index);

  const Plan *plan = nullptr;
  std::vector<const LoomKernel *> kernels;
  std::vector<StepAccess> access;
  std::vector<void *> args; // of the step running
  std::vector<char *> collectiveBuffers; // of the collective running
  Arena memory;
  Communicator *comm = nullptr;
  bool checkNumerics = false;
  bool dropoutOff = false;
  /// opt.dropout_microbatch, found once: runSteps writes it per call (a
  /// pipeline's, per step).
  const PlanBuffer *dropoutKey = nullptr;
  std::string numericsFailure;
  std::vector<CommGroup> groups; // per step; collective steps only
  Arena scratch;
};

} // namespace loom::runtime

#endif // LOOM_RUNTIME_EXEC_EXECUTOR_H
