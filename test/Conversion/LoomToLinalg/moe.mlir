// RUN: loom-opt %s --split-input-file --convert-loom-to-linalg --mlir-print-local-scope | FileCheck %s

// --convert-loom-to-linalg, the routed pieces of an MoE block: each is a
// linalg.generic (reductions where a count or a dot product is needed) but
// routing's slots, a scan, and every integer that indexes is clamped into
// its tensor first.

// Routing: the rank of each expert per token (a reduction over the other
// experts, in a total order: NaN above every number), the experts of ranks 0..k-1, then one scan per priority over
// the tokens (first choices, then second ones, GShard's order): a running
// count per expert is the choice's position, -1 past the capacity, and a
// second one counts the kept choices per expert, the slot being expert * 5
// + that index; then one pass gives the inverse map the choice n * 2 + k
// at each slot; last the first-choice counts.
// CHECK-LABEL: func.func @route
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK: arith.cmpf uno
// CHECK: arith.cmpf ugt
// CHECK: arith.cmpf oeq
// CHECK: %[[EXPERT:.+]] = linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK: %[[FIRST:.+]]:3 = scf.for %[[N:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[COUNT:.+]] = %{{.+}}, %[[KEPT:.+]] = %{{.+}}, %[[SLOT:.+]] = %{{.+}}) -> (tensor<4xi32>, tensor<4xi32>, tensor<16x2xi32>)
// CHECK: tensor.extract %[[EXPERT]][%[[N]], %{{.+}}] : tensor<16x2xi32>
// CHECK: %[[POS:.+]] = tensor.extract %[[COUNT]][%{{.+}}] : tensor<4xi32>
// CHECK: arith.addi %[[POS]], %{{.+}} : i32
// CHECK: tensor.insert %{{.+}} into %[[COUNT]]
// CHECK: %[[KEEPS:.+]] = arith.cmpi slt, %[[POS]], %{{.+}} : i32
// CHECK: %[[INDEX:.+]] = tensor.extract %[[KEPT]][%{{.+}}] : tensor<4xi32>
// CHECK: tensor.insert %{{.+}} into %[[KEPT]]
// CHECK: %[[AT:.+]] = arith.addi %{{.+}}, %[[INDEX]] : i32
// CHECK: arith.select %[[KEEPS]], %[[AT]], %{{.+}} : i32
// CHECK: tensor.insert %{{.+}} into %[[SLOT]][%[[N]], %{{.+}}] : tensor<16x2xi32>
// CHECK: scf.yield
// CHECK: %[[SLOTS:.+]]:3 = scf.for %{{.+}} = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%{{.+}} = %[[FIRST]]#0, %{{.+}} = %[[FIRST]]#1, %{{.+}} = %[[FIRST]]#2)
// CHECK: scf.for %{{.+}} = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[SOURCE:.+]] = %{{.+}}) -> (tensor<20xi32>)
// CHECK: tensor.extract %[[SLOTS]]#2
// CHECK: tensor.insert %{{.+}} into %[[SOURCE]][%{{.+}}] : tensor<20xi32>
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d1, 0)>, affine_map<(d0, d1) -> (d0)>], iterator_types = ["parallel", "reduction"]}
// CHECK-NOT: loom.moe_route
func.func @route(%p: tensor<16x4xf32>) -> (tensor<16x2xi32>, tensor<16x2xi32>, tensor<20xi32>, tensor<4xf32>) {
  %e, %s, %src, %c = loom.moe_route %p top_k 2 capacity 5 : tensor<16x4xf32> -> tensor<16x2xi32>, tensor<16x2xi32>, tensor<20xi32>, tensor<4xf32>
  return %e, %s, %src, %c : tensor<16x2xi32>, tensor<16x2xi32>, tensor<20xi32>, tensor<4xf32>
}

// -----

// A gathered token row, rounded back to bf16, zero for an empty slot.
// CHECK-LABEL: func.func @dispatch
// CHECK-SAME: (%[[X:[^:]+]]: tensor<16x32xbf16>, %[[SRC:[^:]+]]: tensor<20xi32>
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0)>, affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK-SAME: ins(%[[SRC]] : tensor<20xi32>)
// CHECK: arith.cmpi sge
// CHECK: arith.constant 31 : index
// CHECK: arith.divui
// CHECK: tensor.extract %[[X]]
// CHECK: arith.extf
// CHECK: arith.select
// CHECK: arith.truncf
func.func @dispatch(%x: tensor<16x32xbf16>, %src: tensor<20xi32>, %s: tensor<16x2xi32>) -> tensor<20x32xbf16> {
  %t = loom.moe_dispatch %x[%src, %s] : (tensor<16x32xbf16>, tensor<20xi32>, tensor<16x2xi32>) -> tensor<20x32xbf16>
  return %t : tensor<20x32xbf16>
}

