#!/bin/sh
# tests/gpu/run.sh — the whole GPU verification in one run (issue 10; docs/cuda.md), < 8 minutes,
# needing nothing outside the repository: it builds with CUDA, runs the CUDA-vs-CPU kernel tests,
# makes its own data (datasets/make_synthetic.py text, the committed BPE fixture tokenizer,
# swift-preprocess shards of 1024 tokens) and a random Qwen2.5-0.5B-shaped model (transformers,
# save_pretrained), trains it for a few dozen steps with --profile on the GPU, runs
# swift-trace-analyze on that trace, and benchmarks tokens/s and MFU next to PyTorch +
# transformers eager on the same GPU, batch and sequence length; then QLoRA (--quant-bits 4, NF4
# with double quantization: the fused 4-bit dequant-matmul of kernels/cuda/quant4.cu) for a few
# steps on the same model, and 2 QLoRA steps of a tiny model under compute-sanitizer.
#
#   OUT=/some/dir sh tests/gpu/run.sh            # on the GPU machine (OUT: where results go)
#   SWIFT_GPU_DRYRUN=1 OUT=/tmp/x sh tests/gpu/run.sh   # CPU rehearsal: tiny model, --device cpu
#
# Results (at most 9 files) in $OUT: summary.json (every figure, including flash vs cuBLAS
# attention times on the 0.5B shape from test_backend_ops), report.md (the same for people),
# build.log, kernels.log, train.log (swift-train stdout/stderr + logging.jsonl, and swift-eval's
# records: loss and batched generation on the key/value cache, same device and model),
# analyze.txt (swift-trace-analyze), torch.log, trace.jsonl.gz (the profiled steps),
# sanitizer.log (2 steps of a tiny model under compute-sanitizer memcheck, when it exists, full
# tuning then QLoRA).
# Every stage runs under a time limit and is reported even when an earlier one failed.
# Knobs: SWIFT_GPU_BATCH (8), SWIFT_GPU_SEQ (1024), SWIFT_GPU_STEPS (30), SWIFT_GPU_JOBS (nproc),
# SWIFT_GPU_PEAK_TFLOPS (989.4: H100/H200 SXM dense bf16; MFU of both sides uses it),
# SWIFT_GPU_QLORA_STEPS (4).
set -u
export CMOCKA_MESSAGE_OUTPUT=TAP
cd "$(dirname "$0")/../.." || exit 1
ROOT=$(pwd)
OUT=${OUT:-$ROOT/build-gpu/out}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
W=${SWIFT_GPU_WORK:-$ROOT/build-gpu/work}
rm -rf "$W"
mkdir -p "$W"
DRY=${SWIFT_GPU_DRYRUN:-0}
B=${SWIFT_GPU_BATCH:-8}
T=${SWIFT_GPU_SEQ:-1024}
STEPS=${SWIFT_GPU_STEPS:-30}
JOBS=${SWIFT_GPU_JOBS:-$(nproc 2>/dev/null || echo 4)}
PEAK=${SWIFT_GPU_PEAK_TFLOPS:-989.4}
DEVICE=cuda:0
TDEV=cuda
BUILD=build-gpu
MAKEVARS="CUDA=1"
if [ "$DRY" = 1 ]; then
    B=2 T=128 STEPS=4 DEVICE=cpu TDEV=cpu MAKEVARS="" JOBS=2
    BUILD=${SWIFT_GPU_BUILD:-build}
fi
BIN=$ROOT/$BUILD/bin
PY=${PYTHON:-python3}
START=$(date +%s)
status() { # stage result -> $W/status.json lines
    printf '{"stage":"%s","status":"%s","seconds":%s}\n' "$1" "$2" "$3" >>"$W/status.jsonl"
    echo "run.sh: $1: $2 (${3}s)" >&2
}
stage() { # name limit_s command... : run with a time limit, record the status
    name=$1 lim=$2
    shift 2
    t0=$(date +%s)
    timeout "$lim" "$@"
    rc=$?
    t1=$(date +%s)
    if [ $rc -eq 0 ]; then st=ok; elif [ $rc -eq 124 ]; then st="timeout after ${lim}s"; else st="failed (exit $rc)"; fi
    status "$name" "$st" $((t1 - t0))
    return $rc
}

