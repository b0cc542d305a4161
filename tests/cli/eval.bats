#!/usr/bin/env bats
# swift-eval: the record on stdout, --output, bad input, the regression gate, adapters, traces,
# and a tiny model fine-tuned by swift-train that gets better on a synthetic task.

bats_require_minimum_version 1.5.0

setup() {
    ROOT=$BATS_TEST_DIRNAME/../..
    FIX=$ROOT/tests/fixtures/eval
    M=$FIX/llama
    SYN=$FIX/synth
    T=$BATS_TEST_TMPDIR
    EVAL=$SWIFT_BIN/swift-eval
    export OMP_NUM_THREADS=2
}

need_shared() {
    if [ ! -d "$SHARED/data/datasets/$1" ]; then
        [ "${CI:-}" != true ] || { echo "missing $SHARED/data/datasets/$1" >&2; return 1; }
        skip "shared data missing: $SHARED/data/datasets/$1"
    fi
}

@test "mc: one versioned JSON record on stdout, the same in --output, a table on stderr" {
    run --separate-stderr "$EVAL" "$M" --task mc --dataset "$SYN/mc.jsonl" -o "$T/rec.json"
    [ "$status" -eq 0 ]
    [ "${#lines[@]}" -eq 1 ]
    [ "$(jq -r '[.schema_version, .task, .n, .adapters] | @csv' <<<"$output")" = '1,"mc",16,' ]
    [ "$(jq -r '.metrics | keys | join(",")' <<<"$output")" = "accuracy,accuracy_norm" ]
    jq -e '.tokens > 0 and .tokens_per_s > 0 and .time_s > 0' <<<"$output"
    [ "$(cat "$T/rec.json")" = "$output" ]
    [[ $stderr == *"task                         mc"* ]]
    [[ $stderr == *"accuracy "* ]]
    run "$EVAL" "$M" --task mc --dataset "$SYN/mc.jsonl" --quiet --limit 5 --batch-size 3
    [ "$status" -eq 0 ]
    [ "$(jq .n <<<"$output")" -eq 5 ]
}

@test "usage errors exit 2" {
    run "$EVAL" "$M" --task bleu --dataset x
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "swift-eval: unknown task 'bleu' (loss, ppl, mc, mmlu, gsm8k, exact, pref, toolcall)" ]
    run "$EVAL" --task mc --dataset x
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "swift-eval: missing MODEL_DIR" ]
    run "$EVAL" "$M" --dataset x
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "swift-eval: --task is required" ]
    run "$EVAL" "$M" --task mc --dataset x --batch-size 0
    [ "$status" -eq 2 ]
    [[ ${lines[0]} == "swift-eval: invalid --batch-size '0'"* ]]
}

@test "bad rows: file:line errors, exit 1, no record" {
    printf '{"question":"q","choices":["a","b"],"answer":0}\n{"question":"q","choices":["a","b"]}\n' >"$T/a.jsonl"
    run --separate-stderr "$EVAL" "$M" --task mc --dataset "$T/a.jsonl" -o "$T/out.json"
    [ "$status" -eq 1 ]
    [ "$output" = "" ]
    [ "$stderr" = "swift-eval:$T/a.jsonl:2: row without an answer" ]
    [ ! -e "$T/out.json" ]
    printf '{"question":"q","choices":["a","b"],"answer":2}\n' >"$T/b.jsonl"
    run "$EVAL" "$M" --task mc --dataset "$T/b.jsonl"
    [ "$status" -eq 1 ]
    [ "$output" = "swift-eval:$T/b.jsonl:1: answer 2 out of range (2 choices)" ]
    printf 'question,choice0,choice1,choice2,choice3,answer\nq,a,b,c,d,7\n' >"$T/x_test.csv"
    run "$EVAL" "$M" --task mmlu --dataset "$T/x_test.csv"
    [ "$status" -eq 1 ]
    [ "$output" = "swift-eval:$T/x_test.csv:2: answer '7' out of range (0-3 or A-D)" ]
}

