#!/usr/bin/env python3
"""Checks a cross_entropy output against numpy in float64 (test helper).

usage: check_cross_entropy.py LOGITS.npy LABELS.npy CE.npy [RTOL]

The reference is mean(logsumexp(x) - x[label]) of the same f32 logits,
computed in float64; prints the two and ok/FAIL.
"""
import sys

import numpy as np

x = np.load(sys.argv[1]).astype(np.float64)
labels = np.load(sys.argv[2]).astype(np.int64)
got = float(np.load(sys.argv[3]))
rtol = float(sys.argv[4]) if len(sys.argv) > 4 else 1e-6
m = x.max(axis=-1, keepdims=True)
lse = np.log(np.exp(x - m).sum(axis=-1)) + m[..., 0]
want = float(np.mean(lse - np.take_along_axis(x, labels[..., None], -1)[..., 0]))
ok = abs(got - want) <= rtol * abs(want)
print(f"got {got:.7g} want {want:.7g}: {'ok' if ok else 'FAIL'}")
