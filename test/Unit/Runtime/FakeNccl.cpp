//===- FakeNccl.cpp - NCCL without GPUs, for tests ------------------------===//
//
// See FakeNccl.h. Compiled against nccl.h so that every function has the
// exact prototype and every enum its value in the real library, which the
// runtime declares on its own.
//
//===----------------------------------------------------------------------===//

#include "FakeNccl.h"

#include <nccl.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

namespace {
FakeNcclState state;
std::mutex mutex; // guards `state` and `forming`

bool failing(const char *call) {
  return state.failCall && std::strcmp(state.failCall, call) == 0;
}

/// A point-to-point transfer of a group call.
struct Transfer {
  int peer;
  const void *send; // null for a receive
  void *recv;
  size_t bytes;
};

/// What one member brings to a collective.
struct Post {
  const void *send = nullptr;
  void *recv = nullptr;
  std::vector<Transfer> transfers;
};

/// The members of one communicator. Every operation is two barriers around
/// a step: each member publishes its Post and waits for all, computes its
/// own result from everyone's posts, and waits again so that no buffer is
/// reused before everyone has read it.
struct Clique {
  explicit Clique(int size) : size(size), posts(size) {}

  /// False after 20 s without the others.
  bool barrier() {
    std::unique_lock<std::mutex> lock(barrierMutex);
    uint64_t mine = generation;
    if (++arrived == size) {
      arrived = 0;
      ++generation;
      changed.notify_all();
      return true;
    }
    if (changed.wait_for(lock, std::chrono::seconds(20),
                         [&] { return generation != mine; }))
      return true;
    --arrived;
    return false;
  }

  /// As ncclCommAbort lets go of a kernel waiting for a dead peer: true
  /// once `aborted`, false after 20 s.
  bool waitForAbort() {
    std::unique_lock<std::mutex> lock(barrierMutex);
    return changed.wait_for(lock, std::chrono::seconds(20), [&] { return aborted; });
  }
  void abort() {
    {
      std::lock_guard<std::mutex> lock(barrierMutex);
      aborted = true;
    }
    changed.notify_all();
  }

  /// Point to point: a send leaves a copy in the (from, to) mailbox, which
  /// the k-th receive from `from` takes, as NCCL pairs them: in order, and
  /// without the other members.
  void post(int from, int to, const void *data, size_t bytes) {
    {
      std::lock_guard<std::mutex> lock(mailMutex);
      const char *begin = static_cast<const char *>(data);
      mail[{from, to}].emplace_back(begin, begin + bytes);
    }
    mailChanged.notify_all();
  }
  /// False after 20 s without the message, or if its size differs.
  bool take(int from, int to, void *data, size_t bytes) {
    std::unique_lock<std::mutex> lock(mailMutex);
    auto &box = mail[{from, to}];
    if (!mailChanged.wait_for(lock, std::chrono::seconds(20),
                              [&] { return !box.empty(); }) ||
        box.front().size() != bytes)
      return false;
    std::memcpy(data, box.front().data(), bytes);
    box.pop_front();
    return true;
  }

