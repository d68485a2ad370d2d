//===- PlanParser.h - The plan parser's records, fields and state ---------===//
//
// Private to runtime/lib/plan: the parser's member functions are defined by
// record family (PlanParser.cpp, PlanStepRecords.cpp,
// PlanTrainingRecords.cpp) over the field parsers of PlanFields.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_LIB_PLAN_PLANPARSER_H
#define LOOM_RUNTIME_LIB_PLAN_PLANPARSER_H

#include "loom/runtime/plan/Plan.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace loom::runtime::plan_text {
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
inline constexpr const char *kRankNames[] = {
    "loom-plan", "model",  "device", "mesh", "pipeline", "arena",
    "gpu-image", "buffer", "kernel", "launch", "step", "microbatches",
    "assemble", "optimizer", "update"};
inline constexpr const char *kTensorMapSyntax =
    "tmap:BUFFER:OFFSET:DTYPE:DIMS:STRIDES:BOX:SWIZZLE";
inline constexpr const char *kOrder =
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
inline constexpr RecordInfo kRecords[] = {
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
bool isSingle(int rank);

/// The next record that must appear after a record of rank `stage` (below
/// RankArena): model, device and arena are required, the mesh is not.
int nextRequired(int stage);

Record recordOf(std::string_view name);

/// A decimal integer with an optional '-', within [lo, hi].
bool parseInt(std::string_view text, int64_t lo, int64_t hi, int64_t &value,
              bool &inRange);

/// Whether `text` has only the characters of a decimal float (digits, '.',
/// an exponent, signs), so that strtof/strtod take nothing else: no hex,
/// "inf", "nan" or leading spaces.
bool isDecimalText(std::string_view text);

/// An f32 as %.9g writes it: decimal, or inf, -inf, nan, -nan (printf's
/// spellings of the values a float constant may hold). `inRange` is false
/// for a finite number beyond the f32 range.
bool parseF32(std::string_view text, float &value, bool &inRange);

/// A finite decimal float as %.17g writes it (strtod alone would also take
/// hex, "inf", "nan" and leading spaces).
bool parseFloat(std::string_view text, double &value);

bool isValidName(std::string_view name);

/// Mesh axis names: [A-Za-z_][A-Za-z0-9_]* (no '.', so that they never
/// read as numbers or collide with the spec syntax).
bool isValidAxisName(std::string_view name);

/// Splits `text` at every `separator`; empty pieces are kept.
std::vector<std::string_view> splitAt(std::string_view text, char separator);

/// Decimal digits only: true with `value`, UINT64_MAX if they do not fit
/// (so that a huge number is out of range rather than malformed).
bool parseDigits(std::string_view text, uint64_t &value);

/// A tensor map's DIMS, STRIDES or BOX: numbers joined by 'x', or "-" for
/// none.
bool parseExtents(std::string_view text, std::vector<uint64_t> &values);

/// "1 dim", "2 dims".
std::string countOf(size_t count, const char *noun);

/// How far into its buffer a tensor map's tensor reaches: OFFSET, the
/// innermost dim's bytes, and (DIMS[i] - 1) * STRIDES[i - 1] for the others;
/// UINT64_MAX if that does not fit.
uint64_t tensorMapSpan(const TensorMapArg &map);

/// Splits on single spaces; false if a field is empty (doubled, leading or
/// trailing space).
bool splitFields(std::string_view line, std::vector<std::string_view> &fields);

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

} // namespace loom::runtime::plan_text

#endif // LOOM_RUNTIME_LIB_PLAN_PLANPARSER_H
