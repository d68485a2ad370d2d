//===- Plan.cpp - Parsing and validating the plan text --------------------===//
//
// Integrity first (version, then the `end` checksum), then the records, so a
// truncated or corrupted plan is reported as such rather than as whatever
// odd record the damage produced.
//
//===----------------------------------------------------------------------===//

#include "loom/runtime/plan/Plan.h"
#include "loom/runtime/plan/Schedule.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <unordered_map>

using namespace loom::runtime;

const char *loom::runtime::deviceName(Device device) {
  return device == Device::CUDA ? "cuda" : "cpu";
}

const char *loom::runtime::assemblyName(Assembly assembly) {
  switch (assembly) {
  case Assembly::None:
    return "none";
  case Assembly::Rows:
    return "rows";
  case Assembly::Mean:
    return "mean";
  case Assembly::Sum:
    return "sum";
  }
  return "?";
}

const char *loom::runtime::roleName(BufferRole role) {
  switch (role) {
  case BufferRole::Input:
    return "input";
  case BufferRole::Param:
    return "param";
  case BufferRole::Output:
    return "output";
  case BufferRole::Temp:
    return "temp";
  }
  return "?";
}

const char *loom::runtime::initKindName(InitKind kind) {
  switch (kind) {
  case InitKind::None:
    return "none";
  case InitKind::Zeros:
    return "zeros";
  case InitKind::Ones:
    return "ones";
  case InitKind::Constant:
    return "constant";
  case InitKind::Normal:
    return "normal";
  case InitKind::Uniform:
    return "uniform";
  }
  return "?";
}

const char *loom::runtime::gpuImageFormatName(GpuImageFormat format) {
  return format == GpuImageFormat::PTX ? "ptx" : "cubin";
}

bool loom::runtime::parseGpuArch(std::string_view text, GpuArch &arch) {
  if (text.substr(0, 3) != "sm_")
    return false;
  std::string_view rest = text.substr(3);
  char variant = 0;
  if (!rest.empty() && (rest.back() == 'a' || rest.back() == 'f')) {
    variant = rest.back();
    rest.remove_suffix(1);
  }
  if (rest.size() < 2 || rest.size() > 3 || rest[0] == '0')
    return false;
  unsigned number = 0;
  for (char c : rest) {
    if (c < '0' || c > '9')
      return false;
    number = number * 10 + static_cast<unsigned>(c - '0');
  }
  arch.major = number / 10;
  arch.minor = number % 10;
  arch.variant = variant;
  return true;
}

double PlanOptimizer::get(std::string_view name, double fallback) const {
  for (const auto &[known, value] : hyperparameters)
    if (known == name)
      return value;
  return fallback;
}

const PlanBuffer *Plan::findBuffer(std::string_view name) const {
  for (const PlanBuffer &buffer : buffers)
    if (buffer.name == name)
      return &buffer;
  return nullptr;
}

size_t Plan::numCollectives() const {
  size_t count = 0;
  for (const PlanStep &step : steps)
    count += step.kind == StepKind::Collective;
  return count;
}

size_t Plan::microbatchSteps() const {
  for (size_t i = steps.size(); i > 0; --i)
    if (steps[i - 1].kind == StepKind::Accumulate)
      return i;
  return 0;
}

int PlanMesh::findAxis(std::string_view name) const {
  for (size_t i = 0; i < axes.size(); ++i)
    if (axes[i].name == name)
      return static_cast<int>(i);
  return -1;
}

bool PlanBuffer::isSharded() const {
  for (const std::vector<unsigned> &axes : shard)
    if (!axes.empty())
      return true;
  return false;
}

const char *loom::runtime::collectiveKindName(CollectiveKind kind) {
  switch (kind) {
  case CollectiveKind::AllReduce:
    return "all-reduce";
  case CollectiveKind::AllGather:
    return "all-gather";
  case CollectiveKind::ReduceScatter:
    return "reduce-scatter";
  case CollectiveKind::AllSlice:
    return "all-slice";
  case CollectiveKind::AllToAll:
    return "all-to-all";
  case CollectiveKind::Broadcast:
    return "broadcast";
  }
  return "?";
}

std::string loom::runtime::formatMeshAxes(const PlanMesh &mesh) {
  std::string text;
  for (const MeshAxis &axis : mesh.axes)
    text +=
        (text.empty() ? "" : " ") + axis.name + "=" + std::to_string(axis.size);
  return text;
}

std::string loom::runtime::formatAxes(const PlanMesh &mesh,
                                      const std::vector<unsigned> &axes) {
  std::string text;
  for (size_t i = 0; i < axes.size(); ++i)
    text += (i ? "," : "") + mesh.axes[axes[i]].name;
  return text;
}

std::string loom::runtime::formatShardSpec(const PlanMesh &mesh,
                                           const PlanBuffer &buffer) {
  std::string text;
  for (size_t d = 0; d < buffer.shard.size(); ++d) {
    text += d ? "," : "";
    if (buffer.shard[d].empty())
      text += "-";
    for (size_t i = 0; i < buffer.shard[d].size(); ++i)
      text += (i ? "+" : "") + mesh.axes[buffer.shard[d][i]].name;
  }
  return text;
}

bool loom::runtime::parseUnsigned(std::string_view text, uint64_t &value) {
  if (text.empty() || text.size() > 20)
    return false;
  uint64_t result = 0;
  for (char c : text) {
    if (c < '0' || c > '9')
      return false;
    uint64_t digit = static_cast<uint64_t>(c - '0');
    if (result > (UINT64_MAX - digit) / 10)
      return false;
    result = result * 10 + digit;
  }
  value = result;
  return true;
}