  const int size;
  std::vector<Post> posts;
  std::vector<bool> joined = std::vector<bool>(size, false);

private:
  std::mutex mailMutex;
  std::condition_variable mailChanged;
  std::map<std::pair<int, int>, std::deque<std::vector<char>>> mail;
  std::mutex barrierMutex;
  std::condition_variable changed;
  int arrived = 0;
  uint64_t generation = 0;
  bool aborted = false;
};

/// Cliques whose members are still joining, by unique id.
std::map<std::string, std::shared_ptr<Clique>> forming;

thread_local std::string lastError;
thread_local int groupDepth = 0;
thread_local ncclComm_t groupComm = nullptr;
thread_local std::vector<Transfer> pending;

ncclResult_t fail(ncclResult_t result, const std::string &why) {
  lastError = "fake NCCL: " + why;
  return result;
}

size_t typeSize(ncclDataType_t type) {
  switch (type) {
  case ncclInt8:
  case ncclUint8:
    return 1;
  case ncclFloat16:
  case ncclBfloat16:
    return 2;
  case ncclInt32:
  case ncclUint32:
  case ncclFloat32:
    return 4;
  case ncclInt64:
  case ncclUint64:
  case ncclFloat64:
    return 8;
  default:
    return 0;
  }
}

float bf16ToFloat(uint16_t bits) {
  uint32_t wide = static_cast<uint32_t>(bits) << 16;
  float value;
  std::memcpy(&value, &wide, 4);
  return value;
}

uint16_t floatToBf16(float value) {
  uint32_t bits;
  std::memcpy(&bits, &value, 4);
  if ((bits & 0x7fffffffu) > 0x7f800000u)
    return 0x7fc0;                       // NaN
  bits += 0x7fffu + ((bits >> 16) & 1u); // to nearest even
  return static_cast<uint16_t>(bits >> 16);
}

template <typename T> T load(const void *data, size_t i) {
  T value;
  std::memcpy(&value, static_cast<const char *>(data) + i * sizeof(T),
              sizeof(T));
  return value;
}
template <typename T> void store(void *data, size_t i, T value) {
  std::memcpy(static_cast<char *>(data) + i * sizeof(T), &value, sizeof(T));
}

template <typename T>
void sumIn(const std::vector<const char *> &terms, size_t count, void *out) {
  for (size_t i = 0; i < count; ++i) {
    T sum = load<T>(terms[0], i);
    for (size_t j = 1; j < terms.size(); ++j)
      sum += load<T>(terms[j], i);
    store<T>(out, i, sum);
  }
}

/// out[i] = terms[0][i] + terms[1][i] + ..., in order; false for a type
/// the fake cannot sum.
bool sum(ncclDataType_t type, const std::vector<const char *> &terms,
         size_t count, void *out) {
  switch (type) {
  case ncclFloat32:
    sumIn<float>(terms, count, out);
    return true;
  case ncclFloat64:
    sumIn<double>(terms, count, out);
    return true;
  case ncclInt32:
  case ncclUint32:
    sumIn<uint32_t>(terms, count, out);
    return true;
  case ncclInt64:
  case ncclUint64:
    sumIn<uint64_t>(terms, count, out);
    return true;
  case ncclBfloat16:
    for (size_t i = 0; i < count; ++i) {
      uint16_t total = load<uint16_t>(terms[0], i);
      for (size_t j = 1; j < terms.size(); ++j)
        total = floatToBf16(bf16ToFloat(total) +
                            bf16ToFloat(load<uint16_t>(terms[j], i)));
      store<uint16_t>(out, i, total);
    }
    return true;
  default:
    return false;
  }
}

} // namespace

struct ncclComm {
  std::shared_ptr<Clique> clique;
  int rank = 0;
};

namespace {
/// The checks every collective makes, and the count of what it does.
ncclResult_t enter(const char *call, ncclComm_t comm, cudaStream_t stream,
                   unsigned FakeNcclState::*counter) {
  std::unique_lock<std::mutex> lock(mutex);
  if (comm && state.hangCall && std::strcmp(state.hangCall, call) == 0) {
    // The clique outlives an abort, which frees the communicator.
    std::shared_ptr<Clique> clique = comm->clique;
    lock.unlock();
    clique->waitForAbort();
    return fail(ncclSystemError, std::string(call) + " waited for a peer that never came");
  }
  if (failing(call))
    return fail(static_cast<ncclResult_t>(state.failResult),
                std::string(call) + " fails on request");
  if (!comm)
    return fail(ncclInvalidArgument, "no communicator");
  if (stream) // the CUDA executor's stream is the default one
    return fail(ncclInvalidArgument, "not the default stream");
  if (counter)
    ++(state.*counter);
  return ncclSuccess;
}

/// Runs `compute(posts)` as member `comm->rank` between the two barriers.
template <typename Compute>
ncclResult_t meet(ncclComm_t comm, Post post, Compute compute) {
  Clique &clique = *comm->clique;
  clique.posts[comm->rank] = std::move(post);
  if (!clique.barrier())
    return fail(ncclSystemError, "the other ranks did not come");
  ncclResult_t result = compute(clique.posts);
  if (!clique.barrier())
    return fail(ncclSystemError, "the other ranks did not come");
  return result;
}
} // namespace

extern "C" FakeNcclState *loomFakeNccl() { return &state; }

