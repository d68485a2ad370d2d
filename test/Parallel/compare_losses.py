#!/usr/bin/env python3
"""Compares the per-step losses of two training runs (./model train --log)
(test helper).

usage: compare_losses.py [--rtol R] ONE.jsonl MANY.jsonl

Each line of both logs is {"step", "loss", "lr"}; the runs must have the
same steps and learning rates, and each loss of MANY must be within
R (default 1e-5) relative of ONE's, and so must each grad_norm where both
logs have one (a clipped step's scale depends on it). Prints one line per step and PASS or
FAIL last.
"""
import argparse
import json
import sys


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rtol", type=float, default=1e-5)
    parser.add_argument("one")
    parser.add_argument("many")
    args = parser.parse_args()
    one = [json.loads(line) for line in open(args.one)]
    many = [json.loads(line) for line in open(args.many)]
    ok = len(one) == len(many) and len(one) > 0
    if not ok:
        print(f"{len(one)} steps against {len(many)}: FAIL")
    for a, b in zip(one, many):
        rel = abs(a["loss"] - b["loss"]) / abs(a["loss"])
        if "grad_norm" in a and "grad_norm" in b and a["grad_norm"] != 0:
            rel = max(rel, abs(a["grad_norm"] - b["grad_norm"]) / abs(a["grad_norm"]))
        good = a["step"] == b["step"] and a["lr"] == b["lr"] and rel <= args.rtol
        ok &= good
        print(f"step {a['step']}: loss {a['loss']:.8g} against {b['loss']:.8g} "
              f"rel err {rel:.1e}: {'ok' if good else 'FAIL'}")
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
