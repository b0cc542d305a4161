#!/usr/bin/env python3
"""Replicate one rank's real trace into N ranks: a many-rank job for swift-trace-analyze.

    gen_ranks.py SRC OUTDIR --ranks 256 --slow 37 --stretch 1.3 [--shift-us 250]

SRC is a Kineto JSON trace (plain or .gz, e.g. $SHARED/data/traces/hta/trace_filter/
sampled_rank-0.json.gz) or one of our JSONL traces. Every rank r gets a copy with its clock
shifted by (r * 7919) % shift_us microseconds (Kineto: the timestamps move, as unsynchronised
hosts' clocks do; ours: the timestamps move and swift_meta.clock_offset_us says by how much, as
swift-train records it), distributedInfo / swift_meta rank and world_size set to r and N. The
slow rank's whole timeline is stretched by --stretch around its first event, so each of its
steps (and everything in them) takes that much longer. Standard library only; writes gzip for a
.gz SRC. Used by tests/cli/trace-analyze-ranks.bats and the measurement in docs/benchmarks.md.
"""
import argparse
import gzip
import json
import os


def opener(path, mode):
    if path.endswith(".gz"):
        return gzip.open(path, mode + "t", compresslevel=1) if mode == "w" else gzip.open(path, "rt")
    return open(path, mode)


def move(ev, t0, f, shift):
    ts = ev.get("ts")
    if isinstance(ts, (int, float)):
        ev["ts"] = t0 + (ts - t0) * f + shift
        if isinstance(ev.get("dur"), (int, float)):
            ev["dur"] = ev["dur"] * f


def kineto(src, out, n, slow, stretch, shift_us):
    with opener(src, "r") as fp:
        base = json.load(fp)
    evs = base.get("traceEvents", [])
    t0 = min(e["ts"] for e in evs if isinstance(e.get("ts"), (int, float)))
    name = os.path.basename(src)
    for r in range(n):
        doc = dict(base)  # move() changes only the events' top-level ts and dur
        doc["traceEvents"] = [dict(e) for e in evs]
        doc["distributedInfo"] = dict(base.get("distributedInfo") or {})
        doc["distributedInfo"]["rank"] = r
        doc["distributedInfo"]["world_size"] = n
        f = stretch if r == slow else 1.0
        shift = (r * 7919) % shift_us if shift_us else 0
        for e in doc["traceEvents"]:
            move(e, t0, f, shift)
        path = os.path.join(out, "rank-%03d.%s" % (r, name.split(".", 1)[1]))
        with opener(path, "w") as fp:
            json.dump(doc, fp)  # ", " and ": " as Kineto writes (HTA finds the rank by them)


def ours(src, out, n, slow, stretch, shift_us):
    with opener(src, "r") as fp:
        lines = [json.loads(ln) for ln in fp if ln.strip()]
    t0 = min(e["ts"] for e in lines if isinstance(e.get("ts"), (int, float)) and e.get("ph") != "M")
    for r in range(n):
        f = stretch if r == slow else 1.0
        shift = (r * 7919) % shift_us if shift_us else 0
        path = os.path.join(out, "train-r%03d.trace.jsonl" % r)
        with open(path, "w") as fp:
            for e in lines:
                e = dict(e)
                if e.get("name") == "swift_meta":
                    a = dict(e.get("args", {}))
                    a["rank"], a["world_size"] = r, n
                    a["clock_offset_us"] = a.get("clock_offset_us", 0) + shift
                    e["args"] = a
                elif e.get("ph") != "M":
                    move(e, t0, f, shift)
                fp.write(json.dumps(e, separators=(",", ":")) + "\n")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("src")
    ap.add_argument("out")
    ap.add_argument("--ranks", type=int, default=256)
    ap.add_argument("--slow", type=int, default=37, help="the slowed rank (-1: none)")
    ap.add_argument("--stretch", type=float, default=1.3)
    ap.add_argument("--shift-us", type=int, default=250)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    if ".jsonl" in a.src:
        ours(a.src, a.out, a.ranks, a.slow, a.stretch, a.shift_us)
    else:
        kineto(a.src, a.out, a.ranks, a.slow, a.stretch, a.shift_us)


if __name__ == "__main__":
    main()
