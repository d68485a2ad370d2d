//===- NpyTest.cpp - .npy reading, writing and rejection ------------------===//

#include "TestUtil.h"

#include "loom/runtime/io/Npy.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

using namespace loom::runtime;
using loom::test::readFile;
using loom::test::TempDir;
using loom::test::writeFile;

namespace {
/// A .npy file with a hand-written header dict (padded as NumPy does).
std::string npyFile(const std::string &dict, const std::string &data,
                    int version = 1) {
  size_t preamble = version == 1 ? 10 : 12;
  std::string header = dict;
  size_t total = preamble + header.size() + 1;
  header += std::string((64 - total % 64) % 64, ' ') + "\n";
  std::string out = "\x93NUMPY";
  out += static_cast<char>(version);
  out += '\0';
  for (size_t i = 0; i < preamble - 8; ++i)
    out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  return out + header + data;
}

template <typename T> std::string bytesOf(const std::vector<T> &values) {
  return std::string(reinterpret_cast<const char *>(values.data()),
                     values.size() * sizeof(T));
}
} // namespace

TEST(Npy, HeaderLooksLikeNumPys) {
  std::string header = encodeNpyHeader(DType::F32, {3, 4});
  EXPECT_EQ(header.size() % 64, 0u);
  EXPECT_EQ(header.substr(0, 8), std::string("\x93NUMPY\x01\x00", 8));
  EXPECT_EQ(header.back(), '\n');
  EXPECT_NE(header.find("{'descr': '<f4', 'fortran_order': False, "
                        "'shape': (3, 4), }"),
            std::string::npos);
  EXPECT_NE(encodeNpyHeader(DType::I64, {5}).find("'shape': (5,), }"),
            std::string::npos);
  EXPECT_NE(encodeNpyHeader(DType::F16, {}).find("'<f2'"), std::string::npos);
  EXPECT_NE(encodeNpyHeader(DType::F16, {}).find("'shape': (), }"),
            std::string::npos);
  EXPECT_NE(encodeNpyHeader(DType::BF16, {2}).find("'<f4'"), std::string::npos);

  NpyHeader parsed;
  std::string error;
  ASSERT_TRUE(parseNpyHeader(header, parsed, error)) << error;
  EXPECT_EQ(parsed.majorVersion, 1u);
  EXPECT_EQ(parsed.descr, "<f4");
  EXPECT_FALSE(parsed.fortranOrder);
  EXPECT_EQ(parsed.shape, (Shape{3, 4}));
  EXPECT_EQ(parsed.dataOffset, header.size());
}

