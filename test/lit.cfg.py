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
config.substitutions.append(("%python", "/usr/bin/python3"))

llvm_config.use_default_substitutions()
llvm_config.add_tool_substitutions(
    ["loomc", "loom-opt", "loom-fuzz", "loom-fuzz-files", "loom-schedule"], [config.loom_tools_dir])
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

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

# Multi-rank runs: Open MPI's mpirun, allowed to run as root (CI and these
# machines are root), with more ranks than cores and no core binding.
mpirun = shutil.which("mpirun")
if mpirun:
    config.available_features.add("mpi")
    config.substitutions.append(
        ("%mpirun", "env OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 "
                    "OMPI_MCA_rmaps_base_oversubscribe=1 " + mpirun +
                    " --oversubscribe --bind-to none"))
else:
    lit_config.note("mpirun not found: multi-rank tests are UNSUPPORTED")
