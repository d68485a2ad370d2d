//===- GpuLoops.h - Shared pieces of loom-map-loops-to-gpu ------*- C++ -*-===//

#ifndef LOOM_CODEGEN_GPU_GPULOOPS_H
#define LOOM_CODEGEN_GPU_GPULOOPS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"

#include <functional>
#include <optional>

namespace mlir::loom {

/// Whether `width` consecutive elements of `memref`, starting at an
/// innermost index that is a multiple of `width` (and any other indices),
/// are contiguous and start on a multiple of `width` elements from a plan
/// buffer (whose start the plan aligns to 64 bytes), so that they are
/// `width` elements aligned in memory. (Vectorized lanes, and the
/// tensor-core kernels' 16-byte copies, tensor maps and paired stores.)
bool isAlignedRun(Value memref, int64_t width);

/// The most threads a block of whole warps may have within `blockSize`
/// (one warp at least; kWarpSize is NVGPU's).
inline int64_t maxBlockThreads(int64_t blockSize) {
  return std::max<int64_t>(kWarpSize, blockSize / kWarpSize * kWarpSize);
}

/// The buffer `memref` views (through any view ops), or `memref` itself.
Value viewRoot(Value memref);

/// Success where `kernel` takes and makes no tensors; otherwise an error at
/// the first tensor, saying that `pass` runs on bufferized kernels. (The GPU
/// passes build launches of buffers; loom-opt can hand them tensor IR.)
LogicalResult requireBufferized(func::FuncOp kernel, StringRef pass);

inline Value constantIndex(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(b, loc, v);
}

/// A launch of `blocks` blocks of `threads` threads (x only) at `b`'s
/// insertion point, and its threads' global index (block x threads +
/// thread), computed at the start of its body; the caller adds the body
/// (from the returned builder) and its terminator.
struct LinearLaunch {
  gpu::LaunchOp launch;
  Value index;
  OpBuilder body;
};
LinearLaunch createLinearLaunch(OpBuilder &b, Location loc, int64_t blocks,
                                int64_t threads);

/// One thread per index in [0, count), in blocks of `threads` (the last
/// block's extra threads do nothing): `body` builds a thread's work from
/// its index. Returns the launch, terminated.
gpu::LaunchOp createGuardedLaunch(
    OpBuilder &b, Location loc, int64_t count, int64_t threads,
    function_ref<void(OpBuilder &, Location, Value index)> body);

/// A loop's static bounds, one entry per induction variable.
struct LoopSpace {
  SmallVector<int64_t> lower, trips, steps;
  int64_t total = 1;
  bool operator==(const LoopSpace &other) const {
    return lower == other.lower && trips == other.trips && steps == other.steps;
  }
};

/// The bounds of `loop`, or nothing when one is not a constant (or a step
/// is not positive).
std::optional<LoopSpace> getLoopSpace(scf::ParallelOp loop);

/// The same for loops given by their bounds, one entry per loop (a nest of
/// scf.for, outermost first).
std::optional<LoopSpace> getLoopSpace(ValueRange lowers, ValueRange uppers,
                                      ValueRange steps);

/// Maps `ivs` (with bounds `space`) to the iteration with row-major linear
/// index `linear`: the last varies fastest, as in memory.
void delinearize(OpBuilder &b, Location loc, Value linear, ValueRange ivs,
                 const LoopSpace &space, IRMapping &mapping);

/// A row reduction as linalg's loops leave it: for each row (the parallel
/// loop), a sequential loop over the row that loads the row's accumulator,
/// combines one value into it and stores it back.
struct RowReduction {
  scf::ForOp inner;
  memref::LoadOp accLoad;
  memref::StoreOp accStore;
  Operation *combine; // arith.addf, arith.maximumf or arith.maxnumf
  int64_t length;     // the inner loop's trip count
};

std::optional<RowReduction> matchRowReduction(scf::ParallelOp loop);

/// The accumulation of a row reduction's inner loop alone: `inner` (from 0
/// by 1 to a constant) loads an accumulator element that does not move
/// with it, combines one value into it and stores it back, and writes
/// nothing else.
std::optional<RowReduction> matchAccumulatingLoop(scf::ForOp inner);

/// A full reduction as linalg's loops leave it: a perfect nest of
/// sequential loops whose innermost one accumulates into one element that
/// none of the nest's loops moves.
struct ScalarReduction {
  SmallVector<scf::ForOp> fors; // outermost first
  RowReduction reduction;       // the innermost loop's accumulation
  LoopSpace space;              // the bounds of `fors`
};

std::optional<ScalarReduction> matchScalarReduction(scf::ForOp outer);

/// Runs `nest` as a grid-strided launch: each thread combines its share of
/// the iterations, each warp its threads' partials by shuffles, and each
/// warp's lane 0 folds the result into the accumulator atomically.
void mapScalarReduction(ScalarReduction nest, int64_t blockSize);

/// Runs `loop`, a parallel loop around a full reduction's nest (an
/// interchanged reduction over an outer axis) with few iterations and many
/// terms each (a bias's gradient: 2048 outputs of 8192 terms), as one
/// thread per output and chunk of its terms, each folding its partial sum
/// into the output atomically; false (nothing changed) where one thread per
/// output is enough or the body is not such a nest.
bool mapSplitReduction(scf::ParallelOp loop, const LoopSpace &space,
                       int64_t blockSize);

/// Rewrites `for ... { for ... { parallel (P) { body } } }` (each loop's
/// body holding only the next) as `parallel (P) { for ... { for ... { body
/// } } }` when every parallel iteration accesses only its own elements of
/// what the body writes (a reduction over an outer axis); returns the new
/// loop, or null (nothing changed).
scf::ParallelOp interchangeIntoParallel(scf::ForOp outer);

/// The identity of a row reduction's combine (0 or -inf).
Value combineIdentity(OpBuilder &b, Location loc, Operation *combine);

/// combine(x, y) with `combine`'s kind and attributes.
Value emitCombine(OpBuilder &b, Location loc, Operation *combine, Value x,
                  Value y);

/// Butterfly of xor shuffles over a warp of 32: every lane ends with the
/// combination of all 32 lanes' `partial`.
Value emitWarpCombine(OpBuilder &b, Location loc, Operation *combine,
                      Value partial);

/// Runs a straight-line loop body `width` iterations at a time along one
/// induction variable `iv` (lanes 0..width-1 take iv = base + lane, in
/// lockstep, which any interleaving of a parallel loop's iterations
/// allows): loads and stores whose innermost index is `iv` become one
/// aligned vector.load / vector.store of `width` elements, loads that do
/// not move with `iv` are done once, and every other op is repeated per
/// lane, so each lane computes exactly what its scalar iteration did.
class LaneVectorizer {
public:
  /// Analyzes `ops` (without a terminator) along `iv`; width() is 1 when
  /// they cannot be run that way.
  LaneVectorizer(ArrayRef<Operation *> ops, Value iv);

