//===- PipelineRunner.h - One rank's stages of a pipelined plan -*- C++ -*-===//
//
// A pipelined plan (a `pipeline` record) is one program per stage: each
// step belongs to a section (a stage's forward, backward or weight
// gradient, or the update). A rank runs the sections of its stages only, in
// the order its pipeline schedule gives (Schedule.h): per microbatch, the
// forward, then, interleaved with other microbatches, the backward; then
// the update once. Between stages the `carry` buffers move by send and
// receive.
//
// The arena was planned for the whole program run in plan order, once. A
// rank runs another order (microbatches interleave), so a value that one
// section writes and another reads is kept per microbatch beside the
// arena: saved right after the step that writes it (or received), and put
// back right before each step that reads it. Within a section, steps run
// in plan order, and the arena's lifetimes hold. These saved values are
// the activations a schedule keeps in flight. Their memory is planned
// before the first step too (InFlightLayout): one slot per microbatch in
// flight at the schedule's peak, each value at a fixed offset in a slot.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_EXEC_PIPELINERUNNER_H
#define LOOM_RUNTIME_EXEC_PIPELINERUNNER_H

#include "loom/runtime/exec/Executor.h"
#include "loom/runtime/plan/InFlight.h"
#include "loom/runtime/plan/Schedule.h"

#include <chrono>
#include <functional>
#include <map>
#include <memory>

namespace loom::runtime {

/// Where a pipeline rank's buffers live and its steps run: the CPU
/// executor's arena (CpuPipelineDevice), or a GPU's (CudaPipelineDevice,
/// with NCCL). The runner only moves bytes between addresses of this
/// memory, and never reads them itself.
class PipelineDevice {
public:
  virtual ~PipelineDevice();
  /// Buffer `id`'s bytes in the device's memory.
  virtual char *buffer(unsigned id) = 0;
  /// Buffer `id`'s bytes in the host arena, where the driver puts each
  /// microbatch's inputs.
  virtual const char *hostBuffer(unsigned id) = 0;
  /// `bytes` of device memory that live as long as the device.
  virtual bool allocate(uint64_t bytes, char *&memory, std::string &error) = 0;
  /// Copies within the device's memory, and from the host into it.
  virtual bool copy(char *to, const char *from, uint64_t bytes,
                    std::string &error) = 0;
  virtual bool upload(char *to, const char *host, uint64_t bytes,
                      std::string &error) = 0;
  /// Runs plan step `index` (a kernel or a collective among the stage's
  /// ranks) as part of `microbatch`.
  virtual bool runStep(size_t index, uint64_t microbatch, TraceRecorder *trace,
                       std::string &error) = 0;
  /// Point-to-point with world rank `peer` (a send does not wait for its
  /// receive), and a broadcast over the pipeline axis, on device memory.
  virtual bool send(unsigned peer, const char *data, uint64_t bytes,
                    std::string &error) = 0;
  virtual bool recv(unsigned peer, char *data, uint64_t bytes,
                    std::string &error) = 0;
  virtual bool broadcast(const CommGroup &group, unsigned root, char *data,
                         uint64_t bytes, std::string &error) = 0;
  /// Around each run: a GPU takes the params and the step's inputs from
  /// the host arena first and gives the outputs back last.
  virtual bool begin(std::string &error) = 0;
  virtual bool end(std::string &error) = 0;
};

/// The CPU's: the executor's arena, its steps, and `comm`'s messages.
class CpuPipelineDevice : public PipelineDevice {
public:
  CpuPipelineDevice(Executor &executor, Communicator &comm)
      : executor(executor), comm(comm) {}
  char *buffer(unsigned id) override { return executor.buffer(id); }
  const char *hostBuffer(unsigned id) override { return executor.buffer(id); }
  bool allocate(uint64_t bytes, char *&memory, std::string &error) override;
  bool copy(char *to, const char *from, uint64_t bytes, std::string &) override;
  bool upload(char *to, const char *host, uint64_t bytes,
              std::string &error) override {
    return copy(to, host, bytes, error);
  }
  bool runStep(size_t index, uint64_t microbatch, TraceRecorder *trace,
               std::string &error) override {
    return executor.runSteps(index, index + 1, microbatch, trace, error);
  }
  bool send(unsigned peer, const char *data, uint64_t bytes,
            std::string &error) override {
    return comm.send(peer, data, bytes, error);
  }
  bool recv(unsigned peer, char *data, uint64_t bytes,
            std::string &error) override {
    return comm.recv(peer, data, bytes, error);
  }
  bool broadcast(const CommGroup &group, unsigned root, char *data,
                 uint64_t bytes, std::string &error) override {
    return comm.broadcast(group, root, data, bytes, error);
  }
  bool begin(std::string &) override { return true; }
  /// Sends complete (MPI_Isend's copies) before the step ends.
  bool end(std::string &error) override { return comm.flushSends(error); }

private:
  Executor &executor;
  Communicator &comm;
  std::vector<std::unique_ptr<Arena>> blocks;
};

class PipelineRunner {
public:
  /// After the executor's allocate: this rank's stages and peers, and its
  /// schedule for `microbatches` microbatches (verified): the plan's, or
  /// `schedule` when not empty. `train` is false for a forward-only run,
  /// which pipelines its forwards alone. `device` runs the steps and moves
  /// the bytes; `comm` is the run's world (its rank and groups). Both must
  /// outlive the runner.
  bool prepare(const Plan &plan, PipelineDevice &device, Communicator &comm,
               uint64_t microbatches, bool train, const std::string &schedule,
               std::string &error);
  /// Whether prepare's failure was its schedule's (or the rank count's):
  /// the same on every rank.
  bool failedOnEveryRank() const { return scheduleFailed; }
  /// One run: `place(mb)`, a collective over every rank, puts microbatch
  /// mb's inputs in the arena, for every mb first; then the schedule, the
  /// update, and the outputs other than params' new values, which every
  /// rank ends with (broadcast over the pipeline axis from the stage that
  /// computed them).
  bool run(const std::function<bool(uint64_t)> &place, TraceRecorder *trace,
           std::string &error);
  /// The params' new values and the params (after the updates) onto every
  /// rank, from their stages: before anything reads them whole (a
  /// checkpoint, the outputs at the end). Collective over every rank.
  bool syncUpdates(std::string &error) { return syncOutputs(true, error); }
  /// A forward of several microbatches: after run, microbatch
  /// `microbatch`'s outputs into their buffers on every rank (broadcast
  /// from the stage that computed them; on a GPU, copied back to the host
  /// arena too). Collective over the pipeline axis.
  bool putOutputs(uint64_t microbatch, std::string &error);

private:
  bool scheduleFailed = false;
  bool runSection(StepPhase phase, unsigned stage, uint64_t microbatch,
                  TraceRecorder *trace, std::string &error);
  bool runStep(size_t index, uint64_t microbatch, TraceRecorder *trace,
               std::string &error);
  bool sendCarry(const std::vector<unsigned> &carry, unsigned toStage,
                 uint64_t microbatch, TraceRecorder *trace, std::string &error);
  bool recvCarry(const std::vector<unsigned> &carry, unsigned fromStage,
                 uint64_t microbatch, TraceRecorder *trace, std::string &error);
  bool syncOutputs(bool updates, std::string &error);
  /// The world rank holding stage `stage` with this rank's other
  /// coordinates.
  unsigned peerOf(unsigned stage) const;
  bool ownsStage(unsigned stage) const {
    return stage % order.ranks == coordinate;
  }
  /// Keeps buffer `id`'s bytes at `data` for `microbatch`, in its slot.
  bool hold(uint64_t microbatch, unsigned id, const char *data,
            std::string &error);
  /// Whether `microbatch` holds buffer `id`, and where.
  bool holds(uint64_t microbatch, unsigned id) const {
    return present[microbatch * plan->buffers.size() + id];
  }
  char *slotData(uint64_t microbatch, unsigned id) const {
    return pool + inFlight.at(id, static_cast<unsigned>(microbatch));
  }
  bool restore(uint64_t microbatch, unsigned id, std::string &error);
  /// Forgets every value of `microbatch` (its slot is free again).
  void release(uint64_t microbatch);
  /// A `send` or `recv` event of `bytes` that began at `before`, with
  /// `--trace`: a microbatch's carry, or the update's transfer step `step`.
  void traceMessage(TraceRecorder *trace, const char *kind, unsigned peer,
                    uint64_t bytes, std::optional<uint64_t> microbatch,
                    std::optional<unsigned> step,
                    std::chrono::steady_clock::time_point before);

