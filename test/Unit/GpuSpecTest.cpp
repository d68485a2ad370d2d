//===- GpuSpecTest.cpp - The GPU table and the occupancy calculator -------===//

#include "GpuSpec/GpuSpec.h"

#include <gtest/gtest.h>

using namespace loom;

namespace {

Occupancy occupancyOf(llvm::StringRef arch, int64_t threads, int registers,
                      int64_t shared = 0) {
  const ArchSpec *spec = lookupArch(arch);
  EXPECT_NE(spec, nullptr) << arch.str();
  return computeOccupancy(*spec, {threads, registers, shared});
}

TEST(GpuSpec, FermiReferenceRow) {
  const ArchSpec *fermi = lookupArch("sm_20");
  ASSERT_NE(fermi, nullptr);
  EXPECT_EQ(fermi->maxThreadsPerSM, 1536);
  EXPECT_EQ(fermi->maxWarpsPerSM, 48);
  EXPECT_EQ(fermi->maxBlocksPerSM, 8);
  EXPECT_TRUE(fermi->mmaShapes.empty());
}

TEST(GpuSpec, LookupTakesArchitectureSuffixes) {
  EXPECT_EQ(lookupArch("sm_90a"), lookupArch("sm_90"));
  EXPECT_EQ(lookupArch("sm_90f"), lookupArch("sm_90"));
  EXPECT_EQ(lookupArch("sm_75"), nullptr);
  EXPECT_EQ(lookupArch("bogus"), nullptr);
  EXPECT_EQ(lookupDevice("rtx9090"), nullptr);
}

TEST(GpuSpec, EveryDeviceHasItsArchitecture) {
  for (const DeviceSpec &device : deviceSpecs()) {
    const ArchSpec *arch = lookupArch(device.arch);
    ASSERT_NE(arch, nullptr) << device.name.str();
    EXPECT_FALSE(arch->mmaShapes.empty()) << device.name.str();
    EXPECT_GT(device.tensorTflops16, device.f32Tflops) << device.name.str();
  }
}

TEST(GpuSpec, H200Datasheet) {
  const DeviceSpec *h200 = lookupDevice("h200");
  ASSERT_NE(h200, nullptr);
  EXPECT_EQ(h200->arch, "sm_90");
  EXPECT_EQ(h200->sms, 132);
  EXPECT_EQ(h200->tensorTflops16, 989);
  EXPECT_EQ(h200->bandwidthGBs, 4800);
}

TEST(GpuSpec, HopperHasWgmma) {
  const ArchSpec *hopper = lookupArch("sm_90a");
  ASSERT_NE(hopper, nullptr);
  bool wgmma = false;
  for (const MmaShape &shape : hopper->mmaShapes)
    wgmma |= shape.instruction == "wgmma.mma_async" && shape.m == 64 &&
             shape.k == 16 && shape.inputs == "bf16";
  EXPECT_TRUE(wgmma);
}

// The CUDA occupancy calculator's example: 256 threads of 64 registers on an
// A100 give 4 blocks, 32 of 64 warps.
TEST(GpuSpec, AmpereRegisterBound) {
  Occupancy o = occupancyOf("sm_80", 256, 64);
  EXPECT_EQ(o.byRegisters, 4);
  EXPECT_EQ(o.byWarps, 8);
  EXPECT_EQ(o.blocksPerSM, 4);
  EXPECT_EQ(o.warpsPerSM, 32);
  EXPECT_DOUBLE_EQ(o.fraction, 0.5);
  EXPECT_EQ(o.limit, OccupancyLimit::Registers);
}

// 31 registers round up to 1024 per warp, like 32: the register file holds
// all 64 warps, so 16 x 16 blocks fill the SM.
TEST(GpuSpec, HopperFullOccupancy) {
  Occupancy o = occupancyOf("sm_90a", 256, 31, 1024);
  EXPECT_EQ(o.byRegisters, 8);
  EXPECT_EQ(o.byWarps, 8);
  // (1024 + 1024 reserved) bytes per block out of 228 KB.
  EXPECT_EQ(o.bySharedMemory, 114);
  EXPECT_EQ(o.blocksPerSM, 8);
  EXPECT_DOUBLE_EQ(o.fraction, 1.0);
  EXPECT_EQ(o.limit, OccupancyLimit::Warps);
}

// The GPT's tensor-core matmul: 4 warps of 168 registers (5376 per warp, 3
// per partition) and 9728 bytes of shared memory.
TEST(GpuSpec, HopperTensorCoreMatmul) {
  Occupancy o = occupancyOf("sm_90a", 128, 168, 9728);
  EXPECT_EQ(o.byWarps, 16);
  EXPECT_EQ(o.byRegisters, 3);
  EXPECT_EQ(o.bySharedMemory, 21);
  EXPECT_EQ(o.warpsPerSM, 12);
  EXPECT_DOUBLE_EQ(o.fraction, 12.0 / 64.0);
  EXPECT_EQ(o.limit, OccupancyLimit::Registers);
}

// 40 registers: 1280 per warp, 12 warps per partition, 48 of 64 warps.
TEST(GpuSpec, HopperRegisterPartitions) {
  Occupancy o = occupancyOf("sm_90", 256, 40);
  EXPECT_EQ(o.byRegisters, 6);
  EXPECT_EQ(o.warpsPerSM, 48);
  EXPECT_DOUBLE_EQ(o.fraction, 0.75);
}

// GA10x has 48 warp slots: 6 blocks of 8 warps.
TEST(GpuSpec, AmpereConsumerWarpBound) {
  Occupancy o = occupancyOf("sm_86", 256, 32);
  EXPECT_EQ(o.blocksPerSM, 6);
  EXPECT_DOUBLE_EQ(o.fraction, 1.0);
  EXPECT_EQ(o.limit, OccupancyLimit::Warps);
}

TEST(GpuSpec, AmpereSharedMemoryBound) {
  // 48 KB + 1 KB reserved per block: 3 blocks in 164 KB.
  Occupancy o = occupancyOf("sm_80", 128, 32, 48 * 1024);
  EXPECT_EQ(o.bySharedMemory, 3);
  EXPECT_EQ(o.blocksPerSM, 3);
  EXPECT_EQ(o.warpsPerSM, 12);
  EXPECT_EQ(o.limit, OccupancyLimit::SharedMemory);
  // More than the 163 KB a block may opt into: no block fits.
  EXPECT_EQ(occupancyOf("sm_80", 128, 32, 164 * 1024).blocksPerSM, 0);
}

TEST(GpuSpec, FermiBlockBound) {
  // 4 warps per block: 12 by warps, but only 8 blocks per SM.
  Occupancy o = occupancyOf("sm_20", 128, 16);
  EXPECT_EQ(o.byWarps, 12);
  EXPECT_EQ(o.blocksPerSM, 8);
  EXPECT_EQ(o.warpsPerSM, 32);
  EXPECT_DOUBLE_EQ(o.fraction, 32.0 / 48.0);
  EXPECT_EQ(o.limit, OccupancyLimit::Blocks);
}

TEST(GpuSpec, FermiRegisterBound) {
  // 21 x 32 = 672 registers per warp, 704 in units of 64; 46 warps (a
  // multiple of 2) fit in 32768: 5 blocks of 8 warps.
  Occupancy o = occupancyOf("sm_20", 256, 21);
  EXPECT_EQ(o.byRegisters, 5);
  EXPECT_EQ(o.warpsPerSM, 40);
  EXPECT_EQ(o.limit, OccupancyLimit::Registers);
  // More than 63 registers per thread does not launch.
  EXPECT_EQ(occupancyOf("sm_20", 256, 64).blocksPerSM, 0);
}

TEST(GpuSpec, FermiSharedMemoryBound) {
  Occupancy o = occupancyOf("sm_20", 192, 10, 12 * 1024);
  EXPECT_EQ(o.bySharedMemory, 4);
  EXPECT_EQ(o.warpsPerSM, 24);
  EXPECT_DOUBLE_EQ(o.fraction, 0.5);
  EXPECT_EQ(o.limit, OccupancyLimit::SharedMemory);
}

TEST(GpuSpec, UnknownRegistersAreNoLimit) {
  Occupancy o = occupancyOf("sm_90", 256, 0);
  EXPECT_EQ(o.byRegisters, INT32_MAX);
  EXPECT_EQ(o.blocksPerSM, 8);
}

TEST(GpuSpec, OversizedBlocks) {
  Occupancy o = occupancyOf("sm_80", 2048, 16);
  EXPECT_EQ(o.blocksPerSM, 0);
  EXPECT_EQ(o.fraction, 0);
  EXPECT_EQ(o.limit, OccupancyLimit::BlockSize);
  EXPECT_EQ(occupancyOf("sm_80", 256, 256).byRegisters, 0);
}

} // namespace
