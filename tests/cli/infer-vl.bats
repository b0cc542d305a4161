#!/usr/bin/env bats
# swift-infer on Qwen2-VL / Qwen2.5-VL (docs/infer.md "Images"): OpenAI image_url parts (a path,
# file://, a data: URL) and ms-swift rows ("<image>" + "images" relative to the file), batch mode
# and --serve; greedy ids equal transformers' generate (tests/ref/gen_vlm_generate.py, the ids in
# tests/fixtures/vlm_gen/*/expected.json); a bad, missing or undecodable image, an http URL, pads
# that do not match the images and images for a text model are 400s of their own request.

bats_require_minimum_version 1.5.0

setup() {
    ROOT=$BATS_TEST_DIRNAME/../..
    F=$ROOT/tests/fixtures/vlm_gen
    T=$BATS_TEST_TMPDIR
    INFER=$SWIFT_BIN/swift-infer
    export OMP_NUM_THREADS=2
    PID=
    . "$BATS_TEST_DIRNAME/serve.bash" # serve, stop_server, kill_server
    cp "$F"/images/*.png "$T/"
    OPTS='"max_tokens": 12, "logprobs": true, "return_tokens_as_token_ids": true'
}

teardown() {
    kill_server
}

# An image_url part.
img() {
    printf '{"type": "image_url", "image_url": {"url": "%s"}}' "$1"
}

# A Batch API line: custom_id, then the content parts (JSON, comma-separated).
chat() {
    printf '{"custom_id": "%s", "method": "POST", "url": "/v1/chat/completions", "body": {"messages": [{"role": "user", "content": [%s]}], %s}}\n' \
        "$1" "$2" "$OPTS"
}

# The requests of the fixture's four prompts, every way an image can be named.
requests() {
    chat 0 "$(img "$T/a.png"), {\"type\": \"text\", \"text\": \"What is in the picture?\"}"
    chat 1 "$(img "data:image/png;base64,$(base64 -w0 "$T/b.png")"), $(img "file://$T/c.png"), {\"type\": \"text\", \"text\": \"Compare the two.\"}"
    printf '{"id": "2", "messages": [{"role": "user", "content": "Say something."}], %s}\n' "$OPTS"
    printf '{"id": "3", "messages": [{"role": "user", "content": "<image>And this one?"}, {"role": "assistant", "content": "label"}], "images": ["c.png"], %s}\n' "$OPTS"
}

# custom_id -> generated ids, one compact object per line
ids() {
    jq -c '{(.custom_id): (.response.body.choices[0].logprobs.content | map(.token | ltrimstr("token_id:") | tonumber))}' "$1" |
        jq -cs add
}

@test "infer-vl: greedy ids equal transformers' generate, Qwen2-VL and Qwen2.5-VL, paths, file://, data: URLs, ms-swift rows" {
    requests >"$T/in.jsonl"
    for kind in qwen2_vl qwen2_5_vl; do
        run --separate-stderr "$INFER" --template qwen2_vl "$F/$kind" "$T/in.jsonl"
        [ "$status" -eq 0 ]
        echo "$output" >"$T/out.jsonl"
        [ "$(jq -r '.response.status_code' "$T/out.jsonl" | sort -u)" = 200 ]
        [ "$(ids "$T/out.jsonl")" = "$(jq -c . "$F/$kind/expected.json")" ]
        # the image tokens count in the usage: 6 + 4 + 8 pads over the text
        [ "$(jq -s -c 'map(.response.body.usage.prompt_tokens)' "$T/out.jsonl")" = "[88,89,71,80]" ]
    done
}

@test "infer-vl: a bad image is its own request's 400; the run goes on" {
    {
        chat http "$(img https://example.com/a.png), {\"type\": \"text\", \"text\": \"hi\"}"
        chat missing "$(img "$T/none.png"), {\"type\": \"text\", \"text\": \"hi\"}"
        chat undecodable "$(img "data:image/png;base64,AAAA"), {\"type\": \"text\", \"text\": \"hi\"}"
        chat notimage "$(img "data:text/plain;base64,aGk="), {\"type\": \"text\", \"text\": \"hi\"}"
        chat badb64 "$(img "data:image/png;base64,@@@@"), {\"type\": \"text\", \"text\": \"hi\"}"
        chat nourl '{"type": "image_url"}, {"type": "text", "text": "hi"}'
        printf '{"id": "count", "messages": [{"role": "user", "content": "<image><image>hi"}], "images": ["a.png"]}\n'
        chat ok "$(img "$T/a.png"), {\"type\": \"text\", \"text\": \"What is in the picture?\"}"
    } >"$T/in.jsonl"
    run --separate-stderr "$INFER" --template qwen2_vl "$F/qwen2_vl" "$T/in.jsonl"
    [ "$status" -eq 0 ]
    echo "$output" >"$T/out.jsonl"
    st() { jq -r --arg c "$1" 'select(.custom_id == $c) | .response.status_code' "$T/out.jsonl"; }
    msg() { jq -r --arg c "$1" 'select(.custom_id == $c) | .response.body.error.message' "$T/out.jsonl"; }
    for c in http missing undecodable notimage badb64 nourl count; do
        [ "$(st $c)" = 400 ]
    done
    [[ "$(msg http)" == "image 0: image URLs are not fetched: download the image"* ]]
    [[ "$(msg missing)" == "image 0: cannot open '$T/none.png': No such file or directory" ]]
    [[ "$(msg undecodable)" == "image 0: not a JPEG, PNG or WebP image"* ]]
    [[ "$(msg notimage)" == *"not an image"* ]]
    [[ "$(msg badb64)" == *"bad base64"* ]]
    [[ "$(msg nourl)" == *"an image_url part needs"* ]]
    [[ "$(msg count)" == "2 <image> placeholders for 1 images"* ]]
    [ "$(st ok)" = 200 ]
    [ "$(jq -c 'select(.custom_id == "ok") | .response.body.choices[0].logprobs.content | map(.token | ltrimstr("token_id:") | tonumber)' "$T/out.jsonl")" = "$(jq -c '.["0"]' "$F/qwen2_vl/expected.json")" ]
    # a text model takes no images
    chat ok "$(img "$T/a.png"), {\"type\": \"text\", \"text\": \"hi\"}" >"$T/in2.jsonl"
    run --separate-stderr "$INFER" "$ROOT/tests/fixtures/eval/qwen2" "$T/in2.jsonl"
    [ "$status" -eq 0 ]
    [ "$(jq -r .response.status_code <<<"$output")" = 400 ]
    [[ "$(jq -r .response.body.error.message <<<"$output")" == "the model takes no images"* ]]
}

@test "infer-vl: --serve answers image_url data: URLs as the batch mode; a bad image is a 400" {
    MODEL=$F/qwen2_5_vl
    serve --template qwen2_vl
    body=$(jq -c '.body' <<<"$(chat 1 "$(img "data:image/png;base64,$(base64 -w0 "$T/b.png")"), $(img "data:image/png;base64,$(base64 -w0 "$T/c.png")"), {\"type\": \"text\", \"text\": \"Compare the two.\"}")")
    code=$(curl -s --max-time 60 -o "$T/body" -w '%{http_code}' "$URL/v1/chat/completions" \
        -H 'Content-Type: application/json' -d "$body")
    [ "$code" = 200 ]
    [ "$(jq -c '.choices[0].logprobs.content | map(.token | ltrimstr("token_id:") | tonumber)' "$T/body")" = "$(jq -c '.["1"]' "$F/qwen2_5_vl/expected.json")" ]
    [ "$(jq .usage.prompt_tokens "$T/body")" = 89 ]
    body=$(jq -c '.body' <<<"$(chat x "$(img "data:image/png;base64,iVBORw0KGgo="), {\"type\": \"text\", \"text\": \"hi\"}")")
    code=$(curl -s --max-time 60 -o "$T/body" -w '%{http_code}' "$URL/v1/chat/completions" \
        -H 'Content-Type: application/json' -d "$body")
    [ "$code" = 400 ]
    [ "$(jq -r .error.type "$T/body")" = invalid_request_error ]
    [[ "$(jq -r .error.message "$T/body")" == "image 0: "* ]]
    stop_server
}
