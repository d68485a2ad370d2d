#!/usr/bin/env python3
"""Sends a signal to a running job once it has printed a line, and waits.

usage: signal_job.py --signal NAME --after TEXT -- LAUNCHER...

LAUNCHER (e.g. mpirun -np 4 EXE train ...) is started; as soon as a line
of its output contains TEXT, the launcher's own process gets signal NAME
(USR1, TERM, INT). Its whole output (stdout and stderr) is printed, then
`status N`, its exit status. Fails if TEXT never comes within 120 s.
"""
import argparse
import signal
import subprocess
import sys
import time


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--signal", required=True)
    parser.add_argument("--after", required=True)
    parser.add_argument("launcher", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    launcher = args.launcher[1:] if args.launcher[:1] == ["--"] else args.launcher
    job = subprocess.Popen(launcher, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           text=True, bufsize=1)
    started, sent = time.monotonic(), False
    for line in job.stdout:
        sys.stdout.write(line)
        if not sent and args.after in line:
            job.send_signal(getattr(signal, "SIG" + args.signal))
            sent = True
        if not sent and time.monotonic() - started > 120:
            job.kill()
            print(f"FAIL: no line with {args.after!r} within 120 s")
            return 1
    print(f"status {job.wait()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
