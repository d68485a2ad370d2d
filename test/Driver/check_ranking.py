"""Checks that loomc --search-mesh's ranked lines are in order of step time.

Reads the report on stdin; prints "ranked: N" for N >= 1 lines in order.
"""

import re
import sys

units = {"ms": 1e-3, "s": 1.0, "us": 1e-6}
steps = []
for line in sys.stdin:
    match = re.match(r"\s+\d+\s+--mesh=\S+.*?\s([0-9.]+) (s|ms|us)\s", line)
    if match:
        steps.append(float(match.group(1)) * units[match.group(2)])
if not steps:
    sys.exit("no ranked configuration")
for before, after in zip(steps, steps[1:]):
    if after < before:
        sys.exit(f"out of order: {after} after {before}")
print(f"ranked: {len(steps)}")
