//===- TensorCoreFusion.cpp - The fill and epilogue a matmul kernel absorbs ===//
//
// A 16-bit matmul with f32 accumulation reaches the GPU stage as three ops
// on an f32 temporary C: a fill with zero, the contraction accumulating
// into C, and an elementwise op reading C (rounding to bf16, usually with
// a bias or an activation). Run separately they are three launches and
// three passes over C, an f32 matrix twice the size of the result; fused
// into the tensor-core kernel, C is never touched (TensorCoreKernel.h).
//
//===----------------------------------------------------------------------===//

#include "Loom/IR/LoomDialect.h"
#include "Codegen/Common/MatmulLike.h"
#include "Codegen/GPU/GpuLoops.h"
#include "Codegen/GPU/TensorCoreKernel.h"
#include "Codegen/GPU/WarpgroupMma.h"

#include "mlir/Dialect/Affine/Utils.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

using namespace mlir;
using namespace mlir::loom;

/// Whether `c` is a kernel temporary (see HoistKernelAllocs): a kernel
/// argument marked as scratch, whose value no later step reads.
static bool isScratch(Value c) {
  auto arg = dyn_cast<BlockArgument>(c);
  if (!arg)
    return false;
  auto func = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
  return func && arg.getOwner() == &func.getBody().front() &&
         func.getArgAttr(arg.getArgNumber(), attr::kScratch);
}

/// Whether `next` computes elementwise from C over C's own iteration space:
/// all loops parallel, one per dim of C, C read with the identity map and
/// not written, and no use of the loop indices. It must not write the
/// matmul's operands either: other blocks may still be reading them.
static bool isElementwiseEpilogue(linalg::GenericOp next, linalg::GenericOp op) {
  Value c = op.getDpsInits()[0];
  auto type = cast<MemRefType>(c.getType());
  if (next.getNumLoops() != static_cast<unsigned>(type.getRank()) ||
      next.getNumParallelLoops() != next.getNumLoops() || next.hasIndexSemantics())
    return false;
  bool readsC = false;
  for (OpOperand *input : next.getDpsInputOperands()) {
    if (input->get() != c)
      continue;
    if (!next.getMatchingIndexingMap(input).isIdentity())
      return false;
    readsC = true;
  }
  if (!readsC)
    return false;
  for (OpOperand &init : next.getDpsInitsMutable())
    if (init.get() == c || writesMatmulOperand(op, init.get()) ||
        !isa<MemRefType>(init.get().getType()))
      return false;
  return true;
}

TensorCoreFusion loom::findTensorCoreFusion(linalg::GenericOp op) {
  TensorCoreFusion fusion;
  Value c = op.getDpsInits()[0];
  // The fill just before the matmul: C is then all that constant.
  if (auto fill = dyn_cast_or_null<linalg::FillOp>(op->getPrevNode())) {
    FloatAttr value;
    if (fill.getOutputs()[0] == c &&
        matchPattern(fill.getInputs()[0], m_Constant(&value))) {
      fusion.fill = fill;
      fusion.fillValue = value;
    }
  }
  // The elementwise op just after it, if C dies there.
  auto next = dyn_cast_or_null<linalg::GenericOp>(op->getNextNode());
  if (next && isScratch(c) && isElementwiseEpilogue(next, op) &&
      llvm::all_of(c.getUsers(), [&](Operation *user) {
        return user == op || user == next || user == fusion.fill;
      }))
    fusion.epilogue = next;
  return fusion;
}

SmallVector<Value> loom::evaluateEpilogue(OpBuilder &b, Location loc,
                                          linalg::GenericOp epilogue, Value c,
                                          ValueRange cIndices, Value acc) {
  Block &body = epilogue.getRegion().front();
  IRMapping mapping;
  for (OpOperand &operand : epilogue->getOpOperands()) {
    BlockArgument arg = body.getArgument(operand.getOperandNumber());
    if (operand.get() == c)
      mapping.map(arg, acc);
    else if (!arg.use_empty())
      mapping.map(arg, memref::LoadOp::create(
                           b, loc, operand.get(),
                           epilogueIndices(b, loc, epilogue, operand, cIndices)));
  }
  for (Operation &op : body.without_terminator())
    b.clone(op, mapping);
  SmallVector<Value> results;
  for (Value yielded : body.getTerminator()->getOperands())
    results.push_back(mapping.lookupOrDefault(yielded));
  return results;
}

