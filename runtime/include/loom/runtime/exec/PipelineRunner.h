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
#include "loom/runtime/plan/Schedule.h"

#include <functional>
#include <map>

namespace loom::runtime {

/// The values of a pipelined plan that cross sections: per step, those to
/// put back before it and those to save after it; per buffer, whether it
/// crosses (read in another section than its writer's, or carried).
struct PipelineValues {
  std::vector<std::vector<unsigned>> restores, saves;
  std::vector<bool> crosses;
};
PipelineValues analyzePipelineValues(const Plan &plan,
                                     const std::vector<StepAccess> &access);
/// Per stage, the bytes one microbatch's saved and received values take on
/// its rank: the activations that stage holds per microbatch in flight.
std::vector<uint64_t> heldBytesPerStage(const Plan &plan);

/// Where one pipeline rank keeps the values of its microbatches in flight:
/// one block allocated before the first step, of `slots` slots of
/// `slotBytes`. Each value the rank saves or receives has a fixed offset in
/// a slot, and each microbatch the slot that the schedule's order gives it:
/// the lowest free one at its first step on the rank, freed after its last
/// (the last microbatch's lasts until the update, which reads it).
struct InFlightLayout {
  static constexpr uint64_t kNone = ~uint64_t(0);
  std::vector<uint64_t> offset; // per buffer; kNone: never held here
  uint64_t slotBytes = 0;
  unsigned slots = 0;
  std::vector<unsigned> slotOf; // per microbatch
  uint64_t bytes() const { return slotBytes * slots; }
};
/// The layout for the rank at `coordinate` of the pipeline axis running
/// `order` (its stages are those ownerOf gives it).
InFlightLayout planInFlight(const Plan &plan, const PipelineValues &values,
                            const Schedule &order, unsigned coordinate);

class PipelineRunner {
public:
  /// After the executor's allocate: this rank's stages and peers, and its
  /// schedule for `microbatches` microbatches (verified): the plan's, or
  /// `schedule` when not empty. `train` is false for a forward-only run,
  /// which pipelines its forwards alone.
  bool prepare(const Plan &plan, Executor &executor, uint64_t microbatches,
               bool train, const std::string &schedule, std::string &error);
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

private:
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
  void hold(uint64_t microbatch, unsigned id, const char *data);
  /// Whether `microbatch` holds buffer `id`, and where.
  bool holds(uint64_t microbatch, unsigned id) const {
    return present[microbatch * plan->buffers.size() + id];
  }
  char *slotData(uint64_t microbatch, unsigned id) const {
    return pool.data() + inFlight.slotOf[microbatch] * inFlight.slotBytes +
           inFlight.offset[id];
  }
  void restore(uint64_t microbatch, unsigned id);
  /// Forgets every value of `microbatch` (its slot is free again).
  void release(uint64_t microbatch);
  /// A `send` or `recv` event that began at `before`, with `--trace`.
  void traceMessage(TraceRecorder *trace, const char *kind, unsigned peer,
                    std::chrono::steady_clock::time_point before);

  const Plan *plan = nullptr;
  Executor *executor = nullptr;
  Communicator *comm = nullptr;
  Schedule order;
  bool train = true;
  unsigned coordinate = 0; // this rank's on the pipeline axis
  std::vector<unsigned> coordinates;
  /// Per step: the buffers to put back before it and to save after it.
  std::vector<std::vector<unsigned>> restores, saves;
  /// Per buffer: whether some step or carry reads it in another section.
  std::vector<bool> crosses;
  /// The values in flight: their layout, its memory, and per microbatch
  /// and buffer whether the microbatch holds it now.
  InFlightLayout inFlight;
  Arena pool;
  std::vector<bool> present;
  /// Per microbatch, its inputs (all are placed before the schedule).
  std::vector<std::map<unsigned, std::vector<char>>> inputs;
  /// A carry's message, as large as the largest this rank sends or
  /// receives.
  std::vector<char> message;
  /// Each output, the rank of the pipeline axis it is broadcast from, and
  /// the param it updates (-1: none).
  struct OutputSync {
    unsigned id = 0, root = 0;
    long param = -1;
  };
  std::vector<OutputSync> outputs;
  std::chrono::steady_clock::time_point start;
};

} // namespace loom::runtime

#endif // LOOM_RUNTIME_EXEC_PIPELINERUNNER_H
