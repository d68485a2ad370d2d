//===- Trace.h - Chrome-trace events for executed steps ---------*- C++ -*-===//

#ifndef LOOM_RUNTIME_SUPPORT_TRACE_H
#define LOOM_RUNTIME_SUPPORT_TRACE_H

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace loom::runtime {

/// Collects one complete ("X") event per step (CPU) or per GPU launch and
/// writes them as {"traceEvents": [...]}, which chrome://tracing and Perfetto
/// open.
class TraceRecorder {
public:
  /// The events' "pid": the rank of a multi-rank run (default 0), so that
  /// the ranks' traces can be merged into one view.
  void setProcess(unsigned rank) { process = rank; }
  /// Records a step that ran `kernel` from `startUs` for `durationUs`
  /// microseconds (relative to the start of the run), reading `bytesRead`
  /// and writing `bytesWritten` bytes of its buffers (StepAccess); `source`
  /// is the script location the kernel comes from (PlanKernel::source).
  void addStep(unsigned step, const std::string &kernel, double startUs,
               double durationUs, uint64_t bytesRead = 0,
               uint64_t bytesWritten = 0, const std::string &source = {});
  /// Records a GPU launch of `function` made by step `step` (of `kernel`);
  /// the bytes are the step's, the same on each of its launches.
  void addLaunch(unsigned step, const std::string &kernel,
                 const std::string &function, double startUs, double durationUs,
                 uint64_t bytesRead = 0, uint64_t bytesWritten = 0,
                 const std::string &source = {});
  /// Records a collective step (`kind`, e.g. "all-reduce", over `axes`).
  void addCollective(unsigned step, const std::string &kind,
                     const std::string &axes, double startUs,
                     double durationUs);
  /// Records a pipeline message (`kind` "send" or "recv") of `bytes` to or
  /// from rank `peer`: a microbatch's carry, or an update's transfer (plan
  /// step `step`).
  void addMessage(const char *kind, unsigned peer, uint64_t bytes,
                  std::optional<uint64_t> microbatch, std::optional<unsigned> step,
                  double startUs, double durationUs);
  /// Starts a run of the plan (one of --repeat's, a training step's): the
  /// executors count a run's times from runStart() (the CUDA executor from
  /// its first event), and its events are shifted by the run's start from
  /// the recorder's, so that several runs make one timeline (each run's
  /// had started at 0 again).
  void beginRun();
  std::chrono::steady_clock::time_point runStart() const { return start; }
  /// The trace as JSON text.
  std::string toJson() const;
  /// Writes toJson() to `path`.
  bool write(const std::string &path, std::string &error) const;
  size_t size() const { return events.size(); }

private:
  struct Event {
    std::optional<unsigned> step; // none for a carry (no plan step's)
    std::string kernel;   // a collective's kind
    std::string function; // empty for a CPU step
    std::string axes;     // a collective's axes; empty for the others
    double startUs;
    double durationUs;
    uint64_t bytesRead = 0; // kernel steps and launches only
    uint64_t bytesWritten = 0;
    std::string source; // the kernel's script location, or empty
    // A pipeline message's: its peer rank, size and microbatch (a carry's;
    // a carry belongs to no plan step, an update's transfer to one).
    std::optional<unsigned> peer;
    uint64_t bytes = 0;
    std::optional<uint64_t> microbatch;
  };
  std::vector<Event> events;
  unsigned process = 0;
  std::chrono::steady_clock::time_point origin = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point start = origin;
  /// Microseconds from the first run's start to this run's.
  double offsetUs() const;
};

} // namespace loom::runtime

#endif // LOOM_RUNTIME_SUPPORT_TRACE_H
