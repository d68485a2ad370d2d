# lit configuration for Loom's regression tests.
import os
import shutil

import lit.formats
from lit.llvm import llvm_config

config.name = "Loom"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir", ".loom", ".test"]
config.excludes = ["CMakeLists.txt", "Inputs", "Unit", "lit.cfg.py", "lit.site.cfg.py"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.loom_obj_root, "test")

# Named captures must not leak between CHECK-LABEL blocks.
config.environment["FILECHECK_OPTS"] = "-enable-var-scope"

config.substitutions.append(("%examples", os.path.join(config.loom_src_root, "examples")))
config.substitutions.append(("%benchmarks", os.path.join(config.loom_src_root, "benchmarks")))
config.substitutions.append(("%docs", os.path.join(config.loom_src_root, "docs")))
config.substitutions.append(("%loom_build", config.loom_obj_root))
config.substitutions.append(("%python", "/usr/bin/python3"))

llvm_config.use_default_substitutions()
llvm_config.add_tool_substitutions(
    ["loomc", "loom-opt", "loom-fuzz", "loom-fuzz-files", "loom-schedule"], [config.loom_tools_dir])
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)
# mlir-runner's support libraries (printMemrefF32), for the tests that run a
# pass's output on the CPU (from mlir-22-tools, beside LLVM's libraries).
llvm_lib_dir = os.path.join(os.path.dirname(config.llvm_tools_dir), "lib")
config.substitutions.append((
    "%mlir_runner_libs",
    ",".join(os.path.join(llvm_lib_dir, lib) for lib in
             ["libmlir_runner_utils.so", "libmlir_c_runner_utils.so"])))

# make test SANITIZE=address,undefined: a report aborts the program, so a
# `not` test whose program hits one fails too (not accepts exit 1, never a
# signal). Leaks of the libraries Loom calls (Open MPI) are not Loom's.
sanitizers = [s for s in config.loom_sanitize.split(",") if s]
for sanitizer in sanitizers:
    config.available_features.add("sanitize-" + sanitizer)
if sanitizers:
    suppressions = os.path.join(config.loom_src_root, "test", "lsan.supp")
    config.environment["ASAN_OPTIONS"] = (
        "abort_on_error=1:detect_leaks=1:strict_string_checks=1:"
        "detect_stack_use_after_return=1:check_initialization_order=1:"
        # LLVM's BumpPtrAllocator poisons its slabs in code compiled with
        # ASan and not in Debian's MLIR libraries: which copy of its inline
        # functions a program links decides, so the poisoning is off.
        "allow_user_poisoning=0")
    config.environment["LSAN_OPTIONS"] = "suppressions=" + suppressions
    # Open MPI's plugins stay mapped at exit, so its leaks have a library
    # name to be suppressed by (%mpirun adds whole allocation stacks).
    config.environment["OMPI_MCA_mca_base_component_disable_dlclose"] = "1"
    config.environment["UBSAN_OPTIONS"] = "abort_on_error=1:print_stacktrace=1"
    lit_config.note("built with -fsanitize=" + config.loom_sanitize)

if config.loom_has_cuda:
    config.available_features.add("cuda")
    config.substitutions.append(("%ptxas", config.loom_ptxas))
else:
    lit_config.note("CUDA toolkit (ptxas) not found: tests that need it are UNSUPPORTED")

# PyTorch for /usr/bin/python3 (Debian's python3-torch): the independent
# reference of the training tests that use it.
import subprocess
if subprocess.run(["/usr/bin/python3", "-c", "import torch"],
                  stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0:
    config.available_features.add("torch")
else:
    lit_config.note("PyTorch not found for /usr/bin/python3: tests that need it are UNSUPPORTED")

# The host CPU's vector extensions: the CPU matmul paths loomc picks for
# --cpu native (test/Numerics/cpu-matmul-paths.test) and AMX's tiles
# (cpu-matmul-amx-hardware.test).
try:
    with open("/proc/cpuinfo") as cpuinfo:
        flags = next((line.split(":", 1)[1].split() for line in cpuinfo
                      if line.startswith("flags")), [])
except OSError:
    flags = []
for flag in ("avx2", "avx512f", "avx512_bf16", "amx_tile", "amx_bf16"):
    if flag in flags:
        config.available_features.add("cpu-" + flag.replace("_", ""))

# OpenBLAS (libopenblas0-pthread): the f32 baseline of benchmarks/cpu. It
# also becomes numpy's BLAS; one thread keeps the references' sums in one
# order and the two lit workers off each other's cores.
config.environment["OPENBLAS_NUM_THREADS"] = "1"
if os.path.exists("/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0"):
    config.available_features.add("openblas")

# Multi-rank runs: Open MPI's mpirun, allowed to run as root (CI and these
# machines are root), with more ranks than cores and no core binding.
# /dev/full fails every write with ENOSPC (Linux): the write-error tests.
if os.path.exists("/dev/full"):
    config.available_features.add("dev-full")

mpirun = shutil.which("mpirun")
if mpirun:
    config.available_features.add("mpi")
    config.substitutions.append(
        ("%mpirun", "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                    "OMPI_MCA_rmaps_base_oversubscribe=1 " +
                    ("ASAN_OPTIONS=%s:fast_unwind_on_malloc=0 " % config.environment["ASAN_OPTIONS"]
                     if "address" in sanitizers else "") + mpirun +
                    " --oversubscribe --bind-to none"))
else:
    lit_config.note("mpirun not found: multi-rank tests are UNSUPPORTED")
