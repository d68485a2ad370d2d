// RUN: loom-opt %s --split-input-file --loom-outline-kernels --verify-diagnostics | FileCheck %s

// --loom-outline-kernels: each public model function is cut into kernels.
// An op that reads memory in its own pattern (matmul, softmax, norms,
// reductions, data movement, losses) starts a kernel; elementwise ops that
// consume a result of the latest kernel join it as its epilogue. Each
// kernel becomes a private function @<model>_kN marked loom.kernel, placed
// before the model, and the model becomes a sequence of calls.

// A matmul with its bias add, activation and cast is ONE kernel; the
// second matmul starts the next one. The model keeps its signature and
// argument attributes.
// CHECK-LABEL: func.func private @mlp_k0
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x8xbf16>, %[[W1:[^:]+]]: tensor<8x16xbf16>, %[[B1:[^:]+]]: tensor<16xf32>) -> tensor<4x16xbf16>
// CHECK-SAME: attributes {loom.kernel}
// CHECK-NEXT: [[M:%.+]] = loom.matmul %[[X]], %[[W1]] accumulate f32
// CHECK-NEXT: [[A:%.+]] = loom.add [[M]], %[[B1]]
// CHECK-NEXT: [[G:%.+]] = loom.gelu [[A]] : tensor<4x16xf32>
// CHECK-NEXT: [[C:%.+]] = loom.cast [[G]] : tensor<4x16xf32> to tensor<4x16xbf16>
// CHECK-NEXT: return [[C]] : tensor<4x16xbf16>
// CHECK-LABEL: func.func private @mlp_k1
// CHECK-SAME: (%[[H:[^:]+]]: tensor<4x16xbf16>, %[[W2:[^:]+]]: tensor<16x8xbf16>) -> tensor<4x8xbf16>
// CHECK-SAME: attributes {loom.kernel}
// CHECK-NEXT: [[Y:%.+]] = loom.matmul %[[H]], %[[W2]] accumulate f32
// CHECK-NEXT: return [[Y]] : tensor<4x8xbf16>
// CHECK-LABEL: func.func @mlp
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x8xbf16> {loom.input = "x"}, %[[W1:[^:]+]]: tensor<8x16xbf16> {loom.init = #loom.init<normal(2.000000e-02)>, loom.param = "w1"}, %[[B1:[^:]+]]: tensor<16xf32> {loom.init = #loom.init<zeros>, loom.param = "b1"}, %[[W2:[^:]+]]: tensor<16x8xbf16> {loom.param = "w2"})
// CHECK-SAME: -> (tensor<4x8xbf16> {loom.output = "y"})
// CHECK-NEXT: [[H:%.+]] = call @mlp_k0(%[[X]], %[[W1]], %[[B1]]) : (tensor<4x8xbf16>, tensor<8x16xbf16>, tensor<16xf32>) -> tensor<4x16xbf16>
// CHECK-NEXT: [[Y:%.+]] = call @mlp_k1([[H]], %[[W2]]) : (tensor<4x16xbf16>, tensor<16x8xbf16>) -> tensor<4x8xbf16>
// CHECK-NEXT: return [[Y]] : tensor<4x8xbf16>
// CHECK-NOT: loom.kernel
module attributes {loom.precision = #loom.precision<compute = bf16, accumulate = f32>} {
  func.func @mlp(%x: tensor<4x8xbf16> {loom.input = "x"},
                 %w1: tensor<8x16xbf16> {loom.init = #loom.init<normal(0.02)>, loom.param = "w1"},
                 %b1: tensor<16xf32> {loom.init = #loom.init<zeros>, loom.param = "b1"},
                 %w2: tensor<16x8xbf16> {loom.param = "w2"})
      -> (tensor<4x8xbf16> {loom.output = "y"}) {
    %0 = loom.matmul %x, %w1 accumulate f32 : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
    %1 = loom.add %0, %b1 : (tensor<4x16xbf16>, tensor<16xf32>) -> tensor<4x16xf32>
    %2 = loom.gelu %1 : tensor<4x16xf32>
    %3 = loom.cast %2 : tensor<4x16xf32> to tensor<4x16xbf16>
    %4 = loom.matmul %3, %w2 accumulate f32 : (tensor<4x16xbf16>, tensor<16x8xbf16>) -> tensor<4x8xbf16>
    return %4 : tensor<4x8xbf16>
  }
}

// -----

// A softmax starts a new kernel although it consumes the previous kernel's
// result; the elementwise ops after it join the softmax kernel. Scalar
// constants are cloned into every kernel that uses them (once per kernel)
// and disappear from the model.
// CHECK-LABEL: func.func private @attn_k0
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<4x8xf32>, %[[K:[^:]+]]: tensor<8x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: [[S:%.+]] = loom.matmul %[[Q]], %[[K]] accumulate f32
// CHECK-NEXT: [[C:%.+]] = loom.constant 1.250000e-01 : tensor<f32>
// CHECK-NEXT: [[SC:%.+]] = loom.mul [[S]], [[C]]
// CHECK-NEXT: return [[SC]] : tensor<4x4xf32>
// CHECK-LABEL: func.func private @attn_k1
// CHECK-SAME: (%[[SC:[^:]+]]: tensor<4x4xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: [[P:%.+]] = loom.softmax %[[SC]] axis 1 : tensor<4x4xf32>
// CHECK-NEXT: [[C:%.+]] = loom.constant 1.250000e-01 : tensor<f32>
// CHECK-NEXT: [[D:%.+]] = loom.div [[P]], [[C]]
// CHECK-NEXT: [[E:%.+]] = loom.sub [[D]], [[C]]
// CHECK-NEXT: return [[E]] : tensor<4x4xf32>
// CHECK-LABEL: func.func @attn
// CHECK-SAME: (%[[Q:[^:]+]]: tensor<4x8xf32>, %[[K:[^:]+]]: tensor<8x4xf32>)
// CHECK-NEXT: [[SC:%.+]] = call @attn_k0(%[[Q]], %[[K]])
// CHECK-NEXT: [[E:%.+]] = call @attn_k1([[SC]])
// CHECK-NEXT: return [[E]] : tensor<4x4xf32>
func.func @attn(%q: tensor<4x8xf32>, %k: tensor<8x4xf32>) -> tensor<4x4xf32> {
  %c = loom.constant 0.125 : tensor<f32>
  %s = loom.matmul %q, %k accumulate f32 : (tensor<4x8xf32>, tensor<8x4xf32>) -> tensor<4x4xf32>
  %sc = loom.mul %s, %c : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  %p = loom.softmax %sc axis 1 : tensor<4x4xf32>
  %d = loom.div %p, %c : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  %e = loom.sub %d, %c : (tensor<4x4xf32>, tensor<f32>) -> tensor<4x4xf32>
  return %e : tensor<4x4xf32>
}

// -----

// arange is cloned into its user like a constant; no kernel is made for it.
// CHECK-LABEL: func.func private @pos_k0
// CHECK-SAME: (%[[T:[^:]+]]: tensor<10x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT: [[I:%.+]] = loom.arange : tensor<6xi32>
// CHECK-NEXT: [[E:%.+]] = loom.embedding %[[T]][[[I]]]
// CHECK-NEXT: return [[E]] : tensor<6x4xf32>
// CHECK-LABEL: func.func @pos
// CHECK-SAME: (%[[T:[^:]+]]: tensor<10x4xf32>)
// CHECK-NEXT: [[E:%.+]] = call @pos_k0(%[[T]]) : (tensor<10x4xf32>) -> tensor<6x4xf32>
// CHECK-NEXT: return [[E]]
// CHECK-NOT: func.func private @pos_k1
func.func @pos(%t: tensor<10x4xf32>) -> tensor<6x4xf32> {
  %i = loom.arange : tensor<6xi32>
  %e = loom.embedding %t[%i] : (tensor<10x4xf32>, tensor<6xi32>) -> tensor<6x4xf32>
  return %e : tensor<6x4xf32>
}

// -----

// Kernel inputs are exactly the values from outside the group (a value
// read twice is one input); outputs are exactly the results read after the
// group or returned: the matmul result and the add, read later, are
// outputs; the gelu, read later too, is one output although two later
// kernels read it; values used only inside the group are not outputs.
// CHECK-LABEL: func.func private @io_k0
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x8xf32>, %[[W:[^:]+]]: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK-NEXT: [[M:%.+]] = loom.matmul %[[X]], %[[W]] accumulate f32
// CHECK-NEXT: [[A:%.+]] = loom.add [[M]], %[[X]]
// CHECK-NEXT: [[N:%.+]] = loom.neg [[A]]
// CHECK-NEXT: [[G:%.+]] = loom.gelu [[N]]
// CHECK-NEXT: return [[M]], [[A]], [[G]] : tensor<4x8xf32>, tensor<4x8xf32>, tensor<4x8xf32>
// CHECK-LABEL: func.func private @io_k1
// CHECK-SAME: (%[[G:[^:]+]]: tensor<4x8xf32>, %[[A:[^:]+]]: tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: [[S:%.+]] = loom.softmax %[[G]] axis 1
// CHECK-NEXT: [[R:%.+]] = loom.add [[S]], %[[A]]
// CHECK-NEXT: return [[R]] : tensor<4x8xf32>
// CHECK-LABEL: func.func private @io_k2
// CHECK-SAME: (%[[G:[^:]+]]: tensor<4x8xf32>) -> tensor<8x4xf32>
// CHECK-NEXT: [[T:%.+]] = loom.transpose %[[G]] perm [1, 0]
// CHECK-NEXT: return [[T]] : tensor<8x4xf32>
// CHECK-LABEL: func.func @io
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x8xf32>, %[[W:[^:]+]]: tensor<8x8xf32>)
// CHECK-NEXT: [[K0:%.+]]:3 = call @io_k0(%[[X]], %[[W]])
// CHECK-NEXT: [[R:%.+]] = call @io_k1([[K0]]#2, [[K0]]#1)
// CHECK-NEXT: [[T:%.+]] = call @io_k2([[K0]]#2)
// CHECK-NEXT: return [[R]], [[T]], [[K0]]#0 :
func.func @io(%x: tensor<4x8xf32>, %w: tensor<8x8xf32>) -> (tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>) {
  %m = loom.matmul %x, %w accumulate f32 : (tensor<4x8xf32>, tensor<8x8xf32>) -> tensor<4x8xf32>
  %a = loom.add %m, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %n = loom.neg %a : tensor<4x8xf32>
  %g = loom.gelu %n : tensor<4x8xf32>
  %s = loom.softmax %g axis 1 : tensor<4x8xf32>
  %r = loom.add %s, %a : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  %t = loom.transpose %g perm [1, 0] : tensor<4x8xf32> -> tensor<8x4xf32>
  return %r, %t, %m : tensor<4x8xf32>, tensor<8x4xf32>, tensor<4x8xf32>
}

// -----

// Only the latest kernel takes an epilogue: an elementwise op on a result
// of an earlier kernel, or on arguments only, is a kernel of its own. Data
// movement ops (reshape, split) start kernels; of a split only the pieces
// read later are outputs.
// CHECK-LABEL: func.func private @late_k0
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: loom.relu %[[X]]
// CHECK-LABEL: func.func private @late_k1
// CHECK-SAME: (%[[R:[^:]+]]: tensor<4x8xf32>) -> tensor<32xf32>
// CHECK-NEXT: loom.reshape %[[R]]
// CHECK-LABEL: func.func private @late_k2
// CHECK-SAME: (%[[R:[^:]+]]: tensor<4x8xf32>) -> tensor<4x4xf32>
// CHECK-NEXT: [[P:%.+]]:2 = loom.split %[[R]] axis 1
// CHECK-NEXT: [[E:%.+]] = loom.exp [[P]]#1
// CHECK-NEXT: return [[E]] : tensor<4x4xf32>
// CHECK-LABEL: func.func private @late_k3
// CHECK-SAME: (%[[R:[^:]+]]: tensor<4x8xf32>, %[[X:[^:]+]]: tensor<4x8xf32>) -> tensor<4x8xf32>
// CHECK-NEXT: loom.sub %[[R]], %[[X]]
// CHECK-LABEL: func.func @late
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4x8xf32>)
// CHECK-NEXT: [[R:%.+]] = call @late_k0(%[[X]])
// CHECK-NEXT: [[F:%.+]] = call @late_k1([[R]])
// CHECK-NEXT: [[E:%.+]] = call @late_k2([[R]])
// CHECK-NEXT: [[S:%.+]] = call @late_k3([[R]], %[[X]])
// CHECK-NEXT: return [[F]], [[E]], [[S]]
func.func @late(%x: tensor<4x8xf32>) -> (tensor<32xf32>, tensor<4x4xf32>, tensor<4x8xf32>) {
  %r = loom.relu %x : tensor<4x8xf32>
  %f = loom.reshape %r : tensor<4x8xf32> -> tensor<32xf32>
  %p:2 = loom.split %r axis 1 : tensor<4x8xf32> -> tensor<4x4xf32>, tensor<4x4xf32>
  %e = loom.exp %p#1 : tensor<4x4xf32>
  %s = loom.sub %r, %x : (tensor<4x8xf32>, tensor<4x8xf32>) -> tensor<4x8xf32>
  return %f, %e, %s : tensor<32xf32>, tensor<4x4xf32>, tensor<4x8xf32>
}

// -----

// Every public model is outlined with its own numbering; private helpers
// and declarations are left alone. A model that computes nothing keeps its
// body.
// CHECK-LABEL: func.func private @a_k0
// CHECK-NEXT: loom.tanh
// CHECK-LABEL: func.func @a
// CHECK-NEXT: call @a_k0
// CHECK-LABEL: func.func private @helper
// CHECK-NEXT: loom.gelu
// CHECK-NEXT: return
// CHECK-LABEL: func.func private @decl
// CHECK-LABEL: func.func private @b_k0
// CHECK-NEXT: loom.max
// CHECK-LABEL: func.func @b
// CHECK-NEXT: call @b_k0
// CHECK-LABEL: func.func @identity
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4xf32>)
// CHECK-NEXT: return %[[X]]
// CHECK-NOT: @identity_k0
func.func @a(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = loom.tanh %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func private @helper(%x: tensor<4xf32>) -> tensor<4xf32> {
  %0 = loom.gelu %x : tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func private @decl(tensor<4xf32>) -> tensor<4xf32>
func.func @b(%x: tensor<4x2xf32>) -> tensor<4xf32> {
  %0 = loom.max %x axis 1 : tensor<4x2xf32> -> tensor<4xf32>
  return %0 : tensor<4xf32>
}
func.func @identity(%x: tensor<4xf32>) -> tensor<4xf32> {
  return %x : tensor<4xf32>
}

// -----

func.func @moe(%x: tensor<16x32xf32>, %r: tensor<32x4xf32>) -> tensor<16x32xf32> {
  %g = loom.gelu %x : tensor<16x32xf32>
  // expected-error @+1 {{'loom.moe' must be expanded (loom-expand-moe) before kernels are outlined}}
  %0 = loom.moe %g router %r {axis = "ep", capacity = 8 : i64, capacity_factor = 1.0 : f64, experts = 4 : i64, top_k = 2 : i64}
      : (tensor<16x32xf32>, tensor<32x4xf32>) -> tensor<16x32xf32> {
  ^bb0(%t: tensor<8x32xf32>):
    %e = loom.relu %t : tensor<8x32xf32>
    loom.yield %e : tensor<8x32xf32>
  }
  return %0 : tensor<16x32xf32>
}

// -----

// Stages must be inlined first (--loom-inline-stages).
func.func @stage(%x: tensor<4xf32>) -> tensor<4xf32> {
  // expected-error @+1 {{'loom.stage' must be inlined (loom-inline-stages) before kernels are outlined}}
  %0 = loom.stage 0 -> tensor<4xf32> {
    %g = loom.gelu %x : tensor<4xf32>
    loom.yield %g : tensor<4xf32>
  }
  return %0 : tensor<4xf32>
}

// -----

// A matrix transpose (last two dims swapped) read only as a matmul's B
// joins the matmul's kernel, moved past the cast between them, so
// convert-loom-to-linalg can read B in place. The cast then joins the
// norm's kernel before it.
// CHECK-LABEL: func.func private @head_k0
// CHECK: loom.layernorm
// CHECK-NEXT: loom.cast
// CHECK-NEXT: return
// CHECK-LABEL: func.func private @head_k1
// CHECK-SAME: (%[[WTE:[^:]+]]: tensor<32x8xbf16>, %[[H:[^:]+]]: tensor<4x8xbf16>) -> tensor<4x32xbf16>
// CHECK-NEXT: [[T:%.+]] = loom.transpose %[[WTE]] perm [1, 0]
// CHECK-NEXT: loom.matmul %[[H]], [[T]]
// CHECK-NEXT: return
// CHECK-LABEL: func.func @head
// CHECK-NEXT: call @head_k0
// CHECK-NEXT: call @head_k1
// CHECK-NEXT: return
module attributes {loom.precision = #loom.precision<compute = bf16, accumulate = f32>} {
  func.func @head(%x: tensor<4x8xbf16> {loom.input = "x"},
                  %g: tensor<8xf32> {loom.param = "g"},
                  %wte: tensor<32x8xbf16> {loom.param = "wte"})
      -> (tensor<4x32xbf16> {loom.output = "y"}) {
    %0 = loom.layernorm %x scale %g epsilon 1.0e-05 : (tensor<4x8xbf16>, tensor<8xf32>) -> tensor<4x8xf32>
    %1 = loom.transpose %wte perm [1, 0] : tensor<32x8xbf16> -> tensor<8x32xbf16>
    %2 = loom.cast %0 : tensor<4x8xf32> to tensor<4x8xbf16>
    %3 = loom.matmul %2, %1 accumulate f32 : (tensor<4x8xbf16>, tensor<8x32xbf16>) -> tensor<4x32xbf16>
    return %3 : tensor<4x32xbf16>
  }
}

// -----

// A transpose that something else reads too, or that permutes other dims,
// stays a kernel of its own (it is materialized anyway).
// CHECK-LABEL: func.func private @shared_k0
// CHECK-NEXT: loom.transpose
// CHECK-NEXT: return
// CHECK-LABEL: func.func private @shared_k1
// CHECK-NEXT: loom.matmul
// CHECK-NEXT: return
// CHECK-LABEL: func.func private @shared_k2
// CHECK-NEXT: loom.transpose {{.*}} perm [1, 0, 2]
// CHECK-NEXT: return
// CHECK-LABEL: func.func private @shared_k3
// CHECK-NEXT: loom.matmul
// CHECK-NEXT: return
module attributes {loom.precision = #loom.precision<compute = bf16, accumulate = f32>} {
  func.func @shared(%q: tensor<4x8xbf16> {loom.input = "q"},
                    %k: tensor<16x8xbf16> {loom.input = "k"},
                    %v: tensor<8x2x16xbf16> {loom.input = "v"},
                    %p: tensor<2x4x8xbf16> {loom.input = "p"})
      -> (tensor<4x16xbf16> {loom.output = "s"}, tensor<8x16xbf16> {loom.output = "kt"},
          tensor<2x4x16xbf16> {loom.output = "o"}) {
    %0 = loom.transpose %k perm [1, 0] : tensor<16x8xbf16> -> tensor<8x16xbf16>
    %1 = loom.matmul %q, %0 accumulate f32 : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
    %2 = loom.transpose %v perm [1, 0, 2] : tensor<8x2x16xbf16> -> tensor<2x8x16xbf16>
    %3 = loom.matmul %p, %2 accumulate f32 : (tensor<2x4x8xbf16>, tensor<2x8x16xbf16>) -> tensor<2x4x16xbf16>
    return %1, %0, %3 : tensor<4x16xbf16>, tensor<8x16xbf16>, tensor<2x4x16xbf16>
  }
}

// -----

// The backward's transposes: a transposed A (`x^T @ dy`) joins its matmul
// as a transposed B does, both in one kernel when both are transposed; a
// transpose that only matmuls read gives each of them a copy (k^T, read as
// B by `q @ k^T` and as A by `k^T @ d^T`);
// and a transpose of a transpose (the head's `(wte^T)^T` in the backward)
// reads wte itself.
// CHECK-LABEL: func.func private @backward_k0
// CHECK-SAME: (%[[X:[^:]+]]: tensor<8x4xbf16>, %[[DY:[^:]+]]: tensor<8x16xbf16>)
// CHECK-NEXT: [[XT:%.+]] = loom.transpose %[[X]] perm [1, 0] : tensor<8x4xbf16> -> tensor<4x8xbf16>
// CHECK-NEXT: loom.matmul [[XT]], %[[DY]]
// CHECK-NEXT: return
// CHECK-LABEL: func.func private @backward_k1
// CHECK-SAME: (%[[K:[^:]+]]: tensor<16x8xbf16>, %[[Q:[^:]+]]: tensor<4x8xbf16>)
// CHECK-NEXT: [[KT:%.+]] = loom.transpose %[[K]] perm [1, 0]
// CHECK-NEXT: loom.matmul %[[Q]], [[KT]]
// CHECK-NEXT: return
// CHECK-LABEL: func.func private @backward_k2
// CHECK-SAME: (%[[K:[^:]+]]: tensor<16x8xbf16>, %[[D:[^:]+]]: tensor<4x16xbf16>)
// CHECK-NEXT: [[KT:%.+]] = loom.transpose %[[K]] perm [1, 0]
// CHECK-NEXT: [[DT:%.+]] = loom.transpose %[[D]] perm [1, 0]
// CHECK-NEXT: loom.matmul [[KT]], [[DT]]
// CHECK-NEXT: return
// CHECK-LABEL: func.func private @backward_k3
// CHECK-SAME: (%[[G:[^:]+]]: tensor<4x8xbf16>, %[[W:[^:]+]]: tensor<8x16xbf16>)
// CHECK-NEXT: loom.matmul %[[G]], %[[W]]
// CHECK-NEXT: return
// CHECK-LABEL: func.func @backward
// CHECK-NOT: loom.transpose
// CHECK: return
module attributes {loom.precision = #loom.precision<compute = bf16, accumulate = f32>} {
  func.func @backward(%x: tensor<8x4xbf16> {loom.input = "x"},
                      %dy: tensor<8x16xbf16> {loom.input = "dy"},
                      %q: tensor<4x8xbf16> {loom.input = "q"},
                      %k: tensor<16x8xbf16> {loom.input = "k"},
                      %d: tensor<4x16xbf16> {loom.input = "d"},
                      %g: tensor<4x8xbf16> {loom.input = "g"},
                      %w: tensor<8x16xbf16> {loom.input = "w"})
      -> (tensor<4x16xbf16> {loom.output = "dw"}, tensor<4x16xbf16> {loom.output = "s"},
          tensor<8x4xbf16> {loom.output = "dk"}, tensor<4x16xbf16> {loom.output = "dg"}) {
    %xt = loom.transpose %x perm [1, 0] : tensor<8x4xbf16> -> tensor<4x8xbf16>
    %dw = loom.matmul %xt, %dy accumulate f32 : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
    %kt = loom.transpose %k perm [1, 0] : tensor<16x8xbf16> -> tensor<8x16xbf16>
    %s = loom.matmul %q, %kt accumulate f32 : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
    %dt = loom.transpose %d perm [1, 0] : tensor<4x16xbf16> -> tensor<16x4xbf16>
    %dk = loom.matmul %kt, %dt accumulate f32 : (tensor<8x16xbf16>, tensor<16x4xbf16>) -> tensor<8x4xbf16>
    %wt = loom.transpose %w perm [1, 0] : tensor<8x16xbf16> -> tensor<16x8xbf16>
    %wtt = loom.transpose %wt perm [1, 0] : tensor<16x8xbf16> -> tensor<8x16xbf16>
    %dg = loom.matmul %g, %wtt accumulate f32 : (tensor<4x8xbf16>, tensor<8x16xbf16>) -> tensor<4x16xbf16>
    return %dw, %s, %dk, %dg : tensor<4x16xbf16>, tensor<4x16xbf16>, tensor<8x4xbf16>, tensor<4x16xbf16>
  }
}

// -----

// With microbatches the accumulates end what runs once per microbatch:
// they move after every op they need, and what does not feed them (the
// update, and what it computes from the params alone, like the decay
// `w * 0.5` written first here) after them.
// CHECK-LABEL: func.func @microbatch_order
// CHECK: %[[G:.+]] = call @microbatch_order_k0(
// CHECK-NEXT: %[[M:.+]] = loom.accumulate %[[G]] over 2 microbatches
// CHECK-NEXT: call @microbatch_order_k1(%{{.+}}, %[[M]])
func.func @microbatch_order(%x: tensor<8xf32>, %w: tensor<8xf32>) -> tensor<8xf32> {
  %half = loom.constant 5.000000e-01 : tensor<f32>
  %decay = loom.mul %w, %half : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %g = loom.mul %x, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %m = loom.accumulate %g over 2 microbatches : tensor<8xf32>
  %next = loom.sub %decay, %m : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %next : tensor<8xf32>
}

// -----

// A pipelined program's place marks go on the calls, not into the
// kernels: the constant each kernel rematerializes loses its stage too,
// so one layer's instances on two stages have equal bodies
// (loom-dedup-kernels then keeps one).
// CHECK-LABEL: func.func private @staged_k0
// CHECK-NEXT: loom.constant 5.000000e-01 : tensor<f32>
// CHECK-NEXT: loom.mul
// CHECK-NEXT: return
// CHECK-LABEL: func.func private @staged_k2
// CHECK-NEXT: loom.constant 5.000000e-01 : tensor<f32>
// CHECK-NEXT: loom.mul
// CHECK-NEXT: return
// CHECK-LABEL: func.func @staged
// CHECK: call @staged_k0(%{{.+}}) {loom.phase = "forward", loom.stage = 0 : i64}
// CHECK: call @staged_k2(%{{.+}}) {loom.phase = "forward", loom.stage = 1 : i64}
func.func @staged(%x: tensor<8xf32>) -> tensor<8xf32> attributes {loom.stages_count = 2 : i64} {
  %half = loom.constant 5.000000e-01 {loom.stage = 0 : i64} : tensor<f32>
  %a = loom.mul %x, %half {loom.phase = "forward", loom.stage = 0 : i64} : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %s = loom.softmax %a axis 0 {loom.phase = "forward", loom.stage = 0 : i64} : tensor<8xf32>
  %b = loom.mul %s, %half {loom.phase = "forward", loom.stage = 1 : i64} : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %t = loom.softmax %b axis 0 {loom.phase = "forward", loom.stage = 1 : i64} : tensor<8xf32>
  return %t : tensor<8xf32>
}

// -----

// A kernel's result the model returns twice (two outputs CSE'd into one
// value) is two results of that kernel, one per return slot: each plan
// output is a buffer of its own.
// CHECK-LABEL: func.func private @returned_twice_k0
// CHECK-SAME: -> (tensor<4xf32>, tensor<4xf32>)
// CHECK: %[[G:.+]] = loom.gelu
// CHECK-NEXT: return %[[G]], %[[G]]
// CHECK-LABEL: func.func @returned_twice
// CHECK-NEXT: %[[R:.+]]:2 = call @returned_twice_k0(
// CHECK-NEXT: return %[[R]]#0, %[[R]]#1
func.func @returned_twice(%x: tensor<4xf32>) -> (tensor<4xf32>, tensor<4xf32>) {
  %g = loom.gelu %x : tensor<4xf32>
  return %g, %g : tensor<4xf32>, tensor<4xf32>
}

// -----

// A plan step's result returned twice (the gradient two params share,
// after its accumulate or data-parallel sum) is copied, `x * 1`, into a
// kernel of its own for the second slot.
// CHECK-LABEL: func.func private @shared_gradient_k1
// CHECK-SAME: (%[[M:[^:]+]]: tensor<8xf32>) -> tensor<8xf32>
// CHECK-NEXT: %[[ONE:.+]] = loom.constant 1.000000e+00 : tensor<f32>
// CHECK-NEXT: %[[C:.+]] = loom.mul %[[M]], %[[ONE]]
// CHECK-NEXT: return %[[C]]
// CHECK-LABEL: func.func @shared_gradient
// CHECK: %[[A:.+]] = loom.accumulate
// CHECK-NEXT: %[[C:.+]] = call @shared_gradient_k1(%[[A]])
// CHECK-NEXT: return %[[A]], %[[C]]
func.func @shared_gradient(%x: tensor<8xf32>) -> (tensor<8xf32>, tensor<8xf32>) {
  %g = loom.mul %x, %x : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %m = loom.accumulate %g over 2 microbatches : tensor<8xf32>
  return %m, %m : tensor<8xf32>, tensor<8xf32>
}

// -----

// A kernel's body keeps no name of what it belongs to: not the param whose
// gradient a matmul is (loom.gradient_of, for the partitioner and the
// gradient buckets, which ran before), nor the layer instance a recompute
// marks (loom.recompute; loom.recomputed stays, nameless, for explain), so
// that every layer's kernels are one (loom-dedup-kernels).
// CHECK-LABEL: func.func private @names_k0
// CHECK: loom.matmul
// CHECK-NOT: loom.gradient_of
// CHECK-NOT: loom.recompute =
// CHECK: loom.relu %{{.*}} {loom.recomputed = ""}
// CHECK: return
func.func @names(%x: tensor<4x4xf32>, %w: tensor<4x4xf32>) -> tensor<4x4xf32> {
  %0 = loom.matmul %x, %w accumulate f32 {loom.gradient_of = "block.3.w", loom.recompute = "block.3"} : (tensor<4x4xf32>, tensor<4x4xf32>) -> tensor<4x4xf32>
  %1 = loom.relu %0 {loom.recomputed = "block.3"} : tensor<4x4xf32>
  return %1 : tensor<4x4xf32>
}

// -----

// A value the microbatches compute from the params alone that the update
// reads too (one op for both, as CSE leaves a param's all-slice: seed
// 240175) is computed again after the accumulates, in the update's kernel:
// past the last accumulate only the accumulates' results carry values.
// CHECK-LABEL: func.func @param_value_after_accumulate
// CHECK-SAME: (%[[X:.+]]: tensor<8xf32> {loom.input = "x"}, %[[W:.+]]: tensor<8xf32> {loom.param = "w"})
// CHECK-NEXT: %[[G:.+]] = call @param_value_after_accumulate_k0(%[[W]], %[[X]]) : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
// CHECK-NEXT: %[[M:.+]] = loom.accumulate %[[G]] over 2 microbatches
// CHECK-NEXT: call @param_value_after_accumulate_k1(%[[W]], %[[M]])
func.func @param_value_after_accumulate(%x: tensor<8xf32> {loom.input = "x"},
                                        %w: tensor<8xf32> {loom.param = "w"}) -> tensor<8xf32> {
  %two = loom.constant 2.000000e+00 : tensor<f32>
  %w2 = loom.mul %w, %two : (tensor<8xf32>, tensor<f32>) -> tensor<8xf32>
  %g = loom.mul %x, %w2 : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  %m = loom.accumulate %g over 2 microbatches : tensor<8xf32>
  %next = loom.sub %w2, %m : (tensor<8xf32>, tensor<8xf32>) -> tensor<8xf32>
  return %next : tensor<8xf32>
}

// -----

// What an op's regions capture (hand-written IR: a region op in a model)
// is an input of its kernel as its operands are; it had stayed a use of
// the model's arguments inside the kernel ("using value defined outside
// the region").
// CHECK-LABEL: func.func private @region_captures_k0
// CHECK-SAME: (%[[X:[^:]+]]: tensor<4xf32>, %[[Y:[^:]+]]: tensor<4xf32>) -> tensor<4xf32>
// CHECK: scf.execute_region
// CHECK: loom.add %[[X]], %[[Y]]
// CHECK-LABEL: func.func @region_captures
// CHECK: call @region_captures_k0(%{{.+}}, %{{.+}})
func.func @region_captures(%x: tensor<4xf32>, %y: tensor<4xf32>) -> tensor<4xf32> {
  %r = scf.execute_region -> tensor<4xf32> {
    %s = loom.add %x, %y : (tensor<4xf32>, tensor<4xf32>) -> tensor<4xf32>
    scf.yield %s : tensor<4xf32>
  }
  return %r : tensor<4xf32>
}
