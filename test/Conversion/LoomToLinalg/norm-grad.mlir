// RUN: loom-opt %s --split-input-file --convert-loom-to-linalg --mlir-print-local-scope | FileCheck %s
// RUN: loom-opt %s --split-input-file --convert-loom-to-linalg=norm-row-block-bytes=256 --mlir-print-local-scope | FileCheck %s --check-prefix=BLOCKED
// RUN: not loom-opt %s --split-input-file --convert-loom-to-linalg=norm-row-block-bytes=-1 2>&1 | FileCheck %s --check-prefix=NEGATIVE

// --convert-loom-to-linalg, loom.norm_grad: every step reads x and dy (and
// the rows' values) and recomputes g = dy * scale and x_hat = (x - mean) *
// rstd itself; no step makes a [rows, D] intermediate. The rows' mean,
// second moment (then rstd), sum of g and sum of g * x_hat are row
// reductions; the scale and bias gradients sums over the rows; dx one
// elementwise step, rounded once to bf16.
// NEGATIVE: error: convert-loom-to-linalg: norm-row-block-bytes=-1 (expected 0 or more bytes)

// CHECK-LABEL: func.func @layernorm_grad
// CHECK-SAME: (%[[X:[^:]+]]: tensor<10x8xbf16>, %[[DY:[^:]+]]: tensor<10x8xbf16>, %[[G:[^:]+]]: tensor<8xf32>)
// CHECK: [[SUM:%.+]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[X]] : tensor<10x8xbf16>)
// CHECK: [[MEAN:%.+]] = linalg.generic {{.*}} ins([[SUM]] : tensor<10xf32>)
// CHECK: [[SQ:%.+]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[X]], [[MEAN]] : tensor<10x8xbf16>, tensor<10xf32>)
// CHECK: [[VAR:%.+]] = linalg.generic {{.*}} ins([[SQ]] : tensor<10xf32>)
// CHECK: [[RSTD:%.+]] = linalg.generic {{.*}} ins([[VAR]] : tensor<10xf32>)
// CHECK: math.rsqrt
// sum(g): dy * scale over the row.
// CHECK: [[SG:%.+]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[X]], %[[DY]], %[[G]], [[MEAN]], [[RSTD]] : {{.*}}) outs(%{{.+}} : tensor<10xf32>)
// CHECK: ^bb0(%{{[^:]+}}: bf16, %[[D:[^:]+]]: bf16, %[[S:[^:]+]]: f32, %{{[^:]+}}: f32, %{{[^:]+}}: f32, %[[ACC:[^:]+]]: f32):
// CHECK: [[DW:%.+]] = arith.extf %[[D]] : bf16 to f32
// CHECK: [[GV:%.+]] = arith.mulf [[DW]], %[[S]] : f32
// CHECK: arith.addf %[[ACC]], [[GV]] : f32
// sum(g * x_hat).
// CHECK: [[SGX:%.+]] = linalg.generic {{.*}} iterator_types = ["parallel", "reduction"]} ins(%[[X]], %[[DY]], %[[G]], [[MEAN]], [[RSTD]] : {{.*}}) outs(%{{.+}} : tensor<10xf32>)
// CHECK: ^bb0(%[[XI:[^:]+]]: bf16, %[[D:[^:]+]]: bf16, %[[S:[^:]+]]: f32, %[[M:[^:]+]]: f32, %[[R:[^:]+]]: f32, %[[ACC:[^:]+]]: f32):
// CHECK: [[XW:%.+]] = arith.extf %[[XI]] : bf16 to f32
// CHECK: [[DW:%.+]] = arith.extf %[[D]] : bf16 to f32
// CHECK: [[GV:%.+]] = arith.mulf [[DW]], %[[S]] : f32
// CHECK: [[C:%.+]] = arith.subf [[XW]], %[[M]] : f32
// CHECK: [[XH:%.+]] = arith.mulf [[C]], %[[R]] : f32
// CHECK: [[T:%.+]] = arith.mulf [[GV]], [[XH]] : f32
// CHECK: arith.addf %[[ACC]], [[T]] : f32
// The scale's gradient, sum over the rows of dy * x_hat; the bias's, of dy.
// CHECK: [[DG:%.+]] = linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]} ins(%[[X]], %[[DY]], [[MEAN]], [[RSTD]] : {{.*}}) outs(%{{.+}} : tensor<8xf32>)
// CHECK: [[DB:%.+]] = linalg.generic {{.*}} iterator_types = ["reduction", "parallel"]} ins(%[[X]], %[[DY]], [[MEAN]], [[RSTD]] : {{.*}}) outs(%{{.+}} : tensor<8xf32>)
// dx = rstd * (g - sum(g) / D - x_hat * sum(g x_hat) / D).
// CHECK: [[DX:%.+]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]} ins(%[[X]], %[[DY]], %[[G]], [[MEAN]], [[RSTD]], [[SG]], [[SGX]] : {{.*}}) outs(%{{.+}} : tensor<10x8xbf16>)
// CHECK: ^bb0(%{{[^:]+}}: bf16, %{{[^:]+}}: bf16, %{{[^:]+}}: f32, %{{[^:]+}}: f32, %[[R:[^:]+]]: f32, %[[A:[^:]+]]: f32, %[[B:[^:]+]]: f32, %{{[^:]+}}: bf16):
// CHECK: [[XH:%.+]] = arith.mulf %{{.+}}, %[[R]] : f32
// CHECK: [[N:%.+]] = arith.constant 8.000000e+00 : f32
// CHECK: [[MG:%.+]] = arith.divf %[[A]], [[N]] : f32
// CHECK: [[CG:%.+]] = arith.subf %{{.+}}, [[MG]] : f32
// CHECK: [[MGX:%.+]] = arith.divf %[[B]], [[N]] : f32
// CHECK: [[P:%.+]] = arith.mulf [[XH]], [[MGX]] : f32
// CHECK: [[Q:%.+]] = arith.subf [[CG]], [[P]] : f32
// CHECK: [[V:%.+]] = arith.mulf %[[R]], [[Q]] : f32
// CHECK: arith.truncf [[V]] : f32 to bf16
// CHECK: return [[DX]], [[DG]], [[DB]]

