//===- Nccl.cpp - A multi-rank run's collectives on GPUs, with NCCL -------===//
//
// NCCL's few types are declared here, not taken from nccl.h: nccl.h comes
// with NCCL (libnccl-dev), not with the CUDA toolkit, and the runtime must
// build wherever cuda.h is. The values are nccl.h's, which NCCL 2 has kept
// (its ABI is stable); the tests' fake NCCL is compiled against nccl.h
// where it is found, so a wrong value fails them.
//
// NCCL moves flat buffers: an all-gather concatenates the members' bytes
// and a reduce-scatter hands member j the j-th contiguous chunk, which is
// the plan's collective along dim D only when the dims before D are all 1.
// Otherwise the tensor is seen as R rows (the product of the dims before
// D) of n blocks side by side, and strided copies (cuMemcpy2DAsync) move
// the blocks between that layout and n contiguous blocks in scratch memory.
//
// Without cuda.h at build time (LOOM_RUNTIME_CUDA undefined) the runtime
// has no CUDA executor, and load() says so.
//
//===----------------------------------------------------------------------===//

#include "loom/runtime/comm/Nccl.h"

using namespace loom::runtime;

#ifndef LOOM_RUNTIME_CUDA

struct NcclCollectives::State {};
NcclCollectives::NcclCollectives() = default;
NcclCollectives::~NcclCollectives() = default;

bool NcclCollectives::load(const Plan &, Communicator &, const char *,
                           const char *, std::string &error) {
  error = "this runtime was built without CUDA support";
  return false;
}

std::string NcclCollectives::version() const { return ""; }

bool NcclCollectives::prepare(uint64_t, std::string &error) {
  error = "this runtime was built without CUDA support";
  return false;
}

bool NcclCollectives::shareIds(std::string &error) {
  error = "this runtime was built without CUDA support";
  return false;
}

bool NcclCollectives::connect(std::string &error) {
  error = "this runtime was built without CUDA support";
  return false;
}

bool NcclCollectives::run(size_t, std::string &error) {
  error = "this runtime was built without CUDA support";
  return false;
}

void NcclCollectives::drained() {}
void NcclCollectives::watch(double, const std::string &, unsigned, std::FILE *) {}

bool NcclCollectives::send(unsigned, uint64_t, uint64_t, std::string &error) {
  error = "this runtime was built without CUDA support";
  return false;
}

bool NcclCollectives::recv(unsigned, uint64_t, uint64_t, std::string &error) {
  error = "this runtime was built without CUDA support";
  return false;
}

bool NcclCollectives::broadcast(unsigned, uint64_t, uint64_t, std::string &error) {
  error = "this runtime was built without CUDA support";
  return false;
}

bool NcclCollectives::copy(uint64_t, uint64_t, uint64_t, std::string &error) {
  error = "this runtime was built without CUDA support";
  return false;
}

bool NcclCollectives::allocate(uint64_t, uint64_t &, std::string &error) {
  error = "this runtime was built without CUDA support";
  return false;
}

#else // LOOM_RUNTIME_CUDA

#include "support/Symbols.h"
#include "loom/runtime/plan/Layout.h"

#include <cuda.h>

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <thread>
#include <vector>

