#!/usr/bin/env bats
# swift-infer --serve: the OpenAI API over HTTP on loopback. Greedy answers equal the batch mode's
# and thus transformers' (tests/fixtures/infer), SSE framing with usage, n=2 streamed, the error
# statuses (400, 401, 404, 405, 413), 64 concurrent streams, SIGTERM -> exit 0 with no cache
# block left. The fixture models are random: they never emit a tool call, so here a request with
# tools is only rendered and answered; infer-toolcall.bats trains a model that calls a tool and
# checks the parsed calls over HTTP.

bats_require_minimum_version 1.5.0

setup() {
    ROOT=$BATS_TEST_DIRNAME/../..
    FIX=$ROOT/tests/fixtures
    T=$BATS_TEST_TMPDIR
    INFER=$SWIFT_BIN/swift-infer
    MODEL=$FIX/eval/qwen2
    export OMP_NUM_THREADS=2
    PID=
    . "$BATS_TEST_DIRNAME/serve.bash" # serve, stop_server, kill_server
}

teardown() {
    kill_server
}



post() { # PATH BODY [curl args]: the body on stdout, the status in $T/status
    local p=$1 b=$2
    shift 2
    curl -s --max-time 60 -o "$T/body" -w '%{http_code}' "$URL$p" -H 'Content-Type: application/json' \
        -d "$b" "$@" >"$T/status"
    cat "$T/body"
}

@test "serve: greedy chat and completions equal transformers' (as the batch mode), usage" {
    serve
    while read -r req; do
        url=$(jq -r .url <<<"$req")
        post "$url" "$(jq -c .body <<<"$req")" >"$T/a.json"
        [ "$(cat "$T/status")" = 200 ]
        jq -c --arg cid "$(jq -r .custom_id <<<"$req")" '{custom_id: $cid, ids: (.choices[0] |
             (if .logprobs.content then [.logprobs.content[].token] else .logprobs.tokens end) |
             map(ltrimstr("token_id:") | tonumber)), finish_reason: .choices[0].finish_reason,
             p: .usage.prompt_tokens, c: .usage.completion_tokens}' "$T/a.json" >>"$T/got.jsonl"
    done < <(jq -c . "$FIX/infer/qwen2.jsonl")
    jq -c '{custom_id, ids, finish_reason, p: (.prompt_ids | length), c: (.ids | length)}' \
        "$FIX/infer/qwen2.jsonl" >"$T/want.jsonl"
    diff "$T/want.jsonl" "$T/got.jsonl"
    # the content is the batch mode's for the same request
    body='{"messages":[{"role":"user","content":"Hello"}],"max_tokens":8}'
    post /v1/chat/completions "$body" >"$T/a.json"
    printf '{"custom_id":"a","method":"POST","url":"/v1/chat/completions","body":%s}\n' "$body" |
        "$INFER" "$MODEL" 2>/dev/null >"$T/b.json"
    [ "$(jq .choices[0].message.content "$T/a.json")" = "$(jq .response.body.choices[0].message.content "$T/b.json")" ]
    [ "$(jq -r .object "$T/a.json")" = chat.completion ]
    [[ $(jq -r .id "$T/a.json") == chatcmpl-* ]]
    stop_server
}

@test "serve: /v1/models, /health, 404 and 405 with OpenAI's error object" {
    serve --served-model-name tiny
    curl -s --max-time 10 "$URL/v1/models" >"$T/m.json"
    [ "$(jq -c '[.object, .data[0].id, .data[0].object, .data[0].max_model_len]' "$T/m.json")" = '["list","tiny","model",128]' ]
    [ "$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' "$URL/health")" = 200 ]
    [ "$(curl -s --max-time 10 -o "$T/e.json" -w '%{http_code}' "$URL/v1/embeddings")" = 404 ]
    [ "$(jq -r .error.type "$T/e.json")" = not_found_error ]
    [ "$(curl -s --max-time 10 -o "$T/e.json" -w '%{http_code}' "$URL/v1/completions")" = 405 ]
    [ "$(jq -r .error.type "$T/e.json")" = invalid_request_error ]
    stop_server
}