# ---- 0. the machine ----
{
    echo "date: $(date -u +%FT%TZ)"
    echo "git: $(git rev-parse HEAD 2>/dev/null) $(git status --porcelain 2>/dev/null | wc -l) changed files"
    nvidia-smi 2>&1 | head -20 || echo "nvidia-smi: not available"
    command -v nvcc >/dev/null && nvcc --version | tail -2
    make -np CUDA=1 2>/dev/null | grep -E '^(CUDA_HOME|CUPTI_DIR|NCCL_H) :?=' || true
    $PY -c 'import torch, transformers; print("torch", torch.__version__, "cuda", torch.version.cuda, "transformers", transformers.__version__); print("gpu", torch.cuda.get_device_name(0) if torch.cuda.is_available() else None)' 2>&1
} >"$OUT/build.log" 2>&1

# ---- 1. build: check the libraries first (the GPU machine has no package registry) ----
missing=""
probe_h() { printf '#include <%s>\nint main(void){return 0;}\n' "$1" | ${CC:-cc} $2 -E -x c - >/dev/null 2>&1 || missing="$missing $3(header $1)"; }
probe_l() { printf 'int main(void){return 0;}\n' | ${CC:-cc} -x c - -o /dev/null -l"$1" >/dev/null 2>&1 || missing="$missing $2(lib -l$1)"; }
probe_h jansson.h "" libjansson-dev
probe_h zlib.h "" zlib1g-dev
probe_h archive.h "" libarchive-dev
probe_h curl/curl.h "" libcurl4-openssl-dev
probe_h openssl/sha.h "" libssl-dev
probe_h cblas.h "" libopenblas-dev
probe_h pcre2.h "-DPCRE2_CODE_UNIT_WIDTH=8" libpcre2-dev
probe_h utf8proc.h "" libutf8proc-dev
probe_h yaml.h "" libyaml-dev
probe_h cmocka.h "" libcmocka-dev
for l in jansson:libjansson-dev z:zlib1g-dev archive:libarchive-dev curl:libcurl4-openssl-dev \
    crypto:libssl-dev openblas:libopenblas-dev pcre2-8:libpcre2-dev utf8proc:libutf8proc-dev \
    yaml:libyaml-dev cmocka:libcmocka-dev; do
    probe_l "${l%%:*}" "${l#*:}"
done
BUILD_OK=0
if [ -n "$missing" ]; then
    echo "run.sh: cannot build: missing$missing (Debian packages; the build needs all of them)" | tee -a "$OUT/build.log" >&2
    status build "missing libraries:$missing" 0
else
    if stage build 300 make -j"$JOBS" O="$BUILD" $MAKEVARS all \
        "$BUILD"/tests/test_backend_ops "$BUILD"/tests/test_backend "$BUILD"/tests/test_cupti_conv \
        "$BUILD"/tests/test_optim8 \
        >>"$OUT/build.log" 2>&1; then
        BUILD_OK=1
    fi
    tail -5 "$OUT/build.log" >&2
fi

# ---- 2. kernel tests: every op on every backend against the CPU op, whole model fwd/bwd ----
if [ $BUILD_OK = 1 ]; then
    stage kernels 120 "$BUILD/tests/test_backend_ops" >"$OUT/kernels.log" 2>&1
    stage backend 60 "$BUILD/tests/test_backend" >>"$OUT/kernels.log" 2>&1
    stage cupti_conv 60 "$BUILD/tests/test_cupti_conv" >>"$OUT/kernels.log" 2>&1
    # 8-bit AdamW: the CUDA kernel against the CPU one in lockstep (codes, absmax, weights)
    stage optim8 60 "$BUILD/tests/test_optim8" >>"$OUT/kernels.log" 2>&1
fi

# ---- 3. data and a random Qwen2.5-0.5B-shaped model ----
M=$W/model
mkdir -p "$M"
if [ "$DRY" = 1 ]; then
    SHAPE='"hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "vocab_size": 600'
else
    SHAPE='"hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2, "vocab_size": 151936'
fi
cat >"$M/config.json" <<EOF
{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", $SHAPE,
 "hidden_act": "silu", "max_position_embeddings": 32768, "rms_norm_eps": 1e-06,
 "rope_theta": 1000000.0, "tie_word_embeddings": true, "torch_dtype": "bfloat16",
 "use_sliding_window": false, "sliding_window": 32768, "max_window_layers": 21,
 "attention_dropout": 0.0, "bos_token_id": 151643, "eos_token_id": 151643}
