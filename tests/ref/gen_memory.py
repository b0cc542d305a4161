#!/usr/bin/env python3
"""HTA memory timeline references (tests/ref/fixtures/memory/), from PyPI holistictraceanalysis.

    python3 -m venv /tmp/hta && /tmp/hta/bin/pip install holistictraceanalysis
    /tmp/hta/bin/python tests/ref/gen_memory.py [SHARED]   # SHARED: /work/shared

Writes small.raw.gz, the first 3000 entries of HTA's own test file
(data/traces/hta/memory_analysis/memory_timeline.raw.gz: torch.profiler's export_memory_timeline
raw list [ts_ns, action, bytes, category]), and for it and the whole shared file <name>.hta.json:
HTA's MemoryAnalysis._process_raw_events() summarised as {"rows" (distinct timestamps),
"peak_bytes" (max over rows of the sum over categories, the first such row), "peak_ts_us" ((ts -
min ts) / 1e3 at that row), "categories_at_peak" {name: bytes}, "last_bytes" (the last row's
sum)}. tests/cli/trace-memory.bats compares swift-trace-analyze's memory.devices[0] with them.
"""
import gzip
import json
import os
import sys

from hta.memory_analysis import MemoryAnalysis, _CATEGORY_TO_INDEX

FIX = "tests/ref/fixtures/memory"
SHARED_FILE = "data/traces/hta/memory_analysis/memory_timeline.raw.gz"


def summary(path):
    times, sizes = MemoryAnalysis(path)._process_raw_events()
    totals = [sum(s) for s in sizes]
    k = max(range(len(totals)), key=lambda i: (totals[i], -i))
    t_min = min(times)
    return {
        "rows": len(times),
        "peak_bytes": totals[k],
        "peak_ts_us": (times[k] - t_min) / 1e3,
        "categories_at_peak": {c: sizes[k][i] for c, i in _CATEGORY_TO_INDEX.items()},
        "last_bytes": totals[-1],
    }


def main():
    shared = sys.argv[1] if len(sys.argv) > 1 else "/work/shared"
    os.makedirs(FIX, exist_ok=True)
    src = os.path.join(shared, SHARED_FILE)
    with gzip.open(src, "rt") as f:
        raw = json.load(f)
    small = os.path.join(FIX, "small.raw.gz")
    with gzip.GzipFile(small, "wb", mtime=0) as f:
        f.write(json.dumps(raw[:3000]).encode())
    for name, path in (("small", small), ("memory_timeline", src)):
        with open(os.path.join(FIX, name + ".hta.json"), "w") as f:
            json.dump(summary(path), f, indent=1, sort_keys=True)
            f.write("\n")


if __name__ == "__main__":
    main()
