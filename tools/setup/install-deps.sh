#!/usr/bin/env bash
# Installs the Debian packages Loom needs, only those missing; silent when none are.
set -euo pipefail
pkgs=(llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools clang-22 libclang-rt-22-dev
      ninja-build cmake libopenmpi-dev openmpi-bin python3-numpy
      libgtest-dev ccache nlohmann-json3-dev)
# Test-side references, installed without their recommends (PyTorch's
# pull in a desktop's worth): torch.optim and autograd check the training
# step (test/Numerics/gpt-train-torch.test); PyTorch and OpenBLAS are the
# benchmarks' baselines (benchmarks/cpu, which make test runs once, quick).
lean=(python3-torch libopenblas0-pthread)
installed() {
  dpkg-query -W -f='${Status}' "$1" 2>/dev/null | grep -q 'install ok installed'
}
missing=() missing_lean=()
for p in "${pkgs[@]}"; do installed "$p" || missing+=("$p"); done
for p in "${lean[@]}"; do installed "$p" || missing_lean+=("$p"); done
[ ${#missing[@]} -eq 0 ] && [ ${#missing_lean[@]} -eq 0 ] && exit 0
echo "loom: installing ${missing[*]} ${missing_lean[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "loom: need root (or sudo) to install: ${missing[*]} ${missing_lean[*]}" >&2; exit 1; }
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
[ ${#missing[@]} -eq 0 ] || $sudo apt-get install -y -qq "${missing[@]}" >/dev/null
[ ${#missing_lean[@]} -eq 0 ] ||
  $sudo apt-get install -y -qq --no-install-recommends "${missing_lean[@]}" >/dev/null
echo "loom: installed $(( ${#missing[@]} + ${#missing_lean[@]} )) package(s)"
