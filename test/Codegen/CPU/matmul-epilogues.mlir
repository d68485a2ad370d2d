// RUN: loom-opt %s --split-input-file --loom-tile-contractions-for-cpu="vector-bits=512" --canonicalize | FileCheck %s

// A matmul's elementwise consumer (bias, activation, residual, rounding)
// runs on each register tile's box of the f32 accumulator right after the
// tile writes it, vectorized, instead of in a second pass over the whole
// accumulator: the box is still in L1. Each output element gets the same
// ops in the same order. It needs the cache tile to cover all of k (else a
// tile's write is not final) and an accumulator used by nothing else.

// CHECK-LABEL: func.func @bias_relu
// CHECK-SAME: (%[[A:[^:]+]]: memref<64x64xf32>, %[[B:[^:]+]]: memref<64x64xf32>, %[[BIAS:[^:]+]]: memref<64xf32>, %[[Y:[^:]+]]: memref<64x64xf32>, %[[ACC:[^:]+]]: memref<64x64xf32>)
// CHECK: linalg.fill {{.+}} outs(%[[ACC]]
// CHECK: scf.for %[[M:.+]] = %c0 to %c64 step %c8
// CHECK-NEXT: scf.for %[[N:.+]] = %c0 to %c64 step %c32
// CHECK: scf.for {{.+}} iter_args({{.+}}) -> (vector<8x32xf32>)
// CHECK: scf.yield
// CHECK-COUNT-8: vector.transfer_write %{{.+}}, %[[ACC]]
// CHECK: %[[IDX:.+]]:2 = affine.delinearize_index %{{.+}} into (64, 64)
// CHECK-DAG: %[[TILE:.+]] = memref.subview %[[ACC]][%[[IDX]]#0, %[[IDX]]#1] [8, 32] [1, 1]
// CHECK-DAG: %[[BROW:.+]] = memref.subview %[[BIAS]][%[[IDX]]#1] [32] [1]
// CHECK-DAG: %[[OUT:.+]] = memref.subview %[[Y]][%[[IDX]]#0, %[[IDX]]#1] [8, 32] [1, 1]
// CHECK-COUNT-8: vector.transfer_read %[[TILE]]
// CHECK: %[[BV:.+]] = vector.transfer_read %[[BROW]]{{.+}} vector<32xf32>
// CHECK: %[[BB:.+]] = vector.broadcast %[[BV]] : vector<32xf32> to vector<8x32xf32>
// CHECK: %[[SUM:.+]] = arith.addf %{{.+}}, %[[BB]] : vector<8x32xf32>
// CHECK: arith.maximumf %[[SUM]], %{{.+}} : vector<8x32xf32>
// CHECK-COUNT-8: vector.transfer_write %{{.+}}, %[[OUT]]
// CHECK-NOT: linalg.generic
// CHECK: return
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>
#row = affine_map<(m, n) -> (n)>
func.func @bias_relu(%A: memref<64x64xf32>, %B: memref<64x64xf32>, %bias: memref<64xf32>, %Y: memref<64x64xf32>, %acc: memref<64x64xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%acc : memref<64x64xf32>)
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<64x64xf32>, memref<64x64xf32>) outs(%acc : memref<64x64xf32>) {
  ^bb0(%x: f32, %y: f32, %s: f32):
    %p = arith.mulf %x, %y fastmath<contract> : f32
    %r = arith.addf %s, %p fastmath<contract> : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%acc, %bias : memref<64x64xf32>, memref<64xf32>) outs(%Y : memref<64x64xf32>) {
  ^bb0(%v: f32, %b: f32, %o: f32):
    %t = arith.addf %v, %b : f32
    %m = arith.maximumf %t, %zero : f32
    linalg.yield %m : f32
  }
  return
}

// -----

