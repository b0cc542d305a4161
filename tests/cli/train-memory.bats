#!/usr/bin/env bats
# swift-train's memory accounting (lib/core/mem.h): logging.jsonl's "memory(GiB)" is the peak of
# the accounted total and "memory/<category>(GiB)" its parts at that moment; each technique's bytes
# land in their category, checked against the formulas of the model's shape; the trace counter
# memory_by_category; swift-trace-analyze's memory section shows the categories.

bats_require_minimum_version 1.5.0

D=tests/fixtures/shards
T="$SWIFT_BIN/swift-train"
A="$SWIFT_BIN/swift-trace-analyze"

setup() {
    W=$(mktemp -d)
}
teardown() {
    rm -rf "$W"
}

# The Llama shape of train-optim8.bats: hidden 128, MLP 256, 4 heads of 32 (2 key/value heads),
# 2 layers, vocabulary 128. Linear weights per layer: q 128x128, k and v 64x128, o 128x128,
# gate/up 256x128, down 128x256 = 147456; all: LIN=294912; embeddings and lm_head 2x16384; norms
# 5x128: P=328320 parameters, those >= 4096 elements (8-bit states) 327680 in 1280 blocks of 256.
# LoRA rank 4 on every linear: 4 x (in + out) each = 8192 per layer, AD=16384; DoRA's magnitudes:
# the linears' output rows, 1024 per layer, MAG=2048.
LIN=294912
MAG=2048
P=328320
AD=16384
model() {
    mkdir -p "$W/cfg"
    sed -e 's/"hidden_size": 32/"hidden_size": 128/' \
        -e 's/"intermediate_size": 64/"intermediate_size": 256/' \
        -e 's/"head_dim": 8/"head_dim": 32/' tests/fixtures/model/llama/config.json >"$W/cfg/config.json"
    "$T" --init-model --model "$W/cfg" -o "$W/m" --seed 3 >/dev/null
}

# run NAME ARGS...: two steps; $W/NAME.rec is the last train record
train() {
    local n=$1
    shift
    "$T" --model "$W/m" --max-steps 2 --logging-steps 1 --save-steps 100 --eval-steps 100 \
        --per-device-train-batch-size 2 -j 1 -o "$W/$n" "$@" $D >"$W/$n.out" 2>"$W/$n.err"
    grep '"loss"' "$W/$n.out" | tail -1 >"$W/$n.rec"
}

# bytes NAME CATEGORY: the category's bytes at the peak (exact: GiB x 2^30)
bytes() {
    jq -r --arg k "memory/$2(GiB)" '.[$k] * 1073741824 | round' "$W/$1.rec"
}

# the categories sum to memory(GiB) (to the double's rounding), RSS kept as rss(GiB)
sums() {
    jq -e '(."memory/params(GiB)" + ."memory/grads(GiB)" + ."memory/optimizer(GiB)"
            + ."memory/activations(GiB)" + ."memory/other(GiB)") as $s
           | ."memory(GiB)" > 0 and ((($s - ."memory(GiB)") | fabs) < 1e-12)
             and ."rss(GiB)" > 0' "$W/$1.rec" >/dev/null
}

