#!/usr/bin/env python3
"""Independent NumPy reference for Loom's end-to-end numerics tests.

usage:
  reference.py mlp --precision P --weights W.safetensors \\
      --input x=X.npy --output y=Y.npy
  reference.py gpt --precision P --heads H --weights W.safetensors \\
      --input tokens=T.npy --input labels=L.npy \\
      --output logits=LOGITS.npy --output loss=LOSS.npy
  (--output-dir DIR checks every DIR/NAME.npy that exists; see --help
  for the tolerance options)

Recomputes the model of test/Numerics/Inputs/{mlp,gpt}-*.loom (and of
examples/mlp.loom) directly from the weights the executable saved
(--save-weights) and the inputs it read, following the precision semantics
of docs/precision.md, and compares the result with the outputs the
executable wrote (--output). It does not look at the compiler's IR: the
model is written out below by hand, from the script.

Precision model (docs/precision.md):
  * every value is stored in its dtype (f32, f16 or bf16); here a stored
    value is a float32 array whose elements are representable in the dtype,
    paired with the dtype name;
  * elementwise ops compute in f32 from the widened inputs and round once to
    the result dtype (round to nearest, ties to even);
  * a number literal next to a tensor is a constant of that tensor's dtype;
  * a matmul of an f32 and a 16-bit operand first rounds the f32 one to the
    16-bit type; it multiplies and accumulates in f32 and rounds the result
    once to the operand type;
  * layernorm, softmax and cross_entropy compute their statistics in f32;
  * under --precision tf32 (tensors f32), a matmul of two f32 operands
    rounds each operand element to tf32 (round_tf32) and sums the products,
    which are exact in f32, in f32.
Sums run sequentially (index 0, 1, 2, ...), as a naive loop does; the
compiler may use another order, and the comparison allows for that.

--precision is the policy's compute type. Float inputs of the model are
rounded to it (as the executable does when it reads them). The scripts
declare their matrices with the policy type and their rank-1 params (biases,
layernorm gains and shifts) as f32; the saved weights must have those dtypes.
tf32 is no storage type: under it inputs and matrices are f32.

--output names the executable's outputs to check: y (mlp); logits and loss
(gpt). When a gpt script writes its one block out in the model, its
intermediate values (x, h, q, k, v, scores, p, attn, r, m, a, g, y; see
Inputs/gpt-steps-*.loom) may be outputs too: each given value is compared,
and the computation continues from the executable's value, so every op is
checked on its own operands ("teacher forcing").

Comparison (derivation in docs/precision.md), per output element:
  |got - ref| <= ULPS * ulp_T(|ref|) + SCALE_ULPS * ulp_T(rms(ref))  T = f16, bf16
  |got - ref| <= RTOL * (|ref| + rms(ref))                            T = f32
(defaults ULPS 2, SCALE_ULPS 1, RTOL 1e-5), and, for 16-bit outputs, the
fraction of elements with got != ref must be below --max-diff-fraction
(default 0.05). The defaults are for values a few rounding points away from
their operands (the mlp, each op of a gpt-steps script); the end-to-end gpt
tests pass wider limits. The f32 loss is compared twice: with the
cross-entropy recomputed from the executable's own logits (RTOL), and with
the reference logits, allowing in addition the logit differences measured
(capped at their tolerance; log-sum-exp is 1-Lipschitz in the max norm).
Under tf32 the f32 rule gets one more term, for operand elements of a tf32
matmul that the reference computed itself (not weights, inputs or the
executable's outputs) and that lie within OPERAND_RTOL * (|a| + rms(a))
(--operand-rtol, default 1e-6) of a tf32 rounding midpoint: another correct
implementation may round those the other way, and the result may move by
the rounding step times the other operand (tf32_matmul_slack). The term is
carried through the linear ops after the matmul, not through nonlinear ones
(a note says so).

Prints one line per check and PASS or FAIL; exits 1 on FAIL.

--no-intermediate-rounding computes every op in f32 and rounds only the
values that are outputs (and, under tf32, multiplies unrounded operands): a
deliberately wrong reference, used by the tests to show that the comparison
notices missing rounding points.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np

# --------------------------------------------------------------------------
# Rounding to the storage types.
# --------------------------------------------------------------------------

FLOAT_TYPES = ("f32", "f16", "bf16")
# The values of --precision: the storage types, and tf32, which stores f32.
POLICIES = ("f32", "tf32", "f16", "bf16")
MANTISSA_BITS = {"f32": 23, "f16": 10, "bf16": 7}
MIN_NORMAL_EXP = {"f32": -126, "f16": -14, "bf16": -126}


def round_bf16(x):
    """Rounds float32 values to bf16 (round to nearest, ties to even)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    bits = x.view(np.uint32).astype(np.uint64)
    rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) & 0xFFFF0000
    out = rounded.astype(np.uint32).view(np.float32)
    return np.where(np.isnan(x), np.float32(np.nan), out).astype(np.float32)


