// RUN: loom-opt %s --split-input-file --loom-tile-matmuls-for-gpu="tensor-cores=true" | FileCheck %s

// A tensor-core matmul absorbs the elementwise op after it (its epilogue)
// unless that op writes a buffer the matmul reads, here through another
// view of A: other blocks would still be reading A's rows while a block
// wrote its tile's results over them. The epilogue then stays a pass of
// its own; written to a buffer of its own, it is absorbed.

// CHECK-LABEL: func.func @output_over_operand
// CHECK: gpu.launch
// CHECK: gpu.terminator
// CHECK: linalg.generic
// CHECK: arith.truncf
// CHECK: return
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>
func.func @output_over_operand(%P: memref<64x64xbf16>, %B: memref<64x64xbf16>, %C: memref<64x64xf32> {loom.scratch}, %Z: memref<64x64xbf16>) {
  %zero = arith.constant 0.0 : f32
  %A = memref.subview %P[0, 0] [64, 64] [1, 1] : memref<64x64xbf16> to memref<64x64xbf16, strided<[64, 1]>>
  %Y = memref.subview %P[0, 0] [64, 64] [1, 1] : memref<64x64xbf16> to memref<64x64xbf16, strided<[64, 1]>>
  linalg.fill ins(%zero : f32) outs(%C : memref<64x64xf32>)
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<64x64xbf16, strided<[64, 1]>>, memref<64x64xbf16>) outs(%C : memref<64x64xf32>) {
  ^bb0(%x: bf16, %y: bf16, %s: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %r = arith.addf %s, %p : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%C : memref<64x64xf32>) outs(%Y : memref<64x64xbf16, strided<[64, 1]>>) {
  ^bb0(%v: f32, %o: bf16):
    %t = arith.truncf %v : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}

// -----

// CHECK-LABEL: func.func @output_of_its_own
// CHECK: gpu.launch
// CHECK-NOT: linalg.generic
// CHECK: return
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>
func.func @output_of_its_own(%P: memref<64x64xbf16>, %B: memref<64x64xbf16>, %C: memref<64x64xf32> {loom.scratch}, %Z: memref<64x64xbf16>) {
  %zero = arith.constant 0.0 : f32
  %A = memref.subview %P[0, 0] [64, 64] [1, 1] : memref<64x64xbf16> to memref<64x64xbf16, strided<[64, 1]>>
  %Y = memref.subview %P[0, 0] [64, 64] [1, 1] : memref<64x64xbf16> to memref<64x64xbf16, strided<[64, 1]>>
  linalg.fill ins(%zero : f32) outs(%C : memref<64x64xf32>)
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<64x64xbf16, strided<[64, 1]>>, memref<64x64xbf16>) outs(%C : memref<64x64xf32>) {
  ^bb0(%x: bf16, %y: bf16, %s: f32):
    %xf = arith.extf %x : bf16 to f32
    %yf = arith.extf %y : bf16 to f32
    %p = arith.mulf %xf, %yf : f32
    %r = arith.addf %s, %p : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%C : memref<64x64xf32>) outs(%Z : memref<64x64xbf16>) {
  ^bb0(%v: f32, %o: bf16):
    %t = arith.truncf %v : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}
