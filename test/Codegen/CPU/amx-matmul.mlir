// RUN: loom-opt %s --split-input-file --loom-tile-contractions-for-cpu="vector-bits=512 bf16-amx=true" --canonicalize | FileCheck %s
// RUN: loom-opt %s --split-input-file --loom-tile-contractions-for-cpu="vector-bits=512 bf16-amx=true emulate-amx=true" | FileCheck %s --check-prefix=EMU

// --loom-tile-contractions-for-cpu with bf16-amx: a bf16 matmul with an f32
// accumulator whose m and n are multiples of 16 and k of 32 runs on AMX
// tiles. B is copied once into VNNI panels [N/16, K/2, 16, 2] (each row of
// a panel, B's rows k and k + 1 interleaved, written as one 64-byte vector,
// k pairs outermost so B is read in order) and viewed as [N/16, K/2, 32]:
// one B tile per 32 k. A and C are read in
// place. Per block of 2 x 2 accumulator
// tiles (m and n multiples of 32), the four f32 tiles are loaded from C
// (started at zero where C was filled with zeros: @zeroed_and_rounded),
// carried through the k loop (step 32) in tile registers, multiplied with
// 2 A and 2 B tiles per step, and stored once. With emulate-amx every tile
// op becomes vector code of the same meaning: no amx op is left.

