#!/usr/bin/env python3
"""Differential fuzzing of the whole compiler: random valid scripts,
compiled (loomc), run on the CPU, against PyTorch in float64.

usage: differential.py --loomc LOOMC --work DIR --seeds A:B
                       [--gradients | --train] [--precision f32|bf16|f16]
                       [--ranks N] [--shard] [--stages S] [--mpirun CMD] [--gpu] [--resume]
                       [--batch] [--microbatches M] [--layers] [--moe]
                       [--scale-reference F] [--tile-dims]

Each seed builds one script (`model fuzz`): an expression tree of 1 to 4
levels over the language's ops (elementwise with broadcasting, matmuls in
the weight and batched forms, softmax along any axis, the causal
attention pattern, layernorm and rmsnorm, transpose, reshape, sum, mean,
max, concat, split, embedding by i32 ids) on odd shapes (1 to 65 a dim,
and 128 and 129: attention over two blocks of 64 and a row more),
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
reference (in gradient buckets of a random size: loomc's default, none
(`--grad-bucket-mb=0`), or a few hundred bytes, many buckets). --shard: a 2 x 2 mesh (axes a and b, 4 ranks), every leaf
split at random (each even dim whole or over an axis not yet used), which
the partitioner propagates through the program. --train: the script is built
with `loomc --train` and a random optimizer (SGD, SGD with momentum and
weight decay, Adam, AdamW), runs 3 steps (`train --steps 3`, `--save`),
and each param's update is compared with torch.optim's from the same
initial weights (weight decay on params of rank >= 2, as Loom's); a
training that diverges (in torch too) is counted, not compared. With
--resume it also runs 1 step saved (`--save`) and the rest resumed
(`--resume`), which must end with the uninterrupted run's checkpoint bit
for bit, and on several ranks resumed on one rank within the training's
tolerance.
--stages S (with --gradients or --train): `mesh m[pp = S]`, `pipeline
pp`, and the `let`s cut at random into S pipeline stages (`stage N {
... }`, the output in the last), run with a random schedule (not
interleaved, which needs microbatches) on S ranks. The three combine
as gpt.loom's mesh does: `mesh m[dp = N, pp = S, a = 2, b = 2]` on
N x S (x 4) ranks. --gpu:
each script is also built with `loomc --gpu` (sm_90a kernels, ptxas from
PATH), which must succeed too; its executable is not run. --precision bf16: inputs and params in bf16 (`precision bf16
accumulate f32`), the reference on the bf16-rounded inputs, with bf16's
tolerance; --precision f16 the same in f16 (with bf16's tolerance too).

--layers: the tree may also hold `h = NAME(h)` loops (`for i in 0..N`, 1
to 3 instances, each with its own params `NAME.i.w*`; `recompute` at
random in gradient programs) of a layer whose body is a random expression
of its argument and params. --moe: also MoE blocks (2 to 4 experts, top 1
or 2, capacity factors 0.5 to 2, so that some choices drop; `aux_loss`
and `z_loss` at random when trained), whose reference routes by
docs/moe.md's rules in PyTorch, builds each expert's [capacity, D] tile
and runs the body on it; a seed whose routing in float64 has two router
probabilities within f32's rounding (1e-5 relative; 16-bit: 0.1) is not
compared, nor, with gradients, one with a max whose two largest differ by
less than that without being equal. --batch: a batch-structured program: the output's dim 0 is
`dim B` and no op mixes rows (softmax, norms, reductions, concat, split,
transpose on other dims only), the leaves with the batch are inputs
`[B, ...]` (split over dp by rows with --ranks), the others params (read
back from --save-weights, as the layers' and experts' are).
--microbatches M (implies --batch): the train section's `microbatches
M`, so the step (a mean of M microbatch steps) must equal the whole
batch's; with --stages and neither --gradients nor --train, the forward
is built with `loomc --microbatches M` and pipelined. A program without
params must fail `loomc --train` with `nothing to train`.
--mix-rows (with --microbatches): some ops of batched values mix the
batch's rows (softmax over dim 0, a row's value less or times the
batch's mean or sum over dim 0). loomc must refuse such a program
(`each row of the batch must be computed on its own`) or build one whose
step still equals the whole batch's; it must not refuse the others.

Tolerance per element: |got - ref| <= RTOL (|ref| + rms(ref)) + ATOL
(gradients 2 RTOL): for f32 RTOL 2e-5, ATOL 1e-6 (the reference is exact;
sums reorder, exp and tanh are approximated, and the programs chain up to
four ops: seeds 0-300 of forward programs pass at 1e-5; it had been 1e-3,
under which a reference 0.09% off, an f32 value rounded to f16, passed); for bf16 RTOL 0.1, ATOL 1e-4, a check for gross errors only:
every op rounds to 8 bits, and a softmax of rounded inputs of size 6
(a sum of 33 products) is already 7% off. A gradient also has ATOL 1e-2
(f32: 1e-5) of the rms of all the gradients, as one that cancels exactly
(a shift under a softmax) is rounding noise of that size; in 16-bit
programs a gradient element also has 4 times its measured rounding noise
(rounding_noise: how far it moves when every value the reference makes,
and every gradient reaching one, is off by one 16-bit rounding; a few
percent of the tolerance on most elements, but the whole error of one
that cancels), and so does an output element where the plain tolerance
fails (forward_noise: an ill-conditioned chain). In 16-bit
programs 1% of an output's or a gradient's elements may be over, and a
program whose reference softmaxes (a cross-entropy loss's too) see a row
spread past 16 (a bf16 score there is off by up to 1/16, its exponential by
6%) is not compared, nor one
whose exact f16 gradient is past f16's largest value (inf there). Of trained
params 1% of the elements may be over, and at least one (Adam turns the
rounding noise of a gradient near 0 into a whole step; on small params a
few more fail; 16-bit, and f32 under Adam: one whose gradient was within
its rounding noise at some step may be off by twice the steps' learning
rates, as Adam gives noise a whole step of no telling sign: 1.3% of the
elements of 40 bf16 layer trainings, and in f32 a gradient that is exactly
0, as a layernorm's input shifted along its normalized dim), and in f32
under Adam 5% (an element whose gradient is
small next to its param's others carries f32's error relative to those
into a whole step; at least one element, a one-element param's gradient
that cancels to 0 included); in f32 each element may also be off by 4
times how far torch's own f32 training ends from the f64 one. A training
in which a step is skipped (16-bit overflow under loss scaling), an f16 one
whose reference gradient passes f16's largest value, or one whose reference
loss grows more than 10^4-fold, is not compared. Prints one line per failing seed
(COMPILE, RUN, SHAPE or WRONG, with the worst element) and a summary
line that counts the seeds not compared by reason (so that a campaign sees
when one reason starts to swallow seeds); exits 1 if any seed failed. The scripts of failing seeds stay in
DIR. --scale-reference F multiplies the reference by F (the test that
the comparison catches a 1% error).
"""
import argparse
import collections
import json
import math
import os
import random
import shlex
import struct
import subprocess
import sys

import numpy as np
import torch
import torch.nn.functional as F
from torch.overrides import TorchFunctionMode

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "Numerics"))
from reference import read_safetensors, round_to  # noqa: E402

torch.set_default_dtype(torch.float64)

# (128 and 129: two attention blocks of 64 exactly, and a third of one row.)
DIMS = [1, 2, 3, 5, 7, 8, 13, 16, 17, 31, 33, 64, 65, 128, 129]
# With --tile-dims: only multiples of 16, so that most matmuls fill AMX
# tiles (m and n multiples of 16, k of 32), which the odd DIMS give about
# one matmul in 200.
TILE_DIMS = [16, 32, 48, 64, 96, 128]
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
# In 16-bit programs log's argument stays away from 1: x * x + 1 rounds to
# 1 once x * x is under half of 16-bit's spacing at 1 (2^-8 in bf16), and
# the log of it is then 0, all of the value lost (seed 83005 of a bf16
# campaign: log(softmax(x)^2 + 1), 22% of the elements 0 against up to
# 0.004). That is the 16-bit program's meaning, not an error to find.
UNARY_16BIT = dict(UNARY, log=("log({0} * {0} + 2)", lambda x: torch.log(x * x + 2)))
# Bounded like tanh, and drawn in its place from a stream of their own
# (Program.trig_rng), so that the main stream, and with it the program of
# every seed without a tanh, is what it was before they came.
TRIG = {"sin": ("sin({})", torch.sin), "cos": ("cos({})", torch.cos)}
# Half the programs take sigmoid wherever they would take tanh (or sin or
# cos in its place), decided per program by a stream of its own
# (Program.sigmoid_for_tanh; at an offset where none of the 5 regression
# seeds of the tests whose programs have one is chosen: their programs
# stay).
SIGMOID = {"sigmoid": ("sigmoid({})", torch.sigmoid)}
# maximum, minimum (of a binary op's operands), abs (in relu's place) and
# erf (in tanh's), drawn with --selection from a stream of their own
# (Program.select_rng; the other campaigns' programs, and the counts their
# tests expect, stay) in f32 programs only: the gradients of the first three jump where the
# operands cross (or x crosses 0), so two operands a 16-bit rounding apart
# tie in the program and not in the float64 reference, and a gradient
# differs by half. In f32 torch's rules meet Loom's documented ones: a tie
# shares the gradient evenly (an exact one, such as two relus at 0), abs'
# gradient at 0 is 0.
SELECTION = {"maximum": torch.maximum, "minimum": torch.minimum}
ABS = {"abs": ("abs({})", torch.abs)}
# erf, bounded as tanh, in tanh's place from the same stream.
ERF = {"erf": ("erf({})", torch.erf)}