namespace {
/// Where a record may appear: records come in this order, a `shard` at the
/// place of `buffer` (right after its buffer) and a `collective` at the
/// place of `step` (steps and collectives interleave in program order).
enum Rank {
  RankHeader,
  RankModel,
  RankDevice,
  RankMesh,
  RankPipeline,
  RankArena,
  RankGpuImage,
  RankBuffer,
  RankKernel,
  RankLaunch,
  RankStep,
  RankMicrobatches,
  RankAssemble,
  RankOptimizer,
  RankUpdate
};
constexpr const char *kRankNames[] = {
    "loom-plan", "model",  "device", "mesh", "pipeline", "arena",
    "gpu-image", "buffer", "kernel", "launch", "step", "microbatches",
    "assemble", "optimizer", "update"};
constexpr const char *kTensorMapSyntax =
    "tmap:BUFFER:OFFSET:DTYPE:DIMS:STRIDES:BOX:SWIZZLE";
constexpr const char *kOrder =
    "loom-plan, model, device, mesh, pipeline, arena, gpu-image, buffer (each "
    "followed by its shard, bound, held and view), kernel (each followed by its "
    "terms), launch, step, collective, "
    "accumulate, section, carry and transfer, "
    "microbatches, assemble, optimizer, update, "
    "end";

/// The record kinds.
enum Record {
  RecordHeader,
  RecordModel,
  RecordDevice,
  RecordMesh,
  RecordArena,
  RecordGpuImage,
  RecordBuffer,
  RecordShard,
  RecordBound,
  RecordHeld,
  RecordView,
  RecordKernel,
  RecordTerms,
  RecordLaunch,
  RecordStep,
  RecordCollective,
  RecordAccumulate,
  RecordPipeline,
  RecordSection,
  RecordCarry,
  RecordTransfer,
  RecordMicrobatches,
  RecordAssemble,
  RecordOptimizer,
  RecordUpdate,
  RecordNone
};
struct RecordInfo {
  const char *name;
  Rank rank;
};
constexpr RecordInfo kRecords[] = {
    {"loom-plan", RankHeader}, {"model", RankModel},
    {"device", RankDevice},    {"mesh", RankMesh},
    {"arena", RankArena},      {"gpu-image", RankGpuImage},
    {"buffer", RankBuffer},    {"shard", RankBuffer},
    {"bound", RankBuffer},     {"held", RankBuffer},
    {"view", RankBuffer},
    {"kernel", RankKernel},    {"terms", RankKernel},
    {"launch", RankLaunch},
    {"step", RankStep},        {"collective", RankStep},
    {"accumulate", RankStep},  {"pipeline", RankPipeline},
    {"section", RankStep},     {"carry", RankStep},
    {"transfer", RankStep},    {"microbatches", RankMicrobatches},
    {"assemble", RankAssemble},
    {"optimizer", RankOptimizer}, {"update", RankUpdate}};

/// Records that appear at most once (loom-plan, model, device and arena
/// also must appear; mesh and gpu-image need not).
bool isSingle(int rank) {
  return rank <= RankArena || rank == RankGpuImage || rank == RankOptimizer ||
         rank == RankMicrobatches;
}

/// The next record that must appear after a record of rank `stage` (below
/// RankArena): model, device and arena are required, the mesh is not.
int nextRequired(int stage) {
  return stage == RankDevice || stage == RankMesh || stage == RankPipeline
             ? RankArena
             : stage + 1;
}

Record recordOf(std::string_view name) {
  for (int record = RecordHeader; record < RecordNone; ++record)
    if (name == kRecords[record].name)
      return static_cast<Record>(record);
  return RecordNone;
}

/// A decimal integer with an optional '-', within [lo, hi].
bool parseInt(std::string_view text, int64_t lo, int64_t hi, int64_t &value,
              bool &inRange) {
  inRange = false;
  bool negative = !text.empty() && text[0] == '-';
  uint64_t magnitude;
  if (!parseUnsigned(negative ? text.substr(1) : text, magnitude))
    return false;
  constexpr uint64_t kMinMagnitude = static_cast<uint64_t>(INT64_MAX) + 1;
  if (negative) {
    if (magnitude > kMinMagnitude)
      return true;
    value = magnitude == kMinMagnitude ? INT64_MIN
                                       : -static_cast<int64_t>(magnitude);
  } else {
    if (magnitude > static_cast<uint64_t>(INT64_MAX))
      return true;
    value = static_cast<int64_t>(magnitude);
  }
  inRange = value >= lo && value <= hi;
  return true;
}

/// Whether `text` has only the characters of a decimal float (digits, '.',
/// an exponent, signs), so that strtof/strtod take nothing else: no hex,
/// "inf", "nan" or leading spaces.
bool isDecimalText(std::string_view text) {
  if (text.empty() || text.size() > 64)
    return false;
  for (char c : text)
    if (!((c >= '0' && c <= '9') || c == '.' || c == 'e' || c == 'E' ||
          c == '+' || c == '-'))
      return false;
  return true;
}

/// An f32 as %.9g writes it: decimal, or inf, -inf, nan, -nan (printf's
/// spellings of the values a float constant may hold). `inRange` is false
/// for a finite number beyond the f32 range.
bool parseF32(std::string_view text, float &value, bool &inRange) {
  inRange = true;
  std::string_view magnitude = text;
  bool negative = !magnitude.empty() && magnitude[0] == '-';
  if (negative)
    magnitude.remove_prefix(1);
  if (magnitude == "inf" || magnitude == "nan") {
    value = magnitude == "inf" ? INFINITY : NAN;
    value = negative ? -value : value;
    return true;
  }
  if (!isDecimalText(text))
    return false;
  std::string copy(text);
  char *end = nullptr;
  float result = std::strtof(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size())
    return false;
  inRange = std::isfinite(result);
  value = result;
  return true;
}

/// A finite decimal float as %.17g writes it (strtod alone would also take
/// hex, "inf", "nan" and leading spaces).
bool parseFloat(std::string_view text, double &value) {
  if (!isDecimalText(text))
    return false;
  std::string copy(text);
  char *end = nullptr;
  double result = std::strtod(copy.c_str(), &end);
  if (end != copy.c_str() + copy.size() || !std::isfinite(result))
    return false;
  value = result;
  return true;
}

bool isValidName(std::string_view name) {
  if (name.empty())
    return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '_' || c == '.'))
      return false;
  return true;
}

/// Mesh axis names: [A-Za-z_][A-Za-z0-9_]* (no '.', so that they never
/// read as numbers or collide with the spec syntax).
bool isValidAxisName(std::string_view name) {
  if (name.empty() || (name[0] >= '0' && name[0] <= '9'))
    return false;
  for (char c : name)
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
          (c >= '0' && c <= '9') || c == '_'))
      return false;
  return true;
}

/// Splits `text` at every `separator`; empty pieces are kept.
std::vector<std::string_view> splitAt(std::string_view text, char separator) {
  std::vector<std::string_view> pieces;
  size_t start = 0;
  while (true) {
    size_t at = text.find(separator, start);
    pieces.push_back(text.substr(start, at - start));
    if (at == std::string_view::npos)
      return pieces;
    start = at + 1;
  }
}

/// Decimal digits only: true with `value`, UINT64_MAX if they do not fit
/// (so that a huge number is out of range rather than malformed).
bool parseDigits(std::string_view text, uint64_t &value) {
  if (text.empty() ||
      text.find_first_not_of("0123456789") != std::string_view::npos)
    return false;
  if (!parseUnsigned(text, value))
    value = UINT64_MAX;
  return true;
}

/// A tensor map's DIMS, STRIDES or BOX: numbers joined by 'x', or "-" for
/// none.
bool parseExtents(std::string_view text, std::vector<uint64_t> &values) {
  values.clear();
  if (text == "-")
    return true;
  for (std::string_view piece : splitAt(text, 'x')) {
    uint64_t value;
    if (!parseDigits(piece, value))
      return false;
    values.push_back(value);
  }
  return true;
}

/// "1 dim", "2 dims".
std::string countOf(size_t count, const char *noun) {
  return std::to_string(count) + " " + noun + (count == 1 ? "" : "s");
}

/// How far into its buffer a tensor map's tensor reaches: OFFSET, the
/// innermost dim's bytes, and (DIMS[i] - 1) * STRIDES[i - 1] for the others;
/// UINT64_MAX if that does not fit.
uint64_t tensorMapSpan(const TensorMapArg &map) {
  // Each term is below 2^72 (dims at most 2^32, strides below 2^40).
  unsigned __int128 span = map.offset;
  span += static_cast<unsigned __int128>(map.dims[0]) * dtypeSize(map.dtype);
  for (unsigned i = 1; i < map.rank; ++i)
    span +=
        static_cast<unsigned __int128>(map.dims[i] - 1) * map.strides[i - 1];
  return span > UINT64_MAX ? UINT64_MAX : static_cast<uint64_t>(span);
}

/// Splits on single spaces; false if a field is empty (doubled, leading or
/// trailing space).
bool splitFields(std::string_view line, std::vector<std::string_view> &fields) {
  fields.clear();
  size_t start = 0;
  while (true) {
    size_t space = line.find(' ', start);
    std::string_view field = line.substr(start, space - start);
    if (field.empty())
      return false;
    fields.push_back(field);
    if (space == std::string_view::npos)
      return true;
    start = space + 1;
  }
}

struct Line {
  std::string_view text; // without the '\n'
  size_t start;          // byte offset in the plan
  bool terminated;       // ends with '\n'
};

class PlanParser {
public:
  PlanParser(std::string_view text, Plan &plan, std::string &error)
      : text(text), plan(plan), error(error) {}

