//===- CpuMatmul.h - The CPU matmul's register tiles and operand layouts --===//

#ifndef LOOM_CODEGEN_CPU_CPUMATMUL_H
#define LOOM_CODEGEN_CPU_CPUMATMUL_H

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"

namespace mlir::loom {

/// The register tile of a CPU matmul: rows x cols f32 accumulators, sized
/// for the target's vector registers (TileContractionsForCpu.cpp).
struct RegisterTile {
  int64_t rows, cols;
};

/// 16 zmm accumulators (8 rows of two 16-lane vectors) with AVX-512's 32
/// registers; 8 ymm (4 rows of two 8-lane vectors) with AVX2's 16.
inline RegisterTile registerTileFor(unsigned vectorBits) {
  return vectorBits >= 512 ? RegisterTile{8, 32} : RegisterTile{4, 16};
}

/// Whether every result of `map` is a plain loop dim (no broadcast
/// operand's constant index).
bool isPlainDims(AffineMap map);

/// The fill of `acc` with +0 that `matmul` accumulates onto: before it in its
/// block, with no use of acc between them but views the matmul alone reads;
/// null if there is none.
linalg::FillOp zeroFillOf(Value acc, linalg::GenericOp matmul);

/// Whether a matmul-like op can run on avx512_bf16's pair dot products
/// (`vdpbf16ps`): bf16 operands, an f32 accumulator (acc + extf * extf), an
/// even K and a K-contiguous A.
bool isBf16PairMatmul(linalg::GenericOp op);

/// What each loop of a (packed) CPU matmul is: a batch dim, m (or its
/// register-tile blocks and rows, with A packed), n (or its panels and a
/// panel's columns, with B packed), k (or k/2 and the pair, with pairs).
enum class MatmulLoop { Batch, M, MBlock, MRow, N, NPanel, NColumn, K, KPair };

/// A matmul-like op with its operands packed.
struct PackedMatmul {
  linalg::GenericOp op;
  /// The copies of B into its panels and, when packed, of A into its.
  SmallVector<linalg::TransposeOp> packs;
  /// The op's loops, in order.
  SmallVector<MatmulLoop> loops;
};

/// `value`'s box of `sizes[i]` at `offsets[i]` along each of `dims`, whole
/// along the others (unit strides).
Value boxOf(OpBuilder &builder, Location loc, Value value, ArrayRef<unsigned> dims,
            ArrayRef<int64_t> offsets, ArrayRef<int64_t> sizes);
/// The zeroed temporary padToWholeTiles copies an operand into: `wide`,
/// filled with zeros, with `original()` copied into its leading corner.
struct PaddedCopy {
  memref::AllocOp wide;
  linalg::FillOp fill;
  memref::SubViewOp corner;
  linalg::CopyOp copy;
  SmallVector<memref::DeallocOp> deallocs;
  Value original() { return copy.getInputs()[0]; }
  /// Erases the temporary and its fill and copy (its reader must read
  /// something else by then).
  void erase();
};
/// `operand`'s padded temporary, when `matmul` is its only other reader
/// (TransposeOperands.cpp).
std::optional<PaddedCopy> paddedCopyOf(Value operand, Operation *matmul);

/// A matmul operand stored across the register tiles' grain, its transpose
/// folded into its indexing map: B K-contiguous ([..., N, K], `q @
/// transpose(k)`), whose 16 columns the broadcast-FMA form would read with
/// 16 strided loads each k step (measured 16x slower at 512^3), or A
/// M-contiguous ([..., K, M], the backward's `x^T @ dy`), which the bf16
/// dots cannot pair. Operand `which` (0: A, 1: B) is copied once into a
/// temporary in the usual layout for the matmul: the copy the transpose
/// kernel used to make. An operand padToWholeTiles padded (a zeroed
/// temporary with the original in its corner) is transposed from the
/// original straight into the padded layout, in pieces: the first, returned,
/// is the bulk in whole blocks of 16 (f32; 32 for 16-bit). Returns the
/// copy's transpose (null when there is none; TransposeOperands.cpp).
linalg::TransposeOp copyTransposedOperand(linalg::GenericOp op, unsigned which);

/// The loops of a matmul-like op that is not packed: (batch..., m, n, k).
SmallVector<MatmulLoop> unpackedLoops(linalg::GenericOp op);

/// Rewrites a matmul-like op whose m and n fill whole register `tile`s so
/// that its register tiles read B as one contiguous stream: B is copied
/// once into panels [..., N/cols, K, cols] (with `pairs`, the VNNI panels
/// [..., N/cols, K/2, cols, 2] the dot products take: pairs of consecutive
/// k side by side), C is viewed as [..., M, N/cols, cols] (with `pairs`, A
/// as [..., M, K/2, 2]) and the op becomes a contraction over (batch..., m,
/// n/cols, cols, k) (with `pairs`, (..., k/2, 2)). Unpacked, a register
/// tile's B rows are N elements apart, and at N = 1024 every one of them
/// falls in the same L1 set. With `packA`, A is copied too, into blocks
/// [..., M/rows, K, rows] (a tile's rows side by side per k: its broadcasts
/// read one stream, where rows K elements apart alias in L1 as B's do), C
/// is viewed as [..., M/rows, rows, N/cols, cols] and m splits in two.
/// Returns nothing (the op unchanged) when B or C is not a static-stride
/// view with B ending in (k, n) or (n, k), or, with `packA`, A does not end
/// in (m, k) (or in (k, m), without `pairs`: its blocks copied from there).
std::optional<PackedMatmul> packMatmul(linalg::GenericOp op, RegisterTile tile,
                                       bool pairs, bool packA);

/// Whether a bf16 pair matmul (isBf16PairMatmul) fits AMX tiles: m and n
/// multiples of 16, k of 32, every operand indexed by plain loop dims, A
/// ending in (m, k) and C in (m, n) (a tile's rows are their rows), B in
/// (k, n) or (n, k) with an innermost stride of 1 (its panels' copy reads
/// it as vectors).
bool isAmxMatmul(linalg::GenericOp op);

/// Rewrites an isAmxMatmul op into loops of AMX tile operations: B copied
/// into VNNI panels by loops of their own, A and C read in place, 2 x 2 f32
/// accumulator tiles carried through the k loop in tile registers
/// (AmxMatmul.cpp). False, with the op unchanged, when packMatmul cannot
/// view its operands; failure (an error emitted) when the rewritten
/// matmul's epilogue does not vectorize.
FailureOr<bool> rewriteAsAmxMatmul(linalg::GenericOp op);

/// Replaces every AMX tile operation under `root` with the vector code of
/// its definition (transfer reads and writes, a contraction over pairs), so
/// the AMX kernels run on any CPU: slowly, but with their loops, layouts and
/// indices unchanged.
LogicalResult emulateAmxTiles(Operation *root);

/// The elementwise op that consumes a matmul's f32 accumulator (the op right
/// after it, reading the accumulator at each element and writing its own
/// output there), when the accumulator is the matmul's alone and the
/// epilogue's output is none of its operands; null otherwise. With
/// `accOperand`, the epilogue's operand number that reads the accumulator.
linalg::GenericOp findMatmulEpilogue(linalg::GenericOp matmul, unsigned *accOperand = nullptr);

/// `epilogue` restricted to the box of `sizes` at `indices` of its iteration
/// space (the accumulator's), vectorized at the rewriter's insertion point:
/// each operand's subview there, the same maps and body.
LogicalResult emitMatmulEpilogueBox(RewriterBase &rewriter, Location loc,
                                    linalg::GenericOp epilogue, ValueRange indices,
                                    ArrayRef<int64_t> sizes);

/// Marks the elementwise op that consumes a matmul's f32 accumulator (the
/// op right after it, reading the accumulator at each element and writing
/// its own output there: a bias, an activation, a residual, a rounding to
/// bf16) for fuseMatmulEpilogues, when the accumulator is the matmul's alone
/// and the epilogue's output is none of its operands. Call it once the
/// matmul's cache tiles cover all of k, so that a register tile's write
/// after its k loop is final.
bool markMatmulEpilogue(linalg::GenericOp matmul);

/// After the register tiles are lowered: each marked epilogue runs on every
/// row strip a register tile writes, right after the write (the strip still
/// in L1), instead of in a second pass over the whole accumulator. The same
/// ops per element: the same results. Epilogues whose accumulator has any
/// other writer are left whole.
LogicalResult fuseMatmulEpilogues(Operation *root);

/// Hoists a register tile's accumulator (a transfer_read and the
/// transfer_write of the same vector at the same loop-invariant place,
/// nothing else in the loop touching the memref) out of its loops, into
/// iter_args, when the memref is one of packMatmul's views of C: upstream's
/// hoist_redundant_vector_transfers leaves every view's transfers alone.
void hoistViewAccumulators(Operation *root);

} // namespace mlir::loom

#endif // LOOM_CODEGEN_CPU_CPUMATMUL_H
