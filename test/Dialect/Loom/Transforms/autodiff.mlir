// RUN: loom-opt %s --split-input-file --loom-autodiff | FileCheck %s

// --loom-autodiff: for each loom.train model, the gradient of its loss with
// respect to every param is appended to its results ("grad.<param>", in
// param order), built from the ops' VJP rules in reverse program order.
// Inputs get no gradient.

// A linear layer with a broadcast bias, GELU and an mse loss: the bias
// gradient sums the rows back to [3]; the weight gradient is x^T @ dh and
// nothing computes the gradient of x (an input).
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: -> (tensor<f32> {loom.loss = "loss"}, tensor<8x3xf32> {loom.output = "grad.w"}, tensor<3xf32> {loom.output = "grad.b"})
// CHECK: %[[H:.+]] = loom.add
// CHECK: %[[Y:.+]] = loom.gelu %[[H]]
// CHECK: %[[LOSS:.+]] = loom.mse %[[Y]], %[[T:[^ ]+]]
// CHECK: %[[ONE:.+]] = loom.constant 1.000000e+00 : tensor<f32>
// CHECK: %[[DIFF:.+]] = loom.sub %[[Y]], %[[T]]
// CHECK: %[[SCALE:.+]] = loom.constant 0.16666666666666666 : tensor<f32>
// CHECK: %[[K:.+]] = loom.mul %[[ONE]], %[[SCALE]]
// CHECK: %[[DY:.+]] = loom.mul %[[DIFF]], %[[K]]
// CHECK: %[[DH:.+]] = loom.activation_grad "gelu" %[[H]], %[[DY]]
// CHECK: %[[DB:.+]] = loom.sum %[[DH]] axis 0 : tensor<4x3xf32> -> tensor<3xf32>
// CHECK: %[[XT:.+]] = loom.transpose %arg0 perm [1, 0]
// CHECK: %[[DW:.+]] = loom.matmul %[[XT]], %[[DH]] accumulate f32 : (tensor<8x4xf32>, tensor<4x3xf32>) -> tensor<8x3xf32>
// CHECK-NOT: loom.transpose %arg2
// CHECK: return %[[LOSS]], %[[DW]], %[[DB]]
func.func @mlp(%x: tensor<4x8xf32> {loom.input = "x"}, %t: tensor<4x3xf32> {loom.input = "t"},
               %w: tensor<8x3xf32> {loom.param = "w"}, %b: tensor<3xf32> {loom.param = "b"})
    -> (tensor<f32> {loom.loss = "loss"}) {
  %0 = loom.matmul %x, %w accumulate f32 : (tensor<4x8xf32>, tensor<8x3xf32>) -> tensor<4x3xf32>
  %1 = loom.add %0, %b : (tensor<4x3xf32>, tensor<3xf32>) -> tensor<4x3xf32>
  %2 = loom.gelu %1 : tensor<4x3xf32>
  %3 = loom.mse %2, %t : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<f32>
  return %3 : tensor<f32>
}
loom.train @mlp optimizer "sgd" {lr = 1.0e-1 : f64} microbatches 1 schedule "1f1b" loss_scale "none" steps 1

// -----

