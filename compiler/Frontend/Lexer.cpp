//===- Lexer.cpp - Splits a Loom script into tokens ----------------------===//

#include "Frontend/Lexer.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/ADT/StringSwitch.h"

#include <cctype>

using namespace loom;

llvm::StringRef loom::describe(TokenKind kind) {
  switch (kind) {
  case TokenKind::eof: return "end of file";
  case TokenKind::error: return "invalid character";
  case TokenKind::newline: return "end of line";
  case TokenKind::identifier: return "identifier";
  case TokenKind::integer: return "integer";
  case TokenKind::number: return "number";
  case TokenKind::l_paren: return "'('";
  case TokenKind::r_paren: return "')'";
  case TokenKind::l_square: return "'['";
  case TokenKind::r_square: return "']'";
  case TokenKind::l_brace: return "'{'";
  case TokenKind::r_brace: return "'}'";
  case TokenKind::comma: return "','";
  case TokenKind::colon: return "':'";
  case TokenKind::equal: return "'='";
  case TokenKind::plus: return "'+'";
  case TokenKind::minus: return "'-'";
  case TokenKind::star: return "'*'";
  case TokenKind::slash: return "'/'";
  case TokenKind::at: return "'@'";
  case TokenKind::dotdot: return "'..'";
  case TokenKind::kw_mesh: return "'mesh'";
  case TokenKind::kw_precision: return "'precision'";
  case TokenKind::kw_accumulate: return "'accumulate'";
  case TokenKind::kw_dim: return "'dim'";
  case TokenKind::kw_model: return "'model'";
  case TokenKind::kw_layer: return "'layer'";
  case TokenKind::kw_moe: return "'moe'";
  case TokenKind::kw_input: return "'input'";
  case TokenKind::kw_param: return "'param'";
  case TokenKind::kw_let: return "'let'";
  case TokenKind::kw_output: return "'output'";
  case TokenKind::kw_return: return "'return'";
  case TokenKind::kw_for: return "'for'";
  case TokenKind::kw_in: return "'in'";
  case TokenKind::kw_stage: return "'stage'";
  case TokenKind::kw_pipeline: return "'pipeline'";
  case TokenKind::kw_shard: return "'shard'";
  case TokenKind::kw_init: return "'init'";
  case TokenKind::kw_train: return "'train'";
  }
  return "token";
}

void Lexer::skipComment() {
  while (cur != buffer.end() && *cur != '\n')
    ++cur;
}

Token Lexer::next() {
  while (true) {
    const char *start = cur;
    if (cur == buffer.end())
      return make(TokenKind::eof, start);
    char c = *cur++;
    switch (c) {
    case ' ': case '\t':
      continue;
    case '\r':
      // Part of a \r\n line ending. Elsewhere llvm::SourceMgr would start a
      // line at it: every later column of the line, and the source line a
      // diagnostic prints, would be wrong.
      if (cur == buffer.end() || *cur == '\n')
        continue;
      emitError(llvm::SMLoc::getFromPointer(start),
                "a carriage return outside a line ending (lines end in \\n "
                "or \\r\\n)");
      return make(TokenKind::error, start);
    case '\n':
      if (nesting > 0)
        continue;
      return make(TokenKind::newline, start);
    case '#':
      skipComment();
      continue;
    case '/':
      if (cur != buffer.end() && *cur == '/') {
        skipComment();
        continue;
      }
      return make(TokenKind::slash, start);
    case '(': ++nesting; return make(TokenKind::l_paren, start);
    case ')': nesting = std::max(0, nesting - 1); return make(TokenKind::r_paren, start);
    case '[': ++nesting; return make(TokenKind::l_square, start);
    case ']': nesting = std::max(0, nesting - 1); return make(TokenKind::r_square, start);
    // A brace always starts or ends a block, so an unclosed '(' before it
    // must not swallow the newlines of the statements that follow.
    case '{': nesting = 0; return make(TokenKind::l_brace, start);
    case '}': nesting = 0; return make(TokenKind::r_brace, start);
    case ',': return make(TokenKind::comma, start);
    case ':': return make(TokenKind::colon, start);
    case '=': return make(TokenKind::equal, start);
    case '+': return make(TokenKind::plus, start);
    case '-': return make(TokenKind::minus, start);
    case '*': return make(TokenKind::star, start);
    case '@': return make(TokenKind::at, start);
    case '.':
      if (cur != buffer.end() && *cur == '.') {
        ++cur;
        return make(TokenKind::dotdot, start);
      }
      if (cur != buffer.end() && isdigit((unsigned char)*cur))
        return lexNumber(start);
      emitError(llvm::SMLoc::getFromPointer(start), "unexpected '.'");
      return make(TokenKind::error, start);
    default:
      if (isalpha((unsigned char)c) || c == '_')
        return lexIdentifier(start);
      if (isdigit((unsigned char)c))
        return lexNumber(start);
      if ((unsigned char)c >= 0x80)
        return lexNonAscii(start);
      emitError(llvm::SMLoc::getFromPointer(start),
                isprint((unsigned char)c)
                    ? "unexpected character '" + llvm::Twine(c) + "'"
                    : llvm::Twine("unexpected byte in the source"));
      return make(TokenKind::error, start);
    }
  }
}

