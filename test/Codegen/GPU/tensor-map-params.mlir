// RUN: loom-opt %s --split-input-file --pass-pipeline='builtin.module(gpu.module(loom-tensor-map-params))' | FileCheck %s

// --loom-tensor-map-params: a kernel's TMA tensor-map parameters become
// pointers (the runtime passes the device address of the CUtensorMap it
// encoded), cast back to the descriptor type at the entry; other
// parameters and kernels without tensor maps are unchanged.

!map = !nvgpu.tensormap.descriptor<tensor = memref<128x64xbf16, #gpu.address_space<workgroup>>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
!bars = !nvgpu.mbarrier.group<memorySpace = #gpu.address_space<workgroup>>
// CHECK-LABEL: gpu.module @kernels
// CHECK:       gpu.func @load(%[[P:.+]]: !llvm.ptr, %[[OUT:.+]]: memref<4xf32>) kernel
// CHECK-NEXT:    %[[MAP:.+]] = builtin.unrealized_conversion_cast %[[P]] : !llvm.ptr to !nvgpu.tensormap.descriptor<tensor = memref<128x64xbf16, #gpu.address_space<workgroup>>, swizzle = swizzle_128b, l2promo = none, oob = zero, interleave = none>
// CHECK:         nvgpu.tma.async.load %[[MAP]][
// CHECK:       gpu.func @plain(%{{.+}}: memref<4xf32>) kernel
// CHECK-NOT:     unrealized_conversion_cast
module attributes {gpu.container_module} {
  gpu.module @kernels {
    gpu.func @load(%map: !map, %out: memref<4xf32>) kernel {
      %c0 = arith.constant 0 : index
      %bars = nvgpu.mbarrier.create -> !bars
      %smem = memref.alloca() : memref<128x64xbf16, #gpu.address_space<workgroup>>
      nvgpu.tma.async.load %map[%c0, %c0], %bars[%c0] to %smem : !map, !bars -> memref<128x64xbf16, #gpu.address_space<workgroup>>
      gpu.return
    }
    gpu.func @plain(%out: memref<4xf32>) kernel {
      gpu.return
    }
  }
}
