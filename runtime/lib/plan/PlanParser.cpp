//===- PlanParser.cpp - The plan: integrity, header, buffers --------------===//
//
// Integrity first (version, then the `end` checksum), then the records, so a
// truncated or corrupted plan is reported as such rather than as whatever
// odd record the damage produced.
//
//===----------------------------------------------------------------------===//

#include "PlanParser.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

using namespace loom::runtime;
using namespace loom::runtime::plan_text;

bool PlanParser::expectFields(size_t index, size_t count, const char *syntax) {
  if (fields.size() == count)
    return true;
  return fail(index, std::string("expected '") + syntax + "'");
}

bool PlanParser::checkHeader() {
  if (lines.empty())
    return fail(0, "empty plan (expected 'loom-plan " +
                       std::to_string(kPlanVersion) + "')");
  if (!splitFields(lines[0].text, fields) || fields[0] != "loom-plan")
    return fail(0, "not a Loom plan (the first line must be 'loom-plan " +
                       std::to_string(kPlanVersion) + "')");
  if (!expectFields(0, 2, "loom-plan VERSION"))
    return false;
  uint64_t version;
  if (!parseUnsigned(fields[1], version))
    return fail(0, "bad number '" + std::string(fields[1]) + "'");
  if (version != kPlanVersion)
    return fail(0, "plan version " + std::to_string(version) +
                       " is not supported (this runtime reads version " +
                       std::to_string(kPlanVersion) + ")");
  plan.version = kPlanVersion;
  return true;
}

