//===- Plan.h - The plan: parsing, validation and writing -------*- C++ -*-===//
//
// The plan is the contract between loomc and the runtime; its format and
// every check made here are specified in docs/plan-format.md.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_PLAN_PLAN_H
#define LOOM_RUNTIME_PLAN_PLAN_H

#include "loom/runtime/support/DType.h"
#include "loom/runtime/support/Shape.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::runtime {

/// Parses a decimal integer: digits only, no sign or spaces, no overflow.
bool parseUnsigned(std::string_view text, uint64_t &value);


/// The plan version this runtime reads and writes.
constexpr unsigned kPlanVersion = 1;
/// Every buffer offset is a multiple of this.
constexpr uint64_t kBufferAlignment = 64;
/// `bytes` rounded up to kBufferAlignment (0 past UINT64_MAX's last one).
constexpr uint64_t alignedBytes(uint64_t bytes) {
  return (bytes + kBufferAlignment - 1) / kBufferAlignment * kBufferAlignment;
}

/// The device the plan's kernels were compiled for.
enum class Device : uint8_t { CPU, CUDA };
/// "cpu" or "cuda".
const char *deviceName(Device device);

/// How the runtime treats a buffer: inputs are copied in, params initialized
/// or loaded, outputs copied out; temps are only touched by kernels.
enum class BufferRole : uint8_t { Input, Param, Output, Temp };
/// "input", "param", "output" or "temp".
const char *roleName(BufferRole role);

/// A param's initializer; `None` for every other role.
enum class InitKind : uint8_t { None, Zeros, Ones, Constant, Normal, Uniform };
/// "zeros", "ones", "constant", "normal", "uniform" ("none" for None).
const char *initKindName(InitKind kind);

/// An initializer with its arguments: Constant uses `a` (the value), Normal
/// `a` (the standard deviation), Uniform `a` and `b` (low and high).
struct Initializer {
  InitKind kind = InitKind::None;
  double a = 0;
  double b = 0;
};

/// One axis of a `mesh` record.
struct MeshAxis {
  std::string name;
  unsigned size = 1;
};

/// The optional `mesh` record of a partitioned (SPMD) plan: the ranks form
/// a grid with these axes, row-major (the last axis varies fastest).
struct PlanMesh {
  bool present = false;
  std::string name;
  std::vector<MeshAxis> axes;
  /// Derived by parsePlan: the product of the axes' sizes (1 without a mesh).
  unsigned numRanks = 1;
  unsigned line = 0;

  /// The index of the axis called `name`, or -1.
  int findAxis(std::string_view name) const;
};

/// The largest mesh parsePlan accepts (MPI counts ranks in an int).
constexpr uint64_t kMaxMeshRanks = 2147483647;
/// The most microbatches a run may have (`microbatches=`, `microbatches`).
constexpr uint64_t kMaxMicrobatches = 1u << 20;

/// How a microbatched forward's output makes the whole batch's from its
/// microbatches' values (an `assemble` record): stacked along dim 0, their
/// mean, or their sum. None: not a microbatched forward's output.
enum class Assembly : uint8_t { None, Rows, Mean, Sum };
/// "rows", "mean" or "sum" ("none" for None).
const char *assemblyName(Assembly assembly);

