"""The dropout mask as docs/language.md defines it, in NumPy: for the
tests to reproduce what loom.dropout draws (an independent reading of the
definition, not the compiler's code)."""
import numpy as np

M32 = np.uint64(0xFFFFFFFF)


def u32(x):
    """x (ints or arrays) as uint64 arrays holding u32 values."""
    return np.asarray(x, dtype=np.uint64) & M32


def lowbias32(x):
    """C. Wellons' lowbias32, in u32 arithmetic."""
    x = u32(x)
    x ^= x >> np.uint64(16)
    x = (x * np.uint64(0x7FEB352D)) & M32
    x ^= x >> np.uint64(15)
    x = (x * np.uint64(0x846CA68B)) & M32
    x ^= x >> np.uint64(16)
    return x


def seed_key(seed, step):
    """The step's key: lowbias32(lowbias32(seed_lo ^ seed_hi) + step),
    `step` 1 for the first."""
    key = lowbias32(u32(seed) ^ u32(seed >> 32))
    return lowbias32(key + u32(step))


def keep_mask(shape, p, seed, step, stream, microbatch=0, offsets=None):
    """Where dropout(x, p) of `stream` keeps an element of a tensor of
    `shape` (its global positions start at `offsets`, default 0) in step
    `step` (1 for the first) of a run of `seed`, in microbatch
    `microbatch`."""
    offsets = offsets or [0] * len(shape)
    h = lowbias32(seed_key(seed, step) + u32(stream * 0x9E3779B9))
    h = lowbias32(h + u32(microbatch))
    for d, size in enumerate(shape):
        positions = u32(np.arange(size) + offsets[d])
        h = lowbias32(h + positions.reshape([-1 if i == d else 1 for i in range(len(shape))]))
    u = (h >> np.uint64(8)).astype(np.float64) * 2.0 ** -24
    return u >= np.float32(p)


def scale(p):
    """The kept elements' factor, 1 / (1 - p) rounded to f32."""
    return np.float32(1.0 / (1.0 - p))
