//===- Communicator.cpp - In-process ranks and launcher detection ---------===//
//
// LocalWorld's primitives are two barriers around a copy: every member
// publishes its buffer, waits until all have, copies what it needs straight
// from the others' buffers, and waits again so that no buffer is reused
// before everyone has read it.
//
//===----------------------------------------------------------------------===//

#include "loom/runtime/comm/Communicator.h"

#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <utility>

using namespace loom::runtime;

Communicator::~Communicator() = default;

namespace {
/// Where the members of one group meet.
struct Rendezvous {
  explicit Rendezvous(unsigned size) : size(size), buffers(size, nullptr) {}

  /// Publishes member `index`'s buffer and waits for every member to have
  /// done the same; false after `timeout` seconds.
  bool arrive(unsigned index, const void *buffer, double timeout) {
    std::unique_lock<std::mutex> lock(mutex);
    buffers[index] = buffer;
    return waitLocked(lock, timeout);
  }
  /// Waits for every member (no buffer).
  bool wait(double timeout) {
    std::unique_lock<std::mutex> lock(mutex);
    return waitLocked(lock, timeout);
  }
  /// Member `index`'s published buffer; valid between its arrive and the
  /// following wait, which the mutex orders after the publication.
  const char *buffer(unsigned index) const {
    return static_cast<const char *>(buffers[index]);
  }

  const unsigned size;

private:
  bool waitLocked(std::unique_lock<std::mutex> &lock, double timeout) {
    uint64_t mine = generation;
    if (++arrived == size) {
      arrived = 0;
      ++generation;
      changed.notify_all();
      return true;
    }
    bool done = changed.wait_for(lock, std::chrono::duration<double>(timeout),
                                 [&] { return generation != mine; });
    if (!done)
      --arrived; // gave up: the others time out as well
    return done;
  }

  std::mutex mutex;
  std::condition_variable changed;
  unsigned arrived = 0;
  uint64_t generation = 0;
  std::vector<const void *> buffers;
};

class LocalCommunicator : public Communicator {
public:
  LocalCommunicator(LocalWorld::State &world, unsigned rank)
      : world(world), worldRank(rank) {}

  unsigned rank() const override { return worldRank; }
  unsigned size() const override;
  // Threads of one process: every rank is on the same node.
  bool localRank(unsigned &local, std::string &) override {
    local = worldRank;
    return true;
  }

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

private:
  /// The group's rendezvous, after checking that this rank is its member
  /// `group.index`; null with a message otherwise.
  Rendezvous *meet(const CommGroup &group, const char *what,
                   std::string &error);
  bool timedOut(const char *what, std::string &error);

  LocalWorld::State &world;
  unsigned worldRank;
};
} // namespace

struct LocalWorld::State {
  State(unsigned size, double timeout) : size(size), timeout(timeout) {}

  const unsigned size;
  const double timeout;
  std::vector<std::unique_ptr<LocalCommunicator>> communicators;
  std::mutex mutex; // guards `rendezvous`
  std::map<std::pair<std::vector<unsigned>, unsigned>,
           std::unique_ptr<Rendezvous>>
      rendezvous;
  /// Point to point: the messages in flight, by (from, to), in order.
  std::map<std::pair<unsigned, unsigned>, std::deque<std::vector<char>>> mail;
  std::condition_variable mailed; // with `mutex`
};

unsigned LocalCommunicator::size() const { return world.size; }

Rendezvous *LocalCommunicator::meet(const CommGroup &group, const char *what,
                                    std::string &error) {
  if (group.index >= group.size() || group.ranks[group.index] != worldRank) {
    error = std::string(what) + ": rank " + std::to_string(worldRank) +
            " is not member " + std::to_string(group.index) + " of its group";
    return nullptr;
  }
  std::lock_guard<std::mutex> lock(world.mutex);
  std::unique_ptr<Rendezvous> &slot =
      world.rendezvous[{group.axes, group.color}];
  if (!slot)
    slot.reset(new Rendezvous(group.size()));
  if (slot->size != group.size()) {
    error = std::string(what) + ": the members of a group disagree on its size";
    return nullptr;
  }
  return slot.get();
}

bool LocalCommunicator::timedOut(const char *what, std::string &error) {
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%g", world.timeout);
  error = std::string(what) + ": rank " + std::to_string(worldRank) +
          " waited more than " + seconds + " s for the other ranks";
  return false;
}

bool LocalCommunicator::allGather(const CommGroup &group, const void *data,
                                  uint64_t bytes, void *gathered,
                                  std::string &error) {
  Rendezvous *meeting = meet(group, "all-gather", error);
  if (!meeting)
    return false;
  if (!meeting->arrive(group.index, data, world.timeout))
    return timedOut("all-gather", error);
  for (unsigned j = 0; j < group.size(); ++j)
    std::memcpy(static_cast<char *>(gathered) + j * bytes, meeting->buffer(j),
                bytes);
  return meeting->wait(world.timeout) || timedOut("all-gather", error);
}

