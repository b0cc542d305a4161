#!/usr/bin/env bats
# swift-train --rlhf grpo (lib/train/grpo.c, docs/grpo.md) on the byte-level tiny Llama of
# tests/fixtures/eval/llama (chatml) and the 32 prompts of tests/fixtures/grpo-train: TRL's keys
# are logged and completions.jsonl written; on a task the tiny model can learn (the reward is 1
# when the completion contains a given letter) the mean reward rises; a 5-line Python reward
# program gives the built-in's rewards exactly; a program that crashes or hangs ends the run
# with exit 1 naming it and the checkpoints intact; --resume continues bit for bit; 2 MPI ranks
# give 1 rank's records. The loss against TRL's: tests/unit/test_grpo_loss.c.

bats_require_minimum_version 1.5.0

M=tests/fixtures/eval/llama
D=tests/fixtures/grpo-train
T="$SWIFT_BIN/swift-train"

setup_file() {
    export P="$BATS_FILE_TMPDIR/prompts"
    "$SWIFT_BIN/swift-preprocess" --kind prompts --tokenizer $M --template chatml \
        --max-length 64 -o "$P" $D/prompts.jsonl >/dev/null
}

setup() {
    W=$(mktemp -d)
}
teardown() {
    rm -rf "$W"
}

key() { # KEY FILE: the values of "KEY" in the train records of FILE
    grep '"loss"' "$2" | grep -v '"eval_' | grep -o "\"$1\":[^,}]*" | sed 's/.*://'
}
wait_for() { # PATTERN FILE: until FILE has a line matching PATTERN (at most 60 s)
    for _ in $(seq 600); do
        grep -q "$1" "$2" 2>/dev/null && return 0
        sleep 0.1
    done
    echo "timed out waiting for '$1' in $2"
    return 1
}

# the learnable task: contains the letter e (anchored regex of the format reward)
TASK=(--rlhf grpo --reward-funcs format --format-pattern '.*e' --num-generations 8
    --per-device-train-batch-size 16 --max-completion-length 12 --logging-steps 1 -j 1)

@test "grpo: TRL's keys are logged, completions.jsonl holds the first micro-batch's rows" {
    run "$T" --model $M -o "$W/r" "${TASK[@]}" --max-steps 2 "$P"
    echo "$output"
    [ "$status" -eq 0 ]
    L="$W/r/logging.jsonl"
    [ "$(key loss "$L" | wc -l)" -eq 2 ]
    for k in reward reward_std rewards/format/mean rewards/format/std frac_reward_zero_std \
        completions/mean_length completions/clipped_ratio clip_ratio/low_mean \
        clip_ratio/high_mean clip_ratio/region_mean; do
        head -1 "$L" | grep -q "\"$k\":" || { echo "missing $k"; false; }
    done
    ! grep -q '"kl"\|"token_acc"' "$L" # beta 0: no KL term, no reference
    [ "$(wc -l <"$W/r/completions.jsonl")" -eq 32 ] # steps 1 and 2, 16 rows each
    head -1 "$W/r/completions.jsonl" | grep -q '^{"step":1,"prompt":"[A-Z][^"]*","completion":'
    grep -q '"rlhf_type": "grpo"' "$W/r/args.json"
    grep -q '"loss_type": "dapo"' "$W/r/args.json"
    grep -q '"num_generations": 8' "$W/r/args.json"
}

@test "grpo: the mean reward rises on a task the tiny model can learn" {
    # LoRA at 1e-2: the share of completions with an e goes from about 1 in 20 to most
    run "$T" --model $M -o "$W/r" "${TASK[@]}" --max-completion-length 8 --max-steps 30 \
        --learning-rate 1e-2 --save-steps 100 "$P"
    [ "$status" -eq 0 ]
    L="$W/r/logging.jsonl"
    key reward "$L" | awk 'NR <= 5 { a += $1 } NR > 25 { b += $1 }
        END { print "first 5:", a / 5, "last 5:", b / 5; exit !(a / 5 < 0.2 && b / 5 > 0.7) }'
}

