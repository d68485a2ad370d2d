"""evaluate.test's check: the held-out losses that train --eval-data printed
('eval after step S: loss L ...') against other runs' (another train's, step
by step, or evaluate's 'eval loss L ...' against the last step's), within
RTOL relative (the step's forward and the forward executable, or 1 and 4
ranks, may sum in other orders). A NaN loss fails, and so does another
train whose eval steps are not the train's. Prints each difference, then
PASS or FAIL.

usage: check_eval_losses.py RTOL TRAIN_OUTPUT OTHER_OUTPUT...
"""
import re
import sys


def losses(path):
    text = open(path).read()
    after = {int(m.group(1)): float(m.group(2))
             for m in re.finditer(r"^eval after step (\d+): loss (\S+) ", text, re.M)}
    final = re.search(r"^eval loss (\S+) over", text, re.M)
    return after, float(final.group(1)) if final else None


def main():
    tolerance = float(sys.argv[1])
    trained, _ = losses(sys.argv[2])
    ok = bool(trained)
    for path in sys.argv[3:]:
        after, final = losses(path)
        if after and sorted(after) != sorted(trained):
            ok = False
            print(f"{path}: eval after steps {sorted(after)}, the train's after {sorted(trained)}")
        pairs = [(step, after[step]) for step in after] if after else [(max(trained), final)]
        for step, value in pairs:
            want = trained.get(step)
            # `not <=`: a NaN on either side fails.
            if want is None or value is None or not abs(value - want) <= tolerance * abs(want):
                ok = False
                print(f"{path}: after step {step}: {value} against {want}")
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
