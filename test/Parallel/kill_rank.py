"""Kills one rank of a running multi-rank job with SIGKILL and checks that
the whole job ends, non-zero, within a deadline, leaving no rank behind.

usage: kill_rank.py --rank R --ranks N --after S --deadline D EXE -- LAUNCHER...

LAUNCHER (e.g. mpirun -np 4 EXE ...) is started; once its N ranks of EXE
are running and S seconds have passed, the rank-R process (by its
OMPI_COMM_WORLD_RANK) is killed. Prints one line per check and PASS or
FAIL; exits 1 on FAIL.
"""
import argparse
import os
import signal
import subprocess
import sys
import time


def ranks_of(exe):
    """{world rank: pid} of the running processes of `exe`."""
    found = {}
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if os.path.realpath(f"/proc/{pid}/exe") != exe:
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
        except OSError:
            continue
        rank = env.get(b"OMPI_COMM_WORLD_RANK")
        if rank is not None:
            found[int(rank)] = int(pid)
    return found


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rank", type=int, required=True)
    parser.add_argument("--ranks", type=int, required=True)
    parser.add_argument("--after", type=float, required=True)
    parser.add_argument("--deadline", type=float, required=True)
    parser.add_argument("exe")
    parser.add_argument("launcher", nargs=argparse.REMAINDER)
    args = parser.parse_args()
    exe = os.path.realpath(args.exe)
    launcher = args.launcher[1:] if args.launcher[:1] == ["--"] else args.launcher

    job = subprocess.Popen(launcher, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    started = time.monotonic()
    ranks = {}
    while len(ranks) < args.ranks and time.monotonic() - started < 60:
        if job.poll() is not None:
            print(f"FAIL: the job ended (status {job.returncode}) before all ranks ran")
            print(job.stdout.read().decode(errors="replace"))
            return 1
        ranks = ranks_of(exe)
        time.sleep(0.05)
    if len(ranks) < args.ranks:
        print(f"FAIL: only ranks {sorted(ranks)} started")
        job.kill()
        return 1
    print(f"ranks running: {len(ranks)}")
    time.sleep(args.after)
    if job.poll() is not None:
        print(f"FAIL: the job ended (status {job.returncode}) before the kill: make it run longer")
        return 1
    os.kill(ranks[args.rank], signal.SIGKILL)
    killed = time.monotonic()
    print(f"killed rank {args.rank} mid-run")
    try:
        output, _ = job.communicate(timeout=args.deadline)
    except subprocess.TimeoutExpired:
        job.kill()
        print(f"FAIL: the job still ran {args.deadline} s after the kill")
        return 1
    took = time.monotonic() - killed
    left = ranks_of(exe)
    print(output.decode(errors="replace").strip()[-2000:])
    ok = job.returncode != 0 and not left
    print(f"job ended {'non-zero' if job.returncode != 0 else 'with status 0'} "
          f"within the deadline ({took:.1f} s); ranks left: {len(left)}")
    print("PASS" if ok else "FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