bool LocalCommunicator::gather(const CommGroup &group, unsigned root,
                               const void *data, uint64_t bytes, void *gathered,
                               std::string &error) {
  Rendezvous *meeting = meet(group, "gather", error);
  if (!meeting)
    return false;
  if (!meeting->arrive(group.index, data, world.timeout))
    return timedOut("gather", error);
  if (group.index == root)
    for (unsigned j = 0; j < group.size(); ++j)
      std::memcpy(static_cast<char *>(gathered) + j * bytes, meeting->buffer(j),
                  bytes);
  return meeting->wait(world.timeout) || timedOut("gather", error);
}

bool LocalCommunicator::broadcast(const CommGroup &group, unsigned root,
                                  void *data, uint64_t bytes,
                                  std::string &error) {
  Rendezvous *meeting = meet(group, "broadcast", error);
  if (!meeting)
    return false;
  if (!meeting->arrive(group.index, data, world.timeout))
    return timedOut("broadcast", error);
  if (group.index != root)
    std::memcpy(data, meeting->buffer(root), bytes);
  return meeting->wait(world.timeout) || timedOut("broadcast", error);
}

bool LocalCommunicator::allToAll(const CommGroup &group, const void *send,
                                 void *recv, uint64_t blockBytes,
                                 std::string &error) {
  Rendezvous *meeting = meet(group, "all-to-all", error);
  if (!meeting)
    return false;
  if (!meeting->arrive(group.index, send, world.timeout))
    return timedOut("all-to-all", error);
  for (unsigned j = 0; j < group.size(); ++j)
    std::memcpy(static_cast<char *>(recv) + j * blockBytes,
                meeting->buffer(j) + group.index * blockBytes, blockBytes);
  return meeting->wait(world.timeout) || timedOut("all-to-all", error);
}

bool LocalCommunicator::send(unsigned peer, const void *data, uint64_t bytes,
                             std::string &error) {
  if (peer >= world.size) {
    error = "send to rank " + std::to_string(peer) + " of " +
            std::to_string(world.size);
    return false;
  }
  const char *bytesAt = static_cast<const char *>(data);
  {
    std::lock_guard<std::mutex> lock(world.mutex);
    world.mail[{worldRank, peer}].emplace_back(bytesAt, bytesAt + bytes);
  }
  world.mailed.notify_all();
  return true;
}

bool LocalCommunicator::recv(unsigned peer, void *data, uint64_t bytes,
                             std::string &error) {
  std::unique_lock<std::mutex> lock(world.mutex);
  auto &queue = world.mail[{peer, worldRank}];
  if (!world.mailed.wait_for(lock,
                             std::chrono::duration<double>(world.timeout),
                             [&] { return !queue.empty(); }))
    return timedOut("receive", error);
  std::vector<char> message = std::move(queue.front());
  queue.pop_front();
  if (message.size() != bytes) {
    error = "a message from rank " + std::to_string(peer) + " holds " +
            std::to_string(message.size()) + " bytes, not the " +
            std::to_string(bytes) + " expected";
    return false;
  }
  std::memcpy(data, message.data(), bytes);
  return true;
}

LocalWorld::LocalWorld(unsigned size, double timeoutSeconds)
    : state(new State(size, timeoutSeconds)) {
  for (unsigned rank = 0; rank < size; ++rank)
    state->communicators.emplace_back(new LocalCommunicator(*state, rank));
}

LocalWorld::~LocalWorld() = default;

unsigned LocalWorld::size() const { return state->size; }

Communicator &LocalWorld::communicator(unsigned rank) {
  return *state->communicators[rank];
}

void loom::runtime::runLocalRanks(
    unsigned size, const std::function<void(unsigned, Communicator &)> &body,
    double timeoutSeconds) {
  LocalWorld world(size, timeoutSeconds);
  std::vector<std::thread> threads;
  for (unsigned rank = 0; rank < size; ++rank)
    threads.emplace_back([&, rank] { body(rank, world.communicator(rank)); });
  for (std::thread &thread : threads)
    thread.join();
}

/// A non-negative decimal from the environment, or -1.
static long parseCount(const char *text) {
  if (!text || !*text)
    return -1;
  char *end = nullptr;
  long value = std::strtol(text, &end, 10);
  return *end || value < 0 ? -1 : value;
}

LauncherInfo loom::runtime::detectLauncher(
    const std::function<const char *(const char *)> &getenv) {
  LauncherInfo info;
  const char *ompiSize = getenv("OMPI_COMM_WORLD_SIZE");
  const char *pmiSize = getenv("PMI_SIZE");
  const char *pmixRank = getenv("PMIX_RANK");
  info.present = ompiSize || pmiSize || pmixRank;
  if (!info.present)
    return info;
  info.size = parseCount(ompiSize ? ompiSize : pmiSize);
  const char *rank = getenv("OMPI_COMM_WORLD_RANK");
  if (!rank)
    rank = getenv("PMI_RANK");
  info.rank = parseCount(rank ? rank : pmixRank);
  return info;
}

LauncherInfo loom::runtime::detectLauncher() {
  return detectLauncher([](const char *name) { return std::getenv(name); });
}
