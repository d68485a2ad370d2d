//===- Cuda.cpp - The CUDA executor: the driver API through dlopen --------===//
//
// cuda.h gives the driver API's types and prototypes only; every function is
// looked up with dlsym in the libcuda.so.1 that --device cuda loads. The
// symbols are the versioned ones cuda.h maps its names to (cuMemAlloc_v2,
// ...), which every driver since CUDA 4 exports. Contexts are the device's
// primary context, as the CUDA runtime uses it (cuCtxCreate's signature
// changed in CUDA 13; the primary context's API did not).
//
// Without cuda.h at build time (LOOM_RUNTIME_CUDA undefined) only the
// architecture rules are compiled and the executor reports that this runtime
// has no CUDA support.
//
//===----------------------------------------------------------------------===//

#include "loom/runtime/exec/Cuda.h"
#include "loom/runtime/exec/Training.h"

#include <cstdio>
#include <cstring>

using namespace loom::runtime;

CudaCollectives::~CudaCollectives() = default;

bool loom::runtime::gpuImageRunsOn(const PlanGpuImage &image, unsigned major,
                                   unsigned minor) {
  const GpuArch &arch = image.arch;
  if (arch.variant == 'a')
    return major == arch.major && minor == arch.minor;
  if (arch.variant == 'f' || image.format == GpuImageFormat::Cubin)
    return major == arch.major && minor >= arch.minor;
  return major > arch.major || (major == arch.major && minor >= arch.minor);
}

std::string loom::runtime::gpuImageRequirement(const PlanGpuImage &image) {
  const GpuArch &arch = image.arch;
  std::string capability = "compute capability " + std::to_string(arch.major) +
                           "." + std::to_string(arch.minor);
  if (arch.variant == 'a')
    return capability + " only";
  if (arch.variant == 'f' || image.format == GpuImageFormat::Cubin)
    return capability + " or a later " + std::to_string(arch.major) + ".x";
  return capability + " or later";
}

#ifndef LOOM_RUNTIME_CUDA

bool loom::runtime::cudaSupported() { return false; }

struct CudaExecutor::State {};
CudaExecutor::CudaExecutor() = default;
CudaExecutor::~CudaExecutor() = default;

bool CudaExecutor::open(const Plan &, const unsigned char *, uint64_t,
                        const char *, std::string &error) {
  error = "this runtime was built without CUDA support";
  return false;
}

bool CudaExecutor::run(char *, TraceRecorder *, std::string &error) {
  error = "this runtime was built without CUDA support";
  return false;
}

bool CudaExecutor::upload(char *, std::string &error) {
  error = "this runtime was built without CUDA support";
  return false;
}

bool CudaExecutor::copyToDevice(const PlanBuffer &, const char *,
                                std::string &error) {
  error = "this runtime was built without CUDA support";
  return false;
}

bool CudaExecutor::copyToHost(const PlanBuffer &, char *, std::string &error) {
  error = "this runtime was built without CUDA support";
  return false;
}

bool CudaExecutor::runStep(size_t, std::string &error) {
  error = "this runtime was built without CUDA support";
  return false;
}

bool CudaExecutor::runSteps(char *, size_t, size_t, uint64_t, std::string &error) {
  error = "this runtime was built without CUDA support";
  return false;
}

uint64_t CudaExecutor::address(const PlanBuffer &) const { return 0; }

bool CudaExecutor::copyToDeviceAt(uint64_t, const char *, uint64_t,
                                  std::string &error) {
  error = "this runtime was built without CUDA support";
  return false;
}

bool CudaExecutor::queueStep(size_t, uint64_t, std::string &error) {
  error = "this runtime was built without CUDA support";
  return false;
}

bool CudaExecutor::uploadInputs(char *, bool, std::string &error) {
  error = "this runtime was built without CUDA support";
  return false;
}

bool CudaExecutor::finish(char *, std::string &error) {
  error = "this runtime was built without CUDA support";
  return false;
}

void CudaExecutor::keepParamsOnDevice(const std::vector<uint32_t> &) {}

bool CudaExecutor::applyUpdates(const std::function<bool(const PlanBuffer &)> &,
                                std::string &error) {
  error = "this runtime was built without CUDA support";
  return false;
}

bool CudaExecutor::downloadParams(char *, std::string &error) {
  error = "this runtime was built without CUDA support";
  return false;
}

std::string CudaExecutor::deviceDescription() const { return ""; }

#else // LOOM_RUNTIME_CUDA

#include "RuntimeKernels.h"
#include "support/Symbols.h"

#include <cuda.h>

#include <unordered_map>

// Tensor maps (CUtensorMap, cuTensorMapEncodeTiled) came with CUDA 12.0;
// a runtime built with older headers rejects plans that need them.
#define LOOM_CUDA_TENSOR_MAPS (CUDA_VERSION >= 12000)

bool loom::runtime::cudaSupported() { return true; }

