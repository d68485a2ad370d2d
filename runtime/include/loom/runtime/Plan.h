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

/// Parses a decimal integer: digits only, no sign or spaces, no overflow.
bool parseUnsigned(std::string_view text, uint64_t &value);


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

/// The NVIDIA architecture of a `gpu-image` record: sm_90a is {9, 0, 'a'},
/// sm_100f {10, 0, 'f'}, sm_80 {8, 0, 0}. The last digit is the minor
/// version.
struct GpuArch {
  unsigned major = 0;
  unsigned minor = 0;
  char variant = 0; // 0, 'a' (architecture-specific) or 'f' (family)
};
/// Parses `sm_` followed by two or three digits (no leading zero) and an
/// optional `a` or `f`.
bool parseGpuArch(std::string_view text, GpuArch &arch);

/// How the executable's GPU image is encoded.
enum class GpuImageFormat : uint8_t { Cubin, PTX };
/// "cubin" or "ptx".
const char *gpuImageFormatName(GpuImageFormat format);

/// The optional `gpu-image` record.
struct PlanGpuImage {
  bool present = false;
  std::string archName; // as written, e.g. "sm_90a"
  GpuArch arch;         // derived by parsePlan (writePlan writes archName)
  GpuImageFormat format = GpuImageFormat::Cubin;
  uint64_t bytes = 0;
  unsigned line = 0;
};

/// One argument of a `launch` record.
struct LaunchArg {
  enum class Kind : uint8_t { Buffer, I64, I32, F32 };
  Kind kind = Kind::Buffer;
  /// Buffer: the index into the step's buffer list (`b:I`).
  unsigned buffer = 0;
  /// I64 and I32 (I32 values fit in 32 bits).
  int64_t integer = 0;
  /// F32.
  float real = 0;
};

/// One `launch` record: on --device cuda, a step of `kernel` (an index into
/// Plan::kernels) launches the image's `function` with this grid and block.
struct PlanLaunch {
  unsigned kernel = 0;
  std::string function;
  unsigned grid[3] = {1, 1, 1};
  unsigned block[3] = {1, 1, 1};
  std::vector<LaunchArg> args;
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
  PlanGpuImage gpuImage;
  std::vector<PlanBuffer> buffers;
  std::vector<PlanKernel> kernels;
  /// In plan order; the launches of one kernel run in this order.
  std::vector<PlanLaunch> launches;
  std::vector<PlanStep> steps;

  /// The buffer called `name`, or null.
  const PlanBuffer *findBuffer(std::string_view name) const;
};

/// Parses and completely validates `text` (everything in the format's
/// Validation section except the kernel table, which bindKernels checks, and
/// what needs the GPU image or the device, which the driver and the CUDA
/// executor check).
/// On failure returns false and sets `error` to "plan:LINE: message".
bool parsePlan(std::string_view text, Plan &plan, std::string &error);

/// The 32-bit FNV-1a checksum the `end` record carries, of `bytes`.
uint32_t computeChecksum(std::string_view bytes);

/// Appends the `end` record (with the checksum of `body`) to `body`.
std::string sealPlan(std::string_view body);

/// A launch argument as the plan writes it: "b:2", "i64:-1", "f32:0.5".
std::string formatLaunchArg(const LaunchArg &arg);

/// Writes `plan` in the text format, `end` record included. Buffers' derived
/// fields are ignored; floats are written with %.17g.
std::string writePlan(const Plan &plan);

} // namespace loom::runtime

#endif // LOOM_RUNTIME_PLAN_H
