//===- HoistKernelAllocs.cpp - Kernel temporaries become plan buffers -----===//

#include "Codegen/Common/Passes.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMHOISTKERNELALLOCS
#include "Codegen/Common/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;

/// Whether `alloc` lives inside scf.for and scf.if only, and no loop
/// carries it to the next iteration.
static bool isIterationLocal(memref::AllocOp alloc, func::FuncOp func) {
  for (Operation *parent = alloc->getParentOp(); parent != func;
       parent = parent->getParentOp())
    if (!isa<scf::ForOp, scf::IfOp>(parent))
      return false;
  return llvm::none_of(alloc->getUsers(), [](Operation *user) {
    return isa<scf::YieldOp, func::ReturnOp>(user);
  });
}

namespace {
struct LoomHoistKernelAllocs
    : public loom::impl::LoomHoistKernelAllocsBase<LoomHoistKernelAllocs> {
  using Base::Base;

  void runOnOperation() override {
    for (auto func : getOperation().getOps<func::FuncOp>()) {
      if (func.isExternal() || !(everyFunction || func->hasAttr(loom::attr::kKernel)))
        continue;
      Block &entry = func.getBody().front();
      // Results computed in place in their destination arguments (see
      // loom-kernel-destinations) are not returned: the caller has them.
      func.walk([](memref::CopyOp copy) {
        if (copy.getSource() == copy.getTarget())
          copy.erase();
      });
      auto ret = cast<func::ReturnOp>(entry.getTerminator());
      if (llvm::all_of(ret.getOperands(),
                       [](Value v) { return isa<BlockArgument>(v); }))
        ret->setOperands({});
      func.setFunctionType(FunctionType::get(func.getContext(),
                                             entry.getArgumentTypes(),
                                             ret.getOperandTypes()));
      SmallVector<memref::AllocOp> allocs;
      for (auto alloc : entry.getOps<memref::AllocOp>())
        if (alloc.getType().hasStaticShape())
          allocs.push_back(alloc);
      // A temporary of a sequential loop's body (an attention's score tile)
      // too: each iteration writes it before reading it, so one buffer
      // serves them all, and the kernel allocates nothing per iteration.
      func.walk([&](memref::AllocOp alloc) {
        if (alloc->getBlock() != &entry && alloc.getType().hasStaticShape() &&
            isIterationLocal(alloc, func))
          allocs.push_back(alloc);
      });
      auto scratch = DictionaryAttr::get(
          func.getContext(),
          {NamedAttribute(loom::attr::kScratch, UnitAttr::get(func.getContext()))});
      for (memref::AllocOp alloc : allocs) {
        // The plan's buffers are dense and row-major, like the alloc.
        auto type = MemRefType::get(alloc.getType().getShape(),
                                    alloc.getType().getElementType());
        if (type != alloc.getType())
          continue;
        // insertArgument keeps the argument attributes in step (a kernel
        // tiled for the CPU already has scratch arguments).
        unsigned index = func.getNumArguments();
        if (failed(func.insertArgument(index, type, scratch, alloc.getLoc())))
          return signalPassFailure();
        BlockArgument arg = entry.getArgument(index);
        for (Operation *user : llvm::make_early_inc_range(alloc->getUsers()))
          if (isa<memref::DeallocOp>(user))
            user->erase();
        alloc.replaceAllUsesWith(arg);
        alloc.erase();
      }
    }
  }
};
} // namespace
