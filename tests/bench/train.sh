#!/bin/sh
# swift-train's CPU step (forward + backward + AdamW, fp32) against PyTorch eager on the same
# Llama configs, threads, batch and sequence length, run side by side; plus the model FLOP rate
# as a fraction of this machine's measured OpenBLAS sgemm peak.
# BENCH_CONFIGS (default "10M 100M"), BENCH_THREADS ("1 2"), BENCH_SEQ (256), BENCH_BATCH (1),
# BENCH_STEPS (2). Kept short by default: the machine is shared.
set -eu
B=${SWIFT_BUILD:-build}/bench/bench_train
# OpenMP threads must not spin while OpenBLAS (pthreads) needs the cores; same for torch
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
configs=${BENCH_CONFIGS:-10M 100M}
threads=${BENCH_THREADS:-1 2}
seq=${BENCH_SEQ:-256}
batch=${BENCH_BATCH:-1}
steps=${BENCH_STEPS:-2}
printf '%-6s %-3s %10s %10s %7s %9s %9s\n' config thr swift_tok/s torch_tok/s ratio GFLOP/s of_peak
for c in $configs; do
    for t in $threads; do
        s=$(OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t "$B" "$c" "$t" "$batch" "$seq" "$steps")
        p=$(OMP_NUM_THREADS=$t python3 tests/bench/train_torch.py "$c" "$t" "$batch" "$seq" "$steps" 2>/dev/null)
        echo "$s" >&2
        echo "$p" >&2
        st=$(echo "$s" | sed 's/.*"tokens_per_s":\([0-9.]*\).*/\1/')
        pt=$(echo "$p" | sed 's/.*"tokens_per_s": \([0-9.]*\).*/\1/')
        gf=$(echo "$s" | sed 's/.*"model_gflops":\([0-9.]*\).*/\1/')
        fr=$(echo "$s" | sed 's/.*"frac_of_peak":\([0-9.]*\).*/\1/')
        printf '%-6s %-3s %10s %10s %7s %9s %9s\n' "$c" "$t" "$st" "$pt" \
            "$(awk -v a="$st" -v b="$pt" 'BEGIN { printf "%.2fx", a / b }')" "$gf" "$fr"
    done
done