TEST(Npy, RoundTripsEveryDType) {
  TempDir dir;
  std::string error;
  std::vector<float> f32 = {1.5f, -2.0f, 0.1f, 3e38f, -0.0f, 7.0f};
  ASSERT_TRUE(
      writeNpy(dir.path("f32.npy"), DType::F32, {2, 3}, f32.data(), error))
      << error;
  std::vector<float> f32Back(6);
  ASSERT_TRUE(readNpy(dir.path("f32.npy"), "input 'a'", DType::F32, {2, 3},
                      f32Back.data(), error))
      << error;
  EXPECT_EQ(std::memcmp(f32.data(), f32Back.data(), 24), 0);

  std::vector<int32_t> i32 = {1, -2, 2147483647};
  ASSERT_TRUE(
      writeNpy(dir.path("i32.npy"), DType::I32, {3}, i32.data(), error));
  std::vector<int32_t> i32Back(3);
  ASSERT_TRUE(readNpy(dir.path("i32.npy"), "input 'b'", DType::I32, {3},
                      i32Back.data(), error))
      << error;
  EXPECT_EQ(i32Back, i32);

  std::vector<int64_t> i64 = {-(1ll << 62), 42};
  ASSERT_TRUE(
      writeNpy(dir.path("i64.npy"), DType::I64, {1, 2}, i64.data(), error));
  std::vector<int64_t> i64Back(2);
  ASSERT_TRUE(readNpy(dir.path("i64.npy"), "input 'c'", DType::I64, {1, 2},
                      i64Back.data(), error))
      << error;
  EXPECT_EQ(i64Back, i64);

  // f16 is written as '<f2' and read back bit for bit.
  std::vector<uint16_t> f16 = {0x3c00, 0x8001, 0x7bff, 0x7c00};
  ASSERT_TRUE(
      writeNpy(dir.path("f16.npy"), DType::F16, {4}, f16.data(), error));
  EXPECT_NE(readFile(dir.path("f16.npy")).find("'<f2'"), std::string::npos);
  std::vector<uint16_t> f16Back(4);
  ASSERT_TRUE(readNpy(dir.path("f16.npy"), "input 'd'", DType::F16, {4},
                      f16Back.data(), error))
      << error;
  EXPECT_EQ(f16Back, f16);

  // bf16 is widened to '<f4' exactly, and read back bit for bit.
  std::vector<uint16_t> bf16 = {0x3f80, 0xc049, 0x0001, 0xff80};
  ASSERT_TRUE(
      writeNpy(dir.path("bf16.npy"), DType::BF16, {2, 2}, bf16.data(), error));
  std::string file = readFile(dir.path("bf16.npy"));
  NpyHeader header;
  ASSERT_TRUE(parseNpyHeader(file, header, error)) << error;
  EXPECT_EQ(header.descr, "<f4");
  ASSERT_EQ(file.size(), header.dataOffset + 16);
  float first;
  std::memcpy(&first, file.data() + header.dataOffset, 4);
  EXPECT_EQ(first, 1.0f);
  std::vector<uint16_t> bf16Back(4);
  ASSERT_TRUE(readNpy(dir.path("bf16.npy"), "input 'e'", DType::BF16, {2, 2},
                      bf16Back.data(), error))
      << error;
  EXPECT_EQ(bf16Back, bf16);

  // Scalars.
  float scalar = 2.5f, scalarBack = 0;
  ASSERT_TRUE(writeNpy(dir.path("s.npy"), DType::F32, {}, &scalar, error));
  ASSERT_TRUE(readNpy(dir.path("s.npy"), "input 's'", DType::F32, {},
                      &scalarBack, error))
      << error;
  EXPECT_EQ(scalarBack, 2.5f);
}

TEST(Npy, ReadsF32FilesInto16BitTensorsRoundingToNearestEven) {
  TempDir dir;
  std::string error;
  // 1 + 2^-11 ties to 1.0 in f16; 0x3f808000 (1 + 2^-8, exact in f16)
  // ties to 0x3f80 in bf16; 1e6 overflows f16.
  float tieHalf = 1.0f + 1.0f / 2048;
  float tieBF16;
  uint32_t bits = 0x3f808000;
  std::memcpy(&tieBF16, &bits, 4);
  std::vector<float> values = {tieHalf, tieBF16, 1e6f};
  ASSERT_TRUE(
      writeNpy(dir.path("x.npy"), DType::F32, {3}, values.data(), error));
  std::vector<uint16_t> half(3), brain(3);
  ASSERT_TRUE(readNpy(dir.path("x.npy"), "input 'x'", DType::F16, {3},
                      half.data(), error))
      << error;
  EXPECT_EQ(half, (std::vector<uint16_t>{0x3c00, 0x3c04, 0x7c00}));
  ASSERT_TRUE(readNpy(dir.path("x.npy"), "input 'x'", DType::BF16, {3},
                      brain.data(), error))
      << error;
  EXPECT_EQ(brain[1], 0x3f80);
  // Beyond one conversion chunk (65536 elements).
  std::vector<float> many(70000);
  for (size_t i = 0; i < many.size(); ++i)
    many[i] = static_cast<float>(i);
  ASSERT_TRUE(
      writeNpy(dir.path("many.npy"), DType::F32, {70000}, many.data(), error));
  std::vector<uint16_t> manyBack(70000);
  ASSERT_TRUE(readNpy(dir.path("many.npy"), "input 'm'", DType::BF16, {70000},
                      manyBack.data(), error))
      << error;
  for (size_t i = 0; i < many.size(); i += 997)
    EXPECT_EQ(manyBack[i], floatToBF16(many[i]));
  EXPECT_EQ(manyBack[69999], floatToBF16(69999.0f));
}

