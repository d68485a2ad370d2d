// RUN: loom-opt %s --split-input-file --loom-gpu-occupancy-hints --verify-diagnostics -o /dev/null

// --loom-gpu-occupancy-hints errors (hand-written IR: the compiler's
// cluster launches have constant sizes).

module attributes {gpu.container_module} {
  gpu.module @k {
    gpu.func @f() kernel { gpu.return }
  }
  func.func @h(%n: index) {
    %c1 = arith.constant 1 : index
    // expected-error @+1 {{a cluster launch needs constant cluster sizes}}
    gpu.launch_func @k::@f clusters in (%n, %c1, %c1) blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    return
  }
}
