//===- PlanBuilder.h - The runtime plan of a kernel-level model -----------===//

#ifndef LOOM_PLAN_PLANBUILDER_H
#define LOOM_PLAN_PLANBUILDER_H

#include "Plan/GpuLaunches.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/StringMap.h"

#include <string>
#include <vector>

namespace loom {

/// A kernel the executable must provide: one pointer argument per buffer.
struct KernelSignature {
  std::string name;
  unsigned numArgs;
  /// Where in the script its first op comes from ("gpt.loom:34:25"), or
  /// empty: the `kernel` record's optional SOURCE.
  std::string source;
};

/// The GPU code of an executable: one device image and the launches each
/// kernel makes on the device.
struct GpuCode {
  std::string arch;   // sm_80, sm_90a, ...
  std::string format; // cubin or ptx
  std::string image;
  llvm::StringMap<std::vector<GpuLaunch>> launches;
  /// Kernels whose outputs are sums of nonnegative weights times one of
  /// their buffers (an attention forward's softmax weights times its
  /// values): that buffer's position, the plan's `terms` record, by which
  /// --check-kernels scales its tolerance.
  llvm::StringMap<unsigned> termsArgs;
};

/// The plan text (docs/plan-format.md) and what linking it needs.
struct Plan {
  std::string text;
  std::vector<KernelSignature> kernels;
  int64_t arenaBytes = 0;
  /// The ranks a per-rank (SPMD) plan runs on; 1 for the one-rank plan.
  int64_t ranks = 1;
};

/// Builds the plan of `model`, a function whose body is calls to outlined
/// kernels (after the kernels stage): one buffer per argument and call
/// result, one step per call, and arena offsets from buffer lifetimes.
/// Reports an error at the offending op when the model cannot be planned.
/// `scratch` gives, per kernel, the types of the temporaries its bufferized
/// form takes after its inputs and outputs; they live for one step.
mlir::FailureOr<Plan>
buildPlan(mlir::func::FuncOp model,
          const llvm::StringMap<llvm::SmallVector<mlir::ShapedType>> &scratch,
          const GpuCode *gpu = nullptr);

/// The most bytes a model's buffers may take together: every arena offset
/// lies below their total, so the plan's (and --explain's) int64 sums
/// cannot wrap. A model of 2^61 params' elements had been planned with
/// params overlapping at one offset, and explained with negative bytes.
constexpr int64_t kMostModelBytes = int64_t(1) << 62;

/// Adds `bytes` (each below 2^62) to `total`, saturating past
/// kMostModelBytes; an error at `model` once the total passes it.
mlir::LogicalResult addModelBytes(mlir::func::FuncOp model, int64_t &total, int64_t bytes);

/// Whether `op` is a call of a model whose kernel only reshapes its one
/// argument (loom.reshape, or the collapse and expand it lowers to: a view
/// of the same row-major bytes), where the argument is another kernel's
/// result and neither it nor the call's result is a model output, in a
/// model that is not pipelined. The plan gives the result the argument's
/// bytes instead of a step, which would only copy them (a weight
/// gradient's `[B, T, D] -> [B T, D]` of its activations, a GPT step's
/// heads split and merged): it launches nothing.
bool isViewStep(mlir::Operation *op);

/// A `shard` collective's kind as plans and reports name it: all-reduce,
/// all-gather, all-slice, reduce-scatter, all-to-all or broadcast; empty
/// for any other op.
llvm::StringRef collectiveKind(mlir::Operation *op);

/// "FILE:LINE:COL" of the first file location in `loc`, FILE without its
/// directory; empty if there is none (what plan records and reports name).
std::string sourceOf(mlir::Location loc);

/// The 32-bit FNV-1a hash the plan's `end` line carries.
uint32_t planChecksum(llvm::StringRef text);

} // namespace loom

#endif // LOOM_PLAN_PLANBUILDER_H
