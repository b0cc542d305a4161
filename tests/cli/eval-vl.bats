#!/usr/bin/env bats
# swift-eval on Qwen2-VL / Qwen2.5-VL (docs/eval.md "Vision-language models"): loss and ppl over
# image shards of swift-preprocess equal transformers' cross-entropy on the same conversations
# (tests/ref/gen_vlm_generate.py's LOSS_ROWS, tests/fixtures/vlm_gen/*/loss.json) to 1e-5
# relative; generation with images, exact-match scoring; what is not supported yet is refused.

bats_require_minimum_version 1.5.0

setup() {
    ROOT=$BATS_TEST_DIRNAME/../..
    F=$ROOT/tests/fixtures/vlm_gen
    T=$BATS_TEST_TMPDIR
    EVAL=$SWIFT_BIN/swift-eval
    PRE=$SWIFT_BIN/swift-preprocess
    export OMP_NUM_THREADS=2
    cp "$F"/images/*.png "$T/"
    cat >"$T/data.jsonl" <<'ROWS'
{"messages":[{"role":"user","content":"<image>What is in the picture?"},{"role":"assistant","content":"A cat."}],"images":["a.png"]}
{"messages":[{"role":"user","content":"<image><image>Compare the two."},{"role":"assistant","content":"The left one is bigger."}],"images":["b.png","c.png"]}
{"messages":[{"role":"user","content":"Say something."},{"role":"assistant","content":"Hello."}]}
ROWS
}

@test "eval-vl: loss and ppl on image shards equal transformers' (Qwen2-VL, Qwen2.5-VL)" {
    for kind in qwen2_vl qwen2_5_vl; do
        run "$PRE" --tokenizer "$F/$kind" --template qwen2_vl -o "$T/s-$kind" "$T/data.jsonl"
        [ "$status" -eq 0 ]
        run --separate-stderr "$EVAL" "$F/$kind" --task loss --dataset "$T/s-$kind" --quiet
        [ "$status" -eq 0 ]
        [ "$(jq .n <<<"$output")" = 3 ]
        [ "$(jq .metrics.tokens <<<"$output")" = "$(jq .tokens "$F/$kind/loss.json")" ]
        jq -e --slurpfile r "$F/$kind/loss.json" \
            '((.metrics.loss - $r[0].loss) | fabs) <= 1e-5 * $r[0].loss' <<<"$output"
        run --separate-stderr "$EVAL" "$F/$kind" --task ppl --dataset "$T/s-$kind" --quiet
        [ "$status" -eq 0 ]
        jq -e --slurpfile r "$F/$kind/loss.json" \
            '((.metrics.ppl | log) - $r[0].loss | fabs) <= 1e-5 * $r[0].loss' <<<"$output"
    done
}

@test "eval-vl: raw rows for the loss are refused with a message (make shards)" {
    run --separate-stderr "$EVAL" "$F/qwen2_vl" --task loss --dataset "$T/data.jsonl"
    [ "$status" -eq 1 ]
    [[ "$stderr" == *"a vision-language model's loss is read from shards"* ]]
}

# The gen rows of the fixture's first three prompts, each answer the text of transformers' greedy
# ids (tests/fixtures/vlm_gen/KIND/expected.json: bytes below 256, special tokens left out, cut
# at the stop words as swift-eval cuts its answers)
gen_rows() {
    python3 - "$F/$1/expected.json" <<'PY'
import json, sys
e = json.load(open(sys.argv[1]))
rows = [("<image>What is in the picture?", ["a.png"]), ("Compare the two.", ["b.png", "c.png"]),
        ("Say something.", [])]
for k, (q, ims) in enumerate(rows):
    a = bytes(t for t in e[str(k)] if t < 256).decode("utf-8", "replace")
    for w in ("\n\n", "Question:"):
        a = a.split(w)[0]
    row = {"question": q, "answer": a}
    if ims:
        row["images"] = ims
    print(json.dumps(row, ensure_ascii=False))
PY
}

@test "eval-vl: exact on image conversations generates transformers' greedy answers (accuracy 1)" {
    for kind in qwen2_vl qwen2_5_vl; do
        gen_rows "$kind" >"$T/gen.jsonl"
        run --separate-stderr "$EVAL" "$F/$kind" --task exact --dataset "$T/gen.jsonl" \
            --template qwen2_vl --max-new-tokens 12 --batch-size 2 --predictions "$T/p.jsonl" --quiet
        [ "$status" -eq 0 ]
        [ "$(jq -c '[.n, .metrics.accuracy, .prefill_tokens, .decode_tokens]' <<<"$output")" = "[3,1,248,36]" ]
        [ "$(jq -s -c 'map(.correct)' "$T/p.jsonl")" = "[true,true,true]" ]
    done
}

@test "eval-vl: images need a vision-language model; a missing image names its row" {
    gen_rows qwen2_vl >"$T/gen.jsonl"
    run --separate-stderr "$EVAL" "$ROOT/tests/fixtures/eval/qwen2" --task exact --dataset "$T/gen.jsonl"
    [ "$status" -eq 1 ]
    [[ "$stderr" == *"gen.jsonl:1: a row with images needs a vision-language model"* ]]
    sed -i 's/a.png/none.png/' "$T/gen.jsonl"
    run --separate-stderr "$EVAL" "$F/qwen2_vl" --task exact --dataset "$T/gen.jsonl" --template qwen2_vl
    [ "$status" -eq 1 ]
    [[ "$stderr" == *"gen.jsonl:1: image 0: cannot open '$T/none.png'"* ]]
    run --separate-stderr "$EVAL" "$F/qwen2_vl" --task mc --dataset "$ROOT/tests/fixtures/eval/synth/mc.jsonl"
    [ "$status" -eq 1 ]
    [[ "$stderr" == *"--task mc on a vision-language model is not supported yet"* ]]
}
