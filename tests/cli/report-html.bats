#!/usr/bin/env bats
# swift-trace-analyze --format html on real traces (and two synthetic ranks): one well-formed, self-contained page (every
# SVG parses as XML, no network), units people read (ms, %, GB/s; never raw microseconds), no
# empty sections, and a step-time chart with one stacked bar piece per step and part.

setup() {
    A="$SWIFT_BIN/swift-trace-analyze"
    T="$SHARED/data/traces"
    W="$BATS_TEST_TMPDIR"
    CHECK="python3 $BATS_TEST_DIRNAME/html_check.py"
}

# The number of (step, part) pairs of the first process with steps that have time: the stacked
# rects the step chart must draw.
pieces() {
    jq '[.processes[] | select((.step_list | length) > 0)][0] as $p
        | [$p.step_list[] as $s | $p.breakdown.parts[] | select(($s.us[.] // 0) > 0)] | length' "$1"
}

@test "html of a --profile swift-train run (CPU): well-formed, step chart per step and part, no empty Top kernels" {
    run "$SWIFT_BIN/swift-train" --model tests/fixtures/model/llama -o "$W/run" --max-steps 6 \
        --save-steps 100 --eval-steps 100 -j 1 --trace "$W/t.jsonl" \
        --profile wait=1,warmup=1,active=2 tests/fixtures/shards
    [ "$status" -eq 0 ]
    run "$A" -f json -o "$W/r.json" "$W/t.jsonl"
    [ "$status" -eq 0 ]
    run "$A" -f html -o "$W/r.html" "$W/t.jsonl"
    [ "$status" -eq 0 ]
    run $CHECK --count-chart "$W/r.html"
    echo "$output"
    [ "$status" -eq 0 ]
    n=$(pieces "$W/r.json")
    [ "$n" -ge 12 ]
    [ "$output" = "$n" ]
    grep -q '<h2>Step time over the run</h2>' "$W/r.html"
    grep -q '>step time (ms)</text>' "$W/r.html"
    [ "$(grep -c 'class="xt"' "$W/r.html")" -ge 2 ]
    [ "$(grep -c 'class="yt"' "$W/r.html")" -ge 3 ]
    # the worst steps on a time axis in ms
    [ "$(grep -c 'class="tt"' "$W/r.html")" -ge 3 ]
    grep -q ">ms from the step's start</text>" "$W/r.html"
    # a CPU run has no kernels: no heading for them
    ! grep -q 'Top kernels' "$W/r.html"
    grep -q '<th>self per step</th>' "$W/r.html"
    # the per-op table: sortable, a bar for each row's share of the step
    grep -q '<table class="sortable"><tr><th>op</th><th>phase</th>' "$W/r.html"
    rows=$(jq '.processes[0].ops.rows | length' "$W/r.json")
    [ "$(sed -n '/Per-op time/,/<\/table>/p' "$W/r.html" | grep -c '<span class="bar" style="width:[0-9.]*px;background:#4e79a7">')" = "$rows" ]
    grep -q 'function sortBy(th)' "$W/r.html"
    grep -Eq '<td class="n"( data-v="[-0-9.e+]*")?>[0-9.]+ ms</td>' "$W/r.html"
}

@test "html of two ranks: one line per rank in the step chart, with a legend" {
    for r in 0 1; do
        {
            printf '{"ph":"M","name":"process_name","pid":7,"tid":7,"ts":0,"args":{"name":"swift-train rank %d @ n%d"}}\n' $r $r
            printf '{"ph":"M","name":"swift_meta","pid":7,"tid":7,"ts":0,"args":{"schema_version":1,"stage":"train","rank":%d,"world_size":2,"host":"n%d","clock_offset_us":0,"argv":["swift-train","shards/"]}}\n' $r $r
            for s in 1 2 3 4 5; do
                t=$((1000000 + s * 100000))
                d=$((20000 + r * 10000 + s * 1000))
                printf '{"ph":"X","cat":"step","name":"step","pid":7,"tid":7,"ts":%d,"dur":90000,"args":{"step":%d}}\n' $t $s
                printf '{"ph":"X","cat":"data","name":"data_wait","pid":7,"tid":7,"ts":%d,"dur":%d}\n' $t $d
                printf '{"ph":"X","cat":"train","name":"forward","pid":7,"tid":7,"ts":%d,"dur":30000}\n' $((t + d))
                printf '{"ph":"X","cat":"train","name":"backward","pid":7,"tid":7,"ts":%d,"dur":30000}\n' $((t + d + 30000))
            done
        } >"$W/r$r.trace.jsonl"
    done
    run "$A" -f json -o "$W/r.json" "$W/r0.trace.jsonl" "$W/r1.trace.jsonl"
    [ "$status" -eq 0 ]
    [ "$(jq '[.processes[] | select(.steps == 5)] | length' "$W/r.json")" = 2 ]
    run "$A" -f html -o "$W/r.html" "$W/r0.trace.jsonl" "$W/r1.trace.jsonl"
    [ "$status" -eq 0 ]
    run $CHECK --count-chart "$W/r.html"
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$output" = "$(pieces "$W/r.json")" ]
    [ "$(grep -c '<polyline class="rank"' "$W/r.html")" = 2 ]
    grep -q '>swift-train rank 1 @ n1</text>' "$W/r.html"
}

@test "html of the resnet50 Kineto trace: well-formed, step chart, kernels in ms" {
    if [ ! -d "$T" ]; then
        [ "${CI:-}" = true ] && { echo "missing $T" >&2; return 1; }
        skip "shared traces not found at $T"
    fi
    NW0="$T/kineto-tb/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
    run "$A" -f json -o "$W/r.json" "$NW0"
    [ "$status" -eq 0 ]
    run "$A" -f html -o "$W/r.html" "$NW0"
    [ "$status" -eq 0 ]
    run $CHECK --count-chart "$W/r.html"
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$output" = "$(pieces "$W/r.json")" ]
    [ "$output" -ge 30 ]
    grep -q '<h2>Top kernels</h2>' "$W/r.html"
    # the op roofline table: one row per op and shape, bars for share and roofline fraction
    rows=$(jq '.processes[0].op_roofline.rows | length' "$W/r.json")
    [ "$rows" -ge 20 ]
    grep -q '<h2>Op roofline (per op and input shape)</h2>' "$W/r.html"
    grep -q 'device Tesla V100-DGXS-32GB, peak' "$W/r.html"
    [ "$(sed -n '/Op roofline/,/<\/table>/p' "$W/r.html" | grep -c '^<tr><td><code>')" = "$rows" ]
    fr=$(jq '[.processes[0].op_roofline.rows[] | select(.roofline_fraction != null)] | length' "$W/r.json")
    [ "$fr" -gt 0 ]
    [ "$(sed -n '/Op roofline/,/<\/table>/p' "$W/r.html" | grep -c 'background:#59a14f')" = "$fr" ]
    grep -q '<th>mean per launch</th>' "$W/r.html"
}

@test "html bottleneck cards: severity, evidence, remedy, the command and the patch each in a <pre> with a copy button" {
    R="$PWD"
    cat >"$W/sft.yaml" <<YAML
model: $R/tests/fixtures/model/llama
max_steps: 6
dataloader_num_workers: 1
save_steps: 100
eval_steps: 100
YAML
    (cd "$W" && "$SWIFT_BIN/swift-train" sft.yaml "$R/tests/fixtures/shards" -o run-t \
        --trace t.jsonl -j 1 --data-delay-ms 20 >/dev/null 2>&1)
    run "$A" -f json -o "$W/r.json" "$W/t.jsonl"
    [ "$status" -eq 0 ]
    i=$(jq '[.bottlenecks[].rule] | index("data_stall")' "$W/r.json")
    [ "$i" != null ]
    run "$A" -f html -o "$W/r.html" "$W/t.jsonl"
    [ "$status" -eq 0 ]
    run $CHECK "$W/r.html"
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$(grep -c '<div class="card ' "$W/r.html")" = "$(jq '.bottlenecks | length' "$W/r.json")" ]
    grep -q '<span class="sev \(warn\|crit\)">' "$W/r.html"
    grep -q '<li>worst_spans: step [0-9]* ([0-9.]* ms)' "$W/r.html"
    grep -q "copyPre('cmd$i', this)" "$W/r.html"
    grep -q "copyPre('patch$i', this)" "$W/r.html"
    grep -q 'navigator.clipboard' "$W/r.html"
    grep -q "document.execCommand('copy')" "$W/r.html"
    # the <pre>s hold exactly the JSON report's command and diff
    pre() {
        python3 -c 'import html, re, sys
t = open(sys.argv[1]).read()
print(html.unescape(re.search(r"<pre id=\"%s\">(.*?)</pre>" % sys.argv[2], t, re.S).group(1)), end="")' "$W/r.html" "$1"
    }
    [ "$(pre "cmd$i")" = "$(jq -r ".bottlenecks[$i].command" "$W/r.json")" ]
    [ "$(pre "patch$i")" = "$(jq -r ".bottlenecks[$i].patch.diff" "$W/r.json")" ]
    [[ "$(pre "patch$i")" == *"+dataloader_num_workers: 2"* ]]
}

@test "html collectives (trace_filter, two ranks): skew and transfer bars per rank to one scale" {
    if [ ! -d "$T" ]; then
        [ "${CI:-}" = true ] && { echo "missing $T" >&2; return 1; }
        skip "shared traces not found at $T"
    fi
    run "$A" -f json -o "$W/r.json" "$T/hta/trace_filter"
    [ "$status" -eq 0 ]
    run "$A" -f html -o "$W/r.html" "$T/hta/trace_filter"
    [ "$status" -eq 0 ]
    run $CHECK "$W/r.html"
    echo "$output"
    [ "$status" -eq 0 ]
    grep -q '<h2>Collectives across ranks</h2>' "$W/r.html"
    [ "$(grep -c 'class="bar sk"' "$W/r.html")" = "$(jq '.collectives | length' "$W/r.json")" ]
    # widths: 200 px for the longest time in collectives
    exp=$(jq -r '(.collectives | map(.comm_us) | max) as $m | .collectives[]
        | "\(200 * .skew_us / $m * 10 | round / 10) \(200 * .transfer_us / $m * 10 | round / 10)"' "$W/r.json")
    got=$(grep -o 'class="bar sk" style="width:[0-9.]*px.*class="bar tr" style="width:[0-9.]*px' "$W/r.html" |
        sed 's/.*sk" style="width:\([0-9.]*\)px.*tr" style="width:\([0-9.]*\)px/\1 \2/' | awk '{print $1 + 0, $2 + 0}')
    echo "$exp / $got"
    [ "$got" = "$(awk '{print $1 + 0, $2 + 0}' <<<"$exp")" ]
    # rank 0 waited for rank 1 (skew 31.9 ms), rank 1 did not
    grep -q '<td class="n">31.9 ms (14.7%)</td>' "$W/r.html"
}

# The lanes of the longest step in $1 (HTML) against $2 (its JSON report): one labelled lane
# per lane of the JSON, one rect per box, every lane bounded and its spans accounted for.
lanes_match() {
    local n
    n=$(jq '[.processes[].worst_step | select(. != null) | .lanes[]] | length' "$2")
    [ "$n" -ge 1 ]
    [ "$(grep -c '<rect class="lane"' "$1")" = "$n" ]
    jq -r '.processes[].worst_step | select(. != null) | .lanes[].label' "$2" | while read -r l; do
        grep -q "\">$l</text>" "$1"
    done
    [ "$(grep -c '<rect class="lb"' "$1")" = "$(jq '[.processes[].worst_step | select(. != null) | .lanes[].boxes[]] | length' "$2")" ]
    jq -e '[.processes[].worst_step | select(. != null) | .lanes[]
            | (.boxes | length) <= 300 and .depth <= 6
              and ([.boxes[][5]] | add) + .too_deep + .dropped == .spans
              and ([.boxes[][0]] | . == sort)] | all' "$2"
    grep -q '<h2>Longest step per thread and stream</h2>' "$1"
}

@test "html lanes of the longest step (--profile swift-train run): a labelled lane per thread, a box per span, a time axis" {
    run "$SWIFT_BIN/swift-train" --model tests/fixtures/model/llama -o "$W/run" --max-steps 4 \
        --save-steps 100 --eval-steps 100 -j 1 --trace "$W/t.jsonl" \
        --profile wait=0,warmup=0,active=4 tests/fixtures/shards
    [ "$status" -eq 0 ]
    run "$A" -f json -o "$W/r.json" "$W/t.jsonl"
    [ "$status" -eq 0 ]
    run "$A" -f html -o "$W/r.html" "$W/t.jsonl"
    [ "$status" -eq 0 ]
    run $CHECK "$W/r.html"
    echo "$output"
    [ "$status" -eq 0 ]
    # the longest step is the JSON's worst step, its thread lanes named by tid
    jq -e '.processes[0] | .worst_step.dur_us == .step_time_us.max
        and .worst_step.step == (.step_list | max_by(.dur_us) | .step)
        and ([.worst_step.lanes[] | select(.kind == "thread" and (.label | test("^CPU thread [0-9]+$")))] | length) >= 1
        and ([.worst_step.lanes[].boxes[] | select(.[3] == "forward" or .[3] == "backward")] | length) >= 2' "$W/r.json"
    lanes_match "$W/r.html" "$W/r.json"
    # the step's axis in ms under the lanes
    sed -n '/<svg class="lanes"/,/<\/svg>/p' "$W/r.html" >"$W/lanes.svg"
    [ "$(grep -c 'class="tt"' "$W/lanes.svg")" -ge 3 ]
    grep -q "ms from the step's start</text>" "$W/lanes.svg"
    # a tooltip per box: name, category and times in ms
    grep -Eq '<title>forward \[compute\] [0-9.]+ ms to [0-9.]+ ms: [0-9.]+ ms</title>' "$W/lanes.svg"
    # no device memory on a CPU run: no memory chart
    ! grep -q 'Device memory over time' "$W/r.html"
}

@test "html of the resnet50 Kineto trace: lanes per CPU thread and GPU stream, the memory curve with its peak" {
    if [ ! -d "$T" ]; then
        [ "${CI:-}" = true ] && { echo "missing $T" >&2; return 1; }
        skip "shared traces not found at $T"
    fi
    NW0="$T/kineto-tb/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
    run "$A" -f json -o "$W/r.json" "$NW0"
    [ "$status" -eq 0 ]
    run "$A" -f html -o "$W/r.html" "$NW0"
    [ "$status" -eq 0 ]
    run $CHECK "$W/r.html"
    echo "$output"
    [ "$status" -eq 0 ]
    lanes_match "$W/r.html" "$W/r.json"
    jq -e '.processes[0].worst_step | ([.lanes[] | select(.label == "GPU 0 stream 7")] | length) == 1
        and ([.lanes[] | select(.kind == "thread")] | length) == 2
        and (.categories | index("Kernel")) as $k
        | [.lanes[] | select(.kind == "stream") | .boxes[] | select(.[4] == $k)] | length > 10' "$W/r.json"
    grep -q '>GPU 0 stream 7</text>' "$W/r.html"
    grep -q '>CPU thread 25738</text>' "$W/r.html"
    # the memory curve: a step line through every timeline point, the peak marked in GiB at its time
    grep -q '<h2>Device memory over time</h2>' "$W/r.html"
    pts=$(grep -o '<polyline class="mem-alloc"[^>]*points="[^"]*"' "$W/r.html" | sed 's/.*points="//; s/"$//' | wc -w)
    tl=$(jq '.processes[0].memory.devices[0].timeline | length' "$W/r.json")
    [ "$tl" -ge 100 ]
    [ "$pts" = $((2 * tl - 1)) ]
    [ "$(grep -c '<circle class="mem-peak"' "$W/r.html")" = 1 ]
    peak=$(jq -r '.processes[0].memory.devices[0] | "\(.peak_bytes) \(.peak_ts_us)"' "$W/r.json" |
        awk '{printf "peak %.2f GiB at %.1f ms", $1 / 1073741824, $2 / 1000}')
    echo "$peak"
    grep -q ">$peak</text>" "$W/r.html"
    grep -q '>memory (GiB)</text>' "$W/r.html"
    [ "$(grep -c 'class="mx"' "$W/r.html")" -ge 3 ]
    # no Total Reserved in this trace: no reserved curve, and the page says so
    ! grep -q 'class="mem-res"' "$W/r.html"
    grep -q 'the trace records no reserved memory' "$W/r.html"
}

@test "html memory curve with Total Reserved: a dashed reserved curve beside the allocated one, the peak in GiB" {
    cat >"$W/k.json" <<'JSON'
{"deviceProperties":[{"id":0,"name":"NVIDIA A100-SXM4-40GB","totalGlobalMem":42949672960}],
 "traceEvents":[
 {"ph":"X","cat":"cpu_op","name":"aten::mm","pid":1,"tid":1,"ts":100,"dur":50,"args":{"External id":1}},
 {"ph":"X","cat":"kernel","name":"gemm","pid":0,"tid":7,"ts":120,"dur":40,"args":{"device":0,"stream":7,"correlation":5}},
 {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":101,"args":{"Device Type":1,"Device Id":0,"Addr":1,"Bytes":1073741824,"Total Allocated":1073741824,"Total Reserved":2147483648}},
 {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":110,"args":{"Device Type":1,"Device Id":0,"Addr":2,"Bytes":2147483648,"Total Allocated":3221225472,"Total Reserved":4294967296}},
 {"ph":"i","s":"t","name":"[memory]","pid":1,"tid":1,"ts":130,"args":{"Device Type":1,"Device Id":0,"Addr":2,"Bytes":-2147483648,"Total Allocated":1073741824,"Total Reserved":4294967296}}
]}
JSON
    run "$A" -f json -o "$W/r.json" "$W/k.json"
    [ "$status" -eq 0 ]
    [ "$(jq -c '.processes[0].memory.devices[0].reserved_timeline' "$W/r.json")" = "[2147483648,4294967296,4294967296]" ]
    [ "$(jq -c '.processes[0].memory.devices[0].timeline' "$W/r.json")" = "[[1,1073741824],[10,3221225472],[30,1073741824]]" ]
    run "$A" -f html -o "$W/r.html" "$W/k.json"
    [ "$status" -eq 0 ]
    run $CHECK "$W/r.html"
    echo "$output"
    [ "$status" -eq 0 ]
    [ "$(grep -c '<polyline class="mem-alloc"' "$W/r.html")" = 1 ]
    [ "$(grep -c '<polyline class="mem-res"' "$W/r.html")" = 1 ]
    grep -q 'stroke-dasharray' "$W/r.html"
    grep -q '>peak 3.00 GiB at 0.010 ms</text>' "$W/r.html"
    grep -q 'allocated (solid) and reserved (dashed) per device' "$W/r.html"
    # the peak marker sits on the curve's highest point
    cy=$(grep -o '<circle class="mem-peak" cx="[0-9.]*" cy="[0-9.]*"' "$W/r.html" | sed 's/.*cy="//; s/"//')
    top=$(grep -o '<polyline class="mem-alloc"[^>]*points="[^"]*"' "$W/r.html" | sed 's/.*points="//; s/"$//' |
        tr ' ' '\n' | grep , | cut -d, -f2 | sort -g | head -1)
    [ "$cy" = "$top" ]
}

@test "html --compare: paired stacked bars per part with deltas, a sortable coloured ops diff, bottleneck cards, roofline and memory deltas" {
    if [ ! -d "$T" ]; then
        [ "${CI:-}" = true ] && { echo "missing $T" >&2; return 1; }
        skip "shared traces not found at $T"
    fi
    C="$T/kineto-tb/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
    X="$T/kineto-tb/resnet50_num_workers_4/worker0.1623212756351.pt.trace.json.gz"
    run "$A" --compare -f json -o "$W/c.json" "$C" "$X"
    [ "$status" -eq 0 ]
    run "$A" --compare -f html -o "$W/c.html" "$C" "$X"
    [ "$status" -eq 0 ]
    run $CHECK "$W/c.html"
    echo "$output"
    [ "$status" -eq 0 ]
    # step time: one stacked bar per run, a rect per part with time on that side, a legend with deltas
    grep -q '<h3>Mean step by part</h3>' "$W/c.html"
    [ "$(grep -c '<rect class="cb"' "$W/c.html")" = "$(jq '[.breakdown[] | .control_us, .test_us | select(. > 0)] | length' "$W/c.json")" ]
    grep -q '>control</text>' "$W/c.html"
    grep -q '>test</text>' "$W/c.html"
    grep -q 'data_loading <tspan class="down" fill="#080">-58.1 ms (-98.00%)</tspan>' "$W/c.html"
    # the ops diff: sortable, one coloured row per shown change, its class the HTA bucket
    grep -q '<table class="sortable"><tr><th>change</th><th>name</th>' "$W/c.html"
    n=$(jq '[.ops.rows[0:30][]] | length' "$W/c.json")
    [ "$(grep -c '<tr class="ch-' "$W/c.html")" = "$n" ]
    for ch in added deleted increased decreased; do
        [ "$(grep -c "<tr class=\"ch-$ch\">" "$W/c.html")" = "$(jq --arg c $ch '[.ops.rows[0:30][] | select(.change == $c)] | length' "$W/c.json")" ]
    done
    grep -q 'tr.ch-increased td{background:' "$W/c.html"
    grep -Eq '<td class="n up" data-v="[0-9.e+]+">\+[0-9.]+ ms</td>' "$W/c.html"
    grep -Eq '<td class="n down" data-v="-[0-9.e+]+">-[0-9.]+ ms</td>' "$W/c.html"
    # bottlenecks as cards: data_stall resolved, launch_bound new
    grep -q '<div class="card resolved"><div><span class="sev">resolved</span> <b>data_stall</b>' "$W/c.html"
    grep -q '<div class="card new"><div><span class="sev">new</span> <b>launch_bound</b>' "$W/c.html"
    [ "$(grep -c '<div class="card ' "$W/c.html")" = "$(jq '[.bottlenecks[][]] | length' "$W/c.json")" ]
    # roofline deltas: a row per matched op, bars for both sides' fractions
    grep -q '<h2>Roofline of the top ops</h2>' "$W/c.html"
    rows=$(jq '.roofline | length' "$W/c.json")
    [ "$rows" -ge 5 ]
    [ "$(sed -n '/Roofline of the top ops/,/<\/table>/p' "$W/c.html" | grep -c '^<tr><td><code>')" = "$rows" ]
    # memory: both peaks in GiB and the change
    grep -q '<h2>Device memory</h2>' "$W/c.html"
    grep -q 'peak 2.60 GiB in control, 2.60 GiB in test <span class="down">-0.01%</span>' "$W/c.html"
}

# One process of our format: step spans of $2 µs from ts $3 on thread 7, rank $1 of $4.
rank_trace() {
    printf '{"ph":"M","name":"swift_meta","pid":7,"tid":7,"ts":0,"args":{"schema_version":1,"stage":"train","rank":%d,"world_size":%d,"host":"n","clock_offset_us":0}}\n' "$1" "$4"
    for s in 1 2; do
        printf '{"ph":"X","cat":"step","name":"step","pid":7,"tid":7,"ts":%d,"dur":%d,"args":{"step":%d}}\n' $(($3 + s * 1000000)) "$2" $s
        printf '{"ph":"X","cat":"compute","name":"forward","pid":7,"tid":7,"ts":%d,"dur":%d}\n' $(($3 + s * 1000000)) $(($2 / 2))
    done
}

@test "worst_step lanes stay bounded: nesting cut at 6 levels, runs of tiny spans merged, at most 300 boxes a lane, every span counted" {
    {
        rank_trace 0 100000 0 1
        t=1000000
        # thread 7: ten nested spans inside the step (levels 0-9)
        for d in 0 1 2 3 4 5 6 7 8 9; do
            printf '{"ph":"X","cat":"compute","name":"nest%d","pid":7,"tid":7,"ts":%d,"dur":%d}\n' $d $((t + 60000 + d * 10)) $((30000 - d * 20))
        done
        # thread 8: 3000 spans of 5 us, names alternating, 10 us apart (tiny: under 50 us)
        for i in $(seq 0 2999); do
            printf '{"ph":"X","cat":"data","name":"tiny%d","pid":7,"tid":8,"ts":%d,"dur":5}\n' $((i % 2)) $((t + 100 + i * 10))
        done
        # thread 9: 1000 spans of 70 us, 90 us apart: not tiny, too many for one lane
        for i in $(seq 0 999); do
            printf '{"ph":"X","cat":"compute","name":"op","pid":7,"tid":9,"ts":%d,"dur":70}\n' $((t + 50 + i * 90))
        done
    } >"$W/b.trace.jsonl"
    run "$A" -f json -o "$W/r.json" "$W/b.trace.jsonl"
    [ "$status" -eq 0 ]
    jq -c '.processes[0].worst_step.lanes[] | [.label, .depth, .spans, .merged, .too_deep, .dropped, (.boxes | length)]' "$W/r.json"
    jq -e '.processes[0].worst_step.lanes | length == 3
        and all(.[]; (.boxes | length) <= 300 and ([.boxes[][5]] | add) + .too_deep + .dropped == .spans)' "$W/r.json"
    L='.processes[0].worst_step.lanes[] | select(.label == $l)'
    # thread 7: the step's forward and ten nested spans: 11 spans, 6 levels drawn, 4 too deep
    jq -e --arg l "CPU thread 7" "$L"' | .spans == 11 and .depth == 6 and .too_deep == 4' "$W/r.json"
    # thread 8: 3000 tiny spans merged into a few boxes named by their count
    jq -e --arg l "CPU thread 8" "$L"' | .spans == 3000 and (.boxes | length) < 300
        and .merged > 2000 and ([.boxes[] | select(.[3] | test("^[0-9]+ short spans$"))] | length) > 0' "$W/r.json"
    jq -e --arg l "CPU thread 9" "$L"' | .spans == 1000 and (.boxes | length) <= 300' "$W/r.json"
    run "$A" -f html -o "$W/r.html" "$W/b.trace.jsonl"
    [ "$status" -eq 0 ]
    grep -q '>11 spans, 4 not drawn</text>' "$W/r.html"
}

@test "worst_step lanes with many processes: only the 4 ranks with the longest steps get lanes" {
    for r in $(seq 0 19); do
        rank_trace "$r" $((50000 + r * 1000)) 0 20 >"$W/r$r.trace.jsonl"
    done
    run "$A" -f json -o "$W/r.json" "$W"/r*.trace.jsonl
    [ "$status" -eq 0 ]
    [ "$(jq -c '[.processes[] | select(.worst_step != null) | .rank] | sort' "$W/r.json")" = "[16,17,18,19]" ]
    run "$A" -f html -o "$W/r.html" "$W"/r*.trace.jsonl
    [ "$status" -eq 0 ]
    [ "$(grep -c '<svg class="lanes"' "$W/r.html")" = 4 ]
}

@test "html of HTA's critical_path and triton_example traces: a part of a few ns still gets a step-chart rect of non-zero height" {
    if [ ! -d "$T" ]; then
        [ "${CI:-}" = true ] && { echo "missing $T" >&2; return 1; }
        skip "shared traces not found at $T"
    fi
    for d in critical_path triton_example; do
        run "$A" -f html -o "$W/$d.html" "$T/hta/$d"
        [ "$status" -eq 0 ]
        run $CHECK --count-chart "$W/$d.html"
        echo "$output"
        [ "$status" -eq 0 ]
    done
}
