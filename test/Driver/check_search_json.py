"""Checks loomc --search-mesh's JSON against its text report of one script.

Usage: check_search_json.py REPORT.json REPORT.txt. The counts of the text's
first line, and its ranked configurations in order, must be the JSON's;
the JSON's fits must be in order of step time. Prints "agree: N fits".
"""

import json
import re
import sys

report = json.load(open(sys.argv[1]))
text = open(sys.argv[2]).read()
head = re.search(r"on (\d+) (\S+) GPUs: (\d+) meshes, (\d+) configurations, "
                 r"(\d+) compiled, (\d+) over the memory limit of .*?, (\d+) fit", text)
if not head:
    sys.exit("no search-mesh line in the text report")
counts = [int(head.group(i)) for i in (1, 3, 4, 5, 6, 7)]
fits = report["fits"]
mine = [report["devices"], report["meshes"], report["configurations"],
        report["compiled"], report["over_memory_limit"], len(fits)]
if counts != mine:
    sys.exit(f"counts differ: text {counts}, json {mine}")
if head.group(2) != report["device"]:
    sys.exit(f"device differs: {head.group(2)} vs {report['device']}")
ranked = re.findall(r"^\s+\d+\s+(--mesh=\S+(?: --\S+)*)", text, re.M)
if ranked != [fit["configuration"] for fit in fits[:len(ranked)]]:
    sys.exit(f"order differs: text {ranked}, json {[f['configuration'] for f in fits]}")
steps = [fit["step_seconds"] for fit in fits]
if steps != sorted(steps):
    sys.exit(f"fits out of order: {steps}")
for fit in fits:
    axes = ",".join(f"{name}={size}" for name, size in fit["axes"].items())
    if not fit["configuration"].startswith(f"--mesh={axes}"):
        sys.exit(f"axes {axes} are not {fit['configuration']}'s")
print(f"agree: {len(fits)} fits")
