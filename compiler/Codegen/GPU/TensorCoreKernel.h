//===- TensorCoreKernel.h - What the tensor-core matmul kernels share -----===//
//
// A tensor-core matmul kernel is one `gpu.launch` of blocks of warps, each
// block computing a blockM x blockN output tile with f32 accumulators in
// registers in the m16n8 layout. How A and B reach the tensor cores
// differs (TensorCoreMatmul.cpp stages them element by element, any layout,
// for mma.sync m16n8k16 or m16n8k8 tf32; TensorCorePipeline.cpp with
// cp.async and ldmatrix, 16-byte aligned rows; TensorCoreWarpgroup.cpp
// with TMA and wgmma); the launch, the thread coordinates, the
// accumulators' layout, the mma.sync and the write-back are this skeleton.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CODEGEN_GPU_TENSORCOREKERNEL_H
#define LOOM_CODEGEN_GPU_TENSORCOREKERNEL_H

#include "Codegen/GPU/GpuMatmul.h"
#include "Codegen/Common/MatmulLike.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

namespace mlir::loom {

/// Index arithmetic at one location, folded where constant.
struct IndexMath {
  Location loc;
  Value cst(OpBuilder &b, int64_t v) const;
  Value add(OpBuilder &b, Value x, Value y) const;
  Value addc(OpBuilder &b, Value x, int64_t y) const;
  Value mulc(OpBuilder &b, Value x, int64_t y) const;
  Value divc(OpBuilder &b, Value x, int64_t y) const;
  Value remc(OpBuilder &b, Value x, int64_t y) const;
  Value xorv(OpBuilder &b, Value x, Value y) const;
  /// x < bound (unsigned).
  Value below(OpBuilder &b, Value x, int64_t bound) const;
  Value both(OpBuilder &b, Value x, Value y) const;
};

/// Work a tensor-core matmul kernel absorbs from its neighbours
/// (TensorCoreFusion.cpp): the fill of C just before it, so that the
/// accumulators start from the fill's constant instead of loading C; and
/// the elementwise op just after it that reads C (the rounding to bf16, a
/// bias, an activation), computed on the accumulators and stored to that
/// op's outputs, when C is a kernel temporary nothing else reads. Either
/// saves a pass over C in global memory.
struct TensorCoreFusion {
  linalg::FillOp fill;
  FloatAttr fillValue;
  linalg::GenericOp epilogue;
};
TensorCoreFusion findTensorCoreFusion(linalg::GenericOp op);

/// The epilogue's results (one per output) for C's element at `cIndices`
/// (its loop values, C being read with the identity map) holding `acc`.
SmallVector<Value> evaluateEpilogue(OpBuilder &b, Location loc,
                                    linalg::GenericOp epilogue, Value c,
                                    ValueRange cIndices, Value acc);
/// `pair` (a vector<2xT> of 16-bit T) through an opaque 32-bit move: LLVM
/// keeps it one register, so the conversion that made it takes both
/// halves in one instruction (cvt.rn.bf16x2.f32) instead of being split
/// where its halves are used apart.
Value keepPairPacked(OpBuilder &b, Location loc, Value pair);
/// evaluateEpilogue for two of C's elements at once, `first` holding `acc0`
/// and `second` `acc1`: each result a vector<2xT>. An elementwise body is
/// evaluated on the pairs (one cvt.rn.bf16x2 rounds both accumulators: a
/// scalar rounding of a wgmma accumulator makes ptxas serialize the
/// wgmmas, C7514); any other is evaluated twice.
SmallVector<Value> evaluateEpiloguePair(OpBuilder &b, Location loc,
                                        linalg::GenericOp epilogue, Value c,
                                        ValueRange first, ValueRange second,
                                        Value acc0, Value acc1);
/// Where the epilogue reads or writes `operand` at C's element `cIndices`.
SmallVector<Value> epilogueIndices(OpBuilder &b, Location loc,
                                   linalg::GenericOp epilogue,
                                   OpOperand &operand, ValueRange cIndices);
/// Whether `buffer`, indexed by `map`, holds the elements at loop value `dim`
/// and `dim` + 1 side by side in an aligned pair for every even value of
/// `dim`: the map's last result is `dim`, unit innermost stride, and even
/// offset and strides otherwise.
bool holdsPairsAlongLastDim(Value buffer, AffineMap map, unsigned dim);

/// One `mma.sync` of `element` operands (bf16 or f16: m16n8k16; f32 as
/// tf32: m16n8k8) with row-major A and column-major B: `a` (4 registers)
/// times `b` (2) plus the f32 accumulators `c` (4); the 4 sums.
SmallVector<Value, 4> mmaSync(OpBuilder &builder, Location loc, Type element,
                              ValueRange a, ValueRange b, ValueRange c);
/// Two 16-bit values as one mma operand register, `lo` in the low half
/// (i32 for bf16, vector<2xf16> for f16, as nvvm.mma.sync takes them).
Value packPair(OpBuilder &b, Location loc, Type element, Value lo, Value hi);
/// A vector<2xT> (two adjacent elements loaded at once) as one mma operand
/// register.
Value pairAsRegister(OpBuilder &b, Location loc, Type element, Value pair);

/// The kernel being built: created with the launch (its shared-memory
/// buffers are `workgroup`), with the builder `k` at the start of its body.
struct TensorCoreKernel {
  /// Shared memory is `workgroup` attributions, or, with
  /// `dynamicSharedBytes`, that much dynamic shared memory
  /// (`dynamicShared`), which the kernel carves into views itself.
  /// A block has the tile's warps, plus `producerThreads` after them (a
  /// warp-specialized kernel's loaders). With `persistentBlocks`, the grid
  /// is that many blocks, each looping over output tiles, and the kernel
  /// places each tile itself (placeTile); otherwise a block is one tile.
  /// With `clusterBlocks`, consecutive blocks form clusters of that many
  /// (`gpu.launch clusters`).
  TensorCoreKernel(linalg::GenericOp op, TensorCoreTile tile,
                   TypeRange workgroup, int64_t dynamicSharedBytes = 0,
                   int64_t producerThreads = 0, int64_t persistentBlocks = 0,
                   int64_t clusterBlocks = 0);