@test "adapters whose base shapes do not match the model are refused with the tensor named" {
    run "$EVAL" "$M" --adapters "$ROOT/tests/fixtures/model/llama/adapter" --task loss \
        --dataset "$SYN/train"
    [ "$status" -eq 1 ]
    [[ $output == "swift-eval:$ROOT/tests/fixtures/model/llama/adapter/adapter_model.safetensors: tensor 'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight' has shape [4, 32], expected [4, 64]" ]]
}

@test "adapters on the fly and merged give the same loss, different from the base model" {
    run "$EVAL" "$M" --task loss --dataset "$SYN/train" --quiet
    [ "$status" -eq 0 ]
    base=$(jq .metrics.loss <<<"$output")
    run "$EVAL" "$M" --adapters "$M/adapter" --task loss --dataset "$SYN/train" --quiet
    [ "$status" -eq 0 ]
    fly=$(jq .metrics.loss <<<"$output")
    [ "$(jq -r .adapters <<<"$output")" = "$M/adapter" ]
    run "$EVAL" "$M" --adapters "$M/adapter" --merge-adapters --task loss --dataset "$SYN/train" --quiet
    [ "$status" -eq 0 ]
    merged=$(jq .metrics.loss <<<"$output")
    awk -v a="$fly" -v b="$merged" -v c="$base" 'BEGIN { d = a - b; if (d < 0) d = -d;
        e = a - c; if (e < 0) e = -e; exit !(d < 1e-4 && e > 0.01) }'
}

@test "regression gate: exit 1 naming the metric; a non-regression passes" {
    run "$EVAL" "$M" --task mc --dataset "$SYN/mc.jsonl" --quiet -o "$T/base.json"
    [ "$status" -eq 0 ]
    run "$EVAL" "$M" --task mc --dataset "$SYN/mc.jsonl" --quiet --baseline "$T/base.json" --max-drop 0.01
    [ "$status" -eq 0 ]
    jq -c '.metrics.accuracy = 1.0' "$T/base.json" >"$T/better.json"
    acc=$(jq .metrics.accuracy "$T/base.json")
    run --separate-stderr "$EVAL" "$M" --task mc --dataset "$SYN/mc.jsonl" --quiet --baseline "$T/better.json" --max-drop 0.01
    [ "$status" -eq 1 ]
    [ "$(jq .task <<<"$output")" = '"mc"' ] # the record is still printed
    d=$(awk -v a="$acc" 'BEGIN { printf "%+.6g", a - 1 }')
    [ "$stderr" = "swift-eval: regression: accuracy $acc vs baseline 1, delta $d (max drop 0.01)" ]
    # the comparison is in the record
    [ "$(jq -c '.baseline | [.file, .regressions, .metrics.accuracy.baseline, .metrics.accuracy.regression, .metrics.accuracy_norm.regression]' <<<"$output")" = "[\"$T/better.json\",1,1,true,false]" ]
    jq -c '.task = "gsm8k"' "$T/base.json" >"$T/other.json"
    run --separate-stderr "$EVAL" "$M" --task mc --dataset "$SYN/mc.jsonl" --quiet --baseline "$T/other.json"
    [ "$status" -eq 1 ]
    [ "$stderr" = "swift-eval:$T/other.json:1: baseline is for task 'gsm8k', not 'mc'" ]
}

