#!/usr/bin/env bats
# pipelines/sft.mk: the stages as make targets with real file dependencies — a second run does
# nothing, a changed input redoes only what depends on it, a failed stage leaves no target.

setup() {
    cd "$BATS_TEST_DIRNAME/../.."
    W=$BATS_TEST_TMPDIR
    python3 datasets/make_synthetic.py "$W/data" >/dev/null
    MK=(make -s -f pipelines/sft.mk BIN="$SWIFT_BIN" MODEL=tests/fixtures/eval/llama
        DATA="$W/data/train.jsonl" EVAL="$W/data/test.jsonl" OUT="$W/sft" STEPS=3)
}

@test "sft.mk: end to end, then nothing to do, then only what a changed input affects" {
    run "${MK[@]}"
    [ "$status" -eq 0 ]
    for f in shards/index.json eval-before.json run/checkpoint-3/config.json eval-after.json \
        model.q8_0.gguf report.txt; do
        [ -s "$W/sft/$f" ] || { echo "missing $f"; false; }
    done
    run "${MK[@]}" -n
    [ "$status" -eq 0 ]
    [ -z "$output" ] # nothing would run
    touch "$W/data/train.jsonl"
    run "${MK[@]}" -n
    [[ $output == *swift-preprocess* ]]
    [[ $output == *swift-train* ]]
    [[ $output != *"swift-eval tests/fixtures/eval/llama"* ]] # "before" does not depend on data
}

@test "sft.mk: a failing stage leaves no target behind" {
    run "${MK[@]}" EVAL="$W/missing.jsonl"
    [ "$status" -ne 0 ]
    [ ! -e "$W/sft/eval-before.json" ]
    [ ! -e "$W/sft/eval-after.json" ]
}

@test "dpo.sh: SFT then DPO on a slice of the demo data, preference eval before and after" {
    if [ ! -f "$SHARED/data/datasets/llama-factory-demo/dpo_en_demo.json" ]; then
        [ "${CI:-}" != true ] || { echo "missing $SHARED/data/datasets/llama-factory-demo" >&2; false; }
        skip "shared data missing: $SHARED/data/datasets/llama-factory-demo"
    fi
    run env SWIFT_BIN="$SWIFT_BIN" SHARED="$SHARED" DPO_DIR="$W/dpo" ROWS=40 SFT_STEPS=4 \
        DPO_STEPS=6 GATE=0 sh pipelines/dpo.sh
    echo "$output"
    [ "$status" -eq 0 ]
    for f in sft/checkpoint-4/config.json pairs/index.json pairs/val/index.json \
        dpo/checkpoint-6/adapter_model.safetensors pref-before.json pref-after.json; do
        [ -s "$W/dpo/$f" ] || { echo "missing $f"; false; }
    done
    [ "$(jq -r .kind "$W/dpo/pairs/val/index.json")" = pairs ]
    # before: the SFT model against itself; after: the adapters moved the held-out rewards
    [ "$(jq -c '.metrics | [.pairs, .accuracy, .margin]' "$W/dpo/pref-before.json")" = '[4,0,0]' ]
    jq -e '.task == "pref" and .metrics.pairs == 4 and .metrics.margin != 0 and
        .config.ref_model == "adapters off"' "$W/dpo/pref-after.json"
    [[ $output == *"before  {\"pairs\":4,\"accuracy\":0,\"margin\":0}"* ]]
}

