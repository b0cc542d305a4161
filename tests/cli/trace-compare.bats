#!/usr/bin/env bats
# swift-trace-analyze --compare CONTROL TEST: HTA TraceDiff's compare_traces / ops_diff on the
# traces of $SHARED/data/traces (the expectations are HTA's own output, written by
# tests/ref/gen_trace_compare.py into tests/ref/fixtures/trace_compare/hta.json), step time by
# part, bottlenecks resolved and new, and the --fail-on regression gate, on hand-made traces and
# on real swift-train runs.

setup() {
    A="$SWIFT_BIN/swift-trace-analyze"
    T="$SHARED/data/traces"
    W="$BATS_TEST_TMPDIR"
    FIX="$BATS_TEST_DIRNAME/../ref/fixtures/trace_compare/hta.json"
}

need_traces() {
    if [ ! -d "$T" ]; then
        [ "${CI:-}" = true ] && { echo "missing $T" >&2; return 1; }
        skip "shared traces not found at $T"
    fi
}

# synth FILE STEP_US DATA_WAIT_US RANK: 4 steps of our trace format, data_wait then forward,
# backward and optimizer; forward has one "matmul" span per step, more with EXTRA_MATMUL=1
synth() {
    {
        printf '{"ph":"M","name":"swift_meta","pid":5,"tid":1,"ts":0,"args":{"schema_version":1,"stage":"train","rank":%d,"world_size":2,"host":"h","clock_offset_us":0,"argv":["swift-train","shards/"]}}\n' "$4"
        for s in 0 1 2 3; do
            t=$((1000000 + s * 200000))
            rest=$(($2 - $3))
            printf '{"ph":"X","cat":"step","name":"step","pid":5,"tid":1,"ts":%d,"dur":%d,"args":{"step":%d}}\n' $t "$2" $s
            printf '{"ph":"X","cat":"data","name":"data_wait","pid":5,"tid":1,"ts":%d,"dur":%d}\n' $t "$3"
            printf '{"ph":"X","cat":"compute","name":"forward","pid":5,"tid":1,"ts":%d,"dur":%d}\n' $(($t + $3)) $((rest / 2))
            printf '{"ph":"X","cat":"compute","name":"matmul","pid":5,"tid":1,"ts":%d,"dur":100}\n' $(($t + $3 + 10))
            if [ "${EXTRA_MATMUL:-0}" = 1 ]; then
                printf '{"ph":"X","cat":"compute","name":"matmul","pid":5,"tid":1,"ts":%d,"dur":100}\n' $(($t + $3 + 200))
                printf '{"ph":"X","cat":"compute","name":"rmsnorm","pid":5,"tid":1,"ts":%d,"dur":50}\n' $(($t + $3 + 400))
            fi
            printf '{"ph":"X","cat":"compute","name":"backward","pid":5,"tid":1,"ts":%d,"dur":%d}\n' $(($t + $3 + rest / 2)) $((rest / 2 - 1000))
            printf '{"ph":"X","cat":"optim","name":"optimizer","pid":5,"tid":1,"ts":%d,"dur":1000}\n' $(($t + $2 - 1000))
        done
    } >"$1"
}

