//===- SafetensorsTest.cpp - Weights files: round trips and bad headers ---===//

#include "TestUtil.h"

#include "loom/runtime/exec/Initializer.h"
#include "loom/runtime/plan/Plan.h"
#include "loom/runtime/io/Safetensors.h"

#include <gtest/gtest.h>

#include <cmath>

#include <cstring>
#include <vector>

using namespace loom::runtime;
using loom::test::readFile;
using loom::test::sealLines;
using loom::test::TempDir;
using loom::test::writeFile;

namespace {
Plan weightsPlan() {
  Plan plan;
  std::string error;
  bool ok = parsePlan(
      sealLines({"loom-plan 1", "model net", "device cpu", "arena 1024",
                 "buffer 0 x input f32 4 0",
                 "buffer 1 w param bf16 3,5 64 normal 0.5",
                 "buffer 2 b param f32 5 128 uniform -1 1",
                 "buffer 3 a.scale param f16 scalar 192 constant 0.25",
                 "buffer 4 steps param i64 2 256 ones",
                 "buffer 5 y output f32 5 320"}),
      plan, error);
  EXPECT_TRUE(ok) << error;
  return plan;
}

/// A safetensors file from a header and a data section.
std::string safetensorsFile(const std::string &json, const std::string &data) {
  std::string out;
  for (int i = 0; i < 8; ++i)
    out += static_cast<char>((json.size() >> (8 * i)) & 0xff);
  return out + json + data;
}

std::string headerError(const std::string &json, uint64_t dataBytes) {
  SafetensorsHeader header;
  std::string error;
  EXPECT_FALSE(parseSafetensorsHeader(json, dataBytes, header, error)) << json;
  return error;
}
} // namespace

TEST(Safetensors, RoundTripsParams) {
  TempDir dir;
  Plan plan = weightsPlan();
  std::vector<char> arena(plan.arenaBytes, 0);
  initializeParams(plan, arena.data(), 7);
  std::string error;
  std::string path = dir.path("w.safetensors");
  ASSERT_TRUE(saveWeights(plan, arena.data(), path, error)) << error;

  std::string file = readFile(path);
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i)
    length |= static_cast<uint64_t>(static_cast<unsigned char>(file[i]))
              << (8 * i);
  EXPECT_EQ((8 + length) % 8, 0u);
  // Sorted by name, dtypes and shapes spelled as the spec says.
  std::string json = file.substr(8, length);
  EXPECT_EQ(json.find("{\"__metadata__\":{\"model\":\"net\",\"producer\":"
                      "\"loom\"},\"a.scale\":{\"dtype\":\"F16\",\"shape\":[],"
                      "\"data_offsets\":[0,2]},\"b\":{\"dtype\":\"F32\","
                      "\"shape\":[5],\"data_offsets\":[2,22]},"),
            0u)
      << json;
  EXPECT_EQ(file.size(), 8 + length + 2 + 20 + 16 + 30);

  SafetensorsHeader header;
  ASSERT_TRUE(readSafetensorsHeader(path, header, error)) << error;
  ASSERT_EQ(header.tensors.size(), 4u);
  EXPECT_EQ(header.tensors[0].name, "a.scale");
  EXPECT_EQ(header.tensors[3].name, "w");
  EXPECT_EQ(header.tensors[3].dtype, "BF16");
  EXPECT_EQ(header.tensors[3].shape, (Shape{3, 5}));
  EXPECT_EQ(header.dataOffset, 8 + length);
  EXPECT_EQ(header.dataBytes, 68u);

  std::vector<char> loaded(plan.arenaBytes, 0);
  std::vector<std::string> warnings;
  ASSERT_TRUE(loadWeights(plan, loaded.data(), path, warnings, error)) << error;
  EXPECT_TRUE(warnings.empty());
  for (const PlanBuffer &buffer : plan.buffers)
    if (buffer.role == BufferRole::Param)
      EXPECT_EQ(std::memcmp(arena.data() + buffer.offset,
                            loaded.data() + buffer.offset, buffer.bytes),
                0)
          << buffer.name;
}

