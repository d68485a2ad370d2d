// RUN: loom-opt %s --split-input-file --convert-loom-to-linalg --mlir-print-local-scope | FileCheck %s

// --convert-loom-to-linalg, data movement: embedding, arange, transpose,
// reshape, split, concat and causal_mask. Values are moved, never
// converted: no arith.extf/truncf except around causal_mask's select.

// embedding: a generic over the result shape reading the ids through the
// map without the feature dim; the body clamps the id into [0, rows - 1]
// and reads the table with tensor.extract at (id, feature index).
// CHECK-LABEL: func.func @embedding
// CHECK-SAME: (%[[T:[^:]+]]: tensor<100x8xbf16>, %[[IDS:[^:]+]]: tensor<2x3xi32>) -> tensor<2x3x8xbf16>
// CHECK-NEXT: [[E:%.+]] = tensor.empty() : tensor<2x3x8xbf16>
// CHECK-NEXT: [[R:%.+]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel"]}
// CHECK-SAME: ins(%[[IDS]] : tensor<2x3xi32>) outs([[E]] : tensor<2x3x8xbf16>)
// CHECK-NEXT: ^bb0(%[[ID:[^:]+]]: i32, %{{[^:]+}}: bf16):
// CHECK-NEXT: [[I:%.+]] = arith.index_cast %[[ID]] : i32 to index
// CHECK-NEXT: [[C0:%.+]] = arith.constant 0 : index
// CHECK-NEXT: [[C99:%.+]] = arith.constant 99 : index
// CHECK-NEXT: [[LO:%.+]] = arith.maxsi [[I]], [[C0]] : index
// CHECK-NEXT: [[ROW:%.+]] = arith.minsi [[LO]], [[C99]] : index
// CHECK-NEXT: [[D:%.+]] = linalg.index 2 : index
// CHECK-NEXT: [[V:%.+]] = tensor.extract %[[T]][[[ROW]], [[D]]] : tensor<100x8xbf16>
// CHECK-NEXT: linalg.yield [[V]] : bf16
// CHECK-NEXT: } -> tensor<2x3x8xbf16>
// CHECK-NEXT: return [[R]]
func.func @embedding(%t: tensor<100x8xbf16>, %ids: tensor<2x3xi32>) -> tensor<2x3x8xbf16> {
  %0 = loom.embedding %t[%ids] : (tensor<100x8xbf16>, tensor<2x3xi32>) -> tensor<2x3x8xbf16>
  return %0 : tensor<2x3x8xbf16>
}

// -----

// i64 ids, rank 1.
// CHECK-LABEL: func.func @embedding_i64
// CHECK-SAME: (%[[T:[^:]+]]: tensor<7x4xf32>, %[[IDS:[^:]+]]: tensor<5xi64>)
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME: ins(%[[IDS]] : tensor<5xi64>)
// CHECK-NEXT: ^bb0(%[[ID:[^:]+]]: i64, %{{[^:]+}}: f32):
// CHECK-NEXT: arith.index_cast %[[ID]] : i64 to index
// CHECK: arith.constant 6 : index
// CHECK: [[D:%.+]] = linalg.index 1 : index
// CHECK-NEXT: tensor.extract %[[T]][%{{.+}}, [[D]]] : tensor<7x4xf32>
func.func @embedding_i64(%t: tensor<7x4xf32>, %ids: tensor<5xi64>) -> tensor<5x4xf32> {
  %0 = loom.embedding %t[%ids] : (tensor<7x4xf32>, tensor<5xi64>) -> tensor<5x4xf32>
  return %0 : tensor<5x4xf32>
}

// -----

