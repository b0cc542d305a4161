#!/bin/sh
# swift-trace-analyze on many ranks: RANKS (default 256) copies of one real rank's Kineto trace
# (tests/bench/gen_ranks.py: shifted clocks, one rank stretched 1.3x) analysed with -j 1 and
# -j 2 (wall, CPU, peak RSS), the reports compared, and HTA's TraceAnalysis with a temporal
# breakdown on the same directory when HTA_PYTHON has holistictraceanalysis (HTA_TIMEOUT
# seconds, default 600). Figures in docs/benchmarks.md ("Many ranks").
set -u
RANKS=${RANKS:-256}
BIN=${SWIFT_BIN:-build/bin}
SHARED=${SHARED:-../shared}
PY=${HTA_PYTHON:-python3}
SRC="$SHARED/data/traces/hta/trace_filter/sampled_rank-0.json.gz"
[ -f "$SRC" ] || { echo "trace-ranks: $SRC missing, skipped"; exit 0; }
DIR=$(mktemp -d /tmp/swift-bench-ranks.XXXXXX)
trap 'rm -rf "$DIR"' EXIT INT TERM
python3 "$(dirname "$0")/gen_ranks.py" "$SRC" "$DIR/ranks" --ranks "$RANKS" --slow 37 || exit 1
echo "input: $RANKS ranks, $(du -sm "$DIR/ranks" | cut -f1) MB gzip"
fig() { # fig NAME FILE: wall, CPU, peak RSS of a /usr/bin/time -v log
    awk -F': ' -v n="$1" '/Elapsed/ {w = $2} /User time/ {u = $2} /System time/ {s = $2}
        /Maximum resident/ {m = $2 / 1024} END {printf "%-8s wall %s  cpu %.2f s  rss %.0f MB\n", n, w, u + s, m}' "$2"
}
for j in 1 2; do
    /usr/bin/time -v "$BIN/swift-trace-analyze" -j $j -f json -o "$DIR/j$j.json" "$DIR/ranks" 2> "$DIR/j$j.time"
    fig "swift -j $j" "$DIR/j$j.time"
done
cmp -s "$DIR/j1.json" "$DIR/j2.json" && echo "reports: identical" || echo "reports: DIFFER"
jq -r '"straggler: rank " + ([.bottlenecks[] | select(.rule == "straggler") | .rank | tostring] | join(","))' "$DIR/j2.json"
cat > "$DIR/run_hta.py" <<'PY'
import sys
from hta.trace_analysis import TraceAnalysis
df = TraceAnalysis(trace_dir=sys.argv[1]).get_temporal_breakdown(visualize=False)
print("HTA ranks:", len(df))
PY
if "$PY" -c 'import hta' 2>/dev/null; then
    /usr/bin/time -v timeout "${HTA_TIMEOUT:-600}" "$PY" "$DIR/run_hta.py" "$DIR/ranks" > "$DIR/hta.out" 2> "$DIR/hta.time"
    tail -1 "$DIR/hta.out"
    fig "HTA" "$DIR/hta.time"
else
    echo "HTA: $PY has no holistictraceanalysis, skipped"
fi