# The largest spread of a softmax row's inputs in the reference evaluations
# since the last reset (16-bit programs past MOST_SOFTMAX_SPREAD are
# ill-conditioned: not compared).
softmax_spread = [0.0]


def softmax(values, x, axis):
    """torch's softmax, noting the spread of its rows' inputs."""
    finite = x.detach().masked_fill(~torch.isfinite(x.detach()), 0)
    if finite.numel():
        spread = float((finite.amax(axis) - finite.amin(axis)).max())
        softmax_spread[0] = max(softmax_spread[0], spread)
    return torch.softmax(x, dim=axis)


class FusedAttention(torch.autograd.Function):
    """softmax(scores) @ value with loom.attention_grad's backward: the
    softmax gradient's row sums taken as FlashAttention-2 takes them,
    rowsum(dO * O) from the result O, not rowsum(dp * p). Equal in exact
    arithmetic; but under Rounding the result's own rounding reaches them,
    so a row whose softmax is one-hot (a causal sequence's first) gets a
    query gradient of rounding noise, as Loom's does, where rowsum(dp * p)
    would cancel to exactly 0."""

    @staticmethod
    def forward(ctx, values, scores, value):
        p = softmax(values, scores, -1)
        out = p @ value
        ctx.save_for_backward(p, value, out)
        return out

    @staticmethod
    def backward(ctx, grad):
        p, value, out = ctx.saved_tensors
        dp = grad @ torch.transpose(value, -1, -2)
        dot = torch.sum(grad * out, dim=-1, keepdim=True)
        return None, p * (dp - dot), torch.transpose(p, -1, -2) @ grad


# A bf16 score near 16 is off by up to 1/16 (its 8 bits), which moves its
# exponential by 6%, and a peaked row's gradient by more than 16-bit
# tolerance allows.
MOST_SOFTMAX_SPREAD = 16.0


# f32 routing decisions closer than this (relative) are not compared: f32's
# rounding may take either (16-bit ones: the rule in Program.moe's route).
F32_ROUTE_MARGIN = 1e-5


class Ambiguous(Exception):
    """The reference cannot tell what Loom computes: an MoE routing decision
    closer than f32's rounding (the seed is not compared)."""
    reason = "an MoE routing within rounding"


class AmbiguousMax(Ambiguous):
    """A max whose two largest differ by less than f32's rounding, under
    gradients: which one gets the gradient is f32's choice."""
    reason = "a max's two largest within rounding"


