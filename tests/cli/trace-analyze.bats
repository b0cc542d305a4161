#!/usr/bin/env bats
# swift-trace-analyze against the numbers the reference tools assert on the real traces in
# $SHARED/data/traces (REFERENCE.md §2: HTA's tests; §3: the TensorBoard plugin's
# result_check_file.txt). Expected values are copied from there, never from our own output.

setup_file() {
    # the big traces are analysed once per file; tests read these reports
    T="$SHARED/data/traces"
    [ -d "$T" ] || return 0
    F="$BATS_FILE_TMPDIR"
    "$SWIFT_BIN/swift-trace-analyze" --format json -o "$F/mtia.json" "$T/hta/mtia_trace_single_rank" || true
}

setup() {
    A="$SWIFT_BIN/swift-trace-analyze"
    T="$SHARED/data/traces"
    W="$BATS_TEST_TMPDIR"
    if [ ! -d "$T" ]; then
        [ "${CI:-}" = true ] && { echo "missing $T" >&2; return 1; }
        skip "shared traces not found at $T"
    fi
    NW0="$T/kineto-tb/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
    NW4="$T/kineto-tb/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"
}

json() { # json FILE JQ-EXPR: evaluate on a report file
    jq -r "$2" "$1"
}

@test "resnet50 num_workers=0: TensorBoard per-step breakdown, DataLoader 33.37%, GPU util 55.51%, data_stall fires" {
    run "$A" --format json -o "$W/r.json" "$NW0"
    [ "$status" -eq 0 ]
    [ "$(json "$W/r.json" .schema_version)" = 1 ]
    # per step (Kernel, Memcpy, Memset, Runtime, DataLoader, CPU Exec, Other), result_check_file.txt line 1
    got=$(json "$W/r.json" '.processes[0].step_list[] | [.step, (.us | .kernel, .memcpy, .memset, .runtime, .data_loading, .cpu_exec, .other | round)] | map(tostring) | join(",")')
    exp="5,98598,1941,90,2796,69317,14091,1115
6,98570,1947,89,2762,57669,12968,1148
7,98596,1931,91,2877,61257,13768,1213
8,98623,1938,89,2841,56453,13420,1200
9,98504,1937,87,2788,62690,15025,1141
10,98641,1798,88,3381,48185,12773,1117"
    [ "$got" = "$exp" ]
    [ "$(json "$W/r.json" '.processes[0].breakdown.step_us | round')" = 177592 ]
    [ "$(json "$W/r.json" '.processes[0].breakdown.fraction.data_loading * 10000 | round')" = 3337 ]
    [ "$(json "$W/r.json" '.processes[0].gpu_utilization * 10000 | round')" = 5551 ]
    [ "$(json "$W/r.json" '[.bottlenecks[] | select(.rule == "data_stall")] | length')" = 1 ]
    [ "$(json "$W/r.json" '.bottlenecks[] | select(.rule == "data_stall") | .evidence.worst_spans[0].step')" = 5 ]
}

@test "resnet50 num_workers=4: DataLoader 0.84%, GPU util 70.27%, no data_stall" {
    run "$A" --format json -o "$W/r.json" "$NW4"
    [ "$status" -eq 0 ]
    got=$(json "$W/r.json" '.processes[0].step_list[] | [.step, (.us | .kernel, .memcpy, .memset, .runtime, .data_loading, .cpu_exec, .other | round)] | map(tostring) | join(",")')
    exp="5,99778,3606,98,41028,4341,27460,5995
6,99208,2948,98,3406,0,16404,4119
7,99114,2949,98,3417,6,19521,2076
8,99021,2975,97,3544,0,15464,1978
9,98791,3596,97,8275,1370,43905,7427
10,98956,2885,98,3714,1400,13235,3910"
    [ "$got" = "$exp" ]
    [ "$(json "$W/r.json" '.processes[0].breakdown.step_us | round')" = 141068 ]
    [ "$(json "$W/r.json" '.processes[0].breakdown.fraction.data_loading * 10000 | round')" = 84 ]
    [ "$(json "$W/r.json" '.processes[0].gpu_utilization * 10000 | round')" = 7027 ]
    [ "$(json "$W/r.json" '[.bottlenecks[] | select(.rule == "data_stall")] | length')" = 0 ]
}

@test "MTIA: HTA temporal breakdown within 0.01 points of HTA's test" {
    cp "$BATS_FILE_TMPDIR/mtia.json" "$W/r.json"
    # tests/test_trace_analysis.py:269-287: 42.383, 54.813, 2.806 each delta=0.01
    json "$W/r.json" '.processes[0].temporal | [(.idle_pct - 42.383), (.compute_pct - 54.813), (.non_compute_pct - 2.806)] | map(fabs <= 0.01) | all' | grep -qx true
}

@test "MTIA: HTA kernel breakdown and idle time breakdown" {
    cp "$BATS_FILE_TMPDIR/mtia.json" "$W/r.json"
    # :304-319 kernel_type_breakdown.iloc[0] COMPUTATION sum 7305597; kernel_breakdown iloc[0] 77283, iloc[11] MEMORY 400892
    [ "$(json "$W/r.json" '.processes[0].kernel_types[0] | "\(.type) \(.us)"')" = "COMPUTATION 7305597" ]
    [ "$(json "$W/r.json" '.processes[0].kernels[0].sum_us')" = 77283 ]
    [ "$(json "$W/r.json" '.processes[0].kernels[11] | "\(.type) \(.sum_us)"')" = "MEMORY 400892" ]
    # :590-624 streams {1,102}; stream 1: host_wait 417937, ratio 0.07; ratios sum to 2.0
    [ "$(json "$W/r.json" '[.processes[0].idle_breakdown[].stream] | sort | map(tostring) | join(",")')" = "1,102" ]
    [ "$(json "$W/r.json" '.processes[0].idle_breakdown[] | select(.stream == 1) | "\(.host_wait_us) \(.host_wait_ratio)"')" = "417937 0.07" ]
    [ "$(json "$W/r.json" '[.processes[0].idle_breakdown[] | .host_wait_ratio + .kernel_wait_ratio + .other_ratio] | add | . * 100 | round')" = 200 ]
}

