#!/usr/bin/env bats
# swift-trace-analyze's op roofline table (op_roofline) on the shared Kineto traces recorded
# with record_shapes: the GEMM rows' FLOPs are checked against 2*M*N*K computed here, in jq,
# from the recorded "Input Dims" (never from our own formulas).

setup() {
    A="$SWIFT_BIN/swift-trace-analyze"
    T="$SHARED/data/traces"
    W="$BATS_TEST_TMPDIR"
    if [ ! -d "$T" ]; then
        [ "${CI:-}" = true ] && { echo "missing $T" >&2; return 1; }
        skip "shared traces not found at $T"
    fi
}

# 2*M*N*K times the batch of one call, from a row's input_dims, per op name.
GEMM='def prod: reduce .[] as $x (1; . * $x);
  .input_dims as $d
  | if .name == "aten::mm" then 2 * $d[0][0] * $d[1][1] * $d[0][1]
    elif .name == "aten::addmm" then 2 * $d[1][0] * $d[2][1] * $d[1][1]
    elif .name == "aten::bmm" then 2 * $d[0][0] * $d[0][1] * $d[1][2] * $d[0][2]
    elif .name == "aten::linear" then 2 * ($d[0][:-1] | prod) * $d[1][0] * $d[0][-1]
    else error("unexpected GEMM op " + .name) end'

