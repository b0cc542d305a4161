#!/usr/bin/env bats
bats_require_minimum_version 1.5.0
# swift-export on vision-language models (docs/export.md "Vision-language models"): a LoRA that
# swift-train made on the tiny Qwen2-VL fixture (vocabulary widened to the qwen3 tokenizer's,
# tests/cli/vl_model.bash) merged into a Hugging Face directory: the keys in the input's
# layout, the vision tower and merger copied bit for bit, the processor files carried over.
# That the merged model computes what base + adapter does is tests/unit/test_export_vl.c (logits
# to 1e-5); tests/ref/check_vl_export.py checked it against transformers + peft once.

setup() {
    . "$BATS_TEST_DIRNAME/vl_model.bash" # vl_model_at, st_digest
    W="$BATS_TEST_TMPDIR"
    if [ ! -f "$SHARED/data/tokenizers/qwen3/tokenizer.json" ] ||
        [ ! -f "$SHARED/data/datasets/llama-factory-demo/mllm_demo.json" ]; then
        [ "${CI:-}" != true ] || return 1
        skip "shared data missing"
    fi
}

train_adapter() { # MODEL SHARDS OUT: 4 LoRA steps with the ViT and merger frozen
    run "$SWIFT_BIN/swift-train" --model "$1" --max-steps 4 --save-steps 4 --logging-steps 4 \
        --eval-steps 100 --learning-rate 1e-2 --lora-rank 4 --per-device-train-batch-size 1 \
        -j 1 -o "$3" "$2"
    [ "$status" -eq 0 ]
}

@test "export-vl: --merge-lora on Qwen2-VL: merged directory in the input's key layout, vision tensors bit-identical, processor files copied" {
    vl_model_at tests/fixtures/vlm/qwen2_vl "$W/m" "$W/d"
    echo '{"image_processor_type": "Qwen2VLImageProcessor", "min_pixels": 3136}' >"$W/m/preprocessor_config.json"
    echo '{"chat_template": "{{ messages }}"}' >"$W/m/chat_template.json"
    train_adapter "$W/m" "$W/d" "$W/a"
    run --separate-stderr "$SWIFT_BIN/swift-export" "$W/m" --merge-lora "$W/a/checkpoint-4" -o "$W/out"
    echo "$stderr"
    [ "$status" -eq 0 ]
    # 2 layers x 7 linears merged; the fixture is float32, so is the output
    [[ "$output" == '{"version":1,"format":"hf","output":"'"$W/out"'","dtype":"float32","tensors":'*',"merged":14,'* ]]
    for f in config.json preprocessor_config.json chat_template.json tokenizer.json tokenizer_config.json generation_config.json; do
        [ -f "$W/out/$f" ] || { echo "no $f"; false; }
    done
    cmp "$W/m/preprocessor_config.json" "$W/out/preprocessor_config.json"
    [ "$(jq -r .model_type "$W/out/config.json")" = qwen2_vl ]
    [ "$(jq -r .vision_config.depth "$W/out/config.json")" = 2 ]
    # the fixture's keys are transformers 5's module layout: kept as they were
    diff <(st_digest "$W/m" . | cut -d' ' -f1) <(st_digest "$W/out" . | cut -d' ' -f1)
    st_digest "$W/m" '^model\.visual\.' >"$W/v0"
    [ "$(wc -l <"$W/v0")" -ge 20 ]
    diff "$W/v0" <(st_digest "$W/out" '^model\.visual\.')
    # the language model's linears changed, its norms did not
    ! diff -q <(st_digest "$W/m" 'layers\.0\.self_attn\.q_proj\.weight') <(st_digest "$W/out" 'layers\.0\.self_attn\.q_proj\.weight')
    diff <(st_digest "$W/m" 'norm') <(st_digest "$W/out" 'norm')
}

@test "export-vl: --dtype bf16 on Qwen2.5-VL in the hub's key layout (visual.*, model.*): kept, config dtype set" {
    vl_model_at tests/fixtures/vlm/qwen2_5_vl "$W/m" "$W/d"
    train_adapter "$W/m" "$W/d" "$W/a"
    run "$SWIFT_BIN/swift-export" "$W/m" --merge-lora "$W/a/checkpoint-4" --dtype bf16 -o "$W/out"
    [ "$status" -eq 0 ]
    [[ "$output" == *'"dtype":"bfloat16"'*'"merged":14,'* ]]
    [ "$(jq -r .torch_dtype "$W/out/config.json")" = bfloat16 ]
    diff <(st_digest "$W/m" . | cut -d' ' -f1) <(st_digest "$W/out" . | cut -d' ' -f1)
    st_digest "$W/out" '^visual\.' | grep -q ' BF16 '
    ! st_digest "$W/out" . | grep -v ' BF16 '
}

