// RUN: loom-opt %s --split-input-file | loom-opt --split-input-file | FileCheck %s

// Round trip of every loom op and attribute: each group is parsed, printed,
// parsed again and printed again, so the checks see the printer's syntax.

// CHECK-LABEL: func.func @constants
func.func @constants() -> (tensor<bf16>, tensor<f32>, tensor<i32>, tensor<i64>) {
  // CHECK: loom.constant 1.250000e-01 : tensor<bf16>
  %0 = loom.constant 0.125 : tensor<bf16>
  // CHECK: loom.constant -2.500000e+00 : tensor<f32>
  %1 = loom.constant -2.5 : tensor<f32>
  // CHECK: loom.constant 3.000000e+00 : tensor<i32>
  %2 = loom.constant 3.0 : tensor<i32>
  // CHECK: loom.constant 0.000000e+00 : tensor<i64>
  %3 = loom.constant 0.0 : tensor<i64>
  return %0, %1, %2, %3 : tensor<bf16>, tensor<f32>, tensor<i32>, tensor<i64>
}

// -----

// CHECK-LABEL: func.func @binary
// CHECK-SAME: (%[[A:.+]]: tensor<64x2048xbf16>, %[[B:.+]]: tensor<2048xf32>, %[[C:.+]]: tensor<64x1xf16>, %[[D:.+]]: tensor<1x8xf16>, %[[S:.+]]: tensor<bf16>)
func.func @binary(%a: tensor<64x2048xbf16>, %b: tensor<2048xf32>,
                  %c: tensor<64x1xf16>, %d: tensor<1x8xf16>,
                  %s: tensor<bf16>) {
  // Trailing-dimension broadcasting, bf16 promoted to f32.
  // CHECK: loom.add %[[A]], %[[B]] : (tensor<64x2048xbf16>, tensor<2048xf32>) -> tensor<64x2048xf32>
  %0 = loom.add %a, %b : (tensor<64x2048xbf16>, tensor<2048xf32>) -> tensor<64x2048xf32>
  // Both operands broadcast along their size-1 dims.
  // CHECK: loom.sub %[[C]], %[[D]] : (tensor<64x1xf16>, tensor<1x8xf16>) -> tensor<64x8xf16>
  %1 = loom.sub %c, %d : (tensor<64x1xf16>, tensor<1x8xf16>) -> tensor<64x8xf16>
  // A rank-0 scalar broadcasts against anything.
  // CHECK: loom.mul %[[S]], %[[A]] : (tensor<bf16>, tensor<64x2048xbf16>) -> tensor<64x2048xbf16>
  %2 = loom.mul %s, %a : (tensor<bf16>, tensor<64x2048xbf16>) -> tensor<64x2048xbf16>
  // f32 on the left, f16 on the right: still promoted to f32.
  // CHECK: loom.div %[[B]], %[[C]] : (tensor<2048xf32>, tensor<64x1xf16>) -> tensor<64x2048xf32>
  %3 = loom.div %b, %c : (tensor<2048xf32>, tensor<64x1xf16>) -> tensor<64x2048xf32>
  // CHECK: loom.maximum %[[A]], %[[B]] : (tensor<64x2048xbf16>, tensor<2048xf32>) -> tensor<64x2048xf32>
  %4 = loom.maximum %a, %b : (tensor<64x2048xbf16>, tensor<2048xf32>) -> tensor<64x2048xf32>
  // CHECK: loom.minimum %[[C]], %[[D]] : (tensor<64x1xf16>, tensor<1x8xf16>) -> tensor<64x8xf16>
  %5 = loom.minimum %c, %d : (tensor<64x1xf16>, tensor<1x8xf16>) -> tensor<64x8xf16>
  return
}

// -----

// CHECK-LABEL: func.func @unary
// CHECK-SAME: (%[[X:.+]]: tensor<64x2048xf32>, %[[H:.+]]: tensor<8xbf16>)
func.func @unary(%x: tensor<64x2048xf32>, %h: tensor<8xbf16>) {
  // CHECK: [[NEG:%.+]] = loom.neg %[[X]] : tensor<64x2048xf32>
  %0 = loom.neg %x : tensor<64x2048xf32>
  // CHECK: [[GELU:%.+]] = loom.gelu [[NEG]] : tensor<64x2048xf32>
  %1 = loom.gelu %0 : tensor<64x2048xf32>
  // CHECK: [[RELU:%.+]] = loom.relu [[GELU]] : tensor<64x2048xf32>
  %2 = loom.relu %1 : tensor<64x2048xf32>
  // CHECK: [[SILU:%.+]] = loom.silu [[RELU]] : tensor<64x2048xf32>
  %3 = loom.silu %2 : tensor<64x2048xf32>
  // CHECK: [[EXP:%.+]] = loom.exp [[SILU]] : tensor<64x2048xf32>
  %4 = loom.exp %3 : tensor<64x2048xf32>
  // CHECK: [[TANH:%.+]] = loom.tanh [[EXP]] : tensor<64x2048xf32>
  %5 = loom.tanh %4 : tensor<64x2048xf32>
  // CHECK: [[SQRT:%.+]] = loom.sqrt [[TANH]] : tensor<64x2048xf32>
  %6 = loom.sqrt %5 : tensor<64x2048xf32>
  // CHECK: [[SIN:%.+]] = loom.sin [[SQRT]] : tensor<64x2048xf32>
  %8 = loom.sin %6 : tensor<64x2048xf32>
  // CHECK: [[COS:%.+]] = loom.cos [[SIN]] : tensor<64x2048xf32>
  %9 = loom.cos %8 : tensor<64x2048xf32>
  // CHECK: [[SIG:%.+]] = loom.sigmoid [[COS]] : tensor<64x2048xf32>
  %10 = loom.sigmoid %9 : tensor<64x2048xf32>
  // CHECK: [[LOG:%.+]] = loom.log [[SIG]] : tensor<64x2048xf32>
  %11 = loom.log %10 : tensor<64x2048xf32>
  // CHECK: [[ABS:%.+]] = loom.abs [[LOG]] : tensor<64x2048xf32>
  %12 = loom.abs %11 : tensor<64x2048xf32>
  // CHECK: loom.erf [[ABS]] : tensor<64x2048xf32>
  %13 = loom.erf %12 : tensor<64x2048xf32>
  // CHECK: loom.gelu %[[H]] : tensor<8xbf16>
  %7 = loom.gelu %h : tensor<8xbf16>
  return
}