def round_tf32(x):
    """Rounds float32 values to tf32 (10 mantissa bits), to nearest with ties
    away from zero, as PTX cvt.rna.tf32.f32: add half a tf32 ulp (bit 12) to
    the f32 bits and clear the low 13 bits. Infinities and NaNs are kept; a
    finite value above tf32's largest becomes an infinity (the carry runs
    into the exponent)."""
    x = np.ascontiguousarray(x, dtype=np.float32)
    bits = x.view(np.uint32)
    rounded = (bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)
    special = (bits & np.uint32(0x7F800000)) == np.uint32(0x7F800000)
    return np.where(special, bits, rounded).astype(np.uint32).view(np.float32)


def round_to(x, dtype):
    """Rounds to `dtype`; the result is float32 holding representable values."""
    x = np.asarray(x, dtype=np.float32)
    if dtype == "f32":
        return x
    if dtype == "f16":
        with np.errstate(over="ignore"):
            return x.astype(np.float16).astype(np.float32)
    if dtype == "bf16":
        return round_bf16(x)
    raise ValueError(f"not a float dtype: {dtype}")


def ulp(dtype, magnitude):
    """The spacing of `dtype` at |magnitude| (subnormal spacing below the
    smallest normal)."""
    m = np.maximum(np.abs(np.asarray(magnitude, dtype=np.float64)),
                   2.0 ** MIN_NORMAL_EXP[dtype])
    exponent = np.floor(np.log2(m))
    return np.exp2(exponent - MANTISSA_BITS[dtype])


# --------------------------------------------------------------------------
# Typed values and ops.
# --------------------------------------------------------------------------

ROUND_INTERMEDIATE = True
# --precision tf32: matmuls of two f32 operands multiply them rounded to tf32.
MULTIPLY_TF32 = False
# How far (relative to |a| + rms(a)) a correct implementation's f32 value of
# a computed tf32 matmul operand may be from the reference's (--operand-rtol).
OPERAND_RTOL = 1e-6


def storage_type(policy):
    """The dtype of inputs and params declared without one: the policy's
    compute type, except that tf32 is no storage type (its tensors are f32)."""
    return "f32" if policy == "tf32" else policy


class Val:
    """A stored tensor: float32 data representable in `dtype`.

    `exact`: every correct implementation has these very values (weights,
    inputs, the executable's own outputs, and data movement of those), as
    opposed to values the reference computed. `slack`: None, or an absolute
    per-element allowance (float64, broadcastable to `data`) for tf32
    rounding points that a correct implementation may take the other way
    (see tf32_matmul_slack)."""

    def __init__(self, data, dtype, exact=False, slack=None):
        self.data = np.asarray(data, dtype=np.float32)
        self.dtype = dtype
        self.exact = exact
        self.slack = slack


def add_slack(*slacks):
    present = [s for s in slacks if s is not None]
    return sum(present) if present else None


# Set when a value with a tf32 allowance went into a nonlinear op (gelu,
# layernorm, softmax), whose result then carries none: the allowance is
# bounded through linear ops only, so such a comparison is not covered.
SLACK_LOST = False


def nonlinear(*vals):
    global SLACK_LOST
    SLACK_LOST = SLACK_LOST or any(v.slack is not None for v in vals)


def store(data, dtype):
    """The single rounding of an op's f32 result to its result dtype."""
    if ROUND_INTERMEDIATE:
        return Val(round_to(data, dtype), dtype)
    return Val(np.asarray(data, dtype=np.float32), dtype)


def promote(*dtypes):
    """Elementwise dtype promotion: equal types stay, f32 wins over a 16-bit
    type, f16 with bf16 is an error in the language."""
    kinds = set(dtypes)
    if len(kinds) == 1:
        return dtypes[0]
    if {"f16", "bf16"} <= kinds:
        raise ValueError("f16 and bf16 have no common type")
    return "f32"


