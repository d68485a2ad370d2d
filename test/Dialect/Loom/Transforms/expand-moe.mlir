// RUN: loom-opt %s --split-input-file --loom-expand-moe --verify-diagnostics | FileCheck %s

// --loom-expand-moe: a loom.moe becomes the f32 router matmul and softmax,
// loom.moe_route, the gates, the gather into [experts * capacity, D]
// slots, the expert body once over [experts, capacity, ...] (a lower-rank
// operand of a broadcast gets size-1 dims after the expert dim) and the
// weighted gather back, reshaped to the block's result.

// CHECK-LABEL: func.func @top2
// CHECK-SAME: (%[[X:.+]]: tensor<2x8x32xbf16>, %[[R:.+]]: tensor<32x4xf32>, %[[W1:.+]]: tensor<4x32x64xbf16>, %[[B1:.+]]: tensor<4x64xbf16>, %[[W2:.+]]: tensor<4x64x32xbf16>)
func.func @top2(%x: tensor<2x8x32xbf16>, %r: tensor<32x4xf32>, %w1: tensor<4x32x64xbf16>,
                %b1: tensor<4x64xbf16>, %w2: tensor<4x64x32xbf16>) -> tensor<2x8x32xbf16> {
  // CHECK: [[T:%.+]] = loom.reshape %[[X]] : tensor<2x8x32xbf16> -> tensor<16x32xbf16>
  // The router in f32.
  // CHECK: [[TF:%.+]] = loom.cast [[T]] : tensor<16x32xbf16> to tensor<16x32xf32>
  // CHECK: [[L:%.+]] = loom.matmul [[TF]], %[[R]] accumulate f32 : (tensor<16x32xf32>, tensor<32x4xf32>) -> tensor<16x4xf32>
  // CHECK: [[P:%.+]] = loom.softmax [[L]] axis 1 : tensor<16x4xf32>
  // CHECK: %[[E:.+]], %[[S:.+]], %[[SRC:.+]], %{{.+}} = loom.moe_route [[P]] top_k 2 capacity 8 {loom.moe_axis = "ep"} : tensor<16x4xf32> -> tensor<16x2xi32>, tensor<16x2xi32>, tensor<32xi32>, tensor<4xf32>
  // CHECK: [[G:%.+]] = loom.moe_gate [[P]][%[[E]]] : (tensor<16x4xf32>, tensor<16x2xi32>) -> tensor<16x2xf32>
  // CHECK: [[D:%.+]] = loom.moe_dispatch [[T]][%[[SRC]], %[[S]]] : (tensor<16x32xbf16>, tensor<32xi32>, tensor<16x2xi32>) -> tensor<32x32xbf16>
  // CHECK: [[D3:%.+]] = loom.reshape [[D]] : tensor<32x32xbf16> -> tensor<4x8x32xbf16>
  // CHECK: [[H:%.+]] = loom.matmul [[D3]], %[[W1]] accumulate f32 : (tensor<4x8x32xbf16>, tensor<4x32x64xbf16>) -> tensor<4x8x64xbf16>
  // CHECK: [[B:%.+]] = loom.reshape %[[B1]] : tensor<4x64xbf16> -> tensor<4x1x64xbf16>
  // CHECK: [[HB:%.+]] = loom.add [[H]], [[B]] : (tensor<4x8x64xbf16>, tensor<4x1x64xbf16>) -> tensor<4x8x64xbf16>
  // CHECK: [[A:%.+]] = loom.gelu [[HB]] : tensor<4x8x64xbf16>
  // CHECK: [[O:%.+]] = loom.matmul [[A]], %[[W2]] accumulate f32 : (tensor<4x8x64xbf16>, tensor<4x64x32xbf16>) -> tensor<4x8x32xbf16>
  // CHECK: [[O2:%.+]] = loom.reshape [[O]] : tensor<4x8x32xbf16> -> tensor<32x32xbf16>
  // CHECK: [[Y:%.+]] = loom.moe_combine [[O2]][%[[SRC]], %[[S]]] weights [[G]] : (tensor<32x32xbf16>, tensor<32xi32>, tensor<16x2xi32>, tensor<16x2xf32>) -> tensor<16x32xbf16>
  // CHECK: [[Y3:%.+]] = loom.reshape [[Y]] : tensor<16x32xbf16> -> tensor<2x8x32xbf16>
  // CHECK-NOT: loom.moe
  // CHECK: return [[Y3]]
  %0 = loom.moe %x router %r params(%w1, %b1, %w2) {axis = "ep", capacity = 8 : i64,
                capacity_factor = 1.0 : f64, experts = 4 : i64, top_k = 2 : i64}
      : (tensor<2x8x32xbf16>, tensor<32x4xf32>, tensor<4x32x64xbf16>, tensor<4x64xbf16>, tensor<4x64x32xbf16>) -> tensor<2x8x32xbf16> {
  ^bb0(%t: tensor<8x32xbf16>, %e1: tensor<32x64xbf16>, %eb: tensor<64xbf16>, %e2: tensor<64x32xbf16>):
    %h = loom.matmul %t, %e1 accumulate f32 : (tensor<8x32xbf16>, tensor<32x64xbf16>) -> tensor<8x64xbf16>
    %hb = loom.add %h, %eb : (tensor<8x64xbf16>, tensor<64xbf16>) -> tensor<8x64xbf16>
    %a = loom.gelu %hb : tensor<8x64xbf16>
    %o = loom.matmul %a, %e2 accumulate f32 : (tensor<8x64xbf16>, tensor<64x32xbf16>) -> tensor<8x32xbf16>
    loom.yield %o : tensor<8x32xbf16>
  }
  return %0 : tensor<2x8x32xbf16>
}