namespace {
/// The driver functions the executor calls. decltype of cuda.h's names
/// gives the versioned functions' types (cuMemAlloc is cuMemAlloc_v2).
struct DriverApi {
  decltype(&::cuGetErrorName) getErrorName = nullptr;
  decltype(&::cuGetErrorString) getErrorString = nullptr;
  decltype(&::cuInit) init = nullptr;
  decltype(&::cuDeviceGetCount) deviceGetCount = nullptr;
  decltype(&::cuDeviceGet) deviceGet = nullptr;
  decltype(&::cuDeviceGetName) deviceGetName = nullptr;
  decltype(&::cuDeviceGetAttribute) deviceGetAttribute = nullptr;
  decltype(&::cuDevicePrimaryCtxRetain) primaryCtxRetain = nullptr;
  decltype(&::cuDevicePrimaryCtxRelease) primaryCtxRelease = nullptr;
  decltype(&::cuCtxSetCurrent) ctxSetCurrent = nullptr;
  decltype(&::cuCtxSynchronize) ctxSynchronize = nullptr;
  decltype(&::cuModuleLoadDataEx) moduleLoadDataEx = nullptr;
  decltype(&::cuModuleUnload) moduleUnload = nullptr;
  decltype(&::cuModuleGetFunction) moduleGetFunction = nullptr;
  decltype(&::cuMemAlloc) memAlloc = nullptr;
  decltype(&::cuMemFree) memFree = nullptr;
  decltype(&::cuMemsetD8) memsetD8 = nullptr;
  decltype(&::cuMemcpyHtoD) memcpyHtoD = nullptr;
  decltype(&::cuMemcpyDtoH) memcpyDtoH = nullptr;
  decltype(&::cuMemcpyDtoD) memcpyDtoD = nullptr;
  decltype(&::cuLaunchKernel) launchKernel = nullptr;
  decltype(&::cuEventCreate) eventCreate = nullptr;
  decltype(&::cuEventRecord) eventRecord = nullptr;
  decltype(&::cuEventSynchronize) eventSynchronize = nullptr;
  decltype(&::cuEventElapsedTime) eventElapsedTime = nullptr;
  decltype(&::cuEventDestroy) eventDestroy = nullptr;
  /// Optional (drivers of CUDA 12.4 and later): checks launch arguments.
  decltype(&::cuFuncGetParamInfo) funcGetParamInfo = nullptr;
  /// Optional until a launch needs more than 48 KiB of dynamic shared
  /// memory (every driver since CUDA 9 has it).
  decltype(&::cuFuncSetAttribute) funcSetAttribute = nullptr;
#if LOOM_CUDA_TENSOR_MAPS
  /// Optional until a plan has a `tmap:` argument (drivers of CUDA 12 and
  /// later have it).
  decltype(&::cuTensorMapEncodeTiled) tensorMapEncodeTiled = nullptr;
#endif
};

/// Dynamic shared memory a function may use without opting in.
constexpr int64_t kDefaultSharedBytes = 48 * 1024;

/// The device bytes of one tensor map (sizeof(CUtensorMap)); a multiple of
/// the 64 bytes the driver's TMA instructions want it aligned to.
constexpr size_t kTensorMapBytes = 128;

/// The bytes a launch argument takes in the kernel's parameter list.
size_t argumentBytes(const LaunchArg &arg) {
  switch (arg.kind) {
  case LaunchArg::Kind::Buffer:
  case LaunchArg::Kind::I64:
  case LaunchArg::Kind::TensorMap: // the map's device address
    return 8;
  case LaunchArg::Kind::I32:
  case LaunchArg::Kind::F32:
    return 4;
  }
  return 8;
}

std::string mebibytes(uint64_t bytes) {
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f MiB",
                static_cast<double>(bytes) / 1048576.0);
  return text;
}

std::string planLine(unsigned line) {
  return "plan:" + std::to_string(line) + ": ";
}
} // namespace

struct CudaExecutor::State {
  const Plan *plan = nullptr;
  DriverApi api;
  std::string library;
  CUdevice device = 0;
  std::string deviceName;
  int major = 0, minor = 0;
  /// CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: the most dynamic
  /// shared memory a function may opt in to.
  int sharedOptIn = 0;
  bool retained = false; // the primary context
  CUmodule module = nullptr;
  /// The runtime's own kernels (RuntimeKernels.h), loaded for plans that
  /// need them (accumulate steps).
  CUmodule runtimeModule = nullptr;
  CUfunction accumulateFunction = nullptr;
  CUdeviceptr arena = 0;
  uint64_t arenaBytes = 0; // allocated (at least 256)
  /// Per plan.launches entry, its function.
  std::vector<CUfunction> functions;
  /// Per plan kernel, the indices of its launches in plan.launches.
  std::vector<std::vector<size_t>> launchesOf;
  /// The tensor maps of the `tmap:` arguments, kTensorMapBytes each: per
  /// kernel step, those of its kernel's launches in order (a kernel that
  /// runs in several steps has maps of each step's buffers).
  CUdeviceptr tensorMaps = 0;
  /// Per plan step, the index of its first map in `tensorMaps`.
  std::vector<size_t> firstMapOfStep;
  /// Per plan.launches entry, the `tmap:` arguments of the launches of its
  /// kernel before it.
  std::vector<size_t> mapsBeforeLaunch;

  ~State();

  /// "CUDA_ERROR_X (description)".
  std::string describe(CUresult result) const;
  /// False with "WHAT: CALL failed: ERROR" unless `result` is success.
  bool check(CUresult result, const char *call, std::string &error,
             const std::string &what = std::string()) const;
  bool loadDriver(const char *path, std::string &error);
  /// Takes device `localRank` % the number of devices.
  bool selectDevice(const PlanGpuImage &image, unsigned localRank,
                    std::string &error);
  /// cuModuleLoadDataEx of `data` into `loaded`; on failure the error
  /// says `what`, then the JIT's log, if any, on lines of its own.
  bool loadModule(const char *data, CUmodule &loaded, const std::string &what,
                  std::string &error);
  bool loadImage(const PlanGpuImage &image, const unsigned char *bytes,
                 uint64_t size, std::string &error);
  bool findFunctions(std::string &error);
  /// Loads the runtime's kernels (JIT-compiled by the driver).
  bool loadRuntimeKernels(std::string &error);
  /// Queues accumulate step `stepIndex` of microbatch `microbatch`.
  bool accumulate(size_t stepIndex, uint64_t microbatch, std::string &error);
  /// Encodes the `tmap:` arguments' tensor maps for the device arena and
  /// copies them to the device (after the arena is allocated).
  bool encodeTensorMaps(std::string &error);
  /// cuTensorMapEncodeTiled of `map` in the buffer at `buffer` into the
  /// kTensorMapBytes at `out`; errors begin with `where`.
  bool encodeTensorMap(const TensorMapArg &map, CUdeviceptr buffer, char *out,
                       const std::string &where, std::string &error) const;
  /// cuLaunchKernel of plan.launches[index] for step `step`.
  bool launch(size_t index, size_t step, std::string &error);
  /// cuCtxSynchronize after launches; errors of the kernels surface here.
  bool synchronize(const std::string &what, std::string &error) const;
  /// The device address of `buffer`.
  CUdeviceptr address(const PlanBuffer &buffer) const {
    return arena + buffer.offset;
  }

