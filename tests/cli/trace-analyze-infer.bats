#!/usr/bin/env bats
# swift-trace-analyze on swift-infer traces: the "inference" view (time to first token and per
# output token, throughput, batch occupancy, KV cache pressure, decode steps with prompt chunks)
# in JSON, text, Markdown and HTML, and the rules queue_bound_ttft, kv_pressure and low_occupancy on
# traces written here by swift-infer on the tiny llama fixture. The engine's schedule is
# deterministic (which sequences run at each step, what waits, what is preempted), so the tests
# assert on those and on shares computed from the spans, never on absolute times.
# prefill_interference compares step times, so it is tested on hand-made traces (here and in
# tests/unit/test_analyze_infer.c).

bats_require_minimum_version 1.5.0

setup() {
    A="$SWIFT_BIN/swift-trace-analyze"
    I="$SWIFT_BIN/swift-infer"
    M="$BATS_TEST_DIRNAME/../fixtures/eval/llama"
    W="$BATS_TEST_TMPDIR"
    export OMP_NUM_THREADS=2
    # 8 completions requests of mixed lengths (6 to 69 prompt tokens, 8 to 20 new tokens)
    for i in 0 1 2 3 4 5 6 7; do
        p=$(printf 'ab %.0s' $(seq 1 $((2 + i * 3))))
        printf '{"custom_id":"r%d","method":"POST","url":"/v1/completions","body":{"prompt":"%s","max_tokens":%d,"temperature":0,"ignore_eos":true}}\n' \
            "$i" "$p" $((8 + (i % 3) * 6))
    done >"$W/in.jsonl"
}

# infer NAME FLAGS...: swift-infer on the requests with --trace W/NAME.trace.jsonl, then the
# JSON report W/NAME.json.
infer() {
    n=$1
    shift
    run --separate-stderr "$I" "$M" "$W/in.jsonl" --trace "$W/$n.trace.jsonl" "$@"
    [ "$status" -eq 0 ]
    [[ $stderr == *"8 answered, 0 errors"* ]]
    run "$A" --format json -o "$W/$n.json" "$W/$n.trace.jsonl"
    [ "$status" -eq 0 ]
}

inf() { jq -c ".processes[0].inference | $1" "$W/$2.json"; }
rules() { jq -c '[.bottlenecks[].rule | select(. == "queue_bound_ttft" or . == "kv_pressure" or . == "low_occupancy")]' "$W/$1.json"; }

@test "the trace records the engine's settings and queue on every engine_step" {
    infer q --max-num-seqs 1 --num-blocks 20 --max-num-batched-tokens 64 --max-model-len 100
    run jq -c 'select(.name == "engine_step") | .args | [.max_num_seqs, .max_num_batched_tokens, .num_blocks, .max_model_len, .chunked_prefill]' "$W/q.trace.jsonl"
    [ "$(printf '%s\n' "$output" | sort -u)" = '[1,64,20,100,1]' ]
    # one sequence runs at a time; batch mode keeps 2 x --max-num-seqs requests in flight, so one
    # waits while another runs
    [ "$(jq -s '[.[] | select(.name == "engine_step") | .args.waiting] | max' "$W/q.trace.jsonl")" = 1 ]
    [ "$(jq -s '[.[] | select(.name == "engine_step") | .args.seqs] | max' "$W/q.trace.jsonl")" = 1 ]
    [ "$(inf .settings q)" = '{"max_num_seqs":1,"max_num_batched_tokens":64,"num_blocks":20,"max_model_len":100,"chunked_prefill":1}' ]
}