@test "grpo: a 5-line Python reward program gives the built-in's rewards" {
    run "$T" --model $M -o "$W/a" "${TASK[@]}" --max-steps 3 "$P"
    [ "$status" -eq 0 ]
    run "$T" --model $M -o "$W/b" --rlhf grpo --reward-cmd "python3 $D/contains.py e" \
        --num-generations 8 --per-device-train-batch-size 16 --max-completion-length 12 \
        --logging-steps 1 -j 1 --max-steps 3 "$P"
    echo "$output"
    [ "$status" -eq 0 ]
    diff <(key reward "$W/a/logging.jsonl") <(key reward "$W/b/logging.jsonl")
    diff <(key loss "$W/a/logging.jsonl") <(key loss "$W/b/logging.jsonl")
    key 'rewards/cmd/mean' "$W/b/logging.jsonl" | grep -q .
}

@test "grpo: a reward program that crashes, hangs or writes junk ends the run (exit 1) naming it; checkpoints stay" {
    for how in crash hang junk; do
        cmd="sh $D/flaky.sh 32 $how" # two steps of 16 rows, then the failure
        run "$T" --model $M -o "$W/$how" --rlhf grpo --reward-cmd "$cmd" --num-generations 8 \
            --per-device-train-batch-size 16 --max-completion-length 12 --logging-steps 1 -j 1 \
            --max-steps 4 --save-steps 1 --reward-timeout 1 "$P"
        echo "$output"
        [ "$status" -eq 1 ]
        [[ $output == *"swift-train: reward program '$cmd': row 0 (step 3, micro-batch 0): "* ]]
        case $how in
        crash) [[ $output == *"exited with status 3"* ]] ;;
        hang) [[ $output == *"no reply within 1 s"* ]] ;;
        junk) [[ $output == *"wrote 'hello', not a number"* ]] ;;
        esac
        [ -f "$W/$how/checkpoint-2/adapter_model.safetensors" ]
        [ ! -e "$W/$how/checkpoint-3" ]
        [ "$(key loss "$W/$how/logging.jsonl" | wc -l)" -eq 2 ]
    done
    ! pgrep -f "$D/flaky.sh" # stopped and reaped
    # the rewards the program gave before it failed are the built-in's
    run "$T" --model $M -o "$W/ok" "${TASK[@]}" --max-steps 2 "$P"
    [ "$status" -eq 0 ]
    diff <(key reward "$W/ok/logging.jsonl") <(key reward "$W/crash/logging.jsonl")
    # and the run resumes from checkpoint-2
    run "$T" --model $M -o "$W/crash" "${TASK[@]}" --max-steps 4 --save-steps 1 \
        --resume latest "$P"
    [ "$status" -eq 0 ]
    [ "$(key loss "$W/crash/logging.jsonl" | wc -l)" -eq 4 ]
}

@test "grpo: --resume continues bit for bit; SIGTERM checkpoints and exits 75" {
    args=(--model $M "${TASK[@]}" --max-steps 6 --save-steps 3 --learning-rate 1e-2)
    run "$T" "${args[@]}" -o "$W/a" "$P"
    [ "$status" -eq 0 ]
    # the same run cut back to its checkpoint-3, then resumed
    run "$T" "${args[@]}" -o "$W/b" "$P"
    [ "$status" -eq 0 ]
    rm -r "$W/b/checkpoint-6"
    grep '"loss"' "$W/b/logging.jsonl" | head -3 >"$W/l" && mv "$W/l" "$W/b/logging.jsonl"
    grep -v '"step":[456],' "$W/b/completions.jsonl" >"$W/c" && mv "$W/c" "$W/b/completions.jsonl"
    run "$T" "${args[@]}" -o "$W/b" --resume latest "$P"
    [ "$status" -eq 0 ]
    for k in loss grad_norm reward completions/mean_length; do
        diff <(key "$k" "$W/a/logging.jsonl") <(key "$k" "$W/b/logging.jsonl")
    done
    diff "$W/a/completions.jsonl" "$W/b/completions.jsonl"
    set -m # a background job with job control
    "$T" "${args[@]}" --max-steps 200 -o "$W/c" --data-delay-ms 100 "$P" >"$W/out" 2>"$W/err" &
    pid=$!
    set +m
    wait_for '"loss"' "$W/c/logging.jsonl"
    kill -TERM $pid
    rc=0
    wait $pid || rc=$?
    cat "$W/err"
    [ "$rc" -eq 75 ]
    grep -q "SIGTERM: checkpoint-[0-9]* written; exiting with 75" "$W/err"
}

