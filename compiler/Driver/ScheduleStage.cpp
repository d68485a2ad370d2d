//===- ScheduleStage.cpp - A pipelined model's schedule (--emit=schedule) -===//
//
// From the loom IR: the model's stages (its loom.stage ops), the size of
// its pipeline axis, and the train section's microbatches and schedule.
// The schedule is the runtime's (runtime/plan/Schedule.h), built, verified
// and simulated with uniform stage costs for its bubble.
//
//===----------------------------------------------------------------------===//

#include "Driver/Compilation.h"

#include "Loom/IR/LoomOps.h"
#include "loom/runtime/plan/Schedule.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "llvm/Support/FileSystem.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace loom;
using namespace mlir;
namespace rt = ::loom::runtime;
namespace attr = mlir::loom::attr;

/// The ranks of mesh axis `axis` in `module`'s grid (1 without one).
static unsigned axisRanks(ModuleOp module, StringAttr axis) {
  unsigned ranks = 1;
  for (auto grid : module.getOps<shard::GridOp>())
    if (auto names = grid->getAttrOfType<ArrayAttr>(attr::kAxes))
      for (auto [i, name] : llvm::enumerate(names))
        if (cast<StringAttr>(name) == axis && i < grid.getShape().size())
          ranks = static_cast<unsigned>(grid.getShape()[i]);
  return ranks;
}

/// Schedule `kindName` of `stages` stages on the `ranks` ranks of `axis`,
/// built and verified; otherwise an error at `loc`, `what` (the schedule,
/// as the message names it) of model `model`, why, and `hint`.
static FailureOr<rt::Schedule>
verifiedSchedule(Location loc, StringRef kindName, const Twine &what,
                 StringRef model, StringAttr axis, unsigned ranks,
                 unsigned stages, unsigned microbatches, StringRef hint = {}) {
  rt::ScheduleKind kind;
  if (!rt::parseScheduleKind(kindName, kind))
    return emitError(loc, "unknown pipeline schedule '")
           << kindName << "' (expected gpipe, 1f1b, interleaved or zero_bubble)";
  rt::Schedule built;
  std::string error;
  if (!rt::buildSchedule(kind, ranks, stages, microbatches, built, error) ||
      !rt::verifySchedule(built, error))
    return emitError(loc, what) << " of model '" << model << "' (" << stages
                                << " stages on " << ranks << " '"
                                << axis.getValue() << "' ranks, "
                                << microbatches << " microbatch"
                                << (microbatches == 1 ? "" : "es") << "): " << error
                                << hint;
  return built;
}

