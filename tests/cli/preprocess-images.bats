#!/usr/bin/env bats
bats_require_minimum_version 1.5.0
# swift-preprocess on image rows (docs/multimodal.md): LLaMA-Factory's mllm_demo.json and
# ms-swift rows with "images" relative to the data file, the <image> placeholders expanded to
# Qwen2-VL's vision tokens (counts from transformers' grids in tests/fixtures/vision), the image
# cache and the index, --render's image spans, --min-pixels/--max-pixels and MIN_PIXELS/MAX_PIXELS,
# the image_decode trace spans, and bad, truncated and missing images (exit 1, row and path,
# nothing written). The pixel values themselves are tests/unit/test_vision.c's.

P="$SWIFT_BIN/swift-preprocess"
V=tests/fixtures/vision

setup() {
    TMP="$BATS_TEST_TMPDIR"
    TOK="$SHARED/data/tokenizers/qwen3" # Qwen2's vocabulary with <|vision_start|> etc.
    DEMO="$SHARED/data/datasets/llama-factory-demo"
    if [ ! -f "$TOK/tokenizer.json" ] || [ ! -f "$DEMO/mllm_demo.json" ]; then
        [ "${CI:-}" != true ] || return 1
        skip "shared data missing"
    fi
    mkdir -p "$TMP/d/pics"
    cp $V/images/odd.png $V/images/alpha.png $V/images/gray.jpg "$TMP/d/pics/"
}

rows() { # ms-swift rows: images relative to the file
    cat >"$TMP/d/rows.jsonl" <<'EOF'
{"messages": [{"role": "user", "content": "<image>What is this?"}, {"role": "assistant", "content": "Noise."}], "images": ["pics/odd.png"]}
{"messages": [{"role": "user", "content": "Compare <image> and <image>."}, {"role": "assistant", "content": "Both noise."}], "images": ["pics/alpha.png", {"path": "pics/gray.jpg"}]}
{"messages": [{"role": "user", "content": "No placeholder here"}, {"role": "assistant", "content": "Fine."}], "images": ["pics/odd.png"]}
EOF
}

