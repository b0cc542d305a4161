#!/bin/sh
# ms-swift itself side by side (issue 22): PyPI `ms-swift` 4.6 on the CPU against
# swift-preprocess + swift-train, run end to end as a user runs each, on the same model, data,
# steps, batch, sequence length and learning rate, in bfloat16 and in float32.
#
# The model: random weights (swift-train --init-model) of the ~108M Qwen2 shape of
# tests/bench/infer.sh (hidden 512, 10 layers, MLP 1536, 8 heads, 2 key/value heads, the Qwen3
# tokenizer's vocabulary 151936, tied embeddings), float32 safetensors in HF layout; both sides
# load the same directory.
# The data: the alpaca demo ($SHARED/data/datasets/llama-factory-demo/alpaca_en_demo.json), the
# rows whose templated length (qwen template, its default system) is at least BENCH_SEQ tokens,
# truncated on the right to BENCH_SEQ: every sample is exactly BENCH_SEQ tokens on both sides,
# so tokens per step are batch x seq whatever order each side draws them in (ms-swift prints
# "Dataset Token Length: 256.000000±0.000000"; ms-swift's packing needs flash attention, which
# the CPU has not).
# Preprocessing: `swift export --to_cached_dataset true` (ms-swift's tokenize-ahead step; it
# loads the model too) vs swift-preprocess --packing none. Training: `swift sft --cached_dataset
# --tuner_type full --use_cpu true --torch_dtype D --gradient_checkpointing false` (ms-swift's
# default recomputes the forward; off so both sides do the same work) vs swift-train --tuner full
# --torch-dtype D; AdamW with both sides' defaults (ms-swift's, which ours copies), cosine, no
# warm-up, no checkpoint saved by ms-swift (--save_strategy no; ours writes its final one).
# Figures: wall time and peak RSS (/usr/bin/time -v) of each command; training tokens/s over
# steps 2..N (the first is warm-up): ms-swift's cumulative train_speed(s/it) of its last and
# first records, ours' per-step train_speed(s/it) summed.
#
# MSSWIFT_VENV: the venv (default /work/venv-msswift where /work is writable, else
# ~/.cache/swift-tools/venv-msswift); made when it has no `swift`, with `pip install
# 'ms-swift>=4.6,<4.7' torch` (torch from the PyTorch CPU index when it answers, else PyPI), the
# log in MSSWIFT_VENV.log, never in the repository. A venv that cannot be made skips the
# benchmark with the reason (exit 0).
# BENCH_THREADS (2), BENCH_STEPS (4), BENCH_BATCH (2), BENCH_SEQ (256), BENCH_LR (1e-5),
# BENCH_DTYPES ("bfloat16 float32"). Never part of `make test`.
set -eu
BIN=${SWIFT_BIN:-${SWIFT_BUILD:-build}/bin}
SHARED=${SHARED:-../shared}
threads=${BENCH_THREADS:-2}
steps=${BENCH_STEPS:-4}
batch=${BENCH_BATCH:-2}
seq=${BENCH_SEQ:-256}
lr=${BENCH_LR:-1e-5}
dtypes=${BENCH_DTYPES:-bfloat16 float32}
if [ -z "${MSSWIFT_VENV:-}" ]; then
    if [ -d /work ] && [ -w /work ]; then
        MSSWIFT_VENV=/work/venv-msswift
    else
        MSSWIFT_VENV=${HOME:-/tmp}/.cache/swift-tools/venv-msswift
    fi
fi
V=$MSSWIFT_VENV
skip() {
    echo "msswift: skipped: $*"
    exit 0
}
tok=$SHARED/data/tokenizers/qwen3
data=$SHARED/data/datasets/llama-factory-demo/alpaca_en_demo.json
if [ ! -f "$tok/tokenizer.json" ] || [ ! -f "$data" ]; then
    skip "needs $tok and $data (set SHARED)"
fi

# the venv: made once, its log next to it
if [ ! -x "$V/bin/swift" ]; then
    log=$V.log
    echo "msswift: making $V (ms-swift 4.6 and a CPU torch; log in $log)"
    mkdir -p "$(dirname "$V")" 2>/dev/null || skip "cannot create $(dirname "$V")"
    {
        python3 -m venv "$V" &&
            "$V/bin/pip" install --upgrade pip &&
            { "$V/bin/pip" install --index-url https://download.pytorch.org/whl/cpu torch ||
                echo "msswift: the PyTorch CPU index did not answer; torch from PyPI"; } &&
            "$V/bin/pip" install 'ms-swift>=4.6,<4.7' torch
    } >"$log" 2>&1 || skip "cannot make the venv $V: $(grep -E 'ERROR|Error' "$log" | tail -n 1) (all of it: $log)"