// A checkpoint given as --weights is refused where --resume refuses it: a
// format this runtime does not read, or one that lost its checksum (only
// format 1 had none). It loaded silently before.
TEST(Safetensors, WeightsFromCheckpointsAreChecked) {
  TempDir dir;
  Plan plan = weightsPlan();
  std::vector<char> arena(plan.arenaBytes, 0);
  initializeParams(plan, arena.data(), 7);
  std::string error, path = dir.path("w.safetensors");
  ASSERT_TRUE(saveWeights(plan, arena.data(), path, error)) << error;
  std::string file = readFile(path);
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i)
    length |= static_cast<uint64_t>(static_cast<unsigned char>(file[i])) << (8 * i);
  std::string json = file.substr(8, length), data = file.substr(8 + length);
  auto withMetadata = [&](const std::string &entries) {
    std::string edited = json;
    edited.insert(edited.find("\"model\""), entries);
    return safetensorsFile(edited, data);
  };
  std::string edited = dir.path("c.safetensors");
  std::vector<std::string> warnings;
  std::vector<char> loaded(plan.arenaBytes, 0);
  writeFile(edited, withMetadata("\"loom.checkpoint\":\"3\","));
  EXPECT_FALSE(loadWeights(plan, loaded.data(), edited, warnings, error));
  EXPECT_EQ(error, edited + ": checkpoint format '3', but this runtime reads format 2 (and 1)");
  writeFile(edited, withMetadata("\"loom.checkpoint\":\"2\","));
  EXPECT_FALSE(loadWeights(plan, loaded.data(), edited, warnings, error));
  EXPECT_EQ(error, edited + ": the checkpoint has no \"checksum\" in its metadata");
  writeFile(edited, withMetadata("\"loom.checkpoint\":\"1\","));
  EXPECT_TRUE(loadWeights(plan, loaded.data(), edited, warnings, error)) << error;
}

TEST(Safetensors, FloatParamsConvert) {
  // A training checkpoint's f32 master params load into a bf16 (or f16)
  // forward, rounded to nearest even as the step's casts round them; a
  // 16-bit file's values into an f32 param, exactly.
  TempDir dir;
  Plan plan = weightsPlan();
  std::vector<char> arena(plan.arenaBytes, 0);
  std::string error, path = dir.path("w.safetensors");
  std::vector<std::string> warnings;
  std::vector<float> w(15);
  for (int i = 0; i < 15; ++i)
    w[i] = 1.0f + i * 0.00390625f * 0.5f; // 1 + i 2^-9: ties at odd i
  float scale = 70000.0f;                   // past f16's range: inf
  uint16_t b[5];
  for (int i = 0; i < 5; ++i)
    b[i] = floatToBF16(-0.3f * i);
  int64_t steps[2] = {3, 4};
  std::string data(reinterpret_cast<const char *>(w.data()), 60);
  data += std::string(reinterpret_cast<const char *>(&scale), 4);
  data += std::string(reinterpret_cast<const char *>(b), 10);
  data += std::string(reinterpret_cast<const char *>(steps), 16);
  writeFile(path, safetensorsFile(
                      "{\"w\":{\"dtype\":\"F32\",\"shape\":[3,5],\"data_offsets\":[0,60]},"
                      "\"a.scale\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[60,64]},"
                      "\"b\":{\"dtype\":\"BF16\",\"shape\":[5],\"data_offsets\":[64,74]},"
                      "\"steps\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[74,90]}}",
                      data));
  ASSERT_TRUE(loadWeights(plan, arena.data(), path, warnings, error)) << error;
  // The scale past f16's range is said (it had become inf silently).
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_EQ(warnings[0], path + ": tensor 'a.scale': 1 finite value past f16's "
                                "largest (65504) became inf");
  const PlanBuffer &wb = *plan.findBuffer("w"), &bb = *plan.findBuffer("b");
  for (int i = 0; i < 15; ++i) {
    uint16_t bits;
    std::memcpy(&bits, arena.data() + wb.offset + 2 * i, 2);
    EXPECT_EQ(bits, floatToBF16(w[i])) << i;
  }
  // 1 + 2^-9 is a tie between 1 and 1 + 2^-8: to even, 1.
  uint16_t tie;
  std::memcpy(&tie, arena.data() + wb.offset + 2, 2);
  EXPECT_EQ(bf16ToFloat(tie), 1.0f);
  uint16_t half;
  std::memcpy(&half, arena.data() + plan.findBuffer("a.scale")->offset, 2);
  EXPECT_TRUE(std::isinf(halfToFloat(half)));
  for (int i = 0; i < 5; ++i) {
    float value;
    std::memcpy(&value, arena.data() + bb.offset + 4 * i, 4);
    EXPECT_EQ(value, bf16ToFloat(b[i])) << i;
  }
  // A checkpoint (--resume: strict) holds each param as the step keeps
  // it: another dtype there is said, not converted (and then called
  // corrupted by the checksum of the converted bytes).
  std::fill(arena.begin(), arena.end(), 0);
  warnings.clear();
  EXPECT_FALSE(loadWeights(plan, arena.data(), path, warnings, error, /*strict=*/true));
  EXPECT_EQ(error, path + ": tensor 'w' is F32 [3, 5], but the param is BF16 [3, 5]");
}