@test "grpo: --beta adds the KL to the reference (adapters off); --num-iterations reuses a generation batch" {
    # the first character a lowercase letter: about 1 in 7, so the first steps move the policy
    run "$T" --model $M -o "$W/k" "${TASK[@]}" --format-pattern '[a-z]' --max-steps 3 \
        --per-device-train-batch-size 32 --beta 0.04 --learning-rate 1e-2 "$P"
    [ "$status" -eq 0 ]
    L="$W/k/logging.jsonl"
    [ "$(key kl "$L" | head -1)" = "0.0" ] # fresh adapters: policy = reference
    key kl "$L" | tail -1 | awk '{ exit !($1 > 0) }'
    grep -q '"beta": 0.04' "$W/k/args.json"
    # mu 2: steps 1-2 and 3-4 share their completions (the same rewards); step 2's ratio moved
    run "$T" --model $M -o "$W/m" "${TASK[@]}" --format-pattern '[a-z]' --max-steps 4 \
        --per-device-train-batch-size 32 --num-iterations 2 --learning-rate 1e-2 "$P"
    [ "$status" -eq 0 ]
    L="$W/m/logging.jsonl"
    [ "$(key reward "$L" | sed -n 1p)" = "$(key reward "$L" | sed -n 2p)" ]
    [ "$(key reward "$L" | sed -n 3p)" = "$(key reward "$L" | sed -n 4p)" ]
    [ "$(key clip_ratio/region_mean "$L" | sed -n 1p)" = "0.0" ]
    key clip_ratio/region_mean "$L" | sed -n 2p | awk '{ exit !($1 > 0) }'
    diff <(grep '"step":1,' "$W/m/completions.jsonl" | cut -d, -f2-3) \
        <(grep '"step":2,' "$W/m/completions.jsonl" | cut -d, -f2-3)
    [ "$(grep -c '"step":2,' "$W/m/completions.jsonl")" -eq 32 ]
}

@test "grpo under mpirun: 2 ranks give 1 rank's records (prompts split by whole groups)" {
    command -v mpirun >/dev/null || skip "mpirun not installed (openmpi-bin)"
    . "$BATS_TEST_DIRNAME/mpi_env.bash" # mpirun as root, no network, ASan
    args=(--model $M "${TASK[@]}" --max-steps 3 --learning-rate 1e-2)
    run "$T" "${args[@]}" --gradient-accumulation-steps 2 -o "$W/one" "$P"
    [ "$status" -eq 0 ]
    run timeout 120 mpirun -np 2 --oversubscribe --bind-to none --mca btl self,vader \
        "$T" "${args[@]}" -o "$W/two" "$P" </dev/null
    echo "$output"
    [ "$status" -eq 0 ]
    for k in loss grad_norm reward reward_std completions/mean_length; do
        paste <(key "$k" "$W/one/logging.jsonl") <(key "$k" "$W/two/logging.jsonl") | awk -v k="$k" '
            { d = $1 - $2; if (d < 0) d = -d; a = $1 < 0 ? -$1 : $1; if (d > 1e-5 * (a + 1e-3)) bad = 1; c++ }
            END { if (bad || c < 3) { print k " differs"; exit 1 } }'
    done
}