namespace {
// From nccl.h. Fixed underlying types: NCCL returns and takes C enums,
// which are ints, and may return values not named here.
enum ncclResult_t : int { ncclSuccess = 0, ncclInProgress = 7 };
enum ncclRedOp_t : int { ncclSum = 0 };
enum ncclDataType_t : int {
  ncclUint8 = 1,
  ncclUint32 = 3,
  ncclUint64 = 5,
  ncclFloat16 = 6,
  ncclFloat32 = 7,
  ncclBfloat16 = 9, // NCCL 2.10 and later
};
struct ncclComm;
typedef ncclComm *ncclComm_t;
typedef struct {
  char internal[128]; // NCCL_UNIQUE_ID_BYTES
} ncclUniqueId;
/// NCCL_VERSION(2, 10, 0): ncclGetVersion's code for 2.10.0.
constexpr int kNcclMinimumVersion = 21000;

/// The NCCL functions the collectives call (cudaStream_t is CUstream).
struct NcclApi {
  const char *(*getErrorString)(ncclResult_t) = nullptr;
  /// Optional (NCCL 2.13 and later): details of the last error.
  const char *(*getLastError)(ncclComm_t) = nullptr;
  ncclResult_t (*getVersion)(int *) = nullptr;
  ncclResult_t (*getUniqueId)(ncclUniqueId *) = nullptr;
  ncclResult_t (*commInitRank)(ncclComm_t *, int, ncclUniqueId, int) = nullptr;
  ncclResult_t (*commDestroy)(ncclComm_t) = nullptr;
  ncclResult_t (*commAbort)(ncclComm_t) = nullptr;
  ncclResult_t (*commGetAsyncError)(ncclComm_t, ncclResult_t *) = nullptr;
  ncclResult_t (*allReduce)(const void *, void *, size_t, ncclDataType_t,
                            ncclRedOp_t, ncclComm_t, CUstream) = nullptr;
  ncclResult_t (*allGather)(const void *, void *, size_t, ncclDataType_t,
                            ncclComm_t, CUstream) = nullptr;
  ncclResult_t (*reduceScatter)(const void *, void *, size_t, ncclDataType_t,
                                ncclRedOp_t, ncclComm_t, CUstream) = nullptr;
  ncclResult_t (*broadcast)(const void *, void *, size_t, ncclDataType_t, int,
                            ncclComm_t, CUstream) = nullptr;
  ncclResult_t (*send)(const void *, size_t, ncclDataType_t, int, ncclComm_t,
                       CUstream) = nullptr;
  ncclResult_t (*recv)(void *, size_t, ncclDataType_t, int, ncclComm_t,
                       CUstream) = nullptr;
  ncclResult_t (*groupStart)() = nullptr;
  ncclResult_t (*groupEnd)() = nullptr;
};

/// The CUDA driver functions that rearrange blocks and hold the scratch
/// memory, under the versioned names cuda.h maps them to.
struct CopyApi {
  decltype(&::cuGetErrorName) getErrorName = nullptr;
  decltype(&::cuGetErrorString) getErrorString = nullptr;
  decltype(&::cuCtxGetDevice) ctxGetDevice = nullptr;
  decltype(&::cuDeviceGetAttribute) deviceGetAttribute = nullptr;
  decltype(&::cuMemAlloc) memAlloc = nullptr;
  decltype(&::cuMemFree) memFree = nullptr;
  decltype(&::cuMemcpyDtoDAsync) memcpyDtoDAsync = nullptr;
  decltype(&::cuMemcpy2DAsync) memcpy2DAsync = nullptr;
};

/// "2.28.9" from ncclGetVersion's code (X*1000 + Y*100 + Z up to 2.8,
/// X*10000 + Y*100 + Z since 2.9).
std::string versionName(int code) {
  int major = code >= 10000 ? code / 10000 : code / 1000;
  int minor = code >= 10000 ? code % 10000 / 100 : code % 1000 / 100;
  return std::to_string(major) + "." + std::to_string(minor) + "." +
         std::to_string(code % 100);
}

/// The type NCCL sums `dtype` in. Integers as unsigned: the same bits as
/// signed, with wrapping that is defined, as the plan's sums wrap.
ncclDataType_t sumType(DType dtype) {
  switch (dtype) {
  case DType::F32:
    return ncclFloat32;
  case DType::F16:
    return ncclFloat16;
  case DType::BF16:
    return ncclBfloat16;
  case DType::I32:
    return ncclUint32;
  case DType::I64:
    return ncclUint64;
  }
  return ncclFloat32;
}

/// A tensor of `shape` as `rows` rows (the product of the dims before
/// `dim`), each of n blocks of `width` bytes side by side (the product of
/// the dims from `dim` on, times the element size, over n).
struct Blocks {
  uint64_t rows = 1;
  uint64_t width = 0;
};
Blocks blocksAlong(const Shape &shape, unsigned dim, unsigned n,
                   size_t element) {
  Blocks blocks;
  uint64_t bytes = element;
  for (size_t d = 0; d < shape.size(); ++d)
    (d < dim ? blocks.rows : bytes) *= shape[d];
  blocks.width = bytes / n;
  return blocks;
}

/// The device scratch bytes step `step` needs: where the blocks are not
/// contiguous, the gathered or the packed blocks (an all-to-all may need
/// both its send and its receive side packed).
uint64_t scratchBytes(const Plan &plan, const PlanStep &step) {
  const PlanCollective &op = step.collective;
  const PlanBuffer &in = plan.buffers[step.buffers[0]];
  const PlanBuffer &out = plan.buffers[step.buffers[1]];
  size_t element = dtypeSize(in.dtype);
  unsigned n = op.groupSize;
  switch (op.kind) {
  case CollectiveKind::AllGather:
    return blocksAlong(in.shape, op.dim, 1, element).rows > 1 ? n * in.bytes
                                                              : 0;
  case CollectiveKind::ReduceScatter:
    return blocksAlong(in.shape, op.dim, n, element).rows > 1 ? in.bytes : 0;
  case CollectiveKind::AllToAll:
    return (blocksAlong(in.shape, op.dim, n, element).rows > 1 ? in.bytes : 0) +
           (blocksAlong(out.shape, op.concatDim, n, element).rows > 1 ? in.bytes
                                                                      : 0);
  case CollectiveKind::AllReduce:
  case CollectiveKind::AllSlice:
  case CollectiveKind::Broadcast:
    return 0;
  }
  return 0;
}
} // namespace

