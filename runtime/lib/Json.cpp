//===- Json.cpp - A small, strict JSON reader for file headers ------------===//

#include "loom/runtime/Json.h"

#include <cstdio>
#include <cstdlib>
#include <unordered_set>

using namespace loom::runtime;

const JsonValue *JsonValue::find(std::string_view key) const {
  for (size_t i = 0; i < keys.size(); ++i)
    if (keys[i] == key)
      return &elements[i];
  return nullptr;
}

namespace {
class JsonParser {
public:
  JsonParser(std::string_view text, std::string &error, unsigned maxDepth)
      : text(text), error(error), maxDepth(maxDepth) {}

  bool parseDocument(JsonValue &value) {
    skipSpace();
    if (!parseValue(value, 0))
      return false;
    skipSpace();
    if (pos != text.size())
      return fail("unexpected content after the value");
    return true;
  }

private:
  bool fail(const std::string &message) {
    error = "bad JSON at byte " + std::to_string(pos) + ": " + message;
    return false;
  }
  bool atEnd() const { return pos >= text.size(); }
  char peek() const { return atEnd() ? '\0' : text[pos]; }
  void skipSpace() {
    while (!atEnd() && (text[pos] == ' ' || text[pos] == '\t' ||
                        text[pos] == '\n' || text[pos] == '\r'))
      ++pos;
  }
  bool expectWord(std::string_view word) {
    if (text.substr(pos, word.size()) != word)
      return fail("unexpected character");
    pos += word.size();
    return true;
  }

  bool parseValue(JsonValue &value, unsigned depth);
  bool parseArray(JsonValue &value, unsigned depth);
  bool parseObject(JsonValue &value, unsigned depth);
  bool parseString(std::string &out);
  bool parseHex4(uint32_t &code);
  bool parseNumber(JsonValue &value);

  std::string_view text;
  std::string &error;
  unsigned maxDepth;
  size_t pos = 0;
};
} // namespace

bool JsonParser::parseValue(JsonValue &value, unsigned depth) {
  value = JsonValue();
  if (atEnd())
    return fail("unexpected end of input");
  switch (text[pos]) {
  case '{':
  case '[':
    // Each nesting level costs stack; hostile headers may nest deeply.
    if (depth >= maxDepth)
      return fail("nested deeper than " + std::to_string(maxDepth));
    return text[pos] == '{' ? parseObject(value, depth + 1)
                            : parseArray(value, depth + 1);
  case '"':
    value.kind = JsonValue::Kind::String;
    return parseString(value.string);
  case 't':
    value.kind = JsonValue::Kind::Bool;
    value.boolean = true;
    return expectWord("true");
  case 'f':
    value.kind = JsonValue::Kind::Bool;
    return expectWord("false");
  case 'n':
    return expectWord("null");
  default:
    return parseNumber(value);
  }
}

bool JsonParser::parseArray(JsonValue &value, unsigned depth) {
  value.kind = JsonValue::Kind::Array;
  ++pos; // '['
  skipSpace();
  if (peek() == ']') {
    ++pos;
    return true;
  }
  while (true) {
    skipSpace();
    value.elements.emplace_back();
    if (!parseValue(value.elements.back(), depth))
      return false;
    skipSpace();
    if (peek() == ',') {
      ++pos;
      continue;
    }
    if (peek() == ']') {
      ++pos;
      return true;
    }
    return fail(atEnd() ? "unexpected end of input" : "expected ',' or ']'");
  }
}

bool JsonParser::parseObject(JsonValue &value, unsigned depth) {
  value.kind = JsonValue::Kind::Object;
  std::unordered_set<std::string> seen; // find() is linear; headers are big
  ++pos;                                // '{'
  skipSpace();
  if (peek() == '}') {
    ++pos;
    return true;
  }
  while (true) {
    skipSpace();
    if (peek() != '"')
      return fail(atEnd() ? "unexpected end of input"
                          : "expected a string key");
    std::string key;
    if (!parseString(key))
      return false;
    // Readers disagree on which duplicate wins, so accept none.
    if (!seen.insert(key).second)
      return fail("duplicate key " + jsonQuote(key));
    skipSpace();
    if (peek() != ':')
      return fail("expected ':'");
    ++pos;
    skipSpace();
    value.keys.push_back(std::move(key));
    value.elements.emplace_back();
    if (!parseValue(value.elements.back(), depth))
      return false;
    skipSpace();
    if (peek() == ',') {
      ++pos;
      continue;
    }
    if (peek() == '}') {
      ++pos;
      return true;
    }
    return fail(atEnd() ? "unexpected end of input" : "expected ',' or '}'");
  }
}

bool JsonParser::parseHex4(uint32_t &code) {
  if (text.size() - pos < 4)
    return fail("truncated \\u escape");
  code = 0;
  for (int i = 0; i < 4; ++i) {
    char c = text[pos++];
    uint32_t digit;
    if (c >= '0' && c <= '9')
      digit = static_cast<uint32_t>(c - '0');
    else if (c >= 'a' && c <= 'f')
      digit = static_cast<uint32_t>(c - 'a' + 10);
    else if (c >= 'A' && c <= 'F')
      digit = static_cast<uint32_t>(c - 'A' + 10);
    else
      return fail("bad \\u escape");
    code = code * 16 + digit;
  }
  return true;
}

