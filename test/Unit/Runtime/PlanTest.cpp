//===- PlanTest.cpp - Plan parsing, validation and writing ----------------===//

#include "TestUtil.h"

#include "loom/runtime/exec/Executor.h"
#include "loom/runtime/plan/Layout.h"
#include "loom/runtime/plan/Plan.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace loom::runtime;
using loom::test::examplePlanLines;
using loom::test::sealLines;

namespace {
/// Parses `lines` (the documented example by default) with line `index`
/// (0-based) replaced by `line`, or removed if `line` is empty; returns the
/// error (empty if it parsed).
std::string errorWithLine(size_t index, const std::string &line,
                          std::vector<std::string> lines = examplePlanLines()) {
  if (line.empty())
    lines.erase(lines.begin() + static_cast<long>(index));
  else
    lines[index] = line;
  Plan plan;
  std::string error;
  if (parsePlan(sealLines(lines), plan, error))
    return "";
  return error;
}

std::string errorOf(const std::string &text) {
  Plan plan;
  std::string error;
  EXPECT_FALSE(parsePlan(text, plan, error)) << text;
  return error;
}
} // namespace

TEST(Plan, ParsesTheDocumentedExample) {
  std::string text = sealLines(examplePlanLines());
  // The checksum printed in docs/plan-format.md.
  EXPECT_EQ(text.substr(text.size() - 13), "end 2ea33395\n");
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(text, plan, error)) << error;
  EXPECT_EQ(plan.version, 1u);
  EXPECT_EQ(plan.model, "mlp");
  EXPECT_EQ(plan.device, Device::CPU);
  EXPECT_EQ(plan.arenaBytes, 4792320u);
  ASSERT_EQ(plan.buffers.size(), 6u);
  const PlanBuffer &w1 = plan.buffers[1];
  EXPECT_EQ(w1.id, 1u);
  EXPECT_EQ(w1.name, "w1");
  EXPECT_EQ(w1.role, BufferRole::Param);
  EXPECT_EQ(w1.dtype, DType::BF16);
  EXPECT_EQ(w1.shape, (Shape{512, 2048}));
  EXPECT_EQ(w1.offset, 65536u);
  EXPECT_EQ(w1.numElements, 512u * 2048u);
  EXPECT_EQ(w1.bytes, 512u * 2048u * 2u);
  EXPECT_EQ(w1.init.kind, InitKind::Normal);
  EXPECT_DOUBLE_EQ(w1.init.a, 0.02);
  EXPECT_EQ(w1.line, 6u);
  EXPECT_EQ(plan.buffers[2].init.kind, InitKind::Zeros);
  EXPECT_EQ(plan.buffers[4].role, BufferRole::Temp);
  EXPECT_EQ(plan.buffers[5].role, BufferRole::Output);
  EXPECT_EQ(plan.buffers[0].init.kind, InitKind::None);
  ASSERT_EQ(plan.kernels.size(), 2u);
  EXPECT_EQ(plan.kernels[0].name, "k0");
  EXPECT_EQ(plan.kernels[0].numArgs, 4u);
  EXPECT_EQ(plan.kernels[1].line, 12u);
  ASSERT_EQ(plan.steps.size(), 2u);
  EXPECT_EQ(plan.steps[1].kernel, 1u);
  EXPECT_EQ(plan.steps[1].buffers, (std::vector<unsigned>{4, 3, 5}));
  EXPECT_EQ(plan.findBuffer("t4"), &plan.buffers[4]);
  EXPECT_EQ(plan.findBuffer("nope"), nullptr);
}

TEST(Plan, ChecksumIsFnv1a32) {
  // Reference values of 32-bit FNV-1a.
  EXPECT_EQ(computeChecksum(""), 0x811c9dc5u);
  EXPECT_EQ(computeChecksum("a"), 0xe40c292cu);
  EXPECT_EQ(computeChecksum("foobar"), 0xbf9cf968u);
  std::string sealed = sealPlan("loom-plan 1\n");
  EXPECT_EQ(sealed.substr(0, 12), "loom-plan 1\n");
  char expected[32];
  std::snprintf(expected, sizeof(expected), "end %08x\n",
                computeChecksum("loom-plan 1\n"));
  EXPECT_EQ(sealed.substr(12), expected);
}

TEST(Plan, WriterRoundTrips) {
  std::string text = sealLines(examplePlanLines());
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(text, plan, error)) << error;
  EXPECT_EQ(writePlan(plan), text);

  // Every initializer, scalars, and floats that need all 17 digits.
  Plan built;
  built.model = "m.v2";
  built.arenaBytes = 256;
  auto param = [&](const char *name, Initializer init, uint64_t offset) {
    PlanBuffer buffer;
    buffer.id = static_cast<unsigned>(built.buffers.size());
    buffer.name = name;
    buffer.role = BufferRole::Param;
    buffer.dtype = DType::F32;
    buffer.offset = offset;
    buffer.init = init;
    built.buffers.push_back(buffer);
  };
  param("a", {InitKind::Ones, 0, 0}, 0);
  param("b", {InitKind::Constant, 0.1, 0}, 64);
  param("c", {InitKind::Uniform, -1.0 / 3, 2.5e-10}, 128);
  param("d", {InitKind::Normal, 1e300, 0}, 192);
  std::string written = writePlan(built);
  ASSERT_TRUE(parsePlan(written, plan, error)) << error << "\n" << written;
  EXPECT_TRUE(plan.buffers[0].shape.empty());
  EXPECT_EQ(plan.buffers[0].numElements, 1u);
  EXPECT_EQ(plan.buffers[0].bytes, 4u);
  EXPECT_EQ(plan.buffers[1].init.a, 0.1);
  EXPECT_EQ(plan.buffers[2].init.a, -1.0 / 3);
  EXPECT_EQ(plan.buffers[2].init.b, 2.5e-10);
  EXPECT_EQ(plan.buffers[3].init.a, 1e300);
  EXPECT_EQ(writePlan(plan), written);
  EXPECT_NE(written.find("buffer 0 a param f32 scalar 0 ones\n"),
            std::string::npos);
}

TEST(Plan, RejectsTruncatedPlans) {
  std::string text = sealLines(examplePlanLines());
  // Cut anywhere before the checksum's last digit: always an error, never a
  // crash, and a cut before `end` says "truncated".
  for (size_t cut = 0; cut + 1 < text.size(); ++cut) {
    std::string error = errorOf(text.substr(0, cut));
    EXPECT_FALSE(error.empty());
    if (cut > 12 && cut < text.rfind("end "))
      EXPECT_NE(error.find("missing 'end' record (the plan is truncated)"),
                std::string::npos)
          << error;
  }
  EXPECT_EQ(errorOf(""), "plan:1: empty plan (expected 'loom-plan 1')");
  std::string cut = text.substr(0, text.find("kernel k0"));
  EXPECT_EQ(errorOf(cut),
            "plan:11: missing 'end' record (the plan is truncated)");
}

TEST(Plan, AcceptsAMissingFinalNewline) {
  std::string text = sealLines(examplePlanLines());
  Plan plan;
  std::string error;
  EXPECT_TRUE(parsePlan(text.substr(0, text.size() - 1), plan, error)) << error;
}

TEST(Plan, RejectsCorruptedBytes) {
  std::string text = sealLines(examplePlanLines());
  std::string corrupted = text;
  corrupted[corrupted.find("w1")] = 'v';
  std::string error = errorOf(corrupted);
  EXPECT_EQ(error.find("plan:15: checksum mismatch: the plan says "), 0u)
      << error;
  EXPECT_NE(error.find("(the plan is corrupted)"), std::string::npos);
  // Any single flipped byte is caught (the checksum or the header).
  for (size_t i = 0; i < text.size(); ++i) {
    std::string flipped = text;
    flipped[i] = static_cast<char>(flipped[i] ^ 0x04);
    errorOf(flipped);
  }
  std::string badDigits = text;
  badDigits.replace(badDigits.rfind("end ") + 4, 8, "XYZ");
  EXPECT_EQ(errorOf(badDigits),
            "plan:15: bad checksum 'XYZ' (expected 8 lowercase hex digits)");
}