struct NcclCollectives::State {
  const Plan *plan = nullptr;
  Communicator *world = nullptr;
  std::string library;       // NCCL's
  std::string driverLibrary; // CUDA's
  NcclApi nccl;
  CopyApi cuda;
  int versionCode = 0;
  CUdeviceptr arena = 0;
  CUdeviceptr scratch = 0;
  /// CU_DEVICE_ATTRIBUTE_MAX_PITCH: wider rows are copied one by one.
  uint64_t maxPitch = 0;
  /// Per step, this rank's group (collective steps only).
  std::vector<CommGroup> groups;
  /// The groups this rank is in, in the order the steps first use them,
  /// with their NCCL ids (shareIds) and communicators (connect).
  struct Member {
    const CommGroup *group;
    const PlanStep *first; // the first step over the group
    ncclUniqueId id;
  };
  std::vector<Member> members;
  /// A pipelined plan's group over the pipeline axis (its sends, receives
  /// and broadcasts), and the device memory allocated for its runner.
  CommGroup pipelineGroup;
  std::vector<CUdeviceptr> blocks;
  /// The communicators, by the group's axes.
  std::map<std::vector<unsigned>, ncclComm_t> comms;

  /// The watchdog (watch): its thread, and what it watches under `mutex`.
  std::thread watcher;
  std::mutex mutex;
  std::condition_variable changed;
  bool stopping = false;
  /// Collectives queued since the host last waited for all of them, and
  /// when the last was queued.
  bool queued = false;
  std::chrono::steady_clock::time_point lastQueued;
  /// Starts the watchdog's clock: work is queued that may wait for a peer.
  void markQueued() {
    std::lock_guard<std::mutex> lock(mutex);
    queued = true;
    lastQueued = std::chrono::steady_clock::now();
  }
  /// A pipelined plan's send (or receive) with world rank `peer`.
  bool pointToPoint(bool sending, unsigned peer, uint64_t data, uint64_t bytes,
                    std::string &error);

  ~State();

  /// The watchdog's loop: returns when stopping.
  void watchdog(double seconds, const std::string &program, unsigned rank, std::FILE *err);
  /// "spmd-plan:LINE: the NCCL communicator of the group over AXES (N
  /// ranks): ..." for the first communicator with an asynchronous error
  /// (or whose query failed), or empty.
  std::string asyncError() const;

  /// False with "CALL failed: NCCL's description" unless `result` is
  /// success.
  bool check(ncclResult_t result, const char *call, std::string &error,
             ncclComm_t comm = nullptr) const;
  /// Ends the NCCL group begun with ncclGroupStart, also after an error in
  /// it: whether the group's calls (`ok`) and its end succeeded; the end's
  /// error goes to `error` unless one came before.
  bool endGroup(bool ok, std::string &error, ncclComm_t comm) const {
    std::string ending;
    bool ended = check(nccl.groupEnd(), "ncclGroupEnd", ending, comm);
    if (ok && !ended)
      error = ending;
    return ok && ended;
  }
  /// The same for the CUDA driver's results.
  bool checkCuda(CUresult result, const char *call, std::string &error) const;
  bool loadCopies(std::string &error);
  /// "plan:LINE: the NCCL communicator of the group over AXES (N ranks): ".
  std::string describe(const Member &member) const;

  CUdeviceptr address(unsigned buffer) const {
    return arena + plan->buffers[buffer].offset;
  }
  static void *pointer(CUdeviceptr address) {
    return reinterpret_cast<void *>(static_cast<uintptr_t>(address));
  }
  /// Copies `rows` rows of `width` bytes, `srcPitch` bytes apart at `src`,
  /// to rows `dstPitch` bytes apart at `dst`.
  bool copy(CUdeviceptr dst, uint64_t dstPitch, CUdeviceptr src,
            uint64_t srcPitch, uint64_t width, uint64_t rows,
            std::string &error) const;
  /// Copies the n blocks of `whole` (laid out as `blocks`) one after the
  /// other into `packed`, or, with `unpack`, back.
  bool pack(CUdeviceptr whole, CUdeviceptr packed, const Blocks &blocks,
            unsigned n, bool unpack, std::string &error) const;

