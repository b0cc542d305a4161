#!/usr/bin/env bats
bats_require_minimum_version 1.5.0
# swift-preprocess --kind prompts (GRPO's prompt data, docs/preprocess.md "Prompt data") on the
# rows of tests/fixtures/grpo/prompts.jsonl with the byte-level ChatML tokenizer of
# tests/fixtures/eval/llama: the text and ids of every prompt (generation prompt included) and its
# metadata against an independent construction (prompts_check.py), the shards read back with an
# independent reader, the split, truncation, bad rows and the shard kind checks.

P="$SWIFT_BIN/swift-preprocess"
TOK=tests/fixtures/eval/llama
ROWS=tests/fixtures/grpo/prompts.jsonl

setup() {
    CHECK="$BATS_TEST_DIRNAME/prompts_check.py"
    TMP="$BATS_TEST_TMPDIR"
}

render() { # the --render lines of the fixture into $TMP/render.jsonl
    run --separate-stderr "$P" --tokenizer $TOK --kind prompts --render "$@" $ROWS
    [ "$status" -eq 0 ]
    printf '%s\n' "${lines[@]}" >"$TMP/render.jsonl"
    [ "${#lines[@]}" -eq 24 ]
}

@test "prompts: each row's text, ids and metadata as built independently; ids equal the tokenizer's" {
    render
    run python3 "$CHECK" expect $ROWS "$TMP/render.jsonl"
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$output" = "ok 24" ]
    # the generation prompt ends every prompt; GSM8K's answer is passed through unchanged
    [[ $(head -1 "$TMP/render.jsonl") == *'<|im_start|>assistant\n","ids":'*'"meta":{"prompt":"Ali had $21.'* ]]
    jq -c .text "$TMP/render.jsonl" >"$TMP/texts.jsonl"
    run --separate-stderr "$P" --tokenizer $TOK --encode "$TMP/texts.jsonl"
    [ "$status" -eq 0 ]
    printf '%s\n' "${lines[@]}" >"$TMP/encoded.jsonl"
    run python3 "$CHECK" ids "$TMP/render.jsonl" "$TMP/encoded.jsonl"
    echo "$output"
    [ "$output" = "ok 24" ]
}

@test "prompts: Qwen3 and Llama 3 prompts equal TRL GRPOTrainer's (apply_chat_template, add_generation_prompt)" {
    DATA="$SHARED/data"
    if [ ! -d "$DATA/tokenizers/qwen3" ]; then
        [ "${CI:-}" = true ] && { echo "shared data missing under $SHARED" >&2; return 1; }
        skip "shared data missing under $SHARED"
    fi
    for t in qwen3 llama3; do
        tok=$DATA/tokenizers/qwen3
        [ "$t" = llama3 ] && tok=$DATA/tokenizers/llama3-instruct
        run --separate-stderr "$P" --tokenizer "$tok" --template $t --kind prompts --render $ROWS
        [ "$status" -eq 0 ]
        printf '%s\n' "${lines[@]}" >"$TMP/render-$t.jsonl"
        run python3 "$CHECK" ref "tests/ref/fixtures/prompts/$t.jsonl" "$TMP/render-$t.jsonl"
        echo "$output"
        [ "$output" = "ok 24" ]
    done
}

@test "prompts: shards (kind prompts, metadata section) hold the rendered rows in order" {
    render
    run --separate-stderr "$P" --tokenizer $TOK --kind prompts -o "$TMP/s" $ROWS
    [ "$status" -eq 0 ]
    [[ $output == *'"kind":"prompts"'* ]]
    [[ $output == *'"rows":24,"documents":24,"invalid":0,"dropped":0,"truncated":0,"samples":24,'* ]]
    [[ $output == *'"trained_tokens":0,'* ]]
    [[ $stderr == *"24 rows: 24 prompts, 0 invalid, 0 dropped, 0 truncated"* ]]
    run python3 "$CHECK" shards "$TMP/s" "$TMP/render.jsonl"
    echo "$output"
    [ "$output" = "ok 24" ]
    [ "$(jq -r '.kind, .version, .loss, .template' "$TMP/s/index.json" | tr '\n' ' ')" = "prompts 2 null chatml " ]
    # ms-swift's rlhf_type grpo means the same, byte for byte
    run --separate-stderr "$P" --tokenizer $TOK --rlhf_type grpo -o "$TMP/g" $ROWS
    [ "$status" -eq 0 ]
    cmp "$TMP/s/shard-00000.bin" "$TMP/g/shard-00000.bin"
    # several shard files and several threads: the same samples
    run --separate-stderr "$P" --tokenizer $TOK --kind prompts --shard-tokens 200 --threads 3 \
        -o "$TMP/m" $ROWS
    [ "$status" -eq 0 ]
    [ "$(jq '.shards | length' "$TMP/m/index.json")" -gt 3 ]
    run python3 "$CHECK" shards "$TMP/m" "$TMP/render.jsonl"
    [ "$output" = "ok 24" ]
}

