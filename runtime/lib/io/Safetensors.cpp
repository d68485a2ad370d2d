//===- Safetensors.cpp - Reading and writing .safetensors weights ---------===//
//
// Validation follows the reference implementation: the header must parse,
// every tensor's byte range must match its dtype and shape, and the ranges
// must tile the data section with no gap or overlap.
//
//===----------------------------------------------------------------------===//

#include "loom/runtime/io/Safetensors.h"

#include "io/File.h"
#include "loom/runtime/io/Json.h"
#include "loom/runtime/support/Hash.h"

#include <algorithm>
#include <csignal>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <unordered_map>

#include <sys/stat.h>
#include <unistd.h>

using namespace loom::runtime;

const SafetensorsTensor *SafetensorsHeader::find(std::string_view name) const {
  for (const SafetensorsTensor &tensor : tensors)
    if (tensor.name == name)
      return &tensor;
  return nullptr;
}

const std::string *SafetensorsHeader::metadataValue(std::string_view key) const {
  for (const auto &[name, value] : metadata)
    if (name == key)
      return &value;
  return nullptr;
}

const char *loom::runtime::safetensorsDTypeName(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return "F32";
  case DType::F16:
    return "F16";
  case DType::BF16:
    return "BF16";
  case DType::I32:
    return "I32";
  case DType::I64:
    return "I64";
  }
  return "?";
}

bool loom::runtime::parseSafetensorsDType(std::string_view name, DType &dtype) {
  for (DType candidate :
       {DType::F32, DType::F16, DType::BF16, DType::I32, DType::I64}) {
    if (name == safetensorsDTypeName(candidate)) {
      dtype = candidate;
      return true;
    }
  }
  return false;
}

/// Element sizes of every safetensors dtype, so that files holding types
/// Loom does not use can still be validated (and their tensors skipped).
static size_t safetensorsElementSize(std::string_view dtype) {
  static const std::pair<const char *, size_t> kSizes[] = {
      {"BOOL", 1}, {"U8", 1},  {"I8", 1},  {"F8_E5M2", 1}, {"F8_E4M3", 1},
      {"I16", 2},  {"U16", 2}, {"F16", 2}, {"BF16", 2},    {"I32", 4},
      {"U32", 4},  {"F32", 4}, {"F64", 8}, {"I64", 8},     {"U64", 8}};
  for (const auto &[name, size] : kSizes)
    if (dtype == name)
      return size;
  return 0;
}

/// A JSON number that is a non-negative integer within int64, exactly.
static bool asCount(const Json &value, uint64_t &count) {
  if (!value.is_number_unsigned())
    return false;
  count = value.get<uint64_t>();
  return count <= static_cast<uint64_t>(INT64_MAX);
}