  bool parse();

private:
  bool fail(size_t lineIndex, const std::string &message) {
    error = "plan:" + std::to_string(lineIndex + 1) + ": " + message;
    return false;
  }
  bool checkHeader();
  bool checkIntegrity(size_t &endIndex);
  bool parseRecord(size_t index, Record record);
  bool parseModel(size_t index);
  bool parseDevice(size_t index);
  bool parseMesh(size_t index);
  bool parseArena(size_t index);
  bool parseGpuImage(size_t index);
  bool parseBuffer(size_t index);
  bool parseInitializer(size_t index, PlanBuffer &buffer, size_t first);
  bool parseKernel(size_t index);
  bool parseTerms(size_t index);
  bool parseLaunch(size_t index);
  bool parseDims(size_t index, size_t first, const char *what,
                 const unsigned (&limits)[3], unsigned (&dims)[3]);
  bool parseLaunchArg(size_t index, std::string_view text,
                      const PlanKernel &kernel, LaunchArg &arg);
  bool parseTensorMapArg(size_t index, std::string_view text,
                         const PlanKernel &kernel, LaunchArg &arg);
  bool checkArgBuffer(size_t index, const std::string &quoted,
                      std::string_view idText, uint64_t id,
                      const PlanKernel &kernel);
  bool checkTensorMapSpans(size_t index, const PlanStep &step);
  bool parseShard(size_t index);
  bool parseBound(size_t index);
  bool parseHeld(size_t index);
  bool parseView(size_t index);
  /// A record about the buffer just declared (`shard`, `bound`): field 1
  /// names it, and the record comes right after the buffer's (or, where
  /// `afterShard`, after its shard), once.
  bool checkFollowsBuffer(size_t index, Record self, bool afterShard);
  bool parseStep(size_t index);
  bool parseCollective(size_t index);
  bool parseAccumulate(size_t index);
  bool parsePipeline(size_t index);
  bool parseSection(size_t index);
  bool parseCarry(size_t index);
  bool parseTransfer(size_t index);
  /// Gives a pipelined plan's step its section, which must exist.
  bool placeInSection(size_t index, PlanStep &step);
  /// After the last record: a pipelined plan's sections and carries fit
  /// together.
  bool checkPipeline(size_t endIndex);
  bool parseOptimizer(size_t index);
  /// After the last record: the accumulates and `microbatches=` agree, and
  /// past the last accumulate only accumulates' results carry values.
  bool checkMicrobatches(size_t endIndex);
  bool parseUpdate(size_t index);
  bool parseMicrobatches(size_t index);
  bool parseAssemble(size_t index);
  bool parseAxes(size_t index, std::string_view text,
                 std::vector<unsigned> &axes);
  bool parseCollectiveDim(size_t index, std::string_view text,
                          const PlanBuffer &buffer, const char *what,
                          unsigned &dim);
  bool parseBufferId(size_t index, std::string_view text, const char *what,
                     unsigned &id);
  bool expectFields(size_t index, size_t count, const char *syntax);
  std::string meshAxisNames() const;

  std::string_view text;
  Plan &plan;
  std::string &error;
  std::vector<Line> lines;
  std::vector<std::string_view> fields;
  std::unordered_map<std::string_view, unsigned> bufferIds;
  std::unordered_map<std::string_view, unsigned> kernelIds;
  Record previous = RecordHeader; // the record before the current one
  bool inSection = false;          // a pipelined plan's `section` seen
  PlanStep section;                // its phase and stages
};
} // namespace

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

bool PlanParser::parseKernel(size_t index) {
  if (fields.size() != 3 && fields.size() != 4)
    return fail(index, "expected 'kernel NAME NARGS [SOURCE]'");
  std::string_view name = fields[1];
  if (!isValidName(name))
    return fail(index, "bad name '" + std::string(name) +
                           "' (names are [A-Za-z0-9_.]+)");
  auto known = kernelIds.find(name);
  if (known != kernelIds.end())
    return fail(index, "duplicate kernel name '" + std::string(name) +
                           "' (first on line " +
                           std::to_string(plan.kernels[known->second].line) +
                           ")");
  uint64_t numArgs;
  if (!parseUnsigned(fields[2], numArgs) || numArgs > UINT32_MAX)
    return fail(index, "bad number '" + std::string(fields[2]) + "'");
  std::string source;
  if (fields.size() == 4) {
    // FILE:LINE:COL, FILE without spaces or colons, LINE and COL positive.
    std::string_view text = fields[3];
    size_t col = text.rfind(':');
    size_t line = col == std::string_view::npos ? col : text.rfind(':', col - 1);
    uint64_t l = 0, c = 0;
    if (line == std::string_view::npos || line == 0 ||
        text.substr(0, line).find(':') != std::string_view::npos ||
        !parseUnsigned(text.substr(line + 1, col - line - 1), l) ||
        !parseUnsigned(text.substr(col + 1), c) || l == 0 || c == 0)
      return fail(index, "bad kernel source '" + std::string(text) +
                             "' (expected FILE:LINE:COL)");
    source = std::string(text);
  }
  kernelIds.emplace(name, static_cast<unsigned>(plan.kernels.size()));
  plan.kernels.push_back({std::string(name), static_cast<unsigned>(numArgs),
                          source, static_cast<unsigned>(index + 1)});
  return true;
}

bool PlanParser::parseTerms(size_t index) {
  if (!expectFields(index, 3, "terms KERNEL ARG"))
    return false;
  std::string_view name = fields[1];
  if (plan.kernels.empty() || plan.kernels.back().name != name ||
      previous != RecordKernel)
    return fail(index, "'terms' record for kernel '" + std::string(name) +
                           "' does not directly follow that kernel's record");
  PlanKernel &kernel = plan.kernels.back();
  uint64_t arg;
  if (!parseUnsigned(fields[2], arg) || arg >= kernel.numArgs)
    return fail(index, "bad terms argument '" + std::string(fields[2]) +
                           "' (expected one of the kernel's " +
                           std::to_string(kernel.numArgs) + " buffers, from 0)");
  kernel.termsArg = static_cast<int>(arg);
  return true;
}

bool PlanParser::parseDims(size_t index, size_t first, const char *what,
                           const unsigned (&limits)[3], unsigned (&dims)[3]) {
  std::string text = std::string(fields[first]) + " " +
                     std::string(fields[first + 1]) + " " +
                     std::string(fields[first + 2]);
  for (int i = 0; i < 3; ++i) {
    uint64_t value;
    if (!parseUnsigned(fields[first + i], value))
      return fail(index, "bad number '" + std::string(fields[first + i]) + "'");
    if (value == 0 || value > limits[i])
      return fail(index, std::string("bad ") + what + " '" + text +
                             "' (dimensions are positive, at most " +
                             std::to_string(limits[0]) + " " +
                             std::to_string(limits[1]) + " " +
                             std::to_string(limits[2]) + ")");
    dims[i] = static_cast<unsigned>(value);
  }
  return true;
}

bool PlanParser::parseLaunchArg(size_t index, std::string_view text,
                                const PlanKernel &kernel, LaunchArg &arg) {
  std::string quoted = "'" + std::string(text) + "'";
  size_t colon = text.find(':');
  std::string_view kind = text.substr(0, colon);
  std::string_view value = colon == std::string_view::npos
                               ? std::string_view()
                               : text.substr(colon + 1);
  bool inRange = true;
  bool ok = colon != std::string_view::npos;
  if (ok && kind == "tmap")
    return parseTensorMapArg(index, text, kernel, arg);
  if (ok && kind == "b") {
    arg.kind = LaunchArg::Kind::Buffer;
    uint64_t id;
    ok = parseUnsigned(value, id);
    if (ok && !checkArgBuffer(index, "launch argument " + quoted, value, id,
                              kernel))
      return false;
    arg.buffer = ok ? static_cast<unsigned>(id) : 0;
  } else if (ok && kind == "i64") {
    arg.kind = LaunchArg::Kind::I64;
    ok = parseInt(value, INT64_MIN, INT64_MAX, arg.integer, inRange);
  } else if (ok && kind == "i32") {
    arg.kind = LaunchArg::Kind::I32;
    ok = parseInt(value, INT32_MIN, INT32_MAX, arg.integer, inRange);
  } else if (ok && kind == "f32") {
    arg.kind = LaunchArg::Kind::F32;
    ok = parseF32(value, arg.real, inRange);
  } else {
    ok = false;
  }
  if (!ok)
    return fail(index, "bad launch argument " + quoted +
                           " (expected b:I, i64:V, i32:V, f32:V or " +
                           kTensorMapSyntax + ")");
  if (!inRange)
    return fail(index, "launch argument " + quoted + " is out of range for " +
                           std::string(kind));
  return true;
}

/// Whether launch argument `quoted`'s buffer `id` (written `idText`) is
/// one of `kernel`'s: an index into the step's buffer list.
bool PlanParser::checkArgBuffer(size_t index, const std::string &quoted,
                                std::string_view idText, uint64_t id,
                                const PlanKernel &kernel) {
  if (id < kernel.numArgs)
    return true;
  return fail(index, quoted + " names buffer " + std::string(idText) +
                         " of kernel '" + kernel.name + "', which takes " +
                         std::to_string(kernel.numArgs) + " buffers");
}

