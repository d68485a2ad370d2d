"""Compares an executable's whole cuda run's outputs with its cpu run's (GPU check)."""
import glob
import os
import sys

import numpy as np

work, exe = sys.argv[1], sys.argv[2]
ok = True
for cpu_path in sorted(glob.glob(os.path.join(work, f"{exe}.cpu.*.npy"))):
    name = cpu_path.split(".cpu.")[1][:-4]
    cpu = np.load(cpu_path).astype(np.float64)
    gpu = np.load(cpu_path.replace(".cpu.", ".gpu.")).astype(np.float64)
    scale = max(np.sqrt(np.mean(cpu * cpu)), 1e-30)
    # Relative to each element's magnitude plus the rms, so that the large
    # values of a heavy-tailed output (a softmax's) are held to their own
    # ulps. Differences add up over a whole run: 16-bit outputs may differ
    # by a few ulp (bf16: 2^-8), f32 ones by far less.
    err = np.max(np.abs(cpu - gpu) / (np.abs(cpu) + scale)) if cpu.size else 0.0
    tol = 4 * 2.0 ** -8
    good = bool(np.isfinite(gpu).all() and err <= tol)
    ok &= good
    print(f"{exe}.{name}: max |cuda - cpu| / (|cpu| + rms) = {err:.2e} "
          f"(<= {tol:.2e}: {'PASS' if good else 'FAIL'})")
sys.exit(0 if ok else 1)
