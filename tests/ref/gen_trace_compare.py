#!/usr/bin/env python3
"""HTA's TraceDiff on real traces (tests/ref/fixtures/trace_compare/hta.json), the expectations of
`swift-trace-analyze --compare` in tests/cli/trace-compare.bats.

    python3 -m venv /tmp/hta && /tmp/hta/bin/pip install holistictraceanalysis
    /tmp/hta/bin/python tests/ref/gen_trace_compare.py [SHARED]   # SHARED defaults to ../shared

For each case, HTA's TraceDiff.compare_traces(control, test, control_iteration=ITER,
test_iteration=ITER) with its defaults otherwise (the first rank of each trace, device_type ALL,
full names), and TraceDiff.ops_diff on the same arguments (hta/trace_diff.py). ITER is None
(HTA's default: the first iteration of each trace) or the list of the iterations in
`--steps A-B` (the same for both traces, as our --steps is). The fixture keeps per op name
[control_counts, control_total_duration, test_counts, test_total_duration] (µs, as HTA sums
them: after its ns rounding of float timestamps) and the ops_diff list it is in (added, deleted,
increased, decreased or unchanged: each name is in exactly one).

Cases: HTA's own test traces of TraceDiff (data/traces/hta/trace_compare: base and test, each a
folder of one rank-1 trace) with the default iteration, both iterations, the second alone and
reversed; the two real resnet50 runs of the TensorBoard plugin's tests (kineto-tb:
num_workers 0 against 4), first iteration and all six; an ns-resolution trace against itself
(HTA rounds its float timestamps); and two hand-made traces for the corners of HTA's iteration
rule (tests/ref/fixtures/trace_compare/edge, written here; dirs named "@edge/..." in the fixture
are relative to tests/ref/fixtures/trace_compare/edge).
"""
import json
import logging
import os
import sys

logging.disable(logging.WARNING)

from hta.trace_diff import LabeledTrace, TraceDiff  # noqa: E402

SHARED = sys.argv[1] if len(sys.argv) > 1 else "../shared"
T = os.path.join(SHARED, "data", "traces")
OUT = "tests/ref/fixtures/trace_compare/hta.json"

# (name, control dir, test dir, --steps A-B or None), dirs relative to $SHARED/data/traces
CASES = [
    ("trace_compare", "hta/trace_compare/base", "hta/trace_compare/test", None),
    ("trace_compare_all", "hta/trace_compare/base", "hta/trace_compare/test", (1009, 1010)),
    ("trace_compare_1010", "hta/trace_compare/base", "hta/trace_compare/test", (1010, 1010)),
    ("trace_compare_reversed", "hta/trace_compare/test", "hta/trace_compare/base", (1009, 1010)),
    ("resnet50_nw0_nw4", "kineto-tb/resnet50_num_workers_0", "kineto-tb/resnet50_num_workers_4",
     None),
    ("resnet50_nw0_nw4_all", "kineto-tb/resnet50_num_workers_0",
     "kineto-tb/resnet50_num_workers_4", (5, 10)),
    ("ns_resolution_self", "hta/ns_resolution_trace", "hta/ns_resolution_trace", None),
    ("edge", "@edge/control", "@edge/test", None),
    ("edge_all", "@edge/control", "@edge/test", (1, 3)),
    ("edge_2", "@edge/control", "@edge/test", (2, 2)),
]

# Hand-made Kineto traces for the corners of HTA's iteration rule (hta/common/trace.py
# add_iteration), written next to the fixture: the GPU's ProfilerStep#1 annotation overlaps the
# host's step 2 and comes later in the file, so host events there belong to step 1 (the last
# step in file order that holds them wins); a kernel takes its launch's step by correlation id;
# stream 0 kernels and kernels without a launch have no step; "Trace" events and events without
# a cat are dropped; a fractional ts makes HTA round every event (an op of 0.3 us lasts -1 us).
EDGE = "tests/ref/fixtures/trace_compare/edge"