Value loom::keepPairPacked(OpBuilder &b, Location loc, Value pair) {
  auto type = cast<VectorType>(pair.getType());
  Type i32 = b.getI32Type();
  Value bits = vector::ExtractOp::create(
      b, loc, vector::BitCastOp::create(b, loc, VectorType::get({1}, i32), pair), 0);
  Value kept = inlinePtx(b, loc, i32, bits, "mov.b32 $0, $1;", "=r,r").getResult(0);
  return vector::BitCastOp::create(
      b, loc, type,
      vector::FromElementsOp::create(b, loc, VectorType::get({1}, i32), ValueRange{kept}));
}

SmallVector<Value> loom::evaluateEpiloguePair(OpBuilder &b, Location loc,
                                              linalg::GenericOp epilogue,
                                              Value c, ValueRange first,
                                              ValueRange second,
                                              Value acc0, Value acc1) {
  auto pairOf = [&](Value x, Value y) -> Value {
    return vector::FromElementsOp::create(
        b, loc, VectorType::get({2}, x.getType()), ValueRange{x, y});
  };
  Block &body = epilogue.getRegion().front();
  // An integer result (a cast to i32) stays one element at a time: its
  // conversions take one float each anyway, and in pairs the ping-pong
  // kernel spilled.
  bool mappable =
      llvm::all_of(body.without_terminator(),
                   [](Operation &op) {
                     return isa<arith::ConstantOp>(op) ||
                            (OpTrait::hasElementwiseMappableTraits(&op) &&
                             op.getNumRegions() == 0);
                   }) &&
      llvm::all_of(body.getTerminator()->getOperandTypes(),
                   [](Type type) { return isa<FloatType>(type); });
  if (!mappable) {
    SmallVector<Value> x = evaluateEpilogue(b, loc, epilogue, c, first, acc0);
    SmallVector<Value> y = evaluateEpilogue(b, loc, epilogue, c, second, acc1);
    SmallVector<Value> pairs;
    for (auto [xi, yi] : llvm::zip_equal(x, y))
      pairs.push_back(pairOf(xi, yi));
    return pairs;
  }
  // A scalar (a constant, a value from outside the body) used beside pairs
  // is broadcast to one.
  auto asPair = [&](Value v) -> Value {
    if (isa<VectorType>(v.getType()))
      return v;
    return vector::BroadcastOp::create(b, loc, VectorType::get({2}, v.getType()),
                                       v);
  };
  IRMapping mapping;
  for (OpOperand &operand : epilogue->getOpOperands()) {
    BlockArgument arg = body.getArgument(operand.getOperandNumber());
    if (operand.get() == c) {
      mapping.map(arg, pairOf(acc0, acc1));
    } else if (!arg.use_empty()) {
      auto load = [&](ValueRange at) -> Value {
        return memref::LoadOp::create(
            b, loc, operand.get(),
            epilogueIndices(b, loc, epilogue, operand, at));
      };
      mapping.map(arg, pairOf(load(first), load(second)));
    }
  }
  for (Operation &op : body.without_terminator()) {
    if (isa<arith::ConstantOp>(op)) {
      b.clone(op, mapping);
      continue;
    }
    OperationState state(op.getLoc(), op.getName());
    for (Value operand : op.getOperands())
      state.addOperands(asPair(mapping.lookupOrDefault(operand)));
    state.addAttributes(op.getAttrs());
    for (Type type : op.getResultTypes())
      state.addTypes(VectorType::get({2}, type));
    Operation *paired = b.create(state);
    // A pair rounded to 16 bits stays one register: widened again half by
    // half (relu of an f16 product), LLVM rounded each accumulator alone.
    if (isa<arith::TruncFOp>(op) &&
        op.getResult(0).getType().getIntOrFloatBitWidth() == 16) {
      mapping.map(op.getResult(0), keepPairPacked(b, op.getLoc(), paired->getResult(0)));
      continue;
    }
    mapping.map(op.getResults(), paired->getResults());
  }
  SmallVector<Value> results;
  for (Value yielded : body.getTerminator()->getOperands())
    results.push_back(asPair(mapping.lookupOrDefault(yielded)));
  return results;
}

SmallVector<Value> loom::epilogueIndices(OpBuilder &b, Location loc,
                                         linalg::GenericOp epilogue,
                                         OpOperand &operand, ValueRange cIndices) {
  return *affine::expandAffineMap(b, loc, epilogue.getMatchingIndexingMap(&operand),
                                  cIndices);
}

bool loom::holdsPairsAlongLastDim(Value buffer, AffineMap map, unsigned dim) {
  if (!isAlignedRun(buffer, 2))
    return false;
  auto last = dyn_cast<AffineDimExpr>(map.getResults().back());
  return last && last.getPosition() == dim;
}
