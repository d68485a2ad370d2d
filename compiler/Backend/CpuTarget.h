//===- CpuTarget.h - The CPU the host kernels are compiled for ------------===//

#ifndef LOOM_BACKEND_CPUTARGET_H
#define LOOM_BACKEND_CPUTARGET_H

#include "mlir/IR/Location.h"
#include "mlir/Support/LLVM.h"

#include <string>
#include <vector>

namespace loom {

/// How the CPU kernels compute bf16 matmuls: FMA tiles on widened
/// operands, avx512_bf16 dot products, AMX tiles, or AMX tiles emulated in
/// vector code (tests).
enum class Bf16MatmulPath { Fma, Dot, Amx, EmulatedAmx };

/// A CPU the kernels target: its LLVM name, the features code generation
/// gets, and the vector extensions the CPU tiling uses.
struct CpuTarget {
  std::string name;
  /// "+feature,-feature,..." for the LLVM target machine (a named CPU's
  /// features are implied by its name: empty).
  std::string featureText;
  bool avx2 = false, fma = false, avx512f = false, avx512bw = false, avx512dq = false,
       avx512vl = false, avx512bf16 = false, amxbf16 = false;
  /// How bf16 matmuls run (resolveCpuTarget's choice).
  Bf16MatmulPath bf16Path = Bf16MatmulPath::Fma;
  /// The other extensions the target has that LLVM may use on its own
  /// (sse4a, bit manipulation, AVX-512 subsets, GFNI, ...), in the
  /// runtime's names.
  std::vector<std::string> otherExtensions;

  /// The vector register width the register tiles are sized for.
  unsigned vectorBits() const { return avx512f ? 512 : 256; }
  /// How the kernels compute a matmul of `bf16` operands, in words
  /// (what `--info` reports): "amx-bf16", "amx-emulated",
  /// "avx512-bf16-dot", "avx512-fma", "avx2-fma".
  std::string matmulPath(bool bf16) const;
  /// The executable's record of it (loom_cpu_target): "NAME f32=PATH
  /// bf16=PATH needs=FEATURE,...", the features those the runtime checks
  /// before it runs the kernels.
  std::string describe() const;
};

/// `cpu` resolved: "native" is this machine's CPU with its features; any
/// other name must be an LLVM CPU name for the host triple (else an error at
/// `loc`: "unknown CPU 'x' for x86_64-... (use native, or an LLVM CPU name
/// such as x86-64-v3)"). `bf16Matmul` ("auto", "dot", "fma", "amx" or
/// "amx-emulated") picks the bf16 path: auto takes AMX tiles on a CPU with
/// amx-bf16 (Sapphire Rapids: 0.89-1.50 of oneDNN's AMX matmuls at
/// 256^3-2048^3, 6.2-6.7x the f32 FMA tiles), as long as Linux grants this
/// process the tile state when the CPU is `native`; else the dot products
/// on AMD Zen (znver*), where they ran 1.7-2.4x the f32 FMA tiles
/// (benchmarks/cpu, znver5), and not on Intel's cores, which run
/// `vdpbf16ps` at half the FMA tiles' rate (emeraldrapids, 2048^3: 78
/// against 131 GFLOP/s on widened operands); dot on a CPU without
/// avx512_bf16 is an error. "amx" runs them on AMX tiles (a CPU with
/// amx-bf16 only) and "amx-emulated" runs the same kernels with each tile
/// operation emulated in vector code (any CPU; for tests).
mlir::FailureOr<CpuTarget> resolveCpuTarget(mlir::Location loc, llvm::StringRef cpu,
                                            llvm::StringRef bf16Matmul = "auto");

} // namespace loom

#endif // LOOM_BACKEND_CPUTARGET_H