TEST(Plan, RejectsOtherVersions) {
  std::vector<std::string> lines = examplePlanLines();
  lines[0] = "loom-plan 2";
  EXPECT_EQ(errorOf(sealLines(lines)),
            "plan:1: plan version 2 is not supported (this runtime reads "
            "version 1)");
  // The version is checked before the checksum: a future format may differ.
  EXPECT_EQ(errorOf("loom-plan 3\nsomething else\n"),
            "plan:1: plan version 3 is not supported (this runtime reads "
            "version 1)");
  EXPECT_EQ(errorOf("hello\n"), "plan:1: not a Loom plan (the first line "
                                "must be 'loom-plan 1')");
  EXPECT_EQ(errorOf("loom-plan x\n"), "plan:1: bad number 'x'");
}

TEST(Plan, RejectsContentAfterEnd) {
  std::string text = sealLines(examplePlanLines());
  EXPECT_EQ(errorOf(text + "model again\n"),
            "plan:16: unexpected content after 'end'");
  EXPECT_EQ(errorOf(text + "\n"), "plan:16: unexpected content after 'end'");
  EXPECT_EQ(errorOf(text + text.substr(text.rfind("end "))),
            "plan:16: duplicate 'end' record");
}

TEST(Plan, RejectsBuffersOutsideTheArena) {
  EXPECT_EQ(errorWithLine(8, "buffer 4 t4 temp f32 64,2048 4268096"),
            "plan:9: buffer 't4' (524288 bytes at offset 4268096) lies "
            "outside the arena of 4792320 bytes");
  EXPECT_EQ(errorWithLine(3, "arena 4792256"),
            "plan:9: buffer 't4' (524288 bytes at offset 4268032) lies "
            "outside the arena of 4792256 bytes");
  // Offsets and sizes near 2^64 must not wrap around.
  EXPECT_EQ(errorWithLine(8, "buffer 4 t4 temp f32 64,2048 "
                             "18446744073709551552"),
            "plan:9: buffer 't4' (524288 bytes at offset "
            "18446744073709551552) lies outside the arena of 4792320 bytes");
  EXPECT_EQ(errorWithLine(8, "buffer 4 t4 temp f32 4294967296,4294967296 0"),
            "plan:9: buffer 't4' is too large");
}

TEST(Plan, RejectsMisalignedBuffers) {
  EXPECT_EQ(errorWithLine(8, "buffer 4 t4 temp f32 64,2048 4268040"),
            "plan:9: buffer 't4' offset 4268040 is not 64-byte aligned");
}

TEST(Plan, RejectsBadSteps) {
  EXPECT_EQ(errorWithLine(12, "step k0 0 1 2"),
            "plan:13: step runs kernel 'k0' on 3 buffers, but it takes 4");
  EXPECT_EQ(errorWithLine(12, "step k0 0 1 2 4 5"),
            "plan:13: step runs kernel 'k0' on 5 buffers, but it takes 4");
  EXPECT_EQ(errorWithLine(12, "step k9 0 1 2 4"),
            "plan:13: step names unknown kernel 'k9'");
  EXPECT_EQ(errorWithLine(12, "step k0 0 1 2 6"),
            "plan:13: step names unknown buffer 6 (the plan has 6 buffers)");
  EXPECT_EQ(errorWithLine(12, "step k0 0 1 2 -4"), "plan:13: bad number '-4'");
  EXPECT_EQ(errorWithLine(12, "step"), "plan:13: expected 'step KERNEL ID...'");
}

TEST(Plan, RejectsBadRecords) {
  struct Case {
    size_t index;
    const char *line; // empty: remove the line
    const char *error;
  };
  const Case cases[] = {
      {1, "modle mlp", "plan:2: unknown record 'modle'"},
      {1, "", "plan:2: missing 'model' record before 'device'"},
      {2, "", "plan:3: missing 'device' record before 'arena'"},
      {3, "", "plan:4: missing 'arena' record before 'buffer'"},
      {2, "model other", "plan:3: duplicate 'model' record"},
      {4, "arena 12", "plan:5: duplicate 'arena' record"},
      {4, "loom-plan 1", "plan:5: duplicate 'loom-plan' record"},
      {11, "buffer 6 z temp f32 1 0",
       "plan:12: 'buffer' record out of order (records come in the order "
       "loom-plan, model, device, mesh, pipeline, arena, gpu-image, buffer (each "
       "followed by its shard, bound, held and view), kernel (each followed by its terms), launch, step, collective, accumulate, section, carry and transfer, microbatches, assemble, optimizer, update, end)"},
      {13, "kernel k2 1",
       "plan:14: 'kernel' record out of order (records come in the order "
       "loom-plan, model, device, mesh, pipeline, arena, gpu-image, buffer (each "
       "followed by its shard, bound, held and view), kernel (each followed by its terms), launch, step, collective, accumulate, section, carry and transfer, microbatches, assemble, optimizer, update, end)"},
      {1, "model", "plan:2: expected 'model NAME'"},
      {1, "model a-b", "plan:2: bad name 'a-b' (names are [A-Za-z0-9_.]+)"},
      {2, "device tpu", "plan:3: unknown device 'tpu' (expected cpu or cuda)"},
      {3, "arena 4e6", "plan:4: bad number '4e6'"},
      {3, "arena 99999999999999999999",
       "plan:4: bad number "
       "'99999999999999999999'"},
      {3, "arena  4792320",
       "plan:4: empty field (fields are separated by single spaces)"},
      {3, "arena 4792320 ",
       "plan:4: empty field (fields are separated by single spaces)"},
      {4, "buffer 0 x input f64 64,512 0",
       "plan:5: unknown dtype 'f64' (expected f32, f16, bf16, i32 or i64)"},
      {4, "buffer 0 x weight bf16 64,512 0",
       "plan:5: unknown role 'weight' (expected input, param, output or "
       "temp)"},
      {4, "buffer 1 x input bf16 64,512 0",
       "plan:5: buffer id 1 is out of sequence (expected 0)"},
      {5, "buffer 2 w1 param bf16 512,2048 65536 normal 0.02",
       "plan:6: buffer id 2 is out of sequence (expected 1)"},
      {5, "buffer 1 x param bf16 512,2048 65536 normal 0.02",
       "plan:6: duplicate buffer name 'x' (first on line 5)"},
      {4, "buffer 0 x input bf16 64,0 0",
       "plan:5: bad shape '64,0' (expected comma-separated positive "
       "dimensions or 'scalar')"},
      {4, "buffer 0 x input bf16 64,,512 0",
       "plan:5: bad shape '64,,512' (expected comma-separated positive "
       "dimensions or 'scalar')"},
      {4, "buffer 0 x input bf16 64,512",
       "plan:5: expected 'buffer ID NAME ROLE DTYPE SHAPE OFFSET [INIT "
       "...]'"},
      {5, "buffer 1 w1 param bf16 512,2048 65536",
       "plan:6: param 'w1' has no initializer"},
      {5, "buffer 1 w1 param bf16 512,2048 65536 xavier",
       "plan:6: unknown initializer 'xavier' (expected zeros, ones, constant "
       "V, normal STD or uniform LO HI)"},
      {5, "buffer 1 w1 param bf16 512,2048 65536 normal",
       "plan:6: initializer 'normal' takes 1 argument, got 0"},
      {5, "buffer 1 w1 param bf16 512,2048 65536 uniform 1",
       "plan:6: initializer 'uniform' takes 2 arguments, got 1"},
      {5, "buffer 1 w1 param bf16 512,2048 65536 zeros 0",
       "plan:6: initializer 'zeros' takes 0 arguments, got 1"},
      {5, "buffer 1 w1 param bf16 512,2048 65536 normal nan",
       "plan:6: bad number 'nan'"},
      {5, "buffer 1 w1 param bf16 512,2048 65536 constant 1e999",
       "plan:6: bad number '1e999'"},
      {5, "buffer 1 w1 param bf16 512,2048 65536 normal -1",
       "plan:6: normal std must not be negative"},
      {5, "buffer 1 w1 param bf16 512,2048 65536 uniform 1 0",
       "plan:6: uniform bounds must satisfy LO <= HI"},
      {4, "buffer 0 x input bf16 64,512 0 zeros",
       "plan:5: only params have initializers ('x' is an input)"},
      {10, "kernel k1 x", "plan:11: bad number 'x'"},
      {10, "kernel k1", "plan:11: expected 'kernel NAME NARGS [SOURCE]'"},
      {8, "", "plan:9: buffer id 5 is out of sequence (expected 4)"},
  };
  for (const Case &c : cases)
    EXPECT_EQ(errorWithLine(c.index, c.line), c.error)
        << "line " << c.index << ": '" << c.line << "'";
  EXPECT_EQ(errorWithLine(11, "kernel k0 3"),
            "plan:12: duplicate kernel name 'k0' (first on line 11)");
  EXPECT_EQ(errorWithLine(4, "buffer 0 x input bf16 64,512 0 "),
            "plan:5: empty field (fields are separated by single spaces)");
  std::vector<std::string> withBlank = examplePlanLines();
  withBlank.insert(withBlank.begin() + 4, "");
  EXPECT_EQ(errorOf(sealLines(withBlank)), "plan:5: empty line");
}