def const(value, dtype):
    """A number literal next to a tensor of `dtype`."""
    return Val(round_to(np.float32(value), dtype), dtype, exact=True)


def add(a, b):
    out = store(a.data + b.data, promote(a.dtype, b.dtype))
    out.slack = add_slack(a.slack, b.slack)
    return out


def mul(a, b):
    out = store(a.data * b.data, promote(a.dtype, b.dtype))
    out.slack = add_slack(
        None if a.slack is None else a.slack * np.abs(b.data.astype(np.float64)),
        None if b.slack is None else b.slack * np.abs(a.data.astype(np.float64)),
        None if a.slack is None or b.slack is None else a.slack * b.slack)
    return out


def cast(a, dtype):
    out = store(a.data, dtype)
    out.slack = a.slack
    return out


def gelu(a):
    """tanh approximation, in f32."""
    nonlinear(a)
    x = a.data
    f = np.float32
    inner = f(math.sqrt(2.0 / math.pi)) * (x + f(0.044715) * x * x * x)
    return store(f(0.5) * x * (f(1.0) + np.tanh(inner)), a.dtype)


def seq_sum(x, axis=-1):
    """f32 sum along `axis`, one element after the other."""
    x = np.moveaxis(np.asarray(x, dtype=np.float32), axis, -1)
    acc = np.zeros(x.shape[:-1], dtype=np.float32)
    for j in range(x.shape[-1]):
        acc = acc + x[..., j]
    return acc


def matmul(a, b):
    """a @ b with batch broadcasting (weight form when b is rank 2)."""
    if a.dtype != b.dtype:
        promote(a.dtype, b.dtype)  # f16 with bf16 is an error
        narrow = b.dtype if a.dtype == "f32" else a.dtype
        a = cast(a, narrow) if a.dtype == "f32" else a
        b = cast(b, narrow) if b.dtype == "f32" else b
    x, w = a.data, b.data
    if MULTIPLY_TF32 and a.dtype == "f32" and ROUND_INTERMEDIATE:
        # The products of two tf32 values (11-bit significands) are exact in
        # f32; only the f32 additions round.
        slack = tf32_matmul_slack(a, b)
        x, w = round_tf32(x), round_tf32(w)
    else:
        slack = linear_matmul_slack(a, b)
    k = x.shape[-1]
    assert w.shape[-2] == k, (x.shape, w.shape)
    shape = np.broadcast_shapes(x.shape[:-1] + (1,), w.shape[:-2] + (1, w.shape[-1]))
    acc = np.zeros(shape, dtype=np.float32)
    for i in range(k):
        acc = acc + x[..., :, i:i + 1] * w[..., i:i + 1, :]
    out = store(acc, a.dtype)
    out.slack = slack
    return out


def linear_matmul_slack(a, b):
    """An operand's allowance carried through a matmul without tf32."""
    if a.slack is None and b.slack is None:
        return None
    sa = np.zeros(a.data.shape) if a.slack is None else np.broadcast_to(a.slack, a.data.shape)
    sb = np.zeros(b.data.shape) if b.slack is None else np.broadcast_to(b.slack, b.data.shape)
    ra, rb = np.abs(a.data.astype(np.float64)), np.abs(b.data.astype(np.float64))
    return propagate_slack(sa, ra, sb, rb)


def propagate_slack(sa, ra, sb, rb):
    """How far a matmul of operands of magnitude ra and rb can move when
    they move by up to sa and sb: sum_k sa |b| + |a| sb + sa sb (infinite
    or NaN terms count nothing)."""
    with np.errstate(over="ignore", invalid="ignore"):
        slack = np.matmul(sa, rb) + np.matmul(ra, sb) + np.matmul(sa, sb)
    return np.where(np.isfinite(slack), slack, 0.0)


