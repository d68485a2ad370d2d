//===- GpuLanes.cpp - Loop bodies run several iterations per GPU thread ---===//

#include "Codegen/GPU/GpuLoops.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Interfaces/ViewLikeInterface.h"
#include "mlir/Transforms/RegionUtils.h"
#include "llvm/ADT/SetVector.h"

using namespace mlir;
using namespace mlir::loom;

/// Bytes of one 16-byte vector access: the widest load or store a GPU thread
/// issues (ld.global.v4.b32).
static constexpr int64_t kVectorBytes = 16;

/// Whether `memref` starts on a plan buffer: a kernel function's argument,
/// possibly through views. The plan puts every buffer on a 64-byte boundary
/// (PlanBuilder's kAlignment, checked by the runtime when it loads a plan).
static bool startsOnPlanBuffer(Value memref) {
  auto arg = dyn_cast<BlockArgument>(viewRoot(memref));
  return arg && isa_and_nonnull<func::FuncOp>(arg.getOwner()->getParentOp()) &&
         arg.getOwner()->isEntryBlock();
}

/// The bytes of one element a vector access may load, or nothing.
static std::optional<int64_t> elementBytes(MemRefType type) {
  Type element = type.getElementType();
  if (!element.isIntOrFloat())
    return std::nullopt;
  unsigned bits = element.getIntOrFloatBitWidth();
  if (bits < 8 || bits > 64 || !llvm::isPowerOf2_32(bits))
    return std::nullopt;
  return bits / 8;
}

Value loom::viewRoot(Value memref) {
  while (auto view = memref.getDefiningOp<ViewLikeOpInterface>())
    memref = view.getViewSource();
  return memref;
}

LogicalResult loom::requireBufferized(func::FuncOp kernel, StringRef pass) {
  auto isTensor = [](Type type) { return isa<TensorType>(type); };
  if (llvm::any_of(kernel.getArgumentTypes(), isTensor))
    return kernel.emitError() << pass << " runs on bufferized kernels, but this kernel takes "
                              << "a tensor (bufferize first)";
  WalkResult tensors = kernel.walk([&](Operation *op) {
    if (!llvm::any_of(op->getResultTypes(), isTensor))
      return WalkResult::advance();
    op->emitError() << pass << " runs on bufferized kernels, but this op makes a tensor "
                    << "(bufferize first)";
    return WalkResult::interrupt();
  });
  return failure(tensors.wasInterrupted());
}

bool loom::isAlignedRun(Value memref, int64_t width) {
  auto type = dyn_cast<MemRefType>(memref.getType());
  if (!type || !startsOnPlanBuffer(memref))
    return false;
  SmallVector<int64_t> strides;
  int64_t offset;
  if (type.getRank() == 0 || failed(type.getStridesAndOffset(strides, offset)))
    return false;
  if (ShapedType::isDynamic(offset) || offset % width != 0 ||
      strides.back() != 1)
    return false;
  return llvm::all_of(ArrayRef(strides).drop_back(), [&](int64_t stride) {
    return !ShapedType::isDynamic(stride) && stride % width == 0;
  });
}

