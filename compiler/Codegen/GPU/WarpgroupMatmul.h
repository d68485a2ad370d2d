//===- WarpgroupMatmul.h - What the Hopper matmul kernels share -----------===//
//
// The pieces of the sm_90a matmul kernels (TensorCoreWarpgroup.cpp: one
// block a tile; TensorCorePersistent.cpp: persistent, warp-specialized,
// cooperative or ping-pong, in clusters or not): the tiles and pipelines,
// the operand layouts a tensor map can read, the TMA loads and wgmmas of one
// stage, and the stages' mbarriers.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CODEGEN_GPU_WARPGROUPMATMUL_H
#define LOOM_CODEGEN_GPU_WARPGROUPMATMUL_H

#include "Codegen/GPU/TensorCoreKernel.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

#include <optional>

namespace mlir::loom::wgmma {

constexpr int64_t kBlockM = 128, kBlockK = 64;
constexpr int64_t kMaxStages = 4;
/// A's 128 x 64 tile, first in each stage.
constexpr int64_t kTileBytes = kBlockM * kBlockK * 2;

/// A block tile: 128 x blockN outputs (wgmma m64n<blockN>k16 per
/// warpgroup, blockN / 2 accumulators a thread), and the blocks an SM
/// should hold: two of 128 x 128 (64 accumulators a thread) keep the tensor
/// cores busy while one waits on its barriers; one of 128 x 256 (128
/// accumulators, the registers of one block) reads each operand element
/// from global memory a third less often.
struct WarpgroupTile {
  int64_t blockN, blocksPerSM;
  int64_t stageBytes() const { return (kBlockM + blockN) * kBlockK * 2; }
};
constexpr WarpgroupTile kTiles[] = {{256, 1}, {128, 2}};

/// The shape of a Hopper pipeline: its tile, stages and dynamic shared
/// memory (the stages plus the slack to align them to kAtomBytes).
struct WarpgroupPipeline {
  WarpgroupTile tile;
  int64_t stages, bytes;
};

/// The (outer, inner) loop dims of operand `which` when its indices are
/// plain loop dims, batch dims first: a tensor map's box can then follow
/// the operand's last two dims, and its coordinates are the operand's
/// indices.
std::optional<std::pair<unsigned, unsigned>> indexedDims(const GpuMatmul &mm,
                                                         unsigned which);

/// An operand layout both Hopper kernels can read, and its pipeline.
struct WarpgroupLayout {
  bool aMContiguous, bNContiguous;
  WarpgroupPipeline pipeline;
};

/// What both Hopper kernels share once the launch exists: the tensor maps
/// (made on the host just before the launch), the stages in dynamic shared
/// memory, the TMA loads of one K tile into a stage, and the wgmmas that
/// multiply one stage into the accumulators.
struct WarpgroupMatmul {
  /// With `multicastB`, the kernel runs in clusters of two blocks whose
  /// tiles share B's columns: each block copies half of B's tile into both
  /// blocks' stage by TMA multicast (load).
  WarpgroupMatmul(TensorCoreKernel &kernel, const WarpgroupLayout &layout,
                  bool multicastB = false);

  TensorCoreKernel &kernel;
  bool aMContiguous, bNContiguous, multicastB;
  int64_t stages, blockN, stageBytes, kTiles;
  Value aMap, bMap;
  /// The dynamic shared memory's address, and where the stages start in it.
  Value address, base;
  /// With multicastB: the block's rank in its cluster (0 or 1).
  Value rank;
  /// The accumulators as wgmma's operand: one struct of blockN / 2 f32 a
  /// thread, in the order of the m16n8 tiles along N (TensorCoreKernel's).
  LLVM::LLVMStructType accType;