fi
msv=$("$V/bin/python" -c 'import importlib.metadata as m; print(m.version("ms-swift"))' 2>/dev/null) ||
    skip "$V has no importable ms-swift"
tv=$("$V/bin/python" -c 'import torch; print(torch.__version__)' 2>/dev/null) || skip "$V has no torch"

[ -x /usr/bin/time ] || skip "needs GNU time as /usr/bin/time (Debian: apt-get install time)"
command -v jq >/dev/null || skip "needs jq"
W=$(mktemp -d /tmp/swift-bench-msswift.XXXXXX)
trap 'rm -rf "$W"' EXIT
trap 'exit 1' INT TERM
export OMP_NUM_THREADS="$threads" OPENBLAS_NUM_THREADS="$threads"
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
# ms-swift: no hub look-ups, no telemetry
export HF_HUB_OFFLINE=1 MODELSCOPE_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1

# the model: one directory both sides load
mkdir -p "$W/model0"
cat >"$W/model0/config.json" <<EOF
{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": 151936,
 "hidden_size": 512, "intermediate_size": 1536, "num_hidden_layers": 10,
 "num_attention_heads": 8, "num_key_value_heads": 2, "head_dim": 64,
 "max_position_embeddings": 4096, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
 "hidden_act": "silu", "tie_word_embeddings": true, "torch_dtype": "float32",
 "bos_token_id": null, "eos_token_id": 151645, "pad_token_id": 151643}
EOF
cp "$tok/tokenizer.json" "$tok/tokenizer_config.json" "$W/model0/"
"$BIN/swift-train" --init-model --model "$W/model0" -o "$W/model" --seed 1 >/dev/null 2>"$W/init.err" || {
    cat "$W/init.err" >&2
    exit 1
}
M=$W/model

# the data: alpaca demo rows of at least $seq templated tokens
jq -c '.[]' "$data" >"$W/alpaca.jsonl"
"$BIN/swift-preprocess" --tokenizer "$M" --template qwen --render --max-length 1000000 \
    "$W/alpaca.jsonl" 2>/dev/null | jq '.ids | length' >"$W/lens"
paste -d ' ' "$W/lens" "$W/alpaca.jsonl" |
    awk -v s="$seq" '$1 >= s { sub(/^[0-9]+ /, ""); print }' >"$W/train.jsonl"
rows=$(wc -l <"$W/train.jsonl")
[ "$rows" -ge $((steps * batch)) ] || {
    echo "msswift: only $rows alpaca rows of >= $seq tokens, fewer than $steps x $batch" >&2
    exit 1
}

# /usr/bin/time -v: "WALL_S RSS_MIB" of a command whose output goes to $1
timed() {
    out=$1
    shift
    /usr/bin/time -v -o "$out.time" "$@" >"$out" 2>"$out.err" || {
        echo "msswift: failed: $*" >&2
        tail -n 15 "$out.err" >&2
        return 1
    }
    awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, t, ":"); s = 0
                    for (i = 1; i <= n; i++) s = s * 60 + t[i]; w = s }
                /Maximum resident set size/ { r = $2 / 1024 }
                END { printf "%.1f %.0f\n", w, r }' "$out.time"
}
tps() { awk -v n="$1" -v s="$2" 'BEGIN { if (s > 0) printf "%.1f", n / s; else printf "-" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else printf "-" }'; }
ntok=$(((steps - 1) * batch * seq))

echo "model: Qwen2 random weights, hidden 512, 10 layers, MLP 1536, 8 heads (2 key/value)," \
    "vocabulary 151936, tied, ~108M parameters, float32 checkpoint; data: $rows alpaca demo" \
    "rows of >= $seq tokens (right-truncated to $seq); full fine-tuning, $steps steps of" \
    "$batch x $seq, lr $lr, $threads threads; ms-swift $msv (torch $tv) from $V"
echo "machine: $(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1), $(nproc) cores," \
    "load average at start $(cut -d' ' -f1-3 /proc/loadavg) (shared: other work slows every figure)"

