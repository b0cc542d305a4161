#!/usr/bin/env bats
bats_require_minimum_version 1.5.0
# swift-preprocess on preference data: pair and KTO shards from the LLaMA-Factory demo files, ids
# against TRL's tokenization (tests/ref/fixtures/pref, tests/ref/gen_pref_data.py), the ms-swift
# and TRL row formats, --render of a pair, truncation, the kind in index.json, errors.

setup() {
    P="$SWIFT_BIN/swift-preprocess"
    DATA="$SHARED/data"
    if [ ! -d "$DATA/tokenizers/qwen3" ]; then
        [ "${CI:-}" = true ] && { echo "shared data missing under $SHARED" >&2; return 1; }
        skip "shared data missing under $SHARED"
    fi
    Q="$DATA/tokenizers/qwen3"
    L="$DATA/tokenizers/llama3-instruct"
    LF="$DATA/datasets/llama-factory-demo"
    REF="$BATS_TEST_DIRNAME/../ref/fixtures/pref"
    CHECK="$BATS_TEST_DIRNAME/pref_check.py"
    TMP="$BATS_TEST_TMPDIR"
}

@test "pairs: ids and prompt equal TRL's tokenization (Qwen3, Llama 3), masks on the responses" {
    for t in qwen3 llama3; do
        tok=$Q style=chatml
        [ "$t" = llama3 ] && tok=$L style=llama3
        jq -c .row "$REF/$t.jsonl" >"$TMP/rows-$t.jsonl"
        [ "$(grep -c '"label"' "$TMP/rows-$t.jsonl")" -eq 4 ]
        run --separate-stderr "$P" --tokenizer "$tok" --template "$t" --render "$TMP/rows-$t.jsonl"
        [ "$status" -eq 0 ]
        printf '%s\n' "${lines[@]}" >"$TMP/render-$t.jsonl"
        [ "${#lines[@]}" -eq 12 ]
        run python3 "$CHECK" ref "$REF/$t.jsonl" "$TMP/render-$t.jsonl" "$style"
        echo "$output"
        [ "$status" -eq 0 ]
        [ "$output" = "ok 20" ]
    done
}

@test "pairs: --render shows both sides with their masks and the shared prompt" {
    row='{"conversations":[{"from":"human","value":"hi"}],"chosen":{"from":"gpt","value":"Hello!"},"rejected":{"from":"gpt","value":"Go away."}}'
    run --separate-stderr "$P" --tokenizer "$Q" --template qwen --render <<<"$row"
    [ "$status" -eq 0 ]
    sys='<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n'
    [ "$output" = '{"kind":"pairs","prompt_tokens":20,"chosen":{"text":"'"$sys"'Hello!<|im_end|>\n","ids":[151644,8948,198,2610,525,264,10950,17847,13,151645,198,151644,872,198,6023,151645,198,151644,77091,198,9707,0,151645,198],"mask":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,0],"tokens":24,"trained_tokens":3},"rejected":{"text":"'"$sys"'Go away.<|im_end|>\n","ids":[151644,8948,198,2610,525,264,10950,17847,13,151645,198,151644,872,198,6023,151645,198,151644,77091,198,10850,3123,13,151645,198],"mask":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,1,0],"tokens":25,"trained_tokens":4}}' ]
    # a KTO row: the SFT record with its label and prompt length
    run --separate-stderr "$P" --tokenizer "$Q" --template qwen --render \
        <<<'{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hello!"}],"label":false}'
    [ "$status" -eq 0 ]
    [[ "$output" == '{"kind":"kto","text":"'"$sys"'Hello!<|im_end|>\n",'*'"mask":[0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,0,1,1,1,0],"tokens":24,"trained_tokens":3,"label":false,"prompt_tokens":20}' ]]
}

