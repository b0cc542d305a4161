#!/bin/sh
# Mixed precision side by side (issue 22): tokens/s of swift-train's CPU step in float32 and in
# bfloat16 (--torch-dtype bfloat16: oneDNN bf16 matmuls and attention GEMMs, fp32 accumulation
# and master weights) against PyTorch eager in float32 and under torch.autocast(cpu, bfloat16),
# same Llama config, threads, batch and sequence; ratios swift/torch per dtype. Torch runs from
# $BENCH_PYTHON (default /work/venv-trl/bin/python3 when present, else python3) and is skipped
# ("-") when it has no torch. Shapes as issue 22's table: 10M at 4 x 256, 100M at 1 x 512.
# The runs of a row are interleaved, BENCH_REPEAT times (default 2): swift f32, torch f32,
# swift bf16, torch bf16, swift f32, ... (A B A B), and each figure is the mean over the repeats.
# Two figures per run: tokens/s over wall time, and tokens per CPU second (user + system time of
# the process, all threads, over the same steps), which a loaded machine disturbs less. The load
# average (/proc/loadavg, 1 minute) is printed at the start of each row.
# BENCH_THREADS ("1 2"), BENCH_STEPS (2), BENCH_SHAPES ("10M:4:256 100M:1:512"), BENCH_REPEAT (2),
# BENCH_DTYPES ("float32 bfloat16"; a dtype left out shows "-").
set -eu
B=${SWIFT_BUILD:-build}/bench/bench_train
export OMP_WAIT_POLICY=${OMP_WAIT_POLICY:-passive}
py=${BENCH_PYTHON:-python3}
[ -n "${BENCH_PYTHON:-}" ] || [ ! -x /work/venv-trl/bin/python3 ] || py=/work/venv-trl/bin/python3
threads=${BENCH_THREADS:-1 2}
steps=${BENCH_STEPS:-2}
shapes=${BENCH_SHAPES:-10M:4:256 100M:1:512}
repeat=${BENCH_REPEAT:-2}
dtypes=${BENCH_DTYPES:-float32 bfloat16}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# mean of field $1 ("tokens_per_s" or "tokens_per_cpu_s") over the JSON lines of file $2
mean() {
    sed -n "s/.*\"$1\": *\([0-9.]*\).*/\1/p" "$2" |
        awk '{ s += $1; n++ } END { if (n) printf "%.1f", s / n; else printf "-" }'
}
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "-" && b != "-" && b > 0) printf "%.2fx", a / b; else printf "-" }'; }
printf '%-6s %-7s %-3s %-5s | %9s %9s %9s %9s %7s %7s %7s | %9s %9s %9s %9s %7s %7s\n' \
    config BxT thr load swift_f32 swift_bf16 torch_f32 torch_bf16 bf16/f32 vs_t_f32 vs_t_bf16 \
    cpu_s_f32 cpu_s_bf16 cpu_t_f32 cpu_t_bf16 vs_t_f32 vs_t_bf16
for sh in $shapes; do
    c=${sh%%:*}
    rest=${sh#*:}
    b=${rest%%:*}
    t=${rest#*:}
    for j in $threads; do
        load=$(cut -d' ' -f1 /proc/loadavg)
        : >"$tmp/s32"
        : >"$tmp/s16"
        : >"$tmp/p32"
        : >"$tmp/p16"
        r=0
        while [ "$r" -lt "$repeat" ]; do
            for dt in $dtypes; do
                d=32
                [ "$dt" = float32 ] || d=16
                OMP_NUM_THREADS=$j OPENBLAS_NUM_THREADS=$j "$B" "$c" "$j" "$b" "$t" "$steps" \
                    "$dt" >>"$tmp/s$d"
                echo >>"$tmp/s$d"
                OMP_NUM_THREADS=$j "$py" tests/bench/train_torch.py "$c" "$j" "$b" "$t" \
                    "$steps" "$dt" >>"$tmp/p$d" 2>/dev/null || true
            done
            r=$((r + 1))
        done
        cat "$tmp/s32" "$tmp/s16" "$tmp/p32" "$tmp/p16" | grep . >&2 || true
        a=$(mean tokens_per_s "$tmp/s32")
        bb=$(mean tokens_per_s "$tmp/s16")
        x=$(mean tokens_per_s "$tmp/p32")
        y=$(mean tokens_per_s "$tmp/p16")
        ca=$(mean tokens_per_cpu_s "$tmp/s32")
        cb=$(mean tokens_per_cpu_s "$tmp/s16")
        cx=$(mean tokens_per_cpu_s "$tmp/p32")
        cy=$(mean tokens_per_cpu_s "$tmp/p16")
        printf '%-6s %-7s %-3s %-5s | %9s %9s %9s %9s %7s %7s %7s | %9s %9s %9s %9s %7s %7s\n' \
            "$c" "${b}x$t" "$j" "$load" "$a" "$bb" "$x" "$y" "$(ratio "$bb" "$a")" \
            "$(ratio "$a" "$x")" "$(ratio "$bb" "$y")" "$ca" "$cb" "$cx" "$cy" \
            "$(ratio "$ca" "$cx")" "$(ratio "$cb" "$cy")"
    done
done
echo "load average at the end: $(cat /proc/loadavg)" >&2