EOF
cp tests/fixtures/bpe/tokenizer.json "$M/tokenizer.json"
cat >"$W/mkmodel.py" <<'EOF'
import json, sys, torch
from transformers import AutoConfig, AutoModelForCausalLM
d = sys.argv[1]
cfg = AutoConfig.from_pretrained(d)
torch.manual_seed(0)
m = AutoModelForCausalLM.from_config(cfg).to(torch.bfloat16)
m.save_pretrained(d, safe_serialization=True)
print(json.dumps({"params": sum(p.numel() for p in m.parameters())}))
EOF
stage model 180 $PY "$W/mkmodel.py" "$M" >"$W/model.json" 2>"$W/model.err" || cat "$W/model.err" >&2
$PY datasets/make_synthetic.py "$W/syn" >/dev/null 2>&1
i=0
while [ $i -lt 40 ]; do cat "$W/syn/corpus.txt"; i=$((i + 1)); done >"$W/corpus.txt"
if [ $BUILD_OK = 1 ]; then
    stage shards 120 "$BIN/swift-preprocess" --tokenizer "$M" --template generation \
        --truncation split --packing sequential --max-length "$T" -o "$W/shards" \
        "$W/corpus.txt" >"$W/shards.json" 2>>"$OUT/train.log"
fi

# ---- 4. swift-train on the GPU with --profile, then swift-trace-analyze ----
if [ $BUILD_OK = 1 ]; then
    P0=$((STEPS - 5))
    [ $P0 -lt 1 ] && P0=1
    stage train 300 "$BIN/swift-train" --model "$M" -o "$W/run" --tuner full --device "$DEVICE" \
        --max-steps "$STEPS" --per-device-train-batch-size "$B" --max-length "$T" \
        --learning-rate 1e-5 --logging-steps 1 --save-steps 100000 --eval-steps 100000 \
        --peak-gflops "$(awk "BEGIN{print $PEAK*1000}")" \
        --profile "wait=$P0,warmup=1,active=3,repeat=1" --trace "$W/trace.jsonl" \
        "$W/shards" >"$W/train.out" 2>"$W/train.err"
    { echo "## stdout"; cat "$W/train.out"; echo "## stderr"; cat "$W/train.err"; } >>"$OUT/train.log"
    if [ -s "$W/trace.jsonl" ]; then
        stage analyze 120 "$BIN/swift-trace-analyze" "$W/trace.jsonl" >"$OUT/analyze.txt" 2>&1
        "$BIN/swift-trace-analyze" --format json "$W/trace.jsonl" >"$W/analyze.json" 2>/dev/null
        gzip -c "$W/trace.jsonl" >"$OUT/trace.jsonl.gz"
    fi
fi

# ---- 4q. QLoRA on the GPU: the same model, its base linears NF4 with double quantization ----
QSTEPS=${SWIFT_GPU_QLORA_STEPS:-4}
if [ $BUILD_OK = 1 ] && [ -d "$W/shards" ]; then
    stage qlora 150 "$BIN/swift-train" --model "$M" -o "$W/qlora-run" --tuner lora \
        --quant-bits 4 --quant-type nf4 --double-quant --device "$DEVICE" \
        --max-steps "$QSTEPS" --per-device-train-batch-size "$B" --max-length "$T" \
        --learning-rate 1e-4 --logging-steps 1 --save-steps 100000 --eval-steps 100000 \
        --peak-gflops "$(awk "BEGIN{print $PEAK*1000}")" \
        "$W/shards" >"$W/qlora.out" 2>"$W/qlora.err"
    { echo "## qlora stdout"; cat "$W/qlora.out"; echo "## qlora stderr"; cat "$W/qlora.err"; } >>"$OUT/train.log"
fi

# ---- 4a. swift-eval on the same device: loss and batched generation on the key/value cache ----
if [ $BUILD_OK = 1 ] && [ -d "$W/shards" ]; then
    {
        echo "## swift-eval --device $DEVICE"
        stage eval_loss 120 "$BIN/swift-eval" "$M" --device "$DEVICE" --task loss \
            --dataset "$W/shards" --limit 8 --batch-size 4 --max-length "$T" --quiet \
            >>"$W/eval.jsonl"
        stage eval_generate 120 "$BIN/swift-eval" "$M" --device "$DEVICE" --task exact \
            --dataset tests/fixtures/eval/synth/exact.jsonl --limit 16 --batch-size 8 \
            --max-new-tokens 32 --quiet >>"$W/eval.jsonl"
        cat "$W/eval.jsonl"
    } >>"$OUT/train.log" 2>&1