// CHECK-LABEL: func.func @bf16_64
// CHECK-SAME: (%[[A:[^:]+]]: memref<64x64xbf16>, %[[B:[^:]+]]: memref<64x64xbf16>, %[[C:[^:]+]]: memref<64x64xf32>)
// CHECK: %[[P:.+]] = memref.alloc() : memref<4x32x16x2xbf16>
// CHECK: %[[BT:.+]] = memref.collapse_shape %[[P]] {{\[}}[0], [1], [2, 3]] : memref<4x32x16x2xbf16> into memref<4x32x32xbf16>
// CHECK: scf.for %[[PAIR:.+]] = %c0 to %c32 step %c1
// CHECK: scf.for %[[PANEL:.+]] = %c0 to %c4 step %c1
// CHECK: %[[EVEN:.+]] = vector.transfer_read %[[B]]{{.+}} : memref<64x64xbf16>, vector<16xbf16>
// CHECK: %[[ODD:.+]] = vector.transfer_read %[[B]]{{.+}} : memref<64x64xbf16>, vector<16xbf16>
// CHECK: %[[ROW:.+]] = vector.interleave %[[EVEN]], %[[ODD]] : vector<16xbf16> -> vector<32xbf16>
// CHECK: vector.transfer_write %[[ROW]], %[[BT]][%[[PANEL]], %[[PAIR]], %c0] {{.+}} : vector<32xbf16>, memref<4x32x32xbf16>
// CHECK: scf.for %[[M:.+]] = %{{.+}} to %{{.+}} step %c32
// CHECK: %[[M16:.+]] = arith.addi %[[M]], %c16
// CHECK: scf.for %[[N:.+]] = %{{.+}} to %{{.+}} step %c2
// CHECK-COUNT-4: amx.tile_load %[[C]][{{.+}}] : memref<64x64xf32> into !amx.tile<16x16xf32>
// CHECK: scf.for %[[K:.+]] = %{{.+}} to %c64 step %c32 iter_args({{.+}}) -> (!amx.tile<16x16xf32>, !amx.tile<16x16xf32>, !amx.tile<16x16xf32>, !amx.tile<16x16xf32>)
// CHECK-DAG: %[[A0:.+]] = amx.tile_load %[[A]][%[[M]], %[[K]]] : memref<64x64xbf16> into !amx.tile<16x32xbf16>
// CHECK-DAG: %[[A1:.+]] = amx.tile_load %[[A]][%[[M16]], %[[K]]] : memref<64x64xbf16> into !amx.tile<16x32xbf16>
// CHECK-DAG: %[[KP:.+]] = arith.divui %[[K]], %c2
// CHECK-DAG: %[[B0:.+]] = amx.tile_load %[[BT]][%[[N]], %[[KP]], %c0] : memref<4x32x32xbf16> into !amx.tile<16x32xbf16>
// CHECK-DAG: %[[B1:.+]] = amx.tile_load %[[BT]][%{{.+}}, %[[KP]], %c0] : memref<4x32x32xbf16> into !amx.tile<16x32xbf16>
// CHECK: amx.tile_mulf %[[A0]], %[[B0]], %{{.+}} : !amx.tile<16x32xbf16>, !amx.tile<16x32xbf16>, !amx.tile<16x16xf32>
// CHECK: amx.tile_mulf %[[A0]], %[[B1]]
// CHECK: amx.tile_mulf %[[A1]], %[[B0]]
// CHECK: amx.tile_mulf %[[A1]], %[[B1]]
// CHECK: scf.yield
// CHECK-COUNT-4: amx.tile_store %[[C]]
// CHECK: memref.dealloc %[[P]]
// CHECK-NOT: loom.cpu_
// EMU-LABEL: func.func @bf16_64
// EMU-NOT: amx.
// EMU: scf.for {{.+}} step %c32 iter_args({{.+}}) -> (vector<16x16xf32>, vector<16x16xf32>, vector<16x16xf32>, vector<16x16xf32>)
// EMU: vector.transpose %{{.+}}, [0, 2, 1] : vector<16x16x2xbf16> to vector<16x2x16xbf16>
// EMU-NOT: amx.
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
func.func @bf16_64(%A: memref<64x64xbf16>, %B: memref<64x64xbf16>, %C: memref<64x64xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<64x64xbf16>, memref<64x64xbf16>) outs(%C : memref<64x64xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xe = arith.extf %x : bf16 to f32
    %ye = arith.extf %y : bf16 to f32
    %p = arith.mulf %xe, %ye fastmath<contract> : f32
    %s = arith.addf %acc, %p fastmath<contract> : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A batched A and C over a shared K-contiguous B (x @ transpose(w)): the
// batch is the outer loop and indexes A and C; m = 16 and n = 48 allow one
// accumulator tile per block. B's panels are copied in blocks of 16 columns
// x 32 k: the 16 rows read whole, their 16 x 16 k pairs transposed as i32
// (shuffles, no scalars), and written as 16 panel rows at once.
// CHECK-LABEL: func.func @batched_bt
// CHECK-SAME: (%[[A:[^:]+]]: memref<3x16x64xbf16>, %[[B:[^:]+]]: memref<48x64xbf16>, %[[C:[^:]+]]: memref<3x16x48xf32>)
// CHECK: %[[P:.+]] = memref.alloc() : memref<3x32x16x2xbf16>
// CHECK: %[[BT:.+]] = memref.collapse_shape %[[P]] {{\[}}[0], [1], [2, 3]]
// CHECK: scf.for %{{.+}} = %c0 to %c3 step %c1
// CHECK: scf.for %{{.+}} = %c0 to %c2 step %c1
// CHECK-COUNT-16: vector.transfer_read %[[B]]{{.+}} : memref<48x64xbf16>, vector<32xbf16>
// CHECK-NOT: vector.from_elements {{.+}} : vector<16xi32>
// CHECK: vector.shuffle
// CHECK: vector.transfer_write %{{.+}} : vector<512xbf16>, memref<3x1024xbf16>
// A function whose only matmul is an AMX one (no FMA tiles, no tiled
// copies) still has its tiles emulated, here and in every function after.
// EMU-LABEL: func.func @batched_bt
// EMU-NOT: amx.
// CHECK: scf.for %[[BATCH:.+]] = %c0 to %c3 step %c1
// CHECK-NEXT: scf.for %[[N:.+]] = %c0 to %c3 step %c1
// CHECK-NEXT: %[[COL:.+]] = arith.muli %[[N]], %c16
// CHECK-NEXT: %[[ACC:.+]] = amx.tile_load %[[C]][%[[BATCH]], %c0, %[[COL]]] : memref<3x16x48xf32> into !amx.tile<16x16xf32>
// CHECK-NEXT: %[[R:.+]] = scf.for %[[K:.+]] = %c0 to %c64 step %c32 iter_args(%[[T:.+]] = %[[ACC]]) -> (!amx.tile<16x16xf32>)
// CHECK-NEXT: %[[TA:.+]] = amx.tile_load %[[A]][%[[BATCH]], %c0, %[[K]]]
// CHECK: %[[TB:.+]] = amx.tile_load %[[BT]][%[[N]], %{{.+}}, %c0]
// CHECK-NEXT: %[[NEXT:.+]] = amx.tile_mulf %[[TA]], %[[TB]], %[[T]]
// CHECK-NEXT: scf.yield %[[NEXT]]
// CHECK: amx.tile_store %[[C]][%[[BATCH]], %c0, %[[COL]]], %[[R]]
#a = affine_map<(b, m, n, k) -> (b, m, k)>
#b = affine_map<(b, m, n, k) -> (n, k)>
#c = affine_map<(b, m, n, k) -> (b, m, n)>
func.func @batched_bt(%A: memref<3x16x64xbf16>, %B: memref<48x64xbf16>, %C: memref<3x16x48xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<3x16x64xbf16>, memref<48x64xbf16>) outs(%C : memref<3x16x48xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xe = arith.extf %x : bf16 to f32
    %ye = arith.extf %y : bf16 to f32
    %p = arith.mulf %xe, %ye fastmath<contract> : f32
    %s = arith.addf %acc, %p fastmath<contract> : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A k that is not a multiple of 32 (48) does not fill B tiles: the matmul
// keeps the FMA path (operands widened to f32, register tiles).
// CHECK-LABEL: func.func @k_48
// CHECK-NOT: amx.
// CHECK: memref.alloc() : memref<64x48xf32>
// CHECK: arith.extf %{{.+}} : bf16 to f32
// CHECK: scf.for {{.+}} iter_args({{.+}}) -> (vector<8x32xf32>)
// CHECK-NOT: amx.
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
func.func @k_48(%A: memref<64x48xbf16>, %B: memref<48x64xbf16>, %C: memref<64x64xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<64x48xbf16>, memref<48x64xbf16>) outs(%C : memref<64x64xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xe = arith.extf %x : bf16 to f32
    %ye = arith.extf %y : bf16 to f32
    %p = arith.mulf %xe, %ye fastmath<contract> : f32
    %s = arith.addf %acc, %p fastmath<contract> : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A long K and a wide N come in blocks: N in blocks of B panels that fit
// in 1 MiB (here 2 of the 128 panels: 16384 k x 32 columns), and K whole
// up to 8192, past that in blocks of 4096, the accumulators stored after
// each block and loaded for the next: the first block's loop and the
// last's are peeled (for a zeroed C and an epilogue, below).
// CHECK-LABEL: func.func @k_blocks
// CHECK-SAME: (%[[A:[^:]+]]: memref<32x16384xbf16>, %[[B:[^:]+]]: memref<16384x2048xbf16>, %[[C:[^:]+]]: memref<32x2048xf32>)
// CHECK: memref.alloc() : memref<128x8192x16x2xbf16>
// CHECK: scf.for %[[NB:.+]] = %c0 to %c128 step %c2
// CHECK-COUNT-4: amx.tile_load %[[C]]
// CHECK: scf.for %[[K:.+]] = %c0 to %c4096 step %c32 iter_args(
// CHECK: amx.tile_load %[[A]][%c0, %[[K]]]
// CHECK: amx.tile_load %[[A]][%c16, %[[K]]]
// CHECK-COUNT-4: amx.tile_mulf
// CHECK: scf.yield
// CHECK-COUNT-4: amx.tile_store %[[C]]
// CHECK: scf.for %[[KB:.+]] = %c4096 to %c12288 step %c4096
// CHECK-COUNT-4: amx.tile_load %[[C]]
// CHECK: scf.for %{{.+}} = %[[KB]] to %{{.+}} step %c32 iter_args(
// CHECK-COUNT-4: amx.tile_store %[[C]]
// CHECK-COUNT-4: amx.tile_load %[[C]]
// CHECK: scf.for %{{.+}} = %c12288 to %c16384 step %c32 iter_args(
// CHECK-COUNT-4: amx.tile_store %[[C]]
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
func.func @k_blocks(%A: memref<32x16384xbf16>, %B: memref<16384x2048xbf16>, %C: memref<32x2048xf32>) {
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<32x16384xbf16>, memref<16384x2048xbf16>) outs(%C : memref<32x2048xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xe = arith.extf %x : bf16 to f32
    %ye = arith.extf %y : bf16 to f32
    %p = arith.mulf %xe, %ye fastmath<contract> : f32
    %s = arith.addf %acc, %p fastmath<contract> : f32
    linalg.yield %s : f32
  }
  return
}

// -----

// A C filled with zeros and rounded to bf16 after the matmul (what every
// bf16 matmul of a model lowers to), K = 1024 whole: the fill goes and the
// accumulators start as tile_zero; after the store of each tile its 16 x
// 16 outputs are rounded right there (the epilogue's vector code), and the
// separate rounding pass over C goes. A is read in place.
// CHECK-LABEL: func.func @zeroed_and_rounded
// CHECK-SAME: (%[[A:[^:]+]]: memref<32x1024xbf16>, %[[B:[^:]+]]: memref<1024x32xbf16>, %[[C:[^:]+]]: memref<32x32xf32>, %[[OUT:[^:]+]]: memref<32x32xbf16>)
// CHECK-NOT: linalg.fill
// CHECK-COUNT-4: amx.tile_zero : !amx.tile<16x16xf32>
// CHECK: scf.for %[[K:.+]] = %c0 to %c1024 step %c32 iter_args(
// CHECK: amx.tile_load %[[A]][%c0, %[[K]]]
// CHECK: amx.tile_store %[[C]][%c0, %c0]
// CHECK-NEXT: vector.transfer_read %[[C]][%c0, %c0]{{.*}} : memref<32x32xf32>, vector<16xf32>
// CHECK-COUNT-15: vector.transfer_read %[[C]]
// CHECK: arith.truncf %{{.+}} : vector<16x16xf32> to vector<16x16xbf16>
// CHECK-COUNT-16: vector.transfer_write %{{.+}}, %[[OUT]]
// CHECK: amx.tile_store %[[C]][%c0, %c16]
// CHECK: arith.truncf
// CHECK: amx.tile_store %[[C]][%c16, %c0]
// CHECK: arith.truncf
// CHECK: amx.tile_store %[[C]][%c16, %c16]
// CHECK: arith.truncf
// CHECK-NOT: linalg.generic
// CHECK: return
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
#e = affine_map<(m, n) -> (m, n)>
func.func @zeroed_and_rounded(%A: memref<32x1024xbf16>, %B: memref<1024x32xbf16>, %C: memref<32x32xf32>, %OUT: memref<32x32xbf16>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%C : memref<32x32xf32>)
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<32x1024xbf16>, memref<1024x32xbf16>) outs(%C : memref<32x32xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xe = arith.extf %x : bf16 to f32
    %ye = arith.extf %y : bf16 to f32
    %p = arith.mulf %xe, %ye fastmath<contract> : f32
    %s = arith.addf %acc, %p fastmath<contract> : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#e, #e], iterator_types = ["parallel", "parallel"]}
      ins(%C : memref<32x32xf32>) outs(%OUT : memref<32x32xbf16>) {
  ^bb0(%in: f32, %out: bf16):
    %t = arith.truncf %in : f32 to bf16
    linalg.yield %t : bf16
  }
  return
}

// -----

// A C written between its zero fill and the matmul (a bias added before
// the products) keeps its fill and its loads: tile_zero would drop the bias.
// CHECK-LABEL: func.func @written_after_fill
// CHECK-SAME: (%[[A:[^:]+]]: memref<32x64xbf16>, %[[B:[^:]+]]: memref<64x32xbf16>, %[[BIAS:[^:]+]]: memref<32xf32>, %[[C:[^:]+]]: memref<32x32xf32>)
// CHECK: linalg.fill
// CHECK: linalg.generic
// CHECK-NOT: amx.tile_zero
// CHECK-COUNT-4: amx.tile_load %[[C]]
#a = affine_map<(m, n, k) -> (m, k)>
#b = affine_map<(m, n, k) -> (k, n)>
#c = affine_map<(m, n, k) -> (m, n)>
#row = affine_map<(m, n) -> (n)>
#id = affine_map<(m, n) -> (m, n)>
func.func @written_after_fill(%A: memref<32x64xbf16>, %B: memref<64x32xbf16>, %BIAS: memref<32xf32>, %C: memref<32x32xf32>) {
  %zero = arith.constant 0.0 : f32
  linalg.fill ins(%zero : f32) outs(%C : memref<32x32xf32>)
  linalg.generic {indexing_maps = [#row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%BIAS : memref<32xf32>) outs(%C : memref<32x32xf32>) {
  ^bb0(%bias: f32, %acc: f32):
    %s = arith.addf %acc, %bias : f32
    linalg.yield %s : f32
  }
  linalg.generic {indexing_maps = [#a, #b, #c], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%A, %B : memref<32x64xbf16>, memref<64x32xbf16>) outs(%C : memref<32x32xf32>) {
  ^bb0(%x: bf16, %y: bf16, %acc: f32):
    %xe = arith.extf %x : bf16 to f32
    %ye = arith.extf %y : bf16 to f32
    %p = arith.mulf %xe, %ye fastmath<contract> : f32
    %s = arith.addf %acc, %p fastmath<contract> : f32
    linalg.yield %s : f32
  }
  return
}
