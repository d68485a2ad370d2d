//===- FakeCudaDriver.h - A CUDA driver without a GPU, for tests --*- C++ -*-//
//
// libLoomFakeCudaDriver.so exports the driver API functions the runtime's
// CUDA executor dlsym()s, implemented on the host: device memory is host
// memory, a "device" has the compute capability the test sets, an image is
// any bytes starting with "FAKE", and its functions are the host kernels
// below. Tests dlopen it, configure it through loomFakeCuda(), and point the
// executor at it (Executable::cudaDriver). No cuda.h here: the tests compile
// without it. Every call holds one lock, so ranks that are threads of one
// process (the multi-rank tests) may share it; each thread's current
// context is its own, as with the real driver.
//
// Functions (parameters as the plan passes them):
//   fake_add(float *a, float *b, float *out, int32 n)    out = a + b
//   fake_scale(float *in, float *out, float s, int64 n)  out = in * s
//   fake_dims(float *out)           out[0..5] = grid x y z, block x y z
//   fake_perturb(float *x, float e, int64 n)             x = x * (1 + e)
//   fake_sum(float *in, float *out, int64 n, int64 parts)
//                      out[i] = in[i] + in[n + i] + ... (parts terms, in order)
//   fake_tma(const CUtensorMap *map, void *out)
//                      out = the map's box at (0, ..., 0), densely, innermost
//                      first, out-of-bounds elements zero (a TMA load)
//   loom_accumulate(float *sum, float *in, int64 n, uint32 mode)
//                      the runtime's own kernel (RuntimeKernels.h), from the
//                      one other image it loads, the runtime's PTX (first
//                      line "// Loom runtime kernels"): sum = in (mode bit
//                      0) or sum + in, then / (mode >> 2) with mode bit 1
//
// Launches take dynamic shared memory up to 48 KiB, more up to what
// cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES) set
// for the function, which is at most the device's opt-in limit.
//
// cuTensorMapEncodeTiled makes the driver's documented checks and writes
// a FakeTensorMap of its inputs into the CUtensorMap. fake_tma reads its
// map through the pointer it gets, which must be a 64-byte aligned map in
// device memory (else the launch fails with CUDA_ERROR_ILLEGAL_ADDRESS).
// Built with LOOM_FAKE_CUDA_NO_TENSOR_MAPS (libLoomFakeCudaDriverOld.so)
// it lacks cuTensorMapEncodeTiled, as drivers before CUDA 12 do.
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_TEST_UNIT_RUNTIME_FAKECUDADRIVER_H
#define LOOM_TEST_UNIT_RUNTIME_FAKECUDADRIVER_H

#include <cstddef>
#include <cstdint>

/// What the fake cuTensorMapEncodeTiled writes into a CUtensorMap (whose
/// real contents are opaque): its inputs.
struct FakeTensorMap {
  static constexpr uint32_t kMagic = 0x504d4154; // "TAMP" little-endian
  uint32_t magic;
  uint8_t dataType; // CUtensorMapDataType
  uint8_t rank;
  uint8_t interleave, swizzle, l2Promotion, oobFill; // the enums' values
  uint64_t globalAddress;
  uint64_t globalDim[5];
  uint64_t globalStrides[4];
  uint16_t boxDim[5];
  uint8_t elementStrides[5];
};
static_assert(sizeof(FakeTensorMap) <= 128, "fits in a CUtensorMap");

struct FakeCudaLaunch {
  char function[32];
  unsigned grid[3];
  unsigned block[3];
  unsigned sharedBytes; // dynamic shared memory
  /// The first four parameters' values (each its size's bytes).
  uint64_t params[4];
  /// fake_tma: the map its parameter pointed to, as it read it.
  FakeTensorMap tensorMap;
};

/// The fake's configuration and what it saw; reset() restores the defaults.
struct FakeCudaState {
  static constexpr int kMaxDevices = 8;
  static constexpr int kNumFunctions = 7; // the functions above, in order
  /// Dynamic shared memory a function takes without opting in.
  static constexpr int kDefaultShared = 48 * 1024;

  // Configuration.
  int deviceCount = 1; // at most kMaxDevices
  /// CU_DEVICE_ATTRIBUTE_MAX_PITCH: cuMemcpy2DAsync rejects wider pitches.
  int maxPitch = 2147483647;
  int major = 9, minor = 0;
  /// CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN (an H100's):
  /// cuFuncSetAttribute refuses more.
  int sharedOptIn = 232448;
  const char *deviceName = "Fake GPU";
  /// Whether cuFuncGetParamInfo answers (drivers before CUDA 12.4 lack it).
  bool paramInfo = true;
  /// Makes the call of this name (e.g. "cuMemAlloc_v2") return failResult.
  const char *failCall = nullptr;
  int failResult = 0;
  /// Makes the launches of the function of this name return failResult.
  const char *failFunction = nullptr;

  // What happened.
  bool initialized = false;
  int retainedContexts = 0;        // primary context retains minus releases
  int retainsOf[kMaxDevices] = {}; // primary context retains, per device
  int loadedModules = 0;           // loads minus unloads
  int liveAllocations = 0;         // cuMemAlloc minus cuMemFree
  size_t lastAllocation = 0;
  size_t imageBytes = 0;    // of the last image loaded
  size_t bytesToDevice = 0; // by cuMemcpyHtoD
  size_t bytesToHost = 0;   // by cuMemcpyDtoH
  size_t bytesOnDevice = 0; // by cuMemcpyDtoD
  unsigned copies = 0;      // cuMemcpyDtoDAsync calls
  unsigned copies2D = 0;    // cuMemcpy2DAsync calls
  /// Per function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES as set
  /// by cuFuncSetAttribute (0: never set, kDefaultShared applies), and how
  /// often it was set. cuLaunchKernel refuses more shared memory.
  int maxDynamicShared[kNumFunctions] = {};
  unsigned sharedOptIns = 0;
  unsigned numLaunches = 0; // the first 64 are recorded
  FakeCudaLaunch launches[64] = {};
  unsigned tensorMapsEncoded = 0; // successful cuTensorMapEncodeTiled calls
  int liveEvents = 0;

  void reset() { *this = FakeCudaState(); }
};

/// The fake driver's state (the same object for every caller in a process).
extern "C" FakeCudaState *loomFakeCuda();

#endif // LOOM_TEST_UNIT_RUNTIME_FAKECUDADRIVER_H
