//===- FuseAttention.cpp - Five attention ops become one loom.attention ---===//

#include "Loom/IR/LoomOps.h"
#include "Loom/Transforms/Passes.h"

#include <algorithm>

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMFUSEATTENTION
#include "Loom/Transforms/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

/// The op of type OpT defining `value` when `value` has no other use (the
/// fused op replaces it, so nothing else may read it).
template <typename OpT>
static OpT soleUseOf(Value value) {
  if (!value.hasOneUse())
    return nullptr;
  return value.getDefiningOp<OpT>();
}

static Type elementOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getElementType();
}

/// Whether `value` is computed from a block argument (a param or an
/// input) rather than from constants alone.
static bool dependsOnArguments(Value value) {
  SmallVector<Value> work{value};
  llvm::SmallPtrSet<Operation *, 8> seen;
  while (!work.empty()) {
    Value v = work.pop_back_val();
    Operation *op = v.getDefiningOp();
    if (!op)
      return true;
    if (seen.insert(op).second)
      llvm::append_range(work, op->getOperands());
  }
  return false;
}

/// Whether the batch dims of `operand` ([..., rows, features]) broadcast to
/// `batch` (NumPy's rules: aligned at the end, a dim of 1 repeats, missing
/// dims lead).
static bool broadcastsToBatch(RankedTensorType operand, ArrayRef<int64_t> batch) {
  ArrayRef<int64_t> own = operand.getShape().drop_back(2);
  if (own.size() > batch.size())
    return false;
  ArrayRef<int64_t> aligned = batch.take_back(own.size());
  return llvm::all_of(llvm::zip(own, aligned), [](auto dims) {
    return std::get<0>(dims) == 1 || std::get<0>(dims) == std::get<1>(dims);
  });
}

/// `operand` with `batch` as its batch dims: itself, or a loom.broadcast.
/// The fused op's lowerings (CPU and GPU) take operands of one batch shape;
/// a broadcast key and value cost one copy each, [..., keys, features],
/// against the [..., queries, keys] scores the five ops keep.
static Value toBatch(OpBuilder &b, Value operand, ArrayRef<int64_t> batch) {
  auto type = cast<RankedTensorType>(operand.getType());
  SmallVector<int64_t> shape(batch);
  llvm::append_range(shape, type.getShape().take_back(2));
  if (type.getShape() == ArrayRef<int64_t>(shape))
    return operand;
  return BroadcastOp::create(b, operand.getLoc(), type.clone(shape), operand);
}