fi

# ---- 4b. compute-sanitizer memcheck: 2 steps of a tiny model (60 s at most) ----
SAN=$(command -v compute-sanitizer 2>/dev/null)
CUDA_BIN=$(dirname "$(command -v nvcc 2>/dev/null || echo /usr/local/cuda/bin/nvcc)")
[ -z "$SAN" ] && [ -x "$CUDA_BIN/compute-sanitizer" ] && SAN=$CUDA_BIN/compute-sanitizer
if [ $BUILD_OK = 1 ] && [ "$DRY" != 1 ] && [ -n "$SAN" ]; then
    TM=$W/tiny
    mkdir -p "$TM"
    sed -e 's/"hidden_size": [0-9]*/"hidden_size": 64/' -e 's/"intermediate_size": [0-9]*/"intermediate_size": 160/' \
        -e 's/"num_hidden_layers": [0-9]*/"num_hidden_layers": 2/' -e 's/"num_attention_heads": [0-9]*/"num_attention_heads": 4/' \
        -e 's/"vocab_size": [0-9]*/"vocab_size": 600/' "$M/config.json" >"$TM/config.json"
    cp "$M/tokenizer.json" "$TM/"
    if $PY "$W/mkmodel.py" "$TM" >/dev/null 2>>"$W/model.err" &&
        "$BIN/swift-preprocess" --tokenizer "$TM" --template generation --truncation split \
            --packing sequential --max-length 128 -o "$W/tiny-shards" "$W/corpus.txt" >/dev/null 2>&1; then
        stage sanitizer 60 "$SAN" --tool memcheck --log-file "$OUT/sanitizer.log" --error-exitcode 3 \
            "$BIN/swift-train" --model "$TM" -o "$W/tiny-run" --tuner full --device "$DEVICE" \
            --max-steps 2 --per-device-train-batch-size 2 --max-length 128 --logging-steps 1 \
            --save-steps 2 --eval-steps 100000 "$W/tiny-shards" >"$W/sanitizer.out" 2>&1
        cat "$W/sanitizer.out" >>"$OUT/sanitizer.log"
        # QLoRA: the fused 4-bit kernels' reads of codes and absmax, every tile edge
        stage sanitizer_qlora 60 "$SAN" --tool memcheck --log-file "$W/sanitizer-qlora.log" \
            --error-exitcode 3 "$BIN/swift-train" --model "$TM" -o "$W/tiny-qlora" --tuner lora \
            --quant-bits 4 --double-quant --device "$DEVICE" --max-steps 2 \
            --per-device-train-batch-size 2 --max-length 128 --logging-steps 1 --save-steps 100000 \
            --eval-steps 100000 "$W/tiny-shards" >"$W/sanitizer-qlora.out" 2>&1
        { echo "## qlora"; cat "$W/sanitizer-qlora.log" "$W/sanitizer-qlora.out"; } >>"$OUT/sanitizer.log"
    else
        status sanitizer "failed (tiny model or shards)" 0
    fi
else
    status sanitizer "skipped (${SAN:-compute-sanitizer not found}${SAN:+: dry run or no build})" 0
fi

# ---- 5. PyTorch + transformers eager, same model, batch, sequence ----
: >"$OUT/torch.log"
for prec in fp32 bf16; do
    stage "torch_$prec" 180 $PY tests/gpu/torch_bench.py "$M" --batch "$B" --seq "$T" \
        --steps 10 --warmup 3 --peak-tflops "$PEAK" --precision $prec --device "$TDEV" \
        >"$W/torch_$prec.json" 2>>"$OUT/torch.log"
    cat "$W/torch_$prec.json" >>"$OUT/torch.log"
done

# ---- 6. summary ----
$PY - "$W" "$OUT" "$B" "$T" "$STEPS" "$PEAK" "$DEVICE" "$START" <<'EOF'
import json, os, sys, time
W, OUT, B, T, STEPS, PEAK, DEVICE, START = sys.argv[1:9]
def jl(p):
    try:
        return [json.loads(l) for l in open(p) if l.strip().startswith("{")]
    except OSError:
        return []
