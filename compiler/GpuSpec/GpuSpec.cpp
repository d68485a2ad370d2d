//===- GpuSpec.cpp - NVIDIA GPU limits per architecture, peaks per device -===//
//
// Sources. Per-SM limits: the CUDA C++ Programming Guide, "Technical
// Specifications per Compute Capability" (CUDA 12; CUDA 8's for 2.0).
// Allocation units, register-file partitions, the reserved shared memory and
// the formula: cuda_occupancy.h of the CUDA 13.0 toolkit (for 2.0, the CUDA
// Occupancy Calculator spreadsheet of CUDA 8). Tensor-core shapes: PTX ISA
// 8.0, "mma" and "wgmma.mma_async". Device rows: each product's datasheet.
//
//===----------------------------------------------------------------------===//

#include "GpuSpec/GpuSpec.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cstdint>

using namespace loom;

namespace {
// mma.sync from sm_80 on: one warp, f32 accumulators.
const MmaShape kAmpereMma[] = {
    {"mma.sync", "bf16", 16, 8, 16, 0},
    {"mma.sync", "f16", 16, 8, 16, 0},
    {"mma.sync", "tf32", 16, 8, 8, 0},
};
// sm_90a adds wgmma: a warpgroup of 4 warps, n = 8, 16, ..., 256 (wgmma is
// not in plain sm_90's PTX).
const MmaShape kHopperMma[] = {
    {"mma.sync", "bf16", 16, 8, 16, 0},
    {"mma.sync", "f16", 16, 8, 16, 0},
    {"mma.sync", "tf32", 16, 8, 8, 0},
    {"wgmma.mma_async", "bf16", 64, 256, 16, 8},
    {"wgmma.mma_async", "f16", 64, 256, 16, 8},
    {"wgmma.mma_async", "tf32", 64, 256, 8, 8},
    {"wgmma.mma_async", "e4m3", 64, 256, 32, 8},
};

// Columns: name; warp size, threads per block; threads, warps and blocks
// per SM; registers per SM, per block and per thread; shared memory per SM,
// per block and reserved per block; register allocation unit, warp
// allocation granularity, shared-memory allocation unit; tensor-core shapes.
// clang-format off
const ArchSpec kArchs[] = {
    // Fermi: 48 KB shared memory with the 48/16 KB split, 63 registers per
    // thread, registers in units of 64 and warps in pairs; no tensor cores.
    {"sm_20", 32, 1024, 1536, 48, 8, 32768, 32768, 63, 48 * 1024, 48 * 1024,
     0, 64, 2, 128, {}},
    // A100: 164 KB of the 192 KB L1 can be shared memory, 163 KB per block.
    {"sm_80", 32, 1024, 2048, 64, 32, 65536, 65536, 255, 164 * 1024,
     163 * 1024, 1024, 256, 4, 128, kAmpereMma},
    // GA10x: 1536 threads and 16 blocks per SM, 100 KB shared memory.
    {"sm_86", 32, 1024, 1536, 48, 16, 65536, 65536, 255, 100 * 1024,
     99 * 1024, 1024, 256, 4, 128, kAmpereMma},
    // AD10x: as sm_86 but 24 blocks per SM.
    {"sm_89", 32, 1024, 1536, 48, 24, 65536, 65536, 255, 100 * 1024,
     99 * 1024, 1024, 256, 4, 128, kAmpereMma},
    // H100/H200: 228 KB of the 256 KB L1 can be shared memory.
    {"sm_90", 32, 1024, 2048, 64, 32, 65536, 65536, 255, 228 * 1024,
     227 * 1024, 1024, 256, 4, 128, kHopperMma},
};

// Columns: name, product, architecture; SMs, boost clock (MHz); dense
// TFLOP/s of bf16/f16 and tf32 tensor cores and of f32 FMAs; GB/s.

const DeviceSpec kDevices[] = {
    // A100 SXM4 80 GB datasheet: 312 TFLOP/s bf16, 156 tf32, 19.5 f32
    // (dense), 2039 GB/s HBM2e; 108 SMs at 1410 MHz. NVLink 3: 600 GB/s
    // both ways; one 200 Gb/s HDR HCA per GPU (DGX A100, Megatron's Selene).
    {"a100", "NVIDIA A100 SXM4 80 GB", "sm_80", 108, 1410, 312, 156, 19.5,
     2039, 80ll << 30, 300, 25},
    // A10 datasheet: 125 bf16, 62.5 tf32, 31.2 f32, 600 GB/s GDDR6; 72 SMs
    // at 1695 MHz. PCIe 4 x16 (32 GB/s) in the node, 100 Gb/s Ethernet out.
    {"a10", "NVIDIA A10 24 GB", "sm_86", 72, 1695, 125, 62.5, 31.2, 600,
     24ll << 30, 32, 12.5},
    // L4 datasheet: 242 bf16 and 120 tf32 with sparsity (half dense), 30.3
    // f32, 300 GB/s GDDR6; 58 SMs at 2040 MHz. PCIe 4 x16, 100 Gb/s out.
    {"l4", "NVIDIA L4 24 GB", "sm_89", 58, 2040, 121, 60, 30.3, 300,
     24ll << 30, 32, 12.5},
    // H100 SXM5 80 GB datasheet: 1979 bf16 and 989 tf32 with sparsity (half
    // dense), 67 f32, 3.35 TB/s HBM3; 132 SMs at 1980 MHz. NVLink 4: 900
    // GB/s both ways; one 400 Gb/s NDR HCA per GPU (DGX H100).
    {"h100", "NVIDIA H100 SXM5 80 GB", "sm_90", 132, 1980, 989, 494.5, 67,
     3350, 80ll << 30, 450, 50},
    // H200 SXM datasheet: the H100's SMs, peaks and links, 141 GB HBM3e at
    // 4.8 TB/s (nvidia-smi shows 143771 MiB).
    {"h200", "NVIDIA H200 SXM 141 GB", "sm_90", 132, 1980, 989, 494.5, 67,
     4800, 143771ll << 20, 450, 50},
};
// clang-format on

int64_t roundUp(int64_t value, int64_t unit) {
  return (value + unit - 1) / unit * unit;
}
} // namespace

