"""Loom's memory-bound GPU kernels against a device-to-device copy (GPU check).

usage: bandwidth.py DIR WORK MODEL...

For each MODEL: DIR/MODEL.report.json is its `loomc --kernel-report=json`
(from prepare.sh), WORK/MODEL.trace*.json its `--device cuda --trace` runs.
A step's time is the sum of its launches' CUDA-event durations (the best
over the runs), its bytes those of the buffers it reads and writes (the
trace's bytes_read + bytes_written, from the plan): its effective bandwidth,
as a copy's is 2 x bytes / time. Matmuls (tensor-core launches, or more than
4 FLOPs per byte) and a run's first step (its launch waits for the host) are
left out; the copy is measured here, with torch, in the same run. Needs Python 3 only; without torch or a GPU the bandwidths are
printed in GB/s alone.
"""
import glob
import json
import os
import statistics
import sys

# Below this a step is bound by launch latency (a few microseconds), not by
# bandwidth: 16 MiB take 3.5 us at 4.8 TB/s.
MIN_BYTES = 16 << 20
TARGET = 0.85  # of the copy's bandwidth (the target)
COPY_BYTES = 1 << 28


def copy_bandwidth():
    """GB/s of a 256 MiB device-to-device copy (read + write), best of 20
    timed with CUDA events; (None, why) without torch or a GPU."""
    try:
        import torch

        if not torch.cuda.is_available():
            return None, "torch sees no CUDA device"
        src = torch.empty(COPY_BYTES, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        for _ in range(3):
            dst.copy_(src)
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        best = float("inf")
        for _ in range(20):
            start.record()
            dst.copy_(src)
            stop.record()
            stop.synchronize()
            best = min(best, start.elapsed_time(stop))  # milliseconds
        return 2 * COPY_BYTES / (best * 1e-3) / 1e9, None
    except Exception as error:  # no torch, no driver, ...
        return None, f"{type(error).__name__}: {error}"


def kernel_classes(report_path):
    """Per plan kernel: 'matmul', 'elementwise' (one launch) or 'reduction'
    (several: softmax, norms), and the report's device, from the kernel
    report; None and why not without it."""
    try:
        with open(report_path) as f:
            report = json.load(f)
    except (OSError, ValueError) as error:
        return None, f"no kernel report ({error}): every step counted as memory-bound"
    launches = {}
    for launch in report["programs"][0]["launches"]:
        launches.setdefault(launch["kernel"], []).append(launch)
    classes = {}
    for kernel, group in launches.items():
        flops = sum(l["flops"] for l in group)
        moved = sum(l["bytes"] for l in group)
        tensor = any(l["tensor_core_flops"] or l["tensor_core_instructions"] for l in group)
        if tensor or flops > 4 * max(moved, 1):
            classes[kernel] = "matmul"
        else:
            classes[kernel] = "elementwise" if len(group) == 1 else "reduction"
    return classes, report["device"]


def step_times(paths):
    """Per step: kernel, launches, bytes and the best time (us) over the
    traces in `paths`."""
    steps = {}
    for path in paths:
        with open(path) as f:
            events = json.load(f)["traceEvents"]
        run = {}
        for event in events:
            if event.get("cat") != "cuda":
                continue
            args = event["args"]
            step = run.setdefault(args["step"], {
                "kernel": args["kernel"], "launches": 0, "us": 0.0,
                "bytes": args.get("bytes_read", 0) + args.get("bytes_written", 0)})
            step["launches"] += 1
            step["us"] += event["dur"]
        for index, step in run.items():
            if index not in steps or step["us"] < steps[index]["us"]:
                steps[index] = step
    return steps


def ratio(value, copy):
    return f"{value / copy:7.3f}" if copy else "      -"


def main():
    here, work, models = sys.argv[1], sys.argv[2], sys.argv[3:]
    copy, why = copy_bandwidth()
    if copy:
        print(f"copy: {COPY_BYTES >> 20} MiB device to device, best of 20: "
              f"{copy:.1f} GB/s (read + write)")
    else:
        print(f"copy: baseline unavailable ({why}); bandwidths in GB/s only")
    rated = {}
    for model in models:
        traces = sorted(glob.glob(os.path.join(work, f"{model}.trace*.json")))
        if not traces:
            print(f"{model}: no trace (its cuda runs failed)")
            continue
        classes, device = kernel_classes(os.path.join(here, f"{model}.report.json"))
        steps = step_times(traces)
        if any(s["bytes"] == 0 for s in steps.values()):
            print(f"{model}: the trace has no bytes (a runtime before bytes_read); skipped")
            continue
        # The GPU idles until the first launch arrives, so its events also
        # bracket the host's launch overhead.
        first = min(steps)
        memory = {i: s for i, s in steps.items()
                  if i != first and (not classes or classes.get(s["kernel"]) != "matmul")}
        large = {i: s for i, s in memory.items() if s["bytes"] >= MIN_BYTES}
        small = [s for i, s in memory.items() if i not in large]
        spec = f"; spec {device['bandwidth_gbs']} GB/s ({device['name']})" if classes else ""
        matmuls = sum(1 for s in steps.values()
                      if classes and classes.get(s["kernel"]) == "matmul")
        print(f"{model}: {len(steps)} kernel steps, {matmuls} matmuls, "
              f"best of {len(traces)} runs{spec}")
        if not classes:
            print(f"  {device}")
        if large:
            print(f"  {'step':>4}  {'kernel':<12} {'class':<11} {'launches':>8} "
                  f"{'MiB':>8} {'us':>9} {'GB/s':>8} {'of copy':>7}")
        for index in sorted(large):
            s = large[index]
            gbs = s["bytes"] / (s["us"] * 1e-6) / 1e9
            kind = classes.get(s["kernel"], "?") if classes else "?"
            rated.setdefault(kind, []).append(gbs)
            print(f"  {index:>4}  {s['kernel']:<12} {kind:<11} {s['launches']:>8} "
                  f"{s['bytes'] / 2**20:8.1f} {s['us']:9.1f} {gbs:8.1f} {ratio(gbs, copy)}")
        print(f"  step {first} ({steps[first]['kernel']}) not rated: the first launch "
              "of a run waits for the host")
        if small:
            print(f"  {len(small)} memory-bound steps move less than {MIN_BYTES >> 20} MiB "
                  f"each ({sum(s['us'] for s in small):.1f} us in all): bound by launch "
                  "latency, not rated")
    if not rated:
        print("memory-bound: no step large enough to rate")
        return
    def rate(values):
        best, median = max(values), statistics.median(values)
        if not copy:
            return f"best {best:.1f} GB/s, median {median:.1f} GB/s"
        return (f"best {best:.1f} GB/s ({best / copy:.3f} of the copy), "
                f"median {median:.1f} GB/s ({median / copy:.3f})")

    for kind, values in sorted(rated.items()):
        print(f"{kind}: {len(values)} steps, {rate(values)}")
    everything = [v for values in rated.values() for v in values]
    verdict = "no copy baseline"
    if copy:
        met = statistics.median(everything) >= TARGET * copy
        verdict = f"median >= {TARGET} of the copy: {'met' if met else 'NOT met'}"
    print(f"memory-bound: {len(everything)} steps, {rate(everything)}; {verdict}")

if __name__ == "__main__":
    main()
