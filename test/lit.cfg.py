# lit configuration for Loom's regression tests.
import os

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
    ["loomc", "loom-opt", "loom-fuzz"], [config.loom_tools_dir])
llvm_config.with_environment("PATH", config.llvm_tools_dir, append_path=True)

if config.loom_has_cuda:
    config.available_features.add("cuda")
    config.substitutions.append(("%ptxas", config.loom_ptxas))
else:
    lit_config.note("CUDA toolkit (ptxas) not found: tests that need it are UNSUPPORTED")