@test "TTFT and TPOT percentiles, counts and throughput recomputed from the spans with jq" {
    infer base
    t="$W/base.trace.jsonl"
    [ "$(inf .requests base)" = 8 ]
    # output tokens: the answers' usage, the decode spans' completion_tokens
    [ "$(inf .output_tokens base)" = "$(jq -s '[.[] | select(.name == "request_decode") | .args.completion_tokens] | add' "$t")" ]
    [ "$(inf .output_tokens base)" = 106 ] # ignore_eos: every max_tokens
    # TTFT per request = request_queued + request_prefill (joined by args.req); p50 of 8 values
    # interpolated between the 4th and 5th (numpy's default)
    pct='def pct(q): sort | ((length - 1) * q) as $p | ($p | floor) as $lo | ($p | ceil) as $hi
                     | .[$lo] + (.[$hi] - .[$lo]) * ($p - $lo);'
    ttft=$(jq -s "$pct"' [.[] | select(.name == "request_queued" or .name == "request_prefill")]
                  | group_by(.args.req) | map(map(.dur) | add) | pct(0.5)' "$t")
    [ "$(jq -n --argjson a "$ttft" --argjson b "$(inf .ttft.p50_us base)" '($a - $b) | fabs < 0.01')" = true ]
    ttft99=$(jq -s "$pct"' [.[] | select(.name == "request_queued" or .name == "request_prefill")]
                  | group_by(.args.req) | map(map(.dur) | add) | pct(0.99)' "$t")
    [ "$(jq -n --argjson a "$ttft99" --argjson b "$(inf .ttft.p99_us base)" '($a - $b) | fabs < 0.01')" = true ]
    # TPOT = request_decode / (completion tokens - 1)
    tpot=$(jq -s "$pct"' [.[] | select(.name == "request_decode" and .args.completion_tokens > 1)
                  | .dur / (.args.completion_tokens - 1)] | pct(0.5)' "$t")
    [ "$(jq -n --argjson a "$tpot" --argjson b "$(inf .tpot.p50_us base)" '($a - $b) | fabs < 0.01')" = true ]
    [ "$(inf '[.ttft.n, .tpot.n]' base)" = '[8,8]' ]
    [ "$(inf '.ttft | .p50_us <= .p90_us and .p90_us <= .p99_us and .p99_us <= .max_us' base)" = true ]
    # throughput over the requests' span, from the first queued to the last decode's end
    [ "$(inf '(.output_tokens_per_s - 1e6 * .output_tokens / .wall_us) | fabs < 0.01' base)" = true ]
    [ "$(inf '(.requests_per_s - 1e6 * 8 / .wall_us) | fabs < 0.01' base)" = true ]
    # steps: the engine_step spans that ran sequences
    [ "$(inf .steps base)" = "$(jq -s '[.[] | select(.name == "engine_step" and .args.seqs > 0)] | length' "$t")" ]
}

@test "no rule on a run where every request fits the first step and the pool" {
    infer base
    # all eight are admitted at step 1 (512 tokens per forward): nothing waits, nothing preempted
    [ "$(inf '.batch.steps_with_waiting' base)" = 0 ]
    [ "$(inf '.kv_cache.preemptions' base)" = 0 ]
    [ "$(inf '.interference.mixed_steps' base)" = 0 ]
    [ "$(inf '.queued_share_of_ttft < 0.5' base)" = true ]
    [ "$(rules base)" = '[]' ]
    [ "$(jq -c '[.bottlenecks[].rule | select(. == "prefill_interference")]' "$W/base.json")" = '[]' ]
}

@test "queue_bound_ttft: one sequence at a time, the queue dominates TTFT; remedy raises --max-num-seqs" {
    infer q --max-num-seqs 1
    # queued share from the spans: sum of request_queued over sum of queued + prefill
    share=$(jq -s '([.[] | select(.name == "request_queued") | .dur] | add) /
                   ([.[] | select(.name == "request_queued" or .name == "request_prefill") | .dur] | add)' \
        "$W/q.trace.jsonl")
    [ "$(jq -n --argjson a "$share" --argjson b "$(inf .queued_share_of_ttft q)" '($a - $b) | fabs < 0.001')" = true ]
    [ "$(rules q)" = '["queue_bound_ttft"]' ]
    b() { jq -c ".bottlenecks[] | select(.rule == \"queue_bound_ttft\") | $1" "$W/q.json"; }
    [ "$(b .unit)" = '"% of TTFT"' ]
    [ "$(b .threshold)" = 50 ]
    [[ "$(b .remedy)" == *"raise --max-num-seqs (now 1;"* ]]
    [[ "$(b .command)" == *"--max-num-seqs 2"* ]]
    [[ "$(b .summary)" == *"of their time to first token queued"* ]]
    # below the threshold it stays quiet
    run "$A" --format json --threshold queue_bound_ttft=99.9 "$W/q.trace.jsonl"
    [ "$status" -eq 0 ]
    [ "$(printf '%s' "$output" | jq '[.bottlenecks[] | select(.rule == "queue_bound_ttft")] | length')" = 0 ]
}

@test "kv_pressure: a pool of 24 blocks of 4 for 8 sequences preempts; remedy raises --num-blocks, names --max-model-len" {
    infer kv --max-num-seqs 8 --block-size 4 --num-blocks 24 --max-model-len 100
    [ "$(inf '.kv_cache.preemptions > 0' kv)" = true ]
    # the preemptions the engine counted, the last step's args
    [ "$(inf .kv_cache.preemptions kv)" = "$(jq -s '[.[] | select(.name == "engine_step") | .args.preemptions] | max' "$W/kv.trace.jsonl")" ]
    [ "$(inf '[.kv_cache.num_blocks, .kv_cache.peak_blocks]' kv)" = '[24,24]' ]
    [ "$(inf .kv_cache.peak_share kv)" = 1 ]
    [[ "$(rules kv)" == *'"kv_pressure"'* ]]
    b() { jq -c ".bottlenecks[] | select(.rule == \"kv_pressure\") | $1" "$W/kv.json"; }
    [ "$(b .severity)" = '"critical"' ]
    [[ "$(b .remedy)" == *"raise --num-blocks (now 24)"*"--max-model-len (now 100)"* ]]
    [[ "$(b .command)" == *"--num-blocks 48"* ]]
    [ "$(b .evidence.preemptions)" = "$(inf .kv_cache.preemptions kv)" ]
}

@test "low_occupancy: 16 tokens per forward hold the batch at a quarter of 16 while requests wait" {
    infer occ --max-num-seqs 16 --max-num-batched-tokens 16
    [ "$(inf '.kv_cache.preemptions' occ)" = 0 ]
    [ "$(inf '.batch.steps_with_waiting > 0' occ)" = true ]
    # the steps that left requests waiting, from the spans
    occ=$(jq -s '[.[] | select(.name == "engine_step" and .args.seqs > 0 and .args.waiting > 0) | .args.seqs]
                 | add / length / 16' "$W/occ.trace.jsonl")
    [ "$(jq -n --argjson a "$occ" --argjson b "$(inf .batch.occupancy_with_waiting occ)" '($a - $b) | fabs < 0.001')" = true ]
    [ "$(inf '.batch.occupancy_with_waiting < 0.5' occ)" = true ]
    [ "$(inf '.batch.mean_tokens_with_waiting' occ)" = 16 ]
    [[ "$(rules occ)" == *'"low_occupancy"'* ]]
    b() { jq -c ".bottlenecks[] | select(.rule == \"low_occupancy\") | $1" "$W/occ.json"; }
    [[ "$(b .remedy)" == *"raise --max-num-batched-tokens (now 16), the token budget"* ]]
    [[ "$(b .command)" == *"--max-num-batched-tokens 32"* ]]
    # one sequence of one: the batch is full whatever waits
    infer q --max-num-seqs 1
    [ "$(inf .batch.occupancy_with_waiting q)" = 1 ]
    [[ "$(rules q)" != *low_occupancy* ]]
}

# A hand-made swift-infer trace: a request decoding over 8 steps (pure decode steps of 50 µs),
# MIXED_US for the 3 steps where another request's prompt chunks join, chunked prefill CHUNKED.
interference_trace() {
    mixed=$1 chunked=$2
    printf '{"ph":"M","name":"swift_meta","pid":1,"tid":1,"ts":0,"args":{"stage":"infer","rank":0,"world_size":1,"argv":["swift-infer","m","--max-num-batched-tokens","64","in.jsonl"]}}\n'
    ts=0
    for s in 1 2 3 4 5 6 7 8; do
        if [ "$s" -ge 3 ] && [ "$s" -le 5 ]; then d=$mixed p=20; else d=50 p=0; fi
        [ "$s" -eq 1 ] && d=100 p=20
        dec=$([ "$s" -eq 1 ] && echo 0 || echo 1)
        printf '{"ph":"X","cat":"infer","name":"engine_step","pid":1,"tid":1,"ts":%d,"dur":%d,"args":{"step":%d,"seqs":%d,"tokens":%d,"prefill_tokens":%d,"decode_tokens":%d,"blocks_used":4,"waiting":0,"preemptions":0,"max_num_seqs":16,"max_num_batched_tokens":64,"num_blocks":100,"max_model_len":128,"chunked_prefill":%d}}\n' \
            "$ts" "$d" "$s" $((dec + (p > 0))) $((p + dec)) "$p" "$dec" "$chunked"
        ts=$((ts + d))
    done
    for n in request_queued:0:0 request_prefill:0:100 request_decode:100:$((ts - 100)); do
        IFS=: read -r name t dur <<<"$n"
        printf '{"ph":"X","cat":"infer","name":"%s","pid":1,"tid":1,"ts":%d,"dur":%d,"args":{"req":0,"prompt_tokens":20,"cached_tokens":0,"completion_tokens":8}}\n' \
            "$name" "$t" "$dur"
    done
}

@test "prefill_interference: decode steps with prompt chunks 3x slower fire it, 1.2x do not; remedies from the settings" {
    interference_trace 150 1 >"$W/i.trace.jsonl"
    run "$A" --format json -o "$W/i.json" "$W/i.trace.jsonl"
    [ "$status" -eq 0 ]
    [ "$(inf '.interference | [.prefill_steps, .pure_decode_steps, .mixed_steps, .pure_decode_step_us, .mixed_step_us, .mixed_over_pure]' i)" = \
        '[1,4,3,50,150,3]' ]
    [ "$(inf '.tpot_split | [.with_prefill_requests, .without_prefill_requests]' i)" = '[1,0]' ]
    b() { jq -c ".bottlenecks[] | select(.rule == \"prefill_interference\") | $1" "$W/i.json"; }
    [ "$(b .value)" = 200 ]
    [ "$(b .severity)" = '"critical"' ]
    [[ "$(b .remedy)" == *"lower --max-num-batched-tokens (now 64, at least --max-num-seqs 16)"* ]]
    [[ "$(b .command)" == *"--max-num-batched-tokens 32"* ]]
    # chunked prefill off: the remedy turns it on
    interference_trace 150 0 >"$W/i0.trace.jsonl"
    run "$A" --format json -o "$W/i0.json" "$W/i0.trace.jsonl"
    [[ "$(jq -r '.bottlenecks[] | select(.rule == "prefill_interference") | .remedy' "$W/i0.json")" == "turn chunked prefill on"* ]]
    # 60 µs against 50: 20 % slower, under the 50 % threshold
    interference_trace 60 1 >"$W/i1.trace.jsonl"
    run "$A" --format json -o "$W/i1.json" "$W/i1.trace.jsonl"
    [ "$status" -eq 0 ]
    [ "$(inf .interference.mixed_over_pure i1)" = 1.2 ]
    [ "$(jq '[.bottlenecks[] | select(.rule == "prefill_interference")] | length' "$W/i1.json")" = 0 ]
}

@test "the inference view in text, Markdown and HTML" {
    infer q --max-num-seqs 1
    run "$A" "$W/q.trace.jsonl"
    [ "$status" -eq 0 ]
    [[ $output == *"inference: 8 requests, 106 output tokens in "* ]]
    [[ $output == *"time to first token"* ]]
    [[ $output == *"time per output token"* ]]
    [[ $output == *"batch: 1.00 sequences per step of 1 (100.00%)"* ]]
    [[ $output == *"settings: --max-num-seqs 1, --max-num-batched-tokens 512, "* ]]
    run "$A" --format md "$W/q.trace.jsonl"
    [ "$status" -eq 0 ]
    [[ $output == *"| latency | mean | p50 | p90 | p99 | max | n |"* ]]
    run "$A" --format html -o "$W/r.html" "$W/q.trace.jsonl"
    [ "$status" -eq 0 ]
    run python3 "$BATS_TEST_DIRNAME/html_check.py" "$W/r.html"
    [ "$status" -eq 0 ]
    [ "$(grep -c '<h2>Inference: latency, batch, KV cache</h2>' "$W/r.html")" = 1 ]
    grep -q '<th>latency</th><th>mean</th><th>p50</th><th>p90</th><th>p99</th><th>max</th><th>n</th>' "$W/r.html"
    grep -q '<p>batch: 1.00 sequences per step of 1 (100.00%)' "$W/r.html"
}

@test "a training trace has no inference view and no inference rule" {
    F="$BATS_TEST_DIRNAME/../fixtures/traces"
    run "$A" --format json "$F/grpo-gen.trace.jsonl"
    [ "$status" -eq 0 ]
    [ "$(printf '%s' "$output" | jq -c '.processes[0].inference')" = null ]
    [ "$(printf '%s' "$output" | jq -c '[.bottlenecks[].rule | select(. == "queue_bound_ttft" or . == "kv_pressure" or . == "low_occupancy" or . == "prefill_interference")]')" = '[]' ]
}
