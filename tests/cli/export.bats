#!/usr/bin/env bats
# swift-export --to gguf on committed tiny models (tests/ref/gen_export.py): the GGUF we write
# must dump exactly as gguf-py's GGUFReader dumped it when the fixture was verified.

bats_require_minimum_version 1.5.0

setup() {
    tok=$SHARED/data/tokenizers/gpt2
    if [ ! -r "$tok/tokenizer.json" ]; then
        [ "${CI:-}" != true ] || { echo "missing $tok" >&2; return 1; }
        skip "missing $tok"
    fi
    for a in llama qwen3; do
        mkdir -p "$BATS_TEST_TMPDIR/$a"
        cp tests/ref/fixtures/export/$a/* "$BATS_TEST_TMPDIR/$a/"
        cp "$tok/tokenizer.json" "$tok/tokenizer_config.json" "$BATS_TEST_TMPDIR/$a/"
    done
}

check_dump() { # arch dtype
    out=$BATS_TEST_TMPDIR/$1-$2.gguf
    run "$SWIFT_BIN/swift-export" "$BATS_TEST_TMPDIR/$1" --to gguf --dtype "$2" --name "$1" -o "$out"
    [ "$status" -eq 0 ]
    [[ "${lines[-1]}" == '{"version":1,"format":"gguf","output":"'"$out"'","arch":"'"$1"'","dtype":"'"$2"'",'* ]]
    run "$SWIFT_BIN/swift-export" --dump "$out"
    [ "$status" -eq 0 ]
    [ "$output" = "$(cat tests/ref/fixtures/export/$1-$2.dump)" ]
}

@test "llama f16 export matches gguf-py's dump" { check_dump llama f16; }
@test "llama q8_0 export matches gguf-py's dump" { check_dump llama q8_0; }
@test "llama q4_k export matches gguf-py's dump" { check_dump llama q4_k; }
@test "qwen3 f16 export matches gguf-py's dump" { check_dump qwen3 f16; }
@test "qwen3 q8_0 export matches gguf-py's dump" { check_dump qwen3 q8_0; }
@test "qwen3 q4_k export matches gguf-py's dump" { check_dump qwen3 q4_k; }

@test "existing output is refused without --force, replaced with it" {
    out=$BATS_TEST_TMPDIR/x.gguf
    echo old > "$out"
    run "$SWIFT_BIN/swift-export" "$BATS_TEST_TMPDIR/qwen3" --dtype f16 -o "$out"
    [ "$status" -eq 1 ]
    [ "$output" = "swift-export: '$out' exists; use --force to overwrite it" ]
    [ "$(cat "$out")" = old ]
    run "$SWIFT_BIN/swift-export" "$BATS_TEST_TMPDIR/qwen3" --dtype f16 -o "$out" --force
    [ "$status" -eq 0 ]
    run "$SWIFT_BIN/swift-export" --dump "$out"
    [ "$status" -eq 0 ]
}

@test "unknown architecture: clear error, nothing written" {
    sed -i 's/"qwen3"/"gemma"/; s/Qwen3ForCausalLM/GemmaForCausalLM/' "$BATS_TEST_TMPDIR/qwen3/config.json"
    run "$SWIFT_BIN/swift-export" "$BATS_TEST_TMPDIR/qwen3" --dtype f16 -o "$BATS_TEST_TMPDIR/g.gguf"
    [ "$status" -eq 1 ]
    [ "$output" = "swift-export:$BATS_TEST_TMPDIR/qwen3/config.json: unsupported model_type 'gemma' (llama, mistral, qwen2, qwen3)" ]
    [ ! -e "$BATS_TEST_TMPDIR/g.gguf" ]
    [ -z "$(ls -A "$BATS_TEST_TMPDIR" | grep tmp)" ]
}

@test "a required tensor missing (qwen2 biases): error names it, nothing written" {
    # config says qwen2: then the required q/k/v biases are missing
    sed -i 's/"qwen3"/"qwen2"/' "$BATS_TEST_TMPDIR/qwen3/config.json"
    run "$SWIFT_BIN/swift-export" "$BATS_TEST_TMPDIR/qwen3" -o "$BATS_TEST_TMPDIR/g.gguf"
    [ "$status" -eq 1 ]
    [[ "$output" == "swift-export: $BATS_TEST_TMPDIR/qwen3: no tensor for blk.0.attn_q.bias (required by llama.cpp for qwen2)" ]]
    [ ! -e "$BATS_TEST_TMPDIR/g.gguf" ]
}

@test "disk full mid-write: error, no file under the final name" {
    [ -w /dev/full ] || skip "no /dev/full"
    mkdir "$BATS_TEST_TMPDIR/full"
    if ! command -v unshare >/dev/null; then skip "no unshare"; fi
    # a 400 KB tmpfs cannot hold the 0.8 MB GGUF; the last line shows the directory is empty
    run unshare -rm sh -c "mount -t tmpfs -o size=400k tmpfs '$BATS_TEST_TMPDIR/full' && '$SWIFT_BIN/swift-export' '$BATS_TEST_TMPDIR/llama' --dtype f32 -o '$BATS_TEST_TMPDIR/full/m.gguf'; echo rc=\$?; ls -A '$BATS_TEST_TMPDIR/full'"
    if [[ "$output" == *"Operation not permitted"* ]]; then skip "cannot mount tmpfs here"; fi
    [[ "$output" == *"swift-export: cannot write '$BATS_TEST_TMPDIR/full/m.gguf': No space left on device"* ]]
    [[ "$output" == *"rc=1" ]]
}

@test "--to-ollama writes NAME.Modelfile next to NAME.gguf and says how to load it" {
    mkdir "$BATS_TEST_TMPDIR/ol"
    run "$SWIFT_BIN/swift-export" "$BATS_TEST_TMPDIR/qwen3" --dtype q8_0 --to-ollama -o "$BATS_TEST_TMPDIR/ol/m.gguf"
    [ "$status" -eq 0 ]
    [ ! -e "$BATS_TEST_TMPDIR/ol/Modelfile" ]
    [ "$(head -1 "$BATS_TEST_TMPDIR/ol/m.Modelfile")" = "FROM ./m.gguf" ]
    grep -qx 'PARAMETER stop "<|endoftext|>"' "$BATS_TEST_TMPDIR/ol/m.Modelfile"
    [[ $output == *"swift-export: wrote $BATS_TEST_TMPDIR/ol/m.Modelfile; load it with: ollama create m -f $BATS_TEST_TMPDIR/ol/m.Modelfile"* ]]
    # a second export into the same directory keeps the first one's Modelfile
    run "$SWIFT_BIN/swift-export" "$BATS_TEST_TMPDIR/qwen3" --dtype f16 --to-ollama -o "$BATS_TEST_TMPDIR/ol/m-f16.gguf"
    [ "$status" -eq 0 ]
    [ "$(head -1 "$BATS_TEST_TMPDIR/ol/m-f16.Modelfile")" = "FROM ./m-f16.gguf" ]
    [ "$(head -1 "$BATS_TEST_TMPDIR/ol/m.Modelfile")" = "FROM ./m.gguf" ]
    # an existing NAME.Modelfile is refused without --force
    run "$SWIFT_BIN/swift-export" "$BATS_TEST_TMPDIR/qwen3" --dtype q8_0 --to-ollama -o "$BATS_TEST_TMPDIR/ol/m.gguf"
    [ "$status" -eq 1 ]
    [[ $output == *"'$BATS_TEST_TMPDIR/ol/m.Modelfile' exists; use --force to overwrite it"* ]]
}

@test "--trace: read, quantize and write spans per tensor with bytes" {
    run "$SWIFT_BIN/swift-export" "$BATS_TEST_TMPDIR/llama" --dtype q8_0 -o "$BATS_TEST_TMPDIR/t.gguf" --trace "$BATS_TEST_TMPDIR/t.jsonl"
    [ "$status" -eq 0 ]
    grep -q '"cat":"export","name":"read".*"tensor":"token_embd.weight","bytes":804112' "$BATS_TEST_TMPDIR/t.jsonl"
    grep -q '"cat":"export","name":"write".*"tensor":"blk.0.ffn_down.weight","bytes":2176' "$BATS_TEST_TMPDIR/t.jsonl"
    grep -q '"name":"quantize".*"type":"Q8_0"' "$BATS_TEST_TMPDIR/t.jsonl"
}

@test "usage errors exit 2" {
    run "$SWIFT_BIN/swift-export" "$BATS_TEST_TMPDIR/llama"
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "swift-export: missing -o OUTPUT" ]]
    run "$SWIFT_BIN/swift-export" "$BATS_TEST_TMPDIR/llama" -o x --to onnx
    [ "$status" -eq 2 ]
    run "$SWIFT_BIN/swift-export" "$BATS_TEST_TMPDIR/llama" -o "$BATS_TEST_TMPDIR/x.gguf" --dtype q3_k
    [ "$status" -eq 1 ]
    [[ "$output" == "swift-export: unknown --dtype 'q3_k'"* ]]
}

@test "--merge-lora on the CLI: merged directory, JSON summary, refusals" {
    out=$BATS_TEST_TMPDIR/merged
    run "$SWIFT_BIN/swift-export" tests/ref/fixtures/merge/base --merge-lora tests/ref/fixtures/merge/adapter-lora --dtype bf16 -o "$out"
    [ "$status" -eq 0 ]
    [[ "$output" == '{"version":1,"format":"hf","output":"'"$out"'","dtype":"bfloat16","tensors":26,"merged":6,'* ]]
    [ -f "$out/model.safetensors" ] && [ -f "$out/config.json" ] && [ -f "$out/generation_config.json" ]
    run "$SWIFT_BIN/swift-export" tests/ref/fixtures/merge/base --merge-lora tests/ref/fixtures/merge/adapter-lora -o "$out"
    [ "$status" -eq 1 ]
    [ "$output" = "swift-export: '$out' exists; use --force to overwrite it" ]
    run "$SWIFT_BIN/swift-export" tests/ref/fixtures/merge/base --merge-lora "$BATS_TEST_TMPDIR/none" -o "$BATS_TEST_TMPDIR/m2"
    [ "$status" -eq 1 ]
    [[ "$output" == "swift-export: cannot open '$BATS_TEST_TMPDIR/none/adapter_config.json': No such file or directory" ]]
    [ ! -e "$BATS_TEST_TMPDIR/m2" ]
    run "$SWIFT_BIN/swift-export" tests/ref/fixtures/merge/base --quant int3 -o "$BATS_TEST_TMPDIR/m3"
    [ "$status" -eq 2 ]
}

@test "--to hf without an adapter converts: same tensors, new dtype, side files copied" {
    M=$BATS_TEST_TMPDIR/llama
    run "$SWIFT_BIN/swift-export" "$M" --to hf --dtype fp32 -o "$BATS_TEST_TMPDIR/conv"
    [ "$status" -eq 0 ]
    [[ $output == *'"format":"hf"'*'"merged":0'* ]]
    [ "$(jq -r .torch_dtype "$BATS_TEST_TMPDIR/conv/config.json")" = float32 ]
    # identical weights: the GGUF made from either directory has the same tensors
    run "$SWIFT_BIN/swift-export" "$M" --to gguf --dtype f32 --name x -o "$BATS_TEST_TMPDIR/a.gguf"
    [ "$status" -eq 0 ]
    run "$SWIFT_BIN/swift-export" "$BATS_TEST_TMPDIR/conv" --to gguf --dtype f32 --name x \
        -o "$BATS_TEST_TMPDIR/b.gguf"
    [ "$status" -eq 0 ]
    cmp "$BATS_TEST_TMPDIR/a.gguf" "$BATS_TEST_TMPDIR/b.gguf"
}

@test "--dtype q4_k_m: llama.cpp's Q4_K_M mix (Q6_K for the output and, in use_more_bits layers, attn_v and ffn_down), with the fallbacks" {
    M=$BATS_TEST_DIRNAME/../fixtures/eval/llama
    run --separate-stderr "$SWIFT_BIN/swift-export" "$M" --to gguf --dtype q4_k_m -o "$BATS_TEST_TMPDIR/m.gguf"
    [ "$status" -eq 0 ]
    # rows of 64/128 fit neither K-quant: Q4_K -> Q5_0, Q6_K -> Q8_0 (llama_tensor_get_type)
    [ "$stderr" = "swift-export: 13 matrices use Q5_0: their rows do not fit Q4_K blocks (as llama.cpp does)
swift-export: 3 matrices use Q8_0: their rows do not fit Q6_K blocks (as llama.cpp does)" ]
    run "$SWIFT_BIN/swift-export" --dump "$BATS_TEST_TMPDIR/m.gguf"
    [ "$status" -eq 0 ]
    [[ $output == *$'general.file_type\tu32\t15'* ]]
    types=$(awk -F'\t' '$1 == "tensor" && $3 != "F32" {print $2 "=" $3}' <<<"$output" | sort | tr '\n' ' ')
    [ "$types" = "blk.0.attn_k.weight=Q5_0 blk.0.attn_output.weight=Q5_0 blk.0.attn_q.weight=Q5_0 blk.0.attn_v.weight=Q5_0 blk.0.ffn_down.weight=Q5_0 blk.0.ffn_gate.weight=Q5_0 blk.0.ffn_up.weight=Q5_0 blk.1.attn_k.weight=Q5_0 blk.1.attn_output.weight=Q5_0 blk.1.attn_q.weight=Q5_0 blk.1.attn_v.weight=Q8_0 blk.1.ffn_down.weight=Q8_0 blk.1.ffn_gate.weight=Q5_0 blk.1.ffn_up.weight=Q5_0 output.weight=Q8_0 token_embd.weight=Q5_0 " ]
}
