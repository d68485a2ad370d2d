#!/usr/bin/env python3
"""The GPT of examples/gpt-train.loom trained in PyTorch: an independent
reference for Loom's training step (test/Numerics/gpt-train-torch.test) and
the baseline of benchmarks/train/run.sh.

usage: gpt_train_torch.py WEIGHTS.safetensors DATA LOOM_LOG.jsonl STEPS [RTOL [bf16]]

Builds the same model (byte vocabulary, token and position embeddings, two
pre-layernorm blocks of causal attention and a tanh-GELU MLP, the output
tied to the token embedding) with torch's own layer_norm, softmax and
cross_entropy, loads the weights the Loom executable started from
(--save-weights), and trains it with torch.optim.AdamW (weight decay on
rank >= 2 params only), torch.nn.utils.clip_grad_norm_ and the warmup-cosine
schedule of docs/runtime.md on the same data windows, on one CPU thread.
Prints, per step, Loom's logged loss and gradient norm against torch's
(relative differences within RTOL, 1e-5 by default: f32 over 20 steps),
PASS or FAIL, and last a JSON line with the median tokens/s of a step after
warm-up. With `bf16` the forward and backward run under
torch.cpu.amp.autocast(bfloat16) (bf16 matmuls, f32 params and optimizer),
the counterpart of a script with `precision bf16 accumulate f32`.

For the GPU check (benchmarks/gpu/run.sh): LOOM_TORCH_DEVICE=cuda runs it
on the GPU (autocast on cuda, attention by
torch.nn.functional.scaled_dot_product_attention where torch has it), and
LOOM_GPT_SIZES=B,T,V,D,H,F,LAYERS sizes the model as a script edited to
those dims does; LOOM_TORCH_COMPILE=1 compiles the forward and backward
(torch.compile, torch 2.0 or later).
"""
import json
import math
import os
import sys
import time

# Before numpy or torch loads OpenBLAS (Debian's f32 matmuls in both): its
# pthread pool is not bounded by torch.set_num_threads(1).
os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
import numpy as np  # noqa: E402
import torch  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                "../../test/Numerics"))
import reference  # noqa: E402

B, T, V, D, H, F, LAYERS = 16, 32, 256, 64, 4, 256, 2
# The GPT of examples/gpt.loom has the same blocks at another size.
SIZES = {"gpt-train": (16, 32, 256, 64, 4, 256, 2), "gpt": (8, 64, 1024, 256, 8, 1024, 4)}


def use_sizes(name):
    """Sizes the model as examples/NAME.loom does."""
    global B, T, V, D, H, F, LAYERS
    B, T, V, D, H, F, LAYERS = SIZES[name]
LR, MIN_LR, WARMUP, HORIZON = 2e-3, 2e-4, 20, 300
DEVICE = os.environ.get("LOOM_TORCH_DEVICE", "cpu")
if os.environ.get("LOOM_GPT_SIZES"):
    B, T, V, D, H, F, LAYERS = (int(n) for n in os.environ["LOOM_GPT_SIZES"].split(","))
# Eager attention with SDPA on the GPU (torch 2.x), the composition elsewhere.
SDPA = DEVICE != "cpu" and hasattr(torch.nn.functional, "scaled_dot_product_attention")
# LOOM_TORCH_COMPILE=1: the forward (and so its backward) under
# torch.compile, the GPU check's second baseline; the optimizer stays eager.
COMPILE = os.environ.get("LOOM_TORCH_COMPILE") == "1"


def gelu(x):
    k = math.sqrt(2 / math.pi)
    return 0.5 * x * (1 + torch.tanh(k * (x + 0.044715 * x ** 3)))


