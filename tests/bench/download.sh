#!/bin/sh
# Loopback download throughput: swift-download vs curl (one large file) and vs huggingface_hub's
# snapshot_download (one large file; many small files), all against the same local hub server
# (tests/cli/hubserver.py, HF protocol) in the same run.
#   BENCH_LARGE_MB   size of the large file (default 512; sparse, so it costs no disk to create)
#   BENCH_SMALL_N    number of small files (default 300), BENCH_SMALL_KB their size (default 16)
#   BENCH_JOBS       parallel files for swift-download and snapshot_download (default 8)
# Prints MB/s (or files/s) per tool and swift-download's ratio to each reference.
set -eu
BIN=${SWIFT_BIN:-build/bin}
LARGE_MB=${BENCH_LARGE_MB:-512}
SMALL_N=${BENCH_SMALL_N:-300}
SMALL_KB=${BENCH_SMALL_KB:-16}
JOBS=${BENCH_JOBS:-8}
here=$(cd "$(dirname "$0")" && pwd)
W=$(mktemp -d "${TMPDIR:-/tmp}/swift-bench-dl.XXXXXX")
PID=
cleanup() {
    [ -n "$PID" ] && kill "$PID" 2>/dev/null && wait "$PID" 2>/dev/null
    rm -rf "$W"
}
trap cleanup EXIT INT TERM

mkdir -p "$W/root/bench/large" "$W/root/bench/small"
truncate -s "${LARGE_MB}M" "$W/root/bench/large/model.safetensors"
python3 - "$W/root/bench/small" "$SMALL_N" "$SMALL_KB" <<'EOF'
import os, random, sys
d, n, kb = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
r = random.Random(7)
for i in range(n):
    with open(os.path.join(d, "f%04d.json" % i), "wb") as f:
        f.write(r.randbytes(kb * 1024))
EOF
python3 "$here/../cli/hubserver.py" --root "$W/root" --port-file "$W/port" >"$W/server.log" 2>&1 &
PID=$!
i=0
while [ ! -s "$W/port" ] && [ $i -lt 100 ]; do sleep 0.05; i=$((i + 1)); done
EP=http://127.0.0.1:$(cat "$W/port")
# warm the server's hash cache and the page cache
curl -s "$EP/api/models/bench/large/revision/main" >/dev/null
curl -s "$EP/api/models/bench/small/revision/main" >/dev/null
cat "$W/root/bench/large/model.safetensors" >/dev/null

# each tool starts with no dirty pages left by the previous one (sync is outside the timing)
now() { date +%s%N; }
secs() { echo "$1 $2" | awk '{printf "%.3f", ($2 - $1) / 1e9}'; }
rate() { echo "$1 $2" | awk '{printf "%.1f", $1 / $2}'; }
ratio() { echo "$1 $2" | awk '{printf "%.2f", $2 / $1}'; }

hf_snapshot() { # repo dir
    HF_ENDPOINT=$EP HF_HUB_DISABLE_PROGRESS_BARS=1 HF_HUB_DISABLE_TELEMETRY=1 HF_HOME="$W/hfhome" \
        python3 -c 'import sys
from huggingface_hub import snapshot_download
snapshot_download(sys.argv[1], local_dir=sys.argv[2], max_workers=int(sys.argv[3]))' "$1" "$2" "$JOBS" \
        >/dev/null 2>"$W/hf.err"
}
have_hf=0
python3 -c 'import huggingface_hub' 2>/dev/null && have_hf=1

echo "large file: ${LARGE_MB} MB over loopback ($EP)"
sync
t0=$(now)
"$BIN/swift-download" --hub hf --endpoint "$EP" bench/large -o "$W/s1" -q -j "$JOBS" >/dev/null
t1=$(now)
s_swift=$(secs "$t0" "$t1")
rm -rf "$W/s1"
sync
t0=$(now)
curl -sSfL -o "$W/curl.bin" "$EP/bench/large/resolve/main/model.safetensors"
t1=$(now)
s_curl=$(secs "$t0" "$t1")
rm -f "$W/curl.bin"
echo "  swift-download     $(rate "$LARGE_MB" "$s_swift") MB/s  (${s_swift} s; includes SHA-256 verify + fsync)"
echo "  curl               $(rate "$LARGE_MB" "$s_curl") MB/s  (${s_curl} s; no verification)"
echo "  ratio to curl      $(ratio "$s_swift" "$s_curl")x"
if [ $have_hf = 1 ]; then
    sync
    t0=$(now)
    hf_snapshot bench/large "$W/h1"
    t1=$(now)
    s_hf=$(secs "$t0" "$t1")
    rm -rf "$W/h1" "$W/hfhome"
    echo "  snapshot_download  $(rate "$LARGE_MB" "$s_hf") MB/s  (${s_hf} s)"
    echo "  ratio to snapshot_download $(ratio "$s_swift" "$s_hf")x"
fi

small_mb=$(echo "$SMALL_N $SMALL_KB" | awk '{printf "%.1f", $1 * $2 / 1024}')
echo "small files: $SMALL_N x ${SMALL_KB} KB ($small_mb MB), $JOBS parallel"
sync
t0=$(now)
"$BIN/swift-download" --hub hf --endpoint "$EP" bench/small -o "$W/s2" -q -j "$JOBS" >/dev/null
t1=$(now)
s_swift=$(secs "$t0" "$t1")
echo "  swift-download     $(rate "$SMALL_N" "$s_swift") files/s  (${s_swift} s)"
if [ $have_hf = 1 ]; then
    sync
    t0=$(now)
    hf_snapshot bench/small "$W/h2"
    t1=$(now)
    s_hf=$(secs "$t0" "$t1")
    echo "  snapshot_download  $(rate "$SMALL_N" "$s_hf") files/s  (${s_hf} s)"
    echo "  ratio to snapshot_download $(ratio "$s_swift" "$s_hf")x"
else
    echo "  (huggingface_hub not installed: pip install huggingface_hub for the reference)"
fi
