//===- KernelCheck.cpp - Each GPU kernel against its CPU kernel -----------===//

#include "loom/runtime/exec/KernelCheck.h"

#include "loom/runtime/exec/Compare.h"

#include <algorithm>
#include <cstring>
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
} // namespace

bool loom::runtime::checkKernels(const Plan &plan, Executor &cpu,
                                 CudaExecutor &gpu, std::FILE *out,
                                 KernelCheckResult &result,
                                 std::string &error) {
  result = KernelCheckResult();
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
               "+ %g ulp(rms), rms of the output on the CPU; integers, NaN "
               "and infinities exact\n",
               kF32Tolerance, kHalfUlps, kHalfScaleUlps);
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
    cpu.runKernelStep(i);
    if (!gpu.runStep(i, error))
      return false;

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
      const char *reference = cpu.buffer(buffer.id);
      TensorComparison compared = compareTensors(buffer.dtype, fromGpu.data(),
                                                 reference, buffer.numElements);
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
                           describeTolerance(buffer.dtype, compared.rms);
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
    std::fflush(out);
  }
  std::fprintf(out, "check-kernels: %u kernel steps, %u PASS, %u FAIL\n",
               result.steps, result.steps - result.failed, result.failed);
  return true;
}
