#!/usr/bin/env bats
# swift-infer on GGUF input: the tiny fixture models of infer.bats exported with swift-export
# (f32, f16, q8_0; q4_k and q4_0 through swift-eval) and loaded back (lib/model/gguf_load.c;
# tokenizer and chat template from the metadata: lib/preprocess/tokenizer_gguf.c). f32 and f16
# answers equal the HF directory's (and so transformers' generate); q8_0 mostly starts the same;
# bad files exit 1 naming the file and the byte offset.

bats_require_minimum_version 1.5.0

setup() {
    ROOT=$BATS_TEST_DIRNAME/../..
    FIX=$ROOT/tests/fixtures
    T=$BATS_TEST_TMPDIR
    INFER=$SWIFT_BIN/swift-infer
    EXPORT=$SWIFT_BIN/swift-export
    export OMP_NUM_THREADS=2
    . "$BATS_TEST_DIRNAME/infer_fixtures.bash" # requests, answers, expected
}

export_gguf() { # arch dtype -> $T/arch-dtype.gguf
    run --separate-stderr "$EXPORT" "$FIX/eval/$1" --to gguf --dtype "$2" -o "$T/$1-$2.gguf"
    [ "$status" -eq 0 ]
}

# f32 GGUF: every answer (chat through the GGUF's chat template, completions) equals
# transformers' generate, as the HF directory's do.
f32_equals_transformers() {
    arch=$1
    shift
    export_gguf "$arch" f32
    requests "$arch" >"$T/in.jsonl"
    run --separate-stderr "$INFER" "$T/$arch-f32.gguf" "$T/in.jsonl" "$@"
    [ "$status" -eq 0 ]
    printf '%s\n' "$output" >"$T/out.jsonl"
    answers "$T/out.jsonl" >"$T/got.jsonl"
    expected "$arch" >"$T/want.jsonl"
    diff "$T/want.jsonl" "$T/got.jsonl"
    [[ $stderr == *"9 answered, 0 errors"* ]]
}

@test "llama f32 GGUF (q/k rows permuted back): greedy answers equal transformers'" {
    f32_equals_transformers llama
}

@test "qwen2 f32 GGUF (qkv bias, tied embeddings): greedy answers equal transformers'" {
    f32_equals_transformers qwen2 --max-num-seqs 2
}

@test "qwen3 f32 GGUF (QK-norm): greedy answers equal transformers'" {
    f32_equals_transformers qwen3 --max-num-seqs 3 --block-size 4
}

# f16: every answer equals transformers' (as f32's). q8_0 on these random tiny models (flat
# distributions, near ties): the prompts count the same and at least 7 of the 9 answers start
# with the same token (measured: 9, 8 and 9 of 9; the loss test below bounds the error too).
@test "f16 GGUF: every greedy answer equals transformers'" {
    for a in llama qwen2 qwen3; do
        export_gguf $a f16
        requests $a >"$T/in.jsonl"
        run --separate-stderr "$INFER" "$T/$a-f16.gguf" "$T/in.jsonl"
        [ "$status" -eq 0 ]
        printf '%s\n' "$output" >"$T/out.jsonl"
        answers "$T/out.jsonl" >"$T/got.jsonl"
        expected $a >"$T/want.jsonl"
        diff "$T/want.jsonl" "$T/got.jsonl"
    done
}

@test "q8_0 GGUF: same prompt counts, at least 7 of 9 answers start with transformers' token" {
    for a in llama qwen2 qwen3; do
        export_gguf $a q8_0
        requests $a >"$T/in.jsonl"
        run --separate-stderr "$INFER" "$T/$a-q8_0.gguf" "$T/in.jsonl"
        [ "$status" -eq 0 ]
        printf '%s\n' "$output" >"$T/out.jsonl"
        answers "$T/out.jsonl" | jq -c '{custom_id, p, first: .ids[0]}' >"$T/got.jsonl"
        expected $a | jq -c '{custom_id, p, first: .ids[0]}' >"$T/want.jsonl"
        [ "$(jq -c '[.custom_id, .p]' "$T/got.jsonl")" = "$(jq -c '[.custom_id, .p]' "$T/want.jsonl")" ]
        same=$(paste -d' ' "$T/want.jsonl" "$T/got.jsonl" | awk '$1 == $2' | wc -l)
        echo "$a: $same of 9 start the same"
        [ "$same" -ge 7 ]
    done
}

