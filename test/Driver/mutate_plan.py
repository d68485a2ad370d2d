#!/usr/bin/env python3
"""Makes the placement mistakes check_plan.py must catch (or accept) in a
real plan: moves one buffer onto another's bytes, then writes the plan's
`end` checksum again, so that the move is the only thing wrong.

  mutate_plan.py MODE PLAN-INDEX < plans > plans

PLAN-INDEX picks the plan of the input (0: the first); the others pass
through unchanged. MODE:
  accumulate  an accumulate's sum onto a temp that dies before that
              accumulate's first step (a mistake: the sum lives from before
              the first step, growing over the microbatches)
  same-rank   in a pipelined plan, a temp onto another temp with an
              intersecting life on a rank they share (a mistake; temps on
              disjoint ranks may share bytes, as loomc's pipelined plans
              show, each rank having an arena of its own)
Prints the two buffers on stderr, `pair LOW HIGH` (ids, increasing); exits
1 when the plan has no such pair.
"""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import check_plan  # noqa: E402


def pick(plan, mode):
    """(moved, onto): buffer ids for `mode`, or None."""
    plan.check_placement(False, False)  # computes lives and ranks
    placed = [b for b in plan.buffers if b["id"] not in plan.views and "first" in b]
    steps = plan.steps
    if mode not in ("accumulate", "same-rank"):
        sys.exit("mutate_plan.py: unknown mode '%s'" % mode)
    if mode == "accumulate":
        for index, step in enumerate(steps):
            if step["kind"] != "accumulate":
                continue
            total = step["args"][1]
            for b in placed:
                if b["role"] == "temp" and b["last"] < index and b["first"] >= 0 \
                        and b["id"] not in plan.accumulated:
                    return total, b["id"]
        return None
    for i, a in enumerate(placed):
        for b in placed[i + 1:]:
            if a["role"] != "temp" or b["role"] != "temp" or not a["ranks"] or not b["ranks"]:
                continue
            if not (a["first"] <= b["last"] and b["first"] <= a["last"]):
                continue
            if a["ranks"] & b["ranks"]:
                return a["id"], b["id"]
    return None


def main(argv):
    mode, wanted = argv[0], int(argv[1])
    data = sys.stdin.buffer.read()
    out = []
    for index, (text, first_line) in enumerate(check_plan.split_plans(data)):
        if index != wanted:
            out.append(text)
            continue
        found = pick(check_plan.Plan(text, first_line), mode)
        if not found:
            sys.exit("mutate_plan.py: no pair of buffers for '%s' in plan %d" % (mode, index))
        plan = check_plan.Plan(text, first_line)
        moved, onto = found
        offset = plan.buffers[onto]["offset"]
        lines = text.decode().split("\n")[:-2]  # without `end` and the last newline
        for number, line in enumerate(lines):
            fields = line.split(" ")
            if fields[0] == "buffer" and int(fields[1]) in (moved,) + tuple(
                    v for v, of in plan.views.items() if of == moved):
                fields[6] = str(offset)
                lines[number] = " ".join(fields)
        body = ("\n".join(lines) + "\n").encode()
        out.append(body + b"end %08x\n" % check_plan.fnv1a(body))
        print("pair %d %d" % (min(moved, onto), max(moved, onto)), file=sys.stderr)
    sys.stdout.buffer.write(b"\n".join(out))


if __name__ == "__main__":
    main(sys.argv[1:])
