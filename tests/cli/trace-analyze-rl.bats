#!/usr/bin/env bats
# swift-trace-analyze on RL (GRPO) traces: the "rl" view (per-step generate, prefill, decode,
# reward per function, ref_logps, old_logps, train ...; decode tokens/s, rows per generate) in
# JSON, text, Markdown and HTML, and the rules generation_bound, reward_stall and
# ref_logps_cost. The traces are hand-made in our schema (tests/fixtures/traces/make_grpo.py,
# which prints the sums the expected numbers below come from): grpo-gen (generation-bound),
# grpo-reward (a slow --reward-cmd program, a costly reference), grpo-mu2 (--num-iterations 2).
# An SFT trace has no "rl" and no RL rule.

setup() {
    A="$SWIFT_BIN/swift-trace-analyze"
    W="$BATS_TEST_TMPDIR"
    F="$BATS_TEST_DIRNAME/../fixtures/traces"
    CHECK="python3 $BATS_TEST_DIRNAME/html_check.py"
}

@test "rl view of a generation-bound run: per-step means to the µs, decode tokens/s, rows per generate" {
    run "$A" --format json -o "$W/r.json" "$F/grpo-gen.trace.jsonl"
    [ "$status" -eq 0 ]
    rl() { jq -c ".processes[0].rl | $1" "$W/r.json"; }
    [ "$(rl .steps)" = 4 ]
    [ "$(rl .generating_steps)" = 4 ]
    # generate 571000 551000 591000 579000; decode 540000 520000 560000 548000; steps
    # 864300 844300 884300 872300 µs
    [ "$(rl '.generating | [.step_us, .generate_us, .prefill_us, .decode_us, .reward_us, .ref_logps_us, .old_logps_us, .train_us, .data_wait_us, .optimizer_us, .grad_sync_us, .other_us]')" = \
        '[866300,573000,30000,542000,3400,60000,0,208900,1500,18000,0,1500]' ]
    [ "$(rl '.all == .generating')" = true ]
    [ "$(rl '[.rewards[] | [.function, .program, .generating_us]]')" = \
        '[["accuracy",false,1800],["format",false,900],["length",false,300]]' ]
    # 6176 decode tokens in 2168000 µs, 3072 prefill tokens in 120000 µs, 8 rows per generate
    [ "$(rl '.generate | [.spans, .rows, .rows_per_generate, .decode_tokens, .decode_us, .prefill_tokens, .prefill_us]')" = \
        '[4,32,8,6176,2168000,3072,120000]' ]
    [ "$(rl '.generate.decode_tokens_per_s == (6176 / 2.168 * 1000 | round / 1000)')" = true ]
    [ "$(rl '.generate.prefill_tokens_per_s')" = 25600 ]
    [ "$(rl '.shares.generate == (573000 / 866300 * 1e6 | round / 1e6)')" = true ]
    [ "$(rl '.worst_spans.generate | map(.step)')" = '[3,4,1,2]' ]
}

@test "generation_bound: share, ms, decode rate and rows in the sentence; --num-iterations 2 as the command; in text and JSON" {
    run "$A" --format json -o "$W/r.json" "$F/grpo-gen.trace.jsonl"
    [ "$status" -eq 0 ]
    [ "$(jq -c '[.bottlenecks[].rule]' "$W/r.json")" = '["generation_bound"]' ]
    b() { jq -r ".bottlenecks[0]$1" "$W/r.json"; }
    [ "$(b .severity)" = warn ]
    [ "$(b .value)" = 66.14 ]
    [ "$(b .threshold)" = 50 ]
    S="generation takes 66.14% of the generating steps' time (573 ms of 866 ms per step; 4 of 4 steps generate): decode runs at 2849 tokens/s with 8 rows per decode forward"
    [ "$(b .summary)" = "$S" ]
    [ "$(b .evidence.generate_us)" = 573000 ]
    [ "$(b .evidence.num_iterations)" = 1 ]
    [ "$(b '.evidence.worst_spans[0].step')" = 3 ]
    [[ "$(b .remedy)" == *"--per-device-train-batch-size"*"--num-generations, --max-completion-length"*"--num-iterations 2..4"* ]]
    [ "$(b .command)" = "swift-train --rlhf grpo --model models/Qwen2.5-0.5B-Instruct --num-generations 8 --per-device-train-batch-size 8 --max-completion-length 256 --reward-funcs accuracy format length -o runs/grpo-2 --trace runs/grpo-2/t.trace.jsonl gsm8k.jsonl --num-iterations 2" ]
    run "$A" "$F/grpo-gen.trace.jsonl"
    [ "$status" -eq 0 ]
    [[ "$output" == *"1. [warn] generation_bound — swift-train @ gpu-node"* ]]
    [[ "$output" == *"$S"* ]]
    # the table: a row per part, the reward functions under reward
    [[ "$output" == *"RL steps (4 of 4 steps generate), per step:"* ]]
    echo "$output" | grep -Eq '^    generate +573\.00 ms +573\.00 ms +66\.14%$'
    echo "$output" | grep -Eq '^      decode +542\.00 ms +542\.00 ms +62\.56%$'
    echo "$output" | grep -Eq '^      accuracy +1\.80 ms +1\.80 ms +0\.21%$'
    echo "$output" | grep -Eq '^    ref_logps +60\.00 ms +60\.00 ms +6\.93%$'
    [[ "$output" == *"decode 2849 tokens/s (6176 tokens in 2.17 s), prefill 25600 tokens/s, 8 rows per generate (4 generate spans)"* ]]
    # --fail-on warn: the rule counts as any other
    run "$A" --fail-on warn "$F/grpo-gen.trace.jsonl"
    [ "$status" -eq 1 ]
    # its threshold by id
    run "$A" --format json --threshold generation_bound=70 "$F/grpo-gen.trace.jsonl"
    [ "$status" -eq 0 ]
    [ "$(jq '.bottlenecks | length' <<<"$output")" = 0 ]
}