  /// Training: the params stay on the device once uploaded; per buffer,
  /// whether it is an output that stays there (an update output).
  bool resident = false, uploaded = false;
  std::vector<bool> deviceOnly;

  std::vector<uint64_t> slots; // of the launch being made
  std::vector<void *> params;
  std::vector<StepAccess> access; // per step: its bytes, for the trace
};

CudaExecutor::State::~State() {
  // Best effort: nothing to report from a destructor.
  if (tensorMaps)
    api.memFree(tensorMaps);
  if (arena)
    api.memFree(arena);
  if (module)
    api.moduleUnload(module);
  if (runtimeModule)
    api.moduleUnload(runtimeModule);
  if (retained)
    api.primaryCtxRelease(device);
  // The driver stays loaded: unloading libcuda while its threads run is not
  // supported, and the process ends soon anyway.
}

std::string CudaExecutor::State::describe(CUresult result) const {
  const char *name = nullptr;
  const char *text = nullptr;
  if (api.getErrorName(result, &name) != CUDA_SUCCESS || !name) {
    // The toolkit's stub libcuda names nothing, and says only this.
    std::string code = "CUDA error " + std::to_string(static_cast<int>(result));
    switch (static_cast<int>(result)) {
    case 34:
      return code + " (CUDA_ERROR_STUB_LIBRARY: the libcuda found is the "
                    "toolkit's stub, not a driver; run with --device cpu)";
    case 35:
      return code + " (CUDA_ERROR_INSUFFICIENT_DRIVER: the driver is older than the runtime)";
    case 100:
      return code + " (CUDA_ERROR_NO_DEVICE: no CUDA GPU is visible)";
    default:
      return code;
    }
  }
  std::string described = name;
  if (api.getErrorString(result, &text) == CUDA_SUCCESS && text)
    described += std::string(" (") + text + ")";
  return described;
}

bool CudaExecutor::State::check(CUresult result, const char *call,
                                std::string &error,
                                const std::string &what) const {
  if (result == CUDA_SUCCESS)
    return true;
  error =
      (what.empty() ? "" : what + ": ") + call + " failed: " + describe(result);
  return false;
}

bool CudaExecutor::State::loadDriver(const char *path, std::string &error) {
  library = path;
  void *handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    error = "no CUDA driver (" + library + ") found; run with --device cpu";
    return false;
  }
  RequiredSymbols required{handle};
  required.require(api.getErrorName, "cuGetErrorName");
  required.require(api.getErrorString, "cuGetErrorString");
  required.require(api.init, "cuInit");
  required.require(api.deviceGetCount, "cuDeviceGetCount");
  required.require(api.deviceGet, "cuDeviceGet");
  required.require(api.deviceGetName, "cuDeviceGetName");
  required.require(api.deviceGetAttribute, "cuDeviceGetAttribute");
  required.require(api.primaryCtxRetain, "cuDevicePrimaryCtxRetain");
  required.require(api.primaryCtxRelease, "cuDevicePrimaryCtxRelease_v2");
  required.require(api.ctxSetCurrent, "cuCtxSetCurrent");
  required.require(api.ctxSynchronize, "cuCtxSynchronize");
  required.require(api.moduleLoadDataEx, "cuModuleLoadDataEx");
  required.require(api.moduleUnload, "cuModuleUnload");
  required.require(api.moduleGetFunction, "cuModuleGetFunction");
  required.require(api.memAlloc, "cuMemAlloc_v2");
  required.require(api.memFree, "cuMemFree_v2");
  required.require(api.memsetD8, "cuMemsetD8_v2");
  required.require(api.memcpyHtoD, "cuMemcpyHtoD_v2");
  required.require(api.memcpyDtoH, "cuMemcpyDtoH_v2");
  required.require(api.memcpyDtoD, "cuMemcpyDtoD_v2");
  required.require(api.launchKernel, "cuLaunchKernel");
  required.require(api.eventCreate, "cuEventCreate");
  required.require(api.eventRecord, "cuEventRecord");
  required.require(api.eventSynchronize, "cuEventSynchronize");
  // The same function; _v2 is the name of CUDA 12.8 and later.
  required.require(api.eventElapsedTime, "cuEventElapsedTime_v2",
                   "cuEventElapsedTime");
  required.require(api.eventDestroy, "cuEventDestroy_v2");
  if (const char *missing = required.missing) {
    error = missingDriverFunction(library, missing);
    return false;
  }
  resolve(handle, api.funcGetParamInfo, "cuFuncGetParamInfo");
  resolve(handle, api.funcSetAttribute, "cuFuncSetAttribute");
#if LOOM_CUDA_TENSOR_MAPS
  resolve(handle, api.tensorMapEncodeTiled, "cuTensorMapEncodeTiled");
#endif
  return true;
}

