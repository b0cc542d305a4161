#!/bin/sh
# swift-train --rlhf grpo against TRL 1.16's GRPOTrainer on the same task, threads and machine,
# run side by side: the byte-level tiny Llama of tests/fixtures/eval/llama, the 32 prompts of
# tests/fixtures/grpo-train (chatml, the generation prompt), reward 1 when the completion's first
# character is a lowercase ASCII letter, 8 completions per prompt, 16 per step, at most 8 tokens
# each, full fine-tuning, AdamW lr 1e-4 (beta2 0.95, no weight decay, clipping at 1, cosine),
# loss dapo, beta 0, the same seed. Prints the median seconds per step, the completion tokens
# per second (per second of the whole step, and of generation alone), the mean reward of the
# first and last 10 steps (both must learn), the ratio of the step times and where each
# implementation's step goes (ours: the spans of our --trace, and swift-trace-analyze's RL view
# of it; TRL's: its profiling spans).
# BENCH_STEPS (default 200), BENCH_THREADS (default "1"; e.g. "1 2"). TRL_PYTHON names a
# python with trl installed (default python3); when it has none, our figures are shown alone.
# Exits non-zero when our run fails; a failing TRL run is reported and skipped.
set -u
BIN=${SWIFT_BIN:-${SWIFT_BUILD:-build}/bin}
PY=${TRL_PYTHON:-python3}
N=${BENCH_STEPS:-200}
threads=${BENCH_THREADS:-1}
M=tests/fixtures/eval/llama
D=tests/fixtures/grpo-train/prompts.jsonl
H=$(dirname "$0")
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
W=$(mktemp -d /tmp/swift-bench-grpo.XXXXXX)
trap 'rm -rf "$W"' EXIT INT TERM
"$BIN/swift-preprocess" --kind prompts --tokenizer $M --template chatml --max-length 64 \
    -o "$W/prompts" $D >/dev/null 2>"$W/pre.err" || { cat "$W/pre.err" >&2; exit 1; }
if "$PY" -c 'import trl' 2>/dev/null; then
    trl=1
else
    trl=0
    echo "TRL: not installed for $PY (pip install trl; set TRL_PYTHON) - our figures alone"
fi
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores;" \
    "$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)"
rc=0
for t in $threads; do
    echo "-- $t thread(s), $N steps"
    OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t "$BIN/swift-train" --model $M -o "$W/r$t" \
        --rlhf grpo --reward-funcs format --format-pattern '[a-z]' --num-generations 8 \
        --per-device-train-batch-size 16 --max-completion-length 8 --tuner full \
        --learning-rate 1e-4 --adam-beta2 0.95 --weight-decay 0 --max-grad-norm 1 \
        --lr-scheduler-type cosine --warmup-ratio 0 --seed 42 --loss-type dapo --beta 0 \
        --max-steps "$N" --logging-steps 1 --save-steps 1000000 -j "$t" \
        --trace "$W/trace$t.json" "$W/prompts" >"$W/swift$t.out" 2>"$W/swift$t.err" || {
        echo "grpo: swift-train failed:" >&2
        tail -n 5 "$W/swift$t.err" >&2
        exit 1
    }
    python3 "$H/grpo_report.py" swift "$W/trace$t.json" "$W/r$t/logging.jsonl" "$t" \
        >"$W/swift$t.json" || exit 1
    cat "$W/swift$t.json" >&2
    # the analyzer's RL view of the same trace, where this build has one
    "$BIN/swift-trace-analyze" "$W/trace$t.json" 2>/dev/null |
        sed -n '/^ *RL steps/,/tokens\/s/p' >"$W/rl$t.txt"
    [ -s "$W/rl$t.txt" ] && sed -i '1i swift-trace-analyze on our trace:' "$W/rl$t.txt"
    if [ $trl = 1 ]; then
        if OMP_NUM_THREADS=$t PYTHONPATH="$H" "$PY" "$H/grpo_trl.py" $M $D "$t" "$N" 1e-4 42 \
            >"$W/trl$t.json" 2>"$W/trl$t.err"; then
            cat "$W/trl$t.json" >&2
            python3 "$H/grpo_report.py" table "$W/swift$t.json" "$W/trl$t.json" || rc=1
        else
            echo "TRL failed:"
            tail -n 5 "$W/trl$t.err"
            python3 "$H/grpo_report.py" table "$W/swift$t.json" || rc=1
        fi
    else
        python3 "$H/grpo_report.py" table "$W/swift$t.json" || rc=1
    fi
    cat "$W/rl$t.txt"
done
exit $rc
