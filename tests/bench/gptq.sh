#!/bin/sh
# Benchmark GPTQ (swift-export --method gptq's per-layer work, lib/export/gptq_solve.h) next to auto-gptq's
# own GPTQ code on the same layer in the same run: Qwen2.5-0.5B's q_proj (896x896) and
# down_proj (896x4864) shapes, 2048 calibration tokens, int4 group 128. The reference needs
# `pip install --no-deps auto-gptq==0.7.1` (only its Python files are used); without it only
# our figures are printed. GPTQ_BENCH_SHAPES overrides the shapes (OUTxIN,...).
set -eu
BUILD=${SWIFT_BUILD:-build}
here=$(dirname "$0")
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-2}
work=$(mktemp -d /tmp/swift-gptq-bench.XXXXXX)
trap 'rm -rf "$work"' EXIT INT TERM
echo "load: $(uptime | sed 's/.*load average/load average/'), threads $OMP_NUM_THREADS"
ref=1
python3 -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("auto_gptq") is None)' 2>/dev/null || ref=0
for shape in $(echo "${GPTQ_BENCH_SHAPES:-896x896,896x4864}" | tr , ' '); do
    out=${shape%x*}
    in=${shape#*x}
    python3 "$here/gptq_ref.py" make "$work/l.safetensors" "$out" "$in" 2048
    ours=$("$BUILD/bench/bench_gptq" "$work/l.safetensors")
    if [ $ref = 1 ]; then
        theirs=$(python3 "$here/gptq_ref.py" auto-gptq "$work/l.safetensors" 2>/dev/null)
    else
        theirs=""
    fi
    python3 - "$ours" "$theirs" <<'PY'
import json, sys
o = json.loads(sys.argv[1])
line = "gptq [%d,%d] %d tokens: swift H %.3f s + quantize %.3f s" % (
    o["out"], o["in"], o["tokens"], o["hessian_s"], o["quantize_s"])
if sys.argv[2]:
    h, q = (float(x) for x in sys.argv[2].split())
    line += " | auto-gptq H %.3f s + fasterquant %.3f s | swift is x%.1f faster" % (
        h, q, (h + q) / (o["hessian_s"] + o["quantize_s"]))
else:
    line += " | auto-gptq not installed: no reference"
print(line)
PY
done
