#!/bin/sh
# pipelines/dpo.sh — SFT then DPO on real data (docs/preference.md, "Pipeline"):
#
#   alpaca_en_demo.json → swift-preprocess → swift-train (SFT, full) → checkpoint
#   dpo_en_demo.json → swift-preprocess --kind pairs (--val-ratio: held-out pairs)
#   → swift-eval --task pref before (the SFT model against itself: accuracy 0, margin 0)
#   → swift-train --rlhf dpo (LoRA on the SFT checkpoint; the reference is the checkpoint with
#     the adapters off) → swift-eval --task pref after, on the held-out pairs.
#
# Environment: SWIFT_BIN (build/bin), SHARED (../shared: data/datasets/llama-factory-demo),
# MODEL (a model directory with a tokenizer and a chat template; default the tiny Llama of
# tests/fixtures/eval/llama), DPO_DIR (build/dpo: everything goes there), SFT_STEPS (60),
# DPO_STEPS (60), ROWS (0: every row of both files; N: the first N rows of each), MAX_LENGTH
# (128 tokens per document), GATE (1: the "after" record is gated on "before" with --baseline,
# exit 1 when the held-out margin or accuracy fell).
set -eu
bin=${SWIFT_BIN:-build/bin}
shared=${SHARED:-../shared}
out=${DPO_DIR:-build/dpo}
model=${MODEL:-tests/fixtures/eval/llama}
sft_steps=${SFT_STEPS:-60}
dpo_steps=${DPO_STEPS:-60}
rows=${ROWS:-0}
maxlen=${MAX_LENGTH:-128}
PATH=$(cd "$bin" && pwd):$PATH
export PATH
data=$shared/data/datasets/llama-factory-demo
case $out in /*) ;; *) out=$(pwd)/$out ;; esac
rm -rf "$out"
mkdir -p "$out/data"
step() { printf '\n== %s\n' "$*" >&2; }

# the first ROWS rows of each file (a slice for quick runs), else the files as they are
for f in alpaca_en_demo dpo_en_demo; do
    if [ "$rows" -gt 0 ]; then
        jq ".[:$rows]" "$data/$f.json" >"$out/data/$f.json"
    else
        cp "$data/$f.json" "$out/data/$f.json"
    fi
done

step "1/6 SFT data: alpaca_en_demo.json, the model's chat template, loss on the answers"
swift-preprocess --tokenizer "$model" --max-length "$maxlen" --truncation right \
    -o "$out/sft-shards" "$out/data/alpaca_en_demo.json" >/dev/null

step "2/6 SFT: full fine-tuning, $sft_steps steps"
swift-train --model "$model" -o "$out/sft" --tuner full --learning-rate 1e-3 \
    --per-device-train-batch-size 4 --max-steps "$sft_steps" --save-steps "$sft_steps" \
    --logging-steps "$sft_steps" --seed 1 "$out/sft-shards" |
    jq -c 'select(.loss != null) | {step: ."global_step/max_steps", loss}' >&2
sft=$out/sft/checkpoint-$sft_steps

step "3/6 pairs: dpo_en_demo.json as pair shards, 10% held out (val/)"
swift-preprocess --tokenizer "$sft" --kind pairs --max-length "$maxlen" --truncation right \
    --max-prompt-length $((maxlen / 2)) --val-ratio 0.1 -o "$out/pairs" \
    "$out/data/dpo_en_demo.json" >/dev/null

step "4/6 preference eval before DPO: the SFT model is its own reference (0 and 0)"
swift-eval "$sft" --ref-model "$sft" --task pref --dataset "$out/pairs/val" --quiet \
    -o "$out/pref-before.json" >/dev/null

step "5/6 DPO: LoRA on the SFT checkpoint, $dpo_steps steps, beta 0.1"
swift-train --model "$sft" -o "$out/dpo" --rlhf dpo --beta 0.1 --learning-rate 5e-3 \
    --per-device-train-batch-size 4 --max-steps "$dpo_steps" --save-steps "$dpo_steps" \
    --logging-steps "$dpo_steps" --seed 1 "$out/pairs" |
    jq -c 'select(.loss != null) | {step: ."global_step/max_steps", loss, "rewards/accuracies", "rewards/margins"}' >&2
dpo=$out/dpo/checkpoint-$dpo_steps

step "6/6 preference eval after DPO: the adapters against the SFT model, held-out pairs"
gate=
[ "${GATE:-1}" = 0 ] || gate="--baseline $out/pref-before.json"
# shellcheck disable=SC2086 # $gate is two words or none
swift-eval "$sft" --adapters "$dpo" --task pref --dataset "$out/pairs/val" --quiet $gate \
    -o "$out/pref-after.json" >/dev/null

for w in before after; do
    printf '%-7s %s\n' "$w" "$(jq -c '.metrics | {pairs, accuracy, margin}' "$out/pref-$w.json")" >&2
done
cat >&2 <<EOF
  SFT checkpoint   $sft
  pair shards      $out/pairs (val/: held out)
  DPO adapters     $dpo
  evaluations      $out/pref-before.json $out/pref-after.json
EOF