bool PlanParser::parseTensorMapArg(size_t index, std::string_view text,
                                   const PlanKernel &kernel, LaunchArg &arg) {
  arg.kind = LaunchArg::Kind::TensorMap;
  TensorMapArg &map = arg.tensorMap;
  std::string quoted = "launch argument '" + std::string(text) + "'";
  std::vector<std::string_view> parts = splitAt(text, ':');
  std::vector<uint64_t> dims, strides, box;
  uint64_t buffer, swizzle;
  if (parts.size() != 8 || !parseUnsigned(parts[1], buffer) ||
      !parseUnsigned(parts[2], map.offset) || !parseExtents(parts[4], dims) ||
      !parseExtents(parts[5], strides) || !parseExtents(parts[6], box) ||
      !parseUnsigned(parts[7], swizzle))
    return fail(index,
                "bad " + quoted + " (expected " + kTensorMapSyntax + ")");
  std::string dimsText(parts[4]), stridesText(parts[5]), boxText(parts[6]);
  if (!checkArgBuffer(index, quoted, parts[1], buffer, kernel))
    return false;
  arg.buffer = static_cast<unsigned>(buffer);
  // The driver's rules (cuTensorMapEncodeTiled), checked here so that a bad
  // map is a plan error with its line rather than a CUDA error at run time.
  if (map.offset % 16)
    return fail(index, quoted + " has offset " + std::string(parts[2]) +
                           ", which is not a multiple of 16");
  if (!parseDType(parts[3], map.dtype) ||
      (map.dtype != DType::BF16 && map.dtype != DType::F16 &&
       map.dtype != DType::F32))
    return fail(index, quoted + " has dtype '" + std::string(parts[3]) +
                           "' (a tensor map's is bf16, f16 or f32)");
  if (dims.empty() || dims.size() > kMaxTensorMapRank)
    return fail(index, quoted + " has " + countOf(dims.size(), "dim") +
                           " (a tensor map has 1 to " +
                           std::to_string(kMaxTensorMapRank) + ")");
  map.rank = static_cast<unsigned>(dims.size());
  for (unsigned i = 0; i < map.rank; ++i) {
    if (dims[i] == 0 || dims[i] > (uint64_t(1) << 32))
      return fail(index, quoted + " has dims '" + dimsText +
                             "' (each is 1 to 4294967296)");
    map.dims[i] = dims[i];
  }
  if (strides.size() != map.rank - 1)
    return fail(index, quoted + " has " + countOf(strides.size(), "stride") +
                           " for " + countOf(map.rank, "dim") +
                           " (one per dim but the innermost, '-' for none)");
  for (unsigned i = 0; i + 1 < map.rank; ++i) {
    if (strides[i] % 16 || strides[i] >= (uint64_t(1) << 40))
      return fail(index, quoted + " has strides '" + stridesText +
                             "' (each is a multiple of 16 below 2^40)");
    map.strides[i] = strides[i];
  }
  if (box.size() != map.rank)
    return fail(index, quoted + " has " + countOf(box.size(), "box extent") +
                           " for " + countOf(map.rank, "dim"));
  for (unsigned i = 0; i < map.rank; ++i) {
    if (box[i] == 0 || box[i] > 256)
      return fail(index, quoted + " has box '" + boxText +
                             "' (each extent is 1 to 256)");
    map.box[i] = static_cast<unsigned>(box[i]);
  }
  if (swizzle != 0 && swizzle != 32 && swizzle != 64 && swizzle != 128)
    return fail(index, quoted + " has swizzle " + std::string(parts[7]) +
                           " (expected 0, 32, 64 or 128)");
  map.swizzle = static_cast<unsigned>(swizzle);
  uint64_t innerBytes = map.box[0] * dtypeSize(map.dtype);
  std::string inner = quoted + " has an innermost box of " +
                      std::to_string(innerBytes) + " bytes (" +
                      std::to_string(map.box[0]) + " " + dtypeName(map.dtype) +
                      ")";
  if (innerBytes % 16)
    return fail(index, inner + ", which is not a multiple of 16");
  if (map.swizzle && innerBytes > map.swizzle)
    return fail(index, inner + ", wider than its " + std::to_string(swizzle) +
                           "-byte swizzle");
  return true;
}

bool PlanParser::checkTensorMapSpans(size_t index, const PlanStep &step) {
  const PlanKernel &kernel = plan.kernels[step.kernel];
  for (const PlanLaunch &launch : plan.launches) {
    if (launch.kernel != step.kernel)
      continue;
    for (const LaunchArg &arg : launch.args) {
      if (arg.kind != LaunchArg::Kind::TensorMap)
        continue;
      const PlanBuffer &buffer = plan.buffers[step.buffers[arg.buffer]];
      uint64_t span = tensorMapSpan(arg.tensorMap);
      if (span <= buffer.bytes)
        continue;
      return fail(index, "step runs kernel '" + kernel.name + "' on buffer '" +
                             buffer.name + "' (" +
                             std::to_string(buffer.bytes) +
                             " bytes), but launch argument '" +
                             formatLaunchArg(arg) + "' of its launch on line " +
                             std::to_string(launch.line) + " spans " +
                             (span == UINT64_MAX ? std::string("over 2^64")
                                                 : std::to_string(span)) +
                             " bytes of it");
    }
  }
  return true;
}

bool PlanParser::parseLaunch(size_t index) {
  if (fields.size() < 9)
    return fail(index, "expected 'launch KERNEL FUNCTION GX GY GZ BX BY BZ "
                       "ARG... [shared:BYTES]'");
  if (!plan.gpuImage.present)
    return fail(index, "'launch' record without a 'gpu-image' record");
  auto known = kernelIds.find(fields[1]);
  if (known == kernelIds.end())
    return fail(index,
                "launch names unknown kernel '" + std::string(fields[1]) + "'");
  const PlanKernel &kernel = plan.kernels[known->second];
  PlanLaunch launch;
  launch.kernel = known->second;
  launch.line = static_cast<unsigned>(index + 1);
  if (!isValidName(fields[2]))
    return fail(index, "bad name '" + std::string(fields[2]) +
                           "' (names are [A-Za-z0-9_.]+)");
  launch.function = std::string(fields[2]);
  // CUDA's limits on every device since compute capability 3.0.
  static const unsigned kGridLimits[3] = {2147483647u, 65535u, 65535u};
  static const unsigned kBlockLimits[3] = {1024u, 1024u, 64u};
  if (!parseDims(index, 3, "grid", kGridLimits, launch.grid) ||
      !parseDims(index, 6, "block", kBlockLimits, launch.block))
    return false;
  uint64_t threads = static_cast<uint64_t>(launch.block[0]) * launch.block[1] *
                     launch.block[2];
  if (threads > 1024)
    return fail(index, "block " + std::string(fields[6]) + " " +
                           std::string(fields[7]) + " " +
                           std::string(fields[8]) + " has " +
                           std::to_string(threads) + " threads (at most 1024)");
  // `shared:BYTES`, the dynamic shared memory, is not an argument: at most
  // one, after them all.
  size_t end = fields.size();
  size_t shared = end;
  for (size_t i = 9; i < end; ++i) {
    if (fields[i].substr(0, 7) != "shared:")
      continue;
    if (shared != end)
      return fail(index, "duplicate '" + std::string(fields[i]) +
                             "' (a launch has at most one shared:BYTES)");
    shared = i;
  }
  if (shared != end && shared != end - 1)
    return fail(index, "'" + std::string(fields[shared]) +
                           "' must be the last token of the launch record");
  if (shared != end) {
    std::string quoted = "'" + std::string(fields[shared]) + "'";
    std::string_view digits = fields[shared].substr(7);
    uint64_t bytes;
    if (!parseDigits(digits, bytes))
      return fail(index, "bad dynamic shared memory size " + quoted +
                             " (expected shared:BYTES, a positive number)");
    if (bytes == 0)
      return fail(index, "dynamic shared memory size " + quoted +
                             " must be positive (leave it out for none)");
    if (bytes > static_cast<uint64_t>(kMaxLaunchSharedBytes))
      return fail(index, "dynamic shared memory size " + quoted +
                             " is more than " +
                             std::to_string(kMaxLaunchSharedBytes) + " bytes");
    launch.sharedBytes = static_cast<int64_t>(bytes);
    end = shared;
  }
  for (size_t i = 9; i < end; ++i) {
    LaunchArg arg;
    if (!parseLaunchArg(index, fields[i], kernel, arg))
      return false;
    launch.args.push_back(arg);
  }
  plan.launches.push_back(std::move(launch));
  return true;
}

