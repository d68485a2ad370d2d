// RUN: not loom-opt %s --loom-tile-matmuls-for-gpu=tile=0 2>&1 | FileCheck %s --check-prefix=ZERO
// RUN: not loom-opt %s --loom-tile-matmuls-for-gpu=tile=-1 2>&1 | FileCheck %s --check-prefix=NEGATIVE
// RUN: not loom-opt %s --loom-tile-matmuls-for-gpu=tile=64 2>&1 | FileCheck %s --check-prefix=LARGE
// RUN: not loom-opt %s --loom-tile-matmuls-for-gpu="tensor-cores multiprocessors=0" 2>&1 | FileCheck %s --check-prefix=SMS
// RUN: not loom-opt %s --loom-tile-matmuls-for-gpu="shared-per-block=65536 shared-per-sm=1024" 2>&1 | FileCheck %s --check-prefix=SHARED

// --loom-tile-matmuls-for-gpu's numeric options are checked before they
// size anything: a tile of 0 divided by zero (SIGFPE), a negative one
// printed IR that does not parse (memref<-1x-1xf32>).

// ZERO: error: loom-tile-matmuls-for-gpu: tile=0 (expected 1 to 32: a block runs tile x tile threads, at most 1024)
// NEGATIVE: error: loom-tile-matmuls-for-gpu: tile=-1 (expected 1 to 32
// LARGE: error: loom-tile-matmuls-for-gpu: tile=64 (expected 1 to 32
// SMS: error: loom-tile-matmuls-for-gpu: multiprocessors=0 (expected at least 1)
// SHARED: error: loom-tile-matmuls-for-gpu: shared-per-sm=1024 (expected at least shared-per-block)
func.func @matmul(%a: memref<32x32xf32>, %b: memref<32x32xf32>, %c: memref<32x32xf32>) {
  linalg.matmul ins(%a, %b : memref<32x32xf32>, memref<32x32xf32>) outs(%c : memref<32x32xf32>)
  return
}
