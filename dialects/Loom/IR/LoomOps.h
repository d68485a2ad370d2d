//===- LoomOps.h - Operations of the loom dialect -------------------------===//

#ifndef LOOM_IR_LOOMOPS_H
#define LOOM_IR_LOOMOPS_H

#include "Loom/IR/LoomDialect.h"
#include "Loom/IR/LoomVjpInterface.h"
#include "Loom/IR/TypeRules.h"

#include "mlir/Bytecode/BytecodeOpInterface.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/OpDefinition.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/SetVector.h"
#include "mlir/Interfaces/ControlFlowInterfaces.h"
#include "mlir/Interfaces/InferTypeOpInterface.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

#define GET_OP_CLASSES
#include "Loom/IR/LoomOps.h.inc"

namespace mlir::loom {
/// Ops that compute each element from the same (broadcast) element of their
/// operands: they follow their operands' layout when partitioned, and run
/// as the epilogue of the kernel producing an operand.
inline bool isElementwise(Operation *op) {
  return isa<AddOp, SubOp, MulOp, DivOp, MaximumOp, MinimumOp, NegOp, GeluOp, ReluOp,
             SiluOp, SigmoidOp, ExpOp, LogOp, TanhOp, SqrtOp, SinOp, CosOp, AbsOp, ErfOp, CastOp,
             ActivationGradOp, MaxMaskOp>(op);
}

/// The elementwise ops of two operands with numpy broadcasting: each
/// operand's dims align with the result's trailing ones.
inline bool isBroadcastBinary(Operation *op) {
  return isa<AddOp, SubOp, MulOp, DivOp, MaximumOp, MinimumOp>(op);
}

/// A vocab-parallel table's `rows %r of V` (embedding, embedding_grad):
/// both or neither, one id per row of `table`, no more rows than V.
LogicalResult verifyTableRows(Operation *op, RankedTensorType table, Value rows,
                              std::optional<uint64_t> vocab);

/// The values `op` reads from outside itself: its operands, then what the
/// ops of its regions capture (a stage's body, a hand-written loop's).
llvm::SetVector<Value> valuesRead(Operation *op);

/// Ops a model keeps beside its kernel calls, as plan steps of their own:
/// the shard collectives and loom.accumulate.
bool isPlanStepOp(Operation *op);

/// Whether `op` is a gradient bucket's all-reduce (loom-bucket-gradients)
/// right after another of the same bucket, at the same place: the plan
/// makes them one `collective all-reduce` of several IN OUT pairs, one
/// message.
bool joinsGradientBucket(Operation *op);

/// Queries and keys per block of a loom.attention lowered for the CPU: 64
/// or 32 where they divide both sequence lengths, else the largest divisor
/// of both up to 64 (a 64 x 64 f32 score tile per batch entry stays in L2).
int64_t attentionBlockSize(int64_t queries, int64_t keys);

/// The (query, key) pairs an attention of these shapes scores, over its
/// batch (causal: query i sees keys 0..i).
double attentionPairs(ArrayRef<int64_t> query, ArrayRef<int64_t> key, bool causal);

/// The FLOPs the GPU attention kernels compute for an attention of these
/// shapes ([b..., queries, features], [b..., keys, features], [b..., keys,
/// value features]): both products over the (query, key) pairs (causal:
/// query i sees keys 0..i), 2 (E + Ev) a pair; for the gradient the
/// scores and dp twice (the query side, the key side), dq, dk and dv,
/// 2 (4 E + 3 Ev) a pair.
/// --kernel-report and --explain both count them.
double attentionFlops(ArrayRef<int64_t> query, ArrayRef<int64_t> key,
                      ArrayRef<int64_t> value, bool causal, bool gradient);

/// Whether the GPU attention kernels (loom-build-gpu-attention) run an
/// attention and its backward of these operand types: bf16 or f16
/// accumulated in f32 (they multiply on mma.sync), sequences multiples of
/// 16 (a warp's rows, a block of columns), feature sizes multiples of 16 up
/// to 128 (a warp holds its rows' accumulators in registers).
bool gpuRunsAttention(RankedTensorType query, RankedTensorType key,
                      RankedTensorType value, Type accumulate);

/// Whether a transpose `permutation` swaps the last two dims and keeps the
/// others: a matrix transpose (of each batch), which a matmul can read in
/// place as a K-contiguous B.
inline bool swapsLastTwoDims(ArrayRef<int64_t> permutation) {
  int64_t rank = permutation.size();
  if (rank < 2)
    return false;
  for (int64_t d = 0; d + 2 < rank; ++d)
    if (permutation[d] != d)
      return false;
  return permutation[rank - 2] == rank - 1 && permutation[rank - 1] == rank - 2;
}
} // namespace mlir::loom

#endif // LOOM_IR_LOOMOPS_H
