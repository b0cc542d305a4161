#!/bin/sh
# swift-eval's inference (key/value-cache forward, lib/eval/kv.h) against transformers on the
# same random Llama config, threads, batch, prompt and decode lengths, run side by side:
# prefill tokens/s (prompts in one pass) and decode tokens/s (one token per sequence per step).
# BENCH_CONFIGS (default "100M"), BENCH_THREADS ("2"), BENCH_BATCH ("1"), BENCH_PROMPT (64),
# BENCH_NEW (16). Kept short by default: the machine is shared, and figures taken under load
# (see uptime) say little; BENCH_BATCH="1 8" BENCH_PROMPT=512 BENCH_NEW=128 on an idle machine.
set -eu
B=${SWIFT_BUILD:-build}/bench/bench_eval
configs=${BENCH_CONFIGS:-100M}
threads=${BENCH_THREADS:-2}
batches=${BENCH_BATCH:-1}
prompt=${BENCH_PROMPT:-64}
new=${BENCH_NEW:-16}
field() { echo "$1" | sed "s/.*\"$2\": *\([0-9.]*\).*/\1/"; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2fx", a / b }'; }
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
printf '%-6s %-3s %-5s %12s %12s %7s %12s %12s %7s\n' config thr batch \
    swift_prefill torch_prefill ratio swift_decode torch_decode ratio
for c in $configs; do
    for t in $threads; do
        for b in $batches; do
            s=$(OMP_NUM_THREADS=$t OPENBLAS_NUM_THREADS=$t "$B" "$c" "$t" "$b" "$prompt" "$new")
            p=$(OMP_NUM_THREADS=$t python3 tests/bench/eval_torch.py "$c" "$t" "$b" "$prompt" "$new" 2>/dev/null)
            echo "$s" >&2
            echo "$p" >&2
            sp=$(field "$s" prefill_tokens_per_s)
            tp=$(field "$p" prefill_tokens_per_s)
            sd=$(field "$s" decode_tokens_per_s)
            td=$(field "$p" decode_tokens_per_s)
            printf '%-6s %-3s %-5s %12s %12s %7s %12s %12s %7s\n' "$c" "$t" "$b" "$sp" "$tp" \
                "$(ratio "$sp" "$tp")" "$sd" "$td" "$(ratio "$sd" "$td")"
        done
    done
done
