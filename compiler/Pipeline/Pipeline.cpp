//===- Pipeline.cpp - Loom's compilation stages as pass pipelines ---------===//

#include "Pipeline/Pipeline.h"

#include "Codegen/CPU/Passes.h"
#include "Codegen/Common/Passes.h"
#include "Codegen/GPU/Passes.h"
#include "Conversion/Passes.h"
#include "Loom/Transforms/Passes.h"

#include "mlir/Conversion/AffineToStandard/AffineToStandard.h"
#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/ConvertToLLVM/ToLLVMPass.h"
#include "mlir/Dialect/AMX/AMXDialect.h"
#include "mlir/Dialect/AMX/Transforms.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVMPass.h"
#include "mlir/Conversion/MathToLLVM/MathToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/ReconcileUnrealizedCasts/ReconcileUnrealizedCasts.h"
#include "mlir/Conversion/SCFToControlFlow/SCFToControlFlow.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVMPass.h"
#include "mlir/Conversion/VectorToSCF/VectorToSCF.h"
#include "mlir/Dialect/Affine/IR/AffineOps.h"
#include "mlir/Dialect/Affine/IR/ValueBoundsOpInterfaceImpl.h"
#include "mlir/Dialect/Arith/IR/ValueBoundsOpInterfaceImpl.h"
#include "mlir/Dialect/Linalg/Transforms/TilingInterfaceImpl.h"
#include "mlir/Dialect/MemRef/IR/ValueBoundsOpInterfaceImpl.h"
#include "mlir/Dialect/SCF/IR/ValueBoundsOpInterfaceImpl.h"
#include "mlir/Dialect/Arith/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/SCF/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Bufferization/IR/Bufferization.h"
#include "mlir/Dialect/Bufferization/Pipelines/Passes.h"
#include "mlir/Dialect/Bufferization/Transforms/FuncBufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Bufferization/Transforms/Passes.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Linalg/Passes.h"
#include "mlir/Dialect/Linalg/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Dialect/Math/Transforms/Passes.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/MemRef/Transforms/Passes.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/Dialect/Vector/IR/VectorOps.h"
#include "mlir/Dialect/Shard/IR/ShardDialect.h"
#include "mlir/Dialect/Tensor/Transforms/BufferizableOpInterfaceImpl.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Conversion/GPUToNVVM/GPUToNVVMPass.h"
#include "mlir/Conversion/VectorToLLVM/ConvertVectorToLLVM.h"
#include "mlir/Conversion/NVGPUToNVVM/NVGPUToNVVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/SCFToGPU/SCFToGPUPass.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/SCF/Transforms/Passes.h"
#include "mlir/Dialect/X86Vector/X86VectorDialect.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void ::loom::registerLoomCompilerDialects(DialectRegistry &registry) {
  registry.insert<mlir::loom::LoomDialect, func::FuncDialect, shard::ShardDialect,
                  arith::ArithDialect, math::MathDialect, tensor::TensorDialect,
                  linalg::LinalgDialect, bufferization::BufferizationDialect,
                  memref::MemRefDialect, scf::SCFDialect, affine::AffineDialect,
                  cf::ControlFlowDialect, LLVM::LLVMDialect, gpu::GPUDialect,
                  NVVM::NVVMDialect, nvgpu::NVGPUDialect, ub::UBDialect,
                  vector::VectorDialect,
                  // The CPU tiles' bf16 dots and AMX tiles (--emit=tiled
                  // on such a CPU reads back into loom-opt).
                  x86vector::X86VectorDialect, amx::AMXDialect>();
  arith::registerBufferizableOpInterfaceExternalModels(registry);
  linalg::registerBufferizableOpInterfaceExternalModels(registry);
  tensor::registerBufferizableOpInterfaceExternalModels(registry);
  scf::registerBufferizableOpInterfaceExternalModels(registry);
  bufferization::func_ext::registerBufferizableOpInterfaceExternalModels(registry);
  // Tiling (the CPU register tiles) needs these interfaces on upstream ops.
  linalg::registerTilingInterfaceExternalModels(registry);
  arith::registerValueBoundsOpInterfaceExternalModels(registry);
  memref::registerValueBoundsOpInterfaceExternalModels(registry);
  scf::registerValueBoundsOpInterfaceExternalModels(registry);
  affine::registerValueBoundsOpInterfaceExternalModels(registry);
  registerConvertFuncToLLVMInterface(registry);
  registerConvertMathToLLVMInterface(registry);
  arith::registerConvertArithToLLVMInterface(registry);
  registerConvertMemRefToLLVMInterface(registry);
  cf::registerConvertControlFlowToLLVMInterface(registry);
  registerConvertAMXToLLVMInterface(registry);
  // GPU kernels hold vector loads and stores (16-byte accesses, ldmatrix
  // fragments) that convert-gpu-to-nvvm lowers through this interface.
  vector::registerConvertVectorToLLVMInterface(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
}

