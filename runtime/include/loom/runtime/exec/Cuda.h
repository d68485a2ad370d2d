//===- Cuda.h - Running a plan's GPU launches with the CUDA driver -*- C++ -*-//
//
// The CUDA executor of `--device cuda`. The driver (libcuda.so.1) is loaded
// with dlopen when a run asks for it, never linked: compiled executables must
// start, and run with --device cpu, on machines without a GPU or a driver.
// The executor is compiled only when cuda.h was found at build time (for the
// driver API's types); otherwise cudaSupported() is false and open() fails.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_EXEC_CUDA_H
#define LOOM_RUNTIME_EXEC_CUDA_H

#include "loom/runtime/plan/Plan.h"
#include "loom/runtime/support/Trace.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace loom::runtime {

/// Whether this runtime was built with the CUDA executor.
bool cudaSupported();

/// Whether a device of compute capability `major`.`minor` runs `image`: a
/// cubin for sm_XYa (or PTX for it) only on X.Y; a cubin for sm_XY or
/// sm_XYf on X.Z with Z >= Y; PTX for sm_XYf likewise; PTX for sm_XY on
/// X.Y and every later compute capability (the driver compiles it).
bool gpuImageRunsOn(const PlanGpuImage &image, unsigned major, unsigned minor);

/// The compute capabilities gpuImageRunsOn accepts, in words, e.g.
/// "compute capability 9.0 only".
std::string gpuImageRequirement(const PlanGpuImage &image);

/// The collective steps of a partitioned plan on the device, which the
/// CUDA executor runs in plan order with its launches (NcclCollectives in
/// Nccl.h).
class CudaCollectives {
public:
  virtual ~CudaCollectives();
  /// Called by CudaExecutor::open once the device's context is current on
  /// the calling thread and the device arena is allocated at `arena`.
  virtual bool prepare(uint64_t arena, std::string &error) = 0;
  /// Queues collective step `step` of the plan on the default stream, after
  /// the launches of the steps before it.
  virtual bool run(size_t step, std::string &error) = 0;
  /// Called after the host has waited for everything queued so far, the
  /// collectives included, to finish (a watchdog stops its clock).
  virtual void drained() {}
};

/// Runs a plan's launches on a CUDA device with one device arena. Usage:
/// open (everything that can fail before the host has done any work), then
/// run with the host arena holding the initialized params and the inputs.
class CudaExecutor {
public:
  CudaExecutor();
  ~CudaExecutor();
  CudaExecutor(const CudaExecutor &) = delete;
  CudaExecutor &operator=(const CudaExecutor &) = delete;

  /// Before open, for one rank of a partitioned plan: the rank's index
  /// among the ranks on its node (open takes device localRank % the number
  /// of devices instead of device 0), and what runs the plan's collective
  /// steps (open refuses a plan with a mesh without it). `collectives` must
  /// outlive the executor's runs.
  void setRank(unsigned localRank, CudaCollectives *collectives) {
    this->localRank = localRank;
    this->collectives = collectives;
  }

  /// Loads the driver `driverLibrary` (dlopen), initializes it, takes
  /// device 0 (see setRank) and its primary context, checks the image's
  /// architecture against the device, loads the `imageSize` bytes of `image`,
  /// finds the function of every launch (and, with a driver that can tell,
  /// checks the launch's arguments against its parameters), allocates the
  /// device arena and prepares the collectives. `plan` must outlive the
  /// executor. False with a message naming the failing CUDA call and its error.
  bool open(const Plan &plan, const unsigned char *image, uint64_t imageSize,
            const char *driverLibrary, std::string &error);

  /// Zeroes the device arena, copies the params and inputs from `hostArena`
  /// (laid out as the plan says) to their offsets, runs every step in order
  /// (its launches, or its collective), synchronizes and copies the outputs
  /// back to their offsets in `hostArena`. With `trace`, adds one event per
  /// launch and per collective, timed with CUDA events.
  bool run(char *hostArena, TraceRecorder *trace, std::string &error);

  // Step by step (--check-kernels), after open.

  /// run's first part: zeroes the device arena and copies the params and
  /// inputs from `hostArena`.
  bool upload(char *hostArena, std::string &error);
  /// Copies `buffer`'s bytes from `host` to its offset in the device arena.
  bool copyToDevice(const PlanBuffer &buffer, const char *host,
                    std::string &error);
  /// Copies `buffer`'s bytes from the device arena to `host`.
  bool copyToHost(const PlanBuffer &buffer, char *host, std::string &error);
  /// Runs the launches of plan step `step` (a kernel step) and synchronizes.
  bool runStep(size_t step, std::string &error);

  // A pipelined run's sections, step by step on the default stream
  // (CudaPipelineDevice), after upload.

  /// The device address of `buffer` in the arena.
  uint64_t address(const PlanBuffer &buffer) const;
  /// Copies `bytes` from `host` to device address `device`.
  bool copyToDeviceAt(uint64_t device, const char *host, uint64_t bytes,
                      std::string &error);
  /// Queues plan step `step` (its launches, its collective, or, for an
  /// accumulate step, the runtime's loom_accumulate kernel as part of
  /// microbatch `microbatch`) without waiting for it.
  bool queueStep(size_t step, uint64_t microbatch, std::string &error);
  /// Waits for everything queued, the collectives included, and copies the
  /// outputs back to their offsets in `hostArena`.
  bool finish(char *hostArena, std::string &error);

  // Training (`./model train --device cuda`): the params and the optimizer
  // state stay on the device between steps.
  /// From now on run zeroes the arena and uploads the params only the
  /// first time, then only the inputs, and copies back every output but
  /// those in `deviceOnly` (ids of the update outputs nobody asked for).
  void keepParamsOnDevice(const std::vector<uint32_t> &deviceOnly);
  /// The optimizer's step on the device: copies each update's output into
  /// its param, for the params `holds` says are this rank's.
  bool applyUpdates(const std::function<bool(const PlanBuffer &)> &holds,
                    std::string &error);
  /// Copies the params from the device to their offsets in `hostArena`
  /// (before a checkpoint is written).
  bool downloadParams(char *hostArena, std::string &error);
  /// A training step in microbatches, a part at a time: queues plan steps
  /// [begin, end) as part of microbatch `microbatch` (an `accumulate` step
  /// as a launch of the runtime's loom_accumulate kernel: the first
  /// microbatch sets the mean's sum, the others add to it, the last
  /// divides it). A part from step 0 starts a microbatch: its inputs go
  /// from `hostArena` to the device first (with the params, the first
  /// time, as run does). finish() ends the step. No trace events.
  bool runSteps(char *hostArena, size_t begin, size_t end, uint64_t microbatch,
                std::string &error);
  /// As Executor::setDropoutOff (the key goes up with a microbatch's
  /// inputs, from step 0).
  void setDropoutOff(bool off) { dropoutOff = off; }
  /// The inputs from `hostArena` to the device: only them with
  /// `inputsOnly` or once the params live there (training), else every
  /// param and input into a cleared arena (upload).
  bool uploadInputs(char *hostArena, bool inputsOnly, std::string &error);

  /// After open: "NAME (compute capability X.Y)".
  std::string deviceDescription() const;

private:
  struct State;
  std::unique_ptr<State> state;
  bool dropoutOff = false;
  unsigned localRank = 0;
  CudaCollectives *collectives = nullptr;
};

} // namespace loom::runtime

#endif // LOOM_RUNTIME_EXEC_CUDA_H