const char *ncclGetErrorString(ncclResult_t result) {
  switch (result) {
  case ncclSuccess:
    return "no error";
  case ncclUnhandledCudaError:
    return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
  case ncclSystemError:
    return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
  case ncclInternalError:
    return "internal error - please report this issue to the NCCL developers";
  case ncclInvalidArgument:
    return "invalid argument (run with NCCL_DEBUG=WARN for details)";
  case ncclInvalidUsage:
    return "invalid usage (run with NCCL_DEBUG=WARN for details)";
  case ncclRemoteError:
    return "remote process exited or there was a network error";
  case ncclInProgress:
    return "NCCL operation in progress";
  default:
    return "unknown result code";
  }
}

const char *ncclGetLastError(ncclComm_t) { return lastError.c_str(); }

ncclResult_t ncclGetVersion(int *version) {
  std::lock_guard<std::mutex> lock(mutex);
  if (failing("ncclGetVersion"))
    return static_cast<ncclResult_t>(state.failResult);
  *version = state.version;
  return ncclSuccess;
}

ncclResult_t ncclGetUniqueId(ncclUniqueId *id) {
  std::lock_guard<std::mutex> lock(mutex);
  if (failing("ncclGetUniqueId"))
    return fail(static_cast<ncclResult_t>(state.failResult),
                "ncclGetUniqueId fails on request");
  static unsigned made = 0;
  std::memset(id, 0, sizeof(*id));
  std::snprintf(id->internal, sizeof(id->internal), "fake-nccl-id-%u", made++);
  ++state.uniqueIds;
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t *comm, int nranks, ncclUniqueId id,
                              int rank) {
  std::shared_ptr<Clique> clique;
  {
    std::lock_guard<std::mutex> lock(mutex);
    if (failing("ncclCommInitRank"))
      return fail(static_cast<ncclResult_t>(state.failResult),
                  "ncclCommInitRank fails on request");
    if (nranks < 1 || rank < 0 || rank >= nranks)
      return fail(ncclInvalidArgument, "bad rank or size");
    std::string key(id.internal, sizeof(id.internal));
    std::shared_ptr<Clique> &slot = forming[key];
    if (!slot)
      slot = std::make_shared<Clique>(nranks);
    if (slot->size != nranks || slot->joined[rank])
      return fail(ncclInvalidUsage, "the members disagree");
    slot->joined[rank] = true;
    clique = slot;
  }
  // Everyone waits for everyone, as ncclCommInitRank does.
  if (!clique->barrier())
    return fail(ncclSystemError, "the other ranks did not join");
  std::lock_guard<std::mutex> lock(mutex);
  forming.erase(std::string(id.internal, sizeof(id.internal)));
  *comm = new ncclComm{clique, rank};
  ++state.commsMade;
  ++state.liveComms;
  if (nranks > state.largestComm)
    state.largestComm = nranks;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(mutex);
  delete comm;
  --state.liveComms;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  std::lock_guard<std::mutex> lock(mutex);
  comm->clique->abort();
  delete comm;
  --state.liveComms;
  ++state.aborts;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t *result) {
  std::lock_guard<std::mutex> lock(mutex);
  if (!comm)
    return fail(ncclInvalidArgument, "no communicator");
  *result = static_cast<ncclResult_t>(state.asyncError);
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void *send, void *recv, size_t count,
                           ncclDataType_t type, ncclRedOp_t op, ncclComm_t comm,
                           cudaStream_t stream) {
  if (ncclResult_t entered =
          enter("ncclAllReduce", comm, stream, &FakeNcclState::allReduces))
    return entered;
  if (groupDepth) {
    std::lock_guard<std::mutex> lock(mutex);
    ++state.groupedAllReduces;
  }
  if (op != ncclSum)
    return fail(ncclInvalidArgument, "only ncclSum is implemented");
  {
    std::lock_guard<std::mutex> lock(mutex);
    state.lastSumType = type;
  }
  return meet(comm, {send, recv, {}}, [&](const std::vector<Post> &posts) {
    std::vector<const char *> terms;
    for (const Post &post : posts)
      terms.push_back(static_cast<const char *>(post.send));
    return sum(type, terms, count, recv)
               ? ncclSuccess
               : fail(ncclInvalidArgument, "cannot sum this type");
  });
}