TEST(Safetensors, ParamsMustMatch) {
  TempDir dir;
  Plan plan = weightsPlan();
  std::vector<char> arena(plan.arenaBytes, 0);
  std::string error;
  std::vector<std::string> warnings;
  std::string path = dir.path("w.safetensors");

  // Each case rewrites one entry of an otherwise complete file.
  auto fileWith = [&](const std::string &wEntry, size_t wBytes) {
    std::string json =
        "{\"a.scale\":{\"dtype\":\"F16\",\"shape\":[],\"data_offsets\":[0,2]},"
        "\"b\":{\"dtype\":\"F32\",\"shape\":[5],\"data_offsets\":[2,22]},"
        "\"steps\":{\"dtype\":\"I64\",\"shape\":[2],\"data_offsets\":[22,38]}" +
        wEntry + "}";
    writeFile(path, safetensorsFile(json, std::string(38 + wBytes, '\0')));
  };
  fileWith("", 0);
  EXPECT_FALSE(loadWeights(plan, arena.data(), path, warnings, error));
  EXPECT_EQ(error, path + ": no tensor for param 'w' (BF16 [3, 5])");

  // f16 into bf16 would lose range or bits: no conversion.
  fileWith(
      ",\"w\":{\"dtype\":\"F16\",\"shape\":[3,5],\"data_offsets\":[38,68]}",
      30);
  EXPECT_FALSE(loadWeights(plan, arena.data(), path, warnings, error));
  EXPECT_EQ(error,
            path + ": tensor 'w' is F16 [3, 5], but the param is BF16 [3, 5]");
  fileWith(
      ",\"w\":{\"dtype\":\"F32\",\"shape\":[5,3],\"data_offsets\":[38,98]}",
      60);
  EXPECT_FALSE(loadWeights(plan, arena.data(), path, warnings, error));
  EXPECT_EQ(error,
            path + ": tensor 'w' is F32 [5, 3], but the param is BF16 [3, 5]");

  fileWith(
      ",\"w\":{\"dtype\":\"BF16\",\"shape\":[5,3],\"data_offsets\":[38,68]}",
      30);
  EXPECT_FALSE(loadWeights(plan, arena.data(), path, warnings, error));
  EXPECT_EQ(error,
            path + ": tensor 'w' is BF16 [5, 3], but the param is BF16 [3, 5]");

  fileWith(
      ",\"w\":{\"dtype\":\"F64\",\"shape\":[15],\"data_offsets\":[38,158]}",
      120);
  EXPECT_FALSE(loadWeights(plan, arena.data(), path, warnings, error));
  EXPECT_EQ(error,
            path + ": tensor 'w' is F64 [15], but the param is BF16 [3, 5]");

  // Tensors that are not params load with a warning each.
  fileWith(
      ",\"w\":{\"dtype\":\"BF16\",\"shape\":[3,5],\"data_offsets\":[38,68]},"
      "\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[68,84]},"
      "\"junk\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[84,87]}",
      49);
  warnings.clear();
  ASSERT_TRUE(loadWeights(plan, arena.data(), path, warnings, error)) << error;
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings[0],
            path +
                ": ignoring tensor 'x', which is not a param of model 'net'");
  EXPECT_EQ(warnings[1], path + ": ignoring tensor 'junk', which is not a "
                                "param of model 'net'");

  // A training checkpoint's optimizer state is one warning.
  fileWith(
      ",\"w\":{\"dtype\":\"BF16\",\"shape\":[3,5],\"data_offsets\":[38,68]},"
      "\"opt.m.w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[68,84]},"
      "\"opt.v.w\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[84,100]},"
      "\"x\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[100,103]}",
      65);
  warnings.clear();
  ASSERT_TRUE(loadWeights(plan, arena.data(), path, warnings, error)) << error;
  ASSERT_EQ(warnings.size(), 2u);
  EXPECT_EQ(warnings[0],
            path + ": ignoring tensor 'x', which is not a param of model 'net'");
  EXPECT_EQ(warnings[1], path + ": ignoring 2 optimizer-state tensors (opt.*), "
                                "which model 'net' does not train");

  EXPECT_FALSE(loadWeights(plan, arena.data(), dir.path("none.safetensors"),
                           warnings, error));
  EXPECT_EQ(error, "cannot open " + dir.path("none.safetensors") +
                       ": No such file or directory");
}

