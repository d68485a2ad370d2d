#!/usr/bin/env python3
"""Checks Loom plans (docs/plan-format.md) read from a file or stdin.

A file may hold several plans, each ending with its `end` line (loomc
--emit=plan prints a partitioned model's per-rank plan after its whole
plan, separated by an empty line); each is checked on its own.

Verifies the record order, the FNV-1a checksum of the `end` line, buffer
ids, roles, dtypes and shapes, 64-byte aligned offsets inside the arena,
kernel argument counts, the mesh and the records that name its axes
(`shard`, `collective`, `held`, `pipeline`), collectives' shapes,
accumulates and microbatches, and the static memory plan: two buffers
whose live ranges intersect never share a byte. A buffer lives from the
step that first names it (inputs and params: from before the first step;
an accumulate's sum: from before the first step, since it grows over the
microbatches) to the step that last names it (params and outputs: to after
the last step; inputs: at least to the last accumulate, whose steps run
once per microbatch). A step is a `step`, `collective`, `accumulate` or
`transfer` record. An `update` whose output has exactly its param's bytes
is an in-place update (the kernel writes the new value over the param):
those two may share. A `view ID OF` buffer is OF's bytes in another shape:
it must have OF's offset and byte count, and its reads count as reads of
OF. In a pipelined plan a buffer lives on the ranks of the pipeline axis
that hold it: a param's or an output's `held` list (every rank without
one), a temp's the stages of the sections whose steps name it and of the
transfers that move it (stage s on rank s mod the axis's size); two
buffers on disjoint ranks may share bytes.

Prints one `error: ...` line per problem and exits 1, or prints a summary
per plan:
  plan ok: B buffers, K kernels, S steps, arena A, R reused[, V views]
where R counts buffers placed on bytes of a buffer that died before them.
Options:
  --expect-reuse   also fail unless some dead buffer's bytes are reused
                   (in every plan)
  --lives          print each buffer's live range and byte range
"""

import re
import sys

ALIGNMENT = 64
DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "i32": 4, "i64": 8}
ROLES = {"input", "param", "output", "temp"}
INIT_ARGS = {"zeros": 0, "ones": 0, "constant": 1, "normal": 1, "uniform": 2}
COLLECTIVES = {"all-reduce", "all-gather", "reduce-scatter", "all-slice", "all-to-all",
               "broadcast"}
PHASES = {"forward", "backward", "weight", "update"}
SCHEDULES = {"gpipe", "1f1b", "interleaved", "zero_bubble"}
# Where each body record may come: a record may not follow one of a
# later group. Records that belong to the record before them (a buffer's
# shard, bound, held and view; a kernel's terms) are checked where read.
GROUP = {"buffer": 0, "view": 0, "shard": 0, "bound": 0, "held": 0,
         "gpu-image": 0, "kernel": 1, "terms": 1, "launch": 1,
         "step": 2, "collective": 2, "accumulate": 2, "section": 2, "transfer": 2,
         "carry": 3, "microbatches": 4, "assemble": 5, "optimizer": 6, "update": 7}


def fnv1a(data):
    value = 2166136261
    for byte in data:
        value ^= byte
        value = (value * 16777619) & 0xFFFFFFFF
    return value


def split_plans(data):
    """The plans in `data`: (bytes, first line number) per plan, each up to
    and including its `end` line; empty lines between plans are skipped."""
    plans, start, number, first = [], 0, 1, 1
    at = 0
    while at < len(data):
        newline = data.find(b"\n", at)
        stop = len(data) if newline < 0 else newline + 1
        line = data[at:stop]
        if at == start and line.strip() == b"":
            start, first = stop, number + 1
        elif line.startswith(b"end "):
            plans.append((data[start:stop], first))
            start, first = stop, number + 1
        at, number = stop, number + 1
    if data[start:].strip():
        plans.append((data[start:], first))
    return plans