@test "serve: errors: malformed JSON 400, unknown model 404, too long 400, too large 413" {
    serve --served-model-name tiny --max-model-len 32 --max-request-bytes 2000
    post /v1/chat/completions '{"messages": [' >"$T/e.json"
    [ "$(cat "$T/status")" = 400 ]
    [[ $(jq -r .error.message "$T/e.json") == *"malformed JSON"* ]]
    post /v1/completions '{"model":"gpt-4","prompt":"hi"}' >"$T/e.json"
    [ "$(cat "$T/status")" = 404 ]
    [ "$(jq -r .error.code "$T/e.json")" = model_not_found ]
    post /v1/completions "{\"prompt\":\"$(printf 'x%.0s' $(seq 40))\"}" >"$T/e.json"
    [ "$(cat "$T/status")" = 400 ]
    [[ $(jq -r .error.message "$T/e.json") == "This model's maximum context length is 32 tokens. However, your request has 40 input tokens."* ]]
    post /v1/completions "{\"prompt\":\"$(printf 'x%.0s' $(seq 3000))\"}" >"$T/e.json"
    [ "$(cat "$T/status")" = 413 ]
    [[ $(jq -r .error.message "$T/e.json") == *"larger than 2000 bytes"* ]]
    # the server goes on
    post /v1/completions '{"model":"tiny","prompt":"hi","max_tokens":2}' >/dev/null
    [ "$(cat "$T/status")" = 200 ]
    stop_server
}

@test "serve: --api-key (and VLLM_API_KEY): 401 without the right Bearer, /health open" {
    VLLM_API_KEY=sk-env serve --api-key sk-test
    post /v1/completions '{"prompt":"hi","max_tokens":2}' >"$T/e.json"
    [ "$(cat "$T/status")" = 401 ]
    [ "$(jq -r .error.code "$T/e.json")" = invalid_api_key ]
    post /v1/completions '{"prompt":"hi","max_tokens":2}' -H 'Authorization: Bearer sk-env' >/dev/null
    [ "$(cat "$T/status")" = 401 ]
    post /v1/completions '{"prompt":"hi","max_tokens":2}' -H 'Authorization: Bearer sk-test' >/dev/null
    [ "$(cat "$T/status")" = 200 ]
    [ "$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' "$URL/v1/models")" = 401 ]
    [ "$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' "$URL/health")" = 200 ]
    stop_server
    VLLM_API_KEY=sk-env serve
    [ "$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' "$URL/v1/models")" = 401 ]
    [ "$(curl -s --max-time 10 -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer sk-env' "$URL/v1/models")" = 200 ]
    stop_server
}

# The data: events of a stream, one JSON per line (the framing checked on the way).
events() {
    [ "$(tail -c 14 "$1")" = "data: [DONE]"$'\n' ] || [ "$(tail -n 2 "$1" | head -n 1)" = "data: [DONE]" ]
    ! grep -v '^data: \|^$' "$1"
    grep '^data: {' "$1" | sed 's/^data: //'
}