kernels_vs_hta() { # kernels_vs_hta REPORT FIXTURE: rows that differ from HTA's (none = empty)
    jq -rn --slurpfile a "$1" --slurpfile h "$2" '
      ($a[0].processes[0].kernels | map({type, name, sum: .sum_us, max: .max_us, min: .min_us,
         mean: .mean_us, std: .std_us}) | sort_by(.type, .name)) as $o
      | ($h[0] | sort_by(.type, .name)) as $r
      | if ($o | length) != ($r | length) then "rows \($o | length) vs HTA \($r | length)" else
        range(0; $r | length) as $i | $o[$i] as $x | $r[$i] as $y
        | if [$x.type, $x.name] != [$y.type, $y.name] then "row \($i): \($x.name) vs HTA \($y.name)"
          else ("sum", "max", "min", "mean", "std") as $k
               | select(($x[$k] - $y[$k] | fabs) > 1e-6 * ([($y[$k] | fabs), 1] | max))
               | "\($y.type) \($y.name) \($k): \($x[$k]) vs HTA \($y[$k])" end end'
}

@test "kernel table: HTA's sum/max/min/mean/std exactly (regrouped on per-name sums past 10 names); per-launch fields beside them" {
    # fixtures from tests/ref/gen_kernel_breakdown.py (HTA get_gpu_kernel_breakdown)
    K=tests/ref/fixtures/kernels
    run "$A" --format json -o "$W/m.json" "$K/many_names"
    [ "$status" -eq 0 ]
    run kernels_vs_hta "$W/m.json" "$K/many_names.hta.json"
    [ "$status" -eq 0 ]
    [ -z "$output" ]
    # COMPUTATION has 14 names: "others" holds 4 of them; per launch it is another story
    [ "$(json "$W/m.json" '.processes[0].kernels[] | select(.type == "COMPUTATION" and .name == "others") | [.names, .count, .max_us, .launch_max_us, .launch_mean_us] | map(tostring) | join(" ")')" = "4 10 501 287 165.4" ]
    # a kept name past 10 names: HTA's max = min = mean = sum, std 0; MEMORY (3 names) stays per launch
    [ "$(json "$W/m.json" '.processes[0].kernels[] | select(.name == "gemm_kernel_00") | [.sum_us == .max_us, .min_us == .sum_us, .mean_us == .sum_us, .std_us, .launch_max_us < .sum_us] | map(tostring) | join(" ")')" = "true true true 0 true" ]
    [ "$(json "$W/m.json" '[.processes[0].kernels[] | select(.type == "MEMORY") | .max_us == .launch_max_us and .std_us == .launch_std_us] | all')" = true ]
    for n in mtia:hta/mtia_trace_single_rank ns_resolution:hta/ns_resolution_trace \
             nccl_parser_config:hta/nccl_parser_config resnet50_nw0:kineto-tb/resnet50_num_workers_0; do
        if [ "${n%%:*}" = mtia ]; then
            cp "$BATS_FILE_TMPDIR/mtia.json" "$W/r.json"
        else
            run "$A" --format json -o "$W/r.json" "$T/${n#*:}"
            [ "$status" -eq 0 ]
        fi
        run kernels_vs_hta "$W/r.json" "$K/${n%%:*}.hta.json"
        [ "$status" -eq 0 ]
        [ -z "$output" ] || { echo "${n%%:*}: $output" >&2; false; }
    done
}

@test "nccl_parser_config: 21 NCCL kernels, longest all-reduce arguments" {
    run "$A" --format json -o "$W/r.json" "$T/hta/nccl_parser_config"
    [ "$status" -eq 0 ]
    # tests/test_trace_parse.py:465-489
    [ "$(json "$W/r.json" '.processes[0].nccl.kernels')" = 21 ]
    got=$(json "$W/r.json" '.processes[0].nccl.longest[0] | [.collective_name, .in_msg_nelems, .out_msg_nelems, .in_split_size, .out_split_size, .process_group_name, .process_group_desc, .process_group_ranks] | map(tostring) | join("|")')
    [ "$got" = "allreduce|2049000|2049000|[]|[]|0|default_pg|[0, 1]" ]
}

