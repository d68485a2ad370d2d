//===- Watchdog.cpp - A time limit on every collective call ---------------===//

#include "loom/runtime/comm/Watchdog.h"

#include <chrono>
#include <cstdlib>

using namespace loom::runtime;

TimedCommunicator::TimedCommunicator(Communicator &inner, double seconds,
                                     std::string program, std::FILE *err)
    : inner(inner), seconds(seconds), program(std::move(program)), err(err),
      watcher([this] { watch(); }) {}

TimedCommunicator::~TimedCommunicator() {
  {
    std::lock_guard<std::mutex> lock(mutex);
    stopping = true;
  }
  changed.notify_all();
  watcher.join();
}

void TimedCommunicator::watch() {
  std::unique_lock<std::mutex> lock(mutex);
  auto limit = std::chrono::duration<double>(seconds);
  while (!stopping) {
    if (!current) {
      changed.wait(lock);
      continue;
    }
    unsigned long call = generation;
    if (changed.wait_for(lock, limit, [&] {
          return stopping || !current || generation != call;
        }))
      continue;
    // Still in the same call: the other ranks are not coming.
    std::fprintf(err,
                 "%s: error: rank %u: %s did not finish within %g s: another "
                 "rank failed, died or hangs (--collective-timeout)\n",
                 program.c_str(), inner.rank(), current, seconds);
    std::fflush(err);
    std::fflush(stdout);
    std::_Exit(1);
  }
}

template <typename Call> bool TimedCommunicator::timed(const char *what, Call call) {
  {
    std::lock_guard<std::mutex> lock(mutex);
    current = what;
    ++generation;
  }
  changed.notify_all();
  bool ok = call();
  {
    std::lock_guard<std::mutex> lock(mutex);
    current = nullptr;
  }
  changed.notify_all();
  return ok;
}

bool TimedCommunicator::localRank(unsigned &local, std::string &error) {
  return timed("finding the node's ranks", [&] { return inner.localRank(local, error); });
}

bool TimedCommunicator::allGather(const CommGroup &group, const void *data,
                                  uint64_t bytes, void *gathered,
                                  std::string &error) {
  return timed("an all-gather", [&] {
    return inner.allGather(group, data, bytes, gathered, error);
  });
}

bool TimedCommunicator::gather(const CommGroup &group, unsigned root,
                               const void *data, uint64_t bytes, void *gathered,
                               std::string &error) {
  return timed("a gather", [&] {
    return inner.gather(group, root, data, bytes, gathered, error);
  });
}

bool TimedCommunicator::broadcast(const CommGroup &group, unsigned root,
                                  void *data, uint64_t bytes,
                                  std::string &error) {
  return timed("a broadcast", [&] {
    return inner.broadcast(group, root, data, bytes, error);
  });
}

bool TimedCommunicator::allToAll(const CommGroup &group, const void *send,
                                 void *recv, uint64_t blockBytes,
                                 std::string &error) {
  return timed("an all-to-all", [&] {
    return inner.allToAll(group, send, recv, blockBytes, error);
  });
}

bool TimedCommunicator::send(unsigned peer, const void *data, uint64_t bytes,
                             std::string &error) {
  return timed("a send", [&] { return inner.send(peer, data, bytes, error); });
}

bool TimedCommunicator::recv(unsigned peer, void *data, uint64_t bytes,
                             std::string &error) {
  return timed("a receive", [&] { return inner.recv(peer, data, bytes, error); });
}

bool TimedCommunicator::flushSends(std::string &error) {
  return timed("finishing the sends", [&] { return inner.flushSends(error); });
}