@test "regression gate: the comparison is printed on a pass, one line per metric, and recorded" {
    run "$EVAL" "$M" --task mc --dataset "$SYN/mc.jsonl" --quiet -o "$T/base.json"
    [ "$status" -eq 0 ]
    acc=$(jq .metrics.accuracy "$T/base.json")
    accn=$(jq .metrics.accuracy_norm "$T/base.json")
    run --separate-stderr "$EVAL" "$M" --task mc --dataset "$SYN/mc.jsonl" --baseline "$T/base.json"
    [ "$status" -eq 0 ]
    [[ $stderr == *"swift-eval: ok: accuracy $acc vs baseline $acc, delta +0"* ]]
    [[ $stderr == *"swift-eval: ok: accuracy_norm $accn vs baseline $accn, delta +0"* ]]
    [ "$(grep -c '^swift-eval: ok: ' <<<"$stderr")" -eq 2 ]
    [ "$(jq -c '.baseline | [.file, .line, .max_drop, .regressions, .metrics.accuracy.delta]' <<<"$output")" = "[\"$T/base.json\",1,0.01,0,0]" ]
    # the same file named by another path is the same dataset
    cd "$SYN"
    run "$EVAL" "$M" --task mc --dataset ./mc.jsonl --quiet --baseline "$T/base.json"
    [ "$status" -eq 0 ]
}

@test "regression gate: a baseline of another dataset is refused; counts such as tokens are not gated" {
    run "$EVAL" "$M" --task loss --dataset "$SYN/train" --quiet -o "$T/loss.json"
    [ "$status" -eq 0 ]
    printf '{"question":"q","choices":["x","y"],"answer":1}\n' >"$T/one.jsonl"
    run "$EVAL" "$M" --task mc --dataset "$T/one.jsonl" --quiet -o "$T/one.json"
    [ "$status" -eq 0 ]
    # another dataset: refused before anything runs, nothing written
    run --separate-stderr "$EVAL" "$M" --task mc --dataset "$SYN/mc.jsonl" --quiet \
        --baseline "$T/one.json" -o "$T/out.json"
    [ "$status" -eq 1 ]
    [ "$output" = "" ]
    [ "$stderr" = "swift-eval:$T/one.json:1: baseline is for dataset '$T/one.jsonl', not '$SYN/mc.jsonl' (compare runs on the same data)" ]
    [ ! -e "$T/out.json" ]
    cat "$T/loss.json" "$T/one.json" >"$T/both.jsonl"
    run --separate-stderr "$EVAL" "$M" --task mc --dataset "$SYN/mc.jsonl" --quiet --baseline "$T/both.jsonl"
    [ "$status" -eq 1 ]
    [ "$stderr" = "swift-eval:$T/both.jsonl: no baseline record for task 'mc' on dataset '$SYN/mc.jsonl' among its 2 records" ]
    # the token count of the baseline was 8 times larger: not a regression, not compared
    jq -c '.metrics.tokens *= 8' "$T/loss.json" >"$T/more-tokens.json"
    run --separate-stderr "$EVAL" "$M" --task loss --dataset "$SYN/train" --quiet --baseline "$T/more-tokens.json"
    [ "$status" -eq 0 ]
    [ "$stderr" = "" ]
    [ "$(jq -c '.baseline.metrics | keys' <<<"$output")" = '["loss","ppl","token_acc"]' ]
}

