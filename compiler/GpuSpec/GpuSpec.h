//===- GpuSpec.h - NVIDIA GPU limits per architecture and peaks per device ===//

#ifndef LOOM_GPUSPEC_GPUSPEC_H
#define LOOM_GPUSPEC_GPUSPEC_H

#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/StringRef.h"

#include <cstdint>

namespace loom {

/// A tensor-core instruction shape: D[m x n] += A[m x k] * B[k x n] per
/// warp (`mma.sync`) or per warpgroup of 4 warps (`wgmma.mma_async`).
struct MmaShape {
  llvm::StringLiteral instruction; // mma.sync, wgmma.mma_async
  llvm::StringLiteral inputs;      // the A and B type: bf16, f16, tf32, e4m3
  int m, n, k;
  /// When nonzero, n may be any multiple of nStep up to n (wgmma).
  int nStep;
};

/// What bounds the blocks an SM holds at once for one architecture: the
/// inputs of the CUDA occupancy calculator (cuda_occupancy.h).
struct ArchSpec {
  llvm::StringLiteral name; // sm_80; sm_90a and sm_90f use sm_90
  int warpSize;
  int maxThreadsPerBlock;
  int maxThreadsPerSM;
  int maxWarpsPerSM;
  int maxBlocksPerSM;
  int registersPerSM;
  int maxRegistersPerBlock;
  int maxRegistersPerThread;
  /// Shared memory per SM at the largest carveout, and the most one block
  /// may use (opt-in), both without the per-block reservation below.
  int64_t sharedBytesPerSM;
  int64_t maxSharedBytesPerBlock;
  /// Shared memory the driver reserves for each resident block (sm_80 on).
  int64_t reservedSharedBytesPerBlock;
  /// A warp's registers are allocated in units of this many.
  int registerAllocationUnit;
  /// Warps get registers from this many register-file partitions, so the
  /// warps the register file holds are a multiple of it.
  int warpAllocationGranularity;
  /// A block's shared memory is allocated in units of this many bytes.
  int sharedAllocationUnit;
  llvm::ArrayRef<MmaShape> mmaShapes;
};

/// One GPU product: what the roofline of a kernel needs.
struct DeviceSpec {
  llvm::StringLiteral name;        // h200 (loomc --gpu-device)
  llvm::StringLiteral description; // NVIDIA H200 SXM 141 GB
  llvm::StringLiteral arch;        // the ArchSpec it has
  int sms;
  int boostClockMHz;
  /// Dense tensor-core peaks (no 2:4 sparsity), with f32 accumulation.
  double tensorTflops16; // bf16 and f16 operands
  double tensorTflopsTf32;
  /// Peak of f32 fused multiply-adds on the CUDA cores (SIMT).
  double f32Tflops;
  double bandwidthGBs; // device memory, 1 GB/s = 1e9 bytes/s
  /// What loomc --explain plans with: the device memory a rank may fill,
  /// and the per-GPU, one-direction bandwidth of its links to the GPUs of
  /// its node (NVLink, or PCIe) and to other nodes (its InfiniBand HCA).
  int64_t memoryBytes;
  double intraNodeGBs;
  double interNodeGBs;
};

/// Every architecture row, oldest first (sm_20 is a reference row only:
/// Loom does not compile for it).
llvm::ArrayRef<ArchSpec> archSpecs();
/// Every device row.
llvm::ArrayRef<DeviceSpec> deviceSpecs();

/// The row of `name` (sm_80, sm_90a, ...; an `a` or `f` suffix selects the
/// base architecture's row); null when the table has none.
const ArchSpec *lookupArch(llvm::StringRef name);
/// The device called `name` (a100, h200, ...); null when unknown.
const DeviceSpec *lookupDevice(llvm::StringRef name);

/// What a kernel asks of an SM, per block.
struct KernelResources {
  int64_t threadsPerBlock = 1;
  /// Registers per thread; 0 when unknown (no ptxas): not a limit then.
  int registersPerThread = 0;
  /// Static plus dynamic shared memory per block.
  int64_t sharedBytesPerBlock = 0;
};

/// The resource that bounds the resident blocks.
enum class OccupancyLimit { BlockSize, Warps, Blocks, Registers, SharedMemory };

/// `threads` (a block larger than the architecture allows), `warps`,
/// `blocks`, `registers` or `shared memory`.
llvm::StringRef occupancyLimitName(OccupancyLimit limit);

/// Theoretical occupancy: how many blocks of a kernel one SM holds at once,
/// and the active warps as a fraction of the SM's warp slots.
struct Occupancy {
  /// The blocks each resource allows (INT32_MAX when it allows any number).
  int byWarps = 0, byBlocks = 0, byRegisters = 0, bySharedMemory = 0;
  int blocksPerSM = 0;
  int warpsPerSM = 0;
  double fraction = 0;
  /// The first resource, in the order warps, blocks, registers, shared
  /// memory, that allows only blocksPerSM.
  OccupancyLimit limit = OccupancyLimit::Warps;
};

/// The CUDA occupancy calculator's formula
/// (cudaOccMaxActiveBlocksPerMultiprocessor in cuda_occupancy.h), see
/// docs/gpu-report.md.
Occupancy computeOccupancy(const ArchSpec &arch, const KernelResources &kernel);

} // namespace loom

#endif // LOOM_GPUSPEC_GPUSPEC_H
