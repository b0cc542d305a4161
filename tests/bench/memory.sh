#!/bin/sh
# What each memory technique of swift-train saves (issue 20), measured side by side in one run:
# a random-weight model of Qwen2.5-0.5B's shape (hidden 896, 24 layers, MLP 4864, 14 heads, 2
# key/value heads, vocabulary 151936, tied embeddings, q/k/v bias; fp32, made by swift-train
# --init-model), the llama-factory alpaca demo in $SHARED tokenized with the Qwen3 tokenizer,
# chatml, packed (binpack) into samples of at most 512 tokens, batch 1, a few steps of: full
# AdamW, LoRA (rank 8, all-linear), QLoRA (nf4, double-quant, LoRA rank 8), DoRA (rank 8), GaLore
# rank 16 and rank 128 (projection refreshed every 200 steps), GaLore rank 16 per parameter
# (--galore-optim-per-parameter: updated during backward, no clipping), 8-bit AdamW (full). One
# run at a time, so each peak is its own.
#
# A row per technique from the last logging.jsonl record: our accounting's peak (memory(GiB),
# lib/core/mem.h) by category at the moment the total peaked (params, grads, optimizer,
# activations, other), the total, the process's RSS, tokens/s (mean of the records after the
# first step, which warms up) and total / full AdamW's total. Then the issue's two goals:
#   GaLore r16 total >= 35 % below full AdamW's;
#   QLoRA's base linears <= 0.29 x their bf16 size: their bytes are QLoRA's params minus LoRA's
#   params plus the linears' fp32 bytes (both runs hold the same fp32 embeddings, norms, biases
#   and adapters; LoRA also holds the linears in fp32, 4 bytes x LIN elements from the shape),
#   against 2 bytes x LIN; the layout's formula (a code per half byte, a uint8 absmax per block
#   of 64, an fp32 constant per 256 blocks) is printed beside it.
# Exits non-zero only when a swift-train run fails; a missed goal is reported, not an error.
#
# BENCH_MEMORY_SHAPE: qwen2.5-0.5b (default) or tiny (hidden 64, 2 layers, vocabulary 128, on
# tests/fixtures/shards; no $SHARED needed; what tests/cli/bench-memory.bats runs).
# BENCH_STEPS (default 3), BENCH_THREADS (default 2), BENCH_MEMORY_RUNS (default "full lora qlora
# dora galore16 galore128 galore16pp adamw8bit"). The full shape takes ~25 min on 2 cores and up to ~16 GB
# (full AdamW's final checkpoint is written while its state is held).
set -eu
BIN=${SWIFT_BIN:-${SWIFT_BUILD:-build}/bin}
SHARED=${SHARED:-../shared}
shape=${BENCH_MEMORY_SHAPE:-qwen2.5-0.5b}
steps=${BENCH_STEPS:-3}
threads=${BENCH_THREADS:-2}
runs=${BENCH_MEMORY_RUNS:-full lora qlora dora galore16 galore128 galore16pp adamw8bit}
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
W=$(mktemp -d /tmp/swift-bench-memory.XXXXXX)
trap 'rm -rf "$W"' EXIT
trap 'exit 1' INT TERM
case $shape in
qwen2.5-0.5b)
    H=896 L=24 I=4864 NH=14 KV=2 V=151936 unit=GiB div=1
    tok=$SHARED/data/tokenizers/qwen3
    data=$SHARED/data/datasets/llama-factory-demo/alpaca_en_demo.json
    if [ ! -f "$tok/tokenizer.json" ] || [ ! -f "$data" ]; then
        echo "memory: needs $tok and $data (set SHARED)" >&2
        exit 1
    fi
    ;;
tiny)
    H=64 L=2 I=128 NH=4 KV=2 V=128 unit=MiB div=1024
    tok='' data=tests/fixtures/shards
    ;;
*)
    echo "memory: BENCH_MEMORY_SHAPE is qwen2.5-0.5b or tiny, not '$shape'" >&2
    exit 2
    ;;
esac
args() {
    case $1 in
    full) echo --tuner full ;;
    lora) echo --tuner lora --lora-rank 8 ;;
    qlora) echo --tuner lora --lora-rank 8 --quant-bits 4 --quant-type nf4 --double-quant ;;
    dora) echo --tuner lora --lora-rank 8 --lora-dora ;;
    galore16) echo --tuner full --galore-rank 16 --galore-update-proj-gap 200 ;;
    galore128) echo --tuner full --galore-rank 128 --galore-update-proj-gap 200 ;;
    galore16pp) echo --tuner full --galore-rank 16 --galore-update-proj-gap 200 --galore-optim-per-parameter ;;
    adamw8bit) echo --tuner full --optim adamw_8bit ;;
    *) return 1 ;;
    esac
}
for r in $runs; do
    args "$r" >/dev/null || {
        echo "memory: unknown run '$r'" >&2
        exit 2
    }
done

HD=$((H / NH))
KVD=$((KV * HD))
# the attention and MLP linears' weights: q, o H x H; k, v KVD x H; gate, up, down H x I
LIN=$((L * (2 * H * H + 2 * H * KVD + 3 * H * I)))

mkdir -p "$W/cfg"
cat >"$W/cfg/config.json" <<EOF
{"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "vocab_size": $V,
 "hidden_size": $H, "intermediate_size": $I, "num_hidden_layers": $L,
 "num_attention_heads": $NH, "num_key_value_heads": $KV, "head_dim": $HD,
 "max_position_embeddings": 32768, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
 "hidden_act": "silu", "tie_word_embeddings": true, "torch_dtype": "float32"}