ncclResult_t ncclReduceScatter(const void *send, void *recv, size_t count,
                               ncclDataType_t type, ncclRedOp_t op,
                               ncclComm_t comm, cudaStream_t stream) {
  if (ncclResult_t entered = enter("ncclReduceScatter", comm, stream,
                                   &FakeNcclState::reduceScatters))
    return entered;
  if (op != ncclSum)
    return fail(ncclInvalidArgument, "only ncclSum is implemented");
  {
    std::lock_guard<std::mutex> lock(mutex);
    state.lastSumType = type;
  }
  size_t chunk = count * typeSize(type) * static_cast<size_t>(comm->rank);
  return meet(comm, {send, recv, {}}, [&](const std::vector<Post> &posts) {
    // Member r gets the sum of everyone's r-th chunk.
    std::vector<const char *> terms;
    for (const Post &post : posts)
      terms.push_back(static_cast<const char *>(post.send) + chunk);
    return sum(type, terms, count, recv)
               ? ncclSuccess
               : fail(ncclInvalidArgument, "cannot sum this type");
  });
}

ncclResult_t ncclAllGather(const void *send, void *recv, size_t count,
                           ncclDataType_t type, ncclComm_t comm,
                           cudaStream_t stream) {
  if (ncclResult_t entered =
          enter("ncclAllGather", comm, stream, &FakeNcclState::allGathers))
    return entered;
  size_t bytes = count * typeSize(type);
  return meet(comm, {send, recv, {}}, [&](const std::vector<Post> &posts) {
    for (size_t j = 0; j < posts.size(); ++j)
      std::memcpy(static_cast<char *>(recv) + j * bytes, posts[j].send, bytes);
    return ncclSuccess;
  });
}

ncclResult_t ncclBroadcast(const void *send, void *recv, size_t count,
                           ncclDataType_t type, int root, ncclComm_t comm,
                           cudaStream_t stream) {
  if (ncclResult_t entered =
          enter("ncclBroadcast", comm, stream, &FakeNcclState::broadcasts))
    return entered;
  if (root < 0 || root >= comm->clique->size)
    return fail(ncclInvalidArgument, "bad root");
  return meet(comm, {send, recv, {}}, [&](const std::vector<Post> &posts) {
    std::memmove(recv, posts[root].send, count * typeSize(type));
    return ncclSuccess;
  });
}

ncclResult_t ncclGroupStart() {
  ++groupDepth;
  return ncclSuccess;
}

namespace {
ncclResult_t queue(const char *call, ncclComm_t comm, cudaStream_t stream,
                   unsigned FakeNcclState::*counter, Transfer transfer) {
  if (ncclResult_t entered = enter(call, comm, stream, counter))
    return entered;
  if (!groupDepth)
    return fail(ncclInvalidUsage, "send and receive outside a group");
  if (groupComm && groupComm != comm)
    return fail(ncclInvalidUsage, "one communicator per group");
  if (transfer.peer < 0 || transfer.peer >= comm->clique->size)
    return fail(ncclInvalidArgument, "bad peer");
  groupComm = comm;
  pending.push_back(transfer);
  return ncclSuccess;
}
} // namespace

ncclResult_t ncclSend(const void *send, size_t count, ncclDataType_t type,
                      int peer, ncclComm_t comm, cudaStream_t stream) {
  return queue("ncclSend", comm, stream, &FakeNcclState::sends,
               {peer, send, nullptr, count * typeSize(type)});
}

ncclResult_t ncclRecv(void *recv, size_t count, ncclDataType_t type, int peer,
                      ncclComm_t comm, cudaStream_t stream) {
  return queue("ncclRecv", comm, stream, &FakeNcclState::recvs,
               {peer, nullptr, recv, count * typeSize(type)});
}

ncclResult_t ncclGroupEnd() {
  if (groupDepth == 0)
    return fail(ncclInvalidUsage, "ncclGroupEnd without ncclGroupStart");
  if (--groupDepth > 0 || !groupComm)
    return ncclSuccess;
  ncclComm_t comm = groupComm;
  std::vector<Transfer> transfers;
  transfers.swap(pending);
  groupComm = nullptr;
  {
    std::lock_guard<std::mutex> lock(mutex);
    ++state.groups;
  }
  // Every send first, then the receives: the group never waits for
  // itself, and members that are not peers never meet.
  int self = comm->rank;
  Clique &clique = *comm->clique;
  for (const Transfer &out : transfers)
    if (out.send)
      clique.post(self, out.peer, out.send, out.bytes);
  for (const Transfer &in : transfers)
    if (!in.send && !clique.take(in.peer, self, in.recv, in.bytes))
      return fail(ncclInvalidUsage, "unmatched receive (none within 20 s, "
                                    "or of another size)");
  return ncclSuccess;
}
