# Sourced by benchmarks/attention/{run,grad}.sh: one thread for Loom and the
# baselines, a work directory removed on exit (`work`), this directory
# (`here`), and PyTorch for /usr/bin/python3, or a message naming the
# caller and an exit.
# One thread for the baselines too: Debian's PyTorch does f32 matmuls in
# OpenBLAS's pthread build, whose own pool torch.set_num_threads(1) does not
# bound (measured: 2 threads, 190 vs 101 GFLOP/s at 1024^3 on 2 cores).
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
here=$(cd "$(dirname "${BASH_SOURCE[1]}")" && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  echo "$(basename "${BASH_SOURCE[1]}"): needs PyTorch for /usr/bin/python3 (apt-get install python3-torch, or make bench-deps)" >&2
  exit 1
fi