TEST(Plan, RequiresModelDeviceAndArena) {
  EXPECT_EQ(errorOf(sealLines({"loom-plan 1"})), "plan:2: missing 'model' "
                                                 "record");
  EXPECT_EQ(errorOf(sealLines({"loom-plan 1", "model m", "device cpu"})),
            "plan:4: missing 'arena' record");
  Plan plan;
  std::string error;
  EXPECT_TRUE(
      parsePlan(sealLines({"loom-plan 1", "model m", "device cuda", "arena 0"}),
                plan, error))
      << error;
  EXPECT_EQ(plan.device, Device::CUDA);
}

namespace {
void noop(void **) {}
} // namespace

TEST(Plan, BindsKernelsByNameAndArity) {
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(sealLines(examplePlanLines()), plan, error)) << error;
  std::vector<const LoomKernel *> bound;
  const LoomKernel complete[] = {{"k1", 3, noop},
                                 {"k0", 4, noop},
                                 {"extra", 1, noop},
                                 {nullptr, 0, nullptr}};
  ASSERT_TRUE(bindKernels(plan, complete, bound, error)) << error;
  ASSERT_EQ(bound.size(), 2u);
  EXPECT_EQ(bound[0], &complete[1]);
  EXPECT_EQ(bound[1], &complete[0]);

  const LoomKernel missing[] = {{"k0", 4, noop}, {nullptr, 0, nullptr}};
  EXPECT_FALSE(bindKernels(plan, missing, bound, error));
  EXPECT_EQ(error, "plan:12: kernel 'k1' is not provided by this executable");

  const LoomKernel wrongArity[] = {
      {"k0", 3, noop}, {"k1", 3, noop}, {nullptr, 0, nullptr}};
  EXPECT_FALSE(bindKernels(plan, wrongArity, bound, error));
  EXPECT_EQ(error, "plan:11: kernel 'k0' takes 4 buffers in the plan but 3 "
                   "in this executable");
}

namespace {
/// The example with a GPU image and launches, without its `end` record.
std::vector<std::string> gpuLines() {
  std::vector<std::string> lines = examplePlanLines();
  lines.insert(lines.begin() + 4, "gpu-image sm_90a cubin 23520");
  // After the kernel records (now at 11 and 12).
  lines.insert(lines.begin() + 13,
               {"launch k0 k0_kernel 512 1 1 256 1 1 b:3",
                "launch k0 k0_kernel_0 128 4 1 16 16 1 b:3 b:0 b:1 "
                "i64:-9223372036854775808 i32:2147483647 f32:0.5",
                "launch k1 k1_kernel 32 1 1 1024 1 1 b:0 b:2 f32:-inf "
                "f32:1.17549435e-38 i32:-2147483648 i64:9223372036854775807"});
  return lines;
}

/// Parses gpuLines() with line `index` replaced (or removed if `line` is
/// empty); returns the error, empty if it parsed.
std::string gpuErrorWithLine(size_t index, const std::string &line) {
  std::vector<std::string> lines = gpuLines();
  if (line.empty())
    lines.erase(lines.begin() + static_cast<long>(index));
  else
    lines[index] = line;
  Plan plan;
  std::string error;
  if (parsePlan(sealLines(lines), plan, error))
    return "";
  return error;
}
} // namespace

TEST(Plan, ParsesGpuImageAndLaunches) {
  std::string text = sealLines(gpuLines());
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(text, plan, error)) << error;
  const PlanGpuImage &image = plan.gpuImage;
  EXPECT_TRUE(image.present);
  EXPECT_EQ(image.archName, "sm_90a");
  EXPECT_EQ(image.arch.major, 9u);
  EXPECT_EQ(image.arch.minor, 0u);
  EXPECT_EQ(image.arch.variant, 'a');
  EXPECT_EQ(image.format, GpuImageFormat::Cubin);
  EXPECT_EQ(image.bytes, 23520u);
  EXPECT_EQ(image.line, 5u);
  ASSERT_EQ(plan.buffers.size(), 6u);
  EXPECT_EQ(plan.buffers[0].line, 6u);
  ASSERT_EQ(plan.launches.size(), 3u);
  const PlanLaunch &first = plan.launches[0];
  EXPECT_EQ(first.kernel, 0u);
  EXPECT_EQ(first.function, "k0_kernel");
  EXPECT_EQ(first.grid[0], 512u);
  EXPECT_EQ(first.block[0], 256u);
  EXPECT_EQ(first.line, 14u);
  ASSERT_EQ(first.args.size(), 1u);
  EXPECT_EQ(first.args[0].kind, LaunchArg::Kind::Buffer);
  EXPECT_EQ(first.args[0].buffer, 3u);
  const PlanLaunch &second = plan.launches[1];
  EXPECT_EQ(second.grid[1], 4u);
  EXPECT_EQ(second.block[1], 16u);
  EXPECT_EQ(second.block[2], 1u);
  ASSERT_EQ(second.args.size(), 6u);
  EXPECT_EQ(second.args[3].kind, LaunchArg::Kind::I64);
  EXPECT_EQ(second.args[3].integer, INT64_MIN);
  EXPECT_EQ(second.args[4].kind, LaunchArg::Kind::I32);
  EXPECT_EQ(second.args[4].integer, INT32_MAX);
  EXPECT_EQ(second.args[5].kind, LaunchArg::Kind::F32);
  EXPECT_EQ(second.args[5].real, 0.5f);
  const PlanLaunch &third = plan.launches[2];
  EXPECT_EQ(third.kernel, 1u);
  EXPECT_EQ(third.args[2].real, -INFINITY);
  EXPECT_EQ(third.args[3].real, 1.17549435e-38f);
  EXPECT_EQ(third.args[4].integer, INT32_MIN);
  EXPECT_EQ(third.args[5].integer, INT64_MAX);
  ASSERT_EQ(plan.steps.size(), 2u);
  EXPECT_EQ(plan.steps[0].line, 17u);
  // Written back byte for byte.
  EXPECT_EQ(writePlan(plan), text);

  // Optional: an image without launches, and PTX.
  std::vector<std::string> lines = examplePlanLines();
  lines.insert(lines.begin() + 4, "gpu-image sm_80 ptx 7");
  ASSERT_TRUE(parsePlan(sealLines(lines), plan, error)) << error;
  EXPECT_EQ(plan.gpuImage.format, GpuImageFormat::PTX);
  EXPECT_TRUE(plan.launches.empty());
  EXPECT_EQ(writePlan(plan), sealLines(lines));
  // Without one: nothing.
  ASSERT_TRUE(parsePlan(sealLines(examplePlanLines()), plan, error)) << error;
  EXPECT_FALSE(plan.gpuImage.present);
}