@test "serve: streamed logprobs: each chunk carries its tokens' entries; joined they equal the whole answer's (chat and completions)" {
    serve
    for kind in chat completions; do
        if [ $kind = chat ]; then
            p=/v1/chat/completions b='"messages":[{"role":"user","content":"Hello"}],"logprobs":true,"top_logprobs":2'
            sel='.choices[0].logprobs.content'
        else
            p=/v1/completions b='"prompt":"Once upon a time","logprobs":2'
            sel='.choices[0].logprobs | [.tokens, .token_logprobs, .top_logprobs, .text_offset] | transpose'
        fi
        post $p '{'"$b"',"max_tokens":8}' >"$T/a.json"
        [ "$(cat "$T/status")" = 200 ]
        post $p '{'"$b"',"max_tokens":8,"stream":true}' >"$T/s.txt"
        events "$T/s.txt" >"$T/ev.jsonl"
        want=$(jq -c "$sel" "$T/a.json")
        [ "$(jq 'length' <<<"$want")" = 8 ]
        # every chunk with text has entries; joined in order they are the whole answer's (the
        # same tokens and top tokens; the numbers within 1e-4: the second request finds the
        # first one's prompt in the prefix cache, a different but equivalent computation)
        [ "$(jq -s "map(select(.choices[0] | (.delta.content // .text // \"\") != \"\" and .logprobs == null)) | length" "$T/ev.jsonl")" = 0 ]
        got=$(jq -s -c "map(select(.choices[0].logprobs != null) | $sel[])" "$T/ev.jsonl")
        strip='walk(if type == "number" then 0 else . end)'
        [ "$(jq -c "$strip" <<<"$got")" = "$(jq -c "$strip" <<<"$want")" ]
        jq -e -n --argjson a "$got" --argjson b "$want" '[$a | .. | numbers] as $x |
            [$b | .. | numbers] as $y | ($x | length) == ($y | length) and
            ([range($x | length)] | all(($x[.] - $y[.]) | fabs < 1e-4))'
    done
    stop_server
}

@test "serve: prefix cache kept after a request ends: the next with the same system prompt reports cached tokens, same answer" {
    serve --trace "$T/srv.trace.jsonl"
    sys='You are a careful assistant who answers in one short sentence.'
    for q in "What is a cat" "What is a cat" "Name a colour"; do
        post /v1/chat/completions "$(jq -nc --arg s "$sys" --arg q "$q" '{messages: [{role: "system",
            content: $s}, {role: "user", content: $q}], max_tokens: 8, logprobs: true}')" >>"$T/ans.jsonl"
        [ "$(cat "$T/status")" = 200 ] || { tail -n 1 "$T/ans.jsonl"; false; }
    done
    jq -c '.usage.prompt_tokens_details.cached_tokens' "$T/ans.jsonl" >"$T/cached"
    # the first found nothing, the second its whole prompt but the block of its last token, the
    # third the system prompt's blocks
    p=$(jq -s '.[1].usage.prompt_tokens' "$T/ans.jsonl")
    [ "$(sed -n 1p "$T/cached")" = 0 ]
    [ "$(sed -n 2p "$T/cached")" -eq $(((p - 1) / 16 * 16)) ]
    [ "$(sed -n 3p "$T/cached")" -gt 0 ]
    # the cached answer is the uncached one, token for token
    jq -e -s '(.[0].choices[0].logprobs.content | map(.token)) ==
        (.[1].choices[0].logprobs.content | map(.token))' "$T/ans.jsonl"
    stop_server
    # the trace: the engine's request_prefill spans and the prefix cache counter say the same
    [ "$(jq -sc '[.[] | select(.name == "request_prefill") | .args.cached_tokens]' "$T/srv.trace.jsonl")" = "$(jq -sc . "$T/cached")" ]
    jq -e -s '[.[] | select(.name == "kv_prefix_cache") | .args.hit_tokens] | max > 0' "$T/srv.trace.jsonl"
    jq -e -s '[.[] | select(.name == "kv_prefix_cache") | .args.cached_blocks] | last > 0' "$T/srv.trace.jsonl"
}

@test "serve: stream: SSE chunks, the usage chunk, [DONE]; the text equals the whole answer" {
    serve
    body='{"messages":[{"role":"user","content":"Tell me a story"}],"max_tokens":12'
    post /v1/chat/completions "$body}" >"$T/a.json"
    post /v1/chat/completions "$body"',"stream":true,"stream_options":{"include_usage":true}}' >"$T/s.txt"
    [ "$(cat "$T/status")" = 200 ]
    events "$T/s.txt" >"$T/ev.jsonl"
    [ "$(jq -sc 'map(.object) | unique' "$T/ev.jsonl")" = '["chat.completion.chunk"]' ]
    [ "$(head -n 1 "$T/ev.jsonl" | jq -r .choices[0].delta.role)" = assistant ]
    [ "$(jq -s 'map(.choices[0].delta.content // "") | join("")' "$T/ev.jsonl")" = "$(jq .choices[0].message.content "$T/a.json")" ]
    [ "$(jq -sc 'map(select(.choices | length > 0) | .choices[0].finish_reason) | map(select(.))' "$T/ev.jsonl")" = '["length"]' ]
    # the usage is the whole answer's, but for the prompt's blocks the stream found cached
    [ "$(tail -n 1 "$T/ev.jsonl" | jq -c '[.choices, (.usage | del(.prompt_tokens_details))]')" = "[[],$(jq -c '.usage | del(.prompt_tokens_details)' "$T/a.json")]" ]
    [ "$(jq .usage.prompt_tokens_details.cached_tokens "$T/a.json")" = 0 ]
    tail -n 1 "$T/ev.jsonl" | jq -e '.usage.prompt_tokens_details.cached_tokens > 0 and
        .usage.prompt_tokens_details.cached_tokens < .usage.prompt_tokens'
    # completions stream, no usage asked: none sent
    post /v1/completions '{"prompt":"Hello","max_tokens":5,"stream":true}' >"$T/c.txt"
    events "$T/c.txt" >"$T/cev.jsonl"
    [ "$(jq -s 'map(.choices[0].text) | join("")' "$T/cev.jsonl")" = "$(post /v1/completions '{"prompt":"Hello","max_tokens":5}' | jq .choices[0].text)" ]
    [ "$(jq -s 'map(select(.usage)) | length' "$T/cev.jsonl")" = 0 ]
    stop_server
}

@test "serve: n=2 streamed: both choices by index, each with its finish_reason" {
    serve
    post /v1/chat/completions '{"messages":[{"role":"user","content":"Hello"}],"max_tokens":6,"n":2,"stream":true}' >"$T/s.txt"
    events "$T/s.txt" >"$T/ev.jsonl"
    for i in 0 1; do
        [ "$(jq -s "map(.choices[] | select(.index == $i) | .finish_reason | select(.)) | length" "$T/ev.jsonl")" = 1 ]
        text[i]=$(jq -s "map(.choices[] | select(.index == $i) | .delta.content // \"\") | join(\"\")" "$T/ev.jsonl")
    done
    [ "${text[0]}" = "${text[1]}" ]
    [ "${text[0]}" = "$(post /v1/chat/completions '{"messages":[{"role":"user","content":"Hello"}],"max_tokens":6}' | jq .choices[0].message.content)" ]
    stop_server
}

@test "serve: a request with tools is rendered with them and answered (whole and streamed)" {
    serve --max-model-len 1024 # the tools' system prompt is longer than the tiny config's 128
    tools='"tools":[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}}]'
    post /v1/chat/completions '{"messages":[{"role":"user","content":"Weather in Paris?"}],"max_tokens":4,'"$tools"'}' >"$T/a.json"
    [ "$(cat "$T/status")" = 200 ]
    [ "$(jq '.usage.prompt_tokens > 100' "$T/a.json")" = true ] # the tools are in the prompt
    post /v1/chat/completions '{"messages":[{"role":"user","content":"Weather in Paris?"}],"max_tokens":4,"stream":true,'"$tools"'}' >"$T/s.txt"
    events "$T/s.txt" >"$T/ev.jsonl"
    [ "$(jq -s 'map(.choices[0].delta.content // "") | join("")' "$T/ev.jsonl")" = "$(jq .choices[0].message.content "$T/a.json")" ]
    stop_server
}

@test "serve: 64 concurrent streaming clients all get [DONE] and the sequential text; SIGTERM exit 0" {
    serve --max-num-seqs 8
    for i in $(seq 0 7); do
        post /v1/completions "{\"prompt\":[$((i + 1))],\"max_tokens\":$((4 + i)),\"ignore_eos\":true}" |
            jq -r .choices[0].text >"$T/want$i"
    done
    for k in $(seq 0 63); do
        i=$((k % 8))
        curl -sN --max-time 120 "$URL/v1/completions" \
            -d "{\"prompt\":[$((i + 1))],\"max_tokens\":$((4 + i)),\"ignore_eos\":true,\"stream\":true}" \
            >"$T/s$k" &
    done
    wait_ok=0
    for job in $(jobs -p); do
        [ "$job" = "$PID" ] && continue
        wait "$job" || wait_ok=1
    done
    [ "$wait_ok" -eq 0 ]
    for k in $(seq 0 63); do
        i=$((k % 8))
        events "$T/s$k" >"$T/ev$k"
        jq -rs 'map(.choices[0].text) | join("")' "$T/ev$k" >"$T/got$k"
        diff "$T/want$i" "$T/got$k"
    done
    stop_server
}

@test "serve: SIGTERM cancels a stream in flight (finish_reason abort, [DONE]), blocks freed" {
    serve --max-num-seqs 2
    curl -sN --max-time 60 "$URL/v1/completions" \
        -d '{"prompt":[1],"max_tokens":120,"ignore_eos":true,"stream":true}' >"$T/s.txt" &
    cpid=$!
    for _ in $(seq 200); do # the stream has started
        [ -s "$T/s.txt" ] && break
        sleep 0.05
    done
    stop_server
    wait "$cpid"
    events "$T/s.txt" >"$T/ev.jsonl"
    [ "$(jq -sc 'map(.choices[0].finish_reason | select(.)) | .[0]' "$T/ev.jsonl")" != null ]
}

@test "serve: a client that leaves mid-stream has its request cancelled (trace: 499, joined by req)" {
    serve --max-model-len 8192 --trace "$T/trace/"
    run curl -sN --max-time 0.5 "$URL/v1/completions" \
        -d '{"prompt":[1],"max_tokens":8000,"ignore_eos":true,"stream":true}'
    [ "$status" -eq 28 ] # curl's timeout: the client left
    post /v1/completions '{"prompt":[1],"max_tokens":3}' >/dev/null
    [ "$(cat "$T/status")" = 200 ]
    stop_server
    cat "$T"/trace/*.jsonl >"$T/trace.jsonl"
    req=$(jq -r 'select(.name == "http_request" and .args.status == 499) | .args.req' "$T/trace.jsonl")
    [ "$req" = 1 ]
    jq -c 'select(.name == "http_request")' "$T/trace.jsonl" | grep -q '"method":"POST","path":"/v1/completions","status":200,"request_id":"[0-9a-f]*","req":2'
    # cancelled long before its 8000 tokens, and before the next request came
    [ "$(jq -s '[.[] | select(.name == "request_decode" and .args.req == 1)][0].args.completion_tokens < 8000' "$T/trace.jsonl")" = true ]
    [ "$(jq -s '([.[] | select(.name == "request_decode" and .args.req == 1)][0] | .ts + .dur) <
                ([.[] | select(.name == "http_request" and .args.req == 2)][0].ts)' "$T/trace.jsonl")" = true ]
}

@test "serve: usage errors" {
    run "$INFER" "$MODEL" --serve extra.jsonl
    [ "$status" -eq 2 ]
    [[ $output == *"--serve takes one MODEL_DIR"* ]]
    run "$INFER" "$MODEL" --serve -o out.jsonl
    [ "$status" -eq 2 ]
}
