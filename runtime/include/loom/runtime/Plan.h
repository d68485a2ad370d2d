//===- Plan.h - The plan: parsing, validation and writing -------*- C++ -*-===//
//
// The plan is the contract between loomc and the runtime; its format and
// every check made here are specified in docs/plan-format.md.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_PLAN_H
#define LOOM_RUNTIME_PLAN_H

#include "loom/runtime/DType.h"
#include "loom/runtime/Shape.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::runtime {

/// The plan version this runtime reads and writes.
constexpr unsigned kPlanVersion = 1;
/// Every buffer offset is a multiple of this.
constexpr uint64_t kBufferAlignment = 64;

/// The device the plan's kernels were compiled for.
enum class Device : uint8_t { CPU, CUDA };
/// "cpu" or "cuda".
const char *deviceName(Device device);

/// How the runtime treats a buffer: inputs are copied in, params initialized
/// or loaded, outputs copied out; temps are only touched by kernels.
enum class BufferRole : uint8_t { Input, Param, Output, Temp };
/// "input", "param", "output" or "temp".
const char *roleName(BufferRole role);

/// A param's initializer; `None` for every other role.
enum class InitKind : uint8_t { None, Zeros, Ones, Constant, Normal, Uniform };
/// "zeros", "ones", "constant", "normal", "uniform" ("none" for None).
const char *initKindName(InitKind kind);

/// An initializer with its arguments: Constant uses `a` (the value), Normal
/// `a` (the standard deviation), Uniform `a` and `b` (low and high).
struct Initializer {
  InitKind kind = InitKind::None;
  double a = 0;
  double b = 0;
};

/// One `buffer` record.
struct PlanBuffer {
  unsigned id = 0;
  std::string name;
  BufferRole role = BufferRole::Temp;
  DType dtype = DType::F32;
  Shape shape;
  uint64_t offset = 0;
  Initializer init;
  /// Derived by parsePlan (writePlan ignores them).
  uint64_t numElements = 0;
  uint64_t bytes = 0;
  unsigned line = 0;
};

/// One `kernel` record.
struct PlanKernel {
  std::string name;
  unsigned numArgs = 0;
  unsigned line = 0;
};

/// One `step` record: the index of its kernel in Plan::kernels and the ids
/// of its buffers.
struct PlanStep {
  unsigned kernel = 0;
  std::vector<unsigned> buffers;
  unsigned line = 0;
};

/// A parsed, validated plan.
struct Plan {
  unsigned version = kPlanVersion;
  std::string model;
  Device device = Device::CPU;
  uint64_t arenaBytes = 0;
  std::vector<PlanBuffer> buffers;
  std::vector<PlanKernel> kernels;
  std::vector<PlanStep> steps;

  /// The buffer called `name`, or null.
  const PlanBuffer *findBuffer(std::string_view name) const;
};

/// Parses and completely validates `text` (everything in the format's
/// Validation section except the kernel table, which bindKernels checks).
/// On failure returns false and sets `error` to "plan:LINE: message".
bool parsePlan(std::string_view text, Plan &plan, std::string &error);

/// The 32-bit FNV-1a checksum the `end` record carries, of `bytes`.
uint32_t computeChecksum(std::string_view bytes);

/// Appends the `end` record (with the checksum of `body`) to `body`.
std::string sealPlan(std::string_view body);

/// Writes `plan` in the text format, `end` record included. Buffers' derived
/// fields are ignored; floats are written with %.17g.
std::string writePlan(const Plan &plan);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_PLAN_H
