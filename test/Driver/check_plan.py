#!/usr/bin/env python3
"""Checks a Loom plan (docs/plan-format.md) read from a file or stdin.

Verifies the record order, the FNV-1a checksum of the `end` line, buffer
ids, roles, dtypes and shapes, 64-byte aligned offsets inside the arena,
kernel argument counts, and the static memory plan: two buffers whose live
ranges intersect never share a byte. A buffer lives from the step that
first names it (inputs and params: from before the first step) to the step
that last names it (params and outputs: to after the last step). An
`update` whose output has exactly its param's bytes is an in-place update
(the kernel writes the new value over the param): those two may share.
A `view ID OF` buffer is OF's bytes in another shape: it must have OF's
offset and byte count, and its reads count as reads of OF.

Prints one `error: ...` line per problem and exits 1, or prints a summary:
  plan ok: B buffers, K kernels, S steps, arena A, R reused
where R counts buffers placed on bytes of a buffer that died before them.
Options:
  --expect-reuse   also fail unless some dead buffer's bytes are reused
  --lives          print each buffer's live range and byte range
"""

import sys

ALIGNMENT = 64
DTYPE_BYTES = {"f32": 4, "f16": 2, "bf16": 2, "i32": 4, "i64": 8}
ROLES = {"input", "param", "output", "temp"}
INIT_ARGS = {"zeros": 0, "ones": 0, "constant": 1, "normal": 1, "uniform": 2}


def fnv1a(data):
    value = 2166136261
    for byte in data:
        value ^= byte
        value = (value * 16777619) & 0xFFFFFFFF
    return value