// -----

// CHECK-LABEL: func.func @cast
// CHECK-SAME: (%[[X:.+]]: tensor<64x512xf32>, %[[I:.+]]: tensor<16xi32>)
func.func @cast(%x: tensor<64x512xf32>, %i: tensor<16xi32>) {
  // CHECK: [[B:%.+]] = loom.cast %[[X]] : tensor<64x512xf32> to tensor<64x512xbf16>
  %0 = loom.cast %x : tensor<64x512xf32> to tensor<64x512xbf16>
  // CHECK: loom.cast [[B]] : tensor<64x512xbf16> to tensor<64x512xf16>
  %1 = loom.cast %0 : tensor<64x512xbf16> to tensor<64x512xf16>
  // Integer tensors convert too.
  // CHECK: loom.cast %[[I]] : tensor<16xi32> to tensor<16xi64>
  %2 = loom.cast %i : tensor<16xi32> to tensor<16xi64>
  // CHECK: loom.cast %[[I]] : tensor<16xi32> to tensor<16xf32>
  %3 = loom.cast %i : tensor<16xi32> to tensor<16xf32>
  return
}

// -----

// CHECK-LABEL: func.func @matmul
// CHECK-SAME: (%[[X:.+]]: tensor<64x512xbf16>, %[[W:.+]]: tensor<512x2048xbf16>, %[[A:.+]]: tensor<2x16x512xbf16>, %[[Q:.+]]: tensor<2x4x16x8xf32>, %[[K:.+]]: tensor<2x4x8x16xf32>, %[[P:.+]]: tensor<1x4x8x16xf32>)
func.func @matmul(%x: tensor<64x512xbf16>, %w: tensor<512x2048xbf16>,
                  %a: tensor<2x16x512xbf16>, %q: tensor<2x4x16x8xf32>,
                  %k: tensor<2x4x8x16xf32>, %p: tensor<1x4x8x16xf32>) {
  // 2-D.
  // CHECK: loom.matmul %[[X]], %[[W]] accumulate f32 : (tensor<64x512xbf16>, tensor<512x2048xbf16>) -> tensor<64x2048xbf16>
  %0 = loom.matmul %x, %w accumulate f32 : (tensor<64x512xbf16>, tensor<512x2048xbf16>) -> tensor<64x2048xbf16>
  // A weight matrix applied to every row of a batched activation.
  // CHECK: loom.matmul %[[A]], %[[W]] accumulate bf16 : (tensor<2x16x512xbf16>, tensor<512x2048xbf16>) -> tensor<2x16x2048xbf16>
  %1 = loom.matmul %a, %w accumulate bf16 : (tensor<2x16x512xbf16>, tensor<512x2048xbf16>) -> tensor<2x16x2048xbf16>
  // Batched, equal batch dims.
  // CHECK: loom.matmul %[[Q]], %[[K]] accumulate f32 : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
  %2 = loom.matmul %q, %k accumulate f32 : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
  // Batched, broadcast batch dims.
  // CHECK: loom.matmul %[[Q]], %[[P]] accumulate f32 : (tensor<2x4x16x8xf32>, tensor<1x4x8x16xf32>) -> tensor<2x4x16x16xf32>
  %3 = loom.matmul %q, %p accumulate f32 : (tensor<2x4x16x8xf32>, tensor<1x4x8x16xf32>) -> tensor<2x4x16x16xf32>
  // f32 operands rounded to tf32 (precision tf32).
  // CHECK: loom.matmul %[[Q]], %[[K]] multiply tf32 accumulate f32 : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
  %4 = loom.matmul %q, %k multiply tf32 accumulate f32 : (tensor<2x4x16x8xf32>, tensor<2x4x8x16xf32>) -> tensor<2x4x16x16xf32>
  return
}

// -----

// CHECK-LABEL: func.func @attention_helpers
// CHECK-SAME: (%[[S:.+]]: tensor<2x4x16x16xf32>, %[[V:.+]]: tensor<16x1000xbf16>)
func.func @attention_helpers(%s: tensor<2x4x16x16xf32>, %v: tensor<16x1000xbf16>) {
  // CHECK: [[M:%.+]] = loom.causal_mask %[[S]] : tensor<2x4x16x16xf32>
  %0 = loom.causal_mask %s : tensor<2x4x16x16xf32>
  // CHECK: loom.softmax [[M]] axis 3 : tensor<2x4x16x16xf32>
  %1 = loom.softmax %0 axis 3 : tensor<2x4x16x16xf32>
  // CHECK: loom.softmax %[[V]] axis 0 : tensor<16x1000xbf16>
  %2 = loom.softmax %v axis 0 : tensor<16x1000xbf16>
  // CHECK: loom.causal_mask %[[V]] : tensor<16x1000xbf16>
  %3 = loom.causal_mask %v : tensor<16x1000xbf16>
  return
}

// -----

