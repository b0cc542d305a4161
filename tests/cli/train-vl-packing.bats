#!/usr/bin/env bats
bats_require_minimum_version 1.5.0
# Multimodal packing (docs/multimodal.md "Packing"): LLaMA-Factory's mllm_demo.json through
# swift-preprocess --packing (several samples per row, their images in order), --render --packing
# (the documents' and images' spans in the packed rows), and swift-train on the packed shards
# against the tiny Qwen2-VL fixture (widened to Qwen2's vocabulary, vl_model.bash): the loss goes
# down, and a packed run's losses equal an unpacked run's over the same samples.

T="$SWIFT_BIN/swift-train"
P="$SWIFT_BIN/swift-preprocess"

setup() {
    W="$BATS_TEST_TMPDIR"
    TOK="$SHARED/data/tokenizers/qwen3"
    DEMO="$SHARED/data/datasets/llama-factory-demo"
    if [ ! -f "$TOK/tokenizer.json" ] || [ ! -f "$DEMO/mllm_demo.json" ]; then
        [ "${CI:-}" != true ] || return 1
        skip "shared data missing"
    fi
    . "$BATS_TEST_DIRNAME/vl_model.bash" # vl_widen
    PP=(--tokenizer "$TOK" --template qwen2_vl --max-pixels 12544 --max-length 256)
}

losses() { # the train records' "loss" values of a stdout capture
    grep '"loss"' "$1" | sed 's/.*"loss":\([^,]*\),.*/\1/'
}

@test "vl-packing: --packing puts several image samples in a row; --render --packing shows the document and image spans" {
    run --separate-stderr "$P" "${PP[@]}" --packing -o "$W/dp" "$DEMO/mllm_demo.json"
    [ "$status" -eq 0 ]
    packed="$output"
    run --separate-stderr "$P" "${PP[@]}" -o "$W/du" "$DEMO/mllm_demo.json"
    [ "$status" -eq 0 ]
    [ "$(jq .samples <<<"$output")" -eq 6 ]
    [ "$(jq .samples <<<"$packed")" -lt 6 ]
    [ "$(jq .tokens <<<"$packed")" -eq "$(jq .tokens <<<"$output")" ]
    [ "$(jq -r .packing "$W/dp/index.json")" = binpack ]
    [ "$(jq .images.references "$W/dp/index.json")" -eq "$(jq .images.references "$W/du/index.json")" ]
    # the rendered packed rows: as many as the shards' samples, the same documents as one a row
    "$P" "${PP[@]}" --packing --render "$DEMO/mllm_demo.json" >"$W/rp.jsonl"
    "$P" "${PP[@]}" --render "$DEMO/mllm_demo.json" >"$W/ru.jsonl"
    [ "$(wc -l <"$W/rp.jsonl")" -eq "$(jq .samples <<<"$packed")" ]
    diff <(jq -c '. as $r | .documents[] | $r.ids[.start:.start + .tokens]' "$W/rp.jsonl" | sort) \
        <(jq -c .ids "$W/ru.jsonl" | sort)
    # every image: inside its document, <|vision_start|> pads <|vision_end|>, in token order
    [ "$(jq '.images | length' "$W/rp.jsonl" | paste -sd+ | bc)" -eq 8 ]
    jq -e '. as $r | [.images[] | . as $i | $r.documents[$i.document] as $d
        | $i.start > $d.start and $i.start + $i.tokens < $d.start + $d.tokens
          and $r.ids[$i.start - 1] == 151652 and $r.ids[$i.start + $i.tokens] == 151653
          and ($r.ids[$i.start:$i.start + $i.tokens] | all(. == 151655))
          and $i.tokens * 4 == $i.grid_thw[1] * $i.grid_thw[2]] | all' "$W/rp.jsonl"
    jq -e '[.images[].start] as $s | $s == ($s | sort)' "$W/rp.jsonl"
    jq -e '[.documents[] | .start] as $s | $s[0] == 0 and
        ([.documents[].tokens] | add) == .tokens' "$W/rp.jsonl"
}

@test "vl-packing: --render --packing of text rows shows the documents of each packed row" {
    "$P" --tokenizer "$TOK" --max-length 512 --packing sequential --render \
        "$DEMO/alpaca_en_demo.json" >"$W/r.jsonl"
    n=$(jq -s length "$W/r.jsonl")
    docs=$(jq '.documents | length' "$W/r.jsonl" | paste -sd+ | bc)
    [ "$n" -gt 1 ] && [ "$docs" -gt "$n" ]
    jq -e '.tokens <= 512 and ([.documents[].tokens] | add) == .tokens and
        ([.documents[].trained_tokens] | add) == .trained_tokens and (has("images") | not)' "$W/r.jsonl"
}

@test "vl-packing: swift-train on packed image shards lowers the loss; the losses are the unpacked run's" {
    vl_widen "$W/m"
    rows=$("$P" "${PP[@]}" --tokenizer "$W/m" --packing -o "$W/dp" "$DEMO/mllm_demo.json" | jq .samples)
    "$P" "${PP[@]}" --tokenizer "$W/m" -o "$W/du" "$DEMO/mllm_demo.json"
    [ "$rows" -lt 6 ]
    # every sample in each step (all packed rows against all six one a row), no LoRA dropout: the
    # same samples, the same mean loss over their trained tokens, step after step
    A=(--max-steps 4 --logging-steps 1 --save-steps 100 --eval-steps 100 --learning-rate 1e-2
        --lora-rank 4 --lora-dropout 0 -j 1)
    run --separate-stderr "$T" --model "$W/m" "${A[@]}" --per-device-train-batch-size "$rows" \
        -o "$W/a" "$W/dp"
    echo "$stderr"
    [ "$status" -eq 0 ]
    echo "$output" >"$W/a.out"
    run --separate-stderr "$T" --model "$W/m" "${A[@]}" --per-device-train-batch-size 6 \
        -o "$W/b" "$W/du"
    [ "$status" -eq 0 ]
    echo "$output" >"$W/b.out"
    paste <(losses "$W/a.out") <(losses "$W/b.out")
    [ "$(losses "$W/a.out" | wc -l)" -eq 4 ]
    paste <(losses "$W/a.out") <(losses "$W/b.out") |
        awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-6 * $2) exit 1 }'
    first=$(losses "$W/a.out" | head -1)
    last=$(losses "$W/a.out" | tail -1)
    awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.1) }'
}
