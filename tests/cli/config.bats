#!/usr/bin/env bats
# One ms-swift style YAML drives every stage: each program takes its own keys, ignores the keys of
# other stages with one note naming them, and refuses a key no program knows (exit 2, like an
# unknown flag). Flags on the command line override the file.

bats_require_minimum_version 1.5.0

setup() {
    cd "$BATS_TEST_DIRNAME/../.."
    W=$BATS_TEST_TMPDIR
    B=$SWIFT_BIN
    M=tests/fixtures/eval/llama
    python3 datasets/make_synthetic.py "$W/data" >/dev/null
    cat >"$W/sft.yaml" <<EOF
# swift sft, its preprocessing and swift eval in one file (ms-swift's spellings)
model: $M
train_type: lora
dataset: $W/data/train.jsonl
template: chatml
system: You are a helpful assistant.
torch_dtype: bfloat16
max_length: 128
truncation_strategy: delete
packing: true
split_dataset_ratio: 0.1
loss_scale: default
lora_rank: 4
lora_alpha: 16
target_modules: all-linear
learning_rate: 1e-3
lr_scheduler_type: cosine
warmup_ratio: 0.0
num_train_epochs: 1
max_steps: 2
per_device_train_batch_size: 2
gradient_accumulation_steps: 1
save_steps: 2
logging_steps: 1
seed: 7
output_dir: $W/run
EOF
}

@test "one sft.yaml drives swift-preprocess, then swift-train, then swift-eval" {
    run --separate-stderr "$B/swift-preprocess" "$W/sft.yaml" -o "$W/shards"
    [ "$status" -eq 0 ]
    [ "$(jq -r '[.template, .packing, .max_length] | @tsv' <<<"$output")" = "chatml	binpack	128" ]
    [ "$(jq .val_samples <<<"$output")" -gt 0 ] # split_dataset_ratio
    tokens=$(jq .tokens <<<"$output")
    # one note, naming each key of another stage and its stage
    [ "$(grep -c 'ignoring keys for other stages' <<<"$stderr")" -eq 1 ]
    [[ $stderr == *"swift-preprocess: $W/sft.yaml: ignoring keys for other stages: train_type (swift-train), torch_dtype (swift-train/swift-eval/swift-export), lora_rank (swift-train), "* ]]
    [[ $stderr == *"learning_rate (swift-train)"* ]]
    [[ $stderr != *"template ("* && $stderr != *"packing ("* && $stderr != *"system ("* ]]
    # the system prompt reached the samples: more tokens than without it
    sed '/^system:/d' "$W/sft.yaml" >"$W/nosys.yaml"
    run --separate-stderr "$B/swift-preprocess" "$W/nosys.yaml" -o "$W/shards-nosys"
    [ "$status" -eq 0 ]
    [ "$(jq .tokens <<<"$output")" -lt "$tokens" ]

    run --separate-stderr "$B/swift-train" "$W/sft.yaml" "$W/shards"
    [ "$status" -eq 0 ]
    [ -d "$W/run/checkpoint-2" ] # output_dir, max_steps, save_steps
    [ "$(jq -r '[.train_type, .lora_rank, .learning_rate, .per_device_train_batch_size, .seed] | @tsv' "$W/run/args.json")" = "lora	4	0.001	2	7" ]
    [ "$(jq .r "$W/run/checkpoint-2/adapter_config.json")" = 4 ]
    [ "$(grep -c 'ignoring keys for other stages' <<<"$stderr")" -eq 1 ]
    [[ $stderr == *"swift-train: $W/sft.yaml: ignoring keys for other stages: dataset ("*"swift-preprocess"*"), template (swift-preprocess/swift-eval/swift-infer), system (swift-preprocess), truncation_strategy (swift-preprocess), packing (swift-preprocess), split_dataset_ratio (swift-preprocess), loss_scale (swift-preprocess)"* ]]
    # torch_dtype is swift-train's --torch-dtype now (issue 22): bf16 matmuls, no "ignoring" note
    [[ $stderr != *"ignoring torch_dtype"* ]]
    [ "$(jq -r .torch_dtype "$W/run/args.json")" = bfloat16 ]

    run --separate-stderr "$B/swift-eval" "$W/sft.yaml" $M --adapters "$W/run/checkpoint-2" \
        --task loss --limit 4
    [ "$status" -eq 0 ]
    [ "$(jq -r '[.dataset, .config.template, .config.max_length] | @tsv' <<<"$output")" = "$W/data/train.jsonl	chatml	128" ]
    [[ $stderr == *"swift-eval: $W/sft.yaml: ignoring keys for other stages: model (swift-preprocess/swift-train), train_type (swift-train), "* ]]
}