/// One `buffer` record, with its `shard` record if it has one.
struct PlanBuffer {
  unsigned id = 0;
  std::string name;
  /// Integer inputs with a `bound` record: their values lie in [0, bound)
  /// (an embedding's rows, a loss's classes); 0: no bound.
  int64_t bound = 0;
  BufferRole role = BufferRole::Temp;
  DType dtype = DType::F32;
  /// In a partitioned plan, the shape of one rank's block.
  Shape shape;
  uint64_t offset = 0;
  Initializer init;
  /// The `shard` record: per dim, the mesh axes (indices into
  /// Plan::mesh.axes, the first major) the dim is split over; an empty
  /// entry is a whole dim. Empty without a shard record (replicated: every
  /// rank holds the whole tensor).
  std::vector<std::vector<unsigned>> shard;
  /// The `held` record of a pipelined plan's param or output: the
  /// coordinates along the pipeline axis of the ranks that hold it, in
  /// increasing order. The other ranks use its arena bytes for their own
  /// buffers. Empty: every rank holds it.
  std::vector<unsigned> held;
  /// The `view` record of a temp: the id of the temp whose bytes it is
  /// (the same offset and byte count, another shape of the same row-major
  /// elements; no step writes it), or -1.
  int64_t viewOf = -1;
  /// The buffer whose bytes these are: viewOf's, or this one's.
  unsigned bytesId() const { return viewOf >= 0 ? static_cast<unsigned>(viewOf) : id; }
  /// The `assemble` record of a microbatched forward's output.
  Assembly assembly = Assembly::None;
  /// Derived by parsePlan (writePlan ignores them).
  uint64_t numElements = 0;
  uint64_t bytes = 0;
  /// The whole tensor's shape: each dim times the sizes of the axes it is
  /// split over (`shape` when not sharded), and its elements and bytes.
  Shape globalShape;
  uint64_t globalElements = 0;
  uint64_t globalBytes = 0;
  unsigned line = 0;
  unsigned shardLine = 0; // 0 without a shard record

  /// Whether some dim is split over some mesh axis.
  bool isSharded() const;
};

/// One `kernel` record.
struct PlanKernel {
  std::string name;
  unsigned numArgs = 0;
  /// Where in the script the kernel comes from ("gpt.loom:34:25"), or empty.
  std::string source;
  unsigned line = 0;
  /// From a `terms` record: the position in the kernel's buffer list of
  /// the input each output element is a sum of nonnegative weights of (an
  /// attention's values), or -1. --check-kernels scales its tolerance by
  /// those terms' size.
  int termsArg = -1;
};

/// The NVIDIA architecture of a `gpu-image` record: sm_90a is {9, 0, 'a'},
/// sm_100f {10, 0, 'f'}, sm_80 {8, 0, 0}. The last digit is the minor
/// version.
struct GpuArch {
  unsigned major = 0;
  unsigned minor = 0;
  char variant = 0; // 0, 'a' (architecture-specific) or 'f' (family)
};
/// Parses `sm_` followed by two or three digits (no leading zero) and an
/// optional `a` or `f`.
bool parseGpuArch(std::string_view text, GpuArch &arch);

/// How the executable's GPU image is encoded.
enum class GpuImageFormat : uint8_t { Cubin, PTX };
/// "cubin" or "ptx".
const char *gpuImageFormatName(GpuImageFormat format);

/// The optional `gpu-image` record.
struct PlanGpuImage {
  bool present = false;
  std::string archName; // as written, e.g. "sm_90a"
  GpuArch arch;         // derived by parsePlan (writePlan writes archName)
  GpuImageFormat format = GpuImageFormat::Cubin;
  uint64_t bytes = 0;
  unsigned line = 0;
};

/// The most dims a tensor map has (CUDA's limit).
constexpr unsigned kMaxTensorMapRank = 5;

/// A `tmap:` launch argument: a TMA tensor map (CUtensorMap) of a tensor in
/// one of the step's buffers, which the CUDA executor encodes when opening
/// (cuTensorMapEncodeTiled) and passes as the 8-byte device address of the
/// map. Dims, strides and box are innermost first, as the driver takes them.
struct TensorMapArg {
  /// Bytes from the buffer's start to element (0, ..., 0), a multiple of 16.
  uint64_t offset = 0;
  DType dtype = DType::BF16; // BF16, F16 or F32
  unsigned rank = 1;         // 1 to kMaxTensorMapRank
  /// The global extents, each 1 to 2^32.
  uint64_t dims[kMaxTensorMapRank] = {};
  /// The byte strides of dims 1 to rank - 1 (dim 0 is contiguous), each a
  /// multiple of 16 below 2^40.
  uint64_t strides[kMaxTensorMapRank - 1] = {};
  /// The box (the tile one copy moves), each 1 to 256; the innermost is a
  /// multiple of 16 bytes and, with a swizzle, at most the swizzle's span.
  unsigned box[kMaxTensorMapRank] = {};
  /// The shared-memory swizzle span in bytes: 0 (none), 32, 64 or 128.
  unsigned swizzle = 0;
};

