//===- LoomDialect.h - The loom dialect and its attributes ----------------===//

#ifndef LOOM_IR_LOOMDIALECT_H
#define LOOM_IR_LOOMDIALECT_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Dialect.h"

#include "Loom/IR/LoomDialect.h.inc"
#include "Loom/IR/LoomEnums.h.inc"

#define GET_ATTRDEF_CLASSES
#include "Loom/IR/LoomAttrs.h.inc"

namespace mlir::loom {
/// Names of the discardable attributes Loom puts on builtin and upstream ops.
namespace attr {
constexpr llvm::StringLiteral kInput = "loom.input";     // func arg: input name
constexpr llvm::StringLiteral kParam = "loom.param";     // func arg: param name
/// On a func arg: an MoE expert's param, stored [E, ...] (one per expert).
constexpr llvm::StringLiteral kExpertParam = "loom.expert_param";
constexpr llvm::StringLiteral kInit = "loom.init";       // func arg: #loom.init
constexpr llvm::StringLiteral kOutput = "loom.output";   // func result: name
constexpr llvm::StringLiteral kLoss = "loom.loss";       // func result: name
/// Tags the metadata of a model's return location, which fuses each
/// result's statement ([tag, name...]): the plan's output errors point at it.
constexpr llvm::StringLiteral kResultLocs = "loom.result_locs";
constexpr llvm::StringLiteral kPrecision = "loom.precision"; // module policy
constexpr llvm::StringLiteral kAxes = "loom.axes";       // shard.grid axis names
constexpr llvm::StringLiteral kPipelineAxis = "loom.pipeline_axis"; // func
constexpr llvm::StringLiteral kKernel = "loom.kernel"; // func: an outlined kernel
/// func: the per-rank (SPMD) program of the model this names.
constexpr llvm::StringLiteral kPartitionOf = "loom.partition_of";
/// func: the shard.grid an SPMD program runs on (a symbol use, so the grid
/// stays while the program has no collective naming it).
constexpr llvm::StringLiteral kGrid = "loom.grid";
/// func arg/result of an SPMD program: per dim, the grid axes splitting it.
constexpr llvm::StringLiteral kSharding = "loom.sharding";
/// kernel func arg: a temporary hoisted out of the kernel (a plan buffer
/// no other step reads), so the kernel may leave it unwritten.
constexpr llvm::StringLiteral kScratch = "loom.scratch";
/// func result of a training step: the new value of the param this names,
/// copied into it after every step.
constexpr llvm::StringLiteral kUpdates = "loom.updates";
/// kernel func result (loom-in-place-updates): the argument (i64) it is
/// written over, a param's new value over the param (read by the plan
/// builder; loom-kernel-destinations writes it there).
constexpr llvm::StringLiteral kInPlace = "loom.in_place";
/// func arg: an integer input whose values index something of this many
/// entries (an embedding table's rows, a loss's classes): the runtime
/// checks them against [0, bound) where they enter.
constexpr llvm::StringLiteral kIndexBound = "loom.index_bound";
/// op of a training step: it computes the gradient of the param this
/// names (loom-optimizer-step), so that loom-bucket-gradients finds its
/// data-parallel sum after partitioning.
constexpr llvm::StringLiteral kGradientOf = "loom.gradient_of";
/// On a shard.all_reduce of a gradient's data-parallel sum: its gradient
/// bucket's number (i64, loom-bucket-gradients). The plan builder makes
/// the bucket's all-reduces, adjacent in the program, one plan collective.
constexpr llvm::StringLiteral kGradientBucket = "loom.gradient_bucket";
/// On each op of a param's optimizer update: its update bucket's number
/// (loom-optimizer-step), which makes the bucket one kernel.
constexpr llvm::StringLiteral kUpdateBucket = "loom.update_bucket";
/// On a kernel func.func that is one loom.attention (or
/// loom.attention_grad) and nothing else, which the GPU stages replace by
/// launches (loom-build-gpu-attention): a dictionary of `query`, `key`,
/// `value` (and `result_grad`: the backward's; their argument positions),
/// `inputs` (the kernel's inputs; its output buffers follow them),
/// `causal` (unit) and `scale` (f32, absent for none).
constexpr llvm::StringLiteral kGpuAttention = "loom.gpu_attention";
/// On a kernel func.func: it holds an update bucket's optimizer update
/// (loom-outline-kernels), which loom-fuse-update-loops makes one launch.
/// A unit, so that the buckets of every layer stay one kernel under
/// loom-dedup-kernels.
constexpr llvm::StringLiteral kUpdateKernel = "loom.update_kernel";
/// On the forward ops of a layer instance marked `recompute`: the instance
/// ("block.0"); loom-autodiff recomputes them in the backward, and marks
/// the copies kRecomputed (so that CSE keeps them apart).
constexpr llvm::StringLiteral kRecompute = "loom.recompute";
constexpr llvm::StringLiteral kRecomputed = "loom.recomputed";
/// On a copy loom-outline-kernels makes, past the last loom.accumulate, of
/// what the microbatches computed from the params alone (a param's
/// all-slice) for the update: unit; it keeps CSE from making the copy one
/// with the microbatches' op again (the update then read a microbatch's
/// buffer, which the plan refuses).
constexpr llvm::StringLiteral kAfterAccumulates = "loom.after_accumulates";
/// On an op of a pipelined model: the stage (i64) whose block it came
/// from (loom-inline-stages), which its gradient ops inherit
/// (loom-autodiff); loom-place-stages gives one to every op of the
/// per-microbatch program.
constexpr llvm::StringLiteral kStage = "loom.stage";
// On loom.moe_route: the MoE block instance it routes for (its params'
// prefix, "ffn.0") and the mesh axis its experts are split over.
constexpr llvm::StringLiteral kMoeBlock = "loom.moe_block";
constexpr llvm::StringLiteral kMoeAxis = "loom.moe_axis";
/// On a per-rank loom.moe_route whose tokens reach their experts by
/// all-to-all: the mesh axes (names, the expert axis first) the experts
/// and the all-to-alls are split over, for --explain.
constexpr llvm::StringLiteral kMoeExchangeAxes = "loom.moe_exchange_axes";
/// On the ops loom-autodiff builds: they are the backward.
constexpr llvm::StringLiteral kBackward = "loom.backward";
/// loom-place-stages: "forward", "backward" or "update" (the ops that run
/// once per step, after the microbatches), and for an update op the stages
/// (i64 array) whose ranks compute it.
constexpr llvm::StringLiteral kPhase = "loom.phase";
constexpr llvm::StringLiteral kStages = "loom.stages";
/// func, from loom-place-stages: a pipelined per-rank program's number of
/// stages (i64) and its schedule's name.
constexpr llvm::StringLiteral kStagesCount = "loom.stages_count";
constexpr llvm::StringLiteral kSchedule = "loom.schedule";
/// func of a forward-only pipelined model built for one microbatch
/// (mlirGen): the microbatches (i64, >= 2) a run splits the batch into.
constexpr llvm::StringLiteral kForwardMicrobatches = "loom.forward_microbatches";
/// func result of such a model: how the microbatches' values of this
/// output make the whole batch's: "rows" (stacked along dim 0), "mean"
/// (the loss) or "sum" (MoE routing counts).
constexpr llvm::StringLiteral kAssemble = "loom.assemble";
} // namespace attr
} // namespace mlir::loom

#endif // LOOM_IR_LOOMDIALECT_H