TEST(Safetensors, RejectsMalformedHeaders) {
  auto entry = [](const char *name, const char *dtype, const char *shape,
                  const char *offsets) {
    return std::string("\"") + name + "\":{\"dtype\":\"" + dtype +
           "\",\"shape\":" + shape + ",\"data_offsets\":" + offsets + "}";
  };
  EXPECT_EQ(headerError("{\"a\":", 0),
            "bad header: bad JSON at byte 5: unexpected end of input");
  EXPECT_EQ(headerError("[]", 0), "bad header: expected a JSON object");
  EXPECT_EQ(headerError("{\"__metadata__\":[]}", 0),
            "bad header: \"__metadata__\" must be an object");
  // Metadata maps strings to strings: a number is an error, not a key
  // missing later (a checkpoint's "step").
  EXPECT_EQ(headerError("{\"__metadata__\":{\"step\":5}}", 0),
            "bad header: \"__metadata__\" value of \"step\" must be a string, not 5");
  EXPECT_EQ(headerError("{\"a\":1}", 0), "tensor 'a': expected an object");
  EXPECT_EQ(headerError("{\"a\":{\"shape\":[],\"data_offsets\":[0,4]}}", 4),
            "tensor 'a': missing or non-string \"dtype\"");
  EXPECT_EQ(headerError("{" + entry("a", "Q7", "[1]", "[0,4]") + "}", 4),
            "tensor 'a': unknown dtype 'Q7'");
  EXPECT_EQ(headerError("{" + entry("a", "F32", "[-1]", "[0,4]") + "}", 4),
            "tensor 'a': shape entries must be non-negative integers");
  EXPECT_EQ(headerError("{" + entry("a", "F32", "[1.5]", "[0,4]") + "}", 4),
            "tensor 'a': shape entries must be non-negative integers");
  EXPECT_EQ(headerError("{" + entry("a", "F32", "[1]", "[0]") + "}", 4),
            "tensor 'a': \"data_offsets\" must be [BEGIN, END] with "
            "non-negative integers");
  EXPECT_EQ(headerError("{" + entry("a", "F32", "[1]", "[0,8]") + "}", 4),
            "tensor 'a': data_offsets [0, 8] lie outside the data section of "
            "4 bytes");
  EXPECT_EQ(headerError("{" + entry("a", "F32", "[1]", "[4,0]") + "}", 4),
            "tensor 'a': data_offsets [4, 0] end before they begin");
  EXPECT_EQ(headerError("{" + entry("a", "F32", "[2]", "[0,4]") + "}", 4),
            "tensor 'a': data_offsets [0, 4] hold 4 bytes, but F32 [2] needs "
            "8");
  EXPECT_EQ(
      headerError(
          "{" + entry("a", "F32", "[4611686018427387904,4]", "[0,4]") + "}", 4),
      "tensor 'a': shape [4611686018427387904, 4] is too large");
  EXPECT_EQ(headerError("{" + entry("a", "F32", "[2]", "[0,8]") + "," +
                            entry("b", "F32", "[1]", "[4,8]") + "}",
                        8),
            "tensors 'a' and 'b' overlap");
  EXPECT_EQ(headerError("{" + entry("a", "F32", "[1]", "[0,4]") + "," +
                            entry("b", "F32", "[1]", "[8,12]") + "}",
                        12),
            "the data section has a gap of 4 bytes before tensor 'b'");
  EXPECT_EQ(headerError("{" + entry("a", "F32", "[1]", "[0,4]") + "}", 8),
            "the data section has 8 bytes, but the tensors cover 4");
  EXPECT_EQ(headerError("{" + entry("a", "F32", "[1]", "[0,4]") + "," +
                            entry("a", "F32", "[1]", "[4,8]") + "}",
                        8),
            "bad header: bad JSON at byte 57: duplicate key \"a\"");

  // Out-of-order entries and empty tensors are fine.
  SafetensorsHeader header;
  std::string error;
  EXPECT_TRUE(
      parseSafetensorsHeader("{" + entry("b", "F32", "[1]", "[4,8]") + "," +
                                 entry("e", "F32", "[0,3]", "[4,4]") + "," +
                                 entry("a", "I8", "[4]", "[0,4]") +
                                 ",\"__metadata__\":{\"k\":\"v\"}}  ",
                             8, header, error))
      << error;
  EXPECT_EQ(header.tensors.size(), 3u);
  EXPECT_EQ(header.find("e")->shape, (Shape{0, 3}));
}

