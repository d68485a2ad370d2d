// RUN: loom-opt %s --split-input-file --loom-kernel-destinations --verify-diagnostics -o /dev/null

// --loom-kernel-destinations errors (hand-written IR: the front end's
// shapes are static).

func.func @m_k0(%a: tensor<?xf32>) -> tensor<?xf32> attributes {loom.kernel} {
  %0 = loom.exp %a : tensor<?xf32>
  return %0 : tensor<?xf32>
}
func.func @m(%a: tensor<?xf32>) -> tensor<?xf32> {
  // expected-error @+1 {{a call of kernel @m_k0 with a result of dynamic shape 'tensor<?xf32>' has no destination to pass}}
  %0 = func.call @m_k0(%a) : (tensor<?xf32>) -> tensor<?xf32>
  return %0 : tensor<?xf32>
}
