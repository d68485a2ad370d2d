//===- DedupKernels.cpp - One kernel function per distinct body -----------===//
//
// Outlining gives every layer instance its own kernels, identical but for
// their names and locations. Kernels are bucketed by a structural hash of
// their ops (names, result types, attributes) and compared exactly within
// a bucket (OperationEquivalence, locations ignored); each duplicate's
// calls are redirected to the first kernel of its kind and it is erased.
// Kernel names and sources stay those of the first instance: a layer's
// instances share their source lines.
//
//===----------------------------------------------------------------------===//

#include "Loom/Transforms/Passes.h"

#include "mlir/IR/OperationSupport.h"
#include "mlir/IR/SymbolTable.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMDEDUPKERNELS
#include "Loom/Transforms/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;
using namespace mlir::loom;

/// A hash equal for structurally equal kernels.
static llvm::hash_code structuralHash(func::FuncOp kernel) {
  llvm::hash_code hash = llvm::hash_value(kernel.getFunctionType().getAsOpaquePointer());
  kernel.getBody().walk([&](Operation *op) {
    hash = llvm::hash_combine(hash, op->getName(), op->getRawDictionaryAttrs(),
                              op->getNumOperands(), op->getNumRegions());
    for (Type type : op->getResultTypes())
      hash = llvm::hash_combine(hash, type.getAsOpaquePointer());
  });
  return hash;
}

/// Whether `a` and `b` compute the same thing from the same arguments.
static bool sameKernel(func::FuncOp a, func::FuncOp b) {
  if (a.getFunctionType() != b.getFunctionType())
    return false;
  for (NamedAttribute attr : a->getAttrs())
    if (attr.getName() != SymbolTable::getSymbolAttrName() &&
        b->getAttr(attr.getName()) != attr.getValue())
      return false;
  if (a->getAttrs().size() != b->getAttrs().size())
    return false;
  return OperationEquivalence::isRegionEquivalentTo(
      &a.getBody(), &b.getBody(), OperationEquivalence::IgnoreLocations);
}

namespace {
struct LoomDedupKernels : public loom::impl::LoomDedupKernelsBase<LoomDedupKernels> {
  void runOnOperation() override {
    ModuleOp module = getOperation();
    DenseMap<llvm::hash_code, SmallVector<func::FuncOp, 1>> kinds;
    // Each duplicate's name, to the first kernel of its kind.
    DenseMap<StringAttr, FlatSymbolRefAttr> firstOf;
    SmallVector<func::FuncOp> duplicates;
    for (auto kernel : module.getOps<func::FuncOp>()) {
      if (!kernel->hasAttr(attr::kKernel) || kernel.isExternal())
        continue;
      SmallVector<func::FuncOp, 1> &same = kinds[structuralHash(kernel)];
      auto first = llvm::find_if(same, [&](func::FuncOp k) { return sameKernel(k, kernel); });
      if (first == same.end()) {
        same.push_back(kernel);
        continue;
      }
      firstOf[kernel.getSymNameAttr()] = FlatSymbolRefAttr::get(first->getSymNameAttr());
      duplicates.push_back(kernel);
    }
    // One walk for all calls (a replaceAllSymbolUses per duplicate would
    // walk the module once per kernel: quadratic in a deep model).
    module.walk([&](func::CallOp call) {
      if (FlatSymbolRefAttr first = firstOf.lookup(call.getCalleeAttr().getAttr()))
        call.setCalleeAttr(first);
    });
    for (func::FuncOp kernel : duplicates)
      kernel.erase();
  }
};
} // namespace