@test "export-vl: an adapter for another model is an adapter/base mismatch, nothing written" {
    vl_model_at tests/fixtures/vlm/qwen2_vl "$W/m" ""
    run "$SWIFT_BIN/swift-export" "$W/m" --merge-lora tests/ref/fixtures/merge/adapter-lora -o "$W/out"
    [ "$status" -eq 1 ]
    [[ "$output" == "swift-export: adapter/base mismatch: "* ]]
    [ ! -e "$W/out" ]
}

@test "export-vl: --to gguf writes the language model as llama.cpp's qwen2vl (M-RoPE sections), the vision side left out; merge + gguf in one run is the same file" {
    vl_model_at tests/fixtures/vlm/qwen2_5_vl "$W/m" "$W/d"
    train_adapter "$W/m" "$W/d" "$W/a"
    run "$SWIFT_BIN/swift-export" "$W/m" --merge-lora "$W/a/checkpoint-4" --dtype fp32 -o "$W/out"
    [ "$status" -eq 0 ]
    run --separate-stderr "$SWIFT_BIN/swift-export" "$W/out" --to gguf --dtype q8_0 --name vl -o "$W/a.gguf"
    [ "$status" -eq 0 ]
    [[ "$output" == '{"version":1,"format":"gguf","output":"'"$W/a.gguf"'","arch":"qwen2vl","dtype":"q8_0","tensors":27,'* ]]
    [ "$stderr" = "swift-export: 42 vision tensors (ViT and merger) left out: this GGUF holds the language model (llama.cpp's qwen2vl), the vision side goes into an mmproj file
swift-export: 2 matrices use F16: their rows do not fit Q8_0 blocks (as llama.cpp does)" ]
    run "$SWIFT_BIN/swift-export" --dump "$W/a.gguf"
    [ "$status" -eq 0 ]
    [[ "$output" == *$'kv\tgeneral.architecture\tstring\t"qwen2vl"'* ]]
    [[ "$output" == *$'kv\tqwen2vl.rope.dimension_sections\tarray[i32]\t[2,3,3,0]'* ]]
    [[ "$output" == *$'kv\tqwen2vl.block_count\tu32\t2'* ]]
    [[ "$output" == *$'kv\ttokenizer.ggml.pre\tstring\t"qwen2"'* ]]
    [[ "$output" == *$'tensor\tblk.1.attn_q.bias\tF32\t[32]'* ]]
    [[ "$output" == *$'tensor\ttoken_embd.weight\tQ8_0\t[32,151936]'* ]]
    ! grep -q $'^tensor\t\\(v\\.\\|mm\\.\\)' <<<"$output"
    # base + adapter straight to GGUF (the merge in a temporary fp32 directory): the same bytes
    run "$SWIFT_BIN/swift-export" "$W/m" --merge-lora "$W/a/checkpoint-4" --to gguf --dtype q8_0 --name vl -o "$W/b.gguf"
    [ "$status" -eq 0 ]
    cmp "$W/a.gguf" "$W/b.gguf"
}

@test "export-vl: --mmproj writes the vision tower and merger as llama.cpp's clip mmproj (qwen2vl_merger: patch embedding split in its two taps, qkv split, gguf-py's names)" {
    vl_model_at tests/fixtures/vlm/qwen2_vl "$W/m" ""
    printf '{"image_mean": [0.5, 0.25, 0.125], "image_std": [0.5, 0.5, 0.5]}\n' >"$W/m/preprocessor_config.json"
    run --separate-stderr "$SWIFT_BIN/swift-export" "$W/m" --to gguf --dtype q8_0 -o "$W/t.gguf" --mmproj "$W/mmproj.gguf"
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = '{"version":1,"format":"mmproj","output":"'"$W/mmproj.gguf"'","arch":"clip","projector_type":"qwen2vl_merger","tensors":40}' ]
    [[ "${lines[1]}" == '{"version":1,"format":"gguf",'* ]]
    run "$SWIFT_BIN/swift-export" --dump "$W/mmproj.gguf"
    [ "$status" -eq 0 ]
    for kv in $'general.architecture\tstring\t"clip"' $'general.type\tstring\t"mmproj"' \
        $'clip.has_vision_encoder\tbool\ttrue' $'clip.projector_type\tstring\t"qwen2vl_merger"' \
        $'clip.vision.projection_dim\tu32\t32' $'clip.vision.embedding_length\tu32\t16' \
        $'clip.vision.block_count\tu32\t2' $'clip.vision.attention.head_count\tu32\t2' \
        $'clip.vision.patch_size\tu32\t14' $'clip.vision.image_mean\tarray[f32]\t[0.5,0.25,0.125]'; do
        grep -qF "kv	$kv" <<<"$output" || { echo "no $kv"; false; }
    done
    for t in $'v.patch_embd.weight\tF16\t[14,14,3,16]' $'v.patch_embd.weight.1\tF16\t[14,14,3,16]' \
        $'v.blk.1.attn_q.weight\tF16\t[16,16]' $'v.blk.1.attn_v.bias\tF32\t[16]' \
        $'v.blk.0.ffn_up.weight\tF16\t[16,32]' $'v.blk.0.ffn_down.weight\tF16\t[32,16]' \
        $'v.blk.0.ln1.bias\tF32\t[16]' $'v.post_ln.weight\tF32\t[16]' \
        $'mm.0.weight\tF16\t[64,64]' $'mm.2.weight\tF16\t[64,32]' $'mm.2.bias\tF32\t[32]'; do
        grep -qF "tensor	$t	" <<<"$output" || { echo "no $t"; false; }
    done
    ! grep -q $'^tensor\tv.blk.0.attn_qkv' <<<"$output"
    # a text model has no vision side: refused before anything is written
    run "$SWIFT_BIN/swift-export" tests/ref/fixtures/merge/base --to gguf -o "$W/x.gguf" --mmproj "$W/xm.gguf"
    [ "$status" -eq 1 ]
    [ "$output" = "swift-export: --mmproj: 'tests/ref/fixtures/merge/base' is not a vision-language model (qwen2_vl, qwen2_5_vl)" ]
    [ ! -e "$W/x.gguf" ] && [ ! -e "$W/xm.gguf" ]
    run "$SWIFT_BIN/swift-export" "$W/m" --to gguf -o "$W/t.gguf" --mmproj "$W/mmproj.gguf"
    [ "$status" -eq 1 ]
    [[ "$output" == "swift-export: '$W/mmproj.gguf' exists; use --force to overwrite it" ]]
    run "$SWIFT_BIN/swift-export" "$W/m" --merge-lora "$W/a" -o "$W/x" --mmproj "$W/xm.gguf"
    [ "$status" -eq 2 ]
    [[ "${lines[0]}" == "swift-export: --mmproj goes with --to gguf" ]]
}

