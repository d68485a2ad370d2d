//===- Passes.td - Codegen for the CPU: tiles for caches and vectors ------===//

#ifndef LOOM_CODEGEN_CPU_PASSES_TD
#define LOOM_CODEGEN_CPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomTileContractionsForCpu
    : Pass<"loom-tile-contractions-for-cpu", "mlir::ModuleOp"> {
  let summary = "Cache and register tiles, vectorized, for CPU matmuls";
  let description = [{
    Each bufferized contraction whose sizes allow it is tiled twice with the
    transform dialect: cache tiles (up to 64 x 64 x 64, dividing the shape)
    and, inside, 4 x 16 register tiles over (m, n) with k unrolled by one;
    the register tile is vectorized and its accumulator transfers hoisted out
    of the k loop (after folding memref aliases): each k step is a broadcast
    multiply-add on 16-wide vectors, which LLVM fuses into FMAs (the add
    gets back the contraction flag the matmul body carries). Other
    contractions keep
    their scalar loops. The schedule is generated per kernel, one tile
    configuration per op.
  }];
}

#endif // LOOM_CODEGEN_CPU_PASSES_TD
