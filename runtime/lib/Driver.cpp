//===- Driver.cpp - The main program of compiled executables --------------===//
//
// Everything that can be checked is checked before the arena is allocated:
// the plan, the kernel table, the command line and the input files' headers.
//
//===----------------------------------------------------------------------===//

#include "loom/runtime/Driver.h"

#include "Report.h"
#include "loom/runtime/Cuda.h"
#include "loom/runtime/Executor.h"
#include "loom/runtime/Initializer.h"
#include "loom/runtime/Npy.h"
#include "loom/runtime/Options.h"
#include "loom/runtime/Plan.h"
#include "loom/runtime/Safetensors.h"

#include <cstring>
#include <map>
#include <string>

using namespace loom::runtime;

namespace {
/// Runs one executable invocation; each step returns false after reporting.
class Driver {
public:
  Driver(int argc, char **argv, const Executable &executable, std::FILE *out,
         std::FILE *err)
      : argc(argc), argv(argv), executable(executable), out(out), err(err) {
    const char *path = argc > 0 && argv[0] ? argv[0] : "loom-model";
    const char *slash = std::strrchr(path, '/');
    program = slash ? slash + 1 : path;
  }

  /// False after reporting an error.
  bool run();

private:
  bool fail(const std::string &message) {
    std::fprintf(err, "%s: error: %s\n", program.c_str(), message.c_str());
    return false;
  }
  void warn(const std::string &message) {
    std::fprintf(err, "%s: warning: %s\n", program.c_str(), message.c_str());
  }
  bool checkDevice();
  bool collectFiles(const NamedFiles &given, BufferRole role,
                    std::map<unsigned, std::string> &files);
  bool checkInputs();
  bool prepareParams();
  bool loadInputs();
  bool finishOutputs();
  bool execute(TraceRecorder *trace);

  int argc;
  char **argv;
  const Executable &executable;
  std::FILE *out;
  std::FILE *err;
  std::string program;
  std::string error;
  RunOptions options;
  Plan plan;
  Executor executor;
  bool onCuda = false;
  CudaExecutor cuda;
  std::map<unsigned, std::string> inputFiles;  // buffer id -> .npy
  std::map<unsigned, std::string> outputFiles; // buffer id -> .npy
};
} // namespace

bool Driver::checkDevice() {
  std::string device =
      options.device.empty() ? deviceName(plan.device) : options.device;
  if (device == "cpu" && plan.device != Device::CPU)
    return fail("this executable was built for cuda; its kernels cannot run "
                "with --device cpu");
  if (device != "cuda")
    return true;
  // The GPU kernels are the gpu-image's; the CPU kernel table stays bound
  // (and checked) either way.
  if (!plan.gpuImage.present)
    return fail("this executable was built without GPU kernels");
  if (plan.gpuImage.bytes != executable.gpuImageSize || !executable.gpuImage)
    return fail("plan:" + std::to_string(plan.gpuImage.line) +
                ": the gpu-image record says " +
                std::to_string(plan.gpuImage.bytes) +
                " bytes, but this executable carries a GPU image of " +
                std::to_string(executable.gpuImageSize) + " bytes");
  if (!cudaSupported())
    return fail("this runtime was built without CUDA support");
  onCuda = true;
  return true;
}

/// The names of the buffers of `role`, for error messages.
static std::string namesOf(const Plan &plan, BufferRole role) {
  std::string names;
  for (const PlanBuffer &buffer : plan.buffers)
    if (buffer.role == role)
      names += (names.empty() ? "" : ", ") + buffer.name;
  return names.empty() ? "none" : names;
}

bool Driver::collectFiles(const NamedFiles &given, BufferRole role,
                          std::map<unsigned, std::string> &files) {
  const char *kind = roleName(role);
  for (const auto &[name, path] : given) {
    const PlanBuffer *buffer = plan.findBuffer(name);
    if (!buffer || buffer->role != role)
      return fail(std::string("model '") + plan.model + "' has no " + kind +
                  " named '" + name + "' (its " + kind +
                  "s: " + namesOf(plan, role) + ")");
    if (!files.emplace(buffer->id, path).second)
      return fail(std::string(kind) + " '" + name + "' is given twice");
  }
  return true;
}

