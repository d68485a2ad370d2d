//===- Explain.h - loomc --explain: what a plan needs and costs, unrun ----===//
//
// Explain reads a model's per-rank program after the kernels stage (calls
// to outlined kernels and the partitioner's collectives; nothing compiled)
// and tells, per rank, the memory it needs, what crosses the network, and
// the step time a cost model predicts on a chosen GPU: a roofline per
// kernel, an alpha-beta model per collective, the pipeline schedule
// simulated with the kernels' costs, the data-parallel gradient buckets
// overlapped with the backward (docs/explain.md).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_EXPLAIN_EXPLAIN_H
#define LOOM_EXPLAIN_EXPLAIN_H

#include "GpuSpec/GpuSpec.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

#include <string>
#include <vector>

namespace loom {

/// The links a collective's alpha-beta cost reads: per GPU, one direction.
struct NetworkSpec {
  double intraNodeGBs = 450, interNodeGBs = 50;
  /// Per hop of a ring (a collective over n ranks makes n - 1 or 2(n - 1)).
  double intraNodeLatencyUs = 2, interNodeLatencyUs = 5;
  /// Consecutive ranks share a node, this many to a node.
  int64_t gpusPerNode = 8;
};

struct ExplainOptions {
  const DeviceSpec *device = nullptr;
  NetworkSpec network;
  /// The train section's microbatches and the pipeline schedule's name.
  unsigned microbatches = 1;
  std::string schedule;
  std::string optimizer;
  /// Whether to lay out the static memory plan (its arena).
  bool planArena = true;
  /// ZeRO-1: the optimizer state split over the data-parallel axes.
  bool zero = false;
};

/// One kind of collective of the step: all that share a kind, group,
/// size, phase and script line.
struct ExplainCollective {
  std::string kind;  // all-reduce, all-gather, ..., send/recv
  std::string axes;  // "tp", "dp+tp", "pp"
  int64_t groupSize = 1;
  bool intraNode = true;
  int64_t bytes = 0; // per rank and call: what one rank sends or holds
  int64_t count = 0; // calls per step, on one rank
  std::string phase; // forward, backward, update
  std::string source;
  double seconds = 0; // one call
  /// A gradient sum nothing in the backward waits for: it overlaps.
  bool overlaps = false;
};

/// What one rank holds: all ranks with the same pipeline coordinate hold
/// the same (the others differ only in which block of each tensor).
struct ExplainRank {
  unsigned coordinate = 0; // on the pipeline axis; 0 without one
  std::vector<unsigned> stages;
  int64_t params = 0, gradients = 0, optimizer = 0, inputs = 0;
  /// The activations kept for the backward: one microbatch's, and at the
  /// schedule's peak (microbatches in flight).
  int64_t activationsPerMicrobatch = 0, activations = 0;
  unsigned inFlight = 1;
  /// A pipelined training step's activations as the runtime allocates them
  /// (what `activations` is then): per set of the rank's stages (one stage,
  /// mostly), slots of `slotBytes`, each with room for every value those
  /// stages keep for a microbatch (InFlightLayout); `liveActivations`, the
  /// schedule's peak of what its backward reads.
  struct ActivationPool {
    std::vector<unsigned> stages;
    bool perStage = false; // a slot per (stage, microbatch)
    unsigned slots = 0;
    int64_t slotBytes = 0;
  };
  std::vector<ActivationPool> activationPools;
  bool activationsAllocated = false; // the pools (and transient) are the runtime's
  int64_t liveActivations = 0;
  /// Of those, one backward's values at a time (received gradients, ...).
  int64_t activationTransientBytes = 0;
  /// A pipeline rank's buffer for the carries it receives (the largest
  /// carry: rt::pipelineMessageBytes), allocated beside the activations.
  int64_t messages = 0;
  int64_t total() const {
    return params + gradients + optimizer + inputs + activations + messages;
  }
  /// Its largest tensors, biggest first: a name (or the script line of the
  /// op) and its bytes.
  std::vector<std::pair<std::string, int64_t>> largest;
  /// Modelled seconds: compute and blocking collectives per microbatch
  /// (forward, backward), per step (update), and the exposed part of the
  /// gradient buckets; when the rank's last step ends.
  double forwardSeconds = 0, backwardSeconds = 0, updateSeconds = 0;
  double exposedBucketSeconds = 0, finishSeconds = 0;
};

/// A param of the model and how the mesh splits it.
struct ExplainParam {
  std::string name;
  std::vector<int64_t> shape, local; // global, and one rank's block
  /// Per dim, the mesh axes splitting it (empty: whole), major first.
  std::vector<std::vector<std::string>> split;
  int64_t localBytes = 0;
};

/// One MoE block instance: its routing and where its experts live.
struct ExplainMoe {
  std::string block, axis, source;
  /// The mesh axes the experts split over: the block's axis, and the
  /// tokens' data-parallel axes when its all-to-alls span them too.
  std::vector<std::string> exchangeAxes;
  int64_t experts = 0, topK = 0, tokens = 0, capacity = 0, expertsPerRank = 0;
  /// Ranks sharing each expert's slots, a block of capacity / slotBlocks
  /// each (1: every rank holds its experts' slots whole).
  int64_t slotBlocks = 1;
  /// Rows per expert each rank sends by all-to-all; 0 when the block's
  /// pieces run whole (no exchange for its tokens' layout).
  int64_t exchangeRows = 0;
};

struct ExplainReport {
  std::string model, grid, device, deviceName;
  std::vector<std::string> axes;
  /// Per axis, its size and its stride in rank numbers: row-major, the
  /// last axis fastest, as the runtime numbers ranks.
  std::vector<int64_t> sizes, strides;
  int64_t ranks = 1;
  bool training = false;
  std::string optimizer;
  bool zero = false, recompute = false;
  unsigned microbatches = 1;
  /// The whole model's params (not the optimizer's): elements and bytes,
  /// and each one's split.
  int64_t paramElements = 0, paramBytes = 0;
  std::vector<ExplainParam> params;
  std::vector<ExplainRank> ranksByCoordinate;
  /// The static memory plan's arena (what every rank's executable
  /// allocates, less its kernels' scratch); 0 when the plan could not be
  /// built.
  int64_t planArenaBytes = 0;
  /// The arena with the largest pipeline rank's activation slots beside
  /// it: what a rank allocates, as the build checks it against
  /// --memory-limit (less the kernels' scratch); 0 without the arena.
  int64_t allocatedBytes() const;
  /// What a rank needs against a memory limit: the larger of the figures'
  /// largest rank and allocatedBytes() (the figures leave out a step's
  /// temporaries, which the plan holds).
  int64_t neededBytes() const;
  std::vector<ExplainCollective> collectives;
  std::vector<ExplainMoe> moe;
  // Pipeline; stages == 0 when the model is not pipelined.
  std::string pipelineAxis, schedule;
  unsigned stages = 0, pipelineRanks = 1;
  double bubble = 0, uniformBubble = 0;
  /// The bubble from the ranks' figures, as the schedule's timeline
  /// computes it (idle over ranks x makespan): what a sampled report, its
  /// figures extrapolated to the whole loop, recomputes its bubble by.
  double timelineBubble() const;
  // Cost model, per step.
  double peakTflops = 0;
  double stepSeconds = 0;
  /// The one-rank model's matmul FLOPs per step, recomputation not
  /// counted.
  double modelFlops = 0;
  /// Model FLOPs over step time x ranks x peak.
  double mfu() const {
    return stepSeconds > 0 ? modelFlops / (stepSeconds * ranks * peakTflops * 1e12)
                           : 0;
  }
  int64_t kernelCalls = 0;
  /// Seconds of all the collectives of a step on one rank, one after another.
  double communicationSeconds = 0;
  /// The iterations of the loops a sampled compilation cut (0: none).
  int64_t loopTripCount = 0;

