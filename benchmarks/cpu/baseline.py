#!/usr/bin/env python3
"""The baselines of benchmarks/cpu/run.sh, measured on one thread in this run.

usage: baseline.py f32|f32-bt|bf16|bf16-bt SIZE
       baseline.py openblas-core

f32: OpenBLAS's cblas_sgemm (Debian's libopenblas0-pthread, called through
ctypes so that numpy's own BLAS choice does not matter), one thread, with
its AVX-512 kernels where the host has avx512f: OpenBLAS 0.3.21 picks its
kernels by CPU model, and on models it does not know it falls back to
older ones (SSE3 "Prescott" on an Emerald Rapids VM, a fifth of its AVX-512
speed; on a Zen 5 EPYC its 120 GFLOP/s was half the AVX-512 FMA peak, an
AVX2 kernel's figure). Unless it chose AVX-512 kernels, it runs with
OPENBLAS_CORETYPE=SkylakeX, as a user who checked would. openblas-core
prints the kernels it runs. f32-bt: `a @ b^T`, B transposed (CblasTrans).
bf16 and bf16-bt: PyTorch's bf16 matmul on one thread (oneDNN: AMX where the
CPU has it, else its avx512_bf16 or f32 path), `a @ b` and `a @ b.t()`.
Prints one line: the best of several runs in microseconds.
"""
import ctypes
import os
import sys
import time

OPENBLAS = "/usr/lib/x86_64-linux-gnu/openblas-pthread/libopenblas.so.0"


def best_of(fn, seconds=0.5, least=5):
    fn()  # warm-up: first-touch pages, oneDNN's kernel JIT
    best, spent, runs = float("inf"), 0.0, 0
    while runs < least or spent < seconds:
        t = time.perf_counter()
        fn()
        dt = time.perf_counter() - t
        best, spent, runs = min(best, dt), spent + dt, runs + 1
    return best


def openblas():
    """OpenBLAS, with its AVX-512 kernels where the host has them."""
    if not os.path.exists(OPENBLAS):
        sys.exit(f"baseline.py: no {OPENBLAS} (apt-get install libopenblas0-pthread, or make bench-deps)")
    lib = ctypes.CDLL(OPENBLAS)
    lib.openblas_get_corename.restype = ctypes.c_char_p
    core = lib.openblas_get_corename().decode()
    with open("/proc/cpuinfo") as cpuinfo:
        avx512 = " avx512f " in cpuinfo.read()
    avx512_cores = {"skylakex", "cooperlake", "sapphirerapids"}
    if avx512 and core.lower() not in avx512_cores and "OPENBLAS_CORETYPE" not in os.environ:
        # The core type is read when the library loads: run again with it.
        os.execve(sys.executable, [sys.executable] + sys.argv,
                  dict(os.environ, OPENBLAS_CORETYPE="SkylakeX"))
    lib.openblas_set_num_threads(1)
    return lib, core


def openblas_sgemm(n, transposed):
    import numpy as np
    lib, _ = openblas()
    a = np.random.rand(n, n).astype(np.float32)
    b = np.random.rand(n, n).astype(np.float32)
    c = np.zeros((n, n), np.float32)
    ptr = ctypes.c_void_p
    sgemm = lib.cblas_sgemm
    sgemm.argtypes = [ctypes.c_int] * 6 + [ctypes.c_float, ptr, ctypes.c_int, ptr,
                                           ctypes.c_int, ctypes.c_float, ptr, ctypes.c_int]
    row_major, no_trans, trans = 101, 111, 112
    args = (row_major, no_trans, trans if transposed else no_trans, n, n, n, 1.0,
            a.ctypes.data, n, b.ctypes.data, n, 0.0, c.ctypes.data, n)
    seconds = best_of(lambda: sgemm(*args))
    if not np.allclose(c, a @ (b.T if transposed else b), rtol=1e-4, atol=1e-3):
        sys.exit("baseline.py: OpenBLAS's sgemm disagrees with numpy")
    return seconds


def torch_bf16(n, transposed):
    import torch
    torch.set_num_threads(1)
    a = torch.rand(n, n).to(torch.bfloat16)
    b = torch.rand(n, n).to(torch.bfloat16)
    if transposed:
        return best_of(lambda: a @ b.t())
    return best_of(lambda: a @ b)


def main():
    if sys.argv[1:] == ["openblas-core"]:
        print(openblas()[1])
        return
    variant, n = sys.argv[1], int(sys.argv[2])
    if variant in ("f32", "f32-bt"):
        seconds = openblas_sgemm(n, variant == "f32-bt")
    elif variant in ("bf16", "bf16-bt"):
        seconds = torch_bf16(n, variant == "bf16-bt")
    else:
        sys.exit(f"baseline.py: unknown variant '{variant}'")
    print(f"{seconds * 1e6:.1f}")


if __name__ == "__main__":
    main()