/// One argument of a `launch` record.
struct LaunchArg {
  enum class Kind : uint8_t { Buffer, I64, I32, F32, TensorMap };
  Kind kind = Kind::Buffer;
  /// Buffer and TensorMap: the index into the step's buffer list (`b:I`,
  /// `tmap:I:...`).
  unsigned buffer = 0;
  /// I64 and I32 (I32 values fit in 32 bits).
  int64_t integer = 0;
  /// F32.
  float real = 0;
  /// TensorMap: the tensor in the buffer and the map's box and swizzle.
  TensorMapArg tensorMap;
};

/// One `launch` record: on --device cuda, a step of `kernel` (an index into
/// Plan::kernels) launches the image's `function` with this grid and block.
struct PlanLaunch {
  unsigned kernel = 0;
  std::string function;
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  std::vector<LaunchArg> args;
  /// Dynamic shared memory per block (the record's `shared:BYTES`), at most
  /// kMaxLaunchSharedBytes; 0 without one.
  int64_t sharedBytes = 0;
  unsigned line = 0;
};

/// The largest `shared:BYTES` a launch record may state (cuLaunchKernel
/// takes an unsigned int; every device's limit is far below).
constexpr int64_t kMaxLaunchSharedBytes = 2147483647;

/// What a `collective` record does (docs/plan-format.md).
enum class CollectiveKind : uint8_t {
  AllReduce,
  AllGather,
  ReduceScatter,
  AllSlice,
  AllToAll,
  Broadcast
};
/// "all-reduce", "all-gather", "reduce-scatter", "all-slice", "all-to-all"
/// or "broadcast".
const char *collectiveKindName(CollectiveKind kind);
constexpr unsigned kNumCollectiveKinds = 6;

/// The operation of a `collective` record; its IN and OUT buffers are the
/// step's buffers[0] and buffers[1].
struct PlanCollective {
  CollectiveKind kind = CollectiveKind::AllReduce;
  /// Mesh axes (indices into Plan::mesh.axes) in group order, first major.
  std::vector<unsigned> axes;
  /// AllGather, ReduceScatter, AllSlice: DIM; AllToAll: the split dim S.
  unsigned dim = 0;
  /// AllToAll: the concatenation dim C.
  unsigned concatDim = 0;
  /// Derived by parsePlan: the product of the axes' sizes.
  unsigned groupSize = 1;
};

/// Whether a step runs a kernel, a collective, an accumulate or (in a
/// pipelined plan's update) a transfer between two stages.
enum class StepKind : uint8_t { Kernel, Collective, Accumulate, Transfer };

/// Where a pipelined plan's step belongs (its `section` record): the
/// forward of a stage, its backward's input-gradient part, its weight-
/// gradient part (each once per microbatch, in the schedule's order), or the
/// update, once per training step after the schedule.
enum class StepPhase : uint8_t { Forward, Backward, Weight, Update };
/// "forward", "backward", "weight", "update".
const char *stepPhaseName(StepPhase phase);

/// One `step`, `collective` or `accumulate` record, in program order. A
/// kernel step has the index of its kernel in Plan::kernels and the ids of
/// its buffers; a collective step its operation and the ids {IN, OUT}; an
/// accumulate the ids {IN, OUT}.
struct PlanStep {
  StepKind kind = StepKind::Kernel;
  unsigned kernel = 0;
  std::vector<unsigned> buffers;
  PlanCollective collective;
  /// In a pipelined plan, from the `section` record before the step: its
  /// phase and the stages whose ranks run it (one, except in the update,
  /// where a value several stages need is computed by each).
  StepPhase phase = StepPhase::Forward;
  std::vector<unsigned> stages;
  /// A transfer (`transfer FROM TO ID`): stage `from`'s ranks send buffer
  /// buffers[0] to stage `to`'s (the rank with the same other coordinates).
  unsigned from = 0, to = 0;
  unsigned line = 0;
};

