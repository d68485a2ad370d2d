//===- LoomDialect.cpp - Registration and attribute verification ----------===//

#include "Loom/IR/LoomDialect.h"
#include "Loom/IR/LoomOps.h"

#include "mlir/Dialect/Shard/IR/ShardOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/StringSet.h"

using namespace mlir;
using namespace mlir::loom;

#include "Loom/IR/LoomDialect.cpp.inc"

void LoomDialect::initialize() {
  addOperations<
#define GET_OP_LIST
#include "Loom/IR/LoomOps.cpp.inc"
      >();
  registerAttributes();
}

/// Checks that a name attribute is a non-empty string.
static LogicalResult verifyName(Operation *op, NamedAttribute attr) {
  auto name = dyn_cast<StringAttr>(attr.getValue());
  if (!name || name.getValue().empty())
    return op->emitOpError() << "'" << attr.getName().getValue()
                             << "' must be a non-empty string";
  return success();
}

/// `loom.sharding`: one array of grid axes (i16) per dimension.
static LogicalResult verifySharding(Operation *op, NamedAttribute attr) {
  auto dims = dyn_cast<ArrayAttr>(attr.getValue());
  if (!dims || !llvm::all_of(dims, [](Attribute dim) {
        return isa<DenseI16ArrayAttr>(dim);
      }))
    return op->emitOpError() << "'" << attr.getName().getValue()
                             << "' must be an array of i16 arrays (grid axes "
                                "per dimension)";
  return success();
}

LogicalResult LoomDialect::verifyRegionArgAttribute(Operation *op, unsigned,
                                                    unsigned argIndex,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == attr::kInput || name == attr::kParam)
    return verifyName(op, attr);
  if (name == attr::kInit) {
    if (!isa<InitAttr>(attr.getValue()))
      return op->emitOpError() << "'" << name << "' must be a #loom.init";
    auto func = dyn_cast<FunctionOpInterface>(op);
    if (func && !func.getArgAttr(argIndex, attr::kParam))
      return op->emitOpError() << "argument " << argIndex
                               << " has an initializer but is not a param";
    return success();
  }
  if (name == attr::kSharding)
    return verifySharding(op, attr);
  if (name == attr::kIndexBound) {
    auto bound = dyn_cast<IntegerAttr>(attr.getValue());
    auto func = dyn_cast<FunctionOpInterface>(op);
    if (!bound || bound.getInt() < 1)
      return op->emitOpError() << "'" << name << "' must be a positive integer";
    if (func && !func.getArgAttr(argIndex, attr::kInput))
      return op->emitOpError() << "argument " << argIndex
                               << " has an index bound but is not an input";
    return success();
  }
  if (name == attr::kScratch || name == attr::kExpertParam) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitOpError() << "'" << name << "' must be a unit attribute";
    auto func = dyn_cast<FunctionOpInterface>(op);
    if (name == attr::kExpertParam && func && !func.getArgAttr(argIndex, attr::kParam))
      return op->emitOpError() << "argument " << argIndex
                               << " is an expert param but not a param";
    return success();
  }
  return op->emitOpError() << "unknown loom argument attribute '" << name
                           << "'";
}

LogicalResult LoomDialect::verifyRegionResultAttribute(Operation *op, unsigned,
                                                       unsigned,
                                                       NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == attr::kOutput || name == attr::kLoss || name == attr::kUpdates)
    return verifyName(op, attr);
  if (name == attr::kSharding)
    return verifySharding(op, attr);
  if (name == attr::kAssemble) {
    auto kind = dyn_cast<StringAttr>(attr.getValue());
    if (!kind || !llvm::is_contained({"rows", "mean", "sum"}, kind.getValue()))
      return op->emitOpError() << "'" << name << "' must be \"rows\", \"mean\" or \"sum\"";
    return success();
  }
  if (name == attr::kInPlace) {
    auto func = dyn_cast<FunctionOpInterface>(op);
    auto index = dyn_cast<IntegerAttr>(attr.getValue());
    if (!func || !index || index.getInt() < 0 ||
        index.getInt() >= static_cast<int64_t>(func.getNumArguments()))
      return op->emitOpError() << "'" << name
                               << "' must be the index of one of its arguments";
    return success();
  }
  return op->emitOpError() << "unknown loom result attribute '" << name << "'";
}