def logits_of(p, tokens):
    """The model's logits [b, T, V] for tokens [b, T]."""
    b = tokens.shape[0]
    h = p["wte"][tokens] + p["wpe"][torch.arange(T, device=tokens.device)]
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool, device=tokens.device), 1)
    for i in range(LAYERS):
        q = lambda name: p[f"block.{i}.{name}"]  # noqa: E731
        x = h
        a = torch.nn.functional.layer_norm(x, (D,), q("ln1_g"), q("ln1_b"), 1e-5)
        heads = [(a @ q(w)).reshape(b, T, H, D // H).transpose(1, 2) for w in ("wq", "wk", "wv")]
        if SDPA:  # its default scale is (D // H) ** -0.5
            att = torch.nn.functional.scaled_dot_product_attention(*heads, is_causal=True)
        else:
            s = (heads[0] @ heads[1].transpose(-1, -2) * (D // H) ** -0.5).masked_fill(mask, float("-inf"))
            att = torch.softmax(s, -1) @ heads[2]
        att = att.transpose(1, 2).reshape(b, T, D)
        r = x + att @ q("wo")
        m = torch.nn.functional.layer_norm(r, (D,), q("ln2_g"), q("ln2_b"), 1e-5)
        h = r + gelu(m @ q("w1") + q("b1")) @ q("w2")
    return torch.nn.functional.layer_norm(h, (D,), p["lnf_g"], p["lnf_b"], 1e-5) @ p["wte"].T


def params_of(weights):
    """The model's params (not the optimizer state of a checkpoint) from a
    safetensors file, as f32 torch tensors."""
    return {name: torch.tensor(np.asarray(array, np.float32))
            for name, (array, _) in reference.read_safetensors(weights).items()
            if not name.startswith("opt.")}


def forward(p, tokens, labels):
    logits = logits_of(p, tokens)
    return torch.nn.functional.cross_entropy(logits.reshape(-1, V), labels.reshape(-1))


MASK = (1 << 64) - 1


def splitmix64(z):
    z = (z + 0x9E3779B97F4A7C15) & MASK
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
    return z ^ (z >> 31)


def window_start(step, row, span):
    """Where row `row` of step `step` (from 0) starts in the data: the next
    window in order, or with LOOM_SHUFFLE_SEED=S (train --shuffle --seed S)
    the runtime's splitmix64 draw (docs/runtime.md)."""
    seed = os.environ.get("LOOM_SHUFFLE_SEED")
    if seed is None:
        return ((step * B + row) * T) % span
    return ((splitmix64((splitmix64(int(seed)) + step * B + row) & MASK)) % span)


def lr_at(step):
    """The script's warmup_cosine, or with LOOM_LR_SCHEDULE=linear its
    warmup_linear (a script edited to it): a linear warmup, then a half
    cosine (or a straight line) down to MIN_LR at HORIZON."""
    if step <= WARMUP:
        return LR * step / WARMUP
    progress = min(1.0, (step - WARMUP) / (HORIZON - WARMUP))
    if os.environ.get("LOOM_LR_SCHEDULE") == "linear":
        return MIN_LR + (LR - MIN_LR) * (1 - progress)
    return MIN_LR + (LR - MIN_LR) * (1 + math.cos(math.pi * progress)) / 2


def main():
    weights, data_path, log_path, steps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
    torch.set_num_threads(1)
    w = {name: array for name, (array, _) in reference.read_safetensors(weights).items()}
    p = {name: torch.tensor(np.asarray(value, np.float32), device=DEVICE, requires_grad=True)
         for name, value in w.items() if not name.startswith("opt.")}
    del w
    decay = [t for t in p.values() if t.dim() >= 2]
    other = [t for t in p.values() if t.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": other, "weight_decay": 0.0}],
                            lr=LR, betas=(0.9, 0.95), eps=1e-8)
    data = np.frombuffer(open(data_path, "rb").read(), np.uint8).astype(np.int64)
    span = len(data) - T - 1
    logged = [json.loads(line) for line in open(log_path)]
    rtol = float(sys.argv[5]) if len(sys.argv) > 5 else 1e-5
    bf16 = len(sys.argv) > 6 and sys.argv[6] == "bf16"
    worst, times, ok = 0.0, [], len(logged) >= steps
    # The first steps compile (Inductor); the timings skip them below.
    if COMPILE and not hasattr(torch, "compile"):
        sys.exit(f"LOOM_TORCH_COMPILE=1: torch {torch.__version__} has no torch.compile (2.0 or later)")
    loss_of = torch.compile(forward) if COMPILE else forward
    for step in range(1, steps + 1):
        starts = [window_start(step - 1, b, span) for b in range(B)]
        rows = np.stack([data[s:s + T + 1] for s in starts])
        tokens = torch.from_numpy(rows[:, :-1]).to(DEVICE)
        labels = torch.from_numpy(rows[:, 1:]).to(DEVICE)
        for group in opt.param_groups:
            group["lr"] = lr_at(step)
        t = time.perf_counter()
        opt.zero_grad()
        with torch.autocast(device_type=DEVICE, enabled=bf16, dtype=torch.bfloat16):
            loss = loss_of(p, tokens, labels).float()
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(list(p.values()), 1.0).item()
        opt.step()
        if DEVICE != "cpu":
            torch.cuda.synchronize()
        times.append(time.perf_counter() - t)
        if step <= len(logged):
            got = logged[step - 1]
            rel = abs(got["loss"] - loss.item()) / loss.item()
            norm_rel = abs(got["grad_norm"] - norm) / norm
            good = rel <= rtol and norm_rel <= rtol and abs(got["lr"] - lr_at(step)) <= 1e-12 * lr_at(step)
            ok &= good
            worst = max(worst, rel) if step <= 20 else worst
            print(f"step {step}: loss {got['loss']:.8g} torch {loss.item():.8g} "
                  f"rel err {rel:.1e}, grad norm rel err {norm_rel:.1e}: "
                  f"{'ok' if good else 'FAIL'}")
    print("PASS" if ok else "FAIL")
    warm = sorted(times[5:] or times)
    print(json.dumps({"torch_tokens_per_s": B * T / warm[len(warm) // 2],
                      "loss_rel_err_first_20": worst, "torch_version": torch.__version__,
                      "torch_mode": "torch.compile" if COMPILE else "eager"}))
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
