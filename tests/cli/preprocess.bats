#!/usr/bin/env bats
bats_require_minimum_version 1.5.0
# swift-preprocess: encode/decode/render, shards from every shared dataset, errors.

setup() {
    P="$SWIFT_BIN/swift-preprocess"
    DATA="$SHARED/data"
    if [ ! -d "$DATA/tokenizers/qwen3" ]; then
        [ "${CI:-}" = true ] && { echo "shared data missing under $SHARED" >&2; return 1; }
        skip "shared data missing under $SHARED"
    fi
    Q="$DATA/tokenizers/qwen3"
    L="$DATA/tokenizers/llama3-instruct"
    DS="$DATA/datasets"
    LF="$DS/llama-factory-demo"
    TMP="$BATS_TEST_TMPDIR"
}

@test "encode and decode: Qwen3 ids for plain and special text" {
    run "$P" --tokenizer "$Q" --encode <<<'"Hello world"
{"text": "<|im_start|>user"}'
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = "[9707,1879]" ]
    [ "${lines[1]}" = "[151644,872]" ]
    run "$P" --tokenizer "$Q" --encode --raw <<<'"<|im_end|>"'
    [ "$status" -eq 0 ]
    [ "$output" = "[27,91,318,6213,91,29]" ]
    run "$P" --tokenizer "$Q" --decode <<<'[9707,1879]
{"ids": [151644,872]}'
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = '"Hello world"' ]
    [ "${lines[1]}" = '"<|im_start|>user"' ]
    run "$P" --tokenizer "$Q" --decode --skip-special <<<'[151644,872]'
    [ "$output" = '"user"' ]
}

@test "encode: Llama-3 Instruct adds <|begin_of_text|> unless --raw" {
    run "$P" --tokenizer "$L" --encode <<<'"hi"'
    [ "$status" -eq 0 ]
    [ "$output" = "[128000,6151]" ]
    run "$P" --tokenizer "$L" --encode --raw <<<'"hi"'
    [ "$output" = "[6151]" ]
}

@test "encode: a bad line is an error with file:line, or null with --skip-invalid" {
    printf '"ok"\n42\n' >"$TMP/in.jsonl"
    run "$P" --tokenizer "$Q" --encode "$TMP/in.jsonl"
    [ "$status" -eq 1 ]
    [[ "$output" == *"swift-preprocess:$TMP/in.jsonl:2: expected a JSON string"* ]]
    run --separate-stderr "$P" --tokenizer "$Q" --encode --skip-invalid "$TMP/in.jsonl"
    [ "$status" -eq 0 ]
    [ "$output" = "$(printf '[562]\nnull')" ]
    [[ "$stderr" == *"1 of 2 rows invalid"* ]]
}

@test "render: Qwen3 text, ids and mask of one conversation" {
    run "$P" --tokenizer "$Q" --render <<<'{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hello!"}]}'
    [ "$status" -eq 0 ]
    [ "$output" = '{"text":"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello!<|im_end|>\n","ids":[151644,872,198,6023,151645,198,151644,77091,198,151667,271,151668,271,9707,0,151645,198],"mask":[0,0,0,0,0,0,0,0,0,1,1,1,1,1,1,1,0],"tokens":17,"trained_tokens":7}' ]
}

build() { # tokenizer, output name, extra args...
    local tok=$1 name=$2
    shift 2
    run "$P" --tokenizer "$tok" -o "$TMP/$name" --threads 2 "$@"
    [ "$status" -eq 0 ] || { echo "$output" >&2; return 1; }
    [ -f "$TMP/$name/index.json" ]
    [ -f "$TMP/$name/shard-00000.bin" ]
}

@test "shards from gsm8k, alpaca, glaive, identity with Qwen3 and Llama-3" {
    head -n 300 "$DS/gsm8k/train.jsonl" >"$TMP/gsm8k.jsonl"
    for tok in "$Q" "$L"; do
        t=$(basename "$tok")
        build "$tok" "$t-gsm8k" --packing binpack --val-ratio 0.05 "$TMP/gsm8k.jsonl"
        [[ "${lines[-1]}" == *'"rows":300,"documents":300,"invalid":0'* ]]
        [[ "${lines[-1]}" == *'"val_samples":'* ]]
        [ -f "$TMP/$t-gsm8k/val/index.json" ]
        build "$tok" "$t-alpaca" "$LF/alpaca_en_demo.json" "$LF/alpaca_zh_demo.json" "$LF/identity.json"
        [[ "${lines[-1]}" == *'"rows":2090,"documents":2090,"invalid":0'* ]]
        build "$tok" "$t-glaive" --max-length 16384 "$LF/glaive_toolcall_en_demo.json" \
            "$LF/glaive_toolcall_zh_demo.json"
        [[ "${lines[-1]}" == *'"rows":600,"documents":600,"invalid":0,"dropped":0'* ]]
    done
    run jq -r '.template, .tokenizer_sha256, .counts.samples' "$TMP/qwen3-gsm8k/index.json"
    [ "${lines[0]}" = qwen3 ]
    [ "${#lines[1]}" -eq 64 ]
    run jq -r '.template' "$TMP/llama3-instruct-glaive/index.json"
    [ "$output" = llama3 ]
}