class Plan:
    """One plan's records as read, and the errors found reading them."""

    def __init__(self, data, first_line):
        self.errors = []
        self.first_line = first_line
        self.buffers, self.kernels, self.steps = [], {}, []
        self.axes = {}  # mesh axis -> size
        self.pipeline = None  # (axis, stages)
        self.in_place = set()  # (output, param): an update written over its param
        self.views = {}  # view id -> the buffer whose bytes it is
        self.held = {}  # buffer id -> the pipeline ranks that hold it
        self.accumulated = set()  # the accumulates' sums
        self.microbatches = 0
        self.read(data)

    def error(self, message):
        self.errors.append(message)

    def at(self, index):
        """The line number, in the whole input, of the plan's line `index`."""
        return self.first_line + index

    def read(self, data):
        text = data.decode("utf-8")
        if not text.endswith("\n"):
            self.error("the plan does not end with a newline")
        lines = text.split("\n")[:-1]
        if not lines or not lines[-1].startswith("end "):
            self.error("the last line is not 'end CHECKSUM'")
        else:
            body = data[: len(data) - len(lines[-1]) - 1]
            expected = "%08x" % fnv1a(body)
            if lines[-1] != "end " + expected:
                self.error("checksum mismatch: '%s', computed %s" % (lines[-1], expected))
            lines = lines[:-1]
        at = self.read_header(lines)
        group = 0
        for index in range(at, len(lines)):
            fields = lines[index].split(" ")
            kind = fields[0]
            if kind not in GROUP or GROUP[kind] < group:
                self.error("line %d: unexpected record '%s'" % (self.at(index), kind))
                continue
            group = GROUP[kind]
            try:
                getattr(self, "read_" + kind.replace("-", "_"))(fields, self.at(index))
            except (ValueError, IndexError):
                self.error("line %d: bad %s record '%s'" % (self.at(index), kind, lines[index]))

    def read_header(self, lines):
        """loom-plan, model, device, [mesh, [pipeline]], arena: the index of
        the first line after them."""
        expected = ["loom-plan", "model", "device", "mesh", "pipeline", "arena"]
        optional = {"mesh", "pipeline"}
        at = 0
        for keyword in expected:
            present = at < len(lines) and lines[at].split(" ")[0] == keyword
            if not present:
                if keyword not in optional:
                    self.error("line %d: expected '%s'" % (self.at(at), keyword))
                continue
            fields = lines[at].split(" ")
            if keyword == "mesh":
                for axis in fields[2:]:
                    name, _, size = axis.partition("=")
                    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name) or name in self.axes \
                            or not size.isdigit() or int(size) <= 0:
                        self.error("line %d: bad mesh axis '%s'" % (self.at(at), axis))
                    else:
                        self.axes[name] = int(size)
            elif keyword == "pipeline":
                if len(fields) != 4 or fields[1] not in self.axes or not fields[2].isdigit() \
                        or fields[3] not in SCHEDULES \
                        or int(fields[2]) % self.axes[fields[1]]:
                    self.error("line %d: bad pipeline record '%s'" % (self.at(at), lines[at]))
                else:
                    self.pipeline = (fields[1], int(fields[2]))
            at += 1
        if lines and lines[0] != "loom-plan 1":
            self.error("line %d: expected 'loom-plan 1'" % self.at(0))
        arena = [line for line in lines[:at] if line.startswith("arena ")]
        self.arena = int(arena[0].split(" ")[1]) if arena else 0
        if self.arena <= 0 or self.arena % ALIGNMENT:
            self.error("arena %d is not a positive multiple of %d" % (self.arena, ALIGNMENT))
        return at

    # The records of the body, in their groups' order.

    def read_gpu_image(self, fields, number):
        """The device image and its launches: not part of the memory plan."""

    read_launch = read_gpu_image

    def read_buffer(self, fields, number):
        if len(fields) < 7:
            self.error("line %d: short buffer record" % number)
            return
        bid, name, role, dtype, shape, offset = fields[1:7]
        init = fields[7:]
        if int(bid) != len(self.buffers):
            self.error("line %d: buffer id %s is not %d" % (number, bid, len(self.buffers)))
        if role not in ROLES:
            self.error("line %d: unknown role '%s'" % (number, role))
        if dtype not in DTYPE_BYTES:
            self.error("line %d: unknown dtype '%s'" % (number, dtype))
            return
        dims = [] if shape == "scalar" else [int(d) for d in shape.split(",")]
        if any(d <= 0 for d in dims):
            self.error("line %d: bad shape '%s'" % (number, shape))
        count = 1
        for d in dims:
            count *= d
        nbytes = max(1, count * DTYPE_BYTES[dtype])
        offset = int(offset)
        if offset % ALIGNMENT:
            self.error("buffer %s (%s): offset %d is not %d-byte aligned"
                       % (bid, name, offset, ALIGNMENT))
        if offset < 0 or offset + nbytes > self.arena:
            self.error("buffer %s (%s): bytes [%d, %d) are outside the arena of %d"
                       % (bid, name, offset, offset + nbytes, self.arena))
        if role == "param":
            if not init or init[0] not in INIT_ARGS \
                    or len(init) != 1 + INIT_ARGS[init[0]]:
                self.error("buffer %s (%s): bad initializer '%s'" % (bid, name, " ".join(init)))
        elif init:
            self.error("buffer %s (%s): a %s with an initializer" % (bid, name, role))
        self.buffers.append({"id": len(self.buffers), "name": name, "role": role,
                             "dtype": dtype, "dims": dims, "offset": offset,
                             "bytes": nbytes, "attached": set()})

    def attach(self, kind, bid, number):
        """Whether a `kind` record for buffer `bid` may come here: right
        after that buffer's record (or the records attached to it), once."""
        if not self.buffers or bid != len(self.buffers) - 1:
            self.error("line %d: a %s record for buffer %d does not follow its buffer"
                       % (number, kind, bid))
            return False
        if kind in self.buffers[-1]["attached"]:
            self.error("line %d: a second %s record for buffer %d" % (number, kind, bid))
            return False
        self.buffers[-1]["attached"].add(kind)
        return True

    def read_view(self, fields, number):
        view, of = int(fields[1]), int(fields[2])
        if view != len(self.buffers) - 1 or not 0 <= of < view:
            self.error("line %d: a view of %d is not right after buffer %d's record"
                       % (number, of, view))
            return
        buffers = self.buffers
        if buffers[of]["role"] != "temp" or buffers[view]["role"] != "temp" \
                or of in self.views:
            self.error("line %d: view %d of %d is not a temp of a temp" % (number, view, of))
        if (buffers[view]["offset"], buffers[view]["bytes"], buffers[view]["dtype"]) != \
                (buffers[of]["offset"], buffers[of]["bytes"], buffers[of]["dtype"]):
            self.error("line %d: view %d is not buffer %d's bytes" % (number, view, of))
        self.views[view] = of

    def read_shard(self, fields, number):
        bid, spec = int(fields[1]), fields[2].split(",")
        if not self.axes:
            self.error("line %d: a shard record in a plan without a mesh" % number)
        if not self.attach("shard", bid, number):
            return
        if len(spec) != len(self.buffers[bid]["dims"]):
            self.error("line %d: shard '%s' of buffer %d has %d entries for %d dims"
                       % (number, fields[2], bid, len(spec), len(self.buffers[bid]["dims"])))
        used = [axis for entry in spec if entry != "-" for axis in entry.split("+")]
        if any(axis not in self.axes for axis in used) or len(set(used)) != len(used):
            self.error("line %d: shard '%s' names an unknown axis or one twice"
                       % (number, fields[2]))

    def read_bound(self, fields, number):
        bid, limit = int(fields[1]), int(fields[2])
        if not self.attach("bound", bid, number):
            return
        b = self.buffers[bid]
        if b["role"] != "input" or b["dtype"] not in ("i32", "i64") or limit <= 0:
            self.error("line %d: bound %d on %s %s (%s)" % (number, limit, b["role"], b["name"],
                                                          b["dtype"]))

    def read_held(self, fields, number):
        bid, ranks = int(fields[1]), [int(r) for r in fields[2].split(",")]
        if not self.pipeline:
            self.error("line %d: a held record without a pipeline record" % number)
            return
        if not self.attach("held", bid, number):
            return
        size = self.axes[self.pipeline[0]]
        if self.buffers[bid]["role"] not in ("param", "output") or ranks != sorted(set(ranks)) \
                or ranks[0] < 0 or ranks[-1] >= size:
            self.error("line %d: bad held record for %s %s" % (number, self.buffers[bid]["role"],
                                                              self.buffers[bid]["name"]))
        self.held[bid] = set(ranks)

    def read_kernel(self, fields, number):
        if fields[1] in self.kernels:
            self.error("line %d: duplicate kernel %s" % (number, fields[1]))
        self.kernels[fields[1]] = int(fields[2])
        self.last_kernel = fields[1]

    def read_terms(self, fields, number):
        kernel, arg = fields[1], int(fields[2])
        if getattr(self, "last_kernel", None) != kernel or not 0 <= arg < self.kernels[kernel]:
            self.error("line %d: bad terms record for kernel %s" % (number, kernel))

    def buffer_ids(self, ids, number):
        """`ids` as ints, each an existing buffer's."""
        ids = [int(a) for a in ids]
        for a in ids:
            if not 0 <= a < len(self.buffers):
                self.error("line %d: unknown buffer %d" % (number, a))
        return [a for a in ids if 0 <= a < len(self.buffers)]

    def add_step(self, kind, args, number):
        self.steps.append({"kind": kind, "args": args, "stages": self.stages})

    stages = ()  # the current section's stages (pipelined plans)

    def read_step(self, fields, number):
        name, args = fields[1], self.buffer_ids(fields[2:], number)
        if name not in self.kernels:
            self.error("line %d: unknown kernel %s" % (number, name))
        elif self.kernels[name] != len(fields) - 2:
            self.error("line %d: %s takes %d buffers, the step gives %d"
                       % (number, name, self.kernels[name], len(fields) - 2))
        self.add_step("step", args, number)

    def read_collective(self, fields, number):
        kind, axes, dims = fields[1], fields[2].split(","), fields[3]
        pairs = self.buffer_ids(fields[4:], number)
        if kind not in COLLECTIVES:
            self.error("line %d: unknown collective '%s'" % (number, kind))
        if any(axis not in self.axes for axis in axes) or len(set(axes)) != len(axes):
            self.error("line %d: collective over unknown or repeated axes '%s'"
                       % (number, fields[2]))
            return
        if len(fields[4:]) % 2 or not pairs or len(pairs) != len(fields[4:]) \
                or (kind != "all-reduce" and len(pairs) != 2):
            self.error("line %d: a %s takes IN OUT buffer pairs" % (number, kind))
            return
        group = 1
        for axis in axes:
            group *= self.axes[axis]
        for i in range(0, len(pairs), 2):
            self.check_collective_shapes(kind, dims, group, pairs[i], pairs[i + 1], number)
        self.add_step("collective", pairs, number)

    def check_collective_shapes(self, kind, dims, group, source, target, number):
        """OUT's shape and dtype from IN's, as docs/plan-format.md's table of
        collectives gives them."""
        a, b = self.buffers[source], self.buffers[target]
        expected = list(a["dims"])
        try:
            if kind in ("all-gather", "reduce-scatter", "all-slice"):
                d = int(dims)
                if kind == "all-gather":
                    expected[d] *= group
                elif expected[d] % group:
                    raise ValueError
                else:
                    expected[d] //= group
            elif kind == "all-to-all":
                split, concat = (int(d) for d in dims.split(":"))
                if expected[split] % group:
                    raise ValueError
                expected[split] //= group
                expected[concat] *= group
            elif dims != "-":
                raise ValueError
        except (ValueError, IndexError):
            self.error("line %d: %s with dims '%s' does not apply to buffer %d (%s)"
                       % (number, kind, dims, source, ",".join(map(str, a["dims"]))))
            return
        if b["dims"] != expected or a["dtype"] != b["dtype"]:
            self.error("line %d: %s of buffer %d (%s %s) into %d is %s %s, expected %s"
                       % (number, kind, source, a["dtype"], ",".join(map(str, a["dims"])), target,
                          b["dtype"], ",".join(map(str, b["dims"])),
                          ",".join(map(str, expected))))

    def read_accumulate(self, fields, number):
        pair = self.buffer_ids(fields[1:3], number)
        if len(fields) != 3 or len(pair) != 2:
            self.error("line %d: an accumulate takes IN OUT" % number)
            return
        a, b = (self.buffers[i] for i in pair)
        if a["role"] != "temp" or b["role"] not in ("temp", "output") or pair[0] == pair[1] \
                or a["dtype"] != "f32" or b["dtype"] != "f32" or a["dims"] != b["dims"] \
                or pair[1] in self.accumulated:
            self.error("line %d: accumulate %d into %d: needs a temp and another f32 buffer of "
                       "its shape, the result of no other accumulate" % (number, *pair))
        self.accumulated.add(pair[1])
        self.add_step("accumulate", pair, number)

    def read_section(self, fields, number):
        if not self.pipeline or fields[1] not in PHASES:
            self.error("line %d: bad section record" % number)
            return
        stages = [int(s) for s in fields[2].split(",")]
        if any(not 0 <= s < self.pipeline[1] for s in stages) or len(set(stages)) != len(stages) \
                or (fields[1] != "update" and len(stages) != 1):
            self.error("line %d: bad section stages '%s'" % (number, fields[2]))
        self.stages = tuple(stages)

    def read_transfer(self, fields, number):
        source, target = int(fields[1]), int(fields[2])
        ids = self.buffer_ids(fields[3:4], number)
        if not self.pipeline or not ids:
            self.error("line %d: bad transfer record" % number)
            return
        self.steps.append({"kind": "transfer", "args": ids, "stages": (source, target)})

    def read_carry(self, fields, number):
        if not self.pipeline or fields[1] not in ("forward", "backward"):
            self.error("line %d: bad carry record" % number)
            return
        self.buffer_ids(fields[3:], number)

    def read_microbatches(self, fields, number):
        self.microbatches = int(fields[1])
        if not 2 <= self.microbatches <= 1048576:
            self.error("line %d: bad microbatches '%s'" % (number, fields[1]))

    def read_assemble(self, fields, number):
        ids = self.buffer_ids(fields[1:2], number)
        if not self.microbatches or not ids or self.buffers[ids[0]]["role"] != "output" \
                or fields[2] not in ("rows", "mean", "sum"):
            self.error("line %d: bad assemble record" % number)

    def read_optimizer(self, fields, number):
        """Hyperparameters: the runtime's business."""

    def read_update(self, fields, number):
        ids = self.buffer_ids(fields[1:3], number)
        if len(ids) != 2:
            return
        output, param = ids
        b = self.buffers
        if (b[output]["dtype"], b[output]["dims"]) != (b[param]["dtype"], b[param]["dims"]):
            self.error("line %d: update %d into %d changes the dtype or shape"
                       % (number, output, param))
        if (b[output]["offset"], b[output]["bytes"]) == (b[param]["offset"], b[param]["bytes"]):
            self.in_place.add((min(output, param), max(output, param)))

    def check_errors(self):
        """Every error of the plan, its memory plan's included."""
        self.check_placement(False, False)
        return self.errors

    # The memory plan.

    def check_placement(self, expect_reuse, show_lives):
        buffers, steps = self.buffers, self.steps
        names = [b["name"] for b in buffers]
        for name in set(names):
            if names.count(name) > 1:
                self.error("duplicate buffer name %s" % name)

        # Live ranges, in steps; -1 is before the first step, len(steps)
        # after the last. Ranks: the pipeline ranks a buffer lives on.
        size = self.axes[self.pipeline[0]] if self.pipeline else 1
        first, last, ranks = {}, {}, {}
        last_accumulate = max([i for i, s in enumerate(steps) if s["kind"] == "accumulate"],
                              default=-1)
        for index, step in enumerate(steps):
            for a in step["args"]:
                a = self.views.get(a, a)
                first.setdefault(a, index)
                last[a] = index
                ranks.setdefault(a, set()).update(s % size for s in step["stages"])
        end = len(steps)
        placed = [b for b in buffers if b["id"] not in self.views]
        for b in placed:
            role = b["role"]
            if role in ("input", "param") or b["id"] in self.accumulated:
                b["first"] = -1
            elif b["id"] in first:
                b["first"] = first[b["id"]]
            else:
                self.error("buffer %d (%s): a %s no step writes" % (b["id"], b["name"], role))
                b["first"] = -1
            if role in ("param", "output"):
                b["last"] = end
            else:
                b["last"] = last.get(b["id"], b["first"])
            if role == "input":
                b["last"] = max(b["last"], last_accumulate)
            if not self.pipeline or role == "input":
                b["ranks"] = set(range(size))
            elif role in ("param", "output"):
                b["ranks"] = self.held.get(b["id"], set(range(size)))
            else:
                b["ranks"] = ranks.get(b["id"], set())
            if show_lives:
                print("live %s [%d, %d] bytes [%d, %d)" % (b["name"], b["first"], b["last"],
                                                          b["offset"], b["offset"] + b["bytes"]))

        reused = set()
        for i, a in enumerate(placed):
            for b in placed[i + 1:]:
                lives = a["first"] <= b["last"] and b["first"] <= a["last"] \
                    and a["ranks"] & b["ranks"]
                shares = a["offset"] < b["offset"] + b["bytes"] and \
                    b["offset"] < a["offset"] + a["bytes"]
                if lives and shares and (a["id"], b["id"]) not in self.in_place:
                    self.error("buffers %d (%s, live %d..%d) and %d (%s, live %d..%d) overlap "
                               "in bytes [%d, %d)" % (
                                   a["id"], a["name"], a["first"], a["last"],
                                   b["id"], b["name"], b["first"], b["last"],
                                   max(a["offset"], b["offset"]),
                                   min(a["offset"] + a["bytes"], b["offset"] + b["bytes"])))
                elif shares:
                    reused.add(b["id"] if b["first"] > a["last"] else a["id"])
        if expect_reuse and not reused:
            self.error("no buffer reuses the bytes of a dead one")

        # The arena is the peak of the plan: no more than the end of the
        # last placed buffer (rounded up), and no less than the bytes live
        # at once on any rank.
        top = max([b["offset"] + b["bytes"] for b in buffers] or [0])
        if self.arena != max(ALIGNMENT, -(-top // ALIGNMENT) * ALIGNMENT):
            self.error("arena %d is not the end of the highest buffer (%d) rounded up"
                       % (self.arena, top))
        # (An in-place update's output is its param's bytes: counted once.)
        aliases = {max(pair) for pair in self.in_place}
        for rank in range(size):
            for index in range(-1, end + 1):
                live = sum(b["bytes"] for b in placed
                           if b["first"] <= index <= b["last"] and b["id"] not in aliases
                           and rank in b["ranks"])
                if live > self.arena:
                    self.error("%d bytes live at step %d do not fit the arena of %d"
                               % (live, index, self.arena))
        return len(reused)


def main(argv):
    expect_reuse = "--expect-reuse" in argv
    show_lives = "--lives" in argv
    paths = [a for a in argv if not a.startswith("--")]
    data = open(paths[0], "rb").read() if paths else sys.stdin.buffer.read()
    plans = split_plans(data) or [(data, 1)]
    status = 0
    for text, first_line in plans:
        plan = Plan(text, first_line)
        reused = plan.check_placement(expect_reuse, show_lives)
        for message in plan.errors:
            print("error: " + message)
        if plan.errors:
            status = 1
            continue
        print("plan ok: %d buffers, %d kernels, %d steps, arena %d, %d reused%s"
              % (len(plan.buffers), len(plan.kernels), len(plan.steps), plan.arena, reused,
                 ", %d views" % len(plan.views) if plan.views else ""))
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
