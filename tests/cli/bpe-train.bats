#!/usr/bin/env bats
# The tokenizer our BPE trainer writes (tests/fixtures/bpe/tokenizer.json, made by
# tests/unit/test_bpe_train.c) encodes exactly as the real Hugging Face `tokenizers` does
# (tests/fixtures/bpe/encodings.jsonl, from tests/ref/gen_bpe_fixture.py), and
# swift-preprocess --train-tokenizer writes a directory the rest of the pipeline reads.

setup() {
    P=$SWIFT_BIN/swift-preprocess
    F=$BATS_TEST_DIRNAME/../fixtures/bpe
    W=$BATS_TEST_TMPDIR
}

@test "our encoding of the trained tokenizer equals Hugging Face tokenizers' ids" {
    jq -c '.text' "$F/encodings.jsonl" >"$W/in.jsonl"
    run "$P" --tokenizer "$F" --encode "$W/in.jsonl"
    [ "$status" -eq 0 ]
    printf '%s\n' "$output" >"$W/ours.jsonl"
    jq -c '.ids' "$F/encodings.jsonl" >"$W/want.jsonl"
    diff "$W/want.jsonl" "$W/ours.jsonl"
}

@test "--train-tokenizer writes tokenizer.json and a chatml tokenizer_config.json" {
    printf 'user: What is 2 + 3?\nassistant: 5\n%.0s' $(seq 50) >"$W/corpus.txt"
    run "$P" --train-tokenizer 300 -o "$W/tok" "$W/corpus.txt"
    [ "$status" -eq 0 ]
    [ "$output" = "{\"version\":1,\"tokenizer\":\"$W/tok\",\"vocab_size\":300}" ]
    [ "$(jq '.model.vocab | length' "$W/tok/tokenizer.json")" -le 297 ]
    [ "$(jq -r '.eos_token' "$W/tok/tokenizer_config.json")" = "<|im_end|>" ]
    # the template is guessed from the chat template: chatml
    echo '{"messages":[{"role":"user","content":"What is 2 + 3?"},{"role":"assistant","content":"5"}]}' >"$W/d.jsonl"
    run "$P" --tokenizer "$W/tok" --render "$W/d.jsonl"
    [ "$status" -eq 0 ]
    [[ $output == *'"text":"<|im_start|>user\nWhat is 2 + 3?<|im_end|>\n<|im_start|>assistant\n5<|im_end|>\n"'* ]]
}

@test "--train-tokenizer: bad vocabulary size and missing output are usage errors" {
    run "$P" --train-tokenizer 100 -o "$W/t" x.txt
    [ "$status" -eq 2 ]
    [[ ${lines[0]} == "swift-preprocess: --train-tokenizer: expected a vocabulary size in [256, 65536], got '100'" ]]
    run "$P" --train-tokenizer 300 x.txt
    [ "$status" -eq 2 ]
    run "$P" --train-tokenizer 300 -o "$W/t" "$W/missing.txt"
    [ "$status" -eq 1 ]
    [[ $output == *"cannot open '$W/missing.txt'"* ]]
    [ ! -e "$W/t/tokenizer.json" ]
}
