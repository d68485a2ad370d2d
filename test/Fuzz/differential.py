#!/usr/bin/env python3
"""Differential fuzzing of the whole compiler: random valid scripts,
compiled (loomc), run on the CPU, against PyTorch in float64.

usage: differential.py --loomc LOOMC --work DIR --seeds A:B
                       [--gradients | --train] [--precision f32|bf16|f16]
                       [--ranks N | --shard | --stages S] [--mpirun CMD] [--gpu]
                       [--scale-reference F]

Each seed builds one script (`model fuzz`): an expression tree of 1 to 4
levels over the language's ops (elementwise with broadcasting, matmuls in
the weight and batched forms, softmax along any axis, the causal
attention pattern, layernorm and rmsnorm, transpose, reshape, sum, mean,
max, concat, split, embedding by i32 ids) on odd shapes (1 to 65 a dim),
whose leaves are the model's inputs. The executable's output `y` is compared with the same
expression evaluated by PyTorch (float64) on the same inputs.

--gradients: the leaves are params (`init normal(1.0)`), the script gets
`train { loss = mse(y, target) }` (for a y of rank >= 2, 30% of the time
`cross_entropy(y, labels)`) and is built with `loomc --gradients`;
every `grad.<param>` is compared with torch.autograd's (the weights come
back from --save-weights). `max` (not differentiable in Loom) is left
out. --ranks N: the script gets `mesh m[dp = N]` and its target is split
over dp along dim 0 where N divides it; the run is `mpirun -np N`, so
the data-parallel gradient sums are checked against the one-rank
reference. --shard: a 2 x 2 mesh (4 ranks) instead, every leaf split at
random (each even dim whole or over an axis not yet used), which the
partitioner propagates through the program. --train: the script is built
with `loomc --train` and a random optimizer (SGD, SGD with momentum and
weight decay, Adam, AdamW), runs 3 steps (`train --steps 3`, `--save`),
and each param's update is compared with torch.optim's from the same
initial weights (weight decay on params of rank >= 2, as Loom's); a
training that diverges (in torch too) is counted, not compared.
--stages S (with --gradients or --train): `mesh m[pp = S]`, `pipeline
pp`, and the `let`s cut at random into S pipeline stages (`stage N {
... }`, the output in the last), run with a random schedule (not
interleaved, which needs microbatches) on S ranks. --gpu:
each script is also built with `loomc --gpu` (sm_90a kernels, ptxas from
PATH), which must succeed too; its executable is not run. --precision bf16: inputs and params in bf16 (`precision bf16
accumulate f32`), the reference on the bf16-rounded inputs, with bf16's
tolerance; --precision f16 the same in f16 (with bf16's tolerance too).

Tolerance per element: |got - ref| <= RTOL (|ref| + rms(ref)) + ATOL
(gradients 2 RTOL): for f32 RTOL 1e-3, ATOL 1e-6 (the reference is exact;
sums reorder, exp and tanh are approximated, and the programs chain up to
four ops); for bf16 RTOL 0.1, ATOL 1e-4, a check for gross errors only:
every op rounds to 8 bits, and a softmax of rounded inputs of size 6
(a sum of 33 products) is already 7% off; a gradient also ATOL 1e-2 of
the rms of all the gradients, as one that cancels exactly (a shift under
a softmax) is bf16 noise of that size; of trained params 1% of the
elements may be over (Adam turns the rounding noise of a gradient near 0
into a whole step; on small params a few more fail). Prints one line per failing seed
(COMPILE, RUN, SHAPE or WRONG, with the worst element) and a summary
line; exits 1 if any seed failed. The scripts of failing seeds stay in
DIR. --scale-reference F multiplies the reference by F (the test that
the comparison catches a 1% error).
"""
import argparse
import math
import os
import random
import shlex
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Numerics"))
from reference import read_safetensors, round_to  # noqa: E402

torch.set_default_dtype(torch.float64)

DIMS = [1, 2, 3, 5, 7, 8, 13, 16, 17, 31, 33, 64, 65]
# A leaf's elements at most: keeps each program's run in milliseconds.
MOST_ELEMENTS = 100000


def gelu(x):
    """GELU, tanh approximation (docs/language.md)."""
    return 0.5 * x * (1 + torch.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))


