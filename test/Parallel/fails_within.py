#!/usr/bin/env python3
"""Runs a command that must fail, and end by itself, within a deadline.

  fails_within.py SECONDS COMMAND [ARG...]

Exits 0 when COMMAND exits non-zero within SECONDS; 1 when it succeeds; 2
when it is still running at the deadline (its process group is killed).
`not timeout 60 CMD` had taken timeout's own 124 for the failure wanted:
a job that hung passed. COMMAND's output passes through.
"""
import os
import signal
import subprocess
import sys


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    deadline = float(sys.argv[1])
    process = subprocess.Popen(sys.argv[2:], start_new_session=True)
    try:
        status = process.wait(timeout=deadline)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        print(f"fails_within.py: still running after {deadline:g} s: {' '.join(sys.argv[2:])}",
              file=sys.stderr)
        sys.exit(2)
    if status == 0:
        print(f"fails_within.py: succeeded, a failure was expected: {' '.join(sys.argv[2:])}",
              file=sys.stderr)
        sys.exit(1)
    sys.exit(0)


if __name__ == "__main__":
    main()