static bool parseTensorEntry(const std::string &name, const Json &entry,
                             uint64_t dataBytes, SafetensorsTensor &tensor,
                             std::string &error) {
  std::string prefix = "tensor '" + name + "': ";
  if (!entry.is_object()) {
    error = prefix + "expected an object";
    return false;
  }
  tensor.name = name;
  auto dtype = entry.find("dtype");
  if (dtype == entry.end() || !dtype->is_string()) {
    error = prefix + "missing or non-string \"dtype\"";
    return false;
  }
  tensor.dtype = dtype->get<std::string>();
  size_t elementSize = safetensorsElementSize(tensor.dtype);
  if (!elementSize) {
    error = prefix + "unknown dtype '" + tensor.dtype + "'";
    return false;
  }
  auto shape = entry.find("shape");
  if (shape == entry.end() || !shape->is_array()) {
    error = prefix + "missing or non-array \"shape\"";
    return false;
  }
  for (const Json &dim : *shape) {
    uint64_t size;
    if (!asCount(dim, size)) {
      error = prefix + "shape entries must be non-negative integers";
      return false;
    }
    tensor.shape.push_back(static_cast<int64_t>(size));
  }
  auto offsets = entry.find("data_offsets");
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2 ||
      !(*offsets)[0].is_number_unsigned() ||
      !(*offsets)[1].is_number_unsigned()) {
    error = prefix + "\"data_offsets\" must be [BEGIN, END] with "
                     "non-negative integers";
    return false;
  }
  tensor.begin = (*offsets)[0].get<uint64_t>();
  tensor.end = (*offsets)[1].get<uint64_t>();
  std::string range = "[" + std::to_string(tensor.begin) + ", " +
                      std::to_string(tensor.end) + "]";
  if (tensor.begin > tensor.end) {
    error = prefix + "data_offsets " + range + " end before they begin";
    return false;
  }
  if (tensor.end > dataBytes) {
    error = prefix + "data_offsets " + range +
            " lie outside the data section of " + std::to_string(dataBytes) +
            " bytes";
    return false;
  }
  uint64_t count;
  if (!numElements(tensor.shape, count) ||
      count > (UINT64_MAX >> 4) / elementSize) {
    error = prefix + "shape " + formatShape(tensor.shape) + " is too large";
    return false;
  }
  if (tensor.end - tensor.begin != count * elementSize) {
    error = prefix + "data_offsets " + range + " hold " +
            std::to_string(tensor.end - tensor.begin) + " bytes, but " +
            tensor.dtype + " " + formatShape(tensor.shape) + " needs " +
            std::to_string(count * elementSize);
    return false;
  }
  return true;
}

bool loom::runtime::parseSafetensorsHeader(std::string_view json,
                                           uint64_t dataBytes,
                                           SafetensorsHeader &header,
                                           std::string &error) {
  header.tensors.clear();
  header.metadata.clear();
  header.dataBytes = dataBytes;
  Json root;
  if (!parseJson(json, root, error)) {
    error = "bad header: " + error;
    return false;
  }
  if (!root.is_object()) {
    error = "bad header: expected a JSON object";
    return false;
  }
  for (const auto &[name, entry] : root.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) {
        error = "bad header: \"__metadata__\" must be an object";
        return false;
      }
      // The format's metadata maps strings to strings: a number here is
      // not a value that was meant (a checkpoint's "step": 5 would
      // otherwise read as missing).
      for (const auto &[key, value] : entry.items()) {
        if (!value.is_string()) {
          error = "bad header: \"__metadata__\" value of \"" + key +
                  "\" must be a string, not " + dumpJson(value);
          return false;
        }
        header.metadata.emplace_back(key, value.get<std::string>());
      }
      continue;
    }
    SafetensorsTensor tensor;
    if (!parseTensorEntry(name, entry, dataBytes, tensor, error))
      return false;
    header.tensors.push_back(std::move(tensor));
  }
  // The ranges, in data order, must follow each other from 0 to the end.
  std::vector<const SafetensorsTensor *> order;
  for (const SafetensorsTensor &tensor : header.tensors)
    order.push_back(&tensor);
  std::sort(order.begin(), order.end(),
            [](const SafetensorsTensor *a, const SafetensorsTensor *b) {
              return a->begin != b->begin ? a->begin < b->begin
                                          : a->end < b->end;
            });
  uint64_t covered = 0;
  const SafetensorsTensor *previous = nullptr;
  for (const SafetensorsTensor *tensor : order) {
    if (tensor->begin < covered) {
      error =
          "tensors '" + previous->name + "' and '" + tensor->name + "' overlap";
      return false;
    }
    if (tensor->begin > covered) {
      error = "the data section has a gap of " +
              std::to_string(tensor->begin - covered) +
              " bytes before tensor '" + tensor->name + "'";
      return false;
    }
    covered = tensor->end;
    previous = tensor;
  }
  if (covered != dataBytes) {
    error = "the data section has " + std::to_string(dataBytes) +
            " bytes, but the tensors cover " + std::to_string(covered);
    return false;
  }
  return true;
}