bool CudaExecutor::State::selectDevice(const PlanGpuImage &image,
                                       unsigned localRank, std::string &error) {
  CUresult result = api.init(0);
  if (result == CUDA_ERROR_NO_DEVICE) {
    error = "no CUDA device found; run with --device cpu";
    return false;
  }
  if (!check(result, "cuInit", error,
             "initializing the CUDA driver " + library))
    return false;
  int count = 0;
  if (!check(api.deviceGetCount(&count), "cuDeviceGetCount", error))
    return false;
  if (count <= 0) {
    error = "no CUDA device found; run with --device cpu";
    return false;
  }
  // One device per rank of a node, in turn; on one rank device 0.
  int ordinal = static_cast<int>(localRank % static_cast<unsigned>(count));
  if (!check(api.deviceGet(&device, ordinal), "cuDeviceGet", error))
    return false;
  char name[256] = "";
  if (!check(api.deviceGetName(name, sizeof(name) - 1, device),
             "cuDeviceGetName", error))
    return false;
  deviceName = name;
  if (!check(api.deviceGetAttribute(
                 &major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device),
             "cuDeviceGetAttribute", error) ||
      !check(api.deviceGetAttribute(
                 &minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device),
             "cuDeviceGetAttribute", error) ||
      !check(api.deviceGetAttribute(
                 &sharedOptIn,
                 CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN, device),
             "cuDeviceGetAttribute", error))
    return false;
  if (major < 0 || minor < 0 ||
      !gpuImageRunsOn(image, static_cast<unsigned>(major),
                      static_cast<unsigned>(minor))) {
    error = planLine(image.line) + "the GPU image (" +
            gpuImageFormatName(image.format) + " for " + image.archName +
            ") runs on " + gpuImageRequirement(image) + ", but device " +
            std::to_string(ordinal) + " (" + deviceName +
            ") has compute capability " + std::to_string(major) + "." +
            std::to_string(minor) + "; recompile with loomc --gpu-arch=sm_" +
            std::to_string(major) + std::to_string(minor) +
            ", or run with --device cpu";
    return false;
  }
  CUcontext context = nullptr;
  if (!check(api.primaryCtxRetain(&context, device), "cuDevicePrimaryCtxRetain",
             error))
    return false;
  retained = true;
  return check(api.ctxSetCurrent(context), "cuCtxSetCurrent", error);
}

bool CudaExecutor::State::loadModule(const char *data, CUmodule &loaded,
                                     const std::string &what,
                                     std::string &error) {
  char log[8192] = "";
  CUjit_option options[] = {CU_JIT_ERROR_LOG_BUFFER,
                            CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES};
  void *values[] = {log, reinterpret_cast<void *>(sizeof(log))};
  CUresult result = api.moduleLoadDataEx(&loaded, data, 2, options, values);
  if (result == CUDA_SUCCESS)
    return true;
  loaded = nullptr;
  check(result, "cuModuleLoadDataEx", error, what);
  log[sizeof(log) - 1] = '\0';
  std::string details = log;
  while (!details.empty() && (details.back() == '\n' || details.back() == ' '))
    details.pop_back();
  if (!details.empty())
    error += "\n" + details;
  return false;
}

bool CudaExecutor::State::loadImage(const PlanGpuImage &image,
                                    const unsigned char *bytes, uint64_t size,
                                    std::string &error) {
  // A copy: PTX must end with a NUL, and a cubin is read with aligned loads.
  std::string copy(reinterpret_cast<const char *>(bytes),
                   static_cast<size_t>(size));
  return loadModule(copy.c_str(), module,
                    planLine(image.line) + "loading the GPU image (" +
                        gpuImageFormatName(image.format) + " for " +
                        image.archName + ", " + std::to_string(size) +
                        " bytes) on " + deviceName,
                    error);
}

bool CudaExecutor::State::loadRuntimeKernels(std::string &error) {
  if (!loadModule(kRuntimeKernelsPtx, runtimeModule,
                  "loading the runtime's kernels (PTX, for the accumulate "
                  "steps) on " + deviceName,
                  error))
    return false;
  return check(api.moduleGetFunction(&accumulateFunction, runtimeModule,
                                     "loom_accumulate"),
               "cuModuleGetFunction", error,
               "finding the runtime's kernel 'loom_accumulate'");
}

bool CudaExecutor::State::accumulate(size_t stepIndex, uint64_t microbatch,
                                     std::string &error) {
  const PlanStep &step = plan->steps[stepIndex];
  const PlanBuffer &in = plan->buffers[step.buffers[0]];
  const PlanBuffer &sum = plan->buffers[step.buffers[1]];
  uint64_t n = sum.bytes / sizeof(float), count = plan->optimizer.microbatches;
  // At most 2^20 microbatches (the plan's limit): the count fits above
  // the two flags.
  uint32_t mode = static_cast<uint32_t>(count << 2) |
                  (microbatch + 1 == count ? 2u : 0u) | (microbatch == 0 ? 1u : 0u);
  CUdeviceptr sumAddress = address(sum), inAddress = address(in);
  void *args[] = {&sumAddress, &inAddress, &n, &mode};
  const unsigned threads = 256;
  uint64_t blocks = std::min<uint64_t>(std::max<uint64_t>((n + threads - 1) / threads, 1), 4096);
  return check(api.launchKernel(accumulateFunction, static_cast<unsigned>(blocks), 1, 1,
                                threads, 1, 1, 0, nullptr, args, nullptr),
               "cuLaunchKernel", error,
               planLine(step.line) + "accumulating '" + in.name + "' into '" +
                   sum.name + "' (step " + std::to_string(stepIndex) +
                   ", microbatch " + std::to_string(microbatch) + ")");
}