llvm::ArrayRef<ArchSpec> loom::archSpecs() { return kArchs; }
llvm::ArrayRef<DeviceSpec> loom::deviceSpecs() { return kDevices; }

const ArchSpec *loom::lookupArch(llvm::StringRef name) {
  // sm_90a and sm_90f are sm_90 with arch-specific instructions enabled:
  // the same SM.
  if (name.ends_with("a") || name.ends_with("f"))
    name = name.drop_back();
  for (const ArchSpec &arch : kArchs)
    if (arch.name == name)
      return &arch;
  return nullptr;
}

const DeviceSpec *loom::lookupDevice(llvm::StringRef name) {
  for (const DeviceSpec &device : kDevices)
    if (device.name == name)
      return &device;
  return nullptr;
}

llvm::StringRef loom::occupancyLimitName(OccupancyLimit limit) {
  switch (limit) {
  case OccupancyLimit::BlockSize:
    return "threads";
  case OccupancyLimit::Warps:
    return "warps";
  case OccupancyLimit::Blocks:
    return "blocks";
  case OccupancyLimit::Registers:
    return "registers";
  case OccupancyLimit::SharedMemory:
    return "shared memory";
  }
  return "";
}

Occupancy loom::computeOccupancy(const ArchSpec &arch,
                                 const KernelResources &kernel) {
  Occupancy result;
  const int unlimited = INT32_MAX;
  int64_t warpsPerBlock =
      (kernel.threadsPerBlock + arch.warpSize - 1) / arch.warpSize;
  if (kernel.threadsPerBlock > arch.maxThreadsPerBlock || warpsPerBlock == 0) {
    result.limit = OccupancyLimit::BlockSize;
    return result;
  }
  // Thread and warp slots are one limit: maxThreadsPerSM = 32 x maxWarpsPerSM.
  result.byWarps = std::min<int64_t>(arch.maxWarpsPerSM,
                                     arch.maxThreadsPerSM / arch.warpSize) /
                   warpsPerBlock;
  result.byBlocks = arch.maxBlocksPerSM;

  // Registers go to warps, rounded up to the allocation unit, from each of
  // the register file's partitions; the hardware checks a block's share as if
  // its warps were rounded up to a multiple of the partitions.
  result.byRegisters = unlimited;
  if (kernel.registersPerThread > 0) {
    int64_t perWarp =
        roundUp(int64_t(kernel.registersPerThread) * arch.warpSize,
                arch.registerAllocationUnit);
    int64_t partitions = arch.warpAllocationGranularity;
    if (kernel.registersPerThread > arch.maxRegistersPerThread ||
        perWarp * roundUp(warpsPerBlock, partitions) >
            arch.maxRegistersPerBlock)
      result.byRegisters = 0;
    else
      result.byRegisters = (arch.registersPerSM / partitions / perWarp) *
                           partitions / warpsPerBlock;
  }

  // Shared memory, with the driver's reservation, in allocation units, from
  // the largest carveout (the driver picks the carveout a kernel needs).
  result.bySharedMemory = unlimited;
  int64_t shared =
      roundUp(kernel.sharedBytesPerBlock + arch.reservedSharedBytesPerBlock,
              arch.sharedAllocationUnit);
  if (shared > arch.maxSharedBytesPerBlock + arch.reservedSharedBytesPerBlock)
    result.bySharedMemory = 0;
  else if (shared > 0)
    result.bySharedMemory = arch.sharedBytesPerSM / shared;

  std::pair<int, OccupancyLimit> limits[] = {
      {result.byWarps, OccupancyLimit::Warps},
      {result.byBlocks, OccupancyLimit::Blocks},
      {result.byRegisters, OccupancyLimit::Registers},
      {result.bySharedMemory, OccupancyLimit::SharedMemory}};
  auto first = std::min_element(
      std::begin(limits), std::end(limits),
      [](const auto &a, const auto &b) { return a.first < b.first; });
  result.blocksPerSM = first->first;
  result.limit = first->second;
  result.warpsPerSM = result.blocksPerSM * warpsPerBlock;
  result.fraction = double(result.warpsPerSM) / arch.maxWarpsPerSM;
  return result;
}
