# sft.mk — a supervised fine-tune as a Makefile: each stage is a file target with real
# dependencies, so re-running after a change redoes only what changed, and a failed stage never
# leaves a half-written target behind (.DELETE_ON_ERROR; every program also writes atomically).
#
#   make -f pipelines/sft.mk MODEL=models/qwen DATA=data/train.jsonl EVAL=data/test.jsonl
#   make -f pipelines/sft.mk report          # the bottleneck report of the last run
#
# Variables (override on the command line):
MODEL    ?= build/demo/model
DATA     ?= build/demo/data/train.jsonl
EVAL     ?= build/demo/data/test.jsonl
OUT      ?= build/sft
BIN      ?= build/bin
TUNER    ?= full
STEPS    ?= 200
MAXLEN   ?= 128
LR       ?= 3e-3
TEMPLATE ?= chatml
EVALTASK ?= exact

.DELETE_ON_ERROR:
.PHONY: all report clean

TRACE := $(OUT)/trace/
CKPT  := $(OUT)/run/checkpoint-$(STEPS)

all: $(OUT)/eval-after.json $(OUT)/model.q8_0.gguf $(OUT)/report.txt

# shards: re-made when the data, the tokenizer or the settings change
$(OUT)/shards/index.json: $(DATA) $(MODEL)/tokenizer.json
	$(BIN)/swift-preprocess --tokenizer $(MODEL) --template $(TEMPLATE) --max-length $(MAXLEN) \
	    --packing binpack --force --trace $(TRACE) -o $(OUT)/shards $(DATA)

$(OUT)/eval-before.json: $(MODEL)/config.json $(EVAL)
	$(BIN)/swift-eval $(MODEL) --task $(EVALTASK) --dataset $(EVAL) --template $(TEMPLATE) \
	    --max-new-tokens 8 -o $@ >/dev/null

# training: the checkpoint's config.json stands for the whole checkpoint directory
$(CKPT)/config.json: $(OUT)/shards/index.json $(MODEL)/config.json
	rm -rf $(OUT)/run
	$(BIN)/swift-train --model $(MODEL) -o $(OUT)/run --tuner $(TUNER) --learning-rate $(LR) \
	    --per-device-train-batch-size 8 --max-steps $(STEPS) --save-steps $(STEPS) \
	    --trace $(TRACE) $(OUT)/shards >$(OUT)/train.jsonl

# evaluation after training, gated: exit 1 (and no target) if worse than before
$(OUT)/eval-after.json: $(CKPT)/config.json $(OUT)/eval-before.json
	$(BIN)/swift-eval $(CKPT) --task $(EVALTASK) --dataset $(EVAL) --template $(TEMPLATE) \
	    --max-new-tokens 8 --baseline $(OUT)/eval-before.json --trace $(TRACE) -o $@ >/dev/null

$(OUT)/model.q8_0.gguf: $(CKPT)/config.json
	$(BIN)/swift-export $(CKPT) --to gguf --dtype q8_0 --force --trace $(TRACE) -o $@ >/dev/null

$(OUT)/report.txt: $(OUT)/eval-after.json $(OUT)/model.q8_0.gguf
	$(BIN)/swift-trace-analyze -o $@ $(TRACE)

report: $(OUT)/report.txt
	@cat $<

clean:
	rm -rf $(OUT)