def tf32_step(a):
    """Per element of a computed f32 operand: how far its tf32 rounding can
    move if a correct implementation computed the element up to
    OPERAND_RTOL * (|a| + rms(a)), plus its own allowance, away from the
    reference's value. Zero unless a rounding midpoint lies that close; then
    about one tf32 ulp (or more, for an allowance above one)."""
    v = a.data.astype(np.float64)
    finite = np.isfinite(v)
    rms = float(np.sqrt(np.mean(v[finite] ** 2))) if finite.any() else 0.0
    u = OPERAND_RTOL * (np.abs(v) + rms)
    if a.slack is not None:
        u = u + a.slack
    with np.errstate(over="ignore", invalid="ignore"):
        r = round_tf32(a.data).astype(np.float64)
        hi = round_tf32((v + u).astype(np.float32)).astype(np.float64)
        lo = round_tf32((v - u).astype(np.float32)).astype(np.float64)
        step = np.maximum(np.abs(hi - r), np.abs(lo - r))
    return np.where(finite & np.isfinite(step), step, 0.0)


def tf32_matmul_slack(a, b):
    """The allowance of a tf32 matmul for operand elements that the
    reference computed itself (a gelu, a layernorm, ...) and that lie within
    f32 noise of a tf32 rounding midpoint: another correct implementation
    may round them the other way, which changes the result by up to
    sum_k step_a |b| + |a| step_b + step_a step_b (the rounded operands).
    Operands that every implementation shares exactly (weights, inputs, the
    executable's own values) round identically and need none. None if no
    element needs it."""
    if a.exact and b.exact:
        return None
    ra = np.abs(round_tf32(a.data).astype(np.float64))
    rb = np.abs(round_tf32(b.data).astype(np.float64))
    sa = np.zeros_like(ra) if a.exact else tf32_step(a)
    sb = np.zeros_like(rb) if b.exact else tf32_step(b)
    if not sa.any() and not sb.any():
        return None
    return propagate_slack(sa, ra, sb, rb)


def layernorm(x, scale, bias, eps=1e-5):
    """(x - mean) * rsqrt(var + eps) * scale + bias over the last axis,
    biased variance, statistics in f32."""
    nonlinear(x, scale, bias)
    f = np.float32
    d = f(x.data.shape[-1])
    mean = seq_sum(x.data) / d
    centered = x.data - mean[..., None]
    var = seq_sum(centered * centered) / d
    rstd = f(1.0) / np.sqrt(var + f(eps))
    y = centered * rstd[..., None] * scale.data + bias.data
    return store(y, promote(x.dtype, scale.dtype, bias.dtype))


def causal_mask(x):
    q, k = x.data.shape[-2:]
    keep = np.arange(k)[None, :] <= np.arange(q)[:, None]
    slack = None if x.slack is None else np.where(keep, x.slack, 0.0)
    return Val(np.where(keep, x.data, np.float32(-np.inf)), x.dtype, x.exact, slack)


def softmax(x):
    """exp(x - max) / sum over the last axis, in f32."""
    nonlinear(x)
    m = np.max(x.data, axis=-1, keepdims=True)
    e = np.exp(x.data - m)
    return store(e / seq_sum(e)[..., None], x.dtype)


def embedding(table, ids):
    return Val(table.data[ids], table.dtype, table.exact)


def transpose(x, perm):
    slack = None if x.slack is None else np.transpose(
        np.broadcast_to(x.slack, x.data.shape), perm)
    return Val(np.transpose(x.data, perm), x.dtype, x.exact, slack)


def reshape(x, shape):
    slack = None if x.slack is None else np.broadcast_to(
        x.slack, x.data.shape).reshape(shape)
    return Val(x.data.reshape(shape), x.dtype, x.exact, slack)


def cross_entropy(logits, labels):
    """Mean softmax cross-entropy in f32 (an f32 scalar)."""
    f = np.float32
    x = logits.data.reshape(-1, logits.data.shape[-1])
    ids = labels.reshape(-1)
    m = np.max(x, axis=-1)
    lse = m + np.log(seq_sum(np.exp(x - m[:, None])))
    per_row = lse - x[np.arange(x.shape[0]), ids]
    return seq_sum(per_row) / f(per_row.shape[0])


# --------------------------------------------------------------------------
# The models, written from the scripts.
# --------------------------------------------------------------------------


def no_tap(name, value):
    return value


def mlp_forward(w, inputs, policy, tap=no_tap):
    """output y = gelu(x @ w1 + b1) @ w2"""
    dtype = storage_type(policy)
    x = Val(round_to(inputs["x"], dtype), dtype, exact=True)
    h = add(matmul(x, w["w1"]), w["b1"])
    tap("y", matmul(gelu(h), w["w2"]))