@test "pairs: dpo_en and dpo_zh demo shards hold prompt+chosen, prompt+rejected as rendered" {
    for f in dpo_en_demo dpo_zh_demo; do
        for tok in "$Q" "$L"; do
            t=$(basename "$tok")
            run --separate-stderr "$P" --tokenizer "$tok" -o "$TMP/$t-$f" --max-length 8192 \
                --threads 2 "$LF/$f.json"
            [ "$status" -eq 0 ]
            [[ "$output" == *'"rows":300,"documents":600,"invalid":0,"dropped":0,"truncated":0,"samples":300,'*'"kind":"pairs","pairs":300}' ]]
            [[ "$stderr" == *"300 rows: 300 pairs (600 documents), 0 invalid, 0 dropped, 0 truncated"* ]]
            run jq -r '[.version, .kind, .loss, .packing, .counts.samples, .counts.documents] | @tsv' \
                "$TMP/$t-$f/index.json"
            [ "$output" = "$(printf '2\tpairs\tlast_round\tnone\t300\t600')" ]
            run --separate-stderr "$P" --tokenizer "$tok" --render "$LF/$f.json"
            [ "$status" -eq 0 ]
            printf '%s\n' "${lines[@]}" >"$TMP/render.jsonl"
            run python3 "$CHECK" shards "$TMP/$t-$f" "$TMP/render.jsonl"
            echo "$output"
            [ "$output" = "ok 300" ]
        done
    done
    # the rendered documents are the SFT rendering of prompt + chosen / prompt + rejected
    jq -c '.[0:20][] | {conversations: (.conversations + [.chosen])}' "$LF/dpo_en_demo.json" \
        >"$TMP/sft-chosen.jsonl"
    jq -c '.[0:20][] | {conversations: (.conversations + [.rejected])}' "$LF/dpo_en_demo.json" \
        >"$TMP/sft-rejected.jsonl"
    jq -c '.[0:20][]' "$LF/dpo_en_demo.json" >"$TMP/pairs20.jsonl"
    run --separate-stderr "$P" --tokenizer "$Q" --render "$TMP/pairs20.jsonl"
    printf '%s\n' "${lines[@]}" >"$TMP/r20.jsonl"
    for side in chosen rejected; do
        run --separate-stderr "$P" --tokenizer "$Q" --render --loss last_round "$TMP/sft-$side.jsonl"
        [ "$status" -eq 0 ]
        [ "$(printf '%s\n' "${lines[@]}" | jq -c '[.text, .ids]')" = "$(jq -c "[.$side.text, .$side.ids]" "$TMP/r20.jsonl")" ]
    done
}

@test "kto: kto_en_demo labels round-trip through the shards, one document per sample" {
    run --separate-stderr "$P" --tokenizer "$Q" -o "$TMP/kto" --max-length 8192 "$LF/kto_en_demo.json"
    [ "$status" -eq 0 ]
    [[ "$output" == *'"rows":300,"documents":300,"invalid":0,'*'"kind":"kto"}' ]]
    run jq -r '[.version, .kind, .counts.samples] | @tsv' "$TMP/kto/index.json"
    [ "$output" = "$(printf '2\tkto\t300')" ]
    run --separate-stderr "$P" --tokenizer "$Q" --render "$LF/kto_en_demo.json"
    printf '%s\n' "${lines[@]}" >"$TMP/render.jsonl"
    # the labels of the file, in order, are the labels rendered and stored
    [ "$(jq -c '[.[].label]' "$LF/kto_en_demo.json")" = "$(jq -s -c '[.[].label]' "$TMP/render.jsonl")" ]
    [ "$(jq -s '[.[] | select(.label)] | length' "$TMP/render.jsonl")" -gt 0 ]
    [ "$(jq -s '[.[] | select(.label | not)] | length' "$TMP/render.jsonl")" -gt 0 ]
    run python3 "$CHECK" shards "$TMP/kto" "$TMP/render.jsonl"
    echo "$output"
    [ "$output" = "ok 300" ]
}