@test "grpo: bad flags and data are refused" {
    run "$T" --model $M -o "$W/a" --rlhf grpo "$P"
    [ "$status" -eq 1 ]
    [[ $output == *"--rlhf grpo needs a reward: --reward-funcs"* ]]
    run "$T" --model $M -o "$W/a" --rlhf grpo --reward-funcs format --max-completion-length 12 \
        --num-generations 8 --per-device-train-batch-size 12 "$P"
    [ "$status" -eq 1 ]
    [[ $output == *"--per-device-train-batch-size 12 counts completions: it must be a multiple of --num-generations 8"* ]]
    run "$T" --model $M -o "$W/a" --rlhf grpo --reward-funcs speed "$P"
    [ "$status" -eq 1 ]
    [[ $output == *"speed"* ]]
    run "$T" --model $M -o "$W/a" --rlhf grpo --reward-funcs format --loss-type sigmoid "$P"
    [ "$status" -eq 2 ]
    [[ $output == *"--loss-type: --rlhf grpo takes dapo, grpo, bnpo or dr_grpo"* ]]
    run "$T" --model $M -o "$W/a" --rlhf dpo --loss-type dapo "$P"
    [ "$status" -eq 2 ]
    run "$T" --model $M -o "$W/a" --reward-funcs accuracy "$P"
    [ "$status" -eq 2 ]
    [[ $output == *"--reward-funcs, --reward-cmd, --reward-model and --reward-weights are for --rlhf grpo"* ]]
    run "$T" --model $M -o "$W/a" --rlhf grpo --reward-funcs format --num-generations 1 "$P"
    [ "$status" -eq 2 ]
    run "$T" --model $M -o "$W/a" --rlhf grpo --reward-funcs format,length --reward-weights 1 "$P"
    [ "$status" -eq 1 ]
    run "$T" --model $M -o "$W/a" "$P" # prompt shards are not SFT data
    [ "$status" -eq 1 ]
    [[ $output == *"$P/index.json"* ]]
    "$SWIFT_BIN/swift-preprocess" --tokenizer $M --template chatml -o "$W/sft" \
        tests/fixtures/eval/synth/exact.jsonl >/dev/null 2>&1
    run "$T" --model $M -o "$W/b" --rlhf grpo --reward-funcs format "$W/sft"
    [ "$status" -eq 1 ]
    [[ $output == *"--kind prompts"* ]]
}

@test "grpo --reward-model: a reward model trained with --rlhf rm scores the completions" {
    # an rm taught that answers with an e are better (tests/fixtures/grpo-train/pairs.jsonl)
    "$SWIFT_BIN/swift-preprocess" --kind pairs --tokenizer $M --template chatml --max-length 64 \
        -o "$W/pairs" $D/pairs.jsonl >/dev/null 2>&1
    run "$T" --model $M -o "$W/rm" --rlhf rm --tuner full --max-steps 16 \
        --per-device-train-batch-size 8 --learning-rate 1e-3 -j 1 "$W/pairs"
    [ "$status" -eq 0 ]
    run "$T" --model $M -o "$W/g" "${TASK[@]}" --reward-model "$W/rm/checkpoint-16" \
        --reward-weights 1,0.5 --max-completion-length 8 --max-steps 20 --learning-rate 1e-2 "$P"
    echo "$output"
    [ "$status" -eq 0 ]
    L="$W/g/logging.jsonl"
    key rewards/rm/std "$L" | awk '$1 > 0.1 { n++ } END { exit n < 20 }' # it tells rows apart
    # each row's reward: format + 0.5 x rm
    grep -o '"reward":[^,]*,"rewards":{"format":[^,]*,"rm":[^}]*' "$W/g/completions.jsonl" |
        sed 's/"reward"://; s/,"rewards":{"format":/ /; s/,"rm":/ /' |
        awk '{ d = $1 - ($2 + 0.5 * $3); if (d > 1e-6 || d < -1e-6) bad = 1; n++ }
             END { exit bad || n < 16 }'
    grep -q "\"reward_model\": \"$W/rm/checkpoint-16\"" "$W/g/args.json"
    # a model without a score head is refused
    run "$T" --model $M -o "$W/h" "${TASK[@]}" --reward-model $M --max-steps 1 "$P"
    [ "$status" -eq 1 ]
    [[ $output == *"no score head"* ]]
}