bool PlanParser::parseStep(size_t index) {
  if (fields.size() < 2)
    return fail(index, "expected 'step KERNEL ID...'");
  auto known = kernelIds.find(fields[1]);
  if (known == kernelIds.end())
    return fail(index,
                "step names unknown kernel '" + std::string(fields[1]) + "'");
  PlanStep step;
  step.kernel = known->second;
  step.line = static_cast<unsigned>(index + 1);
  for (size_t i = 2; i < fields.size(); ++i) {
    uint64_t id;
    if (!parseUnsigned(fields[i], id))
      return fail(index, "bad number '" + std::string(fields[i]) + "'");
    if (id >= plan.buffers.size())
      return fail(index, "step names unknown buffer " + std::string(fields[i]) +
                             " (the plan has " +
                             std::to_string(plan.buffers.size()) + " buffers)");
    step.buffers.push_back(static_cast<unsigned>(id));
  }
  const PlanKernel &kernel = plan.kernels[step.kernel];
  if (step.buffers.size() != kernel.numArgs)
    return fail(index, "step runs kernel '" + kernel.name + "' on " +
                           std::to_string(step.buffers.size()) +
                           " buffers, but it takes " +
                           std::to_string(kernel.numArgs));
  if (!checkTensorMapSpans(index, step) || !placeInSection(index, step))
    return false;
  plan.steps.push_back(std::move(step));
  return true;
}

bool PlanParser::parseAxes(size_t index, std::string_view text,
                           std::vector<unsigned> &axes) {
  std::vector<bool> used(plan.mesh.axes.size(), false);
  for (std::string_view name : splitAt(text, ',')) {
    if (name.empty())
      return fail(index, "bad mesh axes '" + std::string(text) +
                             "' (expected axis names separated by ',')");
    int axis = plan.mesh.findAxis(name);
    if (axis < 0)
      return fail(index, "collective names unknown mesh axis '" +
                             std::string(name) +
                             "' (the mesh's axes: " + meshAxisNames() + ")");
    if (used[axis])
      return fail(index, "mesh axis '" + std::string(name) +
                             "' appears twice in '" + std::string(text) + "'");
    used[axis] = true;
    axes.push_back(static_cast<unsigned>(axis));
  }
  return true;
}

bool PlanParser::parseOptimizer(size_t index) {
  if (fields.size() < 3)
    return fail(index, "expected 'optimizer KIND STEPS [NAME=VALUE...]'");
  std::string_view kind = fields[1];
  if (kind != "sgd" && kind != "adam" && kind != "adamw")
    return fail(index, "unknown optimizer '" + std::string(kind) +
                           "' (expected sgd, adam or adamw)");
  if (plan.forwardMicrobatches())
    return fail(index, "a training step gives its microbatches as "
                       "microbatches= of its 'optimizer' record, not as a "
                       "'microbatches' record");
  PlanOptimizer &optimizer = plan.optimizer;
  optimizer.kind = std::string(kind);
  if (!parseUnsigned(fields[2], optimizer.steps) || optimizer.steps == 0)
    return fail(index, "bad number of steps '" + std::string(fields[2]) +
                           "' (expected a positive integer)");
  for (size_t i = 3; i < fields.size(); ++i) {
    size_t equals = fields[i].find('=');
    std::string_view name = fields[i].substr(0, equals);
    std::string value(equals == std::string_view::npos
                          ? std::string_view()
                          : fields[i].substr(equals + 1));
    if (name == "microbatches") {
      uint64_t count = 0;
      if (!parseUnsigned(value, count) || count == 0 || count > kMaxMicrobatches)
        return fail(index, "bad microbatches '" + value +
                               "' (expected an integer from 1 to " +
                               std::to_string(kMaxMicrobatches) + ")");
      optimizer.microbatches = count;
      continue;
    }
    // The two settings that are words.
    if (name == "lr_schedule" || name == "loss_scale") {
      bool schedule = name == "lr_schedule";
      std::initializer_list<const char *> known =
          schedule ? std::initializer_list<const char *>{"constant", "warmup_cosine",
                                                         "warmup_linear"}
                   : std::initializer_list<const char *>{"none", "static", "dynamic"};
      bool ok = false;
      for (const char *word : known)
        ok |= value == word;
      if (!ok)
        return fail(index, "bad " + std::string(name) + " '" + value +
                               (schedule ? "' (expected constant, warmup_cosine or warmup_linear)"
                                         : "' (expected none, static or dynamic)"));
      (schedule ? optimizer.lrSchedule : optimizer.lossScale) = value;
      continue;
    }
    char *end = nullptr;
    double number = isDecimalText(value) ? std::strtod(value.c_str(), &end) : 0;
    if (name.empty() || !end || end != value.c_str() + value.size() ||
        !std::isfinite(number) || number < 0)
      return fail(index, "bad hyperparameter '" + std::string(fields[i]) +
                             "' (expected NAME=VALUE, a number >= 0)");
    for (const auto &[known, ignored] : optimizer.hyperparameters)
      if (known == name)
        return fail(index, "hyperparameter '" + std::string(name) +
                               "' given twice");
    optimizer.hyperparameters.emplace_back(std::string(name), number);
  }
  return true;
}

bool PlanParser::parseAccumulate(size_t index) {
  if (!expectFields(index, 3, "accumulate IN OUT"))
    return false;
  PlanStep step;
  step.kind = StepKind::Accumulate;
  step.line = static_cast<unsigned>(index + 1);
  unsigned in, out;
  if (!parseBufferId(index, fields[1], "accumulate", in) ||
      !parseBufferId(index, fields[2], "accumulate", out))
    return false;
  if (in == out)
    return fail(index, "accumulate reads and writes the same buffer " +
                           std::string(fields[1]));
  const PlanBuffer &source = plan.buffers[in];
  const PlanBuffer &target = plan.buffers[out];
  if (source.role != BufferRole::Temp ||
      (target.role != BufferRole::Temp && target.role != BufferRole::Output))
    return fail(index, "an accumulate reads a temp and writes a temp or an "
                       "output ('" + source.name + "' is " +
                           roleName(source.role) + ", '" + target.name +
                           "' " + roleName(target.role) + ")");
  if (source.dtype != DType::F32 || target.dtype != DType::F32 ||
      source.shape != target.shape)
    return fail(index, "an accumulate needs two f32 buffers of one shape ('" +
                           source.name + "' is " + dtypeName(source.dtype) +
                           " " + formatShape(source.shape) + ", '" +
                           target.name + "' " + dtypeName(target.dtype) + " " +
                           formatShape(target.shape) + ")");
  if (source.offset < target.offset + target.bytes &&
      target.offset < source.offset + source.bytes)
    return fail(index, "accumulate buffers '" + source.name + "' and '" +
                           target.name + "' share arena bytes");
  for (const PlanStep &other : plan.steps)
    if (other.kind == StepKind::Accumulate && other.buffers[1] == out)
      return fail(index, "buffer '" + target.name +
                             "' is the result of two accumulates");
  step.buffers = {in, out};
  if (!placeInSection(index, step))
    return false;
  plan.steps.push_back(std::move(step));
  return true;
}

bool PlanParser::parseMicrobatches(size_t index) {
  if (!expectFields(index, 2, "microbatches M"))
    return false;
  uint64_t count;
  if (!parseUnsigned(fields[1], count) || count < 2 || count > kMaxMicrobatches)
    return fail(index, "bad microbatches '" + std::string(fields[1]) +
                           "' (expected an integer from 2 to " +
                           std::to_string(kMaxMicrobatches) + ")");
  plan.optimizer.microbatches = count;
  plan.forwardMicrobatchesLine = static_cast<unsigned>(index + 1);
  return true;
}