TEST(Npy, ReadsVersion2AndOtherHeaderSpellings) {
  TempDir dir;
  std::string error;
  std::vector<float> data = {1, 2, 3, 4, 5, 6};
  // Version 2.0, keys in another order, double quotes, no trailing comma.
  writeFile(dir.path("v2.npy"),
            npyFile("{\"shape\": (2, 3), \"fortran_order\": False, "
                    "\"descr\": \"<f4\"}",
                    bytesOf(data), 2));
  std::vector<float> back(6);
  ASSERT_TRUE(readNpy(dir.path("v2.npy"), "input 'x'", DType::F32, {2, 3},
                      back.data(), error))
      << error;
  EXPECT_EQ(back, data);
  // Fortran order is harmless for one dimension.
  writeFile(dir.path("f.npy"),
            npyFile("{'descr': '<f4', 'fortran_order': True, 'shape': (6,), }",
                    bytesOf(data)));
  EXPECT_TRUE(readNpy(dir.path("f.npy"), "input 'x'", DType::F32, {6},
                      back.data(), error))
      << error;
}

TEST(Npy, ShapeAndDTypeMismatchesNameTheTensorAndFile) {
  TempDir dir;
  std::string error;
  std::vector<float> data(12, 1.0f);
  std::string path = dir.path("x.npy");
  ASSERT_TRUE(writeNpy(path, DType::F32, {3, 4}, data.data(), error));
  std::vector<float> target(64 * 512);
  EXPECT_FALSE(
      readNpy(path, "input 'x'", DType::F32, {64, 512}, target.data(), error));
  EXPECT_EQ(error, "input 'x': file " + path +
                       " has shape [3, 4], expected [64, 512]");
  EXPECT_FALSE(checkNpy(path, "input 'x'", DType::F32, {4, 3}, error));
  EXPECT_EQ(error,
            "input 'x': file " + path + " has shape [3, 4], expected [4, 3]");

  EXPECT_FALSE(checkNpy(path, "input 'x'", DType::I32, {3, 4}, error));
  EXPECT_EQ(error, "input 'x': file " + path +
                       " has dtype '<f4', expected '<i4' (the tensor is i32)");
  std::vector<double> f64(12, 1.0);
  writeFile(dir.path("d.npy"),
            npyFile("{'descr': '<f8', 'fortran_order': False, 'shape': (3, "
                    "4), }",
                    bytesOf(f64)));
  EXPECT_FALSE(
      checkNpy(dir.path("d.npy"), "input 'x'", DType::F16, {3, 4}, error));
  EXPECT_EQ(error, "input 'x': file " + dir.path("d.npy") +
                       " has dtype '<f8', expected '<f2' or '<f4' (the tensor "
                       "is f16)");
  // f16 files are not accepted for f32 or bf16 tensors, nor big-endian ones.
  std::vector<uint16_t> f16(12, 0x3c00);
  ASSERT_TRUE(
      writeNpy(dir.path("h.npy"), DType::F16, {3, 4}, f16.data(), error));
  EXPECT_FALSE(
      checkNpy(dir.path("h.npy"), "input 'x'", DType::BF16, {3, 4}, error));
  EXPECT_NE(error.find("has dtype '<f2', expected '<f4' (the tensor is bf16)"),
            std::string::npos);
  writeFile(dir.path("be.npy"),
            npyFile("{'descr': '>f4', 'fortran_order': False, 'shape': (3, "
                    "4), }",
                    bytesOf(data)));
  EXPECT_FALSE(
      checkNpy(dir.path("be.npy"), "input 'x'", DType::F32, {3, 4}, error));
  EXPECT_NE(error.find("has dtype '>f4'"), std::string::npos);
  // A control byte in the descr is quoted, not the message's end (a NUL
  // cut it at '<f4).
  std::string nul = "{'descr': '<f4";
  nul += '\0';
  nul += "x', 'fortran_order': False, 'shape': (3, 4), }";
  writeFile(dir.path("nul.npy"), npyFile(nul, bytesOf(data)));
  EXPECT_FALSE(
      checkNpy(dir.path("nul.npy"), "input 'x'", DType::F32, {3, 4}, error));
  EXPECT_NE(error.find("has dtype '<f4\\x00x', expected '<f4' (the tensor is f32)"),
            std::string::npos)
      << error;

  writeFile(dir.path("fortran.npy"),
            npyFile("{'descr': '<f4', 'fortran_order': True, 'shape': (3, "
                    "4), }",
                    bytesOf(data)));
  EXPECT_FALSE(checkNpy(dir.path("fortran.npy"), "input 'x'", DType::F32,
                        {3, 4}, error));
  EXPECT_NE(error.find("Fortran order"), std::string::npos);

  EXPECT_FALSE(
      checkNpy(dir.path("absent.npy"), "input 'x'", DType::F32, {3, 4}, error));
  EXPECT_EQ(error, "input 'x': cannot open " + dir.path("absent.npy") +
                       ": No such file or directory");
  EXPECT_FALSE(checkNpy(dir.path(""), "input 'x'", DType::F32, {3, 4}, error));
  EXPECT_NE(error.find("not a regular file"), std::string::npos);
}