// Blocked (256 bytes: 8 rows of 8 bf16 x and dy): an scf.for over the
// whole blocks carries the rows' values (inserted block by block) and the
// parameters' gradients (added up), the 2 remaining rows follow it, then
// dx over all rows.
// BLOCKED-LABEL: func.func @layernorm_grad
// BLOCKED: [[C0:%.+]] = arith.constant 0 : index
// BLOCKED: [[END:%.+]] = arith.constant 8 : index
// BLOCKED: [[STEP:%.+]] = arith.constant 8 : index
// BLOCKED: [[LOOP:%.+]]:6 = scf.for %[[I:.+]] = [[C0]] to [[END]] step [[STEP]] iter_args({{.*}}) -> (tensor<10xf32>, tensor<10xf32>, tensor<10xf32>, tensor<10xf32>, tensor<8xf32>, tensor<8xf32>)
// BLOCKED: tensor.extract_slice %{{.+}}[%[[I]], 0] [8, 8] [1, 1] : tensor<10x8xbf16> to tensor<8x8xbf16>
// BLOCKED-COUNT-4: tensor.insert_slice %{{.+}} into %{{.+}}[%[[I]]] [8] [1] : tensor<8xf32> into tensor<10xf32>
// BLOCKED: scf.yield
// BLOCKED: [[TAIL:%.+]] = arith.constant 8 : index
// BLOCKED: tensor.extract_slice %{{.+}}[[[TAIL]], 0] [2, 8] [1, 1] : tensor<10x8xbf16> to tensor<2x8xbf16>
// BLOCKED-COUNT-4: tensor.insert_slice %{{.+}} into [[LOOP]]#{{[0-3]}}[[[TAIL]]] [2] [1] : tensor<2xf32> into tensor<10xf32>
// BLOCKED: [[DG:%.+]] = linalg.generic {{.*}} outs([[LOOP]]#4 : tensor<8xf32>)
// BLOCKED: [[DB:%.+]] = linalg.generic {{.*}} outs([[LOOP]]#5 : tensor<8xf32>)
// BLOCKED: [[DX:%.+]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel"]} {{.*}} outs(%{{.+}} : tensor<10x8xbf16>)
// BLOCKED: return [[DX]], [[DG]], [[DB]]
func.func @layernorm_grad(%x: tensor<10x8xbf16>, %dy: tensor<10x8xbf16>, %g: tensor<8xf32>) -> (tensor<10x8xbf16>, tensor<8xf32>, tensor<8xf32>) {
  %dx, %dg, %db = loom.norm_grad %x, %dy scale %g epsilon 1.0e-5 centered : (tensor<10x8xbf16>, tensor<10x8xbf16>, tensor<8xf32>) -> (tensor<10x8xbf16>, tensor<8xf32>, tensor<8xf32>)
  return %dx, %dg, %db : tensor<10x8xbf16>, tensor<8xf32>, tensor<8xf32>
}