bool PlanParser::parseAssemble(size_t index) {
  if (!expectFields(index, 3, "assemble OUTPUT rows|mean|sum"))
    return false;
  if (!plan.forwardMicrobatches())
    return fail(index, "'assemble' without a 'microbatches' record");
  unsigned id;
  if (!parseBufferId(index, fields[1], "assemble", id))
    return false;
  PlanBuffer &buffer = plan.buffers[id];
  if (buffer.role != BufferRole::Output)
    return fail(index, "an assemble belongs to an output, not to " +
                           std::string(roleName(buffer.role)) + " '" +
                           buffer.name + "'");
  if (buffer.assembly != Assembly::None)
    return fail(index, "output '" + buffer.name + "' is assembled twice");
  std::string_view kind = fields[2];
  if (kind == "rows" && !buffer.shape.empty())
    buffer.assembly = Assembly::Rows;
  else if (kind == "mean" && buffer.dtype == DType::F32)
    buffer.assembly = Assembly::Mean;
  else if (kind == "sum" && (buffer.dtype == DType::F32 ||
                             buffer.dtype == DType::I32 || buffer.dtype == DType::I64))
    buffer.assembly = Assembly::Sum;
  else
    return fail(index, "output '" + buffer.name + "' (" +
                           dtypeName(buffer.dtype) + " " + formatShape(buffer.shape) +
                           ") cannot be assembled by '" + std::string(kind) +
                           "' (rows: a tensor of rank >= 1; mean: f32; sum: "
                           "f32, i32 or i64)");
  return true;
}

bool PlanParser::checkMicrobatches(size_t endIndex) {
  size_t boundary = plan.microbatchSteps();
  uint64_t count = plan.optimizer.microbatches;
  if (plan.forwardMicrobatches()) {
    if (boundary)
      return fail(plan.steps[boundary - 1].line - 1,
                  "an 'accumulate' step in a forward with a 'microbatches' "
                  "record (a training step gives them as microbatches= of its "
                  "'optimizer' record)");
    for (const PlanBuffer &buffer : plan.buffers)
      if (buffer.role == BufferRole::Output && buffer.assembly == Assembly::None)
        return fail(endIndex, "output '" + buffer.name +
                                  "' of a forward in microbatches has no "
                                  "'assemble' record");
    return true;
  }
  if (boundary && count < 2)
    return fail(plan.steps[boundary - 1].line - 1,
                "an 'accumulate' step needs an 'optimizer' record with "
                "microbatches=M, M >= 2");
  if (!boundary && count > 1)
    return fail(endIndex, "microbatches=" + std::to_string(count) +
                              " without an 'accumulate' step");
  if (!boundary)
    return true;
  std::vector<StepAccess> access = analyzeStepAccess(plan);
  std::vector<bool> carried(plan.buffers.size(), false), written = carried;
  for (size_t i = 0; i < boundary; ++i) {
    const PlanStep &step = plan.steps[i];
    if (step.kind == StepKind::Accumulate)
      carried[step.buffers[1]] = true;
    for (size_t k = 0; k < step.buffers.size(); ++k)
      if (access[i].buffers[k] != BufferAccess::Read)
        written[step.buffers[k]] = true;
  }
  for (size_t i = boundary; i < plan.steps.size(); ++i)
    for (unsigned id : plan.steps[i].buffers)
      if (unsigned bytes = plan.buffers[id].bytesId(); written[bytes] && !carried[bytes])
        return fail(plan.steps[i].line - 1,
                    "this step reads buffer '" + plan.buffers[id].name +
                        "', which a step of the microbatches wrote: past the "
                        "last 'accumulate' only accumulates' results carry "
                        "values");
  return true;
}

bool PlanParser::parseUpdate(size_t index) {
  if (!expectFields(index, 3, "update OUTPUT PARAM"))
    return false;
  if (plan.optimizer.kind.empty())
    return fail(index, "'update' without an 'optimizer' record");
  PlanUpdate update;
  if (!parseBufferId(index, fields[1], "update", update.output) ||
      !parseBufferId(index, fields[2], "update", update.param))
    return false;
  const PlanBuffer &out = plan.buffers[update.output];
  const PlanBuffer &param = plan.buffers[update.param];
  if (out.role != BufferRole::Output || param.role != BufferRole::Param)
    return fail(index, "an update copies an output into a param ('" +
                           out.name + "' is " + roleName(out.role) + ", '" +
                           param.name + "' " + roleName(param.role) + ")");
  if (out.dtype != param.dtype || out.shape != param.shape ||
      out.shard != param.shard || out.held != param.held)
    return fail(index, "output '" + out.name + "' cannot update param '" +
                           param.name + "': their dtype, shape, sharding or "
                           "holding ranks differ");
  for (const PlanUpdate &other : plan.updates)
    if (other.param == update.param || other.output == update.output)
      return fail(index, "param '" + param.name + "' or output '" + out.name +
                             "' is in two updates");
  plan.updates.push_back(update);
  return true;
}

bool PlanParser::parseBufferId(size_t index, std::string_view text,
                               const char *what, unsigned &id) {
  uint64_t value;
  if (!parseUnsigned(text, value))
    return fail(index, "bad number '" + std::string(text) + "'");
  if (value >= plan.buffers.size())
    return fail(index, std::string(what) + " names unknown buffer " +
                           std::string(text) + " (the plan has " +
                           std::to_string(plan.buffers.size()) + " buffers)");
  id = static_cast<unsigned>(value);
  return true;
}

bool PlanParser::parseCollectiveDim(size_t index, std::string_view text,
                                    const PlanBuffer &buffer, const char *what,
                                    unsigned &dim) {
  uint64_t value;
  if (!parseUnsigned(text, value))
    return fail(index, "bad number '" + std::string(text) + "'");
  if (value >= buffer.shape.size())
    return fail(index, std::string(what) + " " + std::string(text) +
                           " is out of range for buffer '" + buffer.name +
                           "' " + formatShape(buffer.shape));
  dim = static_cast<unsigned>(value);
  return true;
}

