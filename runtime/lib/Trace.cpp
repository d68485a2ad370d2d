//===- Trace.cpp - Chrome-trace events for executed steps -----------------===//

#include "loom/runtime/Trace.h"

#include "File.h"
#include "loom/runtime/Json.h"

#include <cstdio>

using namespace loom::runtime;

void TraceRecorder::addStep(unsigned step, const std::string &kernel,
                            double startUs, double durationUs,
                            uint64_t bytesRead, uint64_t bytesWritten) {
  events.push_back({step, kernel, std::string(), std::string(), startUs,
                    durationUs, bytesRead, bytesWritten});
}

void TraceRecorder::addLaunch(unsigned step, const std::string &kernel,
                              const std::string &function, double startUs,
                              double durationUs, uint64_t bytesRead,
                              uint64_t bytesWritten) {
  events.push_back({step, kernel, function, std::string(), startUs, durationUs,
                    bytesRead, bytesWritten});
}

void TraceRecorder::addCollective(unsigned step, const std::string &kind,
                                  const std::string &axes, double startUs,
                                  double durationUs) {
  events.push_back({step, kind, std::string(), axes, startUs, durationUs});
}

std::string TraceRecorder::toJson() const {
  std::string json = "{\"traceEvents\": [";
  char times[96];
  for (size_t i = 0; i < events.size(); ++i) {
    const Event &event = events[i];
    std::snprintf(times, sizeof(times), "\"ts\": %.3f, \"dur\": %.3f",
                  event.startUs, event.durationUs);
    json += i ? ",\n  " : "\n  ";
    bool launch = !event.function.empty();
    bool collective = !event.axes.empty();
    json += "{\"name\": " + jsonQuote(launch ? event.function : event.kernel) +
            ", \"cat\": \"" +
            (launch       ? "cuda"
             : collective ? "collective"
                          : "kernel") +
            "\", \"ph\": \"X\", " + times +
            ", \"pid\": " + std::to_string(process) +
            ", \"tid\": 0, \"args\": {\"step\": " + std::to_string(event.step);
    if (launch)
      json += ", \"kernel\": " + jsonQuote(event.kernel);
    if (collective)
      json += ", \"axes\": " + jsonQuote(event.axes);
    else
      json += ", \"bytes_read\": " + std::to_string(event.bytesRead) +
              ", \"bytes_written\": " + std::to_string(event.bytesWritten);
    json += "}}";
  }
  json += events.empty() ? "]" : "\n]";
  return json + ", \"displayTimeUnit\": \"ms\"}\n";
}

bool TraceRecorder::write(const std::string &path, std::string &error) const {
  FilePtr file;
  if (!openForWriting(path, file, error))
    return false;
  std::string json = toJson();
  if (!writeAll(file.get(), json.data(), json.size())) {
    error = "cannot write " + path;
    return false;
  }
  return finishWriting(file, path, error);
}
