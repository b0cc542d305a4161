#!/usr/bin/env python3
"""Hand-built swift-train traces with GPU events (tests/ref/fixtures/gputrace/), for
tests/cli/trace-analyze.bats: swift-trace-analyze's GPU rules on our own JSONL traces.

    python3 tests/ref/gen_gpu_traces.py

The events are those lib/core/trace and kernels/cuda/cupti_conv.c write (docs/cuda.md, docs/trace-schema.md):
swift_meta, "step" spans with args.step on the step thread, data_wait/forward/backward/optimizer
phases, cuda_runtime calls with correlation ids on the same thread, kernels on the track of
stream 7 (args device, stream, correlation), flows from launch to kernel, memory counters.
Times are µs with ns fractions, as lib/trace writes them.

launch_bound.trace.jsonl: 3 steps of 1220 µs, 60 launches each; every launch takes 10 µs on the
host and its kernel runs 3 µs, the next launch comes 20 µs later, so the GPU waits on the host
(host_wait) 17 µs before each kernel. By hand (HTA leaves the last ProfilerStep/step out of
its analyses, so 2 steps count):
  launches 120, short kernels 120 (3 µs on the GPU < 10 µs launch <= 50 µs) -> 100% > 30%:
  launch_bound critical; mean launch 10 µs; stream 7 idle = host wait = 2*59*17 + 67 = 2073 µs
  (59 gaps of 17 µs per step, 67 µs from step 1's last kernel to step 2's first);
  GPU utilization (TensorBoard: kernel time over steps 1..3) = 180*3 / (2*1250 + 1220)
  = 14.52% < 50% (critical below 25%), the idle time under forward/backward: "host".
control.trace.jsonl: the same launches with 40 µs kernels that queue up on the stream: no
short kernel, no host wait, GPU busy ~100%: neither rule fires.
"""
import json
import os

OUT = "tests/ref/fixtures/gputrace"
PID, TID = 4100, 4100
GTID = 1000000000 + 7  # SWIFT_GPU_TID(0, 7)
T0 = 1764460800000000  # µs on the trace clock
STEP, PERIOD, NL, LAUNCH, EVERY = 1220, 1250, 60, 10, 20


def us(v):
    """µs as lib/trace writes them: integer part, '.', 3 digits of ns."""
    ns = round(v * 1000)
    return f"{ns // 1000}.{ns % 1000:03d}"


def ev(ph, cat, name, tid, ts, dur=None, args=None, bp=None, **kw):
    # lib/trace's key order: ph, cat, name, pid, tid, ts, dur, args
    s = '{"ph":"%s",' % ph
    if cat is not None:
        s += '"cat":%s,' % json.dumps(cat)
    s += '"name":%s,"pid":%d,"tid":%d' % (json.dumps(name), PID, tid)
    for k, v in kw.items():
        s += ',"%s":%s' % (k, json.dumps(v))
    s += ',"ts":%s' % us(ts)
    if dur is not None:
        s += ',"dur":%s' % us(dur)
    if bp:
        s += ',"bp":"%s"' % bp
    if args:
        s += ',"args":' + json.dumps(args, separators=(",", ":"))
    return s + "}"


def trace(kernel_us, queue):
    out = [
        '{"ph":"M","name":"swift_meta","pid":%d,"tid":%d,"ts":0,"args":{"schema_version":1,'
        '"stage":"train","rank":0,"world_size":1,"host":"gpu1","pid":%d,"device":"cuda:0",'
        '"clock_offset_us":0,"argv":["swift-train","--model","m/","--dataset","shards/",'
        '"--per-device-train-batch-size","4","--device","cuda:0","--profile","1,0,3"]}}'
        % (PID, TID, PID),
        '{"ph":"M","name":"thread_name","pid":%d,"tid":%d,"ts":0,"args":{"name":"stream 7 (cuda:0)"}}'
        % (PID, GTID),
        ev("C", None, "memory", TID, T0, args={"allocated": 6 << 30, "device": 0,
                                             "total": 141 << 30}),
    ]
    corr, gpu_free = 1, 0.0
    for s in range(3):
        b = T0 + 100 + s * PERIOD
        out.append(ev("X", "data", "data_wait", TID, b, 5))
        out.append(ev("X", "compute", "forward", TID, b + 5, 595))
        out.append(ev("X", "compute", "backward", TID, b + 600, 600))
        for i in range(NL):
            h = b + 12 + i * EVERY
            out.append(ev("X", "cuda_runtime", "cudaLaunchKernel", TID, h, LAUNCH,
                          {"correlation": corr, "cbid": 211}))
            out.append(ev("s", "flow", "launch", TID, h, id=corr))
            k = h + LAUNCH + 2
            if queue:
                k = max(k, gpu_free)
            name = "k_rmsnorm(float*, float const*, int)" if i % 2 else "ampere_sgemm_64x32_nn"
            out.append(ev("X", "kernel", name, GTID, k, kernel_us,
                          {"device": 0, "stream": 7, "correlation": corr,
                           "registers per thread": 32, "shared memory": 0,
                           "grid": [64, 1, 1], "block": [256, 1, 1]}))
            out.append(ev("f", "flow", "launch", GTID, k, id=corr, bp="e"))
            gpu_free = k + kernel_us
            corr += 1
        out.append(ev("X", "optim", "optimizer", TID, b + 1200, 15))
        out.append(ev("X", "step", "step", TID, b, STEP, {"step": s + 1, "tokens": 4096}))
    return "\n".join(out) + "\n"


def main():
    os.makedirs(OUT, exist_ok=True)
    with open(f"{OUT}/launch_bound.trace.jsonl", "w") as f:
        f.write(trace(3, queue=False))
    with open(f"{OUT}/control.trace.jsonl", "w") as f:
        f.write(trace(40, queue=True))


if __name__ == "__main__":
    main()