  /// The lanes per thread: 16 bytes of the narrowest element accessed
  /// along `iv` (8 for bf16), or 1.
  int64_t width() const { return width_; }

  /// Builds a vector load (or returns one already loaded).
  using VectorLoader = std::function<Value(OpBuilder &, Location, VectorType,
                                           Value memref, ValueRange indices)>;

  /// Emits the ops for lanes base .. base + width - 1; `lanes` holds one
  /// mapping per lane (filled in), `beforeClone` runs before an op is
  /// cloned for a lane, `loader` (if any) provides the vector loads.
  void emit(OpBuilder &b, Location loc, Value base, const IRMapping &outer,
            SmallVectorImpl<IRMapping> &lanes,
            const std::function<void(Operation *, int64_t, IRMapping &)>
                &beforeClone = nullptr,
            const VectorLoader &loader = nullptr) const;

  /// A vector load of `type` at `indices`, marked 16-byte aligned.
  static Value load(OpBuilder &b, Location loc, VectorType type, Value memref,
                    ValueRange indices);

private:
  enum class Access { Contiguous, Uniform };
  SmallVector<Operation *> ops_;
  Value iv_;
  llvm::DenseMap<Operation *, Access> accesses_;
  int64_t width_ = 1;
};

/// Maps each run of row-wise loops among `entry`'s top-level ops (fills
/// and scalar steps per row, row reductions, elementwise loops over each
/// row, all over the same rows) to one launch of one block per row, the
/// steps in sequence separated by barriers; a run is left alone unless every
/// buffer it writes is only ever accessed at the row of the step's own
/// iteration.
void fuseRowSteps(Block &entry, int64_t blockSize);

} // namespace mlir::loom

#endif // LOOM_CODEGEN_GPU_GPULOOPS_H