  const Plan *plan = nullptr;
  PipelineDevice *device = nullptr;
  Communicator *comm = nullptr;
  Schedule order;
  bool train = true;
  unsigned coordinate = 0; // this rank's on the pipeline axis
  std::vector<unsigned> coordinates;
  /// Per step: the buffers to put back before it and to save after it.
  std::vector<std::vector<unsigned>> restores, saves;
  /// Per section (phase, stage) of one stage: its steps, in plan order.
  std::map<std::pair<StepPhase, unsigned>, std::vector<size_t>> sections;
  /// Per section, the inputs its steps read.
  std::map<std::pair<StepPhase, unsigned>, std::vector<unsigned>> sectionInputs;
  /// Per buffer: whether some step or carry reads it in another section.
  std::vector<bool> crosses;
  /// The values in flight: their layout, its memory, and per microbatch
  /// and buffer whether the microbatch holds it now.
  InFlightLayout inFlight;
  char *pool = nullptr; // the device's
  std::vector<bool> present;
  /// Per microbatch, its inputs (all are placed before the schedule).
  std::vector<std::map<unsigned, std::vector<char>>> inputs;
  /// A carry's message in device memory, as large as the largest this
  /// rank sends or receives.
  char *message = nullptr;
  /// Each output, the rank of the pipeline axis it is broadcast from, and
  /// the param it updates (-1: none).
  struct OutputSync {
    unsigned id = 0, root = 0;
    long param = -1;
  };
  std::vector<OutputSync> outputs;
  /// A forward of several microbatches keeps each one's outputs until
  /// putOutputs: per step, the outputs it writes on this rank; per output,
  /// its offset in a microbatch's part of `kept` (of `keptBytes`).
  std::vector<std::vector<unsigned>> keeps;
  std::map<unsigned, uint64_t> keptOffset;
  uint64_t keptBytes = 0;
  char *kept = nullptr; // the device's
  bool keepsOutputs() const { return !train && order.microbatches > 1; }
  char *keptData(uint64_t microbatch, unsigned id) const {
    return kept + microbatch * keptBytes + keptOffset.at(id);
  }
};

} // namespace loom::runtime

#endif // LOOM_RUNTIME_EXEC_PIPELINERUNNER_H
