//===- JsonTest.cpp - Strict JSON reading (nlohmann-json) for file headers -===//

#include "loom/runtime/io/Json.h"

#include <gtest/gtest.h>

#include <string>

using namespace loom::runtime;

namespace {
std::string errorOf(const std::string &text) {
  Json value;
  std::string error;
  EXPECT_FALSE(parseJson(text, value, error)) << text;
  return error;
}
} // namespace

TEST(Json, ParsesValuesInFileOrder) {
  Json value;
  std::string error;
  ASSERT_TRUE(parseJson(" {\"c\": [1, -2.5e3, true, false, null, \"s\"], "
                        "\"b\": {}, \"a\": []}\n",
                        value, error))
      << error;
  ASSERT_TRUE(value.is_object());
  std::vector<std::string> keys;
  for (const auto &item : value.items())
    keys.push_back(item.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"c", "b", "a"}));
  const Json &c = value["c"];
  ASSERT_EQ(c.size(), 6u);
  EXPECT_TRUE(c[0].is_number_unsigned());
  EXPECT_EQ(c[0].get<uint64_t>(), 1u);
  EXPECT_FALSE(c[1].is_number_unsigned());
  EXPECT_EQ(c[1].get<double>(), -2500.0);
  EXPECT_EQ(c[2], true);
  EXPECT_EQ(c[3], false);
  EXPECT_TRUE(c[4].is_null());
  EXPECT_EQ(c[5], "s");
  EXPECT_TRUE(value["b"].is_object());
  EXPECT_EQ(value.find("missing"), value.end());
}

TEST(Json, IntegersAreExactUpTo64Bits) {
  Json value;
  std::string error;
  ASSERT_TRUE(parseJson("18446744073709551615", value, error));
  EXPECT_TRUE(value.is_number_unsigned());
  EXPECT_EQ(value.get<uint64_t>(), 18446744073709551615ull);
  ASSERT_TRUE(parseJson("18446744073709551616", value, error));
  EXPECT_FALSE(value.is_number_unsigned());
  for (const char *notUnsigned : {"1.0", "1e2", "-0", "-1"}) {
    ASSERT_TRUE(parseJson(notUnsigned, value, error)) << notUnsigned;
    EXPECT_FALSE(value.is_number_unsigned()) << notUnsigned;
  }
  ASSERT_TRUE(parseJson("0", value, error));
  EXPECT_TRUE(value.is_number_unsigned());
}

TEST(Json, DecodesAndWritesEscapes) {
  Json value;
  std::string error;
  ASSERT_TRUE(
      parseJson(R"("q\"b\\s\/n\nt\tu\u00e9\ud83d\ude00")", value, error))
      << error;
  EXPECT_EQ(value.get<std::string>(),
            "q\"b\\s/n\nt\tu\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(dumpJson("a\"b\\c\n\x01"), R"("a\"b\\c\n\u0001")");
  // Invalid UTF-8 (a name from a plan) is replaced, not fatal.
  EXPECT_EQ(dumpJson("a\xff"), "\"a\xef\xbf\xbd\"");
}

TEST(Json, RejectsMalformedInput) {
  const char *cases[] = {
      "",
      "{",
      "[1,]",
      "{\"a\":1,}",
      "{\"a\" 1}",
      "{a:1}",
      "[1 2]",
      "01",
      "1.",
      "1e",
      "-",
      "+1",
      ".5",
      "tru",
      "nul",
      "\"abc",
      "\"\\x\"",
      "\"\\u12\"",
      "\"\\ud800\"",
      "\"\\udc00\"",
      "\"a\nb\"",
      "[1] x",
      "{\"a\":1}}",
      "NaN",
      "Infinity",
      "'a'",
      "{\"a\":1, \"a\":2}",
  };
  for (const char *text : cases)
    EXPECT_EQ(errorOf(text).find("bad JSON at byte "), 0u) << text;
  EXPECT_EQ(errorOf("{\"a\":1, \"a\":2}"),
            "bad JSON at byte 11: duplicate key \"a\"");
  EXPECT_EQ(errorOf("[1,]").find("bad JSON at byte 3: unexpected character ("),
            0u)
      << errorOf("[1,]");
  EXPECT_EQ(errorOf("{\"a\":"), "bad JSON at byte 5: unexpected end of input");
  // A raw NUL after the value (a safetensors header padded with NULs, not
  // the spaces the format allows) had ended the input.
  EXPECT_EQ(errorOf(std::string("{\"a\":1}\0\0", 9)), "bad JSON at byte 7: a NUL byte");
}

TEST(Json, BoundsNesting) {
  // Deep enough to overflow the stack if the depth were not bounded.
  std::string deep(1000000, '[');
  EXPECT_EQ(errorOf(deep), "bad JSON at byte 64: nested deeper than 64");
  std::string ok = std::string(64, '[') + std::string(64, ']');
  Json value;
  std::string error;
  EXPECT_TRUE(parseJson(ok, value, error)) << error;
  EXPECT_FALSE(parseJson("[" + ok + "]", value, error));
}
