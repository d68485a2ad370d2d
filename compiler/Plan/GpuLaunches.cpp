//===- GpuLaunches.cpp - The GPU launches each kernel makes, for the plan -===//

#include "Plan/GpuLaunches.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/NVGPU/IR/NVGPUDialect.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;

/// The buffer argument a view of it stands for, and nothing else: the views
/// that keep the buffer's base pointer (their types carry the offset).
static BlockArgument viewedBuffer(Value value) {
  while (Operation *view = value.getDefiningOp()) {
    if (!isa<memref::ExpandShapeOp, memref::CollapseShapeOp, memref::SubViewOp,
             memref::CastOp, memref::ReinterpretCastOp>(view))
      return nullptr;
    value = view->getOperand(0);
  }
  return dyn_cast<BlockArgument>(value);
}

/// The `tmap:` text of a TMA tensor map made by `create` (docs/plan-format.md):
/// the buffer, the byte offset, the element type, the dims and byte strides
/// and the box innermost first, and the swizzle in bytes.
static FailureOr<std::string> tensorMapText(nvgpu::TmaCreateDescriptorOp create) {
  auto cast = create.getTensor().getDefiningOp<memref::CastOp>();
  auto type = cast ? dyn_cast<MemRefType>(cast.getSource().getType()) : nullptr;
  BlockArgument buffer = cast ? viewedBuffer(cast.getSource()) : nullptr;
  nvgpu::TensorMapDescriptorType map = create.getTensorMap().getType();
  if (!type || !buffer || !type.hasStaticShape())
    return failure();
  SmallVector<int64_t> strides;
  int64_t offset;
  if (failed(type.getStridesAndOffset(strides, offset)) ||
      ShapedType::isDynamic(offset) || llvm::any_of(strides, ShapedType::isDynamic) ||
      strides.back() != 1 || map.getInterleave() != nvgpu::TensorMapInterleaveKind::INTERLEAVE_NONE ||
      map.getOob() != nvgpu::TensorMapOOBKind::OOB_ZERO)
    return failure();
  Type element = type.getElementType();
  StringRef name = element.isBF16() ? "bf16" : element.isF16() ? "f16" : element.isF32() ? "f32" : "";
  if (name.empty())
    return failure();
  int64_t bytes = element.getIntOrFloatBitWidth() / 8;
  int64_t swizzle = 0;
  switch (map.getSwizzle()) {
  case nvgpu::TensorMapSwizzleKind::SWIZZLE_NONE: swizzle = 0; break;
  case nvgpu::TensorMapSwizzleKind::SWIZZLE_32B: swizzle = 32; break;
  case nvgpu::TensorMapSwizzleKind::SWIZZLE_64B: swizzle = 64; break;
  case nvgpu::TensorMapSwizzleKind::SWIZZLE_128B: swizzle = 128; break;
  }
  auto innermostFirst = [](ArrayRef<int64_t> values) {
    std::string text;
    for (int64_t v : llvm::reverse(values))
      text += (text.empty() ? "" : "x") + std::to_string(v);
    return text.empty() ? std::string("-") : text;
  };
  SmallVector<int64_t> byteStrides;
  for (int64_t stride : ArrayRef<int64_t>(strides).drop_back())
    byteStrides.push_back(stride * bytes);
  return "tmap:" + std::to_string(buffer.getArgNumber()) + ":" +
         std::to_string(offset * bytes) + ":" + name.str() + ":" +
         innermostFirst(type.getShape()) + ":" + innermostFirst(byteStrides) +
         ":" + innermostFirst(map.getTensor().getShape()) + ":" +
         std::to_string(swizzle);
}

/// The plan text of one launch argument.
static FailureOr<std::string> argumentText(Value value) {
  if (auto create = value.getDefiningOp<nvgpu::TmaCreateDescriptorOp>())
    return tensorMapText(create);
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