// -----

// Axes move by one (the expert dim comes first); constants stay unbatched
// and broadcast as they did.
// CHECK-LABEL: func.func @axes
func.func @axes(%x: tensor<10x4xf32>, %r: tensor<4x3xf32>) -> tensor<10x1xf32> {
  // CHECK: loom.moe_route %{{.+}} top_k 1 capacity 5
  // CHECK: [[D3:%.+]] = loom.reshape %{{.+}} : tensor<15x4xf32> -> tensor<3x5x4xf32>
  // CHECK: [[SM:%.+]] = loom.softmax [[D3]] axis 2 : tensor<3x5x4xf32>
  // CHECK: [[C:%.+]] = loom.constant 2.000000e+00 : tensor<f32>
  // CHECK: [[M:%.+]] = loom.mul [[SM]], [[C]] : (tensor<3x5x4xf32>, tensor<f32>) -> tensor<3x5x4xf32>
  // CHECK: [[S:%.+]] = loom.sum [[M]] axis 2 keepdim : tensor<3x5x4xf32> -> tensor<3x5x1xf32>
  // CHECK: loom.reshape [[S]] : tensor<3x5x1xf32> -> tensor<15x1xf32>
  %0 = loom.moe %x router %r {axis = "ep", capacity = 5 : i64,
                capacity_factor = 1.5 : f64, experts = 3 : i64, top_k = 1 : i64}
      : (tensor<10x4xf32>, tensor<4x3xf32>) -> tensor<10x1xf32> {
  ^bb0(%t: tensor<5x4xf32>):
    %p = loom.softmax %t axis 1 : tensor<5x4xf32>
    %c = loom.constant 2.0 : tensor<f32>
    %m = loom.mul %p, %c : (tensor<5x4xf32>, tensor<f32>) -> tensor<5x4xf32>
    %s = loom.sum %m axis 1 keepdim : tensor<5x4xf32> -> tensor<5x1xf32>
    loom.yield %s : tensor<5x1xf32>
  }
  return %0 : tensor<10x1xf32>
}

// -----