# The values of one block that a script may also output (one block only).
BLOCK_TAPS = ("h", "q", "k", "v", "scores", "p", "attn", "r", "m", "a", "g", "y")


def gpt_block(w, prefix, x, heads, tap=no_tap):
    """The script's `layer block(x)`."""
    p = lambda name: w[prefix + name]
    b, t, d = x.data.shape
    dh = d // heads

    def split_heads(y):
        return transpose(reshape(y, (b, t, heads, dh)), (0, 2, 1, 3))

    h = tap("h", layernorm(x, p("ln1_g"), p("ln1_b")))
    q = tap("q", split_heads(matmul(h, p("wq"))))
    k = tap("k", split_heads(matmul(h, p("wk"))))
    v = tap("v", split_heads(matmul(h, p("wv"))))
    # The script writes 1/sqrt(D/H) as a literal; it is a constant of the
    # scores' dtype.
    scale = const(1.0 / math.sqrt(dh), q.dtype)
    scores = tap("scores", causal_mask(mul(matmul(q, transpose(k, (0, 1, 3, 2))), scale)))
    probs = tap("p", softmax(scores))
    attn = tap("attn", matmul(probs, v))
    merged = reshape(transpose(attn, (0, 2, 1, 3)), (b, t, d))
    r = tap("r", add(x, matmul(merged, p("wo"))))
    m = tap("m", layernorm(r, p("ln2_g"), p("ln2_b")))
    a = tap("a", add(matmul(m, p("w1")), p("b1")))
    g = tap("g", gelu(a))
    return tap("y", add(r, matmul(g, p("w2"))))


def gpt_forward(w, inputs, policy, heads, tap=no_tap):
    """The script's model: embeddings, the blocks, the final layernorm and the
    tied output projection; returns the logits (as computed, before any tap
    replaced them) and the labels for the loss."""
    tokens = inputs["tokens"].astype(np.int64)
    labels = inputs["labels"].astype(np.int64)
    t = tokens.shape[1]
    v = w["wte"].data.shape[0]
    for name, ids in (("tokens", tokens), ("labels", labels)):
        if ids.min() < 0 or ids.max() >= v:
            raise ValueError(f"{name} out of range [0, {v})")
    h = tap("x", add(embedding(w["wte"], tokens), embedding(w["wpe"], np.arange(t))))
    if "wq" in w:
        # One block written out in the model (gpt-steps scripts): params
        # without a layer prefix, and its values may be outputs.
        prefixes = [""]
        block_tap = tap
    else:
        layers = sorted({int(n.split(".")[1]) for n in w if n.startswith("block.")})
        if not layers or layers != list(range(len(layers))):
            raise ValueError(f"block params are not numbered 0..n-1: {layers}")
        prefixes = [f"block.{i}." for i in layers]
        block_tap = no_tap
    for prefix in prefixes:
        h = gpt_block(w, prefix, h, heads, block_tap)
    logits = matmul(layernorm(h, w["lnf_g"], w["lnf_b"]), transpose(w["wte"], (1, 0)))
    tap("logits", logits)
    return logits, labels


# --------------------------------------------------------------------------
# Files.
# --------------------------------------------------------------------------


def read_safetensors(path):
    """{name: (float32 or int array, file dtype)}"""
    with open(path, "rb") as f:
        blob = f.read()
    (n,) = struct.unpack("<Q", blob[:8])
    header = json.loads(blob[8:8 + n])
    data = blob[8 + n:]
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        begin, end = info["data_offsets"]
        raw, shape, dt = data[begin:end], tuple(info["shape"]), info["dtype"]
        if dt == "F32":
            arr = np.frombuffer(raw, dtype="<f4").astype(np.float32)
        elif dt == "F16":
            arr = np.frombuffer(raw, dtype="<f2").astype(np.float32)
        elif dt == "BF16":
            arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        elif dt == "I32":
            arr = np.frombuffer(raw, dtype="<i4").copy()
        elif dt == "I64":
            arr = np.frombuffer(raw, dtype="<i8").copy()
        else:
            raise ValueError(f"{path}: {name}: unknown dtype {dt}")
        if arr.size != math.prod(shape):
            raise ValueError(f"{path}: {name}: {arr.size} elements for shape {shape}")
        out[name] = (arr.reshape(shape), dt)
    return out