TEST(Plan, WritesLaunchArgumentsThatReadBack) {
  const float values[] = {0.1f, -3.0e38f, 1.0e-45f, 123456.789f, 0.0f};
  for (float value : values) {
    LaunchArg arg;
    arg.kind = LaunchArg::Kind::F32;
    arg.real = value;
    std::string text = formatLaunchArg(arg);
    std::vector<std::string> lines = gpuLines();
    lines[13] = "launch k0 k0_kernel 1 1 1 1 1 1 " + text;
    Plan plan;
    std::string error;
    ASSERT_TRUE(parsePlan(sealLines(lines), plan, error)) << error;
    EXPECT_EQ(plan.launches[0].args[0].real, value) << text;
  }
  LaunchArg nan;
  nan.kind = LaunchArg::Kind::F32;
  nan.real = NAN;
  EXPECT_EQ(formatLaunchArg(nan), "f32:nan");
  EXPECT_EQ(gpuErrorWithLine(13, "launch k0 f 1 1 1 1 1 1 f32:nan f32:-nan"),
            "");
}

TEST(Plan, ParsesDynamicSharedMemory) {
  std::vector<std::string> lines = gpuLines();
  lines[13] = "launch k0 k0_kernel 512 1 1 256 1 1 b:3 shared:98304";
  lines[14] = "launch k0 k0_kernel_0 1 1 1 1 1 1 shared:2147483647";
  std::string text = sealLines(lines);
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(text, plan, error)) << error;
  ASSERT_EQ(plan.launches.size(), 3u);
  EXPECT_EQ(plan.launches[0].sharedBytes, 98304);
  ASSERT_EQ(plan.launches[0].args.size(), 1u); // not an argument
  EXPECT_EQ(plan.launches[1].sharedBytes, 2147483647);
  EXPECT_TRUE(plan.launches[1].args.empty());
  EXPECT_EQ(plan.launches[2].sharedBytes, 0);
  // Written back as the last token, and not at all without one.
  EXPECT_EQ(writePlan(plan), text);
}

TEST(Plan, ParsesGpuArchitectures) {
  struct Case {
    const char *text;
    unsigned major, minor;
    char variant;
  };
  const Case good[] = {{"sm_80", 8, 0, 0},      {"sm_86", 8, 6, 0},
                       {"sm_90a", 9, 0, 'a'},   {"sm_100f", 10, 0, 'f'},
                       {"sm_103a", 10, 3, 'a'}, {"sm_121", 12, 1, 0}};
  for (const Case &c : good) {
    GpuArch arch;
    ASSERT_TRUE(parseGpuArch(c.text, arch)) << c.text;
    EXPECT_EQ(arch.major, c.major) << c.text;
    EXPECT_EQ(arch.minor, c.minor) << c.text;
    EXPECT_EQ(arch.variant, c.variant) << c.text;
  }
  for (const char *bad : {"sm_8", "sm_08", "sm_1000", "SM_80", "sm_90b",
                          "compute_80", "sm_", "sm_a", "sm_9x", "80", ""}) {
    GpuArch arch;
    EXPECT_FALSE(parseGpuArch(bad, arch)) << bad;
  }
}

