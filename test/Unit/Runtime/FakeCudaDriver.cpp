//===- FakeCudaDriver.cpp - A CUDA driver without a GPU, for tests --------===//
//
// See FakeCudaDriver.h. Compiled against cuda.h so that every function has
// the exact prototype (and versioned name, e.g. cuMemAlloc_v2) of the real
// driver's.
//
//===----------------------------------------------------------------------===//

#include "FakeCudaDriver.h"

#include <cuda.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <map>
#include <mutex>
#include <string>

namespace {
FakeCudaState state;
std::mutex mutex;

/// Whether the test asked `call` to fail.
bool failing(const char *call) {
  return state.failCall && std::strcmp(state.failCall, call) == 0;
}
// Also takes the lock for the rest of the call (the calling function's
// scope).
#define FAKE_FAIL(call)                                                        \
  std::lock_guard<std::mutex> fakeLock(mutex);                                 \
  do {                                                                         \
    if (failing(call))                                                         \
      return static_cast<CUresult>(state.failResult);                          \
    if (!state.initialized && std::strcmp(call, "cuInit") != 0)                \
      return CUDA_ERROR_NOT_INITIALIZED;                                       \
  } while (0)

struct Error {
  CUresult code;
  const char *name;
  const char *text;
};
const Error kErrors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED",
     "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE",
     "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_IMAGE, "CUDA_ERROR_INVALID_IMAGE",
     "device kernel image is invalid"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_LAUNCH_FAILED, "CUDA_ERROR_LAUNCH_FAILED",
     "unspecified launch failure"},
    {CUDA_ERROR_ILLEGAL_ADDRESS, "CUDA_ERROR_ILLEGAL_ADDRESS",
     "an illegal memory access was encountered"},
    {CUDA_ERROR_STUB_LIBRARY, "CUDA_ERROR_STUB_LIBRARY",
     "CUDA driver is a stub library"},
};

const Error *findError(CUresult code) {
  for (const Error &error : kErrors)
    if (error.code == code)
      return &error;
  return nullptr;
}

/// The live cuMemAlloc blocks: address to size.
std::map<uintptr_t, size_t> allocations;

/// Whether the `bytes` at `address` lie in one live allocation.
bool inDeviceMemory(uint64_t address, size_t bytes) {
  auto after = allocations.upper_bound(static_cast<uintptr_t>(address));
  if (after == allocations.begin())
    return false;
  auto block = std::prev(after);
  return address + bytes <= block->first + block->second;
}

/// The bytes of a CUtensorMapDataType's element (the types before the
/// packed ones), or 0.
size_t tensorMapElementBytes(unsigned dataType) {
  static const size_t kBytes[] = {1, 2, 4, 4, 8, 8, 2, 4, 8, 2, 4, 4, 4};
  return dataType < sizeof(kBytes) / sizeof(kBytes[0]) ? kBytes[dataType] : 0;
}

/// Set by a host kernel that reads memory no allocation holds; the launch
/// then fails.
bool illegalAddress = false;
/// fake_tma's map as it read it, for the launch's record.
FakeTensorMap tensorMapRead;

// The host kernels.
using HostKernel = void (*)(void **params, const unsigned *grid,
                            const unsigned *block);
template <typename T> T param(void **params, int i) {
  T value;
  std::memcpy(&value, params[i], sizeof(T));
  return value;
}
float *pointer(void **params, int i) {
  return reinterpret_cast<float *>(
      static_cast<uintptr_t>(param<CUdeviceptr>(params, i)));
}
void fakeAdd(void **params, const unsigned *, const unsigned *) {
  float *a = pointer(params, 0), *b = pointer(params, 1);
  float *out = pointer(params, 2);
  int32_t n = param<int32_t>(params, 3);
  for (int32_t i = 0; i < n; ++i)
    out[i] = a[i] + b[i];
}
void fakeScale(void **params, const unsigned *, const unsigned *) {
  float *in = pointer(params, 0), *out = pointer(params, 1);
  float s = param<float>(params, 2);
  int64_t n = param<int64_t>(params, 3);
  for (int64_t i = 0; i < n; ++i)
    out[i] = in[i] * s;
}
void fakeDims(void **params, const unsigned *grid, const unsigned *block) {
  float *out = pointer(params, 0);
  for (int i = 0; i < 3; ++i) {
    out[i] = static_cast<float>(grid[i]);
    out[3 + i] = static_cast<float>(block[i]);
  }
}