// CHECK-LABEL: func.func @attention
func.func @attention(%q: tensor<2x4x64x16xbf16>, %k: tensor<2x4x32x16xbf16>,
                     %v: tensor<2x4x32x8xbf16>, %s: tensor<bf16>) {
  // CHECK: loom.attention %arg0, %arg1, %arg2 scale %arg3 causal accumulate f32 : (tensor<2x4x64x16xbf16>, tensor<2x4x32x16xbf16>, tensor<2x4x32x8xbf16>, tensor<bf16>) -> tensor<2x4x64x8xbf16>
  %0 = loom.attention %q, %k, %v scale %s causal accumulate f32
      : (tensor<2x4x64x16xbf16>, tensor<2x4x32x16xbf16>, tensor<2x4x32x8xbf16>, tensor<bf16>) -> tensor<2x4x64x8xbf16>
  // CHECK: loom.attention %arg0, %arg1, %arg2 accumulate f32 : (tensor<2x4x64x16xbf16>, tensor<2x4x32x16xbf16>, tensor<2x4x32x8xbf16>) -> tensor<2x4x64x8xbf16>
  %1 = loom.attention %q, %k, %v accumulate f32
      : (tensor<2x4x64x16xbf16>, tensor<2x4x32x16xbf16>, tensor<2x4x32x8xbf16>) -> tensor<2x4x64x8xbf16>
  // With its rows' log-sum-exp, for loom.attention_grad.
  // CHECK: %[[O:.+]], %[[LSE:.+]] = loom.attention %arg0, %arg1, %arg2 causal accumulate f32 : (tensor<2x4x64x16xbf16>, tensor<2x4x32x16xbf16>, tensor<2x4x32x8xbf16>) -> (tensor<2x4x64x8xbf16>, tensor<2x4x64xf32>)
  %2:2 = loom.attention %q, %k, %v causal accumulate f32
      : (tensor<2x4x64x16xbf16>, tensor<2x4x32x16xbf16>, tensor<2x4x32x8xbf16>) -> (tensor<2x4x64x8xbf16>, tensor<2x4x64xf32>)
  // CHECK: loom.attention_grad %arg0, %arg1, %arg2, %[[O]], %[[LSE]], %[[O]] scale %arg3 causal accumulate f32 : (tensor<2x4x64x16xbf16>, tensor<2x4x32x16xbf16>, tensor<2x4x32x8xbf16>, tensor<2x4x64x8xbf16>, tensor<2x4x64xf32>, tensor<2x4x64x8xbf16>, tensor<bf16>) -> (tensor<2x4x64x16xbf16>, tensor<2x4x32x16xbf16>, tensor<2x4x32x8xbf16>)
  %3:3 = loom.attention_grad %q, %k, %v, %2#0, %2#1, %2#0 scale %s causal accumulate f32
      : (tensor<2x4x64x16xbf16>, tensor<2x4x32x16xbf16>, tensor<2x4x32x8xbf16>, tensor<2x4x64x8xbf16>, tensor<2x4x64xf32>, tensor<2x4x64x8xbf16>, tensor<bf16>)
      -> (tensor<2x4x64x16xbf16>, tensor<2x4x32x16xbf16>, tensor<2x4x32x8xbf16>)
  return
}

// -----

// CHECK-LABEL: func.func @norms
// CHECK-SAME: (%[[X:.+]]: tensor<64x512xbf16>, %[[G:.+]]: tensor<512xf32>, %[[B:.+]]: tensor<512xf32>, %[[H:.+]]: tensor<512xbf16>)
func.func @norms(%x: tensor<64x512xbf16>, %g: tensor<512xf32>,
                 %b: tensor<512xf32>, %h: tensor<512xbf16>) {
  // Scale and bias; the f32 parameters promote the result.
  // CHECK: loom.layernorm %[[X]] scale %[[G]] bias %[[B]] epsilon 1.000000e-05 : (tensor<64x512xbf16>, tensor<512xf32>, tensor<512xf32>) -> tensor<64x512xf32>
  %0 = loom.layernorm %x scale %g bias %b epsilon 1.0e-5 : (tensor<64x512xbf16>, tensor<512xf32>, tensor<512xf32>) -> tensor<64x512xf32>
  // Scale only.
  // CHECK: loom.layernorm %[[X]] scale %[[H]] epsilon 1.000000e-03 : (tensor<64x512xbf16>, tensor<512xbf16>) -> tensor<64x512xbf16>
  %1 = loom.layernorm %x scale %h epsilon 1.0e-3 : (tensor<64x512xbf16>, tensor<512xbf16>) -> tensor<64x512xbf16>
  // Bias only: the operand segments keep it apart from a scale.
  // CHECK: loom.layernorm %[[X]] bias %[[B]] epsilon 1.000000e-05 : (tensor<64x512xbf16>, tensor<512xf32>) -> tensor<64x512xf32>
  %2 = loom.layernorm %x bias %b epsilon 1.0e-5 : (tensor<64x512xbf16>, tensor<512xf32>) -> tensor<64x512xf32>
  // Neither.
  // CHECK: loom.layernorm %[[X]] epsilon 1.000000e-05 : (tensor<64x512xbf16>) -> tensor<64x512xbf16>
  %3 = loom.layernorm %x epsilon 1.0e-5 : (tensor<64x512xbf16>) -> tensor<64x512xbf16>
  // CHECK: loom.rmsnorm %[[X]] scale %[[G]] epsilon 1.000000e-05 : (tensor<64x512xbf16>, tensor<512xf32>) -> tensor<64x512xf32>
  %4 = loom.rmsnorm %x scale %g epsilon 1.0e-5 : (tensor<64x512xbf16>, tensor<512xf32>) -> tensor<64x512xf32>
  // CHECK: loom.rmsnorm %[[X]] epsilon 1.000000e-05 : (tensor<64x512xbf16>) -> tensor<64x512xbf16>
  %5 = loom.rmsnorm %x epsilon 1.0e-5 : (tensor<64x512xbf16>) -> tensor<64x512xbf16>
  return
}

// -----

// CHECK-LABEL: func.func @indexing
// CHECK-SAME: (%[[T:.+]]: tensor<1000x64xf32>, %[[IDS:.+]]: tensor<2x16xi32>, %[[IDS64:.+]]: tensor<5xi64>, %[[HALF:.+]]: tensor<500x64xf32>)
func.func @indexing(%t: tensor<1000x64xf32>, %ids: tensor<2x16xi32>,
                    %ids64: tensor<5xi64>, %half: tensor<500x64xf32>) {
  // CHECK: loom.embedding %[[T]][%[[IDS]]] : (tensor<1000x64xf32>, tensor<2x16xi32>) -> tensor<2x16x64xf32>
  %0 = loom.embedding %t[%ids] : (tensor<1000x64xf32>, tensor<2x16xi32>) -> tensor<2x16x64xf32>
  // CHECK: loom.embedding %[[T]][%[[IDS64]]] : (tensor<1000x64xf32>, tensor<5xi64>) -> tensor<5x64xf32>
  %1 = loom.embedding %t[%ids64] : (tensor<1000x64xf32>, tensor<5xi64>) -> tensor<5x64xf32>
  // CHECK: [[POS:%.+]] = loom.arange : tensor<16xi32>
  %2 = loom.arange : tensor<16xi32>
  // CHECK: loom.embedding %[[T]][[[POS]]] : (tensor<1000x64xf32>, tensor<16xi32>) -> tensor<16x64xf32>
  %3 = loom.embedding %t[%2] : (tensor<1000x64xf32>, tensor<16xi32>) -> tensor<16x64xf32>
  // CHECK: loom.arange : tensor<7xi64>
  %4 = loom.arange : tensor<7xi64>
  // A vocab-parallel lookup: rows 500..999 of a 1000-row table.
  // CHECK: loom.embedding %[[HALF]][%[[IDS]]] rows %{{.+}} of 1000 : (tensor<500x64xf32>, tensor<2x16xi32>, tensor<500xi32>) -> tensor<2x16x64xf32>
  %rows = loom.arange : tensor<500xi32>
  %5 = loom.embedding %half[%ids] rows %rows of 1000 : (tensor<500x64xf32>, tensor<2x16xi32>, tensor<500xi32>) -> tensor<2x16x64xf32>
  return
}