TEST(Plan, RejectsBadGpuRecords) {
  const std::string forms =
      " (expected b:I, i64:V, i32:V, f32:V or "
      "tmap:BUFFER:OFFSET:DTYPE:DIMS:STRIDES:BOX:SWIZZLE)";
  const std::string order =
      " record out of order (records come in the order loom-plan, model, "
      "device, mesh, pipeline, arena, gpu-image, buffer (each followed by its shard, bound, held and view), "
      "kernel (each followed by its terms), launch, step, collective, accumulate, section, carry and transfer, microbatches, assemble, optimizer, update, end)";
  struct Case {
    size_t index;
    std::string line; // empty: remove the line
    std::string error;
  };
  const Case cases[] = {
      // gpu-image: syntax and position.
      {4, "gpu-image sm_90a cubin",
       "plan:5: expected 'gpu-image ARCH FORMAT "
       "BYTES'"},
      {4, "gpu-image sm_90a cubin 1 2",
       "plan:5: expected 'gpu-image ARCH FORMAT BYTES'"},
      {4, "gpu-image 90a cubin 23520",
       "plan:5: bad GPU architecture '90a' (expected sm_ and the compute "
       "capability, e.g. sm_80 or sm_90a)"},
      {4, "gpu-image sm_90a elf 23520",
       "plan:5: unknown GPU image format 'elf' (expected cubin or ptx)"},
      {4, "gpu-image sm_90a cubin 1e4", "plan:5: bad number '1e4'"},
      {4, "gpu-image sm_90a cubin 0", "plan:5: the GPU image is empty"},
      {5, "gpu-image sm_90a cubin 1", "plan:6: duplicate 'gpu-image' record"},
      {6, "gpu-image sm_90a cubin 1", "plan:7: duplicate 'gpu-image' record"},
      {3, "gpu-image sm_90a cubin 1",
       "plan:4: missing 'arena' record before 'gpu-image'"},
      // launch: position and names.
      {4, "", "plan:13: 'launch' record without a 'gpu-image' record"},
      {17, "launch k0 k0_kernel 1 1 1 1 1 1", "plan:18: 'launch'" + order},
      {12, "launch k1 k1_kernel 1 1 1 1 1 1",
       "plan:13: launch names unknown kernel 'k1'"},
      {13, "launch k9 f 1 1 1 1 1 1",
       "plan:14: launch names unknown kernel "
       "'k9'"},
      {13, "launch k0 k0-kernel 1 1 1 1 1 1",
       "plan:14: bad name 'k0-kernel' (names are [A-Za-z0-9_.]+)"},
      {13, "launch k0 f 1 1 1 1 1",
       "plan:14: expected 'launch KERNEL FUNCTION GX GY GZ BX BY BZ ARG... "
       "[shared:BYTES]'"},
      // Grid and block.
      {13, "launch k0 f 0 1 1 1 1 1",
       "plan:14: bad grid '0 1 1' (dimensions are positive, at most "
       "2147483647 65535 65535)"},
      {13, "launch k0 f 1 65536 1 1 1 1",
       "plan:14: bad grid '1 65536 1' (dimensions are positive, at most "
       "2147483647 65535 65535)"},
      {13, "launch k0 f 2147483648 1 1 1 1 1",
       "plan:14: bad grid '2147483648 1 1' (dimensions are positive, at most "
       "2147483647 65535 65535)"},
      {13, "launch k0 f 1 1 -1 1 1 1", "plan:14: bad number '-1'"},
      {13, "launch k0 f 1 1 1 1 1 0",
       "plan:14: bad block '1 1 0' (dimensions are positive, at most 1024 "
       "1024 64)"},
      {13, "launch k0 f 1 1 1 2048 1 1",
       "plan:14: bad block '2048 1 1' (dimensions are positive, at most 1024 "
       "1024 64)"},
      {13, "launch k0 f 1 1 1 1 1 65",
       "plan:14: bad block '1 1 65' (dimensions are positive, at most 1024 "
       "1024 64)"},
      {13, "launch k0 f 1 1 1 33 32 1",
       "plan:14: block 33 32 1 has 1056 threads (at most 1024)"},
      {13, "launch k0 f 1 1 1 x 1 1", "plan:14: bad number 'x'"},
      // Arguments.
      {13, "launch k0 f 1 1 1 1 1 1 b:4",
       "plan:14: launch argument 'b:4' names buffer 4 of kernel 'k0', which "
       "takes 4 buffers"},
      {14, "launch k1 f 1 1 1 1 1 1 b:0 b:3",
       "plan:15: launch argument 'b:3' names buffer 3 of kernel 'k1', which "
       "takes 3 buffers"},
      {13, "launch k0 f 1 1 1 1 1 1 b:-1",
       "plan:14: bad launch argument 'b:-1'" + forms},
      {13, "launch k0 f 1 1 1 1 1 1 b:",
       "plan:14: bad launch argument 'b:'" + forms},
      {13, "launch k0 f 1 1 1 1 1 1 b1",
       "plan:14: bad launch argument 'b1'" + forms},
      {13, "launch k0 f 1 1 1 1 1 1 i16:1",
       "plan:14: bad launch argument 'i16:1'" + forms},
      {13, "launch k0 f 1 1 1 1 1 1 i64:1.5",
       "plan:14: bad launch argument 'i64:1.5'" + forms},
      {13, "launch k0 f 1 1 1 1 1 1 i64:+1",
       "plan:14: bad launch argument 'i64:+1'" + forms},
      {13, "launch k0 f 1 1 1 1 1 1 i32:-",
       "plan:14: bad launch argument 'i32:-'" + forms},
      {13, "launch k0 f 1 1 1 1 1 1 i64:9223372036854775808",
       "plan:14: launch argument 'i64:9223372036854775808' is out of range "
       "for i64"},
      {13, "launch k0 f 1 1 1 1 1 1 i64:-9223372036854775809",
       "plan:14: launch argument 'i64:-9223372036854775809' is out of range "
       "for i64"},
      {13, "launch k0 f 1 1 1 1 1 1 i32:2147483648",
       "plan:14: launch argument 'i32:2147483648' is out of range for i32"},
      {13, "launch k0 f 1 1 1 1 1 1 i32:-2147483649",
       "plan:14: launch argument 'i32:-2147483649' is out of range for i32"},
      {13, "launch k0 f 1 1 1 1 1 1 f32:1e39",
       "plan:14: launch argument 'f32:1e39' is out of range for f32"},
      {13, "launch k0 f 1 1 1 1 1 1 f32:0x1p3",
       "plan:14: bad launch argument 'f32:0x1p3'" + forms},
      {13, "launch k0 f 1 1 1 1 1 1 f32:infinity",
       "plan:14: bad launch argument 'f32:infinity'" + forms},
      {13, "launch k0 f 1 1 1 1 1 1 f32:",
       "plan:14: bad launch argument 'f32:'" + forms},
      // Dynamic shared memory: one positive size, the last token.
      {13, "launch k0 f 1 1 1 1 1 1 b:0 shared:",
       "plan:14: bad dynamic shared memory size 'shared:' (expected "
       "shared:BYTES, a positive number)"},
      {13, "launch k0 f 1 1 1 1 1 1 shared:48k",
       "plan:14: bad dynamic shared memory size 'shared:48k' (expected "
       "shared:BYTES, a positive number)"},
      {13, "launch k0 f 1 1 1 1 1 1 shared:-1",
       "plan:14: bad dynamic shared memory size 'shared:-1' (expected "
       "shared:BYTES, a positive number)"},
      {13, "launch k0 f 1 1 1 1 1 1 b:0 shared:0",
       "plan:14: dynamic shared memory size 'shared:0' must be positive "
       "(leave it out for none)"},
      {13, "launch k0 f 1 1 1 1 1 1 shared:2147483648",
       "plan:14: dynamic shared memory size 'shared:2147483648' is more than "
       "2147483647 bytes"},
      {13, "launch k0 f 1 1 1 1 1 1 shared:99999999999999999999",
       "plan:14: dynamic shared memory size 'shared:99999999999999999999' is "
       "more than 2147483647 bytes"},
      {13, "launch k0 f 1 1 1 1 1 1 b:0 shared:1024 shared:2048",
       "plan:14: duplicate 'shared:2048' (a launch has at most one "
       "shared:BYTES)"},
      {13, "launch k0 f 1 1 1 1 1 1 shared:1024 b:0",
       "plan:14: 'shared:1024' must be the last token of the launch record"},
      {13, "launch k0 f 1 1 1 1 1 shared:1024",
       "plan:14: bad number 'shared:1024'"},
  };
  for (const Case &c : cases)
    EXPECT_EQ(gpuErrorWithLine(c.index, c.line), c.error)
        << "line " << c.index << ": '" << c.line << "'";
  // Out of order (and not a duplicate) without an earlier one.
  std::vector<std::string> late = examplePlanLines();
  late.insert(late.begin() + 5, "gpu-image sm_90a cubin 1");
  EXPECT_EQ(errorOf(sealLines(late)), "plan:6: 'gpu-image'" + order);
  // Allowed: no arguments, the largest grid and block, a kernel with
  // several launches, and launches of a kernel no step runs.
  EXPECT_EQ(gpuErrorWithLine(13, "launch k0 f 2147483647 65535 65535 1024 1 "
                                 "1"),
            "");
  EXPECT_EQ(gpuErrorWithLine(13, "launch k0 f 1 1 1 1 1 64"), "");
  EXPECT_EQ(gpuErrorWithLine(17, ""), ""); // k1's step removed
}

TEST(Plan, ParsesTensorMapArguments) {
  // k0's step buffers: x (bf16 [64, 512], 65536 bytes), w1 (bf16 [512,
  // 2048]), b1 (f32 [2048]), t4 (f32 [64, 2048]). x's and w1's maps cover
  // them exactly; the others show rank 1 and 5, f16 and an offset.
  std::vector<std::string> lines = gpuLines();
  lines[13] = "launch k0 k0_kernel 512 1 1 128 1 1 "
              "tmap:0:0:bf16:512x64:1024:64x64:128 "
              "tmap:1:0:bf16:2048x512:4096:64x128:128 b:3 "
              "tmap:2:16:f32:2044:-:256:0 "
              "tmap:3:0:f32:16x2x2x2x2:64x128x256x512:4x1x1x1x1:0 "
              "tmap:0:32:f16:8x4:1024:16x4:32 shared:98304";
  std::string text = sealLines(lines);
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(text, plan, error)) << error;
  const std::vector<LaunchArg> &args = plan.launches[0].args;
  ASSERT_EQ(args.size(), 6u);
  EXPECT_EQ(args[0].kind, LaunchArg::Kind::TensorMap);
  EXPECT_EQ(args[0].buffer, 0u);
  const TensorMapArg &x = args[0].tensorMap;
  EXPECT_EQ(x.offset, 0u);
  EXPECT_EQ(x.dtype, DType::BF16);
  EXPECT_EQ(x.rank, 2u);
  EXPECT_EQ(x.dims[0], 512u);
  EXPECT_EQ(x.dims[1], 64u);
  EXPECT_EQ(x.strides[0], 1024u);
  EXPECT_EQ(x.box[0], 64u);
  EXPECT_EQ(x.box[1], 64u);
  EXPECT_EQ(x.swizzle, 128u);
  EXPECT_EQ(args[1].buffer, 1u);
  EXPECT_EQ(args[1].tensorMap.box[1], 128u);
  EXPECT_EQ(args[2].kind, LaunchArg::Kind::Buffer);
  const TensorMapArg &b1 = args[3].tensorMap;
  EXPECT_EQ(args[3].buffer, 2u);
  EXPECT_EQ(b1.offset, 16u);
  EXPECT_EQ(b1.dtype, DType::F32);
  EXPECT_EQ(b1.rank, 1u);
  EXPECT_EQ(b1.dims[0], 2044u);
  EXPECT_EQ(b1.box[0], 256u);
  EXPECT_EQ(b1.swizzle, 0u);
  const TensorMapArg &t4 = args[4].tensorMap;
  EXPECT_EQ(t4.rank, 5u);
  EXPECT_EQ(t4.dims[4], 2u);
  EXPECT_EQ(t4.strides[3], 512u);
  EXPECT_EQ(t4.box[0], 4u);
  EXPECT_EQ(args[5].tensorMap.dtype, DType::F16);
  EXPECT_EQ(args[5].tensorMap.swizzle, 32u);
  EXPECT_EQ(plan.launches[0].sharedBytes, 98304);
  // Written back byte for byte.
  EXPECT_EQ(writePlan(plan), text);

  LaunchArg arg;
  arg.kind = LaunchArg::Kind::TensorMap;
  arg.buffer = 2;
  arg.tensorMap.offset = 48;
  arg.tensorMap.rank = 3;
  const uint64_t dims[] = {4096, 4096, 3};
  const uint64_t strides[] = {8192, 33554432};
  const unsigned box[] = {64, 128, 1};
  for (int i = 0; i < 3; ++i) {
    arg.tensorMap.dims[i] = dims[i];
    arg.tensorMap.box[i] = box[i];
    if (i < 2)
      arg.tensorMap.strides[i] = strides[i];
  }
  arg.tensorMap.swizzle = 128;
  EXPECT_EQ(formatLaunchArg(arg),
            "tmap:2:48:bf16:4096x4096x3:8192x33554432:64x128x1:128");
}

