#!/bin/sh
# Multimodal packing (docs/multimodal.md "Packing"): swift-train tokens/s on packed vs one-a-row
# image shards, side by side in one run. LLaMA-Factory's mllm_demo.json (6 conversations, 8
# images) with qwen3's tokenizer and --template qwen2_vl (--max-pixels BENCH_VL_PIXELS, default
# 50176: 64 image tokens a 224x224 image), the tiny Qwen2-VL fixture tests/fixtures/vlm/qwen2_vl
# widened to Qwen2's 151936-id vocabulary (tests/cli/vl_model.bash; max_position_embeddings raised
# to 4096), LoRA rank 8, batch 1 row, BENCH_VL_EPOCHS epochs (default 4) of:
#   one a row, --max-length = the longest sample (the least padding one a row can have: what a
#     batch of one is padded to in ms-swift);
#   one a row, --max-length BENCH_VL_LEN (default 512): the packed rows' length;
#   packed (binpack) into rows of BENCH_VL_LEN.
# Per run: optimizer steps, the token slots the model computes (rows x length), the samples'
# real tokens, seconds (the sum of the steps' train_speed(s/it)), real tokens/s and the ratio to
# the first run. The fixture is tiny (hidden 32, 2 layers), so a step's cost is mostly the
# 151936-wide lm_head over the token slots: the ratio shows the padding packing removes, which
# carries over to a real model in proportion to the slots saved (plus fewer, fuller steps).
# Prints /proc/loadavg beside the figures: the machine may be shared.
set -eu
BIN=${SWIFT_BIN:-${SWIFT_BUILD:-build}/bin}
SHARED=${SHARED:-../shared}
TOK="$SHARED/data/tokenizers/qwen3"
DEMO="$SHARED/data/datasets/llama-factory-demo"
pixels=${BENCH_VL_PIXELS:-50176}
len=${BENCH_VL_LEN:-512}
epochs=${BENCH_VL_EPOCHS:-4}
threads=${BENCH_THREADS:-2}
if [ ! -f "$TOK/tokenizer.json" ] || [ ! -f "$DEMO/mllm_demo.json" ]; then
    echo "vl_packing: skipped ($SHARED lacks the qwen3 tokenizer or the llama-factory demo)"
    exit 0
fi
W=$(mktemp -d /tmp/swift-bench-vlpack.XXXXXX)
trap 'rm -rf "$W"' EXIT
trap 'exit 1' INT TERM
. tests/cli/vl_model.bash
vl_widen "$W/m"
python3 - "$W/m/config.json" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
c["text_config"]["max_position_embeddings"] = 4096
json.dump(c, open(sys.argv[1], "w"), indent=2)
EOF
PP="--tokenizer $W/m --template qwen2_vl --max-pixels $pixels --max-length $len"
"$BIN/swift-preprocess" $PP -o "$W/du" "$DEMO/mllm_demo.json" >"$W/du.json" 2>/dev/null
"$BIN/swift-preprocess" $PP --packing -o "$W/dp" "$DEMO/mllm_demo.json" >"$W/dp.json" 2>/dev/null
longest=$(jq .length.max "$W/du.json")
real=$(jq .tokens "$W/du.json")

# run NAME SHARDS MAX_LENGTH: one training run; prints its row
run() {
    rows=$(jq .samples "$W/$2.json")
    steps=$((rows * epochs))
    "$BIN/swift-train" --model "$W/m" --max-length "$3" --max-steps "$steps" --logging-steps 1 \
        --save-steps 100000 --eval-steps 100000 --learning-rate 1e-3 --lora-rank 8 \
        --per-device-train-batch-size 1 -j "$threads" -o "$W/r-$1" "$W/$2" >"$W/$1.out" 2>"$W/$1.err" ||
        { cat "$W/$1.err" >&2; return 1; }
    secs=$(jq -s '[.[] | select(.loss != null) | ."train_speed(s/it)"] | add' "$W/r-$1/logging.jsonl")
    tps=$(echo "$real * $epochs / $secs" | bc -l)
    [ -n "${base:-}" ] || base=$tps
    printf '%-26s %6d %8d %8d %8.2f %9.0f %6.2fx\n' "$1" "$steps" $((steps * $3)) \
        $((real * epochs)) "$secs" "$tps" "$(echo "$tps / $base" | bc -l)"
}

echo "vl_packing: demo $real tokens in 6 samples (longest $longest), $(jq .samples "$W/dp.json") packed rows of $len; $epochs epochs, -j $threads"
printf '%-26s %6s %8s %8s %8s %9s %7s\n' run steps slots tokens seconds tokens/s ratio
run "one-a-row (T=longest)" du "$longest"
run "one-a-row (T=$len)" du "$len"
run "packed (T=$len)" dp "$len"
echo "loadavg: $(cat /proc/loadavg)"