/// Reads and validates the header of the open `file` of `fileSize` bytes.
static bool readHeader(std::FILE *file, uint64_t fileSize,
                       SafetensorsHeader &header, std::string &error) {
  unsigned char lengthBytes[8];
  if (fileSize < 8 || !readAt(file, 0, lengthBytes, 8)) {
    error = "too short for a safetensors file";
    return false;
  }
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i)
    length |= static_cast<uint64_t>(lengthBytes[i]) << (8 * i);
  if (length > kMaxSafetensorsHeader) {
    error = "header length " + std::to_string(length) +
            " is too large (is this a safetensors file?)";
    return false;
  }
  if (length > fileSize - 8) {
    error = "header length " + std::to_string(length) +
            " runs past the end of the file (" + std::to_string(fileSize) +
            " bytes)";
    return false;
  }
  std::string json(length, '\0');
  if (!readAt(file, 8, json.data(), length)) {
    error = "read error";
    return false;
  }
  header.dataOffset = 8 + length;
  return parseSafetensorsHeader(json, fileSize - 8 - length, header, error);
}

bool loom::runtime::readSafetensorsHeader(const std::string &path,
                                          SafetensorsHeader &header,
                                          std::string &error) {
  FilePtr file;
  uint64_t size;
  if (!openForReading(path, file, size, error))
    return false;
  if (!readHeader(file.get(), size, header, error)) {
    error = path + ": " + error;
    return false;
  }
  return true;
}

/// Whether a weights file's `stored` tensor may fill a param of `param`'s
/// float dtype: a training checkpoint's f32 master params load into a
/// 16-bit forward (rounded), a 16-bit forward's params into an f32 one.
static bool convertsWeight(DType stored, DType param) {
  return (stored == DType::F32 && (param == DType::BF16 || param == DType::F16)) ||
         ((stored == DType::BF16 || stored == DType::F16) && param == DType::F32);
}

/// A Loom checkpoint states the FNV-1a hash of its tensors' bytes in name
/// order (the order it writes them in); a flipped or torn byte changes it.
/// train --resume checks it against the params it loads; weights loaded
/// with --weights are checked here, from the file alone (a forward build
/// reads only some of its tensors).
static bool checkCheckpointChecksum(FILE *file, const SafetensorsHeader &header,
                                    const std::string &path, std::string &error) {
  const std::string *version = header.metadataValue(kCheckpointVersionKey);
  const std::string *stated = header.metadataValue("checksum");
  // A checkpoint of another format, or one that lost its checksum, is
  // refused as --resume refuses it (format 1 had none).
  if (!version)
    return true;
  if (!checkpointFormatKnown(path, *version, error))
    return false;
  if (!stated && *version != "1") {
    error = path + ": the checkpoint has no \"checksum\" in its metadata";
    return false;
  }
  if (!stated)
    return true;
  std::vector<const SafetensorsTensor *> order;
  for (const SafetensorsTensor &tensor : header.tensors)
    order.push_back(&tensor);
  std::sort(order.begin(), order.end(),
            [](const SafetensorsTensor *a, const SafetensorsTensor *b) {
              return a->name < b->name;
            });
  uint64_t hash = fnv1a64({});
  std::vector<char> chunk(1 << 20);
  for (const SafetensorsTensor *tensor : order)
    for (uint64_t at = tensor->begin; at < tensor->end;) {
      size_t bytes = static_cast<size_t>(std::min<uint64_t>(chunk.size(), tensor->end - at));
      if (!readAt(file, header.dataOffset + at, chunk.data(), bytes)) {
        error = path + ": read error in tensor '" + tensor->name + "'";
        return false;
      }
      hash = fnv1a64(std::string_view(chunk.data(), bytes), hash);
      at += bytes;
    }
  return checkpointHashMatches(path, hashText(hash), *stated, error);
}

