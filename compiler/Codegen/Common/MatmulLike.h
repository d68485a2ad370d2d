//===- MatmulLike.h - Which linalg ops the tilers treat as matmuls ---------===//

#ifndef LOOM_CODEGEN_COMMON_MATMULLIKE_H
#define LOOM_CODEGEN_COMMON_MATMULLIKE_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"

namespace mlir::loom {

/// A bufferized contraction both tilers (CPU and GPU) handle: static loops
/// (batch..., m, n, k) with only k a reduction, A = f(batch, m, k),
/// B = f(batch, k, n), C = f(batch, m, n), and a body without linalg.index.
/// A must read m and B n: an embedding's gradient with its rows, the ids
/// A = f(k), and its gradient B = f(k, n), has a matmul's loops but is a
/// scatter-add (and A no two dims for the tilers to swap).
inline bool isMatmulLike(linalg::GenericOp op) {
  if (!op.hasPureBufferSemantics() || op.getNumDpsInputs() != 2 ||
      op.getNumDpsInits() != 1 || op.getNumLoops() < 3 ||
      llvm::any_of(op.getStaticLoopRanges(), ShapedType::isDynamic) ||
      !op.getBody()->getOps<linalg::IndexOp>().empty())
    return false;
  auto iterators = op.getIteratorTypesArray();
  for (auto [i, it] : llvm::enumerate(iterators))
    if ((it == utils::IteratorType::reduction) != (i + 1 == iterators.size()))
      return false;
  unsigned m = op.getNumLoops() - 3, n = m + 1, k = m + 2;
  SmallVector<AffineMap> maps = op.getIndexingMapsArray();
  return !maps[0].isFunctionOfDim(n) && maps[0].isFunctionOfDim(k) &&
         maps[0].isFunctionOfDim(m) && maps[1].isFunctionOfDim(n) &&
         !maps[1].isFunctionOfDim(m) && maps[1].isFunctionOfDim(k) &&
         !maps[2].isFunctionOfDim(k) && maps[2].isProjectedPermutation();
}

/// Whether `output` is, or views, a buffer one of `matmul`'s operands is or
/// views (through subviews, reinterpret casts, reshapes). An epilogue fused
/// into the matmul's tiles must not write such a buffer: later tiles, or
/// other blocks, still read it (a CPU bf16 attention's output bufferized
/// into its probabilities' bytes, which its P @ V reads, came out wrong in
/// every row).
bool writesMatmulOperand(linalg::GenericOp matmul, Value output);

/// A matmul-like op the GPU runs on tensor cores: bf16 or f16 operands,
/// an f32 accumulator, and the body acc + extf(a) * extf(b).
bool isTensorCoreMatmul(linalg::GenericOp op);

/// The block tile of a tensor-core matmul: blockM x blockN outputs per
/// block of warpsM x warpsN warps (the K step is the kernel's choice).
struct TensorCoreTile {
  int64_t blockM, blockN, warpsM, warpsN;
};

/// Whether blockM x blockN tiles of an M x N (x batches) output give every
/// one of `multiprocessors` SMs a block and waste at most a quarter of
/// their outputs on padding: the tile choices' rule.
inline bool tileFillsWave(int64_t m, int64_t n, int64_t batches,
                          int64_t blockM, int64_t blockN,
                          int64_t multiprocessors) {
  int64_t rows = llvm::divideCeil(m, blockM), cols = llvm::divideCeil(n, blockN);
  double useful = double(m * n) / double(rows * blockM * cols * blockN);
  return rows * cols * batches >= multiprocessors && useful >= 0.75;
}

/// The block tile for an M x N (x batches) matmul on a GPU with
/// `multiprocessors` SMs: the largest that fills one wave with little
/// padding (TensorCoreMatmul.cpp documents the rule).
TensorCoreTile chooseTensorCoreTile(int64_t m, int64_t n, int64_t batches,
                                    int64_t multiprocessors);

/// What the tensor-core tiling needs to know of the GPU (from the spec
/// table): its SMs, the shared memory one block may use (the opt-in limit,
/// or less) and one SM has, and what the driver reserves per block.
struct TensorCoreTarget {
  int64_t multiprocessors = 132;
  int64_t sharedPerBlock = 48 * 1024;
  int64_t sharedPerSM = 228 * 1024;
  int64_t reservedSharedPerBlock = 1024;
  /// Whether matmuls may run on sm_90a's warpgroup wgmma fed by TMA
  /// (TensorCoreWarpgroup.cpp) rather than mma.sync.
  bool warpgroupMma = false;
  /// With warpgroupMma: the persistent warp-specialized wgmma kernel (a
  /// block per SM looping over tiles, a producer warpgroup issuing TMA)
  /// instead of one block per tile.
  bool persistentWarpgroupMma = false;
  /// With persistentWarpgroupMma: the two consumer warpgroups take 128 x 128
  /// tiles and the tensor cores by turns (CUTLASS's ping-pong).
  bool pingpongWarpgroupMma = false;
  /// With warpgroupMma: 16-bit results leave through shared memory by TMA
  /// stores (TmaStoreEpilogue.h) instead of each thread's global stores.
  bool tmaStoreEpilogue = false;
  /// With persistentWarpgroupMma: clusters of two blocks sharing B's tiles
  /// by TMA multicast, where their tiles pair up.
  bool tmaMulticast = false;
  /// The shared memory each of `blocksPerSM` blocks may use: its share of
  /// the SM less the driver's reservation, within the per-block limit.
  int64_t sharedBudget(int64_t blocksPerSM) const {
    return std::min(sharedPerBlock,
                    sharedPerSM / blocksPerSM - reservedSharedPerBlock);
  }
};

/// Replaces a tensor-core matmul by a `gpu.launch` running
/// `mma.sync.m16n8k16`, with the tile chooseTensorCoreTile picks
/// (TensorCoreMatmul.cpp). Fails, leaving `op`, where no tensor-core kernel
/// fits the target's shared memory per block.
LogicalResult buildTensorCoreMatmul(linalg::GenericOp op, const TensorCoreTarget &target);

} // namespace mlir::loom

#endif // LOOM_CODEGEN_COMMON_MATMULLIKE_H