  /// The rank-number stride of the pipeline axis (1 without one), and
  /// rank `rank`'s coordinate on axis `axis`.
  int64_t pipelineStride() const;
  int64_t coordinate(int64_t rank, size_t axis) const;

  /// The rank whose total is largest.
  const ExplainRank &largestRank() const;
};

/// Explains `spmd`, the per-rank program (or the one-rank model) at the
/// kernels stage; `model` is the model it partitions (for the param
/// counts); `module` holds both and their kernels. Fails with a located
/// error when a step cannot be costed.
mlir::FailureOr<ExplainReport> explainProgram(mlir::ModuleOp module,
                                              mlir::func::FuncOp model,
                                              mlir::func::FuncOp spmd,
                                              const ExplainOptions &options);

/// "rank 3 (dp=1, tp=1)": the first rank with that pipeline coordinate.
std::string rankName(const ExplainReport &report, const ExplainRank &rank);

void printExplainText(const ExplainReport &report, llvm::raw_ostream &os);
/// The mesh as an SVG: a box per rank (colored by pipeline stage) and a
/// row per param with its split and the block rank 0 holds.
std::string meshSvg(const ExplainReport &report);
void printExplainJson(const ExplainReport &report, llvm::raw_ostream &os);

/// Bytes as "1.50 GiB", "312.0 MiB", "12.0 KiB", "96 B".
std::string formatBytes(double bytes);
/// Seconds as "1.234 s", "12.345 ms", "4.15 us".
std::string formatSeconds(double seconds);

} // namespace loom

#endif // LOOM_EXPLAIN_EXPLAIN_H