@test "export-vl: --mmproj on Qwen2.5-VL: qwen2.5vl_merger with use_silu, n_wa_pattern and gate/up/down" {
    vl_model_at tests/fixtures/vlm/qwen2_5_vl "$W/m" ""
    run --separate-stderr "$SWIFT_BIN/swift-export" "$W/m" --to gguf -o "$W/t.gguf" --mmproj "$W/mmproj.gguf"
    [ "$status" -eq 0 ]
    # the fixture's 56-pixel windows are not what llama.cpp's clip computes (112): said
    [[ "$stderr" == *"window_size 56: llama.cpp's qwen2.5vl_merger attends in 112-pixel windows"* ]]
    run "$SWIFT_BIN/swift-export" --dump "$W/mmproj.gguf"
    [ "$status" -eq 0 ]
    [[ "$output" == *$'kv\tclip.projector_type\tstring\t"qwen2.5vl_merger"'* ]]
    [[ "$output" == *$'kv\tclip.use_silu\tbool\ttrue'* ]]
    [[ "$output" == *$'kv\tclip.vision.n_wa_pattern\tu32\t2'* ]]
    [[ "$output" == *$'kv\tclip.vision.image_mean\tarray[f32]\t[0.48145467,0.457827508,0.408210725]'* ]]
    [[ "$output" == *$'tensor\tv.blk.2.ffn_gate.weight\tF16\t[16,24]'* ]]
    [[ "$output" == *$'tensor\tv.blk.2.ffn_down.weight\tF16\t[24,16]'* ]]
    [[ "$output" == *$'tensor\tv.blk.0.attn_k.bias\tF32\t[16]'* ]]
}
