#!/usr/bin/env bats
# swift-infer batch mode: greedy outputs equal transformers' generate token for token (chat and
# completions, batches of mixed lengths joining mid-run, tests/ref/gen_infer_fixtures.py), n=2,
# stop strings, bad lines answered with their error, input order, resume, SIGTERM, usage.

bats_require_minimum_version 1.5.0

setup() {
    ROOT=$BATS_TEST_DIRNAME/../..
    FIX=$ROOT/tests/fixtures
    T=$BATS_TEST_TMPDIR
    INFER=$SWIFT_BIN/swift-infer
    export OMP_NUM_THREADS=2
    . "$BATS_TEST_DIRNAME/infer_fixtures.bash" # requests, answers, expected
}

greedy_equals_transformers() {
    arch=$1
    shift
    requests "$arch" >"$T/in.jsonl"
    run --separate-stderr "$INFER" "$FIX/eval/$arch" "$T/in.jsonl" "$@"
    [ "$status" -eq 0 ]
    printf '%s\n' "$output" >"$T/out.jsonl"
    answers "$T/out.jsonl" >"$T/got.jsonl"
    expected "$arch" >"$T/want.jsonl"
    diff "$T/want.jsonl" "$T/got.jsonl"
    [[ $stderr == *"9 answered, 0 errors"* ]]
}

@test "llama: greedy chat and completions equal transformers' generate, usage counted" {
    greedy_equals_transformers llama
}

@test "qwen2: the same with two sequences at a time (requests join as others finish)" {
    greedy_equals_transformers qwen2 --max-num-seqs 2
}

@test "qwen3: the same with chunked prefill, small blocks and a tight pool" {
    greedy_equals_transformers qwen3 --max-num-seqs 3 --max-num-batched-tokens 16 \
        --block-size 4 --num-blocks 64
}

@test "answers come in input order whatever order they finish in" {
    # long requests first, short ones after: the short ones finish first
    for i in 1 2 3 4 5 6; do
        n=$((i % 2 ? 40 : 2))
        printf '{"custom_id":"r%d","method":"POST","url":"/v1/completions","body":{"prompt":[%d],"max_tokens":%d,"ignore_eos":true}}\n' "$i" "$i" "$n"
    done >"$T/in.jsonl"
    # (read from stdin)
    run --separate-stderr "$INFER" "$FIX/eval/llama" --max-num-seqs 4 <"$T/in.jsonl"
    [ "$status" -eq 0 ]
    [ "$(jq -r .custom_id <<<"$output" | tr '\n' ' ')" = "r1 r2 r3 r4 r5 r6 " ]
    [ "$(jq -r .response.body.usage.completion_tokens <<<"$output" | tr '\n' ' ')" = "40 2 40 2 40 2 " ]
}