TEST(Plan, RejectsBadTensorMaps) {
  const std::string syntax = "' (expected "
                             "tmap:BUFFER:OFFSET:DTYPE:DIMS:STRIDES:BOX:"
                             "SWIZZLE)";
  struct Case {
    std::string arg;
    std::string error; // after "plan:14: launch argument 'ARG' "
  };
  const Case cases[] = {
      {"tmap:4:0:bf16:512x64:1024:64x64:128",
       "names buffer 4 of kernel 'k0', which takes 4 buffers"},
      {"tmap:0:8:bf16:512x64:1024:64x64:128",
       "has offset 8, which is not a multiple of 16"},
      {"tmap:0:0:i32:512x64:1024:64x64:128",
       "has dtype 'i32' (a tensor map's is bf16, f16 or f32)"},
      {"tmap:0:0:f64:512x64:1024:64x64:128",
       "has dtype 'f64' (a tensor map's is bf16, f16 or f32)"},
      {"tmap:0:0:bf16:-:-:-:0", "has 0 dims (a tensor map has 1 to 5)"},
      {"tmap:0:0:bf16:8x1x1x1x1x1:16x16x16x16x16:8x1x1x1x1x1:0",
       "has 6 dims (a tensor map has 1 to 5)"},
      {"tmap:0:0:bf16:0x64:1024:64x64:128",
       "has dims '0x64' (each is 1 to 4294967296)"},
      {"tmap:0:0:bf16:512x4294967297:1024:64x64:128",
       "has dims '512x4294967297' (each is 1 to 4294967296)"},
      {"tmap:0:0:bf16:512x99999999999999999999999:1024:64x64:128",
       "has dims '512x99999999999999999999999' (each is 1 to 4294967296)"},
      {"tmap:0:0:bf16:512x64:-:64x64:128",
       "has 0 strides for 2 dims (one per dim but the innermost, '-' for "
       "none)"},
      {"tmap:0:0:bf16:512x64:1024x1024:64x64:128",
       "has 2 strides for 2 dims (one per dim but the innermost, '-' for "
       "none)"},
      {"tmap:0:0:bf16:512:1024:64:128",
       "has 1 stride for 1 dim (one per dim but the innermost, '-' for "
       "none)"},
      {"tmap:0:0:bf16:512x64:1000:64x64:128",
       "has strides '1000' (each is a multiple of 16 below 2^40)"},
      {"tmap:0:0:bf16:512x64:1099511627776:64x64:128",
       "has strides '1099511627776' (each is a multiple of 16 below 2^40)"},
      {"tmap:0:0:bf16:512x64:1024:64:128", "has 1 box extent for 2 dims"},
      {"tmap:0:0:bf16:512x64:1024:64x64x1:128", "has 3 box extents for 2 dims"},
      {"tmap:0:0:bf16:512x64:1024:64x0:128",
       "has box '64x0' (each extent is 1 to 256)"},
      {"tmap:0:0:bf16:512x64:1024:64x257:128",
       "has box '64x257' (each extent is 1 to 256)"},
      {"tmap:0:0:bf16:512x64:1024:4x64:0",
       "has an innermost box of 8 bytes (4 bf16), which is not a multiple "
       "of 16"},
      {"tmap:0:0:f32:512x64:1024:2x64:0",
       "has an innermost box of 8 bytes (2 f32), which is not a multiple "
       "of 16"},
      {"tmap:0:0:bf16:512x64:1024:128x64:128",
       "has an innermost box of 256 bytes (128 bf16), wider than its "
       "128-byte swizzle"},
      {"tmap:0:0:f32:512x64:1024:32x64:64",
       "has an innermost box of 128 bytes (32 f32), wider than its 64-byte "
       "swizzle"},
      {"tmap:0:0:bf16:512x64:1024:64x64:16",
       "has swizzle 16 (expected 0, 32, 64 or 128)"},
      {"tmap:0:0:bf16:512x64:1024:64x64:256",
       "has swizzle 256 (expected 0, 32, 64 or 128)"},
  };
  for (const Case &c : cases)
    EXPECT_EQ(gpuErrorWithLine(13, "launch k0 f 1 1 1 1 1 1 " + c.arg),
              "plan:14: launch argument '" + c.arg + "' " + c.error)
        << c.arg;
  // Malformed.
  for (const char *arg :
       {"tmap:0:0:bf16:512x64:1024:64x64", "tmap:0:0:bf16:512x64:1024:64x64:",
        "tmap:0:0:bf16:512x64:1024:64x64:128:0", "tmap:", "tmap",
        "tmap:-1:0:bf16:512x64:1024:64x64:128",
        "tmap:0:-16:bf16:512x64:1024:64x64:128",
        "tmap:0:0:bf16:512xx64:1024:64x64:128",
        "tmap:0:0:bf16:512x64x:1024:64x64:128",
        "tmap::0:bf16:512x64:1024:64x64:128", "tmap:0:0:bf16::-:64:0",
        "tmap:0:0:bf16:512:-:64:1e2", "tmap:0:0:bf16:512x64:1024:64,64:128"}) {
    std::string error = gpuErrorWithLine(13, std::string("launch k0 f 1 1 1 "
                                                         "1 1 1 ") +
                                                 arg);
    if (std::string(arg) == "tmap")
      EXPECT_EQ(error, "plan:14: bad launch argument 'tmap' (expected b:I, "
                       "i64:V, i32:V, f32:V or "
                       "tmap:BUFFER:OFFSET:DTYPE:DIMS:STRIDES:BOX:SWIZZLE)");
    else
      EXPECT_EQ(error,
                "plan:14: bad launch argument '" + std::string(arg) + syntax)
          << arg;
  }

  // The tensor must lie in the buffer the step gives the kernel, checked
  // at the step: x has 65536 bytes, buffer 3 of k0's step is t4 (f32
  // [64, 2048], 524288 bytes; plan buffer 3, w2, has more).
  const Case spans[] = {
      {"tmap:0:16:bf16:512x64:1024:64x64:128",
       "on buffer 'x' (65536 bytes), but launch argument "
       "'tmap:0:16:bf16:512x64:1024:64x64:128' of its launch on line 14 "
       "spans 65552 bytes of it"},
      {"tmap:0:0:bf16:512x65:1024:64x64:128",
       "on buffer 'x' (65536 bytes), but launch argument "
       "'tmap:0:0:bf16:512x65:1024:64x64:128' of its launch on line 14 "
       "spans 66560 bytes of it"},
      {"tmap:0:0:bf16:513x64:1024:64x64:128",
       "on buffer 'x' (65536 bytes), but launch argument "
       "'tmap:0:0:bf16:513x64:1024:64x64:128' of its launch on line 14 "
       "spans 65538 bytes of it"},
      {"tmap:3:0:f32:2048x128:8192:32x8:0",
       "on buffer 't4' (524288 bytes), but launch argument "
       "'tmap:3:0:f32:2048x128:8192:32x8:0' of its launch on line 14 spans "
       "1048576 bytes of it"},
      {"tmap:0:0:bf16:4294967296x4294967296:1099511627760:64x64:0",
       "on buffer 'x' (65536 bytes), but launch argument "
       "'tmap:0:0:bf16:4294967296x4294967296:1099511627760:64x64:0' of its "
       "launch on line 14 spans over 2^64 bytes of it"},
  };
  for (const Case &c : spans)
    EXPECT_EQ(gpuErrorWithLine(13, "launch k0 f 1 1 1 1 1 1 b:0 " + c.arg),
              "plan:17: step runs kernel 'k0' " + c.error)
        << c.arg;
  // Exactly to the end is inside; a kernel no step runs binds no buffer.
  EXPECT_EQ(gpuErrorWithLine(13, "launch k0 f 1 1 1 1 1 1 "
                                 "tmap:0:0:bf16:512x64:1024:64x64:128"),
            "");
  std::vector<std::string> lines = gpuLines();
  lines[13] = "launch k0 f 1 1 1 1 1 1 tmap:0:16:bf16:512x64:1024:64x64:128";
  lines.erase(lines.begin() + 16); // k0's step
  Plan plan;
  std::string error;
  EXPECT_TRUE(parsePlan(sealLines(lines), plan, error)) << error;
}