// A bias broadcast over two leading dims ([B, T, N] + [N]): its gradient is
// one sum over the B x T rows (the gradient seen as [6, 3]), not a sum over
// B to a [T, N] partial and then over T.
// CHECK-LABEL: func.func @bias3
// CHECK: %[[DH:.+]] = loom.activation_grad "gelu"
// CHECK: %[[ROWS:.+]] = loom.reshape %[[DH]] : tensor<2x3x3xf32> -> tensor<6x3xf32>
// CHECK: %[[DB:.+]] = loom.sum %[[ROWS]] axis 0 : tensor<6x3xf32> -> tensor<3xf32>
// CHECK-NOT: loom.sum %[[DH]]
// CHECK: return %{{.+}}, %[[DB]]
func.func @bias3(%x: tensor<2x3x3xf32> {loom.input = "x"}, %t: tensor<2x3x3xf32> {loom.input = "t"},
                 %b: tensor<3xf32> {loom.param = "b"})
    -> (tensor<f32> {loom.loss = "loss"}) {
  %0 = loom.add %x, %b : (tensor<2x3x3xf32>, tensor<3xf32>) -> tensor<2x3x3xf32>
  %1 = loom.gelu %0 : tensor<2x3x3xf32>
  %2 = loom.mse %1, %t : (tensor<2x3x3xf32>, tensor<2x3x3xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}
loom.train @bias3 optimizer "sgd" {lr = 1.0e-1 : f64} microbatches 1 schedule "1f1b" loss_scale "none" steps 1

// -----

// A broadcast (the `broadcast` builtin: a class token repeated over the
// batch): its gradient is summed over what it repeated.
// CHECK-LABEL: func.func @class_token
// CHECK: %[[DH:.+]] = loom.mul %{{.+}}, %{{.+}} : (tensor<4x1x8xf32>
// CHECK: %[[DC:.+]] = loom.sum %[[DH]] axis 0 {{.*}}: tensor<4x1x8xf32> -> tensor<1x8xf32>
// CHECK: return %{{.+}}, %[[DC]]
func.func @class_token(%t: tensor<4x1x8xf32> {loom.input = "t"},
                       %c: tensor<1x8xf32> {loom.param = "cls"})
    -> (tensor<f32> {loom.loss = "loss"}) {
  %0 = loom.broadcast %c : tensor<1x8xf32> -> tensor<4x1x8xf32>
  %1 = loom.mse %0, %t : (tensor<4x1x8xf32>, tensor<4x1x8xf32>) -> tensor<f32>
  return %1 : tensor<f32>
}
loom.train @class_token optimizer "sgd" {lr = 1.0e-1 : f64} microbatches 1 schedule "1f1b" loss_scale "none" steps 1

// -----

// A value used twice sums its gradients; a param the loss does not read
// gets zeros; the model's own outputs stay first.
// CHECK-LABEL: func.func @shared
// CHECK-SAME: -> (tensor<4xf32> {loom.output = "y"}, tensor<f32> {loom.loss = "loss"}, tensor<4xf32> {loom.output = "grad.w"}, tensor<4xf32> {loom.output = "grad.u"})
// CHECK: %[[ONES:.+]] = loom.broadcast %{{.+}} : tensor<1xf32> -> tensor<4xf32>
// CHECK: %[[A:.+]] = loom.mul %[[ONES]], %arg0
// CHECK: %[[B:.+]] = loom.mul %[[ONES]], %arg0
// CHECK: %[[DW:.+]] = loom.add %[[A]], %[[B]]
// CHECK: %[[ZERO:.+]] = loom.constant 0.000000e+00 : tensor<f32>
// CHECK: %[[DU:.+]] = loom.broadcast %[[ZERO]] : tensor<f32> -> tensor<4xf32>
// CHECK: return %{{.+}}, %{{.+}}, %[[DW]], %[[DU]]
func.func @shared(%w: tensor<4xf32> {loom.param = "w"}, %u: tensor<4xf32> {loom.param = "u"})
    -> (tensor<4xf32> {loom.output = "y"}, tensor<f32> {loom.loss = "loss"}) {
  %0 = loom.mul %w, %w : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
  %1 = loom.sum %0 axis 0 : tensor<4xf32> -> tensor<f32>
  %2 = loom.exp %u : tensor<4xf32>
  return %2, %1 : tensor<4xf32>, tensor<f32>
}
loom.train @shared optimizer "sgd" {lr = 1.0e-1 : f64} microbatches 1 schedule "1f1b" loss_scale "none" steps 1

// -----

// Recomputation: the ops of a layer instance marked loom.recompute that
// only the backward reads (the matmul before the GELU) are copied before
// their first backward use, marked loom.recomputed; the instance's output
// (read by the forward after it) and its input are kept.
// CHECK-LABEL: func.func @recompute
// CHECK: %[[H:.+]] = loom.matmul %arg0, %arg2 accumulate f32 {loom.recompute = "blk.0"}
// CHECK: %[[OUT:.+]] = loom.add {{.+}} {loom.recompute = "blk.0"}
// CHECK: loom.transpose %[[OUT]] perm [1, 0]
// CHECK: %[[AGAIN:.+]] = loom.matmul %arg0, %arg2 accumulate f32 {loom.recomputed = "blk.0"}
// CHECK-NEXT: loom.activation_grad "gelu" %[[AGAIN]],
// CHECK-NOT: "gelu" %[[H]]
func.func @recompute(%x: tensor<4x16xf32> {loom.input = "x"}, %t: tensor<4x16xf32> {loom.input = "t"},
                     %w0: tensor<16x16xf32> {loom.param = "blk.0.w"}, %w1: tensor<16x16xf32> {loom.param = "blk.1.w"})
    -> (tensor<f32> {loom.loss = "loss"}) {
  %0 = loom.matmul %x, %w0 accumulate f32 {loom.recompute = "blk.0"} : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
  %1 = loom.gelu %0 {loom.recompute = "blk.0"} : tensor<4x16xf32>
  %2 = loom.add %1, %x {loom.recompute = "blk.0"} : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %3 = loom.matmul %2, %w1 accumulate f32 : (tensor<4x16xf32>, tensor<16x16xf32>) -> tensor<4x16xf32>
  %4 = loom.gelu %3 : tensor<4x16xf32>
  %5 = loom.add %4, %2 : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<4x16xf32>
  %6 = loom.mse %5, %t : (tensor<4x16xf32>, tensor<4x16xf32>) -> tensor<f32>
  return %6 : tensor<f32>
}
loom.train @recompute optimizer "sgd" {} microbatches 1 schedule "1f1b" loss_scale "none" steps 1

// -----

// A master weight's gradient: the bf16 matmul's VJP into w's copy, then
// the f32 cast's into w, is one matmul into f32 (the accumulation type),
// never rounded to bf16; the input's gradient stays bf16.
// CHECK-LABEL: func.func @master
// CHECK:     %[[COPY:.+]] = loom.cast %arg1 : tensor<8x3xf32> to tensor<8x3xbf16>
// CHECK:     %[[Y:.+]] = loom.matmul %arg0, %[[COPY]] accumulate f32 : (tensor<4x8xbf16>, tensor<8x3xbf16>) -> tensor<4x3xbf16>
// CHECK:     %[[GW:.+]] = loom.matmul %{{.+}}, %{{.+}} accumulate f32 : (tensor<8x4xbf16>, tensor<4x3xbf16>) -> tensor<8x3xf32>
// CHECK-NOT: loom.cast %[[GW]]
// CHECK:     return %{{.+}}, %[[GW]] : tensor<f32>, tensor<8x3xf32>
func.func @master(%x: tensor<4x8xbf16> {loom.input = "x"}, %w: tensor<8x3xf32> {loom.param = "w"},
                   %t: tensor<4x3xf32> {loom.input = "t"})
    -> (tensor<f32> {loom.loss = "loss"}) {
  %0 = loom.cast %w : tensor<8x3xf32> to tensor<8x3xbf16>
  %1 = loom.matmul %x, %0 accumulate f32 : (tensor<4x8xbf16>, tensor<8x3xbf16>) -> tensor<4x3xbf16>
  %2 = loom.cast %1 : tensor<4x3xbf16> to tensor<4x3xf32>
  %3 = loom.mse %2, %t : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<f32>
  return %3 : tensor<f32>
}
loom.train @master optimizer "sgd" {lr = 1.0e-1 : f64} microbatches 1 schedule "1f1b" loss_scale "none" steps 1

// -----

// A tied master weight's gradient is computed in f32 all the way: the
// head's part (a matmul into f32, made [V, D] as dy^T @ h rather than
// [D, V] as h^T @ dy and then transposed by a copy), the lookup's
// scatter-add into an f32 table (it reads the bf16 row gradients, which
// the head's input gradient also is), and their sum; nothing rounds to
// bf16 before the f32 gradient, so its partial sums stay f32.
// CHECK-LABEL: func.func @tied
// CHECK:     %[[DYT:.+]] = loom.transpose %{{.+}} perm [1, 0] : tensor<4x16xbf16> -> tensor<16x4xbf16>
// CHECK:     %[[HEAD:.+]] = loom.matmul %[[DYT]], %{{.+}} accumulate f32 : (tensor<16x4xbf16>, tensor<4x8xbf16>) -> tensor<16x8xf32>
// CHECK-NOT: loom.transpose %[[HEAD]]
// CHECK:     %[[LOOKUP:.+]] = loom.embedding_grad %arg0, %{{.+}} : (tensor<4xi32>, tensor<4x8xbf16>) -> tensor<16x8xf32>
// CHECK:     %[[SUM:.+]] = loom.add %[[HEAD]], %[[LOOKUP]] : (tensor<16x8xf32>, tensor<16x8xf32>) -> tensor<16x8xf32>
// CHECK-NOT: loom.cast
// CHECK:     return %{{.+}}, %[[SUM]] : tensor<f32>, tensor<16x8xf32>
func.func @tied(%ids: tensor<4xi32> {loom.input = "ids"}, %w: tensor<16x8xf32> {loom.param = "w"},
                %labels: tensor<4xi32> {loom.input = "labels"})
    -> (tensor<f32> {loom.loss = "loss"}) {
  %0 = loom.cast %w : tensor<16x8xf32> to tensor<16x8xbf16>
  %1 = loom.embedding %0[%ids] : (tensor<16x8xbf16>, tensor<4xi32>) -> tensor<4x8xbf16>
  %2 = loom.transpose %0 perm [1, 0] : tensor<16x8xbf16> -> tensor<8x16xbf16>
  %3 = loom.matmul %1, %2 accumulate f32 : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
  %4 = loom.cross_entropy %3, %labels : (tensor<4x16xbf16>, tensor<4xi32>) -> tensor<f32>
  return %4 : tensor<f32>
}
loom.train @tied optimizer "sgd" {lr = 1.0e-1 : f64} microbatches 1 schedule "1f1b" loss_scale "none" steps 1

// -----

// An identity transpose's gradient is the product's own, not rebuilt as a
// swapped product (which gave a [3, 2] param a [2, 3] gradient, and a
// square one its transpose).
// CHECK-LABEL: func.func @identity_transpose
// CHECK:     %[[G:.+]] = loom.matmul %{{.+}}, %{{.+}} accumulate f32 : (tensor<3x4xf32>, tensor<4x2xf32>) -> tensor<3x2xf32>
// CHECK:     %[[T:.+]] = loom.transpose %[[G]] perm [0, 1] : tensor<3x2xf32> -> tensor<3x2xf32>
// CHECK:     return %{{.+}}, %[[T]], %{{.+}} : tensor<f32>, tensor<3x2xf32>, tensor<2x4xf32>
func.func @identity_transpose(%w: tensor<3x2xf32> {loom.param = "w"}, %u: tensor<2x4xf32> {loom.param = "u"})
    -> (tensor<f32> {loom.loss = "loss"}) {
  %0 = loom.transpose %w perm [0, 1] : tensor<3x2xf32> -> tensor<3x2xf32>
  %1 = loom.matmul %0, %u accumulate f32 : (tensor<3x2xf32>, tensor<2x4xf32>) -> tensor<3x4xf32>
  %2 = loom.mse %1, %1 : (tensor<3x4xf32>, tensor<3x4xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}
loom.train @identity_transpose optimizer "sgd" {lr = 1.0e-1 : f64} microbatches 1 schedule "1f1b" loss_scale "none" steps 1

// -----

// A 16-bit gradient that reaches an op along two paths (`v + v` in the
// forward: its gradient is dv + dv) widens each operand exactly, and the
// f32 add goes after both casts (it had gone between them: a dominance
// error in every bf16 --train build of such a script).
// CHECK-LABEL: func.func @twice
// CHECK:     loom.mul %{{.+}}, %{{.+}} : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
// CHECK:     %[[DV:.+]] = loom.add %{{.+}}, %{{.+}} : (tensor<2xbf16>, tensor<2xbf16>) -> tensor<2xbf16>
// CHECK-NEXT: %[[A:.+]] = loom.cast %[[DV]] : tensor<2xbf16> to tensor<2xf32>
// CHECK-NEXT: %[[B:.+]] = loom.cast %[[DV]] : tensor<2xbf16> to tensor<2xf32>
// CHECK-NEXT: %[[DW:.+]] = loom.add %[[B]], %[[A]] : (tensor<2xf32>, tensor<2xf32>) -> tensor<2xf32>
// CHECK-NEXT: return %{{.+}}, %[[DW]]
func.func @twice(%w: tensor<2xf32> {loom.param = "w"}) -> (tensor<f32> {loom.loss = "loss"}) {
  %0 = loom.cast %w : tensor<2xf32> to tensor<2xbf16>
  %1 = loom.add %0, %0 : (tensor<2xbf16>, tensor<2xbf16>) -> tensor<2xbf16>
  %2 = loom.mul %1, %1 : (tensor<2xbf16>, tensor<2xbf16>) -> tensor<2xbf16>
  %3 = loom.mean %2 axis 0 : tensor<2xbf16> -> tensor<bf16>
  %4 = loom.cast %3 : tensor<bf16> to tensor<f32>
  return %4 : tensor<f32>
}
loom.train @twice optimizer "sgd" {lr = 1.0e-1 : f64} microbatches 1 schedule "1f1b" loss_scale "none" steps 1

// -----

// A position embedding's gradient: the broadcast's sum over the batch is
// summed into f32 (from the exact f32 copy of the bf16 rows), then
// scattered into an f32 table: a sum over a split batch stays a partial
// sum, never rounded per rank.
// CHECK-LABEL: func.func @position
// CHECK:     %[[G:.+]] = loom.cast %{{.+}} : tensor<2x4x8xf32> to tensor<2x4x8xbf16>
// CHECK-NEXT: %[[WIDE:.+]] = loom.cast %[[G]] : tensor<2x4x8xbf16> to tensor<2x4x8xf32>
// CHECK-NEXT: %[[ROWS:.+]] = loom.sum %[[WIDE]] axis 0 : tensor<2x4x8xf32> -> tensor<4x8xf32>
// CHECK-NEXT: %[[TABLE:.+]] = loom.embedding_grad %{{.+}}, %[[ROWS]] : (tensor<4xi32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK:     return %{{.+}}, %[[TABLE]] : tensor<f32>, tensor<4x8xf32>
func.func @position(%x: tensor<2x4x8xbf16> {loom.input = "x"}, %w: tensor<4x8xf32> {loom.param = "w"},
                    %t: tensor<2x4x8xf32> {loom.input = "t"})
    -> (tensor<f32> {loom.loss = "loss"}) {
  %0 = loom.cast %w : tensor<4x8xf32> to tensor<4x8xbf16>
  %ids = loom.arange : tensor<4xi32>
  %1 = loom.embedding %0[%ids] : (tensor<4x8xbf16>, tensor<4xi32>) -> tensor<4x8xbf16>
  %2 = loom.add %x, %1 : (tensor<2x4x8xbf16>, tensor<4x8xbf16>) -> tensor<2x4x8xbf16>
  %3 = loom.cast %2 : tensor<2x4x8xbf16> to tensor<2x4x8xf32>
  %4 = loom.mse %3, %t : (tensor<2x4x8xf32>, tensor<2x4x8xf32>) -> tensor<f32>
  return %4 : tensor<f32>
}
loom.train @position optimizer "sgd" {lr = 1.0e-1 : f64} microbatches 1 schedule "1f1b" loss_scale "none" steps 1

// -----

// The routed MoE pieces: the combine's gradient gathers the output
// gradient into the slots with the same gates (a dispatch), the gates get
// a dot product per choice, the dispatch's gradient is a combine without
// weights, and the router probabilities get theirs through the gates only
// (routing decisions carry no gradient).
// CHECK-LABEL: func.func @routed
// CHECK: %[[E:.+]], %[[S:.+]], %[[SRC:.+]], %{{.+}} = loom.moe_route %[[P:[^ ]+]]
// CHECK: %[[G:.+]] = loom.moe_gate %[[P]][%[[E]]]
// CHECK: %[[D:.+]] = loom.moe_dispatch %[[X:[^\[]+]][%[[SRC]], %[[S]]]
// CHECK: %[[O:.+]] = loom.mul %[[D]], %[[W:[^ ]+]]
// CHECK: %[[Y:.+]] = loom.moe_combine %[[O]][%[[SRC]], %[[S]]] weights %[[G]]
// CHECK: %[[DO:.+]] = loom.moe_dispatch %[[DY:[^\[]+]][%[[SRC]], %[[S]]] weights %[[G]]
// CHECK: %[[DG:.+]] = loom.moe_slot_dot %[[DY]], %[[O]][%[[S]]]
// CHECK: loom.moe_combine %{{.+}}[%[[SRC]], %[[S]]] : (tensor<6x4xf32>, tensor<6xi32>, tensor<4x2xi32>) -> tensor<4x4xf32>
// CHECK: loom.moe_gate_grad %[[P]][%[[E]]], %[[DG]]
// CHECK-NOT: moe_route
// CHECK: return
func.func @routed(%x: tensor<4x4xf32> {loom.param = "x"}, %p: tensor<4x3xf32> {loom.param = "p"},
                  %w: tensor<6x4xf32> {loom.param = "w"}, %t: tensor<4x4xf32> {loom.input = "t"})
    -> (tensor<f32> {loom.loss = "loss"}) {
  %e, %s, %src, %c = loom.moe_route %p top_k 2 capacity 2 : tensor<4x3xf32> -> tensor<4x2xi32>, tensor<4x2xi32>, tensor<6xi32>, tensor<3xf32>
  %g = loom.moe_gate %p[%e] : (tensor<4x3xf32>, tensor<4x2xi32>) -> tensor<4x2xf32>
  %d = loom.moe_dispatch %x[%src, %s] : (tensor<4x4xf32>, tensor<6xi32>, tensor<4x2xi32>) -> tensor<6x4xf32>
  %o = loom.mul %d, %w : (tensor<6x4xf32>, tensor<6x4xf32>) -> tensor<6x4xf32>
  %y = loom.moe_combine %o[%src, %s] weights %g : (tensor<6x4xf32>, tensor<6xi32>, tensor<4x2xi32>, tensor<4x2xf32>) -> tensor<4x4xf32>
  %l = loom.mse %y, %t : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
loom.train @routed optimizer "sgd" {lr = 1.0e-1 : f64} microbatches 1 schedule "1f1b" loss_scale "none" steps 1

// -----

// max: the gradient goes to the maxima (loom.max_mask), shared evenly among
// ties (divided by their count along the axis); log: dy / x.
// CHECK-LABEL: func.func @max_log
// CHECK: %[[M:.+]] = loom.max %[[W:[^ ]+]] axis 1 : tensor<4x3xf32> -> tensor<4xf32>
// CHECK: %[[L:.+]] = loom.log %[[W]] : tensor<4x3xf32>
// CHECK: loom.div %{{.+}}, %[[W]] : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<4x3xf32>
// CHECK: %[[MK:.+]] = loom.reshape %[[M]] : tensor<4xf32> -> tensor<4x1xf32>
// CHECK: %[[MASK:.+]] = loom.max_mask %[[W]], %[[MK]] : (tensor<4x3xf32>, tensor<4x1xf32>) -> tensor<4x3xf32>
// CHECK: %[[TIES:.+]] = loom.sum %[[MASK]] axis 1 keepdim : tensor<4x3xf32> -> tensor<4x1xf32>
// CHECK: %[[SHARE:.+]] = loom.div %{{.+}}, %[[TIES]] : (tensor<4x1xf32>, tensor<4x1xf32>) -> tensor<4x1xf32>
// CHECK: loom.mul %[[MASK]], %[[SHARE]] : (tensor<4x3xf32>, tensor<4x1xf32>) -> tensor<4x3xf32>
// CHECK: return
func.func @max_log(%w: tensor<4x3xf32> {loom.param = "w"}, %t: tensor<4xf32> {loom.input = "t"},
                   %t2: tensor<4x3xf32> {loom.input = "t2"})
    -> (tensor<f32> {loom.loss = "loss"}) {
  %m = loom.max %w axis 1 : tensor<4x3xf32> -> tensor<4xf32>
  %l = loom.log %w : tensor<4x3xf32>
  %a = loom.mse %m, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
  %b = loom.mse %l, %t2 : (tensor<4x3xf32>, tensor<4x3xf32>) -> tensor<f32>
  %s = loom.add %a, %b : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %s : tensor<f32>
}
loom.train @max_log optimizer "sgd" {lr = 1.0e-1 : f64} microbatches 1 schedule "1f1b" loss_scale "none" steps 1

// -----

// sin and cos: dy * cos(x) and -dy * sin(x), both from the operand.
// CHECK-LABEL: func.func @sin_cos
// CHECK: %[[S:.+]] = loom.sin %[[W:[^ ]+]] : tensor<4xf32>
// CHECK: %[[C:.+]] = loom.cos %[[W]] : tensor<4xf32>
// CHECK-DAG: %[[DS:.+]] = loom.cos %[[W]] : tensor<4xf32>
// CHECK-DAG: %[[SW:.+]] = loom.sin %[[W]] : tensor<4xf32>
// CHECK-DAG: %[[DC:.+]] = loom.neg %[[SW]] : tensor<4xf32>
// CHECK-DAG: loom.mul %{{.+}}, %[[DS]] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK-DAG: loom.mul %{{.+}}, %[[DC]] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK: return
func.func @sin_cos(%w: tensor<4xf32> {loom.param = "w"}, %t: tensor<4xf32> {loom.input = "t"})
    -> (tensor<f32> {loom.loss = "loss"}) {
  %s = loom.sin %w : tensor<4xf32>
  %c = loom.cos %w : tensor<4xf32>
  %a = loom.mse %s, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
  %b = loom.mse %c, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
  %l = loom.add %a, %b : (tensor<f32>, tensor<f32>) -> tensor<f32>
  return %l : tensor<f32>
}
loom.train @sin_cos optimizer "sgd" {lr = 1.0e-1 : f64} microbatches 1 schedule "1f1b" loss_scale "none" steps 1

// -----

// maximum: each operand's share of dy is its equality mask with the result
// over both masks (a tie gets half each); the broadcast operand's is
// summed back over the rows. abs: dy * sign(x) (loom.activation_grad).
// CHECK-LABEL: func.func @maximum_abs
// CHECK-SAME: (%[[W:[^:]+]]: tensor<4x8xf32> {loom.param = "w"}, %[[B:[^:]+]]: tensor<8xf32> {loom.param = "b"}
// CHECK: %[[M:.+]] = loom.maximum %[[W]], %[[B]]
// CHECK: %[[DM:.+]] = loom.activation_grad "abs" %[[M]], %{{.+}} : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: %[[MW:.+]] = loom.max_mask %[[M]], %[[W]] : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: %[[B1:.+]] = loom.broadcast %[[B]] : tensor<8xf32> -> tensor<4x8xf32>
// CHECK: %[[MB:.+]] = loom.max_mask %[[M]], %[[B1]] : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK: %[[BOTH:.+]] = loom.add %[[MW]], %[[MB]]
// CHECK: %[[SHARE:.+]] = loom.div %[[DM]], %[[BOTH]]
// CHECK: %[[GW:.+]] = loom.mul %[[MW]], %[[SHARE]]
// CHECK: %[[GB:.+]] = loom.mul %[[MB]], %[[SHARE]]
// CHECK: %[[SB:.+]] = loom.sum %[[GB]] axis 0 : tensor<4x8xf32> -> tensor<8xf32>
// CHECK: return %{{.+}}, %[[GW]], %[[SB]]
func.func @maximum_abs(%w: tensor<4x8xf32> {loom.param = "w"}, %b: tensor<8xf32> {loom.param = "b"},
                       %t: tensor<4x8xf32> {loom.input = "t"}) -> (tensor<f32> {loom.loss = "loss"}) {
  %m = loom.maximum %w, %b : (tensor<4x8xf32>, tensor<8xf32>) -> tensor<4x8xf32>
  %a = loom.abs %m : tensor<4x8xf32>
  %l = loom.mse %a, %t : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
loom.train @maximum_abs optimizer "sgd" {lr = 1.0e-1 : f64} microbatches 1 schedule "1f1b" loss_scale "none" steps 1

// -----

// dropout: the gradient through the same mask, a dropout of dy with the
// forward's positions and stream (the step keys both alike).
// CHECK-LABEL: func.func @dropout
// CHECK: %[[R:.+]] = loom.arange : tensor<4xi32>
// CHECK: loom.dropout %{{.+}} positions(%[[R]]) {probability = 2.500000e-01 : f64, stream = 2 : i64}
// CHECK: %[[DX:.+]] = loom.dropout %{{.+}} positions(%[[R]]) {probability = 2.500000e-01 : f64, stream = 2 : i64}
// CHECK: return %{{.+}}, %[[DX]]
func.func @dropout(%w: tensor<4xf32> {loom.param = "w"}, %t: tensor<4xf32> {loom.input = "t"})
    -> (tensor<f32> {loom.loss = "loss"}) {
  %r = loom.arange : tensor<4xi32>
  %d = loom.dropout %w positions(%r) {probability = 0.25 : f64, stream = 2 : i64} : (tensor<4xf32>, tensor<4xi32>) -> tensor<4xf32>
  %l = loom.mse %d, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
  return %l : tensor<f32>
}
loom.train @dropout optimizer "sgd" {lr = 1.0e-1 : f64} microbatches 1 schedule "1f1b" loss_scale "none" steps 1

// -----

// erf: dy * 2 / sqrt(pi) * exp(-x^2), from the operand.
// CHECK-LABEL: func.func @erf
// CHECK-SAME: (%[[W:[^:]+]]: tensor<4xf32>
// CHECK: loom.erf %[[W]] : tensor<4xf32>
// CHECK: %[[SQ:.+]] = loom.mul %[[W]], %[[W]]
// CHECK: %[[NEG:.+]] = loom.neg %[[SQ]]
// CHECK: %[[GAUSS:.+]] = loom.exp %[[NEG]]
// CHECK: %[[C:.+]] = loom.constant 1.128379{{[0-9]*}} : tensor<f32>
// CHECK: %[[D:.+]] = loom.mul %[[C]], %[[GAUSS]]
// CHECK: loom.mul %{{.+}}, %[[D]] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK: return
func.func @erf(%w: tensor<4xf32> {loom.param = "w"}, %t: tensor<4xf32> {loom.input = "t"})
    -> (tensor<f32> {loom.loss = "loss"}) {
  %e = loom.erf %w : tensor<4xf32>
  %a = loom.mse %e, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
  return %a : tensor<f32>
}
loom.train @erf optimizer "sgd" {lr = 1.0e-1 : f64} microbatches 1 schedule "1f1b" loss_scale "none" steps 1

// -----

// sigmoid: dy * y (1 - y), from the result.
// CHECK-LABEL: func.func @sigmoid
// CHECK: %[[Y:.+]] = loom.sigmoid %{{[^ ]+}} : tensor<4xf32>
// CHECK-DAG: %[[ONE_MINUS:.+]] = loom.sub %{{.+}}, %[[Y]]
// CHECK-DAG: %[[DY:.+]] = loom.mul %[[Y]], %[[ONE_MINUS]]
// CHECK: loom.mul %{{.+}}, %[[DY]] : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
// CHECK: return
func.func @sigmoid(%w: tensor<4xf32> {loom.param = "w"}, %t: tensor<4xf32> {loom.input = "t"})
    -> (tensor<f32> {loom.loss = "loss"}) {
  %s = loom.sigmoid %w : tensor<4xf32>
  %a = loom.mse %s, %t : (tensor<4xf32>, tensor<4xf32>) -> tensor<f32>
  return %a : tensor<f32>
}
loom.train @sigmoid optimizer "sgd" {lr = 1.0e-1 : f64} microbatches 1 schedule "1f1b" loss_scale "none" steps 1

// -----

// An attention the backward differentiates keeps its rows' log-sum-exp: it
// is rebuilt with loom.attention's second result before any rule runs, and
// its VJP is one loom.attention_grad reading the result and lse. An
// attention of inputs alone (no param reaches it) keeps one result.
// CHECK-LABEL: func.func @attention
// CHECK: %[[FIXED:.+]] = loom.attention %arg0, %arg0, %arg0 causal accumulate f32 : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
// CHECK: %[[O:.+]], %[[LSE:.+]] = loom.attention %arg2, %[[FIXED]], %arg0 causal accumulate f32 : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> (tensor<2x8x4xf32>, tensor<2x8xf32>)
// CHECK: loom.mse %[[O]], %arg1
// CHECK: %[[DQ:.+]], %{{.+}}, %{{.+}} = loom.attention_grad %arg2, %[[FIXED]], %arg0, %[[O]], %[[LSE]], %{{.+}} causal accumulate f32
// CHECK: return %{{.+}}, %[[DQ]]
func.func @attention(%x: tensor<2x8x4xf32> {loom.input = "x"}, %t: tensor<2x8x4xf32> {loom.input = "t"},
                     %q: tensor<2x8x4xf32> {loom.param = "q"})
    -> (tensor<f32> {loom.loss = "loss"}) {
  %0 = loom.attention %x, %x, %x causal accumulate f32
      : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %1 = loom.attention %q, %0, %x causal accumulate f32
      : (tensor<2x8x4xf32>, tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<2x8x4xf32>
  %2 = loom.mse %1, %t : (tensor<2x8x4xf32>, tensor<2x8x4xf32>) -> tensor<f32>
  return %2 : tensor<f32>
}
loom.train @attention optimizer "sgd" {lr = 1.0e-1 : f64} microbatches 1 schedule "1f1b" loss_scale "none" steps 1