@test "fine-tuned by swift-train: loss, multiple choice and exact match improve; the gate sees it" {
    [ -x "$SWIFT_BIN/swift-train" ] || skip "swift-train not built"
    run "$EVAL" "$M" --task mc --dataset "$SYN/mc.jsonl" --quiet -o "$T/before-mc.json"
    [ "$status" -eq 0 ]
    run "$EVAL" "$M" --task exact --dataset "$SYN/exact.jsonl" --max-new-tokens 8 --quiet -o "$T/before-exact.json"
    [ "$status" -eq 0 ]
    run "$EVAL" "$M" --task loss --dataset "$SYN/train" --quiet -o "$T/before-loss.json"
    [ "$status" -eq 0 ]
    run "$SWIFT_BIN/swift-train" --model "$M" -o "$T/run" --tuner full --learning-rate 1e-2 \
        --max-steps 25 --per-device-train-batch-size 16 --save-steps 25 \
        --lr-scheduler-type constant -j 2 "$SYN/train"
    [ "$status" -eq 0 ]
    C=$T/run/checkpoint-25
    run "$EVAL" "$C" --task mc --dataset "$SYN/mc.jsonl" --quiet -o "$T/after-mc.json"
    [ "$status" -eq 0 ]
    run "$EVAL" "$C" --task exact --dataset "$SYN/exact.jsonl" --max-new-tokens 8 --quiet -o "$T/after-exact.json"
    [ "$status" -eq 0 ]
    run "$EVAL" "$C" --task loss --dataset "$SYN/train" --quiet -o "$T/after-loss.json"
    [ "$status" -eq 0 ]
    for t in mc exact loss; do
        echo "before $(cat "$T/before-$t.json")"
        echo "after  $(cat "$T/after-$t.json")"
    done
    jq -e -n --slurpfile b "$T/before-mc.json" --slurpfile a "$T/after-mc.json" \
        '$a[0].metrics.accuracy >= 0.75 and $b[0].metrics.accuracy <= 0.25'
    jq -e -n --slurpfile b "$T/before-exact.json" --slurpfile a "$T/after-exact.json" \
        '$a[0].metrics.accuracy >= 0.75 and $b[0].metrics.accuracy == 0'
    jq -e -n --slurpfile b "$T/before-loss.json" --slurpfile a "$T/after-loss.json" \
        '$a[0].metrics.loss < 0.5 * $b[0].metrics.loss'
    # the fine-tuned model passes the gate against the base; the base fails against it
    run "$EVAL" "$C" --task mc --dataset "$SYN/mc.jsonl" --quiet --baseline "$T/before-mc.json"
    [ "$status" -eq 0 ]
    run --separate-stderr "$EVAL" "$M" --task loss --dataset "$SYN/train" --quiet --baseline "$T/after-loss.json"
    [ "$status" -eq 1 ]
    [[ $stderr == "swift-eval: regression: loss "*" (max drop 0.01 relative)"* ]]
}

@test "generation: sampled output depends on the seed, not on the batch size" {
    for b in 1 5; do
        run "$EVAL" "$M" --task exact --dataset "$SYN/exact.jsonl" --limit 5 --max-new-tokens 6 \
            --temperature 1.0 --top-p 0.9 --seed 3 --batch-size $b --quiet
        [ "$status" -eq 0 ]
        jq -e '.prefill_tokens > 0 and .decode_tokens > 0 and .decode_tokens_per_s > 0' <<<"$output"
        jq -c '[.metrics, .decode_tokens]' <<<"$output" >"$T/s$b"
    done
    [ "$(cat "$T/s1")" = "$(cat "$T/s5")" ]
}

@test "trace: eval spans per batch, prefill and decode, tokens/s counters" {
    run "$EVAL" "$M" --task exact --dataset "$SYN/exact.jsonl" --limit 4 --batch-size 2 \
        --max-new-tokens 4 --quiet --trace "$T/e.trace.jsonl"
    [ "$status" -eq 0 ]
    [ "$(jq -r 'select(.ph == "X" and .cat == "eval") | .name' "$T/e.trace.jsonl" | sort | uniq -c | awk '{print $2 "=" $1}' | paste -sd,)" = "decode=2,generate=2,prefill=2" ]
    jq -e -s 'map(select(.ph == "C" and .name == "tokens/s")) | length >= 2' "$T/e.trace.jsonl"
    run "$EVAL" "$M" --task mc --dataset "$SYN/mc.jsonl" --batch-size 8 --quiet --trace "$T/m.trace.jsonl"
    [ "$status" -eq 0 ]
    [ "$(jq -r 'select(.ph == "X" and .cat == "eval") | .name' "$T/m.trace.jsonl" | sort | uniq -c | awk '{print $2 "=" $1}')" = "forward=2" ]
}