@test "memory(GiB) is the accounted peak; each technique's bytes in its category" {
    model
    train full --tuner full
    train lora --tuner lora --lora-rank 4
    train a8 --tuner full --optim adamw_8bit
    train gal --tuner full --galore-rank 8
    train q4 --tuner lora --lora-rank 4 --quant-bits 4
    train dora --tuner lora --lora-rank 4 --lora-dora
    for n in full lora a8 gal q4 dora; do
        sums $n
        echo "# $n: params $(bytes $n params) grads $(bytes $n grads) optimizer $(bytes $n optimizer) activations $(bytes $n activations) other $(bytes $n other)" >&3
    done
    # full AdamW: m and v in fp32 over every parameter; gradients as large as the parameters
    [ "$(bytes full optimizer)" -eq $((2 * 4 * P)) ]
    [ "$(bytes full grads)" -eq $((4 * P)) ]
    [ "$(bytes full params)" -eq $((4 * P)) ]
    # LoRA: the adapters' states and gradients only; the fp32 base plus the adapters
    [ "$(bytes lora optimizer)" -eq $((2 * 4 * AD)) ]
    [ "$(bytes lora grads)" -eq $((4 * AD)) ]
    [ "$(bytes lora params)" -eq $((4 * (P + AD))) ]
    # 8-bit AdamW: two 1-byte codes per element and two fp32 absmax per block of the large
    # parameters, fp32 m and v for the norms' 640
    [ "$(bytes a8 optimizer)" -eq $((2 * 327680 + 2 * 4 * 1280 + 2 * 4 * 640)) ]
    # GaLore rank 8: below AdamW's
    [ "$(bytes gal optimizer)" -lt "$(bytes full optimizer)" ]
    [ "$(bytes gal optimizer)" -gt 0 ]
    # QLoRA (nf4): each linear weight in half a byte plus an fp32 absmax per block of 64
    [ "$(bytes q4 params)" -eq $((4 * (P - LIN) + LIN / 2 + 4 * LIN / 64 + 4 * AD)) ]
    [ "$(bytes q4 params)" -lt "$(bytes lora params)" ]
    [ "$(bytes q4 grads)" -eq $((4 * AD)) ]
    # DoRA: LoRA plus a magnitude per output row of each linear (MAG=2048), trained like the adapters
    [ "$(bytes dora params)" -eq $((4 * (P + AD + MAG))) ]
    [ "$(bytes dora grads)" -eq $((4 * (AD + MAG))) ]
    [ "$(bytes dora optimizer)" -eq $((2 * 4 * (AD + MAG))) ]
    # the peak is what the categories held together, not the RSS
    jq -e '."memory(GiB)" < ."rss(GiB)"' "$W/full.rec" >/dev/null
}

@test "--trace: the counter memory_by_category at the start and with each record, as the record" {
    model
    train tr --tuner lora --lora-rank 4 --trace="$W/t.json"
    # one at the start, one per train record (2)
    [ "$(jq -c 'select(.ph == "C" and .name == "memory_by_category")' "$W/t.json" | wc -l)" -eq 3 ]
    last=$(jq -c 'select(.ph == "C" and .name == "memory_by_category") | .args' "$W/t.json" | tail -1)
    jq -e --argjson a "$last" '($a.params + $a.grads + $a.optimizer + $a.activations + $a.other)
        == $a.total and ($a.total / 1073741824 - ."memory(GiB)" | fabs) < 1e-12
        and $a.optimizer == 2 * 4 * 16384 and ($a.params / 1073741824 - ."memory/params(GiB)" | fabs) < 1e-12' \
        "$W/tr.rec" >/dev/null
}

@test "swift-trace-analyze: the memory section shows the accounted peak by category (text, JSON, HTML)" {
    model
    train tr --tuner lora --lora-rank 4 --trace="$W/t.json"
    run "$A" --format json "$W/t.json"
    [ "$status" -eq 0 ]
    jq -e '.processes[0].memory.by_category
           | .params == 1378816 and .grads == 65536 and .optimizer == 131072
             and .total == .params + .grads + .optimizer + .activations + .other' <<<"$output" >/dev/null
    run "$A" "$W/t.json"
    [ "$status" -eq 0 ]
    grep -q '^  accounted peak [0-9.]* MiB: params 1.31 MiB, grads 0.06 MiB, optimizer 0.12 MiB, activations [0-9.]* MiB, other 0.00 MiB$' <<<"$output"
    run "$A" --format html "$W/t.json"
    [ "$status" -eq 0 ]
    grep -q '<h2>Memory by category' <<<"$output"
    grep -q '<td>1.31</td><td>0.06</td><td>0.12</td>' <<<"$output"
}

@test "--galore-optim-per-parameter: memory/grads drops to the other parameters' plus one weight's" {
    model
    train gal --tuner full --galore-rank 8 --max-grad-norm 0
    train galpp --tuner full --galore-rank 8 --galore-optim-per-parameter
    sums galpp
    echo "# gal grads $(bytes gal grads), per parameter $(bytes galpp grads)" >&3
    # GaLore takes the 14 linears (LIN); their gradients share one buffer of the largest
    # (gate/up/down: 256x128 = 32768); the embeddings, lm_head and norms keep theirs
    [ "$(bytes gal grads)" -eq $((4 * P)) ]
    [ "$(bytes galpp grads)" -eq $((4 * (P - LIN + 32768))) ]
    [ "$(bytes galpp optimizer)" -eq "$(bytes gal optimizer)" ]
    [ "$(bytes galpp params)" -eq "$(bytes gal params)" ]
}
