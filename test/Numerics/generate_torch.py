#!/usr/bin/env python3
"""Checks `./model generate` (greedy) against the same model in PyTorch
(test/Runtime/generate.test).

usage: generate_torch.py gpt-train|llama WEIGHTS.safetensors PROMPT TEXT [ADDED]

TEXT is what the executable printed: PROMPT and the bytes it added, or
@FILE, the file it printed them to (with the newline it ends them with);
with ADDED, exactly that many bytes were added (a run that stopped early
had passed). For
each added byte the window the runtime gives the model (the last T bytes of
the text so far at positions 0..n-1 of every row, zeros after) goes through
gpt_train_torch.py's (or llama_train_torch.py's) logits_of, and the byte
must be the most likely there: its logit within 1e-4 of the largest (f32
logits of two implementations differ by ~1e-6; a near tie may go either
way). Prints one line per failing byte and PASS or FAIL.
"""
import sys

import numpy as np
import torch

import gpt_train_torch as gpt
import llama_train_torch as llama


def main():
    model, weights, prompt, text = sys.argv[1], sys.argv[2], sys.argv[3].encode(), sys.argv[4].encode()
    if sys.argv[4].startswith("@"):
        with open(sys.argv[4][1:], "rb") as printed:
            text = printed.read()
        if not text.endswith(b"\n"):
            print(f"the output does not end in a newline: {text[-80:]!r}")
            print("FAIL")
            sys.exit(1)
        text = text[:-1]
    if len(sys.argv) > 5 and len(text) - len(prompt) != int(sys.argv[5]):
        print(f"{len(text) - len(prompt)} bytes added, not {sys.argv[5]}")
        print("FAIL")
        sys.exit(1)
    torch.set_num_threads(1)
    logits_of = gpt.logits_of if model == "gpt-train" else llama.logits_of
    sizes = (gpt.B, gpt.T, gpt.V) if model == "gpt-train" else (llama.B, llama.T, llama.V)
    if model == "llama":
        gpt.B, gpt.T, gpt.V = sizes
    batch, length, _ = sizes
    p = gpt.params_of(weights)
    ok = text.startswith(prompt) and len(text) > len(prompt)
    if not ok:
        print(f"the output does not extend the prompt: {text[:80]!r}")
    with torch.no_grad():
        for end in range(len(prompt), len(text)):
            context = text[max(0, end - length):end]
            window = np.zeros((batch, length), np.int64)
            window[:, :len(context)] = list(context)
            scores = logits_of(p, torch.from_numpy(window))[0, max(len(context), 1) - 1]
            chosen = text[end]
            if scores[chosen] < scores.max() - 1e-4:
                ok = False
                print(f"byte {end}: {chosen} ({chr(chosen)!r}), logit {scores[chosen]:.6f}; "
                      f"torch's most likely {int(scores.argmax())} ({scores.max():.6f})")
    print("PASS" if ok else "FAIL")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