/// loom-fuse-attention, as `fusion` asks.
/// math-expand-ops for every op it expands but tanh: its expansion
/// (1 - e^-2|x|) / (1 + e^-2|x|) cancels for small |x| (tanh(1e-8) was 0,
/// 1e-7 11% off), where the CPU's polynomial and the GPU's libdevice are
/// accurate to a few ulps.
static math::MathExpandOpsPassOptions expandedMathOps() {
  math::MathExpandOpsPassOptions options;
  for (const char *op : {"ctlz", "sinh", "cosh", "tan", "asinh", "acosh", "atanh",
                         "fma", "ceil", "exp2", "powf", "fpowi", "round",
                         "roundeven", "rsqrt", "clampf"})
    options.opMnemonics.push_back(op);
  return options;
}

static void addFuseAttention(OpPassManager &pm, ::loom::AttentionFusion fusion) {
  if (fusion == ::loom::AttentionFusion::None)
    return;
  mlir::loom::LoomFuseAttentionOptions options;
  options.gpuKernel = fusion == ::loom::AttentionFusion::GpuKernel;
  pm.addNestedPass<func::FuncOp>(mlir::loom::createLoomFuseAttention(options));
}

void ::loom::buildAutodiffPipeline(OpPassManager &pm, bool train,
                                   double updateBucketMb,
                                   AttentionFusion fuseAttention) {
  pm.addNestedPass<func::FuncOp>(mlir::loom::createLoomInlineStages());
  pm.addNestedPass<func::FuncOp>(mlir::loom::createLoomExpandMoe());
  // Before differentiating: the backward then recomputes the scores
  // instead of keeping them.
  addFuseAttention(pm, fuseAttention);
  if (train)
    pm.addPass(mlir::loom::createLoomMasterWeights());
  mlir::loom::LoomAutodiffOptions autodiff;
  autodiff.scaleLoss = train;
  pm.addPass(mlir::loom::createLoomAutodiff(autodiff));
  if (train) {
    mlir::loom::LoomOptimizerStepOptions step;
    step.bucketMb = updateBucketMb;
    pm.addPass(mlir::loom::createLoomOptimizerStep(step));
  }
}

void ::loom::buildPartitionPipeline(OpPassManager &pm,
                                    const PartitionOptions &options) {
  // A training step keyed its dropouts (loom-optimizer-step): the others
  // are the identity.
  pm.addNestedPass<func::FuncOp>(mlir::loom::createLoomStripDropout());
  pm.addNestedPass<func::FuncOp>(mlir::loom::createLoomInlineStages());
  // A no-op after autodiff, which expands MoE blocks first.
  pm.addNestedPass<func::FuncOp>(mlir::loom::createLoomExpandMoe());
  addFuseAttention(pm, options.fuseAttention);
  // One cast of a value per precision, not one per use: a resharded value
  // is then moved once.
  pm.addPass(createCSEPass());
  mlir::loom::LoomPartitionOptions partition;
  partition.remarks = options.remarks;
  partition.sequenceParallel = options.sequenceParallel;
  pm.addPass(mlir::loom::createLoomPartition(partition));
  // Stages before the buckets, which keep each stage's gradients apart,
  // and again after, for the ops the buckets add.
  mlir::loom::LoomPlaceStagesOptions stages;
  stages.schedule = options.schedule;
  pm.addPass(mlir::loom::createLoomPlaceStages(stages));
  if (options.gradBucketMb > 0) {
    mlir::loom::LoomBucketGradientsOptions buckets;
    buckets.bucketMb = options.gradBucketMb;
    buckets.remarks = options.remarks;
    pm.addPass(mlir::loom::createLoomBucketGradients(buckets));
    pm.addPass(mlir::loom::createLoomPlaceStages(stages));
  }
}

