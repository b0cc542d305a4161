#!/usr/bin/env bats
# Tool calls a model really generated, end to end: setup_file fine-tunes the tiny random Qwen2
# fixture (tests/fixtures/eval/qwen2, its context raised to 1024 for the hermes tools prompt)
# with our own pipeline -- swift-preprocess renders two agent rows (OpenAI `messages` with
# `tools` and assistant `tool_calls`: one call; text and two parallel calls) in the chat
# template's own hermes format, swift-train --tuner full overfits them (120 steps, seeded, one
# thread, ~10 s) -- until greedy decoding reproduces the calls. Then swift-infer --serve turns the
# generated `<tool_call>` blocks into message.tool_calls, finish_reason "tool_calls", the streamed
# tool-call delta, and tool_choice "none" leaves them in the content; the batch mode agrees.

bats_require_minimum_version 1.5.0

setup_file() {
    local W=$BATS_FILE_TMPDIR M0=$BATS_TEST_DIRNAME/../fixtures/eval/qwen2
    local tools='[{"type":"function","function":{"name":"get_weather","description":"Weather for a city","parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}]'
    mkdir "$W/base"
    cp "$M0"/{model.safetensors,tokenizer.json,tokenizer_config.json,generation_config.json} "$W/base/"
    jq '.max_position_embeddings = 1024' "$M0/config.json" >"$W/base/config.json"
    jq -nc --argjson t "$tools" '{tools: $t}' >"$W/tools.json"
    {
        jq -nc --argjson t "$tools" '{tools: $t, messages: [{role: "user", content: "Weather in Paris?"},
            {role: "assistant", content: null, tool_calls: [{id: "call_1", type: "function",
             function: {name: "get_weather", arguments: "{\"city\": \"Paris\"}"}}]}]}'
        jq -nc --argjson t "$tools" '{tools: $t, messages: [{role: "user", content: "Rome and Oslo?"},
            {role: "assistant", content: "Two cities.", tool_calls: [
             {id: "call_1", type: "function", function: {name: "get_weather", arguments: "{\"city\": \"Rome\"}"}},
             {id: "call_2", type: "function", function: {name: "get_weather", arguments: "{\"city\": \"Oslo\", \"unit\": \"C\"}"}}]}]}'
    } >"$W/agent.jsonl"
    "$SWIFT_BIN/swift-preprocess" --tokenizer "$W/base" --max-length 832 -o "$W/shards" \
        "$W/agent.jsonl" 2>"$W/pre.err" >/dev/null || { cat "$W/pre.err"; return 1; }
    grep -q "train: 2 samples" "$W/pre.err"
    OMP_NUM_THREADS=1 "$SWIFT_BIN/swift-train" --model "$W/base" --tuner full -o "$W/run" \
        --max-steps 120 --per-device-train-batch-size 2 --learning-rate 1e-2 --save-steps 120 \
        --eval-steps 1000 --logging-steps 20 --seed 1 -j 1 "$W/shards" >"$W/train.out" 2>&1 ||
        { tail "$W/train.out"; return 1; }
    [ -f "$W/run/checkpoint-120/model.safetensors" ]
}

setup() {
    T=$BATS_TEST_TMPDIR
    W=$BATS_FILE_TMPDIR
    INFER=$SWIFT_BIN/swift-infer
    MODEL=$W/run/checkpoint-120
    export OMP_NUM_THREADS=2
    PID=
    . "$BATS_TEST_DIRNAME/serve.bash" # serve, stop_server, kill_server
}

teardown() {
    kill_server
}

post() { # BODY [curl args]: the body on stdout, the status in $T/status
    curl -s --max-time 60 -o "$T/body" -w '%{http_code}' "$URL/v1/chat/completions" \
        -H 'Content-Type: application/json' -d "$@" >"$T/status"
    cat "$T/body"
}

# A chat request body with the trained tools and the user message $1, more fields from $2.
body() {
    local more=${2:-'{}'}
    jq -c --arg q "$1" --argjson more "$more" \
        '{messages: [{role: "user", content: $q}], max_tokens: 200} + . + $more' "$W/tools.json"
}

# The data: events of a stream, one JSON per line (the framing checked on the way).
events() {
    [ "$(tail -n 2 "$1" | head -n 1)" = "data: [DONE]" ]
    ! grep -v '^data: \|^$' "$1"
    grep '^data: {' "$1" | sed 's/^data: //'
}

# The calls of a message (or a delta) without their ids, arguments parsed: comparable with `=`.
calls() {
    jq -c '[.tool_calls[] | {index, type, name: .function.name, args: (.function.arguments | fromjson)}]'
}