def j1(p):
    r = jl(p)
    return r[-1] if r else None
s = {"device": DEVICE, "batch": int(B), "seq": int(T), "steps": int(STEPS),
     "peak_tflops_for_mfu": float(PEAK), "stages": jl(os.path.join(W, "status.jsonl")),
     "model": j1(os.path.join(W, "model.json"))}
# kernel tests: TAP lines
k = {"ok": 0, "not_ok": 0, "skip": 0, "failed": []}
try:
    for l in open(os.path.join(OUT, "kernels.log")):
        if l.startswith("ok "):
            k["ok"] += 1
        elif l.startswith("not ok"):
            if "# SKIP" in l:
                k["skip"] += 1
            else:
                k["not_ok"] += 1
                k["failed"].append(l.strip())
except OSError:
    pass
s["kernel_tests"] = k
try:
    san = [l.strip() for l in open(os.path.join(OUT, "sanitizer.log")) if "ERROR SUMMARY" in l]
    s["sanitizer"] = "; ".join(san) if san else "no summary line"  # full tuning, then QLoRA
except OSError:
    s["sanitizer"] = None
# flash vs cuBLAS attention on the 0.5B shape (the attention timing rows of test_backend_ops)
import re
at = []
try:
    for l in open(os.path.join(OUT, "kernels.log")):
        m = re.search(r"attention timing B=(\d+) T=(\d+) NH=(\d+) NKV=(\d+) D=(\d+) (\S+): "
                      r"cublas fwd ([\d.]+) ms bwd ([\d.]+) ms; flash fwd ([\d.]+) ms bwd ([\d.]+) ms", l)
        if m:
            g = m.groups()
            at.append({"B": int(g[0]), "T": int(g[1]), "NH": int(g[2]), "NKV": int(g[3]), "D": int(g[4]),
                       "documents": g[5], "cublas_fwd_ms": float(g[6]), "cublas_bwd_ms": float(g[7]),
                       "flash_fwd_ms": float(g[8]), "flash_bwd_ms": float(g[9])})
except OSError:
    pass
s["attention_timing"] = at
s["attention_path"] = ("cpu op" if DEVICE == "cpu" else
                      os.environ.get("SWIFT_CUDA_ATTN") or "default (flash for head dims <= 256)")
recs = [r for r in jl(os.path.join(W, "run", "logging.jsonl")) if "loss" in r and "tokens/s" in r]
if recs:
    steady = recs[3:] if len(recs) > 6 else recs
    # profiled steps carry CUPTI overhead: leave them out of the speed figure
    prof_from = max(1, int(STEPS) - 5)
    fast = [r for r in steady if r.get("global_step/max_steps", "0/0").split("/")[0].isdigit()
            and int(r["global_step/max_steps"].split("/")[0]) <= prof_from] or steady
    tps = sum(r["tokens/s"] for r in fast) / len(fast)
    mfu = sum(r.get("MFU", 0) for r in fast) / len(fast)
    s["swift"] = {"tokens_per_s": tps, "mfu": mfu, "first_loss": recs[0]["loss"],
                  "last_loss": recs[-1]["loss"], "records": len(recs),
                  "memory_gib": recs[-1].get("memory(GiB)")}
for prec in ("fp32", "bf16"):
    r = j1(os.path.join(W, f"torch_{prec}.json"))
    if r:
        s[f"torch_{prec}"] = r
        if "swift" in s:
            s[f"speedup_vs_torch_{prec}"] = s["swift"]["tokens_per_s"] / r["tokens_per_s"]
q = [r for r in jl(os.path.join(W, "qlora-run", "logging.jsonl")) if "loss" in r and "tokens/s" in r]
if q:
    qs = q[1:] if len(q) > 2 else q  # the first step pays for warm-up
    s["qlora"] = {"tokens_per_s": sum(r["tokens/s"] for r in qs) / len(qs),
                  "first_loss": q[0]["loss"], "last_loss": q[-1]["loss"], "records": len(q),
                  "memory_gib": q[-1].get("memory(GiB)"),
                  "memory_params_gib": q[-1].get("memory/params(GiB)")}
