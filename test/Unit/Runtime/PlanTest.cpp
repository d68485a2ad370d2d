//===- PlanTest.cpp - Plan parsing, validation and writing ----------------===//

#include "TestUtil.h"

#include "loom/runtime/Executor.h"
#include "loom/runtime/Plan.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace loom::runtime;
using loom::test::sealLines;

namespace {
/// The example of docs/plan-format.md, without its `end` record.
std::vector<std::string> exampleLines() {
  return {
      "loom-plan 1",
      "model mlp",
      "device cpu",
      "arena 4792320",
      "buffer 0 x input bf16 64,512 0",
      "buffer 1 w1 param bf16 512,2048 65536 normal 0.02",
      "buffer 2 b1 param f32 2048 2162688 zeros",
      "buffer 3 w2 param bf16 2048,512 2170880 normal 0.02",
      "buffer 4 t4 temp f32 64,2048 4268032",
      "buffer 5 y output bf16 64,512 0",
      "kernel k0 4",
      "kernel k1 3",
      "step k0 0 1 2 4",
      "step k1 4 3 5",
  };
}

/// Parses the example with line `index` (0-based) replaced by `line`, or
/// removed if `line` is empty; returns the error (empty if it parsed).
std::string errorWithLine(size_t index, const std::string &line) {
  std::vector<std::string> lines = exampleLines();
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
  std::string text = sealLines(exampleLines());
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
  std::string text = sealLines(exampleLines());
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
  std::string text = sealLines(exampleLines());
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
  std::string text = sealLines(exampleLines());
  Plan plan;
  std::string error;
  EXPECT_TRUE(parsePlan(text.substr(0, text.size() - 1), plan, error)) << error;
}

TEST(Plan, RejectsCorruptedBytes) {
  std::string text = sealLines(exampleLines());
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
  std::vector<std::string> lines = exampleLines();
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
  std::string text = sealLines(exampleLines());
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
       "loom-plan, model, device, arena, buffer, kernel, step, end)"},
      {13, "kernel k2 1",
       "plan:14: 'kernel' record out of order (records "
       "come in the order loom-plan, model, device, "
       "arena, buffer, kernel, step, end)"},
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
      {10, "kernel k1", "plan:11: expected 'kernel NAME NARGS'"},
      {8, "", "plan:9: buffer id 5 is out of sequence (expected 4)"},
  };
  for (const Case &c : cases)
    EXPECT_EQ(errorWithLine(c.index, c.line), c.error)
        << "line " << c.index << ": '" << c.line << "'";
  EXPECT_EQ(errorWithLine(11, "kernel k0 3"),
            "plan:12: duplicate kernel name 'k0' (first on line 11)");
  EXPECT_EQ(errorWithLine(4, "buffer 0 x input bf16 64,512 0 "),
            "plan:5: empty field (fields are separated by single spaces)");
  std::vector<std::string> withBlank = exampleLines();
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
  ASSERT_TRUE(parsePlan(sealLines(exampleLines()), plan, error)) << error;
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