LogicalResult Compilation::planSchedule() {
  func::FuncOp model;
  for (auto func : module->getOps<func::FuncOp>())
    if (func.isPublic() && func->hasAttr(attr::kPipelineAxis)) {
      model = func;
      break;
    }
  if (!model) {
    Location at = module->getLoc();
    for (auto func : module->getOps<func::FuncOp>())
      if (func.isPublic())
        at = func.getLoc();
    return emitError(at, "the model is not pipelined (no 'pipeline AXIS' and "
                         "stages): it has no schedule");
  }
  auto axis = model->getAttrOfType<StringAttr>(attr::kPipelineAxis);
  unsigned ranks = axisRanks(*module, axis);
  // One rank holds every stage and runs them in order, whatever the train
  // section's schedule says (as the executable does).
  if (ranks == 1)
    return emitError(model.getLoc(), "model '")
           << model.getSymName() << "' has one rank on its pipeline axis '"
           << axis.getValue()
           << "': it runs its stages in order there, with no schedule";
  // 1 + the largest stage number: a number no stage op uses is an empty
  // stage, and one number may have several ops (docs/language.md).
  unsigned stages = 0;
  for (Operation &op : model.getBody().front())
    if (auto stage = dyn_cast<mlir::loom::StageOp>(op))
      stages = std::max<unsigned>(stages, stage.getStage() + 1);
  unsigned microbatches = 1;
  std::string kindName = "1f1b";
  // The train section sets the schedule and the microbatches: an error
  // about them points there (it had pointed at the model's line); a
  // --gradients build's one microbatch is the build's.
  Location at = model.getLoc();
  for (auto train : module->getOps<mlir::loom::TrainOp>())
    if (train.getModel() == model.getSymName()) {
      // A --gradients build differentiates the whole batch at once.
      if (!gradientsOnly()) {
        microbatches = static_cast<unsigned>(train.getMicrobatches());
        at = train.getLoc();
      }
      kindName = train.getSchedule().str();
    }
  if (!options.schedule.empty())
    kindName = options.schedule;
  // Said as the plan stage says it (it had lost the kind's name and the
  // --gradients reason at --emit=schedule).
  FailureOr<rt::Schedule> verified = verifiedSchedule(
      at, kindName, "pipeline schedule '" + kindName + "'",
      model.getSymName(), axis, ranks, stages, microbatches,
      gradientsNote(kindName, axis.getValue(), stages, ranks));
  if (failed(verified))
    return failure();
  const rt::Schedule &built = *verified;
  rt::ScheduleTimeline timeline =
      rt::simulateSchedule(built, {rt::uniformStageCost(built)});
  schedule = rt::formatSchedule(built);
  llvm::raw_string_ostream summary(schedule);
  summary << "# verified; with uniform stages (backward = 2 forwards): bubble "
          << llvm::format("%.4f", timeline.bubble)
          // With several stages a rank each held (microbatch, stage) counts:
          // 5 of them with 4 microbatches is no contradiction.
          << (built.stages > built.ranks ? ", microbatch-stages" : ", microbatches")
          << " in flight at peak per rank:";
  for (unsigned held : timeline.peakActivations)
    summary << " " << held;
  summary << "\n";
  if (!options.scheduleSvg.empty()) {
    std::error_code ec;
    llvm::raw_fd_ostream out(options.scheduleSvg, ec, llvm::sys::fs::OF_Text);
    if (ec)
      return emitError(model.getLoc(), "cannot write ")
             << options.scheduleSvg << ": " << ec.message();
    out << rt::scheduleSvg(built, timeline);
    if (std::error_code failed = flushChecked(out))
      return emitError(model.getLoc(), "cannot write ")
             << options.scheduleSvg << ": " << failed.message();
  }
  return success();
}

LogicalResult Compilation::checkPipelineSchedule(func::FuncOp spmd) {
  auto count = spmd->getAttrOfType<IntegerAttr>(attr::kStagesCount);
  if (!count)
    return success();
  auto axis = spmd->getAttrOfType<StringAttr>(attr::kPipelineAxis);
  auto kindName = spmd->getAttrOfType<StringAttr>(attr::kSchedule).getValue();
  auto holder = spmd->getParentOfType<ModuleOp>();
  auto of = spmd->getAttrOfType<StringAttr>(attr::kPartitionOf);
  unsigned microbatches = 1;
  Location at = spmd.getLoc();
  for (auto train : holder.getOps<mlir::loom::TrainOp>())
    if (options.train && of && train.getModel() == of.getValue()) {
      microbatches = static_cast<unsigned>(train.getMicrobatches());
      at = train.getLoc();
    }
  // A forward-only run pipelines its forwards in order: only the name
  // matters. A gradient program runs the schedule (its backward too), on
  // the whole batch as one microbatch.
  rt::ScheduleKind kind;
  if (!options.train && !options.gradients && rt::parseScheduleKind(kindName, kind))
    return success();
  unsigned ranks = axisRanks(holder, axis), stages = static_cast<unsigned>(count.getInt());
  return verifiedSchedule(at, kindName, "pipeline schedule '" + kindName + "'",
                          of ? of.getValue() : "", axis, ranks, stages, microbatches,
                          gradientsNote(kindName, axis, stages, ranks));
}

std::string Compilation::gradientsNote(llvm::StringRef kindName, llvm::StringRef axis,
                                       unsigned stages, unsigned ranks) const {
  if (!gradientsOnly())
    return "";
  // Several stages per rank need the interleaved schedule, and it needs
  // more microbatches than one: every schedule is refused, so say what is
  // left (each refusal had pointed at the other).
  if (ranks > 0 && stages > ranks)
    return ("; a --gradients build runs the whole batch as one microbatch, "
            "too few for the interleaved schedule that several stages per "
            "rank need: build it with --mesh " + axis + "=" + llvm::Twine(stages) +
            " (a stage per rank) or --mesh " + axis + "=1")
        .str();
  return kindName == "interleaved"
             ? "; a --gradients build runs the whole batch as one microbatch, "
               "too few for the interleaved schedule: build it with "
               "--schedule 1f1b (its stages are one per rank)"
             : "";
}

void Compilation::printSchedule(llvm::raw_ostream &out) { out << schedule; }
