#!/usr/bin/env python3
"""Checks a `loomc --kernel-report=json` report against its own figures:

  check_kernel_report.py REPORT.json

Every launch's occupancy is recomputed from its threads, registers and
shared memory with the formula of the CUDA occupancy calculator
(cuda_occupancy.h), independently of loomc, from the report's `arch` row;
its roofline time from its FLOPs and bytes and the `device` peaks (16-bit
tensor peak: the models checked are bf16); each program's totals from its
launches. Prints one summary line per program for FileCheck and exits 1 on
the first mismatch.
"""
import json
import sys

LAUNCH_KEYS = {"kernel", "function", "grid", "block", "cluster", "threads_per_block",
               "shared_bytes", "registers", "spill_store_bytes",
               "spill_load_bytes", "tensor_core_instructions", "occupancy",
               "flops", "tensor_core_flops", "bytes", "roofline_us", "bound"}
TOTAL_KEYS = {"launches", "kernels", "flops", "tensor_core_flops",
              "tensor_core_share", "bytes", "roofline_us",
              "compute_bound_launches", "spill_bytes"}


def fail(message):
    print("error: " + message)
    sys.exit(1)


def round_up(value, unit):
    return -(-value // unit) * unit


def blocks_per_sm(arch, threads, registers, shared):
    if threads > arch["max_threads_per_block"]:
        return 0
    warps = -(-threads // 32)
    limits = [arch["max_warps_per_sm"] // warps, arch["max_blocks_per_sm"]]
    if registers:
        per_warp = round_up(registers * 32, arch["register_allocation_unit"])
        parts = arch["warp_allocation_granularity"]
        if (registers > arch["max_registers_per_thread"] or
                per_warp * round_up(warps, parts) > arch["max_registers_per_block"]):
            limits.append(0)
        else:
            limits.append(arch["registers_per_sm"] // parts // per_warp * parts // warps)
    smem = round_up(shared + arch["reserved_shared_bytes_per_block"],
                    arch["shared_allocation_unit"])
    if smem > arch["max_shared_bytes_per_block"] + arch["reserved_shared_bytes_per_block"]:
        limits.append(0)
    elif smem:
        limits.append(arch["shared_bytes_per_sm"] // smem)
    return min(limits)


def main():
    report = json.load(open(sys.argv[1]))
    if set(report) != {"device", "arch", "ptxas", "programs"}:
        fail(f"top-level keys {sorted(report)}")
    arch, device = report["arch"], report["device"]
    for program in report["programs"]:
        totals = program["totals"]
        if set(totals) != TOTAL_KEYS:
            fail(f"totals keys {sorted(totals)}")
        launches = program["launches"]
        flops = tensor = size = spills = 0
        seconds = 0.0
        for launch in launches:
            if set(launch) != LAUNCH_KEYS:
                fail(f"launch keys {sorted(launch)}")
            name = launch["function"]
            cluster = launch["cluster"]
            if cluster is not None and (
                    len(cluster) != 3 or
                    any(g % c for g, c in zip(launch["grid"], cluster))):
                fail(f"{name}: cluster {cluster} does not divide the grid")
            threads = launch["block"][0] * launch["block"][1] * launch["block"][2]
            if threads != launch["threads_per_block"]:
                fail(f"{name}: threads")
            blocks = blocks_per_sm(arch, threads, launch["registers"] or 0,
                                   launch["shared_bytes"])
            occupancy = launch["occupancy"]
            warps = blocks * -(-threads // 32)
            if (occupancy["blocks_per_sm"], occupancy["warps_per_sm"]) != (blocks, warps):
                fail(f"{name}: occupancy {occupancy}, expected {blocks} blocks")
            if abs(occupancy["fraction"] - warps / arch["max_warps_per_sm"]) > 1e-9:
                fail(f"{name}: occupancy fraction")
            if launch["tensor_core_flops"] and not launch["tensor_core_instructions"]:
                fail(f"{name}: tensor-core FLOPs without mma")
            compute = (launch["tensor_core_flops"] / (device["tensor_tflops_16bit"] * 1e12) +
                       (launch["flops"] - launch["tensor_core_flops"]) /
                       (device["f32_tflops"] * 1e12))
            memory = launch["bytes"] / (device["bandwidth_gbs"] * 1e9)
            if abs(launch["roofline_us"] - 1e6 * max(compute, memory)) > 1e-9:
                fail(f"{name}: roofline {launch['roofline_us']}")
            flops += launch["flops"]
            tensor += launch["tensor_core_flops"]
            size += launch["bytes"]
            seconds += launch["roofline_us"]
            spills += (launch["spill_store_bytes"] or 0) + (launch["spill_load_bytes"] or 0)
        if (totals["launches"], totals["flops"], totals["tensor_core_flops"],
                totals["bytes"]) != (len(launches), flops, tensor, size):
            fail(f"{program['name']}: totals {totals}")
        if abs(totals["roofline_us"] - seconds) > 1e-6:
            fail(f"{program['name']}: total roofline")
        print(f"{program['name']} (ranks={program['ranks']}): {len(launches)} launches, "
              f"occupancy and roofline recomputed for all, "
              f"tensor-core FLOPs {tensor} of {flops}, spill bytes {spills}")


if __name__ == "__main__":
    main()