// With aux_loss, a trained model's loss gains aux_loss * E * sum_e f_e P_e:
// f from the first-choice counts over the 8 tokens, P the mean probability.
// The block is named after its router param: the route says so, and the
// model gains the output moe_stats.ffn.0 (routed and dropped per expert).
// CHECK-LABEL: func.func @balanced
// CHECK-SAME: -> (tensor<8x4xf32>, tensor<f32> {loom.loss = "loss"}, tensor<2x2xf32> {loom.output = "moe_stats.ffn.0"})
func.func @balanced(%x: tensor<8x4xf32>, %r: tensor<4x2xf32> {loom.param = "ffn.0.router"}, %t: tensor<8x4xf32>)
    -> (tensor<8x4xf32>, tensor<f32> {loom.loss = "loss"}) {
  // CHECK: [[P:%.+]] = loom.softmax
  // CHECK: %[[EX:.+]], %[[SL:.+]], %{{.+}}, %[[COUNTS:.+]] = loom.moe_route [[P]] top_k 1 capacity 4 {loom.moe_axis = "ep", loom.moe_block = "ffn.0"}
  // CHECK: [[STATS:%.+]] = loom.moe_stats %[[EX]], %[[SL]] : (tensor<8x1xi32>, tensor<8x1xi32>) -> tensor<2x2xf32>
  // CHECK: [[Y:%.+]] = loom.moe_combine
  // CHECK: [[INV:%.+]] = loom.constant 1.250000e-01 : tensor<f32>
  // CHECK: [[F:%.+]] = loom.mul %[[COUNTS]], [[INV]] : (tensor<2xf32>, tensor<f32>) -> tensor<2xf32>
  // CHECK: [[PM:%.+]] = loom.mean [[P]] axis 0 : tensor<8x2xf32> -> tensor<2xf32>
  // CHECK: [[FP:%.+]] = loom.mul [[F]], [[PM]]
  // CHECK: [[SUM:%.+]] = loom.sum [[FP]] axis 0 : tensor<2xf32> -> tensor<f32>
  // 0.5 * 2 experts.
  // CHECK: [[W:%.+]] = loom.constant 1.000000e+00 : tensor<f32>
  // CHECK: [[AUX:%.+]] = loom.mul [[SUM]], [[W]]
  // CHECK: [[L:%.+]] = loom.mse [[Y]], %{{.+}}
  // CHECK: [[TOTAL:%.+]] = loom.add [[L]], [[AUX]] : (tensor<f32>, tensor<f32>) -> tensor<f32>
  // CHECK: return [[Y]], [[TOTAL]], [[STATS]]
  %0 = loom.moe %x router %r {axis = "ep", capacity = 4 : i64, capacity_factor = 1.0 : f64,
                experts = 2 : i64, top_k = 1 : i64, aux_loss = 0.5 : f64}
      : (tensor<8x4xf32>, tensor<4x2xf32>) -> tensor<8x4xf32> {
  ^bb0(%tile: tensor<4x4xf32>):
    %n = loom.neg %tile : tensor<4x4xf32>
    loom.yield %n : tensor<4x4xf32>
  }
  %l = loom.mse %0, %t : (tensor<8x4xf32>, tensor<8x4xf32>) -> tensor<f32>
  return %0, %l : tensor<8x4xf32>, tensor<f32>
}

// -----

// Inside a pipeline stage the expansion keeps the block's stage.
// CHECK-LABEL: func.func @staged
func.func @staged(%x: tensor<4x4xf32>, %r: tensor<4x2xf32>) -> tensor<4x4xf32> {
  // CHECK: loom.softmax {{.*}} {loom.stage = 1 : i64}
  // CHECK: loom.moe_route {{.*}} {loom.moe_axis = "ep", loom.stage = 1 : i64}
  // CHECK: loom.moe_combine {{.*}} {loom.stage = 1 : i64}
  %0 = loom.moe %x router %r {axis = "ep", capacity = 2 : i64, capacity_factor = 1.0 : f64,
                experts = 2 : i64, top_k = 1 : i64, loom.stage = 1 : i64}
      : (tensor<4x4xf32>, tensor<4x2xf32>) -> tensor<4x4xf32> {
  ^bb0(%tile: tensor<2x4xf32>):
    loom.yield %tile : tensor<2x4xf32>
  }
  return %0 : tensor<4x4xf32>
}

// -----

func.func @unsupported(%x: tensor<4x4xf32>, %r: tensor<4x2xf32>, %g: tensor<2x4xf32>) -> tensor<4x4xf32> {
  %0 = loom.moe %x router %r params(%g) {axis = "ep", capacity = 2 : i64, capacity_factor = 1.0 : f64,
                experts = 2 : i64, top_k = 1 : i64}
      : (tensor<4x4xf32>, tensor<4x2xf32>, tensor<2x4xf32>) -> tensor<4x4xf32> {
  ^bb0(%tile: tensor<2x4xf32>, %scale: tensor<4xf32>):
    // expected-error @+1 {{'loom.rmsnorm' is not supported in an MoE expert body yet}}
    %n = loom.rmsnorm %tile scale %scale epsilon 1.0e-5 : (tensor<2x4xf32>, tensor<4xf32>) -> tensor<2x4xf32>
    loom.yield %n : tensor<2x4xf32>
  }
  return %0 : tensor<4x4xf32>
}

