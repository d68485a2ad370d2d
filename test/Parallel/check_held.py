"""Checks `./model train --info`'s per-rank params of a pipelined plan.

Reads the report on stdin. Every pipeline rank must hold less than all the
params (the stages split them), and together at least all of them (a param
that two stages read, like a tied embedding, is on both). Prints one line
per rank and a verdict.
"""
import re
import sys

held = []
total = None
for line in sys.stdin:
    m = re.match(r"\s*rank (\d+) holds ([0-9.]+) MiB of the ([0-9.]+) MiB of params", line)
    if m:
        held.append(float(m.group(2)))
        total = float(m.group(3))
        print(f"rank {m.group(1)}: {m.group(2)} of {m.group(3)} MiB")
if not held:
    sys.exit("no 'rank R holds' lines in the report")
split = all(h < total for h in held)
covered = sum(held) + 0.01 * len(held) >= total  # the figures are rounded
print("held:", "split over the stages" if split and covered else
      f"NOT split (each rank {held} of {total} MiB)")