@test "pairs: the ms-swift, LLaMA-Factory and TRL row formats give the same pair" {
    cat >"$TMP/formats.jsonl" <<'EOF'
{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hello!"}],"rejected_response":"Go away."}
{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hello!"}],"rejected_messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"Go away."}]}
{"query":"hi","response":"Hello!","rejected_response":"Go away."}
{"conversations":[{"from":"human","value":"hi"}],"chosen":{"from":"gpt","value":"Hello!"},"rejected":{"from":"gpt","value":"Go away."}}
{"prompt":"hi","chosen":"Hello!","rejected":"Go away."}
{"prompt":[{"role":"user","content":"hi"}],"chosen":[{"role":"assistant","content":"Hello!"}],"rejected":[{"role":"assistant","content":"Go away."}]}
{"chosen":[{"role":"user","content":"hi"},{"role":"assistant","content":"Hello!"}],"rejected":[{"role":"user","content":"hi"},{"role":"assistant","content":"Go away."}]}
{"instruction":"hi","chosen":"Hello!","rejected":"Go away."}
{"question":"hi","chosen":"Hello!","rejected":"Go away."}
EOF
    run --separate-stderr "$P" --tokenizer "$Q" --render "$TMP/formats.jsonl"
    [ "$status" -eq 0 ]
    [ "${#lines[@]}" -eq 9 ]
    [ "$(printf '%s\n' "${lines[@]}" | sort -u | wc -l)" -eq 1 ]
    [[ "${lines[0]}" == '{"kind":"pairs","prompt_tokens":9,"chosen":{"text":"<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\nHello!<|im_end|>\n",'* ]]
    # --columns renames come first; KTO in TRL's prompt/completion/label form
    run --separate-stderr "$P" --tokenizer "$Q" --render --columns good:chosen,bad:rejected \
        <<<'{"prompt":"hi","good":"Hello!","bad":"Go away."}'
    [ "$output" = "${lines[0]}" ]
    run --separate-stderr "$P" --tokenizer "$Q" --render <<<'{"prompt":"hi","completion":"Hello!","label":true}'
    [[ "$output" == '{"kind":"kto","text":"<|im_start|>user\nhi<|im_end|>\n'*'"label":true,"prompt_tokens":9}' ]]
    run --separate-stderr "$P" --tokenizer "$Q" -o "$TMP/fmt" "$TMP/formats.jsonl"
    [ "$status" -eq 0 ]
    [[ "$output" == *'"rows":9,"documents":18,'*'"pairs":9}' ]]
}

@test "pairs: --truncation delete drops, right keeps each start, left and --max-prompt-length cut the prompt" {
    build() { # name, args...
        local name=$1
        shift
        run --separate-stderr "$P" --tokenizer "$Q" -o "$TMP/$name" --threads 2 "$@" "$LF/dpo_en_demo.json"
        [ "$status" -eq 0 ] || { echo "$stderr" >&2; return 1; }
    }
    build full --max-length 100000
    build del --max-length 256
    [[ "$output" == *'"rows":300,"documents":66,"invalid":0,"dropped":267,"truncated":0,'* ]]
    [[ "$stderr" == *"swift-preprocess: warning: 267 of 300 rows dropped as longer than --max-length 256 (use --truncation right or left to keep them, or a larger --max-length; with right or left, a row is dropped when no response token is left)"* ]]
    run jq -r '.max_length, .length.max, .counts.dropped' "$TMP/del/index.json"
    [ "${lines[0]}" -eq 256 ] && [ "${lines[1]}" -le 256 ] && [ "${lines[2]}" -eq 267 ]
    build right --max-length 256 --truncation right
    [[ "$output" == *'"dropped":127,"truncated":140,'* ]]
    run python3 "$CHECK" trunc "$TMP/full" "$TMP/right" right 256
    [ "$output" = "ok 173" ]
    build left --max-length 256 --truncation left
    run python3 "$CHECK" trunc "$TMP/full" "$TMP/left" left 256
    [ "$output" = "ok 81" ]
    build prompt --max-length 100000 --max_prompt_length 64
    [[ "$output" == *'"dropped":0,"truncated":225,'* ]]
    run python3 "$CHECK" trunc "$TMP/full" "$TMP/prompt" prompt 64
    [ "$output" = "ok 300" ]
    # the checker itself refuses a cut of the wrong kind
    run python3 "$CHECK" trunc "$TMP/full" "$TMP/right" left 256
    [ "$status" -eq 1 ]
}