EOF
if [ -n "$tok" ]; then
    cp "$tok/tokenizer.json" "$tok/tokenizer_config.json" "$W/cfg/"
fi
"$BIN/swift-train" --init-model --model "$W/cfg" -o "$W/model" --seed 1 >/dev/null 2>"$W/init.err" || {
    cat "$W/init.err" >&2
    exit 1
}
if [ -n "$tok" ]; then
    "$BIN/swift-preprocess" --tokenizer "$W/cfg" --template chatml --max-length 512 \
        --packing binpack -o "$W/shards" "$data" >/dev/null 2>"$W/pre.err" || {
        cat "$W/pre.err" >&2
        exit 1
    }
    data=$W/shards
fi


echo "shape $shape: hidden $H, $L layers, MLP $I, $NH heads ($KV key/value), vocabulary $V;" \
    "$LIN linear weights; $steps steps of batch 1 from $(basename "$data"), $threads threads"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores;" \
    "$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)"
hdr="%-10s %8s %8s %9s %11s %7s %8s %8s %8s %6s %5s\n"
# shellcheck disable=SC2059
printf "$hdr" run params grads optimizer activations other "total" rss tokens/s ratio load
echo "(peak by category in $unit at the moment the accounted total peaked)"
full_total=''
for r in $runs; do
    a=$(args "$r")
    # shellcheck disable=SC2086
    "$BIN/swift-train" --model "$W/model" -o "$W/run-$r" $a --max-steps "$steps" \
        --logging-steps 1 --save-steps 1000000 --eval-steps 1000000 \
        --per-device-train-batch-size 1 -j "$threads" "$data" >"$W/$r.out" 2>"$W/$r.err" || {
        echo "memory: swift-train ($r: $a) failed:" >&2
        tail -n 5 "$W/$r.err" >&2
        exit 1
    }
    rm -rf "$W/run-$r" # the final checkpoint (GBs)
    grep '"loss"' "$W/$r.out" >"$W/$r.recs"
    tail -n 1 "$W/$r.recs" >"$W/$r.rec"
    # bytes of each category at the peak, the total, RSS; tokens/s after the first step
    jq -r '[."memory/params(GiB)", ."memory/grads(GiB)", ."memory/optimizer(GiB)",
            ."memory/activations(GiB)", ."memory/other(GiB)", ."memory(GiB)", ."rss(GiB)"]
           | map(. * 1073741824 | round) | @tsv' "$W/$r.rec" >"$W/$r.bytes"
    tps=$(jq -s 'if length > 1 then .[1:] else . end | map(."tokens/s") | add / length' "$W/$r.recs")
    total=$(cut -f6 "$W/$r.bytes")
    [ "$r" = full ] && full_total=$total
    awk -v r="$r" -v tps="$tps" -v ft="$full_total" -v d="$div" -v hdr="$hdr" \
        -v load="$(cut -d' ' -f1 /proc/loadavg)" -F '\t' '{
        u = 1073741824 / d
        ratio = ft == "" ? "-" : sprintf("%.2f", $6 / ft)
        printf hdr, r, sprintf("%.3f", $1 / u), sprintf("%.3f", $2 / u), sprintf("%.3f", $3 / u),
            sprintf("%.3f", $4 / u), sprintf("%.3f", $5 / u), sprintf("%.3f", $6 / u),
            sprintf("%.3f", $7 / u), sprintf("%.1f", tps), ratio, load
    }' "$W/$r.bytes"
done

# the goals
b() { [ -f "$W/$1.bytes" ] && cut -f"$2" "$W/$1.bytes"; }
if [ -f "$W/galore16.bytes" ] && [ -n "$full_total" ]; then
    awk -v g="$(b galore16 6)" -v f="$full_total" 'BEGIN {
        red = 100 * (1 - g / f)
        printf "goal: GaLore r16 total >= 35%% below full AdamW: %.1f%% below (%s)\n", red,
            (red >= 35 ? "met" : "missed")
    }'
else
    echo "goal: GaLore r16 vs full AdamW: not measured (needs runs full and galore16)"
fi
if [ -f "$W/galore16pp.bytes" ] && [ -n "$full_total" ]; then
    awk -v g="$(b galore16pp 6)" -v f="$full_total" 'BEGIN {
        red = 100 * (1 - g / f)
        printf "goal: GaLore r16 per parameter total >= 35%% below full AdamW: %.1f%% below (%s)\n",
            red, (red >= 35 ? "met" : "missed")
    }'
fi
if [ -f "$W/qlora.bytes" ] && [ -f "$W/lora.bytes" ]; then
    awk -v q="$(b qlora 1)" -v l="$(b lora 1)" -v lin="$LIN" -v L="$L" -v H="$H" -v I="$I" \
        -v kvd="$KVD" 'function f(n,  nb) { nb = int((n + 63) / 64); return n / 2 + nb + 4 * int((nb + 255) / 256) }
        BEGIN {
        base = q - l + 4 * lin
        formula = L * (2 * f(H * H) + 2 * f(H * kvd) + 3 * f(H * I))
        printf "goal: QLoRA base linears <= 0.29 x bf16: %.0f bytes for %d weights = %.4f x bf16 (%s);" \
            " layout formula %.4f x\n", base, lin, base / (2 * lin),
            (base / (2 * lin) <= 0.29 ? "met" : "missed"), formula / (2 * lin)
    }'
else
    echo "goal: QLoRA base vs bf16: not measured (needs runs lora and qlora)"
fi
