//===- Npy.cpp - Reading and writing NumPy .npy files ---------------------===//
//
// The header is a Python dict literal such as
//   {'descr': '<f4', 'fortran_order': False, 'shape': (3, 4), }
// padded with spaces and a final '\n'; it is parsed by hand, strictly
// enough to reject anything NumPy would not write.
//
//===----------------------------------------------------------------------===//

#include "loom/runtime/io/Npy.h"

#include "io/File.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

using namespace loom::runtime;

static constexpr char kMagic[] = "\x93NUMPY";
static constexpr size_t kMagicSize = 6;
/// Real headers are a few hundred bytes; the bound stops a hostile length
/// field from making us allocate gigabytes.
static constexpr uint64_t kMaxHeaderSize = 1u << 20;
/// NumPy's own limit on the number of dimensions.
static constexpr size_t kMaxRank = 64;

namespace {
/// Parses the dict literal of a header.
class DictParser {
public:
  DictParser(std::string_view text, std::string &error)
      : text(text), error(error) {}

  bool parse(NpyHeader &header);

private:
  bool fail(const std::string &message) {
    error = "bad .npy header: " + message;
    return false;
  }
  void skipSpace() {
    while (pos < text.size() && (text[pos] == ' ' || text[pos] == '\t' ||
                                 text[pos] == '\n' || text[pos] == '\r'))
      ++pos;
  }
  bool consume(char c) {
    skipSpace();
    if (pos < text.size() && text[pos] == c) {
      ++pos;
      return true;
    }
    return false;
  }
  bool parseString(std::string &out);
  bool parseBool(bool &out);
  bool parseShape(Shape &shape);

  std::string_view text;
  std::string &error;
  size_t pos = 0;
};
} // namespace

bool DictParser::parseString(std::string &out) {
  skipSpace();
  if (pos >= text.size() || (text[pos] != '\'' && text[pos] != '"'))
    return fail("expected a string");
  char quote = text[pos++];
  size_t close = text.find(quote, pos);
  if (close == std::string_view::npos)
    return fail("unterminated string");
  out = std::string(text.substr(pos, close - pos));
  pos = close + 1;
  return true;
}

bool DictParser::parseBool(bool &out) {
  skipSpace();
  if (text.substr(pos, 4) == "True") {
    out = true;
    pos += 4;
    return true;
  }
  if (text.substr(pos, 5) == "False") {
    out = false;
    pos += 5;
    return true;
  }
  return fail("expected True or False");
}

bool DictParser::parseShape(Shape &shape) {
  shape.clear();
  if (!consume('('))
    return fail("expected a shape tuple");
  while (!consume(')')) {
    skipSpace();
    size_t start = pos;
    uint64_t dim = 0;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') {
      if (dim > (static_cast<uint64_t>(INT64_MAX) - 9) / 10)
        return fail("dimension too large");
      dim = dim * 10 + static_cast<uint64_t>(text[pos++] - '0');
    }
    if (pos == start)
      return fail("expected a dimension");
    if (pos < text.size() && text[pos] == 'L') // Python 2 longs
      ++pos;
    if (shape.size() == kMaxRank)
      return fail("more than 64 dimensions");
    shape.push_back(static_cast<int64_t>(dim));
    if (consume(','))
      continue;
    if (!consume(')'))
      return fail("expected ',' or ')' in the shape");
    return true;
  }
  return true;
}

bool DictParser::parse(NpyHeader &header) {
  if (!consume('{'))
    return fail("expected '{'");
  bool haveDescr = false, haveOrder = false, haveShape = false;
  while (!consume('}')) {
    std::string key;
    if (!parseString(key))
      return false;
    if (!consume(':'))
      return fail("expected ':'");
    if (key == "descr" && !haveDescr) {
      haveDescr = parseString(header.descr);
      if (!haveDescr)
        return false;
    } else if (key == "fortran_order" && !haveOrder) {
      haveOrder = parseBool(header.fortranOrder);
      if (!haveOrder)
        return false;
    } else if (key == "shape" && !haveShape) {
      haveShape = parseShape(header.shape);
      if (!haveShape)
        return false;
    } else {
      return fail("unexpected key '" + key + "'");
    }
    if (consume(','))
      continue;
    if (!consume('}'))
      return fail("expected ',' or '}'");
    break;
  }
  skipSpace();
  if (pos != text.size())
    return fail("unexpected content after the dict");
  if (!haveDescr || !haveOrder || !haveShape)
    return fail("missing 'descr', 'fortran_order' or 'shape'");
  return true;
}