@test "trace_filter (two ranks): NCCL kernels matched across ranks, skew vs transfer as computed by hand" {
    run "$A" --format json -o "$W/r.json" "$T/hta/trace_filter"
    [ "$status" -eq 0 ]
    # by hand, independently of the analyzer's matching: every pair of NCCL kernels of rank 0 and
    # rank 1 on the same stream that overlap in time is one collective; the rank that started
    # first waited (last start - its start), capped by its duration; the rest is transfer
    for r in 0 1; do gzip -dc "$T/hta/trace_filter/sampled_rank-$r.json.gz" >"$W/k$r.json"; done
    hand=$(jq -rn --slurpfile a "$W/k0.json" --slurpfile b "$W/k1.json" '
        def k($t): [$t[0].traceEvents[] | select(.cat == "kernel" and (.name | startswith("nccl")))];
        [k($a)[] as $x | k($b)[] as $y
         | select($x.tid == $y.tid)
         | ([$x.ts, $y.ts] | max) as $last
         | select($last <= ([$x.ts + $x.dur, $y.ts + $y.dur] | min))
         | {s0: ([$last - $x.ts, $x.dur] | min), s1: ([$last - $y.ts, $y.dur] | min), d0: $x.dur, d1: $y.dur}]
        | [length, (map(.s0) | add), (map(.d0 - .s0) | add), (map(.s1) | add), (map(.d1 - .s1) | add)]
        | map(tostring) | join(" ")')
    echo "by hand: $hand"
    [ "$hand" = "5 31865 184943 0 185039" ] # the pairs: 3 on stream 84, 2 on stream 203
    got=$(json "$W/r.json" '[.collectives[0].matched, .collectives[0].skew_us, .collectives[0].transfer_us,
        .collectives[1].skew_us, .collectives[1].transfer_us] | map(tostring) | join(" ")')
    echo "analyzer: $got"
    [ "$got" = "$hand" ]
    # rank 1 arrived last every time: the skew is charged to it
    [ "$(json "$W/r.json" '.collectives[1] | [.rank, .arrived_last, .skew_caused_us] | map(tostring) | join(" ")')" = "1 5 31865" ]
    run "$A" "$T/hta/trace_filter"
    [[ "$output" == *"Collectives across ranks (skew: waiting for the last rank):"* ]]
    [[ "$output" == *"  31.86 ms  184.94 ms   14.7"* ]]
}

@test "nccl_parser_config as two ranks (rank 1 100 us late): all-reduces matched by process group, skew and nccl-tests bandwidth" {
    mkdir -p "$W/two"
    cp "$T/hta/nccl_parser_config/nccl_data.json.gz" "$W/two/rank0.json.gz"
    gzip -dc "$T/hta/nccl_parser_config/nccl_data.json.gz" |
        jq -c '.distributedInfo.rank = 1 | .traceEvents |= map(if (.ts | type) == "number" then .ts += 100 else . end)' |
        gzip >"$W/two/rank1.json.gz"
    run "$A" --format json -o "$W/r.json" "$W/two"
    [ "$status" -eq 0 ]
    # by hand: the 15 all-reduce kernels overlap their copy (the 6 broadcasts, shorter than
    # 100 us, do not: no collective ends before its last rank arrives); rank 0 waits 100 us at
    # each; bytes = In msg nelems x 4 (Float); busbw = algbw x 2(n-1)/n = algbw for n = 2
    # (the report rounds durations to 2 decimals, bandwidths to 4 significant digits)
    hand=$(gzip -dc "$T/hta/nccl_parser_config/nccl_data.json.gz" | jq -r '
        def sig4: (pow(10; 3 - (log10 | floor))) as $m | (. * $m | round) / $m;
        [.traceEvents[] | select(.cat == "kernel" and (.name | startswith("nccl")) and .dur > 100)] |
        [length, (map([100, .dur] | min) | add), ((map(.dur) | add) * 100 | round / 100),
         ((map(.args["In msg nelems"] * 4) | add) / (map(.dur) | add) / 1000 | sig4)]
        | map(tostring) | join(" ")')
    echo "by hand: $hand"
    got=$(json "$W/r.json" '[.collectives[0].matched, .collectives[0].skew_us,
        .collectives[1].transfer_us, .collectives[1].busbw_gbps] | map(tostring) | join(" ")')
    echo "analyzer: $got"
    [ "$got" = "$hand" ]
    [ "$(json "$W/r.json" '.collectives[1] | [.arrived_last, .skew_caused_us, .algbw_gbps == .busbw_gbps] | map(tostring) | join(" ")')" = "15 1500 true" ]
}

# Two ranks' Kineto traces of newer PyTorch (NCCL args with "Seq"), made here: all-reduces of
# process group "0", 25e6 floats (100 MB), on an H100. Rank 0's trace starts after seq 1 and
# its events are listed out of order: by order and overlap in time, rank 0's seq 2 would pair
# with rank 1's seq 1 and its seq 3 with seq 2.
# kev RANK SEQ B D: one NCCL all-reduce kernel (process group "0", 25e6 floats) on stream 20
kev() {
    seq=""
    [ "${NOSEQ:-}" = 1 ] || seq="\"Seq\": $2, "
    printf '{"ph":"X","cat":"kernel","name":"ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevComm*, unsigned long, ncclWork*)","pid":0,"tid":20,"ts":%s,"dur":%s,"args":{"device":0,"stream":20,"correlation":%s,"Collective name":"allreduce",%s"Process Group Name":"0","Process Group Ranks":"[0, 1]","In msg nelems":25000000,"Out msg nelems":25000000,"dtype":"Float","Group size":2}}' \
        $((1000000 + $3)) "$4" "$((100 + $2))" "$seq"
}
# two ranks: rank 0's trace starts after seq 1; listed out of order
mk() {
    d=$1; mkdir -p "$d"
    {
        printf '{"distributedInfo":{"rank":0,"world_size":2},"deviceProperties":[{"id":0,"name":"NVIDIA H100 80GB HBM3","totalGlobalMem":85520809984}],"traceEvents":[\n'
        kev 0 3 2000 1000; printf ',\n'; kev 0 2 900 1100; printf '\n]}\n'
    } >"$d/rank0.json"
    {
        printf '{"distributedInfo":{"rank":1,"world_size":2},"deviceProperties":[{"id":0,"name":"NVIDIA H100 80GB HBM3","totalGlobalMem":85520809984}],"traceEvents":[\n'
        kev 1 2 1000 1000; printf ',\n'; kev 1 1 0 1000; printf ',\n'; kev 1 3 2000 1000; printf '\n]}\n'
    } >"$d/rank1.json"
}

@test "collectives matched by (process group, Seq) when the NCCL args carry it; busbw against the link" {
    mk "$W/seq"
    run "$A" --format json -o "$W/r.json" "$W/seq"
    [ "$status" -eq 0 ]
    # by hand, seq 2: rank 0 [900, 2000], rank 1 [1000, 2000]: rank 0 waits 100 us, 1000 us
    # transfer each; seq 3: both [2000, 3000], no skew. busbw = algbw = 100 MB / 1 ms = 100 GB/s
    # (2(n-1)/n = 1 for n = 2), 22.2 % of NVLink 4's 450 GB/s per direction
    jq -e '.collectives[0] | .rank == 0 and .matched == 2 and .skew_us == 100
           and .transfer_us == 2000 and .busbw_gbps == 100 and .link_gbps == 450
           and .link == "NVLink 4 (H100 SXM)" and .busbw_link_fraction == 0.2222' "$W/r.json"
    jq -e '.collectives[1] | .rank == 1 and .matched == 2 and .skew_us == 0
           and .transfer_us == 2000 and .arrived_last == 1 and .skew_caused_us == 100' "$W/r.json"
    # comm_bound's evidence sets the bus bandwidth against the link
    jq -e '[.bottlenecks[] | select(.rule == "comm_bound") | .evidence
            | .busbw_gbps == 100 and .link_gbps == 450 and .busbw_link_fraction == 0.2222] | length == 2 and all' \
        "$W/r.json"
    run "$A" "$W/seq"
    [[ "$output" == *"busbw of link"* ]]
    [[ "$output" == *"22.2% of 450 GB/s (NVLink 4 (H100 SXM))"* ]]
    # without Seq the order-based matching stays (and pairs these wrongly: 1900 us of skew)
    NOSEQ=1 mk "$W/noseq"
    run "$A" --format json -o "$W/r.json" "$W/noseq"
    [ "$status" -eq 0 ]
    jq -e '.collectives[1] | .skew_us == 1900 and .transfer_us == 100' "$W/r.json"
}

@test "text report names the bottleneck, the worst steps and the PyTorch remedy" {
    run "$A" "$NW0"
    [ "$status" -eq 0 ]
    [[ "$output" == *"[CRITICAL] data_stall"* ]]
    [[ "$output" == *"33.37% of step time is spent waiting for data"* ]]
    [[ "$output" == *"worst steps: #5 (rank 0"* ]]
    [[ "$output" == *"DataLoader(num_workers="* ]]
    [[ "$output" == *"GPU utilization (kernel busy / all steps): 55.51%"* ]]
}

@test "--fail-on critical exits 1 on the stalled run and 0 on the fixed one" {
    run "$A" --fail-on critical -o "$W/a.txt" "$NW0"
    [ "$status" -eq 1 ]
    [[ "$output" == "swift-trace-analyze: bottleneck at or above --fail-on level found" ]]
    run "$A" --threshold launch_bound=90 --fail-on critical -o "$W/b.txt" "$NW4"
    [ "$status" -eq 0 ]
    run "$A" --threshold nonsense=3 "$NW4"
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "swift-trace-analyze: --threshold: expected RULE=NUMBER"* ]]
}