// -----

// CHECK-LABEL: func.func @data_movement
// CHECK-SAME: (%[[X:.+]]: tensor<2x16x4x8xf32>, %[[Y:.+]]: tensor<2x16x32xf32>, %[[Z:.+]]: tensor<16x64xbf16>, %[[W:.+]]: tensor<16x8xbf16>)
func.func @data_movement(%x: tensor<2x16x4x8xf32>, %y: tensor<2x16x32xf32>,
                         %z: tensor<16x64xbf16>, %w: tensor<16x8xbf16>) {
  // CHECK: loom.transpose %[[X]] perm [0, 2, 1, 3] : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
  %0 = loom.transpose %x perm [0, 2, 1, 3] : tensor<2x16x4x8xf32> -> tensor<2x4x16x8xf32>
  // CHECK: loom.transpose %[[Z]] perm [1, 0] : tensor<16x64xbf16> -> tensor<64x16xbf16>
  %1 = loom.transpose %z perm [1, 0] : tensor<16x64xbf16> -> tensor<64x16xbf16>
  // CHECK: loom.reshape %[[Y]] : tensor<2x16x32xf32> -> tensor<2x16x4x8xf32>
  %2 = loom.reshape %y : tensor<2x16x32xf32> -> tensor<2x16x4x8xf32>
  // CHECK: [[Q:%.+]]:2 = loom.split %[[Z]] axis 1 : tensor<16x64xbf16> -> tensor<16x32xbf16>, tensor<16x32xbf16>
  %3:2 = loom.split %z axis 1 : tensor<16x64xbf16> -> tensor<16x32xbf16>, tensor<16x32xbf16>
  // Pieces need not be equal.
  // CHECK: loom.split %[[Z]] axis 1 : tensor<16x64xbf16> -> tensor<16x8xbf16>, tensor<16x56xbf16>
  %4:2 = loom.split %z axis 1 : tensor<16x64xbf16> -> tensor<16x8xbf16>, tensor<16x56xbf16>
  // CHECK: loom.split %[[Z]] axis 0 : tensor<16x64xbf16> -> tensor<16x64xbf16>
  %5 = loom.split %z axis 0 : tensor<16x64xbf16> -> tensor<16x64xbf16>
  // CHECK: loom.concat [[Q]]#1, [[Q]]#0, %[[W]] axis 1 : (tensor<16x32xbf16>, tensor<16x32xbf16>, tensor<16x8xbf16>) -> tensor<16x72xbf16>
  %6 = loom.concat %3#1, %3#0, %w axis 1 : (tensor<16x32xbf16>, tensor<16x32xbf16>, tensor<16x8xbf16>) -> tensor<16x72xbf16>
  // CHECK: loom.concat %[[Z]] axis 0 : (tensor<16x64xbf16>) -> tensor<16x64xbf16>
  %7 = loom.concat %z axis 0 : (tensor<16x64xbf16>) -> tensor<16x64xbf16>
  return
}

// -----

// CHECK-LABEL: func.func @reductions
// CHECK-SAME: (%[[X:.+]]: tensor<16x64xf32>, %[[H:.+]]: tensor<2x3x4xbf16>)
func.func @reductions(%x: tensor<16x64xf32>, %h: tensor<2x3x4xbf16>) {
  // CHECK: loom.sum %[[X]] axis 1 keepdim : tensor<16x64xf32> -> tensor<16x1xf32>
  %0 = loom.sum %x axis 1 keepdim : tensor<16x64xf32> -> tensor<16x1xf32>
  // CHECK: loom.sum %[[X]] axis 0 : tensor<16x64xf32> -> tensor<64xf32>
  %1 = loom.sum %x axis 0 : tensor<16x64xf32> -> tensor<64xf32>
  // CHECK: loom.mean %[[H]] axis 2 keepdim : tensor<2x3x4xbf16> -> tensor<2x3x1xbf16>
  %2 = loom.mean %h axis 2 keepdim : tensor<2x3x4xbf16> -> tensor<2x3x1xbf16>
  // CHECK: loom.mean %[[H]] axis 1 : tensor<2x3x4xbf16> -> tensor<2x4xbf16>
  %3 = loom.mean %h axis 1 : tensor<2x3x4xbf16> -> tensor<2x4xbf16>
  // CHECK: loom.max %[[X]] axis 1 keepdim : tensor<16x64xf32> -> tensor<16x1xf32>
  %4 = loom.max %x axis 1 keepdim : tensor<16x64xf32> -> tensor<16x1xf32>
  // CHECK: [[M:%.+]] = loom.max %[[X]] axis 1 : tensor<16x64xf32> -> tensor<16xf32>
  %5 = loom.max %x axis 1 : tensor<16x64xf32> -> tensor<16xf32>
  // Down to a scalar.
  // CHECK: loom.sum [[M]] axis 0 : tensor<16xf32> -> tensor<f32>
  %6 = loom.sum %5 axis 0 : tensor<16xf32> -> tensor<f32>
  return
}

// -----

// CHECK-LABEL: func.func @losses
// CHECK-SAME: (%[[LOGITS:.+]]: tensor<2x16x1000xbf16>, %[[LABELS:.+]]: tensor<2x16xi32>, %[[Y:.+]]: tensor<64x8xf32>, %[[T:.+]]: tensor<64x8xbf16>)
func.func @losses(%logits: tensor<2x16x1000xbf16>, %labels: tensor<2x16xi32>,
                  %y: tensor<64x8xf32>, %t: tensor<64x8xbf16>) {
  // CHECK: loom.cross_entropy %[[LOGITS]], %[[LABELS]] : (tensor<2x16x1000xbf16>, tensor<2x16xi32>) -> tensor<f32>
  %0 = loom.cross_entropy %logits, %labels : (tensor<2x16x1000xbf16>, tensor<2x16xi32>) -> tensor<f32>
  // CHECK: loom.mse %[[Y]], %[[T]] : (tensor<64x8xf32>, tensor<64x8xbf16>) -> tensor<f32>
  %1 = loom.mse %y, %t : (tensor<64x8xf32>, tensor<64x8xbf16>) -> tensor<f32>
  return
}

// -----