// -----

// f32 tokens into bf16 experts: the body only reads its tile narrowed, so
// the tokens are cast before the dispatch (a cast commutes with the
// gather) and the slot buffer is bf16.
// CHECK-LABEL: func.func @narrowed
// CHECK-SAME: (%[[X:[^:]+]]: tensor<16x32xf32>
// CHECK: loom.moe_route
// CHECK: [[N:%.+]] = loom.cast %[[X]] : tensor<16x32xf32> to tensor<16x32xbf16>
// CHECK: [[D:%.+]] = loom.moe_dispatch [[N]][%{{.+}}, %{{.+}}] : (tensor<16x32xbf16>, tensor<32xi32>, tensor<16x2xi32>) -> tensor<32x32xbf16>
// CHECK: [[D3:%.+]] = loom.reshape [[D]] : tensor<32x32xbf16> -> tensor<4x8x32xbf16>
// CHECK-NEXT: loom.matmul [[D3]], %{{.+}} accumulate f32 : (tensor<4x8x32xbf16>, tensor<4x32x32xbf16>) -> tensor<4x8x32xbf16>
// CHECK-NOT: loom.cast {{.*}} : tensor<4x8x32xf32> to tensor<4x8x32xbf16>
func.func @narrowed(%x: tensor<16x32xf32>, %r: tensor<32x4xf32>, %w: tensor<4x32x32xbf16>) -> tensor<16x32xbf16> {
  %0 = loom.moe %x router %r params(%w) {axis = "ep", capacity = 8 : i64,
                capacity_factor = 1.0 : f64, experts = 4 : i64, top_k = 2 : i64}
      : (tensor<16x32xf32>, tensor<32x4xf32>, tensor<4x32x32xbf16>) -> tensor<16x32xbf16> {
  ^bb0(%t: tensor<8x32xf32>, %e: tensor<32x32xbf16>):
    %c = loom.cast %t : tensor<8x32xf32> to tensor<8x32xbf16>
    %o = loom.matmul %c, %e accumulate f32 : (tensor<8x32xbf16>, tensor<32x32xbf16>) -> tensor<8x32xbf16>
    loom.yield %o : tensor<8x32xbf16>
  }
  return %0 : tensor<16x32xbf16>
}

// -----

// An expert body computes from its tokens and params: a matmul by a
// constant has no expert dimension to batch over.
func.func @constant_matmul(%x: tensor<16x32xf32>, %r: tensor<32x4xf32>) -> tensor<16x32xf32> {
  %0 = loom.moe %x router %r params() {axis = "ep", capacity = 4 : i64,
                capacity_factor = 1.0 : f64, experts = 4 : i64, top_k = 1 : i64}
      : (tensor<16x32xf32>, tensor<32x4xf32>) -> tensor<16x32xf32> {
  ^bb0(%t: tensor<4x32xf32>):
    %w = arith.constant dense<1.0> : tensor<32x32xf32>
    // expected-error @+1 {{an expert body's matmul needs both operands computed from the tokens or the expert params}}
    %o = loom.matmul %t, %w accumulate f32 : (tensor<4x32xf32>, tensor<32x32xf32>) -> tensor<4x32xf32>
    loom.yield %o : tensor<4x32xf32>
  }
  return %0 : tensor<16x32xf32>
}

// -----

func.func @constant_exp(%x: tensor<16x32xf32>, %r: tensor<32x4xf32>) -> tensor<16x32xf32> {
  %0 = loom.moe %x router %r params() {axis = "ep", capacity = 4 : i64,
                capacity_factor = 1.0 : f64, experts = 4 : i64, top_k = 1 : i64}
      : (tensor<16x32xf32>, tensor<32x4xf32>) -> tensor<16x32xf32> {
  ^bb0(%t: tensor<4x32xf32>):
    %c = loom.constant 1.0 : tensor<f32>
    // expected-error @+1 {{'loom.exp' in an MoE expert body needs an operand computed from the tokens or the expert params}}
    %g = loom.exp %c : tensor<f32>
    %o = loom.add %t, %g : (tensor<4x32xf32>, tensor<f32>) -> tensor<4x32xf32>
    loom.yield %o : tensor<4x32xf32>
  }
  return %0 : tensor<16x32xf32>
}