@test "n=2: both greedy choices equal transformers', the prompt counted once" {
    jq -c 'select(.custom_id == "ids-1") | {custom_id, method: "POST", url,
           body: (.body + {n: 2})}' "$FIX/infer/llama.jsonl" >"$T/in.jsonl"
    run --separate-stderr "$INFER" "$FIX/eval/llama" "$T/in.jsonl"
    [ "$status" -eq 0 ]
    want=$(jq -c 'select(.custom_id == "ids-1") | .ids' "$FIX/infer/llama.jsonl")
    [ "$(jq -c '.response.body.choices | length' <<<"$output")" = 2 ]
    for c in 0 1; do
        got=$(jq -c ".response.body.choices[$c].logprobs.tokens |
                     map(ltrimstr(\"token_id:\") | tonumber)" <<<"$output")
        [ "$got" = "$want" ]
    done
    [ "$(jq -c '.response.body.usage | [.prompt_tokens, .completion_tokens, .total_tokens]' <<<"$output")" = "[5,18,23]" ]
}

@test "stop strings: the text is cut before the earliest one, finish_reason stop" {
    # llama's greedy continuation of [63] starts with the bytes "E~" then 206
    printf '%s\n' \
        '{"custom_id":"s","method":"POST","url":"/v1/completions","body":{"prompt":[63],"max_tokens":12,"stop":["zz","~"]}}' \
        '{"custom_id":"t","method":"POST","url":"/v1/completions","body":{"prompt":[63],"max_tokens":12,"stop":"E~"}}' \
        '{"custom_id":"u","method":"POST","url":"/v1/completions","body":{"prompt":[63],"max_tokens":12,"stop":"never"}}' \
        >"$T/in.jsonl"
    run --separate-stderr "$INFER" "$FIX/eval/llama" "$T/in.jsonl"
    [ "$status" -eq 0 ]
    [ "${#lines[@]}" -eq 3 ]
    [ "$(jq -c '.response.body | [.choices[0].text, .choices[0].finish_reason, .usage.completion_tokens]' <<<"${lines[0]}")" = '["E","stop",2]' ]
    [ "$(jq -c '.response.body | [.choices[0].text, .choices[0].finish_reason, .usage.completion_tokens]' <<<"${lines[1]}")" = '["","stop",2]' ]
    [ "$(jq -c '.response.body | [.choices[0].finish_reason, .usage.completion_tokens]' <<<"${lines[2]}")" = '["length",12]' ]
}

@test "a bad line gets its error line, the others their answers; never a dead run" {
    cat >"$T/in.jsonl" <<'EOF'
{"custom_id":"ok1","method":"POST","url":"/v1/completions","body":{"prompt":[1],"max_tokens":2}}
not json at all
{"custom_id":"badtemp","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"x"}],"temperature":"hot"}}
{"custom_id":"badurl","method":"POST","url":"/v1/embeddings","body":{}}
{"method":"POST","url":"/v1/completions","body":{"prompt":[1]}}
{"custom_id":"toolong","method":"POST","url":"/v1/completions","body":{"prompt":[1,2,3,4,5,6,7,8,9,10],"max_tokens":200}}
{"custom_id":"ok1","method":"POST","url":"/v1/completions","body":{"prompt":[1],"max_tokens":2}}

{"custom_id":"model","method":"POST","url":"/v1/completions","body":{"model":"gpt-4","prompt":[1]}}
{"custom_id":"ok2","method":"POST","url":"/v1/chat/completions","body":{"model":"tiny","messages":[{"role":"user","content":"hi"}],"max_tokens":3}}
EOF
    run --separate-stderr "$INFER" "$FIX/eval/llama" --served-model-name tiny --max-model-len 64 "$T/in.jsonl"
    [ "$status" -eq 0 ]
    [ "${#lines[@]}" -eq 9 ]
    [ "$(jq -r '[.custom_id, (.response.status_code // .error.code)] | @tsv' <<<"$output" | tr '\t\n' ': ')" = \
        "ok1:200 :invalid_json badtemp:400 badurl:invalid_url :missing_custom_id toolong:400 ok1:duplicate_custom_id model:404 ok2:200 " ]
    [ "$(jq -r .response.body.error.param <<<"${lines[2]}")" = temperature ]
    [ "$(jq -r .response.body.error.type <<<"${lines[2]}")" = invalid_request_error ]
    [[ $(jq -r .error.message <<<"${lines[1]}") == *"in.jsonl:2: "* ]]
    [[ $(jq -r .response.body.error.message <<<"${lines[5]}") == *"'max_tokens' is too large: 200"* ]]
    [ "$(jq -r .response.body.error.code <<<"${lines[7]}")" = model_not_found ]
    [ "$(jq -r .response.body.model <<<"${lines[8]}")" = tiny ]
    [[ $stderr == *"2 answered, 7 errors"* ]]
}

@test "a prompt longer than the context is a 400 with OpenAI's message" {
    printf '{"custom_id":"a","method":"POST","url":"/v1/completions","body":{"prompt":"%s"}}\n' \
        "$(printf 'x%.0s' $(seq 40))" >"$T/in.jsonl"
    run --separate-stderr "$INFER" "$FIX/eval/llama" --max-model-len 32 "$T/in.jsonl"
    [ "$status" -eq 0 ]
    [ "$(jq -r .response.status_code <<<"$output")" = 400 ]
    [[ $(jq -r .response.body.error.message <<<"$output") == "This model's maximum context length is 32 tokens. However, your request has 40 input tokens."* ]]
}

@test "ms-swift rows: messages (the final assistant turn is the label), custom_id line-N" {
    printf '%s\n' \
        '{"messages":[{"role":"user","content":"Hello"},{"role":"assistant","content":"label text"}],"max_tokens":6,"temperature":0,"logprobs":true,"return_tokens_as_token_ids":true}' \
        '{"id":"mine","messages":[{"role":"user","content":"Hello"}],"max_tokens":6}' >"$T/in.jsonl"
    run --separate-stderr "$INFER" "$FIX/eval/llama" "$T/in.jsonl"
    [ "$status" -eq 0 ]
    [ "$(jq -r .custom_id <<<"$output" | tr '\n' ' ')" = "line-1 mine " ]
    want=$(jq -c 'select(.custom_id == "chat-0") | .ids' "$FIX/infer/llama.jsonl")
    got=$(jq -c '.response.body.choices[0].logprobs.content | map(.token | ltrimstr("token_id:") | tonumber)' <<<"${lines[0]}")
    [ "$got" = "$want" ]
    [ "$(jq -r .response.body.object <<<"${lines[1]}")" = chat.completion ]
    # ShareGPT rows with a custom_id of their own; a bad row its error
    printf '%s\n' \
        '{"custom_id":"sg","conversations":[{"from":"human","value":"Hello"},{"from":"gpt","value":"label"}],"max_tokens":2}' \
        '{"messages":[{"role":"robot","content":"x"}]}' >"$T/in2.jsonl"
    run --separate-stderr "$INFER" "$FIX/eval/llama" "$T/in2.jsonl"
    [ "$status" -eq 0 ]
    [ "$(jq -r '[.custom_id, .response.status_code] | @tsv' <<<"$output" | tr '\t\n' ': ')" = "sg:200 line-2:400 " ]
    [ "$(jq -r .response.body.usage.completion_tokens <<<"${lines[0]}")" = 2 ]
    [[ $(jq -r .response.body.error.message <<<"${lines[1]}") == *"unknown role 'robot'"* ]]
}

@test "-o: resumable; answered custom_ids are kept, the rest answered, input order kept" {
    requests llama >"$T/in.jsonl"
    # an earlier run answered ids-0 (marked) and text-1; it also holds an id the input lacks
    printf '%s\n' \
        '{"id":"x","custom_id":"text-1","response":{"status_code":200,"request_id":"r","body":{"mark":1}},"error":null}' \
        '{"id":"y","custom_id":"ids-0","response":{"status_code":200,"request_id":"r","body":{"mark":2}},"error":null}' \
        '{"id":"z","custom_id":"gone","response":{"status_code":200,"request_id":"r","body":{"mark":3}},"error":null}' \
        >"$T/out.jsonl"
    run --separate-stderr "$INFER" "$FIX/eval/llama" "$T/in.jsonl" -o "$T/out.jsonl"
    [ "$status" -eq 0 ]
    [ -z "$output" ]
    [[ $stderr == *"7 answered, 0 errors, 2 kept from before"* ]]
    [ "$(jq -r .custom_id "$T/out.jsonl" | tr '\n' ' ')" = \
        "chat-0 chat-1 chat-2 chat-3 text-0 text-1 ids-0 ids-1 ids-2 gone " ]
    [ "$(jq -c 'select(.custom_id == "text-1") | .response.body' "$T/out.jsonl")" = '{"mark":1}' ]
    answers "$T/out.jsonl" | grep -v '"text-1"\|"ids-0"\|"gone"' >"$T/got.jsonl"
    expected llama | grep -v '"text-1"\|"ids-0"' >"$T/want.jsonl"
    diff "$T/want.jsonl" "$T/got.jsonl"
    # a second rerun asks nothing
    run --separate-stderr "$INFER" "$FIX/eval/llama" "$T/in.jsonl" -o "$T/out.jsonl"
    [ "$status" -eq 0 ]
    [[ $stderr == *"0 answered, 0 errors, 10 kept from before"* || $stderr == *"0 answered, 0 errors, 9 kept from before"* ]]
    [ "$(jq -r .custom_id "$T/out.jsonl" | wc -l)" -eq 10 ]
}

@test "SIGTERM: exit 75, the answers so far in a valid file; a rerun answers the rest" {
    N=400
    for i in $(seq 1 $N); do
        printf '{"custom_id":"r%d","method":"POST","url":"/v1/completions","body":{"prompt":[%d],"max_tokens":100,"ignore_eos":true}}\n' "$i" "$((i % 250))"
    done >"$T/in.jsonl"
    mkdir "$T/o"
    "$INFER" "$FIX/eval/llama" --max-num-seqs 2 "$T/in.jsonl" -o "$T/o/out.jsonl" 2>"$T/err" &
    pid=$!
    for _ in $(seq 1 200); do # the temporary output appears once the model is loaded
        ls "$T"/o/.out.jsonl.tmp-* >/dev/null 2>&1 && break
        sleep 0.05
    done
    sleep 0.5
    kill -TERM "$pid" || skip "the run ended before the signal (a very fast machine)"
    rc=0
    wait "$pid" || rc=$?
    [ "$rc" -eq 75 ]
    grep -q "stopped by a signal" "$T/err"
    [ -z "$(ls -A "$T/o" | grep -v '^out.jsonl$')" ] # no temporary left
    n=$(wc -l <"$T/o/out.jsonl")
    [ "$n" -ge 1 ]
    [ "$n" -lt $N ]
    [ "$(jq -c 'select(.response.status_code != 200)' "$T/o/out.jsonl")" = "" ]
    [ "$(jq -r .custom_id "$T/o/out.jsonl" | sort -u | wc -l)" -eq "$n" ]
    run --separate-stderr "$INFER" "$FIX/eval/llama" --max-num-seqs 16 "$T/in.jsonl" -o "$T/o/out.jsonl"
    [ "$status" -eq 0 ]
    [[ $stderr == *"$((N - n)) answered, 0 errors, $n kept from before"* ]]
    [ "$(jq -r .custom_id "$T/o/out.jsonl" | tr '\n' ' ')" = "$(seq 1 $N | sed 's/^/r/' | tr '\n' ' ')" ]
}

@test "usage errors exit 2; a model that cannot be loaded exits 1" {
    run "$INFER"
    [ "$status" -eq 2 ]
    [[ ${lines[0]} == "swift-infer: missing MODEL_DIR" ]]
    run "$INFER" "$FIX/eval/llama" a b
    [ "$status" -eq 2 ]
    run "$INFER" "$FIX/eval/llama" --template nope
    [ "$status" -eq 2 ]
    [[ ${lines[0]} == "swift-infer: unknown template 'nope'"* ]]
    run "$INFER" "$FIX/eval/llama" --max-num-seqs 0
    [ "$status" -eq 2 ]
    run "$INFER" "$T/no-such-model" /dev/null
    [ "$status" -eq 1 ]
}

@test "--trace: one span per request with its token counts" {
    requests llama | head -3 >"$T/in.jsonl"
    run --separate-stderr "$INFER" "$FIX/eval/llama" "$T/in.jsonl" --trace "$T/trace.jsonl"
    [ "$status" -eq 0 ]
    [ "$(grep -c '"name":"request"' "$T/trace.jsonl")" -eq 3 ]
    grep '"name":"request"' "$T/trace.jsonl" | head -1 | grep -q '"completion_tokens":6'
    # the summary on stderr counts the tokens the answers' usage counts
    gen=$(sed -n 's/.* and \([0-9]*\) generated tokens .*/\1/p' <<<"$stderr")
    [ "$gen" = "$(jq -s 'map(.response.body.usage.completion_tokens) | add' <<<"$output")" ]
}

@test "--trace: the decode steps' matmul path (best this CPU has; SWIFT_CPU_MATVEC picks another)" {
    requests llama | head -2 >"$T/in.jsonl"
    run --separate-stderr "$INFER" "$FIX/eval/llama" "$T/in.jsonl" --trace "$T/trace.jsonl"
    [ "$status" -eq 0 ]
    impl=$(jq -r 'select(.name == "decode_matmul") | .args.impl' "$T/trace.jsonl")
    [ "$(jq -r 'select(.name == "decode_matmul") | .args.max_rows' "$T/trace.jsonl")" = 8 ]
    if grep -qw avx512f /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo; then
        [ "$impl" = avx512 ]
    elif grep -qw avx2 /proc/cpuinfo 2>/dev/null && grep -qw fma /proc/cpuinfo; then
        [ "$impl" = avx2 ]
    else
        [ "$impl" = scalar ]
    fi
    SWIFT_CPU_MATVEC=scalar run --separate-stderr "$INFER" "$FIX/eval/llama" "$T/in.jsonl" \
        --trace "$T/trace2.jsonl"
    [ "$status" -eq 0 ]
    [ "$(jq -r 'select(.name == "decode_matmul") | .args.impl' "$T/trace2.jsonl")" = scalar ]
}

@test "every decode matmul path (scalar, avx2, avx512, OpenBLAS) gives transformers' greedy ids" {
    for p in scalar avx2 avx512 blas; do
        export SWIFT_CPU_MATVEC=$p # a path this CPU lacks runs the best it has
        greedy_equals_transformers qwen2 --max-num-seqs 3
    done
    unset SWIFT_CPU_MATVEC
}
