// RUN: loom-opt %s --split-input-file --loom-interchange-for-cpu | FileCheck %s

// An embedding's gradient, out[v, d] = sum_p (ids[p] == v ? dy[p, d] : 0):
// the output's contiguous dim d moves innermost, (v, d, p) -> (v, p, d), so
// the inner loop walks a row of dy.
// CHECK: #[[$IDS:.+]] = affine_map<(d0, d1, d2) -> (d1)>
// CHECK: #[[$DY:.+]] = affine_map<(d0, d1, d2) -> (d1, d2)>
// CHECK: #[[$OUT:.+]] = affine_map<(d0, d1, d2) -> (d0, d2)>
// CHECK-LABEL: func.func @embedding_grad
// CHECK: linalg.generic {indexing_maps = [#[[$IDS]], #[[$DY]], #[[$OUT]]], iterator_types = ["parallel", "reduction", "parallel"]}
// The id test still compares with v, loop 0.
// CHECK: %[[V:.+]] = linalg.index 0
// CHECK: %[[V2:.+]] = affine.apply #{{.+}}(%[[V]], %{{.+}}, %{{.+}})
// CHECK: arith.cmpi eq, %{{.+}}, %[[V2]]
func.func @embedding_grad(%ids: memref<8xindex>, %dy: memref<8x4xf32>, %out: memref<16x4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(v, d, p) -> (p)>, affine_map<(v, d, p) -> (p, d)>, affine_map<(v, d, p) -> (v, d)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%ids, %dy : memref<8xindex>, memref<8x4xf32>) outs(%out : memref<16x4xf32>) {
  ^bb0(%id: index, %g: f32, %acc: f32):
    %v = linalg.index 0 : index
    %hit = arith.cmpi eq, %id, %v : index
    %sum = arith.addf %acc, %g : f32
    %r = arith.select %hit, %sum, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A bias's gradient, out[d] = sum_n dy[n, d]: (d, n) -> (n, d).
// CHECK: #[[$DY:.+]] = affine_map<(d0, d1) -> (d0, d1)>
// CHECK: #[[$OUT:.+]] = affine_map<(d0, d1) -> (d1)>
// CHECK-LABEL: func.func @bias_grad
// CHECK: linalg.generic {indexing_maps = [#[[$DY]], #[[$OUT]]], iterator_types = ["reduction", "parallel"]}
func.func @bias_grad(%dy: memref<8x4xf32>, %out: memref<4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(d, n) -> (n, d)>, affine_map<(d, n) -> (d)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%dy : memref<8x4xf32>) outs(%out : memref<4xf32>) {
  ^bb0(%g: f32, %acc: f32):
    %s = arith.addf %acc, %g : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// Left alone: a row sum (the contiguous dim is the reduced one), an
// elementwise op (no reduction after its innermost dim) and a matmul (the
// register tiles' business).
// CHECK-LABEL: func.func @untouched
// CHECK: iterator_types = ["parallel", "reduction"]
// CHECK: iterator_types = ["parallel", "parallel"]
// CHECK: iterator_types = ["parallel", "parallel", "reduction"]
func.func @untouched(%x: memref<8x4xf32>, %rows: memref<8xf32>, %y: memref<8x4xf32>,
                     %a: memref<8x4xf32>, %b: memref<4x4xf32>, %c: memref<8x4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r)>],
                  iterator_types = ["parallel", "reduction"]}
      ins(%x : memref<8x4xf32>) outs(%rows : memref<8xf32>) {
  ^bb0(%v: f32, %acc: f32):
    %s = arith.addf %acc, %v : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [affine_map<(r, c) -> (r, c)>, affine_map<(r, c) -> (r, c)>],
                  iterator_types = ["parallel", "parallel"]}
      ins(%x : memref<8x4xf32>) outs(%y : memref<8x4xf32>) {
  ^bb0(%v: f32, %o: f32):
    %n = arith.negf %v : f32
    linalg.yield %n : f32
  }
  linalg.generic {indexing_maps = [affine_map<(m, n, k) -> (m, k)>, affine_map<(m, n, k) -> (k, n)>, affine_map<(m, n, k) -> (m, n)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%a, %b : memref<8x4xf32>, memref<4x4xf32>) outs(%c : memref<8x4xf32>) {
  ^bb0(%u: f32, %w: f32, %acc: f32):
    %p = arith.mulf %u, %w : f32
    %s = arith.addf %acc, %p : f32
    linalg.yield %s : f32
  }
  return
}