void fakePerturb(void **params, const unsigned *, const unsigned *) {
  float *x = pointer(params, 0);
  float e = param<float>(params, 1);
  int64_t n = param<int64_t>(params, 2);
  for (int64_t i = 0; i < n; ++i)
    x[i] *= 1 + e;
}

void fakeSum(void **params, const unsigned *, const unsigned *) {
  float *in = pointer(params, 0), *out = pointer(params, 1);
  int64_t n = param<int64_t>(params, 2);
  int64_t parts = param<int64_t>(params, 3);
  for (int64_t i = 0; i < n; ++i) {
    float sum = in[i];
    for (int64_t part = 1; part < parts; ++part)
      sum += in[part * n + i];
    out[i] = sum;
  }
}

void fakeTma(void **params, const unsigned *, const unsigned *) {
  uint64_t address = param<CUdeviceptr>(params, 0);
  if (address % 64 || !inDeviceMemory(address, 128)) {
    illegalAddress = true;
    return;
  }
  FakeTensorMap &map = tensorMapRead;
  std::memcpy(&map, reinterpret_cast<const void *>(address), sizeof(map));
  size_t bytes = tensorMapElementBytes(map.dataType);
  if (map.magic != FakeTensorMap::kMagic || !bytes || map.rank < 1 ||
      map.rank > 5) {
    illegalAddress = true;
    return;
  }
  const char *global =
      reinterpret_cast<const char *>(static_cast<uintptr_t>(map.globalAddress));
  char *out = reinterpret_cast<char *>(pointer(params, 1));
  uint64_t count = 1;
  for (unsigned d = 0; d < map.rank; ++d)
    count *= map.boxDim[d];
  for (uint64_t n = 0; n < count; ++n) {
    // The box coordinates of element n, innermost first.
    uint64_t rest = n, offset = 0;
    bool inside = true;
    for (unsigned d = 0; d < map.rank; ++d) {
      uint64_t coordinate = rest % map.boxDim[d];
      rest /= map.boxDim[d];
      inside &= coordinate < map.globalDim[d];
      offset += coordinate * (d ? map.globalStrides[d - 1] : bytes);
    }
    if (inside)
      std::memcpy(out + n * bytes, global + offset, bytes);
    else
      std::memset(out + n * bytes, 0, bytes);
  }
}

void loomAccumulate(void **params, const unsigned *, const unsigned *) {
  float *sum = pointer(params, 0), *in = pointer(params, 1);
  uint64_t n = param<uint64_t>(params, 2);
  uint32_t mode = param<uint32_t>(params, 3);
  float count = static_cast<float>(mode >> 2);
  for (uint64_t i = 0; i < n; ++i) {
    float value = (mode & 1) ? in[i] : sum[i] + in[i];
    sum[i] = (mode & 2) ? value / count : value;
  }
}

struct Function {
  const char *name;
  HostKernel kernel;
  size_t numParams;
  size_t sizes[4];
};
Function kFunctions[] = {
    {"fake_add", fakeAdd, 4, {8, 8, 8, 4}},
    {"fake_scale", fakeScale, 4, {8, 8, 4, 8}},
    {"fake_dims", fakeDims, 1, {8, 0, 0, 0}},
    {"fake_perturb", fakePerturb, 3, {8, 4, 8, 0}},
    {"fake_sum", fakeSum, 4, {8, 8, 8, 8}},
    {"fake_tma", fakeTma, 2, {8, 8, 0, 0}},
    {"loom_accumulate", loomAccumulate, 4, {8, 8, 8, 4}},
};
static_assert(sizeof(kFunctions) / sizeof(kFunctions[0]) ==
                  FakeCudaState::kNumFunctions,
              "FakeCudaState::kNumFunctions");

/// The index of `function` in kFunctions.
size_t functionIndex(CUfunction function) {
  return static_cast<size_t>(reinterpret_cast<const Function *>(function) -
                             kFunctions);
}

