//===- Trace.h - Chrome-trace events for executed steps ---------*- C++ -*-===//

#ifndef LOOM_RUNTIME_TRACE_H
#define LOOM_RUNTIME_TRACE_H

#include <string>
#include <vector>

namespace loom::runtime {

/// Collects one complete ("X") event per step (CPU) or per GPU launch and
/// writes them as {"traceEvents": [...]}, which chrome://tracing and Perfetto
/// open.
class TraceRecorder {
public:
  /// Records a step that ran `kernel` from `startUs` for `durationUs`
  /// microseconds (relative to the start of the run).
  void addStep(unsigned step, const std::string &kernel, double startUs,
               double durationUs);
  /// Records a GPU launch of `function` made by step `step` (of `kernel`).
  void addLaunch(unsigned step, const std::string &kernel,
                 const std::string &function, double startUs,
                 double durationUs);
  /// The trace as JSON text.
  std::string toJson() const;
  /// Writes toJson() to `path`.
  bool write(const std::string &path, std::string &error) const;
  size_t size() const { return events.size(); }

private:
  struct Event {
    unsigned step;
    std::string kernel;
    std::string function; // empty for a CPU step
    double startUs;
    double durationUs;
  };
  std::vector<Event> events;
};

} // namespace loom::runtime

#endif // LOOM_RUNTIME_TRACE_H
