//===- Schedule.h - Pipeline schedules: per-rank steps, verified --*- C++ -*-===//
//
// A pipeline schedule is data: for each rank of the pipeline axis, the
// ordered steps it runs for one training step of M microbatches over S
// (virtual) stages. The generators build GPipe, 1F1B, Megatron's
// interleaved 1F1B and zero-bubble (ZB-H1) orders; the verifier proves a
// schedule complete, in dependency order, matched (every send has its
// receive) and free of deadlock, by running all ranks abstractly with
// non-blocking sends and blocking receives; the simulator gives its
// timeline, bubble and activation memory under per-stage costs.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_PLAN_SCHEDULE_H
#define LOOM_RUNTIME_PLAN_SCHEDULE_H

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::runtime {

enum class ScheduleKind : uint8_t { GPipe, OneFOneB, Interleaved, ZeroBubble };

/// "gpipe", "1f1b", "interleaved", "zero_bubble".
const char *scheduleKindName(ScheduleKind kind);
bool parseScheduleKind(std::string_view text, ScheduleKind &kind);

/// What a step does. Forward, Backward and WeightGrad compute stage
/// `stage` of microbatch `microbatch` on the stage's rank; a zero-bubble
/// schedule splits the backward into Backward (the input gradient) and
/// WeightGrad (the weight gradient). A send or receive moves the output of
/// stage `stage` (an activation, to stage + 1) or its input gradient (to
/// stage - 1) between this rank and `peer`.
enum class PipeOp : uint8_t {
  Forward,
  Backward,
  WeightGrad,
  SendActivation,
  RecvActivation,
  SendGradient,
  RecvGradient
};

/// "forward", "backward", "weight", "send-act", "recv-act", "send-grad",
/// "recv-grad".
const char *pipeOpName(PipeOp op);

struct PipeStep {
  PipeOp op = PipeOp::Forward;
  unsigned microbatch = 0;
  unsigned stage = 0;
  unsigned peer = 0; // sends and receives only
};

struct Schedule {
  ScheduleKind kind = ScheduleKind::OneFOneB;
  unsigned ranks = 1;        // the pipeline axis's size
  unsigned stages = 1;       // virtual stages, a multiple of ranks
  unsigned microbatches = 1;
  /// Per rank, in order.
  std::vector<std::vector<PipeStep>> steps;

  /// Stages are dealt round-robin: rank r holds r, r + ranks, ...
  unsigned ownerOf(unsigned stage) const { return stage % ranks; }
  /// Virtual stages per rank.
  unsigned virtualStages() const { return stages / ranks; }
  /// Whether the backward is split into input and weight gradients.
  bool splitsBackward() const { return kind == ScheduleKind::ZeroBubble; }
};

/// The largest schedule built or read: ranks (the text form's limit), and
/// stages times microbatches (each a few steps in memory).
constexpr unsigned kMaxScheduleRanks = 4096;
constexpr uint64_t kMaxScheduleCells = uint64_t(1) << 22;

/// Builds the schedule `kind` of `microbatches` microbatches over `stages`
/// stages on `ranks` ranks. GPipe, 1F1B and zero-bubble run one stage per
/// rank; interleaved needs stages = v ranks and microbatches a multiple of
/// ranks (Megatron's conditions). False with a message otherwise.
bool buildSchedule(ScheduleKind kind, unsigned ranks, unsigned stages,
                   unsigned microbatches, Schedule &schedule,
                   std::string &error);

/// The order a forward-only pipelined run follows (no backward, any number
/// of stages a rank): each rank runs its stages' forwards, lowest stage
/// first, every microbatch after receiving it. Sends do not wait, so the
/// chain cannot deadlock.
Schedule forwardSchedule(unsigned ranks, unsigned stages, unsigned microbatches);

/// Checks that every (microbatch, stage) is computed once on its rank
/// (forward, backward, and weight gradient when split), after what it
/// needs on that rank; that every activation and gradient crossing ranks
/// is sent once, after it is computed, to the right rank, and received
/// there once, before its use; and that the ranks cannot deadlock. The
/// message names the ranks and steps ("rank 1 step 3 (recv-act mb 0 stage
/// 0 from rank 0): ...").
bool verifySchedule(const Schedule &schedule, std::string &error);

/// The text form (`--emit=schedule`): a header line, then one line per
/// step, `RANK OP MICROBATCH STAGE [PEER]`.
std::string formatSchedule(const Schedule &schedule);
/// Reads the text form (not verified: verifySchedule does that).
bool parseSchedule(std::string_view text, Schedule &schedule,
                   std::string &error);

/// What one step of a stage costs, in any unit. `backward` is the whole
/// backward, or the input gradient alone when the schedule splits it off
/// `weightGrad`.
struct StageCost {
  double forward = 1, backward = 2, weightGrad = 0;
  /// The bytes one microbatch's activations of the stage hold from its
  /// forward to its backward (weight gradient when split); 0 when unknown.
  double activationBytes = 0;
};

/// Uniform stages, as the bubble formulas assume: a rank's share of the
/// model costs a forward of 1 and a backward of 2 (each of v virtual stages
/// 1/v of that); zero-bubble splits the backward into 1 and 1.
StageCost uniformStageCost(const Schedule &schedule);

/// When each step of a schedule runs: compute steps take their cost,
/// messages none, and a receive waits for its send.
struct ScheduleTimeline {
  struct Interval {
    double start, end;
  };
  /// Per rank, per step.
  std::vector<std::vector<Interval>> steps;
  double makespan = 0;
  /// Per rank, the time spent computing.
  std::vector<double> busy;
  /// Idle over total rank time: 1 - sum(busy) / (ranks makespan).
  double bubble = 0;
  /// Per rank, the most microbatches whose activations it holds at once
  /// (forward done, backward, or weight gradient when split, not yet).
  std::vector<unsigned> peakActivations;
  /// Per rank, the most bytes of activations it holds at once (from the
  /// costs' activationBytes).
  std::vector<double> peakActivationBytes;
};

/// Simulates a verified schedule; `costs` has one entry per stage (or one
/// for all).
ScheduleTimeline simulateSchedule(const Schedule &schedule,
                                  const std::vector<StageCost> &costs);

/// The timeline as an SVG: one row per rank, one box per step, colored by
/// kind (forward, backward, weight gradient; idle is white).
std::string scheduleSvg(const Schedule &schedule,
                        const ScheduleTimeline &timeline);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_PLAN_SCHEDULE_H