// -----

// Both choices of a token, weighted and summed in f32 in k order.
// CHECK-LABEL: func.func @combine
// CHECK-SAME: (%[[O:[^:]+]]: tensor<20x32xf32>, %{{[^:]+}}: tensor<20xi32>, %[[S:[^:]+]]: tensor<16x2xi32>, %[[G:[^:]+]]: tensor<16x2xf32>)
// CHECK: linalg.generic
// CHECK: tensor.extract %[[S]]
// CHECK: tensor.extract %[[O]]
// CHECK: tensor.extract %[[G]]
// CHECK: arith.mulf
// CHECK: arith.addf
// CHECK: tensor.extract %[[S]]
// CHECK: tensor.extract %[[O]]
// CHECK: tensor.extract %[[G]]
func.func @combine(%o: tensor<20x32xf32>, %src: tensor<20xi32>, %s: tensor<16x2xi32>, %g: tensor<16x2xf32>) -> tensor<16x32xf32> {
  %y = loom.moe_combine %o[%src, %s] weights %g : (tensor<20x32xf32>, tensor<20xi32>, tensor<16x2xi32>, tensor<16x2xf32>) -> tensor<16x32xf32>
  return %y : tensor<16x32xf32>
}

// -----

// Gates: the chosen probabilities over their sum (top 2); the gradient is
// built from the same chosen probabilities, and the slot dot product is a
// reduction over the features.
// CHECK-LABEL: func.func @gates
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK: arith.divf
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK: arith.mulf
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d0, d1)>, affine_map<(d0, d1, d2) -> (d0, d2)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}
func.func @gates(%p: tensor<16x4xf32>, %e: tensor<16x2xi32>, %dg: tensor<16x2xf32>,
                 %y: tensor<16x32xf32>, %o: tensor<20x32xf32>, %s: tensor<16x2xi32>)
    -> (tensor<16x2xf32>, tensor<16x4xf32>, tensor<16x2xf32>) {
  %g = loom.moe_gate %p[%e] : (tensor<16x4xf32>, tensor<16x2xi32>) -> tensor<16x2xf32>
  %dp = loom.moe_gate_grad %p[%e], %dg : (tensor<16x4xf32>, tensor<16x2xi32>, tensor<16x2xf32>) -> tensor<16x4xf32>
  %d = loom.moe_slot_dot %y, %o[%s] : (tensor<16x32xf32>, tensor<20x32xf32>, tensor<16x2xi32>) -> tensor<16x2xf32>
  return %g, %dp, %d : tensor<16x2xf32>, tensor<16x4xf32>, tensor<16x2xf32>
}

// -----

// Routing counts: per expert, its choices and those of them dropped (a
// reduction over every choice).
// CHECK-LABEL: func.func @stats
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3) -> (d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d2, d3)>, affine_map<(d0, d1, d2, d3) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction", "reduction"]}
// CHECK: arith.cmpi slt
// CHECK: arith.addf
func.func @stats(%e: tensor<16x2xi32>, %s: tensor<16x2xi32>) -> tensor<4x2xf32> {
  %st = loom.moe_stats %e, %s : (tensor<16x2xi32>, tensor<16x2xi32>) -> tensor<4x2xf32>
  return %st : tensor<4x2xf32>
}

// -----

// Routing with offsets (a rank's tokens): a choice is kept when its own
// position plus the offset of its priority and expert is below the
// capacity; its slot numbers the send buffer (4 rows per expert).
// CHECK-LABEL: func.func @route_offsets
// CHECK: linalg.generic
// CHECK: linalg.generic
// CHECK: scf.for
// CHECK: arith.constant 4 : i32
// CHECK: arith.muli
// CHECK: tensor.extract %{{.+}}[%{{.+}}, %{{.+}}, %{{.+}}] : tensor<1x2x4xi32>
// CHECK: arith.addi
// CHECK: arith.constant 5 : i32
// CHECK: arith.cmpi slt
func.func @route_offsets(%p: tensor<16x4xf32>, %o: tensor<1x2x4xi32>) -> tensor<16x2xi32> {
  %e, %s, %src, %c = loom.moe_route %p offsets %o top_k 2 capacity 5 buffer 4 : tensor<16x4xf32>, tensor<1x2x4xi32> -> tensor<16x2xi32>, tensor<16x2xi32>, tensor<16xi32>, tensor<4xf32>
  return %s : tensor<16x2xi32>
}