// The packed f32 path (A blocks, B panels, C viewed [M/8, 8, N/32, 32]):
// the box of a tile's write through the view is found by stride, here 8
// rows x 32 columns of the accumulator, rounded to bf16.
// CHECK-LABEL: func.func @packed_round
// CHECK-SAME: (%{{[^:]+}}: memref<512x256xf32>, %{{[^:]+}}: memref<256x256xf32>, %[[Y:[^:]+]]: memref<512x256xbf16>, %[[ACC:[^:]+]]: memref<512x256xf32>)
// CHECK: %[[CV:.+]] = memref.reinterpret_cast %[[ACC]] to offset: [0], sizes: [64, 8, 8, 32]
// CHECK: vector.transfer_write %{{.+}}, %[[CV]]
// CHECK: affine.delinearize_index %{{.+}} into (512, 256)
// CHECK: memref.subview %[[ACC]]{{.+}} [8, 32] [1, 1]
// CHECK: arith.truncf %{{.+}} : vector<8x32xf32> to vector<8x32xbf16>
// CHECK: vector.transfer_write %{{.+}} : vector<32xbf16>, memref<8x32xbf16
// CHECK-NOT: linalg.generic
// CHECK: return
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>
func.func @packed_round(%A: memref<512x256xf32>, %B: memref<256x256xf32>, %Y: memref<512x256xbf16>, %acc: memref<512x256xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%acc : memref<512x256xf32>)
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<512x256xf32>, memref<256x256xf32>) outs(%acc : memref<512x256xf32>) {
  ^bb0(%x: f32, %y: f32, %s: f32):
    %p = arith.mulf %x, %y fastmath<contract> : f32
    %r = arith.addf %s, %p fastmath<contract> : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%acc : memref<512x256xf32>) outs(%Y : memref<512x256xbf16>) {
  ^bb0(%v: f32, %o: bf16):
    %t = arith.truncf %v : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}

// -----

// k = 512 comes in cache tiles of 256: a register tile's write after its
// k loop is not final, so the epilogue stays a pass of its own.
// CHECK-LABEL: func.func @k_split
// CHECK-NOT: affine.delinearize_index
// CHECK: scf.for
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{[^ ]+}} : memref<64x64xf32>) outs(%{{[^ ]+}} : memref<64x64xbf16>)
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>
func.func @k_split(%A: memref<64x512xf32>, %B: memref<512x64xf32>, %Y: memref<64x64xbf16>, %acc: memref<64x64xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%acc : memref<64x64xf32>)
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<64x512xf32>, memref<512x64xf32>) outs(%acc : memref<64x64xf32>) {
  ^bb0(%x: f32, %y: f32, %s: f32):
    %p = arith.mulf %x, %y fastmath<contract> : f32
    %r = arith.addf %s, %p fastmath<contract> : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%acc : memref<64x64xf32>) outs(%Y : memref<64x64xbf16>) {
  ^bb0(%v: f32, %o: bf16):
    %t = arith.truncf %v : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}

// -----

// The epilogue's output is a view of the matmul's A (as a bf16
// attention's output bufferized into the bytes of its probabilities,
// which its P @ V reads): per tile it would write rows later tiles still
// read (every row of that attention was wrong, fuzzer seed 131073), so it
// stays a pass of its own after the matmul.
// CHECK-LABEL: func.func @output_over_operand
// CHECK-NOT: affine.delinearize_index
// CHECK: linalg.generic
// CHECK-SAME: ins(%{{[^ ]+}} : memref<1x64x64xf32>) outs(%{{[^ ]+}} : memref<1x64x64xf32>)
// CHECK: return
#a = affine_map<(b, m, n, k) -> (b, m, k)>
#b = affine_map<(b, m, n, k) -> (b, k, n)>
#c = affine_map<(b, m, n, k) -> (b, m, n)>
#id = affine_map<(b, m, n) -> (b, m, n)>
func.func @output_over_operand(%P: memref<64x64xf32>, %V: memref<1x64x64xf32>, %acc: memref<1x64x64xf32>) {
  %zero = arith.constant 0.0 : f32
  %A = memref.expand_shape %P [[0, 1], [2]] output_shape [1, 64, 64] : memref<64x64xf32> into memref<1x64x64xf32>
  %Y = memref.expand_shape %P [[0, 1], [2]] output_shape [1, 64, 64] : memref<64x64xf32> into memref<1x64x64xf32>
  linalg.fill ins(%zero : f32) outs(%acc : memref<1x64x64xf32>)
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%A, %V : memref<1x64x64xf32>, memref<1x64x64xf32>) outs(%acc : memref<1x64x64xf32>) {
  ^bb0(%x: f32, %y: f32, %s: f32):
    %p = arith.mulf %x, %y fastmath<contract> : f32
    %r = arith.addf %s, %p fastmath<contract> : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel", "parallel"]}
      ins(%acc : memref<1x64x64xf32>) outs(%Y : memref<1x64x64xf32>) {
  ^bb0(%v: f32, %o: f32):
    %m = arith.maximumf %v, %zero : f32
    linalg.yield %m : f32
  }
  return
}
