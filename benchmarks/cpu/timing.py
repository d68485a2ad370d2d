"""Timing shared by the CPU benchmarks (shapes.py, norms.py,
embedding.py): a Loom script's kernel time from its executable's trace,
and a Python callable's, each the best of REPEAT runs."""
import argparse
import json
import os
import subprocess
import time


def parse_args(doc):
    """BUILD-DIR (default build) and --repeat N (default 10), as each
    benchmark's `doc` describes them."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("build", nargs="?", default="build")
    parser.add_argument("--repeat", type=int, default=10)
    return parser.parse_args()


def loom_kernels_ms(build, work, script_text, repeat, loomc_args=(), run_args=()):
    """Compiles `script_text` with BUILD's loomc (and `loomc_args`), runs it
    REPEAT times on random inputs (those `run_args` does not give, e.g.
    `--input ids=FILE.npy`) with --trace, and returns the best run's total
    kernel time in ms."""
    script = os.path.join(work, "bench.loom")
    with open(script, "w") as f:
        f.write(script_text)
    exe, trace = os.path.join(work, "bench"), os.path.join(work, "trace.json")
    subprocess.run([os.path.join(build, "bin", "loomc"), script, *loomc_args, "-o", exe],
                   check=True, stdout=subprocess.DEVNULL)
    subprocess.run([exe, *run_args, "--random-inputs", "--repeat", str(repeat), "--trace", trace],
                   check=True, stdout=subprocess.DEVNULL)
    kernels = [e for e in json.load(open(trace))["traceEvents"] if e.get("cat") == "kernel"]
    per_run = len(kernels) // repeat
    return min(sum(e["dur"] for e in kernels[i * per_run:(i + 1) * per_run])
               for i in range(repeat)) / 1000


def best_ms(call, repeat):
    """The best of REPEAT calls of `call`, in ms (after one warm-up call)."""
    call()
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        call()
        best = min(best, time.perf_counter() - start)
    return best * 1000
