//===- WarpgroupMma.h - Hopper's TMA boxes and wgmma operands -------------===//
//
// What the sm_90a kernels share (TensorCoreWarpgroup.cpp's matmuls,
// AttentionWarpgroup.cpp's attention): tensor maps whose boxes land in
// shared memory 128-byte swizzled, the wgmma matrix descriptors that read
// them, the mbarrier phase parities, and wgmma with A in registers.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_CODEGEN_GPU_WARPGROUPMMA_H
#define LOOM_CODEGEN_GPU_WARPGROUPMMA_H

#include "Codegen/GPU/TensorCoreKernel.h"

#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/Builders.h"

namespace mlir::loom {

/// 16-bit elements in one 128-byte swizzled shared row (and one TMA box
/// row): the K step, and the width of one box of an N-contiguous B.
constexpr int64_t kRowElements = 64;
constexpr int64_t kRowBytes = 128;
/// The 128-byte swizzle repeats every 8 rows; TMA and the wgmma descriptors
/// agree on it only from a base aligned to that many bytes.
constexpr int64_t kAtomBytes = 8 * kRowBytes;
/// Rows one warpgroup's wgmma covers, and the K of one instruction.
constexpr int64_t kWarpgroupRows = 64, kInstructionK = 16;
/// The threads of a warpgroup (4 warps).
constexpr int64_t kWarpgroupThreads = 128;

/// The layout of an operand the TMA unit can read: at most 5 dims, static
/// shape, strides and offset, unit innermost stride, and the other strides
/// and the offset multiples of 16 bytes.
bool isTensorMapReadable(Value operand);

/// The shared-memory tile one box of `operand` fills: `rows` x
/// kRowElements, with unit dims before them for the operand's batch dims.
MemRefType boxType(Value operand, int64_t rows);

/// A host-side tensor map of `operand` whose box is boxType's, 128-byte
/// swizzled, zero-filled past the edges.
Value createTensorMap(OpBuilder &b, Location loc, Value operand, int64_t rows);

/// A wgmma shared-memory matrix descriptor (PTX ISA, "Matrix Descriptor
/// Format"): the start address, the leading and stride byte offsets (each
/// >> 4, 14 bits), and the 128-byte swizzle mode in bits 62-63.
Value matrixDescriptor(OpBuilder &b, Location loc, Value address,
                       int64_t leadingBytes, int64_t strideBytes);

/// `descriptor` advanced by `bytes` (a multiple of 16) of its start address.
Value advanceDescriptor(OpBuilder &b, Location loc, Value descriptor,
                        int64_t bytes);

/// Use `use` of a stage (its use-th fill) completes its barrier's phase
/// `use`: the parity a wait on that phase names.
Value phaseParity(OpBuilder &b, const IndexMath &im, Value use);

/// `ptx` as inline asm with side effects (so LLVM keeps it in place and
/// never drops it), `operands` bound by `constraints`, of type `results`.
LLVM::InlineAsmOp inlinePtx(OpBuilder &b, Location loc, TypeRange results,
                            ValueRange operands, StringRef ptx,
                            StringRef constraints);

/// `accs` (a struct of n / 2 f32, the m64nN accumulators) plus A times B,
/// by `wgmma.mma_async` with A in registers: `a`, a thread's 4 operand
/// registers of the warpgroup's 64 x 16 A (warp w rows 16w on, in the
/// mma.sync m16n8k16 A layout: packPair's registers), B the k16 x n tile
/// `bDescriptor` names, N-major (transposed) when `nMajorB`. MLIR 22's
/// nvvm.wgmma.mma_async reads A from shared memory only, so this is the
/// instruction as inline PTX, written as that op's lowering writes its own.
/// Needs a wgmma.fence before it and a commit after, as the op does.
Value warpgroupMmaRegisterA(OpBuilder &b, Location loc, Type element,
                            Value accs, ValueRange a, Value bDescriptor,
                            int64_t n, bool nMajorB);

/// `values` (f32 or i32) passed through one empty inline asm that ties
/// each to itself: LLVM must compute them before it and may read the
/// results only after it, and being side-effecting it keeps its place among
/// the wgmma fences and waits. So a fragment written before a
/// `wgmma.fence` stays before it, and an accumulator is read only after
/// its `wgmma.wait_group` (CUTLASS's warpgroup_fence_operand): in LLVM the
/// fence and the wait are intrinsics with no data dependence on wgmma's
/// registers.
SmallVector<Value> pinRegisters(OpBuilder &b, Location loc, ValueRange values);

/// `instruction` (`bar.sync` or `bar.arrive`) on named barrier `firstId`
/// for warpgroup 0 and `secondId` for warpgroup 1, `threads` taking part:
/// the id a constant in each of two branches (a barrier id in a register
/// makes ptxas reserve all 16 barriers for the kernel, which can cost
/// resident blocks), as inline PTX with a `~{memory}` clobber, since LLVM
/// folds two nvvm.barrier ops that differ in a constant back into one with
/// a selected id.
void namedBarrierOfWarpgroup(OpBuilder &b, Location loc, Value warpgroup,
                             StringRef instruction, int firstId, int secondId,
                             int threads);

/// A 16-bit pair register (packPair's: i32, or vector<2xf16>) as i32.
Value registerWord(OpBuilder &b, Location loc, Value reg);

} // namespace mlir::loom

#endif // LOOM_CODEGEN_GPU_WARPGROUPMMA_H