/// The `pipeline` record of a pipelined (MPMD) plan and its `carry`
/// records: `stages` stages dealt round-robin over the ranks of mesh axis
/// `axis`, run in the order of `schedule`.
struct PlanPipeline {
  bool present = false;
  unsigned axis = 0; // index into PlanMesh::axes
  unsigned stages = 1;
  std::string schedule; // gpipe, 1f1b, interleaved or zero_bubble
  /// Per stage k, the buffers it sends to stage k + 1 after each forward
  /// (`carry forward K ID...`) and to stage k - 1 after each backward
  /// (`carry backward K ID...`), in order.
  std::vector<std::vector<unsigned>> forwardCarry, backwardCarry;
  unsigned line = 0;
};

/// A training step's optimizer (the `optimizer` record): what the runtime
/// needs to compute the per-step scalar inputs `opt.*`.
struct PlanOptimizer {
  std::string kind; // sgd, adam or adamw; empty: the plan is no training step
  uint64_t steps = 0;
  /// `lr_schedule=`: constant, warmup_cosine or warmup_linear (with
  /// `warmup=`, `min_lr=`).
  std::string lrSchedule = "constant";
  /// `loss_scale=`: none, static or dynamic (with `initial_scale=`).
  std::string lossScale = "none";
  /// `microbatches=`: the steps up to the last accumulate run this many
  /// times per training step, once per microbatch of the batch inputs. A
  /// forward's `microbatches` record sets it too (Plan::forwardMicrobatches).
  uint64_t microbatches = 1;
  /// The numbers: hyperparameters, warmup, min_lr, initial_scale,
  /// clip_grad_norm.
  std::vector<std::pair<std::string, double>> hyperparameters;
  /// The hyperparameter `name`, or `fallback`.
  double get(std::string_view name, double fallback) const;
};

/// After every training step, buffer `output` is copied into `param` (an
/// `update` record): the param's (or optimizer state's) new value.
struct PlanUpdate {
  unsigned output = 0;
  unsigned param = 0;
};

/// What a step does with one of its buffers.
enum class BufferAccess : uint8_t { Read, Written, Scratch };

/// A step's buffers by access, parallel to PlanStep::buffers, and the bytes
/// it reads and writes (the sizes of its Read and of its Written buffers;
/// scratch counts in neither).
struct StepAccess {
  std::vector<BufferAccess> buffers;
  uint64_t bytesRead = 0;
  uint64_t bytesWritten = 0;
};

/// A parsed, validated plan.
struct Plan {
  unsigned version = kPlanVersion;
  std::string model;
  Device device = Device::CPU;
  PlanMesh mesh;
  PlanPipeline pipeline;
  uint64_t arenaBytes = 0;
  PlanGpuImage gpuImage;
  std::vector<PlanBuffer> buffers;
  std::vector<PlanKernel> kernels;
  /// In plan order; the launches of one kernel run in this order.
  std::vector<PlanLaunch> launches;
  /// Kernel and collective steps, in program order.
  std::vector<PlanStep> steps;
  /// A training step's optimizer and updates (both empty otherwise).
  PlanOptimizer optimizer;
  std::vector<PlanUpdate> updates;
  /// The line of a forward's `microbatches M` record (0: none): every step
  /// runs once per microbatch, M = optimizer.microbatches, and each output
  /// is assembled from the microbatches' values (PlanBuffer::assembly).
  unsigned forwardMicrobatchesLine = 0;

  /// Whether the plan is a forward that runs in microbatches.
  bool forwardMicrobatches() const { return forwardMicrobatchesLine != 0; }
  /// Whether it has a backward (training, or a gradient program): a
  /// pipelined one then runs its schedule, a forward the forward chain.
  bool hasBackward() const {
    for (const PlanStep &step : steps)
      if (step.phase == StepPhase::Backward || step.phase == StepPhase::Weight)
        return true;
    return false;
  }

