#!/bin/sh
# Benchmark swift-export --to gguf (F16 and Q8_0) on a random bf16 llama-shaped model generated
# into /tmp (EXPORT_BENCH_MB megabytes, default 256; 1024 for the ~1 GB figure), next to PyPI
# gguf's GGUFWriter writing the same tensors in the same run, and the quantization error (RMSE)
# of our Q8_0/Q4_K/Q6_K against llama.cpp's Q8_0 reference formula. Deletes what it made.
set -eu
# Figures are wall-clock on a shared machine; `uptime` is printed so a loaded run can be told apart.
BIN=${SWIFT_BIN:-build/bin}
SHARED=${SHARED:-../shared}
MB=${EXPORT_BENCH_MB:-256}
tok=$SHARED/data/tokenizers/gpt2
[ -r "$tok/tokenizer.json" ] || { echo "export bench: missing $tok" >&2; exit 1; }
python3 -c 'import gguf, safetensors' 2>/dev/null || { echo "export bench: needs python3 gguf safetensors" >&2; exit 1; }
work=$(mktemp -d /tmp/swift-export-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT INT TERM
here=$(dirname "$0")
bytes=$(python3 "$here/export_ref.py" make "$work/model" "$MB" "$tok")
echo "load: $(uptime | sed 's/.*load average/load average/')"
echo "model: $bytes bytes of bf16 safetensors ($(grep -o '"num_hidden_layers": [0-9]*' "$work/model/config.json"))"
secs() { python3 -c "import sys; print('%.3f' % (float(sys.argv[2]) - float(sys.argv[1])))" "$1" "$2"; }
for t in f16 q8_0; do
    sync
    t0=$(date +%s.%N)
    summary=$("$BIN/swift-export" "$work/model" --to gguf --dtype $t -o "$work/ours-$t.gguf" 2>/dev/null)
    t1=$(date +%s.%N)
    ours=$(secs "$t0" "$t1")
    ref=$(python3 "$here/export_ref.py" gguf-py "$work/model" $t "$work/ref-$t.gguf")
    python3 - "$bytes" "$ours" "$ref" "$t" "$(stat -c %s "$work/ours-$t.gguf")" "$summary" <<'PY'
import json, sys
b, ours, t, out = int(sys.argv[1]), float(sys.argv[2]), sys.argv[4], int(sys.argv[5])
ref, ref_cpu = (float(x) for x in sys.argv[3].split())
s = json.loads(sys.argv[6])
print("%-5s swift-export %.2f s = %.2f GB/s in, %.2f GB/s out (read %.2f s, convert %.2f s, write+fsync %.2f s)"
      % (t, ours, b / ours / 1e9, out / ours / 1e9, s["read_s"], s["convert_s"], s["write_s"]))
print("      gguf-py GGUFWriter %.2f s (%.2f s CPU) = %.3f GB/s, no fsync | swift-export is x%.1f faster"
      % (ref, ref_cpu, b / ref / 1e9, ref / ours))
PY
    rm -f "$work/ref-$t.gguf"
done
for t in q4_k q6_k; do
    "$BIN/swift-export" "$work/model" --to gguf --dtype $t -o "$work/ours-$t.gguf" >/dev/null 2>&1
done
for t in q8_0 q4_k q6_k; do
    python3 "$here/export_ref.py" rmse "$work/model" "$work/ours-$t.gguf"
done
