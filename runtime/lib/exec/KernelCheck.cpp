//===- KernelCheck.cpp - Each GPU kernel against its CPU kernel -----------===//

#include "loom/runtime/exec/KernelCheck.h"

#include "loom/runtime/exec/Compare.h"
#include "loom/runtime/io/Npy.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cstring>
#include <sys/stat.h>
#include <vector>

using namespace loom::runtime;

namespace {
/// "%.3g", or "-" when there is no figure.
std::string figure(bool known, double value) {
  if (!known)
    return "-";
  char text[32];
  std::snprintf(text, sizeof(text), "%.3g", value);
  return text;
}

/// "[1, 3, 7]": the multi-index of flat element `index` of `shape`.
std::string elementIndex(const Shape &shape, uint64_t index) {
  std::vector<uint64_t> digits(shape.size());
  for (size_t d = shape.size(); d-- > 0;) {
    uint64_t size = static_cast<uint64_t>(shape[d]);
    digits[d] = size ? index % size : 0;
    index = size ? index / size : 0;
  }
  std::string text = "[";
  for (size_t d = 0; d < digits.size(); ++d)
    text += (d ? ", " : "") + std::to_string(digits[d]);
  return text + "]";
}

std::string element(DType dtype, const void *data, uint64_t index) {
  char text[40];
  if (dtype == DType::I64) {
    long long value;
    std::memcpy(&value, static_cast<const char *>(data) + 8 * index, 8);
    std::snprintf(text, sizeof(text), "%lld", value);
  } else {
    std::snprintf(text, sizeof(text), "%.9g", loadElement(dtype, data, index));
  }
  return text;
}
/// Clears the sign of every element of a float buffer (integers are left
/// alone): |x| for f32, f16 and bf16 alike.
void absInPlace(DType dtype, char *data, uint64_t count) {
  if (dtype == DType::F32) {
    for (uint64_t i = 0; i < count; ++i)
      data[4 * i + 3] &= 0x7f;
  } else if (dtype == DType::F16 || dtype == DType::BF16) {
    for (uint64_t i = 0; i < count; ++i)
      data[2 * i + 1] &= 0x7f;
  }
}

/// For a kernel with a `terms` record (its outputs sum nonnegative weights
/// times input `termsArg`: an attention's values), the size of each output
/// element's terms: the CPU kernel run again on |input|, which gives
/// sum |weight x value|. The CPU's outputs and the input are restored.
/// One vector per step buffer (empty where not written).
std::vector<std::vector<char>> termsOf(const Plan &plan, size_t index,
                                       const StepAccess &access, Executor &cpu) {
  const PlanStep &step = plan.steps[index];
  std::vector<std::vector<char>> terms(step.buffers.size());
  int arg = plan.kernels[step.kernel].termsArg;
  if (arg < 0 || static_cast<size_t>(arg) >= step.buffers.size())
    return terms;
  const PlanBuffer &values = plan.buffers[step.buffers[arg]];
  if (!isFloatDType(values.dtype) || access.buffers[arg] == BufferAccess::Written)
    return terms;
  std::vector<std::vector<char>> saved(step.buffers.size());
  for (size_t b = 0; b < step.buffers.size(); ++b)
    if (access.buffers[b] == BufferAccess::Written) {
      const PlanBuffer &buffer = plan.buffers[step.buffers[b]];
      const char *data = cpu.buffer(buffer.id);
      saved[b].assign(data, data + buffer.bytes);
    }
  char *input = cpu.buffer(values.id);
  std::vector<char> original(input, input + values.bytes);
  absInPlace(values.dtype, input, values.numElements);
  cpu.runKernelStep(index);
  std::memcpy(input, original.data(), original.size());
  for (size_t b = 0; b < step.buffers.size(); ++b)
    if (!saved[b].empty()) {
      char *data = cpu.buffer(plan.buffers[step.buffers[b]].id);
      terms[b].assign(data, data + saved[b].size());
      std::memcpy(data, saved[b].data(), saved[b].size());
    }
  return terms;
}
/// `name` with every character but letters, digits, '.', '_' and '-' made
/// '_', for a file name.
std::string fileNamePart(const std::string &name) {
  std::string part = name;
  for (char &c : part)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != '-')
      c = '_';
  return part;
}

/// Creates directory `path` unless it exists.
bool makeDirectory(const std::string &path, std::string &error) {
  if (::mkdir(path.c_str(), 0777) == 0 || errno == EEXIST)
    return true;
  error = "cannot create directory " + path + ": " + std::strerror(errno);
  return false;
}

/// --check-dump: the buffers of failing steps as .npy files, so that a
/// failure found in a short GPU session can be studied without the GPU.
class StepDump {
public:
  /// The most bytes all dumps of a check write together.
  static constexpr uint64_t kBudget = uint64_t(256) << 20;

