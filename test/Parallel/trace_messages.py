#!/usr/bin/env python3
"""Counts the pipeline messages in the --trace files of a pipelined run
(test helper).

usage: trace_messages.py RANK0.json RANK1.json ...

Prints, per file, how many times its first kernel step ran (once per
microbatch of every training step), its sends and its receives of
microbatches' carries (their events name the microbatch), and those of
the update's transfers (their events name the plan step); then whether the ranks ran different
kernel steps ("kernels apart: yes": fewer than a tenth of them ran on two
ranks, those of the update that stages share, such as a tied embedding's),
which is what running each stage on its own rank means.
"""
import json
import os
import sys


def main():
    kernels = []
    for path in sys.argv[1:]:
        events = json.load(open(path))["traceEvents"]
        carries = [e for e in events if e["name"] in ("send", "recv") and "microbatch" in e["args"]]
        transfers = [e for e in events if e["name"] in ("send", "recv") and "step" in e["args"]]
        sends = sum(1 for e in carries if e["name"] == "send")
        recvs = sum(1 for e in carries if e["name"] == "recv")
        sent = sum(1 for e in transfers if e["name"] == "send")
        mine = [e["args"]["step"] for e in events if e.get("cat") == "kernel"]
        first = min(mine) if mine else None
        runs = sum(1 for s in mine if s == first)
        print(f"{os.path.basename(path)}: first kernel {runs} times, {sends} sends, {recvs} receives, "
              f"update transfers {sent} sent {len(transfers) - sent} received")
        kernels.append(set(mine))
    union = set().union(*kernels)
    shared = {s for i, a in enumerate(kernels) for b in kernels[i + 1:] for s in a & b}
    apart = len(union) > 0 and len(shared) * 10 < len(union)
    print("kernels apart:", "yes" if apart else "no")


if __name__ == "__main__":
    main()