@test "pairs: split truncation and packing are refused, nothing written" {
    run --separate-stderr "$P" --tokenizer "$Q" -o "$TMP/x" --truncation split "$LF/dpo_en_demo.json"
    [ "$status" -eq 1 ]
    [ "$stderr" = "swift-preprocess:$LF/dpo_en_demo.json:2: --truncation split cannot cut a preference pair or a KTO row (use delete, left or right)" ]
    run --separate-stderr "$P" --tokenizer "$Q" -o "$TMP/x" --packing "$LF/kto_en_demo.json"
    [ "$status" -eq 1 ]
    [ "$stderr" = "swift-preprocess:$LF/kto_en_demo.json:2: KTO rows are not packed (one per sample); drop --packing" ]
    [ ! -e "$TMP/x" ]
}

@test "pairs: rows missing chosen or rejected are errors with file:line, nothing half-written" {
    jq -c '.[0:3][]' "$LF/dpo_en_demo.json" >"$TMP/bad.jsonl"
    jq -c '.[3] | del(.rejected)' "$LF/dpo_en_demo.json" >>"$TMP/bad.jsonl"
    jq -c '.[4] | del(.chosen)' "$LF/dpo_en_demo.json" >>"$TMP/bad.jsonl"
    jq -c '.[5] | del(.chosen, .rejected)' "$LF/dpo_en_demo.json" >>"$TMP/bad.jsonl"
    run --separate-stderr "$P" --tokenizer "$Q" -o "$TMP/bad" "$TMP/bad.jsonl"
    [ "$status" -eq 1 ]
    [ "$output" = "" ]
    [ "$stderr" = "swift-preprocess:$TMP/bad.jsonl:4: missing \"rejected\"" ]
    [ ! -e "$TMP/bad" ]
    run --separate-stderr "$P" --tokenizer "$Q" -o "$TMP/bad" --skip-invalid "$TMP/bad.jsonl"
    [ "$status" -eq 0 ]
    [[ "$output" == *'"rows":6,"documents":6,"invalid":3,'*'"pairs":3}' ]]
    [[ "$stderr" == *"skipped $TMP/bad.jsonl:5: missing \"chosen\""* ]]
    [[ "$stderr" == *"skipped $TMP/bad.jsonl:6: not a preference pair (no \"chosen\" and \"rejected\", or \"rejected_response\"), unlike the first row ($TMP/bad.jsonl:1); one kind per run (--kind pairs)"* ]]
    # a JSON array file: the line where the bad element starts
    jq '[.[0], (.[1] | del(.rejected))]' "$LF/dpo_en_demo.json" >"$TMP/bad.json"
    line=$(grep -n '^  {' "$TMP/bad.json" | sed -n 2p | cut -d: -f1)
    run --separate-stderr "$P" --tokenizer "$Q" -o "$TMP/bad2" "$TMP/bad.json"
    [ "$status" -eq 1 ]
    [ "$stderr" = "swift-preprocess:$TMP/bad.json:$line: missing \"rejected\"" ]
    [ ! -e "$TMP/bad2" ]
}

