#!/usr/bin/env bash
# Installs the Debian packages Loom needs, only those missing; silent when none are.
set -euo pipefail
pkgs=(llvm-22-dev llvm-22-tools libmlir-22-dev mlir-22-tools clang-22
      ninja-build cmake libopenmpi-dev openmpi-bin python3-numpy
      libgtest-dev ccache nlohmann-json3-dev)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' \
    || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "loom: installing ${missing[*]}"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "loom: need root (or sudo) to install: ${missing[*]}" >&2; exit 1; }
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -qq
$sudo apt-get install -y -qq "${missing[@]}" >/dev/null
echo "loom: installed ${#missing[@]} package(s)"