def load_weights(path, policy, checker):
    """The params of the file, with the dtypes the scripts declare: the
    matrices (rank 2) take the policy type, the rank-1 params (biases, norm
    gains and shifts) are declared f32. A file dtype that disagrees is a
    failure; the value is then converted to the declared dtype and the
    comparison goes on."""
    file_types = {"F32": "f32", "F16": "f16", "BF16": "bf16"}
    weights = {}
    for name, (arr, dt) in read_safetensors(path).items():
        if dt not in file_types:
            checker.fail(f"{name}: {dt} in {path}, expected a float param: FAIL")
            continue
        dtype = storage_type(policy) if arr.ndim == 2 else "f32"
        if file_types[dt] != dtype:
            checker.fail(f"{name}: {file_types[dt]} in {path}, but the script declares "
                         f"it {dtype} (--precision {policy}): FAIL")
        weights[name] = Val(round_to(arr, dtype), dtype, exact=True)
    return weights


def parse_pairs(pairs, what):
    out = {}
    for pair in pairs:
        name, sep, path = pair.partition("=")
        if not sep or not name or not path:
            sys.exit(f"reference.py: bad {what} '{pair}' (expected NAME=FILE.npy)")
        out[name] = path
    return out


# --------------------------------------------------------------------------
# Comparison.
# --------------------------------------------------------------------------


class Checker:
    def __init__(self, ulps, scale_ulps, rtol, max_fraction, allow_nan=False):
        self.ulps, self.scale_ulps = ulps, scale_ulps
        self.rtol, self.max_fraction = rtol, max_fraction
        # A NaN in the reference matches a NaN in the result, so without
        # this a NaN weight (the reference reads the weights the run saved)
        # made an all-NaN output pass.
        self.allow_nan = allow_nan
        self.failed = False

    def fail(self, message):
        print(message)
        self.failed = True

    def compare(self, name, got, ref, dtype, slack=None):
        """Compares an output of `dtype`; returns min(|got - ref|, tolerance)
        per element (or None). `slack` (tf32 matmuls) is added to the
        tolerance."""
        got = np.asarray(got, dtype=np.float32)
        ref = np.asarray(ref, dtype=np.float32)
        if got.shape != ref.shape:
            self.fail(f"{name}: shape {list(got.shape)} != reference {list(ref.shape)}: FAIL")
            return None
        if not self.allow_nan and np.isnan(ref).any():
            self.fail(f"{name}: the reference has {int(np.isnan(ref).sum())} NaN "
                      "(NaN weights or inputs?): FAIL")
            return None
        with np.errstate(invalid="ignore", over="ignore"):
            unrepresentable = int(np.sum(round_to(got, dtype) != got) - np.sum(np.isnan(got)))
        finite_got, finite_ref = np.isfinite(got), np.isfinite(ref)
        # Non-finite in one and not the other, or both non-finite but not
        # the same (inf against -inf; a NaN against an inf had matched).
        nonfinite_mismatch = int(np.sum(finite_got != finite_ref)) + int(
            np.sum(~finite_ref & ~finite_got & ~(np.isnan(ref) & np.isnan(got)) & (got != ref)))
        both = finite_got & finite_ref
        g, r = got[both].astype(np.float64), ref[both].astype(np.float64)
        err = np.abs(g - r)
        rms = float(np.sqrt(np.mean(r * r))) if r.size else 0.0
        if dtype == "f32":
            tol = self.rtol * (np.abs(r) + rms)
            rule = f"rtol {self.rtol:g} x (|ref| + rms {rms:.3g})"
            if slack is not None:
                s = np.broadcast_to(slack, got.shape)[both]
                tol = tol + s
                rule += (f" + tf32 rounding allowance (median {float(np.median(s)):.3g}, "
                         f"max {float(s.max()):.3g})")
        else:
            tol = self.ulps * ulp(dtype, r) + self.scale_ulps * ulp(dtype, rms)
            rule = (f"{self.ulps:g} ulp({dtype}, |ref|) + "
                    f"{self.scale_ulps:g} ulp({dtype}, rms {rms:.3g})")
        over = int(np.sum(err > tol))
        differ = int(np.sum(g != r)) + nonfinite_mismatch
        n = got.size
        fraction = differ / n if n else 0.0
        max_abs = float(err.max()) if err.size else 0.0
        rel = err / np.maximum(np.abs(r), np.finfo(np.float32).tiny)
        max_rel = float(rel.max()) if rel.size else 0.0
        max_ulps = float((err / ulp(dtype, r)).max()) if err.size else 0.0
        ok = over == 0 and nonfinite_mismatch == 0 and unrepresentable == 0
        if dtype != "f32" and fraction >= self.max_fraction:
            ok = False
        print(f"{name}: {dtype}{list(got.shape)}  max abs err {max_abs:.3g}  "
              f"max rel err {max_rel:.3g}  max {max_ulps:.3g} ulp  "
              f"differing {differ}/{n} ({100 * fraction:.2f}%)")
        print(f"{name}:   tolerance {rule}; {over} over"
              + (f"; {nonfinite_mismatch} inf/nan mismatches" if nonfinite_mismatch else "")
              + (f"; {unrepresentable} values not representable in {dtype}" if unrepresentable else "")
              + ("" if dtype == "f32" else
                 f"; differing must be < {100 * self.max_fraction:g}%")
              + f": {'PASS' if ok else 'FAIL'}")
        if over:
            worst = np.argmax(err - tol)
            idx = np.unravel_index(np.flatnonzero(both)[worst], got.shape)
            print(f"{name}:   worst element {list(map(int, idx))}: got {got[idx]!r} "
                  f"reference {ref[idx]!r}")
        if not ok:
            self.failed = True
        # The differences, capped at the tolerance (so that a failed output
        # does not inflate the loss's allowance further).
        full = np.full(got.shape, np.inf)
        full[both] = np.minimum(err, tol)
        full[~finite_got & ~finite_ref & ((got == ref) | (np.isnan(got) & np.isnan(ref)))] = 0
        return full

    def compare_scalar(self, name, got, ref, tol, rule):
        err = abs(float(got) - float(ref))
        ok = err <= tol or (self.allow_nan and math.isnan(float(got)) and math.isnan(float(ref)))
        print(f"{name}: got {float(got)!r} reference {float(ref)!r}  abs err {err:.3g}  "
              f"rel err {err / max(abs(float(ref)), 1e-30):.3g}; tolerance {rule} = {tol:.3g}: "
              f"{'PASS' if ok else 'FAIL'}")
        if not ok:
            self.failed = True


