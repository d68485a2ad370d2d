#!/usr/bin/env python3
"""Checks that a training run's loss fell (test helper).

usage: falls.py LOG.jsonl FRACTION

PASS when the mean loss of the last 10 steps is below FRACTION times the
first step's loss.
"""
import json
import sys

steps = [json.loads(line) for line in open(sys.argv[1])]
first, last = steps[0]["loss"], sum(s["loss"] for s in steps[-10:]) / len(steps[-10:])
ok = last < float(sys.argv[2]) * first
print(f"first loss {first:.4f}, mean of the last 10 {last:.4f} "
      f"({last / first:.2f} of the first)")
print("PASS" if ok else "FAIL")
sys.exit(0 if ok else 1)