  StepDump(const Plan &plan, const std::string &dir) : plan(plan), dir(dir) {}
  bool enabled() const { return !dir.empty(); }

  /// Keeps the CPU's value of each buffer of step `index` but its scratch,
  /// before the step runs.
  void keepInputs(size_t index, const StepAccess &access, Executor &cpu) {
    const PlanStep &step = plan.steps[index];
    inputs.assign(step.buffers.size(), {});
    fromGpu.assign(step.buffers.size(), {});
    for (size_t b = 0; b < step.buffers.size(); ++b)
      if (access.buffers[b] != BufferAccess::Scratch) {
        const char *data = cpu.buffer(step.buffers[b]);
        inputs[b].assign(data, data + plan.buffers[step.buffers[b]].bytes);
      }
  }
  /// Keeps the GPU's value of the step's `b`-th buffer.
  void keepGpuOutput(size_t b, const char *data, uint64_t bytes) {
    fromGpu[b].assign(data, data + bytes);
  }

  /// Writes DIR/step-N-KERNEL/: per buffer its value before the step
  /// (AA-NAME.npy, AA its position in the step), and per output the CPU's,
  /// the GPU's and (attention) the terms' sizes (AA-NAME.cpu.npy, .cuda.npy,
  /// .terms.npy). Past the budget, a line says what was not written.
  bool write(size_t index, Executor &cpu,
             const std::vector<std::vector<char>> &terms, std::FILE *out,
             std::string &error) {
    const PlanStep &step = plan.steps[index];
    uint64_t bytes = 0;
    for (size_t b = 0; b < step.buffers.size(); ++b)
      bytes += inputs[b].size() + 2 * fromGpu[b].size() + terms[b].size();
    if (written + bytes > kBudget) {
      std::fprintf(out, "      not dumped: %.1f MiB, past --check-dump's %llu MiB\n",
                   bytes / 1048576.0, static_cast<unsigned long long>(kBudget >> 20));
      return true;
    }
    std::string stepDir = dir + "/step-" + std::to_string(index) + "-" +
                          fileNamePart(plan.kernels[step.kernel].name);
    if (!makeDirectory(dir, error) || !makeDirectory(stepDir, error))
      return false;
    for (size_t b = 0; b < step.buffers.size(); ++b) {
      if (inputs[b].empty())
        continue;
      const PlanBuffer &buffer = plan.buffers[step.buffers[b]];
      char position[8];
      std::snprintf(position, sizeof(position), "%02zu-", b);
      std::string stem = stepDir + "/" + position + fileNamePart(buffer.name);
      auto save = [&](const std::string &suffix, const void *data) {
        return writeNpy(stem + suffix + ".npy", buffer.dtype, buffer.shape, data, error);
      };
      if (!save("", inputs[b].data()) ||
          (!fromGpu[b].empty() && (!save(".cpu", cpu.buffer(buffer.id)) ||
                                   !save(".cuda", fromGpu[b].data()))) ||
          (!terms[b].empty() && !save(".terms", terms[b].data())))
        return false;
    }
    written += bytes;
    std::fprintf(out, "      dumped to %s\n", stepDir.c_str());
    return true;
  }

private:
  const Plan &plan;
  std::string dir;
  std::vector<std::vector<char>> inputs, fromGpu;
  uint64_t written = 0;
};
} // namespace