LogicalResult LoomDialect::verifyOperationAttribute(Operation *op,
                                                    NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  if (name == attr::kPrecision) {
    if (!isa<ModuleOp>(op) || !isa<PrecisionAttr>(attr.getValue()))
      return op->emitOpError()
             << "'" << name << "' must be a #loom.precision on a module";
    return success();
  }
  if (name == attr::kAxes) {
    auto grid = dyn_cast<shard::GridOp>(op);
    auto axes = dyn_cast<ArrayAttr>(attr.getValue());
    if (!grid || !axes)
      return op->emitOpError()
             << "'" << name << "' must be an array of names on a shard.grid";
    if ((int64_t)axes.size() != grid.getRank())
      return op->emitOpError() << "names " << axes.size()
                               << " axes for a grid of rank " << grid.getRank();
    llvm::StringSet<> seen;
    for (Attribute axis : axes) {
      auto axisName = dyn_cast<StringAttr>(axis);
      if (!axisName || !seen.insert(axisName.getValue()).second)
        return op->emitOpError()
               << "'" << name << "' must hold distinct axis names";
    }
    return success();
  }
  if (name == attr::kKernel) {
    if (!isa<func::FuncOp>(op) || !isa<UnitAttr>(attr.getValue()))
      return op->emitOpError() << "'" << name << "' marks a func.func (unit)";
    return success();
  }
  if (name == attr::kRecompute || name == attr::kRecomputed) {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitOpError() << "'" << name << "' must name a layer instance";
    return success();
  }
  if (name == attr::kStage) {
    auto stage = dyn_cast<IntegerAttr>(attr.getValue());
    if (!stage || stage.getInt() < 0)
      return op->emitOpError() << "'" << name << "' must be a stage number";
    // Within its model's stages, where the model says how many.
    auto model = op->getParentOfType<func::FuncOp>();
    auto count = model ? model->getAttrOfType<IntegerAttr>(attr::kStagesCount) : IntegerAttr();
    if (count && stage.getInt() >= count.getInt())
      return op->emitOpError() << "'" << name << "' " << stage.getInt() << " is past the "
                               << count.getInt() << " stages of its model";
    return success();
  }
  if (name == attr::kBackward) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitOpError() << "'" << name << "' marks a backward op (unit)";
    return success();
  }
  if (name == attr::kPhase) {
    auto phase = dyn_cast<StringAttr>(attr.getValue());
    if (!phase || !llvm::is_contained({"forward", "backward", "update"},
                                      phase.getValue()))
      return op->emitOpError()
             << "'" << name << "' must be \"forward\", \"backward\" or \"update\"";
    return success();
  }
  if (name == attr::kStages) {
    if (!isa<DenseI64ArrayAttr>(attr.getValue()))
      return op->emitOpError() << "'" << name << "' must be an array of stages";
    return success();
  }
  if (name == attr::kForwardMicrobatches) {
    auto count = dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<func::FuncOp>(op) || !count || count.getInt() < 2)
      return op->emitOpError() << "'" << name
                               << "' must be a count of at least 2 on a model";
    return success();
  }
  if (name == attr::kStagesCount || name == attr::kSchedule) {
    if (!isa<func::FuncOp>(op))
      return op->emitOpError() << "'" << name << "' belongs on a pipelined model";
    auto count = dyn_cast<IntegerAttr>(attr.getValue());
    if (name == attr::kStagesCount && (!count || count.getInt() < 1))
      return op->emitOpError() << "'" << name << "' must be a count of stages, at least 1";
    auto schedule = dyn_cast<StringAttr>(attr.getValue());
    if (name == attr::kSchedule &&
        (!schedule || !llvm::is_contained({"gpipe", "1f1b", "interleaved", "zero_bubble"},
                                          schedule.getValue())))
      return op->emitOpError() << "'" << name
                               << "' must be gpipe, 1f1b, interleaved or zero_bubble";
    return success();
  }
  if (name == attr::kUpdateKernel) {
    // func.func, or the llvm.func it becomes.
    if (!isa<FunctionOpInterface>(op) || !isa<UnitAttr>(attr.getValue()))
      return op->emitOpError() << "'" << name << "' marks an update kernel (unit, on a function)";
    return success();
  }
  if (name == attr::kGpuAttention) {
    auto spec = dyn_cast<DictionaryAttr>(attr.getValue());
    auto position = [&](StringRef field) {
      auto value = spec ? spec.getAs<IntegerAttr>(field) : IntegerAttr();
      return value && value.getInt() >= 0;
    };
    // func.func, or the llvm.func the CPU kernel becomes.
    if (!isa<FunctionOpInterface>(op) || !spec || !position("query") || !position("key") ||
        !position("value") || !position("inputs") ||
        // A backward names the forward's result, its log-sum-exp and the
        // result's gradient.
        ((spec.contains("result_grad") || spec.contains("output") || spec.contains("lse")) &&
         !(position("output") && position("lse") && position("result_grad"))) ||
        (spec.contains("scale") && !spec.getAs<FloatAttr>("scale")) ||
        (spec.contains("causal") && !spec.getAs<UnitAttr>("causal")))
      return op->emitOpError()
             << "'" << name << "' must be {query, key, value, inputs (, output, lse, result_grad): positions; "
             << "causal: unit; scale: float}, on a function";
    return success();
  }
  if (name == attr::kAfterAccumulates) {
    if (!isa<UnitAttr>(attr.getValue()))
      return op->emitOpError() << "'" << name << "' must be a unit attribute";
    return success();
  }
  if (name == attr::kUpdateBucket) {
    auto bucket = dyn_cast<IntegerAttr>(attr.getValue());
    if (!bucket || bucket.getInt() < 0)
      return op->emitOpError() << "'" << name << "' must be an update bucket number";
    return success();
  }
  if (name == attr::kGradientBucket) {
    auto bucket = dyn_cast<IntegerAttr>(attr.getValue());
    if (!isa<shard::AllReduceOp>(op) || !bucket || bucket.getInt() < 0)
      return op->emitOpError()
             << "'" << name << "' must be a gradient bucket number, on a "
             << "shard.all_reduce";
    return success();
  }
  if (name == attr::kGradientOf) {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitOpError() << "'" << name << "' must name a param";
    return success();
  }
  if (name == attr::kPartitionOf) {
    if (!isa<func::FuncOp>(op) || !isa<StringAttr>(attr.getValue()))
      return op->emitOpError()
             << "'" << name << "' must name a model, on a func.func";
    return success();
  }
  if (name == attr::kGrid) {
    auto ref = dyn_cast<FlatSymbolRefAttr>(attr.getValue());
    if (!isa<func::FuncOp>(op) || !ref ||
        !SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(op, ref))
      return op->emitOpError()
             << "'" << name << "' must name a shard.grid, on a func.func";
    return success();
  }
  if (name == attr::kPipelineAxis) {
    if (!isa<StringAttr>(attr.getValue()))
      return op->emitOpError() << "'" << name << "' must be an axis name";
    return success();
  }
  if (name == attr::kMoeBlock || name == attr::kMoeAxis) {
    if (!isa<MoeRouteOp>(op) || !isa<StringAttr>(attr.getValue()))
      return op->emitOpError()
             << "'" << name << "' must be a string, on a loom.moe_route";
    return success();
  }
  if (name == attr::kMoeExchangeAxes) {
    auto axes = dyn_cast<ArrayAttr>(attr.getValue());
    if (!isa<MoeRouteOp>(op) || !axes || axes.empty() ||
        !llvm::all_of(axes, [](Attribute a) { return isa<StringAttr>(a); }))
      return op->emitOpError()
             << "'" << name << "' must be a list of axis names, on a loom.moe_route";
    return success();
  }
  return op->emitOpError() << "unknown loom attribute '" << name << "'";
}
