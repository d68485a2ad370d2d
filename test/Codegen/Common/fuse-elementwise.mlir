// RUN: loom-opt %s --split-input-file --loom-fuse-elementwise | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-fuse-elementwise=max-ops=4 | FileCheck %s --check-prefix=CUT

// --loom-fuse-elementwise: upstream's elementwise fusion (a producer with
// one use fused into its consumer) with a bound on the fused body. A chain
// of four generics of two operations each (an op and the yield) is one
// generic by default; with max-ops=4 the two bodies a fusion joins may
// hold at most 4 operations together, so the chain is cut into two
// generics of two links each.

#id = affine_map<(d0) -> (d0)>

// CHECK-LABEL: func.func @chain
// CHECK-COUNT-1: linalg.generic
// CHECK-NOT: linalg.generic
// CHECK-COUNT-4: math.tanh
// CHECK: return
// CUT-LABEL: func.func @chain
// CUT: %[[FIRST:.+]] = linalg.generic
// CUT-COUNT-2: math.tanh
// CUT: linalg.generic {{.*}} ins(%[[FIRST]] :
// CUT-COUNT-2: math.tanh
// CUT-NOT: linalg.generic
// CUT: return
func.func @chain(%x: tensor<8xf32>) -> tensor<8xf32> {
  %e = tensor.empty() : tensor<8xf32>
  %a = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %0 = math.tanh %in : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %b = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%a : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %0 = math.tanh %in : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %c = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%b : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %0 = math.tanh %in : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  %d = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%c : tensor<8xf32>) outs(%e : tensor<8xf32>) {
  ^bb0(%in: f32, %o: f32):
    %0 = math.tanh %in : f32
    linalg.yield %0 : f32
  } -> tensor<8xf32>
  return %d : tensor<8xf32>
}