@test "prompts: --val-ratio splits the rows, each once, metadata with its prompt" {
    render
    run --separate-stderr "$P" --tokenizer $TOK --kind prompts --val-ratio 0.25 --shuffle \
        -o "$TMP/s" $ROWS
    [ "$status" -eq 0 ]
    [[ $output == *'"samples":18,"val_samples":6,'* ]]
    [ "$(jq -r .split "$TMP/s/val/index.json")" = val ]
    run python3 "$CHECK" shards "$TMP/s" "$TMP/render.jsonl" 6
    echo "$output"
    [ "$output" = "ok 24" ]
}

@test "prompts: --max-length drops longer prompts (delete) or keeps their end (left); --max-prompt-length keeps the end" {
    render
    # the three GSM8K prompts (92, 95, 97 tokens) and the multi-turn one (76) pass 64 tokens
    run --separate-stderr "$P" --tokenizer $TOK --kind prompts --max-length 70 -o "$TMP/d" $ROWS
    [ "$status" -eq 0 ]
    [[ $output == *'"rows":24,"documents":20,"invalid":0,"dropped":4,"truncated":0,"samples":20,'* ]]
    [[ $stderr == *"4 of 24 rows dropped as prompts longer than --max-length 70 (use --truncation left"* ]]
    [ "$(jq .counts.dropped "$TMP/d/index.json")" -eq 4 ]
    run --separate-stderr "$P" --tokenizer $TOK --kind prompts --max-length 40 --truncation left \
        -o "$TMP/l" $ROWS
    [ "$status" -eq 0 ]
    [[ $output == *'"dropped":0,"truncated":'* ]]
    [ "$(jq .counts.truncated "$TMP/l/index.json")" -eq "$(jq 'select(.tokens > 40)' -c "$TMP/render.jsonl" | wc -l)" ]
    run python3 "$CHECK" left "$TMP/l" "$TMP/render.jsonl" 40
    echo "$output"
    [ "$output" = "ok 24" ]
    run --separate-stderr "$P" --tokenizer $TOK --kind prompts --max-prompt-length 40 -o "$TMP/p" $ROWS
    [ "$status" -eq 0 ]
    run python3 "$CHECK" left "$TMP/p" "$TMP/render.jsonl" 40
    [ "$output" = "ok 24" ]
    # right and split would cut the generation prompt off; prompts are never packed
    for how in right split; do
        run --separate-stderr "$P" --tokenizer $TOK --kind prompts --truncation $how -o "$TMP/x" $ROWS
        [ "$status" -eq 1 ]
        [ "$stderr" = "swift-preprocess:$ROWS:1: --truncation $how would cut the generation prompt off a prompt (use delete or left)" ]
        [ ! -e "$TMP/x" ]
    done
    run --separate-stderr "$P" --tokenizer $TOK --kind prompts --packing -o "$TMP/x" $ROWS
    [ "$status" -eq 1 ]
    [ "$stderr" = "swift-preprocess:$ROWS:1: prompt rows are not packed (one per sample); drop --packing" ]
}