bool Driver::checkInputs() {
  for (const PlanBuffer &buffer : plan.buffers) {
    if (buffer.role != BufferRole::Input)
      continue;
    auto file = inputFiles.find(buffer.id);
    if (file == inputFiles.end()) {
      if (options.randomInputs)
        continue;
      return fail("input '" + buffer.name + "' (" + dtypeName(buffer.dtype) +
                  " " + formatShape(buffer.shape) +
                  ") is not given: pass --input " + buffer.name +
                  "=FILE.npy, or --random-inputs");
    }
    if (!checkNpy(file->second, "input '" + buffer.name + "'", buffer.dtype,
                  buffer.shape, error))
      return fail(error);
  }
  return true;
}

bool Driver::prepareParams() {
  if (options.weights.empty()) {
    initializeParams(plan, executor.arena(), options.seed);
  } else {
    std::vector<std::string> warnings;
    if (!loadWeights(plan, executor.arena(), options.weights, warnings, error))
      return fail(error);
    for (const std::string &warning : warnings)
      warn(warning);
  }
  if (!options.saveWeights.empty() &&
      !saveWeights(plan, executor.arena(), options.saveWeights, error))
    return fail(error);
  return true;
}

bool Driver::loadInputs() {
  // Inputs are live from the start: they share arena bytes only with
  // buffers written after their last use, never with params or other
  // inputs, so reading them before the run is safe in any order.
  for (const PlanBuffer &buffer : plan.buffers) {
    if (buffer.role != BufferRole::Input)
      continue;
    auto file = inputFiles.find(buffer.id);
    if (file == inputFiles.end()) {
      fillRandomInput(buffer, options.seed, executor.buffer(buffer.id));
      continue;
    }
    if (!readNpy(file->second, "input '" + buffer.name + "'", buffer.dtype,
                 buffer.shape, executor.buffer(buffer.id), error))
      return fail(error);
  }
  return true;
}

bool Driver::finishOutputs() {
  for (const PlanBuffer &buffer : plan.buffers) {
    if (buffer.role != BufferRole::Output)
      continue;
    auto file = outputFiles.find(buffer.id);
    if (file == outputFiles.end()) {
      printSummary(out, buffer, executor.buffer(buffer.id));
      continue;
    }
    if (!writeNpy(file->second, buffer.dtype, buffer.shape,
                  executor.buffer(buffer.id), error))
      return fail("output '" + buffer.name + "': " + error);
  }
  return true;
}

bool Driver::execute(TraceRecorder *trace) {
  if (!onCuda) {
    executor.run(trace); // the CPU kernels; launch records do not apply
    return true;
  }
  // The params and inputs are in the host arena, as for the CPU; the
  // outputs come back to their offsets in it.
  if (!cuda.run(executor.arena(), trace, error))
    return fail(error);
  return true;
}

bool Driver::run() {
  if (!parseOptions(argc, argv, options, error))
    return fail(error);
  if (options.help) {
    printUsage(out, program.c_str());
    return true;
  }
  if (!parsePlan(executable.plan ? executable.plan : "", plan, error) ||
      !executor.bind(plan, executable.kernels, error))
    return fail(error);
  if (!checkDevice())
    return false;
  if (options.info) {
    printPlanInfo(out, plan);
    return true;
  }
  if (!collectFiles(options.inputs, BufferRole::Input, inputFiles) ||
      !collectFiles(options.outputs, BufferRole::Output, outputFiles) ||
      !checkInputs())
    return false;
  // The driver, the device, the image and the device arena before any work
  // on the host.
  if (onCuda && !cuda.open(plan, executable.gpuImage, executable.gpuImageSize,
                           executable.cudaDriver, error))
    return fail(error);

  if (!executor.allocate(error))
    return fail(error);
  if (!prepareParams() || !loadInputs())
    return false;
  TraceRecorder trace;
  if (!execute(options.trace.empty() ? nullptr : &trace) || !finishOutputs())
    return false;
  if (!options.trace.empty() && !trace.write(options.trace, error))
    return fail(error);
  return true;
}

int loom::runtime::runMain(int argc, char **argv, const Executable &executable,
                           std::FILE *out, std::FILE *err) {
  bool ok = Driver(argc, argv, executable, out, err).run();
  std::fflush(out);
  return ok ? 0 : 1;
}

int loom::runtime::runMain(int argc, char **argv, const LoomKernel *kernels,
                           const char *planText, std::FILE *out,
                           std::FILE *err) {
  Executable executable;
  executable.kernels = kernels;
  executable.plan = planText;
  return runMain(argc, argv, executable, out, err);
}
