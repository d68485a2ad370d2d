//===- InPlaceUpdates.cpp - Optimizer updates written over their params ---===//
//
// A training step returns each param's new value (and its optimizer
// state's), which the runtime copied into the param after the step. Where
// the kernel making the new value can write it over the param, it does:
// the kernel is bufferized to write the param's own buffer (one pointer,
// so LLVM vectorizes it without the overlap checks that a second pointer
// to the same bytes would fail) and the plan gives the new value the
// param's bytes, so nothing is copied.
//
//===----------------------------------------------------------------------===//

#include "Codegen/Common/Passes.h"

#include "Loom/IR/LoomOps.h"

#include "mlir/Dialect/Linalg/IR/Linalg.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"

#include "llvm/ADT/StringSet.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMINPLACEUPDATES
#include "Codegen/Common/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;

/// Whether `result` of `kernel` may be written into the bytes of `arg`
/// without changing what the kernel computes: it is made by an
/// all-parallel generic into a tensor.empty, identity-indexed, which
/// reads `arg` identity-indexed, and every other op reading `arg` is a
/// linalg op before it that reads it as an input (so makes values of its
/// own: a view of `arg`, a reshape or a slice, would share its bytes and
/// could be read after). Each element of `arg` is then read before its own
/// element of the result is written, and never after.
static bool mayOverwrite(func::FuncOp kernel, Value result, BlockArgument arg) {
  if (arg.getType() != result.getType() || !isa<RankedTensorType>(arg.getType()))
    return false;
  auto generic = result.getDefiningOp<linalg::GenericOp>();
  if (!generic || generic.getNumReductionLoops() != 0 ||
      !llvm::is_contained(generic.getDpsInputs(), Value(arg)))
    return false;
  OpOperand *init = generic.getDpsInitOperand(cast<OpResult>(result).getResultNumber());
  if (!init->get().getDefiningOp<tensor::EmptyOp>() ||
      !generic.getMatchingIndexingMap(init).isIdentity())
    return false;
  Block &body = kernel.getBody().front();
  for (OpOperand &use : arg.getUses()) {
    auto reader = dyn_cast<linalg::LinalgOp>(use.getOwner());
    if (!reader || reader->getBlock() != &body || !reader.isDpsInput(&use))
      return false;
    if (reader == generic.getOperation()
            ? !generic.getMatchingIndexingMap(&use).isIdentity()
            : !reader->isBeforeInBlock(generic))
      return false;
  }
  return true;
}

namespace {
/// A kernel result written over the kernel's argument `arg`; -1: not.
using Wanted = llvm::DenseMap<std::pair<Operation *, unsigned>, int64_t>;

struct LoomInPlaceUpdates
    : public loom::impl::LoomInPlaceUpdatesBase<LoomInPlaceUpdates> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    // Loss scaling skips an overflowing step, which must keep the params.
    llvm::StringSet<> scaled;
    for (auto train : module.getOps<loom::TrainOp>())
      if (train.getLossScale() != "none")
        scaled.insert(train.getModel());
    Wanted wanted;
    auto want = [&](func::FuncOp kernel, unsigned result, int64_t arg) {
      auto [at, inserted] = wanted.try_emplace({kernel, result}, arg);
      if (!inserted && at->second != arg)
        at->second = -1;
    };
    SymbolTable symbols(module);
    for (auto model : module.getOps<func::FuncOp>()) {
      if (model.isExternal() || model->hasAttr(loom::attr::kKernel))
        continue;
      auto of = model->getAttrOfType<StringAttr>(loom::attr::kPartitionOf);
      bool skips = scaled.contains(of ? of.getValue() : model.getSymName());
      Block &body = model.getBody().front();
      // Looked up per update: a scan of the arguments per update had been
      // quadratic in the params (400 layers: 1.9 s).
      llvm::StringMap<BlockArgument> params;
      for (BlockArgument arg : model.getArguments())
        if (auto name = model.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                           loom::attr::kParam))
          params.try_emplace(name.getValue(), arg);
      // Every call says which argument it wants each result over (-1:
      // none); a result is written in place only where all its kernel's
      // calls want the same argument.
      for (auto call : body.getOps<func::CallOp>())
        if (auto kernel = symbols.lookup<func::FuncOp>(call.getCallee()))
          for (unsigned r = 0; r < call.getNumResults(); ++r)
            want(kernel, r, wantedArg(model, params, call, r, skips));
    }
    Builder b(module.getContext());
    for (auto [key, arg] : wanted) {
      auto kernel = cast<func::FuncOp>(key.first);
      if (arg < 0)
        continue;
      auto ret = cast<func::ReturnOp>(kernel.getBody().front().getTerminator());
      if (mayOverwrite(kernel, ret.getOperand(key.second), kernel.getArgument(arg)))
        kernel.setResultAttr(key.second, loom::attr::kInPlace, b.getI64IntegerAttr(arg));
    }
  }

  /// The operand of `call` holding the param whose new value is result
  /// `r`, where writing the result there leaves the step the same: the
  /// param is that one operand of the call and no later op reads it; else
  /// -1.
  static int64_t wantedArg(func::FuncOp model, const llvm::StringMap<BlockArgument> &params,
                           func::CallOp call, unsigned r, bool skips) {
    if (skips)
      return -1;
    auto ret = cast<func::ReturnOp>(model.getBody().front().getTerminator());
    std::optional<StringRef> param;
    for (OpOperand &use : call.getResult(r).getUses())
      if (use.getOwner() == ret.getOperation())
        if (auto name = model.getResultAttrOfType<StringAttr>(use.getOperandNumber(),
                                                              loom::attr::kUpdates))
          param = name.getValue();
    if (!param)
      return -1;
    auto arg = params.find(*param);
    if (arg == params.end())
      return -1;
    int64_t operand = -1;
    for (OpOperand &use : arg->second.getUses()) {
      Operation *user = model.getBody().front().findAncestorOpInBlock(*use.getOwner());
      if (user == call.getOperation()) {
        if (operand >= 0 || use.getOwner() != user)
          return -1; // read twice by the call
        operand = use.getOperandNumber();
      } else if (!user || !user->isBeforeInBlock(call)) {
        return -1; // read after the update
      }
    }
    return operand;
  }
};
} // namespace