class Program:
    """One random script: its leaves (inputs or params), integer inputs,
    `let` bindings, layers and MoE blocks, and output.

    With `batch` (the batch size B), the output's dim 0 is the batch and
    every op keeps the batch rows apart (no reduction, softmax, concat or
    transpose across dim 0): the leaves whose dim 0 is the batch are the
    model's inputs (declared `[B, ...]`), the others params. Such a program
    can run in microbatches and be split over dp by rows."""

    def __init__(self, rng, gradients, precision="f32", batch=None, layers=False, moe=False,
                 microbatches=1):
        self.rng = rng
        self.trig_rng = None  # build() seeds it
        self.select_rng = None  # and this one (f32 programs only)
        self.sigmoid_for_tanh = False  # and sets it
        self.gradients = gradients
        self.precision = precision
        self.batch = batch
        self.allow_layers = layers
        # MoE routes the tokens of one microbatch: not the whole batch's step.
        self.allow_moe = moe and microbatches == 1
        self.mix_rows = False  # --mix-rows: ops that mix the batch's rows too
        self.mixed = False  # whether one was made
        self.leaves = {}  # name -> shape
        self.data = set()  # leaves that are batched inputs
        self.ids = {}  # name -> (shape, bound, batched): integer inputs
        self.lets = []  # (name, text, evaluate or None, raw statement?)
        self.blocks = []  # the text of the layer and moe definitions
        self.block_params = {}  # a layer's or expert's params, by their model names
        self.count = 0
        self.moe_axis, self.moe_ways = "ep", 1  # the experts' mesh axis and its ranks

    def is_input(self, name):
        """Whether leaf `name` is a model input (else a param)."""
        return name in self.data or (not self.gradients and self.batch is None)

    def params(self):
        """Every float param: name -> shape."""
        found = {name: s for name, s in self.leaves.items() if not self.is_input(name)}
        found.update(self.block_params)
        return found

    def shape_text(self, shape, batched):
        dims = [str(d) for d in shape]
        if batched:
            dims[0] = "B"
        return f"[{', '.join(dims)}]"

    def index_leaf(self, shape, bound, batched):
        """An i32 input of `shape` with ids in [0, bound) (an embedding's)."""
        name = f"i{len(self.ids)}"
        self.ids[name] = (tuple(shape), bound, batched)
        return name

    def leaf(self, shape, batched=False):
        name = f"x{len(self.leaves)}"
        self.leaves[name] = tuple(shape)
        if batched:
            self.data.add(name)
        return name

    def bind(self, text, evaluate):
        name = f"t{self.count}"
        self.count += 1
        self.lets.append((name, text, evaluate, False))
        return name

    def kinds(self, shape, batched):
        kinds = ["unary", "binary", "broadcast", "matmul", "matmul", "softmax", "norm",
                 "transpose", "reshape", "reduce", "concat", "split"]
        if len(shape) == 3:
            kinds.append("batched")
        if len(shape) in (2, 3) and not (batched and len(shape) == 2):
            kinds.append("attention")
        # (Its ids are an input: in a batched program, the batch's.)
        if len(shape) >= 2 and (batched or self.batch is None):
            kinds.append("embedding")
        if self.allow_layers:
            kinds += ["layer", "layer"]
        if self.allow_moe and not (batched and len(shape) == 1):
            kinds += ["moe", "moe"]
        if self.mix_rows and batched:
            kinds.append("mix")
        return kinds

    def axis(self, shape, batched):
        """An axis of `shape` to work along: never the batch's."""
        return self.rng.randrange(1 if batched else 0, len(shape))

    def expr(self, shape, depth, batched=False):
        """The name of a value of `shape` built from `depth` levels of ops
        (`batched`: its dim 0 is the batch)."""
        r = self.rng
        if depth <= 0 or r.random() < 0.15 or not shape or np.prod(shape) > MOST_ELEMENTS:
            return self.leaf(shape, batched)
        kind = r.choice(self.kinds(shape, batched))
        sub = depth - 1
        if kind == "unary":
            a = self.expr(shape, sub, batched)
            unary = UNARY if self.precision == "f32" else UNARY_16BIT
            name = r.choice(sorted(unary))
            if name == "tanh" and self.sigmoid_for_tanh:
                name = "sigmoid"
            elif name == "tanh" and self.select_rng and self.select_rng.random() < 0.5:
                name = "erf"
            elif name == "tanh" and self.trig_rng and self.trig_rng.random() < 2 / 3:
                name = self.trig_rng.choice(sorted(TRIG))
            elif name == "relu" and self.select_rng and self.select_rng.random() < 0.5:
                name = "abs"
            text, fn = {**unary, **TRIG, **SIGMOID, **ABS, **ERF}[name]
            return self.bind(text.format(a), lambda v, a=a, fn=fn: fn(v[a]))
        if kind in ("binary", "broadcast"):
            a = self.expr(shape, sub, batched)
            other, other_batched = list(shape), batched
            if kind == "broadcast":  # fewer leading dims, some of size 1
                start = r.randint(0, len(shape) - 1)
                other = [1 if r.random() < 0.4 else d for d in shape[start:]]
                if batched and start == 0 and not self.batch_leaves_free():
                    other[0] = 1  # a body makes its batched values from its argument alone
                other_batched = batched and start == 0 and other[0] != 1
            b = self.expr(tuple(other), sub, other_batched)
            op = r.choice("+-*/")
            if op in "+-" and self.select_rng and self.select_rng.random() < 0.5:
                name = self.select_rng.choice(sorted(SELECTION))
                return self.bind(f"{name}({a}, {b})",
                                 lambda v, a=a, b=b, fn=SELECTION[name]: fn(v[a], v[b]))
            if op == "/":
                return self.bind(f"{a} / ({b} * {b} + 1)", lambda v, a=a, b=b: v[a] / (v[b] ** 2 + 1))
            fn = {"+": torch.add, "-": torch.sub, "*": torch.mul}[op]
            return self.bind(f"{a} {op} {b}", lambda v, a=a, b=b, fn=fn: fn(v[a], v[b]))
        if kind == "matmul" and len(shape) >= 2:  # the weight form
            k = r.choice(DIMS)
            a, b = self.expr(shape[:-1] + (k,), sub, batched), self.expr((k, shape[-1]), sub)
            return self.bind(f"{a} @ {b}", lambda v, a=a, b=b: v[a] @ v[b])
        if kind == "batched":
            k = r.choice(DIMS)
            a = self.expr(shape[:-1] + (k,), sub, batched)
            if r.random() < 0.5:
                b = self.expr((shape[0], k, shape[-1]), sub, batched)
                return self.bind(f"{a} @ {b}", lambda v, a=a, b=b: v[a] @ v[b])
            b = self.expr((shape[0], shape[-1], k), sub, batched)
            return self.bind(f"{a} @ transpose({b})",
                             lambda v, a=a, b=b: v[a] @ torch.transpose(v[b], -1, -2))
        if kind == "mix":  # rows of the batch mixed over dim 0 (--mix-rows)
            self.mixed = True
            a = self.expr(shape, sub, batched)
            how = r.choice(["softmax", "mean", "sum"])
            if how == "softmax":
                return self.bind(f"softmax({a}, axis = 0)", lambda v, a=a: softmax(v, v[a], 0))
            if how == "mean":
                return self.bind(f"{a} - mean({a}, axis = 0, keepdim = 1)",
                                 lambda v, a=a: v[a] - v[a].mean(0, keepdim=True))
            return self.bind(f"{a} * sum({a}, axis = 0, keepdim = 1)",
                             lambda v, a=a: v[a] * v[a].sum(0, keepdim=True))
        if kind == "softmax" and not (batched and len(shape) == 1):
            a = self.expr(shape, sub, batched)
            axis = self.axis(shape, batched) - (len(shape) if r.random() < 0.5 else 0)
            text = f"softmax({a})" if axis == -1 else f"softmax({a}, axis = {axis})"
            return self.bind(text, lambda v, a=a, axis=axis: softmax(v, v[a], axis))
        if kind == "norm" and shape[-1] >= 2 and not (batched and len(shape) == 1):
            a, scale = self.expr(shape, sub, batched), self.leaf((shape[-1],))
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
            if batched:  # the batch stays first
                rest = perm[1:]
                r.shuffle(rest)
                perm = [0] + rest
            else:
                r.shuffle(perm)
            source = [0] * len(shape)  # result dim i is source dim perm[i]
            for i, p in enumerate(perm):
                source[p] = shape[i]
            a = self.expr(tuple(source), sub, batched)
            return self.bind(f"transpose({a}, {perm})", lambda v, a=a, p=perm: v[a].permute(*p))
        if kind == "reshape" and not (batched and len(shape) == 1):
            lead = shape[:1] if batched else ()
            total = int(np.prod(shape[len(lead):]))
            factorings = [(total,)] + [(d, total // d) for d in range(1, total + 1) if total % d == 0][:6]
            a = self.expr(lead + r.choice(factorings), sub, batched)
            return self.bind(f"reshape({a}, {self.shape_text(shape, batched)})",
                             lambda v, a=a, s=shape: v[a].reshape(s))
        if kind == "reduce" and len(shape) <= 3:
            axis = r.randrange(1 if batched else 0, len(shape) + 1)
            a = self.expr(shape[:axis] + (r.choice(DIMS),) + shape[axis:], sub, batched)
            # max's gradient goes to its ties: 16-bit rounding makes ties f64 does not have.
            what = r.choice(["sum", "mean"] + (["max"] if self.precision == "f32" or not self.gradients else []))
            fn = {"sum": lambda x, d: x.sum(d), "mean": lambda x, d: x.mean(d),
                  "max": self.amax}[what]
            return self.bind(f"{what}({a}, axis = {axis})", lambda v, a=a, d=axis, fn=fn: fn(v[a], d))
        if kind == "concat" and not (batched and len(shape) == 1):
            axis = self.axis(shape, batched)
            if shape[axis] >= 2:
                cut = r.randint(1, shape[axis] - 1)
                a = self.expr(shape[:axis] + (cut,) + shape[axis + 1:], sub, batched)
                b = self.expr(shape[:axis] + (shape[axis] - cut,) + shape[axis + 1:], sub, batched)
                return self.bind(f"concat({a}, {b}, axis = {axis})",
                                 lambda v, a=a, b=b, d=axis: torch.cat([v[a], v[b]], dim=d))
        if kind == "split" and not (batched and len(shape) == 1):
            axis, parts = self.axis(shape, batched), r.choice([2, 3])
            a = self.expr(shape[:axis] + (shape[axis] * parts,) + shape[axis + 1:], sub, batched)
            pieces = [f"s{self.count}_{i}" for i in range(parts)]
            self.count += 1
            self.lets.append((", ".join(pieces), f"split({a}, {parts}, axis = {axis})", None, False))
            which = r.randrange(parts)
            return self.bind(pieces[which], lambda v, a=a, d=axis, n=parts, i=which:
                             torch.chunk(v[a], n, dim=d)[i])
        if kind == "embedding":  # rows of a table, by ids (repeated ids sum their gradients)
            rows = r.choice(DIMS)
            table, ids = self.expr((rows, shape[-1]), sub), self.index_leaf(shape[:-1], rows, batched)
            return self.bind(f"embedding({table}, {ids})", lambda v, t=table, i=ids: v[t][v[i]])
        if kind == "attention":  # the pattern loom-fuse-attention fuses
            q, k, val = self.expr(shape, sub, batched), self.leaf(shape, batched), self.leaf(shape, batched)
            scale = 1 / math.sqrt(shape[-1])

            def attention(v, q=q, k=k, val=val, s=scale):
                scores = v[q] @ torch.transpose(v[k], -1, -2) * s
                t = scores.shape[-1]
                above = torch.triu(torch.ones(t, t, dtype=torch.bool), 1)
                return FusedAttention.apply(v, scores.masked_fill(above, -math.inf), v[val])
            return self.bind(f"softmax(causal_mask({q} @ transpose({k}) * {scale!r})) @ {val}",
                             attention)
        if kind == "layer":
            return self.layer(shape, sub, batched)
        if kind == "moe":
            return self.moe(shape, sub, batched)
        return self.leaf(shape, batched)

    def batch_leaves_free(self):
        """Whether a batched leaf of any shape can be made (not in a body)."""
        return True

    def layer(self, shape, depth, batched):
        """`h = NAME(h)` in a loop of 1 to 3 instances (some recomputed): a
        layer whose body is a random expression of its argument and its own
        params, of the argument's shape."""
        r = self.rng
        name = f"f{len(self.blocks)}"
        body = Body(self, shape, batched, moe=False)
        result = body.expr(shape, max(depth, 1), batched)
        if not body.used:
            result = body.bind(f"{body.arg} + {result}", lambda v, a=body.arg, b=result: v[a] + v[b])
        self.blocks.append(body.text(f"layer {name}({body.arg})", result))
        count = r.randint(1, 3)
        for i in range(count):
            self.block_params.update({f"{name}.{i}.{p}": s for p, s in body.leaves.items()})
        start = self.expr(shape, depth, batched)
        h = f"h{self.count}"
        self.count += 1
        call = f"recompute {name}({h})" if self.gradients and r.random() < 0.5 else f"{name}({h})"

        def loop(v, h=h, start=start, body=body, name=name, result=result, count=count):
            value = v[start]
            for i in range(count):
                inner = {body.arg: value}
                inner.update({p: v[f"{name}.{i}.{p}"] for p in body.leaves})
                value = evaluate(body, result, inner)
            return value
        self.lets.append((h, f"let {h} = {start}\nfor i in 0..{count} {{\n  {h} = {call}\n}}", loop, True))
        return h

    def moe(self, shape, depth, batched):
        """NAME(x) of an MoE block with 2 to 4 experts, top 1 or 2, a random
        capacity factor (some choices dropped), and in a trained program at
        random the load-balancing and z losses: each token's result is its
        experts' body on their token tiles, weighted by the router."""
        r = self.rng
        features = r.choice(DIMS[1:])
        x = self.expr(shape[:-1] + (features,), depth, batched)
        name = f"e{len(self.blocks)}"  # (after x's, which may hold blocks)
        tokens = int(np.prod(shape[:-1]))
        # The experts split over the expert axis's ranks.
        experts = self.moe_ways * r.choice([1, 2]) if self.moe_ways > 1 else r.choice([2, 3, 4])
        top_k = r.choice([1, 2])
        factor = r.choice([0.5, 1.0, 1.25, 2.0])
        capacity = max(1, math.ceil(factor * top_k * tokens / experts))
        body = Body(self, (capacity, features), True, moe=True)
        result = body.expr((capacity, shape[-1]), max(depth, 1), True)
        options = f"experts = {experts}, top_k = {top_k}, capacity = {factor}, axis = {self.moe_axis}"
        aux = z = 0.0
        if self.gradients:
            aux, z = r.choice([0.0, 0.0, 0.1]), r.choice([0.0, 0.0, 0.01])
            options += (f", aux_loss = {aux}" if aux else "") + (f", z_loss = {z}" if z else "")
        self.blocks.append(body.text(f"moe {name}({body.arg}) {options}", result))
        self.block_params[f"{name}.0.router"] = (features, experts)
        self.block_params.update({f"{name}.0.{p}": (experts,) + s for p, s in body.leaves.items()})

        def route(v, x=x, name=name, body=body, result=result, experts=experts, top_k=top_k,
                  capacity=capacity, aux=aux, z=z, features=features):
            rows = v[x].reshape(-1, features)
            logits = rows @ v[f"{name}.0.router"]
            probs = torch.softmax(logits, -1)
            order = torch.argsort(-probs.detach(), dim=1, stable=True)
            ordered = torch.gather(probs.detach(), 1, order)
            gaps = ordered[:, :-1] - ordered[:, 1:]
            if self.precision == "f32":
                if (gaps[:, :top_k] < F32_ROUTE_MARGIN * ordered[:, :1]).any():
                    raise Ambiguous(f"{name}: two router probabilities within f32 rounding")
            else:
                # A 16-bit program's router logit is off by a few roundings
                # of its terms (its tokens are 16-bit values, each a
                # rounding or more away from the exact ones): a choice whose
                # logits are closer than 8 such roundings of the largest
                # terms may go either way. (Measured on 200 seeds of f16
                # and bf16 MoE: 4 roundings never flipped one; a flat 10% of
                # the probability, before, excluded 19 and 29 of 100 seeds;
                # 8 roundings exclude 3-5 and about 15 in campaigns.)
                terms = (rows.detach().abs() @ v[f"{name}.0.router"].detach().abs()).max(1).values
                logit_gaps = torch.gather(logits.detach(), 1, order)
                logit_gaps = logit_gaps[:, :-1] - logit_gaps[:, 1:]
                if (logit_gaps[:, :top_k] < 8 * UNIT_ROUNDOFF[self.precision] * terms[:, None]).any():
                    raise Ambiguous(f"{name}: two router logits within 16-bit rounding of their terms")
            choice = order[:, :top_k]
            gates = torch.gather(probs, 1, choice)
            if top_k > 1:
                gates = gates / gates.sum(1, keepdim=True)
            fill, slot = [0] * experts, {}
            for k in range(top_k):  # first choices first, each in token order
                for n in range(rows.shape[0]):
                    e = int(choice[n, k])
                    if fill[e] < capacity:
                        slot[n, k] = (e, fill[e])
                        fill[e] += 1
            outputs = []
            for e in range(experts):
                members = [(n, s) for (n, k), (expert, s) in slot.items() if expert == e]
                tile = torch.zeros(capacity, features)
                if members:
                    tile = tile.index_put((torch.tensor([s for _, s in members]),),
                                          rows[[n for n, _ in members]])
                inner = {body.arg: tile}
                inner.update({p: v[f"{name}.0.{p}"][e] for p in body.leaves})
                outputs.append(evaluate(body, result, inner))
            y = []
            for n in range(rows.shape[0]):
                terms = [gates[n, k] * outputs[slot[n, k][0]][slot[n, k][1]]
                         for k in range(top_k) if (n, k) in slot]
                y.append(sum(terms) if terms else torch.zeros(outputs[0].shape[-1]))
            extra = v.setdefault("__loss_terms", [])
            if aux:  # Switch: E * sum_e f_e P_e, f_e of the first choices
                first = torch.bincount(choice[:, 0], minlength=experts).double() / rows.shape[0]
                extra.append(aux * experts * (first * probs.mean(0)).sum())
            if z:
                extra.append(z * (torch.logsumexp(logits, -1) ** 2).mean())
            return torch.stack(y).reshape(shape)
        return self.bind(f"{name}({x})", route)


    def amax(self, x, axis):
        """max along `axis`; with gradients, not compared where the largest
        two of a slice differ by less than f32's rounding (F32_ROUTE_MARGIN
        of the slice's largest magnitude) without being equal: f32 may pick
        either, and the gradient goes to the one it picks (seed 933058: a
        max over a layernorm of 2 features, whose rows are +-c_i x2 + x3
        with c_i 1 - eps / 2 d_i^2, all but equal)."""
        if self.gradients and x.shape[axis] >= 2:
            top = x.detach().topk(2, dim=axis).values
            gap = top.select(axis, 0) - top.select(axis, 1)
            scale = x.detach().abs().amax(axis)
            if ((gap > 0) & (gap < F32_ROUTE_MARGIN * scale)).any():
                raise AmbiguousMax("max: its two largest within f32 rounding")
        return x.amax(axis)


class Body(Program):
    """A layer's or an expert's body: an expression of the argument `a`
    (of `shape`) and the body's own params. With `batched` (always for an
    expert's token tile) dim 0 of the argument is its rows, which only
    row-wise ops touch; the body's other row-indexed values are the
    argument's rows times a param."""

    def __init__(self, parent, shape, batched, moe):
        super().__init__(parent.rng, parent.gradients, parent.precision)
        self.trig_rng = parent.trig_rng
        self.select_rng = parent.select_rng
        self.sigmoid_for_tanh = parent.sigmoid_for_tanh
        self.arg, self.arg_shape, self.batched_arg, self.in_moe = "a", tuple(shape), batched, moe
        self.used = False

    def is_input(self, name):
        return False

    def kinds(self, shape, batched):
        if self.in_moe:  # what loom-expand-moe supports in an expert body
            return ["unary", "binary", "broadcast", "matmul", "matmul", "softmax", "concat", "split"]
        kinds = ["unary", "binary", "broadcast", "matmul", "matmul", "softmax", "norm", "concat", "split"]
        if len(shape) == 3:
            kinds.append("attention")
        if not self.batched_arg:
            kinds += ["transpose", "reshape", "reduce"] + (["batched"] if len(shape) == 3 else [])
        return kinds

    def axis(self, shape, batched):
        return len(shape) - 1 if batched else super().axis(shape, batched)

    def batch_leaves_free(self):
        return False

    def leaf(self, shape, batched=False):
        if tuple(shape) == self.arg_shape and (batched or self.rng.random() < 0.5):
            self.used = True
            return self.arg
        if batched:  # rows of the argument, times a param
            assert tuple(shape[:-1]) == self.arg_shape[:-1], (shape, self.arg_shape)
            self.used = True
            w = self.param((self.arg_shape[-1], shape[-1]))
            return self.bind(f"{self.arg} @ {w}", lambda v, a=self.arg, w=w: v[a] @ v[w])
        return self.param(shape)

    def param(self, shape):
        name = f"w{len(self.leaves)}"
        self.leaves[name] = tuple(shape)
        return name

    def text(self, header, result):
        dtype = "f32" if self.precision == "f32" else ""
        lines = [header + " {"]
        lines += [f"  param {p} : {dtype}{list(s)} init normal(0.5)" for p, s in self.leaves.items()]
        lines += [f"  let {name} = {text}" for name, text, _, _ in self.lets]
        lines.append(f"  return {result}")
        return "\n".join(lines) + "\n}"


class Loss:
    """The loss of a gradient or training program: `mse(y, target)`, or,
    for a y of rank >= 2 at random, `cross_entropy(y, labels)` (y's last
    dim the classes)."""

    def __init__(self, seed, shape, batched):
        self.shape = shape
        self.batched = batched
        self.entropy = len(shape) >= 2 and random.Random(seed + 5 * 10**6).random() < 0.3
        self.name = "labels" if self.entropy else "target"
        self.seed = seed

    def declaration(self, program, split):
        if self.entropy:
            return f"  input labels : i32{program.shape_text(self.shape[:-1], self.batched)}{split}"
        return f"  input target : f32{program.shape_text(self.shape, self.batched)}{split}"

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

    def of(self, y, terms=()):
        """The loss of torch's y (after write), plus the MoE blocks' `terms`."""
        if self.entropy:
            labels = torch.tensor(self.value.astype(np.int64)).reshape(-1)
            loss = F.cross_entropy(y.reshape(-1, self.shape[-1]), labels)
        else:
            loss = ((y - torch.tensor(self.value.astype(np.float64))) ** 2).mean()
        return loss + sum(terms)


def build(seed, args, gradients, optimizer=None, settings=()):
    """The seed's program, its output's name, its loss (gradients and
    training) and the script."""
    rng = random.Random(seed)
    stages, dp, shard = args.stages, args.dp, args.shard
    batch = None
    if args.batch:  # divided by the microbatches, and what each holds by dp
        batch = args.microbatches * dp * rng.choice([1, 2, 3])
    program = Program(rng, gradients, args.precision, batch, args.layers, args.moe, args.microbatches)
    program.mix_rows = args.mix_rows
    program.trig_rng = random.Random(seed + 9 * 10**6)
    if args.precision == "f32" and args.selection:
        program.select_rng = random.Random(seed + 17000011)
    program.sigmoid_for_tanh = random.Random(seed + 13000008).random() < 0.5
    # The mesh's axes in gpt.loom's order: dp, pp, then the shard axes.
    mesh = ([f"dp = {dp}"] if dp > 1 else []) + ([f"pp = {stages}"] if stages > 1 else []) + \
        (["a = 2", "b = 2"] if shard else [])
    if shard:  # the experts over a shard axis, else over dp, else one rank
        program.moe_axis, program.moe_ways = "a", 2
    elif dp > 1:
        program.moe_axis, program.moe_ways = "dp", dp
    elif args.moe:
        mesh.append("ep = 1")
    shape = tuple(rng.choice(DIMS) for _ in range(rng.choice([1, 2, 2, 3, 3])))
    if batch:
        shape = (batch,) + shape[1:]
    out = program.expr(shape, rng.randint(1, 4), batch is not None)
    dtype = "f32" if args.precision == "f32" else ""  # 16-bit: the policy's type
    lines = []
    if mesh:
        lines.append(f"mesh m[{', '.join(mesh)}]")
    if args.precision != "f32":
        lines.append(f"precision {args.precision} accumulate f32")
    if batch:
        lines.append(f"dim B = {batch}")
    lines += program.blocks
    lines.append("model fuzz {")

    def spec(shape, batched):
        """A batched leaf split by rows over dp; with --shard, each other
        dim whole or split over an axis (each axis once)."""
        axes, dims = (["a", "b"] if shard else []), []
        for index, d in enumerate(shape):
            if index == 0 and batched and (dp > 1 or args.microbatches > 1):
                dims.append("dp" if dp > 1 else "_")  # (a microbatch's rows may be odd)
                continue
            axis = rng.choice(axes + ["_", "_"]) if d % 2 == 0 and axes else "_"
            if axis != "_":
                axes.remove(axis)
            dims.append(axis)
        return f" shard [{', '.join(dims)}]" if set(dims) != {"_"} else ""
    for name, s in program.leaves.items():
        batched = name in program.data
        kind, init = ("input", "") if program.is_input(name) else ("param", " init normal(1.0)")
        lines.append(f"  {kind} {name} : {dtype}{program.shape_text(s, batched)}{spec(s, batched)}{init}")
    for name, (s, bound, batched) in program.ids.items():
        lines.append(f"  input {name} : i32{program.shape_text(s, batched)}{spec(s, batched)}")
    loss = Loss(seed, shape, batch is not None)
    if gradients:
        rank = len(shape) - (1 if loss.entropy else 0)
        split = (" shard [dp" + ", _" * (rank - 1) + "]"
                 if dp > 1 and shape[0] % dp == 0 else "")
        lines.append(loss.declaration(program, split))
    if stages > 1:
        lines.append("  pipeline pp")
    schedule = schedule_of(seed, args, optimizer is not None) if gradients else None
    if schedule == "interleaved":  # two virtual stages a rank, round-robin
        stages *= 2
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
        for names, text, _, raw in chunk:
            statement = text if raw else f"let {names} = {text}"
            lines += [indent + line for line in statement.split("\n")]
        if stages > 1 and number < stages - 1:
            lines.append("  }")
    # In the last stage (which makes the stages S, a multiple of the ranks).
    lines.append(f"{'    ' if stages > 1 else '  '}output y = {out} * 1")
    if stages > 1:
        lines.append("  }")
    if gradients:
        settings = ([f"optimizer {optimizer}"] if optimizer else []) + list(settings)
        if args.microbatches > 1:
            settings.append(f"microbatches {args.microbatches}")
        if schedule:
            settings.append(f"schedule {schedule}")
        lines.append("  train {\n" + "".join(f"    {x}\n" for x in [f"loss = {loss.text()}"] + settings) + "  }")
    lines.append("}")
    return program, out, loss, "\n".join(lines) + "\n"


def evaluate(program, out, values, terms=None):
    """`out` of `program` from the leaves' `values`; the MoE blocks' loss
    terms are appended to `terms`."""
    values = dict(values)
    for name, _, fn, _ in program.lets:
        if fn is not None:
            values[name] = fn(values)
    if terms is not None:
        terms += values.get("__loss_terms", [])
    return values[out]


class NotCompared(str):
    """Why a seed is not compared (the summary counts each reason)."""


def compared(program, out, values, args, loss=None):
    """The reference's `out` and MoE loss terms (evaluate), or NotCompared
    when the seed is not compared: an MoE routing within rounding, or a
    16-bit program's softmax of a row spread past MOST_SOFTMAX_SPREAD,
    `loss`'s cross-entropy included."""
    terms = []
    softmax_spread[0] = 0.0
    try:
        y = evaluate(program, out, values, terms)
    except Ambiguous as ambiguous:
        return NotCompared(ambiguous.reason)
    if loss is not None and loss.entropy:
        # (Seed 170052, bf16 Adam: logits near 1e4, 64 apart at bf16's
        # spacing there; rows whose top two were that close changed their
        # winner by rounding and took other steps.)
        softmax(None, y.detach().reshape(-1, y.shape[-1]), -1)
    if args.precision != "f32" and softmax_spread[0] > MOST_SOFTMAX_SPREAD:
        return NotCompared(f"a 16-bit softmax of spread > {MOST_SOFTMAX_SPREAD:g}")
    return y, terms


# f16's largest finite value.
F16_MAX = 65504.0

# One rounding of each precision (its unit roundoff): bf16 keeps 8
# significant bits, f16 11, f32 24.
UNIT_ROUNDOFF = {"bf16": 2.0 ** -8, "f16": 2.0 ** -11, "f32": 2.0 ** -24}
# (3 underestimated a bf16 chain's: seed 340558, two layers of
# a / ((t2 @ t3)^2 + 1), whose gradients bf16's forward roundings move by
# 7%; 10 trials see it.)
NOISE_TRIALS = 10
# torch's own f32 trainings whose distance from the f64 one bounds an f32
# training's (check_training).
DRIFT_TRIALS = 4


class Rounding(TorchFunctionMode):
    """Every float tensor a torch function makes while active, and the
    gradient that reaches it in the backward, times 1 + u, |u| <= `unit`
    (uniform, from `generator`): one rounding of each, as Loom's 16-bit
    forward and backward round the values each of their ops makes. (Inside
    the handler the mode is off: its own ops are not rounded.)"""

    def __init__(self, generator, unit):
        super().__init__()
        self.generator, self.unit = generator, unit

    def factor(self, x):
        u = torch.rand(x.shape, generator=self.generator, dtype=torch.float64) * 2 - 1
        return 1 + self.unit * u.to(x.dtype)

    def __torch_function__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        if not isinstance(out, torch.Tensor) or not out.is_floating_point():
            return out
        out = out * self.factor(out)
        if out.requires_grad:
            off = self.factor(out)
            out.register_hook(lambda grad: grad * off)
        return out


def rounding_noise(program, out, leaves, params, loss, args, seed, refs):
    """Per param, how far each gradient element moves when every value the
    reference makes, and the gradient reaching it, is off by one 16-bit
    rounding (Rounding; the largest move of NOISE_TRIALS evaluations). A
    gradient that cancels (a softmax's s * (g - sum(s g)) where its g are
    alike) is this noise in the program, of the size of the gradient that
    flows into the cancelling op, not of the reference's exact ~0, and not
    of the params' other gradients."""
    generator = torch.Generator().manual_seed(seed)
    noise = {name: np.zeros_like(ref) for name, ref in refs.items()}
    for _ in range(NOISE_TRIALS):
        terms = []
        try:
            with Rounding(generator, UNIT_ROUNDOFF[args.precision]):
                y = evaluate(program, out, leaves, terms)
                total = loss.of(y, terms)
        except Ambiguous:
            continue
        grads = torch.autograd.grad(total, [leaves[name] for name in params], allow_unused=True)
        for name, grad in zip(params, grads):
            if grad is not None:
                noise[name] = np.maximum(noise[name], np.abs(grad.numpy() - refs[name]))
    return noise


def forward_noise(program, out, leaves, args, seed, ref):
    """How far each element of the output moves when every value the
    reference makes is off by one 16-bit rounding (Rounding; the largest
    move of NOISE_TRIALS evaluations): an ill-conditioned chain (seed
    122050: three layers of `t / (u * u + 1)` with u near 0) moves an
    element by more than rtol times its size, and Loom's output is then
    the bf16 evaluation's, bit for bit."""
    generator = torch.Generator().manual_seed(seed + 1)
    moved = np.zeros_like(ref)
    for _ in range(NOISE_TRIALS):
        try:
            with Rounding(generator, UNIT_ROUNDOFF[args.precision]), torch.no_grad():
                y = evaluate(program, out, leaves, [])
        except Ambiguous:
            continue
        moved = np.maximum(moved, np.abs(y.detach().numpy() * args.scale_reference - ref))
    return moved


def tolerance(precision, scale=1):
    """(RTOL, ATOL) of a comparison (see above); RTOL times `scale`."""
    rtol, atol = (1e-1, 1e-4) if precision != "f32" else (2e-5, 1e-6)
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
    for name, (shape, bound, _) in program.ids.items():
        ids = rng.integers(0, bound, size=shape).astype(np.int32)
        np.save(f"{work}/{name}.npy", ids)
        arguments += ["--input", f"{name}={work}/{name}.npy"]
        values[name] = torch.tensor(ids.astype(np.int64))
    return arguments, values


def float_inputs(program, seed, args):
    """The program's float inputs (normal): --input arguments and their
    values, rounded to the precision as the executable reads them."""
    rng = np.random.default_rng(seed + 6 * 10**6)
    arguments, values = [], {}
    for name, shape in program.leaves.items():
        if program.is_input(name):
            x = rng.standard_normal(shape).astype(np.float32)
            np.save(f"{args.work}/{name}.npy", x)
            values[name] = round_to(x, args.precision)
            arguments += ["--input", f"{name}={args.work}/{name}.npy"]
    return arguments, values


def plan_problem(args, script, flags):
    """With --check-plans: what test/Driver/check_plan.py says is wrong
    with the plans loomc writes for the script ('' for nothing, or where
    loomc rejects the script: the build says why)."""
    emitted = subprocess.run([args.loomc, script, "--emit=plan"] + flags,
                             capture_output=True)
    if emitted.returncode != 0:
        return ""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../Driver"))
    import check_plan
    errors = [error for text, line in check_plan.split_plans(emitted.stdout)
              for error in check_plan.Plan(text, line).check_errors()]
    return f"PLAN: {'; '.join(errors[:3])}" if errors else ""


ROWS_REFUSED = "each row of the batch must be computed on its own"


def refused_rows(program, failed):
    """NotCompared where loomc refused a program that mixes the batch's
    rows (--mix-rows) for that reason; a row-wise one it must build."""
    if program.mixed and ROWS_REFUSED in failed:
        return NotCompared("refused: mixes the batch's rows")
    return None


def compile_script(args, seed, text, flags):
    """Writes the seed's script and builds it: its executable, and '' when
    loomc built it (and with --gpu also the one with sm_90a kernels, not
    run), else what loomc said."""
    script, exe = f"{args.work}/s{seed}.loom", f"{args.work}/s{seed}"
    with open(script, "w") as f:
        f.write(text)
    # The data-parallel gradient sums in buckets of a random size: the
    # default (every gradient of a small program in one), none, or a few
    # hundred bytes (many buckets, some closed early by a sum read inside
    # the backward).
    if "--gradients" in flags or "--train" in flags:
        bucket = random.Random(seed + 8 * 10**6).choice([None, 0, 0.0002, 0.001])
        if bucket is not None:
            flags = flags + [f"--grad-bucket-mb={bucket}"]
    if args.check_plans:
        problem = plan_problem(args, script, flags)
        if problem:
            return exe, problem
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


def launch(args, run, printed=None, ranks=None):
    """Runs the command line `run` (on `ranks`, by default the mesh's):
    '' when it succeeds, else what it said; its standard output is appended
    to `printed`."""
    ranks = ranks or args.ranks
    if ranks > 1:
        run = shlex.split(args.mpirun) + ["-np", str(ranks)] + run
    ran = subprocess.run(run, capture_output=True, text=True)
    if printed is not None:
        printed.append(ran.stdout)
    return f"RUN (exit {ran.returncode}): {ran.stderr.strip()[-600:]}" if ran.returncode else ""


def schedule_of(seed, args, training):
    """A pipelined program's schedule, at random (None: the default)."""
    if args.stages == 1:
        return None
    # Interleaved (the program cut into twice the ranks' stages) needs the
    # microbatches to be a multiple of the ranks, and a training step (a
    # gradient program runs the whole batch as one).
    interleaved = ["interleaved"] if training and args.microbatches % args.stages == 0 else []
    return random.Random(seed + 3 * 10**6).choice([None, "gpipe", "1f1b", "zero_bubble"] + interleaved)


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


def train_settings(seed, args, lr):
    """A training program's random train settings besides the optimizer:
    their lines, the clipping norm (or None) and the learning rate of each
    step from 1 (docs/runtime.md's formulas). Loss scaling, which changes
    nothing without an overflow (f16's static scale is small enough that
    none comes), and ZeRO-1 on dp ranks, which equals plain dp."""
    r = random.Random(seed + 7 * 10**6)
    settings, clip = [], r.choice([None, None, 0.5, 5.0])
    if clip:
        settings.append(f"clip_grad_norm = {clip}")
    scaling = r.choice(["none", "static(16)"] if args.precision == "f16" else
                       ["none", "none", "dynamic", "static(64)"])
    if scaling != "none":
        settings.append(f"loss_scale {scaling}")
    if args.dp > 1 and r.random() < 0.5:
        settings.append("zero 1")

    def learning_rate(step):
        return lr
    if r.random() < 0.4:  # over the section's `steps`, one more than run
        horizon, warmup, least = TRAIN_STEPS + 1, r.choice([0, 1, 2]), lr * r.choice([0.0, 0.1])
        # A quarter linear, drawn from a stream of its own (at an offset where
        # no regression seed of the tests draws it: their programs stay).
        linear = random.Random(seed + 11000373).random() < 0.25
        kind = "warmup_linear" if linear else "warmup_cosine"
        settings += [f"steps {horizon}", f"lr_schedule = {kind}(warmup = {warmup}, min_lr = {least})"]

        def learning_rate(step):
            if step <= warmup:
                return lr * step / warmup
            progress = min(1.0, (step - warmup) / (horizon - warmup))
            if linear:
                return least + (lr - least) * (1 - progress)
            return least + (lr - least) * (1 + math.cos(math.pi * progress)) / 2
    return settings, clip, learning_rate


def check_resume(args, exe, arguments):
    """'' when a run of 1 step saved (`--save`) and resumed for the rest
    (`--resume`) ends with the uninterrupted run's checkpoint bit for bit
    (params, optimizer state, loss scale and step; docs/runtime.md), and,
    on several ranks, resumed on one rank within the training's tolerance;
    else what differs."""
    work = args.work

    def resume_into(into, ranks=None):
        """The rest of the training resumed from the first step, saved into
        `into`: '' or what the run said."""
        return launch(args, [exe, "train", "--steps", str(TRAIN_STEPS), "--resume",
                             f"{work}/first.safetensors", "--save", f"{work}/{into}.safetensors"] +
                      arguments, ranks=ranks)
    if (failed := launch(args, [exe, "train", "--steps", "1", "--save", f"{work}/first.safetensors"] +
                         arguments)):
        return f"RESUME (the first step): {failed}"
    if (failed := resume_into("resumed")):
        return f"RESUME: {failed}"
    whole, resumed = (safetensors_entries(f"{work}/{name}.safetensors") for name in ("trained", "resumed"))
    if (differ := [name for name in whole if whole[name] != resumed.get(name)]):
        return f"RESUME: {', '.join(differ)} differ from the uninterrupted run's"
    if args.ranks == 1:
        return ""
    # On another mesh (one rank), within the training's tolerance: the
    # checkpoint holds whole tensors, which each plan splits its own way.
    if (failed := resume_into("single", ranks=1)):
        return f"RESUME on 1 rank: {failed}"
    mesh, single = weights(f"{work}/trained.safetensors"), weights(f"{work}/single.safetensors")
    most_over = 0.05 if args.precision == "f32" else 0.01
    problems = [f"{name}: {wrong}" for name in mesh
                if (wrong := compare(single[name].astype(np.float64), mesh[name].astype(np.float64),
                                     *tolerance(args.precision, 2), most_over))]
    return f"RESUME on 1 rank: {'; '.join(problems)}" if problems else ""


def safetensors_entries(path):
    """A .safetensors file's entries: each tensor's header and bytes, and
    the metadata, by name."""
    with open(path, "rb") as f:
        blob = f.read()
    (size,) = struct.unpack("<Q", blob[:8])
    header, data = json.loads(blob[8:8 + size]), blob[8 + size:]
    return {name: (info, b"" if name == "__metadata__" else data[slice(*info["data_offsets"])])
            for name, info in header.items()}


def check_training(seed, args):
    """'' when the trained params agree, NotCompared (with the reason) when
    the training diverges (torch's too), a step is skipped, or the
    reference cannot tell an MoE routing; else what went wrong. The params after TRAIN_STEPS steps of
    a random optimizer (`loomc --train`, `train --steps`) against
    torch.optim's from the same initial weights (weight decay on params of
    rank >= 2 only, as Loom's)."""
    optimizer, torch_optimizer, options = random.Random(seed + 10**6).choice(OPTIMIZERS)
    settings, clip, learning_rate = train_settings(seed, args, options["lr"])
    program, out, loss, text = build(seed, args, True, optimizer, settings)
    work = args.work
    exe, failed = compile_script(args, seed, text, ["--train"])
    if refused := refused_rows(program, failed):
        return refused
    if not program.params():  # (all its leaves batched inputs)
        return "" if "nothing to train: model 'fuzz' has no float param" in failed else \
            f"COMPILE: a model without params gave {failed or 'no error'!r}"
    if failed:
        return failed
    float_arguments, data = float_inputs(program, seed, args)
    id_arguments, ids = id_inputs(program, seed, work)
    printed = []
    if (failed := launch(args, [exe, "train", "--steps", str(TRAIN_STEPS)] + loss.write(work) +
                         float_arguments + id_arguments +
                         ["--seed", str(seed), "--save-weights", f"{work}/w.safetensors",
                          "--save", f"{work}/trained.safetensors"], printed)):
        return failed
    if "skipped (inf/nan gradients" in printed[0]:
        # Overflow under loss scaling (16-bit, or f32 at a dynamic scale of
        # 2^16) skips a step torch's f64 takes.
        return NotCompared("a step skipped on overflow under loss scaling")
    initial = weights(f"{work}/w.safetensors")
    trained = weights(f"{work}/trained.safetensors")
    params = {name: torch.tensor(initial[name].astype(np.float64), requires_grad=True)
              for name in program.params()}
    inputs = dict(params, **ids, **{name: torch.tensor(x.astype(np.float64)) for name, x in data.items()})
    decayed = [param for param in params.values() if param.dim() >= 2]
    plain = [param for param in params.values() if param.dim() < 2]
    groups = [{"params": decayed}, {"params": plain, "weight_decay": 0.0}]
    step = torch_optimizer([g for g in groups if g["params"]], **options)
    # 16-bit: the elements whose gradient, at some step, is within its
    # rounding noise (rounding_noise): Adam's step of such an element has
    # no sign the reference can tell.
    noisy = {name: np.zeros(tuple(param.shape), dtype=bool) for name, param in params.items()}
    losses = []
    for number in range(1, TRAIN_STEPS + 1):
        for group in step.param_groups:
            group["lr"] = learning_rate(number)
        # Not zeroed in place: two params whose gradients torch hands out as
        # views of one buffer (y = reshape(x0) + x1) would then accumulate
        # each other's (1.13's default, set_to_none=False).
        step.zero_grad(set_to_none=True)
        if isinstance(reference := compared(program, out, inputs, args, loss), NotCompared):
            return reference
        y, terms = reference
        value = loss.of(y, terms)
        losses.append(float(value))
        value.backward()
        for param in params.values():  # (the clipping scales each in place)
            if param.grad is not None:
                param.grad = param.grad.clone()
        # As in check: a gradient past f16's largest value is inf in the f16
        # program, which then steps its params to inf (seed 200520, SGD
        # without loss scaling: x2's step-3 gradient).
        if args.precision == "f16" and any(param.grad is not None and param.grad.abs().max() > F16_MAX
                                           for param in params.values()):
            return NotCompared("an f16 gradient past f16's range")
        # (f32 too under Adam: a gradient that is exactly 0, as a layernorm's
        # input shifted along the normalized dim, is f32 noise that Adam
        # also makes a step of about lr; seed 143003: 64 of 65 elements.)
        if args.precision != "f32" or torch_optimizer is not torch.optim.SGD:
            exact = {name: (np.zeros(tuple(param.shape)) if param.grad is None else
                            param.grad.numpy().copy()) for name, param in params.items()}
            moved = rounding_noise(program, out, inputs, list(params), loss, args,
                                   seed + number, exact)
            for name, grad in exact.items():
                noisy[name] |= np.abs(grad) < 4 * moved[name]
        if clip:
            torch.nn.utils.clip_grad_norm_(list(params.values()), clip)
        step.step()
    if not all(torch.isfinite(param).all() and param.abs().max() < 1e6 for param in params.values()):
        return NotCompared("diverged")  # in torch too: nothing to compare
    # Nor when its loss explodes: the gradients grow with it, and so does
    # f32's rounding noise in a gradient that is exactly 0 (seed 210271:
    # a softmax summed along its axis; loss 232 -> 5.6e9 in 3 SGD steps,
    # the 1- and 2-rank runs' noise stepping that param 0.46 apart).
    if max(losses) > 1e4 * max(losses[0], 1e-30):
        return NotCompared("a loss grown 10^4-fold")
    # f32: plus 4 times how far torch's own f32 training ends from the f64
    # one, element by element: steps amplify f32's error where the program
    # is ill-conditioned (seed 200781, Adam with eps 1e-3, through softmaxes
    # of scores spread ~50: torch's f32 params off by up to 14% of their
    # moves after 3 steps, Loom's by as much).
    # The largest of DRIFT_TRIALS such runs, all but the first from params
    # moved by up to one f32 rounding: one run's drift is one draw of a
    # chaotic amplification, and which it draws depends on the host's
    # summation orders (seed 200781 passed against torch on AMD Zen 4 and
    # failed on Sapphire Rapids, 213 of 429 elements over, at every Loom
    # target from x86-64-v3 up).
    drift = {name: 0.0 for name in params}
    if args.precision == "f32":
        perturbations = np.random.default_rng(seed + 17000023)
        for trial in range(DRIFT_TRIALS):
            start = initial if trial == 0 else {
                name: value * (1 + perturbations.uniform(-1, 1, np.shape(value)) * 2.0 ** -24)
                for name, value in initial.items()}
            single = f32_training(program, out, start, inputs, loss, torch_optimizer, options,
                                  clip, learning_rate)
            if not single:
                break
            if not all(np.isfinite(value).all() for value in single.values()):
                return NotCompared("diverged in f32")  # the f64 reference tells nothing
            drift = {name: np.maximum(drift[name], 4 * np.abs(single[name] - param.detach().numpy()))
                     for name, param in params.items()}
    if args.resume and (failed := check_resume(args, exe, loss.write(work) + float_arguments +
                                               id_arguments + ["--seed", str(seed)])):
        return failed
    problems = []
    for name, param in params.items():
        # What moved: the update, compared with torch's.
        ref = (param.detach().numpy() - initial[name]) * args.scale_reference
        got = trained[name].astype(np.float64) - initial[name]
        # Adam's m / sqrt(v) gives every element a step of about lr, so an
        # element whose gradient is small next to its param's others (f32's
        # error is relative to those: an MoE router's at 5e-5 of 191 gave
        # an element 0.5% off) or, in bf16, near 0 steps by its noise.
        # (16-bit: at least one element, for a param of a few.)
        adam = torch_optimizer is not torch.optim.SGD
        most_over = (max(0.01, 1 / got.size) if args.precision != "f32" else
                     max(0.05, 1 / got.size) if adam else 0.0)
        rtol, atol = tolerance(args.precision, 2)
        atol = atol + drift[name]
        if adam:  # a noise-signed step of about lr (up to twice it) a step
            atol = atol + noisy[name] * 2 * sum(learning_rate(n) for n in range(1, TRAIN_STEPS + 1))
        if (wrong := compare(got, ref, rtol, atol, most_over)):
            problems.append(f"WRONG {name} after {TRAIN_STEPS} steps ({optimizer}"
                            f"{''.join('; ' + x for x in settings)}): {wrong}")
    return "; ".join(problems)


def f32_training(program, out, initial, inputs, loss, torch_optimizer, options, clip,
                 learning_rate):
    """The params after TRAIN_STEPS of check_training's reference run in
    float32 (torch's own f32 error), from the same `initial` params and
    `inputs`; None where an MoE routing is within f32's rounding."""
    torch.set_default_dtype(torch.float32)
    try:
        params = {name: torch.tensor(initial[name].astype(np.float32), requires_grad=True)
                  for name in program.params()}
        values = {name: (value.detach().float() if value.is_floating_point() else value)
                  for name, value in inputs.items()}
        values.update(params)
        groups = [{"params": [p for p in params.values() if p.dim() >= 2]},
                  {"params": [p for p in params.values() if p.dim() < 2], "weight_decay": 0.0}]
        step = torch_optimizer([g for g in groups if g["params"]], **options)
        for number in range(1, TRAIN_STEPS + 1):
            for group in step.param_groups:
                group["lr"] = learning_rate(number)
            step.zero_grad(set_to_none=True)
            terms = []
            loss.of(evaluate(program, out, values, terms), terms).backward()
            for param in params.values():
                if param.grad is not None:
                    param.grad = param.grad.clone()
            if clip:
                torch.nn.utils.clip_grad_norm_(list(params.values()), clip)
            step.step()
        return {name: param.detach().double().numpy() for name, param in params.items()}
    except Ambiguous:
        return None
    finally:
        torch.set_default_dtype(torch.float64)


def check(seed, args):
    """'' when the seed's program passes, NotCompared (with the reason)
    when the reference cannot tell (an MoE routing, a 16-bit softmax, an
    f16 gradient past its range), else what went wrong."""
    program, out, loss, text = build(seed, args, args.gradients)
    work = args.work
    flags = ["--gradients"] if args.gradients else []
    if args.microbatches > 1 and not args.gradients:
        flags += ["--microbatches", str(args.microbatches)]
    exe, failed = compile_script(args, seed, text, flags)
    if refused := refused_rows(program, failed):
        return refused
    if failed:
        return failed
    params = program.params()
    run = [exe, "--output", f"y={work}/y.npy"]
    if params:
        run += ["--seed", str(seed), "--save-weights", f"{work}/w.safetensors"]
    if args.gradients:
        run += loss.write(work)
        run += [a for name in params for a in ("--output", f"grad.{name}={work}/g.{name}.npy")]
    float_arguments, values = float_inputs(program, seed, args)
    id_arguments, ids = id_inputs(program, seed, work)
    if (failed := launch(args, run + float_arguments + id_arguments)):
        return failed
    if params:
        values.update(weights(f"{work}/w.safetensors"))
    leaves = {name: torch.tensor(x.astype(np.float64), requires_grad=args.gradients and name in params)
              for name, x in values.items()}
    if isinstance(reference := compared(program, out, dict(leaves, **ids), args, loss), NotCompared):
        return reference
    y, terms = reference
    rtol, atol = tolerance(args.precision)
    got = np.load(f"{work}/y.npy").astype(np.float64)
    ref = y.detach().numpy() * args.scale_reference
    if got.shape != ref.shape:
        return f"SHAPE y {got.shape} vs {ref.shape}"
    # 16-bit: 1% of the elements may be over, as an ill-conditioned chain
    # (a softmax of scores near 30, a gradient that cancels) moves a few by
    # more than the rounding of its inputs.
    most_over = 0.01 if args.precision != "f32" else 0.0
    problems = []
    # 16-bit: plus 4 times each element's measured rounding noise (measured
    # only where the plain tolerance fails).
    if (wrong := compare(got, ref, rtol, atol, most_over)) and args.precision != "f32":
        moved = forward_noise(program, out, dict(leaves, **ids), args, seed, ref)
        wrong = compare(got, ref, rtol, atol + 4 * moved, most_over)
    if wrong:
        problems.append(f"WRONG y: {wrong}")
    if args.gradients and params and not problems:
        grads = torch.autograd.grad(loss.of(y, terms), [leaves[name] for name in params],
                                    allow_unused=True)
        refs = {name: (np.zeros(params[name]) if grad is None else grad.numpy()) * args.scale_reference
                for name, grad in zip(params, grads)}
        # An f16 gradient past f16's largest finite value is inf in Loom:
        # not compared (seed 98221: -77202 exact).
        if args.precision == "f16" and any(np.abs(ref).max(initial=0) > F16_MAX for ref in refs.values()):
            return NotCompared("an f16 gradient past f16's range")
        # A gradient that cancels exactly (a shift under a softmax, a sum of
        # opposite terms) is rounding noise of the size of the others: bf16's,
        # or f32's (an MoE's one-element param: 1.1e-6 for 4.9e-15).
        every = np.concatenate([ref.ravel() for ref in refs.values()])
        noise = 1e-2 if args.precision != "f32" else 1e-5
        atol = max(atol, noise * math.sqrt(float(np.mean(every ** 2))))
        # 16-bit: plus 4 times each element's measured rounding noise.
        moved = (rounding_noise(program, out, dict(leaves, **ids), params, loss, args, seed, refs)
                 if args.precision != "f32" else {})
        for name, ref in refs.items():
            got = np.load(f"{work}/g.{name}.npy").astype(np.float64)
            if (wrong := compare(got, ref, 2 * rtol, atol + 4 * moved.get(name, 0.0), most_over)):
                problems.append(f"WRONG grad.{name}: {wrong}")
    return "; ".join(problems)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--loomc", required=True)
    parser.add_argument("--work", required=True)
    parser.add_argument("--seeds", required=True, help="A:B, the seeds A to B - 1")
    parser.add_argument("--gradients", action="store_true")
    parser.add_argument("--selection", action="store_true",
                        help="f32 programs also draw maximum, minimum, abs and erf "
                             "(a stream of their own: without it every seed's program "
                             "is what it was before they came)")
    parser.add_argument("--train", action="store_true",
                        help=f"{TRAIN_STEPS} steps of a random optimizer against torch.optim's")
    parser.add_argument("--precision", choices=["f32", "bf16", "f16"], default="f32")
    parser.add_argument("--ranks", type=int, default=1, help="the data-parallel ranks (dp)")
    parser.add_argument("--mpirun", default="mpirun --oversubscribe",
                        help="the command that runs the executable on the mesh's ranks")
    parser.add_argument("--scale-reference", type=float, default=1.0)
    parser.add_argument("--gpu", action="store_true",
                        help="also build each script with loomc --gpu (sm_90a; not run)")
    parser.add_argument("--stages", type=int, default=1,
                        help="the program cut at random into this many pipeline stages, one a rank")
    parser.add_argument("--shard", action="store_true",
                        help="a 2 x 2 mesh (4 ranks; with --ranks and --stages, times theirs), "
                             "every leaf split at random over its axes")
    parser.add_argument("--batch", action="store_true",
                        help="batch-structured programs: inputs [B, ...], the rest params")
    parser.add_argument("--microbatches", type=int, default=1,
                        help="with --batch: the train section's microbatches (with --stages "
                             "and no training, loomc --microbatches)")
    parser.add_argument("--resume", action="store_true",
                        help="with --train: also 1 step saved and resumed for the rest, "
                             "which must end with the same checkpoint bit for bit")
    parser.add_argument("--layers", action="store_true",
                        help="also layers, called in for loops (recomputed at random)")
    parser.add_argument("--moe", action="store_true",
                        help="also MoE blocks (not with --microbatches)")
    parser.add_argument("--mix-rows", action="store_true",
                        help="with --microbatches: ops that mix the batch's rows too, which "
                             "loomc must refuse or build right")
    parser.add_argument("--check-plans", action="store_true",
                        help="also check every plan loomc writes with test/Driver/check_plan.py")
    parser.add_argument("--tile-dims", action="store_true",
                        help="every dim a multiple of 16 (the bf16 matmuls on AMX tiles)")
    args = parser.parse_args()
    if args.tile_dims:
        DIMS[:] = TILE_DIMS
    first, last = map(int, args.seeds.split(":"))
    args.dp = args.ranks  # the data-parallel ranks; the run's, of the whole mesh:
    args.ranks = args.dp * args.stages * (4 if args.shard else 1)
    if args.microbatches > 1:
        args.batch = True
    os.makedirs(args.work, exist_ok=True)
    failed = 0
    reasons = collections.Counter()
    for seed in range(first, last):
        problem = check_training(seed, args) if args.train else check(seed, args)
        if isinstance(problem, NotCompared):
            reasons[problem] += 1
        elif problem:
            failed += 1
            print(f"seed {seed}: {problem}", flush=True)
        else:
            for path in (f"{args.work}/s{seed}", f"{args.work}/s{seed}.loom"):
                os.remove(path) if os.path.exists(path) else None
    mode = "training" if args.train else "gradients" if args.gradients else "forward"
    kinds = "".join(f" {what}" for what, on in [("batched", args.batch and args.microbatches == 1),
                                                 (f"{args.microbatches}-microbatch", args.microbatches > 1),
                                                 ("layer", args.layers), ("MoE", args.moe)] if on)
    # Each reason with its count, the most frequent first.
    why = "; ".join(f"{count} {reason}" for reason, count in reasons.most_common())
    print(f"differential: {last - first} {args.precision}{kinds} {mode} programs on {args.ranks} rank(s), "
          f"{failed} failed" + (f", {sum(reasons.values())} not compared ({why})" if reasons else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