@test "flags override the file, a repeatable option (--dataset) too" {
    run --separate-stderr "$B/swift-eval" "$W/sft.yaml" $M --task loss --limit 2 \
        --dataset "$W/data/val.jsonl" --max_length 64
    [ "$status" -eq 0 ]
    [ "$(jq -s length <<<"$output")" -eq 1 ] # one record: the file's dataset was dropped
    [ "$(jq -r '[.dataset, .config.max_length] | @tsv' <<<"$output")" = "$W/data/val.jsonl	64" ]
}

@test "a key no program knows is a usage error naming the file and line (exit 2)" {
    printf 'max_length: 128\nlora_rnak: 8\n' >"$W/bad.yaml"
    for c in swift-preprocess swift-train swift-eval; do
        run --separate-stderr "$B/$c" "$W/bad.yaml"
        [ "$status" -eq 2 ]
        [ "${stderr_lines[0]}" = "$c:$W/bad.yaml:2: unknown option 'lora_rnak'" ]
        [ "${stderr_lines[1]}" = "Try '$c --help' for more information." ]
    done
    printf 'max_length: 128\nbogus:\n  a: 1\n' >"$W/bad2.yaml"
    run --separate-stderr "$B/swift-train" "$W/bad2.yaml"
    [ "$status" -eq 2 ]
    [ "${stderr_lines[0]}" = "swift-train:$W/bad2.yaml:2: unknown option 'bogus'" ]
    printf '{"max_length": 128, "bogus": 1}\n' >"$W/bad.json"
    run --separate-stderr "$B/swift-train" "$W/bad.json"
    [ "$status" -eq 2 ]
    [ "${stderr_lines[0]}" = "swift-train:$W/bad.json: unknown option 'bogus'" ]
}

@test "ms-swift's deepspeed: refused by swift-train with the way to do it here, ignored by the other stages" {
    printf 'deepspeed: zero2\nmax_length: 64\n' >"$W/ds.yaml"
    run --separate-stderr "$B/swift-train" "$W/ds.yaml"
    [ "$status" -eq 2 ]
    [[ ${stderr_lines[0]} == "swift-train:$W/ds.yaml:1: unknown option 'deepspeed' (here: mpirun -np N swift-train --zero 1"* ]]
    run --separate-stderr "$B/swift-preprocess" "$W/ds.yaml" --tokenizer $M -o "$W/s" "$W/data/train.jsonl"
    [ "$status" -eq 0 ]
    [[ $stderr == *"ignoring keys for other stages: deepspeed (swift-train)"* ]]
}

@test "every ms-swift key of docs/ms-swift.md's swift sft table is some stage's" {
    keys=$(sed -n '/^## swift sft flags/,/^## What/p' docs/ms-swift.md | cut -d'|' -f2 |
        grep -o -- '--[a-z_0-9]*' | sort -u)
    [ "$(wc -w <<<"$keys")" -gt 30 ]
    for k in $keys; do
        k=${k#--}
        printf '%s: x\n' "$k" >"$W/k.yaml"
        # its own key (a bad value 'x' at worst), another stage's (a note), or refused with a hint
        run --separate-stderr "$B/swift-train" "$W/k.yaml" --help
        [[ $stderr != *"unknown option '$k'"* || $stderr == *"unknown option '$k' (here: "* ]] ||
            { echo "$k: $stderr"; false; }
    done
}
