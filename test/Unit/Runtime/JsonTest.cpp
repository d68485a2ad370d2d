//===- JsonTest.cpp - The strict JSON reader behind safetensors headers ---===//

#include "loom/runtime/Json.h"

#include <gtest/gtest.h>

#include <string>

using namespace loom::runtime;

namespace {
std::string errorOf(const std::string &text) {
  JsonValue value;
  std::string error;
  EXPECT_FALSE(parseJson(text, value, error)) << text;
  return error;
}
} // namespace

TEST(Json, ParsesValues) {
  JsonValue value;
  std::string error;
  ASSERT_TRUE(parseJson(" {\"a\": [1, -2.5e3, true, false, null, \"s\"], "
                        "\"b\": {}, \"c\": []}\n",
                        value, error))
      << error;
  ASSERT_EQ(value.kind, JsonValue::Kind::Object);
  ASSERT_EQ(value.keys, (std::vector<std::string>{"a", "b", "c"}));
  const JsonValue *a = value.find("a");
  ASSERT_NE(a, nullptr);
  ASSERT_EQ(a->elements.size(), 6u);
  EXPECT_TRUE(a->elements[0].isUnsigned);
  EXPECT_EQ(a->elements[0].unsignedValue, 1u);
  EXPECT_FALSE(a->elements[1].isUnsigned);
  EXPECT_EQ(a->elements[1].number, -2500.0);
  EXPECT_TRUE(a->elements[2].boolean);
  EXPECT_EQ(a->elements[3].kind, JsonValue::Kind::Bool);
  EXPECT_FALSE(a->elements[3].boolean);
  EXPECT_EQ(a->elements[4].kind, JsonValue::Kind::Null);
  EXPECT_EQ(a->elements[5].string, "s");
  EXPECT_EQ(value.find("b")->kind, JsonValue::Kind::Object);
  EXPECT_EQ(value.find("missing"), nullptr);
}

TEST(Json, IntegersAreExactUpTo64Bits) {
  JsonValue value;
  std::string error;
  ASSERT_TRUE(parseJson("18446744073709551615", value, error));
  EXPECT_TRUE(value.isUnsigned);
  EXPECT_EQ(value.unsignedValue, 18446744073709551615ull);
  ASSERT_TRUE(parseJson("18446744073709551616", value, error));
  EXPECT_FALSE(value.isUnsigned);
  ASSERT_TRUE(parseJson("1.0", value, error));
  EXPECT_FALSE(value.isUnsigned);
  ASSERT_TRUE(parseJson("1e2", value, error));
  EXPECT_FALSE(value.isUnsigned);
  ASSERT_TRUE(parseJson("-0", value, error));
  EXPECT_FALSE(value.isUnsigned);
  ASSERT_TRUE(parseJson("0", value, error));
  EXPECT_TRUE(value.isUnsigned);
}

TEST(Json, DecodesEscapes) {
  JsonValue value;
  std::string error;
  ASSERT_TRUE(
      parseJson(R"("q\"b\\s\/n\nt\tu\u00e9\ud83d\ude00")", value, error))
      << error;
  EXPECT_EQ(value.string, "q\"b\\s/n\nt\tu\xc3\xa9\xf0\x9f\x98\x80");
  EXPECT_EQ(jsonQuote("a\"b\\c\n\x01"), R"("a\"b\\c\n\u0001")");
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
  EXPECT_EQ(errorOf("[1,]"), "bad JSON at byte 3: unexpected character");
}

TEST(Json, BoundsNesting) {
  // Deep enough to overflow the stack if the depth were not bounded.
  std::string deep(1000000, '[');
  EXPECT_EQ(errorOf(deep), "bad JSON at byte 64: nested deeper than 64");
  std::string ok = std::string(64, '[') + std::string(64, ']');
  JsonValue value;
  std::string error;
  EXPECT_TRUE(parseJson(ok, value, error)) << error;
  EXPECT_FALSE(parseJson("[" + ok + "]", value, error));
}