@test "reward_stall on a slow --reward-cmd program (critical), ref_logps_cost with --beta 0 as the command" {
    run "$A" --format json -o "$W/r.json" "$F/grpo-reward.trace.jsonl"
    [ "$status" -eq 0 ]
    [ "$(jq -c '[.bottlenecks[] | [.rule, .severity, .value]]' "$W/r.json")" = \
        '[["reward_stall","critical",26.1],["ref_logps_cost","warn",23.35]]' ]
    b() { jq -r ".bottlenecks[] | select(.rule == \"$1\") | $2" "$W/r.json"; }
    S1="reward scoring takes 26.10% of the generating steps' time (257 ms of 985 ms per step); the slowest function, cmd (a --reward-cmd program), takes 255 ms per step (25.92%)"
    [ "$(b reward_stall .summary)" = "$S1" ]
    [ "$(b reward_stall '.evidence.slowest | [.function, .program] | @csv')" = '"cmd",true' ]
    [ "$(b reward_stall '.evidence.reward_us * 1000 | round')" = 257133333 ]
    [[ "$(b reward_stall .remedy)" == *"answer each line as it arrives"*"batches inside it"*"a faster checker"*"a built-in function"*"--reward-timeout"* ]]
    [ "$(b reward_stall .command)" = null ]
    S2="the reference model's log-probs take 23.35% of the generating steps' time (230 ms of 985 ms per step)"
    [ "$(b ref_logps_cost .summary)" = "$S2" ]
    [[ "$(b ref_logps_cost .remedy)" == *"--beta 0 (TRL's default)"* ]]
    [ "$(b ref_logps_cost .command)" = "swift-train --rlhf grpo --model models/Qwen2.5-0.5B-Instruct --num-generations 8 --per-device-train-batch-size 8 --max-completion-length 256 --beta 0 --reward-funcs accuracy --reward-cmd 'python3 judge.py' -o runs/grpo-r-2 gsm8k.jsonl" ]
    # reward functions slowest first: cmd 255000 262000 249000 µs
    [ "$(jq -c '[.processes[0].rl.rewards[] | [.function, .program, .generating_us]]' "$W/r.json")" = \
        '[["cmd",true,255333.333],["accuracy",false,1500]]' ]
    run "$A" "$F/grpo-reward.trace.jsonl"
    [ "$status" -eq 0 ]
    [[ "$output" == *"1. [CRITICAL] reward_stall — swift-train @ gpu-node"* ]]
    [[ "$output" == *"$S1"* ]]
    [[ "$output" == *"2. [warn] ref_logps_cost — swift-train @ gpu-node"* ]]
    [[ "$output" == *"$S2"* ]]
    echo "$output" | grep -Eq '^      cmd \(program\) +255\.33 ms +255\.33 ms +25\.92%$'
}