TEST(Plan, IndexBounds) {
  // An integer input with the bound of the table it indexes, after its
  // buffer (or the buffer's shard); it round-trips through the writer.
  std::vector<std::string> lines = examplePlanLines();
  lines[4] = "buffer 0 ids input i32 64 0";
  lines.insert(lines.begin() + 5, "bound 0 512");
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(sealLines(lines), plan, error)) << error;
  EXPECT_EQ(plan.buffers[0].bound, 512);
  EXPECT_EQ(plan.buffers[1].bound, 0);
  Plan again;
  ASSERT_TRUE(parsePlan(writePlan(plan), again, error)) << error;
  EXPECT_EQ(again.buffers[0].bound, 512);

  auto withBound = [&](const std::string &line, size_t at = 5) {
    std::vector<std::string> bad = lines;
    bad.insert(bad.begin() + static_cast<long>(at), line);
    return errorOf(sealLines(bad));
  };
  EXPECT_EQ(withBound("bound 0 256"), "plan:7: duplicate 'bound' record for buffer 0");
  EXPECT_EQ(withBound("bound 1 8", 7),
            "plan:8: a bound belongs to an integer input, not to 'w1'");
  EXPECT_EQ(withBound("bound 0 8", 7),
            "plan:8: 'bound' record for buffer 0 does not directly follow "
            "that buffer's record (or its shard)");
  lines[5] = "bound 0 0";
  EXPECT_EQ(errorOf(sealLines(lines)),
            "plan:6: bad bound '0' (expected a positive integer)");
  lines[5] = "bound 0";
  EXPECT_EQ(errorOf(sealLines(lines)), "plan:6: expected 'bound ID LIMIT'");
}

TEST(Plan, KernelSources) {
  // A kernel may say where in the script it comes from; the writer keeps it.
  std::vector<std::string> lines = examplePlanLines();
  size_t at = 0;
  while (lines[at].rfind("kernel ", 0) != 0)
    ++at;
  lines[at] += " mlp.loom:12:20";
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(sealLines(lines), plan, error)) << error;
  EXPECT_EQ(plan.kernels[0].source, "mlp.loom:12:20");
  EXPECT_EQ(plan.kernels[1].source, "");
  Plan again;
  ASSERT_TRUE(parsePlan(writePlan(plan), again, error)) << error;
  EXPECT_EQ(again.kernels[0].source, "mlp.loom:12:20");
  for (const char *bad : {"mlp.loom:0:3", "mlp.loom:12", ":1:2", "a:b:1:2", "mlp.loom:x:2"}) {
    std::vector<std::string> broken = examplePlanLines();
    broken[at] += std::string(" ") + bad;
    EXPECT_EQ(errorOf(sealLines(broken)),
              "plan:" + std::to_string(at + 1) + ": bad kernel source '" + bad +
                  "' (expected FILE:LINE:COL)");
  }
}

TEST(Plan, KernelTerms) {
  // A kernel whose outputs sum weights times one of its buffers names it,
  // right after its record; the writer keeps it.
  std::vector<std::string> lines = examplePlanLines();
  size_t at = 0;
  while (lines[at].rfind("kernel ", 0) != 0)
    ++at;
  std::string name = lines[at].substr(7, lines[at].find(' ', 7) - 7);
  lines.insert(lines.begin() + static_cast<long>(at) + 1, "terms " + name + " 1");
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(sealLines(lines), plan, error)) << error;
  EXPECT_EQ(plan.kernels[0].termsArg, 1);
  EXPECT_EQ(plan.kernels[1].termsArg, -1);
  Plan again;
  ASSERT_TRUE(parsePlan(writePlan(plan), again, error)) << error;
  EXPECT_EQ(again.kernels[0].termsArg, 1);
  std::string line = "plan:" + std::to_string(at + 2) + ": ";
  auto withTerms = [&](const std::string &terms) {
    std::vector<std::string> bad = lines;
    bad[at + 1] = terms;
    return errorOf(sealLines(bad));
  };
  EXPECT_EQ(withTerms("terms " + name + " 99"),
            line + "bad terms argument '99' (expected one of the kernel's " +
                std::to_string(plan.kernels[0].numArgs) + " buffers, from 0)");
  EXPECT_EQ(withTerms("terms nope 1"),
            line + "'terms' record for kernel 'nope' does not directly follow "
                   "that kernel's record");
  EXPECT_EQ(withTerms("terms " + name), line + "expected 'terms KERNEL ARG'");
  std::vector<std::string> twice = lines;
  twice.insert(twice.begin() + static_cast<long>(at) + 2, "terms " + name + " 0");
  EXPECT_EQ(errorOf(sealLines(twice)),
            "plan:" + std::to_string(at + 3) + ": 'terms' record for kernel '" +
                name + "' does not directly follow that kernel's record");
}

namespace {
/// A two-stage pipelined plan: a forward on each stage, a backward on the
/// second, an update on both; `extra` lines go before `end`.
std::vector<std::string> pipelinedLines() {
  return {"loom-plan 1",
          "model m",
          "device cpu",
          "mesh g pp=2",
          "pipeline pp 2 1f1b",
          "arena 256",
          "buffer 0 x input f32 4 0",
          "buffer 1 a temp f32 4 64",
          "buffer 2 b output f32 4 128",
          "held 2 1",
          "kernel k 2",
          "section forward 0",
          "step k 0 1",
          "section forward 1",
          "step k 1 2",
          "section update 0,1",
          "transfer 1 0 2",
          "carry forward 0 1"};
}
} // namespace

TEST(Plan, ParsesPipelinedPlans) {
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(sealLines(pipelinedLines()), plan, error)) << error;
  ASSERT_TRUE(plan.pipeline.present);
  EXPECT_EQ(plan.pipeline.axis, 0u);
  EXPECT_EQ(plan.pipeline.stages, 2u);
  EXPECT_EQ(plan.pipeline.schedule, "1f1b");
  EXPECT_EQ(plan.pipeline.forwardCarry[0], (std::vector<unsigned>{1}));
  EXPECT_TRUE(plan.pipeline.backwardCarry[1].empty());
  ASSERT_EQ(plan.steps.size(), 3u);
  EXPECT_EQ(plan.steps[0].phase, StepPhase::Forward);
  EXPECT_EQ(plan.steps[0].stages, (std::vector<unsigned>{0}));
  EXPECT_EQ(plan.steps[1].stages, (std::vector<unsigned>{1}));
  EXPECT_EQ(plan.steps[2].kind, StepKind::Transfer);
  EXPECT_EQ(plan.steps[2].phase, StepPhase::Update);
  EXPECT_EQ(plan.steps[2].stages, (std::vector<unsigned>{0, 1}));
  EXPECT_EQ(plan.steps[2].from, 1u);
  EXPECT_EQ(plan.steps[2].to, 0u);
  // Only the ranks at pp = 1 hold `b`; rank 0 uses its bytes otherwise.
  EXPECT_TRUE(plan.buffers[1].held.empty());
  EXPECT_EQ(plan.buffers[2].held, (std::vector<unsigned>{1}));
  EXPECT_TRUE(holdsBuffer(plan, plan.buffers[1], 0));
  EXPECT_FALSE(holdsBuffer(plan, plan.buffers[2], 0));
  EXPECT_TRUE(holdsBuffer(plan, plan.buffers[2], 1));
  EXPECT_EQ(holderOfBlock(plan, plan.buffers[2], 0), 1u);
  EXPECT_EQ(holderOfBlock(plan, plan.buffers[1], 0), 0u);
  // The writer gives the same plan back.
  Plan again;
  ASSERT_TRUE(parsePlan(writePlan(plan), again, error)) << error;
  EXPECT_EQ(writePlan(again), writePlan(plan));
}