@test "md and html reports: self-contained, with SVG" {
    run "$A" --format md "$NW0"
    [ "$status" -eq 0 ]
    [[ "$output" == "# swift-trace-analyze report"* ]]
    [[ "$output" == *"| data_loading |"* ]]
    run "$A" --format html -o "$W/r.html" "$NW0" "$NW4"
    [ "$status" -eq 0 ]
    grep -q '<svg' "$W/r.html"
    grep -q 'Worst steps per rank' "$W/r.html"
    ! grep -Eq '(src|href)="https?:' "$W/r.html"
}

@test "damaged inputs: file and byte offset, the others still analysed, --strict fails" {
    zcat "$NW4" | head -c 300000 > "$W/trunc.json"
    printf 'this is not gzip' > "$W/bad.json.gz"
    printf '{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"dur":5}]}' > "$W/nots.json"
    printf '{"traceEvents":[{"ph":"X","cat":"kernel","name":"k","pid":0,"tid":7,"ts":"12","dur":5}]}' > "$W/type.json"
    run "$A" --format json -o "$W/r.json" "$W/trunc.json" "$W/bad.json.gz" "$W/nots.json" "$W/type.json" "$NW0"
    [ "$status" -eq 0 ]
    [[ "$output" == *"swift-trace-analyze:$W/trunc.json:"*": byte "*": truncated JSON (end of input inside traceEvents)"* ]]
    [[ "$output" == *"swift-trace-analyze:$W/bad.json.gz: byte 0: not a gzip file"* ]]
    [[ "$output" == *"swift-trace-analyze:$W/nots.json:1: byte 16: event \"k\" without ts"* ]]
    [[ "$output" == *"swift-trace-analyze:$W/type.json:1: byte 16: \"ts\" is not a number"* ]]
    [[ "$output" == *"warning: 4 inputs skipped, 1 analysed"* ]]
    [ "$(json "$W/r.json" '.processes | length')" = 1 ]
    [ "$(json "$W/r.json" '.inputs_failed')" = 4 ]
    run "$A" -q "$W/r.json"
    [ "$status" -eq 1 ]
    [[ "${lines[0]}" == "swift-trace-analyze:$W/r.json:"*": byte "*": no \"traceEvents\" array: not a Chrome/Kineto trace" ]]
    head -c 300000 "$NW4" > "$W/cut.json.gz"
    run "$A" -q "$W/cut.json.gz"
    [ "$status" -eq 1 ]
    [[ "${lines[0]}" == "swift-trace-analyze:$W/cut.json.gz:"*": byte "*": gzip stream ends early (truncated file?)" ]]
    run "$A" --strict -o "$W/s.txt" "$W/type.json" "$NW0"
    [ "$status" -eq 1 ]
    [ ! -e "$W/s.txt" ]
    run "$A" "$W/bad.json.gz"
    [ "$status" -eq 1 ]
    [[ "${lines[-1]}" == "swift-trace-analyze: no trace could be read" ]]
}

@test "--merge: one JSON Object trace, µs, no displayTimeUnit, pids never collide across ranks" {
    run "$A" -q --merge "$W/m.json.gz" -o "$W/r.txt" "$T/hta/trace_filter"
    [ "$status" -eq 0 ]
    zcat "$W/m.json.gz" > "$W/m.json"
    [ "$(jq -r 'keys | join(",")' "$W/m.json")" = traceEvents ]
    # rank 0's pids and rank 1's pids are disjoint
    [ "$(jq '[.traceEvents[] | .pid] | unique | map(tostring | .[0:1]) | unique | length' "$W/m.json")" = 2 ]
    # processes are named per rank: GPUs by device, the host process by its name
    jq -r '.traceEvents[] | select(.name == "process_name") | .args.name' "$W/m.json" | grep -qx "rank 1 GPU 0 @ sampled_rank-1.json.gz"
    jq -r '.traceEvents[] | select(.name == "process_name") | .args.name' "$W/m.json" | grep -qx "pyper:trainer:0:1 rank 1 @ sampled_rank-1.json.gz"
    # every non-metadata event has a numeric ts
    [ "$(jq '[.traceEvents[] | select(.ph != "M" and (.ts | type) != "number")] | length' "$W/m.json")" = 0 ]
    # flow ids are offset per rank: no id is used by two ranks
    [ "$(jq '[.traceEvents[] | select(.ph == "s") | .id] | (length == (unique | length))' "$W/m.json")" = true ]
    # --ranks and --steps narrow it
    run "$A" -q --merge "$W/m1.json" --ranks 1 --steps 552-552 -o "$W/r.txt" "$T/hta/trace_filter"
    [ "$status" -eq 0 ]
    [ "$(jq '[.traceEvents[] | .pid] | unique | map(tostring | .[0:1]) | unique | length' "$W/m1.json")" = 1 ]
    [ "$(jq '.traceEvents | length' "$W/m1.json")" -lt "$(jq '.traceEvents | length' "$W/m.json")" ]
}

@test "usage errors exit 2" {
    run "$A"
    [ "$status" -eq 2 ]
    run "$A" --format xml "$NW0"
    [ "$status" -eq 2 ]
    run "$A" --steps 3 "$NW0"
    [ "$status" -eq 2 ]
}

@test "fuzz: the trace loader survives mutated inputs" {
    run "$SWIFT_BUILD/fuzz/fuzz_trace_load" -runs=300 tests/fuzz/corpus/trace_load
    [ "$status" -eq 0 ]
}

@test "a trace named *.json as the first argument is a trace, not a config file" {
    run "$A" "$T/kineto-tb/tb_test_all_categories.json" --format json -o "$W/r.json"
    [ "$status" -eq 0 ]
    [ "$(json "$W/r.json" '.processes | length')" = 1 ]
    run "$A" "$T/kineto-tb/tb_test_all_categories.json"
    [ "$status" -eq 0 ]
}