  Value stageOffset(OpBuilder &b, Value stage) const {
    return kernel.im.add(b, base, kernel.im.mulc(b, stage, stageBytes));
  }
  /// Issues the TMA copies of K tile `kTile` of the current output tile
  /// (kernel.row0, col0 and batch) into `stage`, counted by
  /// `barriers[stage]`, under `predicate` (null: unconditionally).
  void load(OpBuilder &b, Value barriers, Value stage, Value kTile,
            Value predicate) const;
  /// fence, the wgmmas of the K tile in `stage` on `accs`, commit; the
  /// new accumulators (in flight until a wait_group). The warpgroup's own
  /// 64 rows of the tile.
  Value multiply(OpBuilder &b, Value stage, Value accs) const;
  /// The same for the 64-row blocks `rowBlocks` of the tile, one
  /// accumulator struct each (a ping-pong warpgroup computes all of them).
  SmallVector<Value> multiply(OpBuilder &b, Value stage, ValueRange accs,
                              ValueRange rowBlocks) const;
  /// The accumulators loadAccumulators gives, as one struct (at kernel.k).
  Value initialAccumulators() const;
  /// The struct's values, for TensorCoreKernel's write-back.
  SmallVector<Value> unpack(OpBuilder &b, Value accs) const;
};

/// A kernel's stage barriers: groups of one barrier per stage, and thread
/// 0's predicate (`leader`), which initialized them.
struct StageBarriers {
  Value leader;
  SmallVector<Value> groups;
};

/// One group per entry of `arrivals` (each of its barriers expecting that
/// many arrivals), initialized by thread 0 and then made visible to the
/// TMA unit's completions (CUTLASS's fence_barrier_init) and to every
/// thread; with `cluster`, to every thread of the cluster, whose other
/// block multicasts into this one's stages and arrives on its barriers.
StageBarriers createStageBarriers(TensorCoreKernel &kernel, int64_t stages,
                                  ArrayRef<int64_t> arrivals,
                                  bool cluster = false);

/// One arrival on barrier `index` of `barriers` in each block of a cluster
/// of two (this one's included): `mapa` gives the other block's copy of
/// the barrier's shared address, and `mbarrier.arrive` on a
/// `shared::cluster` address reaches it (release at cluster scope, so this
/// block's reads of the stage are done before the other block's producer
/// may refill it). MLIR 22's nvgpu.mbarrier.arrive knows only the block's
/// own barriers, so this is inline PTX, as CUTLASS's ClusterBarrier::arrive.
void arriveInBothBlocks(OpBuilder &b, Location loc, Value barriers,
                        Value index);

/// The persistent kernel's tile and stages: one block per SM, so the
/// stages take the SM's shared memory: 128 x 256 tiles where they give
/// every SM a tile with little padding (choosePipeline's rule), else
/// 128 x 128 (always with `pingpong`, a warpgroup's tile); as many stages
/// as fit beside `epilogueBytes`, at most kMaxStages + 2.
std::optional<WarpgroupPipeline>
choosePersistentPipeline(const GpuMatmul &mm, const TensorCoreTarget &target,
                         int64_t epilogueBytes, bool pingpong);

/// Whether the persistent kernel's blocks 2c and 2c + 1 always take tiles
/// (m, n) and (m + 1, n) of one batch entry: consecutive tile indices are
/// m-adjacent within a group of tile rows (placeTile), so every group must
/// have an even number of rows, which an even number of tile rows gives.
bool sharesTilesOfB(const GpuMatmul &mm);

/// A persistent warp-specialized kernel: `blocks` blocks, each taking
/// output tiles blockIdx.x, blockIdx.x + blocks, ...; warpgroup 2 loads,
/// warpgroups 0 and 1 multiply. Stage s has two barriers: `full` (its
/// copies landed: the producer's expect-tx and the TMA bytes) and `empty`
/// (both consumer warpgroups are done reading it). Both sides count fills
/// across tiles (`use`), so the producer runs up to `stages` K tiles ahead
/// of the consumers, into the next output tile while they write this one.
///
/// With a `tmaStore` destination, each consumer warpgroup writes its tiles
/// back by TMA stores through two boxes of its own after the stages,
/// alternating (TmaStoreEpilogue), and the next tile's K loop starts as
/// soon as the last box is handed to the TMA unit.
///
/// With `multicast` (sharesTilesOfB), blocks 2c and 2c + 1 form a cluster
/// whose tiles (m, n) and (m + 1, n) share B's columns at every K tile:
/// each producer copies its A and half of B, multicast into both blocks'
/// stage, so B crosses L2 once for two tiles. A stage is then refilled by
/// either block's producer, so its `empty` barrier counts the consumer
/// warpgroups of both blocks (4), each releasing a stage in both; the
/// cluster meets once its barriers are initialized and again before any
/// block exits (the other may still arrive on its barriers).
///
/// With `pingpong` (CUTLASS's ping-pong), the two consumer warpgroups take
/// the block's tiles by turns, each a whole 128 x 128 tile (two m64n128
/// accumulator structs, 64 f32 each), and take turns at the tensor cores
/// too: a warpgroup's K loop waits for the other's to end (named barriers
/// 3 and 4, one a warpgroup's turn), so one's write-back runs under the
/// other's wgmmas. Each fill is then read by one warpgroup: `empty` counts
/// one arrival.
void buildPersistentKernel(linalg::GenericOp op, const WarpgroupLayout &layout,
                           int64_t multiprocessors, Value tmaStore,
                           bool multicast, bool pingpong);

} // namespace mlir::loom::wgmma

#endif // LOOM_CODEGEN_GPU_WARPGROUPMATMUL_H
