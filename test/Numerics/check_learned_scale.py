"""attention-learned-scale.test's reference: the gradient of attention's
param scale by torch.autograd in float64."""
import sys

import numpy as np
import torch

work = sys.argv[1]
q, k, v, d = (torch.tensor(np.load(f"{work}/{n}.npy").astype(np.float64), requires_grad=False)
              for n in ("q", "k", "v", "d"))
s = torch.tensor(np.float64(np.float32(0.3)), requires_grad=True)
scores = q @ k.transpose(-1, -2) * s
mask = torch.ones(6, 7, dtype=torch.bool).triu(1)
out = torch.softmax(scores.masked_fill(mask, float("-inf")), -1) @ v
(out * d).mean().backward()
got, want = np.load(f"{work}/gs.npy"), s.grad.numpy()
error = abs(float(got) - float(want)) / abs(float(want))
ok = error < 1e-5 and want != 0
print(f"grad.s: relative error {error:.3g}: " + ("ok" if ok else "FAIL"))
sys.exit(0 if ok else 1)