UNARY = {
    "gelu": ("gelu({})", gelu),
    "relu": ("relu({})", torch.relu),
    "silu": ("silu({})", F.silu),
    "tanh": ("tanh({})", torch.tanh),
    # Kept in the functions' well-conditioned ranges.
    "exp": ("exp(tanh({}))", lambda x: torch.exp(torch.tanh(x))),
    "sqrt": ("sqrt({0} * {0} + 1)", lambda x: torch.sqrt(x * x + 1)),
    "log": ("log({0} * {0} + 1)", lambda x: torch.log(x * x + 1)),
    "neg": ("-{}", lambda x: -x),
}


class Program:
    """One random script: its inputs (leaves), `let` bindings and output."""

    def __init__(self, rng, gradients):
        self.rng = rng
        self.gradients = gradients
        self.leaves = {}  # name -> shape
        self.ids = {}  # name -> (shape, bound): integer inputs
        self.lets = []  # (names, text, evaluate or None)
        self.count = 0

    def index_leaf(self, shape, bound):
        """An i32 input of `shape` with ids in [0, bound) (an embedding's)."""
        name = f"i{len(self.ids)}"
        self.ids[name] = (tuple(shape), bound)
        return name

    def leaf(self, shape):
        name = f"x{len(self.leaves)}"
        self.leaves[name] = tuple(shape)
        return name

    def bind(self, text, evaluate):
        name = f"t{self.count}"
        self.count += 1
        self.lets.append((name, text, evaluate))
        return name

    def expr(self, shape, depth):
        """The name of a value of `shape` built from `depth` levels of ops."""
        r = self.rng
        if depth <= 0 or r.random() < 0.15 or not shape or np.prod(shape) > MOST_ELEMENTS:
            return self.leaf(shape)
        kinds = ["unary", "binary", "broadcast", "matmul", "matmul", "softmax", "norm",
                 "transpose", "reshape", "reduce", "concat", "split"]
        if len(shape) == 3:
            kinds += ["batched", "attention"]
        if len(shape) >= 2:
            kinds.append("embedding")
        kind = r.choice(kinds)
        sub = depth - 1
        if kind == "unary":
            a = self.expr(shape, sub)
            text, fn = UNARY[r.choice(sorted(UNARY))]
            return self.bind(text.format(a), lambda v, a=a, fn=fn: fn(v[a]))
        if kind in ("binary", "broadcast"):
            a = self.expr(shape, sub)
            other = list(shape)
            if kind == "broadcast":  # fewer leading dims, some of size 1
                other = [1 if r.random() < 0.4 else d for d in shape[r.randint(0, len(shape) - 1):]]
            b = self.expr(tuple(other), sub)
            op = r.choice("+-*/")
            if op == "/":
                return self.bind(f"{a} / ({b} * {b} + 1)", lambda v, a=a, b=b: v[a] / (v[b] ** 2 + 1))
            fn = {"+": torch.add, "-": torch.sub, "*": torch.mul}[op]
            return self.bind(f"{a} {op} {b}", lambda v, a=a, b=b, fn=fn: fn(v[a], v[b]))
        if kind == "matmul" and len(shape) >= 2:  # the weight form
            k = r.choice(DIMS)
            a, b = self.expr(shape[:-1] + (k,), sub), self.expr((k, shape[-1]), sub)
            return self.bind(f"{a} @ {b}", lambda v, a=a, b=b: v[a] @ v[b])
        if kind == "batched":
            k = r.choice(DIMS)
            a = self.expr(shape[:-1] + (k,), sub)
            if r.random() < 0.5:
                b = self.expr((shape[0], k, shape[-1]), sub)
                return self.bind(f"{a} @ {b}", lambda v, a=a, b=b: v[a] @ v[b])
            b = self.expr((shape[0], shape[-1], k), sub)
            return self.bind(f"{a} @ transpose({b})",
                             lambda v, a=a, b=b: v[a] @ torch.transpose(v[b], -1, -2))
        if kind == "softmax":
            a = self.expr(shape, sub)
            axis = r.randrange(-len(shape), len(shape))
            text = f"softmax({a})" if axis == -1 else f"softmax({a}, axis = {axis})"
            return self.bind(text, lambda v, a=a, axis=axis: torch.softmax(v[a], dim=axis))
        if kind == "norm" and shape[-1] >= 2:
            a, scale = self.expr(shape, sub), self.leaf((shape[-1],))
            if r.random() < 0.5:
                bias = self.leaf((shape[-1],))

                def layernorm(v, a=a, scale=scale, bias=bias):
                    x = v[a]
                    mean = x.mean(-1, keepdim=True)
                    var = ((x - mean) ** 2).mean(-1, keepdim=True)
                    return (x - mean) / torch.sqrt(var + 1e-5) * v[scale] + v[bias]
                return self.bind(f"layernorm({a}, {scale}, {bias})", layernorm)

            def rmsnorm(v, a=a, scale=scale):
                x = v[a]
                return x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-5) * v[scale]
            return self.bind(f"rmsnorm({a}, {scale})", rmsnorm)
        if kind == "transpose" and len(shape) >= 2:
            perm = list(range(len(shape)))
            r.shuffle(perm)
            source = [0] * len(shape)  # result dim i is source dim perm[i]
            for i, p in enumerate(perm):
                source[p] = shape[i]
            a = self.expr(tuple(source), sub)
            return self.bind(f"transpose({a}, {perm})", lambda v, a=a, p=perm: v[a].permute(*p))
        if kind == "reshape":
            total = int(np.prod(shape))
            factorings = [(total,)] + [(d, total // d) for d in range(1, total + 1) if total % d == 0][:6]
            a = self.expr(r.choice(factorings), sub)
            return self.bind(f"reshape({a}, {list(shape)})", lambda v, a=a, s=shape: v[a].reshape(s))
        if kind == "reduce" and len(shape) <= 3:
            axis = r.randrange(0, len(shape) + 1)
            a = self.expr(shape[:axis] + (r.choice(DIMS),) + shape[axis:], sub)
            what = r.choice(["sum", "mean"] if self.gradients else ["sum", "mean", "max"])
            fn = {"sum": lambda x, d: x.sum(d), "mean": lambda x, d: x.mean(d),
                  "max": lambda x, d: x.amax(d)}[what]
            return self.bind(f"{what}({a}, axis = {axis})", lambda v, a=a, d=axis, fn=fn: fn(v[a], d))
        if kind == "concat":
            axis = r.randrange(len(shape))
            if shape[axis] >= 2:
                cut = r.randint(1, shape[axis] - 1)
                a = self.expr(shape[:axis] + (cut,) + shape[axis + 1:], sub)
                b = self.expr(shape[:axis] + (shape[axis] - cut,) + shape[axis + 1:], sub)
                return self.bind(f"concat({a}, {b}, axis = {axis})",
                                 lambda v, a=a, b=b, d=axis: torch.cat([v[a], v[b]], dim=d))
        if kind == "split":
            axis, parts = r.randrange(len(shape)), r.choice([2, 3])
            a = self.expr(shape[:axis] + (shape[axis] * parts,) + shape[axis + 1:], sub)
            pieces = [f"s{self.count}_{i}" for i in range(parts)]
            self.count += 1
            self.lets.append((", ".join(pieces), f"split({a}, {parts}, axis = {axis})", None))
            which = r.randrange(parts)
            return self.bind(pieces[which], lambda v, a=a, d=axis, n=parts, i=which:
                             torch.chunk(v[a], n, dim=d)[i])
        if kind == "embedding":  # rows of a table, by ids (repeated ids sum their gradients)
            rows = r.choice(DIMS)
            table, ids = self.expr((rows, shape[-1]), sub), self.index_leaf(shape[:-1], rows)
            return self.bind(f"embedding({table}, {ids})", lambda v, t=table, i=ids: v[t][v[i]])
        if kind == "attention":  # the pattern loom-fuse-attention fuses
            q, k, val = self.expr(shape, sub), self.leaf(shape), self.leaf(shape)
            scale = 1 / math.sqrt(shape[-1])

            def attention(v, q=q, k=k, val=val, s=scale):
                scores = v[q] @ torch.transpose(v[k], -1, -2) * s
                t = scores.shape[-1]
                above = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
                return torch.softmax(scores.masked_fill(above, -math.inf), -1) @ v[val]
            return self.bind(f"softmax(causal_mask({q} @ transpose({k}) * {scale!r})) @ {val}",
                             attention)
        return self.leaf(shape)


class Loss:
    """The loss of a gradient or training program: `mse(y, target)`, or,
    for a y of rank >= 2 at random, `cross_entropy(y, labels)` (y's last
    dim the classes)."""

    def __init__(self, seed, shape):
        self.shape = shape
        self.entropy = len(shape) >= 2 and random.Random(seed + 5 * 10**6).random() < 0.3
        self.name = "labels" if self.entropy else "target"
        self.seed = seed

    def declaration(self, split):
        if self.entropy:
            return f"  input labels : i32[{', '.join(map(str, self.shape[:-1]))}]{split}"
        return f"  input target : f32[{', '.join(map(str, self.shape))}]{split}"

    def text(self):
        return "cross_entropy(y, labels)" if self.entropy else "mse(y, target)"

    def write(self, work):
        """Writes the input's file; its --input argument."""
        rng = np.random.default_rng(self.seed)
        if self.entropy:
            self.value = rng.integers(0, self.shape[-1], size=self.shape[:-1]).astype(np.int32)
        else:
            self.value = rng.standard_normal(self.shape).astype(np.float32)
        np.save(f"{work}/{self.name}.npy", self.value)
        return ["--input", f"{self.name}={work}/{self.name}.npy"]

    def of(self, y):
        """The loss of torch's y (after write)."""
        if self.entropy:
            labels = torch.tensor(self.value.astype(np.int64)).reshape(-1)
            return F.cross_entropy(y.reshape(-1, self.shape[-1]), labels)
        return ((y - torch.tensor(self.value.astype(np.float64))) ** 2).mean()


def build(seed, gradients, precision, ranks, shard=False, optimizer=None, stages=1,
          schedule=None):
    """The seed's program, its output's name, its loss (gradients and
    training) and the script."""
    rng = random.Random(seed)
    program = Program(rng, gradients)
    shape = tuple(rng.choice(DIMS) for _ in range(rng.choice([1, 2, 2, 3, 3])))
    out = program.expr(shape, rng.randint(1, 4))
    dtype = "f32" if precision == "f32" else ""  # 16-bit: the policy's type
    lines = []
    if stages > 1:
        lines.append(f"mesh m[pp = {stages}]")
    elif shard:
        lines.append("mesh m[a = 2, b = 2]")
    elif ranks > 1:
        lines.append(f"mesh m[dp = {ranks}]")
    if precision != "f32":
        lines.append(f"precision {precision} accumulate f32")
    lines.append("model fuzz {")
    def spec(shape):
        """With --shard, each dim whole or split over an axis (each axis once)."""
        if not shard:
            return ""
        axes, dims = ["a", "b"], []
        for d in shape:
            axis = rng.choice(axes + ["_", "_"]) if d % 2 == 0 else "_"
            if axis != "_":
                axes.remove(axis)
            dims.append(axis)
        return f" shard [{', '.join(dims)}]" if set(dims) != {"_"} else ""
    for name, s in program.leaves.items():
        kind, init = ("param", " init normal(1.0)") if gradients else ("input", "")
        lines.append(f"  {kind} {name} : {dtype}[{', '.join(map(str, s))}]{spec(s)}{init}")
    for name, (s, bound) in program.ids.items():
        lines.append(f"  input {name} : i32[{', '.join(map(str, s))}]{spec(s)}")
    loss = Loss(seed, shape)
    if gradients:
        rank = len(shape) - (1 if loss.entropy else 0)
        split = (" shard [dp" + ", _" * (rank - 1) + "]"
                 if ranks > 1 and not shard and stages == 1 and shape[0] % ranks == 0 else "")
        lines.append(loss.declaration(split))
    if stages > 1:
        lines.append("  pipeline pp")
    stage_rng = random.Random(seed + 2 * 10**6)
    cuts = sorted(stage_rng.randint(0, len(program.lets)) for _ in range(stages - 1))
    bounds = [0] + cuts + [len(program.lets)]
    for number in range(len(bounds) - 1):
        chunk = program.lets[bounds[number]:bounds[number + 1]]
        indent = "  "
        if stages > 1:
            if not chunk and number < stages - 1:
                continue  # an empty stage, which passes values on
            lines.append(f"  stage {number} {{")
            indent = "    "
        for names, text, _ in chunk:
            lines.append(f"{indent}let {names} = {text}")
        if stages > 1 and number < stages - 1:
            lines.append("  }")
    # In the last stage (which makes the stages S, a multiple of the ranks).
    lines.append(f"{'    ' if stages > 1 else '  '}output y = {out} * 1")
    if stages > 1:
        lines.append("  }")
    if gradients:
        settings = [f"optimizer {optimizer}"] if optimizer else []
        if schedule:
            settings.append(f"schedule {schedule}")
        lines.append("  train {\n" + "".join(f"    {x}\n" for x in [f"loss = {loss.text()}"] + settings) + "  }")
    lines.append("}")
    return program, out, loss, "\n".join(lines) + "\n"


def evaluate(program, out, values):
    values = dict(values)
    for name, _, fn in program.lets:
        if fn is not None:
            values[name] = fn(values)
    return values[out]


def tolerance(precision, scale=1):
    """(RTOL, ATOL) of a comparison (see above); RTOL times `scale`."""
    rtol, atol = (1e-1, 1e-4) if precision != "f32" else (1e-3, 1e-6)
    return scale * rtol, atol


def weights(path):
    """The float arrays of a .safetensors file (reference.py's reader)."""
    return {name: array for name, (array, _) in read_safetensors(path).items()}


def compare(got, ref, rtol, atol, most_over=0.0):
    """None when every element is within tolerance (or all but a fraction
    `most_over` of them), else a description."""
    rms = math.sqrt(float(np.mean(ref ** 2))) if ref.size else 0.0
    error = np.abs(got - ref)
    tolerance = rtol * (np.abs(ref) + rms) + atol
    over = int(np.sum(~(error <= tolerance)))
    if over <= most_over * ref.size:
        return None
    worst = int(np.nanargmax(np.where(np.isnan(error), np.inf, error - tolerance)))
    return f"{over} of {ref.size} over, worst [{worst}] {got.flat[worst]!r} vs {ref.flat[worst]!r}"


def id_inputs(program, seed, work):
    """The program's integer inputs: --input arguments and their values (as
    torch index tensors), from a generator of their own."""
    rng = np.random.default_rng(seed + 4 * 10**6)
    arguments, values = [], {}
    for name, (shape, bound) in program.ids.items():
        ids = rng.integers(0, bound, size=shape).astype(np.int32)
        np.save(f"{work}/{name}.npy", ids)
        arguments += ["--input", f"{name}={work}/{name}.npy"]
        values[name] = torch.tensor(ids.astype(np.int64))
    return arguments, values


def compile_script(args, seed, text, flags):
    """Writes the seed's script and builds it: its executable, and '' when
    loomc built it (and with --gpu also the one with sm_90a kernels, not
    run), else what loomc said."""
    script, exe = f"{args.work}/s{seed}.loom", f"{args.work}/s{seed}"
    with open(script, "w") as f:
        f.write(text)
    builds = [(flags, exe)] + ([(flags + ["--gpu"], exe + ".gpu")] if args.gpu else [])
    for options, output in builds:
        compiled = subprocess.run([args.loomc, script, "-o", output] + options,
                                  capture_output=True, text=True)
        if compiled.returncode != 0:
            return exe, (f"COMPILE{' --gpu' if '--gpu' in options else ''} (exit {compiled.returncode}): "
                         f"{compiled.stderr.strip()[-600:]}")
    if args.gpu:
        os.remove(exe + ".gpu")
    return exe, ""


def launch(args, run):
    """Runs the command line `run` (on --ranks ranks): '' when it succeeds,
    else what it said."""
    if args.ranks > 1:
        run = shlex.split(args.mpirun) + ["-np", str(args.ranks)] + run
    ran = subprocess.run(run, capture_output=True, text=True)
    return f"RUN (exit {ran.returncode}): {ran.stderr.strip()[-600:]}" if ran.returncode else ""


def schedule_of(seed, args):
    """A pipelined program's schedule, at random (None: the default)."""
    if args.stages == 1:
        return None
    # Not interleaved: it needs the microbatches to be a multiple of the
    # ranks, and these programs have one.
    return random.Random(seed + 3 * 10**6).choice([None, "gpipe", "1f1b", "zero_bubble"])


OPTIMIZERS = [
    # (the script's optimizer, torch.optim's, its keyword arguments)
    ("sgd(lr = 0.1)", torch.optim.SGD, dict(lr=0.1)),
    ("sgd(lr = 0.05, momentum = 0.9, weight_decay = 0.1)", torch.optim.SGD,
     dict(lr=0.05, momentum=0.9, weight_decay=0.1)),
    # eps well above the f32 noise of a gradient that cancels to 0 (a
    # shift under a softmax), which Adam's m / sqrt(v) would blow up to lr.
    ("adam(lr = 0.01, eps = 0.001)", torch.optim.Adam, dict(lr=0.01, eps=1e-3)),
    ("adamw(lr = 0.01, eps = 0.001, weight_decay = 0.1)", torch.optim.AdamW,
     dict(lr=0.01, eps=1e-3, weight_decay=0.1)),
]
TRAIN_STEPS = 3


def check_training(seed, args):
    """'' when the trained params agree, None when the training diverges
    (torch's too: not compared), else what went wrong. The params after TRAIN_STEPS steps of a random optimizer (`loomc
    --train`, `train --steps`) against torch.optim's from the same initial
    weights (weight decay on params of rank >= 2 only, as Loom's)."""
    optimizer, torch_optimizer, options = random.Random(seed + 10**6).choice(OPTIMIZERS)
    program, out, loss, text = build(seed, True, args.precision, args.ranks, args.shard, optimizer,
                                     args.stages, schedule_of(seed, args))
    work = args.work
    exe, failed = compile_script(args, seed, text, ["--train"])
    if failed:
        return failed
    id_arguments, ids = id_inputs(program, seed, work)
    if (failed := launch(args, [exe, "train", "--steps", str(TRAIN_STEPS)] + loss.write(work) +
                         id_arguments + ["--seed", str(seed), "--save-weights", f"{work}/w.safetensors",
                                         "--save", f"{work}/trained.safetensors"])):
        return failed
    initial = weights(f"{work}/w.safetensors")
    trained = weights(f"{work}/trained.safetensors")
    leaves = {name: torch.tensor(initial[name].astype(np.float64), requires_grad=True)
              for name in program.leaves}
    inputs = dict(leaves, **ids)
    decayed = [leaf for leaf in leaves.values() if leaf.dim() >= 2]
    plain = [leaf for leaf in leaves.values() if leaf.dim() < 2]
    groups = [{"params": decayed}, {"params": plain, "weight_decay": 0.0}]
    step = torch_optimizer([g for g in groups if g["params"]], **options)
    for _ in range(TRAIN_STEPS):
        # Not zeroed in place: two params whose gradients torch hands out as
        # views of one buffer (y = reshape(x0) + x1) would then accumulate
        # each other's (1.13's default, set_to_none=False).
        step.zero_grad(set_to_none=True)
        loss.of(evaluate(program, out, inputs)).backward()
        step.step()
    if not all(torch.isfinite(leaf).all() and leaf.abs().max() < 1e6 for leaf in leaves.values()):
        return None  # the training diverges (in torch too): nothing to compare
    problems = []
    for name, leaf in leaves.items():
        # What moved: the update, compared with torch's.
        ref = (leaf.detach().numpy() - initial[name]) * args.scale_reference
        got = trained[name].astype(np.float64) - initial[name]
        # bf16: Adam's m / sqrt(v) turns a gradient's rounding noise into a
        # whole step for the few elements whose gradient is near 0.
        most_over = 0.01 if args.precision != "f32" else 0.0
        if (wrong := compare(got, ref, *tolerance(args.precision, 2), most_over)):
            problems.append(f"WRONG {name} after {TRAIN_STEPS} steps ({optimizer}): {wrong}")
    return "; ".join(problems)


def check(seed, args):
    """'' when the seed's program passes, else what went wrong."""
    program, out, loss, text = build(seed, args.gradients, args.precision, args.ranks, args.shard,
                                     stages=args.stages, schedule=schedule_of(seed, args))
    work = args.work
    exe, failed = compile_script(args, seed, text, ["--gradients"] if args.gradients else [])
    if failed:
        return failed
    rng = np.random.default_rng(seed)
    run = [exe, "--output", f"y={work}/y.npy"]
    values = {}
    if args.gradients:
        run += loss.write(work) + ["--seed", str(seed), "--save-weights", f"{work}/w.safetensors"]
        run += [a for name in program.leaves for a in ("--output", f"grad.{name}={work}/g.{name}.npy")]
    else:
        for name, s in program.leaves.items():
            x = rng.standard_normal(s).astype(np.float32)
            np.save(f"{work}/{name}.npy", x)
            values[name] = round_to(x, args.precision)
            run += ["--input", f"{name}={work}/{name}.npy"]
    id_arguments, ids = id_inputs(program, seed, work)
    if (failed := launch(args, run + id_arguments)):
        return failed
    if args.gradients:
        values = weights(f"{work}/w.safetensors")
    leaves = {name: torch.tensor(values[name].astype(np.float64), requires_grad=args.gradients)
              for name in program.leaves}
    y = evaluate(program, out, dict(leaves, **ids))
    rtol, atol = tolerance(args.precision)
    got = np.load(f"{work}/y.npy").astype(np.float64)
    ref = y.detach().numpy() * args.scale_reference
    if got.shape != ref.shape:
        return f"SHAPE y {got.shape} vs {ref.shape}"
    problems = []
    if (wrong := compare(got, ref, rtol, atol)):
        problems.append(f"WRONG y: {wrong}")
    if args.gradients and not problems:
        grads = torch.autograd.grad(loss.of(y), list(leaves.values()), allow_unused=True)
        refs = {name: (np.zeros(leaf.shape) if grad is None else grad.numpy()) * args.scale_reference
                for (name, leaf), grad in zip(leaves.items(), grads)}
        if args.precision != "f32":
            # A gradient that cancels exactly (a shift under a softmax) is
            # bf16 noise of the size of the others.
            every = np.concatenate([ref.ravel() for ref in refs.values()])
            atol = max(atol, 1e-2 * math.sqrt(float(np.mean(every ** 2))))
        for name, ref in refs.items():
            got = np.load(f"{work}/g.{name}.npy").astype(np.float64)
            if (wrong := compare(got, ref, 2 * rtol, atol)):
                problems.append(f"WRONG grad.{name}: {wrong}")
    return "; ".join(problems)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loomc", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--seeds", required=True, help="A:B, the seeds A to B - 1")
    parser.add_argument("--gradients", action="store_true")
    parser.add_argument("--train", action="store_true",
                        help=f"{TRAIN_STEPS} steps of a random optimizer against torch.optim's")
    parser.add_argument("--precision", choices=["f32", "bf16", "f16"], default="f32")
    parser.add_argument("--ranks", type=int, default=1)
    parser.add_argument("--mpirun", default="mpirun --oversubscribe",
                        help="the command that runs the executable on --ranks ranks")
    parser.add_argument("--scale-reference", type=float, default=1.0)
    parser.add_argument("--gpu", action="store_true",
                        help="also build each script with loomc --gpu (sm_90a; not run)")
    parser.add_argument("--stages", type=int, default=1,
                        help="the program cut at random into this many pipeline stages, one a rank")
    parser.add_argument("--shard", action="store_true",
                        help="a 2 x 2 mesh (4 ranks), every leaf split at random over its axes")
    args = parser.parse_args()
    first, last = map(int, args.seeds.split(":"))
    if args.shard:
        args.ranks = 4
    if args.stages > 1:
        args.ranks = args.stages
    os.makedirs(args.work, exist_ok=True)
    failed = diverged = 0
    for seed in range(first, last):
        problem = check_training(seed, args) if args.train else check(seed, args)
        if problem is None:
            diverged += 1
        elif problem:
            failed += 1
            print(f"seed {seed}: {problem}", flush=True)
        else:
            for path in (f"{args.work}/s{seed}", f"{args.work}/s{seed}.loom"):
                os.remove(path) if os.path.exists(path) else None
    mode = "training" if args.train else "gradients" if args.gradients else "forward"
    print(f"differential: {last - first} {args.precision} {mode} programs on {args.ranks} rank(s), "
          f"{failed} failed" + (f", {diverged} diverged (not compared)" if diverged else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
