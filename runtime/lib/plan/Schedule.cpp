//===- Schedule.cpp - Pipeline schedules: build, verify, simulate, draw ---===//

#include "loom/runtime/plan/Schedule.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <optional>
#include <tuple>

using namespace loom::runtime;

const char *loom::runtime::scheduleKindName(ScheduleKind kind) {
  switch (kind) {
  case ScheduleKind::GPipe: return "gpipe";
  case ScheduleKind::OneFOneB: return "1f1b";
  case ScheduleKind::Interleaved: return "interleaved";
  case ScheduleKind::ZeroBubble: return "zero_bubble";
  }
  return "";
}

bool loom::runtime::parseScheduleKind(std::string_view text, ScheduleKind &kind) {
  for (ScheduleKind each : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                            ScheduleKind::Interleaved, ScheduleKind::ZeroBubble})
    if (text == scheduleKindName(each)) {
      kind = each;
      return true;
    }
  return false;
}

const char *loom::runtime::pipeOpName(PipeOp op) {
  switch (op) {
  case PipeOp::Forward: return "forward";
  case PipeOp::Backward: return "backward";
  case PipeOp::WeightGrad: return "weight";
  case PipeOp::SendActivation: return "send-act";
  case PipeOp::RecvActivation: return "recv-act";
  case PipeOp::SendGradient: return "send-grad";
  case PipeOp::RecvGradient: return "recv-grad";
  }
  return "";
}

static bool isCompute(PipeOp op) {
  return op == PipeOp::Forward || op == PipeOp::Backward || op == PipeOp::WeightGrad;
}
static bool isSend(PipeOp op) {
  return op == PipeOp::SendActivation || op == PipeOp::SendGradient;
}
static bool isRecv(PipeOp op) {
  return op == PipeOp::RecvActivation || op == PipeOp::RecvGradient;
}

//===----------------------------------------------------------------------===//
// Building
//===----------------------------------------------------------------------===//

namespace {
/// Appends a rank's compute steps with the messages around them.
class RankProgram {
public:
  RankProgram(const Schedule &s, unsigned rank, std::vector<PipeStep> &out)
      : s(s), rank(rank), out(out) {}