/// A UTF-8 character outside comments is one error, not one per byte:
/// `unexpected character 'é' (U+00E9)`; bytes that are not UTF-8 say so.
Token Lexer::lexNonAscii(const char *start) {
  unsigned char lead = *start;
  unsigned length = lead >= 0xF0 && lead < 0xF8   ? 4
                    : lead >= 0xE0 && lead < 0xF0 ? 3
                    : lead >= 0xC2 && lead < 0xE0 ? 2
                                                  : 0;
  uint32_t point = length == 4 ? lead & 0x07 : length == 3 ? lead & 0x0F : lead & 0x1F;
  for (unsigned i = 1; i < length; ++i) {
    if (start + i >= buffer.end() || ((unsigned char)start[i] & 0xC0) != 0x80) {
      length = 0;
      break;
    }
    point = point << 6 | ((unsigned char)start[i] & 0x3F);
  }
  // Overlong forms and UTF-16 surrogates are not UTF-8 text either.
  static constexpr uint32_t kSmallest[] = {0, 0, 0x80, 0x800, 0x10000};
  if (length == 0 || point > 0x10FFFF || point < kSmallest[length] ||
      (point >= 0xD800 && point <= 0xDFFF)) {
    emitError(llvm::SMLoc::getFromPointer(start),
              "unexpected byte 0x" + llvm::utohexstr(lead, /*LowerCase=*/false, 2) +
                  " in the source (not UTF-8 text)");
    return make(TokenKind::error, start);
  }
  cur = start + length;
  emitError(llvm::SMLoc::getFromPointer(start),
            "unexpected character '" + llvm::StringRef(start, length) + "' (U+" +
                llvm::utohexstr(point, /*LowerCase=*/false, 4) + ")");
  return make(TokenKind::error, start);
}

Token Lexer::lexIdentifier(const char *start) {
  while (cur != buffer.end() && (isalnum((unsigned char)*cur) || *cur == '_'))
    ++cur;
  llvm::StringRef text(start, cur - start);
  TokenKind kind = llvm::StringSwitch<TokenKind>(text)
                       .Case("mesh", TokenKind::kw_mesh)
                       .Case("precision", TokenKind::kw_precision)
                       .Case("accumulate", TokenKind::kw_accumulate)
                       .Case("dim", TokenKind::kw_dim)
                       .Case("model", TokenKind::kw_model)
                       .Case("layer", TokenKind::kw_layer)
                       .Case("moe", TokenKind::kw_moe)
                       .Case("input", TokenKind::kw_input)
                       .Case("param", TokenKind::kw_param)
                       .Case("let", TokenKind::kw_let)
                       .Case("output", TokenKind::kw_output)
                       .Case("return", TokenKind::kw_return)
                       .Case("for", TokenKind::kw_for)
                       .Case("in", TokenKind::kw_in)
                       .Case("stage", TokenKind::kw_stage)
                       .Case("pipeline", TokenKind::kw_pipeline)
                       .Case("shard", TokenKind::kw_shard)
                       .Case("init", TokenKind::kw_init)
                       .Case("train", TokenKind::kw_train)
                       .Default(TokenKind::identifier);
  return make(kind, start);
}

Token Lexer::lexNumber(const char *start) {
  auto digits = [&] {
    while (cur != buffer.end() && isdigit((unsigned char)*cur))
      ++cur;
  };
  digits();
  bool isFloat = *start == '.';
  // "0..4" is a range, not the number "0."; ".5" has its point already
  // (".5.5" had read as 0.5, the rest dropped by strtod).
  if (!isFloat && cur != buffer.end() && *cur == '.' &&
      !(cur + 1 != buffer.end() && cur[1] == '.')) {
    ++cur;
    digits();
    isFloat = true;
  }
  if (cur != buffer.end() && (*cur == 'e' || *cur == 'E')) {
    const char *exp = cur + 1;
    if (exp != buffer.end() && (*exp == '+' || *exp == '-'))
      ++exp;
    if (exp != buffer.end() && isdigit((unsigned char)*exp)) {
      cur = exp;
      digits();
      isFloat = true;
    }
  }
  // Names such as the schedule "1f1b" start with a digit.
  if (!isFloat && cur != buffer.end() &&
      (isalpha((unsigned char)*cur) || *cur == '_'))
    return lexIdentifier(start);
  return make(isFloat ? TokenKind::number : TokenKind::integer, start);
}