bool PlanParser::parseCollective(size_t index) {
  // An all-reduce may carry a gradient bucket: more IN OUT pairs, summed as
  // one message.
  if (fields.size() > 1 && fields[1] == "all-reduce") {
    if (fields.size() < 6 || fields.size() % 2)
      return fail(index, "expected 'collective all-reduce AXES - IN OUT "
                         "[IN OUT]...'");
  } else if (!expectFields(index, 6, "collective KIND AXES DIMS IN OUT")) {
    return false;
  }
  if (!plan.mesh.present)
    return fail(index, "'collective' record without a 'mesh' record");
  PlanStep step;
  step.kind = StepKind::Collective;
  step.line = static_cast<unsigned>(index + 1);
  PlanCollective &op = step.collective;
  std::string_view kind = fields[1];
  bool found = false;
  for (unsigned k = 0; k < kNumCollectiveKinds && !found; ++k)
    if (kind == collectiveKindName(static_cast<CollectiveKind>(k))) {
      op.kind = static_cast<CollectiveKind>(k);
      found = true;
    }
  if (!found)
    return fail(index, "unknown collective '" + std::string(kind) +
                           "' (expected all-reduce, all-gather, "
                           "reduce-scatter, all-slice, all-to-all or "
                           "broadcast)");
  std::string quoted = "collective '" + std::string(kind) + "'";
  if (!parseAxes(index, fields[2], op.axes))
    return false;
  for (unsigned axis : op.axes)
    op.groupSize *= plan.mesh.axes[axis].size; // at most kMaxMeshRanks
  unsigned in, out;
  if (!parseBufferId(index, fields[4], "collective", in) ||
      !parseBufferId(index, fields[5], "collective", out))
    return false;
  const PlanBuffer &source = plan.buffers[in];
  const PlanBuffer &target = plan.buffers[out];
  if (in == out)
    return fail(index, "collective reads and writes the same buffer " +
                           std::string(fields[4]));
  if (source.dtype != target.dtype)
    return fail(index, quoted + " from " + dtypeName(source.dtype) +
                           " buffer '" + source.name + "' into " +
                           dtypeName(target.dtype) + " buffer '" + target.name +
                           "' (the dtypes must agree)");

  std::string_view dims = fields[3];
  Shape expected = source.shape;
  uint64_t n = op.groupSize;
  std::string group = "over " + std::string(fields[2]) + " (" +
                      std::to_string(n) + " rank" + (n == 1 ? "" : "s") + ")";
  auto divide = [&](unsigned dim) {
    if (static_cast<uint64_t>(expected[dim]) % n)
      return fail(index, "dim " + std::to_string(dim) + " of buffer '" +
                             source.name + "' " + formatShape(source.shape) +
                             " is not divisible by the group size " +
                             std::to_string(n) + " (" + std::string(fields[2]) +
                             ")");
    expected[dim] /= static_cast<int64_t>(n);
    return true;
  };
  auto multiply = [&](unsigned dim) {
    if (static_cast<uint64_t>(expected[dim]) >
        static_cast<uint64_t>(INT64_MAX) / n)
      return fail(index, quoted + " " + group + " makes buffer '" +
                             source.name + "' too large");
    expected[dim] *= static_cast<int64_t>(n);
    return true;
  };
  switch (op.kind) {
  case CollectiveKind::AllReduce:
  case CollectiveKind::Broadcast:
    if (dims != "-")
      return fail(index, quoted + " takes '-' for DIMS, got '" +
                             std::string(dims) + "'");
    break;
  case CollectiveKind::AllGather:
    if (!parseCollectiveDim(index, dims, source, "dim", op.dim) ||
        !multiply(op.dim))
      return false;
    break;
  case CollectiveKind::ReduceScatter:
  case CollectiveKind::AllSlice:
    if (!parseCollectiveDim(index, dims, source, "dim", op.dim) ||
        !divide(op.dim))
      return false;
    break;
  case CollectiveKind::AllToAll: {
    size_t colon = dims.find(':');
    if (colon == std::string_view::npos)
      return fail(index, quoted +
                             " takes 'S:C' for DIMS (the split and the "
                             "concatenation dims), got '" +
                             std::string(dims) + "'");
    if (!parseCollectiveDim(index, dims.substr(0, colon), source, "split dim",
                            op.dim) ||
        !parseCollectiveDim(index, dims.substr(colon + 1), source,
                            "concatenation dim", op.concatDim) ||
        !divide(op.dim) || !multiply(op.concatDim))
      return false;
    break;
  }
  }
  if (target.shape != expected)
    return fail(index, quoted + " " + group + " turns buffer '" + source.name +
                           "' " + formatShape(source.shape) + " into " +
                           formatShape(expected) + ", but buffer '" +
                           target.name + "' is " + formatShape(target.shape));
  step.buffers = {in, out};
  // The bucket's other pairs: each an all-reduce of its own, of the first
  // pair's dtype (one message holds them), no buffer named twice.
  for (size_t field = 6; field + 1 < fields.size(); field += 2) {
    unsigned pairIn, pairOut;
    if (!parseBufferId(index, fields[field], "collective", pairIn) ||
        !parseBufferId(index, fields[field + 1], "collective", pairOut))
      return false;
    const PlanBuffer &a = plan.buffers[pairIn];
    const PlanBuffer &b = plan.buffers[pairOut];
    for (unsigned id : {pairIn, pairOut}) {
      if (std::find(step.buffers.begin(), step.buffers.end(), id) !=
          step.buffers.end())
        return fail(index, quoted + " names buffer '" +
                               plan.buffers[id].name + "' twice");
      step.buffers.push_back(id);
    }
    if (a.dtype != source.dtype || b.dtype != source.dtype)
      return fail(index, quoted + " sums " + dtypeName(source.dtype) +
                             " buffers, but pair '" + a.name + "' -> '" +
                             b.name + "' is " + dtypeName(a.dtype) + " -> " +
                             dtypeName(b.dtype) +
                             " (one message holds every pair)");
    if (a.shape != b.shape)
      return fail(index, quoted + " turns buffer '" + a.name + "' " +
                             formatShape(a.shape) + " into buffer '" + b.name +
                             "' " + formatShape(b.shape) +
                             " (the shapes must agree)");
  }
  // Every member reads its INs while others write their OUTs (NCCL runs a
  // bucket's pairs at once): no two of the step's buffers share bytes.
  std::vector<unsigned> byOffset = step.buffers;
  std::sort(byOffset.begin(), byOffset.end(), [&](unsigned a, unsigned b) {
    return plan.buffers[a].offset < plan.buffers[b].offset;
  });
  for (size_t i = 1; i < byOffset.size(); ++i) {
    const PlanBuffer &below = plan.buffers[byOffset[i - 1]];
    const PlanBuffer &above = plan.buffers[byOffset[i]];
    if (below.offset + below.bytes > above.offset)
      return fail(index, quoted + " buffers '" + below.name + "' and '" +
                             above.name + "' share arena bytes");
  }
  if (!placeInSection(index, step))
    return false;
  plan.steps.push_back(std::move(step));
  return true;
}

const char *loom::runtime::stepPhaseName(StepPhase phase) {
  switch (phase) {
  case StepPhase::Forward:
    return "forward";
  case StepPhase::Backward:
    return "backward";
  case StepPhase::Weight:
    return "weight";
  case StepPhase::Update:
    return "update";
  }
  return "?";
}

bool PlanParser::parsePipeline(size_t index) {
  if (!expectFields(index, 4, "pipeline AXIS STAGES SCHEDULE"))
    return false;
  if (!plan.mesh.present)
    return fail(index, "'pipeline' record without a 'mesh' record");
  PlanPipeline &pipeline = plan.pipeline;
  int axis = plan.mesh.findAxis(fields[1]);
  if (axis < 0)
    return fail(index, "the pipeline axis '" + std::string(fields[1]) +
                           "' is not an axis of mesh '" + plan.mesh.name +
                           "' (" + meshAxisNames() + ")");
  pipeline.axis = static_cast<unsigned>(axis);
  uint64_t stages;
  unsigned ranks = plan.mesh.axes[pipeline.axis].size;
  if (!parseUnsigned(fields[2], stages) || stages == 0 || stages > 65536)
    return fail(index, "bad stage count '" + std::string(fields[2]) +
                           "' (expected 1 to 65536)");
  if (stages % ranks != 0)
    return fail(index, std::to_string(stages) + " stages cannot be dealt "
                       "evenly over the " + std::to_string(ranks) +
                       " ranks of axis '" + std::string(fields[1]) + "'");
  pipeline.stages = static_cast<unsigned>(stages);
  ScheduleKind kind;
  if (!parseScheduleKind(fields[3], kind))
    return fail(index, "unknown schedule '" + std::string(fields[3]) +
                           "' (expected gpipe, 1f1b, interleaved or "
                           "zero_bubble)");
  pipeline.schedule = std::string(fields[3]);
  pipeline.forwardCarry.assign(pipeline.stages, {});
  pipeline.backwardCarry.assign(pipeline.stages, {});
  pipeline.present = true;
  pipeline.line = static_cast<unsigned>(index + 1);
  return true;
}

/// A comma-separated list of distinct stages below `stages`.
static bool parseStageList(std::string_view text, unsigned stages,
                           std::vector<unsigned> &list) {
  list.clear();
  for (std::string_view piece : splitAt(text, ',')) {
    uint64_t stage;
    if (!parseUnsigned(piece, stage) || stage >= stages)
      return false;
    for (unsigned seen : list)
      if (seen == stage)
        return false;
    list.push_back(static_cast<unsigned>(stage));
  }
  return !list.empty();
}

bool PlanParser::parseSection(size_t index) {
  if (!expectFields(index, 3, "section PHASE STAGES"))
    return false;
  if (!plan.pipeline.present)
    return fail(index, "'section' record without a 'pipeline' record");
  bool known = false;
  for (StepPhase phase : {StepPhase::Forward, StepPhase::Backward,
                          StepPhase::Weight, StepPhase::Update})
    if (fields[1] == stepPhaseName(phase)) {
      section.phase = phase;
      known = true;
    }
  if (!known)
    return fail(index, "unknown phase '" + std::string(fields[1]) +
                           "' (expected forward, backward, weight or update)");
  if (!parseStageList(fields[2], plan.pipeline.stages, section.stages))
    return fail(index, "bad stages '" + std::string(fields[2]) +
                           "' (expected distinct stages below " +
                           std::to_string(plan.pipeline.stages) +
                           ", separated by ',')");
  if (section.phase != StepPhase::Update && section.stages.size() != 1)
    return fail(index, std::string("a ") + stepPhaseName(section.phase) +
                           " section belongs to one stage");
  inSection = true;
  return true;
}