bool CudaExecutor::State::findFunctions(std::string &error) {
  struct Function {
    CUfunction handle = nullptr;
    /// Parameter sizes, when the driver can tell (cuFuncGetParamInfo).
    bool known = false;
    std::vector<size_t> sizes;
    /// The most dynamic shared memory its launches use, and the first
    /// launch (its index) that uses that much.
    int64_t sharedBytes = 0;
    size_t sharedLaunch = 0;
  };
  std::unordered_map<std::string, Function> byName;
  std::vector<std::string> order; // the functions in plan order
  functions.clear();
  launchesOf.assign(plan->kernels.size(), {});
  for (size_t i = 0; i < plan->launches.size(); ++i) {
    const PlanLaunch &launch = plan->launches[i];
    std::string where = planLine(launch.line);
    auto found = byName.find(launch.function);
    if (found == byName.end()) {
      Function function;
      CUresult result = api.moduleGetFunction(&function.handle, module,
                                              launch.function.c_str());
      if (result == CUDA_ERROR_NOT_FOUND) {
        error =
            where + "the GPU image has no function '" + launch.function + "'";
        return false;
      }
      if (!check(result, "cuModuleGetFunction", error,
                 where + "finding '" + launch.function + "'"))
        return false;
      // Parameter sizes until the first index past the end. A driver that
      // cannot answer for parameter 0 leaves the launch unchecked.
      for (size_t index = 0; api.funcGetParamInfo && index < 4096; ++index) {
        size_t offset = 0, bytes = 0;
        if (api.funcGetParamInfo(function.handle, index, &offset, &bytes) !=
            CUDA_SUCCESS)
          break;
        function.known = true;
        function.sizes.push_back(bytes);
      }
      found = byName.emplace(launch.function, std::move(function)).first;
      order.push_back(launch.function);
    }
    Function &function = found->second;
    if (launch.sharedBytes > kDefaultSharedBytes &&
        launch.sharedBytes > sharedOptIn) {
      error = where + "the launch of '" + launch.function + "' uses " +
              std::to_string(launch.sharedBytes) +
              " bytes of dynamic shared memory, but " + deviceName +
              " allows at most " + std::to_string(sharedOptIn) +
              " per block (" + std::to_string(kDefaultSharedBytes) +
              " without opting in)";
      return false;
    }
    if (launch.sharedBytes > function.sharedBytes) {
      function.sharedBytes = launch.sharedBytes;
      function.sharedLaunch = i;
    }
    if (function.known) {
      if (function.sizes.size() != launch.args.size()) {
        error = where + "the launch passes " +
                std::to_string(launch.args.size()) + " arguments to '" +
                launch.function + "', which takes " +
                std::to_string(function.sizes.size()) + " parameters";
        return false;
      }
      for (size_t a = 0; a < launch.args.size(); ++a) {
        size_t bytes = argumentBytes(launch.args[a]);
        if (function.sizes[a] != bytes) {
          error = where + "launch argument " + std::to_string(a) + " ('" +
                  formatLaunchArg(launch.args[a]) + "', " +
                  std::to_string(bytes) + " bytes) does not match parameter " +
                  std::to_string(a) + " of '" + launch.function + "' (" +
                  std::to_string(function.sizes[a]) + " bytes)";
          return false;
        }
      }
    }
    functions.push_back(function.handle);
    launchesOf[launch.kernel].push_back(i);
  }
  // Above 48 KiB a function takes dynamic shared memory only after opting
  // in, once, to the most any of its launches uses.
  for (const std::string &name : order) {
    const Function &function = byName[name];
    if (function.sharedBytes <= kDefaultSharedBytes)
      continue;
    std::string where = planLine(plan->launches[function.sharedLaunch].line) +
                        "allowing '" + name + "' " +
                        std::to_string(function.sharedBytes) +
                        " bytes of dynamic shared memory";
    if (!api.funcSetAttribute) {
      error = where + ": " + missingDriverFunction(library, "cuFuncSetAttribute");
      return false;
    }
    if (!check(api.funcSetAttribute(
                   function.handle,
                   CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                   static_cast<int>(function.sharedBytes)),
               "cuFuncSetAttribute", error, where))
      return false;
  }
  return true;
}

bool CudaExecutor::State::encodeTensorMaps(std::string &error) {
  // Where each step's and launch's maps go: per kernel step, its kernel's
  // launches in order.
  mapsBeforeLaunch.assign(plan->launches.size(), 0);
  std::vector<size_t> mapsOfKernel(plan->kernels.size(), 0);
  for (size_t i = 0; i < plan->launches.size(); ++i) {
    const PlanLaunch &launch = plan->launches[i];
    mapsBeforeLaunch[i] = mapsOfKernel[launch.kernel];
    for (const LaunchArg &arg : launch.args)
      mapsOfKernel[launch.kernel] += arg.kind == LaunchArg::Kind::TensorMap;
  }
  size_t count = 0;
  firstMapOfStep.assign(plan->steps.size(), 0);
  for (size_t i = 0; i < plan->steps.size(); ++i) {
    firstMapOfStep[i] = count;
    if (plan->steps[i].kind == StepKind::Kernel)
      count += mapsOfKernel[plan->steps[i].kernel];
  }
  if (!count)
    return true;

  // All maps in one block, copied once; each step's maps address its own
  // buffers, so a kernel that runs in several steps has several sets.
  std::vector<char> host(count * kTensorMapBytes);
  size_t next = 0;
  for (size_t i = 0; i < plan->steps.size(); ++i) {
    const PlanStep &step = plan->steps[i];
    if (step.kind != StepKind::Kernel)
      continue;
    for (size_t index : launchesOf[step.kernel]) {
      const PlanLaunch &launch = plan->launches[index];
      for (size_t a = 0; a < launch.args.size(); ++a) {
        const LaunchArg &arg = launch.args[a];
        if (arg.kind != LaunchArg::Kind::TensorMap)
          continue;
        const PlanBuffer &buffer = plan->buffers[step.buffers[arg.buffer]];
        std::string where = planLine(launch.line) +
                            "encoding the tensor map of launch argument " +
                            std::to_string(a) + " ('" + formatLaunchArg(arg) +
                            "') of '" + launch.function + "' on buffer '" +
                            buffer.name + "' (step " + std::to_string(i) + ")";
        if (!encodeTensorMap(arg.tensorMap, address(buffer),
                             &host[kTensorMapBytes * next++], where, error))
          return false;
      }
    }
  }
  CUresult result = api.memAlloc(&tensorMaps, host.size());
  if (result != CUDA_SUCCESS) {
    tensorMaps = 0;
    return check(result, "cuMemAlloc", error,
                 "cannot allocate the " + std::to_string(count) +
                     " tensor maps (" + std::to_string(host.size()) +
                     " bytes) on " + deviceName);
  }
  return check(api.memcpyHtoD(tensorMaps, host.data(), host.size()),
               "cuMemcpyHtoD", error, "copying the tensor maps to the device");
}