@test "our JSONL traces of two ranks: clocks aligned, merged with names per rank, size warning, --window" {
    mkdir "$W/traces"
    for r in 0 1; do
        {
            printf '{"ph":"M","name":"process_name","pid":7,"tid":7,"ts":0,"args":{"name":"swift-train rank %d @ n%d"}}\n' $r $r
            printf '{"ph":"M","name":"swift_meta","pid":7,"tid":7,"ts":0,"args":{"schema_version":1,"stage":"train","rank":%d,"world_size":2,"host":"n%d","clock_offset_us":%d,"argv":["swift-train","--num-workers","2","shards/"]}}\n' $r $r $((r * 500))
            for s in 1 2 3 4; do
                b=$((1000000 + s * 100000 + r * 500))
                printf '{"ph":"X","cat":"step","name":"step","pid":7,"tid":7,"ts":%d,"dur":100000,"args":{"step":%d,"tokens":4096}}\n' $b $s
                printf '{"ph":"X","cat":"data","name":"data_wait","pid":7,"tid":7,"ts":%d,"dur":%d}\n' $b $((20000 + r * 20000))
                printf '{"ph":"s","cat":"flow","name":"launch","pid":7,"tid":7,"id":%d,"ts":%d}\n' $s $((b + 50000))
            done
        } > "$W/traces/train-n$r-7-r$r.trace.jsonl"
    done
    run "$A" --format json -o "$W/r.json" --merge "$W/m.json" --merge-warn-size 1K "$W/traces"
    [ "$status" -eq 0 ]
    [[ "$output" == *"warning: merged trace '$W/m.json' is 0 MB: viewers struggle above ~256 MB"* ]]
    # rank 1's clock is 500 µs ahead: aligned, its steps start with rank 0's
    [ "$(json "$W/r.json" '[.processes[].step_list[0].ts] | unique | length')" = 1 ]
    # data_wait 20% and 40%: both stall, rank 1 critical with the exact command line
    [ "$(json "$W/r.json" '.bottlenecks[] | select(.rule == "data_stall" and .rank == 1) | .severity')" = critical ]
    [ "$(json "$W/r.json" '.bottlenecks[] | select(.rule == "data_stall" and .rank == 1) | .command')" = "swift-train --num-workers 4 shards/ --prefetch 8" ]
    [ "$(json "$W/r.json" '.bottlenecks[] | select(.rule == "straggler") | .rank')" = "" ] # equal step times
    [ "$(jq -r '[.traceEvents[] | select(.name == "process_name") | .args.name] | sort | join("|")' "$W/m.json")" = "swift-train rank 0 @ n0|swift-train rank 1 @ n1" ]
    [ "$(jq '[.traceEvents[] | .pid] | unique | length' "$W/m.json")" = 2 ]
    [ "$(jq '[.traceEvents[] | select(.ph == "s") | .id] | unique | length' "$W/m.json")" = 8 ]
    [ "$(jq '[.traceEvents[] | select(.name == "swift_meta")] | length' "$W/m.json")" = 0 ]
    run "$A" -q --merge "$W/w.json" --window 0 -o "$W/r2.txt" "$W/traces"
    [ "$status" -eq 0 ]
    [ "$(jq '[.traceEvents[] | select(.name == "step")] | length' "$W/w.json")" = 2 ]
}

@test "our traces: a prefetch thread's data spans overlapping a step are no data stall" {
    # step thread 1: data_wait 1 ms, forward 40 ms, backward 50 ms; prefetch thread 2 works
    # 80 ms per step in parallel (cat data) — hidden by compute, so data_wait stays 1 ms
    {
        printf '{"ph":"M","name":"swift_meta","pid":5,"tid":1,"ts":0,"args":{"schema_version":1,"stage":"train","rank":0,"world_size":1,"host":"h","clock_offset_us":0,"argv":["swift-train","shards/"]}}\n'
        for s in 0 1 2 3; do
            t=$((1000000 + s * 100000))
            printf '{"ph":"X","cat":"step","name":"step","pid":5,"tid":1,"ts":%d,"dur":100000,"args":{"step":%d}}\n' $t $s
            printf '{"ph":"X","cat":"data","name":"data_wait","pid":5,"tid":1,"ts":%d,"dur":1000}\n' $t
            printf '{"ph":"X","cat":"compute","name":"forward","pid":5,"tid":1,"ts":%d,"dur":40000}\n' $((t + 1000))
            printf '{"ph":"X","cat":"compute","name":"backward","pid":5,"tid":1,"ts":%d,"dur":50000}\n' $((t + 41000))
            printf '{"ph":"X","cat":"data","name":"prefetch","pid":5,"tid":2,"ts":%d,"dur":80000}\n' $((t + 5000))
        done
    } >"$W/bg.jsonl"
    run "$A" -f json "$W/bg.jsonl"
    [ "$status" -eq 0 ]
    [ "$(jq '.processes[0].breakdown.us.data_wait' <<<"$output")" = 1000 ]
    [ "$(jq '.processes[0].breakdown.us.forward' <<<"$output")" = 40000 ]
    [ "$(jq '[.bottlenecks[] | select(.rule == "data_stall")] | length' <<<"$output")" = 0 ]
}

profiled_trace() { # a real swift-train trace with per-op spans in 2 of its 4 steps: $W/t.jsonl
    run "$SWIFT_BIN/swift-train" --model tests/fixtures/model/llama -o "$W/run" --max-steps 4 \
        --save-steps 100 --eval-steps 100 -j 1 --trace "$W/t.jsonl" \
        --profile wait=1,warmup=1,active=2 tests/fixtures/shards
    [ "$status" -eq 0 ]
    grep -q '"name":"lm_head.backward"' "$W/t.jsonl"
}

@test "--profile: per-op spans only inside the profiled steps, not in the eval after them" {
    run "$SWIFT_BIN/swift-train" --model tests/fixtures/model/llama -o "$W/run" --max-steps 4 \
        --save-steps 100 --eval-steps 2 -j 1 --trace "$W/t.jsonl" \
        --profile wait=1,warmup=1,active=2 tests/fixtures/shards
    [ "$status" -eq 0 ]
    grep -q '"cat":"eval"' "$W/t.jsonl"
    # compute spans outside every step span (the evals after steps 2 and 4 ran with detail on)
    n=$(jq -s '[.[] | select(.ph == "X" and .cat == "step")] as $s
        | [.[] | select(.ph == "X" and .cat == "compute") | . as $e
           | select(all($s[]; $e.ts < .ts or $e.ts >= .ts + .dur))] | length' "$W/t.jsonl")
    [ "$n" -eq 0 ] || { echo "$n per-op spans outside the steps"; false; }
}

near() { # near A B TOL: |A - B| <= TOL
    awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t) }' ||
        { echo "$1 vs $2 (tolerance $3)"; false; }
}

