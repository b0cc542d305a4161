#!/bin/sh
# swift-trace-analyze throughput and peak memory on a large real-derived Kineto trace, next to
# HTA (PyPI holistictraceanalysis) computing its temporal breakdown on the same file.
# BENCH_TRACE_MB sets the uncompressed size (default 1024 = 1 GiB; use e.g. 100 for a quick run).
# HTA_PYTHON names a python with holistictraceanalysis installed (default python3); when it is
# missing or fails, our figures are shown alone with the reason.
set -u
MB=${BENCH_TRACE_MB:-1024}
BIN=${SWIFT_BIN:-build/bin}
BUILD=${SWIFT_BUILD:-build}
SHARED=${SHARED:-../shared}
PY=${HTA_PYTHON:-python3}
SRC="$SHARED/data/traces/kineto-tb/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
[ -f "$SRC" ] || { echo "trace-analyze: $SRC missing, skipped"; exit 0; }
DIR=$(mktemp -d /tmp/swift-bench-trace.XXXXXX)
trap 'rm -rf "$DIR"' EXIT INT TERM
mkdir "$DIR/plain" "$DIR/gz"
F="$DIR/plain/rank0.pt.trace.json"
"$BUILD/bench/bench_trace_gen" "$SRC" "$F" "$MB" || exit 1
bytes=$(stat -c %s "$F")
gzip -1 -c "$F" > "$DIR/gz/rank0.pt.trace.json.gz"
echo "input: $F, $(echo "$bytes" | awk '{printf "%.0f MB", $1/1e6}') uncompressed, $(stat -c %s "$DIR/gz/rank0.pt.trace.json.gz" | awk '{printf "%.0f MB", $1/1e6}') gzip"

run() { # run NAME CMD...: wall seconds and peak RSS (MB) from /usr/bin/time -v
    name=$1
    shift
    /usr/bin/time -v "$@" > "$DIR/$name.out" 2> "$DIR/$name.time"
    rc=$?
    wall=$(awk -F': ' '/Elapsed \(wall clock\)/ {n = split($2, a, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + a[i]; print s}' "$DIR/$name.time")
    rss=$(awk -F': ' '/Maximum resident set size/ {printf "%.0f", $2 / 1024}' "$DIR/$name.time")
    cpu=$(awk -F': ' '/User time|System time/ {s += $2} END {print s}' "$DIR/$name.time")
    echo "$rc $wall $rss $cpu"
}

# MB/s of uncompressed trace per wall second, and per CPU second (user+sys: fair on a busy machine)
rate() { echo "$bytes $1" | awk '{printf "%.1f", $1/1e6/$2}'; }
set -- $(run ours "$BIN/swift-trace-analyze" --format json "$F")
ours_wall=$2 ours_cpu=$4 rss_ours=$3
echo "swift-trace-analyze plain: rc $1, wall $2 s ($(rate "$2") MB/s), cpu $4 s ($(rate "$4") MB/s), peak RSS $3 MB"
set -- $(run oursgz "$BIN/swift-trace-analyze" --format json "$DIR/gz/rank0.pt.trace.json.gz")
echo "swift-trace-analyze .gz:   rc $1, wall $2 s ($(rate "$2") MB/s), cpu $4 s ($(rate "$4") MB/s), peak RSS $3 MB"
jq -c '.processes[0].temporal' "$DIR/ours.out" 2>/dev/null | sed 's/^/  ours temporal: /'

if "$PY" -c 'import hta' 2>/dev/null; then
    cat > "$DIR/run_hta.py" <<'PY'
import sys, logging
logging.disable(logging.WARNING)
from hta.trace_analysis import TraceAnalysis
t = TraceAnalysis(trace_dir=sys.argv[1])
print(t.get_temporal_breakdown(visualize=False).to_string())
PY
    set -- $(run hta "$PY" "$DIR/run_hta.py" "$DIR/plain")
    if [ "$1" -eq 0 ]; then
        echo "HTA temporal breakdown:    rc 0, wall $2 s ($(rate "$2") MB/s), cpu $4 s ($(rate "$4") MB/s), peak RSS $3 MB"
        sed 's/^/  hta: /' "$DIR/hta.out"
        echo "ratio: swift-trace-analyze (all analyses) vs HTA (temporal breakdown only): $(echo "$2 $ours_wall" | awk '{printf "%.1f", $1/$2}')x wall, $(echo "$4 $ours_cpu" | awk '{printf "%.1f", $1/$2}')x cpu, $(echo "$3 $rss_ours" | awk '{printf "%.1f", $1/$2}')x less memory"
    else
        echo "HTA failed (rc $1):"; sed -n "/Command being timed/q;p" "$DIR/hta.time" | tail -n 5
    fi
else
    echo "HTA: not installed for $PY (pip install holistictraceanalysis; set HTA_PYTHON) - our figures alone"
fi
