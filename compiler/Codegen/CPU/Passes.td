//===- Passes.td - Codegen for the CPU: tiles for caches and vectors ------===//

#ifndef LOOM_CODEGEN_CPU_PASSES_TD
#define LOOM_CODEGEN_CPU_PASSES_TD

include "mlir/Pass/PassBase.td"

def LoomTileContractionsForCpu
    : Pass<"loom-tile-contractions-for-cpu", "mlir::ModuleOp"> {
  let summary = "Cache and register tiles, vectorized, for CPU matmuls";
  let description = [{
    Each bufferized contraction whose sizes allow it is tiled twice with the
    transform dialect: cache tiles (up to 128 x 128 x 256, dividing the
    shape) and, inside, register tiles over (m, n) with k unrolled by one:
    8 x 32 f32 accumulators with 512-bit vectors (16 zmm of AVX-512's 32
    registers), 4 x 16 with 256-bit ones. The register tile is vectorized
    and its accumulator transfers hoisted out of the k loop (after folding
    memref aliases): each k step is a broadcast multiply-add on 16-wide
    vectors, which LLVM fuses into FMAs (the add gets back the contraction
    flag the matmul body carries). A K-contiguous B is copied once into an
    N-contiguous temporary first.

    An f32 matmul whose A and B together outgrow a quarter of L2 (k and n
    at least 128) reads both packed instead: B copied once into panels
    [N/cols, K, cols], A into blocks [M/rows, K, rows] (a register tile's
    rows side by side per k), C viewed as [M/rows, rows, N/cols, cols]. Each
    k step then reads one contiguous run of A and of B, where unpacked the
    tile's rows, K and N elements apart, evict each other from L1. A 16-bit
    matmul off the dot path reads f32 copies of its operands (one
    elementwise widening pass each) and is tiled as an f32 one.

    With `bf16-dot`, a bf16 matmul with an f32 accumulator (even K) runs on
    avx512_bf16's pair dot products instead: B is copied once into the VNNI
    layout [K/2, N, 2], A is viewed as [M, K/2, 2], and each step of the
    k/2 loop is one `x86vector.avx512.dot` per 16 columns and row (two k
    per instruction, upstream's packed-type dot product patterns). Other
    contractions keep their scalar loops. The schedule is generated per
    kernel, one tile configuration per op.

    A matmul's elementwise consumer (the op right after it, reading the
    f32 accumulator element by element: a bias, an activation, a residual,
    the rounding to bf16) runs inside the matmul's tiles when the cache
    tile covers all of k: on each register tile's box of the accumulator
    right after the tile writes it, vectorized (FuseMatmulEpilogues.cpp),
    instead of in a second pass over the whole accumulator. The same ops
    per element give the same results.

    With `bf16-amx`, such a matmul whose m and n are multiples of 16 and k
    of 32 runs on AMX tiles instead (AmxMatmul.cpp): B copied into VNNI
    panels [N/16, K/2, 32] (16 columns' pairs per row: one B tile per 32
    k), and per block of 2 x 2 C tiles (32 x 32 outputs; 1 where m or n
    allows only one) a k loop of `amx.tile_load`s of A (16 rows x 32 k,
    read in place) and of B panels, `amx.tile_mulf`s into the four f32
    accumulator tiles carried in tile registers, one `amx.tile_store`
    each after the loop (per K block of at most 256). A C filled with
    zeros starts as `amx.tile_zero` (the fill goes), and the elementwise
    consumer runs on each 16 x 16 tile after its last store. With
    `emulate-amx` too, every tile operation
    becomes the vector code of its definition (a 2-D read, a write, a
    contraction over the pairs): the same kernels, runnable and testable
    on a CPU without AMX.
  }];
  let options = [
    Option<"vectorBits", "vector-bits", "unsigned", "256",
           "The target's vector register width in bits (512 for AVX-512): "
           "sizes the register tiles">,
    Option<"bf16Dot", "bf16-dot", "bool", "false",
           "Run bf16 matmuls on avx512_bf16 dot products (the target has "
           "avx512bf16)">,
    Option<"bf16Amx", "bf16-amx", "bool", "false",
           "Run bf16 matmuls on AMX tiles (the target has amx-bf16)">,
    Option<"emulateAmx", "emulate-amx", "bool", "false",
           "With bf16-amx: emulate the tile operations with vector code">,
  ];
  let dependentDialects = ["mlir::x86vector::X86VectorDialect", "mlir::amx::AMXDialect",
                           "mlir::ub::UBDialect"];
}

def LoomScatterEmbeddingGradients
    : Pass<"loom-scatter-embedding-gradients", "mlir::ModuleOp"> {
  let summary = "An embedding's one-hot gradient sum as a scatter of rows";
  let description = [{
    A linalg.generic on buffers over loops (v, d, p...) computing
    `out[v, d] = sum_p (row(ids[p]) == v ? out + term(dy[p, d]) : out)`
    (an embedding's gradient: V times a scatter's work as loops) becomes a
    loop nest over the positions p, each adding `term` of dy's row p into
    the output row `row(ids[p])` (a 1-D linalg.generic on the two rows).
    Each output element sums its terms in position order, as before, so
    the results are the same bits. The output's fill is left before it.
  }];
  let dependentDialects = ["mlir::scf::SCFDialect", "mlir::memref::MemRefDialect"];
}