// CHECK-LABEL: func.func @stages
// CHECK-SAME: (%[[X:.+]]: tensor<8x16x64xf32>) -> tensor<8x16x64xf32>
// CHECK-SAME: attributes {loom.pipeline_axis = "pp"}
func.func @stages(%x: tensor<8x16x64xf32>) -> tensor<8x16x64xf32>
    attributes {loom.pipeline_axis = "pp"} {
  // CHECK: [[S0:%.+]]:2 = loom.stage 0 -> tensor<8x16x64xf32>, tensor<8x16x64xf32> {
  // CHECK-NEXT: [[G:%.+]] = loom.gelu %[[X]] : tensor<8x16x64xf32>
  // CHECK-NEXT: [[R:%.+]] = loom.relu [[G]] : tensor<8x16x64xf32>
  // CHECK-NEXT: loom.yield [[G]], [[R]] : tensor<8x16x64xf32>, tensor<8x16x64xf32>
  // CHECK-NEXT: }
  %s:2 = loom.stage 0 -> tensor<8x16x64xf32>, tensor<8x16x64xf32> {
    %g = loom.gelu %x : tensor<8x16x64xf32>
    %r = loom.relu %g : tensor<8x16x64xf32>
    loom.yield %g, %r : tensor<8x16x64xf32>, tensor<8x16x64xf32>
  }
  // Extra attributes need the 'attributes' keyword before the region.
  // CHECK: [[S1:%.+]] = loom.stage 1 -> tensor<8x16x64xf32> attributes {note = "last"} {
  // CHECK-NEXT: [[A:%.+]] = loom.add [[S0]]#0, [[S0]]#1 :
  // CHECK-NEXT: loom.yield [[A]] : tensor<8x16x64xf32>
  %t = loom.stage 1 -> tensor<8x16x64xf32> attributes {note = "last"} {
    %a = loom.add %s#0, %s#1 : (tensor<8x16x64xf32>, tensor<8x16x64xf32>) -> tensor<8x16x64xf32>
    loom.yield %a : tensor<8x16x64xf32>
  }
  // A stage without results.
  // CHECK: loom.stage 1 {
  // CHECK-NEXT: loom.yield{{$}}
  loom.stage 1 {
    loom.yield
  }
  // CHECK: return [[S1]] : tensor<8x16x64xf32>
  return %t : tensor<8x16x64xf32>
}

// -----

// CHECK-LABEL: func.func @moe
// CHECK-SAME: (%[[X:.+]]: tensor<16x32xf32>, %[[R:.+]]: tensor<32x4xf32>, %[[W1:.+]]: tensor<4x32x64xbf16>, %[[W2:.+]]: tensor<4x64x32xbf16>, %[[X2:.+]]: tensor<2x5x4xf32>, %[[R2:.+]]: tensor<4x3xf32>)
func.func @moe(%x: tensor<16x32xf32>, %r: tensor<32x4xf32>,
               %w1: tensor<4x32x64xbf16>, %w2: tensor<4x64x32xbf16>,
               %x2: tensor<2x5x4xf32>, %r2: tensor<4x3xf32>) {
  // capacity = ceil(2 * 16 * 1.0 / 4) = 8.
  // CHECK: loom.moe %[[X]] router %[[R]] params(%[[W1]], %[[W2]])
  // CHECK-SAME: {axis = "ep", capacity = 8 : i64, capacity_factor = 1.000000e+00 : f64, experts = 4 : i64, top_k = 2 : i64}
  // CHECK-SAME: : (tensor<16x32xf32>, tensor<32x4xf32>, tensor<4x32x64xbf16>, tensor<4x64x32xbf16>) -> tensor<16x32xbf16> {
  // CHECK-NEXT: ^bb0(%[[T:.+]]: tensor<8x32xf32>, %[[E1:.+]]: tensor<32x64xbf16>, %[[E2:.+]]: tensor<64x32xbf16>):
  // CHECK-NEXT: [[C:%.+]] = loom.cast %[[T]] : tensor<8x32xf32> to tensor<8x32xbf16>
  // CHECK-NEXT: [[H:%.+]] = loom.matmul [[C]], %[[E1]] accumulate f32
  // CHECK-NEXT: [[O:%.+]] = loom.matmul [[H]], %[[E2]] accumulate f32
  // CHECK-NEXT: loom.yield [[O]] : tensor<8x32xbf16>
  %0 = loom.moe %x router %r params(%w1, %w2) {axis = "ep", capacity = 8 : i64,
                capacity_factor = 1.0 : f64, experts = 4 : i64, top_k = 2 : i64}
      : (tensor<16x32xf32>, tensor<32x4xf32>, tensor<4x32x64xbf16>, tensor<4x64x32xbf16>) -> tensor<16x32xbf16> {
  ^bb0(%t: tensor<8x32xf32>, %e1: tensor<32x64xbf16>, %e2: tensor<64x32xbf16>):
    %c = loom.cast %t : tensor<8x32xf32> to tensor<8x32xbf16>
    %h = loom.matmul %c, %e1 accumulate f32 : (tensor<8x32xbf16>, tensor<32x64xbf16>) -> tensor<8x64xbf16>
    %o = loom.matmul %h, %e2 accumulate f32 : (tensor<8x64xbf16>, tensor<64x32xbf16>) -> tensor<8x32xbf16>
    loom.yield %o : tensor<8x32xbf16>
  }
  // No expert parameters; batched tokens (2x5 = 10 tokens), capacity
  // ceil(1 * 10 * 1.5 / 3) = 5, and an expert that changes the width.
  // CHECK: loom.moe %[[X2]] router %[[R2]] {axis = "ep", capacity = 5 : i64, capacity_factor = 1.500000e+00 : f64, experts = 3 : i64, top_k = 1 : i64} : (tensor<2x5x4xf32>, tensor<4x3xf32>) -> tensor<2x5x1xf32> {
  // CHECK-NEXT: ^bb0(%[[T2:.+]]: tensor<5x4xf32>):
  // CHECK-NEXT: [[S:%.+]] = loom.sum %[[T2]] axis 1 keepdim
  // CHECK-NEXT: loom.yield [[S]] : tensor<5x1xf32>
  %1 = loom.moe %x2 router %r2 {axis = "ep", capacity = 5 : i64,
                capacity_factor = 1.5 : f64, experts = 3 : i64, top_k = 1 : i64}
      : (tensor<2x5x4xf32>, tensor<4x3xf32>) -> tensor<2x5x1xf32> {
  ^bb0(%t: tensor<5x4xf32>):
    %s = loom.sum %t axis 1 keepdim : tensor<5x4xf32> -> tensor<5x1xf32>
    loom.yield %s : tensor<5x1xf32>
  }
  return
}

