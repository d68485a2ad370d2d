//===- PlanStepRecords.cpp - Kernel, launch, step and collective records --===//

#include "PlanParser.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

using namespace loom::runtime;
using namespace loom::runtime::plan_text;

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
