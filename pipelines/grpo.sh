#!/bin/sh
# pipelines/grpo.sh — GRPO on GSM8K (docs/grpo.md):
#
#   gsm8k/train.jsonl ({"question", "answer"}) → swift-preprocess --kind prompts (the question as
#   the user turn, its end kept when it is longer than MAX_LENGTH; the answer column rides along
#   as metadata) → swift-train --rlhf grpo with three rewards: accuracy (the completion's last
#   number against the answer's "#### n"), the length penalty, and a reward program (a Python
#   script that gives 1 when the completion ends with "#### <number>"), traced
#   → swift-trace-analyze (where each step's milliseconds went: generation, rewards, training)
#   → swift-eval --task gsm8k on the test split, before and after.
#
# Environment: SWIFT_BIN (build/bin), SHARED (../shared: data/datasets/gsm8k), MODEL (a model
# directory with a tokenizer and a chat template; default the tiny byte-level Llama of
# tests/fixtures/eval/llama: 128 positions, so prompts are cut to their last 96 bytes, and it
# learns nothing about arithmetic; give a real model for a real run), GRPO_DIR (build/grpo),
# ROWS (256 training questions), EVAL_ROWS (50 test questions), STEPS (40), G (8 completions per
# prompt), BATCH (16 completions per micro-batch), COMPLETION (32 tokens), MAX_LENGTH (prompt
# tokens, 96), LR (1e-2: LoRA).
set -eu
bin=${SWIFT_BIN:-build/bin}
shared=${SHARED:-../shared}
out=${GRPO_DIR:-build/grpo}
model=${MODEL:-tests/fixtures/eval/llama}
rows=${ROWS:-256}
eval_rows=${EVAL_ROWS:-50}
steps=${STEPS:-40}
G=${G:-8}
batch=${BATCH:-16}
completion=${COMPLETION:-32}
maxlen=${MAX_LENGTH:-96}
lr=${LR:-1e-2}
PATH=$(cd "$bin" && pwd):$PATH
export PATH
data=$shared/data/datasets/gsm8k
case $out in /*) ;; *) out=$(pwd)/$out ;; esac
rm -rf "$out"
mkdir -p "$out/data"
step() { printf '\n== %s\n' "$*" >&2; }

head -n "$rows" "$data/train.jsonl" >"$out/data/train.jsonl"
head -n "$eval_rows" "$data/test.jsonl" >"$out/data/test.jsonl"
cat >"$out/format_reward.py" <<'EOF'
# 1 when the completion ends with "#### <number>" (GSM8K's answer line), else 0.
import json, re, sys
for line in sys.stdin:
    c = json.loads(line)["completion"]
    print(1.0 if re.search(r"####\s*-?[\d,]+(\.\d+)?\s*$", c) else 0.0, flush=True)
EOF

step "1/5 prompts: $rows GSM8K questions, the generation prompt, the answers as metadata"
swift-preprocess --kind prompts --tokenizer "$model" --max-length "$maxlen" --truncation left \
    --val-ratio 0.05 -o "$out/prompts" "$out/data/train.jsonl" >/dev/null

step "2/5 eval before: GSM8K test, $eval_rows questions"
swift-eval "$model" --task gsm8k --dataset "$out/data/test.jsonl" --max-new-tokens "$completion" \
    -o "$out/eval-before.json" >/dev/null

step "3/5 GRPO: $steps steps, $G completions per prompt, accuracy + length + a reward program"
swift-train --model "$model" -o "$out/run" --rlhf grpo --reward-funcs accuracy,length \
    --reward-cmd "python3 $out/format_reward.py" --reward-weights 1,0.2,0.5 \
    --num-generations "$G" --per-device-train-batch-size "$batch" \
    --max-completion-length "$completion" --learning-rate "$lr" --max-steps "$steps" \
    --logging-steps 5 --eval-steps "$steps" --save-steps "$steps" --trace "$out/trace.json" \
    "$out/prompts" >"$out/train.jsonl"
jq -c 'select(.reward != null) | {step: ."global_step/max_steps", reward,
    accuracy: ."rewards/accuracy/mean", format: ."rewards/cmd/mean",
    length: ."completions/mean_length"}' "$out/train.jsonl" >&2

step "4/5 where the steps' time went"
swift-trace-analyze -o "$out/report.html" "$out/trace.json" >/dev/null
swift-trace-analyze "$out/trace.json" | sed -n '/Bottlenecks/,/top host operations/p' >&2

step "5/5 eval after: the adapter on the same questions"
swift-eval "$model" --adapters "$out/run/checkpoint-$steps" --task gsm8k \
    --dataset "$out/data/test.jsonl" --max-new-tokens "$completion" \
    -o "$out/eval-after.json" >/dev/null
jq -c '{before: .metrics}' "$out/eval-before.json" >&2
jq -c '{after: .metrics}' "$out/eval-after.json" >&2
printf 'grpo.sh: done in %s (report: %s)\n' "$out" "$out/report.html" >&2
