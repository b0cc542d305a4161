#!/usr/bin/env bats
# swift-train --rlhf kto against TRL: one step on four kto_en_demo rows (tests/fixtures/kto-ref,
# a KTO shard: two desirable, two undesirable) with the tiny Llama fixture, and the first
# logging.jsonl record's loss, grad_norm and metrics compared with what TRL 1.16's
# KTOTrainer._compute_loss gives (tests/fixtures/kto-ref/expected.json, written by
# tests/ref/gen_kto_fixtures.py), its KL term included (mismatched rows: each prompt with the
# previous row's completion, as TRL's add_kl_completion_ids).
# States: "zero" = pairs-ref/adapter-zero (lora_B = 0: policy = reference, loss 0.5 per row),
# "adapter" = model/llama/adapter (B != 0, kl > 0), loaded through --resume: a one-step run's
# checkpoint-1 gets the state's adapter_model.safetensors, and the record of step 2 (loss and
# gradient at those parameters, before its update) is compared.
# Tolerance: |ours - TRL| <= 1e-5 * max(|TRL|, 0.01) for every key TRL logs that we log (all but
# entropy and num_tokens); rewards/* (beta x a difference of two log-prob sums, which TRL adds up in
# float32: ~1e-6 absolute rounding on sums of ~60, while the rewards are ~0.03) against the larger
# of that and beta x |logps/*| of the same label (margins: of both labels).

D=tests/fixtures/kto-ref
E=$D/expected.json
T="$SWIFT_BIN/swift-train"

setup() {
    W=$(mktemp -d)
}
teardown() {
    rm -rf "$W"
}

run_case() {
    local case=$1 state=$2 flags common
    flags=$(jq -r --arg c "$case" '.cases[$c].flags' $E)
    common=$(jq -r '.common_flags' $E)
    local lora=(--lora-rank 4 --lora-alpha 8)
    run "$T" $common $flags "${lora[@]}" --save-steps 1 -o "$W/run" $D
    echo "$output"
    [ "$status" -eq 0 ]
    cp "$(jq -r --arg s "$state" '.states[$s].adapter' $E)/adapter_model.safetensors" \
        "$W/run/checkpoint-1/adapter_model.safetensors"
    run "$T" $common $flags "${lora[@]}" --save-steps 1 -o "$W/run" --resume latest \
        --max-steps 2 $D
    echo "$output"
    [ "$status" -eq 0 ]
    rec=$(grep '"loss"' "$W/run/logging.jsonl" | sed -n 2p)
    [[ $rec == *'"global_step/max_steps":"2/2"'* ]]
    echo "record: $rec"
}

compare() {
    run_case "$1" "$2"
    run jq -n -r --argjson got "$rec" --slurpfile e $E --arg c "$1" --arg s "$2" '
        $e[0] as $x | $x.cases[$c][$s] as $r | $x.cases[$c].params.beta as $beta
        | ($beta * ($r.metrics["logps/chosen"] // 0) | fabs) as $bc
        | ($beta * ($r.metrics["logps/rejected"] // 0) | fabs) as $br
        | [({loss: $r.loss, grad_norm: $r.grad_norm} + $r.metrics) | to_entries[]
           | .key as $k | .value as $v
           | if ($got | has($k)) then
               (($got[$k] - $v) | fabs) as $d
               | ([($v | fabs), 0.01]
                  + if $k == "rewards/margins" then [$bc, $br]
                    elif $k == "rewards/chosen" then [$bc]
                    elif $k == "rewards/rejected" then [$br] else [] end | max) as $scale
               | if $d <= 1e-5 * $scale then empty
                 else "MISMATCH \($k): ours \($got[$k]) TRL \($v) (rel \($d / $scale))" end
             elif ($k == "loss" or $k == "grad_norm" or ($x.swift_keys | index([$k]) != null))
             then "MISSING \($k): TRL \($v)"
             else empty end]
        | if length == 0 then "ok" else .[] end'
    echo "$output"
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = ok ]
}

@test "kto fixture: expected.json names the generator and TRL version; policy = reference gives 0.5" {
    [ "$(jq -r .generator $E)" = tests/ref/gen_kto_fixtures.py ]
    jq -e '.versions.trl' $E
    jq -e '.cases.kto.zero | .loss == 0.5 and .metrics.kl == 0' $E
    jq -e '.cases.kto.adapter.metrics.kl > 0' $E
    jq -e '.kind == "kto" and .version == 2' $D/index.json
}

@test "kto (policy = reference) equals TRL" { compare kto zero; }
@test "kto (saved adapter, kl > 0) equals TRL" { compare kto adapter; }
@test "kto with desirable/undesirable weights (policy = reference) equals TRL" {
    compare kto-weights zero
}
@test "kto with desirable/undesirable weights (saved adapter) equals TRL" {
    compare kto-weights adapter
}
@test "kto apo_zero_unpaired (policy = reference) equals TRL" { compare apo-zero-unpaired zero; }
@test "kto apo_zero_unpaired (saved adapter) equals TRL" { compare apo-zero-unpaired adapter; }