@test "--num-iterations 2: generating steps apart from all steps, old_logps, --num-iterations 4 as the command" {
    run "$A" --format json -o "$W/r.json" "$F/grpo-mu2.trace.jsonl"
    [ "$status" -eq 0 ]
    rl() { jq -c ".processes[0].rl | $1" "$W/r.json"; }
    [ "$(rl '[.steps, .generating_steps, .generating.steps, .all.steps]')" = '[4,2,2,4]' ]
    # steps 794400 206700 794400 206700 µs; generate, ref_logps, old_logps only in steps 1, 3
    [ "$(rl '.generating | [.step_us, .generate_us, .reward_us, .ref_logps_us, .old_logps_us, .train_us, .other_us]')" = \
        '[794400,496000,6300,40000,45000,188900,1700]' ]
    [ "$(rl '.all | [.step_us, .generate_us, .reward_us, .ref_logps_us, .old_logps_us, .train_us, .other_us]')" = \
        '[500550,248000,3150,20000,22500,188900,1500]' ]
    [ "$(rl '[.rewards[] | [.function, .generating_us, .all_us]]')" = '[["accuracy",4000,2000],["format",2000,1000]]' ]
    [ "$(rl '.generate | [.spans, .decode_tokens, .decode_tokens_per_s]')" = '[2,3008,3200]' ]
    [ "$(jq -c '[.bottlenecks[].rule]' "$W/r.json")" = '["generation_bound"]' ]
    [ "$(jq -r '.bottlenecks[0].summary' "$W/r.json")" = "generation takes 62.44% of the generating steps' time (496 ms of 794 ms per step; 2 of 4 steps generate): decode runs at 3200 tokens/s with 8 rows per decode forward" ]
    [ "$(jq -r '.bottlenecks[0].evidence.num_iterations' "$W/r.json")" = 2 ]
    [ "$(jq -r '.bottlenecks[0].command' "$W/r.json")" = "swift-train --rlhf grpo --model models/Qwen2.5-0.5B-Instruct --num-generations 8 --per-device-train-batch-size 8 --max-completion-length 256 --num-iterations 4 --reward-funcs accuracy format -o runs/grpo-mu2-2 gsm8k.jsonl" ]
    # the phase breakdown: train claims nothing itself (forward 75 ms, backward 110 ms a step)
    [ "$(jq -c '.processes[0].breakdown.us | [.forward, .backward]' "$W/r.json")" = '[75000,110000]' ]
    [ "$(jq -c '.processes[0].ops' "$W/r.json")" = null ]
    run "$A" "$F/grpo-mu2.trace.jsonl"
    [[ "$output" == *"RL steps (2 of 4 steps generate), per step:"* ]]
    echo "$output" | grep -Eq '^    old_logps +45\.00 ms +22\.50 ms +5\.66%$'
    echo "$output" | grep -Eq '^    step +794\.40 ms +500\.55 ms +100\.00%$'
}

@test "rl table in Markdown and HTML (well-formed, a row per part and reward function)" {
    run "$A" --format md "$F/grpo-reward.trace.jsonl"
    [ "$status" -eq 0 ]
    [[ "$output" == *"| part | per generating step | per step (all) | share of generating step |"* ]]
    [[ "$output" == *"| &nbsp;&nbsp;cmd (program) | 255.33 ms | 255.33 ms | 25.92% |"* ]]
    run "$A" --format html -o "$W/r.html" "$F/grpo-reward.trace.jsonl" "$F/grpo-mu2.trace.jsonl"
    [ "$status" -eq 0 ]
    run $CHECK "$W/r.html"
    [ "$status" -eq 0 ]
    [ "$(grep -c '<h2>RL steps: generation, rewards, training</h2>' "$W/r.html")" = 1 ]
    grep -q '<th>part</th><th>per generating step</th><th>per step (all)</th><th>share of generating step</th>' "$W/r.html"
    grep -q '<tr><td>&nbsp;&nbsp;cmd (program)</td><td class="n" data-v="255333.333">255.3 ms</td>' "$W/r.html"
    grep -q '<tr><td>old_logps</td><td class="n" data-v="45000">45.0 ms</td><td class="n" data-v="22500">22.5 ms</td>' "$W/r.html"
    grep -q 'decode 3200 tokens/s (3008 tokens in 940.00 ms)' "$W/r.html"
}

@test "an SFT trace has no rl view (\"rl\": null) and no RL rule" {
    SFT="$BATS_TEST_DIRNAME/../fuzz/corpus/trace_load/swift.jsonl"
    run "$A" --format json -o "$W/r.json" "$SFT"
    [ "$status" -eq 0 ]
    [ "$(jq -c '[.processes[] | has("rl"), .rl]' "$W/r.json")" = '[true,null]' ]
    [ "$(jq -c '[.bottlenecks[].rule | select(. == "generation_bound" or . == "reward_stall" or . == "ref_logps_cost")]' "$W/r.json")" = '[]' ]
    # a real swift-train run (SFT)
    run "$SWIFT_BIN/swift-train" --model tests/fixtures/model/llama -o "$W/run" --max-steps 2 \
        --trace "$W/t.trace.jsonl" tests/fixtures/shards
    [ "$status" -eq 0 ]
    for fmt in json text md html; do
        run "$A" --format $fmt -o "$W/r.$fmt" "$W/t.trace.jsonl"
        [ "$status" -eq 0 ]
    done
    [ "$(jq -c '[.processes[] | has("rl"), .rl]' "$W/r.json")" = '[true,null]' ]
    [ "$(jq -c '[.bottlenecks[].rule | select(. == "generation_bound" or . == "reward_stall" or . == "ref_logps_cost")]' "$W/r.json")" = '[]' ]
    run grep -l 'RL steps' "$W/r.text" "$W/r.md" "$W/r.html"
    [ "$status" -eq 1 ]
}