TEST(Npy, RejectsTruncatedAndCorruptFiles) {
  TempDir dir;
  std::string error;
  std::vector<float> data(12, 1.0f);
  std::string path = dir.path("x.npy");
  ASSERT_TRUE(writeNpy(path, DType::F32, {3, 4}, data.data(), error));
  std::string good = readFile(path);
  std::vector<float> target(12);

  // Every truncation fails cleanly.
  for (size_t cut = 0; cut < good.size(); ++cut) {
    writeFile(path, good.substr(0, cut));
    EXPECT_FALSE(
        readNpy(path, "input 'x'", DType::F32, {3, 4}, target.data(), error))
        << cut;
    EXPECT_EQ(error.find("input 'x': "), 0u) << error;
  }
  writeFile(path, good.substr(0, good.size() - 4));
  EXPECT_FALSE(checkNpy(path, "input 'x'", DType::F32, {3, 4}, error));
  EXPECT_EQ(error, "input 'x': file " + path +
                       " has 44 data bytes, expected 48 (truncated file)");
  writeFile(path, good + "junk");
  EXPECT_FALSE(checkNpy(path, "input 'x'", DType::F32, {3, 4}, error));
  EXPECT_EQ(error,
            "input 'x': file " + path + " has 52 data bytes, expected 48");

  // Every single-byte corruption of the header is either harmless or
  // rejected, never a crash.
  size_t headerSize = good.size() - 48;
  for (size_t i = 0; i < headerSize; ++i) {
    for (char replacement : {'\0', '\xff', '(', '\'', '9', ' '}) {
      std::string corrupt = good;
      corrupt[i] = replacement;
      writeFile(path, corrupt);
      readNpy(path, "input 'x'", DType::F32, {3, 4}, target.data(), error);
    }
  }

  struct Case {
    std::string file;
    const char *message;
  };
  const Case cases[] = {
      {"PK\x03\x04 not numpy at all", "not a .npy file (bad magic)"},
      {npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }",
               bytesOf(data), 3),
       ".npy format version 3.0 is not supported (expected 1.0 or 2.0)"},
      {npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4}",
               bytesOf(data)),
       "bad .npy header: expected ',' or ')' in the shape"},
      {npyFile("{'descr': '<f4', 'fortran_order': False}", bytesOf(data)),
       "bad .npy header: missing 'descr', 'fortran_order' or 'shape'"},
      {npyFile("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (3, 4), }",
               bytesOf(data)),
       "bad .npy header: expected True or False"},
      {npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), "
               "'extra': 1}",
               bytesOf(data)),
       "bad .npy header: unexpected key 'extra'"},
      {npyFile("{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, "
               "'shape': (3, 4)}",
               bytesOf(data)),
       "bad .npy header: unexpected key 'descr'"},
      {npyFile("{'descr': '<f4, 'fortran_order': False, 'shape': (3, 4)}",
               bytesOf(data)),
       "bad .npy header: expected ',' or '}'"},
      {npyFile("{'descr': '<f4', 'fortran_order': False, 'shape': "
               "(99999999999999999999, 4)}",
               bytesOf(data)),
       "bad .npy header: dimension too large"},
      {std::string("\x93NUMPY\x01\x00\xff\xff", 10) + "{}",
       "truncated .npy header"},
      {std::string("\x93NUMPY\x02\x00\xff\xff\xff\x7f", 12),
       ".npy header of 2147483647 bytes is too large"},
  };
  for (const Case &c : cases) {
    writeFile(path, c.file);
    EXPECT_FALSE(
        readNpy(path, "input 'x'", DType::F32, {3, 4}, target.data(), error));
    EXPECT_EQ(error, "input 'x': cannot read " + path + ": " + c.message);
  }
}

TEST(Npy, WriteFailsCleanly) {
  TempDir dir;
  std::string error;
  float value = 0;
  EXPECT_FALSE(
      writeNpy(dir.path("no/such/dir/x.npy"), DType::F32, {1}, &value, error));
  EXPECT_EQ(error, "cannot write " + dir.path("no/such/dir/x.npy") +
                       ": No such file or directory");
}