@test "mmlu (shared data): k-shot prompts from the dev split, per-subject breakdown" {
    need_shared mmlu
    run "$EVAL" "$M" --task mmlu --dataset "$SHARED/data/datasets/mmlu" --limit 6 --few-shot 2 --quiet
    [ "$status" -eq 0 ]
    [ "$(jq -c '[.n, (.subjects | keys), .subjects.abstract_algebra.n]' <<<"$output")" = '[6,["abstract_algebra"],6]' ]
    jq -e '.metrics.accuracy >= 0 and .metrics.accuracy <= 1 and .metrics.accuracy_macro == .metrics.accuracy' <<<"$output"
    a=$(jq -c '[.metrics, .subjects, .tokens]' <<<"$output")
    run "$EVAL" "$M" --task mmlu --dataset "$SHARED/data/datasets/mmlu" --limit 6 --few-shot 2 --batch-size 1 --quiet
    [ "$status" -eq 0 ]
    [ "$(jq -c '[.metrics, .subjects, .tokens]' <<<"$output")" = "$a" ]
}

@test "gsm8k (shared data): generation with number extraction" {
    need_shared gsm8k
    run "$EVAL" "$M" --task gsm8k --dataset "$SHARED/data/datasets/gsm8k/test.jsonl" --limit 2 \
        --few-shot 1 --max-new-tokens 4 --quiet
    [ "$status" -eq 0 ]
    [ "$(jq -c '[.task, .n, .metrics.accuracy, .config.few_shot]' <<<"$output")" = '["gsm8k",2,0,1]' ]
    a=$(jq -c '[.prefill_tokens, .decode_tokens]' <<<"$output")
    # one sequence per batch: the cache grows with the longer second prompt; same tokens
    run "$EVAL" "$M" --task gsm8k --dataset "$SHARED/data/datasets/gsm8k/test.jsonl" --limit 2 \
        --few-shot 1 --max-new-tokens 4 --batch-size 1 --quiet
    [ "$status" -eq 0 ]
    [ "$(jq -c '[.prefill_tokens, .decode_tokens]' <<<"$output")" = "$a" ]
}

@test "loss on raw JSONL through the preprocess code equals loss on swift-preprocess's shards" {
    [ -x "$SWIFT_BIN/swift-preprocess" ] || skip "swift-preprocess not built"
    printf '%s\n' '{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"hello there"}]}' \
        '{"messages":[{"role":"user","content":"What colour is the cat?"},{"role":"assistant","content":"red"}]}' >"$T/c.jsonl"
    run "$SWIFT_BIN/swift-preprocess" --tokenizer "$M" --template chatml --packing binpack \
        --max-length 64 -o "$T/sh" "$T/c.jsonl"
    [ "$status" -eq 0 ]
    run "$EVAL" "$M" --task loss --dataset "$T/sh" --quiet
    [ "$status" -eq 0 ]
    a=$(jq -c '[.n, .metrics]' <<<"$output")
    run "$EVAL" "$M" --task loss --dataset "$T/c.jsonl" --template chatml --quiet
    [ "$status" -eq 0 ]
    b=$(jq -c '[.n, .metrics]' <<<"$output")
    [ "$a" = "$b" ]
    [ "$(jq .metrics.tokens <<<"$output")" -eq 16 ]
    run "$EVAL" "$M" --task ppl --dataset "$T/c.jsonl" --template chatml --quiet
    [ "$status" -eq 0 ]
    [ "$(jq -r '.metrics | keys_unsorted | join(",")' <<<"$output")" = "ppl,loss,token_acc,tokens" ]
    printf '{"messages":[{"role":"assistant","content":"x"}]}\n' >"$T/bad.jsonl"
    run "$EVAL" "$M" --task loss --dataset "$T/bad.jsonl" --template chatml --quiet
    [ "$status" -eq 1 ]
    [ "$output" = "swift-eval:$T/bad.jsonl:1: message 1: roles out of order (assistant before any user message)" ]
}