bool CudaExecutor::State::encodeTensorMap(const TensorMapArg &map,
                                          CUdeviceptr buffer, char *out,
                                          const std::string &where,
                                          std::string &error) const {
#if LOOM_CUDA_TENSOR_MAPS
  static_assert(sizeof(CUtensorMap) == kTensorMapBytes, "CUtensorMap");
  if (!api.tensorMapEncodeTiled) {
    error = where + ": " +
            missingDriverFunction(library, "cuTensorMapEncodeTiled",
                                  "tensor maps need CUDA 12 or later");
    return false;
  }
  CUtensorMapDataType dtype =
      map.dtype == DType::BF16  ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
      : map.dtype == DType::F16 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT16
                                : CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  CUtensorMapSwizzle swizzle = map.swizzle == 128  ? CU_TENSOR_MAP_SWIZZLE_128B
                               : map.swizzle == 64 ? CU_TENSOR_MAP_SWIZZLE_64B
                               : map.swizzle == 32 ? CU_TENSOR_MAP_SWIZZLE_32B
                                                   : CU_TENSOR_MAP_SWIZZLE_NONE;
  cuuint64_t dims[kMaxTensorMapRank], strides[kMaxTensorMapRank - 1];
  cuuint32_t box[kMaxTensorMapRank], elementStrides[kMaxTensorMapRank];
  for (unsigned i = 0; i < map.rank; ++i) {
    dims[i] = map.dims[i];
    box[i] = map.box[i];
    elementStrides[i] = 1;
    if (i)
      strides[i - 1] = map.strides[i - 1];
  }
  // The driver wants the map 64-byte aligned, which `out` need not be.
  CUtensorMap encoded;
  void *global =
      reinterpret_cast<void *>(static_cast<uintptr_t>(buffer + map.offset));
  // Out-of-bounds elements of a box read as zero (FLOAT_OOB_FILL_NONE).
  if (!check(api.tensorMapEncodeTiled(&encoded, dtype, map.rank, global, dims,
                                      strides, box, elementStrides,
                                      CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                                      CU_TENSOR_MAP_L2_PROMOTION_L2_128B,
                                      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE),
             "cuTensorMapEncodeTiled", error, where))
    return false;
  std::memcpy(out, &encoded, kTensorMapBytes);
  return true;
#else
  (void)map, (void)buffer, (void)out;
  error = where + ": this runtime was built with the headers of CUDA " +
          std::to_string(CUDA_VERSION / 1000) + "." +
          std::to_string(CUDA_VERSION % 1000 / 10) +
          ", which have no tensor maps (build it with CUDA 12 or later)";
  return false;
#endif
}

bool CudaExecutor::State::launch(size_t index, size_t stepIndex,
                                 std::string &error) {
  const PlanLaunch &launch = plan->launches[index];
  const PlanStep &step = plan->steps[stepIndex];
  // One 8-byte slot per argument; i32 and f32 use its first 4 bytes.
  slots.assign(launch.args.size(), 0);
  params.clear();
  size_t maps = 0; // this launch's tensor maps so far
  for (size_t a = 0; a < launch.args.size(); ++a) {
    const LaunchArg &arg = launch.args[a];
    void *slot = &slots[a];
    switch (arg.kind) {
    case LaunchArg::Kind::Buffer: {
      uint64_t pointer = static_cast<uint64_t>(
          address(plan->buffers[step.buffers[arg.buffer]]));
      std::memcpy(slot, &pointer, 8);
      break;
    }
    case LaunchArg::Kind::I64:
      std::memcpy(slot, &arg.integer, 8);
      break;
    case LaunchArg::Kind::I32: {
      int32_t value = static_cast<int32_t>(arg.integer);
      std::memcpy(slot, &value, 4);
      break;
    }
    case LaunchArg::Kind::F32:
      std::memcpy(slot, &arg.real, 4);
      break;
    case LaunchArg::Kind::TensorMap: {
      uint64_t pointer = static_cast<uint64_t>(
          tensorMaps + kTensorMapBytes * (firstMapOfStep[stepIndex] +
                                          mapsBeforeLaunch[index] + maps++));
      std::memcpy(slot, &pointer, 8);
      break;
    }
    }
    params.push_back(slot);
  }
  CUresult result = api.launchKernel(
      functions[index], launch.grid[0], launch.grid[1], launch.grid[2],
      launch.block[0], launch.block[1], launch.block[2],
      static_cast<unsigned>(launch.sharedBytes), nullptr,
      params.empty() ? nullptr : params.data(), nullptr);
  return check(result, "cuLaunchKernel", error,
               planLine(launch.line) + "launching '" + launch.function +
                   "' (step " + std::to_string(stepIndex) + ", kernel '" +
                   plan->kernels[step.kernel].name + "')");
}

bool CudaExecutor::State::synchronize(const std::string &what,
                                      std::string &error) const {
  if (check(api.ctxSynchronize(), "cuCtxSynchronize", error, what))
    return true;
  error += " (with CUDA_LAUNCH_BLOCKING=1 the failing launch is reported)";
  return false;
}

CudaExecutor::CudaExecutor() = default;
CudaExecutor::~CudaExecutor() = default;