// -----

// A rank's counts per priority and expert: a reduction over its tokens,
// given the leading rank dim.
// CHECK-LABEL: func.func @counts
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1, d2) -> (d2, d0)>, affine_map<(d0, d1, d2) -> (d0, d1)>], iterator_types = ["parallel", "parallel", "reduction"]}
// CHECK: tensor.expand_shape %{{.+}} {{\[\[}}0, 1], [2]] output_shape [1, 2, 4] : tensor<2x4xi32> into tensor<1x2x4xi32>
func.func @counts(%e: tensor<16x2xi32>) -> tensor<1x2x4xi32> {
  %c = loom.moe_counts %e : tensor<16x2xi32> -> tensor<1x2x4xi32>
  return %c : tensor<1x2x4xi32>
}

// -----

// Offsets: a reduction over every rank and priority.
// CHECK-LABEL: func.func @offsets
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1, d2, d3, d4) -> (d3, d4, d2)>, affine_map<(d0, d1, d2, d3, d4) -> (d0, d1, d2)>], iterator_types = ["parallel", "parallel", "parallel", "reduction", "reduction"]}
// CHECK: arith.cmpi ult
// CHECK: arith.cmpi ne
func.func @offsets(%c: tensor<4x2x8xi32>) -> tensor<4x2x8xi32> {
  %o = loom.moe_offsets %c : tensor<4x2x8xi32> -> tensor<4x2x8xi32>
  return %o : tensor<4x2x8xi32>
}

// -----

// The exchange maps: each received row's slot (or -1), then the inverse
// by one pass over the rows, as the route's: the row id at its slot.
// CHECK-LABEL: func.func @exchange_map
// CHECK: %[[SLOT:.+]] = linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK: arith.divui
// CHECK: arith.remui
// CHECK: scf.for %[[R:.+]] = %{{.+}} to %{{.+}} step %{{.+}} iter_args(%[[SOURCE:.+]] = %{{.+}}) -> (tensor<6xi32>)
// CHECK: %[[HELD:.+]] = tensor.extract %[[SLOT]][%[[R]], %{{.+}}] : tensor<16x1xi32>
// CHECK: arith.cmpi sge, %[[HELD]]
// CHECK: arith.cmpi slt, %[[HELD]]
// CHECK: tensor.insert %{{.+}} into %[[SOURCE]][%{{.+}}] : tensor<6xi32>
// CHECK-NOT: loom.moe_exchange_map
func.func @exchange_map(%c: tensor<4x2x2xi32>, %o: tensor<4x2x2xi32>) -> (tensor<16x1xi32>, tensor<6xi32>) {
  %s, %src = loom.moe_exchange_map %c, %o capacity 3 buffer 2 : tensor<4x2x2xi32>, tensor<4x2x2xi32> -> tensor<16x1xi32>, tensor<6xi32>
  return %s, %src : tensor<16x1xi32>, tensor<6xi32>
}

// -----

// With slot blocks the rank's block (its first slot: block[0] * 2) bounds
// the slots each priority contributes, and slots count from it.
// CHECK-LABEL: func.func @exchange_map_blocks
// CHECK-SAME: %[[B:[^:]+]]: tensor<1xi32>
// CHECK: linalg.generic {indexing_maps = [affine_map<(d0, d1) -> (d0, d1)>], iterator_types = ["parallel", "parallel"]}
// CHECK: %[[BLOCK:.+]] = tensor.extract %[[B]][%{{.+}}] : tensor<1xi32>
// CHECK: %[[FIRSTSLOT:.+]] = arith.muli %[[BLOCK]], %{{.+}} : i32
// CHECK: arith.maxsi %{{.+}}, %[[FIRSTSLOT]] : i32
// CHECK: arith.subi %{{.+}}, %[[FIRSTSLOT]] : i32
// CHECK: scf.for %{{.+}} iter_args(%{{.+}} = %{{.+}}) -> (tensor<2xi32>)
// CHECK-NOT: loom.moe_exchange_map
func.func @exchange_map_blocks(%c: tensor<8x2x1xi32>, %o: tensor<8x2x1xi32>, %b: tensor<1xi32>) -> (tensor<8x1xi32>, tensor<2xi32>) {
  %s, %src = loom.moe_exchange_map %c, %o block %b capacity 4 buffer 1 blocks 2 : tensor<8x2x1xi32>, tensor<8x2x1xi32>, tensor<1xi32> -> tensor<8x1xi32>, tensor<2xi32>
  return %s, %src : tensor<8x1xi32>, tensor<2xi32>
}