def LoomInterchangeForCpu : Pass<"loom-interchange-for-cpu", "mlir::ModuleOp"> {
  let summary = "A generic's output-contiguous parallel dim innermost";
  let description = [{
    In each linalg.generic on buffers that is not a matmul (those have
    register tiles), with one output whose innermost dim is a parallel loop
    followed by a reduction loop and innermost in every input it indexes
    (an embedding's gradient over (v, d, p), a bias's over (d, n); not a
    row sum): the loops are interchanged to put that dim last,
    so the loop nest's innermost loop walks contiguous rows, which LLVM
    vectorizes. Every output element sums its terms in the same order as
    before, so the results are the same bits.
  }];
}

def LoomApproximateMathForCpu
    : Pass<"loom-approximate-math-for-cpu", "mlir::ModuleOp"> {
  let summary = "exp, log, tanh and erf as polynomials LLVM can vectorize";
  let description = [{
    Rewrites `math.exp`, `expm1`, `log`, `log1p`, `log2`, `tanh`, `erf` and
    `erfc` (on f32, and on 16-bit floats through f32) into upstream's
    polynomial approximations (`populateMathPolynomialApproximationPatterns`):
    plain arithmetic and bit casts, within a few ulp of libm. Left as
    calls, each element of a softmax, a GELU or a loss paid a scalar libm
    call and kept LLVM from vectorizing the loop around it.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::math::MathDialect",
                           "mlir::vector::VectorDialect"];
}

def LoomPromoteLoopAccumulators
    : Pass<"loom-promote-loop-accumulators", "mlir::ModuleOp"> {
  let summary = "A reduction loop's accumulator in a register, not memory";
  let description = [{
    After convert-linalg-to-loops, a reduction's innermost loop loads its
    output element, combines one input element and stores it back, every
    iteration, at indices the loop does not change. The pair moves out of
    the loop: one load before it, the value carried as an iter_arg, one
    store after. The kernels' buffers carry no `noalias`, so LLVM cannot do
    this itself, and each step of a softmax's max and sum waited on a
    store-to-load forward. A linalg op's inputs do not alias its output, so
    nothing else in the loop reads that element; loops that touch the
    memref elsewhere are left alone. A sum carried this way gets the
    `reassoc` flag, so LLVM vectorizes it (a partial sum per lane, added
    at the end): its rounding then differs from the one-at-a-time order,
    deterministically, as any blocked sum's does. Where a sum carried out
    of an inner loop would flow straight into the next outer one (a full
    reduction's nest), the inner loop starts from -0 instead and its
    result is added to the outer running total after it: each level sums
    its own terms, a tree of short sums rather than one chain of millions
    (which loses the small terms' low bits: 7e-5 on a 4 M-term mse).
  }];
  let dependentDialects = ["mlir::scf::SCFDialect", "mlir::memref::MemRefDialect"];
}

def LoomHoistInvariantLoads
    : Pass<"loom-hoist-invariant-loads", "mlir::ModuleOp"> {
  let summary = "Loads a loop does not change move before it";
  let description = [{
    After convert-linalg-to-loops, a load whose memref and indices are
    defined outside an `scf.for` (of at least one trip, known statically)
    moves before it, unless something in the loop writes to the same base
    buffer (through any view of it) or has effects it cannot name. An
    embedding's id was loaded once per column of the row it picks: with no
    `noalias` on the kernels' pointers, LLVM kept it (and the row address)
    in the loop and copied the row a float at a time. A linalg op's inputs
    never alias its output and the plan gives a kernel's arguments
    disjoint bytes (a result written in place is its argument's own
    value), so a different base is a different buffer.

    ```mlir
    scf.for %j = %c0 to %c256 step %c1 {
      %id = memref.load %ids[%i] : memref<4096xi32>
      ...
      memref.store %v, %out[%i, %j] : memref<4096x256xf32>
    }
    ```
    becomes the same loop with `%id` loaded before it.
  }];
  let dependentDialects = ["mlir::scf::SCFDialect", "mlir::memref::MemRefDialect"];
}

def LoomExpandArithForCpu : Pass<"loom-expand-arith-for-cpu", "mlir::ModuleOp"> {
  let summary = "bf16 conversions and ceil/floor divisions expanded; max/min kept";
  let description = [{
    The part of upstream's `arith-expand` the CPU lowering needs: bf16
    `extf`/`truncf` become integer arithmetic (round to nearest even, no
    soft-float call) and `ceildivsi`/`ceildivui`/`floordivsi` plain
    divisions. `maxnumf`, `minnumf`, `maximumf` and `minimumf` stay, for
    arith-to-llvm to make LLVM intrinsics: expanded into compares and
    selects, a softmax's row maximum was a reduction LLVM did not vectorize.
  }];
  let dependentDialects = ["mlir::arith::ArithDialect", "mlir::vector::VectorDialect"];
}

#endif // LOOM_CODEGEN_CPU_PASSES_TD