void ::loom::buildKernelsPipeline(OpPassManager &pm) {
  pm.addNestedPass<func::FuncOp>(mlir::loom::createLoomInlineStages());
  pm.addNestedPass<func::FuncOp>(mlir::loom::createLoomStripShardings());
  pm.addPass(mlir::loom::createLoomOutlineKernels());
  pm.addPass(createSymbolDCEPass());
  pm.addPass(mlir::loom::createLoomDedupKernels());
}

void ::loom::buildLinalgPipeline(OpPassManager &pm, bool bf16Operands,
                                 bool inPlaceUpdates, int64_t normRowBlockBytes) {
  mlir::loom::ConvertLoomToLinalgOptions linalg;
  linalg.normRowBlockBytes = normRowBlockBytes;
  pm.addPass(mlir::loom::createConvertLoomToLinalg(linalg));
  pm.addNestedPass<func::FuncOp>(mlir::loom::createLoomFuseUpdateProducers());
  pm.addNestedPass<func::FuncOp>(mlir::loom::createLoomFuseElementwise());
  // After the fusion, which would put the probabilities' exponentials into
  // the contraction with the values.
  mlir::loom::ConvertLoomAttentionToLinalgOptions attention;
  attention.bf16Operands = bf16Operands;
  pm.addPass(mlir::loom::createConvertLoomAttentionToLinalg(attention));
  pm.addPass(createCanonicalizerPass());
  pm.addPass(createCSEPass());
  if (inPlaceUpdates)
    pm.addPass(mlir::loom::createLoomInPlaceUpdates());
}

void ::loom::buildBufferizePipeline(OpPassManager &pm) {
  // Results are computed in place in the plan's output buffers.
  pm.addPass(mlir::loom::createLoomKernelDestinations());
  pm.addPass(bufferization::createEmptyTensorEliminationPass());
  bufferization::OneShotBufferizePassOptions bufferize;
  bufferize.bufferizeFunctionBoundaries = true;
  bufferize.functionBoundaryTypeConversion =
      bufferization::LayoutMapOption::IdentityLayoutMap;
  pm.addPass(bufferization::createOneShotBufferizePass(bufferize));
  // Kernels write their results into buffers the plan provides.
  bufferization::BufferResultsToOutParamsPassOptions outParams;
  outParams.hoistStaticAllocs = true;
  outParams.modifyPublicFunctions = true;
  pm.addPass(mlir::loom::createLoomHoistKernelAllocs());
  pm.addPass(bufferization::createBufferResultsToOutParamsPass(outParams));
  pm.addPass(createCanonicalizerPass());
  // Whatever is still allocated (inside loops) is freed where it dies.
  bufferization::buildBufferDeallocationPipeline(pm);
  pm.addPass(createCanonicalizerPass());
}

void ::loom::buildCpuTilingPipeline(OpPassManager &pm, unsigned vectorBits,
                                    Bf16MatmulPath bf16) {
  mlir::loom::LoomTileContractionsForCpuOptions tiling;
  tiling.vectorBits = vectorBits;
  tiling.bf16Dot = bf16 == Bf16MatmulPath::Dot;
  tiling.bf16Amx = bf16 == Bf16MatmulPath::Amx || bf16 == Bf16MatmulPath::EmulatedAmx;
  tiling.emulateAmx = bf16 == Bf16MatmulPath::EmulatedAmx;
  pm.addPass(mlir::loom::createLoomTileContractionsForCpu(tiling));
  // Their temporaries (B's panels) become plan buffers: kernels never
  // allocate.
  mlir::loom::LoomHoistKernelAllocsOptions hoist;
  hoist.everyFunction = true;
  pm.addPass(mlir::loom::createLoomHoistKernelAllocs(hoist));
  pm.addPass(createCanonicalizerPass());
}

