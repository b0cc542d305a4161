#!/usr/bin/env bats
# swift-eval --eval-url: the generation tasks through an OpenAI-compatible server (our own
# swift-infer --serve on loopback). Greedy answers equal swift-eval's on the same model loaded
# here, several requests in flight reach the engine's batch, a trace span per request, and the
# failures (refused connection, an OpenAI error object, a malformed answer) name the URL and row.

bats_require_minimum_version 1.5.0

setup() {
    ROOT=$BATS_TEST_DIRNAME/../..
    FIX=$ROOT/tests/fixtures/eval
    SYN=$FIX/synth
    T=$BATS_TEST_TMPDIR
    EVAL=$SWIFT_BIN/swift-eval
    INFER=$SWIFT_BIN/swift-infer
    MODEL=$FIX/qwen2
    export OMP_NUM_THREADS=2
    PID=
    . "$BATS_TEST_DIRNAME/serve.bash" # serve, stop_server, kill_server
}

teardown() {
    kill_server
}



# the record without what differs between a local and a remote run
same() { jq -c '[.task, .dataset, .n, .metrics, .config.max_new_tokens]' "$1"; }

@test "eval-url: greedy answers and scores equal the local model's, plain and few-shot" {
    serve
    for fs in 0 1; do
        run "$EVAL" "$MODEL" --task exact --dataset "$SYN/exact.jsonl" --limit 6 --few-shot $fs \
            --max-new-tokens 8 --quiet -o "$T/local.json" --predictions "$T/local.jsonl"
        [ "$status" -eq 0 ]
        run "$EVAL" --eval-url "$URL/v1" --task exact --dataset "$SYN/exact.jsonl" --limit 6 \
            --few-shot $fs --max-new-tokens 8 --quiet -o "$T/remote.json" \
            --predictions "$T/remote.jsonl"
        [ "$status" -eq 0 ]
        [ "$(wc -l <"$T/remote.jsonl")" -eq 6 ]
        diff "$T/local.jsonl" "$T/remote.jsonl"
        [ "$(same "$T/local.json")" = "$(same "$T/remote.json")" ]
        jq -e --arg u "$URL/v1" '.model == $u and .config.eval_url == $u and .prefill_tokens > 0
            and .decode_tokens > 0' "$T/remote.json"
        cp "$T/local.jsonl" "$T/local$fs.jsonl"
    done
    # ms-swift's spelling, a full endpoint URL, and the model's name as the server knows it
    run "$EVAL" "$MODEL" --eval_url "$URL/v1/completions" --task exact --dataset "$SYN/exact.jsonl" \
        --limit 6 --max-new-tokens 8 --quiet --predictions "$T/named.jsonl"
    [ "$status" -eq 0 ]
    [ "$(jq -r .model <<<"$output")" = "$MODEL" ]
    diff "$T/local0.jsonl" "$T/named.jsonl"
    stop_server
}

@test "eval-url: chat template: the question as the user turn of /v1/chat/completions" {
    serve --template chatml
    run "$EVAL" "$MODEL" --task exact --dataset "$SYN/exact.jsonl" --limit 4 --template chatml \
        --max-new-tokens 6 --quiet --predictions "$T/local.jsonl"
    [ "$status" -eq 0 ]
    run "$EVAL" --eval-url "$URL" --task exact --dataset "$SYN/exact.jsonl" --limit 4 \
        --template chatml --max-new-tokens 6 --quiet --predictions "$T/remote.jsonl"
    [ "$status" -eq 0 ]
    diff "$T/local.jsonl" "$T/remote.jsonl"
    stop_server
}

@test "eval-url: --batch-size requests in flight share the server's batch; a span per request" {
    serve --trace "$T/server.trace.jsonl"
    run "$EVAL" --eval-url "$URL" --task exact --dataset "$SYN/exact.jsonl" --limit 8 \
        --batch-size 4 --max-new-tokens 8 --quiet --trace "$T/eval.trace.jsonl"
    [ "$status" -eq 0 ]
    stop_server
    # the client: one `request` span (cat infer) per item, status 200, the server's usage
    [ "$(jq -s '[.[] | select(.ph == "X" and .cat == "infer" and .name == "request")] | length' \
        "$T/eval.trace.jsonl")" -eq 8 ]
    jq -e -s '[.[] | select(.name == "request")] | all(.args.status == 200 and
        .args.prompt_tokens > 0 and .args.completion_tokens > 0) and
        ([.[].args.req] | unique | length == 8)' "$T/eval.trace.jsonl"
    # the server ran more than one sequence in some engine step
    jq -e -s '[.[] | select(.name == "engine_step") | .args.seqs] | max >= 2' \
        "$T/server.trace.jsonl"
    run "$SWIFT_BIN/swift-trace-analyze" "$T/eval.trace.jsonl"
    [ "$status" -eq 0 ]
    [[ $output == *request* ]]
}