bool loom::runtime::loadWeights(const Plan &plan, char *arena,
                                const std::string &path,
                                std::vector<std::string> &warnings,
                                std::string &error, bool strict) {
  FilePtr file;
  uint64_t size;
  if (!openForReading(path, file, size, error))
    return false;
  SafetensorsHeader header;
  if (!readHeader(file.get(), size, header, error)) {
    error = path + ": " + error;
    return false;
  }
  if (!strict && !checkCheckpointChecksum(file.get(), header, path, error))
    return false;
  std::unordered_map<std::string_view, const SafetensorsTensor *> byName;
  for (const SafetensorsTensor &tensor : header.tensors)
    byName.emplace(tensor.name, &tensor);

  // Check every param before reading any, so a bad file changes nothing.
  // A training step loading weights (a forward's, a pretrained model's, a
  // checkpoint's) starts its optimizer state at zero, as a fresh run does:
  // a checkpoint's state without its step (Adam's t, the schedule's step)
  // had made the first update neither a fresh run's nor a resumed one's
  // (moments of 3 steps under t = 1's bias correction). --resume
  // continues a checkpoint, state and step together.
  auto isOptimizerState = [&](const PlanBuffer &buffer) {
    return !strict && buffer.name.compare(0, 4, "opt.") == 0 &&
           buffer.init.kind == InitKind::Zeros;
  };
  std::vector<const PlanBuffer *> freshState;
  size_t stateInFile = 0;
  for (const PlanBuffer &buffer : plan.buffers) {
    if (buffer.role != BufferRole::Param)
      continue;
    auto found = byName.find(buffer.name);
    if (isOptimizerState(buffer)) {
      freshState.push_back(&buffer);
      stateInFile += found != byName.end();
      continue;
    }
    if (found == byName.end()) {
      error = path + ": no tensor for param '" + buffer.name + "' (" +
              safetensorsDTypeName(buffer.dtype) + " " +
              formatShape(buffer.shape) + ")";
      return false;
    }
    const SafetensorsTensor &tensor = *found->second;
    DType dtype;
    // A checkpoint holds each param as the step keeps it (its checksum is
    // of those bytes): another dtype there is an edited file, not weights
    // to convert (it had been converted, then called corrupted).
    if (!parseSafetensorsDType(tensor.dtype, dtype) ||
        (dtype != buffer.dtype && (strict || !convertsWeight(dtype, buffer.dtype))) ||
        tensor.shape != buffer.shape) {
      error = path + ": tensor '" + buffer.name + "' is " + tensor.dtype + " " +
              formatShape(tensor.shape) + ", but the param is " +
              safetensorsDTypeName(buffer.dtype) + " " +
              formatShape(buffer.shape);
      return false;
    }
  }
  // A training checkpoint's optimizer state (opt.*), which a forward
  // executable does not read and a training one starts afresh, is one
  // warning rather than one a tensor.
  size_t optimizerState = 0;
  for (const SafetensorsTensor &tensor : header.tensors) {
    const PlanBuffer *buffer = plan.findBuffer(tensor.name);
    if (buffer && buffer->role == BufferRole::Param && !isOptimizerState(*buffer))
      continue;
    if (strict) {
      error = path + ": tensor '" + tensor.name +
              "' is not a param of model '" + plan.model + "'";
      return false;
    }
    if (tensor.name.compare(0, 4, "opt.") == 0)
      ++optimizerState;
    else
      warnings.push_back(path + ": ignoring tensor '" + tensor.name +
                         "', which is not a param of model '" + plan.model + "'");
  }
  if (optimizerState && freshState.empty())
    warnings.push_back(path + ": ignoring " + std::to_string(optimizerState) +
                       " optimizer-state tensors (opt.*), which model '" +
                       plan.model + "' does not train");
  else if (optimizerState)
    warnings.push_back(path + ": ignoring " + std::to_string(optimizerState) +
                       " optimizer-state tensors (opt.*): --weights starts a "
                       "fresh run, its optimizer state at zero (train --resume "
                       "continues a checkpoint, its state and step included)");
  if (!freshState.empty() && stateInFile < freshState.size())
    warnings.push_back(path + ": no optimizer state (opt.*) for " +
                       std::to_string(freshState.size() - stateInFile) +
                       " tensors: they start at zero, as in a fresh run");
  for (const PlanBuffer *buffer : freshState)
    std::memset(arena + buffer->offset, 0, buffer->bytes);
  for (const PlanBuffer &buffer : plan.buffers) {
    if (buffer.role != BufferRole::Param || !byName.count(buffer.name) ||
        isOptimizerState(buffer))
      continue;
    const SafetensorsTensor &tensor = *byName[buffer.name];
    // f32 to 16 bits rounds to nearest even, as a step's cast of its f32
    // master params does; 16 bits to f32 is exact.
    DType dtype;
    parseSafetensorsDType(tensor.dtype, dtype); // checked above
    uint64_t overflows = 0;
    if (!readConverted(file.get(), header.dataOffset + tensor.begin, dtype, buffer.dtype,
                       arena + buffer.offset, buffer.numElements, &overflows)) {
      error = path + ": read error in tensor '" + buffer.name + "'";
      return false;
    }
    if (overflows)
      warnings.push_back(path + ": tensor '" + buffer.name + "': " +
                         overflowMessage(overflows, buffer.dtype));
  }
  return true;
}