bool PlanParser::checkIntegrity(size_t &endIndex) {
  endIndex = 0;
  for (size_t i = 1; i < lines.size() && !endIndex; ++i)
    if (lines[i].text == "end" || lines[i].text.substr(0, 4) == "end ")
      endIndex = i;
  if (!endIndex) {
    size_t after = lines.back().terminated ? lines.size() : lines.size() - 1;
    return fail(after, "missing 'end' record (the plan is truncated)");
  }
  if (!splitFields(lines[endIndex].text, fields) || fields.size() != 2)
    return fail(endIndex, "expected 'end CHECKSUM'");
  std::string_view stated = fields[1];
  bool wellFormed = stated.size() == 8;
  for (char c : stated)
    wellFormed &= (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
  if (!wellFormed)
    return fail(endIndex, "bad checksum '" + std::string(stated) +
                              "' (expected 8 lowercase hex digits)");
  char actual[9];
  std::snprintf(actual, sizeof(actual), "%08x",
                static_cast<unsigned>(
                    computeChecksum(text.substr(0, lines[endIndex].start))));
  if (stated != actual) {
    std::string message = "checksum mismatch: the plan says ";
    message += std::string(stated) + " but its contents hash to " + actual;
    return fail(endIndex, message + " (the plan is corrupted)");
  }
  if (endIndex + 1 < lines.size()) {
    std::string_view next = lines[endIndex + 1].text;
    if (next == "end" || next.substr(0, 4) == "end ")
      return fail(endIndex + 1, "duplicate 'end' record");
    return fail(endIndex + 1, "unexpected content after 'end'");
  }
  return true;
}

bool PlanParser::parse() {
  plan = Plan();
  for (size_t start = 0; start < text.size();) {
    size_t newline = text.find('\n', start);
    bool terminated = newline != std::string_view::npos;
    size_t stop = terminated ? newline : text.size();
    lines.push_back({text.substr(start, stop - start), start, terminated});
    start = terminated ? newline + 1 : text.size();
  }
  size_t endIndex;
  if (!checkHeader() || !checkIntegrity(endIndex))
    return false;

  int stage = RankHeader;
  bool seen[RankUpdate + 1] = {true};
  for (size_t i = 1; i < endIndex; ++i) {
    if (lines[i].text.empty())
      return fail(i, "empty line");
    if (!splitFields(lines[i].text, fields))
      return fail(i, "empty field (fields are separated by single spaces)");
    Record record = recordOf(fields[0]);
    if (record == RecordNone)
      return fail(i, "unknown record '" + std::string(fields[0]) + "'");
    int rank = kRecords[record].rank;
    if (isSingle(rank) && seen[rank])
      return fail(i, "duplicate '" + std::string(fields[0]) + "' record");
    if (rank < stage)
      return fail(i, "'" + std::string(fields[0]) +
                         "' record out of order (records come in the order " +
                         kOrder + ")");
    // Only model, device and arena are required; they come first.
    if (stage < RankArena && rank > nextRequired(stage))
      return fail(i, std::string("missing '") +
                         kRankNames[nextRequired(stage)] + "' record before '" +
                         std::string(fields[0]) + "'");
    stage = rank;
    seen[rank] = true;
    if (!parseRecord(i, record))
      return false;
    previous = record;
  }
  if (stage < RankArena)
    return fail(endIndex, std::string("missing '") +
                              kRankNames[nextRequired(stage)] + "' record");
  return checkMicrobatches(endIndex) && checkPipeline(endIndex);
}

bool PlanParser::parseRecord(size_t index, Record record) {
  switch (record) {
  case RecordModel:
    return parseModel(index);
  case RecordDevice:
    return parseDevice(index);
  case RecordMesh:
    return parseMesh(index);
  case RecordArena:
    return parseArena(index);
  case RecordGpuImage:
    return parseGpuImage(index);
  case RecordBuffer:
    return parseBuffer(index);
  case RecordShard:
    return parseShard(index);
  case RecordBound:
    return parseBound(index);
  case RecordHeld:
    return parseHeld(index);
  case RecordView:
    return parseView(index);
  case RecordKernel:
    return parseKernel(index);
  case RecordTerms:
    return parseTerms(index);
  case RecordLaunch:
    return parseLaunch(index);
  case RecordStep:
    return parseStep(index);
  case RecordCollective:
    return parseCollective(index);
  case RecordAccumulate:
    return parseAccumulate(index);
  case RecordPipeline:
    return parsePipeline(index);
  case RecordSection:
    return parseSection(index);
  case RecordCarry:
    return parseCarry(index);
  case RecordTransfer:
    return parseTransfer(index);
  case RecordOptimizer:
    return parseOptimizer(index);
  case RecordUpdate:
    return parseUpdate(index);
  case RecordMicrobatches:
    return parseMicrobatches(index);
  case RecordAssemble:
    return parseAssemble(index);
  default:
    return fail(index, "unexpected record");
  }
}

bool PlanParser::parseModel(size_t index) {
  if (!expectFields(index, 2, "model NAME"))
    return false;
  if (!isValidName(fields[1]))
    return fail(index, "bad name '" + std::string(fields[1]) +
                           "' (names are [A-Za-z0-9_.]+)");
  plan.model = std::string(fields[1]);
  return true;
}

bool PlanParser::parseDevice(size_t index) {
  if (!expectFields(index, 2, "device cpu|cuda"))
    return false;
  if (fields[1] == "cpu")
    plan.device = Device::CPU;
  else if (fields[1] == "cuda")
    plan.device = Device::CUDA;
  else
    return fail(index, "unknown device '" + std::string(fields[1]) +
                           "' (expected cpu or cuda)");
  return true;
}

bool PlanParser::parseMesh(size_t index) {
  if (fields.size() < 3)
    return fail(index, "expected 'mesh NAME AXIS=SIZE...'");
  if (!isValidName(fields[1]))
    return fail(index, "bad name '" + std::string(fields[1]) +
                           "' (names are [A-Za-z0-9_.]+)");
  PlanMesh &mesh = plan.mesh;
  mesh.name = std::string(fields[1]);
  uint64_t ranks = 1;
  for (size_t i = 2; i < fields.size(); ++i) {
    std::string_view text = fields[i];
    size_t equals = text.find('=');
    std::string_view name = text.substr(0, equals);
    uint64_t size = 0;
    if (equals == std::string_view::npos || !isValidAxisName(name) ||
        !parseUnsigned(text.substr(equals + 1), size) || size == 0)
      return fail(index, "bad mesh axis '" + std::string(text) +
                             "' (expected AXIS=SIZE: a name "
                             "[A-Za-z_][A-Za-z0-9_]* and a positive size)");
    if (mesh.findAxis(name) >= 0)
      return fail(index, "duplicate mesh axis '" + std::string(name) + "'");
    if (size > kMaxMeshRanks / ranks)
      return fail(index, "mesh '" + mesh.name + "' has more than " +
                             std::to_string(kMaxMeshRanks) + " ranks");
    ranks *= size;
    mesh.axes.push_back({std::string(name), static_cast<unsigned>(size)});
  }
  mesh.numRanks = static_cast<unsigned>(ranks);
  mesh.present = true;
  mesh.line = static_cast<unsigned>(index + 1);
  return true;
}

std::string PlanParser::meshAxisNames() const {
  std::string names;
  for (const MeshAxis &axis : plan.mesh.axes)
    names += (names.empty() ? "" : ", ") + axis.name;
  return names;
}

bool PlanParser::checkFollowsBuffer(size_t index, Record self, bool afterShard) {
  const char *kind = kRecords[self].name;
  uint64_t id;
  if (!parseUnsigned(fields[1], id))
    return fail(index, "bad number '" + std::string(fields[1]) + "'");
  bool follows = !plan.buffers.empty() && id == plan.buffers.back().id;
  if (follows && previous == self)
    return fail(index, std::string("duplicate '") + kind +
                           "' record for buffer " + std::string(fields[1]));
  bool placed = previous == RecordBuffer || (afterShard && previous == RecordShard);
  if (!follows || !placed)
    return fail(index, std::string("'") + kind + "' record for buffer " +
                           std::string(fields[1]) +
                           " does not directly follow that buffer's record" +
                           (afterShard ? " (or its shard)" : ""));
  return true;
}

bool PlanParser::parseBound(size_t index) {
  if (!expectFields(index, 3, "bound ID LIMIT"))
    return false;
  uint64_t limit;
  if (!checkFollowsBuffer(index, RecordBound, /*afterShard=*/true))
    return false;
  PlanBuffer &buffer = plan.buffers.back();
  if (buffer.role != BufferRole::Input ||
      (buffer.dtype != DType::I32 && buffer.dtype != DType::I64))
    return fail(index, "a bound belongs to an integer input, not to '" +
                           buffer.name + "'");
  if (!parseUnsigned(fields[2], limit) || limit == 0 ||
      limit > static_cast<uint64_t>(INT64_MAX))
    return fail(index, "bad bound '" + std::string(fields[2]) +
                           "' (expected a positive integer)");
  buffer.bound = static_cast<int64_t>(limit);
  return true;
}

bool PlanParser::parseView(size_t index) {
  if (!expectFields(index, 3, "view ID OF"))
    return false;
  if (!checkFollowsBuffer(index, RecordView, /*afterShard=*/false))
    return false;
  PlanBuffer &view = plan.buffers.back();
  uint64_t of;
  if (!parseUnsigned(fields[2], of) || of >= view.id)
    return fail(index, "a view of '" + std::string(fields[2]) +
                           "' (expected an earlier buffer's id)");
  const PlanBuffer &bytes = plan.buffers[of];
  if (view.role != BufferRole::Temp || bytes.role != BufferRole::Temp || bytes.viewOf >= 0)
    return fail(index, "a view is a temp of another temp's bytes, not " +
                           std::string(roleName(view.role)) + " '" + view.name + "' of " +
                           std::string(roleName(bytes.role)) + " '" + bytes.name + "'" +
                           (bytes.viewOf >= 0 ? " (itself a view)" : ""));
  if (view.offset != bytes.offset || view.bytes != bytes.bytes || view.dtype != bytes.dtype)
    return fail(index, "view '" + view.name + "' (" + std::to_string(view.bytes) + " " +
                           dtypeName(view.dtype) + " bytes at " + std::to_string(view.offset) +
                           ") is not '" + bytes.name + "' (" + std::to_string(bytes.bytes) +
                           " " + dtypeName(bytes.dtype) + " bytes at " +
                           std::to_string(bytes.offset) + ")");
  view.viewOf = static_cast<int64_t>(of);
  return true;
}

bool PlanParser::parseHeld(size_t index) {
  if (!expectFields(index, 3, "held ID COORDINATES"))
    return false;
  if (!plan.pipeline.present)
    return fail(index, "'held' record without a 'pipeline' record");
  if (!checkFollowsBuffer(index, RecordHeld, /*afterShard=*/true))
    return false;
  PlanBuffer &buffer = plan.buffers.back();
  if (buffer.role != BufferRole::Param && buffer.role != BufferRole::Output)
    return fail(index, "'held' places a param or an output, not " +
                           std::string(roleName(buffer.role)) + " '" +
                           buffer.name + "'");
  unsigned ranks = plan.mesh.axes[plan.pipeline.axis].size;
  for (std::string_view entry : splitAt(fields[2], ',')) {
    uint64_t coordinate;
    if (!parseUnsigned(entry, coordinate) || coordinate >= ranks ||
        (!buffer.held.empty() && coordinate <= buffer.held.back()))
      return fail(index, "bad held list '" + std::string(fields[2]) +
                             "' (expected increasing coordinates below the " +
                             std::to_string(ranks) + " ranks of axis '" +
                             plan.mesh.axes[plan.pipeline.axis].name + "')");
    buffer.held.push_back(static_cast<unsigned>(coordinate));
  }
  return true;
}

bool PlanParser::parseShard(size_t index) {
  if (!expectFields(index, 3, "shard ID SPEC"))
    return false;
  if (!plan.mesh.present)
    return fail(index, "'shard' record without a 'mesh' record");
  if (!checkFollowsBuffer(index, RecordShard, /*afterShard=*/false))
    return false;
  PlanBuffer &buffer = plan.buffers.back();
  std::string spec(fields[2]);
  if (buffer.shape.empty())
    return fail(index, "buffer '" + buffer.name +
                           "' is a scalar and cannot be sharded");
  std::vector<std::string_view> entries = splitAt(spec, ',');
  for (std::string_view entry : entries)
    for (std::string_view axis : splitAt(entry, '+'))
      if (axis.empty())
        return fail(index, "bad shard spec '" + spec +
                               "' (expected one entry per dim: '-' or mesh "
                               "axes joined by '+')");
  if (entries.size() != buffer.shape.size())
    return fail(index, "shard spec '" + spec + "' has " +
                           std::to_string(entries.size()) + " entr" +
                           (entries.size() == 1 ? "y" : "ies") +
                           ", but buffer '" + buffer.name + "' has " +
                           std::to_string(buffer.shape.size()) + " dim" +
                           (buffer.shape.size() == 1 ? "" : "s"));
  std::vector<bool> used(plan.mesh.axes.size(), false);
  Shape global = buffer.shape;
  for (size_t d = 0; d < entries.size(); ++d) {
    std::vector<unsigned> axes;
    uint64_t factor = 1;
    if (entries[d] != "-") {
      for (std::string_view name : splitAt(entries[d], '+')) {
        int axis = plan.mesh.findAxis(name);
        if (axis < 0)
          return fail(index,
                      "shard spec '" + spec + "' names unknown mesh axis '" +
                          std::string(name) +
                          "' (the mesh's axes: " + meshAxisNames() + ")");
        if (used[axis])
          return fail(index, "mesh axis '" + std::string(name) +
                                 "' appears twice in shard spec '" + spec +
                                 "'");
        used[axis] = true;
        axes.push_back(static_cast<unsigned>(axis));
        factor *= plan.mesh.axes[axis].size; // at most kMaxMeshRanks
      }
    }
    if (static_cast<uint64_t>(global[d]) >
        static_cast<uint64_t>(INT64_MAX) / factor)
      return fail(index, "buffer '" + buffer.name + "' is too large");
    global[d] *= static_cast<int64_t>(factor);
    buffer.shard.push_back(std::move(axes));
  }
  if (!numElements(global, buffer.globalElements) ||
      !byteSize(buffer.dtype, global, buffer.globalBytes))
    return fail(index, "buffer '" + buffer.name + "' is too large");
  buffer.globalShape = std::move(global);
  buffer.shardLine = static_cast<unsigned>(index + 1);
  return true;
}

bool PlanParser::parseArena(size_t index) {
  if (!expectFields(index, 2, "arena BYTES"))
    return false;
  if (!parseUnsigned(fields[1], plan.arenaBytes))
    return fail(index, "bad number '" + std::string(fields[1]) + "'");
  return true;
}

bool PlanParser::parseGpuImage(size_t index) {
  if (!expectFields(index, 4, "gpu-image ARCH FORMAT BYTES"))
    return false;
  PlanGpuImage &image = plan.gpuImage;
  if (!parseGpuArch(fields[1], image.arch))
    return fail(index, "bad GPU architecture '" + std::string(fields[1]) +
                           "' (expected sm_ and the compute capability, "
                           "e.g. sm_80 or sm_90a)");
  if (fields[2] == "cubin")
    image.format = GpuImageFormat::Cubin;
  else if (fields[2] == "ptx")
    image.format = GpuImageFormat::PTX;
  else
    return fail(index, "unknown GPU image format '" + std::string(fields[2]) +
                           "' (expected cubin or ptx)");
  if (!parseUnsigned(fields[3], image.bytes))
    return fail(index, "bad number '" + std::string(fields[3]) + "'");
  if (image.bytes == 0)
    return fail(index, "the GPU image is empty");
  image.present = true;
  image.archName = std::string(fields[1]);
  image.line = static_cast<unsigned>(index + 1);
  return true;
}

bool PlanParser::parseBuffer(size_t index) {
  if (fields.size() < 7)
    return fail(index,
                "expected 'buffer ID NAME ROLE DTYPE SHAPE OFFSET [INIT ...]'");
  PlanBuffer buffer;
  buffer.line = static_cast<unsigned>(index + 1);
  uint64_t id;
  if (!parseUnsigned(fields[1], id))
    return fail(index, "bad number '" + std::string(fields[1]) + "'");
  if (id != plan.buffers.size())
    return fail(index, "buffer id " + std::string(fields[1]) +
                           " is out of sequence (expected " +
                           std::to_string(plan.buffers.size()) + ")");
  buffer.id = static_cast<unsigned>(id);

  std::string_view name = fields[2];
  if (!isValidName(name))
    return fail(index, "bad name '" + std::string(name) +
                           "' (names are [A-Za-z0-9_.]+)");
  auto known = bufferIds.find(name);
  if (known != bufferIds.end())
    return fail(index, "duplicate buffer name '" + std::string(name) +
                           "' (first on line " +
                           std::to_string(plan.buffers[known->second].line) +
                           ")");
  buffer.name = std::string(name);

  std::string_view role = fields[3];
  if (role == "input")
    buffer.role = BufferRole::Input;
  else if (role == "param")
    buffer.role = BufferRole::Param;
  else if (role == "output")
    buffer.role = BufferRole::Output;
  else if (role == "temp")
    buffer.role = BufferRole::Temp;
  else
    return fail(index, "unknown role '" + std::string(role) +
                           "' (expected input, param, output or temp)");

  if (!parseDType(fields[4], buffer.dtype))
    return fail(index, "unknown dtype '" + std::string(fields[4]) +
                           "' (expected f32, f16, bf16, i32 or i64)");

  std::string_view shape = fields[5];
  if (shape != "scalar") {
    size_t start = 0;
    while (true) {
      size_t comma = shape.find(',', start);
      std::string_view dim = shape.substr(start, comma - start);
      uint64_t value;
      if (!parseUnsigned(dim, value) || value == 0 ||
          value > static_cast<uint64_t>(INT64_MAX))
        return fail(index, "bad shape '" + std::string(shape) +
                               "' (expected comma-separated positive "
                               "dimensions or 'scalar')");
      buffer.shape.push_back(static_cast<int64_t>(value));
      if (comma == std::string_view::npos)
        break;
      start = comma + 1;
    }
  }
  if (!numElements(buffer.shape, buffer.numElements) ||
      !byteSize(buffer.dtype, buffer.shape, buffer.bytes))
    return fail(index, "buffer '" + buffer.name + "' is too large");

  if (!parseUnsigned(fields[6], buffer.offset))
    return fail(index, "bad number '" + std::string(fields[6]) + "'");
  if (buffer.offset % kBufferAlignment)
    return fail(index, "buffer '" + buffer.name + "' offset " +
                           std::to_string(buffer.offset) + " is not " +
                           std::to_string(kBufferAlignment) + "-byte aligned");
  if (buffer.offset > plan.arenaBytes ||
      buffer.bytes > plan.arenaBytes - buffer.offset)
    return fail(index, "buffer '" + buffer.name + "' (" +
                           std::to_string(buffer.bytes) + " bytes at offset " +
                           std::to_string(buffer.offset) +
                           ") lies outside the arena of " +
                           std::to_string(plan.arenaBytes) + " bytes");

  if (!parseInitializer(index, buffer, 7))
    return false;
  // Replicated unless a shard record follows.
  buffer.globalShape = buffer.shape;
  buffer.globalElements = buffer.numElements;
  buffer.globalBytes = buffer.bytes;
  bufferIds.emplace(name, buffer.id);
  plan.buffers.push_back(std::move(buffer));
  return true;
}

bool PlanParser::parseInitializer(size_t index, PlanBuffer &buffer,
                                  size_t first) {
  bool isParam = buffer.role == BufferRole::Param;
  if (fields.size() == first) {
    if (isParam)
      return fail(index, "param '" + buffer.name + "' has no initializer");
    return true;
  }
  if (!isParam)
    return fail(index, "only params have initializers ('" + buffer.name +
                           "' is " +
                           (buffer.role == BufferRole::Input    ? "an input"
                            : buffer.role == BufferRole::Output ? "an output"
                                                                : "a temp") +
                           ")");
  std::string_view kind = fields[first];
  size_t numArgs;
  if (kind == "zeros") {
    buffer.init.kind = InitKind::Zeros;
    numArgs = 0;
  } else if (kind == "ones") {
    buffer.init.kind = InitKind::Ones;
    numArgs = 0;
  } else if (kind == "constant") {
    buffer.init.kind = InitKind::Constant;
    numArgs = 1;
  } else if (kind == "normal") {
    buffer.init.kind = InitKind::Normal;
    numArgs = 1;
  } else if (kind == "uniform") {
    buffer.init.kind = InitKind::Uniform;
    numArgs = 2;
  } else {
    return fail(index, "unknown initializer '" + std::string(kind) +
                           "' (expected zeros, ones, constant V, normal STD "
                           "or uniform LO HI)");
  }
  size_t given = fields.size() - first - 1;
  if (given != numArgs)
    return fail(index, "initializer '" + std::string(kind) + "' takes " +
                           std::to_string(numArgs) + " argument" +
                           (numArgs == 1 ? "" : "s") + ", got " +
                           std::to_string(given));
  double args[2] = {0, 0};
  for (size_t i = 0; i < numArgs; ++i)
    if (!parseFloat(fields[first + 1 + i], args[i]))
      return fail(index,
                  "bad number '" + std::string(fields[first + 1 + i]) + "'");
  if (buffer.init.kind == InitKind::Normal && args[0] < 0)
    return fail(index, "normal std must not be negative");
  if (buffer.init.kind == InitKind::Uniform && args[0] > args[1])
    return fail(index, "uniform bounds must satisfy LO <= HI");
  buffer.init.a = args[0];
  buffer.init.b = args[1];
  return true;
}