@test "prompts: bad rows name file:line, exit 1 and write nothing; --skip-invalid counts them" {
    head -3 $ROWS >"$TMP/bad.jsonl"
    echo '{"messages":[{"role":"user","content":"What is 1 + 1?"},{"role":"assistant","content":"2"}],"answer":"#### 2"}' >>"$TMP/bad.jsonl"
    echo '{"answer":"#### 3","source":"none"}' >>"$TMP/bad.jsonl"
    echo '{"prompt":42}' >>"$TMP/bad.jsonl"
    echo '{"messages":[{"role":"system","content":"alone"}]}' >>"$TMP/bad.jsonl"
    run --separate-stderr "$P" --tokenizer $TOK --kind prompts -o "$TMP/o" "$TMP/bad.jsonl"
    [ "$status" -eq 1 ]
    [ "$stderr" = "swift-preprocess:$TMP/bad.jsonl:4: the conversation ends with an assistant message; a prompt must end with a user turn (the model writes the reply)" ]
    [ -z "$output" ]
    [ ! -e "$TMP/o" ]
    sed -i 4d "$TMP/bad.jsonl"
    run --separate-stderr "$P" --tokenizer $TOK --kind prompts -o "$TMP/o" "$TMP/bad.jsonl"
    [ "$status" -eq 1 ]
    [ "$stderr" = "swift-preprocess:$TMP/bad.jsonl:4: missing the prompt (\"messages\", \"prompt\", \"query\", \"question\", \"problem\" or \"instruction\")" ]
    [ ! -e "$TMP/o" ]
    sed -i 4d "$TMP/bad.jsonl"
    run --separate-stderr "$P" --tokenizer $TOK --kind prompts --render "$TMP/bad.jsonl"
    [ "$status" -eq 1 ]
    [[ $stderr == "swift-preprocess:$TMP/bad.jsonl:4: \"prompt\" must be a string or a list of messages" ]]
    # an existing output is left as it was when a run fails
    run --separate-stderr "$P" --tokenizer $TOK --kind prompts -o "$TMP/o" $ROWS
    [ "$status" -eq 0 ]
    cp -r "$TMP/o" "$TMP/o.before"
    run --separate-stderr "$P" --tokenizer $TOK --kind prompts --force -o "$TMP/o" "$TMP/bad.jsonl"
    [ "$status" -eq 1 ]
    diff -r "$TMP/o.before" "$TMP/o"
    # --skip-invalid: the two bad rows skipped, counted and quoted
    run --separate-stderr "$P" --tokenizer $TOK --kind prompts --skip-invalid -o "$TMP/k" "$TMP/bad.jsonl"
    [ "$status" -eq 0 ]
    [[ $output == *'"rows":5,"documents":3,"invalid":2,'* ]]
    [[ $stderr == *"skipped $TMP/bad.jsonl:5: empty conversation"* ]]
    [ "$(jq .counts.dropped "$TMP/k/index.json")" -eq 2 ]
    # SFT's field rows read their query the same way: a response without one is named
    echo '{"answer":"#### 3"}' >"$TMP/sft.jsonl"
    run --separate-stderr "$P" --tokenizer $TOK --render "$TMP/sft.jsonl"
    [ "$status" -eq 1 ]
    [ "$stderr" = "swift-preprocess:$TMP/sft.jsonl:1: missing the query (\"query\", \"instruction\" or \"question\")" ]
}

@test "prompts: --system, --columns and CSV rows" {
    printf 'q,gold\nWhat is 1 + 2?,3\n' >"$TMP/p.csv"
    run --separate-stderr "$P" --tokenizer $TOK --kind prompts --columns q:question --system "Be exact." --render "$TMP/p.csv"
    [ "$status" -eq 0 ]
    [[ $output == '{"kind":"prompts","text":"<|im_start|>system\nBe exact.<|im_end|>\n<|im_start|>user\nWhat is 1 + 2?<|im_end|>\n<|im_start|>assistant\n",'*',"meta":{"prompt":"What is 1 + 2?","gold":"3"}}' ]]
}

@test "prompts: trainers refuse prompt shards with the kind check (and swift-train names --kind prompts)" {
    run --separate-stderr "$P" --tokenizer $TOK --kind prompts -o "$TMP/s" $ROWS
    [ "$status" -eq 0 ]
    run "$SWIFT_BIN/swift-train" --model $TOK -o "$TMP/a" --rlhf dpo --max-steps 1 --max-length 128 "$TMP/s"
    [ "$status" -eq 1 ]
    [[ $output == *"$TMP/s/index.json: the shards hold prompts (GRPO) (kind \"prompts\"), --rlhf dpo needs preference pairs (make them with swift-preprocess --kind pairs)"* ]]
    [ ! -e "$TMP/a/logging.jsonl" ]
    run "$SWIFT_BIN/swift-train" --model $TOK -o "$TMP/b" --max-steps 1 --max-length 128 "$TMP/s"
    [ "$status" -eq 1 ]
    [[ $output == *"$TMP/s/index.json: the shards hold prompts (GRPO) (kind \"prompts\"), swift-train without --rlhf needs SFT samples (make them with swift-preprocess --kind sft)"* ]]
    run "$SWIFT_BIN/swift-train" --model $TOK -o "$TMP/c" --rlhf kto --max-steps 1 --max-length 128 "$TMP/s"
    [ "$status" -eq 1 ]
    [[ $output == *"$TMP/s/index.json: the shards hold prompts (GRPO) (kind \"prompts\"), --rlhf kto needs KTO's labelled samples"* ]]
    # metadata in a directory whose index says SFT: refused by the file check
    sed -e 's/"version": 2,/"version": 1,/' -e '/"kind": "prompts",/d' "$TMP/s/index.json" >"$TMP/i"
    mv "$TMP/i" "$TMP/s/index.json"
    run "$SWIFT_BIN/swift-train" --model $TOK -o "$TMP/d" --max-steps 1 --max-length 128 "$TMP/s"
    [ "$status" -eq 1 ]
    [[ $output == *"$TMP/s/shard-00000.bin: offset 8: has the metadata section, but index.json's kind is \"sft\""* ]]
}
