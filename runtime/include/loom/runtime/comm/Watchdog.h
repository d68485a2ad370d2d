//===- Watchdog.h - A time limit on every collective call ---------*- C++ -*-===//
//
// A rank that waits in a collective for one that died, failed alone or
// hangs would wait forever. TimedCommunicator wraps a Communicator: a
// watchdog thread ends the process (exit status 1, with a message naming
// the rank and the call) when one call takes longer than the limit. Under
// mpirun one rank's non-zero exit ends the job, so every rank stops within
// about the limit (--collective-timeout).
//
//===----------------------------------------------------------------------===//

#ifndef LOOM_RUNTIME_COMM_WATCHDOG_H
#define LOOM_RUNTIME_COMM_WATCHDOG_H

#include "loom/runtime/comm/Communicator.h"

#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>
#include <thread>

namespace loom::runtime {

class TimedCommunicator : public Communicator {
public:
  /// `program` names the process in the message, written to `err`.
  TimedCommunicator(Communicator &inner, double seconds, std::string program,
                    std::FILE *err);
  ~TimedCommunicator() override;

  unsigned rank() const override { return inner.rank(); }
  unsigned size() const override { return inner.size(); }
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
    return inner.prepareGroup(group, error);
  }

private:
  /// Runs `call` with the clock running for `what`.
  template <typename Call> bool timed(const char *what, Call call);
  void watch();

  Communicator &inner;
  const double seconds;
  const std::string program;
  std::FILE *err;
  std::mutex mutex;
  std::condition_variable changed;
  const char *current = nullptr; // the call under way, if any
  unsigned long generation = 0;  // counts calls, so a new one restarts the clock
  bool stopping = false;
  std::thread watcher;
};

} // namespace loom::runtime

#endif // LOOM_RUNTIME_COMM_WATCHDOG_H