bool CudaExecutor::open(const Plan &plan, const unsigned char *image,
                        uint64_t imageSize, const char *driverLibrary,
                        std::string &error) {
  state.reset(new State());
  State &s = *state;
  s.plan = &plan;
  s.access = analyzeStepAccess(plan);
  // Collectives between GPUs run through `collectives` (NCCL).
  if ((plan.mesh.present || plan.numCollectives()) && !collectives) {
    error = "a partitioned plan runs on cuda only with collectives on the "
            "device (NCCL)";
    return false;
  }
  if (!plan.gpuImage.present || !image || imageSize == 0) {
    error = "this executable was built without GPU kernels";
    return false;
  }
  if (!s.loadDriver(driverLibrary ? driverLibrary : "libcuda.so.1", error) ||
      !s.selectDevice(plan.gpuImage, localRank, error) ||
      !s.loadImage(plan.gpuImage, image, imageSize, error) ||
      !s.findFunctions(error) ||
      (plan.microbatchSteps() && !s.loadRuntimeKernels(error)))
    return false;
  // One arena; cuMemAlloc aligns to at least 256 bytes and rejects 0.
  s.arenaBytes = plan.arenaBytes < 256 ? 256 : plan.arenaBytes;
  CUresult result = s.api.memAlloc(&s.arena, static_cast<size_t>(s.arenaBytes));
  if (result != CUDA_SUCCESS) {
    s.arena = 0;
    return s.check(result, "cuMemAlloc", error,
                   "cannot allocate the device arena of " +
                       std::to_string(plan.arenaBytes) + " bytes (" +
                       mebibytes(plan.arenaBytes) + ") on " + s.deviceName);
  }
  if (!s.encodeTensorMaps(error))
    return false;
  return !collectives || collectives->prepare(s.arena, error);
}

namespace {
/// CUDA events, destroyed with the list.
struct EventList {
  const DriverApi &api;
  std::vector<CUevent> events;
  explicit EventList(const DriverApi &api) : api(api) {}
  ~EventList() {
    for (CUevent event : events)
      api.eventDestroy(event);
  }
};
} // namespace

bool CudaExecutor::upload(char *hostArena, std::string &error) {
  if (!state || !state->arena) {
    error = "the CUDA executor is not open";
    return false;
  }
  State &s = *state;
  // Zero-filled like the host arena, then the params and inputs (which never
  // share bytes with each other) at their offsets.
  if (!s.check(s.api.memsetD8(s.arena, 0, static_cast<size_t>(s.arenaBytes)),
               "cuMemsetD8", error, "clearing the device arena"))
    return false;
  for (const PlanBuffer &buffer : s.plan->buffers) {
    if ((buffer.role != BufferRole::Param &&
         buffer.role != BufferRole::Input) ||
        !buffer.bytes)
      continue;
    if (!copyToDevice(buffer, hostArena + buffer.offset, error))
      return false;
  }
  return true;
}

bool CudaExecutor::copyToDevice(const PlanBuffer &buffer, const char *host,
                                std::string &error) {
  const State &s = *state;
  return !buffer.bytes ||
         s.check(s.api.memcpyHtoD(s.address(buffer), host,
                                  static_cast<size_t>(buffer.bytes)),
                 "cuMemcpyHtoD", error,
                 std::string("copying ") + roleName(buffer.role) + " '" +
                     buffer.name + "' to the device");
}

bool CudaExecutor::copyToHost(const PlanBuffer &buffer, char *host,
                              std::string &error) {
  const State &s = *state;
  return !buffer.bytes ||
         s.check(s.api.memcpyDtoH(host, s.address(buffer),
                                  static_cast<size_t>(buffer.bytes)),
                 "cuMemcpyDtoH", error,
                 std::string("copying ") + roleName(buffer.role) + " '" +
                     buffer.name + "' from the device");
}

bool CudaExecutor::runStep(size_t step, std::string &error) {
  State &s = *state;
  for (size_t index : s.launchesOf[s.plan->steps[step].kernel])
    if (!s.launch(index, step, error))
      return false;
  return s.synchronize(
      "running the GPU kernels of step " + std::to_string(step), error);
}

uint64_t CudaExecutor::address(const PlanBuffer &buffer) const {
  return state->address(buffer);
}

bool CudaExecutor::copyToDeviceAt(uint64_t device, const char *host,
                                  uint64_t bytes, std::string &error) {
  const State &s = *state;
  return !bytes || s.check(s.api.memcpyHtoD(static_cast<CUdeviceptr>(device), host,
                                            static_cast<size_t>(bytes)),
                           "cuMemcpyHtoD", error, "copying an input to the device");
}

bool CudaExecutor::queueStep(size_t step, uint64_t microbatch, std::string &error) {
  State &s = *state;
  if (s.plan->steps[step].kind == StepKind::Collective)
    return collectives && collectives->run(step, error);
  if (s.plan->steps[step].kind == StepKind::Accumulate)
    return s.accumulate(step, microbatch, error);
  for (size_t index : s.launchesOf[s.plan->steps[step].kernel])
    if (!s.launch(index, step, error))
      return false;
  return true;
}

bool CudaExecutor::finish(char *hostArena, std::string &error) {
  State &s = *state;
  if (!s.synchronize("running the GPU kernels", error))
    return false;
  if (collectives)
    collectives->drained();
  for (const PlanBuffer &buffer : s.plan->buffers)
    if (buffer.role == BufferRole::Output &&
        !(s.resident && s.deviceOnly[buffer.id]) &&
        !copyToHost(buffer, hostArena + buffer.offset, error))
      return false;
  return true;
}

void CudaExecutor::keepParamsOnDevice(const std::vector<uint32_t> &deviceOnly) {
  State &s = *state;
  s.resident = true;
  s.deviceOnly.assign(s.plan->buffers.size(), false);
  for (uint32_t id : deviceOnly)
    if (id < s.deviceOnly.size())
      s.deviceOnly[id] = true;
}

