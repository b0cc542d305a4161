#!/usr/bin/env bats
# swift-trace-analyze's device memory ("memory" per process): Kineto [memory] instants, with
# "Total Allocated"/"Total Reserved" (newer PyTorch) or only "Bytes" (the shared resnet50 traces,
# whose peak is the running sum of Bytes, computed here in jq), and the memory_headroom rule.

setup() {
    A="$SWIFT_BIN/swift-trace-analyze"
    T="$SHARED/data/traces"
    W="$BATS_TEST_TMPDIR"
}

need_traces() {
    if [ ! -d "$T" ]; then
        [ "${CI:-}" = true ] && { echo "missing $T" >&2; return 1; }
        skip "shared traces not found at $T"
    fi
}

# A Kineto trace on one 40 GiB device: a kernel and [memory] instants with totals.
# $1: "Total Allocated" at the peak, $2: "Total Reserved" there.
kineto_mem() {
    cat <<JSON
{"deviceProperties":[{"id":0,"name":"NVIDIA A100-SXM4-40GB","totalGlobalMem":42949672960}],
 "traceEvents":[
 {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":100,"dur":50,"args":{"External id":1}},
 {"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":120,"dur":40,"args":{"device":0,"stream":7,"correlation":5}},
 {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":101,"args":{"Device Type":1,"Device Id":0,"Addr":1,"Bytes":1073741824,"Total Allocated":1073741824,"Total Reserved":2147483648}},
 {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":110,"args":{"Device Type":1,"Device Id":0,"Addr":2,"Bytes":1,"Total Allocated":$1,"Total Reserved":$2}},
 {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":130,"args":{"Device Type":1,"Device Id":0,"Addr":2,"Bytes":-1,"Total Allocated":1073741824,"Total Reserved":$2}},
 {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":131,"args":{"Device Type":0,"Device Id":-1,"Addr":3,"Bytes":99999999999}}
]}
JSON
}

@test "resnet50 traces (Bytes only): the peak is the running sum of Bytes per device, as jq computes it" {
    need_traces
    for f in "$T"/kineto-tb/resnet50_num_workers_*/*.pt.trace.json.gz; do
        run "$A" --format json -o "$W/r.json" "$f"
        [ "$status" -eq 0 ]
        peak=$(gzip -dc "$f" | jq '[.traceEvents[] | select(.name == "[memory]" and .args["Device Type"] == 1
                 and .args["Device Id"] == 0)] | sort_by(.ts)
                 | reduce .[].args.Bytes as $b ({s: 0, m: 0}; .s += $b | .m = ([.m, .s] | max)) | .m')
        total=$(gzip -dc "$f" | jq '.deviceProperties[0].totalGlobalMem')
        [ "$peak" -gt 1000000000 ]
        jq -e --argjson p "$peak" --argjson t "$total" '.processes[0].memory
            | .peak_bytes == $p and .device_bytes == $t and .fragmentation_bytes == null
            and (.devices | length) == 1 and .devices[0].source == "running_sum"
            and .devices[0].peak_bytes == $p and .devices[0].device == 0
            and (.devices[0].timeline | length) <= 200 and (.devices[0].timeline | length) > 50
            and ([.devices[0].timeline[][1]] | max) == $p
            and ([.devices[0].timeline[][0]] | . == sort)' "$W/r.json"
        # the CPU ops around the allocation that reached the peak, outermost first, from jq
        ops=$(gzip -dc "$f" | jq -c '[.traceEvents[] | select(.name == "[memory]" and .args["Device Type"] == 1
                 and .args["Device Id"] == 0)] | sort_by(.ts)
                 | reduce .[] as $e ({s: 0, m: 0, at: null}; .s += $e.args.Bytes
                     | if .s > .m then .m = .s | .at = $e else . end) | .at as $p
                 | [input.traceEvents[] | select(.ph == "X" and .cat == "Operator" and (.tid | tostring) == ($p.tid | tostring)
                     and .ts <= $p.ts and .ts + .dur >= $p.ts)] | sort_by(-.dur) | map(.name)' \
                 - <(gzip -dc "$f"))
        [ "$(jq -c '.processes[0].memory.devices[0].peak_ops' "$W/r.json")" = "$ops" ]
        [[ "$ops" == *'"aten::empty"'* ]]
    done
}

@test "Total Allocated and Total Reserved: reserved at the peak and fragmentation; CPU events left out" {
    kineto_mem 3221225472 8589934592 >"$W/k.json"
    run "$A" --format json -o "$W/r.json" "$W/k.json"
    [ "$status" -eq 0 ]
    jq -e '.processes[0].memory | .peak_bytes == 3221225472 and .reserved_at_peak_bytes == 8589934592
        and .fragmentation_bytes == 5368709120 and .device_bytes == 42949672960 and .peak_pct == 7.5
        and .devices[0].source == "total_allocated" and .devices[0].events == 3
        and .devices[0].timeline == [[1,1073741824],[10,3221225472],[30,1073741824]]
        and .devices[0].peak_ops == ["aten::mm"]' "$W/r.json"
    # 5 GiB of 8 GiB reserved unused at the peak: memory_headroom fires on fragmentation
    jq -e '[.bottlenecks[] | select(.rule == "memory_headroom")] | length == 1 and .[0].value == 62.5
        and .[0].threshold == 30 and .[0].evidence.fragmentation_bytes == 5368709120
        and (.[0].remedy | test("expandable_segments"))' "$W/r.json"
    run "$A" "$W/k.json"
    [ "$status" -eq 0 ]
    [[ "$output" == *"peak memory: 3.00 GiB (7.5% of device), 8.00 GiB reserved (5.00 GiB fragmentation), reached in aten::mm"* ]]
}

@test "memory_headroom: quiet with little fragmentation, fires near the device's capacity" {
    kineto_mem 3221225472 3422552064 >"$W/k.json"
    run "$A" --format json -o "$W/r.json" "$W/k.json"
    [ "$status" -eq 0 ]
    jq -e '[.bottlenecks[] | select(.rule == "memory_headroom")] | length == 0' "$W/r.json"
    # 39 GiB of 40: 97.5 %
    kineto_mem 41875931136 42000000000 >"$W/k.json"
    run "$A" --format json -o "$W/r.json" "$W/k.json"
    [ "$status" -eq 0 ]
    jq -e '[.bottlenecks[] | select(.rule == "memory_headroom")] | length == 1 and .[0].value == 97.5
        and .[0].severity == "warn" and .[0].evidence.reserved_at_peak_bytes == 42000000000' "$W/r.json"
}

# HTA memory_analysis's _process_raw_events, summarised by tests/ref/gen_memory.py, against
# memory.devices[0] of the same file; $1 the raw file, $2 the HTA fixture.
same_as_hta() {
    run "$A" --format json -o "$W/r.json" "$1"
    [ "$status" -eq 0 ]
    jq -e --slurpfile h "$2" '.processes[0].memory.devices[0] as $d | $h[0] as $h
        | $d.source == "memory_timeline" and $d.events == $h.rows and $d.peak_bytes == $h.peak_bytes
        and $d.peak_ts_us == $h.peak_ts_us and $d.categories_at_peak == $h.categories_at_peak
        and $d.last_bytes == $h.last_bytes
        and (.processes[0].memory.peak_bytes == $h.peak_bytes)' "$W/r.json"
}

@test "torch's memory_timeline.raw (told by content): HTA memory_analysis's rows, peak and categories at the peak" {
    F="$BATS_TEST_DIRNAME/../ref/fixtures/memory"
    same_as_hta "$F/small.raw.gz" "$F/small.hta.json"
    # detected by its content, not its name
    cp "$F/small.raw.gz" "$W/renamed.json.gz"
    same_as_hta "$W/renamed.json.gz" "$F/small.hta.json"
    gzip -dc "$F/small.raw.gz" >"$W/plain.json"
    same_as_hta "$W/plain.json" "$F/small.hta.json"
    run "$A" "$F/small.raw.gz"
    [ "$status" -eq 0 ]
    [[ "$output" == *"peak memory: 2.87 GiB; at the peak: Parameter 0.10 GiB, Optimizer state 0.10 GiB, "*"Activation 2.41 GiB"* ]]
    # a bad entry names the file and the entry
    printf '[[1, 1, 5, 0], [2, 1, 5, 9]]' >"$W/bad.raw"
    run "$A" "$W/bad.raw"
    [ "$status" -eq 1 ]
    [[ "$output" == *"bad.raw: memory timeline entry 1 is not [ts, action, bytes, category 0-7]"* ]]
}

@test "HTA's own memory_analysis test file: the same numbers as HTA" {
    need_traces
    same_as_hta "$T/hta/memory_analysis/memory_timeline.raw.gz" \
        "$BATS_TEST_DIRNAME/../ref/fixtures/memory/memory_timeline.hta.json"
}

@test "--compare: roofline deltas of the top ops (rows matched by name and input dims) and the memory peak delta" {
    need_traces
    c="$T/kineto-tb/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
    t="$T/kineto-tb/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"
    run "$A" --format json -o "$W/c.json" "$c"
    [ "$status" -eq 0 ]
    run "$A" --format json -o "$W/t.json" "$t"
    [ "$status" -eq 0 ]
    run "$A" --compare --format json -o "$W/d.json" "$c" "$t"
    [ "$status" -eq 0 ]
    # the memory peaks are each side's own; the delta their difference
    jq -e --slurpfile c "$W/c.json" --slurpfile t "$W/t.json" '.memory
        | .control_peak_bytes == $c[0].processes[0].memory.peak_bytes
        and .test_peak_bytes == $t[0].processes[0].memory.peak_bytes
        and .delta_bytes == (.test_peak_bytes - .control_peak_bytes) and .delta_bytes != 0' "$W/d.json"
    # 10 rows, by the larger device time; each row's numbers are those of the same (name,
    # input_dims) row in each side's own op_roofline
    jq -e --slurpfile c "$W/c.json" --slurpfile t "$W/t.json" '
        def find($rows; $r): [$rows[] | select(.name == $r.name and .input_dims == $r.input_dims)][0];
        .roofline | length == 10 and all(.[];
            (find($c[0].processes[0].op_roofline.rows; .) as $x
             | find($t[0].processes[0].op_roofline.rows; .) as $y
             | .control_tflops == $x.tflops and .test_tflops == $y.tflops
             and .control_fraction == $x.roofline_fraction and .test_fraction == $y.roofline_fraction
             and .delta_us == ($y.device_us - $x.device_us)))
        and ([.[] | [.control_device_us, .test_device_us] | max] | . == (sort | reverse))' "$W/d.json"
    run "$A" --compare "$c" "$t"
    [ "$status" -eq 0 ]
    [[ "$output" == *"Memory peak: 2.60 GiB -> 2.60 GiB (-0.01%)"* ]]
    [[ "$output" == *"Roofline of the top ops (control -> test):"* ]]
}

@test "--compare against a side without the op rows: '-' where a side has no number" {
    need_traces
    c="$T/kineto-tb/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
    run "$A" --compare --format md "$c" "$BATS_TEST_DIRNAME/../ref/fixtures/memory/small.raw.gz"
    [ "$status" -eq 0 ]
    [[ "$output" == *"| 28.13 ms → - | 8.42 -> - | 54% -> - |"* ]]
    [[ "$output" != *"-> nan"* ]]
}