  /// The buffer called `name`, or null.
  const PlanBuffer *findBuffer(std::string_view name) const;
  /// The f32 scalar output `name` (a loss, a gradient norm), or null.
  const PlanBuffer *findScalarOutput(std::string_view name) const {
    const PlanBuffer *buffer = findBuffer(name);
    return buffer && buffer->role == BufferRole::Output && buffer->shape.empty() &&
                   buffer->dtype == DType::F32
               ? buffer
               : nullptr;
  }
  /// Whether `update` was done in place by its kernel (loomc's in-place
  /// optimizer updates): its output has the param's offset, and nothing
  /// is copied after the step.
  bool isInPlace(const PlanUpdate &update) const {
    return buffers[update.output].offset == buffers[update.param].offset;
  }
  /// The number of collective steps.
  size_t numCollectives() const;
  /// One past the last accumulate step: the steps below it run once per
  /// microbatch (0 without microbatches).
  size_t microbatchSteps() const;
  /// Whether `buffer` holds one microbatch of a batch input: with
  /// microbatches, every input that has a batch dim (rank >= 1). Its file
  /// holds `optimizer.microbatches` times as many rows.
  bool isMicrobatched(const PlanBuffer &buffer) const {
    return optimizer.microbatches > 1 && buffer.role == BufferRole::Input &&
           !buffer.shape.empty();
  }
};

/// Per step of `plan` (collectives included), what it does with each of its
/// buffers. The format does not say which of a kernel's buffers are inputs,
/// so it is derived from the step order (every buffer but an input or a
/// param is written by exactly one step, its first): a buffer is Read if it
/// is an input or a param or an earlier step names it; else Written if it
/// is an output or a later step names it; else Scratch (a kernel's
/// temporary, or a result nothing reads).
std::vector<StepAccess> analyzeStepAccess(const Plan &plan);

/// Parses and completely validates `text` (everything in the format's
/// Validation section except the kernel table, which bindKernels checks,
/// what needs the GPU image or the device, which the driver and the CUDA
/// executor check, and the agreement of a partitioned plan with the
/// unpartitioned one, which checkPartitionedPlan checks).
/// On failure returns false and sets `error` to "plan:LINE: message".
bool parsePlan(std::string_view text, Plan &plan, std::string &error);

/// Checks that `spmd`, the partitioned plan of an executable, has a mesh
/// and the same model, inputs, params and outputs as `whole`, its
/// unpartitioned plan: the same names, roles, dtypes and initializers, and
/// global shapes equal to `whole`'s shapes (files are read and written
/// whole). Errors name the SPMD plan's line as "plan:LINE:".
bool checkPartitionedPlan(const Plan &whole, const Plan &spmd,
                          std::string &error);

/// "dp=2 tp=2".
std::string formatMeshAxes(const PlanMesh &mesh);
/// The mesh axes `axes` as a collective record writes them: "dp,tp".
std::string formatAxes(const PlanMesh &mesh, const std::vector<unsigned> &axes);
/// A buffer's shard spec as its record writes it: "dp,-", "-,dp+tp".
std::string formatShardSpec(const PlanMesh &mesh, const PlanBuffer &buffer);

/// The 32-bit FNV-1a checksum the `end` record carries, of `bytes`.
uint32_t computeChecksum(std::string_view bytes);

/// Appends the `end` record (with the checksum of `body`) to `body`.
std::string sealPlan(std::string_view body);

/// A launch argument as the plan writes it: "b:2", "i64:-1", "f32:0.5",
/// "tmap:0:0:bf16:4096x4096:8192:64x128:128".
std::string formatLaunchArg(const LaunchArg &arg);

/// Writes `plan` in the text format, `end` record included. Buffers' derived
/// fields are ignored; floats are written with %.17g.
std::string writePlan(const Plan &plan);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_PLAN_PLAN_H
