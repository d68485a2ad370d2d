//===- Trace.cpp - Chrome-trace events for executed steps -----------------===//

#include "loom/runtime/support/Trace.h"

#include "io/File.h"
#include "loom/runtime/io/Json.h"

#include <cmath>

using namespace loom::runtime;

void TraceRecorder::beginRun() { start = std::chrono::steady_clock::now(); }

double TraceRecorder::offsetUs() const {
  return std::chrono::duration<double, std::micro>(start - origin).count();
}

void TraceRecorder::addStep(unsigned step, const std::string &kernel,
                            double startUs, double durationUs,
                            uint64_t bytesRead, uint64_t bytesWritten,
                            const std::string &source) {
  events.push_back({step, kernel, std::string(), std::string(), offsetUs() + startUs,
                    durationUs, bytesRead, bytesWritten, source, std::nullopt, 0,
                    std::nullopt});
}

void TraceRecorder::addLaunch(unsigned step, const std::string &kernel,
                              const std::string &function, double startUs,
                              double durationUs, uint64_t bytesRead,
                              uint64_t bytesWritten, const std::string &source) {
  events.push_back({step, kernel, function, std::string(), offsetUs() + startUs,
                    durationUs, bytesRead, bytesWritten, source, std::nullopt, 0,
                    std::nullopt});
}

void TraceRecorder::addCollective(unsigned step, const std::string &kind,
                                  const std::string &axes, double startUs,
                                  double durationUs) {
  events.push_back({step, kind, std::string(), axes, offsetUs() + startUs, durationUs, 0, 0,
                    {}, std::nullopt, 0, std::nullopt});
}

void TraceRecorder::addMessage(const char *kind, unsigned peer, uint64_t bytes,
                               std::optional<uint64_t> microbatch,
                               std::optional<unsigned> step, double startUs,
                               double durationUs) {
  events.push_back({step, kind, std::string(), std::string(), offsetUs() + startUs,
                    durationUs, 0, 0, {}, peer, bytes, microbatch});
}

/// Microseconds to the nanosecond, as the trace viewers show them.
static double toNanosecond(double us) { return std::round(us * 1e3) / 1e3; }

std::string TraceRecorder::toJson() const {
  Json trace = {{"traceEvents", Json::array()}};
  Json &list = trace["traceEvents"];
  for (const Event &event : events) {
    bool launch = !event.function.empty();
    bool message = event.peer.has_value();
    bool collective = !event.axes.empty() || message;
    Json args = Json::object();
    if (event.step)
      args["step"] = *event.step;
    if (launch)
      args["kernel"] = event.kernel;
    if (message) {
      args["peer"] = *event.peer;
      args["bytes"] = event.bytes;
      if (event.microbatch)
        args["microbatch"] = *event.microbatch;
    } else if (collective) {
      args["axes"] = event.axes;
    } else {
      args["bytes_read"] = event.bytesRead;
      args["bytes_written"] = event.bytesWritten;
    }
    // Kernel names (m_k4) do not say what they run; the script line does.
    if (!event.source.empty())
      args["source"] = event.source;
    list.push_back({{"name", launch ? event.function : event.kernel},
                    {"cat", launch       ? "cuda"
                            : collective ? "collective"
                                         : "kernel"},
                    {"ph", "X"},
                    {"ts", toNanosecond(event.startUs)},
                    {"dur", toNanosecond(event.durationUs)},
                    {"pid", process},
                    {"tid", 0},
                    {"args", std::move(args)}});
  }
  trace["displayTimeUnit"] = "ms";
  return dumpJson(trace) + "\n";
}

bool TraceRecorder::write(const std::string &path, std::string &error) const {
  FilePtr file;
  if (!openForWriting(path, file, error))
    return false;
  std::string json = toJson();
  if (!writeAll(file.get(), json.data(), json.size())) {
    error = writeError(path);
    return false;
  }
  return finishWriting(file, path, error);
}
