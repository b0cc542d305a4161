#!/bin/sh
# Mixed precision side by side (issue 22): tokens/s of swift-train's CPU step in float32 and in
# bfloat16 (--torch-dtype bfloat16: oneDNN bf16 matmuls, fp32 accumulation and master weights)
# against PyTorch eager in float32 and under torch.autocast(cpu, bfloat16), same Llama config,
# threads, batch and sequence; ratios swift/torch per dtype. Torch runs from
# $BENCH_PYTHON (default /work/venv-trl/bin/python3 when present, else python3) and is skipped
# ("-") when it has no torch. Shapes as issue 22's table: 10M at 4 x 256, 100M at 1 x 512.
# BENCH_THREADS ("1 2"), BENCH_STEPS (2), BENCH_SHAPES ("10M:4:256 100M:1:512").
set -eu
B=${SWIFT_BUILD:-build}/bench/bench_train
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
py=${BENCH_PYTHON:-python3}
[ -n "${BENCH_PYTHON:-}" ] || [ ! -x /work/venv-trl/bin/python3 ] || py=/work/venv-trl/bin/python3
threads=${BENCH_THREADS:-1 2}
steps=${BENCH_STEPS:-2}
shapes=${BENCH_SHAPES:-10M:4:256 100M:1:512}
tps() { sed -n 's/.*"tokens_per_s": *\([0-9.]*\).*/\1/p'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (b > 0) printf "%.2fx", a / b; else printf "-" }'; }
printf '%-6s %-7s %-3s %9s %9s %9s %9s %8s %8s %8s\n' config BxT thr swift_f32 swift_bf16 \
    torch_f32 torch_bf16 bf16/f32 vs_t_f32 vs_t_bf16
for sh in $shapes; do
    c=${sh%%:*}
    rest=${sh#*:}
    b=${rest%%:*}
    t=${rest#*:}
    for j in $threads; do
        s32=$(OMP_NUM_THREADS=$j OPENBLAS_NUM_THREADS=$j "$B" "$c" "$j" "$b" "$t" "$steps" float32)
        s16=$(OMP_NUM_THREADS=$j OPENBLAS_NUM_THREADS=$j "$B" "$c" "$j" "$b" "$t" "$steps" bfloat16)
        p32=$(OMP_NUM_THREADS=$j "$py" tests/bench/train_torch.py "$c" "$j" "$b" "$t" "$steps" float32 2>/dev/null || echo '{}')
        p16=$(OMP_NUM_THREADS=$j "$py" tests/bench/train_torch.py "$c" "$j" "$b" "$t" "$steps" bfloat16 2>/dev/null || echo '{}')
        printf '%s\n%s\n%s\n%s\n' "$s32" "$s16" "$p32" "$p16" >&2
        a=$(echo "$s32" | tps)
        bb=$(echo "$s16" | tps)
        x=$(echo "$p32" | tps)
        y=$(echo "$p16" | tps)
        printf '%-6s %-7s %-3s %9s %9s %9s %9s %8s %8s %8s\n' "$c" "${b}x$t" "$j" "$a" "$bb" \
            "${x:--}" "${y:--}" "$(ratio "$bb" "$a")" "$(ratio "$a" "${x:-0}")" \
            "$(ratio "$bb" "${y:-0}")"
    done
done