PARIS='[{"index":null,"type":"function","name":"get_weather","args":{"city":"Paris"}}]'
TWO='[{"index":null,"type":"function","name":"get_weather","args":{"city":"Rome"}},{"index":null,"type":"function","name":"get_weather","args":{"city":"Oslo","unit":"C"}}]'

@test "toolcall: a generated call becomes message.tool_calls, finish_reason tool_calls, content null" {
    serve --max-model-len 1024
    post "$(body 'Weather in Paris?')" >"$T/a.json"
    [ "$(cat "$T/status")" = 200 ]
    jq -e '.choices[0].finish_reason == "tool_calls" and .choices[0].message.content == null and
        .choices[0].message.role == "assistant" and (.choices[0].message.tool_calls | length) == 1' "$T/a.json"
    [ "$(jq -r '.choices[0].message.tool_calls[0].function.arguments | type' "$T/a.json")" = string ]
    [[ $(jq -r '.choices[0].message.tool_calls[0].id' "$T/a.json") =~ ^call_[A-Za-z0-9]{24}$ ]]
    [ "$(jq '.choices[0].message' "$T/a.json" | calls)" = "$PARIS" ]
    # text before the calls is the content; two calls in order, each its own id
    post "$(body 'Rome and Oslo?')" >"$T/b.json"
    [ "$(cat "$T/status")" = 200 ]
    jq -e '.choices[0].finish_reason == "tool_calls" and .choices[0].message.content == "Two cities."' "$T/b.json"
    [ "$(jq '.choices[0].message' "$T/b.json" | calls)" = "$TWO" ]
    jq -e '.choices[0].message.tool_calls | .[0].id != .[1].id' "$T/b.json"
    stop_server
}

@test "toolcall: streamed: one delta with the calls (index, id, name, whole arguments), finish tool_calls, usage, [DONE]" {
    serve --max-model-len 1024
    post "$(body 'Weather in Paris?')" >"$T/a.json"
    for q in 'Weather in Paris?' 'Rome and Oslo?'; do
        post "$(body "$q" '{"stream":true,"stream_options":{"include_usage":true}}')" >"$T/s.txt"
        [ "$(cat "$T/status")" = 200 ]
        events "$T/s.txt" >"$T/ev.jsonl"
        [ "$(head -n 1 "$T/ev.jsonl" | jq -r .choices[0].delta.role)" = assistant ]
        # exactly one chunk carries calls, and it is the one with the finish_reason
        [ "$(jq -s '[.[] | select(.choices[0].delta.tool_calls)] | length' "$T/ev.jsonl")" = 1 ]
        jq -s '.[] | select(.choices[0].delta.tool_calls) | .choices[0]' "$T/ev.jsonl" >"$T/d.json"
        [ "$(jq -r .finish_reason "$T/d.json")" = tool_calls ]
        [ "$(jq -sc 'map(select(.choices | length > 0) | .choices[0].finish_reason | select(.))' "$T/ev.jsonl")" = '["tool_calls"]' ]
        jq -e '.delta.tool_calls | to_entries | all(.key == .value.index and
            (.value.id | test("^call_[A-Za-z0-9]{24}$")) and .value.type == "function")' "$T/d.json"
        want=$([ "$q" = 'Rome and Oslo?' ] && echo "$TWO" || echo "$PARIS")
        [ "$(jq '.delta' "$T/d.json" | calls | jq -c 'map(.index = null)')" = "$want" ]
        # the content outside the calls, joined over the deltas
        text=$(jq -s 'map(.choices[0].delta.content // "") | join("")' "$T/ev.jsonl")
        [ "$text" = "$([ "$q" = 'Rome and Oslo?' ] && echo '"Two cities."' || echo '""')" ]
        # the usage chunk last, as the whole answer's tokens
        tail -n 1 "$T/ev.jsonl" | jq -e '.choices == [] and .usage.completion_tokens > 20'
    done
    [ "$(tail -n 1 "$T/ev.jsonl" | jq .usage.completion_tokens)" -gt "$(jq .usage.completion_tokens "$T/a.json")" ]
    stop_server
}