// -----

// The module-level precision policy, a grid with named axes, a model
// function with every argument and result attribute, and training.

// CHECK: module attributes {loom.precision = #loom.precision<compute = bf16, accumulate = f32>}
// CHECK: shard.grid @gpus(shape = 2x2x2) {loom.axes = ["dp", "pp", "tp"], sym_visibility = "private"}
// CHECK-LABEL: func.func @model
// CHECK-SAME: %[[X:[^:]+]]: tensor<8x16xbf16> {loom.input = "x"}
// CHECK-SAME: %[[IDS:[^:]+]]: tensor<8xi32> {loom.input = "ids"}
// CHECK-SAME: %[[Z:[^:]+]]: tensor<16xf32> {loom.init = #loom.init<zeros>, loom.param = "z"}
// CHECK-SAME: %[[O:[^:]+]]: tensor<16xf32> {loom.init = #loom.init<ones>, loom.param = "o"}
// CHECK-SAME: %[[C:[^:]+]]: tensor<16xf32> {loom.init = #loom.init<constant(5.000000e-01)>, loom.param = "c"}
// CHECK-SAME: %[[N:[^:]+]]: tensor<16x16xbf16> {loom.init = #loom.init<normal(2.000000e-02)>, loom.param = "block.0.n"}
// CHECK-SAME: %[[U:[^:]+]]: tensor<16x16xbf16> {loom.init = #loom.init<uniform(-1.000000e-01, 1.000000e-01)>, loom.param = "u"}
// CHECK-SAME: %[[P:[^:]+]]: tensor<16x16xbf16> {loom.param = "p"}
// CHECK-SAME: -> (tensor<8x16xbf16> {loom.output = "y"}, tensor<f32> {loom.loss = "loss"})
// CHECK-SAME: attributes {loom.pipeline_axis = "pp"}
// CHECK: [[SH:%.+]] = shard.sharding @gpus split_axes = {{\[}}[0], [2]] : !shard.sharding
// CHECK: shard.shard %[[X]] to [[SH]] : tensor<8x16xbf16>
// CHECK: [[SH2:%.+]] = shard.sharding @gpus split_axes = {{\[}}[0, 2], []] : !shard.sharding
// CHECK: shard.shard %[[N]] to [[SH2]] : tensor<16x16xbf16>
// CHECK: loom.train @model optimizer "adamw" {beta1 = 9.000000e-01 : f64, lr = 3.000000e-04 : f64} microbatches 4 schedule "1f1b" loss_scale "none" steps 10
// CHECK: loom.train @model optimizer "sgd" {lr = 1.000000e-01 : f64, momentum = 9.000000e-01 : f64} microbatches 2 schedule "gpipe" loss_scale "static" initial_scale 1.024000e+03 steps 3
// CHECK: loom.train @model optimizer "adam" {} microbatches 1 schedule "interleaved" loss_scale "dynamic" steps 1
module attributes {loom.precision = #loom.precision<compute = bf16, accumulate = f32>} {
  shard.grid @gpus(shape = 2x2x2) {loom.axes = ["dp", "pp", "tp"], sym_visibility = "private"}
  func.func @model(%x: tensor<8x16xbf16> {loom.input = "x"},
                   %ids: tensor<8xi32> {loom.input = "ids"},
                   %z: tensor<16xf32> {loom.init = #loom.init<zeros>, loom.param = "z"},
                   %o: tensor<16xf32> {loom.init = #loom.init<ones>, loom.param = "o"},
                   %c: tensor<16xf32> {loom.init = #loom.init<constant(0.5)>, loom.param = "c"},
                   %n: tensor<16x16xbf16> {loom.init = #loom.init<normal(0.02)>, loom.param = "block.0.n"},
                   %u: tensor<16x16xbf16> {loom.init = #loom.init<uniform(-0.1, 0.1)>, loom.param = "u"},
                   %p: tensor<16x16xbf16> {loom.param = "p"})
      -> (tensor<8x16xbf16> {loom.output = "y"}, tensor<f32> {loom.loss = "loss"})
      attributes {loom.pipeline_axis = "pp"} {
    %s = shard.sharding @gpus split_axes = [[0], [2]] : !shard.sharding
    %xs = shard.shard %x to %s : tensor<8x16xbf16>
    %s2 = shard.sharding @gpus split_axes = [[0, 2], []] : !shard.sharding
    %ns = shard.shard %n to %s2 : tensor<16x16xbf16>
    %y = loom.matmul %xs, %ns accumulate f32 : (tensor<8x16xbf16>, tensor<16x16xbf16>) -> tensor<8x16xbf16>
    %yf = loom.cast %y : tensor<8x16xbf16> to tensor<8x16xf32>
    %l = loom.cross_entropy %yf, %ids : (tensor<8x16xf32>, tensor<8xi32>) -> tensor<f32>
    return %y, %l : tensor<8x16xbf16>, tensor<f32>
  }
  loom.train @model optimizer "adamw" {lr = 3.0e-4, beta1 = 0.9} microbatches 4 schedule "1f1b" loss_scale "none" steps 10
  loom.train @model optimizer "sgd" {lr = 0.1, momentum = 0.9} microbatches 2 schedule "gpipe" loss_scale "static" initial_scale 1024.0 steps 3
  loom.train @model optimizer "adam" {} microbatches 1 schedule "interleaved" loss_scale "dynamic" steps 1
}

// -----

// Every precision policy the attribute allows.

// CHECK: module attributes {loom.precision = #loom.precision<compute = f16, accumulate = f16>}
module attributes {loom.precision = #loom.precision<compute = f16, accumulate = f16>} {
}

// -----

// CHECK: module attributes {loom.precision = #loom.precision<compute = f32, accumulate = f32>}
module attributes {loom.precision = #loom.precision<compute = f32, accumulate = f32>} {
}

// -----

// CHECK: module attributes {loom.precision = #loom.precision<compute = bf16, accumulate = bf16>}
module attributes {loom.precision = #loom.precision<compute = bf16, accumulate = bf16>} {
}

// -----

// CHECK: module attributes {loom.precision = #loom.precision<compute = tf32, accumulate = f32>}
module attributes {loom.precision = #loom.precision<compute = tf32, accumulate = f32>} {
}

// -----

// A one-axis grid.
// CHECK: shard.grid @single(shape = 8) {loom.axes = ["dp"]}
shard.grid @single(shape = 8) {loom.axes = ["dp"]}

// -----

// The ops only gradients need (built by loom-autodiff).
// CHECK-LABEL: func.func @gradient_ops
func.func @gradient_ops(%x: tensor<4x1xf32>, %a: tensor<4x8xbf16>,
                        %ids: tensor<2x3xi32>, %g: tensor<2x3x8xf32>,
                        %logits: tensor<2x3x5xf32>, %labels: tensor<2x3xi32>,
                        %dl: tensor<f32>, %s: tensor<2x6x6xf32>) {
  // CHECK: loom.broadcast %{{.+}} : tensor<4x1xf32> -> tensor<2x4x8xf32>
  %0 = loom.broadcast %x : tensor<4x1xf32> -> tensor<2x4x8xf32>
  // CHECK: loom.activation_grad "gelu" %{{.+}}, %{{.+}} : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  %1 = loom.activation_grad "gelu" %a, %a : (tensor<4x8xbf16>, tensor<4x8xbf16>) -> tensor<4x8xbf16>
  // CHECK: loom.causal_mask_grad %{{.+}} : tensor<2x6x6xf32>
  %2 = loom.causal_mask_grad %s : tensor<2x6x6xf32>
  // CHECK: loom.embedding_grad %{{.+}}, %{{.+}} : (tensor<2x3xi32>, tensor<2x3x8xf32>) -> tensor<10x8xf32>
  %3 = loom.embedding_grad %ids, %g : (tensor<2x3xi32>, tensor<2x3x8xf32>) -> tensor<10x8xf32>
  // CHECK: loom.embedding_grad %{{.+}}, %{{.+}} rows %{{.+}} of 10 : (tensor<2x3xi32>, tensor<2x3x8xf32>, tensor<5xi32>) -> tensor<5x8xf32>
  %rows = loom.arange : tensor<5xi32>
  %5 = loom.embedding_grad %ids, %g rows %rows of 10 : (tensor<2x3xi32>, tensor<2x3x8xf32>, tensor<5xi32>) -> tensor<5x8xf32>
  // CHECK: loom.cross_entropy_grad %{{.+}}, %{{.+}}, %{{.+}} : (tensor<2x3x5xf32>, tensor<2x3xi32>, tensor<f32>) -> tensor<2x3x5xf32>
  %4 = loom.cross_entropy_grad %logits, %labels, %dl : (tensor<2x3x5xf32>, tensor<2x3xi32>, tensor<f32>) -> tensor<2x3x5xf32>
  return
}

// -----

// A layernorm's gradients (centered, with a scale) and an rmsnorm's
// (without one).
// CHECK-LABEL: func.func @norm_grad
// CHECK: loom.norm_grad %{{.+}}, %{{.+}} scale %{{.+}} epsilon 1.000000e-05 centered : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8xf32>) -> (tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>)
// CHECK: loom.norm_grad %{{.+}}, %{{.+}} epsilon 9.9999999999999995E-7 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
func.func @norm_grad(%x: tensor<4x8xbf16>, %g: tensor<8xf32>, %y: tensor<2x4x8xf32>) {
  %0:3 = loom.norm_grad %x, %x scale %g epsilon 1.0e-5 centered : (tensor<4x8xbf16>, tensor<4x8xbf16>, tensor<8xf32>) -> (tensor<4x8xbf16>, tensor<8xf32>, tensor<8xf32>)
  %1:3 = loom.norm_grad %y, %y epsilon 1.0e-6 : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> (tensor<2x4x8xf32>, tensor<8xf32>, tensor<8xf32>)
  return
}

// -----

// The mean of a gradient over a step's microbatches.
// CHECK-LABEL: func.func @accumulate
// CHECK: loom.accumulate %{{.+}} over 4 microbatches : tensor<8x16xf32>
func.func @accumulate(%g: tensor<8x16xf32>) -> tensor<8x16xf32> {
  %m = loom.accumulate %g over 4 microbatches : tensor<8x16xf32>
  return %m : tensor<8x16xf32>
}

// -----

// The routed pieces of an expanded MoE block.
// CHECK-LABEL: func.func @moe_pieces
// CHECK: %{{.+}}, %{{.+}}, %{{.+}}, %{{.+}} = loom.moe_route %{{.+}} top_k 2 capacity 5 : tensor<16x4xf32> -> tensor<16x2xi32>, tensor<16x2xi32>, tensor<20xi32>, tensor<4xf32>
// CHECK: loom.moe_gate %{{.+}}[%{{.+}}] : (tensor<16x4xf32>, tensor<16x2xi32>) -> tensor<16x2xf32>
// CHECK: loom.moe_gate_grad %{{.+}}[%{{.+}}], %{{.+}} : (tensor<16x4xf32>, tensor<16x2xi32>, tensor<16x2xf32>) -> tensor<16x4xf32>
// CHECK: loom.moe_dispatch %{{.+}}[%{{.+}}, %{{.+}}] : (tensor<16x32xbf16>, tensor<20xi32>, tensor<16x2xi32>) -> tensor<20x32xbf16>
// CHECK: loom.moe_combine %{{.+}}[%{{.+}}, %{{.+}}] weights %{{.+}} : (tensor<20x32xbf16>, tensor<20xi32>, tensor<16x2xi32>, tensor<16x2xf32>) -> tensor<16x32xbf16>
// CHECK: loom.moe_slot_dot %{{.+}}, %{{.+}}[%{{.+}}] : (tensor<16x32xbf16>, tensor<20x32xbf16>, tensor<16x2xi32>) -> tensor<16x2xf32>
// CHECK: loom.moe_stats %{{.+}}, %{{.+}} : (tensor<16x2xi32>, tensor<16x2xi32>) -> tensor<4x2xf32>
func.func @moe_pieces(%p: tensor<16x4xf32>, %x: tensor<16x32xbf16>, %dg: tensor<16x2xf32>) {
  %e, %s, %src, %c = loom.moe_route %p top_k 2 capacity 5 : tensor<16x4xf32> -> tensor<16x2xi32>, tensor<16x2xi32>, tensor<20xi32>, tensor<4xf32>
  %g = loom.moe_gate %p[%e] : (tensor<16x4xf32>, tensor<16x2xi32>) -> tensor<16x2xf32>
  %dp = loom.moe_gate_grad %p[%e], %dg : (tensor<16x4xf32>, tensor<16x2xi32>, tensor<16x2xf32>) -> tensor<16x4xf32>
  %t = loom.moe_dispatch %x[%src, %s] : (tensor<16x32xbf16>, tensor<20xi32>, tensor<16x2xi32>) -> tensor<20x32xbf16>
  %y = loom.moe_combine %t[%src, %s] weights %g : (tensor<20x32xbf16>, tensor<20xi32>, tensor<16x2xi32>, tensor<16x2xf32>) -> tensor<16x32xbf16>
  %d = loom.moe_slot_dot %y, %t[%s] : (tensor<16x32xbf16>, tensor<20x32xbf16>, tensor<16x2xi32>) -> tensor<16x2xf32>
  %st = loom.moe_stats %e, %s : (tensor<16x2xi32>, tensor<16x2xi32>) -> tensor<4x2xf32>
  return
}

// -----

// The per-rank pieces of expert parallelism (loom-partition): a rank's
// counts, the offsets they give every rank, routing with them into a send
// buffer, and the expert side's maps.
// CHECK-LABEL: func.func @moe_exchange
// CHECK: loom.moe_counts %{{.+}} : tensor<4x2xi32> -> tensor<1x2x8xi32>
// CHECK: loom.moe_offsets %{{.+}} : tensor<4x2x8xi32> -> tensor<4x2x8xi32>
// CHECK: loom.moe_route %{{.+}} offsets %{{.+}} top_k 2 capacity 3 buffer 2 : tensor<4x8xf32>, tensor<1x2x8xi32> -> tensor<4x2xi32>, tensor<4x2xi32>, tensor<16xi32>, tensor<8xf32>
// CHECK: loom.moe_exchange_map %{{.+}}, %{{.+}} capacity 3 buffer 2 : tensor<4x2x2xi32>, tensor<4x2x2xi32> -> tensor<16x1xi32>, tensor<6xi32>
func.func @moe_exchange(%p: tensor<4x8xf32>, %e: tensor<4x2xi32>, %all: tensor<4x2x8xi32>,
                        %mine: tensor<1x2x8xi32>, %c: tensor<4x2x2xi32>, %o: tensor<4x2x2xi32>) {
  %n = loom.moe_counts %e : tensor<4x2xi32> -> tensor<1x2x8xi32>
  %off = loom.moe_offsets %all : tensor<4x2x8xi32> -> tensor<4x2x8xi32>
  %e2, %s, %src, %fc = loom.moe_route %p offsets %mine top_k 2 capacity 3 buffer 2 : tensor<4x8xf32>, tensor<1x2x8xi32> -> tensor<4x2xi32>, tensor<4x2xi32>, tensor<16xi32>, tensor<8xf32>
  %rs, %sr = loom.moe_exchange_map %c, %o capacity 3 buffer 2 : tensor<4x2x2xi32>, tensor<4x2x2xi32> -> tensor<16x1xi32>, tensor<6xi32>
  return
}

// -----

// Slot blocks: each expert's 4 slots in 2 blocks of 2 (one expert per
// rank of the expert axis, its slots shared by 2 data-parallel ranks).
// CHECK-LABEL: func.func @moe_slot_blocks
// CHECK: loom.moe_route %{{.+}} offsets %{{.+}} top_k 2 capacity 4 buffer 2 blocks 2 : tensor<4x8xf32>, tensor<1x2x8xi32> -> tensor<4x2xi32>, tensor<4x2xi32>, tensor<32xi32>, tensor<8xf32>
// CHECK: loom.moe_exchange_map %{{.+}}, %{{.+}} block %{{.+}} capacity 4 buffer 2 blocks 2 : tensor<16x2x1xi32>, tensor<16x2x1xi32>, tensor<1xi32> -> tensor<32x1xi32>, tensor<2xi32>
func.func @moe_slot_blocks(%p: tensor<4x8xf32>, %mine: tensor<1x2x8xi32>, %c: tensor<16x2x1xi32>,
                           %o: tensor<16x2x1xi32>, %b: tensor<1xi32>) {
  %e, %s, %src, %fc = loom.moe_route %p offsets %mine top_k 2 capacity 4 buffer 2 blocks 2 : tensor<4x8xf32>, tensor<1x2x8xi32> -> tensor<4x2xi32>, tensor<4x2xi32>, tensor<32xi32>, tensor<8xf32>
  %rs, %sr = loom.moe_exchange_map %c, %o block %b capacity 4 buffer 2 blocks 2 : tensor<16x2x1xi32>, tensor<16x2x1xi32>, tensor<1xi32> -> tensor<32x1xi32>, tensor<2xi32>
  return
}

// -----

// CHECK-LABEL: func.func @dropout
// CHECK-SAME: (%[[X:[^:]+]]: tensor<2x4xbf16>, %[[R:[^:]+]]: tensor<2xi32>, %[[C:[^:]+]]: tensor<4xi32>, %[[S:[^:]+]]: tensor<f32>, %[[M:[^:]+]]: tensor<f32>)
// CHECK: loom.dropout %[[X]] positions(%[[R]], %[[C]]) {probability = 1.000000e-01 : f64, stream = 0 : i64} : (tensor<2x4xbf16>, tensor<2xi32>, tensor<4xi32>) -> tensor<2x4xbf16>
// CHECK: loom.dropout %[[X]] positions(%[[R]], %[[C]]) keys(%[[S]], %[[M]]) {probability = 5.000000e-01 : f64, stream = 7 : i64} : (tensor<2x4xbf16>, tensor<2xi32>, tensor<4xi32>, tensor<f32>, tensor<f32>) -> tensor<2x4xbf16>
func.func @dropout(%x: tensor<2x4xbf16>, %r: tensor<2xi32>, %c: tensor<4xi32>, %s: tensor<f32>, %m: tensor<f32>) {
  %0 = loom.dropout %x positions(%r, %c) {probability = 0.1 : f64, stream = 0 : i64} : (tensor<2x4xbf16>, tensor<2xi32>, tensor<4xi32>) -> tensor<2x4xbf16>
  %1 = loom.dropout %x positions(%r, %c) keys(%s, %m) {probability = 0.5 : f64, stream = 7 : i64} : (tensor<2x4xbf16>, tensor<2xi32>, tensor<4xi32>, tensor<f32>, tensor<f32>) -> tensor<2x4xbf16>
  return
}