ev = jl(os.path.join(W, "eval.jsonl"))
if ev:
    s["eval"] = [{k: r.get(k) for k in ("task", "n", "metrics", "tokens_per_s", "prefill_tokens_per_s",
                                        "decode_tokens_per_s", "time_s")} for r in ev]
try:
    a = json.load(open(os.path.join(W, "analyze.json")))
    s["analyze"] = a
except (OSError, ValueError):
    pass
s["seconds"] = time.time() - int(START)
json.dump(s, open(os.path.join(OUT, "summary.json"), "w"), indent=1)
L = [f"# tests/gpu/run.sh — {DEVICE}, batch {B} x seq {T}, {STEPS} steps", ""]
L.append("| stage | status | s |")
L.append("|---|---|---|")
for st in s["stages"]:
    L.append(f"| {st['stage']} | {st['status']} | {st['seconds']} |")
L.append("")
L.append(f"kernel tests: {k['ok']} ok, {k['not_ok']} failed, {k['skip']} skipped")
L.append(f"compute-sanitizer memcheck (2 steps, tiny model): {s['sanitizer'] or 'not run'}")
for f in k["failed"]:
    L.append(f"- {f}")
L.append("")
if at:
    L.append("| attention (test_backend_ops timing rows) | cuBLAS fwd ms | bwd ms | flash fwd ms | bwd ms |")
    L.append("|---|---|---|---|---|")
    for a in at:
        L.append(f"| B={a['B']} T={a['T']} NH={a['NH']} NKV={a['NKV']} D={a['D']} {a['documents']} | "
                 f"{a['cublas_fwd_ms']:.3f} | {a['cublas_bwd_ms']:.3f} | {a['flash_fwd_ms']:.3f} | {a['flash_bwd_ms']:.3f} |")
else:
    L.append("attention timing: none (the timing rows of test_backend_ops skipped or did not run)")
L.append(f"swift-train attention path: {s['attention_path']}")
L.append("")
L.append("| implementation | tokens/s | MFU | ratio swift/this |")
L.append("|---|---|---|---|")
if "swift" in s:
    L.append(f"| swift-train {DEVICE} (fp32 weights, TF32 matmuls on cuda) | {s['swift']['tokens_per_s']:.0f} | {100*s['swift']['mfu']:.1f}% | 1 |")
for prec in ("fp32", "bf16"):
    r = s.get(f"torch_{prec}")
    if r:
        ratio = s.get(f"speedup_vs_torch_{prec}")
        L.append(f"| {r['impl']} (torch {r['torch']}) | {r['tokens_per_s']:.0f} | {100*r['mfu']:.1f}% | {ratio:.2f} |" if ratio else
                 f"| {r['impl']} (torch {r['torch']}) | {r['tokens_per_s']:.0f} | {100*r['mfu']:.1f}% | - |")
if "qlora" in s:
    qq = s["qlora"]
    L.append(f"| swift-train {DEVICE} QLoRA (nf4, double quant: the fused 4-bit op) | "
             f"{qq['tokens_per_s']:.0f} | - | - |")
L.append("")
if "qlora" in s:
    gib = lambda x: f"{x:.3f}" if isinstance(x, (int, float)) else "?"
    L.append(f"QLoRA loss {qq['first_loss']:.4f} -> {qq['last_loss']:.4f} over {qq['records']} steps, "
             f"memory {gib(qq['memory_gib'])} GiB (params {gib(qq['memory_params_gib'])} GiB)")
for r in s.get("eval", []):
    dec = f", decode {r['decode_tokens_per_s']:.0f} tok/s" if r.get("decode_tokens_per_s") else ""
    L.append(f"swift-eval {DEVICE} {r['task']} (n {r['n']}): {r['tokens_per_s']:.0f} tok/s{dec}, "
             f"metrics {json.dumps(r['metrics'])}")
L.append("")
L.append(f"MFU against {PEAK} TFLOP/s (dense bf16 peak), FLOPs/token as swift_model_flops_per_token.")
if "swift" in s:
    L.append(f"swift loss {s['swift']['first_loss']:.4f} -> {s['swift']['last_loss']:.4f}")
L.append(f"total {s['seconds']:.0f} s")
open(os.path.join(OUT, "report.md"), "w").write("\n".join(L) + "\n")
print("\n".join(L))
EOF
echo "run.sh: done in $(($(date +%s) - START)) s; results in $OUT" >&2