def check_outputs(directory, want, rtol):
    """Compares DIRECTORY/NAME.npy with each float64 reference of `want`
    (NAME -> array): the largest error relative to the reference's rms
    must be at most `rtol` (a NaN fails). Prints a line per output, then
    PASS or FAIL, and exits 0 or 1."""
    failed = False
    for name, ref in want.items():
        got = np.load(os.path.join(directory, name + ".npy")).astype(np.float64)
        scale = max(np.sqrt(np.mean(ref ** 2)), 1e-30)
        err = np.max(np.abs(got - ref)) / scale if got.shape == ref.shape else np.inf
        ok = bool(err <= rtol)
        failed |= not ok
        print(f"{name}: {list(got.shape)} max error {err:.2e} of rms: {'PASS' if ok else 'FAIL'}")
    print("FAIL" if failed else "PASS")
    sys.exit(1 if failed else 0)


def main():
    global ROUND_INTERMEDIATE, MULTIPLY_TF32, OPERAND_RTOL
    parser = argparse.ArgumentParser(
        description="Independent NumPy reference for Loom's numerics tests.")
    parser.add_argument("model", choices=["mlp", "gpt"])
    parser.add_argument("--precision", required=True, choices=POLICIES,
                        help="the script's compute type")
    parser.add_argument("--weights", required=True, help=".safetensors from --save-weights")
    parser.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy")
    parser.add_argument("--output", action="append", default=[], metavar="NAME=FILE.npy",
                        help="an output of the executable to check")
    parser.add_argument("--output-dir", metavar="DIR",
                        help="also check every output NAME of the model for which "
                             "DIR/NAME.npy exists")
    parser.add_argument("--heads", type=int, help="attention heads (gpt)")
    parser.add_argument("--ulps", type=float, default=2.0,
                        help="allowed ulps of a 16-bit output (default 2)")
    parser.add_argument("--scale-ulps", type=float, default=1.0,
                        help="plus this many ulps at the output's rms (default 1)")
    parser.add_argument("--rtol", type=float, default=1e-5,
                        help="relative tolerance of f32 values (default 1e-5)")
    parser.add_argument("--max-diff-fraction", type=float, default=0.05,
                        help="largest fraction of 16-bit output elements that may "
                             "differ at all (default 0.05)")
    parser.add_argument("--operand-rtol", type=float, default=OPERAND_RTOL,
                        help="--precision tf32: the f32 difference, relative to "
                             "|a| + rms(a), that another correct implementation "
                             "may have in an operand of a tf32 matmul that the "
                             "reference computed (default %(default)g)")
    parser.add_argument("--no-intermediate-rounding", action="store_true",
                        help="(self-check) round only the final outputs")
    args = parser.parse_args()

    ROUND_INTERMEDIATE = not args.no_intermediate_rounding
    MULTIPLY_TF32 = args.precision == "tf32"
    OPERAND_RTOL = args.operand_rtol
    if args.no_intermediate_rounding:
        print("note: intermediate rounding disabled (deliberately wrong reference)")

    checker = Checker(args.ulps, args.scale_ulps, args.rtol, args.max_diff_fraction)
    weights = load_weights(args.weights, args.precision, checker)
    inputs = {name: np.load(path) for name, path in parse_pairs(args.input, "--input").items()}
    outputs = parse_pairs(args.output, "--output")
    if args.output_dir:
        names = ["y"] if args.model == "mlp" else ["x", *BLOCK_TAPS, "logits", "loss"]
        for name in names:
            path = os.path.join(args.output_dir, name + ".npy")
            if name not in outputs and os.path.exists(path):
                outputs[name] = path

    errors = {}
    tapped = []

    def tap(name, value):
        """Compares `value` with the executable's output `name`, if it was
        given, and continues from the executable's value (so each op is
        checked on its own when intermediate values are outputs)."""
        if name not in outputs or name in tapped:
            return value
        tapped.append(name)
        got = np.load(outputs[name])
        # The final rounding of a stored value happens even when intermediate
        # rounding is switched off.
        errors[name] = checker.compare(name, got, round_to(value.data, value.dtype),
                                       value.dtype, value.slack)
        if got.shape != value.data.shape:
            return value
        return Val(got.astype(np.float32), value.dtype, exact=True)

    if args.model == "mlp":
        mlp_forward(weights, inputs, args.precision, tap)
        known = ["y"]
    else:
        if not args.heads:
            sys.exit("reference.py: gpt needs --heads")
        logits, labels = gpt_forward(weights, inputs, args.precision, args.heads, tap)
        known = ["x", *BLOCK_TAPS, "logits", "loss"]
    unknown = [name for name in outputs if name not in tapped and name != "loss"]
    if unknown or not outputs:
        sys.exit(f"reference.py: cannot check outputs {unknown or '(none given)'}; "
                 f"the {args.model} model has {known} (the block's values only "
                 "when the script writes one block out in the model)")

    if "loss" in outputs:
        got_loss = np.load(outputs["loss"])
        if got_loss.shape != () or got_loss.dtype != np.float32:
            checker.fail(f"loss: expected an f32 scalar, got {got_loss.dtype}{list(got_loss.shape)}: FAIL")
        else:
            rtol = args.rtol
            if "logits" in outputs:
                exe_logits = np.load(outputs["logits"]).astype(np.float32)
                ce = cross_entropy(Val(exe_logits, logits.dtype), labels)
                checker.compare_scalar("loss (cross_entropy of the executable's logits)",
                                       got_loss, ce, rtol * abs(float(ce)), f"rtol {rtol:g}")
            ce_ref = cross_entropy(Val(round_to(logits.data, logits.dtype), logits.dtype), labels)
            slack = 0.0
            rule = f"rtol {rtol:g}"
            if errors.get("logits") is not None:
                d = errors["logits"].reshape(-1, errors["logits"].shape[-1])
                rows = np.arange(d.shape[0])
                slack = float(np.mean(d.max(axis=-1) + d[rows, labels.reshape(-1)]))
                rule += f" + mean(max_j |dlogit| + |dlogit[label]|) {slack:.3g}"
            checker.compare_scalar("loss (reference logits)", got_loss, ce_ref,
                                   rtol * abs(float(ce_ref)) + slack, rule)

    if SLACK_LOST:
        print("note: a tf32 rounding allowance went through a nonlinear op; the "
              "values after it are compared without one (output the "
              "intermediate values to check each op)")
    print("FAIL" if checker.failed else "PASS")
    sys.exit(1 if checker.failed else 0)


if __name__ == "__main__":
    main()