@test "shards from tinyshakespeare: generation template, split truncation, sequential packing" {
    build "$Q" ts --template generation --truncation split --packing sequential --max-length 512 \
        "$DS/tinyshakespeare/input.txt"
    [[ "${lines[-1]}" == *'"rows":1,"documents":590,'* ]]
    run jq -r '.packing, .counts.documents, .length.max' "$TMP/ts/index.json"
    [ "${lines[0]}" = sequential ]
    [ "${lines[1]}" = 590 ]
    [ "${lines[2]}" = 512 ]
    build "$L" ts-llama --template generation --truncation split --max-length 2048 \
        "$DS/tinyshakespeare/input.txt"
    [[ "${lines[-1]}" == *'"rows":1,"documents":'* ]]
    run jq -r '.counts.tokens == .counts.trained_tokens' "$TMP/ts-llama/index.json"
    [ "$output" = true ]
}

@test "truncation: delete drops, left and right cut to max-length" {
    head -n 100 "$DS/gsm8k/test.jsonl" >"$TMP/g.jsonl"
    for how in delete left right; do
        run --separate-stderr "$P" --tokenizer "$Q" -o "$TMP/tr-$how" --max-length 160 \
            --truncation "$how" "$TMP/g.jsonl"
        [ "$status" -eq 0 ]
        run jq -r '[.documents, .dropped, .truncated, .length.max] | @tsv' <<<"$output"
        read -r docs dropped truncated max <<<"$output"
        [ "$max" -le 160 ]
        if [ "$how" = delete ]; then
            [ "$dropped" -gt 0 ] && [ "$truncated" -eq 0 ] && [ $((docs + dropped)) -eq 100 ]
        else
            [ "$truncated" -gt 0 ] && [ "$dropped" -eq 0 ] && [ "$docs" -eq 100 ]
        fi
    done
}

@test "no samples: an empty file or only too-long rows fail with the counts, nothing written" {
    : >"$TMP/empty.jsonl"
    run --separate-stderr "$P" --tokenizer "$Q" -o "$TMP/e" "$TMP/empty.jsonl"
    [ "$status" -eq 1 ]
    [ "$output" = "" ]
    [ "$stderr" = "swift-preprocess: no samples to write: 0 rows read from '$TMP/empty.jsonl'" ]
    [ ! -e "$TMP/e" ]
    [ -z "$(compgen -G "$TMP/.e.tmp-*")" ] # no temporary directory left either
    head -n 20 "$DS/gsm8k/test.jsonl" >"$TMP/g.jsonl"
    run --separate-stderr "$P" --tokenizer "$Q" -o "$TMP/long" --max-length 16 "$TMP/g.jsonl"
    [ "$status" -eq 1 ]
    [ "$output" = "" ]
    [ "$stderr" = "swift-preprocess: no samples to write: 20 of 20 rows dropped as longer than --max-length 16 (use --truncation left, right or split to keep them, or a larger --max-length)" ]
    [ ! -e "$TMP/long" ]
    [ -z "$(compgen -G "$TMP/.long.tmp-*")" ]
    # the same rows kept by --truncation
    run "$P" --tokenizer "$Q" -o "$TMP/long" --max-length 16 --truncation right "$TMP/g.jsonl"
    [ "$status" -eq 0 ]
    # every row invalid or too long under --skip-invalid: both counted
    printf '{"question":"q"}\n' >>"$TMP/g.jsonl"
    run --separate-stderr "$P" --tokenizer "$Q" -o "$TMP/inv" --max-length 16 --skip-invalid "$TMP/g.jsonl"
    [ "$status" -eq 1 ]
    [[ "$stderr" == "swift-preprocess: no samples to write: 20 of 21 rows dropped as longer than --max-length 16 (use --truncation left, right or split to keep them, or a larger --max-length); 1 of 21 rows invalid (skipped by --skip-invalid)" ]]
    [ ! -e "$TMP/inv" ]
}