TEST(Plan, RejectsBadPipelineRecords) {
  auto errorWith = [](size_t index, const std::string &line) {
    return errorWithLine(index, line, pipelinedLines());
  };
  EXPECT_EQ(errorWith(4, "pipeline dp 2 1f1b"),
            "plan:5: the pipeline axis 'dp' is not an axis of mesh 'g' (pp)");
  EXPECT_EQ(errorWith(4, "pipeline pp 3 1f1b"),
            "plan:5: 3 stages cannot be dealt evenly over the 2 ranks of axis 'pp'");
  EXPECT_EQ(errorWith(4, "pipeline pp 2 fifo"),
            "plan:5: unknown schedule 'fifo' (expected gpipe, 1f1b, interleaved "
            "or zero_bubble)");
  EXPECT_EQ(errorWith(11, ""),
            "plan:12: a step of a pipelined plan needs a 'section' record before it");
  EXPECT_EQ(errorWith(11, "section forward 0,1"),
            "plan:12: a forward section belongs to one stage");
  EXPECT_EQ(errorWith(11, "section sideways 0"),
            "plan:12: unknown phase 'sideways' (expected forward, backward, "
            "weight or update)");
  EXPECT_EQ(errorWith(11, "section forward 2"),
            "plan:12: bad stages '2' (expected distinct stages below 2, "
            "separated by ',')");
  EXPECT_EQ(errorWith(15, "section backward 1"),
            "plan:17: a transfer belongs to an update section (between "
            "microbatches, stages exchange values by 'carry')");
  EXPECT_EQ(errorWith(16, "transfer 1 1 2"),
            "plan:17: bad transfer stages '1 1' (two different stages below 2)");
  EXPECT_EQ(errorWith(17, "carry forward 1 1"),
            "plan:18: bad carry stage '1' (a forward carry leaves a stage below 1)");
  EXPECT_EQ(errorWith(17, "carry forward 0 0"),
            "plan:18: a carry moves temps and outputs, not input 'x'");
  EXPECT_EQ(errorWith(17, "carry sideways 0 1"),
            "plan:18: bad carry direction 'sideways' (expected forward or backward)");
  EXPECT_EQ(errorWith(9, "held 2 2"),
            "plan:10: bad held list '2' (expected increasing coordinates "
            "below the 2 ranks of axis 'pp')");
  EXPECT_EQ(errorWith(9, "held 2 1,0"),
            "plan:10: bad held list '1,0' (expected increasing coordinates "
            "below the 2 ranks of axis 'pp')");
  EXPECT_EQ(errorWith(9, "held 1 1"),
            "plan:10: 'held' record for buffer 1 does not directly follow "
            "that buffer's record (or its shard)");
  std::vector<std::string> temp = pipelinedLines();
  temp.insert(temp.begin() + 8, "held 1 0");
  EXPECT_EQ(errorWithLine(8, "held 1 0", temp),
            "plan:9: 'held' places a param or an output, not temp 'a'");
  // A forward after the update.
  std::vector<std::string> late = pipelinedLines();
  late.insert(late.end() - 1, {"section forward 1", "step k 1 2"});
  Plan plan;
  std::string error;
  EXPECT_FALSE(parsePlan(sealLines(late), plan, error));
  EXPECT_EQ(error, "plan:19: a forward step after an update step");
}

TEST(Plan, Views) {
  // A temp that is another temp's bytes in another shape (loomc's view of a
  // kernel that would only reshape): right after its buffer record, with
  // the same offset and bytes; it round-trips through the writer.
  std::vector<std::string> lines = examplePlanLines();
  lines.insert(lines.begin() + 10, "buffer 6 t6 temp f32 128,1024 4268032");
  lines.insert(lines.begin() + 11, "view 6 4");
  Plan plan;
  std::string error;
  ASSERT_TRUE(parsePlan(sealLines(lines), plan, error)) << error;
  EXPECT_EQ(plan.buffers[6].viewOf, 4);
  EXPECT_EQ(plan.buffers[4].viewOf, -1);
  Plan again;
  ASSERT_TRUE(parsePlan(writePlan(plan), again, error)) << error;
  EXPECT_EQ(again.buffers[6].viewOf, 4);
  // Read through the view only, t4 is still what step 0 writes (not its
  // scratch), and the view is read, never written.
  std::vector<std::string> through = lines;
  through[15] = "step k1 6 3 5";
  ASSERT_TRUE(parsePlan(sealLines(through), plan, error)) << error;
  std::vector<StepAccess> access = analyzeStepAccess(plan);
  EXPECT_EQ(access[0].buffers[3], BufferAccess::Written);
  EXPECT_EQ(access[1].buffers[0], BufferAccess::Read);
  EXPECT_EQ(access[1].buffers[2], BufferAccess::Written);

  auto withView = [&](const std::string &buffer, const std::string &view) {
    std::vector<std::string> bad = lines;
    bad[10] = buffer;
    bad[11] = view;
    return errorOf(sealLines(bad));
  };
  const std::string t6 = "buffer 6 t6 temp f32 128,1024 4268032";
  EXPECT_EQ(withView(t6, "view 6 6"), "plan:12: a view of '6' (expected an earlier buffer's id)");
  EXPECT_EQ(withView(t6, "view 6 x"), "plan:12: a view of 'x' (expected an earlier buffer's id)");
  EXPECT_EQ(withView(t6, "view 6 1"),
            "plan:12: a view is a temp of another temp's bytes, not temp 't6' of param 'w1'");
  EXPECT_EQ(withView("buffer 6 t6 temp f32 128,512 4268032", "view 6 4"),
            "plan:12: view 't6' (262144 f32 bytes at 4268032) is not 't4' (524288 f32 bytes "
            "at 4268032)");
  EXPECT_EQ(withView("buffer 6 t6 temp f32 128,1024 0", "view 6 4"),
            "plan:12: view 't6' (524288 f32 bytes at 0) is not 't4' (524288 f32 bytes at "
            "4268032)");
  EXPECT_EQ(withView("buffer 6 t6 temp i32 128,1024 4268032", "view 6 4"),
            "plan:12: view 't6' (524288 i32 bytes at 4268032) is not 't4' (524288 f32 bytes "
            "at 4268032)");
  EXPECT_EQ(withView(t6, "view 5 4"),
            "plan:12: 'view' record for buffer 5 does not directly follow that buffer's "
            "record");
  EXPECT_EQ(withView(t6, "view 6"), "plan:12: expected 'view ID OF'");
  std::vector<std::string> twice = lines;
  twice.insert(twice.begin() + 12, "buffer 7 t7 temp f32 2048,64 4268032");
  twice.insert(twice.begin() + 13, "view 7 6");
  EXPECT_EQ(errorOf(sealLines(twice)),
            "plan:14: a view is a temp of another temp's bytes, not temp 't7' of temp 't6' "
            "(itself a view)");
}
