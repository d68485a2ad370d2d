// RUN: loom-opt %s --split-input-file --loom-fuse-update-producers | FileCheck %s

// --loom-fuse-update-producers: in an update kernel (loom.update_kernel),
// an elementwise temporary read by several generics (the clipped gradient
// g * c that both Adam moments read) is recomputed in each of them; a
// value the kernel returns (a new moment, which the new param also reads)
// stays where it is. Kernels of other kinds are left alone.

#id = affine_map<(d0) -> (d0)>
#scalar = affine_map<(d0) -> ()>

// CHECK-LABEL: func.func private @update
// CHECK-SAME: %[[G:[^:]+]]: tensor<4xf32>, %[[C:[^:]+]]: tensor<f32>, %[[M:[^:]+]]: tensor<4xf32>, %[[V:[^:]+]]: tensor<4xf32>
// CHECK: %[[M1:.+]] = linalg.generic {{.*}} ins(%[[M]], %[[G]], %[[C]] :
// CHECK: %[[V1:.+]] = linalg.generic {{.*}} ins(%[[V]], %[[G]], %[[C]] :
// CHECK-NOT: linalg.generic
// CHECK: %[[W1:.+]] = linalg.generic {{.*}} ins(%{{.+}}, %[[M1]], %[[V1]] :
// CHECK: return %[[M1]], %[[V1]], %[[W1]]
func.func private @update(%g: tensor<4xf32>, %c: tensor<f32>, %m: tensor<4xf32>, %v: tensor<4xf32>, %w: tensor<4xf32>)
    -> (tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) attributes {loom.kernel, loom.update_kernel} {
  %e = tensor.empty() : tensor<4xf32>
  %gc = linalg.generic {indexing_maps = [#id, #scalar, #id], iterator_types = ["parallel"]}
      ins(%g, %c : tensor<4xf32>, tensor<f32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.mulf %a, %b : f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  %m1 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%m, %gc : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.addf %a, %b : f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  %v1 = linalg.generic {indexing_maps = [#id, #id, #id], iterator_types = ["parallel"]}
      ins(%v, %gc : tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %o: f32):
    %0 = arith.mulf %b, %b : f32
    %1 = arith.addf %a, %0 : f32
    linalg.yield %1 : f32
  } -> tensor<4xf32>
  %w1 = linalg.generic {indexing_maps = [#id, #id, #id, #id], iterator_types = ["parallel"]}
      ins(%w, %m1, %v1 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %b: f32, %d: f32, %o: f32):
    %0 = arith.divf %b, %d : f32
    %1 = arith.subf %a, %0 : f32
    linalg.yield %1 : f32
  } -> tensor<4xf32>
  return %m1, %v1, %w1 : tensor<4xf32>, tensor<4xf32>, tensor<4xf32>
}

// -----

#id = affine_map<(d0) -> (d0)>

// Not an update kernel: the shared temporary stays.
// CHECK-LABEL: func.func private @other
// CHECK: %[[T:.+]] = linalg.generic
// CHECK: linalg.generic {{.*}} ins(%[[T]] :
// CHECK: linalg.generic {{.*}} ins(%[[T]] :
func.func private @other(%g: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) attributes {loom.kernel} {
  %e = tensor.empty() : tensor<4xf32>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%g : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = arith.mulf %a, %a : f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  %a1 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%t : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = arith.addf %a, %a : f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  %a2 = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%t : tensor<4xf32>) outs(%e : tensor<4xf32>) {
  ^bb0(%a: f32, %o: f32):
    %0 = arith.subf %a, %a : f32
    linalg.yield %0 : f32
  } -> tensor<4xf32>
  return %a1, %a2 : tensor<4xf32>, tensor<4xf32>
}