/// Reads the magic, version and header length: the header dict lies at
/// [headerStart, headerStart + headerSize).
static bool parsePreamble(std::string_view bytes, NpyHeader &header,
                          uint64_t &headerStart, uint64_t &headerSize,
                          std::string &error) {
  if (bytes.size() < kMagicSize + 2 ||
      bytes.substr(0, kMagicSize) != std::string_view(kMagic, kMagicSize)) {
    error = "not a .npy file (bad magic)";
    return false;
  }
  header.majorVersion = static_cast<unsigned char>(bytes[kMagicSize]);
  if (header.majorVersion != 1 && header.majorVersion != 2) {
    error = ".npy format version " + std::to_string(header.majorVersion) + "." +
            std::to_string(static_cast<unsigned char>(bytes[kMagicSize + 1])) +
            " is not supported (expected 1.0 or 2.0)";
    return false;
  }
  size_t lengthBytes = header.majorVersion == 1 ? 2 : 4;
  headerStart = kMagicSize + 2 + lengthBytes;
  if (bytes.size() < headerStart) {
    error = "truncated .npy header";
    return false;
  }
  headerSize = 0;
  for (size_t i = 0; i < lengthBytes; ++i)
    headerSize |= static_cast<uint64_t>(
                      static_cast<unsigned char>(bytes[kMagicSize + 2 + i]))
                  << (8 * i);
  if (headerSize > kMaxHeaderSize) {
    error =
        ".npy header of " + std::to_string(headerSize) + " bytes is too large";
    return false;
  }
  return true;
}

bool loom::runtime::parseNpyHeader(std::string_view bytes, NpyHeader &header,
                                   std::string &error) {
  header = NpyHeader();
  uint64_t headerStart, headerSize;
  if (!parsePreamble(bytes, header, headerStart, headerSize, error))
    return false;
  if (bytes.size() - headerStart < headerSize) {
    error = "truncated .npy header";
    return false;
  }
  if (!DictParser(bytes.substr(headerStart, headerSize), error).parse(header))
    return false;
  header.dataOffset = headerStart + headerSize;
  return true;
}

const char *loom::runtime::npyDescrFor(DType dtype) {
  switch (dtype) {
  case DType::F32:
  case DType::BF16:
    return "<f4";
  case DType::F16:
    return "<f2";
  case DType::I32:
    return "<i4";
  case DType::I64:
    return "<i8";
  }
  return "?";
}

/// `text` from a file, fit to quote in a message: control bytes (a NUL
/// cut the message there) as \xNN.
static std::string quotable(std::string_view text) {
  std::string shown;
  for (unsigned char c : text) {
    if (c >= 0x20 && c != 0x7F) {
      shown.push_back(static_cast<char>(c));
      continue;
    }
    char escaped[5];
    std::snprintf(escaped, sizeof(escaped), "\\x%02X", c);
    shown += escaped;
  }
  return shown;
}

/// The element size of an accepted file descr for a `dtype` tensor, or 0.
static size_t acceptedFileElementSize(DType dtype, std::string_view descr) {
  if (descr == "<f4" && isFloatDType(dtype))
    return 4;
  if (descr == "<f2" && dtype == DType::F16)
    return 2;
  if (descr == "<i4" && dtype == DType::I32)
    return 4;
  if (descr == "<i8" && dtype == DType::I64)
    return 8;
  return 0;
}

static std::string acceptedDescrs(DType dtype) {
  if (dtype == DType::F16)
    return "'<f2' or '<f4'";
  return std::string("'") + npyDescrFor(dtype) + "'";
}

namespace {
/// An opened .npy file whose header has been checked against a tensor.
struct CheckedNpy {
  FilePtr file;
  NpyHeader header;
  size_t fileElementSize = 0;
  uint64_t count = 0;
};
} // namespace

static bool openChecked(const std::string &path, std::string_view what,
                        DType dtype, const Shape &shape, CheckedNpy &npy,
                        std::string &error) {
  std::string prefix = std::string(what) + ": ";
  uint64_t fileSize;
  if (!openForReading(path, npy.file, fileSize, error)) {
    error = prefix + error;
    return false;
  }
  // Read the fixed preamble, then exactly the header it announces.
  std::string bytes(fileSize < 12 ? fileSize : 12, '\0');
  uint64_t headerStart = 0, headerSize = 0;
  std::string detail;
  bool ok = readAt(npy.file.get(), 0, bytes.data(), bytes.size()) &&
            parsePreamble(bytes, npy.header, headerStart, headerSize, detail);
  if (ok && headerStart + headerSize > fileSize) {
    detail = "truncated .npy header";
    ok = false;
  }
  if (ok) {
    bytes.resize(headerStart + headerSize);
    ok = readAt(npy.file.get(), 0, bytes.data(), bytes.size()) &&
         parseNpyHeader(bytes, npy.header, detail);
  }
  if (!ok) {
    error = prefix + "cannot read " + path + ": " +
            (detail.empty() ? std::string("read error") : detail);
    return false;
  }
  const NpyHeader &header = npy.header;
  npy.fileElementSize = acceptedFileElementSize(dtype, header.descr);
  if (!npy.fileElementSize) {
    error = prefix + "file " + path + " has dtype '" + quotable(header.descr) +
            "', expected " + acceptedDescrs(dtype) + " (the tensor is " +
            dtypeName(dtype) + ")";
    return false;
  }
  if (header.shape != shape) {
    error = prefix + "file " + path + " has shape " +
            formatShape(header.shape) + ", expected " + formatShape(shape);
    return false;
  }
  if (header.fortranOrder && header.shape.size() > 1) {
    error = prefix + "file " + path +
            " is in Fortran order (save a C-ordered array, e.g. with "
            "numpy.ascontiguousarray)";
    return false;
  }
  if (!numElements(shape, npy.count)) {
    error = prefix + "shape " + formatShape(shape) + " is too large";
    return false;
  }
  uint64_t dataBytes = npy.count * npy.fileElementSize;
  uint64_t present = fileSize - header.dataOffset;
  if (present != dataBytes) {
    error = prefix + "file " + path + " has " + std::to_string(present) +
            " data bytes, expected " + std::to_string(dataBytes) +
            (present < dataBytes ? " (truncated file)" : "");
    return false;
  }
  return true;
}