  bool allToAll(const PlanStep &step, const CommGroup &group, ncclComm_t comm,
                std::string &error) const;
};

NcclCollectives::State::~State() {
  if (watcher.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    changed.notify_all();
    watcher.join();
  }
  // Best effort: nothing to report from a destructor. NCCL stays loaded, as
  // the driver does. Collectives still queued (the run failed before the
  // host waited for them) may wait for a peer that is gone: ncclCommDestroy
  // would wait with them, ncclCommAbort does not.
  for (auto &entry : comms)
    (queued ? nccl.commAbort : nccl.commDestroy)(entry.second);
  if (scratch)
    cuda.memFree(scratch);
  for (CUdeviceptr block : blocks)
    cuda.memFree(block);
}

bool NcclCollectives::State::check(ncclResult_t result, const char *call,
                                   std::string &error, ncclComm_t comm) const {
  if (result == ncclSuccess)
    return true;
  const char *text = nccl.getErrorString(result);
  error = std::string(call) +
          " failed: " + (text ? text : "NCCL error " + std::to_string(result));
  const char *last = nccl.getLastError ? nccl.getLastError(comm) : nullptr;
  if (last && *last)
    error += std::string(" (") + last + ")";
  return false;
}

std::string NcclCollectives::State::asyncError() const {
  for (const Member &member : members) {
    ncclComm_t comm = comms.at(member.group->axes);
    ncclResult_t result = ncclSuccess;
    std::string error;
    if (!check(nccl.commGetAsyncError(comm, &result), "ncclCommGetAsyncError", error, comm) ||
        (result != ncclSuccess && result != ncclInProgress &&
         !check(result, "an asynchronous operation", error, comm)))
      // Only the partitioned plan runs on several ranks: its lines.
      return "spmd-" + describe(member) + error;
  }
  return "";
}

void NcclCollectives::State::watchdog(double seconds, const std::string &program,
                                      unsigned rank, std::FILE *err) {
  // Polled, as NCCL's asynchronous errors are: often enough to end a
  // broken job quickly, seldom enough to cost nothing.
  auto poll = std::chrono::milliseconds(100);
  auto limit = std::chrono::duration<double>(seconds);
  std::unique_lock<std::mutex> lock(mutex);
  while (!stopping) {
    changed.wait_for(lock, poll, [&] { return stopping; });
    if (stopping)
      return;
    std::string why = asyncError();
    if (why.empty() && seconds > 0 && queued &&
        std::chrono::steady_clock::now() - lastQueued > limit) {
      char text[160];
      std::snprintf(text, sizeof(text),
                    "the GPU's collectives did not finish within %g s: another rank "
                    "failed, died or hangs (--collective-timeout)",
                    seconds);
      why = text;
    }
    if (why.empty())
      continue;
    // The GPU may be stuck in NCCL kernels waiting for a peer: abort them
    // all, then end the process (the host thread waits on the GPU).
    std::fprintf(err, "%s: error: rank %u: %s; the NCCL communicators are aborted\n",
                 program.c_str(), rank, why.c_str());
    std::fflush(err);
    std::fflush(stdout);
    for (auto &entry : comms)
      nccl.commAbort(entry.second);
    std::_Exit(1);
  }
}

bool NcclCollectives::State::checkCuda(CUresult result, const char *call,
                                       std::string &error) const {
  if (result == CUDA_SUCCESS)
    return true;
  const char *name = nullptr, *text = nullptr;
  std::string described = "CUDA error " + std::to_string(result);
  if (cuda.getErrorName(result, &name) == CUDA_SUCCESS && name) {
    described = name;
    if (cuda.getErrorString(result, &text) == CUDA_SUCCESS && text)
      described += std::string(" (") + text + ")";
  }
  error = std::string(call) + " failed: " + described;
  return false;
}

bool NcclCollectives::State::loadCopies(std::string &error) {
  // The executor has loaded the driver: this only finds it again.
  void *handle = dlopen(driverLibrary.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    error = "no CUDA driver (" + driverLibrary + ") found";
    return false;
  }
  RequiredSymbols required{handle};
  required.require(cuda.getErrorName, "cuGetErrorName");
  required.require(cuda.getErrorString, "cuGetErrorString");
  required.require(cuda.ctxGetDevice, "cuCtxGetDevice");
  required.require(cuda.deviceGetAttribute, "cuDeviceGetAttribute");
  required.require(cuda.memAlloc, "cuMemAlloc_v2");
  required.require(cuda.memFree, "cuMemFree_v2");
  required.require(cuda.memcpyDtoDAsync, "cuMemcpyDtoDAsync_v2");
  required.require(cuda.memcpy2DAsync, "cuMemcpy2DAsync_v2");
  if (const char *missing = required.missing) {
    error = missingDriverFunction(driverLibrary, missing);
    return false;
  }
  CUdevice device = 0;
  int pitch = 0;
  if (!checkCuda(cuda.ctxGetDevice(&device), "cuCtxGetDevice", error) ||
      !checkCuda(cuda.deviceGetAttribute(&pitch, CU_DEVICE_ATTRIBUTE_MAX_PITCH,
                                         device),
                 "cuDeviceGetAttribute", error))
    return false;
  maxPitch = pitch > 0 ? static_cast<uint64_t>(pitch) : 0;
  return true;
}