bool PlanParser::placeInSection(size_t index, PlanStep &step) {
  if (!plan.pipeline.present)
    return true;
  if (!inSection)
    return fail(index, "a step of a pipelined plan needs a 'section' record "
                       "before it");
  step.phase = section.phase;
  step.stages = section.stages;
  return true;
}

bool PlanParser::parseCarry(size_t index) {
  if (fields.size() < 4)
    return fail(index, "expected 'carry forward|backward STAGE ID...'");
  if (!plan.pipeline.present)
    return fail(index, "'carry' record without a 'pipeline' record");
  bool forward = fields[1] == "forward";
  if (!forward && fields[1] != "backward")
    return fail(index, "bad carry direction '" + std::string(fields[1]) +
                           "' (expected forward or backward)");
  uint64_t stage;
  unsigned stages = plan.pipeline.stages;
  if (!parseUnsigned(fields[2], stage) || stage >= stages ||
      (forward && stage + 1 == stages) || (!forward && stage == 0))
    return fail(index, "bad carry stage '" + std::string(fields[2]) + "' (a " +
                           std::string(fields[1]) + " carry leaves a stage " +
                           (forward ? "below " + std::to_string(stages - 1)
                                    : std::string("above 0")) + ")");
  std::vector<unsigned> &carry = forward ? plan.pipeline.forwardCarry[stage]
                                         : plan.pipeline.backwardCarry[stage];
  if (!carry.empty())
    return fail(index, "duplicate carry " + std::string(fields[1]) + " " +
                           std::string(fields[2]));
  for (size_t i = 3; i < fields.size(); ++i) {
    unsigned id;
    if (!parseBufferId(index, fields[i], "carry", id))
      return false;
    const PlanBuffer &buffer = plan.buffers[id];
    if (buffer.role != BufferRole::Temp && buffer.role != BufferRole::Output)
      return fail(index, "a carry moves temps and outputs, not " +
                             std::string(roleName(buffer.role)) + " '" +
                             buffer.name + "'");
    carry.push_back(id);
  }
  return true;
}

bool PlanParser::parseTransfer(size_t index) {
  if (!expectFields(index, 4, "transfer FROM TO ID"))
    return false;
  if (!plan.pipeline.present)
    return fail(index, "'transfer' record without a 'pipeline' record");
  PlanStep step;
  step.kind = StepKind::Transfer;
  step.line = static_cast<unsigned>(index + 1);
  uint64_t from, to;
  unsigned stages = plan.pipeline.stages;
  if (!parseUnsigned(fields[1], from) || !parseUnsigned(fields[2], to) ||
      from >= stages || to >= stages || from == to)
    return fail(index, "bad transfer stages '" + std::string(fields[1]) +
                           " " + std::string(fields[2]) +
                           "' (two different stages below " +
                           std::to_string(stages) + ")");
  step.from = static_cast<unsigned>(from);
  step.to = static_cast<unsigned>(to);
  unsigned id;
  if (!parseBufferId(index, fields[3], "transfer", id))
    return false;
  step.buffers = {id};
  if (!placeInSection(index, step))
    return false;
  if (step.phase != StepPhase::Update)
    return fail(index, "a transfer belongs to an update section (between "
                       "microbatches, stages exchange values by 'carry')");
  plan.steps.push_back(std::move(step));
  return true;
}

bool PlanParser::checkPipeline(size_t endIndex) {
  if (!plan.pipeline.present)
    return true;
  // Every loop step of a stage comes before the update's, so that the
  // schedule runs a contiguous prefix.
  bool updating = false;
  for (const PlanStep &step : plan.steps) {
    if (step.phase == StepPhase::Update)
      updating = true;
    else if (updating)
      return fail(step.line - 1, std::string("a ") + stepPhaseName(step.phase) +
                                     " step after an update step");
  }
  (void)endIndex;
  return true;
}

/// The initializer as a record writes it, for messages.
static std::string formatInitializer(const Initializer &init) {
  char args[64] = "";
  if (init.kind == InitKind::Constant || init.kind == InitKind::Normal)
    std::snprintf(args, sizeof(args), " %.17g", init.a);
  else if (init.kind == InitKind::Uniform)
    std::snprintf(args, sizeof(args), " %.17g %.17g", init.a, init.b);
  return initKindName(init.kind) + std::string(args);
}

/// "an input", "a param", "an output", "a temp".
static std::string withArticle(BufferRole role) {
  bool vowel = role == BufferRole::Input || role == BufferRole::Output;
  return (vowel ? "an " : "a ") + std::string(roleName(role));
}

bool loom::runtime::checkPartitionedPlan(const Plan &whole, const Plan &spmd,
                                         std::string &error) {
  auto fail = [&](unsigned line, const std::string &message) {
    error = "plan:" + (line ? std::to_string(line) + ":" : std::string()) +
            " " + message;
    return false;
  };
  if (!spmd.mesh.present)
    return fail(0, "a partitioned plan needs a 'mesh' record");
  if (spmd.model != whole.model)
    return fail(2, "model '" + spmd.model +
                       "' differs from the unpartitioned plan's '" +
                       whole.model + "'");
  if (spmd.optimizer.microbatches != whole.optimizer.microbatches)
    return fail(0, "the partitioned plan runs " +
                       std::to_string(spmd.optimizer.microbatches) +
                       " microbatches per step, the unpartitioned one " +
                       std::to_string(whole.optimizer.microbatches));
  auto describe = [](const PlanBuffer &buffer, const Shape &shape) {
    return std::string(dtypeName(buffer.dtype)) + " " + formatShape(shape);
  };
  // Every input, param and output of one plan is one of the other, with
  // the same role, dtype, whole shape and initializer.
  for (const PlanBuffer &buffer : spmd.buffers) {
    if (buffer.role == BufferRole::Temp)
      continue;
    std::string what =
        std::string(roleName(buffer.role)) + " '" + buffer.name + "'";
    const PlanBuffer *other = whole.findBuffer(buffer.name);
    if (!other || other->role != buffer.role)
      return fail(buffer.line, what + " is not " + withArticle(buffer.role) +
                                   " of the unpartitioned plan");
    if (other->dtype != buffer.dtype || other->shape != buffer.globalShape)
      return fail(buffer.line,
                  what + " is " + describe(buffer, buffer.globalShape) +
                      " as a whole (" + describe(buffer, buffer.shape) +
                      " per rank), but " + describe(*other, other->shape) +
                      " in the unpartitioned plan");
    if (other->assembly != buffer.assembly)
      return fail(buffer.line, what + " is assembled from its microbatches by " +
                                   assemblyName(buffer.assembly) + ", but by " +
                                   assemblyName(other->assembly) +
                                   " in the unpartitioned plan");
    if (other->init.kind != buffer.init.kind ||
        other->init.a != buffer.init.a || other->init.b != buffer.init.b)
      return fail(buffer.line, what + " is initialized with " +
                                   formatInitializer(buffer.init) +
                                   ", but with " +
                                   formatInitializer(other->init) +
                                   " in the unpartitioned plan");
  }
  for (const PlanBuffer &buffer : whole.buffers) {
    if (buffer.role == BufferRole::Temp)
      continue;
    const PlanBuffer *other = spmd.findBuffer(buffer.name);
    if (!other || other->role != buffer.role)
      return fail(other ? other->line : 0,
                  "the unpartitioned plan's " +
                      std::string(roleName(buffer.role)) + " '" + buffer.name +
                      "' (" + describe(buffer, buffer.shape) + ") is missing");
  }
  return true;
}

bool loom::runtime::parsePlan(std::string_view text, Plan &plan,
                              std::string &error) {
  return PlanParser(text, plan, error).parse();
}