def edge_trace(test):
    ev = []

    def x(cat, name, ts, dur, tid=1, **args):
        e = {"ph": "X", "name": name, "pid": 1, "tid": tid, "ts": ts, "dur": dur, "args": args}
        if cat is not None:
            e["cat"] = cat
        ev.append(e)

    x("Trace", "PyTorch Profiler (0)", 900, 4000)
    for n in (1, 2, 3):
        x("user_annotation", "ProfilerStep#%d" % n, n * 1000, 1000)
    x("cpu_op", "aten::mm", 1050, 40)
    x("cuda_runtime", "cudaLaunchKernel", 1100, 10, correlation=11)
    x("cuda_runtime", "cudaLaunchKernel", 1200, 10, correlation=12)
    x("cpu_op", "aten::copy_", 1300.6, 0.3)
    x("cuda_sync", "Event Sync", 1400, 5, correlation=13)
    x("cpu_op", "aten::mm", 2100, 40 if not test else 70)  # step 1 by the GPU annotation
    x("cpu_op", "aten::add", 2700, 20)
    x(None, "no category", 2800, 10)
    if test:
        x("cpu_op", "aten::mm", 2150, 30)
        x("cpu_op", "aten::gelu", 1060, 15)
        x("cuda_runtime", "cudaLaunchKernel", 2750, 10, correlation=14)
    else:
        x("cpu_op", "aten::relu", 1070, 12)
    x("cpu_op", "aten::sum", 3100, 11)
    x("gpu_user_annotation", "ProfilerStep#1", 1500, 1100, tid=7, stream=7, correlation=-1)
    x("kernel", "gemm", 1600, 300, tid=7, stream=7, correlation=11)
    x("kernel", "amd_kernel", 1650, 50, tid=0, stream=0, correlation=12)
    x("kernel", "orphan", 1700, 25, tid=7, stream=7, correlation=99)
    if test:
        x("kernel", "add_kernel", 2800, 9, tid=7, stream=7, correlation=14)
    return {"distributedInfo": {"rank": 0}, "traceEvents": ev}


def write_edge():
    for side in ("control", "test"):
        d = os.path.join(EDGE, side)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "rank-0.json"), "w") as f:
            json.dump(edge_trace(side == "test"), f, indent=0)
            f.write("\n")


_loaded = {}


def labeled(d, label):
    key = (d, label)
    if key not in _loaded:
        path = os.path.join(EDGE, d[6:]) if d.startswith("@edge/") else os.path.join(T, d)
        _loaded[key] = LabeledTrace(label=label, trace_dir=path)
    return _loaded[key]


def num(v):
    f = float(v)
    return int(f) if f == int(f) else f


def run(name, cdir, tdir, steps):
    c, t = labeled(cdir, "control"), labeled(tdir, "test")
    it = None
    if steps:
        it = [i for i in sorted(set(c.iterations()) | set(t.iterations()))
              if steps[0] <= i <= steps[1]]
    ci = [i for i in it if i in c.iterations()] if it else None
    ti = [i for i in it if i in t.iterations()] if it else None
    df = TraceDiff.compare_traces(c, t, control_iteration=ci, test_iteration=ti)
    diff = TraceDiff.ops_diff(c, t, control_iteration=ci, test_iteration=ti)
    bucket = {}
    for k, names in diff.items():
        for n in names:
            assert n not in bucket, n
            bucket[n] = k
    ops = {}
    for n, r in df.iterrows():
        ops[n] = [num(r["control_counts"]), num(r["control_total_duration"]),
                  num(r["test_counts"]), num(r["test_total_duration"]), bucket[n]]
    assert len(bucket) == len(ops)
    return {
        "case": name,
        "control": cdir,
        "test": tdir,
        "steps": "%d-%d" % steps if steps else None,
        "control_iterations": ci if ci else c.iterations()[:1],
        "test_iterations": ti if ti else t.iterations()[:1],
        "ops": ops,
        "ops_diff_counts": {k: len(v) for k, v in diff.items()},
    }


def main():
    import hta

    write_edge()
    cases = [run(*c) for c in CASES]
    doc = {"generator": "tests/ref/gen_trace_compare.py",
           "hta_version": getattr(hta, "__version__", None), "cases": cases}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w") as f:  # one case per line
        f.write('{"generator": %s, "hta_version": %s, "cases": [\n' % (
            json.dumps(doc["generator"]), json.dumps(doc["hta_version"])))
        f.write(",\n".join(json.dumps(c, sort_keys=True) for c in cases))
        f.write("\n]}\n")
    for c in cases:
        print("%-24s %4d ops  %s" % (c["case"], len(c["ops"]), c["ops_diff_counts"]))


if __name__ == "__main__":
    main()
