//===- GpuOccupancyHints.cpp - Resident blocks ptxas should allow for -----===//
//
// The tensor-core pipeline sizes its dynamic shared memory for a number of
// resident blocks per SM; ptxas, not told, may give one block all the
// registers it likes (160 for a 128 x 128 tile with K step 64) and leave
// room for one block only. `nvvm.minctasm` (PTX `.minnctapersm`) makes it
// fit the blocks the shared memory allows. A kernel that rebalances
// registers between warpgroups (`setmaxnreg`) is built for one block an SM
// and gets 1 whatever its shared memory: with more, ptxas would cap its
// registers below what setmaxnreg.inc asks, and the consumers would wait
// for registers forever. The attention kernels (launched from a kernel
// marked `loom.gpu_attention`) hold a warp's accumulators in registers:
// left alone, ptxas caps the forward at heads of 128 at 168 registers
// (3 blocks of 128 threads) and spills; they get at most 2, which lets
// them have up to 255.
//
// A kernel launched in clusters (`gpu.launch_func ... clusters in`) gets
// their size as `nvvm.cluster_dim` (PTX `.reqnctapercluster`): the runtime
// launches every kernel with cuLaunchKernel, which forms the clusters a
// kernel declares itself.
//
// It also aligns every kernel's workgroup buffers to 16 bytes (`llvm.align`,
// which the NVVM lowering puts on the `.shared` array): cp.async's 16-byte
// copies and ldmatrix's row addresses need it, and the arrays, declared
// with their element's alignment, had it only by how ptxas happened to lay
// them out.
//
//===----------------------------------------------------------------------===//

#include "Codegen/GPU/Passes.h"
#include "Loom/IR/LoomDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

namespace mlir::loom {
#define GEN_PASS_DEF_LOOMGPUOCCUPANCYHINTS
#include "Codegen/GPU/Passes.h.inc"
} // namespace mlir::loom

using namespace mlir;

namespace {
constexpr int64_t kAttentionBlocksPerSM = 2;
constexpr int64_t kSharedAlignment = 16;

struct LoomGpuOccupancyHints
    : public loom::impl::LoomGpuOccupancyHintsBase<LoomGpuOccupancyHints> {
  using Base::Base;
  void runOnOperation() override {
    getOperation().walk([&](gpu::GPUFuncOp kernel) {
      Builder builder(&getContext());
      for (unsigned i = 0; i < kernel.getNumWorkgroupAttributions(); ++i)
        kernel.setWorkgroupAttributionAttr(i, LLVM::LLVMDialect::getAlignAttrName(),
                                           builder.getI64IntegerAttr(kSharedAlignment));
    });
    getOperation().walk([&](gpu::LaunchFuncOp launch) {
      if (launch.hasClusterSize())
        declareClusters(launch);
      Value size = launch.getDynamicSharedMemorySize();
      std::optional<int64_t> bytes = size ? getConstantIntValue(size) : std::nullopt;
      auto host = launch->getParentOfType<func::FuncOp>();
      bool attention = host && host->hasAttr(loom::attr::kGpuAttention);
      if ((!bytes || *bytes <= 0) && !attention)
        return;
      auto kernel = SymbolTable::lookupNearestSymbolFrom<gpu::GPUFuncOp>(
          launch, launch.getKernel());
      if (!kernel)
        return;
      int64_t blocks = bytes && *bytes > 0
                           ? std::max<int64_t>(1, sharedPerSM / (*bytes + reservedSharedPerBlock))
                           : kAttentionBlocksPerSM;
      if (attention)
        blocks = std::min(blocks, kAttentionBlocksPerSM);
      if (kernel.walk([](NVVM::SetMaxRegisterOp) { return WalkResult::interrupt(); })
              .wasInterrupted())
        blocks = 1;
      // A kernel launched with several sizes keeps the smallest count.
      StringRef name = NVVM::NVVMDialect::getMinctasmAttrName();
      if (auto known = kernel->getAttrOfType<IntegerAttr>(name))
        blocks = std::min(blocks, known.getInt());
      kernel->setAttr(name, Builder(&getContext()).getI32IntegerAttr(blocks));
    });
  }

  void declareClusters(gpu::LaunchFuncOp launch) {
    auto kernel = SymbolTable::lookupNearestSymbolFrom<gpu::GPUFuncOp>(
        launch, launch.getKernel());
    gpu::KernelDim3 size = launch.getClusterSizeOperandValues();
    SmallVector<int32_t> dims;
    for (Value extent : {size.x, size.y, size.z})
      if (std::optional<int64_t> value = getConstantIntValue(extent))
        dims.push_back(*value);
    if (!kernel || dims.size() != 3) {
      launch.emitError("a cluster launch needs constant cluster sizes");
      return signalPassFailure();
    }
    kernel->setAttr(NVVM::NVVMDialect::getClusterDimAttrName(),
                    DenseI32ArrayAttr::get(&getContext(), dims));
  }
};
} // namespace