struct Module {
  int magic = 0x4d4f44;
};
struct Event {
  std::chrono::steady_clock::time_point time;
};
/// Device d's primary context is &contexts[d].
int contexts[FakeCudaState::kMaxDevices];
/// The calling thread's current context's device, or -1.
thread_local int currentDevice = -1;

void *host(CUdeviceptr pointer) {
  return reinterpret_cast<void *>(static_cast<uintptr_t>(pointer));
}
} // namespace

extern "C" FakeCudaState *loomFakeCuda() { return &state; }

CUresult CUDAAPI cuGetErrorName(CUresult error, const char **pStr) {
  const Error *found = findError(error);
  if (!found)
    return CUDA_ERROR_INVALID_VALUE;
  *pStr = found->name;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuGetErrorString(CUresult error, const char **pStr) {
  const Error *found = findError(error);
  if (!found)
    return CUDA_ERROR_INVALID_VALUE;
  *pStr = found->text;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuInit(unsigned int flags) {
  FAKE_FAIL("cuInit");
  if (flags != 0)
    return CUDA_ERROR_INVALID_VALUE;
  state.initialized = true;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetCount(int *count) {
  FAKE_FAIL("cuDeviceGetCount");
  *count = state.deviceCount;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGet(CUdevice *device, int ordinal) {
  FAKE_FAIL("cuDeviceGet");
  if (ordinal < 0 || ordinal >= state.deviceCount)
    return CUDA_ERROR_INVALID_DEVICE;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetName(char *name, int len, CUdevice) {
  FAKE_FAIL("cuDeviceGetName");
  std::strncpy(name, state.deviceName, static_cast<size_t>(len));
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDeviceGetAttribute(int *value, CUdevice_attribute attribute,
                                      CUdevice) {
  FAKE_FAIL("cuDeviceGetAttribute");
  if (attribute == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR)
    *value = state.major;
  else if (attribute == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR)
    *value = state.minor;
  else if (attribute == CU_DEVICE_ATTRIBUTE_MAX_PITCH)
    *value = state.maxPitch;
  else if (attribute == CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN)
    *value = state.sharedOptIn;
  else
    return CUDA_ERROR_INVALID_VALUE;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext *context, CUdevice device) {
  FAKE_FAIL("cuDevicePrimaryCtxRetain");
  if (device < 0 || device >= state.deviceCount)
    return CUDA_ERROR_INVALID_DEVICE;
  *context = reinterpret_cast<CUcontext>(&contexts[device]);
  ++state.retainedContexts;
  ++state.retainsOf[device];
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice) {
  FAKE_FAIL("cuDevicePrimaryCtxRelease_v2");
  --state.retainedContexts;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSetCurrent(CUcontext context) {
  FAKE_FAIL("cuCtxSetCurrent");
  for (int device = 0; device < FakeCudaState::kMaxDevices; ++device) {
    if (context == reinterpret_cast<CUcontext>(&contexts[device])) {
      currentDevice = device;
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_INVALID_CONTEXT;
}

CUresult CUDAAPI cuCtxGetDevice(CUdevice *device) {
  FAKE_FAIL("cuCtxGetDevice");
  if (currentDevice < 0)
    return CUDA_ERROR_INVALID_CONTEXT;
  *device = currentDevice;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuCtxSynchronize(void) {
  FAKE_FAIL("cuCtxSynchronize");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleLoadDataEx(CUmodule *module, const void *image,
                                    unsigned int numOptions,
                                    CUjit_option *options,
                                    void **optionValues) {
  FAKE_FAIL("cuModuleLoadDataEx");
  const char *bytes = static_cast<const char *>(image);
  const char kRuntime[] = "// Loom runtime kernels";
  if (std::strncmp(bytes, kRuntime, sizeof(kRuntime) - 1) == 0) {
    *module = reinterpret_cast<CUmodule>(new Module());
    ++state.loadedModules;
    return CUDA_SUCCESS;
  }
  if (std::strncmp(bytes, "FAKE", 4) != 0) {
    char *log = nullptr;
    size_t size = 0;
    for (unsigned i = 0; i < numOptions; ++i) {
      if (options[i] == CU_JIT_ERROR_LOG_BUFFER)
        log = static_cast<char *>(optionValues[i]);
      if (options[i] == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES)
        size = reinterpret_cast<uintptr_t>(optionValues[i]);
    }
    if (log && size)
      std::snprintf(log, size, "fake: the image does not start with FAKE\n");
    return CUDA_ERROR_INVALID_IMAGE;
  }
  state.imageBytes = std::strlen(bytes);
  *module = reinterpret_cast<CUmodule>(new Module());
  ++state.loadedModules;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleUnload(CUmodule module) {
  FAKE_FAIL("cuModuleUnload");
  delete reinterpret_cast<Module *>(module);
  --state.loadedModules;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuModuleGetFunction(CUfunction *function, CUmodule,
                                     const char *name) {
  FAKE_FAIL("cuModuleGetFunction");
  for (Function &candidate : kFunctions) {
    if (std::strcmp(candidate.name, name) == 0) {
      *function = reinterpret_cast<CUfunction>(&candidate);
      return CUDA_SUCCESS;
    }
  }
  return CUDA_ERROR_NOT_FOUND;
}

CUresult CUDAAPI cuFuncGetParamInfo(CUfunction function, size_t index,
                                    size_t *offset, size_t *size) {
  FAKE_FAIL("cuFuncGetParamInfo");
  if (!state.paramInfo)
    return CUDA_ERROR_NOT_SUPPORTED;
  const Function *found = reinterpret_cast<const Function *>(function);
  if (index >= found->numParams)
    return CUDA_ERROR_INVALID_VALUE;
  *offset = 0;
  for (size_t i = 0; i < index; ++i)
    *offset += found->sizes[i];
  *size = found->sizes[index];
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuFuncSetAttribute(CUfunction function,
                                    CUfunction_attribute attribute, int value) {
  FAKE_FAIL("cuFuncSetAttribute");
  if (attribute != CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES ||
      value < 0 || value > state.sharedOptIn)
    return CUDA_ERROR_INVALID_VALUE;
  state.maxDynamicShared[functionIndex(function)] = value;
  ++state.sharedOptIns;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemAlloc(CUdeviceptr *pointer, size_t bytes) {
  FAKE_FAIL("cuMemAlloc_v2");
  if (bytes == 0)
    return CUDA_ERROR_INVALID_VALUE;
  void *block = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
  if (!block)
    return CUDA_ERROR_OUT_OF_MEMORY;
  std::memset(block, 0xA5, bytes); // not zero: the executor must clear it
  *pointer = reinterpret_cast<uintptr_t>(block);
  allocations[reinterpret_cast<uintptr_t>(block)] = bytes;
  state.lastAllocation = bytes;
  ++state.liveAllocations;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemFree(CUdeviceptr pointer) {
  FAKE_FAIL("cuMemFree_v2");
  if (!allocations.erase(static_cast<uintptr_t>(pointer)))
    return CUDA_ERROR_INVALID_VALUE;
  std::free(reinterpret_cast<void *>(static_cast<uintptr_t>(pointer)));
  --state.liveAllocations;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemsetD8(CUdeviceptr pointer, unsigned char value,
                            size_t count) {
  FAKE_FAIL("cuMemsetD8_v2");
  std::memset(reinterpret_cast<void *>(static_cast<uintptr_t>(pointer)), value,
              count);
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr device, const void *host,
                              size_t bytes) {
  FAKE_FAIL("cuMemcpyHtoD_v2");
  std::memcpy(reinterpret_cast<void *>(static_cast<uintptr_t>(device)), host,
              bytes);
  state.bytesToDevice += bytes;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyDtoH(void *host, CUdeviceptr device, size_t bytes) {
  FAKE_FAIL("cuMemcpyDtoH_v2");
  std::memcpy(host, reinterpret_cast<void *>(static_cast<uintptr_t>(device)),
              bytes);
  state.bytesToHost += bytes;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
  FAKE_FAIL("cuMemcpyDtoD_v2");
  std::memmove(host(dst), host(src), bytes);
  state.bytesOnDevice += bytes;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpyDtoDAsync(CUdeviceptr dst, CUdeviceptr src,
                                   size_t bytes, CUstream stream) {
  FAKE_FAIL("cuMemcpyDtoDAsync_v2");
  if (stream) // the executor's stream is the default one
    return CUDA_ERROR_INVALID_VALUE;
  std::memmove(host(dst), host(src), bytes);
  ++state.copies;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuMemcpy2DAsync(const CUDA_MEMCPY2D *copy, CUstream stream) {
  FAKE_FAIL("cuMemcpy2DAsync_v2");
  // Device to device only, pitches within the limit, as the real driver
  // checks.
  if (stream || copy->srcMemoryType != CU_MEMORYTYPE_DEVICE ||
      copy->dstMemoryType != CU_MEMORYTYPE_DEVICE ||
      copy->WidthInBytes > copy->srcPitch ||
      copy->WidthInBytes > copy->dstPitch ||
      copy->srcPitch > static_cast<size_t>(state.maxPitch) ||
      copy->dstPitch > static_cast<size_t>(state.maxPitch))
    return CUDA_ERROR_INVALID_VALUE;
  const char *src = static_cast<const char *>(host(copy->srcDevice)) +
                    copy->srcY * copy->srcPitch + copy->srcXInBytes;
  char *dst = static_cast<char *>(host(copy->dstDevice)) +
              copy->dstY * copy->dstPitch + copy->dstXInBytes;
  for (size_t row = 0; row < copy->Height; ++row)
    std::memcpy(dst + row * copy->dstPitch, src + row * copy->srcPitch,
                copy->WidthInBytes);
  ++state.copies2D;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuLaunchKernel(CUfunction function, unsigned int gridX,
                                unsigned int gridY, unsigned int gridZ,
                                unsigned int blockX, unsigned int blockY,
                                unsigned int blockZ, unsigned int sharedBytes,
                                CUstream stream, void **params, void **extra) {
  FAKE_FAIL("cuLaunchKernel");
  if (stream || extra)
    return CUDA_ERROR_INVALID_VALUE;
  const Function *found = reinterpret_cast<const Function *>(function);
  if (state.failFunction && std::strcmp(found->name, state.failFunction) == 0)
    return static_cast<CUresult>(state.failResult);
  int maxShared = state.maxDynamicShared[functionIndex(function)];
  if (sharedBytes > static_cast<unsigned>(
                        maxShared ? maxShared : FakeCudaState::kDefaultShared))
    return CUDA_ERROR_INVALID_VALUE;
  unsigned grid[3] = {gridX, gridY, gridZ};
  unsigned block[3] = {blockX, blockY, blockZ};
  FakeCudaLaunch *record =
      state.numLaunches < 64 ? &state.launches[state.numLaunches] : nullptr;
  if (record) {
    std::snprintf(record->function, sizeof(record->function), "%s",
                  found->name);
    std::memcpy(record->grid, grid, sizeof(grid));
    std::memcpy(record->block, block, sizeof(block));
    record->sharedBytes = sharedBytes;
    for (size_t i = 0; i < found->numParams && i < 4; ++i) {
      record->params[i] = 0;
      std::memcpy(&record->params[i], params[i], found->sizes[i]);
    }
  }
  ++state.numLaunches;
  illegalAddress = false;
  tensorMapRead = FakeTensorMap();
  found->kernel(params, grid, block);
  if (record)
    record->tensorMap = tensorMapRead;
  return illegalAddress ? CUDA_ERROR_ILLEGAL_ADDRESS : CUDA_SUCCESS;
}

#ifndef LOOM_FAKE_CUDA_NO_TENSOR_MAPS
CUresult CUDAAPI cuTensorMapEncodeTiled(
    CUtensorMap *tensorMap, CUtensorMapDataType dataType, cuuint32_t rank,
    void *globalAddress, const cuuint64_t *globalDim,
    const cuuint64_t *globalStrides, const cuuint32_t *boxDim,
    const cuuint32_t *elementStrides, CUtensorMapInterleave interleave,
    CUtensorMapSwizzle swizzle, CUtensorMapL2promotion l2Promotion,
    CUtensorMapFloatOOBfill oobFill) {
  FAKE_FAIL("cuTensorMapEncodeTiled");
  // The driver's documented requirements (interleave none or 16B; the
  // packed data types are not modelled).
  uintptr_t address = reinterpret_cast<uintptr_t>(globalAddress);
  size_t bytes = tensorMapElementBytes(dataType);
  if (reinterpret_cast<uintptr_t>(tensorMap) % 64 || !bytes || rank < 1 ||
      rank > 5 || address % 16 || interleave > CU_TENSOR_MAP_INTERLEAVE_16B ||
      swizzle > CU_TENSOR_MAP_SWIZZLE_128B_ATOM_64B ||
      l2Promotion > CU_TENSOR_MAP_L2_PROMOTION_L2_256B ||
      oobFill > CU_TENSOR_MAP_FLOAT_OOB_FILL_NAN_REQUEST_ZERO_FMA)
    return CUDA_ERROR_INVALID_VALUE;
  for (cuuint32_t d = 0; d < rank; ++d)
    if (globalDim[d] == 0 || globalDim[d] > (uint64_t(1) << 32) ||
        boxDim[d] == 0 || boxDim[d] > 256 || elementStrides[d] == 0 ||
        elementStrides[d] > 8 ||
        (d && (globalStrides[d - 1] % 16 ||
               globalStrides[d - 1] >= (uint64_t(1) << 40))))
      return CUDA_ERROR_INVALID_VALUE;
  size_t innerBytes = boxDim[0] * bytes;
  size_t span = swizzle == CU_TENSOR_MAP_SWIZZLE_NONE  ? 0
                : swizzle == CU_TENSOR_MAP_SWIZZLE_32B ? 32
                : swizzle == CU_TENSOR_MAP_SWIZZLE_64B ? 64
                                                       : 128;
  if (interleave == CU_TENSOR_MAP_INTERLEAVE_NONE &&
      (innerBytes % 16 || (span && innerBytes > span)))
    return CUDA_ERROR_INVALID_VALUE;

  FakeTensorMap map = {};
  map.magic = FakeTensorMap::kMagic;
  map.dataType = static_cast<uint8_t>(dataType);
  map.rank = static_cast<uint8_t>(rank);
  map.interleave = static_cast<uint8_t>(interleave);
  map.swizzle = static_cast<uint8_t>(swizzle);
  map.l2Promotion = static_cast<uint8_t>(l2Promotion);
  map.oobFill = static_cast<uint8_t>(oobFill);
  map.globalAddress = address;
  for (cuuint32_t d = 0; d < rank; ++d) {
    map.globalDim[d] = globalDim[d];
    map.boxDim[d] = static_cast<uint16_t>(boxDim[d]);
    map.elementStrides[d] = static_cast<uint8_t>(elementStrides[d]);
    if (d)
      map.globalStrides[d - 1] = globalStrides[d - 1];
  }
  std::memset(tensorMap, 0, sizeof(*tensorMap));
  std::memcpy(tensorMap, &map, sizeof(map));
  ++state.tensorMapsEncoded;
  return CUDA_SUCCESS;
}
#endif

CUresult CUDAAPI cuEventCreate(CUevent *event, unsigned int) {
  FAKE_FAIL("cuEventCreate");
  *event = reinterpret_cast<CUevent>(new Event());
  ++state.liveEvents;
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventRecord(CUevent event, CUstream) {
  FAKE_FAIL("cuEventRecord");
  reinterpret_cast<Event *>(event)->time = std::chrono::steady_clock::now();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventSynchronize(CUevent) {
  FAKE_FAIL("cuEventSynchronize");
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventElapsedTime(float *milliseconds, CUevent start,
                                    CUevent end) {
  FAKE_FAIL("cuEventElapsedTime");
  *milliseconds = std::chrono::duration<float, std::milli>(
                      reinterpret_cast<Event *>(end)->time -
                      reinterpret_cast<Event *>(start)->time)
                      .count();
  return CUDA_SUCCESS;
}

CUresult CUDAAPI cuEventDestroy(CUevent event) {
  FAKE_FAIL("cuEventDestroy_v2");
  delete reinterpret_cast<Event *>(event);
  --state.liveEvents;
  return CUDA_SUCCESS;
}
