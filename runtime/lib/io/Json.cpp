//===- Json.cpp - Strict JSON reading for untrusted file headers ----------===//

#include "loom/runtime/io/Json.h"

#include <cstddef>
#include <iterator>
#include <unordered_set>
#include <vector>

using namespace loom::runtime;

namespace {
/// A pointer into the text that records how far the parser has read: SAX
/// callbacks carry no position, and errors should name a byte.
class CountingIterator {
public:
  using iterator_category = std::forward_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char *;
  using reference = const char &;

  CountingIterator(const char *at, const char *begin, size_t *consumed)
      : at(at), begin(begin), consumed(consumed) {}
  reference operator*() const { return *at; }
  CountingIterator &operator++() {
    *consumed = static_cast<size_t>(++at - begin);
    return *this;
  }
  CountingIterator operator++(int) {
    CountingIterator old = *this;
    ++*this;
    return old;
  }
  bool operator==(const CountingIterator &other) const { return at == other.at; }
  bool operator!=(const CountingIterator &other) const { return at != other.at; }

private:
  const char *at;
  const char *begin;
  size_t *consumed;
};

/// Builds the value as nlohmann's own DOM parser does, and refuses duplicate
/// keys and deep nesting. Pointers into open containers stay valid: a
/// container gets its next element only after the open one is closed.
class StrictBuilder {
public:
  StrictBuilder(Json &root, size_t size, unsigned maxDepth,
                const size_t &consumed, std::string &error)
      : root(root), size(size), maxDepth(maxDepth), consumed(consumed),
        error(error) {}

  bool null() { return add(nullptr); }
  bool boolean(bool value) { return add(value); }
  bool number_integer(Json::number_integer_t value) { return add(value); }
  bool number_unsigned(Json::number_unsigned_t value) { return add(value); }
  bool number_float(Json::number_float_t value, const std::string &) {
    return add(value);
  }
  bool string(std::string &value) { return add(std::move(value)); }
  bool binary(Json::binary_t &value) { return add(std::move(value)); }

  bool start_object(size_t) { return open(Json::object()); }
  bool start_array(size_t) { return open(Json::array()); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(std::string &name) {
    if (!keys.back().insert(name).second)
      return fail(consumed, "duplicate key " + dumpJson(name));
    slot = &(*open_.back())[name];
    return true;
  }

  bool parse_error(size_t byte, const std::string &,
                   const nlohmann::detail::exception &exception) {
    // nlohmann counts the end of input as a byte read; report the offset
    // of the byte that stopped the parse.
    size_t offset = byte ? byte - 1 : 0;
    if (offset >= size)
      return fail(size, "unexpected end of input");
    std::string what = exception.what();
    size_t detail = what.find(": syntax error");
    return fail(offset, "unexpected character (" +
                            (detail == std::string::npos
                                 ? what
                                 : what.substr(detail + 2)) +
                            ")");
  }

private:
  bool add(Json value) {
    place(std::move(value));
    return true;
  }
  Json *place(Json value) {
    if (open_.empty()) {
      root = std::move(value);
      return &root;
    }
    Json &container = *open_.back();
    if (container.is_array()) {
      container.push_back(std::move(value));
      return &container.back();
    }
    *slot = std::move(value);
    return slot;
  }
  bool open(Json container) {
    if (open_.size() >= maxDepth)
      return fail(consumed ? consumed - 1 : 0,
                  "nested deeper than " + std::to_string(maxDepth));
    bool object = container.is_object();
    open_.push_back(place(std::move(container)));
    if (object)
      keys.emplace_back();
    return true;
  }
  bool close() {
    if (open_.back()->is_object())
      keys.pop_back();
    open_.pop_back();
    return true;
  }
  bool fail(size_t byte, const std::string &message) {
    error = "bad JSON at byte " + std::to_string(byte) + ": " + message;
    return false;
  }

  Json &root;
  size_t size;
  unsigned maxDepth;
  const size_t &consumed;
  std::string &error;
  std::vector<Json *> open_;
  std::vector<std::unordered_set<std::string>> keys;
  Json *slot = nullptr;
};
} // namespace

bool loom::runtime::parseJson(std::string_view text, Json &value,
                              std::string &error, unsigned maxDepth) {
  size_t consumed = 0;
  value = Json();
  error.clear();
  // JSON has no raw NUL (a string escapes it); nlohmann's lexer takes one
  // for the end of the input, so "{...}" and NUL padding had passed.
  if (size_t nul = text.find('\0'); nul != std::string_view::npos) {
    error = "bad JSON at byte " + std::to_string(nul) + ": a NUL byte";
    return false;
  }
  StrictBuilder builder(value, text.size(), maxDepth, consumed, error);
  const char *begin = text.data();
  bool ok = Json::sax_parse(CountingIterator(begin, begin, &consumed),
                            CountingIterator(begin + text.size(), begin,
                                             &consumed),
                            &builder);
  if (!ok && error.empty())
    error = "bad JSON at byte " + std::to_string(consumed) + ": not read";
  return ok;
}

std::string loom::runtime::dumpJson(const Json &value) {
  return value.dump(-1, ' ', false, Json::error_handler_t::replace);
}