@test "--profile steps: per-op spans inside backward count as backward (containment, not names)" {
    profiled_trace
    run "$A" -f json -o "$W/r.json" "$W/t.jsonl"
    [ "$status" -eq 0 ]
    # the independent sum: each phase span's duration inside the step spans, per step (the
    # phases do not overlap, so the breakdown must equal it; the ops inside add nothing)
    for ph in data_wait forward backward optimizer; do
        exp=$(jq -s --arg ph "$ph" '[.[] | select(.ph == "X" and .cat == "step")] as $s
            | ([.[] | select(.ph == "X" and .name == $ph) | . as $e
                | select(any($s[]; .tid == $e.tid and .ts <= $e.ts and $e.ts < .ts + .dur)) | .dur]
               | add) / ($s | length)' "$W/t.jsonl")
        near "$(jq ".processes[0].breakdown.us.$ph" "$W/r.json")" "$exp" 1
    done
    # the timeline of the profiled steps: no forward segment inside a backward span
    bw=$(jq -s -c '[.[] | select(.ph == "X" and .name == "backward") | [.ts, .ts + .dur]]' "$W/t.jsonl")
    jq -e --argjson bw "$bw" '[.processes[0].step_list[] | .ts as $t | (.timeline // [])[]
        | select(.[0] == "forward") | [$t + .[1], $t + .[2]] as $g
        | select(any($bw[]; .[0] <= $g[0] + 1 and $g[1] <= .[1] + 1))] | length == 0' "$W/r.json"
}

rows_after() { # rows_after FILE HEADER-REGEX: the indented rows of the text table after HEADER
    awk -v h="$2" 'f && /^    / { n++; next } f { exit } $0 ~ h { f = 1 } END { print n + 0 }' "$1"
}

@test "--profile steps: one per-op table in every format (time per step, share, calls, GFLOP/s); --top limits all" {
    profiled_trace
    # the independent sums over the steps that hold per-op spans (jq, from the trace itself)
    jq -s '[.[] | select(.ph == "X" and .cat == "step")] as $s | [.[] | select(.ph == "X")] as $x
        | [$s[] | . as $t | select(any($x[]; .name == "cross_entropy" and .tid == $t.tid
            and .ts >= $t.ts and .ts < $t.ts + $t.dur))] as $p
        | def per(n): [$x[] | select(.name == n) | . as $e
            | select(any($p[]; .tid == $e.tid and .ts <= $e.ts and $e.ts < .ts + .dur))];
          {steps: ($p | length), step_us: ([$p[].dur] | add / length),
           ce: (per("cross_entropy") | {us: ([.[].dur] | add / ($p | length)), calls: (length / ($p | length))}),
           lm: (per("lm_head") | {us: ([.[].dur] | add / ($p | length)),
                gflops: (([.[].args.flops] | add) / ([.[].dur] | add) / 1e3)})}' "$W/t.jsonl" >"$W/exp.json"
    [ "$(jq .steps "$W/exp.json")" = 2 ]
    run "$A" -f json --top 30 -o "$W/r.json" "$W/t.jsonl"
    [ "$status" -eq 0 ]
    near "$(jq '.processes[0].ops.steps' "$W/r.json")" 2 0
    near "$(jq '.processes[0].ops.step_us' "$W/r.json")" "$(jq .step_us "$W/exp.json")" 0.01
    ce='.processes[0].ops.rows[] | select(.name == "cross_entropy")'
    lm='.processes[0].ops.rows[] | select(.name == "lm_head")'
    near "$(jq "$ce | .self_us_per_step" "$W/r.json")" "$(jq .ce.us "$W/exp.json")" 0.01
    near "$(jq "$ce | .total_us_per_step" "$W/r.json")" "$(jq .ce.us "$W/exp.json")" 0.01
    near "$(jq "$ce | .calls_per_step" "$W/r.json")" "$(jq .ce.calls "$W/exp.json")" 0
    near "$(jq "$ce | .share" "$W/r.json")" "$(jq '.ce.us / .step_us' "$W/exp.json")" 0.00001
    [ "$(jq -r "$ce | .phase" "$W/r.json")" = forward ]
    [ "$(jq -r '.processes[0].ops.rows[] | select(.name == "lm_head.backward") | .phase' "$W/r.json")" = backward ]
    near "$(jq "$lm | .total_us_per_step" "$W/r.json")" "$(jq .lm.us "$W/exp.json")" 0.01
    near "$(jq "$lm | .gflops" "$W/r.json")" "$(jq .lm.gflops "$W/exp.json")" 0.01
    [ "$(jq '.processes[0].ops.rows[] | select(.name == "layer.0.forward") | .gflops' "$W/r.json")" = null ]
    # every format lists the hotspots, the same rows
    for f in text md html; do
        run "$A" -f $f --top 30 -o "$W/r.$f" "$W/t.jsonl"
        [ "$status" -eq 0 ]
        grep -q 'cross_entropy' "$W/r.$f" || { echo "$f: no cross_entropy"; false; }
        grep -q 'lm_head\b' "$W/r.$f" || { echo "$f: no lm_head"; false; }
    done
    n=$(jq '.processes[0].ops.n_rows' "$W/r.json")
    [ "$n" -gt 20 ]
    [ "$(jq '.processes[0].ops.rows | length' "$W/r.json")" = "$n" ]
    [ "$(rows_after "$W/r.text" '^    op +phase')" = "$n" ]
    # --top N: N rows in every format
    for top in 3 20; do
        for f in json text md html; do run "$A" -f $f --top $top -o "$W/t$top.$f" "$W/t.jsonl"; done
        [ "$(jq '.processes[0].ops.rows | length' "$W/t$top.json")" = $top ]
        [ "$(rows_after "$W/t$top.text" '^    op +phase')" = $top ]
        [ "$(grep -c '^| `.*` | \(forward\|backward\|optimizer\|data_wait\|grad_sync\) |' "$W/t$top.md")" = $top ]
        [ "$(sed -n '/Per-op time/,/<\/table>/p' "$W/t$top.html" | grep -c '^<tr><td><code>')" = $top ]
    done
}

@test "processes without steps: two spans that round to one interval are siblings, not nested" {
    # export's back-to-back sub-us spans: read ..681.210 and convert ..681.370 both read as
    # ..681.25 (doubles at 1.8e15 us are 0.25 us apart), with the same 0.16 us length
    {
        echo '{"ph":"M","name":"process_name","pid":7,"tid":7,"ts":0,"args":{"name":"swift-export @ h"}}'
        echo '{"ph":"X","cat":"export","name":"read","pid":7,"tid":7,"ts":1796152441700681.210,"dur":0.160}'
        echo '{"ph":"X","cat":"export","name":"convert","pid":7,"tid":7,"ts":1796152441700681.370,"dur":0.160}'
        echo '{"ph":"X","cat":"export","name":"write","pid":7,"tid":7,"ts":1796152441700682.000,"dur":3.000}'
        echo '{"ph":"X","cat":"export","name":"convert","pid":7,"tid":7,"ts":1796152441700682.500,"dur":1.000}'
    } >"$W/tie.jsonl"
    run "$A" -f json "$W/tie.jsonl"
    [ "$status" -eq 0 ]
    [ "$(jq -c '[.processes[0].phases.rows[] | [.name, .count]] | sort' <<<"$output")" = \
        '[["convert",1],["read",1],["write",1]]' ]
}