// A vocab-parallel lookup (rows %rows of 100): the id is clamped into the
// whole table's 100 rows, counted from the first row held, and a row not
// held (unsigned compare: one before the first is negative) reads row 0
// and yields zero.
// CHECK-LABEL: func.func @embedding_rows
// CHECK-SAME: (%[[T:[^:]+]]: tensor<50x8xbf16>, %[[IDS:[^:]+]]: tensor<3xi32>, %[[ROWS:[^:]+]]: tensor<50xi32>)
// CHECK: ^bb0(%[[ID:[^:]+]]: i32, %{{[^:]+}}: bf16):
// CHECK-NEXT: [[I:%.+]] = arith.index_cast %[[ID]] : i32 to index
// CHECK: [[C99:%.+]] = arith.constant 99 : index
// CHECK: [[GLOBAL:%.+]] = arith.minsi %{{.+}}, [[C99]] : index
// CHECK: [[FIRST:%.+]] = tensor.extract %[[ROWS]][%{{.+}}] : tensor<50xi32>
// CHECK-NEXT: [[OFFSET:%.+]] = arith.index_cast [[FIRST]] : i32 to index
// CHECK-NEXT: [[ROW:%.+]] = arith.subi [[GLOBAL]], [[OFFSET]] : index
// CHECK-NEXT: [[D:%.+]] = linalg.index 1 : index
// CHECK-NEXT: [[C50:%.+]] = arith.constant 50 : index
// CHECK-NEXT: [[HELD:%.+]] = arith.cmpi ult, [[ROW]], [[C50]] : index
// CHECK: [[SAFE:%.+]] = arith.select [[HELD]], [[ROW]], %{{.+}} : index
// CHECK-NEXT: [[V:%.+]] = tensor.extract %[[T]][[[SAFE]], [[D]]] : tensor<50x8xbf16>
// CHECK-NEXT: [[ZERO:%.+]] = arith.constant 0.000000e+00 : bf16
// CHECK-NEXT: [[R:%.+]] = arith.select [[HELD]], [[V]], [[ZERO]] : bf16
// CHECK-NEXT: linalg.yield [[R]] : bf16
func.func @embedding_rows(%t: tensor<50x8xbf16>, %ids: tensor<3xi32>, %rows: tensor<50xi32>) -> tensor<3x8xbf16> {
  %0 = loom.embedding %t[%ids] rows %rows of 100 : (tensor<50x8xbf16>, tensor<3xi32>, tensor<50xi32>) -> tensor<3x8xbf16>
  return %0 : tensor<3x8xbf16>
}

// -----

// arange: an input-less generic yielding its index.
// CHECK-LABEL: func.func @arange
// CHECK-NEXT: [[E:%.+]] = tensor.empty() : tensor<16xi32>
// CHECK-NEXT: linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs([[E]] : tensor<16xi32>)
// CHECK-NEXT: ^bb0(%{{[^:]+}}: i32):
// CHECK-NEXT: [[I:%.+]] = linalg.index 0 : index
// CHECK-NEXT: [[V:%.+]] = arith.index_cast [[I]] : index to i32
// CHECK-NEXT: linalg.yield [[V]] : i32
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0) -> (d0)>], iterator_types = ["parallel"]} outs(%{{.+}} : tensor<7xi64>)
// CHECK: arith.index_cast %{{.+}} : index to i64
func.func @arange() -> (tensor<16xi32>, tensor<7xi64>) {
  %0 = loom.arange : tensor<16xi32>
  %1 = loom.arange : tensor<7xi64>
  return %0, %1 : tensor<16xi32>, tensor<7xi64>
}

// -----

// transpose: linalg.transpose with the op's permutation.
// CHECK-LABEL: func.func @transpose
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2x16x4x8xf32>, %[[I:[^:]+]]: tensor<3x5xi32>)
// CHECK-NEXT: [[E:%.+]] = tensor.empty() : tensor<2x4x16x8xf32>
// CHECK-NEXT: [[T:%.+]] = linalg.transpose ins(%[[X]] : tensor<2x16x4x8xf32>) outs([[E]] : tensor<2x4x16x8xf32>) permutation = [0, 2, 1, 3]
// CHECK-NEXT: [[E2:%.+]] = tensor.empty() : tensor<5x3xi32>
// CHECK-NEXT: [[T2:%.+]] = linalg.transpose ins(%[[I]] : tensor<3x5xi32>) outs([[E2]] : tensor<5x3xi32>) permutation = [1, 0]
// CHECK-NEXT: return [[T]], [[T2]]
func.func @transpose(%x: tensor<2x16x4x8xf32>, %i: tensor<3x5xi32>) -> (tensor<2x4x16x8xf32>, tensor<5x3xi32>) {
  %0 = loom.transpose %x perm [0, 2, 1, 3] : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
  %1 = loom.transpose %i perm [1, 0] : tensor<3x5xi32> -> tensor<5x3xi32>
  return %0, %1 : tensor<2x4x16x8xf32>, tensor<5x3xi32>
}

// -----