@test "resnet50 traces with shapes: GEMM rows' FLOPs are 2*M*N*K of the recorded dims, on a V100" {
    for f in "$T"/kineto-tb/resnet50_num_workers_*/*.pt.trace.json.gz; do
        run "$A" --format json --top 1000 -o "$W/r.json" "$f"
        [ "$status" -eq 0 ]
        jq -e '.processes[0].op_roofline.device == "Tesla V100-DGXS-32GB"' "$W/r.json"
        jq -e '.processes[0].op_roofline.peak.tflops_fp32 == 15.7' "$W/r.json"
        # at least two GEMM shapes, each row's total FLOPs = calls * 2MNK (gflop has 6 decimals)
        jq -e "[.processes[0].op_roofline.rows[] | select(.class == \"gemm\")] | length >= 2" \
            "$W/r.json"
        jq -e "[.processes[0].op_roofline.rows[] | select(.class == \"gemm\")
                | ((.gflop * 1e9) - .calls * ($GEMM)) | fabs < 1000] | all" "$W/r.json"
        # achieved TFLOP/s = FLOPs / device time; intensity = FLOPs / bytes
        jq -e '[.processes[0].op_roofline.rows[] | select(.class == "gemm")
                | (.tflops - .gflop * 1e9 / .device_us / 1e6 | fabs) < 1e-3] | all' "$W/r.json"
        # device time shares add up below the steps' time
        jq -e '[.processes[0].op_roofline.rows[].share] | add < 1' "$W/r.json"
    done
}

@test "op roofline in the text and Markdown reports; null without record_shapes" {
    f="$T/kineto-tb/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
    run "$A" "$f"
    [ "$status" -eq 0 ]
    [[ "$output" == *"op roofline on Tesla V100-DGXS-32GB (peak 125 TFLOP/s 16-bit, 15.7 fp32, 0.9 TB/s)"* ]]
    run "$A" --format md "$f"
    [ "$status" -eq 0 ]
    [[ "$output" == *"| op | input dims | calls | device | share | TFLOP/s | TB/s | FLOP/B | roofline |"* ]]
    # a GPU trace recorded without shapes has no table
    run "$A" --format json -o "$W/r.json" "$T/hta/ns_resolution_trace/rank-0.Apr_03_18_51_38.1102.pt.trace.json.gz"
    [ "$status" -eq 0 ]
    jq -e '.processes[0] | has("op_roofline") and .op_roofline == null' "$W/r.json"
}

@test "low_efficiency: the time lost against the roofline, the worst ops and their remedies" {
    f="$T/kineto-tb/resnet50_num_workers_0/worker0.1623143089861.pt.trace.json.gz"
    # 8.6 % lost on this run: under the default 20 %, the rule stays quiet
    run "$A" --format json -o "$W/r.json" "$f"
    [ "$status" -eq 0 ]
    jq -e '[.bottlenecks[] | select(.rule == "low_efficiency")] | length == 0' "$W/r.json"
    run "$A" --format json --threshold low_efficiency=5 -o "$W/r.json" "$f"
    [ "$status" -eq 0 ]
    jq -e '.bottlenecks[] | select(.rule == "low_efficiency") | .severity == "warn" and .value == 8.6' "$W/r.json"
    # the value is the rows' lost time over the steps' time, recomputed here from the table
    jq -e '(.processes[0].op_roofline | ([.rows[].lost_us | numbers] | add) / .span_us * 100)
           as $v | .bottlenecks[] | select(.rule == "low_efficiency")
           | (.value - $v | fabs) < 0.01' "$W/r.json"
    jq -e '.bottlenecks[] | select(.rule == "low_efficiency") | .evidence.worst_ops
           | length == 3 and .[0].name == "aten::cudnn_convolution_backward"
           and .[0].lost_us >= .[1].lost_us and .[1].lost_us >= .[2].lost_us' "$W/r.json"
    jq -e '.bottlenecks[] | select(.rule == "low_efficiency") | .remedy
           | test("bf16") and test("TF32") and test("Liger")' "$W/r.json"
    run "$A" --threshold low_efficiency=5 "$f"
    [ "$status" -eq 0 ]
    [[ "$output" == *"[warn] low_efficiency"*"lost against the ops' roofline on Tesla V100-DGXS-32GB"* ]]
}

@test "op roofline on a small H100 trace, computed by hand: linear over addmm counts once; causal attention from Concrete Inputs" {
    run "$A" --format json -o "$W/r.json" tests/ref/fixtures/roofline/kineto_shapes.json
    [ "$status" -eq 0 ]
    jq -e '.processes[0].op_roofline | .device == "NVIDIA H100 80GB HBM3" and .peak.tbps == 3.35
           and (.rows | length) == 2' "$W/r.json"
    # aten::linear x[32,2048] w[1000,2048] b[1000] fp32: 2*32*1000*2048 FLOPs, 4*(65536 +
    # 2048000 + 1000 + 32000) bytes; its addmm child launched the kernel (120.25 us); intensity
    # 15.27 FLOP/B is under the fp32 ridge 66.9/3.35, so memory-bound: 1.09 / (15.266 * 3.35)
    jq -e '.processes[0].op_roofline.rows[] | select(.name == "aten::linear")
           | .class == "gemm" and .calls == 1 and .device_us == 120.25 and .gflop == 0.131072
             and .gb == 0.008586 and .intensity == 15.266 and .bound == "memory"
             and .tflops == 1.09 and .roofline_fraction == 0.0213' "$W/r.json"
    # causal flash attention B2 H16 S1024 D64 bf16: 4*B*H*S^2*D / 2, q k v out = 4 * 4 MiB;
    # intensity 256 < 989.4/3.35: memory-bound, 85.9 TFLOP/s of 256 * 3.35
    jq -e '.processes[0].op_roofline.rows[] | select(.class == "attention_fwd")
           | .gflop == 4.294967 and .gb == 0.016777 and .intensity == 256
             and .tflops == 85.8993 and .roofline_fraction == 0.1002 and .bound == "memory"' \
        "$W/r.json"
}

@test "--profile traces record the peak; the per-op table gives each op's fraction of it" {
    run "$SWIFT_BIN/swift-train" --model tests/fixtures/model/llama -o "$W/run" --max-steps 4 \
        --save-steps 100 --eval-steps 100 -j 1 --trace "$W/t.jsonl" \
        --profile wait=1,warmup=1,active=2 tests/fixtures/shards
    [ "$status" -eq 0 ]
    peak=$(jq -s '[.[] | select(.ph == "C" and .name == "peak_gflops") | .args.peak_gflops] | first' "$W/t.jsonl")
    [ "$peak" != null ]
    run "$A" -f json -o "$W/r.json" "$W/t.jsonl"
    [ "$status" -eq 0 ]
    jq -e --argjson pk "$peak" '.processes[0].ops | (.peak_gflops - $pk | fabs) < 0.001
        and ([.rows[] | select(.gflops != null)] | length > 0)
        and ([.rows[] | select(.gflops != null) | (.peak_fraction - .gflops / $pk | fabs) < 0.0002]
             | all)
        and ([.rows[] | select(.gflops == null) | .peak_fraction == null] | all)' "$W/r.json"
}

@test "--profile traces: op_roofline per op and shape from our spans' shape and flops args, against peak_gflops" {
    run "$SWIFT_BIN/swift-train" --model tests/fixtures/model/llama -o "$W/run" --max-steps 4 \
        --save-steps 100 --eval-steps 100 -j 1 --trace "$W/t.jsonl" \
        --profile wait=1,warmup=1,active=2 tests/fixtures/shards
    [ "$status" -eq 0 ]
    # every per-op span records its shape (the backward ones and the loss too)
    jq -s -e '[.[] | select(.cat == "compute" and .args.flops != null) | .args.shape]
              | length > 0 and all(. != "" and . != null)' "$W/t.jsonl"
    peak=$(jq -s '[.[] | select(.ph == "C" and .name == "peak_gflops") | .args.peak_gflops] | first' "$W/t.jsonl")
    run "$A" -f json --top 100 -o "$W/r.json" "$W/t.jsonl"
    [ "$status" -eq 0 ]
    # one row per (span name, shape); calls and FLOPs summed from the spans themselves
    jq -s -e '[.[] | select(.cat == "compute" and .args.shape != null)
               | {name, shape: .args.shape, flops: .args.flops}]
              | group_by([.name, .shape]) | map({name: .[0].name, shape: .[0].shape,
                calls: length, gflop: (map(.flops) | add / 1e9)})' "$W/t.jsonl" >"$W/want.json"
    jq -e --slurpfile want "$W/want.json" --argjson pk "$peak" '.processes[0].op_roofline
        | (.peak_gflops - $pk | fabs) < 0.001 and .n_rows == ($want[0] | length)
          and ([.rows[] | . as $r | $want[0][] | select(.name == $r.name and .shape == $r.shape)
                | .calls == $r.calls and (.gflop - $r.gflop | fabs) < 1e-9] | length) == ($want[0] | length)
          and ([.rows[] | (.roofline_fraction - .gflop * 1e9 / .device_us / 1e3 / $pk | fabs)
                < 0.0001 + .roofline_fraction * 1e-4] | all)' \
        "$W/r.json"
    # classes and bytes from the shape: a linear [32,32]x[64,32]^T reads x and W and writes
    # [32,64], fp32; attention and its backward, the loss
    jq -e '.processes[0].op_roofline.rows[] | select(.shape == "[32,32]x[64,32]^T")
           | .class == "gemm" and .input_dims == [[32,32],[64,32]]
             and (.gb * 1e9 - (32*32 + 64*32 + 32*64) * 4 * .calls | fabs) < 0.5' "$W/r.json"
    jq -e '[.processes[0].op_roofline.rows[] | .class] | index("attention_fwd") and index("attention_bwd")
           and index("cross_entropy")' "$W/r.json"
    # text: GFLOP/s against the peak; low_efficiency stays a device rule
    run "$A" "$W/t.jsonl"
    [ "$status" -eq 0 ]
    [[ "$output" == *"op roofline on cpu (peak "*" GFLOP/s), by time:"* ]]
    [[ "$output" != *"low_efficiency"* ]]
}
