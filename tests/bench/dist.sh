#!/bin/sh
# Data-parallel scaling of swift-train on this machine (CPU): 1 rank x 2 micro-batches against
# 2 ranks x 1 (mpirun, shared memory), same global batch, full fine-tuning of the 10M Llama
# config (random weights written by bench_train), micro-batch 8 x 32 tokens of the fixture
# shards, one thread per rank. Prints the step times, the scaling efficiency
# (t1 / t2 / 2 ... ideal 1 would be t2 = t1 / 2: each rank does half the work), the gradient
# bytes all-reduced per step and the all-reduce time per byte (grad_sync spans of the trace),
# next to PyTorch DDP with the gloo backend on the same model and batch in the same run.
# BENCH_STEPS (default 8). Kept short: the machine is shared.
set -eu
BUILD=${SWIFT_BUILD:-build}
T=$BUILD/bin/swift-train
N=${BENCH_STEPS:-8}
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_WAIT_POLICY=passive
export OMPI_MCA_btl=self,vader OMPI_MCA_btl_vader_single_copy_mechanism=none
BENCH_SAVE="$W/model" "$BUILD/bench/bench_train" 10M 1 1 2 1 >/dev/null
args="--model $W/model --tuner full --max-steps $N --logging-steps 1 --save-steps 100000
 --eval-steps 100000 --per-device-train-batch-size 8 -j 1 --learning-rate 1e-4"
step_s() { # mean train_speed(s/it) of the records after the first two
    grep '"train_speed' "$1" | tail -n +3 | sed 's/.*"train_speed(s\/it)":\([0-9.e-]*\).*/\1/' |
        awk '{ s += $1; k++ } END { printf "%.4f", s / k }'
}
"$T" $args --gradient-accumulation-steps 2 -o "$W/r1" tests/fixtures/shards >"$W/r1.out" 2>"$W/r1.err" ||
    { cat "$W/r1.err" >&2; exit 1; }
mpirun -np 2 --oversubscribe --bind-to none "$T" $args --trace "$W/tr/" -o "$W/r2" \
    tests/fixtures/shards </dev/null >"$W/r2.out" 2>"$W/r2.err" || { cat "$W/r2.err" >&2; exit 1; }
s1=$(step_s "$W/r1.out")
s2=$(step_s "$W/r2.out")
# grad_sync spans of rank 0 after the first two steps: bytes and mean duration
gs=$(grep '"name":"grad_sync"' "$W"/tr/*-r0.trace.jsonl | tail -n +3 |
    sed 's/.*"dur":\([0-9.]*\).*"bytes":\([0-9]*\).*/\1 \2/' |
    awk '{ d += $1; b = $2; k++ } END { printf "%d %.1f", b, d / k }')
bytes=${gs% *}
us=${gs#* }
p1=$(python3 tests/bench/dist_torch.py "$W/model" 1 8 32 "$N" 2>/dev/null)
p2=$(python3 tests/bench/dist_torch.py "$W/model" 2 8 32 "$N" 2>/dev/null)
echo "$p1" >&2
echo "$p2" >&2
t1=$(echo "$p1" | sed 's/.*"step_s": \([0-9.e-]*\).*/\1/')
t2=$(echo "$p2" | sed 's/.*"step_s": \([0-9.e-]*\).*/\1/')
tb=$(echo "$p2" | sed 's/.*"grad_bytes": \([0-9]*\).*/\1/')
ta=$(echo "$p2" | sed 's/.*"allreduce_s": \([0-9.e-]*\).*/\1/')
printf '%-16s %9s %9s %10s %12s %12s %10s\n' impl 1rank_s 2rank_s efficiency grad_bytes allreduce_ms ns/byte
printf '%-16s %9s %9s %10s %12s %12s %10s\n' swift-mpi "$s1" "$s2" \
    "$(awk -v a="$s1" -v b="$s2" 'BEGIN { printf "%.2f", a / b / 2 }')" "$bytes" \
    "$(awk -v u="$us" 'BEGIN { printf "%.2f", u / 1000 }')" \
    "$(awk -v u="$us" -v b="$bytes" 'BEGIN { printf "%.3f", u * 1000 / b }')"
printf '%-16s %9.4f %9.4f %10s %12s %12s %10s\n' torch-ddp-gloo "$t1" "$t2" \
    "$(awk -v a="$t1" -v b="$t2" 'BEGIN { printf "%.2f", a / b / 2 }')" "$tb" \
    "$(awk -v u="$ta" 'BEGIN { printf "%.2f", u * 1000 }')" \
    "$(awk -v u="$ta" -v b="$tb" 'BEGIN { printf "%.3f", u * 1e9 / b }')"
echo "ratio swift/torch step time on 2 ranks: $(awk -v a="$s2" -v b="$t2" 'BEGIN { printf "%.2fx", a / b }')"