LaneVectorizer::LaneVectorizer(ArrayRef<Operation *> ops, Value iv)
    : ops_(ops), iv_(iv) {
  llvm::DenseSet<Value> varying{iv};
  auto isVarying = [&](Value v) { return varying.contains(v); };
  SmallVector<std::pair<Value, MemRefType>> contiguous;
  // Classifies an access: its innermost index is `iv` (and no other index
  // moves with it), or no index moves with it.
  auto classify = [&](Operation *op, Value memref,
                      ValueRange indices) -> std::optional<Access> {
    if (isVarying(memref))
      return std::nullopt;
    if (!llvm::any_of(indices, isVarying))
      return Access::Uniform;
    if (indices.back() != iv || llvm::any_of(indices.drop_back(), isVarying))
      return std::nullopt;
    contiguous.push_back({memref, cast<MemRefType>(memref.getType())});
    return Access::Contiguous;
  };
  for (Operation *op : ops_) {
    if (auto load = dyn_cast<memref::LoadOp>(op)) {
      std::optional<Access> access =
          classify(op, load.getMemRef(), load.getIndices());
      if (!access)
        return;
      accesses_[op] = *access;
      if (*access == Access::Contiguous)
        varying.insert(load.getResult());
      continue;
    }
    if (auto store = dyn_cast<memref::StoreOp>(op)) {
      // A store that does not move with iv would have every lane write one
      // element: not a parallel loop's, and left alone.
      std::optional<Access> access =
          classify(op, store.getMemRef(), store.getIndices());
      if (access != Access::Contiguous)
        return;
      accesses_[op] = *access;
      continue;
    }
    if (!isMemoryEffectFree(op))
      return;
    llvm::SetVector<Value> used(op->operand_begin(), op->operand_end());
    getUsedValuesDefinedAbove(op->getRegions(), used);
    if (llvm::any_of(used, isVarying))
      varying.insert(op->result_begin(), op->result_end());
  }
  if (contiguous.empty())
    return;
  int64_t narrowest = kVectorBytes;
  for (auto [memref, type] : contiguous) {
    std::optional<int64_t> bytes = elementBytes(type);
    if (!bytes)
      return;
    narrowest = std::min(narrowest, *bytes);
  }
  int64_t width = kVectorBytes / narrowest;
  for (auto [memref, type] : contiguous)
    if (!isAlignedRun(memref, width))
      return;
  width_ = width;
}

Value LaneVectorizer::load(OpBuilder &b, Location loc, VectorType type,
                           Value memref, ValueRange indices) {
  return vector::LoadOp::create(b, loc, type, memref, indices,
                                /*nontemporal=*/false,
                                llvm::MaybeAlign(kVectorBytes));
}

void LaneVectorizer::emit(
    OpBuilder &b, Location loc, Value base, const IRMapping &outer,
    SmallVectorImpl<IRMapping> &lanes,
    const std::function<void(Operation *, int64_t, IRMapping &)> &beforeClone,
    const VectorLoader &loader) const {
  lanes.assign(width_, outer);
  for (int64_t lane = 0; lane < width_; ++lane)
    lanes[lane].map(iv_, lane == 0 ? base
                                   : arith::AddIOp::create(
                                         b, loc, base,
                                         constantIndex(b, loc, lane))
                                         .getResult());
  // Indices that do not move with iv are the same in every lane: lane 0's.
  auto indicesOf = [&](ValueRange indices) {
    SmallVector<Value> mapped;
    for (Value index : indices.drop_back())
      mapped.push_back(lanes[0].lookupOrDefault(index));
    mapped.push_back(base);
    return mapped;
  };
  for (Operation *op : ops_) {
    auto access = accesses_.find(op);
    if (access != accesses_.end() && access->second == Access::Uniform) {
      Operation *clone = b.clone(*op, lanes[0]);
      for (int64_t lane = 1; lane < width_; ++lane)
        lanes[lane].map(op->getResults(), clone->getResults());
      continue;
    }
    if (access == accesses_.end()) {
      for (int64_t lane = 0; lane < width_; ++lane) {
        if (beforeClone)
          beforeClone(op, lane, lanes[lane]);
        b.clone(*op, lanes[lane]);
      }
      continue;
    }
    if (auto load = dyn_cast<memref::LoadOp>(op)) {
      auto type = VectorType::get({width_}, load.getType());
      Value memref = lanes[0].lookupOrDefault(load.getMemRef());
      SmallVector<Value> indices = indicesOf(load.getIndices());
      Value vector = loader ? loader(b, loc, type, memref, indices)
                            : LaneVectorizer::load(b, loc, type, memref, indices);
      for (int64_t lane = 0; lane < width_; ++lane)
        lanes[lane].map(load.getResult(),
                        vector::ExtractOp::create(b, loc, vector, lane));
      continue;
    }
    auto store = cast<memref::StoreOp>(op);
    SmallVector<Value> elements;
    for (int64_t lane = 0; lane < width_; ++lane)
      elements.push_back(lanes[lane].lookupOrDefault(store.getValue()));
    auto type = VectorType::get({width_}, store.getValue().getType());
    Value vector = vector::FromElementsOp::create(b, loc, type, elements);
    vector::StoreOp::create(b, loc, vector,
                            lanes[0].lookupOrDefault(store.getMemRef()),
                            indicesOf(store.getIndices()),
                            /*nontemporal=*/false,
                            llvm::MaybeAlign(kVectorBytes));
  }
}
