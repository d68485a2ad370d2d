"""dropout.test's checks against the mask docs/language.md defines
(dropout_reference.py): each prints its findings and PASS or FAIL.

    dropout_check.py outputs WORK DTYPE STEP SEED   y, z of step STEP (from 1)
    dropout_check.py update WORK                    a, w after one step
    dropout_check.py microbatches WORK M SEED       the step's loss
"""
import json
import sys

import numpy as np

import dropout_reference as R
import reference

P_Y, P_Z = 0.25, 0.5


def finish(ok):
    print("PASS" if ok else "FAIL")
    raise SystemExit(0 if ok else 1)


def dropped(x, keep, p, dtype):
    """x through the mask as the op computes it: x * (1/(1-p) or 0) in f32,
    rounded once to `dtype`."""
    factor = np.where(keep, R.scale(p), np.float32(0))
    y = x.astype(np.float32) * factor
    return reference.round_bf16(y) if dtype == "bf16" else y


def statistics(name, keep, p, other=None):
    """The fraction dropped within 5 sigma of p (and, given another mask,
    both dropped within 5 sigma of p * p_other: independent streams)."""
    n = keep.size
    frac = 1 - keep.mean()
    ok = abs(frac - p) <= 5 * np.sqrt(p * (1 - p) / n)
    print(f"{name}: {frac:.4f} of {n} dropped (p = {p}): {'ok' if ok else 'FAIL'}")
    if other is not None:
        q = p * (1 - other.mean())
        both = np.mean(~keep & ~other)
        fine = abs(both - q) <= 5 * np.sqrt(q * (1 - q) / n)
        print(f"{name}: {both:.4f} dropped by both streams (independent: {q:.4f}): "
              f"{'ok' if fine else 'FAIL'}")
        ok &= fine
    return ok


def outputs(work, dtype, step, seed):
    x = np.load(f"{work}/x.npy")
    if dtype == "bf16":
        x = reference.round_bf16(x)
    a0 = reference.read_safetensors(f"{work}/init.safetensors")["a"][0]
    y, z = np.load(f"{work}/y.npy").astype(np.float32), np.load(f"{work}/z.npy").astype(np.float32)
    keep_y = R.keep_mask(x.shape, P_Y, seed, step, stream=0)
    keep_z = R.keep_mask(a0.shape, P_Z, seed, step, stream=1)
    ok = True
    if step > 1:
        # Later steps' w and a are updated: the zeros are the mask's.
        same = np.array_equal(y != 0, keep_y)
        print(f"y: {'zeros' if same else 'FAIL'} where the mask of step {step}, seed {seed} "
              f"drops; {int(np.sum((y != 0) != keep_y))} elements differ")
        finish(same)
    for name, got, want in (("y", y, dropped(x, keep_y, P_Y, dtype)),
                            ("z", z, dropped(a0, keep_z, P_Z, dtype))):
        # Bit for bit, the sign of a dropped element's zero included.
        same = np.array_equal(got.view(np.uint32), want.astype(np.float32).view(np.uint32))
        print(f"{name}: {'bit for bit' if same else 'FAIL'} the mask of step {step}, "
              f"seed {seed}; {int(np.sum(got != want))} elements differ")
        ok &= same
    ok &= statistics("y", keep_y, P_Y)
    ok &= statistics("z", keep_z, P_Z, other=keep_y)
    finish(ok)


def update(work):
    """One SGD step (lr 0.5) against the gradient through the same masks:
    d/da = 2 z keep_z 2 / N, d/dw_c = sum_r 2 y d_rc / N."""
    x = np.load(f"{work}/x.npy").astype(np.float64)
    init = reference.read_safetensors(f"{work}/init.safetensors")
    after = reference.read_safetensors(f"{work}/after.safetensors")
    a0, w0 = init["a"][0].astype(np.float64), init["w"][0].astype(np.float64)
    n = x.size
    keep_y = R.keep_mask(x.shape, P_Y, 0, 1, stream=0)
    keep_z = R.keep_mask(a0.shape, P_Z, 0, 1, stream=1)
    d = x * keep_y / (1 - P_Y)
    y = d * w0
    z = a0 * keep_z / (1 - P_Z)
    grad_a = 2 * z * keep_z / (1 - P_Z) / n
    grad_w = np.sum(2 * y * d, axis=0) / n
    ok = True
    for name, got, want in (("a", after["a"][0], a0 - 0.5 * grad_a),
                            ("w", after["w"][0], w0 - 0.5 * grad_w)):
        error = np.max(np.abs(got - want) / (np.abs(want) + 1e-6))
        fine = error <= 1e-5
        print(f"{name} after one step: max relative error {error:.2e}: {'ok' if fine else 'FAIL'}")
        ok &= fine
    # The step's dropped elements of `a` kept their value (no gradient).
    untouched = np.array_equal(after["a"][0][~keep_z], init["a"][0][~keep_z])
    print(f"a where dropped: {'unchanged' if untouched else 'FAIL: changed'}")
    finish(ok and untouched)


def microbatches(work, m, seed):
    """The step's loss: the mean of its microbatches' losses, each drawn
    with its microbatch's key and its own positions."""
    x = np.load(f"{work}/x.npy").astype(np.float64)
    losses = []
    for k, xs in enumerate(np.split(x, m)):
        y = xs * R.keep_mask(xs.shape, P_Y, seed, 1, stream=0, microbatch=k) / (1 - P_Y)
        losses.append(np.mean(y * y))
    want = np.mean(losses)
    log = [json.loads(line) for line in open(f"{work}/log.jsonl")]
    got = [entry["loss"] for entry in log if "loss" in entry][0]
    error = abs(got - want) / want
    fine = error <= 1e-6
    print(f"loss of {m} microbatches: {got:.9g} against {want:.9g}: {'ok' if fine else 'FAIL'}")
    finish(fine)


if __name__ == "__main__":
    kind, work = sys.argv[1], sys.argv[2]
    if kind == "outputs":
        outputs(work, sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    elif kind == "update":
        update(work)
    else:
        microbatches(work, int(sys.argv[3]), int(sys.argv[4]))
