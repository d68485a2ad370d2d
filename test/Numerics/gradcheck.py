#!/usr/bin/env python3
"""Checks loomc --gradients against central finite differences (test helper).

usage: gradcheck.py [--loomc LOOMC] [--work DIR] [--only NAME] [--list]
       gradcheck.py --script MODEL.loom [--input NAME=FILE.npy ...]
                    [--scale-param NAME=FACTOR ...]

Each case below is a tiny f32 model whose loss (mse against an input, or
cross_entropy) depends on one op under test. For each case the script
compiles the model twice with loomc: as it is (the loss alone) and with
--gradients (the loss and grad.<param> for every param). Then, for each
param p and a random unit direction v, it compares the directional
derivative <grad.p, v> of the gradient program with the central
difference (L(p + e v) - L(p - e v)) / (2 e) of the forward program, both
run by the executables from the same weights file.

The direction v is half random, half along the gradient read, so that the
derivative stands well above the loss's rounding noise and an error in any
direction still shows. Tolerance (docs/precision.md, "Gradients"): the
central difference has a truncation error of about e^2 |L'''| / 6 and a
rounding error of about NOISE (1 + |L|) / e, NOISE = 1e-6 the relative
error of an f32 loss; with e = 1e-2 a case passes when
|fd - <g, v>| <= 1e-3 |<g, v>| + NOISE (1 + |L|) / e, and one of them
stands 10 times above that noise term: a derivative within the noise shows
nothing (a gradient read as all zeros left v random, and along a random
direction of a large param the true derivative, about |g| / sqrt(size),
was below the noise: it had passed).

Prints one line per (case, param) and PASS or FAIL at the end.
"""
import argparse
import json
import os
import re
import struct
import subprocess
import sys
import tempfile
import zlib

import numpy as np

HEADER = """precision f32 accumulate f32
dim N = 4
dim D = 6
"""

# name -> (declarations and body of model m, loss expression)
CASES = {
    "add-broadcast": ("param a : [N, D] init normal(1)\n  param b : f32[D] init normal(1)",
                      "mse(a + b, t)"),
    "sub-mul-div": ("param a : [N, D] init normal(1)\n  param b : [N, D] init uniform(1, 2)",
                    "mse(a * b - a / b, t)"),
    "neg-exp-tanh": ("param a : [N, D] init normal(0.5)", "mse(exp(-a) + tanh(a), t)"),
    "sqrt": ("param a : [N, D] init uniform(0.5, 2)", "mse(sqrt(a), t)"),
    "gelu": ("param a : [N, D] init normal(2)", "mse(gelu(a), t)"),
    "relu": ("param a : [N, D] init normal(2)", "mse(relu(a), t)"),
    "silu": ("param a : [N, D] init normal(2)", "mse(silu(a), t)"),
    "sigmoid": ("param a : [N, D] init normal(2)", "mse(sigmoid(a), t)"),
    "sin-cos": ("param a : [N, D] init normal(2)\n  param b : [N, D] init normal(2)",
                "mse(sin(a) * cos(b), t)"),
    "matmul": ("param a : [N, 5] init normal(1)\n  param b : [5, D] init normal(1)",
               "mse(a @ b, t)"),
    "matmul-batched": ("param a : [2, N, 5] init normal(1)\n  param b : [2, 5, D] init normal(1)",
                       "mse(sum(a @ b, axis = 0), t)"),
    "matmul-batched-shared-b": ("param a : [2, N, 5] init normal(1)\n  param b : [5, D] init normal(1)",
                                "mse(mean(a @ b, axis = 0), t)"),
    "matmul-transposed": ("param a : [N, 5] init normal(1)\n  param b : [D, 5] init normal(1)",
                          "mse(a @ transpose(b), t)"),
    "softmax": ("param a : [N, D] init normal(1)", "mse(softmax(a, axis = -1), t)"),
    "causal-mask": ("param a : [2, D, D] init normal(1)",
                    "mse(sum(softmax(causal_mask(a)), axis = 0), t2)"),
    # loom.attention (loom-fuse-attention): its VJP recomputes the scores.
    "attention": ("param q : [2, N, D] init normal(1)\n  param k : [2, N, D] init normal(1)\n"
                  "  param v : [2, N, D] init normal(1)",
                  "mse(sum(softmax(q @ transpose(k) * 0.5, axis = -1) @ v, axis = 0), t)"),
    "attention-causal": ("param q : [2, N, D] init normal(1)\n  param k : [2, N, D] init normal(1)\n"
                         "  param v : [2, N, D] init normal(1)",
                         "mse(sum(softmax(causal_mask(q @ transpose(k))) @ v, axis = 0), t)"),
    "layernorm": ("param a : [N, D] init normal(1)\n  param g : f32[D] init uniform(0.5, 1.5)\n"
                  "  param b : f32[D] init normal(0.1)", "mse(layernorm(a, g, b), t)"),
    "rmsnorm": ("param a : [N, D] init normal(1)\n  param g : f32[D] init uniform(0.5, 1.5)",
                "mse(rmsnorm(a, g), t)"),
    "embedding": ("param e : [7, D] init normal(1)", "mse(embedding(e, ids), t)"),
    "reshape-transpose": ("param a : [D, N] init normal(1)",
                          "mse(reshape(transpose(reshape(a, [2, 3, N]), [2, 0, 1]), [N, D]), t)"),
    "split-concat": ("param a : [N, D] init normal(1)",
                     "mse(concat(gelu(x0), x1 * x1, axis = -1), t)"),
    "sum-mean": ("param a : [N, D, 2] init normal(1)",
                 "mse(sum(a, axis = -1) + mean(a, axis = 2), t)"),
    "max-log": ("param a : [N, D] init normal(1)\n  param b : [N, D] init uniform(0.5, 2)",
                "mse(max(a, axis = -1) + sum(log(b), axis = -1), t1)"),
    "min-keepdim": ("param a : [N, D] init normal(1)",
                    "mse(min(a, axis = 0, keepdim = 1) + a, t)"),
    "maximum-minimum-abs": ("param a : [N, D] init normal(1)\n  param b : [D] init normal(1)",
                            "mse(maximum(a, b) + minimum(a, 0.5 * b) + abs(a - 0.25), t)"),
    # erf, and torch's exact GELU from it.
    "erf": ("param a : [N, D] init normal(1)\n  param b : [N, D] init normal(1)",
            "mse(erf(a) + 0.5 * b * (1 + erf(b * 0.7071067811865476)), t)"),
    "cross-entropy": ("param a : [N, 7] init normal(1)", "cross_entropy(a, labels)"),
    "mse-target": ("param a : [N, D] init normal(1)\n  param b : [N, D] init normal(1)",
                   "mse(a, b)"),
}