void ::loom::buildCpuLoweringPipeline(OpPassManager &pm) {
  pm.addPass(createConvertVectorToSCFPass());
  pm.addNestedPass<func::FuncOp>(mlir::loom::createLoomLowerStridedCopies());
  // Embedding gradients add each position's row where its id points.
  pm.addPass(mlir::loom::createLoomScatterEmbeddingGradients());
  // Reductions over rows of contiguous columns walk the rows innermost.
  pm.addPass(mlir::loom::createLoomInterchangeForCpu());
  pm.addPass(createConvertLinalgToLoopsPass());
  // Reductions keep their accumulator in a register.
  pm.addPass(mlir::loom::createLoomPromoteLoopAccumulators());
  // An embedding's id is read once per row, not per column.
  pm.addPass(mlir::loom::createLoomHoistInvariantLoads());
  // Reshapes and slices become plain strided views before LLVM.
  pm.addPass(memref::createExpandStridedMetadataPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createSCFToControlFlowPass());
  pm.addPass(math::createMathExpandOpsPass(expandedMathOps()));
  // exp, log, tanh, erf: arithmetic LLVM vectorizes, not libm calls.
  pm.addPass(mlir::loom::createLoomApproximateMathForCpu());
  // bf16 conversions become integer arithmetic (round to nearest even), so
  // kernels need no soft-float library call for them; max and min stay
  // LLVM intrinsics, whose reductions LLVM vectorizes.
  pm.addPass(mlir::loom::createLoomExpandArithForCpu());
  pm.addPass(createFinalizeMemRefToLLVMConversionPass());
  // The conversions of kernel bodies run on each kernel by itself, so
  // that MLIR spreads the kernels over the cores: on 2 cores the host
  // object has not started yet and the other core would idle.
  // x86vector: the avx512_bf16 dot products of bf16 matmuls; amx: their
  // AMX tiles.
  OpPassManager &kernelBodies = pm.nest<func::FuncOp>();
  ConvertVectorToLLVMPassOptions vectorToLlvm;
  vectorToLlvm.x86Vector = true;
  vectorToLlvm.amx = true;
  kernelBodies.addPass(createConvertVectorToLLVMPass(vectorToLlvm));
  kernelBodies.addPass(createConvertMathToLLVMPass());
  kernelBodies.addPass(createUBToLLVMConversionPass());
  kernelBodies.addPass(createArithToLLVMConversionPass());
  ConvertFuncToLLVMPassOptions func;
  func.useBarePtrCallConv = true;
  pm.addPass(createConvertFuncToLLVMPass(func));
  // With AMX's tile type: an AMX matmul's k loop carries its accumulator
  // tiles as block arguments, which convert-cf-to-llvm's type converter
  // does not know.
  OpPassManager &llvmKernels = pm.nest<LLVM::LLVMFuncOp>();
  ConvertToLLVMPassOptions controlFlow;
  controlFlow.filterDialects = {"cf", "amx"};
  llvmKernels.addPass(createConvertToLLVMPass(controlFlow));
  llvmKernels.addPass(createReconcileUnrealizedCastsPass());
  llvmKernels.addPass(createCanonicalizerPass());
}