@test "grpo: evaluation generates on the val prompts (eval_reward, ...) and leaves training as it was" {
    "$SWIFT_BIN/swift-preprocess" --kind prompts --tokenizer $M --template chatml --max-length 64 \
        --val-ratio 0.25 -o "$W/pv" $D/prompts.jsonl >/dev/null 2>&1
    args=(--model $M "${TASK[@]}" --format-pattern '[a-z]' --max-steps 4 --num-iterations 2
        --learning-rate 1e-2)
    run "$T" "${args[@]}" -o "$W/e" --eval-steps 1 "$W/pv"
    [ "$status" -eq 0 ]
    L="$W/e/logging.jsonl"
    [ "$(grep -c '"eval_reward":' "$L")" -eq 4 ]
    for k in eval_loss eval_rewards/format/mean eval_completions/mean_length eval_frac_reward_zero_std; do
        grep -q "\"$k\":" "$L" || { echo "missing $k"; false; }
    done
    # the same run without evaluations: the same training records (an evaluation inside a
    # --num-iterations window does not make the window generate again)
    run "$T" "${args[@]}" -o "$W/n" --eval-steps 100 --val-dataset "$W/pv/val" "$W/pv"
    [ "$status" -eq 0 ]
    for k in loss grad_norm reward; do
        diff <(key "$k" "$L") <(key "$k" "$W/n/logging.jsonl")
    done
}

@test "grpo traces: swift-trace-analyze's RL view and rules on real runs (a slow reward program, generation-bound)" {
    A="$SWIFT_BIN/swift-trace-analyze"
    # a program that sleeps 5 ms a row: 80 ms of a step's ~150 ms
    run "$T" --model $M -o "$W/s" --rlhf grpo --reward-cmd "python3 $D/slow.py e 0.005" \
        --num-generations 8 --per-device-train-batch-size 16 --max-completion-length 16 \
        --logging-steps 1 -j 1 --max-steps 3 --trace "$W/s.json" "$P"
    [ "$status" -eq 0 ]
    run "$A" --format json "$W/s.json"
    [ "$status" -eq 0 ]
    echo "$output" | python3 -c '
import json, sys
d = json.load(sys.stdin)
rl = d["processes"][0]["rl"]
g = rl["generating"]
assert rl["steps"] == 3 and rl["generating_steps"] == 3, rl
assert g["generate_us"] > 0 and g["prefill_us"] > 0 and g["decode_us"] > 0, g
assert g["reward_us"] > 3 * 16 * 5000 * 0.9 / 3, g  # 16 rows x 5 ms per step at least
rules = [b["rule"] for b in d["bottlenecks"]]
assert "reward_stall" in rules, rules
b = [b for b in d["bottlenecks"] if b["rule"] == "reward_stall"][0]
assert "cmd" in b["summary"] and "--reward-cmd" in b["summary"], b["summary"]
'
    # built-in rewards: the parts add up to the step, and generation_bound is there exactly when
    # generate is over half of it (on this tiny model training usually costs more)
    run "$T" --model $M -o "$W/g" "${TASK[@]}" --max-completion-length 48 --max-steps 2 \
        --trace "$W/g.json" "$P"
    [ "$status" -eq 0 ]
    run "$A" --format json "$W/g.json"
    [ "$status" -eq 0 ]
    echo "$output" | python3 -c '
import json, sys
d = json.load(sys.stdin)
g = d["processes"][0]["rl"]["generating"]
parts = sum(g[k] for k in ("generate_us", "reward_us", "ref_logps_us", "old_logps_us", "train_us",
                           "data_wait_us", "optimizer_us", "grad_sync_us", "other_us"))
assert abs(parts - g["step_us"]) < 1e-3 * g["step_us"] + 1, (parts, g)
assert abs(g["prefill_us"] + g["decode_us"] - g["generate_us"]) < 0.05 * g["generate_us"], g
rules = [b["rule"] for b in d["bottlenecks"]]
assert ("generation_bound" in rules) == (g["generate_us"] > 0.5 * g["step_us"]), (rules, g)
assert "reward_stall" not in rules, rules
'
    run "$A" "$W/g.json"
    [ "$status" -eq 0 ]
    [[ $output == *"RL steps (2 of 2 steps generate)"* ]]
}