@test "kinds: one per run; --kind forces one; shards refuse a mismatch" {
    printf '%s\n' '{"prompt":"hi","chosen":"a","rejected":"b"}' \
        '{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"a"}]}' >"$TMP/mixed.jsonl"
    run --separate-stderr "$P" --tokenizer "$Q" -o "$TMP/m" "$TMP/mixed.jsonl"
    [ "$status" -eq 1 ]
    [ "$stderr" = "swift-preprocess:$TMP/mixed.jsonl:2: not a preference pair (no \"chosen\" and \"rejected\", or \"rejected_response\"), unlike the first row ($TMP/mixed.jsonl:1); one kind per run (--kind pairs)" ]
    run --separate-stderr "$P" --tokenizer "$Q" -o "$TMP/m" --kind kto "$LF/dpo_en_demo.json"
    [ "$status" -eq 1 ]
    [ "$stderr" = "swift-preprocess:$LF/dpo_en_demo.json:2: missing \"label\" (KTO rows need true or false)" ]
    run --separate-stderr "$P" --tokenizer "$Q" -o "$TMP/m" --kind kto \
        <<<'{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"a"}],"label":"yes"}'
    [ "$status" -eq 1 ]
    [ "$stderr" = 'swift-preprocess:<stdin>:1: "label" must be true or false' ]
    # ms-swift's rlhf_type names the kind too, on the command line or in a config file
    run --separate-stderr "$P" --tokenizer "$Q" -o "$TMP/m" --rlhf_type kto "$LF/dpo_en_demo.json"
    [ "$status" -eq 1 ]
    [ "$stderr" = "swift-preprocess:$LF/dpo_en_demo.json:2: missing \"label\" (KTO rows need true or false)" ]
    printf 'rlhf_type: orpo\nmax_length: 4096\n' >"$TMP/rlhf.yaml"
    run --separate-stderr "$P" "$TMP/rlhf.yaml" --tokenizer "$Q" -o "$TMP/orpo" "$LF/dpo_zh_demo.json"
    [ "$status" -eq 0 ]
    run jq -r '.kind, .max_length' "$TMP/orpo/index.json"
    [ "${lines[0]}" = pairs ] && [ "${lines[1]}" = 4096 ]
    run "$P" --tokenizer "$Q" -o "$TMP/m" --kind nope "$LF/dpo_en_demo.json"
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "swift-preprocess: --kind: expected auto, sft, pairs, kto or prompts, got 'nope'" ]]
    # --kind sft keeps SFT shards exactly as before: version 1, no "kind"
    run --separate-stderr "$P" --tokenizer "$Q" -o "$TMP/sft" --kind sft "$LF/alpaca_en_demo.json"
    [ "$status" -eq 0 ]
    run jq -r '[.version, (.kind // "none")] | @tsv' "$TMP/sft/index.json"
    [ "$output" = "$(printf '1\tnone')" ]
}

@test "csv: prompt/chosen/rejected columns make pairs; a label column is KTO with --kind kto" {
    printf 'prompt,chosen,rejected\nhi,Hello!,Go away.\n"2+2?","4","5, maybe"\n' >"$TMP/p.csv"
    run --separate-stderr "$P" --tokenizer "$Q" --render "$TMP/p.csv"
    [ "$status" -eq 0 ]
    [ "${#lines[@]}" -eq 2 ]
    [[ "${lines[1]}" == *'"rejected":{"text":"<|im_start|>user\n2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n5, maybe<|im_end|>\n"'* ]]
    printf 'prompt,completion,label\nhi,Hello!,true\nhi,Go away.,false\n' >"$TMP/k.csv"
    run --separate-stderr "$P" --tokenizer "$Q" -o "$TMP/k" --kind kto "$TMP/k.csv"
    [ "$status" -eq 0 ]
    [[ "$output" == *'"kind":"kto"}' ]]
    run --separate-stderr "$P" --tokenizer "$Q" --render --kind kto "$TMP/k.csv"
    [ "$(printf '%s\n' "${lines[@]}" | jq -c .label | tr '\n' ' ')" = "true false " ]
}