// reshape: collapse to one dimension, then expand to the result shape
// (both are views of the same row-major elements); a rank-1 source needs
// no collapse and a rank-1 result no expand.
// CHECK-LABEL: func.func @reshape
// CHECK-SAME: (%[[Y:[^:]+]]: tensor<2x16x32xf32>, %[[F:[^:]+]]: tensor<32xi32>)
// CHECK-NEXT: [[C:%.+]] = tensor.collapse_shape %[[Y]] {{\[\[}}0, 1, 2]] : tensor<2x16x32xf32> into tensor<1024xf32>
// CHECK-NEXT: [[E:%.+]] = tensor.expand_shape [[C]] {{\[\[}}0, 1, 2, 3]] output_shape [2, 16, 4, 8] : tensor<1024xf32> into tensor<2x16x4x8xf32>
// CHECK-NEXT: [[C2:%.+]] = tensor.collapse_shape %[[Y]] {{\[\[}}0, 1, 2]] : tensor<2x16x32xf32> into tensor<1024xf32>
// CHECK-NEXT: [[E3:%.+]] = tensor.expand_shape %[[F]] {{\[\[}}0, 1]] output_shape [4, 8] : tensor<32xi32> into tensor<4x8xi32>
// CHECK-NEXT: return [[E]], [[C2]], [[E3]]
func.func @reshape(%y: tensor<2x16x32xf32>, %f: tensor<32xi32>) -> (tensor<2x16x4x8xf32>, tensor<1024xf32>, tensor<4x8xi32>) {
  %0 = loom.reshape %y : tensor<2x16x32xf32> -> tensor<2x16x4x8xf32>
  %1 = loom.reshape %y : tensor<2x16x32xf32> -> tensor<1024xf32>
  %2 = loom.reshape %f : tensor<32xi32> -> tensor<4x8xi32>
  return %0, %1, %2 : tensor<2x16x4x8xf32>, tensor<1024xf32>, tensor<4x8xi32>
}

// -----

// split: one tensor.extract_slice per piece, at the running offset along
// the axis; pieces need not be equal.
// CHECK-LABEL: func.func @split
// CHECK-SAME: (%[[Z:[^:]+]]: tensor<16x64xbf16>)
// CHECK-NEXT: [[A:%.+]] = tensor.extract_slice %[[Z]][0, 0] [16, 8] [1, 1] : tensor<16x64xbf16> to tensor<16x8xbf16>
// CHECK-NEXT: [[B:%.+]] = tensor.extract_slice %[[Z]][0, 8] [16, 24] [1, 1] : tensor<16x64xbf16> to tensor<16x24xbf16>
// CHECK-NEXT: [[C:%.+]] = tensor.extract_slice %[[Z]][0, 32] [16, 32] [1, 1] : tensor<16x64xbf16> to tensor<16x32xbf16>
// CHECK-NEXT: [[R0:%.+]] = tensor.extract_slice %[[Z]][0, 0] [8, 64] [1, 1] : tensor<16x64xbf16> to tensor<8x64xbf16>
// CHECK-NEXT: [[R1:%.+]] = tensor.extract_slice %[[Z]][8, 0] [8, 64] [1, 1] : tensor<16x64xbf16> to tensor<8x64xbf16>
// CHECK-NEXT: return [[A]], [[B]], [[C]], [[R0]], [[R1]]
func.func @split(%z: tensor<16x64xbf16>) -> (tensor<16x8xbf16>, tensor<16x24xbf16>, tensor<16x32xbf16>, tensor<8x64xbf16>, tensor<8x64xbf16>) {
  %0:3 = loom.split %z axis 1 : tensor<16x64xbf16> -> tensor<16x8xbf16>, tensor<16x24xbf16>, tensor<16x32xbf16>
  %1:2 = loom.split %z axis 0 : tensor<16x64xbf16> -> tensor<8x64xbf16>, tensor<8x64xbf16>
  return %0#0, %0#1, %0#2, %1#0, %1#1 : tensor<16x8xbf16>, tensor<16x24xbf16>, tensor<16x32xbf16>, tensor<8x64xbf16>, tensor<8x64xbf16>
}

// -----