@test "dropped rows: a mixed file succeeds and says on stderr how many were dropped and why" {
    head -n 20 "$DS/gsm8k/test.jsonl" >"$TMP/g.jsonl"
    run --separate-stderr "$P" --tokenizer "$Q" -o "$TMP/mixed" --max-length 160 "$TMP/g.jsonl"
    [ "$status" -eq 0 ]
    [ "$(jq -r '[.rows, .documents, .dropped] | @csv' <<<"$output")" = "20,4,16" ]
    [[ "$stderr" == *"swift-preprocess: warning: 16 of 20 rows dropped as longer than --max-length 160 (use --truncation left, right or split to keep them, or a larger --max-length)"* ]]
    # nothing dropped, no warning
    run --separate-stderr "$P" --tokenizer "$Q" -o "$TMP/all" --max-length 1024 "$TMP/g.jsonl"
    [ "$status" -eq 0 ]
    [[ "$stderr" != *"warning"* ]]
}

@test "the same input gives byte-identical shards with 1 and 3 threads" {
    head -n 500 "$DS/gsm8k/test.jsonl" >"$TMP/g.jsonl"
    for n in 1 3; do
        run "$P" --tokenizer "$Q" -o "$TMP/t$n" --threads $n --packing binpack --val-ratio 0.1 \
            --shard-tokens 20000 "$TMP/g.jsonl"
        [ "$status" -eq 0 ]
    done
    [ -f "$TMP/t1/shard-00002.bin" ]
    run diff -r "$TMP/t1" "$TMP/t3"
    [ "$status" -eq 0 ]
}

@test "bad rows: file:line error and nothing written, or skipped and counted" {
    printf '%s\n' '{"query":"a","response":"b"}' '{"query":' '{"messages":[{"role":"user","content":"x"},{"role":"user","content":"y"}]}' >"$TMP/bad.jsonl"
    run "$P" --tokenizer "$Q" -o "$TMP/bad" "$TMP/bad.jsonl"
    [ "$status" -eq 1 ]
    [[ "${lines[0]}" == "swift-preprocess:$TMP/bad.jsonl:2: invalid JSON"* ]]
    [ ! -e "$TMP/bad" ]
    run "$P" --tokenizer "$Q" -o "$TMP/bad" --skip-invalid "$TMP/bad.jsonl"
    [ "$status" -eq 0 ]
    [[ "$output" == *"skipped $TMP/bad.jsonl:3: message 2: roles out of order (user after user)"* ]]
    [[ "${lines[-1]}" == *'"rows":3,"documents":1,"invalid":2'* ]]
}

@test "usage errors exit 2; an existing output needs --force" {
    run "$P" --encode
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "swift-preprocess: --tokenizer DIR is required" ]]
    run "$P" --tokenizer "$Q" --template nope -o x
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "swift-preprocess: unknown template 'nope'"* ]]
    run "$P" --tokenizer "$Q" --max-length abc -o x
    [ "$status" -eq 2 ]
    mkdir -p "$TMP/exists"
    run "$P" --tokenizer "$Q" -o "$TMP/exists" "$DS/gsm8k/test.jsonl"
    [ "$status" -eq 1 ]
    [[ "$output" == *"exists; use --force"* ]]
}

@test "a write error on stdout is exit 1" {
    run sh -c "echo '\"hi\"' | '$P' --tokenizer '$Q' --encode >/dev/full"
    [ "$status" -eq 1 ]
}

@test "trace: read, tokenize, pack and write spans" {
    head -n 100 "$DS/gsm8k/test.jsonl" >"$TMP/g.jsonl"
    run "$P" --tokenizer "$Q" -o "$TMP/tr" --packing true --trace "$TMP/pp.trace.jsonl" "$TMP/g.jsonl"
    [ "$status" -eq 0 ]
    for n in read tokenize_batch pack write_shards; do
        grep -q "\"name\":\"$n\"" "$TMP/pp.trace.jsonl"
    done
}

@test "--packing as a flag, with =HOW, or with the value as the next word" {
    head -n 50 "$DS/gsm8k/test.jsonl" >"$TMP/g.jsonl"
    for args in "--packing $TMP/g.jsonl:binpack" "--packing sequential $TMP/g.jsonl:sequential" \
        "$TMP/g.jsonl --packing true:binpack" "--packing=sequential $TMP/g.jsonl:sequential" \
        "--packing none $TMP/g.jsonl:none"; do
        run --separate-stderr "$P" --tokenizer "$Q" -o "$TMP/pk" --force --max-length 1024 ${args%:*}
        [ "$status" -eq 0 ]
        [[ "$output" == *"\"packing\":\"${args##*:}\""* ]]
        [[ "$output" == *'"rows":50,'* ]]
    done
}