@test "loss on shards made with another tokenizer is refused, as swift-train refuses them" {
    [ -x "$SWIFT_BIN/swift-preprocess" ] || skip "swift-preprocess not built"
    [ -d "$SHARED/data/tokenizers/qwen3" ] || skip "shared data missing under $SHARED"
    TOK=$SHARED/data/tokenizers
    # shards made with Qwen3's tokenizer; a model directory whose tokenizer is Llama-3's
    run "$SWIFT_BIN/swift-preprocess" --tokenizer "$TOK/qwen3" --template chatml -o "$T/q-shards" \
        "$SYN/exact.jsonl"
    [ "$status" -eq 0 ]
    mkdir "$T/m"
    ln -s "$(cd "$M" && pwd)"/{config.json,model.safetensors} "$T/m/"
    cp "$TOK/llama3/tokenizer.json" "$TOK/llama3/tokenizer_config.json" "$T/m/"
    qsha=$(sha256sum "$TOK/qwen3/tokenizer.json" | cut -c1-12)
    lsha=$(sha256sum "$TOK/llama3/tokenizer.json" | cut -c1-12)
    for task in loss ppl; do
        run --separate-stderr "$EVAL" "$T/m" --task $task --dataset "$T/q-shards" -o "$T/r.json"
        [ "$status" -eq 1 ]
        [ "$output" = "" ]
        [ "$stderr" = "swift-eval: $T/q-shards/index.json: shards were made with another tokenizer (sha256 $qsha…, the model's tokenizer.json is $lsha…)" ]
        [ ! -e "$T/r.json" ]
    done
    # the same message as swift-train's
    run --separate-stderr "$SWIFT_BIN/swift-train" --model "$T/m" -o "$T/run" --max-steps 1 \
        --max-length 128 "$T/q-shards"
    [ "$status" -eq 1 ]
    [[ "$stderr" == *"swift-train: $T/q-shards/index.json: shards were made with another tokenizer (sha256 $qsha…, the model's tokenizer.json is $lsha…)"* ]]
    # shards of the model's own tokenizer still pass
    run "$SWIFT_BIN/swift-preprocess" --tokenizer "$M" --template chatml -o "$T/m-shards" "$SYN/exact.jsonl"
    [ "$status" -eq 0 ]
    run "$EVAL" "$M" --task loss --dataset "$T/m-shards" --quiet
    [ "$status" -eq 0 ]
}

@test "templates: --template applies to prompts and is recorded; an unknown one is a usage error" {
    run "$EVAL" "$M" --task exact --dataset "$SYN/exact.jsonl" --limit 3 --template chatml \
        --max-new-tokens 5 --quiet
    [ "$status" -eq 0 ]
    [ "$(jq -r .config.template <<<"$output")" = chatml ]
    run "$EVAL" "$M" --task mc --dataset "$SYN/mc.jsonl" --template bogus
    [ "$status" -eq 2 ]
    [ "${lines[0]}" = "swift-eval: unknown template 'bogus' (none, chatml, qwen, qwen2_5, qwen3, llama3, llama3_1, llama3_2, default, generation, qwen2_vl, qwen2_5_vl)" ]
}

@test "toolcall: every call turn of a glaive file is an item, scored on names and arguments" {
    cat >"$T/tools.json" <<'EOF'
[{"conversations": [{"from": "human", "value": "Weather in Paris?"}, {"from": "function_call", "value": "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"}, {"from": "observation", "value": "{\"temp\": 21}"}, {"from": "gpt", "value": "21 degrees."}, {"from": "human", "value": "And Rome?"}, {"from": "function_call", "value": "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome\"}}"}, {"from": "observation", "value": "{\"temp\": 25}"}, {"from": "gpt", "value": "25."}], "tools": "[{\"name\": \"get_weather\", \"description\": \"Weather\", \"parameters\": {}}]"},
 {"messages": [{"role": "user", "content": "Time?"}, {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "now", "arguments": "{}"}}]}], "tools": [{"type": "function", "function": {"name": "now"}}]}]