  /// The activation of stage - 1 comes in first; this one goes out after.
  void forward(unsigned mb, unsigned stage) {
    if (stage > 0 && s.ownerOf(stage - 1) != rank)
      out.push_back({PipeOp::RecvActivation, mb, stage - 1, s.ownerOf(stage - 1)});
    out.push_back({PipeOp::Forward, mb, stage, 0});
    if (stage + 1 < s.stages && s.ownerOf(stage + 1) != rank)
      out.push_back({PipeOp::SendActivation, mb, stage, s.ownerOf(stage + 1)});
  }
  /// The gradient of stage + 1's input comes in first; this stage's goes
  /// out after.
  void backward(unsigned mb, unsigned stage) {
    if (stage + 1 < s.stages && s.ownerOf(stage + 1) != rank)
      out.push_back({PipeOp::RecvGradient, mb, stage + 1, s.ownerOf(stage + 1)});
    out.push_back({PipeOp::Backward, mb, stage, 0});
    if (stage > 0 && s.ownerOf(stage - 1) != rank)
      out.push_back({PipeOp::SendGradient, mb, stage, s.ownerOf(stage - 1)});
  }
  void weightGrad(unsigned mb, unsigned stage) {
    out.push_back({PipeOp::WeightGrad, mb, stage, 0});
  }

private:
  const Schedule &s;
  unsigned rank;
  std::vector<PipeStep> &out;
};

/// ZB-H1 by list scheduling at unit costs: a free rank runs a ready
/// backward first, else a forward (holding at most as many microbatches
/// as 1F1B does), else a deferred weight gradient, which so fills what
/// would be a bubble.
void buildZeroBubble(Schedule &s) {
  unsigned p = s.ranks, m = s.microbatches;
  struct Rank {
    unsigned nextForward = 0;
    std::vector<unsigned> ready; // backwards whose gradient has come
    std::vector<unsigned> weights;
    unsigned held = 0, done = 0;
    int64_t busyUntil = 0;
  };
  std::vector<Rank> ranks(p);
  // When stage r may run forward / backward of a microbatch.
  std::vector<std::vector<int64_t>> actAt(p, std::vector<int64_t>(m, -1));
  std::vector<std::vector<int64_t>> gradAt(p, std::vector<int64_t>(m, -1));
  for (unsigned mb = 0; mb < m; ++mb)
    actAt[0][mb] = 0;
  struct Pending {
    int64_t at;
    unsigned rank, mb;
    PipeOp op;
  };
  std::vector<Pending> finishing;
  std::vector<std::vector<std::pair<PipeOp, unsigned>>> order(p);
  unsigned total = 3 * p * m, scheduled = 0;
  for (int64_t t = 0; scheduled < total; ++t) {
    for (const Pending &f : finishing)
      if (f.at == t) {
        Rank &r = ranks[f.rank];
        if (f.op == PipeOp::Forward) {
          if (f.rank + 1 < p)
            actAt[f.rank + 1][f.mb] = t;
          else
            gradAt[f.rank][f.mb] = t; // the last stage starts the backward
        } else if (f.op == PipeOp::Backward) {
          if (f.rank > 0)
            gradAt[f.rank - 1][f.mb] = t;
          r.weights.push_back(f.mb);
        } else {
          --r.held;
        }
      }
    for (unsigned i = 0; i < p; ++i) {
      Rank &r = ranks[i];
      if (r.busyUntil > t)
        continue;
      for (unsigned mb = 0; mb < m; ++mb)
        if (gradAt[i][mb] >= 0 && gradAt[i][mb] <= t) {
          r.ready.push_back(mb);
          gradAt[i][mb] = -2; // queued once
        }
      std::optional<std::pair<PipeOp, unsigned>> pick;
      if (!r.ready.empty()) {
        pick = {PipeOp::Backward, r.ready.front()};
        r.ready.erase(r.ready.begin());
      } else if (r.nextForward < m && r.held < p - i &&
                 actAt[i][r.nextForward] >= 0 && actAt[i][r.nextForward] <= t) {
        pick = {PipeOp::Forward, r.nextForward++};
        ++r.held;
      } else if (!r.weights.empty()) {
        pick = {PipeOp::WeightGrad, r.weights.front()};
        r.weights.erase(r.weights.begin());
      }
      if (!pick)
        continue;
      order[i].push_back(*pick);
      finishing.push_back({t + 1, i, pick->second, pick->first});
      r.busyUntil = t + 1;
      ++scheduled;
    }
  }
  for (unsigned i = 0; i < p; ++i) {
    RankProgram program(s, i, s.steps[i]);
    for (auto [op, mb] : order[i]) {
      if (op == PipeOp::Forward)
        program.forward(mb, i);
      else if (op == PipeOp::Backward)
        program.backward(mb, i);
      else
        program.weightGrad(mb, i);
    }
  }
}
} // namespace

Schedule loom::runtime::forwardSchedule(unsigned ranks, unsigned stages,
                                        unsigned microbatches) {
  Schedule s;
  s.kind = ScheduleKind::GPipe;
  s.ranks = ranks;
  s.stages = stages;
  s.microbatches = microbatches;
  s.steps.assign(ranks, {});
  for (unsigned stage = 0; stage < stages; ++stage)
    for (unsigned mb = 0; mb < microbatches; ++mb) {
      auto &out = s.steps[s.ownerOf(stage)];
      if (stage > 0)
        out.push_back({PipeOp::RecvActivation, mb, stage - 1, s.ownerOf(stage - 1)});
      out.push_back({PipeOp::Forward, mb, stage, 0});
      if (stage + 1 < stages)
        out.push_back({PipeOp::SendActivation, mb, stage, s.ownerOf(stage + 1)});
    }
  return s;
}