/// The attention `output` (softmax(...) @ v) computes, or failure; `chain`
/// gets the ops it replaces, users first.
static FailureOr<AttentionOp> matchAttention(MatmulOp output, bool gpuKernel,
                                             OpBuilder &b,
                                             SmallVectorImpl<Operation *> &chain) {
  if (output.getMultiply())
    return failure();
  if (auto cast = soleUseOf<CastOp>(output.getLhs()))
    if (auto probabilities = cast.getInput().getDefiningOp<SoftmaxOp>()) {
      // Said, as the user can mend it: in a 16-bit model, f32 queries or
      // keys (made so by f32 rotary tables, say) give f32 probabilities
      // that are cast to the values' type, and the [queries, keys] scores
      // then take memory and five kernels.
      output.emitWarning() << "attention is not fused into one kernel: its scores are "
                           << elementOf(probabilities) << " and its values "
                           << elementOf(output.getRhs())
                           << " (give the queries and keys the values' type)";
      return failure();
    }
  auto softmax = soleUseOf<SoftmaxOp>(output.getLhs());
  if (!softmax || static_cast<int64_t>(softmax.getAxis()) != softmax.getType().getRank() - 1)
    return failure();
  chain.assign({output, softmax});
  Value scores = softmax.getInput();
  bool causal = false;
  if (auto mask = soleUseOf<CausalMaskOp>(scores)) {
    causal = true;
    scores = mask.getInput();
    chain.push_back(mask);
  }
  Value scale;
  if (auto mul = soleUseOf<MulOp>(scores)) {
    // Either operand order; the scalar is the scale.
    auto isScalar = [](Value v) {
      return cast<RankedTensorType>(v.getType()).getRank() == 0;
    };
    Value lhs = mul.getLhs(), rhs = mul.getRhs();
    if (isScalar(rhs) && !isScalar(lhs)) {
      scale = rhs;
      scores = lhs;
    } else if (isScalar(lhs) && !isScalar(rhs)) {
      scale = lhs;
      scores = rhs;
    } else {
      return failure();
    }
    // loom.attention_grad gives its scale no gradient: a scale made from
    // a param or an input (a learned temperature) stays unfused, or its
    // gradient would be 0 (it was, silently).
    if (dependsOnArguments(scale))
      return failure();
    chain.push_back(mul);
  }
  auto product = soleUseOf<MatmulOp>(scores);
  if (!product || product.getMultiply() ||
      product.getAccumulate() != output.getAccumulate())
    return failure();
  auto keyT = soleUseOf<TransposeOp>(product.getRhs());
  if (!keyT || !swapsLastTwoDims(keyT.getPermutation()))
    return failure();
  chain.append({product, keyT});
  Value query = product.getLhs(), key = keyT.getInput(), value = output.getRhs();
  // One element type throughout (no cast hidden in a mixed op).
  Type element = elementOf(query);
  for (Value v : SmallVector<Value>{key, value, product.getResult(), scores,
                                   softmax.getResult(), output.getResult()})
    if (elementOf(v) != element)
      return failure();
  if (scale && elementOf(scale) != element)
    return failure();
  auto q = cast<RankedTensorType>(query.getType());
  auto k = cast<RankedTensorType>(key.getType());
  auto v = cast<RankedTensorType>(value.getType());
  if (q.getRank() < 2 || k.getRank() < 2 || v.getRank() < 2)
    return failure();
  // The result has the queries' batch dims; keys and values may broadcast
  // to them (grouped-query attention: [B, KV, 1, T, E] against the
  // queries' [B, KV, G, T, E]), and are then broadcast before the fused op.
  int64_t batch = q.getRank() - 2;
  ArrayRef<int64_t> queryBatch = q.getShape().take_front(batch);
  if (output.getType().getShape().take_front(batch) != queryBatch ||
      !broadcastsToBatch(k, queryBatch) || !broadcastsToBatch(v, queryBatch))
    return failure();
  // Sequences whose only common blocks are small (a prime length, 1000
  // queries against 1024 keys) would run as thousands of tiny blocks:
  // the five ops are faster there. On the CPU a block's products are
  // register-tiled only in multiples of 32 (loom-tile-contractions-for-cpu);
  // others (50 of T = 1000, 63 of 1008) ran 2.5-6.5x slower than the five
  // ops, whose matmuls are padded to whole tiles.
  int64_t queries = q.getShape()[batch], keys = k.getShape()[k.getRank() - 2];
  int64_t block = attentionBlockSize(queries, keys);
  if (std::max(queries, keys) > 64 && (block < 16 || (!gpuKernel && block % 32 != 0)))
    return failure();
  if (gpuKernel && !gpuRunsAttention(q, k, v, output.getAccumulate()))
    return failure();
  b.setInsertionPoint(output);
  Value batchKeys = toBatch(b, key, queryBatch), batchValues = toBatch(b, value, queryBatch);
  auto fused = AttentionOp::create(b, output.getLoc(), output.getType(), /*lse=*/Type(), query,
                                   batchKeys, batchValues, scale, causal ? b.getUnitAttr() : nullptr,
                                   output.getAccumulateAttr());
  // The ops it replaces belonged to a recomputed layer instance: so do
  // the new ones (the attention and its keys' and values' broadcasts had
  // been kept from the forward, with its q, k, v, output and lse, 2.5x
  // the activations --explain counts for a recomputed layer on the CPU).
  if (Attribute instance = output->getAttr(attr::kRecompute)) {
    fused->setAttr(attr::kRecompute, instance);
    for (auto [made, original] : {std::pair{batchKeys, key}, std::pair{batchValues, value}})
      if (made != original)
        made.getDefiningOp()->setAttr(attr::kRecompute, instance);
  }
  return fused;
}

namespace {
struct LoomFuseAttention
    : public loom::impl::LoomFuseAttentionBase<LoomFuseAttention> {
  using Base::Base;
  void runOnOperation() override {
    SmallVector<MatmulOp> outputs;
    getOperation().walk([&](MatmulOp matmul) { outputs.push_back(matmul); });
    OpBuilder b(&getContext());
    for (MatmulOp output : outputs) {
      SmallVector<Operation *> chain;
      FailureOr<AttentionOp> fused = matchAttention(output, gpuKernel, b, chain);
      if (failed(fused))
        continue;
      // Each op of the chain had its successor as its only user.
      output.replaceAllUsesWith(fused->getResult());
      for (Operation *op : chain)
        op->erase();
    }
  }
};
} // namespace