@test "--compare equals HTA TraceDiff (compare_traces, ops_diff) on HTA's and TensorBoard's real traces" {
    need_traces
    [ -s "$FIX" ]
    n=$(jq '.cases | length' "$FIX")
    [ "$n" -ge 10 ]
    for i in $(seq 0 $((n - 1))); do
        c=$(jq -r ".cases[$i].control" "$FIX")
        t=$(jq -r ".cases[$i].test" "$FIX")
        st=$(jq -r ".cases[$i].steps // empty" "$FIX")
        # "@edge/...": the hand-made traces beside the fixture, else under $SHARED/data/traces
        c=${c/#@edge\//$(dirname "$FIX")/edge/} c=${c/#[^\/]*/$T/&}
        t=${t/#@edge\//$(dirname "$FIX")/edge/} t=${t/#[^\/]*/$T/&}
        run "$A" --compare -f json -o "$W/c$i.json" ${st:+--steps "$st"} "$c" "$t"
        [ "$status" -eq 0 ]
        # per name: [control_counts, control_total_duration, test_counts, test_total_duration,
        # ops_diff bucket]: counts exact, durations the µs HTA sums (after its ns rounding)
        got=$(jq -rn --slurpfile o "$W/c$i.json" --slurpfile f "$FIX" --argjson i "$i" '
            ($o[0].ops.rows | map({(.name): [.control_counts, .control_total_duration,
                .test_counts, .test_total_duration, .change]}) | add) as $ours
            | $f[0].cases[$i] as $c
            | [$c.case, ($ours == $c.ops), ($o[0].ops.control_iterations == $c.control_iterations),
               ($o[0].ops.test_iterations == $c.test_iterations),
               ($o[0].ops.counts == $c.ops_diff_counts),
               ([$o[0].ops.diff[]] | add | length) == ($c.ops | length)] | map(tostring) | join(" ")')
        [ "$got" = "$(jq -r ".cases[$i].case" "$FIX") true true true true true" ]
    done
    # HTA's own test traces: the second iteration adds three ops and drops two
    [ "$(jq -r '.ops.diff.added | join(",")' "$W/c2.json")" = "AddmmBackward0,All2All_Pooled_Req,CatBackward0" ]
    [ "$(jq -r '.ops.rows[] | select(.name == "nccl:all_reduce") | [.control_counts, .test_counts, .counts_change_categories] | join(" ")' "$W/c1.json")" = "2 1 -" ]
    # the corners (edge, first step): ProfilerStep#2 lies in the GPU's later ProfilerStep#1
    # annotation, so it is step 1's; a 0.3 us op at ts 1300.6 lasts -1 us once rounded; the
    # stream 0 kernel and the kernel without a launch are in no step
    e=$(jq -r '.cases | map(.case) | index("edge")' "$FIX")
    [ "$(jq -r '[.ops.rows[] | select(.name == "ProfilerStep#2" or .name == "aten::copy_") | .control_total_duration] | join(" ")' "$W/c$e.json")" = "1000 -1" ]
    [ "$(jq -r '[.ops.rows[] | select(.name == "amd_kernel" or .name == "orphan")] | length' "$W/c$e.json")" = 0 ]
}

@test "--compare in every format: text, md, json, html (self-contained)" {
    need_traces
    b="$T/hta/trace_compare/base" t="$T/hta/trace_compare/test"
    run "$A" --compare --steps 1009-1010 "$b" "$t"
    [ "$status" -eq 0 ]
    [[ ${lines[0]} == "swift-trace-analyze "*": compare" ]]
    [[ $output == *"Ops and kernels (HTA TraceDiff; control steps 1009-1010 (2), test steps 1009-1010 (2)): 11 names, 3 added, 0 deleted, 0 increased, 2 decreased, 6 unchanged"* ]]
    [[ $output == *"HTA temporal breakdown (GPU):"* ]]
    run "$A" --compare --steps 1009-1010 -f md "$b" "$t"
    [ "$status" -eq 0 ]
    [[ ${lines[0]} == "# swift-trace-analyze: compare" ]]
    [[ $output == *"| added | 0 -> 1 | 0 us -> 311 us | +311 us | \`All2All_Pooled_Req\` |"* ]]
    run "$A" --compare --steps 1009-1010 -f html -o "$W/c.html" "$b" "$t"
    [ "$status" -eq 0 ]
    [ -z "$output" ]
    grep -q '<h2>Ops and kernels (HTA TraceDiff)</h2>' "$W/c.html"
    grep -q '<svg' "$W/c.html"
    ! grep -q 'http' "$W/c.html"
    run "$A" --compare -f json "$b" "$t"
    [ "$status" -eq 0 ]
    [ "$(jq -r '[.mode, .control.ranks[0], .test.format, .ops.n, (.breakdown | length), (.temporal | length), .regression] | map(tostring) | join(" ")' <<<"$output")" = "compare 1 kineto 7 8 4 null" ]
}

@test "--compare on our traces: step time by phase, ops added and increased, bottlenecks new and resolved, --ranks" {
    synth "$W/c.jsonl" 100000 1000 0
    EXTRA_MATMUL=1 synth "$W/t.jsonl" 110000 41000 0
    run "$A" --compare -f json "$W/c.jsonl" "$W/t.jsonl"
    [ "$status" -eq 0 ]
    j=$output
    # mean step 100 -> 110 ms (+10%), data_wait 1 -> 41 ms
    [ "$(jq -r '.step_time | [.control.mean_us, .test.mean_us, .delta_us, .delta_pct] | map(tostring) | join(" ")' <<<"$j")" = "100000 110000 10000 10" ]
    [ "$(jq -r '.breakdown[] | select(.part == "data_wait") | [.control_us, .test_us, .delta_us] | map(tostring) | join(" ")' <<<"$j")" = "1000 41000 40000" ]
    [ "$(jq -r '[.breakdown[].part] | join(",")' <<<"$j")" = "data_wait,forward,backward,grad_sync,optimizer,other" ]
    # HTA's default: the first step; matmul 1 -> 2 calls, rmsnorm added
    [ "$(jq -r '.ops.control_iterations | tostring' <<<"$j")" = "[0]" ]
    [ "$(jq -r '.ops.rows[] | select(.name == "matmul") | [.control_counts, .test_counts, .change] | join(" ")' <<<"$j")" = "1 2 increased" ]
    [ "$(jq -r '.ops.diff.added | join(",")' <<<"$j")" = "rmsnorm" ]
    [ "$(jq -r '.bottlenecks.new[0] | [.rule, .control_severity, .test_severity] | map(tostring) | join(" ")' <<<"$j")" = "data_stall null critical" ]
    # --steps: every step of both
    run "$A" --compare -f json --steps 0-3 "$W/c.jsonl" "$W/t.jsonl"
    [ "$status" -eq 0 ]
    [ "$(jq -r '.ops.rows[] | select(.name == "matmul") | [.control_counts, .test_counts] | join(" ")' <<<"$output")" = "4 8" ]
    # the other way round: the stall is resolved
    run "$A" --compare -f json "$W/t.jsonl" "$W/c.jsonl"
    [ "$status" -eq 0 ]
    [ "$(jq -r '.bottlenecks.resolved[0].rule' <<<"$output")" = data_stall ]
    [ "$(jq -r '.ops.diff.deleted | join(",")' <<<"$output")" = "rmsnorm" ]
    # directories of two ranks: the lowest rank by default, --ranks picks
    mkdir "$W/cd" "$W/td"
    synth "$W/cd/r0.trace.jsonl" 100000 1000 0
    synth "$W/cd/r1.trace.jsonl" 100000 1000 1
    synth "$W/td/r0.trace.jsonl" 100000 1000 0
    synth "$W/td/r1.trace.jsonl" 150000 1000 1
    run "$A" --compare -f json "$W/cd" "$W/td"
    [ "$status" -eq 0 ]
    [ "$(jq -r '[.test.ranks[], .step_time.delta_pct] | map(tostring) | join(" ")' <<<"$output")" = "0 0" ]
    run "$A" --compare -f json --ranks 1 "$W/cd" "$W/td"
    [ "$status" -eq 0 ]
    [ "$(jq -r '[.test.ranks[], .step_time.delta_pct] | map(tostring) | join(" ")' <<<"$output")" = "1 50" ]
}

@test "--fail-on regression[=PCT] and --fail-on critical with --compare: exit 1 past the gate, 0 within" {
    synth "$W/c.jsonl" 100000 1000 0
    synth "$W/t.jsonl" 110000 41000 0
    run "$A" --compare --fail-on regression -o "$W/r.txt" "$W/c.jsonl" "$W/t.jsonl"
    [ "$status" -eq 1 ]
    [ "$output" = "swift-trace-analyze: mean step time regressed 10.00% (100.000 ms -> 110.000 ms), above --fail-on regression=5" ]
    grep -q "Regression gate (mean step time +5%): FAILED (+10.00%)" "$W/r.txt" # the report is written first
    run "$A" --compare --fail-on regression=10 -o "$W/r.txt" "$W/c.jsonl" "$W/t.jsonl"
    [ "$status" -eq 0 ]
    grep -q "Regression gate (mean step time +10%): passed (+10.00%)" "$W/r.txt"
    run "$A" --compare --fail-on regression=0 -f json "$W/t.jsonl" "$W/c.jsonl"
    [ "$status" -eq 0 ]
    [ "$(jq -c .regression <<<"$output")" = '{"threshold_pct":0,"regressed":false}' ]
    # a critical bottleneck new in the test fails --fail-on critical; resolved, it does not
    run "$A" --compare --fail-on critical -o "$W/r.txt" "$W/c.jsonl" "$W/t.jsonl"
    [ "$status" -eq 1 ]
    [ "$output" = "swift-trace-analyze: new bottleneck at or above --fail-on level in the test: data_stall" ]
    run "$A" --compare --fail-on critical -o "$W/r.txt" "$W/t.jsonl" "$W/c.jsonl"
    [ "$status" -eq 0 ]
    # no steps to time: the gate cannot pass
    printf '{"ph":"X","cat":"io","name":"read","pid":5,"tid":1,"ts":1,"dur":5}\n' >"$W/nostep.jsonl"
    run "$A" --compare --fail-on regression -o "$W/r.txt" "$W/c.jsonl" "$W/nostep.jsonl"
    [ "$status" -eq 1 ]
    [ "$output" = "swift-trace-analyze: --fail-on regression: the test has no steps to time" ]
}

@test "--compare usage errors exit 2; --steps outside a trace's steps exits 1" {
    synth "$W/c.jsonl" 100000 1000 0
    run "$A" --compare "$W/c.jsonl"
    [ "$status" -eq 2 ]
    [[ ${lines[0]} == "swift-trace-analyze: --compare takes two traces or directories, CONTROL and TEST" ]]
    run "$A" --compare "$W/c.jsonl" "$W/c.jsonl" "$W/c.jsonl"
    [ "$status" -eq 2 ]
    run "$A" --fail-on regression "$W/c.jsonl"
    [ "$status" -eq 2 ]
    [[ ${lines[0]} == "swift-trace-analyze: --fail-on regression applies to --compare" ]]
    for bad in regression=abc regression=-1 regress fatal; do
        run "$A" --compare --fail-on "$bad" "$W/c.jsonl" "$W/c.jsonl"
        [ "$status" -eq 2 ]
        [[ ${lines[0]} == "swift-trace-analyze: --fail-on: expected warn, critical or regression[=PCT] (PCT >= 0), got '$bad'" ]]
    done
    run "$A" --compare --merge "$W/m.json" "$W/c.jsonl" "$W/c.jsonl"
    [ "$status" -eq 2 ]
    run "$A" --compare --window 1 "$W/c.jsonl" "$W/c.jsonl"
    [ "$status" -eq 2 ]
    run "$A" --compare --steps 7-9 "$W/c.jsonl" "$W/c.jsonl"
    [ "$status" -eq 1 ]
    [ "$output" = "swift-trace-analyze: --steps 7-9: control '$W/c.jsonl' has steps 0-3 only" ]
    run "$A" --compare --ranks 4 "$W/c.jsonl" "$W/c.jsonl"
    [ "$status" -eq 1 ]
    [ "$output" = "swift-trace-analyze: --ranks 4: control '$W/c.jsonl' has none of them" ]
    run "$A" --compare "$W/c.jsonl" "$W/missing.jsonl"
    [ "$status" -eq 1 ]
}

@test "--compare: a Kineto trace named *.json first stays CONTROL" {
    need_traces
    zcat "$T/hta/trace_compare/base/base.json.gz" >"$W/base.json"
    zcat "$T/hta/trace_compare/test/test.json.gz" >"$W/test.json"
    run "$A" "$W/base.json" "$W/test.json" --compare --steps 1009-1010 -f json
    [ "$status" -eq 0 ]
    [ "$(jq -r '[.control.path, (.ops.diff.added | length)] | map(tostring) | join(" ")' <<<"$output")" = "$W/base.json 3" ]
}

@test "--compare on two real swift-train runs: gradient checkpointing recomputes forward, a slow loader regresses" {
    tr() {
        "$SWIFT_BIN/swift-train" --model tests/fixtures/model/llama --max-steps 4 --save-steps 100 \
            --eval-steps 100 -j 1 --profile wait=1,warmup=1,active=2 "$@" tests/fixtures/shards
    }
    cd "$BATS_TEST_DIRNAME/../.."
    run tr -o "$W/a" --trace "$W/a.jsonl"
    [ "$status" -eq 0 ]
    run tr -o "$W/b" --trace "$W/b.jsonl" --gradient-checkpointing --data-delay-ms 40
    [ "$status" -eq 0 ]
    run "$A" --compare -f json -o "$W/c.json" --steps 3-4 --fail-on regression=5 "$W/a.jsonl" "$W/b.jsonl"
    [ "$status" -eq 1 ]
    [[ $output == "swift-trace-analyze: mean step time regressed "*"above --fail-on regression=5" ]]
    # the profiled steps 3-4: each layer's forward runs twice (once more in backward)
    [ "$(jq -r '.ops.rows[] | select(.name == "layer.0.forward") | [.control_counts, .test_counts, .change] | join(" ")' "$W/c.json")" = "2 4 increased" ]
    [ "$(jq -r '.ops.rows[] | select(.name == "step") | [.control_counts, .test_counts] | join(" ")' "$W/c.json")" = "2 2" ]
    # step time by phase: the loader's 40 ms per step is data wait
    [ "$(jq '.breakdown[] | select(.part == "data_wait") | .delta_us > 20000' "$W/c.json")" = true ]
    [ "$(jq '.step_time.delta_pct > 100' "$W/c.json")" = true ]
    # the other way round passes the gate
    run "$A" --compare --fail-on regression=5 -o "$W/c.txt" --steps 3-4 "$W/b.jsonl" "$W/a.jsonl"
    [ "$status" -eq 0 ]
    grep -q "^Regression gate (mean step time +5%): passed" "$W/c.txt"
    grep -q "^    data_wait" "$W/c.txt"
}

@test "--compare: GPU utilization of a side without GPU is '-' (was nan%), in text and Markdown" {
    need_traces
    c=$(echo "$T"/kineto-tb/resnet50_num_workers_0/*.pt.trace.json.gz)
    t=$(echo "$T"/hta/cpu_only/*.json.gz)
    run "$A" --compare "$c" "$t"
    [ "$status" -eq 0 ]
    [[ "$output" == *"GPU utilization: 55.51% -> -"* ]]
    [[ "$output" != *"nan"* ]]
    run "$A" --compare --format md "$t" "$c"
    [ "$status" -eq 0 ]
    [[ "$output" == *"GPU utilization: - → 55.51%"* ]]
    [[ "$output" != *"nan"* ]]
    run "$A" --compare --format json "$c" "$t"
    [ "$status" -eq 0 ]
    echo "$output" | jq -e '.gpu_utilization | .control == 0.555141 and .test == null'
}