@test "llama 3 rope scaling: the GGUF's rope_freqs give the directory's answers and logprobs" {
    mkdir "$T/l3"
    cp "$FIX/eval/llama/"{model.safetensors,tokenizer.json,tokenizer_config.json} "$T/l3/"
    jq '.rope_parameters = {rope_type: "llama3", rope_theta: 10000.0, factor: 8.0,
        low_freq_factor: 1.0, high_freq_factor: 4.0, original_max_position_embeddings: 32}' \
        "$FIX/eval/llama/config.json" >"$T/l3/config.json"
    run --separate-stderr "$EXPORT" "$T/l3" --to gguf --dtype f32 -o "$T/l3.gguf"
    [ "$status" -eq 0 ]
    [ "$(jq .tensors <<<"$output")" -eq 22 ] # rope_freqs.weight too
    requests llama >"$T/in.jsonl"
    run --separate-stderr "$INFER" "$T/l3" "$T/in.jsonl"
    [ "$status" -eq 0 ]
    want=$(jq -c '.response.body.choices[0].logprobs' <<<"$output")
    run --separate-stderr "$INFER" "$T/l3.gguf" "$T/in.jsonl"
    [ "$status" -eq 0 ]
    [ "$(jq -c '.response.body.choices[0].logprobs' <<<"$output")" = "$want" ]
    # and the scaling matters here: the unscaled model answers otherwise
    run --separate-stderr "$INFER" "$FIX/eval/llama" "$T/in.jsonl"
    [ "$(jq -c '.response.body.choices[0].logprobs' <<<"$output")" != "$want" ]
}

@test "a truncated GGUF exits 1 naming the file and the byte offset" {
    export_gguf llama f16
    head -c 3000 "$T/llama-f16.gguf" >"$T/cut.gguf"
    run --separate-stderr "$INFER" "$T/cut.gguf" /dev/null
    [ "$status" -eq 1 ]
    [[ $stderr == "swift-infer: $T/cut.gguf:@"[0-9]*": "* ]]
}

@test "an architecture we do not run exits 1 naming it" {
    export_gguf llama f16
    perl -0777 -pe 's/llama/llamb/' "$T/llama-f16.gguf" >"$T/arch.gguf"
    run --separate-stderr "$INFER" "$T/arch.gguf" /dev/null
    [ "$status" -eq 1 ]
    [[ $stderr == "swift-infer: $T/arch.gguf: architecture 'llamb' is not supported (llama, qwen2, qwen3)"* ]]
}

@test "a tensor type with no CPU kernel here exits 1 naming file, offset, tensor and type" {
    export_gguf llama f16
    # blk.0.attn_q.weight: n_dims 2, ne[2], then its type F16 (1) -> I16 (25, same size)
    perl -0777 -pe 's/(blk\.0\.attn_q\.weight\x02\x00\x00\x00.{16})\x01\x00\x00\x00/$1\x19\x00\x00\x00/s' \
        "$T/llama-f16.gguf" >"$T/type.gguf"
    ! cmp -s "$T/llama-f16.gguf" "$T/type.gguf"
    run --separate-stderr "$INFER" "$T/type.gguf" /dev/null
    [ "$status" -eq 1 ]
    [[ $stderr == "swift-infer: $T/type.gguf:@"[0-9]*": tensor blk.0.attn_q.weight has type I16, which has no CPU kernel here"* ]]
}

@test "--adapters on a GGUF base answer as on the directory" {
    export_gguf llama f32
    requests llama | head -4 >"$T/in.jsonl"
    run --separate-stderr "$INFER" "$FIX/eval/llama" --adapters "$FIX/eval/llama/adapter" "$T/in.jsonl"
    [ "$status" -eq 0 ]
    answers <(printf '%s\n' "$output") >"$T/want.jsonl"
    run --separate-stderr "$INFER" "$T/llama-f32.gguf" --adapters "$FIX/eval/llama/adapter" "$T/in.jsonl"
    [ "$status" -eq 0 ]
    answers <(printf '%s\n' "$output") >"$T/got.jsonl"
    diff "$T/want.jsonl" "$T/got.jsonl"
}

# swift-eval shares the loader: the loss of f32 equals the directory's; the quantized files'
# losses are close (measured on this random model, base 6.9293: f16 +0.0008, bf16 +0.0007,
# q8_0 +0.002, q4_k -0.012, q4_0 -0.18).
@test "swift-eval on GGUF: f32 loss equals the directory's, f16/bf16/q8_0/q4_k/q4_0 close" {
    SYN=$FIX/eval/synth
    run "$SWIFT_BIN/swift-eval" "$FIX/eval/llama" --task loss --dataset "$SYN/train" --quiet
    [ "$status" -eq 0 ]
    base=$(jq .metrics.loss <<<"$output")
    for dt in f32:1e-6 f16:3e-3 bf16:1e-2 q8_0:1e-2 q4_k:5e-2 q4_0:0.3; do
        d=${dt%%:*}
        export_gguf llama $d
        run "$SWIFT_BIN/swift-eval" "$T/llama-$d.gguf" --task loss --dataset "$SYN/train" --quiet
        [ "$status" -eq 0 ]
        got=$(jq .metrics.loss <<<"$output")
        echo "$d: $got (base $base)"
        awk -v a="$base" -v b="$got" -v t="${dt#*:}" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(d <= t) }'
    done
}
