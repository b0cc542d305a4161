#!/usr/bin/env bats
bats_require_minimum_version 1.5.0
# Agent templates: swift-preprocess --agent-template renders tools, calls and results per format
# with calls trained and results never; swift-infer takes the same names.

setup() {
    P="$SWIFT_BIN/swift-preprocess"
    DATA="$SHARED/data"
    if [ ! -d "$DATA/tokenizers/qwen3" ]; then
        [ "${CI:-}" = true ] && { echo "shared data missing under $SHARED" >&2; return 1; }
        skip "shared data missing under $SHARED"
    fi
    Q="$DATA/tokenizers/qwen3"
    L="$DATA/tokenizers/llama3-instruct"
    TMP="$BATS_TEST_TMPDIR"
    # a glaive-style ShareGPT row: a call, its observation, the final answer
    cat >"$TMP/glaive.jsonl" <<'EOF'
{"conversations": [{"from": "human", "value": "Weather in Paris?"}, {"from": "function_call", "value": "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}"}, {"from": "observation", "value": "{\"temp\": \"OBS21\"}"}, {"from": "gpt", "value": "It is 21 degrees."}], "tools": "[{\"name\": \"get_weather\", \"description\": \"Weather for a city\", \"parameters\": {\"type\": \"object\", \"properties\": {\"city\": {\"type\": \"string\"}}}}]"}
EOF
}

# The rendered sample's trained tokens, decoded (one JSON string).
trained() {
    python3 -c 'import json,sys; r=json.load(sys.stdin); print(json.dumps([i for i,m in zip(r["ids"],r["mask"]) if m]))' |
        "$P" --tokenizer "$1" --decode
}

@test "--agent-template llama3 under llama3_1: Llama 3.1's official format, the call trained, the result not" {
    run "$P" --tokenizer "$L" --template llama3_1 --agent-template llama3 --render "$TMP/glaive.jsonl"
    [ "$status" -eq 0 ]
    [[ $output == *'Environment: ipython\nCutting Knowledge Date: December 2023'* ]]
    [[ $output == *'<|start_header_id|>ipython<|end_header_id|>'* ]]
    [[ $output == *'{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\"}}<|eot_id|>'* ]]
    echo "$output" >"$TMP/r.json"
    run trained "$L" <"$TMP/r.json"
    [ "$status" -eq 0 ]
    [[ $output == *'get_weather'* ]]
    [[ $output == *'It is 21 degrees.'* ]]
    [[ $output != *OBS21* ]]
    [[ $output != *'Weather in Paris'* ]]
}

@test "the default is the template's own format; ms-swift's --agent_template spelling" {
    run "$P" --tokenizer "$Q" --render "$TMP/glaive.jsonl"
    [ "$status" -eq 0 ]
    [[ $output == *'<tool_call>\n{\"name\": \"get_weather\"'* ]]
    [[ $output == *'<tool_response>\n{\"temp\": \"OBS21\"}\n</tool_response>'* ]]
    local native="$output"
    run "$P" --tokenizer "$Q" --agent_template hermes --render "$TMP/glaive.jsonl"
    [ "$status" -eq 0 ]
    [ "$output" = "$native" ]
    # Llama 3.1's tokenizer_config names llama3_1; the default there is the llama3 format
    run "$P" --tokenizer "$L" --template llama3 --render "$TMP/glaive.jsonl"
    [ "$status" -eq 0 ]
    [[ $output == *'ipython<|end_header_id|>'* ]]
}

@test "react_en and glm4 on a ChatML template: calls in the assistant text, results untrained" {
    for a in react_en react_zh glm4 llama3; do
        run "$P" --tokenizer "$Q" --template qwen2_5 --agent-template "$a" --render "$TMP/glaive.jsonl"
        [ "$status" -eq 0 ]
        echo "$output" >"$TMP/r.json"
        run trained "$Q" <"$TMP/r.json"
        [ "$status" -eq 0 ]
        [[ $output == *'get_weather'* ]]
        [[ $output != *OBS21* ]]
    done
    run "$P" --tokenizer "$Q" --template qwen2_5 --agent-template react_en --render "$TMP/glaive.jsonl"
    [[ $output == *'Action: get_weather\nAction Input: {\"city\": \"Paris\"}\nObservation:<|im_end|>'* ]]
    [[ $output == *'should be one of [get_weather]'* ]]
}

@test "an unknown agent template is a usage error in swift-preprocess and swift-infer" {
    run "$P" --tokenizer "$Q" --agent-template nope --render "$TMP/glaive.jsonl"
    [ "$status" -eq 2 ]
    [[ ${lines[0]} == "swift-preprocess: unknown agent template 'nope' (hermes, llama3,"* ]]
    run "$SWIFT_BIN/swift-infer" "$BATS_TEST_TMPDIR" --agent-template nope
    [ "$status" -eq 2 ]
    [[ ${lines[0]} == "swift-infer: unknown agent template 'nope'"* ]]
}