bool loom::runtime::saveWeights(const Plan &plan, const char *arena,
                                const std::string &path, std::string &error,
                                const WeightsWriteOptions &how) {
  std::vector<const PlanBuffer *> params;
  for (const PlanBuffer &buffer : plan.buffers)
    if (buffer.role == BufferRole::Param)
      params.push_back(&buffer);
  std::sort(params.begin(), params.end(),
            [](const PlanBuffer *a, const PlanBuffer *b) {
              return a->name < b->name;
            });
  Json document = Json::object();
  document["__metadata__"] = {{"model", plan.model}, {"producer", "loom"}};
  for (const auto &[key, value] : how.metadata)
    document["__metadata__"][key] = value;
  uint64_t offset = 0;
  for (const PlanBuffer *param : params) {
    document[param->name] = {
        {"dtype", safetensorsDTypeName(param->dtype)},
        {"shape", param->shape},
        {"data_offsets", {offset, offset + param->bytes}}};
    offset += param->bytes;
  }
  std::string json = dumpJson(document);
  // The spec allows trailing spaces; they align the data to 8 bytes.
  json.append((8 - json.size() % 8) % 8, ' ');

  ReplacingWrite write = planReplacingWrite(path);
  bool atomic = !write.temporary.empty();
  FilePtr file;
  if (!openReplacingWrite(write, file, error))
    return false;
  unsigned char length[8];
  for (int i = 0; i < 8; ++i)
    length[i] = static_cast<unsigned char>((json.size() >> (8 * i)) & 0xff);
  bool ok = writeAll(file.get(), length, 8) &&
            writeAll(file.get(), json.data(), json.size());
  // Fault injection for the tests (docs/runtime.md): the process dies
  // half-way through its K-th atomic write, as a killed rank would.
  static unsigned atomicWrites = 0;
  const char *killAt = atomic ? std::getenv("LOOM_FAULT_KILL_IN_SAVE") : nullptr;
  bool dies = killAt && std::strtoul(killAt, nullptr, 10) == ++atomicWrites;
  for (size_t i = 0; i < params.size(); ++i) {
    if (dies && i == params.size() / 2) {
      std::fflush(file.get());
      std::raise(SIGKILL);
    }
    ok = ok && writeAll(file.get(), arena + params[i]->offset, params[i]->bytes);
  }
  return finishReplacingWrite(file, write, ok, error);
}
