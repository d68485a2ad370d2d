// RUN: loom-opt %s --split-input-file --loom-gpu-occupancy-hints | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-gpu-occupancy-hints=shared-per-sm=167936 | FileCheck %s --check-prefix=SM80

// --loom-gpu-occupancy-hints: a kernel launched with dynamic shared memory
// gets nvvm.minctasm, the blocks an SM's shared memory holds at that size
// (plus 1 KiB reserved per block): 233472 / (98304 + 1024) = 2 on sm_90,
// 167936 / 99328 = 1 on sm_80.

// CHECK-LABEL: gpu.module @big
// CHECK: gpu.func @k() kernel attributes {nvvm.minctasm = 2 : i32}
// SM80-LABEL: gpu.module @big
// SM80: gpu.func @k() kernel attributes {nvvm.minctasm = 1 : i32}
module attributes {gpu.container_module} {
  func.func @f() {
    %c1 = arith.constant 1 : index
    %bytes = arith.constant 98304 : i32
    gpu.launch_func @big::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) dynamic_shared_memory_size %bytes
    return
  }
  gpu.module @big {
    gpu.func @k() kernel {
      gpu.return
    }
  }
}

// -----

// Launched twice with different sizes: the smaller count, for the larger
// size (233472 / (49152 + 1024) = 4, 233472 / (114688 + 1024) = 2).
// CHECK-LABEL: gpu.module @twice
// CHECK: gpu.func @k() kernel attributes {nvvm.minctasm = 2 : i32}
module attributes {gpu.container_module} {
  func.func @f() {
    %c1 = arith.constant 1 : index
    %small = arith.constant 49152 : i32
    %large = arith.constant 114688 : i32
    gpu.launch_func @twice::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) dynamic_shared_memory_size %small
    gpu.launch_func @twice::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1) dynamic_shared_memory_size %large
    return
  }
  gpu.module @twice {
    gpu.func @k() kernel {
      gpu.return
    }
  }
}

// -----

// No dynamic shared memory: no hint.
// CHECK-LABEL: gpu.module @plain
// CHECK: gpu.func @k() kernel {
// CHECK-NOT: nvvm.minctasm
module attributes {gpu.container_module} {
  func.func @f() {
    %c1 = arith.constant 1 : index
    gpu.launch_func @plain::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    return
  }
  gpu.module @plain {
    gpu.func @k() kernel {
      gpu.return
    }
  }
}

// -----

// A kernel that rebalances registers (setmaxnreg, the persistent wgmma
// kernels) runs one block an SM whatever its shared memory: 1, not
// 233472 / (32768 + 1024) = 6, else ptxas would cap its registers below
// what setmaxnreg.inc asks for.
// CHECK-LABEL: gpu.module @rebalances
// CHECK: gpu.func @k() kernel attributes {nvvm.minctasm = 1 : i32}
module attributes {gpu.container_module} {
  func.func @f() {
    %c1 = arith.constant 1 : index
    %c384 = arith.constant 384 : index
    %bytes = arith.constant 32768 : i32
    gpu.launch_func @rebalances::@k blocks in (%c1, %c1, %c1) threads in (%c384, %c1, %c1) dynamic_shared_memory_size %bytes
    return
  }
  gpu.module @rebalances {
    gpu.func @k() kernel {
      nvvm.setmaxregister increase 232
      gpu.return
    }
  }
}

// -----

// Every kernel's workgroup buffers are 16-byte aligned (cp.async's copies
// and ldmatrix need it), whether or not it gets a minctasm.
// CHECK-LABEL: gpu.module @shared
// CHECK: gpu.func @k() workgroup(%{{.+}} : memref<64xbf16, #gpu.address_space<workgroup>> {llvm.align = 16 : i64}) kernel
// CHECK-NOT: nvvm.minctasm
module attributes {gpu.container_module} {
  func.func @f() {
    %c1 = arith.constant 1 : index
    gpu.launch_func @shared::@k blocks in (%c1, %c1, %c1) threads in (%c1, %c1, %c1)
    return
  }
  gpu.module @shared {
    gpu.func @k() workgroup(%buffer : memref<64xbf16, #gpu.address_space<workgroup>>) kernel {
      gpu.return
    }
  }
}