@test "eval-url: errors name the URL and the row: refused, OpenAI error objects, malformed answers" {
    serve --api-key sekret --served-model-name tiny
    run --separate-stderr "$EVAL" --eval-url "$URL" --task exact --dataset "$SYN/exact.jsonl" \
        --limit 2 --max-new-tokens 4 --quiet
    [ "$status" -eq 1 ]
    [ -z "$output" ]
    [[ $stderr == "swift-eval: $URL/v1/completions: $SYN/exact.jsonl:1: HTTP 401: "*"(invalid_request_error)"* ]] ||
        [[ $stderr == "swift-eval: $URL/v1/completions: $SYN/exact.jsonl:"[12]": HTTP 401: "* ]]
    OPENAI_API_KEY=sekret run "$EVAL" tiny --eval-url "$URL" --task exact --dataset "$SYN/exact.jsonl" \
        --limit 2 --max-new-tokens 4 --quiet
    [ "$status" -eq 0 ]
    run --separate-stderr "$EVAL" nosuchmodel --eval-url "$URL" --api-key sekret --task exact \
        --dataset "$SYN/exact.jsonl" --limit 1 --max-new-tokens 4 --quiet
    [ "$status" -eq 1 ]
    [[ $stderr == "swift-eval: $URL/v1/completions: $SYN/exact.jsonl:1: HTTP 404: The model \`nosuchmodel\` does not exist."* ]]
    # a prompt longer than the server's context: the server's 400, on the row that has it
    run --separate-stderr "$EVAL" --eval-url "$URL" --api-key sekret --task exact \
        --dataset "$SYN/exact.jsonl" --limit 6 --few-shot 2 --max-new-tokens 8 --quiet
    [ "$status" -eq 1 ]
    [[ $stderr == "swift-eval: $URL/v1/completions: $SYN/exact.jsonl:"*": HTTP 400: This model's maximum context length is 128 tokens."*"(invalid_request_error)"* ]]
    stop_server
    # nothing listens there any more
    run --separate-stderr "$EVAL" --eval-url "$URL" --task exact --dataset "$SYN/exact.jsonl" \
        --limit 1 --quiet
    [ "$status" -eq 1 ]
    [[ $stderr == "swift-eval: $URL/v1/completions: $SYN/exact.jsonl:1: "*"onnect"* ]]
    # a server that answers 200 with something that is not a completion
    python3 -c '
import http.server, sys
class H(http.server.BaseHTTPRequestHandler):
    def do_POST(self):
        self.rfile.read(int(self.headers["Content-Length"]))
        self.send_response(200); self.send_header("Content-Length", "8"); self.end_headers()
        self.wfile.write(b"{\"x\": 1}")
    def log_message(self, *a): pass
s = http.server.HTTPServer(("127.0.0.1", 0), H)
print(s.server_address[1], flush=True)
s.serve_forever()' >"$T/port" 3>&- &
    PID=$!
    for _ in $(seq 50); do [ -s "$T/port" ] && break; sleep 0.1; done
    run --separate-stderr "$EVAL" --eval-url "http://127.0.0.1:$(cat "$T/port")/v1" --task exact \
        --dataset "$SYN/exact.jsonl" --limit 1 --quiet
    [ "$status" -eq 1 ]
    [ "$stderr" = "swift-eval: http://127.0.0.1:$(cat "$T/port")/v1/completions: $SYN/exact.jsonl:1: malformed response: no choices[0]" ]
}

@test "eval-url: tasks and options that need a model here are usage errors" {
    run --separate-stderr "$EVAL" --eval-url http://127.0.0.1:9/v1 --task mc --dataset "$SYN/mc.jsonl"
    [ "$status" -eq 2 ]
    [[ $stderr == "swift-eval: --eval-url: --task mc scores log-likelihoods, which needs the model here (through a server: gsm8k, exact)"* ]]
    run --separate-stderr "$EVAL" --eval-url http://127.0.0.1:9/v1 --task toolcall --dataset "$SYN/exact.jsonl"
    [ "$status" -eq 2 ]
    [[ $stderr == "swift-eval: --eval-url: --task toolcall renders the tools with the agent template"* ]]
    run --separate-stderr "$EVAL" --eval-url http://127.0.0.1:9 --task exact --adapters "$T" \
        --dataset "$SYN/exact.jsonl"
    [ "$status" -eq 2 ]
    [[ $stderr == "swift-eval: --eval-url: --adapters is for a model loaded here"* ]]
    run --separate-stderr "$EVAL" --eval-url ftp://127.0.0.1/v1 --task exact --dataset "$SYN/exact.jsonl"
    [ "$status" -eq 2 ]
    [[ $stderr == "swift-eval: --eval-url 'ftp://127.0.0.1/v1': not an http:// or https:// URL"* ]]
    run --separate-stderr "$EVAL" --task exact --dataset "$SYN/exact.jsonl"
    [ "$status" -eq 2 ]
    [[ $stderr == "swift-eval: missing MODEL_DIR"* ]]
    run --separate-stderr "$EVAL" "$FIX/llama" --task mc --dataset "$SYN/mc.jsonl" --predictions "$T/p"
    [ "$status" -eq 2 ]
    [[ $stderr == "swift-eval: --predictions: --task mc generates nothing (gsm8k, exact do)"* ]]
}
