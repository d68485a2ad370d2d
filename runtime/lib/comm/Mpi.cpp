//===- Mpi.cpp - The Communicator between processes, over MPI -------------===//
//
// Compiled with MPI only when CMake found it (LOOM_RUNTIME_MPI); otherwise
// openMpi reports that this runtime was built without MPI. Each group's
// primitives run on a communicator made once per axis list with
// MPI_Comm_split (color: the group, key: the member's index), or on
// MPI_COMM_WORLD when the group is the whole world in rank order. Every
// rank runs every step of the plan, so every rank makes the same splits in
// the same order, as MPI_Comm_split (collective over the world) requires.
//
// MPI counts in ints: transfers above the chunk size (1 GiB unless a test
// asks for less) go in pieces, so a tensor of any size moves.
//
//===----------------------------------------------------------------------===//

#include "loom/runtime/comm/Communicator.h"

using namespace loom::runtime;

#ifndef LOOM_RUNTIME_MPI

bool loom::runtime::mpiSupported() { return false; }

bool loom::runtime::openMpi(int *, char ***, std::unique_ptr<Communicator> &,
                            std::string &error, uint64_t) {
  error = "this runtime was built without MPI";
  return false;
}

#else // LOOM_RUNTIME_MPI

#include <mpi.h>

#include <algorithm>
#include <cstring>
#include <map>

bool loom::runtime::mpiSupported() { return true; }

namespace {
class MpiCommunicator : public Communicator {
public:
  MpiCommunicator(int rank, int size, uint64_t chunk)
      : worldRank(rank), worldSize(size), chunkBytes(chunk) {}
  ~MpiCommunicator() override;

  unsigned rank() const override { return static_cast<unsigned>(worldRank); }
  unsigned size() const override { return static_cast<unsigned>(worldSize); }
  bool localRank(unsigned &local, std::string &error) override;

  bool allGather(const CommGroup &group, const void *data, uint64_t bytes,
                 void *gathered, std::string &error) override;
  bool gather(const CommGroup &group, unsigned root, const void *data,
              uint64_t bytes, void *gathered, std::string &error) override;
  bool broadcast(const CommGroup &group, unsigned root, void *data,
                 uint64_t bytes, std::string &error) override;
  bool allToAll(const CommGroup &group, const void *send, void *recv,
                uint64_t blockBytes, std::string &error) override;
  bool send(unsigned peer, const void *data, uint64_t bytes,
            std::string &error) override;
  bool recv(unsigned peer, void *data, uint64_t bytes,
            std::string &error) override;
  bool flushSends(std::string &error) override;
  bool prepareGroup(const CommGroup &group, std::string &error) override {
    MPI_Comm comm;
    return communicatorOf(group, comm, error);
  }

private:
  /// The communicator of `group` (made on first use); false with a message.
  bool communicatorOf(const CommGroup &group, MPI_Comm &comm,
                      std::string &error);

  int worldRank;
  int worldSize;
  /// The largest piece one MPI call moves.
  const uint64_t chunkBytes;
  std::map<std::vector<unsigned>, MPI_Comm> split; // by CommGroup::axes
  /// Sends under way: their copies of the bytes and their requests.
  std::vector<std::vector<char>> outbox;
  std::vector<MPI_Request> pending;
};

/// False with "CALL: MPI's message" unless `code` is MPI_SUCCESS.
bool check(int code, const char *call, std::string &error) {
  if (code == MPI_SUCCESS)
    return true;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS)
    length = 0;
  error = std::string(call) + " failed: " +
          (length ? std::string(text, static_cast<size_t>(length))
                  : "error " + std::to_string(code));
  return false;
}

int count(uint64_t bytes) { return static_cast<int>(bytes); }
} // namespace

MpiCommunicator::~MpiCommunicator() {
  std::string ignored;
  flushSends(ignored);
  for (auto &entry : split)
    MPI_Comm_free(&entry.second);
  MPI_Finalize();
}