bool loom::runtime::checkKernels(const Plan &plan, Executor &cpu,
                                 CudaExecutor &gpu, std::FILE *out,
                                 KernelCheckResult &result,
                                 std::string &error,
                                 const std::string &dumpDir) {
  result = KernelCheckResult();
  StepDump dump(plan, dumpDir);
  const std::vector<StepAccess> &access = cpu.stepAccess();
  // One host block for the GPU's copy of a written buffer, the largest.
  uint64_t largest = 0;
  size_t kernelWidth = 6;
  unsigned kernelSteps = 0;
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep &step = plan.steps[i];
    if (step.kind != StepKind::Kernel)
      continue;
    ++kernelSteps;
    kernelWidth = std::max(kernelWidth, plan.kernels[step.kernel].name.size());
    for (size_t b = 0; b < step.buffers.size(); ++b)
      if (access[i].buffers[b] == BufferAccess::Written)
        largest = std::max(largest, plan.buffers[step.buffers[b]].bytes);
  }
  Arena fromGpu;
  if (!fromGpu.allocate(largest, error) || !gpu.upload(cpu.arena(), error))
    return false;

  int width = static_cast<int>(kernelWidth);
  std::fprintf(out,
               "check-kernels: %u kernel steps of model '%s' on %s and on "
               "the CPU, each from the CPU's inputs\n",
               kernelSteps, plan.model.c_str(),
               gpu.deviceDescription().c_str());
  std::fprintf(out,
               "tolerance: f32 %g x (|cpu| + rms), f16 and bf16 %g ulp(|cpu|) "
               "+ %g ulp(rms), rms of the output on the CPU; attention "
               "outputs also %g ulp(terms), terms = the CPU kernel on |values|; "
               "integers, NaN and infinities exact\n",
               kF32Tolerance, kHalfUlps, kHalfScaleUlps, kTermsUlps);
  std::fprintf(out, "%4s  %-*s  %7s  %10s  %11s  %8s  %10s  %s\n", "step",
               width, "kernel", "outputs", "elements", "max abs err", "max ulp",
               "over", "result");
  std::fflush(out);
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep &step = plan.steps[i];
    if (step.kind != StepKind::Kernel)
      continue;
    // The CPU's values of what the step reads (params are on the device
    // already and never change), and of what it writes, so that elements a
    // kernel leaves alone start equal too.
    for (size_t b = 0; b < step.buffers.size(); ++b) {
      const PlanBuffer &buffer = plan.buffers[step.buffers[b]];
      if (access[i].buffers[b] == BufferAccess::Scratch ||
          buffer.role == BufferRole::Param)
        continue;
      if (!gpu.copyToDevice(buffer, cpu.buffer(buffer.id), error))
        return false;
    }
    if (dump.enabled())
      dump.keepInputs(i, access[i], cpu);
    cpu.runKernelStep(i);
    if (!gpu.runStep(i, error))
      return false;
    std::vector<std::vector<char>> terms = termsOf(plan, i, access[i], cpu);

    unsigned outputs = 0;
    uint64_t elements = 0, over = 0;
    double maxAbsError = 0, maxUlps = 0;
    bool anyFloat = false;
    std::vector<std::string> details;
    for (size_t b = 0; b < step.buffers.size(); ++b) {
      if (access[i].buffers[b] != BufferAccess::Written)
        continue;
      const PlanBuffer &buffer = plan.buffers[step.buffers[b]];
      if (!gpu.copyToHost(buffer, fromGpu.data(), error))
        return false;
      if (dump.enabled())
        dump.keepGpuOutput(b, fromGpu.data(), buffer.bytes);
      const char *reference = cpu.buffer(buffer.id);
      const char *termSizes = terms[b].empty() ? nullptr : terms[b].data();
      TensorComparison compared = compareTensors(
          buffer.dtype, fromGpu.data(), reference, buffer.numElements, termSizes);
      ++outputs;
      elements += compared.elements;
      over += compared.over;
      maxAbsError = std::max(maxAbsError, compared.maxAbsError);
      if (isFloatDType(buffer.dtype)) {
        anyFloat = true;
        maxUlps = std::max(maxUlps, compared.maxUlps);
      }
      if (compared.passed())
        continue;
      std::string detail = buffer.name + " " + dtypeName(buffer.dtype) + " " +
                           formatShape(buffer.shape) + ": " +
                           std::to_string(compared.over) + " of " +
                           std::to_string(compared.elements) + " over " +
                           describeTolerance(buffer.dtype, compared.rms,
                                             termSizes != nullptr);
      if (compared.nonfinite)
        detail +=
            ", " + std::to_string(compared.nonfinite) + " NaN/inf mismatches";
      detail += "; worst " + elementIndex(buffer.shape, compared.worst) +
                ": cuda " +
                element(buffer.dtype, fromGpu.data(), compared.worst) +
                " cpu " + element(buffer.dtype, reference, compared.worst);
      details.push_back(detail);
    }
    bool passed = over == 0;
    ++result.steps;
    if (!passed && result.failed++ == 0) {
      result.firstFailed = i;
      result.firstKernel = plan.kernels[step.kernel].name;
    }
    std::fprintf(
        out, "%4zu  %-*s  %7u  %10llu  %11s  %8s  %10llu  %s\n", i, width,
        plan.kernels[step.kernel].name.c_str(), outputs,
        static_cast<unsigned long long>(elements),
        figure(outputs, maxAbsError).c_str(), figure(anyFloat, maxUlps).c_str(),
        static_cast<unsigned long long>(over), passed ? "PASS" : "FAIL");
    for (const std::string &detail : details)
      std::fprintf(out, "      %s\n", detail.c_str());
    if (!passed && dump.enabled() && !dump.write(i, cpu, terms, out, error))
      return false;
    std::fflush(out);
  }
  std::fprintf(out, "check-kernels: %u kernel steps, %u PASS, %u FAIL\n",
               result.steps, result.steps - result.failed, result.failed);
  return true;
}
