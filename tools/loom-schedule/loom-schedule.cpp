//===- loom-schedule.cpp - Build, verify and draw pipeline schedules ------===//
//
//   loom-schedule KIND --ranks P --microbatches M [--stages S] [--svg FILE]
//   loom-schedule --verify FILE [--svg FILE]
//
// The first prints the schedule KIND (gpipe, 1f1b, interleaved,
// zero_bubble) in its text form; both verify it and end with its bubble
// and peak activations under uniform stage costs (forward 1, backward 2).
//
//===----------------------------------------------------------------------===//

#include "loom/runtime/plan/Schedule.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <set>
#include <sstream>
#include <string>

using namespace loom::runtime;

static int usage() {
  std::fprintf(stderr,
               "usage: loom-schedule KIND --ranks P --microbatches M [--stages S] "
               "[--svg FILE]\n"
               "       loom-schedule --verify FILE [--svg FILE]\n"
               "KIND: gpipe, 1f1b, interleaved or zero_bubble\n");
  return 2;
}

static bool number(const char *text, unsigned &value) {
  char *end = nullptr;
  unsigned long v = std::strtoul(text, &end, 10);
  if (!*text || *end || v == 0 || v > 100000)
    return false;
  value = static_cast<unsigned>(v);
  return true;
}

int main(int argc, char **argv) {
  std::string verifyPath, svgPath, kindName;
  unsigned ranks = 0, microbatches = 0, stages = 0;
  std::set<std::string> seen;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    bool hasValue = i + 1 < argc;
    if (arg.rfind("--", 0) == 0 && hasValue && !seen.insert(arg).second) {
      std::fprintf(stderr, "loom-schedule: error: option '%s' given twice\n",
                   arg.c_str());
      return 1;
    }
    if (arg == "--verify" && hasValue)
      verifyPath = argv[++i];
    else if (arg == "--svg" && hasValue)
      svgPath = argv[++i];
    else if ((arg == "--ranks" || arg == "--microbatches" || arg == "--stages") &&
             hasValue) {
      unsigned &target = arg == "--ranks" ? ranks
                         : arg == "--stages" ? stages
                                             : microbatches;
      if (!number(argv[++i], target)) {
        std::fprintf(stderr, "loom-schedule: error: %s needs a positive integer\n",
                     arg.c_str());
        return 1;
      }
    } else if (arg[0] != '-' && kindName.empty())
      kindName = arg;
    else
      return usage();
  }
  if (!verifyPath.empty() && !kindName.empty()) {
    std::fprintf(stderr, "loom-schedule: error: give a KIND to build or "
                         "--verify FILE, not both\n");
    return 1;
  }
  // The drawing's file opens first: a run that cannot write it prints
  // nothing else.
  std::ofstream svg;
  if (!svgPath.empty()) {
    svg.open(svgPath);
    if (!svg) {
      std::fprintf(stderr, "loom-schedule: error: cannot write %s: %s\n",
                   svgPath.c_str(), std::strerror(errno));
      return 1;
    }
  }
  Schedule schedule;
  std::string error;
  if (!verifyPath.empty()) {
    std::ifstream in(verifyPath);
    std::stringstream text;
    // A directory opens, and fails at the first read.
    if (!in || !(text << in.rdbuf())) {
      std::fprintf(stderr, "loom-schedule: error: cannot read %s: %s\n",
                   verifyPath.c_str(), errno ? std::strerror(errno) : "not a file");
      return 1;
    }
    // Lines may end in CRLF (a file from Windows).
    std::string contents = text.str();
    contents.erase(std::remove(contents.begin(), contents.end(), '\r'),
                   contents.end());
    if (!parseSchedule(contents, schedule, error)) {
      std::fprintf(stderr, "loom-schedule: error: %s: %s\n", verifyPath.c_str(),
                   error.c_str());
      return 1;
    }
  } else {
    ScheduleKind kind;
    if (kindName.empty() || !ranks || !microbatches)
      return usage();
    if (!parseScheduleKind(kindName, kind)) {
      std::fprintf(stderr,
                   "loom-schedule: error: unknown schedule '%s' (expected gpipe, "
                   "1f1b, interleaved or zero_bubble)\n",
                   kindName.c_str());
      return 1;
    }
    if (!buildSchedule(kind, ranks, stages ? stages : ranks, microbatches,
                       schedule, error)) {
      std::fprintf(stderr, "loom-schedule: error: %s\n", error.c_str());
      return 1;
    }
    std::fputs(formatSchedule(schedule).c_str(), stdout);
  }
  if (!verifySchedule(schedule, error)) {
    std::fprintf(stderr, "loom-schedule: error: %s\n", error.c_str());
    return 1;
  }
  ScheduleTimeline timeline =
      simulateSchedule(schedule, {uniformStageCost(schedule)});
  std::printf("# verified: %s, %u ranks, %u stages, %u microbatches; bubble "
              "%.6f (uniform stages), peak activations on rank 0: %u\n",
              scheduleKindName(schedule.kind), schedule.ranks, schedule.stages,
              schedule.microbatches, timeline.bubble,
              timeline.peakActivations.empty() ? 0 : timeline.peakActivations[0]);
  if (!svgPath.empty()) {
    svg << scheduleSvg(schedule, timeline);
    if (!svg.flush()) {
      std::fprintf(stderr, "loom-schedule: error: cannot write %s: %s\n",
                   svgPath.c_str(), std::strerror(errno));
      return 1;
    }
  }
  return 0;
}
