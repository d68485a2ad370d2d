#!/usr/bin/env bash
# Configures the CMake/Ninja build against Debian's LLVM/MLIR 22 (clang-22, ccache when present).
set -euo pipefail
build=$1 llvm=$2 sanitize=${3:-}
args=(-G Ninja -S . -B "$build"
      -DCMAKE_BUILD_TYPE=Release
      -DMLIR_DIR="$llvm/lib/cmake/mlir"
      -DLLVM_DIR="$llvm/lib/cmake/llvm"
      -DLLVM_EXTERNAL_LIT="$llvm/bin/lit")
if [ -x "$llvm/bin/clang++" ]; then
  args+=(-DCMAKE_C_COMPILER="$llvm/bin/clang" -DCMAKE_CXX_COMPILER="$llvm/bin/clang++")
fi
if command -v ccache >/dev/null; then
  args+=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
# make SANITIZE=address,undefined (CMakeLists.txt, LOOM_SANITIZE).
[ -z "$sanitize" ] || args+=(-DLOOM_SANITIZE="$sanitize")
mkdir -p "$build"
cmake "${args[@]}" >"$build/configure.log" 2>&1 || { cat "$build/configure.log"; exit 1; }
