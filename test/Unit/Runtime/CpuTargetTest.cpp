//===- CpuTargetTest.cpp - The executable's CPU target record -------------===//
//
// The record loomc writes (loom_cpu_target) parses into its fields; a
// malformed one is an error, and a CPU without a feature the kernels use
// gets the refusal message rather than an illegal instruction.
//
//===----------------------------------------------------------------------===//

#include "loom/runtime/exec/CpuTarget.h"

#include <gtest/gtest.h>

#include <set>

using namespace loom::runtime;

TEST(CpuTarget, ParsesTheRecordLoomcWrites) {
  CpuTargetInfo info;
  std::string error;
  ASSERT_TRUE(parseCpuTarget("znver5 f32=avx512-fma bf16=avx512-bf16-dot "
                             "needs=avx2,fma,avx512f,avx512bf16,sse4a",
                             info, error))
      << error;
  EXPECT_EQ(info.cpu, "znver5");
  EXPECT_EQ(info.f32Path, "avx512-fma");
  EXPECT_EQ(info.bf16Path, "avx512-bf16-dot");
  // sse4a: LLVM emits its insertq/extrq for AMD targets.
  EXPECT_EQ(info.needs,
            (std::vector<std::string>{"avx2", "fma", "avx512f", "avx512bf16", "sse4a"}));

  // The extensions LLVM uses unasked are checked too (a sapphirerapids
  // executable's vpermb on a skylake-avx512 CPU would fault).
  ASSERT_TRUE(parseCpuTarget("sapphirerapids f32=avx512-fma bf16=avx512-fma "
                             "needs=avx512f,avx512vbmi,gfni,bmi2,avx512fp16",
                             info, error))
      << error;
  EXPECT_EQ(info.needs.size(), 5u);

  // AMX kernels need the tiles and their bf16 products.
  ASSERT_TRUE(parseCpuTarget("sapphirerapids f32=avx512-fma bf16=amx-bf16 "
                             "needs=avx512f,amx-tile,amx-bf16",
                             info, error))
      << error;
  EXPECT_EQ(info.bf16Path, "amx-bf16");
  EXPECT_EQ(info.needs, (std::vector<std::string>{"avx512f", "amx-tile", "amx-bf16"}));

  // A generic target needs nothing.
  ASSERT_TRUE(parseCpuTarget("x86-64 f32=sse bf16=sse needs=", info, error)) << error;
  EXPECT_EQ(info.cpu, "x86-64");
  EXPECT_TRUE(info.needs.empty());
}

TEST(CpuTarget, RejectsMalformedRecords) {
  CpuTargetInfo info;
  std::string error;
  EXPECT_FALSE(parseCpuTarget("", info, error));
  EXPECT_EQ(error, "empty CPU target record");
  EXPECT_FALSE(parseCpuTarget("znver5 needs=avx2,amx-fp8", info, error));
  EXPECT_EQ(error, "unknown CPU feature 'amx-fp8' in the CPU target record");
  EXPECT_FALSE(parseCpuTarget("znver5 f32=avx512-fma threads=4", info, error));
  EXPECT_EQ(error, "bad CPU target field 'threads=4' (expected f32=, bf16= or needs=)");
}

TEST(CpuTarget, NamesTheMissingFeatures) {
  CpuTargetInfo info;
  std::string error;
  ASSERT_TRUE(parseCpuTarget("sapphirerapids f32=avx512-fma bf16=avx512-bf16-dot "
                             "needs=avx2,fma,avx512f,avx512bf16",
                             info, error));
  // A Zen 3: AVX2 and FMA, no AVX-512.
  std::set<std::string> zen3{"avx2", "fma"};
  auto has = [&](const std::string &feature) { return zen3.count(feature) != 0; };
  std::vector<std::string> missing = missingCpuFeatures(info, has);
  EXPECT_EQ(missing, (std::vector<std::string>{"avx512f", "avx512bf16"}));
  EXPECT_EQ(cpuMismatchMessage(info, missing),
            "this executable's kernels were compiled for CPU 'sapphirerapids' and use "
            "avx512f and avx512bf16, which this CPU does not have (compile it with loomc "
            "--cpu native on the machine that runs it, or name an older CPU: --cpu x86-64-v3)");
  // Three or more: commas, then "and".
  EXPECT_NE(cpuMismatchMessage(info, {"avx2", "fma", "avx512f"})
                .find(" use avx2, fma and avx512f, which"),
            std::string::npos);
  // Nothing missing: no message, the run goes ahead.
  EXPECT_TRUE(missingCpuFeatures(info, [](const std::string &) { return true; }).empty());
  EXPECT_EQ(cpuMismatchMessage(info, {}), "");
}

TEST(CpuTarget, HostQueryKnowsOnlyTheRecordsFeatures) {
  // A name outside the record's list (CpuFeatures.def) is never claimed
  // present, whatever the host has: amx-tile was the example until the list
  // took it and an AMX host claimed it.
  EXPECT_FALSE(hostHasCpuFeature("amx-fp16"));
  EXPECT_FALSE(hostHasCpuFeature("avx10.2"));
  EXPECT_FALSE(hostHasCpuFeature(""));
}

TEST(CpuTarget, LinuxGrantsTheAmxTileState) {
  // On a CPU with AMX, the runtime's request for the tile state succeeds
  // (the kernels' first tile instruction would die of SIGILL without it),
  // and asking twice is harmless. Elsewhere there is nothing to ask for.
  if (!hostHasCpuFeature("amx-tile"))
    GTEST_SKIP() << "this CPU has no AMX";
  std::string error;
  EXPECT_TRUE(enableAmxTiles(error)) << error;
  EXPECT_TRUE(enableAmxTiles(error)) << error;
}
