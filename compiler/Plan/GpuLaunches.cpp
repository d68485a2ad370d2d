//===- GpuLaunches.cpp - The GPU launches each kernel makes, for the plan -===//

#include "Plan/GpuLaunches.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

/// The plan text of one launch argument.
static FailureOr<std::string> argumentText(Value value) {
  // Reshapes of a buffer keep its base pointer (the kernels take bare
  // pointers), so they pass the buffer itself.
  while (auto view = value.getDefiningOp()) {
    if (!isa<memref::ExpandShapeOp, memref::CollapseShapeOp>(view))
      break;
    value = view->getOperand(0);
  }
  if (auto arg = dyn_cast<BlockArgument>(value))
    return "b:" + std::to_string(arg.getArgNumber());
  Attribute constant;
  if (auto op = value.getDefiningOp<arith::ConstantOp>())
    constant = op.getValue();
  if (auto integer = dyn_cast_or_null<IntegerAttr>(constant)) {
    unsigned width = integer.getType().isIndex() ? 64 : integer.getType().getIntOrFloatBitWidth();
    if (width == 64 || width == 32)
      return "i" + std::to_string(width) + ":" + std::to_string(integer.getInt());
  }
  if (auto number = dyn_cast_or_null<FloatAttr>(constant); number && number.getType().isF32()) {
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "f32:" << llvm::format("%.9g", number.getValueAsDouble());
    return text;
  }
  return failure();
}

static FailureOr<std::array<int64_t, 3>> constants(Operation *op,
                                                   gpu::KernelDim3 dims,
                                                   StringRef what) {
  std::array<int64_t, 3> values;
  Value parts[3] = {dims.x, dims.y, dims.z};
  for (int i = 0; i < 3; ++i) {
    std::optional<int64_t> v = getConstantIntValue(parts[i]);
    if (!v)
      return op->emitError("the ") << what << " size of a GPU launch must be a constant";
    values[i] = *v;
  }
  return values;
}

FailureOr<llvm::StringMap<std::vector<loom::GpuLaunch>>>
(::loom::collectGpuLaunches)(ModuleOp module) {
  llvm::StringMap<std::vector<GpuLaunch>> launches;
  for (auto func : module.getOps<func::FuncOp>()) {
    std::vector<GpuLaunch> &list = launches[func.getSymName()];
    WalkResult walk = func.walk([&](gpu::LaunchFuncOp launch) -> WalkResult {
      GpuLaunch record;
      record.function = launch.getKernelModuleName().str();
      FailureOr<std::array<int64_t, 3>> grid =
          constants(launch, launch.getGridSizeOperandValues(), "grid");
      FailureOr<std::array<int64_t, 3>> block =
          constants(launch, launch.getBlockSizeOperandValues(), "block");
      if (failed(grid) || failed(block))
        return WalkResult::interrupt();
      record.grid = *grid;
      record.block = *block;
      // Dynamic shared memory, sized at launch: the runtime passes it to
      // cuLaunchKernel (and opts the function in above 48 KiB).
      if (Value shared = launch.getDynamicSharedMemorySize()) {
        std::optional<int64_t> bytes = getConstantIntValue(shared);
        if (!bytes) {
          launch.emitError("the dynamic shared memory size of a GPU launch "
                           "must be a constant");
          return WalkResult::interrupt();
        }
        if (*bytes < 0 || *bytes > 2147483647) {
          launch.emitError("the dynamic shared memory size of a GPU launch "
                           "must be between 0 and 2147483647 bytes, not ")
              << *bytes;
          return WalkResult::interrupt();
        }
        record.sharedBytes = *bytes;
      }
      for (Value operand : launch.getKernelOperands()) {
        FailureOr<std::string> text = argumentText(operand);
        if (failed(text)) {
          launch.emitError("unsupported GPU launch argument of type ")
              << operand.getType();
          return WalkResult::interrupt();
        }
        record.args.push_back(*text);
      }
      list.push_back(std::move(record));
      return WalkResult::advance();
    });
    if (walk.wasInterrupted())
      return failure();
  }

  // One device module: each function takes its old module's (unique) name.
  OpBuilder builder(module.getBodyRegion());
  builder.setInsertionPointToEnd(module.getBody());
  SmallVector<gpu::GPUModuleOp> modules(module.getOps<gpu::GPUModuleOp>());
  auto merged = gpu::GPUModuleOp::create(builder, module.getLoc(), "loom_kernels");
  for (gpu::GPUModuleOp old : modules) {
    for (Operation &op : llvm::make_early_inc_range(old.getBody()->getOperations())) {
      if (auto kernel = dyn_cast<gpu::GPUFuncOp>(op))
        kernel.setName(old.getName());
      op.moveBefore(merged.getBody(), merged.getBody()->end());
    }
    old.erase();
  }
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(),
                  builder.getUnitAttr());
  return launches;
}