std::string NcclCollectives::State::describe(const Member &member) const {
  // The pipeline axis's group may have no collective step.
  unsigned line = member.first ? member.first->line : plan->pipeline.line;
  return "plan:" + std::to_string(line) +
         ": the NCCL communicator of the group over " +
         formatAxes(plan->mesh, member.group->axes) + " (" +
         std::to_string(member.group->size()) + " ranks): ";
}

bool NcclCollectives::State::copy(CUdeviceptr dst, uint64_t dstPitch,
                                  CUdeviceptr src, uint64_t srcPitch,
                                  uint64_t width, uint64_t rows,
                                  std::string &error) const {
  // Everything on the default stream (null), where NCCL and the launches
  // run: the copies are ordered with them.
  if (rows == 1 || (dstPitch == width && srcPitch == width))
    return checkCuda(cuda.memcpyDtoDAsync(
                         dst, src, static_cast<size_t>(width * rows), nullptr),
                     "cuMemcpyDtoDAsync", error);
  if (dstPitch <= maxPitch && srcPitch <= maxPitch) {
    CUDA_MEMCPY2D copy;
    std::memset(&copy, 0, sizeof(copy));
    copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.srcDevice = src;
    copy.srcPitch = static_cast<size_t>(srcPitch);
    copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
    copy.dstDevice = dst;
    copy.dstPitch = static_cast<size_t>(dstPitch);
    copy.WidthInBytes = static_cast<size_t>(width);
    copy.Height = static_cast<size_t>(rows);
    return checkCuda(cuda.memcpy2DAsync(&copy, nullptr), "cuMemcpy2DAsync",
                     error);
  }
  for (uint64_t row = 0; row < rows; ++row)
    if (!checkCuda(cuda.memcpyDtoDAsync(dst + row * dstPitch,
                                        src + row * srcPitch,
                                        static_cast<size_t>(width), nullptr),
                   "cuMemcpyDtoDAsync", error))
      return false;
  return true;
}

bool NcclCollectives::State::pack(CUdeviceptr whole, CUdeviceptr packed,
                                  const Blocks &blocks, unsigned n, bool unpack,
                                  std::string &error) const {
  // Block j: in `whole` at column j * width of rows n * width wide; in
  // `packed` the j-th run of rows * width bytes.
  uint64_t row = n * blocks.width;
  uint64_t block = blocks.rows * blocks.width;
  for (unsigned j = 0; j < n; ++j) {
    CUdeviceptr spread = whole + j * blocks.width;
    CUdeviceptr dense = packed + j * block;
    bool ok = unpack ? copy(spread, row, dense, blocks.width, blocks.width,
                            blocks.rows, error)
                     : copy(dense, blocks.width, spread, row, blocks.width,
                            blocks.rows, error);
    if (!ok)
      return false;
  }
  return true;
}

bool NcclCollectives::State::allToAll(const PlanStep &step,
                                      const CommGroup &group, ncclComm_t comm,
                                      std::string &error) const {
  const PlanCollective &op = step.collective;
  const PlanBuffer &in = plan->buffers[step.buffers[0]];
  const PlanBuffer &out = plan->buffers[step.buffers[1]];
  unsigned n = group.size(), self = group.index;
  size_t element = dtypeSize(in.dtype);
  uint64_t blockBytes = in.bytes / n;
  Blocks split = blocksAlong(in.shape, op.dim, n, element);
  Blocks joined = blocksAlong(out.shape, op.concatDim, n, element);
  // The blocks to send and those received, each n contiguous blocks: in
  // IN and OUT themselves where the split dims lead, else in scratch.
  CUdeviceptr send = address(step.buffers[0]);
  CUdeviceptr recv = address(step.buffers[1]);
  CUdeviceptr next = scratch;
  if (split.rows > 1) {
    if (!pack(send, next, split, n, false, error))
      return false;
    send = next;
    next += in.bytes;
  }
  if (joined.rows > 1)
    recv = next;
  // This member's own block by a copy; the others point to point, grouped
  // so that NCCL runs every send and receive together.
  if (!copy(recv + self * blockBytes, blockBytes, send + self * blockBytes,
            blockBytes, blockBytes, 1, error) ||
      !check(nccl.groupStart(), "ncclGroupStart", error))
    return false;
  bool ok = true;
  for (unsigned j = 0; ok && j < n; ++j) {
    if (j == self)
      continue;
    ok = check(nccl.send(pointer(send + j * blockBytes), blockBytes, ncclUint8,
                         static_cast<int>(j), comm, nullptr),
               "ncclSend", error, comm) &&
         check(nccl.recv(pointer(recv + j * blockBytes), blockBytes, ncclUint8,
                         static_cast<int>(j), comm, nullptr),
               "ncclRecv", error, comm);
  }
  if (!endGroup(ok, error, comm))
    return false;
  return joined.rows == 1 ||
         pack(address(step.buffers[1]), recv, joined, n, true, error);
}

