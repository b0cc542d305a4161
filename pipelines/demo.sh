#!/bin/sh
# make demo — the whole pipeline on data the project makes itself: no network, no ../shared.
#
#   data (datasets/make_synthetic.py) → tokenizer (swift-preprocess --train-tokenizer)
#   → tiny Llama with random weights (swift-train --init-model) → packed as an archive and
#   fetched with swift-download → swift-preprocess → swift-eval (before) → swift-train (traced,
#   with a profile window) → swift-eval (after, gated on "before") → swift-export (HF
#   safetensors + GGUF + NAME.Modelfile + GPTQ int4 on the training shards, evaluated again)
#   → swift-trace-analyze (text here, HTML next to it).
#
# DEMO_DIR (default build/demo) holds everything; DEMO_STEPS sets the training steps.
set -eu
bin=${SWIFT_BIN:-build/bin}
out=${DEMO_DIR:-build/demo}
steps=${DEMO_STEPS:-300}
PATH=$(cd "$bin" && pwd):$PATH
export PATH
case $out in /*) ;; *) out=$(pwd)/$out ;; esac
rm -rf "$out"
mkdir -p "$out"
trace=$out/trace
t_start=$(date +%s)

# bold step titles only on a terminal, and never under NO_COLOR (https://no-color.org)
if [ -t 2 ] && [ -z "${NO_COLOR:-}" ] && [ "${TERM:-}" != dumb ]; then
    bold=$(printf '\033[1m') plain=$(printf '\033[0m')
else
    bold='' plain=''
fi
step() { printf '\n%s== %s%s\n' "$bold" "$*" "$plain" >&2; }

step "1/9 data: synthetic instruction tasks (addition, colours, reversal, letters)"
python3 datasets/make_synthetic.py "$out/data" >&2

step "2/9 tokenizer: a byte-level BPE trained on the task text"
swift-preprocess --train-tokenizer 512 -o "$out/config" "$out/data/corpus.txt" >/dev/null

step "3/9 model: a tiny Llama (4 layers, hidden 128, GQA 4/2) with random weights"
cat >"$out/config/config.json" <<'EOF'
{
  "architectures": ["LlamaForCausalLM"],
  "model_type": "llama",
  "vocab_size": 512,
  "hidden_size": 128,
  "intermediate_size": 352,
  "num_hidden_layers": 4,
  "num_attention_heads": 4,
  "num_key_value_heads": 2,
  "max_position_embeddings": 256,
  "rms_norm_eps": 1e-05,
  "rope_theta": 10000.0,
  "hidden_act": "silu",
  "tie_word_embeddings": true,
  "bos_token_id": null,
  "eos_token_id": 511,
  "pad_token_id": 509,
  "initializer_range": 0.02,
  "torch_dtype": "float32"
}
EOF
swift-train --init-model --model "$out/config" -o "$out/hub/demo-llama" --seed 1 >/dev/null

step "4/9 download: the model as a .tar.gz from a local source (verified, manifest.json)"
tar -czf "$out/hub/demo-llama.tar.gz" -C "$out/hub/demo-llama" .
swift-download --trace "$trace/" -o "$out/model" "file://$out/hub/demo-llama.tar.gz" >/dev/null
ls "$out/model" >&2

step "5/9 preprocess: chatml template, loss on the answers, packed shards"
swift-preprocess --tokenizer "$out/model" --trace "$trace/" --max-length 128 --packing binpack \
    -o "$out/shards" "$out/data/train.jsonl" >/dev/null
swift-preprocess --tokenizer "$out/model" --max-length 128 -o "$out/shards/val" \
    "$out/data/val.jsonl" >/dev/null 2>&1

step "6/9 eval before training: exact match on 100 questions"
swift-eval "$out/model" --task exact --dataset "$out/data/test.jsonl" --template chatml \
    --max-new-tokens 8 --batch-size 25 -o "$out/eval-before.json" >/dev/null

step "7/9 train: full fine-tuning, $steps steps, traced, profile window at steps 10-12"
swift-train --model "$out/model" -o "$out/run" --tuner full --learning-rate 3e-3 \
    --warmup-steps 20 --per-device-train-batch-size 8 --max-steps "$steps" \
    --logging-steps 25 --save-steps "$steps" --eval-steps 100 \
    --trace "$trace/" --profile wait=8,warmup=2,active=3,repeat=1 "$out/shards" |
    jq -c 'select(.loss != null or .eval_loss != null) | {step: ."global_step/max_steps", loss, eval_loss, "tokens/s"}' >&2
ckpt=$out/run/checkpoint-$steps

step "8/9 eval after training (exit 1 if worse than before)"
swift-eval "$ckpt" --task exact --dataset "$out/data/test.jsonl" --template chatml \
    --max-new-tokens 8 --batch-size 25 --trace "$trace/" \
    --baseline "$out/eval-before.json" -o "$out/eval-after.json" >/dev/null

step "9/9 export: Hugging Face safetensors (bf16), llama.cpp GGUF (q8_0) + Modelfile, GPTQ int4"
swift-export "$ckpt" --to hf --dtype bf16 --trace "$trace/" -o "$out/export/hf" >/dev/null
swift-export "$ckpt" --to gguf --dtype q8_0 --to-ollama --trace "$trace/" \
    -o "$out/export/demo-llama.q8_0.gguf" >/dev/null
swift-export "$ckpt" --quant int4 --group-size 32 --method gptq --calib "$out/shards" \
    --calib-samples 64 --trace "$trace/" -o "$out/export/gptq-int4" |
    jq -c '{method, bits, quantized, mean_out_err: ([.layers[].out_err] | add / length),
            mean_rtn_out_err: ([.layers[].rtn_out_err] | add / length)}' >&2
swift-eval "$out/export/gptq-int4" --task exact --dataset "$out/data/test.jsonl" --template chatml \
    --max-new-tokens 8 --batch-size 25 -o "$out/eval-gptq.json" >/dev/null

step "report: where the time went (swift-trace-analyze)"
swift-trace-analyze --format html -o "$out/report.html" "$trace"
swift-trace-analyze "$trace"

before=$(jq ".metrics.accuracy" "$out/eval-before.json")
after=$(jq ".metrics.accuracy" "$out/eval-after.json")
gptq=$(jq ".metrics.accuracy" "$out/eval-gptq.json")
cat >&2 <<EOF

demo: done in $(($(date +%s) - t_start)) s. Exact match on the test questions: $before before, $after after training,
$gptq after GPTQ int4 quantization.
  model (downloaded)   $out/model
  shards               $out/shards
  run + checkpoints    $out/run   (logging.jsonl)
  evaluations          $out/eval-before.json $out/eval-after.json
  exports              $out/export/hf  $out/export/demo-llama.q8_0.gguf (+ demo-llama.q8_0.Modelfile:
                       ollama create demo-llama.q8_0 -f $out/export/demo-llama.q8_0.Modelfile)
                       $out/export/gptq-int4
  traces               $trace
  report               $out/report.html
EOF
