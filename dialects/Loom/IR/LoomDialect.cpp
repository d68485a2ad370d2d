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

/// The shard.grid that `op`'s function (or `op`, a function) runs on: the
/// one its `loom.grid` names, else its module's only grid (an unpartitioned
/// model's, whose misspelt axes had verified until loom-partition); null
/// where there is none to tell.
static shard::GridOp gridOf(Operation *op) {
  Operation *func = isa<FunctionOpInterface>(op) ? op : op->getParentOfType<FunctionOpInterface>();
  if (!func)
    return {};
  if (auto ref = func->getAttrOfType<FlatSymbolRefAttr>(attr::kGrid))
    return SymbolTable::lookupNearestSymbolFrom<shard::GridOp>(func, ref);
  auto module = func->getParentOfType<ModuleOp>();
  if (!module)
    return {};
  auto grids = module.getOps<shard::GridOp>();
  if (grids.empty() || std::next(grids.begin()) != grids.end())
    return {};
  return *grids.begin();
}

/// Checks that `axis` names an axis of the grid `op` runs on, where it runs
/// on one whose axes have names (a misspelt axis had been a pass's crash or
/// a silently unsplit tensor).
static LogicalResult verifyAxisName(Operation *op, StringRef attrName, StringRef axis) {
  shard::GridOp grid = gridOf(op);
  auto names = grid ? grid->getAttrOfType<ArrayAttr>(attr::kAxes) : ArrayAttr();
  if (!names || llvm::any_of(names, [&](Attribute name) {
        auto text = dyn_cast<StringAttr>(name);
        return text && text.getValue() == axis;
      }))
    return success();
  return op->emitOpError() << "'" << attrName << "' names axis '" << axis
                           << "', which grid '" << grid.getSymName() << "' does not have";
}

/// `loom.sharding`: one array of grid axes (i16) per dimension of `type`,
/// each axis of the function's grid and used once (an axis past the grid
/// had split nothing, silently).
static LogicalResult verifySharding(Operation *op, NamedAttribute attr, Type type) {
  auto dims = dyn_cast<ArrayAttr>(attr.getValue());
  if (!dims || !llvm::all_of(dims, [](Attribute dim) {
        return isa<DenseI16ArrayAttr>(dim);
      }))
    return op->emitOpError() << "'" << attr.getName().getValue()
                             << "' must be an array of i16 arrays (grid axes "
                                "per dimension)";
  // (Lowered functions keep the attribute on pointers: no rank to check.)
  auto shaped = dyn_cast_or_null<ShapedType>(type);
  if (shaped && shaped.hasRank() && static_cast<int64_t>(dims.size()) > shaped.getRank())
    return op->emitOpError() << "'" << attr.getName().getValue() << "' splits "
                             << dims.size() << " dimensions of a value of rank "
                             << shaped.getRank();
  shard::GridOp grid = gridOf(op);
  llvm::SmallDenseSet<int16_t> seen;
  for (Attribute dim : dims)
    for (int16_t axis : cast<DenseI16ArrayAttr>(dim).asArrayRef()) {
      if (axis < 0)
        return op->emitOpError() << "'" << attr.getName().getValue() << "' names grid axis "
                                 << axis << ", not an axis";
      if (grid && axis >= grid.getRank())
        return op->emitOpError() << "'" << attr.getName().getValue() << "' names grid axis "
                                 << axis << " of a grid of rank " << grid.getRank();
      if (!seen.insert(axis).second)
        return op->emitOpError() << "'" << attr.getName().getValue() << "' splits by grid axis "
                                 << axis << " twice";
    }
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
  if (name == attr::kSharding) {
    auto func = dyn_cast<FunctionOpInterface>(op);
    return verifySharding(op, attr, func ? func.getArgumentTypes()[argIndex] : Type());
  }
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
                                                       unsigned resultIndex,
                                                       NamedAttribute attr) {
  StringRef name = attr.getName().getValue();
  auto func = dyn_cast<FunctionOpInterface>(op);
  if (name == attr::kOutput || name == attr::kLoss || name == attr::kUpdates)
    return verifyName(op, attr);
  if (name == attr::kSharding)
    return verifySharding(op, attr, func ? func.getResultTypes()[resultIndex] : Type());
  if (name == attr::kAssemble) {
    auto kind = dyn_cast<StringAttr>(attr.getValue());
    if (!kind || !llvm::is_contained({"rows", "mean", "sum"}, kind.getValue()))
      return op->emitOpError() << "'" << name << "' must be \"rows\", \"mean\" or \"sum\"";
    return success();
  }
  if (name == attr::kInPlace) {
    auto index = dyn_cast<IntegerAttr>(attr.getValue());
    if (!func || !index || index.getInt() < 0 ||
        index.getInt() >= static_cast<int64_t>(func.getNumArguments()))
      return op->emitOpError() << "'" << name
                               << "' must be the index of one of its arguments";
    // The result is written over the argument's buffer.
    Type argType = func.getArgumentTypes()[index.getInt()];
    Type resultType = func.getResultTypes()[resultIndex];
    if (argType != resultType)
      return op->emitOpError() << "result " << resultIndex << " of type " << resultType
                               << " is in place of argument " << index.getInt() << " of type "
                               << argType;
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
    auto axis = dyn_cast<StringAttr>(attr.getValue());
    if (!axis)
      return op->emitOpError() << "'" << name << "' must be an axis name";
    return verifyAxisName(op, name, axis.getValue());
  }
  if (name == attr::kMoeBlock || name == attr::kMoeAxis) {
    auto text = dyn_cast<StringAttr>(attr.getValue());
    if (!isa<MoeRouteOp>(op) || !text)
      return op->emitOpError()
             << "'" << name << "' must be a string, on a loom.moe_route";
    return name == attr::kMoeAxis ? verifyAxisName(op, name, text.getValue()) : success();
  }
  if (name == attr::kMoeExchangeAxes) {
    auto axes = dyn_cast<ArrayAttr>(attr.getValue());
    if (!isa<MoeRouteOp>(op) || !axes || axes.empty() ||
        !llvm::all_of(axes, [](Attribute a) { return isa<StringAttr>(a); }))
      return op->emitOpError()
             << "'" << name << "' must be a list of axis names, on a loom.moe_route";
    llvm::StringSet<> seen;
    for (Attribute axis : axes) {
      StringRef axisName = cast<StringAttr>(axis).getValue();
      if (!seen.insert(axisName).second)
        return op->emitOpError() << "'" << name << "' names axis '" << axisName << "' twice";
      if (failed(verifyAxisName(op, name, axisName)))
        return failure();
    }
    return success();
  }
  return op->emitOpError() << "unknown loom attribute '" << name << "'";
}