EOF
    run --separate-stderr "$EVAL" "$M" --task toolcall --dataset "$T/tools.json" --max-new-tokens 8 --quiet
    [ "$status" -eq 0 ]
    [ "$(jq -r '[.task, .n, .config.template, .config.agent_template] | @csv' <<<"$output")" = '"toolcall",3,"chatml","hermes"' ]
    [ "$(jq -r '.metrics | keys | join(",")' <<<"$output")" = "accuracy,arguments_accuracy,name_accuracy" ]
    jq -e '.metrics.name_accuracy >= .metrics.arguments_accuracy and .decode_tokens > 0' <<<"$output"
    run "$EVAL" "$M" --task toolcall --agent_template llama3 --dataset "$T/tools.json" --max-new-tokens 4 --limit 1 --quiet
    [ "$status" -eq 0 ]
    [ "$(jq -r '[.n, .config.agent_template] | @csv' <<<"$output")" = '1,"llama3"' ]
    # no call turn to evaluate; an unknown agent template; few-shot
    run "$EVAL" "$M" --task toolcall --dataset "$SYN/exact.jsonl" --quiet
    [ "$status" -eq 1 ]
    [[ $output == *"no assistant turn with tool calls to evaluate"* ]]
    run "$EVAL" "$M" --task toolcall --dataset "$T/tools.json" --agent-template nope
    [ "$status" -eq 2 ]
    [[ ${lines[0]} == "swift-eval: unknown agent template 'nope'"* ]]
    run "$EVAL" "$M" --task toolcall --dataset "$T/tools.json" --few-shot 1
    [ "$status" -eq 2 ]
}

@test "several datasets: one record each; the gate matches baseline records by dataset" {
    printf '{"question":"q","choices":["x","y"],"answer":1}\n' >"$T/one.jsonl"
    run "$EVAL" "$M" --task mc --dataset "$SYN/mc.jsonl" --dataset "$T/one.jsonl" --quiet -o "$T/two.jsonl"
    [ "$status" -eq 0 ]
    [ "${#lines[@]}" -eq 2 ]
    [ "$(jq -r .dataset <<<"${lines[1]}")" = "$T/one.jsonl" ]
    [ "$(cat "$T/two.jsonl")" = "$output" ]
    # a baseline where only the first dataset scored better
    jq -c 'if .n == 16 then .metrics.accuracy = 1 else . end' "$T/two.jsonl" >"$T/b.jsonl"
    run --separate-stderr "$EVAL" "$M" --task mc --dataset "$T/one.jsonl" --quiet --baseline "$T/b.jsonl"
    [ "$status" -eq 0 ]
    run --separate-stderr "$EVAL" "$M" --task mc --dataset "$SYN/mc.jsonl" --dataset "$T/one.jsonl" --quiet --baseline "$T/b.jsonl"
    [ "$status" -eq 1 ]
    [ "${#lines[@]}" -eq 2 ]
    [[ $stderr == "swift-eval: regression: accuracy "*" vs baseline 1, delta -"*" (max drop 0.01)" ]]
}

@test "chat fine-tune: with --template the question is the user turn, as in training" {
    [ -x "$SWIFT_BIN/swift-train" ] || skip "swift-train not built"
    jq -c '{messages: [{role: "user", content: .question}, {role: "assistant", content: .answer}]}' \
        "$SYN/exact.jsonl" >"$T/chat.jsonl"
    run "$SWIFT_BIN/swift-preprocess" --tokenizer "$M" --template chatml --max-length 64 \
        -o "$T/chat-shards" "$T/chat.jsonl"
    [ "$status" -eq 0 ]
    run "$SWIFT_BIN/swift-train" --model "$M" -o "$T/chat-run" --tuner full --learning-rate 1e-2 \
        --max-steps 30 --per-device-train-batch-size 16 --save-steps 30 \
        --lr-scheduler-type constant -j 2 "$T/chat-shards"
    [ "$status" -eq 0 ]
    run "$EVAL" "$T/chat-run/checkpoint-30" --task exact --dataset "$T/chat.jsonl" \
        --template chatml --max-new-tokens 8 --quiet
    [ "$status" -eq 0 ]
    echo "$output"
    jq -e '.metrics.accuracy >= 0.75' <<<"$output"
}