NcclCollectives::NcclCollectives() = default;
NcclCollectives::~NcclCollectives() = default;

bool NcclCollectives::load(const Plan &plan, Communicator &comm,
                           const char *ncclLibrary, const char *driverLibrary,
                           std::string &error) {
  state.reset(new State());
  State &s = *state;
  s.plan = &plan;
  s.world = &comm;
  s.library = ncclLibrary ? ncclLibrary : "libnccl.so.2";
  s.driverLibrary = driverLibrary ? driverLibrary : "libcuda.so.1";
  std::string needs = "multi-rank runs on cuda need NCCL (" + s.library + "): ";
  void *handle = dlopen(s.library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *why = dlerror();
    error = needs + (why ? why : "cannot load it") +
            " (install NCCL 2.10 or later, or add its directory to "
            "LD_LIBRARY_PATH)";
    return false;
  }
  NcclApi &api = s.nccl;
  RequiredSymbols required{handle};
  required.require(api.getErrorString, "ncclGetErrorString");
  required.require(api.getVersion, "ncclGetVersion");
  required.require(api.getUniqueId, "ncclGetUniqueId");
  required.require(api.commInitRank, "ncclCommInitRank");
  required.require(api.commDestroy, "ncclCommDestroy");
  required.require(api.commAbort, "ncclCommAbort");
  required.require(api.commGetAsyncError, "ncclCommGetAsyncError");
  required.require(api.allReduce, "ncclAllReduce");
  required.require(api.allGather, "ncclAllGather");
  required.require(api.reduceScatter, "ncclReduceScatter");
  required.require(api.broadcast, "ncclBroadcast");
  required.require(api.send, "ncclSend");
  required.require(api.recv, "ncclRecv");
  required.require(api.groupStart, "ncclGroupStart");
  required.require(api.groupEnd, "ncclGroupEnd");
  if (const char *missing = required.missing) {
    error = needs + "it has no function " + missing;
    return false;
  }
  resolve(handle, api.getLastError, "ncclGetLastError");
  if (!s.check(api.getVersion(&s.versionCode), "ncclGetVersion", error)) {
    error = needs + error;
    return false;
  }
  if (s.versionCode < kNcclMinimumVersion) {
    error = needs + "it is NCCL " + versionName(s.versionCode) +
            ", and 2.10 or later is needed";
    return false;
  }
  s.groups.assign(plan.steps.size(), CommGroup());
  std::set<std::vector<unsigned>> seen; // axes lists
  for (size_t i = 0; i < plan.steps.size(); ++i) {
    const PlanStep &step = plan.steps[i];
    if (step.kind != StepKind::Collective)
      continue;
    s.groups[i] = meshGroup(plan.mesh, comm.rank(), step.collective.axes);
    if (seen.insert(step.collective.axes).second)
      s.members.push_back({&s.groups[i], &step, {}});
  }
  // Stages send and receive over the pipeline axis.
  if (plan.pipeline.present) {
    s.pipelineGroup = meshGroup(plan.mesh, comm.rank(), {plan.pipeline.axis});
    if (seen.insert(s.pipelineGroup.axes).second)
      s.members.push_back({&s.pipelineGroup, nullptr, {}});
  }
  return true;
}

std::string NcclCollectives::version() const {
  return state ? versionName(state->versionCode) : "";
}