def main(argv):
    expect_reuse = "--expect-reuse" in argv
    show_lives = "--lives" in argv
    paths = [a for a in argv if not a.startswith("--")]
    data = open(paths[0], "rb").read() if paths else sys.stdin.buffer.read()
    errors = []

    def error(message):
        errors.append(message)

    text = data.decode("utf-8")
    if not text.endswith("\n"):
        error("the plan does not end with a newline")
    lines = text.split("\n")[:-1]
    if not lines or not lines[-1].startswith("end "):
        error("the last line is not 'end CHECKSUM'")
    else:
        body = data[: len(data) - len(lines[-1]) - 1]
        expected = "%08x" % fnv1a(body)
        if lines[-1] != "end " + expected:
            error("checksum mismatch: '%s', computed %s" % (lines[-1], expected))

    header = ["loom-plan", "model", "device", "arena"]
    for i, keyword in enumerate(header):
        if i >= len(lines) or lines[i].split(" ")[0] != keyword:
            error("line %d: expected '%s'" % (i + 1, keyword))
    if lines and lines[0] != "loom-plan 1":
        error("line 1: expected 'loom-plan 1'")
    arena = int(lines[3].split(" ")[1]) if len(lines) > 3 else 0
    if arena <= 0 or arena % ALIGNMENT:
        error("arena %d is not a positive multiple of %d" % (arena, ALIGNMENT))

    buffers, kernels, steps = [], {}, []
    order = {"buffer": 0, "view": 0, "kernel": 1, "step": 2, "optimizer": 3, "update": 4,
             "end": 5}
    in_place = set()  # (output, param): an update written over its param
    views = {}  # view id -> the buffer whose bytes it is
    stage = 0
    for number, line in enumerate(lines[4:], start=5):
        fields = line.split(" ")
        kind = fields[0]
        if kind in ("gpu-image", "launch", "bound"):
            # The device code's records, and the values an input may hold:
            # not part of the memory plan.
            continue
        if kind not in order or order[kind] < stage:
            error("line %d: unexpected record '%s'" % (number, kind))
            continue
        stage = order[kind]
        if kind == "buffer":
            if len(fields) < 7:
                error("line %d: short buffer record" % number)
                continue
            bid, name, role, dtype, shape, offset = fields[1:7]
            init = fields[7:]
            if int(bid) != len(buffers):
                error("line %d: buffer id %s is not %d" % (number, bid, len(buffers)))
            if role not in ROLES:
                error("line %d: unknown role '%s'" % (number, role))
            if dtype not in DTYPE_BYTES:
                error("line %d: unknown dtype '%s'" % (number, dtype))
                continue
            dims = [] if shape == "scalar" else [int(d) for d in shape.split(",")]
            if any(d <= 0 for d in dims):
                error("line %d: bad shape '%s'" % (number, shape))
            count = 1
            for d in dims:
                count *= d
            nbytes = max(1, count * DTYPE_BYTES[dtype])
            offset = int(offset)
            if offset % ALIGNMENT:
                error("buffer %s (%s): offset %d is not %d-byte aligned"
                      % (bid, name, offset, ALIGNMENT))
            if offset < 0 or offset + nbytes > arena:
                error("buffer %s (%s): bytes [%d, %d) are outside the arena of %d"
                      % (bid, name, offset, offset + nbytes, arena))
            if role == "param":
                if not init or init[0] not in INIT_ARGS \
                        or len(init) != 1 + INIT_ARGS[init[0]]:
                    error("buffer %s (%s): bad initializer '%s'"
                          % (bid, name, " ".join(init)))
            elif init:
                error("buffer %s (%s): a %s with an initializer" % (bid, name, role))
            buffers.append({"id": int(bid), "name": name, "role": role,
                            "offset": offset, "bytes": nbytes})
        elif kind == "view":
            view, of = int(fields[1]), int(fields[2])
            if view != len(buffers) - 1 or not 0 <= of < view:
                error("line %d: a view of %d is not right after buffer %d's record"
                      % (number, of, view))
                continue
            if buffers[of]["role"] != "temp" or buffers[view]["role"] != "temp" \
                    or of in views:
                error("line %d: view %d of %d is not a temp of a temp" % (number, view, of))
            if (buffers[view]["offset"], buffers[view]["bytes"]) != \
                    (buffers[of]["offset"], buffers[of]["bytes"]):
                error("line %d: view %d is not buffer %d's bytes" % (number, view, of))
            views[view] = of
        elif kind == "kernel":
            if fields[1] in kernels:
                error("line %d: duplicate kernel %s" % (number, fields[1]))
            kernels[fields[1]] = int(fields[2])
        elif kind == "step":
            name, args = fields[1], [int(a) for a in fields[2:]]
            if name not in kernels:
                error("line %d: unknown kernel %s" % (number, name))
            elif kernels[name] != len(args):
                error("line %d: %s takes %d buffers, the step gives %d"
                      % (number, name, kernels[name], len(args)))
            for a in args:
                if a >= len(buffers):
                    error("line %d: unknown buffer %d" % (number, a))
            steps.append((name, args))
        elif kind == "update":
            output, param = int(fields[1]), int(fields[2])
            if max(output, param) >= len(buffers):
                error("line %d: unknown buffer" % number)
            elif (buffers[output]["offset"], buffers[output]["bytes"]) == \
                    (buffers[param]["offset"], buffers[param]["bytes"]):
                in_place.add((min(output, param), max(output, param)))

    names = [b["name"] for b in buffers]
    for name in set(names):
        if names.count(name) > 1:
            error("duplicate buffer name %s" % name)

    # Live ranges, in steps; -1 is before the first step, len(steps) after
    # the last.
    first = {}
    last = {}
    for index, (_, args) in enumerate(steps):
        for a in args:
            a = views.get(a, a)
            first.setdefault(a, index)
            last[a] = index
    end = len(steps)
    placed = [b for b in buffers if b["id"] not in views]
    for b in placed:
        role = b["role"]
        if role in ("input", "param"):
            b["first"] = -1
        elif b["id"] in first:
            b["first"] = first[b["id"]]
        else:
            error("buffer %d (%s): a %s no step writes" % (b["id"], b["name"], role))
            b["first"] = -1
        if role in ("param", "output"):
            b["last"] = end
        else:
            b["last"] = last.get(b["id"], b["first"])
        if show_lives:
            print("live %s [%d, %d] bytes [%d, %d)" % (b["name"], b["first"], b["last"],
                                                      b["offset"], b["offset"] + b["bytes"]))

    reused = set()
    for i, a in enumerate(placed):
        for b in placed[i + 1:]:
            lives = a["first"] <= b["last"] and b["first"] <= a["last"]
            shares = a["offset"] < b["offset"] + b["bytes"] and \
                b["offset"] < a["offset"] + a["bytes"]
            if lives and shares and (a["id"], b["id"]) not in in_place:
                error("buffers %d (%s, live %d..%d) and %d (%s, live %d..%d) overlap "
                      "in bytes [%d, %d)" % (
                          a["id"], a["name"], a["first"], a["last"],
                          b["id"], b["name"], b["first"], b["last"],
                          max(a["offset"], b["offset"]),
                          min(a["offset"] + a["bytes"], b["offset"] + b["bytes"])))
            elif shares:
                reused.add(b["id"] if b["first"] > a["last"] else a["id"])
    if expect_reuse and not reused:
        error("no buffer reuses the bytes of a dead one")

    # The arena is the peak of the plan: no more than the end of the last
    # placed buffer (rounded up), and no less than the bytes live at once.
    top = max([b["offset"] + b["bytes"] for b in buffers] or [0])
    if arena != max(ALIGNMENT, -(-top // ALIGNMENT) * ALIGNMENT):
        error("arena %d is not the end of the highest buffer (%d) rounded up"
              % (arena, top))
    # (An in-place update's output is its param's bytes: counted once.)
    aliases = {max(pair) for pair in in_place}
    for index in range(-1, end + 1):
        live = sum(b["bytes"] for b in placed
                   if b["first"] <= index <= b["last"] and b["id"] not in aliases)
        if live > arena:
            error("%d bytes live at step %d do not fit the arena of %d"
                  % (live, index, arena))

    for message in errors:
        print("error: " + message)
    if errors:
        return 1
    print("plan ok: %d buffers, %d kernels, %d steps, arena %d, %d reused%s"
          % (len(buffers), len(kernels), len(steps), arena, len(reused),
             ", %d views" % len(views) if views else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
