//===- CpuTarget.cpp - The CPU the host kernels are compiled for ----------===//

#include "Backend/CpuTarget.h"

#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/MC/MCSubtargetInfo.h"
#include "llvm/MC/TargetRegistry.h"
#include "llvm/Support/TargetSelect.h"
#include "llvm/TargetParser/Host.h"
#include "llvm/TargetParser/Triple.h"

#include <memory>

#if defined(__linux__)
#include <sys/syscall.h>
#include <unistd.h>
#endif

using namespace mlir;

std::string loom::CpuTarget::matmulPath(bool bf16) const {
  if (bf16 && bf16Path == Bf16MatmulPath::Amx)
    return "amx-bf16";
  if (bf16 && bf16Path == Bf16MatmulPath::EmulatedAmx)
    return "amx-emulated";
  if (bf16 && bf16Path == Bf16MatmulPath::Dot)
    return "avx512-bf16-dot";
  return avx512f ? "avx512-fma" : avx2 ? "avx2-fma" : "sse";
}

std::string loom::CpuTarget::describe() const {
  std::string needs;
  auto need = [&](bool has, const char *name) {
    if (has)
      needs += (needs.empty() ? "" : ",") + std::string(name);
  };
  need(avx2, "avx2");
  need(fma, "fma");
  need(avx512f, "avx512f");
  need(avx512bw, "avx512bw");
  need(avx512dq, "avx512dq");
  need(avx512vl, "avx512vl");
  need(avx512bf16, "avx512bf16");
  need(bf16Path == Bf16MatmulPath::Amx, "amx-tile");
  need(bf16Path == Bf16MatmulPath::Amx, "amx-bf16");
  for (const std::string &extension : otherExtensions)
    need(true, extension.c_str());
  return name + " f32=" + matmulPath(false) + " bf16=" + matmulPath(true) + " needs=" + needs;
}

/// Whether Linux gives this process AMX's tile state (arch_prctl
/// ARCH_REQ_XCOMP_PERM, as the runtime asks before its first tile
/// instruction): on this machine, a kernel built for AMX would otherwise
/// stop at start-up with the runtime's error. Asking has no other effect.
static bool linuxGrantsAmx() {
#if defined(__linux__) && defined(__x86_64__)
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

FailureOr<loom::CpuTarget> loom::resolveCpuTarget(Location loc, llvm::StringRef cpu,
                                                  llvm::StringRef bf16Matmul) {
  if (!llvm::is_contained({"auto", "dot", "fma", "amx", "amx-emulated"}, bf16Matmul))
    return emitError(loc, "unknown bf16 matmul path '")
           << bf16Matmul << "' (use auto, dot, fma, amx or amx-emulated)";
  llvm::InitializeNativeTarget();
  std::string tripleName = llvm::sys::getDefaultTargetTriple();
  llvm::Triple triple(tripleName);
  std::string error;
  const llvm::Target *target = llvm::TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return emitError(loc, "no LLVM target for ") << tripleName << ": " << error;
  CpuTarget result;
  result.name = cpu.str();
  if (cpu == "native") {
    result.name = llvm::sys::getHostCPUName().str();
    for (auto &feature : llvm::sys::getHostCPUFeatures())
      result.featureText += (feature.second ? "+" : "-") + feature.first().str() + ",";
  }
  std::unique_ptr<llvm::MCSubtargetInfo> subtarget(
      target->createMCSubtargetInfo(triple, "", ""));
  if (!subtarget || !subtarget->isCPUStringValid(result.name))
    return emitError(loc, "unknown CPU '")
           << result.name << "' for " << tripleName
           << " (use native, or an LLVM CPU name such as x86-64-v3)";
  // The features as code generation will see them: the CPU's own, then
  // the host's list on top.
  subtarget.reset(target->createMCSubtargetInfo(triple, result.name, result.featureText));
  // A 32-bit CPU (i686, pentium4, ...) cannot run 64-bit kernels: LLVM had
  // stopped with a fatal error in its code generation threads, at times
  // crashing in another one as the first exited.
  if (triple.isArch64Bit() && !subtarget->checkFeatures("+64bit"))
    return emitError(loc, "CPU '")
           << result.name << "' is a 32-bit CPU; the kernels are " << triple.getArchName()
           << " code (use native, or an LLVM CPU name such as x86-64-v3)";
  result.avx2 = subtarget->checkFeatures("+avx2");
  result.fma = subtarget->checkFeatures("+fma");
  result.avx512f = subtarget->checkFeatures("+avx512f");
  result.avx512bw = subtarget->checkFeatures("+avx512bw");
  result.avx512dq = subtarget->checkFeatures("+avx512dq");
  result.avx512vl = subtarget->checkFeatures("+avx512vl");
  result.avx512bf16 = subtarget->checkFeatures("+avx512bf16");
  result.amxbf16 = subtarget->checkFeatures("+amx-bf16");
  // Extensions LLVM's code generation and vectorizers use unasked (SSE4a's
  // insertq on AMD targets, which no Intel CPU has; vpermb, gf2p8affineqb,
  // bzhi, ...): each one the target has must be on the CPU that runs it, or
  // a kernel faults. The runtime's names (__builtin_cpu_supports) are LLVM's.
  // The list is the runtime's (CpuFeatures.def), which checks them.
#define LOOM_CPU_FEATURE(extension, unasked)                                   \
  if (unasked && subtarget->checkFeatures(std::string("+") + extension))       \
    result.otherExtensions.push_back(extension);
#include "loom/runtime/exec/CpuFeatures.def"
  bool dots = result.avx512f && result.avx512bf16;
  if (bf16Matmul == "dot" && !dots)
    return emitError(loc, "--bf16-matmul=dot needs avx512_bf16, which CPU '")
           << result.name << "' does not have";
  if (bf16Matmul == "amx" && !result.amxbf16)
    return emitError(loc, "--bf16-matmul=amx needs amx-bf16, which CPU '")
           << result.name << "' does not have (--bf16-matmul=amx-emulated runs its kernels "
           << "with the tiles emulated)";
  bool prefersDots =
      bf16Matmul == "dot" || (bf16Matmul == "auto" && llvm::StringRef(result.name).starts_with("znver"));
  bool autoAmx = bf16Matmul == "auto" && result.amxbf16 && (cpu != "native" || linuxGrantsAmx());
  result.bf16Path = bf16Matmul == "amx" || autoAmx ? Bf16MatmulPath::Amx
                    : bf16Matmul == "amx-emulated" ? Bf16MatmulPath::EmulatedAmx
                    : dots && prefersDots          ? Bf16MatmulPath::Dot
                                                   : Bf16MatmulPath::Fma;
  return result;
}
