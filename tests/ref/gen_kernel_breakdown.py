#!/usr/bin/env python3
"""HTA kernel breakdown references (tests/ref/fixtures/kernels/), from PyPI holistictraceanalysis.

    python3 -m venv /tmp/hta && /tmp/hta/bin/pip install holistictraceanalysis
    /tmp/hta/bin/python tests/ref/gen_kernel_breakdown.py [SHARED]   # SHARED: /work/shared

Writes many_names/rank-0.json, a small Kineto trace (seeded random) whose three kernel types
have 14, 12 and 3 kernel names (so HTA groups the first two into "others" and regroups them on
the per-name sums, and keeps the third per launch), and for it and each shared trace below the
rows of HTA's get_gpu_kernel_breakdown(include_memory_kernels=True) as <name>.hta.json:
[{"type", "name", "sum", "max", "min", "mean", "std"}] in HTA's order. tests/cli/trace-analyze.bats
compares swift-trace-analyze's processes[0].kernels with them (sum_us ... std_us).
"""
import json
import os
import random
import sys

from hta.trace_analysis import TraceAnalysis

FIX = "tests/ref/fixtures/kernels"
SHARED_TRACES = {
    "mtia": "data/traces/hta/mtia_trace_single_rank",
    "ns_resolution": "data/traces/hta/ns_resolution_trace",
    "nccl_parser_config": "data/traces/hta/nccl_parser_config",
    "resnet50_nw0": "data/traces/kineto-tb/resnet50_num_workers_0",
}


def many_names_trace():
    """Three profiler steps on one stream; kernels of 14 compute, 12 NCCL and 3 memory names."""
    rng = random.Random(17)
    names = ([("gemm_kernel_%02d" % i, "kernel") for i in range(14)] +
             [("ncclDevKernel_AllReduce_Sum_f32_RING_LL_%02d" % i, "kernel") for i in range(12)] +
             [("Memcpy HtoD (Pageable -> Device)", "gpu_memcpy"),
              ("Memcpy DtoH (Device -> Pageable)", "gpu_memcpy"),
              ("Memset (Device)", "gpu_memset")])
    ev, t, corr = [], 1000, 1
    for step in range(3):
        b = t
        for _ in range(60):
            nm, cat = rng.choice(names)
            dur = rng.randint(2, 400)
            ev.append({"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "pid": 1,
                       "tid": 1, "ts": t, "dur": 4, "args": {"correlation": corr}})
            ev.append({"ph": "X", "cat": cat, "name": nm, "pid": 0, "tid": 7, "ts": t + 5,
                       "dur": dur, "args": {"device": 0, "stream": 7, "correlation": corr}})
            t += dur + 6 + rng.randint(0, 20)
            corr += 1
        ev.append({"ph": "X", "cat": "cpu_op", "name": "ProfilerStep#%d" % step, "pid": 1,
                   "tid": 1, "ts": b - 1, "dur": t - b + 2, "args": {}})
        t += 50
    return {"schemaVersion": 1, "deviceProperties": [], "distributedInfo": {"rank": 0},
            "traceEvents": sorted(ev, key=lambda e: e["ts"])}


def hta_rows(trace_dir):
    ta = TraceAnalysis(trace_dir=trace_dir)
    _, df = ta.get_gpu_kernel_breakdown(visualize=False, include_memory_kernels=True)
    rows = []
    for _, r in df.iterrows():
        rows.append({"type": r["kernel_type"], "name": r["name"], "sum": float(r["sum (us)"]),
                     "max": float(r["max (us)"]), "min": float(r["min (us)"]),
                     "mean": float(r["mean (us)"]), "std": float(r["stddev"])})
    return rows


def main():
    shared = sys.argv[1] if len(sys.argv) > 1 else "/work/shared"
    d = os.path.join(FIX, "many_names")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, "rank-0.json"), "w") as f:
        json.dump(many_names_trace(), f)
    todo = {"many_names": d}
    todo.update({k: os.path.join(shared, v) for k, v in SHARED_TRACES.items()})
    for key, path in todo.items():
        rows = hta_rows(path)
        with open(os.path.join(FIX, key + ".hta.json"), "w") as f:
            json.dump(rows, f, indent=0)
        print("%s: %d rows" % (key, len(rows)))


if __name__ == "__main__":
    main()