bool MpiCommunicator::communicatorOf(const CommGroup &group, MPI_Comm &comm,
                                     std::string &error) {
  auto found = split.find(group.axes);
  if (found != split.end()) {
    comm = found->second;
    return true;
  }
  bool world = group.size() == size();
  for (unsigned i = 0; world && i < group.size(); ++i)
    world = group.ranks[i] == i;
  if (world) {
    comm = MPI_COMM_WORLD;
    return true;
  }
  if (!check(MPI_Comm_split(MPI_COMM_WORLD, static_cast<int>(group.color),
                            static_cast<int>(group.index), &comm),
             "MPI_Comm_split", error))
    return false;
  split.emplace(group.axes, comm);
  return true;
}

bool MpiCommunicator::localRank(unsigned &local, std::string &error) {
  // The ranks sharing memory with this one are those of its node, whatever
  // the launcher (Open MPI's OMPI_COMM_WORLD_LOCAL_RANK is Open MPI's only).
  MPI_Comm node;
  if (!check(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED,
                                 worldRank, MPI_INFO_NULL, &node),
             "MPI_Comm_split_type", error))
    return false;
  int rank = 0;
  bool ok = check(MPI_Comm_rank(node, &rank), "MPI_Comm_rank", error);
  MPI_Comm_free(&node);
  local = static_cast<unsigned>(rank);
  return ok;
}

bool MpiCommunicator::allGather(const CommGroup &group, const void *data,
                                uint64_t bytes, void *gathered,
                                std::string &error) {
  MPI_Comm comm;
  if (!communicatorOf(group, comm, error))
    return false;
  char *out = static_cast<char *>(gathered);
  if (bytes <= chunkBytes)
    return check(MPI_Allgather(data, count(bytes), MPI_BYTE, out, count(bytes),
                               MPI_BYTE, comm),
                 "MPI_Allgather", error);
  // In pieces: each member's bytes are broadcast from it into place.
  std::memcpy(out + group.index * bytes, data, bytes);
  for (unsigned j = 0; j < group.size(); ++j)
    for (uint64_t at = 0; at < bytes; at += chunkBytes)
      if (!check(MPI_Bcast(out + j * bytes + at,
                           count(std::min(chunkBytes, bytes - at)), MPI_BYTE,
                           static_cast<int>(j), comm),
                 "MPI_Bcast", error))
        return false;
  return true;
}

bool MpiCommunicator::gather(const CommGroup &group, unsigned root,
                             const void *data, uint64_t bytes, void *gathered,
                             std::string &error) {
  MPI_Comm comm;
  if (!communicatorOf(group, comm, error))
    return false;
  char *out = static_cast<char *>(gathered);
  if (bytes <= chunkBytes)
    return check(MPI_Gather(data, count(bytes), MPI_BYTE, out, count(bytes),
                            MPI_BYTE, static_cast<int>(root), comm),
                 "MPI_Gather", error);
  // In pieces: every other member sends its bytes to the root.
  const char *in = static_cast<const char *>(data);
  if (group.index == root)
    std::memcpy(out + root * bytes, data, bytes);
  for (unsigned j = 0; j < group.size(); ++j) {
    if (j == root || (group.index != root && group.index != j))
      continue;
    for (uint64_t at = 0; at < bytes; at += chunkBytes) {
      int piece = count(std::min(chunkBytes, bytes - at));
      bool ok =
          group.index == root
              ? check(MPI_Recv(out + j * bytes + at, piece, MPI_BYTE,
                               static_cast<int>(j), 0, comm, MPI_STATUS_IGNORE),
                      "MPI_Recv", error)
              : check(MPI_Send(in + at, piece, MPI_BYTE, static_cast<int>(root),
                               0, comm),
                      "MPI_Send", error);
      if (!ok)
        return false;
    }
  }
  return true;
}

bool MpiCommunicator::broadcast(const CommGroup &group, unsigned root,
                                void *data, uint64_t bytes,
                                std::string &error) {
  MPI_Comm comm;
  if (!communicatorOf(group, comm, error))
    return false;
  char *bytesAt = static_cast<char *>(data);
  for (uint64_t at = 0; at < bytes; at += chunkBytes)
    if (!check(MPI_Bcast(bytesAt + at, count(std::min(chunkBytes, bytes - at)),
                         MPI_BYTE, static_cast<int>(root), comm),
               "MPI_Bcast", error))
      return false;
  return true;
}