bool CudaExecutor::applyUpdates(
    const std::function<bool(const PlanBuffer &)> &holds, std::string &error) {
  const State &s = *state;
  // On the default stream, after the step's launches and before the next's.
  for (const PlanUpdate &update : s.plan->updates) {
    const PlanBuffer &param = s.plan->buffers[update.param];
    if (!holds(param) || !param.bytes || s.plan->isInPlace(update))
      continue;
    if (!s.check(s.api.memcpyDtoD(s.address(param),
                                  s.address(s.plan->buffers[update.output]),
                                  static_cast<size_t>(param.bytes)),
                 "cuMemcpyDtoD", error,
                 "updating param '" + param.name + "' on the device"))
      return false;
  }
  return true;
}

bool CudaExecutor::downloadParams(char *hostArena, std::string &error) {
  const State &s = *state;
  if (!s.synchronize("finishing the step's updates", error))
    return false;
  for (const PlanBuffer &buffer : s.plan->buffers)
    if (buffer.role == BufferRole::Param &&
        !copyToHost(buffer, hostArena + buffer.offset, error))
      return false;
  return true;
}

bool CudaExecutor::uploadInputs(char *hostArena, bool inputsOnly,
                                std::string &error) {
  State &s = *state;
  if (inputsOnly || (s.resident && s.uploaded)) {
    // A training step after the first, or a later microbatch: the params
    // and the optimizer state are the device's (applyUpdates); only the
    // inputs are new.
    for (const PlanBuffer &buffer : s.plan->buffers)
      if (buffer.role == BufferRole::Input &&
          !copyToDevice(buffer, hostArena + buffer.offset, error))
        return false;
  } else if (!upload(hostArena, error)) {
    return false;
  }
  s.uploaded = true;
  return true;
}

bool CudaExecutor::runSteps(char *hostArena, size_t begin, size_t end,
                            uint64_t microbatch, std::string &error) {
  State &s = *state;
  // A later microbatch must not clear the arena: the accumulates' sums
  // live there. Its dropout key goes up with its inputs.
  if (begin == 0)
    fillDropoutMicrobatch(dropoutMicrobatchKey(*s.plan), hostArena,
                          dropoutOff ? -1.0 : static_cast<double>(microbatch));
  if (begin == 0 && !uploadInputs(hostArena, microbatch > 0, error))
    return false;
  for (size_t i = begin; i < end && i < s.plan->steps.size(); ++i)
    if (!queueStep(i, microbatch, error))
      return false;
  return true;
}

bool CudaExecutor::run(char *hostArena, TraceRecorder *trace,
                       std::string &error) {
  State &s = *state;
  fillDropoutMicrobatch(dropoutMicrobatchKey(*s.plan), hostArena, dropoutOff ? -1.0 : 0.0);
  if (!uploadInputs(hostArena, /*inputsOnly=*/false, error))
    return false;
  const Plan &plan = *s.plan;
  const DriverApi &api = s.api;

  // With a trace: an event before the first launch, and one before and one
  // after every launch and every collective.
  EventList events(api);
  auto record = [&]() {
    CUevent event = nullptr;
    if (!s.check(api.eventCreate(&event, CU_EVENT_DEFAULT), "cuEventCreate",
                 error))
      return false;
    events.events.push_back(event);
    return s.check(api.eventRecord(event, nullptr), "cuEventRecord", error);
  };
  struct Timed {
    unsigned step;
    size_t launch; // kCollective for a collective step
  };
  const size_t kCollective = SIZE_MAX;
  std::vector<Timed> timed;
  if (trace && !record())
    return false;

  for (size_t i = 0; i < plan.steps.size(); ++i) {
    if (plan.steps[i].kind == StepKind::Collective) {
      // On the default stream too, so ordered with the launches (open made
      // sure there are collectives to run it).
      if ((trace && !record()) || !collectives->run(i, error))
        return false;
      if (trace) {
        if (!record())
          return false;
        timed.push_back({static_cast<unsigned>(i), kCollective});
      }
      continue;
    }
    for (size_t index : s.launchesOf[plan.steps[i].kernel]) {
      if ((trace && !record()) || !s.launch(index, i, error))
        return false;
      if (trace) {
        if (!record())
          return false;
        timed.push_back({static_cast<unsigned>(i), index});
      }
    }
  }
  if (!finish(hostArena, error))
    return false;

  if (trace) {
    if (!s.check(api.eventSynchronize(events.events.back()),
                 "cuEventSynchronize", error))
      return false;
    for (size_t t = 0; t < timed.size(); ++t) {
      float start = 0, duration = 0;
      CUevent before = events.events[1 + 2 * t];
      CUevent after = events.events[2 + 2 * t];
      if (!s.check(api.eventElapsedTime(&start, events.events[0], before),
                   "cuEventElapsedTime", error) ||
          !s.check(api.eventElapsedTime(&duration, before, after),
                   "cuEventElapsedTime", error))
        return false;
      if (timed[t].launch == kCollective) {
        const PlanCollective &op = plan.steps[timed[t].step].collective;
        trace->addCollective(timed[t].step, collectiveKindName(op.kind),
                             formatAxes(plan.mesh, op.axes), 1000.0 * start,
                             1000.0 * duration);
        continue;
      }
      const PlanLaunch &launch = plan.launches[timed[t].launch];
      const StepAccess &access = s.access[timed[t].step];
      // Milliseconds to microseconds.
      trace->addLaunch(timed[t].step, plan.kernels[launch.kernel].name,
                       launch.function, 1000.0 * start, 1000.0 * duration,
                       access.bytesRead, access.bytesWritten,
                       plan.kernels[launch.kernel].source);
    }
  }
  return true;
}

std::string CudaExecutor::deviceDescription() const {
  if (!state || state->deviceName.empty())
    return "";
  return state->deviceName + " (compute capability " +
         std::to_string(state->major) + "." + std::to_string(state->minor) +
         ")";
}

#endif // LOOM_RUNTIME_CUDA
