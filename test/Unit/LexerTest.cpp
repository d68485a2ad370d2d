//===- LexerTest.cpp - Tokenization of Loom scripts ----------------------===//

#include "Frontend/Lexer.h"

#include <gtest/gtest.h>
#include <algorithm>

#include <string>
#include <vector>

using namespace loom;

namespace {
struct Lexed {
  std::vector<TokenKind> kinds;
  std::vector<std::string> spellings;
  std::vector<std::string> errors;
};

int countNewlines(const Lexed &lexed) {
  int newlines = 0;
  for (TokenKind kind : lexed.kinds)
    newlines += kind == TokenKind::newline;
  return newlines;
}

Lexed lex(llvm::StringRef text) {
  Lexed out;
  auto onError = [&](llvm::SMLoc, const llvm::Twine &message) {
    out.errors.push_back(message.str());
  };
  Lexer lexer(text, onError);
  for (Token tok = lexer.next(); !tok.is(TokenKind::eof); tok = lexer.next()) {
    out.kinds.push_back(tok.kind);
    out.spellings.push_back(tok.spelling.str());
  }
  return out;
}
} // namespace

TEST(Lexer, NumbersRangesAndNames) {
  Lexed out = lex("0..4 1e-5 0.02 .5 1f1b 512");
  std::vector<TokenKind> expected = {
      TokenKind::integer, TokenKind::dotdot, TokenKind::integer,
      TokenKind::number,  TokenKind::number, TokenKind::number,
      TokenKind::identifier, TokenKind::integer};
  EXPECT_EQ(out.kinds, expected);
  EXPECT_EQ(out.spellings[3], "1e-5");
  EXPECT_EQ(out.spellings[6], "1f1b");
  EXPECT_TRUE(out.errors.empty());
}

TEST(Lexer, NewlinesEndStatementsOutsideBrackets) {
  EXPECT_EQ(countNewlines(lex("a = f(x,\n y)\nb")), 1);
}

TEST(Lexer, BraceResetsUnclosedParenthesis) {
  // An unclosed '(' must not hide the statement ends of the next block.
  EXPECT_EQ(countNewlines(lex("f(\n{\na\nb")), 2);
}

TEST(Lexer, CommentsAndKeywords) {
  Lexed out = lex("model m { // comment\n# another\nparam }");
  std::vector<TokenKind> expected = {
      TokenKind::kw_model, TokenKind::identifier, TokenKind::l_brace,
      TokenKind::newline,  TokenKind::newline,    TokenKind::kw_param,
      TokenKind::r_brace};
  EXPECT_EQ(out.kinds, expected);
}

TEST(Lexer, InvalidCharactersAreReported) {
  Lexed out = lex("a $ b \x01");
  ASSERT_EQ(out.errors.size(), 2u);
  EXPECT_EQ(out.errors[0], "unexpected character '$'");
  EXPECT_EQ(out.errors[1], "unexpected byte in the source");
}

TEST(Lexer, SkipsALeadingByteOrderMark) {
  // Some Windows editors begin UTF-8 files with EF BB BF (U+FEFF): skipped
  // at the start, an error anywhere else.
  Lexed start = lex("\xEF\xBB\xBFmodel m");
  EXPECT_TRUE(start.errors.empty());
  ASSERT_EQ(start.spellings.size(), 2u);
  EXPECT_EQ(start.spellings[0], "model");
  Lexed inside = lex("model \xEF\xBB\xBFm");
  ASSERT_EQ(inside.errors.size(), 1u);
  EXPECT_EQ(inside.errors[0], "unexpected character '\xEF\xBB\xBF' (U+FEFF)");
}

TEST(Lexer, NonAsciiCharactersAreOneErrorEach) {
  // A UTF-8 character is one error with its code point (not one per byte);
  // bytes that are no UTF-8 say so, one by one.
  Lexed out = lex("a \xC3\x97 b \xE2\x9C\x93 \xFF \xC3");
  ASSERT_EQ(out.errors.size(), 4u);
  EXPECT_EQ(out.errors[0], "unexpected character '\xC3\x97' (U+00D7)");
  EXPECT_EQ(out.errors[1], "unexpected character '\xE2\x9C\x93' (U+2713)");
  EXPECT_EQ(out.errors[2], "unexpected byte 0xFF in the source (not UTF-8 text)");
  EXPECT_EQ(out.errors[3], "unexpected byte 0xC3 in the source (not UTF-8 text)");
  // Overlong forms and surrogates are no UTF-8 either (E0 80 80 read as
  // U+0000, ED A0 80 as U+D800).
  Lexed bad = lex("a \xE0\x80\x80 b \xED\xA0\x80");
  ASSERT_FALSE(bad.errors.empty());
  EXPECT_EQ(bad.errors[0], "unexpected byte 0xE0 in the source (not UTF-8 text)");
  EXPECT_NE(std::find(bad.errors.begin(), bad.errors.end(),
                      "unexpected byte 0xED in the source (not UTF-8 text)"),
            bad.errors.end());
  std::vector<TokenKind> identifiers;
  for (TokenKind kind : out.kinds)
    if (kind == TokenKind::identifier)
      identifiers.push_back(kind);
  EXPECT_EQ(identifiers.size(), 2u);
}
