#!/usr/bin/env bats
# swift-train --rlhf against TRL: for each preference objective (DPO sigmoid, ipo, hinge, cDPO
# label smoothing, robust, RPO; SimPO; ORPO; CPO) one step on four dpo_en_demo pairs
# (tests/fixtures/pairs-ref, a pair shard) with the tiny Llama fixture, and the first
# logging.jsonl record's loss, grad_norm and metrics compared with what TRL's own loss code gives
# (tests/fixtures/pairs-ref/expected.json, written by tests/ref/gen_pref_fixtures.py; the TRL
# version and function of each case are in that file).
# States: "zero" = pairs-ref/adapter-zero (lora_B = 0: policy = reference, DPO sigmoid loss ln 2),
# "adapter" = model/llama/adapter (B != 0: policy != reference), both loaded with --adapters or,
# without that flag, through --resume (run_case); "fresh" = a new LoRA (B = 0 as well; its A is
# ours, so grad_norm is not compared there).
# Tolerance: |ours - TRL| <= 1e-5 * max(|TRL|, 0.01) for every key; rewards/margins, a difference
# of the two rewards, against the larger of |margins|, |rewards/chosen|, |rewards/rejected| (TRL
# sums the log-probs in float32: its rewards carry ~1e-6 absolute rounding, which the
# cancellation in the margin makes 3e-5 of the margin here).

D=tests/fixtures/pairs-ref
E=$D/expected.json
T="$SWIFT_BIN/swift-train"

setup() {
    W=$(mktemp -d)
}
teardown() {
    rm -rf "$W"
}

# need_flags FLAG...: every --flag among the arguments must be in swift-train --help (a flag
# that went missing fails the case, it is not skipped)
need_flags() {
    local help f
    help=$("$T" --help 2>/dev/null) || { echo "cannot run $T --help" >&2; return 1; }
    for f in "$@"; do
        case $f in
        --*) grep -q -- "^ *\(-., \)\?$f\b" <<<"$help" || { echo "swift-train has no $f" >&2; return 1; } ;;
        esac
    done
}

# run_case CASE STATE: one step of swift-train with the case's flags; sets rec (the record of the
# step evaluated at STATE's parameters). A saved adapter is loaded with --adapters where
# swift-train has it; else by --resume: a one-step run's checkpoint-1 gets STATE's
# adapter_model.safetensors (same r 4, alpha 8, all-linear, peft names) and the record of step 2,
# whose loss and gradient are computed at those parameters before its update, is compared.
run_case() {
    local case=$1 state=$2 flags common
    flags=$(jq -r --arg c "$case" '.cases[$c].flags' $E)
    common=$(jq -r '.common_flags' $E)
    local lora=(--lora-rank 4 --lora-alpha 8)
    need_flags $common $flags "${lora[@]}"
    if [ "$state" = fresh ]; then
        run "$T" $common $flags "${lora[@]}" -o "$W/run" $D
        echo "$output"
        [ "$status" -eq 0 ]
        rec=$(grep -m1 '"loss"' "$W/run/logging.jsonl")
    elif "$T" --help | grep -q -- '^ *\(-., \)\?--adapters\b'; then
        run "$T" $common $flags --adapters "$(jq -r --arg s "$state" '.states[$s].adapter' $E)" \
            -o "$W/run" $D
        echo "$output"
        [ "$status" -eq 0 ]
        rec=$(grep -m1 '"loss"' "$W/run/logging.jsonl")
    else
        need_flags --resume --save-steps
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
    fi
    echo "record: $rec"
}