static void appendUtf8(std::string &out, uint32_t code) {
  if (code < 0x80) {
    out += static_cast<char>(code);
  } else if (code < 0x800) {
    out += static_cast<char>(0xc0 | (code >> 6));
    out += static_cast<char>(0x80 | (code & 0x3f));
  } else if (code < 0x10000) {
    out += static_cast<char>(0xe0 | (code >> 12));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (code & 0x3f));
  } else {
    out += static_cast<char>(0xf0 | (code >> 18));
    out += static_cast<char>(0x80 | ((code >> 12) & 0x3f));
    out += static_cast<char>(0x80 | ((code >> 6) & 0x3f));
    out += static_cast<char>(0x80 | (code & 0x3f));
  }
}

bool JsonParser::parseString(std::string &out) {
  ++pos; // '"'
  out.clear();
  while (true) {
    if (atEnd())
      return fail("unterminated string");
    char c = text[pos++];
    if (c == '"')
      return true;
    if (static_cast<unsigned char>(c) < 0x20)
      return fail("control character in string");
    if (c != '\\') {
      out += c;
      continue;
    }
    if (atEnd())
      return fail("unterminated string");
    char escape = text[pos++];
    switch (escape) {
    case '"':
    case '\\':
    case '/':
      out += escape;
      break;
    case 'b':
      out += '\b';
      break;
    case 'f':
      out += '\f';
      break;
    case 'n':
      out += '\n';
      break;
    case 'r':
      out += '\r';
      break;
    case 't':
      out += '\t';
      break;
    case 'u': {
      uint32_t code;
      if (!parseHex4(code))
        return false;
      if (code >= 0xdc00 && code <= 0xdfff)
        return fail("unpaired low surrogate");
      if (code >= 0xd800 && code <= 0xdbff) {
        uint32_t low;
        if (text.substr(pos, 2) != "\\u")
          return fail("unpaired high surrogate");
        pos += 2;
        if (!parseHex4(low))
          return false;
        if (low < 0xdc00 || low > 0xdfff)
          return fail("unpaired high surrogate");
        code = 0x10000 + ((code - 0xd800) << 10) + (low - 0xdc00);
      }
      appendUtf8(out, code);
      break;
    }
    default:
      return fail("bad escape");
    }
  }
}

bool JsonParser::parseNumber(JsonValue &value) {
  // The JSON grammar: -?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?
  size_t start = pos;
  auto isDigit = [&] {
    return !atEnd() && text[pos] >= '0' && text[pos] <= '9';
  };
  bool negative = peek() == '-';
  if (negative)
    ++pos;
  if (!isDigit())
    return fail("unexpected character");
  if (text[pos] == '0') {
    ++pos;
  } else {
    while (isDigit())
      ++pos;
  }
  bool integral = true;
  if (peek() == '.') {
    integral = false;
    ++pos;
    if (!isDigit())
      return fail("expected a digit after '.'");
    while (isDigit())
      ++pos;
  }
  if (peek() == 'e' || peek() == 'E') {
    integral = false;
    ++pos;
    if (peek() == '+' || peek() == '-')
      ++pos;
    if (!isDigit())
      return fail("expected a digit in the exponent");
    while (isDigit())
      ++pos;
  }
  std::string literal(text.substr(start, pos - start));
  value.kind = JsonValue::Kind::Number;
  value.number = std::strtod(literal.c_str(), nullptr);
  if (integral && !negative) {
    uint64_t result = 0;
    bool fits = true;
    for (char c : literal) {
      uint64_t digit = static_cast<uint64_t>(c - '0');
      if (result > (UINT64_MAX - digit) / 10) {
        fits = false;
        break;
      }
      result = result * 10 + digit;
    }
    value.isUnsigned = fits;
    value.unsignedValue = fits ? result : 0;
  }
  return true;
}

bool loom::runtime::parseJson(std::string_view text, JsonValue &value,
                              std::string &error, unsigned maxDepth) {
  return JsonParser(text, error, maxDepth).parseDocument(value);
}

std::string loom::runtime::jsonQuote(std::string_view text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
    case '"':
      out += "\\\"";
      break;
    case '\\':
      out += "\\\\";
      break;
    case '\n':
      out += "\\n";
      break;
    case '\r':
      out += "\\r";
      break;
    case '\t':
      out += "\\t";
      break;
    default:
      if (static_cast<unsigned char>(c) < 0x20) {
        char escaped[8];
        std::snprintf(escaped, sizeof(escaped), "\\u%04x",
                      static_cast<unsigned>(static_cast<unsigned char>(c)));
        out += escaped;
      } else {
        out += c;
      }
    }
  }
  return out + "\"";
}