bool NcclCollectives::prepare(uint64_t arena, std::string &error) {
  State &s = *state;
  s.arena = arena;
  if (!s.loadCopies(error))
    return false;
  uint64_t bytes = 0;
  for (const PlanStep &step : s.plan->steps) {
    if (step.kind != StepKind::Collective)
      continue;
    uint64_t needed = scratchBytes(*s.plan, step);
    bytes = needed > bytes ? needed : bytes;
  }
  if (bytes &&
      !s.checkCuda(s.cuda.memAlloc(&s.scratch, static_cast<size_t>(bytes)),
                   "cuMemAlloc", error)) {
    s.scratch = 0;
    error = "the collectives' scratch memory (" + std::to_string(bytes) +
            " bytes): " + error;
    return false;
  }
  return true;
}

bool NcclCollectives::shareIds(std::string &error) {
  State &s = *state;
  bool ok = true;
  for (State::Member &member : s.members) {
    const CommGroup &group = *member.group;
    // Member 0 makes the id; the byte in front tells the others whether it
    // could. Every group's broadcast runs, failed or not, as every rank
    // expects it.
    char message[1 + sizeof(ncclUniqueId)] = {};
    std::string failed;
    if (group.index == 0) {
      message[0] =
          s.check(s.nccl.getUniqueId(&member.id), "ncclGetUniqueId", failed);
      std::memcpy(message + 1, &member.id, sizeof(member.id));
    }
    std::string sent;
    if (!s.world->broadcast(group, 0, message, sizeof(message), sent)) {
      error = sent;
      return false; // the transport is broken: no more collectives
    }
    if (ok && !message[0]) {
      error = s.describe(member) +
              (group.index == 0 ? failed
                                : "rank " + std::to_string(group.ranks[0]) +
                                      " could not make its NCCL id");
      ok = false;
    }
    std::memcpy(&member.id, message + 1, sizeof(member.id));
  }
  return ok;
}

bool NcclCollectives::connect(std::string &error) {
  State &s = *state;
  for (const State::Member &member : s.members) {
    const CommGroup &group = *member.group;
    ncclComm_t comm = nullptr;
    if (!s.check(s.nccl.commInitRank(&comm, static_cast<int>(group.size()),
                                     member.id, static_cast<int>(group.index)),
                 "ncclCommInitRank", error)) {
      error = s.describe(member) + error;
      return false;
    }
    s.comms.emplace(group.axes, comm);
  }
  return true;
}

void NcclCollectives::watch(double seconds, const std::string &program, unsigned rank,
                            std::FILE *err) {
  State &s = *state;
  s.watcher = std::thread([&s, seconds, program, rank, err] {
    s.watchdog(seconds, program, rank, err);
  });
}

void NcclCollectives::drained() {
  std::lock_guard<std::mutex> lock(state->mutex);
  state->queued = false;
}

namespace {
/// `peer`'s index in `group` (a world rank that is a member).
int memberIndex(const CommGroup &group, unsigned peer) {
  for (unsigned i = 0; i < group.size(); ++i)
    if (group.ranks[i] == peer)
      return static_cast<int>(i);
  return -1;
}
} // namespace

bool NcclCollectives::State::pointToPoint(bool sending, unsigned peer,
                                          uint64_t data, uint64_t bytes,
                                          std::string &error) {
  ncclComm_t comm = comms.at(pipelineGroup.axes);
  int member = memberIndex(pipelineGroup, peer);
  markQueued(); // it may wait for a peer that is gone
  // Grouped alone: NCCL then never waits on the host.
  bool ok = check(nccl.groupStart(), "ncclGroupStart", error) &&
            (sending ? check(nccl.send(pointer(data), bytes, ncclUint8, member, comm, nullptr),
                             "ncclSend", error, comm)
                     : check(nccl.recv(pointer(data), bytes, ncclUint8, member, comm, nullptr),
                             "ncclRecv", error, comm));
  std::string ending;
  bool ended = check(nccl.groupEnd(), "ncclGroupEnd", ending, comm);
  if (ok && !ended)
    error = (sending ? "to rank " : "from rank ") + std::to_string(peer) + ": " + ending;
  return ok && ended;
}

bool NcclCollectives::send(unsigned peer, uint64_t data, uint64_t bytes,
                           std::string &error) {
  return state->pointToPoint(true, peer, data, bytes, error);
}

bool NcclCollectives::recv(unsigned peer, uint64_t data, uint64_t bytes,
                           std::string &error) {
  return state->pointToPoint(false, peer, data, bytes, error);
}

bool NcclCollectives::broadcast(unsigned root, uint64_t data, uint64_t bytes,
                                std::string &error) {
  State &s = *state;
  ncclComm_t comm = s.comms.at(s.pipelineGroup.axes);
  return s.check(s.nccl.broadcast(State::pointer(data), State::pointer(data),
                                  bytes, ncclUint8, static_cast<int>(root),
                                  comm, nullptr),
                 "ncclBroadcast", error, comm);
}