// concat of up to 16 inputs: a chain of insert_slices into an empty tensor
// along the axis (empty-tensor elimination makes it the kernel's
// destination: the inputs are copied once, into the output); an input may
// repeat. Of more: one tensor.concat (one-shot bufferization analyses a
// chain of n insert_slices in about n^4).
// CHECK-LABEL: func.func @concat
// CHECK-SAME: (%[[A:[^:]+]]: tensor<16x32xbf16>, %[[B:[^:]+]]: tensor<16x8xbf16>)
// CHECK-NEXT: [[E0:%.+]] = tensor.empty() : tensor<16x72xbf16>
// CHECK-NEXT: [[I0:%.+]] = tensor.insert_slice %[[A]] into [[E0]][0, 0] [16, 32] [1, 1] : tensor<16x32xbf16> into tensor<16x72xbf16>
// CHECK-NEXT: [[I1:%.+]] = tensor.insert_slice %[[B]] into [[I0]][0, 32] [16, 8] [1, 1] : tensor<16x8xbf16> into tensor<16x72xbf16>
// CHECK-NEXT: [[C0:%.+]] = tensor.insert_slice %[[A]] into [[I1]][0, 40] [16, 32] [1, 1] : tensor<16x32xbf16> into tensor<16x72xbf16>
// CHECK-NEXT: [[E1:%.+]] = tensor.empty() : tensor<32x32xbf16>
// CHECK-NEXT: [[I2:%.+]] = tensor.insert_slice %[[A]] into [[E1]][0, 0] [16, 32] [1, 1] : tensor<16x32xbf16> into tensor<32x32xbf16>
// CHECK-NEXT: [[C1:%.+]] = tensor.insert_slice %[[A]] into [[I2]][16, 0] [16, 32] [1, 1] : tensor<16x32xbf16> into tensor<32x32xbf16>
// CHECK-NEXT: [[C2:%.+]] = tensor.concat dim(1) %[[B]], {{.+}} : ({{.+}}) -> tensor<16x136xbf16>
// CHECK-NEXT: return [[C0]], [[C1]], [[C2]]
func.func @concat(%a: tensor<16x32xbf16>, %b: tensor<16x8xbf16>) -> (tensor<16x72xbf16>, tensor<32x32xbf16>, tensor<16x136xbf16>) {
  %0 = loom.concat %a, %b, %a axis 1 : (tensor<16x32xbf16>, tensor<16x8xbf16>, tensor<16x32xbf16>) -> tensor<16x72xbf16>
  %1 = loom.concat %a, %a axis 0 : (tensor<16x32xbf16>, tensor<16x32xbf16>) -> tensor<32x32xbf16>
  %2 = loom.concat %b, %b, %b, %b, %b, %b, %b, %b, %b, %b, %b, %b, %b, %b, %b, %b, %b axis 1 : (tensor<16x8xbf16>, tensor<16x8xbf16>, tensor<16x8xbf16>, tensor<16x8xbf16>, tensor<16x8xbf16>, tensor<16x8xbf16>, tensor<16x8xbf16>, tensor<16x8xbf16>, tensor<16x8xbf16>, tensor<16x8xbf16>, tensor<16x8xbf16>, tensor<16x8xbf16>, tensor<16x8xbf16>, tensor<16x8xbf16>, tensor<16x8xbf16>, tensor<16x8xbf16>, tensor<16x8xbf16>) -> tensor<16x136xbf16>
  return %0, %1, %2 : tensor<16x72xbf16>, tensor<32x32xbf16>, tensor<16x136xbf16>
}

// -----

// causal_mask: elementwise over the input; the element is replaced by
// -inf where the key index (last dim) is greater than the query index
// (second to last), selected in f32 and rounded once for bf16.
// CHECK-LABEL: func.func @causal_mask
// CHECK-SAME: (%[[S:[^:]+]]: tensor<2x4x16x16xbf16>)
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>], iterator_types = ["parallel", "parallel", "parallel", "parallel"]}
// CHECK-SAME: ins(%[[S]] : tensor<2x4x16x16xbf16>) outs(%{{.+}} : tensor<2x4x16x16xbf16>)
// CHECK-NEXT: ^bb0(%[[IN:[^:]+]]: bf16, %{{[^:]+}}: bf16):
// CHECK-NEXT: [[W:%.+]] = arith.extf %[[IN]] : bf16 to f32
// CHECK-NEXT: [[Q:%.+]] = linalg.index 2 : index
// CHECK-NEXT: [[K:%.+]] = linalg.index 3 : index
// CHECK-NEXT: [[ABOVE:%.+]] = arith.cmpi ugt, [[K]], [[Q]] : index
// CHECK-NEXT: [[NINF:%.+]] = arith.constant 0xFF800000 : f32
// CHECK-NEXT: [[SEL:%.+]] = arith.select [[ABOVE]], [[NINF]], [[W]] : f32
// CHECK-NEXT: [[T:%.+]] = arith.truncf [[SEL]] : f32 to bf16
// CHECK-NEXT: linalg.yield [[T]] : bf16
func.func @causal_mask(%s: tensor<2x4x16x16xbf16>) -> tensor<2x4x16x16xbf16> {
  %0 = loom.causal_mask %s : tensor<2x4x16x16xbf16>
  return %0 : tensor<2x4x16x16xbf16>
}

// -----

// Rank 2, non-square, f32: dims 0 and 1, no conversions.
// CHECK-LABEL: func.func @causal_mask_f32
// CHECK: ^bb0(%[[IN:[^:]+]]: f32, %{{[^:]+}}: f32):
// CHECK-NEXT: [[Q:%.+]] = linalg.index 0 : index
// CHECK-NEXT: [[K:%.+]] = linalg.index 1 : index
// CHECK-NEXT: [[ABOVE:%.+]] = arith.cmpi ugt, [[K]], [[Q]] : index
// CHECK-NEXT: [[NINF:%.+]] = arith.constant 0xFF800000 : f32
// CHECK-NEXT: [[SEL:%.+]] = arith.select [[ABOVE]], [[NINF]], %[[IN]] : f32
// CHECK-NEXT: linalg.yield [[SEL]] : f32
func.func @causal_mask_f32(%s: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %0 = loom.causal_mask %s : tensor<4x8xf32>
  return %0 : tensor<4x8xf32>
}
