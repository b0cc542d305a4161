#!/bin/sh
# pipelines/serve.sh — train → export → serve → evaluate through the server (docs/infer.md,
# "Pipeline: train, export, serve, evaluate"):
#
#   synthetic data (datasets/make_synthetic.py) → swift-preprocess (chatml) → swift-eval before
#   → swift-train → swift-export GGUF → swift-infer GGUF --serve (a free loopback port, /health)
#   → swift-eval --eval-url (exact match, the question as the chat's user turn), gated on
#   "before" → swift-eval of the checkpoint here, for comparison → SIGTERM to the server.
#
# The server is stopped with SIGTERM whatever happens (a trap on exit: a failed stage, ^C), and
# must exit 0 with no KV cache block in use; the script fails otherwise.
#
# Environment: SWIFT_BIN (build/bin), SERVE_DIR (build/serve: everything goes there), MODEL (a
# model directory with a tokenizer; default the tiny Llama of tests/fixtures/eval/llama), STEPS
# (100 training steps), DTYPE (q8_0: the GGUF's type; f32 serves the checkpoint's exact weights,
# so the served answers equal the local ones), CONCURRENCY (8 requests in flight), GATE (1: the
# served model's accuracy is gated on the base model's with --baseline), EVAL_DATA (the test
# JSONL; default the synthetic data's test.jsonl).
set -eu
bin=${SWIFT_BIN:-build/bin}
out=${SERVE_DIR:-build/serve}
model=${MODEL:-tests/fixtures/eval/llama}
steps=${STEPS:-100}
dtype=${DTYPE:-q8_0}
conc=${CONCURRENCY:-8}
gate=${GATE:-1}
PATH=$(cd "$bin" && pwd):$PATH
export PATH
case $out in /*) ;; *) out=$(pwd)/$out ;; esac
rm -rf "$out"
mkdir -p "$out"
step() { printf '\n== %s\n' "$*" >&2; }

step "1/7 data: synthetic instruction tasks"
python3 datasets/make_synthetic.py "$out/data" >&2
test_data=${EVAL_DATA:-$out/data/test.jsonl}

step "2/7 preprocess: chatml template, packed shards"
swift-preprocess --tokenizer "$model" --template chatml --max-length 128 --packing binpack \
    -o "$out/shards" "$out/data/train.jsonl" >/dev/null

step "3/7 eval before training (the base model, here)"
swift-eval "$model" --task exact --dataset "$test_data" --template chatml --max-new-tokens 8 \
    --batch-size 25 --quiet -o "$out/eval-before.json" >/dev/null

step "4/7 train: full fine-tuning, $steps steps"
swift-train --model "$model" -o "$out/run" --tuner full --learning-rate 3e-3 \
    --per-device-train-batch-size 8 --max-steps "$steps" --save-steps "$steps" \
    "$out/shards" >"$out/train.jsonl"
ckpt=$out/run/checkpoint-$steps

step "5/7 export: GGUF ($dtype), the file swift-infer serves"
swift-export "$ckpt" --to gguf --dtype "$dtype" --force -o "$out/model.$dtype.gguf" >/dev/null

step "6/7 serve: swift-infer --serve on a free loopback port"
pid=
stop_server() {
    [ -n "$pid" ] || return 0
    kill -TERM "$pid" 2>/dev/null || true
    src=0
    wait "$pid" || src=$?
    pid=
    echo "$src" >"$out/server.rc"
    if [ "$src" -ne 0 ] || ! grep -q " 0 KV blocks in use" "$out/server.log"; then
        echo "serve.sh: the server did not stop cleanly (exit $src; $out/server.log)" >&2
        return 1
    fi
}
on_exit() {
    rc=$?
    stop_server || rc=1
    exit "$rc"
}
trap on_exit EXIT
trap 'exit 130' INT
trap 'exit 143' TERM
swift-infer "$out/model.$dtype.gguf" --serve --host 127.0.0.1 --port 0 --template chatml \
    --served-model-name tiny --trace "$out/trace/" 2>"$out/server.log" &
pid=$!
echo "$pid" >"$out/server.pid"
url=
for _ in $(seq 300); do
    port=$(sed -n 's|.*on http://127.0.0.1:\([0-9]*\) .*|\1|p' "$out/server.log")
    if [ -n "$port" ] && curl -sf --max-time 2 "http://127.0.0.1:$port/health" >/dev/null; then
        url=http://127.0.0.1:$port/v1
        break
    fi
    kill -0 "$pid" 2>/dev/null || break
    sleep 0.1
done
if [ -z "$url" ]; then
    cat "$out/server.log" >&2
    echo "serve.sh: the server did not come up" >&2
    exit 1
fi
echo "serving $out/model.$dtype.gguf on $url" >&2

step "7/7 eval through the server ($conc requests in flight), gated on \"before\""
baseline=
[ "$gate" = 1 ] && baseline="--baseline $out/eval-before.json"
# shellcheck disable=SC2086 # baseline: two words or none
swift-eval tiny --eval-url "$url" --task exact --dataset "$test_data" --template chatml \
    --max-new-tokens 8 --batch-size "$conc" --quiet --trace "$out/trace/" $baseline \
    --predictions "$out/served.jsonl" -o "$out/eval-served.json" >/dev/null
swift-eval "$ckpt" --task exact --dataset "$test_data" --template chatml --max-new-tokens 8 \
    --batch-size 25 --quiet --predictions "$out/local.jsonl" -o "$out/eval-after.json" >/dev/null
stop_server

before=$(jq .metrics.accuracy "$out/eval-before.json")
after=$(jq .metrics.accuracy "$out/eval-after.json")
served=$(jq .metrics.accuracy "$out/eval-served.json")
same=$(paste -d '\n' "$out/local.jsonl" "$out/served.jsonl" | jq -s '[range(0; length; 2) as $i |
    (.[$i].prediction == .[$i + 1].prediction)] | map(select(.)) | length')
cat >&2 <<EOF

serve: exact match $before before training, $after after (checkpoint, here), $served served
($dtype GGUF through $url); $same of $(wc -l <"$out/local.jsonl") answers identical.
  server log, trace   $out/server.log $out/trace
  evaluations         $out/eval-before.json $out/eval-after.json $out/eval-served.json
  answers             $out/local.jsonl $out/served.jsonl
EOF