@test "grpo.sh: GRPO on a slice of GSM8K: prompts, three rewards (one a program), the analyzer, gsm8k eval" {
    if [ ! -f "$SHARED/data/datasets/gsm8k/train.jsonl" ]; then
        [ "${CI:-}" != true ] || { echo "missing $SHARED/data/datasets/gsm8k" >&2; false; }
        skip "shared data missing: $SHARED/data/datasets/gsm8k"
    fi
    run env SWIFT_BIN="$SWIFT_BIN" SHARED="$SHARED" GRPO_DIR="$W/grpo" ROWS=40 EVAL_ROWS=4 \
        STEPS=3 sh pipelines/grpo.sh
    echo "$output"
    [ "$status" -eq 0 ]
    for f in prompts/index.json run/checkpoint-3/adapter_model.safetensors trace.json \
        report.html eval-before.json eval-after.json run/completions.jsonl; do
        [ -s "$W/grpo/$f" ] || { echo "missing $f"; false; }
    done
    [ "$(jq -r .kind "$W/grpo/prompts/index.json")" = prompts ]
    # the answers reached the accuracy reward; the program and the length penalty were scored
    jq -s -e 'map(select(.reward != null)) | length == 2 and all(."rewards/accuracy/mean" != null
        and ."rewards/cmd/mean" != null and ."rewards/length/mean" != null)' \
        "$W/grpo/run/logging.jsonl"
    [[ $output == *"RL steps (3 of 3 steps generate)"* ]]
    jq -e '.task == "gsm8k" and .metrics.accuracy != null' "$W/grpo/eval-after.json"
}

@test "serve.sh: train, export a GGUF, serve it, eval through the server: the local answers" {
    run env SWIFT_BIN="$SWIFT_BIN" SERVE_DIR="$W/serve" STEPS=6 DTYPE=f32 GATE=0 CONCURRENCY=4 \
        OMP_NUM_THREADS=2 sh pipelines/serve.sh
    echo "$output"
    [ "$status" -eq 0 ]
    for f in shards/index.json run/checkpoint-6/config.json model.f32.gguf eval-before.json \
        eval-served.json eval-after.json served.jsonl local.jsonl; do
        [ -s "$W/serve/$f" ] || { echo "missing $f"; false; }
    done
    # an f32 GGUF holds the checkpoint's weights: the served greedy answers are the local ones
    diff "$W/serve/local.jsonl" "$W/serve/served.jsonl"
    jq -e '.n == 100 and (.config.eval_url | startswith("http://127.0.0.1:")) and .model == "tiny"' \
        "$W/serve/eval-served.json"
    [[ $output == *"100 of 100 answers identical"* ]]
    # SIGTERM: exit 0, no cache block left, the server's requests in its trace
    [ "$(cat "$W/serve/server.rc")" = 0 ]
    grep -q " 0 KV blocks in use" "$W/serve/server.log"
    ! kill -0 "$(cat "$W/serve/server.pid")" 2>/dev/null
    [ "$(cat "$W"/serve/trace/*.jsonl | jq -s '[.[] | select(.name == "http_request" and .args.path == "/v1/chat/completions")] | length')" -eq 100 ]
}

@test "serve.sh: a stage failing while the server runs still stops it with SIGTERM (exit 0)" {
    # one question longer than the model's context: the local eval truncates it, the server
    # refuses it (400), swift-eval --eval-url exits 1, the script stops the server and fails
    python3 -c 'import json; print(json.dumps({"messages": [{"role": "user", "content": "the long question " * 200}, {"role": "assistant", "content": "x"}]}))' >"$W/long.jsonl"
    run env SWIFT_BIN="$SWIFT_BIN" SERVE_DIR="$W/serve" STEPS=2 DTYPE=f32 GATE=0 \
        EVAL_DATA="$W/long.jsonl" OMP_NUM_THREADS=2 sh pipelines/serve.sh
    echo "$output"
    [ "$status" -eq 1 ]
    [[ $output == *"long.jsonl:1: HTTP 400: This model's maximum context length is"* ]]
    [ "$(cat "$W/serve/server.rc")" = 0 ]
    grep -q "SIGTERM: stopping" "$W/serve/server.log"
    grep -q " 0 KV blocks in use" "$W/serve/server.log"
    ! kill -0 "$(cat "$W/serve/server.pid")" 2>/dev/null
    [ ! -e "$W/serve/eval-served.json" ]
}
