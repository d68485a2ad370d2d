//===- TmaStoreEpilogue.h - wgmma tiles written back by TMA stores --------===//
//
// The write-back of a Hopper matmul tile through shared memory: each
// consumer warpgroup puts its 64 rows, converted to the result's 16-bit
// type (through the fused epilogue, if any), into 64 x 64 boxes laid out
// as the TMA unit's 128-byte swizzle, and one of its threads stores each
// box with `cp.async.bulk.tensor` (`nvgpu.tma.async.store`). The global
// writes are then whole 128-byte lines issued by the TMA unit, off the
// consumers' instruction stream, and clipped at the result's edges by the
// tensor map, where the direct write-back (TensorCoreKernel::writeBack)
// stores 4 bytes a thread at a time behind a bounds check.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CODEGEN_GPU_TMASTOREEPILOGUE_H
#define LOOM_CODEGEN_GPU_TMASTOREEPILOGUE_H

#include "Codegen/GPU/TensorCoreKernel.h"

namespace mlir::loom {

/// The shared-memory bytes of one box (64 rows of 128 bytes).
constexpr int64_t kStoreBoxBytes = 64 * 128;

struct TmaStoreEpilogue {
  /// The buffer the kernel of `op` writes (C, or its fused epilogue's one
  /// output), when TMA stores can write it: a 16-bit result a tensor map
  /// can describe, indexed as C is with m and n its last two dims; and,
  /// where the epilogue reads other buffers (a bias), only whole tiles of
  /// 128 x 256, since every element of a box is computed. Null otherwise.
  static Value destinationOf(linalg::GenericOp op);

  /// Makes the destination's tensor map on the host, before the launch.
  TmaStoreEpilogue(TensorCoreKernel &kernel, Value result);

  /// Writes the current tile's accumulators (TensorCoreKernel's layout,
  /// blockN / 2 a thread of the 256 consumer threads) box by box: box j of
  /// warpgroup w goes through the shared memory at `bufferAt(b, w, j)` (a
  /// byte offset in the dynamic shared memory, 1024-byte aligned). With
  /// `reuse`, buffers repeat (two a warpgroup, alternating): before
  /// filling one, its previous store must have read it. The accumulators
  /// are the tile's 64-row block `rowBlock` (null: the warpgroup's own).
  void
  store(OpBuilder &b, ValueRange accs,
        function_ref<Value(OpBuilder &, Value warpgroup, int64_t box)> bufferAt,
        bool reuse, Value rowBlock = Value());
  /// Waits, in each warpgroup's storing thread, for its stores to finish:
  /// shared memory must outlive the TMA unit's reads of it.
  void drain(OpBuilder &b);

  TensorCoreKernel &kernel;
  Value result, map;

private:
  /// The consumer thread that issues its warpgroup's stores, and the
  /// warpgroup's named barrier (1 + warpgroup, 128 threads; 0 is
  /// gpu.barrier's).
  Value issuer(OpBuilder &b) const;
  void syncWarpgroup(OpBuilder &b, Value warpgroup) const;
};

} // namespace mlir::loom

#endif // LOOM_CODEGEN_GPU_TMASTOREEPILOGUE_H