bool NcclCollectives::copy(uint64_t to, uint64_t from, uint64_t bytes,
                           std::string &error) {
  return !bytes || state->copy(to, bytes, from, bytes, bytes, 1, error);
}

bool NcclCollectives::allocate(uint64_t bytes, uint64_t &address,
                               std::string &error) {
  State &s = *state;
  CUdeviceptr block = 0;
  if (!s.checkCuda(s.cuda.memAlloc(&block, static_cast<size_t>(bytes < 256 ? 256 : bytes)),
                   "cuMemAlloc", error))
    return false;
  s.blocks.push_back(block);
  address = block;
  return true;
}

bool NcclCollectives::run(size_t index, std::string &error) {
  State &s = *state;
  s.markQueued(); // before the call: it may block in it (NCCL's queue full)
  const PlanStep &step = s.plan->steps[index];
  const PlanCollective &op = step.collective;
  const CommGroup &group = s.groups[index];
  ncclComm_t comm = s.comms.at(group.axes);
  const PlanBuffer &source = s.plan->buffers[step.buffers[0]];
  const PlanBuffer &target = s.plan->buffers[step.buffers[1]];
  CUdeviceptr in = s.address(step.buffers[0]);
  CUdeviceptr out = s.address(step.buffers[1]);
  unsigned n = group.size();
  size_t element = dtypeSize(source.dtype);
  bool ok = true;
  switch (op.kind) {
  case CollectiveKind::AllReduce: {
    // A gradient bucket's pairs, grouped: NCCL runs them as one launch,
    // with no packing copies.
    bool grouped = step.buffers.size() > 2;
    ok = !grouped || s.check(s.nccl.groupStart(), "ncclGroupStart", error);
    if (!ok)
      break;
    for (size_t pair = 0; ok && pair < step.buffers.size(); pair += 2)
      ok = s.check(s.nccl.allReduce(State::pointer(s.address(step.buffers[pair])),
                                    State::pointer(s.address(step.buffers[pair + 1])),
                                    s.plan->buffers[step.buffers[pair]].numElements,
                                    sumType(source.dtype), ncclSum, comm, nullptr),
                   "ncclAllReduce", error, comm);
    if (grouped)
      ok = s.endGroup(ok, error, comm);
    break;
  }
  case CollectiveKind::AllGather: {
    // NCCL concatenates: along dim 0 of the blocks. Along a dim with
    // others before it, gather into scratch and spread the blocks out.
    Blocks blocks = blocksAlong(source.shape, op.dim, 1, element);
    CUdeviceptr gathered = blocks.rows > 1 ? s.scratch : out;
    ok = s.check(s.nccl.allGather(State::pointer(in), State::pointer(gathered),
                                  source.bytes, ncclUint8, comm, nullptr),
                 "ncclAllGather", error, comm) &&
         (blocks.rows == 1 || s.pack(out, gathered, blocks, n, true, error));
    break;
  }
  case CollectiveKind::ReduceScatter: {
    // NCCL hands member j the j-th contiguous chunk: pack the blocks along
    // the dim first where they are not contiguous.
    Blocks blocks = blocksAlong(source.shape, op.dim, n, element);
    CUdeviceptr packed = blocks.rows > 1 ? s.scratch : in;
    ok = (blocks.rows == 1 || s.pack(in, packed, blocks, n, false, error)) &&
         s.check(s.nccl.reduceScatter(State::pointer(packed),
                                      State::pointer(out), target.numElements,
                                      sumType(source.dtype), ncclSum, comm,
                                      nullptr),
                 "ncclReduceScatter", error, comm);
    break;
  }
  case CollectiveKind::AllSlice: {
    // No data moves: this member's block of its own IN.
    Blocks blocks = blocksAlong(source.shape, op.dim, n, element);
    ok = s.copy(out, blocks.width, in + group.index * blocks.width,
                n * blocks.width, blocks.width, blocks.rows, error);
    break;
  }
  case CollectiveKind::AllToAll:
    ok = s.allToAll(step, group, comm, error);
    break;
  case CollectiveKind::Broadcast:
    ok = s.check(s.nccl.broadcast(State::pointer(in), State::pointer(out),
                                  source.bytes, ncclUint8, 0, comm, nullptr),
                 "ncclBroadcast", error, comm);
    break;
  }
  if (!ok)
    error = "plan:" + std::to_string(step.line) + ": " +
            collectiveKindName(op.kind) + ": " + error;
  return ok;
}

#endif // LOOM_RUNTIME_CUDA