# preprocessing (dtype-independent): once per side
r=$(timed "$W/ms-prep.out" "$V/bin/swift" export --model "$M" --model_type qwen2 \
    --template qwen --dataset "$W/train.jsonl" --max_length "$seq" --truncation_strategy right \
    --to_cached_dataset true --output_dir "$W/cached" --use_hf true) || exit 1
# shellcheck disable=SC2086
set -- $r
ms_prep_s=$1 ms_prep_r=$2
ms_len=$(sed -n 's/.*Dataset Token Length: \([^,]*\),.*/\1/p' "$W/ms-prep.out.err" | tail -n 1)
r=$(timed "$W/our-prep.out" "$BIN/swift-preprocess" --tokenizer "$M" --template qwen \
    --max-length "$seq" --truncation right --packing none -o "$W/shards" "$W/train.jsonl") || exit 1
# shellcheck disable=SC2086
set -- $r
our_prep_s=$1 our_prep_r=$2
our_len=$(jq -r '"\(.length.mean)±\(.length.std), min=\(.length.min), max=\(.length.max), size=\(.samples)"' "$W/our-prep.out")

row() { printf '%-18s %-9s %9s %9s %9s %9s %9s\n' "$@"; }
row system dtype prep_s prep_MiB train_s tok/s train_MiB
echo "tokens per sample: ms-swift $ms_len; swift-preprocess $our_len"
summary=''
for dt in $dtypes; do
    r=$(timed "$W/ms-$dt.out" "$V/bin/swift" sft --model "$M" --model_type qwen2 \
        --template qwen --cached_dataset "$W/cached/train" --tuner_type full --use_cpu true \
        --torch_dtype "$dt" --max_steps "$steps" --per_device_train_batch_size "$batch" \
        --gradient_accumulation_steps 1 --learning_rate "$lr" --max_length "$seq" \
        --truncation_strategy right --gradient_checkpointing false --logging_steps 1 \
        --save_strategy no --report_to none --dataloader_num_workers 0 \
        --split_dataset_ratio 0 --output_dir "$W/ms-$dt" --use_hf true) || exit 1
    # shellcheck disable=SC2086
    set -- $r
    ms_s=$1 ms_r=$2
    # train_speed(s/it) is cumulative: elapsed(step N) - elapsed(step 1)
    ms_t=$(jq -s '[.[] | select(.loss != null and .["train_speed(s/it)"] != null)] |
        (.[-1]["train_speed(s/it)"] * (.[-1]["global_step/max_steps"] | split("/")[0] | tonumber))
        - .[0]["train_speed(s/it)"]' "$W/ms-$dt"/v*/logging.jsonl)
    ms_tps=$(tps "$ntok" "$ms_t")
    row "ms-swift $msv" "$dt" "$ms_prep_s" "$ms_prep_r" "$ms_s" "$ms_tps" "$ms_r"
    r=$(timed "$W/our-$dt.out" "$BIN/swift-train" --model "$M" -o "$W/our-$dt" --tuner full \
        --torch-dtype "$dt" --max-steps "$steps" --per-device-train-batch-size "$batch" \
        --learning-rate "$lr" --logging-steps 1 --save-steps 100000 --eval-steps 100000 \
        -j "$threads" --device cpu --no-progress "$W/shards") || exit 1
    # shellcheck disable=SC2086
    set -- $r
    our_s=$1 our_r=$2
    our_t=$(jq -s '[.[] | select(.loss != null and .["train_speed(s/it)"] != null)] | .[1:] |
        map(.["train_speed(s/it)"]) | add' "$W/our-$dt.out")
    our_tps=$(tps "$ntok" "$our_t")
    row swift-tools "$dt" "$our_prep_s" "$our_prep_r" "$our_s" "$our_tps" "$our_r"
    summary="$summary$dt: tokens/s ours/ms-swift $(ratio "$our_tps" "$ms_tps"), training wall"
    summary="$summary ms-swift/ours $(ratio "$ms_s" "$our_s"), peak RSS ours/ms-swift"
    summary="$summary $(ratio "$our_r" "$ms_r")
"
done
printf '%s' "$summary"
echo "preprocessing wall ms-swift/ours $(ratio "$ms_prep_s" "$our_prep_s"), peak RSS ours/ms-swift" \
    "$(ratio "$our_prep_r" "$ms_prep_r")"
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