@test "toolcall: tool_choice none: the generated block comes back as content, unparsed, finish stop" {
    serve --max-model-len 1024
    post "$(body 'Weather in Paris?' '{"tool_choice":"none"}')" >"$T/a.json"
    [ "$(cat "$T/status")" = 200 ]
    jq -e '.choices[0].finish_reason == "stop" and (.choices[0].message | has("tool_calls") | not)' "$T/a.json"
    # exactly what was trained, as hermes writes it
    [ "$(jq -r .choices[0].message.content "$T/a.json")" = '<tool_call>
{"name": "get_weather", "arguments": {"city": "Paris"}}
</tool_call>' ]
    post "$(body 'Weather in Paris?' '{"tool_choice":"none","stream":true}')" >"$T/s.txt"
    events "$T/s.txt" >"$T/ev.jsonl"
    [ "$(jq -s '[.[] | select(.choices[0].delta.tool_calls)] | length' "$T/ev.jsonl")" = 0 ]
    [ "$(jq -s 'map(.choices[0].delta.content // "") | join("")' "$T/ev.jsonl")" = "$(jq .choices[0].message.content "$T/a.json")" ]
    [ "$(jq -sc 'map(.choices[0].finish_reason | select(.))' "$T/ev.jsonl")" = '["stop"]' ]
    # cut short inside the block: no call parsed, finish length, the text as it is
    post "$(body 'Weather in Paris?' '{"max_tokens":20}')" >"$T/c.json"
    jq -e '.choices[0].finish_reason == "length" and (.choices[0].message | has("tool_calls") | not) and
        (.choices[0].message.content | startswith("<tool_call>\n{\"name\""))' "$T/c.json"
    stop_server
}

@test "toolcall: the batch mode (Batch API and ms-swift rows) gives the server's calls" {
    {
        for q in 'Weather in Paris?' 'Rome and Oslo?'; do
            jq -c --arg q "$q" '{custom_id: $q, method: "POST", url: "/v1/chat/completions", body: .}' <<<"$(body "$q")"
        done
        jq -c '{messages: [{role: "user", content: "Weather in Paris?"}], tools, max_tokens: 200}' "$W/tools.json"
    } >"$T/in.jsonl"
    run --separate-stderr "$INFER" "$MODEL" --max-model-len 1024 "$T/in.jsonl" -o "$T/out.jsonl"
    [ "$status" -eq 0 ]
    [ "$(wc -l <"$T/out.jsonl")" = 3 ]
    jq -e -s 'all(.response.status_code == 200 and .response.body.choices[0].finish_reason == "tool_calls")' "$T/out.jsonl"
    [ "$(sed -n 1p "$T/out.jsonl" | jq .response.body.choices[0].message | calls)" = "$PARIS" ]
    [ "$(sed -n 2p "$T/out.jsonl" | jq .response.body.choices[0].message | calls)" = "$TWO" ]
    [ "$(sed -n 3p "$T/out.jsonl" | jq .response.body.choices[0].message | calls)" = "$PARIS" ]
    [ "$(sed -n 2p "$T/out.jsonl" | jq -r .response.body.choices[0].message.content)" = "Two cities." ]
    sed -n 1p "$T/out.jsonl" | jq -e '.response.body.choices[0].message.content == null'
    # the server's answer to the same request: the same calls, content and usage
    serve --max-model-len 1024
    for i in 1 2; do
        post "$(sed -n ${i}p "$T/in.jsonl" | jq -c .body)" >"$T/a.json"
        [ "$(jq -c '.choices[0] | del(.message.tool_calls[].id)' "$T/a.json")" = "$(sed -n ${i}p "$T/out.jsonl" | jq -c '.response.body.choices[0] | del(.message.tool_calls[].id)')" ]
        [ "$(jq -c '.usage | del(.prompt_tokens_details)' "$T/a.json")" = "$(sed -n ${i}p "$T/out.jsonl" | jq -c '.response.body.usage | del(.prompt_tokens_details)')" ]
    done
    stop_server
}

# Choice i's call ids were drawn from the seed plus i times splitmix's own increment: choice 1's id
# was choice 0's shifted by one letter, and with 25 choices a call id came back twice.
@test "toolcall: n=2, whole and streamed: each choice its calls, ids unrelated across choices" {
    serve --max-model-len 1024
    shifted='.[0][6:] == .[1][5:28] or .[1][6:] == .[0][5:28]'
    post "$(body 'Weather in Paris?' '{"n":2}')" >"$T/a.json"
    [ "$(jq '[.choices[] | select(.finish_reason == "tool_calls")] | length' "$T/a.json")" = 2 ]
    for i in 0 1; do
        [ "$(jq ".choices[$i].message" "$T/a.json" | calls)" = "$PARIS" ]
    done
    jq -e "[.choices[].message.tool_calls[0].id] | ($shifted | not) and .[0] != .[1]" "$T/a.json"
    post "$(body 'Weather in Paris?' '{"n":2,"stream":true}')" >"$T/s.txt"
    events "$T/s.txt" >"$T/ev.jsonl"
    jq -s '[.[].choices[] | select(.delta.tool_calls)] | sort_by(.index)' "$T/ev.jsonl" >"$T/d.json"
    [ "$(jq -c 'map([.index, .finish_reason])' "$T/d.json")" = '[[0,"tool_calls"],[1,"tool_calls"]]' ]
    jq -e "[.[].delta.tool_calls[0].id] | ($shifted | not) and .[0] != .[1]" "$T/d.json"
    stop_server
}