bool loom::runtime::checkNpy(const std::string &path, std::string_view what,
                             DType dtype, const Shape &shape,
                             std::string &error) {
  CheckedNpy npy;
  return openChecked(path, what, dtype, shape, npy, error);
}

bool loom::runtime::readNpy(const std::string &path, std::string_view what,
                            DType dtype, const Shape &shape, void *data,
                            std::string &error, uint64_t *overflows) {
  CheckedNpy npy;
  if (!openChecked(path, what, dtype, shape, npy, error))
    return false;
  auto readError = [&] {
    error = std::string(what) + ": cannot read " + path + ": read error";
    return false;
  };
  // The buffer's own dtype, or '<f4' into f16 or bf16 (rounded).
  DType stored = npy.fileElementSize == dtypeSize(dtype) ? dtype : DType::F32;
  return readConverted(npy.file.get(), npy.header.dataOffset, stored, dtype, data,
                       npy.count, overflows) ||
         readError();
}

std::string loom::runtime::encodeNpyHeader(DType dtype, const Shape &shape) {
  std::string dict = std::string("{'descr': '") + npyDescrFor(dtype) +
                     "', 'fortran_order': False, 'shape': (";
  for (size_t i = 0; i < shape.size(); ++i)
    dict += (i ? ", " : "") + std::to_string(shape[i]);
  dict += shape.size() == 1 ? ",), }" : "), }";
  // NumPy pads the dict with spaces and a '\n' so the data is 64-aligned.
  auto padded = [&](size_t preamble) {
    size_t total = preamble + dict.size() + 1;
    return dict + std::string((64 - total % 64) % 64, ' ') + "\n";
  };
  std::string header = padded(kMagicSize + 2 + 2);
  std::string out(kMagic, kMagicSize);
  if (header.size() <= 0xffff) {
    out += '\x01';
    out += '\x00';
    out += static_cast<char>(header.size() & 0xff);
    out += static_cast<char>(header.size() >> 8);
  } else {
    header = padded(kMagicSize + 2 + 4);
    out += '\x02';
    out += '\x00';
    for (int i = 0; i < 4; ++i)
      out += static_cast<char>((header.size() >> (8 * i)) & 0xff);
  }
  return out + header;
}

bool loom::runtime::writeNpy(const std::string &path, DType dtype,
                             const Shape &shape, const void *data,
                             std::string &error) {
  uint64_t count;
  if (!numElements(shape, count)) {
    error = "cannot write " + path + ": shape " + formatShape(shape) +
            " is too large";
    return false;
  }
  // Through PATH.tmp: a failed write (a full disk) leaves the file that
  // was there, not a torn one.
  ReplacingWrite write = planReplacingWrite(path);
  FilePtr file;
  if (!openReplacingWrite(write, file, error))
    return false;
  std::string header = encodeNpyHeader(dtype, shape);
  bool ok = writeAll(file.get(), header.data(), header.size());
  if (dtype != DType::BF16) {
    ok = ok && writeAll(file.get(), data, count * dtypeSize(dtype));
  } else {
    // NumPy has no bf16: widen exactly to f32, in chunks.
    constexpr uint64_t kChunk = 1u << 16;
    std::vector<float> chunk(kChunk);
    const uint16_t *source = static_cast<const uint16_t *>(data);
    for (uint64_t done = 0; ok && done < count; done += kChunk) {
      uint64_t n = count - done < kChunk ? count - done : kChunk;
      for (uint64_t i = 0; i < n; ++i)
        chunk[i] = bf16ToFloat(source[done + i]);
      ok = writeAll(file.get(), chunk.data(), n * 4);
    }
  }
  return finishReplacingWrite(file, write, ok, error);
}
