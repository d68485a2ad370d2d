// RUN: loom-opt %s --split-input-file --loom-scatter-embedding-gradients | FileCheck %s

// An embedding's gradient over ids [2, 3] (GradientsToLinalg's one-hot
// sum, bf16 terms widened): a loop over the positions, each adding its dy
// row into the output row its clamped id selects.
// CHECK-LABEL: func.func @embedding_grad
// CHECK-SAME: (%[[IDS:.+]]: memref<2x3xi32>, %[[DY:.+]]: memref<2x3x4xbf16>, %[[OUT:.+]]: memref<16x4xf32>)
// CHECK-NOT: linalg.index
// CHECK: scf.for %[[B:.+]] = %{{.+}} to %{{.+}} step
// CHECK: scf.for %[[T:.+]] = %{{.+}} to %{{.+}} step
// CHECK: %[[ID:.+]] = memref.load %[[IDS]][%[[B]], %[[T]]]
// CHECK: %[[INDEX:.+]] = arith.index_cast %[[ID]]
// CHECK: %[[LOW:.+]] = arith.maxsi %[[INDEX]]
// CHECK: %[[ROW:.+]] = arith.minsi %[[LOW]]
// CHECK: %[[OUTROW:.+]] = memref.subview %[[OUT]][%[[ROW]], 0] [1, 4] [1, 1] : memref<16x4xf32> to memref<4xf32, strided<[1], offset: ?>>
// CHECK: %[[DYROW:.+]] = memref.subview %[[DY]][%[[B]], %[[T]], 0] [1, 1, 4] [1, 1, 1] : memref<2x3x4xbf16> to memref<4xbf16, strided<[1], offset: ?>>
// CHECK: linalg.generic {{.+}} iterator_types = ["parallel"]} ins(%[[DYROW]] : {{.+}}) outs(%[[OUTROW]] : {{.+}})
// CHECK-NEXT: ^bb0(%[[G:.+]]: bf16, %[[ACC:.+]]: f32):
// CHECK-NEXT: %[[W:.+]] = arith.extf %[[G]] : bf16 to f32
// CHECK-NEXT: %[[SUM:.+]] = arith.addf %[[ACC]], %[[W]] : f32
// CHECK-NEXT: linalg.yield %[[SUM]] : f32
// CHECK-NOT: arith.select
func.func @embedding_grad(%ids: memref<2x3xi32>, %dy: memref<2x3x4xbf16>, %out: memref<16x4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(v, d, b, t) -> (b, t)>, affine_map<(v, d, b, t) -> (b, t, d)>, affine_map<(v, d, b, t) -> (v, d)>],
                  iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
      ins(%ids, %dy : memref<2x3xi32>, memref<2x3x4xbf16>) outs(%out : memref<16x4xf32>) {
  ^bb0(%id: i32, %g: bf16, %acc: f32):
    %c0 = arith.constant 0 : index
    %c15 = arith.constant 15 : index
    %i = arith.index_cast %id : i32 to index
    %lo = arith.maxsi %i, %c0 : index
    %row = arith.minsi %lo, %c15 : index
    %v = linalg.index 0 : index
    %hit = arith.cmpi eq, %row, %v : index
    %w = arith.extf %g : bf16 to f32
    %sum = arith.addf %acc, %w : f32
    %r = arith.select %hit, %sum, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// One position dim, the compare's operands the other way round.
// CHECK-LABEL: func.func @flat_ids
// CHECK: scf.for %[[P:.+]] =
// CHECK-NOT: scf.for
// CHECK: %[[ID:.+]] = memref.load %{{.+}}[%[[P]]] : memref<8xindex>
// CHECK: memref.subview %{{.+}}[%[[ID]], 0] [1, 4] [1, 1]
// CHECK: memref.subview %{{.+}}[%[[P]], 0] [1, 4] [1, 1]
// CHECK: arith.addf
func.func @flat_ids(%ids: memref<8xindex>, %dy: memref<8x4xf32>, %out: memref<16x4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(v, d, p) -> (p)>, affine_map<(v, d, p) -> (p, d)>, affine_map<(v, d, p) -> (v, d)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%ids, %dy : memref<8xindex>, memref<8x4xf32>) outs(%out : memref<16x4xf32>) {
  ^bb0(%id: index, %g: f32, %acc: f32):
    %v = linalg.index 0 : index
    %hit = arith.cmpi eq, %v, %id : index
    %sum = arith.addf %g, %acc : f32
    %r = arith.select %hit, %sum, %acc : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// Left alone: a compare with the column index (not a one-hot row), a row
// that depends on dy, and a select that keeps the sum where ids differ.
// CHECK-LABEL: func.func @untouched
// CHECK-NOT: scf.for
// CHECK-COUNT-3: linalg.generic
func.func @untouched(%ids: memref<8xindex>, %dy: memref<8x4xf32>, %out: memref<16x4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(v, d, p) -> (p)>, affine_map<(v, d, p) -> (p, d)>, affine_map<(v, d, p) -> (v, d)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%ids, %dy : memref<8xindex>, memref<8x4xf32>) outs(%out : memref<16x4xf32>) {
  ^bb0(%id: index, %g: f32, %acc: f32):
    %d = linalg.index 1 : index
    %hit = arith.cmpi eq, %id, %d : index
    %sum = arith.addf %acc, %g : f32
    %r = arith.select %hit, %sum, %acc : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(v, d, p) -> (p)>, affine_map<(v, d, p) -> (p, d)>, affine_map<(v, d, p) -> (v, d)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%ids, %dy : memref<8xindex>, memref<8x4xf32>) outs(%out : memref<16x4xf32>) {
  ^bb0(%id: index, %g: f32, %acc: f32):
    %v = linalg.index 0 : index
    %gi = arith.fptosi %g : f32 to i64
    %gx = arith.index_cast %gi : i64 to index
    %row = arith.addi %id, %gx : index
    %hit = arith.cmpi eq, %row, %v : index
    %sum = arith.addf %acc, %g : f32
    %r = arith.select %hit, %sum, %acc : f32
    linalg.yield %r : f32
  }
  linalg.generic {indexing_maps = [affine_map<(v, d, p) -> (p)>, affine_map<(v, d, p) -> (p, d)>, affine_map<(v, d, p) -> (v, d)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%ids, %dy : memref<8xindex>, memref<8x4xf32>) outs(%out : memref<16x4xf32>) {
  ^bb0(%id: index, %g: f32, %acc: f32):
    %v = linalg.index 0 : index
    %hit = arith.cmpi eq, %id, %v : index
    %sum = arith.addf %acc, %g : f32
    %r = arith.select %hit, %acc, %sum : f32
    linalg.yield %r : f32
  }
  return
}

// -----

// A vocab-parallel table's gradient (rows held from %rows[0] on): the row
// is the clamped id less the first row held, loaded from the rows buffer
// (read only, so as good as pure); a position whose row this rank does
// not hold adds nothing.
// CHECK-LABEL: func.func @rows_held
// CHECK-SAME: (%[[IDS:.+]]: memref<8xi32>, %[[DY:.+]]: memref<8x4xf32>, %[[ROWS:.+]]: memref<16xi32>, %[[OUT:.+]]: memref<16x4xf32>)
// CHECK: scf.for %[[P:.+]] =
// CHECK: %[[FIRST:.+]] = memref.load %[[ROWS]][%{{.+}}] : memref<16xi32>
// CHECK: %[[ROW:.+]] = arith.subi %{{.+}}, %{{.+}} : index
// CHECK: %[[HELD:.+]] = arith.cmpi ult, %[[ROW]], %{{.+}} : index
// CHECK: scf.if %[[HELD]] {
// CHECK: memref.subview %[[OUT]][%[[ROW]], 0] [1, 4] [1, 1]
// CHECK: arith.addf
func.func @rows_held(%ids: memref<8xi32>, %dy: memref<8x4xf32>, %rows: memref<16xi32>, %out: memref<16x4xf32>) {
  linalg.generic {indexing_maps = [affine_map<(v, d, p) -> (p)>, affine_map<(v, d, p) -> (p, d)>, affine_map<(v, d, p) -> (v, d)>],
                  iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%ids, %dy : memref<8xi32>, memref<8x4xf32>) outs(%out : memref<16x4xf32>) {
  ^bb0(%id: i32, %g: f32, %acc: f32):
    %c0 = arith.constant 0 : index
    %c31 = arith.constant 31 : index
    %i = arith.index_cast %id : i32 to index
    %lo = arith.maxsi %i, %c0 : index
    %global = arith.minsi %lo, %c31 : index
    %first = memref.load %rows[%c0] : memref<16xi32>
    %offset = arith.index_cast %first : i32 to index
    %row = arith.subi %global, %offset : index
    %v = linalg.index 0 : index
    %hit = arith.cmpi eq, %row, %v : index
    %sum = arith.addf %acc, %g : f32
    %r = arith.select %hit, %sum, %acc : f32
    linalg.yield %r : f32
  }
  return
}