@test "images: mllm_demo.json builds shards with the image cache; tokens = t*h*w/4 of transformers' grid" {
    run --separate-stderr "$P" --tokenizer "$TOK" --template qwen2_vl -o "$TMP/out" "$DEMO/mllm_demo.json"
    echo "$stderr"
    [ "$status" -eq 0 ]
    run jq -c '[.version, .images.cache, .images.references, .images.min_pixels, .images.max_pixels, .counts.samples]' "$TMP/out/index.json"
    [ "$output" = '[3,"images",8,3136,1003520,6]' ]
    [ "$(ls "$TMP/out/images" | wc -l)" -eq 3 ] # 1.jpg, 2.jpg, 3.jpg, each stored once
    [ "$(stat -c %a "$TMP/out/images")" = 755 ]
    ! ls -d "$TMP"/out.images-* 2>/dev/null
    # --render: the spans, each <|vision_start|> pads <|vision_end|>, counts from the fixtures
    run --separate-stderr "$P" --tokenizer "$TOK" --template qwen2_vl --render "$DEMO/mllm_demo.json"
    [ "$status" -eq 0 ]
    printf '%s\n' "${lines[@]}" >"$TMP/r.jsonl"
    g1=$(jq -c '.cases[] | select(.name == "demo1") | .grid_thw' $V/expected.json)
    [ "$(head -1 "$TMP/r.jsonl" | jq -c '.images[0].grid_thw')" = "$g1" ]
    [ "$(head -1 "$TMP/r.jsonl" | jq '.images | length')" -eq 2 ]
    run jq -r '. as $r | .images[] | [$r.ids[.start - 1], ($r.ids[.start:.start + .tokens] | unique | .[]),
        $r.ids[.start + .tokens], .tokens == (.grid_thw[0] * .grid_thw[1] * .grid_thw[2] / 4)] | @csv' "$TMP/r.jsonl"
    for l in "${lines[@]}"; do [ "$l" = "151652,151655,151653,true" ]; done
    [ "${#lines[@]}" -eq 8 ]
    # the cache files are those the samples name, and the names are their content's sha256
    for f in "$TMP"/out/images/*.pix; do
        [ "$(basename "$f" .pix)" = "$(sha256sum "$f" | cut -d' ' -f1)" ]
    done
    [ "$(jq -r '.images[].sha256' "$TMP/r.jsonl" | sort -u | wc -l)" -eq 3 ]
}

@test "images: ms-swift rows, paths relative to the file, {\"path\"} entries, no placeholder = before the query" {
    rows
    run --separate-stderr "$P" --tokenizer "$TOK" --template qwen2_vl --render "$TMP/d/rows.jsonl"
    [ "$status" -eq 0 ]
    printf '%s\n' "${lines[@]}" >"$TMP/r.jsonl"
    [ "$(jq -c '[.images | length]' "$TMP/r.jsonl" | tr -d '\n')" = '[1][2][1]' ]
    # row 3's image went in front of its query, as ms-swift does
    [[ $(sed -n 3p "$TMP/r.jsonl" | jq -r .text) == *"<|im_start|>user
<|vision_start|><|image_pad|>"*"<|vision_end|>No placeholder here<|im_end|>"* ]]
    # odd.png (37x53) -> 56x84 by min_pixels: 4x6 patches, 6 tokens (transformers' grid)
    [ "$(jq -c '.cases[] | select(.name == "odd_png") | .grid_thw' $V/expected.json)" = '[1,4,6]' ]
    [ "$(head -1 "$TMP/r.jsonl" | jq -c '.images[0] | [.grid_thw, .tokens]')" = '[[1,4,6],6]' ]
}

@test "images: --max-pixels / --min-pixels, and MAX_PIXELS / MIN_PIXELS as ms-swift reads them" {
    run --separate-stderr "$P" --tokenizer "$TOK" --render --max-pixels 50176 "$DEMO/mllm_demo.json"
    [ "$status" -eq 0 ]
    a=$(printf '%s\n' "${lines[0]}" | jq -c '.images[0] | [.grid_thw, .tokens]')
    [ "$a" = '[[1,10,20],50]' ] # smart_resize(168, 300, max 50176) = 140x280
    MAX_PIXELS=50176 run --separate-stderr "$P" --tokenizer "$TOK" --render "$DEMO/mllm_demo.json"
    [ "$status" -eq 0 ]
    [ "$(printf '%s\n' "${lines[0]}" | jq -c '.images[0] | [.grid_thw, .tokens]')" = "$a" ]
    # the flag wins over the environment
    MAX_PIXELS=1 run --separate-stderr "$P" --tokenizer "$TOK" --render --max_pixels 50176 "$DEMO/mllm_demo.json"
    [ "$status" -eq 0 ]
    [ "$(printf '%s\n' "${lines[0]}" | jq -c '.images[0] | [.grid_thw, .tokens]')" = "$a" ]
    MIN_PIXELS=200704 run --separate-stderr "$P" --tokenizer "$TOK" --render "$DEMO/mllm_demo.json"
    [ "$status" -eq 0 ]
    [ "$(printf '%s\n' "${lines[0]}" | jq -c '.images[0].grid_thw')" = '[1,24,44]' ]
    MAX_PIXELS=lots run "$P" --tokenizer "$TOK" --render "$DEMO/mllm_demo.json"
    [ "$status" -eq 2 ]
    [[ ${lines[0]} == "swift-preprocess: MAX_PIXELS: expected a positive count, got 'lots'" ]]
    run "$P" --tokenizer "$TOK" --render --min-pixels 0 "$DEMO/mllm_demo.json"
    [ "$status" -eq 2 ]
}

@test "images: a missing, truncated or corrupt image is an error with row and path; nothing written" {
    rows
    sed -i '2s|pics/alpha.png|pics/nope.png|' "$TMP/d/rows.jsonl"
    run --separate-stderr "$P" --tokenizer "$TOK" -o "$TMP/out" "$TMP/d/rows.jsonl"
    [ "$status" -eq 1 ]
    [ "$stderr" = "swift-preprocess:$TMP/d/rows.jsonl:2: image '$TMP/d/pics/nope.png': cannot open: No such file or directory" ]
    [ ! -e "$TMP/out" ]
    ! ls -d "$TMP"/out.images-* 2>/dev/null
    rows
    cp $V/bad/truncated.png "$TMP/d/pics/odd.png"
    run --separate-stderr "$P" --tokenizer "$TOK" -o "$TMP/out" "$TMP/d/rows.jsonl"
    [ "$status" -eq 1 ]
    [[ $stderr == "swift-preprocess:$TMP/d/rows.jsonl:1: image '$TMP/d/pics/odd.png': bad PNG: truncated PNG"* ]]
    [ ! -e "$TMP/out" ]
    ! ls -d "$TMP"/out.images-* 2>/dev/null
    cp $V/bad/truncated.jpg "$TMP/d/pics/gray.jpg"
    cp $V/images/odd.png "$TMP/d/pics/odd.png"
    run --separate-stderr "$P" --tokenizer "$TOK" -o "$TMP/out" "$TMP/d/rows.jsonl"
    [ "$status" -eq 1 ]
    [[ $stderr == "swift-preprocess:$TMP/d/rows.jsonl:2: image '$TMP/d/pics/gray.jpg': truncated JPEG"* ]]
    [ ! -e "$TMP/out" ]
    ! ls -d "$TMP"/out.images-* 2>/dev/null
    cp $V/bad/not_an_image.jpg "$TMP/d/pics/gray.jpg"
    run --separate-stderr "$P" --tokenizer "$TOK" -o "$TMP/out" "$TMP/d/rows.jsonl"
    [ "$status" -eq 1 ]
    [[ $stderr == *":2: image '$TMP/d/pics/gray.jpg': not a JPEG, PNG or WebP image (25 bytes)" ]]
    # --skip-invalid skips the row and says so, as for any invalid row
    run --separate-stderr "$P" --tokenizer "$TOK" -o "$TMP/out" --skip-invalid "$TMP/d/rows.jsonl"
    [ "$status" -eq 0 ]
    [ "$(jq .counts.samples "$TMP/out/index.json")" -eq 2 ]
    [ "$(jq .images.references "$TMP/out/index.json")" -eq 2 ]
}

@test "images: placeholders must match the images; URLs are not fetched; vision tokens needed; SFT only" {
    printf '%s\n' '{"messages":[{"role":"user","content":"<image><image>hi"},{"role":"assistant","content":"x"}],"images":["a.png"]}' >"$TMP/d/p.jsonl"
    run --separate-stderr "$P" --tokenizer "$TOK" -o "$TMP/out" "$TMP/d/p.jsonl"
    [ "$status" -eq 1 ]
    [ "$stderr" = "swift-preprocess:$TMP/d/p.jsonl:1: 2 <image> placeholders for 1 images in \"images\"" ]
    printf '%s\n' '{"messages":[{"role":"user","content":"<image>hi"},{"role":"assistant","content":"x"}],"images":["https://x.org/a.png"]}' >"$TMP/d/p.jsonl"
    run --separate-stderr "$P" --tokenizer "$TOK" -o "$TMP/out" "$TMP/d/p.jsonl"
    [ "$status" -eq 1 ]
    [[ $stderr == *":1: image 'https://x.org/a.png': URLs are not fetched"* ]]
    printf '%s\n' '{"messages":[{"role":"user","content":"<image>hi"},{"role":"assistant","content":"x"}],"images":["pics/odd.png"]}' >"$TMP/d/p.jsonl"
    run --separate-stderr "$P" --tokenizer tests/fixtures/eval/llama --template chatml -o "$TMP/out" "$TMP/d/p.jsonl"
    [ "$status" -eq 1 ]
    [[ $stderr == *":1: the tokenizer has no <|vision_start|> token (images need a Qwen2-VL tokenizer)" ]]
    [ ! -e "$TMP/out" ]
    printf '%s\n' '{"messages":[{"role":"user","content":"<image>hi"}],"chosen":{"from":"gpt","value":"a"},"rejected":{"from":"gpt","value":"b"},"images":["pics/odd.png"]}' >"$TMP/d/p.jsonl"
    run --separate-stderr "$P" --tokenizer "$TOK" -o "$TMP/out" "$TMP/d/p.jsonl"
    [ "$status" -eq 1 ]
    [[ $stderr == *":1: \"images\" in a pairs row: images are read in SFT rows only, so far" ]]
}

@test "images: one image_decode trace span per image; text-only data is unchanged (index version 1)" {
    run --separate-stderr "$P" --tokenizer "$TOK" -o "$TMP/out" --trace "$TMP/t.jsonl" "$DEMO/mllm_demo.json"
    [ "$status" -eq 0 ]
    [ "$(grep -c '"name":"image_decode"' "$TMP/t.jsonl")" -eq 8 ]
    grep '"name":"image_decode"' "$TMP/t.jsonl" | head -1 | grep -q '"path":".*mllm_demo_data/1.jpg"'
    printf '%s\n' '{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"x"}]}' >"$TMP/t.jsonl"
    run --separate-stderr "$P" --tokenizer "$TOK" -o "$TMP/txt" "$TMP/t.jsonl"
    [ "$status" -eq 0 ]
    [ "$(jq '[.version, has("images")]' -c "$TMP/txt/index.json")" = '[1,false]' ]
    [ ! -e "$TMP/txt/images" ]
}

@test "images: readers that cannot feed images to a model refuse the shards" {
    run --separate-stderr "$P" --tokenizer "$TOK" -o "$TMP/out" --val-ratio 0.5 "$DEMO/mllm_demo.json"
    [ "$status" -eq 0 ]
    [ "$(jq -r .images.cache "$TMP/out/val/index.json")" = ../images ]
    run --separate-stderr "$SWIFT_BIN/swift-train" --model tests/fixtures/model/qwen2 -o "$TMP/run" \
        --max-steps 1 "$TMP/out"
    [ "$status" -eq 1 ]
    [[ $stderr == *"$TMP/out/index.json: the samples have images (index version 3), which this program cannot feed to a model yet"* ]]
}

@test "images: a document with images over --max-length is dropped whatever --truncation says" {
    run --separate-stderr "$P" --tokenizer "$TOK" -o "$TMP/out" --max-length 150 --truncation left \
        "$DEMO/mllm_demo.json"
    [ "$status" -eq 0 ]
    [ "$(jq -c '[.counts.documents, .counts.dropped, .counts.truncated, .images.references]' "$TMP/out/index.json")" = '[2,4,0,2]' ]
}