  linalg::GenericOp op;
  TensorCoreFusion fusion;
  GpuMatmul mm;
  TensorCoreTile tile;
  Location loc;
  IndexMath im;
  Type element;
  gpu::LaunchOp launch;
  OpBuilder k;
  int64_t warpM, warpN, threads, tilesM, tilesN;
  /// Thread coordinates: the flat thread id, warp and lane, the lane's
  /// group g = lane / 4 and t = lane % 4 (the PTX fragment tables' names),
  /// where the warp's part starts in the block tile, and where the block
  /// tile starts in the output.
  Value tid, warp, lane, g, t, warpRow, warpCol, row0, col0;

  /// Sets row0, col0 and the batch to those of output tile `index`, where
  /// a persistent block's tile loop is: per batch entry, groups of
  /// kGroupRows rows of tiles, each group column by column (m fastest).
  /// The blocks in flight together then read ~16 rows of A and ~8 columns
  /// of B rather than ~4 rows and all of B (8192^3: 65 MB a wave from
  /// memory rather than 138 MB, against a 50 MB L2), as Triton's and
  /// CUTLASS's rasterizations do.
  void placeTile(OpBuilder &b, Value index);
  static constexpr int64_t kGroupRows = 16;

  /// The kernel's shared-memory buffers.
  SmallVector<Value> shared;
  /// With dynamicSharedBytes: the launch's dynamic shared memory as bytes
  /// (`gpu.dynamic_shared_memory`, memref<?xi8, workgroup>).
  Value dynamicShared;
  Value workgroupBuffer(unsigned i) { return shared[i]; }
  /// The accumulators (tilesM x tilesN tiles of 4 f32), loaded from C or
  /// set to the fused fill's value.
  SmallVector<Value> loadAccumulators();
  /// One mma.sync per (A fragment, B fragment) pair, accumulating into
  /// `accs` in place. A fragments are 4 registers, B fragments 2 (i32 for
  /// bf16, vector<2xf16> for f16).
  void multiply(OpBuilder &b, ArrayRef<SmallVector<Value, 4>> aFrags,
                ArrayRef<SmallVector<Value, 4>> bFrags,
                MutableArrayRef<Value> accs);
  /// Two 16-bit values as one mma operand register, `lo` in the low half.
  Value pack(OpBuilder &b, Value lo, Value hi);
  /// A vector<2xT> as one mma operand register.
  Value asRegister(OpBuilder &b, Value pair);
  /// Writes the final accumulators to C (or through the fused epilogue),
  /// terminates the launch, erases the op and what it fused, and sinks the
  /// operands' views into the launch.
  void finish(ValueRange accs) {
    writeBack(accs);
    close();
  }
  /// finish's two halves: the stores of the current tile's accumulators
  /// (at `k`), and the rest.
  void writeBack(ValueRange accs);
  void close();
};

/// The physical 16-byte chunk of logical chunk `chunk` in row `row`: an
/// XOR with the row's low bits, so that 8 consecutive rows' same chunk land
/// in 8 different 16-byte bank groups (a 128-byte line holds 128 / (16 *
/// chunksPerRow) rows); always a chunk of the same row.
/// (Shared by the cp.async pipeline and the attention kernel's staged
/// operands.)
Value swizzleChunk(OpBuilder &b, const IndexMath &im, Value row, Value chunk,
                   int64_t chunksPerRow);

/// In step `kTile` of a `stages`-deep pipeline over `kTiles` K tiles, once
/// the stage the previous step read is free: if tile kTile + stages - 1
/// exists, `load(b, its stage, it)` refills that stage with it.
void loadAhead(OpBuilder &b, const IndexMath &im, Value kTile, int64_t stages,
               int64_t kTiles,
               function_ref<void(OpBuilder &, Value stage, Value tile)> load);

/// Builds the cp.async + ldmatrix kernel of TensorCorePipeline.cpp when
/// both operands' rows are 16-byte aligned; fails, leaving `op` alone,
/// otherwise.
LogicalResult buildPipelinedTensorCoreMatmul(linalg::GenericOp op,
                                             TensorCoreTile tile,
                                             const TensorCoreTarget &target);

/// Builds the wgmma + TMA kernel of TensorCoreWarpgroup.cpp (sm_90a) when a
/// tensor map can read both operands (16-byte aligned rows, A K- or
/// M-contiguous, B K- or N-contiguous); fails, leaving `op` alone,
/// otherwise. With `target.persistentWarpgroupMma`, the persistent
/// warp-specialized variant.
LogicalResult buildWarpgroupTensorCoreMatmul(linalg::GenericOp op,
                                             const TensorCoreTarget &target);

} // namespace mlir::loom

#endif // LOOM_CODEGEN_GPU_TENSORCOREKERNEL_H
