//===- ExplainStage.cpp - loomc --explain, --memory-limit, --search-mesh --===//
//
// After the kernels stage the per-rank program is complete and nothing is
// compiled yet: explain reads it there. A plan over the memory limit is an
// error that names the rank and its largest tensors, and suggests the
// nearest change that fits, found by explaining the changed script (so
// the suggestion is checked, not guessed). The mesh search explains every
// factorization of N devices the same way.
//
//===----------------------------------------------------------------------===//

#include "Driver/Compilation.h"

#include "Loom/IR/LoomOps.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <chrono>

using namespace mlir;

namespace loom {

FailureOr<ExplainReport> Compilation::makeExplainReport() {
  FailureOr<const DeviceSpec *> device = gpuDevice();
  if (failed(device))
    return failure();
  FailureOr<func::FuncOp> model = selectModel();
  if (failed(model))
    return failure();
  func::FuncOp spmd = spmdProgramOf(*module, *model);
  // A schedule the build would refuse (1f1b with several stages a rank, a
  // microbatch count that is no multiple of the ranks) was explained as a
  // bubble of 0 with one microbatch in flight: the build's error instead.
  if (spmd && failed(checkPipelineSchedule(spmd)))
    return failure();
  ExplainOptions explain;
  explain.device = *device;
  explain.network.intraNodeGBs = options.intraNodeGBs.value_or((*device)->intraNodeGBs);
  explain.network.interNodeGBs = options.interNodeGBs.value_or((*device)->interNodeGBs);
  explain.network.intraNodeLatencyUs = options.intraNodeLatencyUs;
  explain.network.interNodeLatencyUs = options.interNodeLatencyUs;
  explain.network.gpusPerNode = options.gpusPerNode;
  for (auto train : module->getOps<mlir::loom::TrainOp>())
    if (options.train && train.getModel() == model->getSymName()) {
      explain.microbatches = static_cast<unsigned>(train.getMicrobatches());
      explain.schedule = train.getSchedule().str();
      explain.optimizer = train.getOptimizer().str();
      explain.zero = static_cast<bool>(train.getZeroAttr());
    }
  if (!options.schedule.empty())
    explain.schedule = options.schedule;
  // Probes too: the search's and the suggestions' fits are judged by what
  // the plan allocates (a temporary-heavy mesh had been ranked as fitting
  // and suggested, and its build then refused it).
  explain.planArena = true;
  FailureOr<ExplainReport> report =
      explainProgram(*module, *model, spmd ? spmd : *model, explain);
  if (succeeded(report)) {
    report->recompute = options.recomputeLayers;
    report->loopTripCount = loopTripCount;
  }
  return report;
}

LogicalResult Compilation::explainPlan() {
  FailureOr<ExplainReport> made = makeExplainReport();
  if (failed(made))
    return failure();
  explained = std::move(*made);
  if (options.probe) {
    finished = true;
    return success();
  }
  if (!options.meshSvg.empty()) {
    std::error_code ec;
    llvm::raw_fd_ostream out(options.meshSvg, ec, llvm::sys::fs::OF_Text);
    if (ec)
      return emitError(UnknownLoc::get(&context), "cannot write ")
             << options.meshSvg << ": " << ec.message();
    out << meshSvg(*explained);
    if (std::error_code failed = flushChecked(out))
      return emitError(UnknownLoc::get(&context), "cannot write ")
             << options.meshSvg << ": " << failed.message();
  }
  if (options.explain) {
    if (*options.explain == KernelReportFormat::Json)
      printExplainJson(*explained, os);
    else
      printExplainText(*explained, os);
    finished = true;
  }
  return checkMemoryLimit(*explained);
}

/// `options` for a compilation of the script's that a search or a check
/// runs on the side: nothing printed, dumped, drawn or searched.
static DriverOptions trialOptions(DriverOptions options) {
  options.explain.reset();
  options.searchMesh = 0;
  options.emit.reset();
  options.kernelReport.reset();
  options.dumpDir.clear();
  options.dumpAfterEachPass = options.timing = false;
  options.printIrAfter.clear();
  options.scheduleSvg.clear();
  options.meshSvg.clear();
  options.remarkCollectives = false;
  options.progress = ProgressLines::Never;
  options.suggestFits = false;
  return options;
}

FailureOr<ExplainReport> probeExplain(MLIRContext &context,
                                      llvm::SourceMgr &sourceMgr,
                                      DriverOptions options) {
  options = trialOptions(options);
  options.probe = true;
  options.memoryLimit.reset();
  ScopedDiagnosticHandler quiet(&context, [](Diagnostic &) { return success(); });
  Compilation trial(context, sourceMgr, options, llvm::nulls());
  if (failed(trial.run()) || !trial.explainReport())
    return failure();
  return *trial.explainReport();
}

/// How a script's candidates are explained: sampled, or (a script whose
/// pipeline stages a loop makes: `for i in 0..4 { stage i {...} }` samples
/// 1 or 2 stages, too few for the mesh's pp) whole. The search decides it
/// once, on the script's own mesh: a whole compile of every candidate that
/// cannot compile would cost what sampling saves.
enum class Sampling { Decide, Sampled, Whole };

/// A candidate's report from two samples of its loops, 1 and 2 iterations
/// of every long one: what explain adds up grows linearly with the
/// iterations of identical layers, so each figure is f(n) = f(1) +
/// (n - 1)(f(2) - f(1)), and the layers are partitioned and costed twice,
/// not n times. A script without long loops or with long loops of
/// different lengths is explained whole (and see Sampling).
static FailureOr<ExplainReport> sampledExplain(MLIRContext &context,
                                               llvm::SourceMgr &sourceMgr,
                                               DriverOptions options,
                                               Sampling *sampling = nullptr) {
  Sampling how = sampling ? *sampling : Sampling::Sampled;
  auto whole = [&] {
    options.loopLimit = 0;
    return probeExplain(context, sourceMgr, options);
  };
  if (how == Sampling::Whole)
    return whole();
  // A sample that does not compile, or whose stage count changes with the
  // iterations, is no sample: explained whole when deciding.
  auto notSampled = [&](FailureOr<ExplainReport> failedSample) {
    if (how != Sampling::Decide)
      return failedSample;
    FailureOr<ExplainReport> report = whole();
    if (succeeded(report))
      *sampling = Sampling::Whole;
    return report;
  };
  options.loopLimit = 1;
  FailureOr<ExplainReport> one = probeExplain(context, sourceMgr, options);
  if (succeeded(one) && one->loopTripCount <= 0) {
    options.loopLimit = 0;
    return probeExplain(context, sourceMgr, options);
  }
  if (failed(one))
    return notSampled(one);
  options.loopLimit = 2;
  FailureOr<ExplainReport> two = probeExplain(context, sourceMgr, options);
  if (failed(two) || two->ranksByCoordinate.size() != one->ranksByCoordinate.size() ||
      two->stages != one->stages)
    return notSampled(failure());
  if (sampling)
    *sampling = Sampling::Sampled;
  double n = static_cast<double>(one->loopTripCount);
  auto at = [&](double a, double b) { return a + (n - 1) * (b - a); };
  auto atBytes = [&](int64_t a, int64_t b) {
    return static_cast<int64_t>(std::llround(at(a, b)));
  };
  ExplainReport r = *two;
  r.paramElements = atBytes(one->paramElements, two->paramElements);
  // (Its params, gradients, state and activations grow with the layers;
  // its temporaries are reused.)
  if (one->planArenaBytes && two->planArenaBytes)
    r.planArenaBytes = atBytes(one->planArenaBytes, two->planArenaBytes);
  else
    r.planArenaBytes = 0;
  r.paramBytes = atBytes(one->paramBytes, two->paramBytes);
  for (auto [rank, a, b] : llvm::zip(r.ranksByCoordinate, one->ranksByCoordinate,
                                     two->ranksByCoordinate)) {
    rank.params = atBytes(a.params, b.params);
    rank.gradients = atBytes(a.gradients, b.gradients);
    rank.optimizer = atBytes(a.optimizer, b.optimizer);
    rank.inputs = atBytes(a.inputs, b.inputs);
    rank.activations = atBytes(a.activations, b.activations);
    rank.activationsPerMicrobatch =
        atBytes(a.activationsPerMicrobatch, b.activationsPerMicrobatch);
    rank.forwardSeconds = at(a.forwardSeconds, b.forwardSeconds);
    rank.backwardSeconds = at(a.backwardSeconds, b.backwardSeconds);
    rank.updateSeconds = at(a.updateSeconds, b.updateSeconds);
    rank.exposedBucketSeconds = at(a.exposedBucketSeconds, b.exposedBucketSeconds);
    rank.finishSeconds = at(a.finishSeconds, b.finishSeconds);
  }
  r.stepSeconds = at(one->stepSeconds, two->stepSeconds);
  r.modelFlops = at(one->modelFlops, two->modelFlops);
  r.communicationSeconds = at(one->communicationSeconds, two->communicationSeconds);
  // The bubble is no linear function of the loop's iterations: the
  // two-iteration sample's had been reported (gpt3-175b on dp=8,pp=16,tp=8:
  // 0.114, the whole model's 0.088).
  if (r.stages)
    r.bubble = r.timelineBubble();
  return r;
}

namespace {
/// A change of the script's options that explain can try.
struct Change {
  std::string flags; // as the user would type them
  DriverOptions options;
};

std::string meshFlag(const ExplainReport &report,
                     llvm::ArrayRef<int64_t> sizes) {
  std::string text;
  for (auto [i, name] : llvm::enumerate(report.axes))
    text += (i ? "," : "") + name + "=" + std::to_string(sizes[i]);
  return text;
}
} // namespace

/// What a rank of a build with `options` (to its plan, written nowhere)
/// allocates, when it keeps within `limit`: the plan with its kernels'
/// scratch, as the build checks it. The build of the training step where
/// `explained` is one (explain explains a train section's step without
/// --train). A build that fails for another reason than the limit leaves
/// its first error in `failure` (the search had counted it over the
/// limit).
static std::optional<int64_t> buildFits(MLIRContext &context, llvm::SourceMgr &sourceMgr,
                                        DriverOptions options,
                                        const ExplainReport &explained, int64_t limit,
                                        std::string *failure = nullptr) {
  options = trialOptions(options);
  options.train |= explained.training;
  options.emit = Stage::Plan;
  options.memoryLimit = limit;
  std::string first;
  ScopedDiagnosticHandler quiet(&context, [&](Diagnostic &diagnostic) {
    if (first.empty() && diagnostic.getSeverity() == DiagnosticSeverity::Error)
      first = diagnostic.str();
    return success();
  });
  Compilation trial(context, sourceMgr, options, llvm::nulls());
  if (failed(trial.run())) {
    if (failure && trial.allocatedBytes <= limit)
      *failure = first.empty() ? std::string("the build failed") : first;
    return std::nullopt;
  }
  return trial.allocatedBytes;
}

LogicalResult Compilation::checkMemoryLimit(const ExplainReport &report) {
  const DeviceSpec *device = *gpuDevice();
  int64_t limit = options.memoryLimit ? *options.memoryLimit
                  : options.explain   ? device->memoryBytes
                                      : 0;
  const ExplainRank &rank = report.largestRank();
  if (!limit)
    return success();
  func::FuncOp model = *selectModel();
  // Explain's figures leave out a step's working temporaries; its static
  // memory plan holds them, and the build checks the limit against it: say
  // so where the figures fit and the plan does not (explain had passed a
  // limit the build then refused, silently). A warning: the changes
  // suggested below are costed by the figures.
  std::string limitSource = options.memoryLimit
                                ? std::string("--memory-limit")
                                : "the " + device->name.str() + "'s memory; set --memory-limit";
  int64_t allocated = report.allocatedBytes();
  if (options.explain && rank.total() <= limit && allocated > limit)
    emitWarning(model.getLoc())
        << "the plan of model '" << report.model << "' allocates " << allocated << " bytes ("
        << formatBytes(allocated)
        << (allocated > report.planArenaBytes
                ? ", with what it holds for its microbatches in flight and its pipeline's receive buffer"
                : "")
        << ") on each rank, more than the memory limit of " << limit << " bytes ("
        << formatBytes(limit) << ", " << limitSource
        << "): the figures above leave out a step's temporaries, which its "
           "static memory plan holds, so a build with this limit fails";
  if (rank.total() <= limit)
    return success();
  InFlightDiagnostic diag = emitError(model.getLoc());
  diag << "model '" << report.model << "' needs " << rank.total() << " bytes ("
       << formatBytes(rank.total()) << ") on " << rankName(report, rank)
       << ", more than the memory limit of " << limit << " bytes ("
       << formatBytes(limit) << ", " << limitSource << "): params " << formatBytes(rank.params) << ", gradients "
       << formatBytes(rank.gradients) << ", optimizer state "
       << formatBytes(rank.optimizer) << ", activations "
       << formatBytes(rank.activations);
  if (rank.messages)
    diag << ", pipeline receive buffer " << formatBytes(rank.messages);
  diag << "; its largest tensors:";
  for (auto [i, tensor] : llvm::enumerate(rank.largest))
    diag << (i ? ", " : " ") << tensor.first << " (" << formatBytes(tensor.second)
         << ")";

  if (!options.suggestFits)
    return failure();
  // The changes to try, nearest first: on the same mesh, then with a
  // factor of 2 moved from one axis to another (the same devices).
  std::vector<std::vector<Change>> rounds(2);
  DriverOptions base = options;
  base.memoryLimit.reset();
  auto add = [&](unsigned round, std::string flags, DriverOptions changed) {
    rounds[round].push_back({std::move(flags), std::move(changed)});
  };
  std::vector<std::pair<std::string, DriverOptions>> onMesh = {{"", base}};
  if (report.training && !report.recompute) {
    DriverOptions changed = base;
    changed.recomputeLayers = true;
    onMesh.push_back({"--recompute=layers", changed});
  }
  if (report.training && !report.zero && report.ranks > 1) {
    for (size_t i = 0, e = onMesh.size(); i < e; ++i) {
      DriverOptions changed = onMesh[i].second;
      changed.zero = true;
      onMesh.push_back(
          {(onMesh[i].first.empty() ? "" : onMesh[i].first + " ") + "--zero=1",
           changed});
    }
  }
  for (auto &[flags, changed] : onMesh)
    if (!flags.empty())
      add(0, flags, changed);
  for (size_t from = 0; from < report.axes.size(); ++from)
    for (size_t to = 0; to < report.axes.size(); ++to) {
      if (from == to || report.sizes[from] % 2)
        continue;
      std::vector<int64_t> sizes = report.sizes;
      sizes[from] /= 2, sizes[to] *= 2;
      for (auto &[flags, changed] : onMesh) {
        DriverOptions moved = changed;
        moved.mesh = meshFlag(report, sizes);
        add(1, "--mesh=" + moved.mesh + (flags.empty() ? "" : " " + flags), moved);
      }
    }
  for (const std::vector<Change> &round : rounds) {
    std::vector<std::pair<const Change *, ExplainReport>> fitting;
    for (const Change &change : round) {
      FailureOr<ExplainReport> tried = sampledExplain(context, sourceMgr, change.options);
      if (succeeded(tried) && tried->neededBytes() <= limit)
        fitting.push_back({&change, *tried});
    }
    llvm::stable_sort(fitting, [](const auto &a, const auto &b) {
      return a.second.stepSeconds < b.second.stepSeconds;
    });
    // The fastest whose build fits: explain's plan leaves out the kernels'
    // scratch (gpt-train at 2.2M had been told --recompute=layers, 2.13
    // MiB by explain, whose build allocates 2.33). A few builds at most.
    constexpr size_t kMostBuilds = 3;
    for (auto &[change, report] : llvm::ArrayRef(fitting).take_front(kMostBuilds)) {
      if (!buildFits(context, sourceMgr, change->options, report, limit))
        continue;
      diag.attachNote(model.getLoc())
          << "it fits with " << change->flags << ": "
          << formatBytes(report.largestRank().total())
          << " on its largest rank, a modelled step of "
          << formatSeconds(report.stepSeconds);
      return failure();
    }
  }
  diag.attachNote(model.getLoc())
      << "no change of recomputation, ZeRO-1 or one factor of 2 between the "
         "mesh axes fits: it needs more devices (explain --mesh with larger "
         "axes, or --search-mesh N)";
  return failure();
}

/// Every way to write `n` as a product of `axes` factors, in order.
static void factorizations(int64_t n, size_t axes, std::vector<int64_t> &prefix,
                           std::vector<std::vector<int64_t>> &out) {
  if (prefix.size() + 1 == axes) {
    prefix.push_back(n);
    out.push_back(prefix);
    prefix.pop_back();
    return;
  }
  // The divisors in increasing order, from those up to sqrt(n) (trial
  // division up to n took 32 s at n = 9999999967).
  std::vector<int64_t> small, large;
  for (int64_t f = 1; f <= n / f; ++f)
    if (n % f == 0) {
      small.push_back(f);
      if (f != n / f)
        large.push_back(n / f);
    }
  small.insert(small.end(), large.rbegin(), large.rend());
  for (int64_t f : small) {
    prefix.push_back(f);
    factorizations(n / f, axes, prefix, out);
    prefix.pop_back();
  }
}

/// How many ways factorizations() finds, or `most` + 1 when more: per
/// prime power p^e of `n`, the ways to share e among the axes.
static int64_t countFactorizations(int64_t n, int64_t axes, int64_t most) {
  auto choose = [&](int64_t top, int64_t k) {
    double ways = 1;
    for (int64_t i = 1; i <= k; ++i)
      ways = ways * double(top - k + i) / double(i);
    return ways;
  };
  double count = 1;
  for (int64_t p = 2; p <= n / p; ++p) {
    int64_t e = 0;
    for (; n % p == 0; n /= p)
      ++e;
    if (e)
      count *= choose(e + axes - 1, axes - 1);
  }
  if (n > 1)
    count *= double(axes);
  return count > double(most) ? most + 1 : static_cast<int64_t>(std::llround(count));
}

LogicalResult Compilation::searchMeshes() {
  auto started = std::chrono::steady_clock::now();
  // The script on its own mesh: its axes, and what the knobs start from.
  Sampling sampling = Sampling::Decide;
  FailureOr<ExplainReport> first = sampledExplain(context, sourceMgr, options, &sampling);
  if (failed(first)) {
    // Compile it once more, not quietly, for the script's own error.
    DriverOptions plain = options;
    plain.searchMesh = 0;
    plain.probe = true;
    Compilation loud(context, sourceMgr, plain, llvm::nulls());
    if (succeeded(loud.run()))
      emitError(UnknownLoc::get(&context), "--search-mesh: the script does not compile as sampled");
    return failure();
  }
  const ExplainReport &script = *first;
  if (script.axes.empty())
    return emitError(UnknownLoc::get(&context),
                     "--search-mesh needs a mesh in the script: its axes are "
                     "what the search sizes");
  const DeviceSpec *device = *gpuDevice();
  int64_t limit = options.memoryLimit.value_or(device->memoryBytes);
  // Recomputation is a knob only where the script does not recompute
  // every layer already.
  bool recomputeChanges = false;
  if (script.training && !script.recompute) {
    DriverOptions recompute = options;
    recompute.recomputeLayers = true;
    FailureOr<ExplainReport> tried =
        sampledExplain(context, sourceMgr, recompute, &sampling);
    recomputeChanges = succeeded(tried) && tried->largestRank().total() !=
                                               script.largestRank().total();
  }
  // Each mesh is a compilation or more: a cap, before the list is built
  // (30 axes of 2^20 devices had filled 24 GB listing them).
  constexpr int64_t kMostMeshes = 100000;
  int64_t count = countFactorizations(options.searchMesh, script.axes.size(), kMostMeshes);
  if (count > kMostMeshes)
    return emitError(UnknownLoc::get(&context), "--search-mesh=")
           << options.searchMesh << ": the mesh's " << script.axes.size()
           << " axes make more than " << kMostMeshes << " meshes of "
           << options.searchMesh << " devices: search fewer devices, or give the "
              "script's mesh fewer axes";
  std::vector<std::vector<int64_t>> meshes;
  std::vector<int64_t> prefix;
  factorizations(options.searchMesh, script.axes.size(), prefix, meshes);
  assert(static_cast<int64_t>(meshes.size()) == count && "countFactorizations disagrees");

  struct Result {
    std::string flags;
    DriverOptions options;
    ExplainReport report;
    std::optional<int64_t> built; // what its build allocates, once checked
  };
  std::vector<Result> fits;
  unsigned tried = 0, compiled = 0, over = 0;
  bool live = llvm::errs().is_displayed();
  for (const std::vector<int64_t> &sizes : meshes) {
    std::vector<std::pair<std::string, DriverOptions>> knobs;
    DriverOptions mesh = options;
    mesh.mesh = meshFlag(script, sizes);
    mesh.searchMesh = 0;
    knobs.push_back({"", mesh});
    if (recomputeChanges) {
      DriverOptions recompute = mesh;
      recompute.recomputeLayers = true;
      knobs.push_back({" --recompute=layers", recompute});
    }
    // A pipeline: more stages than ranks need the interleaved schedule;
    // the microbatches are the script's, and 4 per pp rank.
    if (script.stages) {
      int64_t pp = 1;
      for (auto [name, size] : llvm::zip(script.axes, sizes))
        if (name == script.pipelineAxis)
          pp = size;
      // (One pipeline rank runs its stages in order: no schedule.)
      if (pp > 1 && script.stages > pp && script.schedule != "interleaved")
        for (auto &[flags, knob] : knobs) {
          knob.schedule = "interleaved";
          flags += " --schedule=interleaved";
        }
      if (pp > 1 && 4 * pp != script.microbatches)
        for (size_t i = 0, e = knobs.size(); i < e; ++i) {
          DriverOptions more = knobs[i].second;
          more.microbatches = 4 * pp;
          knobs.push_back({knobs[i].first + " --microbatches=" +
                               std::to_string(4 * pp),
                           more});
        }
    }
    auto progress = [&](const char *end) {
      llvm::errs() << llvm::formatv("loomc: search-mesh: {0} of {1} meshes, {2} tried{3}",
                                    &sizes - &meshes.front() + 1, meshes.size(),
                                    tried, end);
    };
    for (auto &[flags, knob] : knobs) {
      ++tried;
      // A terminal's line is rewritten per configuration; a log gets a
      // line per mesh (below), not carriage returns.
      if (live) {
        llvm::errs() << "\r";
        progress("");
      }
      FailureOr<ExplainReport> report = sampledExplain(context, sourceMgr, knob, &sampling);
      if (failed(report))
        continue;
      ++compiled;
      if (report->neededBytes() > limit) {
        ++over;
        continue;
      }
      // A knob that changes nothing (--recompute=layers on a script that
      // recomputes every layer already) is not a configuration of its own.
      bool same = llvm::any_of(fits, [&](const Result &other) {
        return other.report.stepSeconds == report->stepSeconds &&
               other.report.neededBytes() == report->neededBytes() &&
               other.report.sizes == report->sizes;
      });
      if (!same)
        fits.push_back({"--mesh=" + knob.mesh + flags, knob, *report, std::nullopt});
    }
    // A log gets a hundred lines at most (888030 meshes had written 51 MB).
    size_t index = &sizes - &meshes.front() + 1;
    if (!live && (index % ((meshes.size() + 99) / 100) == 0 || index == meshes.size()))
      progress("\n");
  }
  if (live)
    llvm::errs() << "\n";
  std::sort(fits.begin(), fits.end(), [](const Result &a, const Result &b) {
    return a.report.stepSeconds < b.report.stepSeconds;
  });
  // The fits the table shows, fastest first, each checked by a build (its
  // plan with the kernels' scratch, which the figures and explain's plan
  // leave out: gpt-train on dp=1,tp=4 under 2.5M had been listed at 2.41
  // MiB, and its build allocates 2.94); one that does not fit is over.
  constexpr size_t kShown = 8;
  // What a fit needs on the GPUs searched: its check build's allocation
  // (the kernels' scratch), or explain's figure where that is larger (the
  // check is a CPU build, whose in-place optimizer updates make its arena
  // smaller than a GPU build's: the column had shown 889.56 KiB for a
  // configuration that a limit of 900K counted over).
  auto shownMemory = [](const Result &fit) {
    return std::max(fit.built.value_or(0), fit.report.neededBytes());
  };
  size_t built = 0;
  if (!fits.empty())
    llvm::errs() << "loomc: search-mesh: building the fastest fits (" << kShown
                 << " at most) to check them\n";
  unsigned failedBuilds = 0;
  for (size_t i = 0; i < fits.size() && built < kShown;) {
    std::string failure;
    if ((fits[i].built = buildFits(context, sourceMgr, fits[i].options, fits[i].report, limit,
                                   &failure))) {
      ++i;
      ++built;
      continue;
    }
    // Not over the limit: a configuration the compiler cannot build
    // (said, rather than counted over the limit).
    if (!failure.empty()) {
      ++failedBuilds;
      llvm::errs() << "loomc: search-mesh: " << fits[i].flags << " does not build: " << failure
                   << "\n";
    } else {
      ++over;
    }
    fits.erase(fits.begin() + i);
  }
  double seconds = std::chrono::duration<double>(
                       std::chrono::steady_clock::now() - started)
                       .count();
  if (options.searchJson) {
    // Every configuration that fits, fastest first (the table shows 8).
    llvm::json::OStream j(os, 2);
    j.object([&] {
      j.attribute("model", script.model);
      j.attribute("device", device->name);
      j.attribute("devices", options.searchMesh);
      j.attribute("meshes", static_cast<int64_t>(meshes.size()));
      j.attribute("configurations", tried);
      j.attribute("compiled", compiled);
      j.attribute("over_memory_limit", over);
      j.attribute("failed_builds", failedBuilds);
      j.attribute("memory_limit", limit);
      j.attribute("search_seconds", seconds);
      j.attributeArray("fits", [&] {
        for (const Result &fit : fits)
          j.object([&] {
            const ExplainReport &r = fit.report;
            j.attribute("configuration", fit.flags);
            j.attributeObject("axes", [&] {
              for (auto [name, size] : llvm::zip(r.axes, r.sizes))
                j.attribute(name, size);
            });
            j.attribute("step_seconds", r.stepSeconds);
            j.attribute("mfu", r.mfu());
            j.attribute("memory", shownMemory(fit));
            if (r.stages)
              j.attribute("bubble", r.bubble);
            j.attribute("communication_seconds", r.communicationSeconds);
            j.attribute("built", fit.built.has_value());
          });
      });
    });
    os << "\n";
    finished = true;
    return success();
  }
  os << "search-mesh: model '" << script.model << "' on " << options.searchMesh
     << " " << device->name << " GPUs: " << meshes.size() << " meshes, " << tried
     << " configurations, " << compiled << " compiled, " << over
     << " over the memory limit of " << formatBytes(limit) << ", "
     << (failedBuilds ? std::to_string(failedBuilds) + " failed to build, " : std::string())
     << fits.size()
     << " fit, " << built << " checked by a build (" << llvm::format("%.1f", seconds)
     << " s)\n";
  if (fits.empty()) {
    os << "  none fits\n";
    return success();
  }
  os << llvm::formatv("  {0,-4} {1,-60} {2,12} {3,8} {4,10} {5,8} {6,12}\n", "#",
                      "configuration", "step", "MFU", "memory", "bubble",
                      "comm/step");
  for (size_t i = 0; i < std::min<size_t>(fits.size(), kShown); ++i) {
    const ExplainReport &r = fits[i].report;
    double comm = r.communicationSeconds;
    os << llvm::formatv("  {0,-4} {1,-60} {2,12} {3,8} {4,10} {5,8} {6,12}\n",
                        i + 1, fits[i].flags,
                        formatSeconds(r.stepSeconds),
                        llvm::formatv("{0:f1}%", 100 * r.mfu()).str(),
                        formatBytes(shownMemory(fits[i])),
                        r.stages ? llvm::formatv("{0:f3}", r.bubble).str()
                                 : std::string("-"),
                        formatSeconds(comm));
  }
  finished = true;
  return success();
}

} // namespace loom