bool MpiCommunicator::allToAll(const CommGroup &group, const void *send,
                               void *recv, uint64_t blockBytes,
                               std::string &error) {
  MPI_Comm comm;
  if (!communicatorOf(group, comm, error))
    return false;
  const char *in = static_cast<const char *>(send);
  char *out = static_cast<char *>(recv);
  if (blockBytes <= chunkBytes)
    return check(MPI_Alltoall(in, count(blockBytes), MPI_BYTE, out,
                              count(blockBytes), MPI_BYTE, comm),
                 "MPI_Alltoall", error);
  // In pieces: in round k, send to member index + k and receive from
  // member index - k.
  unsigned n = group.size();
  unsigned self = group.index;
  std::memcpy(out + self * blockBytes, in + self * blockBytes, blockBytes);
  for (unsigned k = 1; k < n; ++k) {
    unsigned to = (self + k) % n, from = (self + n - k) % n;
    for (uint64_t at = 0; at < blockBytes; at += chunkBytes) {
      int piece = count(std::min(chunkBytes, blockBytes - at));
      if (!check(MPI_Sendrecv(in + to * blockBytes + at, piece, MPI_BYTE,
                              static_cast<int>(to), 0,
                              out + from * blockBytes + at, piece, MPI_BYTE,
                              static_cast<int>(from), 0, comm,
                              MPI_STATUS_IGNORE),
                 "MPI_Sendrecv", error))
        return false;
    }
  }
  return true;
}

bool loom::runtime::openMpi(int *argc, char ***argv,
                            std::unique_ptr<Communicator> &world,
                            std::string &error, uint64_t chunkBytes) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (initialized) {
    error = "MPI is already initialized";
    return false;
  }
  // The default error handler (MPI_ERRORS_ARE_FATAL) stays: an MPI error
  // aborts every rank rather than leaving the others waiting.
  if (!check(MPI_Init(argc, argv), "MPI_Init", error))
    return false;
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  world.reset(new MpiCommunicator(rank, size, chunkBytes ? chunkBytes : 1));
  return true;
}


// Point to point runs on MPI_COMM_WORLD with one tag; MPI keeps the order
// of the messages between two ranks.
constexpr int kPipelineTag = 7;

bool MpiCommunicator::send(unsigned peer, const void *data, uint64_t bytes,
                           std::string &error) {
  // A copy, so that the caller may reuse `data` at once and no send waits
  // for its receive (MPI_Send may, for large messages).
  outbox.emplace_back(static_cast<const char *>(data),
                      static_cast<const char *>(data) + bytes);
  const char *copy = outbox.back().data();
  for (uint64_t done = 0; done < bytes || (bytes == 0 && done == 0);) {
    uint64_t piece = bytes - done < chunkBytes ? bytes - done : chunkBytes;
    pending.emplace_back();
    if (!check(MPI_Isend(copy + done, count(piece), MPI_BYTE,
                         static_cast<int>(peer), kPipelineTag, MPI_COMM_WORLD,
                         &pending.back()),
               "MPI_Isend", error))
      return false;
    done += piece;
    if (bytes == 0)
      break;
  }
  return true;
}

bool MpiCommunicator::recv(unsigned peer, void *data, uint64_t bytes,
                           std::string &error) {
  char *into = static_cast<char *>(data);
  for (uint64_t done = 0; done < bytes || (bytes == 0 && done == 0);) {
    uint64_t piece = bytes - done < chunkBytes ? bytes - done : chunkBytes;
    MPI_Status status;
    if (!check(MPI_Recv(into + done, count(piece), MPI_BYTE,
                        static_cast<int>(peer), kPipelineTag, MPI_COMM_WORLD,
                        &status),
               "MPI_Recv", error))
      return false;
    int got = 0;
    MPI_Get_count(&status, MPI_BYTE, &got);
    if (static_cast<uint64_t>(got) != piece) {
      error = "a message from rank " + std::to_string(peer) + " holds " +
              std::to_string(got) + " bytes, not the " +
              std::to_string(piece) + " expected";
      return false;
    }
    done += piece;
    if (bytes == 0)
      break;
  }
  return true;
}

bool MpiCommunicator::flushSends(std::string &error) {
  bool ok = pending.empty() ||
            check(MPI_Waitall(static_cast<int>(pending.size()), pending.data(),
                              MPI_STATUSES_IGNORE),
                  "MPI_Waitall", error);
  pending.clear();
  outbox.clear();
  return ok;
}

#endif // LOOM_RUNTIME_MPI