bool loom::runtime::buildSchedule(ScheduleKind kind, unsigned ranks,
                                  unsigned stages, unsigned microbatches,
                                  Schedule &s, std::string &error) {
  if (ranks == 0 || stages == 0 || microbatches == 0) {
    error = "a pipeline needs at least one rank, stage and microbatch";
    return false;
  }
  // Each (stage, microbatch) is a few steps of about 16 bytes: 100000 of
  // each asked for terabytes (std::bad_alloc).
  if (uint64_t(stages) * microbatches > kMaxScheduleCells || ranks > kMaxScheduleRanks) {
    error = std::to_string(stages) + " stages x " + std::to_string(microbatches) +
            " microbatches on " + std::to_string(ranks) +
            " ranks is too large a schedule (at most " +
            std::to_string(kMaxScheduleCells) + " stage-microbatches, " +
            std::to_string(kMaxScheduleRanks) + " ranks)";
    return false;
  }
  const char *name = scheduleKindName(kind);
  if (kind != ScheduleKind::Interleaved && stages != ranks) {
    error = "schedule '" + std::string(name) + "' runs one stage per rank, but " +
            std::to_string(stages) + " stages are on " + std::to_string(ranks) +
            " pipeline ranks (use 'interleaved' for several per rank)";
    return false;
  }
  if (kind == ScheduleKind::Interleaved &&
      (stages % ranks != 0 || microbatches % ranks != 0)) {
    error = "schedule 'interleaved' needs the stages (" + std::to_string(stages) +
            ") and the microbatches (" + std::to_string(microbatches) +
            ") to be multiples of the pipeline ranks (" + std::to_string(ranks) + ")";
    return false;
  }
  s = Schedule();
  s.kind = kind;
  s.ranks = ranks;
  s.stages = stages;
  s.microbatches = microbatches;
  s.steps.assign(ranks, {});
  unsigned m = microbatches;
  if (kind == ScheduleKind::ZeroBubble) {
    buildZeroBubble(s);
    return true;
  }
  for (unsigned r = 0; r < ranks; ++r) {
    RankProgram program(s, r, s.steps[r]);
    if (kind == ScheduleKind::GPipe) {
      for (unsigned mb = 0; mb < m; ++mb)
        program.forward(mb, r);
      for (unsigned mb = 0; mb < m; ++mb)
        program.backward(mb, r);
      continue;
    }
    // 1F1B, and Megatron's interleaved 1F1B over v chunks: the k-th
    // forward of a rank is chunk (k / p) % v of microbatch
    // (k / (p v)) p + k % p; backwards take the chunks in reverse.
    unsigned p = ranks, v = s.virtualStages(), total = m * v;
    auto microbatchOf = [&](unsigned k) { return (k / (p * v)) * p + k % p; };
    auto forwardStage = [&](unsigned k) { return ((k / p) % v) * p + r; };
    auto backwardStage = [&](unsigned k) { return (v - 1 - (k / p) % v) * p + r; };
    unsigned warmup;
    if (v == 1)
      warmup = std::min(p - r - 1, m);
    else if (m == p)
      warmup = total;
    else
      warmup = std::min((p - r - 1) * 2 + (v - 1) * p, total);
    for (unsigned k = 0; k < warmup; ++k)
      program.forward(microbatchOf(k), forwardStage(k));
    for (unsigned k = 0; k + warmup < total; ++k) {
      program.forward(microbatchOf(warmup + k), forwardStage(warmup + k));
      program.backward(microbatchOf(k), backwardStage(k));
    }
    for (unsigned k = total - warmup; k < total; ++k)
      program.backward(microbatchOf(k), backwardStage(k));
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Verifying
//===----------------------------------------------------------------------===//

static std::string describe(const Schedule &s, unsigned rank, size_t index) {
  const PipeStep &step = s.steps[rank][index];
  std::string text = "rank " + std::to_string(rank) + " step " +
                     std::to_string(index) + " (" + pipeOpName(step.op) +
                     " mb " + std::to_string(step.microbatch) + " stage " +
                     std::to_string(step.stage);
  if (isSend(step.op))
    text += " to rank " + std::to_string(step.peer);
  else if (isRecv(step.op))
    text += " from rank " + std::to_string(step.peer);
  return text + ")";
}

namespace {
/// A message: an activation or gradient of (microbatch, stage) from one
/// rank to another.
using Message = std::tuple<bool, unsigned, unsigned, unsigned, unsigned>;

Message messageOf(const PipeStep &step, unsigned rank) {
  bool activation =
      step.op == PipeOp::SendActivation || step.op == PipeOp::RecvActivation;
  unsigned from = isSend(step.op) ? rank : step.peer;
  unsigned to = isSend(step.op) ? step.peer : rank;
  return {activation, step.microbatch, step.stage, from, to};
}
} // namespace

bool loom::runtime::verifySchedule(const Schedule &s, std::string &error) {
  if (s.ranks == 0 || s.stages == 0 || s.microbatches == 0 ||
      s.stages % s.ranks != 0 || s.steps.size() != s.ranks) {
    error = "a schedule needs ranks, stages (a multiple of the ranks) and "
            "microbatches, and one step list per rank";
    return false;
  }
  auto fail = [&](unsigned rank, size_t index, const std::string &why) {
    error = describe(s, rank, index) + ": " + why;
    return false;
  };
  // Per (op, microbatch, stage): where it is, to check uniqueness and order.
  std::map<std::tuple<PipeOp, unsigned, unsigned>, std::pair<unsigned, size_t>> at;
  std::map<Message, std::pair<unsigned, size_t>> sends, recvs;
  for (unsigned r = 0; r < s.ranks; ++r) {
    for (size_t i = 0; i < s.steps[r].size(); ++i) {
      const PipeStep &step = s.steps[r][i];
      if (step.microbatch >= s.microbatches || step.stage >= s.stages ||
          (!isCompute(step.op) && step.peer >= s.ranks))
        return fail(r, i, "microbatch, stage or peer out of range (" +
                              std::to_string(s.microbatches) + " microbatches, " +
                              std::to_string(s.stages) + " stages, " +
                              std::to_string(s.ranks) + " ranks)");
      if (step.op == PipeOp::WeightGrad && !s.splitsBackward())
        return fail(r, i, "a weight-gradient step in a schedule whose backward "
                          "is not split (only zero_bubble splits it)");
      if (isCompute(step.op)) {
        if (s.ownerOf(step.stage) != r)
          return fail(r, i, "stage " + std::to_string(step.stage) +
                                " runs on rank " +
                                std::to_string(s.ownerOf(step.stage)));
        auto [it, fresh] = at.try_emplace({step.op, step.microbatch, step.stage},
                                          std::make_pair(r, i));
        if (!fresh)
          return fail(r, i, "computed twice (also at step " +
                                std::to_string(it->second.second) + ")");
        continue;
      }
      // A message leaves the rank that computed it for the neighbouring
      // stage's rank.
      bool activation =
          step.op == PipeOp::SendActivation || step.op == PipeOp::RecvActivation;
      if ((activation && step.stage + 1 >= s.stages) ||
          (!activation && step.stage == 0))
        return fail(r, i, activation ? "the last stage's output goes to no stage"
                                     : "the first stage's input gradient goes "
                                       "to no stage");
      unsigned producer = s.ownerOf(step.stage);
      unsigned consumer = s.ownerOf(activation ? step.stage + 1 : step.stage - 1);
      unsigned wantMe = isSend(step.op) ? producer : consumer;
      unsigned wantPeer = isSend(step.op) ? consumer : producer;
      if (r != wantMe || step.peer != wantPeer)
        return fail(r, i, std::string("this message goes from rank ") +
                              std::to_string(producer) + " to rank " +
                              std::to_string(consumer));
      auto &table = isSend(step.op) ? sends : recvs;
      if (!table.try_emplace(messageOf(step, r), std::make_pair(r, i)).second)
        return fail(r, i, "the same message twice");
    }
  }
  // Completeness: every microbatch through every stage, and back.
  std::vector<PipeOp> needed{PipeOp::Forward, PipeOp::Backward};
  if (s.splitsBackward())
    needed.push_back(PipeOp::WeightGrad);
  for (unsigned stage = 0; stage < s.stages; ++stage)
    for (unsigned mb = 0; mb < s.microbatches; ++mb)
      for (PipeOp op : needed)
        if (!at.count({op, mb, stage})) {
          error = "rank " + std::to_string(s.ownerOf(stage)) + " never runs " +
                  pipeOpName(op) + " of mb " + std::to_string(mb) + " stage " +
                  std::to_string(stage);
          return false;
        }
  // Matching: each send has its receive, and each receive its send.
  for (const auto &[message, where] : sends)
    if (!recvs.count(message))
      return fail(where.first, where.second,
                  "no matching receive on rank " +
                      std::to_string(std::get<4>(message)));
  for (const auto &[message, where] : recvs)
    if (!sends.count(message))
      return fail(where.first, where.second,
                  "no matching send on rank " +
                      std::to_string(std::get<3>(message)));
  // Order on each rank: what a step needs comes before it.
  auto before = [&](unsigned r, size_t i, PipeOp op, unsigned mb,
                    unsigned stage) {
    auto it = at.find({op, mb, stage});
    return it != at.end() && it->second.first == r && it->second.second < i;
  };
  // Each rank's first receive of each (kind, microbatch, stage), found
  // once: scanning the rank's earlier steps for every step took minutes at
  // 65536 microbatches.
  std::map<std::tuple<unsigned, bool, unsigned, unsigned>, size_t> firstReceive;
  for (unsigned r = 0; r < s.ranks; ++r)
    for (size_t j = 0; j < s.steps[r].size(); ++j) {
      const PipeStep &step = s.steps[r][j];
      if (step.op == PipeOp::RecvActivation || step.op == PipeOp::RecvGradient)
        firstReceive.try_emplace(
            {r, step.op == PipeOp::RecvActivation, step.microbatch, step.stage}, j);
    }
  auto received = [&](unsigned r, size_t i, bool activation, unsigned mb,
                      unsigned stage) {
    auto it = firstReceive.find({r, activation, mb, stage});
    return it != firstReceive.end() && it->second < i;
  };
  for (unsigned r = 0; r < s.ranks; ++r) {
    for (size_t i = 0; i < s.steps[r].size(); ++i) {
      const PipeStep &step = s.steps[r][i];
      unsigned mb = step.microbatch, stage = step.stage;
      switch (step.op) {
      case PipeOp::Forward:
        if (stage > 0 && !(s.ownerOf(stage - 1) == r
                               ? before(r, i, PipeOp::Forward, mb, stage - 1)
                               : received(r, i, true, mb, stage - 1)))
          return fail(r, i, "its input (stage " + std::to_string(stage - 1) +
                                "'s output) is not there yet");
        break;
      case PipeOp::Backward:
        if (!before(r, i, PipeOp::Forward, mb, stage))
          return fail(r, i, "comes before its forward");
        if (stage + 1 < s.stages &&
            !(s.ownerOf(stage + 1) == r
                  ? before(r, i, PipeOp::Backward, mb, stage + 1)
                  : received(r, i, false, mb, stage + 1)))
          return fail(r, i, "its output's gradient (from stage " +
                                std::to_string(stage + 1) + ") is not there yet");
        break;
      case PipeOp::WeightGrad:
        if (!before(r, i, PipeOp::Backward, mb, stage))
          return fail(r, i, "comes before its backward");
        break;
      case PipeOp::SendActivation:
        if (!before(r, i, PipeOp::Forward, mb, stage))
          return fail(r, i, "sends an activation before computing it");
        break;
      case PipeOp::SendGradient:
        if (!before(r, i, PipeOp::Backward, mb, stage))
          return fail(r, i, "sends a gradient before computing it");
        break;
      default:
        break;
      }
    }
  }
  // Deadlock freedom: every rank runs its steps in order; a send is posted
  // and goes on, a receive waits until its send is posted.
  std::vector<size_t> pc(s.ranks, 0);
  std::map<Message, bool> posted;
  for (bool progress = true; progress;) {
    progress = false;
    for (unsigned r = 0; r < s.ranks; ++r)
      for (; pc[r] < s.steps[r].size(); ++pc[r]) {
        const PipeStep &step = s.steps[r][pc[r]];
        if (isRecv(step.op) && !posted.count(messageOf(step, r)))
          break;
        if (isSend(step.op))
          posted[messageOf(step, r)] = true;
        progress = true;
      }
  }
  std::string waiting;
  for (unsigned r = 0; r < s.ranks; ++r)
    if (pc[r] < s.steps[r].size())
      waiting += (waiting.empty() ? "" : ", ") + describe(s, r, pc[r]);
  if (!waiting.empty()) {
    error = "deadlock: every unfinished rank waits for a message no rank will "
            "send first: " + waiting;
    return false;
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Text
//===----------------------------------------------------------------------===//

std::string loom::runtime::formatSchedule(const Schedule &s) {
  std::string text = "schedule " + std::string(scheduleKindName(s.kind)) +
                     " ranks " + std::to_string(s.ranks) + " stages " +
                     std::to_string(s.stages) + " microbatches " +
                     std::to_string(s.microbatches) + "\n";
  for (unsigned r = 0; r < s.steps.size(); ++r)
    for (const PipeStep &step : s.steps[r]) {
      text += std::to_string(r) + " " + pipeOpName(step.op) + " " +
              std::to_string(step.microbatch) + " " + std::to_string(step.stage);
      if (!isCompute(step.op))
        text += " " + std::to_string(step.peer);
      text += "\n";
    }
  return text;
}

bool loom::runtime::parseSchedule(std::string_view text, Schedule &s,
                                  std::string &error) {
  s = Schedule();
  unsigned line = 0;
  auto fail = [&](const std::string &why) {
    error = "schedule:" + std::to_string(line) + ": " + why;
    return false;
  };
  auto number = [](std::string_view word, unsigned &value) {
    if (word.empty() || word.size() > 9)
      return false;
    value = 0;
    for (char c : word) {
      if (c < '0' || c > '9')
        return false;
      value = value * 10 + static_cast<unsigned>(c - '0');
    }
    return true;
  };
  bool header = false;
  while (!text.empty()) {
    size_t end = text.find('\n');
    std::string_view row = text.substr(0, end);
    text = end == std::string_view::npos ? std::string_view() : text.substr(end + 1);
    ++line;
    size_t hash = row.find('#');
    if (hash != std::string_view::npos)
      row = row.substr(0, hash);
    std::vector<std::string_view> words;
    for (size_t i = 0; i < row.size();) {
      while (i < row.size() && row[i] == ' ')
        ++i;
      size_t j = i;
      while (j < row.size() && row[j] != ' ')
        ++j;
      if (j > i)
        words.push_back(row.substr(i, j - i));
      i = j;
    }
    if (words.empty())
      continue;
    if (!header) {
      if (words.size() != 8 || words[0] != "schedule" ||
          !parseScheduleKind(words[1], s.kind) || words[2] != "ranks" ||
          !number(words[3], s.ranks) || words[4] != "stages" ||
          !number(words[5], s.stages) || words[6] != "microbatches" ||
          !number(words[7], s.microbatches) || s.ranks == 0 || s.ranks > kMaxScheduleRanks)
        return fail("expected 'schedule KIND ranks P stages S microbatches M' "
                    "(KIND gpipe, 1f1b, interleaved or zero_bubble; P at most 4096)");
      s.steps.assign(s.ranks, {});
      header = true;
      continue;
    }
    PipeStep step;
    unsigned rank = 0;
    bool known = false;
    for (PipeOp op : {PipeOp::Forward, PipeOp::Backward, PipeOp::WeightGrad,
                      PipeOp::SendActivation, PipeOp::RecvActivation,
                      PipeOp::SendGradient, PipeOp::RecvGradient})
      if (words.size() > 1 && words[1] == pipeOpName(op)) {
        step.op = op;
        known = true;
      }
    size_t fields = known && isCompute(step.op) ? 4 : 5;
    if (!known || words.size() != fields || !number(words[0], rank) ||
        !number(words[2], step.microbatch) || !number(words[3], step.stage) ||
        (fields == 5 && !number(words[4], step.peer)))
      return fail("expected 'RANK OP MICROBATCH STAGE [PEER]' (OP forward, "
                  "backward, weight, send-act, recv-act, send-grad or "
                  "recv-grad; PEER for sends and receives)");
    if (rank >= s.ranks)
      return fail("rank " + std::to_string(rank) + " of " +
                  std::to_string(s.ranks));
    s.steps[rank].push_back(step);
  }
  if (!header) {
    line = 1;
    return fail("empty schedule");
  }
  return true;
}

//===----------------------------------------------------------------------===//
// Simulating and drawing
//===----------------------------------------------------------------------===//

StageCost loom::runtime::uniformStageCost(const Schedule &s) {
  if (s.splitsBackward())
    return {1, 1, 1};
  double v = s.virtualStages();
  return {1 / v, 2 / v, 0};
}

ScheduleTimeline loom::runtime::simulateSchedule(const Schedule &s,
                                                 const std::vector<StageCost> &costs) {
  ScheduleTimeline t;
  t.steps.resize(s.ranks);
  t.busy.assign(s.ranks, 0);
  t.peakActivations.assign(s.ranks, 0);
  t.peakActivationBytes.assign(s.ranks, 0);
  std::vector<double> clock(s.ranks, 0), heldBytes(s.ranks, 0);
  std::vector<size_t> pc(s.ranks, 0);
  std::vector<unsigned> held(s.ranks, 0);
  std::map<Message, double> postedAt;
  auto costsOf = [&](const PipeStep &step) -> StageCost {
    return costs.empty()       ? StageCost()
           : costs.size() == 1 ? costs.front()
                               : costs[step.stage % costs.size()];
  };
  auto costOf = [&](const PipeStep &step) {
    StageCost c = costsOf(step);
    return step.op == PipeOp::Forward    ? c.forward
           : step.op == PipeOp::Backward ? c.backward
                                         : c.weightGrad;
  };
  PipeOp frees = s.splitsBackward() ? PipeOp::WeightGrad : PipeOp::Backward;
  for (bool progress = true; progress;) {
    progress = false;
    for (unsigned r = 0; r < s.ranks; ++r)
      for (; pc[r] < s.steps[r].size(); ++pc[r]) {
        const PipeStep &step = s.steps[r][pc[r]];
        double start = clock[r], end = start;
        if (isRecv(step.op)) {
          auto it = postedAt.find(messageOf(step, r));
          if (it == postedAt.end())
            break;
          start = end = std::max(clock[r], it->second);
        } else if (isSend(step.op)) {
          postedAt[messageOf(step, r)] = clock[r];
        } else {
          end = start + costOf(step);
          t.busy[r] += end - start;
          double bytes = costsOf(step).activationBytes;
          if (step.op == PipeOp::Forward) {
            t.peakActivations[r] = std::max(t.peakActivations[r], ++held[r]);
            heldBytes[r] += bytes;
            t.peakActivationBytes[r] =
                std::max(t.peakActivationBytes[r], heldBytes[r]);
          } else if (step.op == frees) {
            --held[r];
            heldBytes[r] -= bytes;
          }
        }
        t.steps[r].push_back({start, end});
        clock[r] = end;
        progress = true;
      }
  }
  double busy = 0;
  for (unsigned r = 0; r < s.ranks; ++r) {
    t.makespan = std::max(t.makespan, clock[r]);
    busy += t.busy[r];
  }
  t.bubble = t.makespan > 0 ? 1.0 - busy / (s.ranks * t.makespan) : 0;
  return t;
}

std::string loom::runtime::scheduleSvg(const Schedule &s,
                                       const ScheduleTimeline &t) {
  const double width = 960, rowHeight = 28, left = 70, top = 40;
  double scale = t.makespan > 0 ? (width - left - 10) / t.makespan : 1;
  double height = top + s.ranks * rowHeight + 40;
  char buf[512];
  std::string svg;
  std::snprintf(buf, sizeof(buf),
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" "
                "height=\"%.0f\" font-family=\"sans-serif\" font-size=\"11\">\n"
                "<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n"
                "<text x=\"%.0f\" y=\"20\" font-size=\"14\">%s: %u ranks, %u "
                "stages, %u microbatches, bubble %.1f%%</text>\n",
                width, height, left, scheduleKindName(s.kind), s.ranks,
                s.stages, s.microbatches, 100 * t.bubble);
  svg += buf;
  for (unsigned r = 0; r < s.ranks; ++r) {
    double y = top + r * rowHeight;
    std::snprintf(buf, sizeof(buf),
                  "<text x=\"8\" y=\"%.1f\">rank %u</text>\n"
                  "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                  "fill=\"white\" stroke=\"#999\"/>\n",
                  y + rowHeight * 0.65, r, left, y + 2, t.makespan * scale,
                  rowHeight - 4);
    svg += buf;
    for (size_t i = 0; i < s.steps[r].size(); ++i) {
      const PipeStep &step = s.steps[r][i];
      if (!isCompute(step.op))
        continue;
      const char *fill = step.op == PipeOp::Forward    ? "#4c8bf5"
                         : step.op == PipeOp::Backward ? "#f5a623"
                                                       : "#7ed321";
      const ScheduleTimeline::Interval &at = t.steps[r][i];
      std::snprintf(buf, sizeof(buf),
                    "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" "
                    "fill=\"%s\" stroke=\"black\" stroke-width=\"0.5\"/>\n"
                    "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%u</text>\n",
                    left + at.start * scale, y + 2, (at.end - at.start) * scale,
                    rowHeight - 4, fill, left + (at.start + at.end) / 2 * scale,
                    y + rowHeight * 0.65, step.microbatch);
      svg += buf;
    }
  }
  double y = top + s.ranks * rowHeight + 20;
  std::snprintf(buf, sizeof(buf),
                "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"#4c8bf5\"/>"
                "<text x=\"%.0f\" y=\"%.0f\">forward</text>\n"
                "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"#f5a623\"/>"
                "<text x=\"%.0f\" y=\"%.0f\">backward</text>\n"
                "<rect x=\"%.0f\" y=\"%.0f\" width=\"12\" height=\"12\" fill=\"#7ed321\"/>"
                "<text x=\"%.0f\" y=\"%.0f\">weight gradient (box label: microbatch; white: idle)</text>\n"
                "</svg>\n",
                left, y - 10, left + 16, y, left + 90, y - 10, left + 106, y,
                left + 190, y - 10, left + 206, y);
  svg += buf;
  return svg;
}