// -----

// rmsnorm without scale, only dx used: no mean and no sum(g) (it does not
// center), no scale or bias gradient (unused: an empty tensor each).
// dx = rstd * (dy - x_hat * sum(dy x_hat) / D). Rank 3: blocked over a
// [6, 8] view of the rows, dx reshaped back.
// CHECK-LABEL: func.func @rmsnorm_grad
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2x3x8xf32>, %[[DY:[^:]+]]: tensor<2x3x8xf32>)
// CHECK: [[SQ:%.+]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]] : tensor<2x3x8xf32>)
// CHECK: [[MS:%.+]] = linalg.generic {{.*}} ins([[SQ]] : tensor<2x3xf32>)
// CHECK: [[RSTD:%.+]] = linalg.generic {{.*}} ins([[MS]] : tensor<2x3xf32>)
// CHECK: [[SGX:%.+]] = linalg.generic {{.*}} iterator_types = ["parallel", "parallel", "reduction"]} ins(%[[X]], %[[DY]], [[RSTD]] : {{.*}})
// CHECK-NOT: iterator_types = ["reduction", "reduction", "parallel"]
// CHECK: [[DX:%.+]] = linalg.generic {{.*}} ins(%[[X]], %[[DY]], [[RSTD]], [[SGX]] : {{.*}}) outs(%{{.+}} : tensor<2x3x8xf32>)
// CHECK: return [[DX]]
// BLOCKED-LABEL: func.func @rmsnorm_grad
// BLOCKED: tensor.collapse_shape %{{.+}} {{\[\[}}0, 1], [2]] : tensor<2x3x8xf32> into tensor<6x8xf32>
// BLOCKED: scf.for {{.*}} -> (tensor<6xf32>, tensor<6xf32>)
// BLOCKED: [[DX:%.+]] = linalg.generic {{.*}} outs(%{{.+}} : tensor<6x8xf32>)
// BLOCKED: [[OUT:%.+]] = tensor.expand_shape [[DX]] {{\[\[}}0, 1], [2]] output_shape [2, 3, 8] : tensor<6x8xf32> into tensor<2x3x8xf32>
// BLOCKED: return [[OUT]]
func.func @rmsnorm_grad(%x: tensor<2x3x8xf32>, %dy: tensor<2x3x8xf32>) -> tensor<2x3x8xf32> {
  %dx, %dg, %db = loom.norm_grad %x, %dy epsilon 1.0e-5 : (tensor<2x3x8xf32>, tensor<2x3x8xf32>) -> (tensor<2x3x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return %dx : tensor<2x3x8xf32>
}