# compare CASE STATE: run_case, then every key of expected.json against the record
compare() {
    local case=$1 state=$2 want=$2
    run_case "$case" "$state"
    [ "$state" = fresh ] && want=zero
    # Every key TRL has that swift-train must log (loss, grad_norm, the listed metrics), and the
    # other TRL metrics where swift-train logs them; grad_norm not for a fresh LoRA (our A).
    # The DPO cases hold TRL 0.19.1's values and, where TRL 1.16 has the objective, 1.16's: the
    # run must equal one of the two in every key (they differ in IPO's logps/rewards: 0.19.1 logs
    # per-token means, 1.16 sums). ORPO/CPO/SimPO: logits/* against "swift_convention" (the
    # response-token mean, as DPO defines it; see the logits/* tests below).
    run jq -n -r --argjson got "$rec" --slurpfile e $E --arg c "$case" --arg s "$want" \
        --arg fresh "$([ "$state" = fresh ] && echo 1)" '
        def diffs($r; $keys):
            ({loss: $r.loss} + (if $fresh == "1" then {} else {grad_norm: $r.grad_norm} end)
             + $r.metrics + ($r.swift_convention // {}))
            | [to_entries[] | .key as $k | .value as $v
               | ($k == "loss" or $k == "grad_norm" or ($keys | index([$k]) != null)) as $req
               | if ($got | has($k)) then
                   (($got[$k] - $v) | fabs) as $d
                   | ([($v | fabs), 0.01]
                      + if $k == "rewards/margins"
                        then [($r.metrics["rewards/chosen"] | fabs),
                              ($r.metrics["rewards/rejected"] | fabs)] else [] end
                      | max) as $scale
                   | if $d <= 1e-5 * $scale then empty
                     else "MISMATCH \($k): ours \($got[$k]) TRL \($v) (diff \($d), rel \($d / $scale))"
                     end
                 elif $req then "MISSING \($k): TRL \($v)"
                 else empty end];
        $e[0] as $x | $x.cases[$c][$s] as $r
        | diffs($r; $x.swift_keys) as $d0
        | if ($d0 | length) == 0 then "ok"
          elif $r.trl_1_16 == null then $d0[]
          else diffs($r.trl_1_16; $x.swift_keys) as $d1
            | if ($d1 | length) == 0 then "ok", "(equal to TRL 1.16; against \($x.versions.trl_dpo):)", $d0[]
              else "against \($x.versions.trl_dpo):", $d0[], "against \($x.versions.trl):", $d1[]
              end
          end'
    echo "$output"
    [ "$status" -eq 0 ]
    [ "${lines[0]}" = ok ]
}

# logits_as_trl CASE: ORPO/CPO/SimPO's logits/*; TRL computes them as the mean over every position
# of the padded chosen (rejected) rows, prompt and padding included, which depends on how the
# batch is padded. swift-train logs the response-token mean for every objective (DPOTrainer's
# definition, docs/preference.md); the case passes on that, and on TRL's value; any third fails.
logits_as_trl() {
    run_case "$1" fresh
    run jq -n -r --argjson got "$rec" --slurpfile e $E --arg c "$1" '
        $e[0].cases[$c].zero as $r
        | ["logits/chosen", "logits/rejected"][] as $k
        | (($got[$k] - $r.metrics[$k]) | fabs) as $dt
        | (($got[$k] - $r.swift_convention[$k]) | fabs) as $ds
        | if $dt <= 1e-7 then "trl"
          elif $ds <= 1e-7 then "response-mean \($k): ours \($got[$k]) TRL \($r.metrics[$k])"
          else "MISMATCH \($k): ours \($got[$k]) TRL \($r.metrics[$k]) response mean \($r.swift_convention[$k])"
          end'
    echo "$output"
    [ "$status" -eq 0 ]
    [[ $output != *MISMATCH* ]]
}

@test "pair fixture: expected.json names the generator, TRL versions and every case" {
    [ "$(jq -r .generator $E)" = tests/ref/gen_pref_fixtures.py ]
    jq -e '.versions.trl and .versions.trl_dpo' $E
    [ "$(jq -r '.cases | keys | length' $E)" -eq 9 ]
    # policy = reference: DPO sigmoid is ln 2 and every reward 0
    jq -e '.cases["dpo-sigmoid"].zero | (.loss - 0.6931471805599453 | fabs) < 1e-7
        and .metrics["rewards/margins"] == 0 and .metrics["rewards/accuracies"] == 0' $E
    jq -e '.kind == "pairs"' $D/index.json
}

@test "dpo sigmoid (policy = reference, new LoRA) equals TRL" { compare dpo-sigmoid fresh; }
@test "dpo sigmoid (policy = reference) equals TRL" { compare dpo-sigmoid zero; }
@test "dpo sigmoid (saved adapter) equals TRL" { compare dpo-sigmoid adapter; }
@test "dpo ipo (policy = reference, new LoRA) equals TRL" { compare dpo-ipo fresh; }
@test "dpo ipo (policy = reference) equals TRL" { compare dpo-ipo zero; }
@test "dpo ipo (saved adapter) equals TRL" { compare dpo-ipo adapter; }
@test "dpo hinge (policy = reference, new LoRA) equals TRL" { compare dpo-hinge fresh; }
@test "dpo hinge (policy = reference) equals TRL" { compare dpo-hinge zero; }
@test "dpo hinge (saved adapter) equals TRL" { compare dpo-hinge adapter; }
@test "dpo label smoothing (policy = reference, new LoRA) equals TRL" {
    compare dpo-label-smoothing fresh
}
@test "dpo label smoothing (policy = reference) equals TRL" { compare dpo-label-smoothing zero; }
@test "dpo label smoothing (saved adapter) equals TRL" { compare dpo-label-smoothing adapter; }
@test "dpo robust (policy = reference, new LoRA) equals TRL" { compare dpo-robust fresh; }
@test "dpo robust (policy = reference) equals TRL" { compare dpo-robust zero; }
@test "dpo robust (saved adapter) equals TRL" { compare dpo-robust adapter; }
@test "dpo rpo (policy = reference, new LoRA) equals TRL" { compare dpo-rpo fresh; }
@test "dpo rpo (policy = reference) equals TRL" { compare dpo-rpo zero; }
@test "dpo rpo (saved adapter) equals TRL" { compare dpo-rpo adapter; }
@test "simpo (new LoRA) equals TRL" { compare simpo fresh; }
@test "simpo (zero adapter) equals TRL" { compare simpo zero; }
@test "simpo (saved adapter) equals TRL" { compare simpo adapter; }
@test "orpo (new LoRA) equals TRL" { compare orpo fresh; }
@test "orpo (zero adapter) equals TRL" { compare orpo zero; }
@test "orpo (saved adapter) equals TRL" { compare orpo adapter; }
@test "cpo (new LoRA) equals TRL" { compare cpo fresh; }
@test "cpo (zero adapter) equals TRL" { compare cpo zero; }
@test "cpo (saved adapter) equals TRL" { compare cpo adapter; }
@test "orpo logits/*: the response-token mean (TRL: the padded rows)" { logits_as_trl orpo; }
@test "cpo logits/*: the response-token mean (TRL: the padded rows)" { logits_as_trl cpo; }
@test "simpo logits/*: the response-token mean (TRL: the padded rows)" { logits_as_trl simpo; }
