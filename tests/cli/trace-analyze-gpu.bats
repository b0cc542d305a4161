#!/usr/bin/env bats
# swift-trace-analyze's GPU analyses and rules on our own traces (JSONL with the GPU events
# kernels/cuda/cupti_conv.c writes). Fixtures: tests/ref/fixtures/gputrace/, made by
# tests/ref/gen_gpu_traces.py, whose docstring derives every expected number by hand.
# (tests/unit/test_analyze_gpu.c checks the same analyses give identical numbers on a Kineto
# trace and on ours.)

setup() {
    A="$SWIFT_BIN/swift-trace-analyze"
    F=tests/ref/fixtures/gputrace
    W="$BATS_TEST_TMPDIR"
}

json() { # json FILE JQ-EXPR
    jq -r "$2" "$1"
}

@test "our trace, launch-bound: launch_bound and gpu_idle fire with HTA's launch stats and idle time" {
    run "$A" --format json -o "$W/r.json" "$F/launch_bound.trace.jsonl"
    [ "$status" -eq 0 ]
    [ "$output" = "" ]
    [ "$(json "$W/r.json" '.processes[0].format')" = swift ]
    # HTA launch statistics over steps 1-2 (the last step is left out, as HTA does)
    [ "$(json "$W/r.json" '.processes[0].launch | "\(.launches) \(.short_kernels) \(.mean_cpu_us) \(.mean_delay_us)"')" = "120 120 10 2" ]
    [ "$(json "$W/r.json" '.processes[0].idle_breakdown[] | "\(.stream) \(.host_wait_us) \(.kernel_wait_us) \(.other_us)"')" = "7 2073 0 0" ]
    [ "$(json "$W/r.json" '.processes[0].temporal | "\(.idle_us) \(.compute_us) \(.kernel_us)"')" = "2073 360 2433" ]
    [ "$(json "$W/r.json" '.processes[0].kernel_types[] | "\(.type) \(.us)"')" = "COMPUTATION 360" ]
    # TensorBoard GPU utilization over the 3 step spans: 540 / 3720 us
    [ "$(json "$W/r.json" '.processes[0].gpu_utilization')" = 0.145161 ]
    # the step breakdown stays our step thread's phases
    [ "$(json "$W/r.json" '.processes[0].breakdown.parts | join(",")')" = "data_wait,forward,backward,grad_sync,optimizer,other" ]
    [ "$(json "$W/r.json" '[.bottlenecks[].rule] | sort | join(",")')" = "gpu_idle,launch_bound" ]
    lb='.bottlenecks[] | select(.rule == "launch_bound")'
    [ "$(json "$W/r.json" "$lb | .severity, .value" | paste -sd' ')" = "critical 100" ]
    [ "$(json "$W/r.json" "$lb | .evidence | \"\(.launches) \(.short_kernels) \(.mean_launch_us) \(.host_wait_us) \(.idle_us)\"")" = "120 120 10 2073 2073" ]
    [ "$(json "$W/r.json" "$lb | .command")" = "swift-train --model m/ --dataset shards/ --per-device-train-batch-size 8 --device cuda:0 --profile 1,0,3" ]
    gi='.bottlenecks[] | select(.rule == "gpu_idle")'
    [ "$(json "$W/r.json" "$gi | .severity, .value" | paste -sd' ')" = "critical 14.52" ]
    # GPU idle time under the step thread's phases: forward+backward+optimizer 1210 - 180 busy
    [ "$(json "$W/r.json" "$gi | .evidence | \"\(.data_loading_us) \(.host_us) \(.comm_us) \(.other_us)\"")" = "5 1030 0 5" ]
    json "$W/r.json" "$gi | .summary" | grep -q "biggest share of the rest is host"
}

@test "our trace, control (long kernels queued): no launch_bound, no gpu_idle" {
    run "$A" --format json -o "$W/r.json" "$F/control.trace.jsonl"
    [ "$status" -eq 0 ]
    [ "$(json "$W/r.json" '.processes[0].launch | "\(.launches) \(.short_kernels)"')" = "120 0" ]
    [ "$(json "$W/r.json" '.processes[0].temporal.idle_us')" = 0 ]
    [ "$(json "$W/r.json" '.processes[0].gpu_utilization > 0.99')" = true ]
    [ "$(json "$W/r.json" '.bottlenecks | length')" = 0 ]
}

@test "our trace, launch-bound: the text report shows the GPU sections; --fail-on warn exits 1" {
    run "$A" "$F/launch_bound.trace.jsonl"
    [ "$status" -eq 0 ]
    [[ "$output" == *"[CRITICAL] launch_bound — swift-train rank 0 @ gpu1"* ]]
    [[ "$output" == *"GPU idle by cause (per stream): stream 7 host_wait 2.07 ms kernel_wait 0 us other 0 us;"* ]]
    [[ "$output" == *"kernel launches: 120, mean CPU launch 10.0 us, mean launch delay 2.0 us, 120 kernels shorter than their launch"* ]]
    run "$A" --fail-on warn "$F/launch_bound.trace.jsonl"
    [ "$status" -eq 1 ]
    [[ "$output" == *"swift-trace-analyze: bottleneck at or above --fail-on level found"* ]]
    run "$A" --fail-on warn "$F/control.trace.jsonl"
    [ "$status" -eq 0 ]
}
