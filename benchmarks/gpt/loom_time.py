#!/usr/bin/env python3
"""Warm milliseconds per forward of a Loom executable: the wall time of
EXE --repeat N+1 minus that of EXE --repeat 1, over N, best of 3 (start-up,
initialization and file reading drop out).

usage: loom_time.py N EXE [ARGS...]
"""
import os
import subprocess
import sys
import time


def seconds(command):
    start = time.perf_counter()
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL,
                   env=dict(os.environ, OMP_NUM_THREADS="1"))
    return time.perf_counter() - start


def main():
    n, exe, args = int(sys.argv[1]), sys.argv[2], sys.argv[3:]
    best = min(seconds([exe, "--repeat", str(n + 1)] + args) - seconds([exe, "--repeat", "1"] + args)
               for _ in range(3))
    print(f"{1000 * best / n:.4f}")


if __name__ == "__main__":
    main()