# The inputs a case may read (declared when its loss names them).
INPUTS = {"t": "[N, D]", "t1": "[N]", "t2": "[D, D]", "ids": "i32[N]", "labels": "i32[N]"}


def script(name):
    params, loss = CASES[name]
    lets = ""
    if "x0" in loss:
        lets = "  let x0, x1 = split(a, 2, axis = -1)\n"
    inputs = "".join(f"  input {n} : {t}\n" for n, t in INPUTS.items()
                     if re.search(rf"\b{n}\b", loss))
    return (HEADER + "\nmodel m {\n" + inputs +
            f"  {params}\n{lets}"
            f"  train {{\n    loss = {loss}\n    optimizer sgd(lr = 0.1)\n  }}\n}}\n")


# The relative rounding error of an f32 loss (its sums and the ops before).
NOISE = 1e-6


def read_safetensors(path):
    blob = open(path, "rb").read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        assert info["dtype"] == "F32", info
        begin, end = info["data_offsets"]
        tensors[name] = np.frombuffer(blob[8 + n + begin:8 + n + end], "<f4").reshape(info["shape"])
    return header, tensors


def write_safetensors(path, header, tensors):
    data = b""
    out = {"__metadata__": header["__metadata__"]}
    for name in sorted(tensors):
        raw = np.ascontiguousarray(tensors[name], "<f4").tobytes()
        out[name] = {"dtype": "F32", "shape": list(tensors[name].shape),
                     "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    text = json.dumps(out, separators=(",", ":")).encode()
    text += b" " * ((8 - len(text) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + data)


def run(exe, args):
    result = subprocess.run([exe] + args, capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit(f"gradcheck.py: {exe} {' '.join(args)} failed:\n{result.stderr}")


def check(name, loomc, work, scale, source=None, given=None, param_scales=None):
    """Checks case `name`, or the script `source` with the inputs `given`
    (NAME -> .npy path), after multiplying the params named in
    `param_scales` (NAME -> factor)."""
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    d = os.path.join(work, name)
    os.makedirs(d, exist_ok=True)
    src = os.path.join(d, "m.loom")
    open(src, "w").write(open(source).read() if source else script(name))
    for flags, exe in (([], "fwd"), (["--gradients"], "grad")):
        result = subprocess.run([loomc, src, "-o", os.path.join(d, exe)] + flags,
                                capture_output=True, text=True)
        if result.returncode != 0:
            sys.exit(f"gradcheck.py: loomc {src} {' '.join(flags)} failed:\n{result.stderr}")
    values = {"t": rng.standard_normal((4, 6)), "t1": rng.standard_normal(4), "t2": rng.standard_normal((6, 6)),
              "ids": rng.integers(0, 7, 4), "labels": rng.integers(0, 7, 4)}
    args = []
    for key, path in (given or {}).items():
        args += ["--input", f"{key}={path}"]
    for key, value in values.items():
        if source or f"input {key} " not in script(name):
            continue
        path = os.path.join(d, key + ".npy")
        np.save(path, value.astype(np.int32 if value.dtype.kind == "i" else np.float32))
        args += ["--input", f"{key}={path}"]
    weights = os.path.join(d, "w.safetensors")
    # The params the executable initializes, then its gradients at them.
    run(os.path.join(d, "grad"), ["--seed", "5", "--save-weights", weights] + args +
        ["--output", f"loss={d}/loss.npy"])
    header, params = read_safetensors(weights)
    if param_scales:
        params = {p: v * param_scales.get(p, 1.0) for p, v in params.items()}
        write_safetensors(weights, header, params)
    outs = []
    for p in params:
        outs += ["--output", f"grad.{p}={d}/grad.{p}.npy"]
    run(os.path.join(d, "grad"), ["--weights", weights] + args + outs)
    ok = True
    eps = 1e-2
    for p, value in params.items():
        grad = scale * np.load(f"{d}/grad.{p}.npy").astype(np.float64)
        # Half along the gradient, for a derivative well above the loss's
        # rounding noise, half random, so that an error in any direction shows.
        v = rng.standard_normal(value.shape)
        v /= np.linalg.norm(v)
        if np.linalg.norm(grad) > 0:
            v += grad / np.linalg.norm(grad)
            v /= np.linalg.norm(v)
        losses = []
        for sign in (1, -1):
            moved = dict(params)
            moved[p] = (value + sign * eps * v).astype(np.float32)
            path = os.path.join(d, f"w{sign:+d}.safetensors")
            write_safetensors(path, header, moved)
            run(os.path.join(d, "fwd"), ["--weights", path] + args +
                ["--output", f"loss={d}/loss{sign:+d}.npy"])
            losses.append(float(np.load(f"{d}/loss{sign:+d}.npy")))
        fd = (losses[0] - losses[1]) / (2 * eps)
        analytic = float(np.sum(grad * v))
        noise = NOISE * (1 + abs(losses[0])) / eps
        tol = 1e-3 * abs(analytic) + noise
        evident = max(abs(fd), abs(analytic)) >= 10 * noise
        good = abs(fd - analytic) <= tol and evident
        ok &= good
        print(f"{name} {p}: <grad, v> {analytic:+.6e}  central difference {fd:+.6e}  "
              f"|diff| {abs(fd - analytic):.2e} (tol {tol:.2e}): "
              f"{'ok' if good else 'FAIL' if evident else 'FAIL (within the noise: shows nothing)'}")
    return ok


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loomc", default="loomc")
    parser.add_argument("--work", default=None)
    parser.add_argument("--only", action="append")
    parser.add_argument("--list", action="store_true")
    parser.add_argument("--script", help="check this script's train section "
                        "instead of the cases")
    parser.add_argument("--input", action="append", default=[],
                        help="NAME=FILE.npy, an input of --script")
    parser.add_argument("--scale-param", action="append", default=[],
                        help="NAME=FACTOR: check at the initialized param NAME "
                             "times FACTOR (an MoE router large enough that "
                             "the finite differences do not move a token to "
                             "another expert)")
    parser.add_argument("--scale-gradients", type=float, default=1.0,
                        help="multiply the gradients read (the self-test: "
                             "1.1 must FAIL)")
    args = parser.parse_args()
    if args.list:
        print("\n".join(CASES))
        return
    work = args.work or tempfile.mkdtemp(prefix="gradcheck-")
    ok = True
    if args.script:
        given = dict(spec.split("=", 1) for spec in args.input)
        name = os.path.splitext(os.path.basename(args.script))[0]
        scales = {k: float(v) for k, v in (spec.split("=", 1) for spec in args.scale_param)}
        ok = check(name, args.loomc, work, args.scale_gradients, args.script, given, scales)
        print("PASS" if ok else "FAIL")
        sys.exit(0 if ok else 1)
    for name in args.only or CASES:
        ok &= check(name, args.loomc, work, args.scale_gradients)
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