TEST(Safetensors, RejectsBadFilesWithoutCrashing) {
  TempDir dir;
  std::string path = dir.path("w.safetensors");
  SafetensorsHeader header;
  std::string error;

  writeFile(path, "abc");
  EXPECT_FALSE(readSafetensorsHeader(path, header, error));
  EXPECT_EQ(error, path + ": too short for a safetensors file");

  // A header length near 2^64 must not be allocated or added to.
  writeFile(path, std::string("\xff\xff\xff\xff\xff\xff\xff\xff{}", 10));
  EXPECT_FALSE(readSafetensorsHeader(path, header, error));
  EXPECT_EQ(error, path + ": header length 18446744073709551615 is too large "
                          "(is this a safetensors file?)");
  writeFile(path, safetensorsFile("{}", "").substr(0, 8) + "{");
  EXPECT_FALSE(readSafetensorsHeader(path, header, error));
  EXPECT_EQ(error, path + ": header length 2 runs past the end of the file "
                          "(9 bytes)");

  // Nesting deep enough to overflow the stack of a naive parser.
  writeFile(path, safetensorsFile(std::string(200000, '['), ""));
  EXPECT_FALSE(readSafetensorsHeader(path, header, error));
  EXPECT_NE(error.find("nested deeper than 64"), std::string::npos);

  // Every truncation and many corruptions of a good file fail cleanly.
  Plan plan = weightsPlan();
  std::vector<char> arena(plan.arenaBytes, 0);
  ASSERT_TRUE(saveWeights(plan, arena.data(), path, error)) << error;
  std::string good = readFile(path);
  std::vector<std::string> warnings;
  for (size_t cut = 0; cut < good.size(); ++cut) {
    writeFile(path, good.substr(0, cut));
    EXPECT_FALSE(loadWeights(plan, arena.data(), path, warnings, error));
  }
  for (size_t i = 0; i < good.size() - 68; ++i) {
    for (char replacement : {'\0', '"', '9', '[', '}', '\\', '\xff'}) {
      std::string corrupt = good;
      corrupt[i] = replacement;
      writeFile(path, corrupt);
      loadWeights(plan, arena.data(), path, warnings, error);
    }
  }
}