void ::loom::buildGpuKernelsPipeline(OpPassManager &pm,
                                     const GpuKernelsOptions &options) {
  // Attention kernels first: their bodies (the CPU's blocked loops) are
  // replaced whole.
  if (options.tensorCores) {
    mlir::loom::LoomBuildGpuAttentionOptions attention;
    attention.warpgroupMma = options.warpgroupAttentionShared > 0;
    attention.sharedPerBlock = options.warpgroupAttentionShared;
    attention.stagingShared = options.attentionStagingShared;
    pm.addNestedPass<func::FuncOp>(mlir::loom::createLoomBuildGpuAttention(attention));
  }
  mlir::loom::LoomTileMatmulsForGpuOptions matmuls;
  matmuls.warpgroupMma = options.warpgroupMma;
  matmuls.persistentWarpgroupMma = options.persistentWarpgroupMma;
  matmuls.pingpongWarpgroupMma = options.pingpongWarpgroupMma;
  matmuls.tmaStoreEpilogue = options.tmaStoreEpilogue;
  matmuls.tmaMulticast = options.tmaMulticast;
  matmuls.tensorCores = options.tensorCores;
  matmuls.multiprocessors = options.multiprocessors;
  matmuls.sharedPerBlock = options.sharedPerBlock;
  matmuls.sharedPerSM = options.sharedPerSM;
  matmuls.reservedSharedPerBlock = options.reservedSharedPerBlock;
  pm.addNestedPass<func::FuncOp>(mlir::loom::createLoomTileMatmulsForGpu(matmuls));
  pm.addPass(createConvertLinalgToParallelLoopsPass());
  pm.addPass(createLowerAffinePass());
  pm.addPass(createCanonicalizerPass());
  // An update bucket's loops as one, so one launch.
  pm.addNestedPass<func::FuncOp>(mlir::loom::createLoomFuseUpdateLoops());
  pm.addNestedPass<func::FuncOp>(mlir::loom::createLoomMapLoopsToGpu());
  pm.addPass(createCanonicalizerPass());
  // Constants and index arithmetic move into the kernels instead of
  // becoming launch arguments.
  pm.addPass(createGpuLaunchSinkIndexComputationsPass());
  pm.addPass(createGpuKernelOutliningPass());
  mlir::loom::LoomGpuOccupancyHintsOptions occupancy;
  occupancy.sharedPerSM = options.sharedPerSM;
  occupancy.reservedSharedPerBlock = options.reservedSharedPerBlock;
  pm.addPass(mlir::loom::createLoomGpuOccupancyHints(occupancy));
  pm.addPass(createCSEPass());
}

void ::loom::buildNvvmPipeline(OpPassManager &pm, const GpuTarget &target) {
  GpuNVVMAttachTargetOptions attach;
  attach.chip = target.chip;
  attach.features = target.features;
  attach.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(attach));
  OpPassManager &device = pm.nest<gpu::GPUModuleOp>();
  device.addPass(mlir::loom::createLoomTensorMapParams());
  device.addPass(math::createMathExpandOpsPass(expandedMathOps()));
  // Views (split pieces, concat slots) become plain address arithmetic.
  device.addPass(memref::createExpandStridedMetadataPass());
  device.addPass(createSCFToControlFlowPass());
  device.addPass(createLowerAffinePass());
  // cp.async and ldmatrix (the pipelined tensor-core matmuls) first: their
  // NVVM forms take pointers, which the memref lowering below then provides.
  device.addPass(createConvertNVGPUToNVVMPass());
  ConvertGpuOpsToNVVMOpsOptions nvvm;
  nvvm.useBarePtrCallConv = true;
  device.addPass(createConvertGpuOpsToNVVMOps(nvvm));
  // NVVM ops without an LLVM intrinsic (the mbarrier waits of the wgmma
  // kernels, wgmma itself) become inline PTX.
  device.addPass(createConvertNVVMToLLVMPass());
  device.addPass(createCanonicalizerPass());
  device.addPass(createCSEPass());
  device.addPass(createReconcileUnrealizedCastsPass());
}

void ::loom::buildGpuBinaryPipeline(OpPassManager &pm, const GpuTarget &target,
                                    llvm::StringRef format) {
  GpuModuleToBinaryPassOptions binary;
  binary.toolkitPath = target.toolkitPath;
  binary.compilationTarget = format.str();
  pm.addPass(createGpuModuleToBinaryPass(binary));
}