@test "processes without steps (eval, export, preprocess): wall time by phase, no step rows, in every format" {
    export OMP_NUM_THREADS=2
    run "$SWIFT_BIN/swift-eval" tests/fixtures/eval/llama --task exact \
        --dataset tests/fixtures/eval/synth/exact.jsonl --limit 4 --batch-size 2 \
        --max-new-tokens 4 --quiet --trace "$W/eval.jsonl"
    [ "$status" -eq 0 ]
    mkdir "$W/llama"
    cp tests/ref/fixtures/export/llama/* "$SHARED/data/tokenizers/gpt2/tokenizer.json" \
        "$SHARED/data/tokenizers/gpt2/tokenizer_config.json" "$W/llama/"
    run "$SWIFT_BIN/swift-export" "$W/llama" --dtype q8_0 -o "$W/m.gguf" --trace "$W/export.jsonl"
    [ "$status" -eq 0 ]
    head -n 50 "$SHARED/data/datasets/gsm8k/test.jsonl" >"$W/g.jsonl"
    run "$SWIFT_BIN/swift-preprocess" --tokenizer "$SHARED/data/tokenizers/qwen3" -o "$W/sh" \
        --trace "$W/pre.jsonl" "$W/g.jsonl"
    [ "$status" -eq 0 ]
    for t in eval export pre; do
        # the independent answer: the spans no other span of their thread holds (starts at or
        # before it, the longer on a tie, ends after its start and no earlier than its end
        # less 0.5 us: ts are doubles, 0.25 us apart), summed by name
        jq -s -c '[.[] | select(.ph == "X")] as $x | [$x[] | . as $e | select(any($x[];
                .tid == $e.tid and .ts <= $e.ts and $e.ts < .ts + .dur
                and $e.ts + $e.dur <= .ts + .dur + 0.5 and (.ts < $e.ts or .dur > $e.dur)) | not)]
            | group_by(.name) | map({name: .[0].name, count: length, us: ([.[].dur] | add)})
            | sort_by(-.us)' "$W/$t.jsonl" >"$W/$t.exp"
        run "$A" -f json --top 20 -o "$W/$t.json" "$W/$t.jsonl"
        [ "$status" -eq 0 ]
        jq -e '.processes[0] | .steps == 0 and .step_time_us == null and .breakdown == null' "$W/$t.json"
        [ "$(jq -c '[.processes[0].phases.rows[] | {name, count}]' "$W/$t.json")" = "$(jq -c 'map({name, count})' "$W/$t.exp")" ]
        for i in $(seq 0 $(($(jq length "$W/$t.exp") - 1))); do
            near "$(jq ".processes[0].phases.rows[$i].us" "$W/$t.json")" "$(jq ".[$i].us" "$W/$t.exp")" 0.01
            # share is rounded to 1e-6, so share x wall is good to half a millionth of the wall
            near "$(jq ".processes[0].phases | .rows[$i].share * .wall_us" "$W/$t.json")" \
                "$(jq ".[$i].us" "$W/$t.exp")" "$(jq ".processes[0].phases.wall_us * 5e-7 + 0.01" "$W/$t.json")"
        done
        top=$(jq -r '.[0].name' "$W/$t.exp")
        for f in text md html; do
            run "$A" -f $f -o "$W/$t.$f" "$W/$t.jsonl"
            [ "$status" -eq 0 ]
            grep -q "$top" "$W/$t.$f"
            ! grep -q 'mean step\|/step\|0 steps' "$W/$t.$f" || { echo "$t.$f: step rows"; false; }
        done
        grep -q '^  no steps: wall .* by phase (top-level spans):$' "$W/$t.text"
        grep -q '^| phase | category | count | time | share of wall |$' "$W/$t.md"
        grep -q '<h2>Wall time by phase (processes without steps)</h2>' "$W/$t.html"
        ! grep -q 'Step time breakdown\|Worst steps' "$W/$t.html"
    done
    # eval: generate holds prefill and decode; the top-level phase is generate alone
    [ "$(jq -r '[.processes[0].phases.rows[].name] | join(",")' "$W/eval.json")" = generate ]
}

# Our own traces, made by swift-train (no shared data needed).
train_trace() { # train_trace OUT.jsonl [more swift-train flags]: 30 steps of the fixture model
    local out=$1
    shift
    local b
    b=$(basename "$out" .jsonl)
    "$SWIFT_BIN/swift-train" --model tests/fixtures/model/llama -o "$W/run-$b" \
        --max-steps 30 --save-steps 100 --eval-steps 100 -j 1 --trace "$out" "$@" \
        tests/fixtures/shards >/dev/null 2>&1
}

@test "a corrupt line in the middle of a real trace is skipped and counted; --strict fails with file:line" {
    train_trace "$W/t.jsonl"
    n=$(wc -l <"$W/t.jsonl")
    mid=$((n / 2))
    # line $mid is cut inside a string, as a torn write would leave it
    awk -v m=$mid 'NR == m { print substr($0, 1, 20); next } 1' "$W/t.jsonl" >"$W/c.trace.jsonl"
    run "$A" -f json -o "$W/r.json" "$W/c.trace.jsonl"
    [ "$status" -eq 0 ]
    [[ "$output" == *"swift-trace-analyze:$W/c.trace.jsonl:$mid: byte "*": the line ends inside a JSON value (line skipped)"* ]]
    [ "$(json "$W/r.json" '.processes[0].steps')" = 30 ]
    [ "$(json "$W/r.json" .bad_lines)" = 1 ]
    [ "$(json "$W/r.json" '.processes[0].bad_line_numbers | map(tostring) | join(",")')" = "$mid" ]
    [ "$(json "$W/r.json" '.processes[0].truncated_tail_line')" = null ]
    run "$A" "$W/c.trace.jsonl"
    [ "$status" -eq 0 ]
    [[ "$output" == *"warning: 1 bad line skipped (line $mid)"* ]]
    run "$A" -f md "$W/c.trace.jsonl"
    [[ "$output" == *"warning: 1 bad line skipped (line $mid)"* ]]
    run "$A" -f html -o "$W/r.html" "$W/c.trace.jsonl"
    grep -q "1 bad line skipped (line $mid)" "$W/r.html"
    run "$A" --strict -o "$W/s.txt" "$W/c.trace.jsonl"
    [ "$status" -eq 1 ]
    [[ "${lines[-1]}" == "swift-trace-analyze:$W/c.trace.jsonl:$mid: bad line (1 bad line in all inputs; --strict)" ]]
    [ ! -e "$W/s.txt" ]
    # many bad lines: the first 3 named, the count said
    awk 'NR % 10 == 5 { print "x" $0; next } 1' "$W/t.jsonl" >"$W/m.trace.jsonl"
    run "$A" -q -o "$W/m.txt" "$W/m.trace.jsonl"
    [ "$status" -eq 0 ]
    [ "$(grep -c '(line skipped)' <<<"$output")" = 3 ]
    [[ "$output" == *"$W/m.trace.jsonl: $(((n + 5) / 10)) bad lines skipped in all (the first 3 named above)"* ]]
}

@test "a truncated last line is noted, not a bad line; --strict accepts it" {
    train_trace "$W/t.jsonl"
    n=$(wc -l <"$W/t.jsonl")
    head -c -25 "$W/t.jsonl" >"$W/k.trace.jsonl"
    run "$A" --strict -f json -o "$W/r.json" "$W/k.trace.jsonl"
    [ "$status" -eq 0 ]
    [[ "$output" == *"warning: $W/k.trace.jsonl:$n: truncated last line ignored (was the writer killed?)"* ]]
    [ "$(json "$W/r.json" '.processes[0].truncated_tail_line')" = "$n" ]
    [ "$(json "$W/r.json" .bad_lines)" = 0 ]
    run "$A" "$W/k.trace.jsonl"
    [[ "$output" == *"warning: truncated last line $n ignored"* ]]
}

@test "an empty trace and a trace of garbage are named and fail (no data: exit 1)" {
    : >"$W/e.trace.jsonl"
    run "$A" "$W/e.trace.jsonl"
    [ "$status" -eq 1 ]
    [ "${lines[0]}" = "swift-trace-analyze: $W/e.trace.jsonl: empty trace (no events)" ]
    [ "${lines[-1]}" = "swift-trace-analyze: no trace could be read" ]
    [[ "$output" != *"swift-?"* ]]
    printf 'garbage\n\0\0\0\n{"not": "closed"\n' >"$W/g.trace.jsonl"
    run "$A" "$W/g.trace.jsonl"
    [ "$status" -eq 1 ]
    [[ "$output" == *"swift-trace-analyze:$W/g.trace.jsonl:1: byte 0: not a trace event (one JSON object per line) (line skipped)"* ]]
    [[ "$output" == *"swift-trace-analyze: $W/g.trace.jsonl: no trace event could be read (3 bad lines)"* ]]
    # beside a good trace: reported and skipped, the good one analysed; --strict fails
    train_trace "$W/t.jsonl"
    run "$A" -o "$W/r.txt" "$W/e.trace.jsonl" "$W/t.jsonl"
    [ "$status" -eq 0 ]
    [[ "$output" == *"warning: 1 input skipped, 1 analysed"* ]]
    run "$A" --strict -o "$W/r.txt" "$W/e.trace.jsonl" "$W/t.jsonl"
    [ "$status" -eq 1 ]
}

@test "a remedy's command never walks into the traced run: new -o and new --trace" {
    train_trace "$W/slow.jsonl" --data-delay-ms 20
    run "$A" -f json -o "$W/r.json" "$W/slow.jsonl"
    [ "$status" -eq 0 ]
    cmd=$(json "$W/r.json" '.bottlenecks[] | select(.rule == "data_stall") | .command')
    [[ "$cmd" == *" -o $W/run-slow-2 "* ]]
    [[ "$cmd" == *" --trace $W/slow-2.jsonl "* ]]
    [[ "$cmd" != *" -o $W/run-slow "* ]]
    # the first remedy was run: the next one names the next free directory
    mkdir "$W/run-slow-2"
    run "$A" -f json -o "$W/r.json" "$W/slow.jsonl"
    cmd=$(json "$W/r.json" '.bottlenecks[] | select(.rule == "data_stall") | .command')
    [[ "$cmd" == *" -o $W/run-slow-3 "* ]]
}

# A real trace with every 4th optimizer span made $2 µs longer (its step too, later events
# shifted): what a machine where the threads wait for cores looks like, deterministically.
stretch_optimizer() { # stretch_optimizer IN OUT DELTA_US
    jq -c -s --argjson D "$3" '
        ([.[] | select(.ph == "X" and .name == "optimizer") | .ts] | sort
            | to_entries | map(select(.key % 4 == 0) | .value)) as $S
        | .[]
        | if .ph == "M" then . else
            .ts as $t | (.dur // 0) as $d
            | .ts = $t + $D * ([$S[] | select(. < $t)] | length)
            | if .ph == "X" and .name == "optimizer" and ($S | index($t)) != null then .dur += $D
              elif .ph == "X" and .name == "step" and ([$S[] | select(. >= $t and . < $t + $d)] | length) > 0 then .dur += $D
              else . end
          end' "$1" >"$2"
}

@test "oversubscription: a real run's trace records threads and wait policy; slow optimizer steps name the phase and the remedy" {
    train_trace "$W/t.jsonl" -j 2
    # swift_meta says how the threads waited: our default, or the user's choice
    [ "$(jq -r 'select(.name == "swift_meta") | "\(.args.omp_threads) \(.args.omp_wait_policy)"' "$W/t.jsonl")" = "2 passive (default)" ]
    OMP_WAIT_POLICY=active train_trace "$W/a.jsonl" -j 2
    [ "$(jq -r 'select(.name == "swift_meta") | .args.omp_wait_policy' "$W/a.jsonl")" = active ]
    stretch_optimizer "$W/a.jsonl" "$W/s.jsonl" 2000000
    run "$A" -f json -o "$W/r.json" "$W/s.jsonl"
    [ "$status" -eq 0 ]
    b='.bottlenecks[] | select(.rule == "oversubscription")'
    [ "$(json "$W/r.json" "$b | .severity")" = critical ]
    [ "$(json "$W/r.json" "$b | .evidence | \"\(.phase) \(.omp_threads) \(.omp_wait_policy) \(.steps)\"")" = "optimizer 2 active 30" ]
    [ "$(json "$W/r.json" "$b | .evidence.p90_us > 2000000")" = true ]
    json "$W/r.json" "$b | .summary" | grep -q "^optimizer time varies between identical steps: median .*, p90 2.* s (.*x), .*2 OpenMP threads, wait policy active"
    cmd=$(json "$W/r.json" "$b | .command")
    [[ "$cmd" == "OMP_WAIT_POLICY=passive "*" --threads 1" ]]
    [[ "$cmd" != *" -j 2 "* && "$cmd" == *" -o $W/run-a-2 "* ]]
    run "$A" "$W/s.jsonl"
    [[ "$output" == *"[CRITICAL] oversubscription"* ]]
    [[ "$output" == *"remedy: OpenMP threads spin while they wait"*"OMP_WAIT_POLICY=passive"* ]]
}
