#!/bin/sh
# Inference side by side in one run (issue 21): swift-infer against llama.cpp (PyPI
# llama-cpp-python's server on the GGUF swift-export writes) and transformers generate, on the
# same machine, model, dtype (fp32 everywhere) and thread count, at 1, 8 and 32 concurrent
# requests.
#
# The model: random weights (swift-train --init-model) of a Qwen2 shape of ~108M parameters
# (hidden 512, 10 layers, MLP 1536, 8 heads, 2 key/value heads, vocabulary 151936 with the Qwen3
# tokenizer from $SHARED, tied embeddings), exported with `swift-export --to gguf --dtype f32`.
# The workload: /v1/completions, the first alpaca demo instructions as prompts, greedy,
# BENCH_TOKENS new tokens per request, every system held to exactly that many (swift-infer
# ignore_eos, llama.cpp min_tokens and a -100 logit bias on every special token, transformers
# min_new_tokens; the table's tokens column shows
# it). At concurrency C: C requests at once (3 one after another at C = 1); a request's clock
# starts when it is sent.
#   ours        swift-infer --serve (HTTP, the same client as llama.cpp) when the binary has it;
#               else batch mode ("batch" in the row): the C requests in one input, --max-num-seqs
#               C, TTFT = request_queued + request_prefill, TPOT = request_decode / (tokens - 1)
#               from its trace (docs/trace-schema.md), throughput = tokens / (first queued to
#               last decode end); model loading is not counted.
#   llama.cpp   python -m llama_cpp.server, --n_threads = --n_threads_batch = BENCH_THREADS,
#               --interrupt_requests False (its default cancels a stream when another request
#               arrives); it serves one request at a time (one llama_context behind a lock; the
#               Python server has no parallel slots), so concurrent requests queue.
#   transformers generate(do_sample=False) in batches of C padded on the left, torch threads =
#               BENCH_THREADS, in-process timing (tests/bench/infer_hf.py).
# Streaming clients: tests/bench/infer_client.py (`openai` async client).
#
# Rows: system, mode, concurrency, requests, output tokens, tok/s, TTFT p50/p99 and TPOT p50/p99
# in ms; then ours / theirs ratios per concurrency (tok/s: > 1 is ours faster; TTFT and TPOT:
# < 1 is ours faster) and the issue's goals. Every figure is measured in this run; the load
# average is printed (a shared machine slows everything).
#
# BENCH_INFER_SHAPE: small (default) or tiny (hidden 64, 2 layers, the byte tokenizer of
# tests/fixtures/eval/llama; no $SHARED; what tests/cli/bench-infer.bats runs).
# BENCH_THREADS (default 2), BENCH_TOKENS (default 64), BENCH_CONC (default "1 8 32").
# LLAMA_PYTHON (default /work/venv-infer/bin/python: llama-cpp-python[server] and openai) and
# HF_PYTHON (default /work/venv-trl/bin/python: torch and transformers); a missing one is
# skipped with a line saying so. Exits non-zero only when our run fails.
set -eu
BIN=${SWIFT_BIN:-${SWIFT_BUILD:-build}/bin}
SHARED=${SHARED:-../shared}
H0=$(cd "$(dirname "$0")" && pwd)
shape=${BENCH_INFER_SHAPE:-small}
threads=${BENCH_THREADS:-2}
T=${BENCH_TOKENS:-64}
levels=${BENCH_CONC:-1 8 32}
LPY=${LLAMA_PYTHON:-/work/venv-infer/bin/python}
HPY=${HF_PYTHON:-/work/venv-trl/bin/python}
export OMP_WAIT_POLICY="${OMP_WAIT_POLICY:-passive}"
W=$(mktemp -d /tmp/swift-bench-infer.XXXXXX)
srv='' lsrv=''
cleanup() {
    for p in $srv $lsrv; do kill "$p" 2>/dev/null && wait "$p" 2>/dev/null; done
    rm -rf "$W"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
case $shape in
small)
    H=512 L=10 I=1536 NH=8 KV=2 V=151936 arch=Qwen2ForCausalLM mt=qwen2 tie=true
    tok=$SHARED/data/tokenizers/qwen3
    data=$SHARED/data/datasets/llama-factory-demo/alpaca_en_demo.json
    if [ ! -f "$tok/tokenizer.json" ] || [ ! -f "$data" ]; then
        echo "infer: needs $tok and $data (set SHARED)" >&2
        exit 1
    fi
    ;;
tiny)
    H=64 L=2 I=128 NH=4 KV=2 V=260 arch=LlamaForCausalLM mt=llama tie=false
    tok=tests/fixtures/eval/llama data=''
    ;;
*)
    echo "infer: BENCH_INFER_SHAPE is small or tiny, not '$shape'" >&2
    exit 2
    ;;
esac
HD=$((H / NH))
mkdir -p "$W/model0"
cat >"$W/model0/config.json" <<EOF
{"architectures": ["$arch"], "model_type": "$mt", "vocab_size": $V,
 "hidden_size": $H, "intermediate_size": $I, "num_hidden_layers": $L,
 "num_attention_heads": $NH, "num_key_value_heads": $KV, "head_dim": $HD,
 "max_position_embeddings": 4096, "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
 "hidden_act": "silu", "tie_word_embeddings": $tie, "torch_dtype": "float32"}
EOF
cp "$tok/tokenizer.json" "$tok/tokenizer_config.json" "$W/model0/"
"$BIN/swift-train" --init-model --model "$W/model0" -o "$W/model" --seed 1 >/dev/null 2>"$W/init.err" || {
    cat "$W/init.err" >&2
    exit 1
}
maxc=1
for c in $levels; do [ "$c" -gt "$maxc" ] && maxc=$c; done
# the prompts: alpaca instructions (with their input), or fixed lines for the tiny shape
if [ -n "$data" ]; then
    jq -c "[.[:$maxc][] | if .input != \"\" then .instruction + \"\\n\" + .input else .instruction end]" \
        "$data" >"$W/prompts.json"
else
    jq -cn "[range($maxc) | \"Tell me about the number \\(.).\"]" >"$W/prompts.json"
fi
params=$(cat "$W/model"/*.safetensors | wc -c | awk '{printf "%.1f", $1 / 4e6}')
nreq() { if [ "$1" -eq 1 ]; then echo 3; else echo "$1"; fi; }

serve=no
"$BIN/swift-infer" --help 2>&1 | grep -Eq -- '--serve([ =]|$)' && serve=yes
echo "model: $arch random weights, hidden $H, $L layers, MLP $I, $NH heads ($KV key/value)," \
    "vocabulary $V, ~${params}M parameters, fp32 on every side; $T new tokens per request," \
    "greedy; $threads threads each"
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores;" \
    "$(lscpu 2>/dev/null | sed -n 's/^Model name: *//p' | head -1)"
hdr="%-13s %-6s %4s %4s %6s %8s %9s %9s %9s %9s\n"
row() { # system mode conc json-file
    jq -r --arg s "$1" --arg m "$2" --arg c "$3" '[$s, $m, $c, .requests, .tokens,
        (.tok_s * 10 | round / 10), (.ttft_p50, .ttft_p99, .tpot_p50, .tpot_p99
        | if . == null then "-" else . * 10000 | round / 10 end)] | @tsv' "$4" |
        awk -F '\t' -v hdr="$hdr" '{printf hdr, $1, $2, $3, $4, $5, $6, $7, $8, $9, $10}'
    cp "$4" "$W/res-$1-$3.json"
}
# CPU time (user + sys, all threads) of process $1 in seconds, from /proc (0 where there is none)
cpu_of() {
    awk -v hz="$(getconf CLK_TCK 2>/dev/null || echo 100)" '{print ($14 + $15) / hz}' \
        "/proc/$1/stat" 2>/dev/null || echo 0
}
# the rows' CPU figures, after the table: cpu_s / tokens of each result that has cpu_s
cpu_rows() {
    for f in "$W"/res-*.json; do
        [ -f "$f" ] || continue
        jq -r --arg f "$(basename "$f" .json)" 'select(.cpu_s != null and .tokens > 0)
            | "cpu: \($f | ltrimstr("res-")): \(.cpu_s * 1000 / .tokens * 10 | round / 10) ms" +
              " user+sys per output token (\(.cpu_s * 100 | round / 100) s for \(.tokens))"' "$f"
    done
}
# shellcheck disable=SC2059
printf "$hdr" system mode conc reqs tokens tok/s ttft_p50 ttft_p99 tpot_p50 tpot_p99
echo "(TTFT and TPOT in ms; tokens: output tokens over all requests, each should be $T)"

# ours, batch mode: one input per concurrency level wave, its trace read with jq
ours_batch() { # conc
    c=$1 n=$(nreq "$1") i=0 w=0
    rm -f "$W"/ours-*.trace "$W"/out-*.jsonl
    while [ "$i" -lt "$n" ]; do
        jq -c --argjson c "$c" --argjson i "$i" --argjson n "$n" --argjson t "$T" \
            '. as $p | [range($i; [$i + $c, $n] | min)] | .[] | {custom_id: "r\(.)",
             method: "POST", url: "/v1/completions", body: {model: "m",
             prompt: $p[. % ($p | length)], max_tokens: $t, temperature: 0, ignore_eos: true}}' \
            "$W/prompts.json" >"$W/in-$w.jsonl"
        "$BIN/swift-infer" "$W/model" "$W/in-$w.jsonl" -o "$W/out-$w.jsonl" -j "$threads" \
            --max-num-seqs "$c" --max-model-len 1024 --trace "$W/ours-$w.trace" \
            2>"$W/ours.err" || {
            echo "infer: swift-infer (concurrency $c) failed:" >&2
            tail -n 5 "$W/ours.err" >&2
            exit 1
        }
        i=$((i + c)) w=$((w + 1))
    done
    for f in "$W"/ours-*.trace; do
        jq -s '[.[] | select(.ph == "X" and (.name | startswith("request_")))] as $e
            | ($e | map(.ts) | min) as $t0 | ($e | map(.ts + .dur) | max) as $t1
            | [$e[] | select(.name == "request_decode")] as $d
            | {wall: (($t1 - $t0) / 1e6), reqs: [$d[] | .args.req as $r | {
                toks: .args.completion_tokens,
                ttft: (([$e[] | select((.name == "request_queued" or .name == "request_prefill")
                          and .args.req == $r) | .dur] | add) / 1e6),
                tpot: (if .args.completion_tokens > 1
                       then .dur / 1e6 / (.args.completion_tokens - 1) else null end)}]}' "$f"
    done | jq -s 'def pct(p): sort | if length == 0 then null
                    else .[([(p / 100 * length | ceil) - 1, 0] | max)] end;
        (map(.wall) | add) as $wall | [.[].reqs[]] as $r | {requests: ($r | length),
        tokens: ($r | map(.toks) | add), min_tokens: ($r | map(.toks) | min),
        max_tokens: ($r | map(.toks) | max), wall_s: $wall,
        tok_s: (($r | map(.toks) | add) / $wall),
        ttft_p50: ($r | map(.ttft) | pct(50)), ttft_p99: ($r | map(.ttft) | pct(99)),
        tpot_p50: ([$r[].tpot | select(. != null)] | pct(50)),
        tpot_p99: ([$r[].tpot | select(. != null)] | pct(99))}' >"$W/r.json"
}

# an OpenAI-compatible server on $1 (pid in $srv), waited for until /v1/models answers
wait_up() { # url log pid
    k=0
    until curl -sf "$1/models" >/dev/null 2>&1; do
        k=$((k + 1))
        if [ "$k" -gt 600 ] || ! kill -0 "$3" 2>/dev/null; then
            echo "infer: the server at $1 did not come up:" >&2
            tail -n 5 "$2" >&2
            return 1
        fi
        sleep 0.2
    done
}
stop_srv() {
    for p in $srv $lsrv; do
        kill "$p" 2>/dev/null || true
        wait "$p" 2>/dev/null || true
    done
    srv='' lsrv=''
}
client() { # python url conc extra server-pid; the server's CPU time over the run as cpu_s
    c0=$(cpu_of "$5")
    "$1" "$H0/infer_client.py" --url "$2" --model m --prompts "$W/prompts.json" \
        --concurrency "$3" --requests "$(nreq "$3")" --max-tokens "$T" --extra "$4" >"$W/r0.json" ||
        return 1
    jq -c --argjson c "$(awk -v a="$c0" -v b="$(cpu_of "$5")" 'BEGIN {print b - a}')" \
        '. + {cpu_s: $c}' "$W/r0.json" >"$W/r.json"
}

# The systems take turns at each concurrency (ours, llama.cpp, transformers, then the next
# level), both servers up from the start, so a change of load on the shared machine falls on
# all of them alike. $srv is our server, $lsrv llama.cpp's.
port=$((20000 + $$ % 20000))
ourmode='batch'
if [ "$serve" = yes ] && "$LPY" -c 'import openai' 2>/dev/null; then
    ourmode='serve'
    "$BIN/swift-infer" "$W/model" --serve --port "$port" -j "$threads" --max-num-seqs "$maxc" \
        --max-model-len 1024 >"$W/ours-srv.log" 2>&1 &
    srv=$!
    wait_up "http://127.0.0.1:$port/v1" "$W/ours-srv.log" "$srv" || exit 1
elif [ "$serve" = yes ]; then
    echo "ours: --serve needs the openai client ($LPY) - batch mode"
fi
llama=no
if "$LPY" -c 'import llama_cpp.server, openai' 2>/dev/null; then
    if "$BIN/swift-export" "$W/model" --to gguf --dtype f32 -o "$W/model.gguf" >/dev/null 2>"$W/export.err"; then
        # min_tokens, and every special token (eos, end of turn) biased away: it has no ignore_eos
        noeos=$(jq -c --argjson t "$T" '{min_tokens: $t, logit_bias: ([.added_tokens[]
            | select(.special) | {key: (.id | tostring), value: -100}] | from_entries)}' \
            "$W/model/tokenizer.json")
        "$LPY" -m llama_cpp.server --model "$W/model.gguf" --model_alias m --port "$((port + 1))" \
            --n_ctx 1024 --n_threads "$threads" --n_threads_batch "$threads" \
            --interrupt_requests False >"$W/llama.log" 2>&1 &
        lsrv=$!
        wait_up "http://127.0.0.1:$((port + 1))/v1" "$W/llama.log" "$lsrv" && llama=yes
    else
        echo "llama.cpp: skipped (swift-export --to gguf failed: $(tail -n 1 "$W/export.err"))"
    fi
else
    echo "llama.cpp: skipped (no llama-cpp-python[server] and openai for $LPY; set LLAMA_PYTHON)"
fi
hf=no
if "$HPY" -c 'import torch, transformers' 2>/dev/null; then
    hf=yes
else
    echo "transformers: skipped (no torch and transformers for $HPY; set HF_PYTHON)"
fi
for c in $levels; do
    if [ "$ourmode" = serve ]; then
        client "$LPY" "http://127.0.0.1:$port/v1" "$c" '{"ignore_eos": true}' "$srv" || {
            echo "infer: the client against swift-infer --serve failed" >&2
            exit 1
        }
        row ours serve "$c" "$W/r.json"
    else
        ours_batch "$c"
        row ours batch "$c" "$W/r.json"
    fi
    if [ "$llama" = yes ]; then
        if client "$LPY" "http://127.0.0.1:$((port + 1))/v1" "$c" "$noeos" "$lsrv"; then
            row llama.cpp server "$c" "$W/r.json"
        else
            echo "llama.cpp: the client failed at concurrency $c"
        fi
    fi
    if [ "$hf" = yes ]; then
        if OMP_NUM_THREADS=$threads "$HPY" "$H0/infer_hf.py" "$W/model" "$W/prompts.json" \
            --concurrency "$c" --requests "$(nreq "$c")" --max-tokens "$T" \
            --threads "$threads" >"$W/r.json" 2>"$W/hf.err"; then
            row transformers generate "$c" "$W/r.json"
        else
            echo "transformers: failed at concurrency $c: $(tail -n 1 "$W/hf.err")"
        fi
    fi
done
stop_srv
if [ "$llama" = yes ]; then
    echo "llama.cpp $("$LPY" -c 'import llama_cpp; print(llama_cpp.__version__)'):" \
        "system_info $(grep -m1 '^CPU : ' "$W/llama.log" || echo '(no CPU : line)')"
fi
[ "$hf" = yes ] &&
    echo "transformers $("$HPY" -c 'import torch, transformers as t; print(t.__version__, "torch", torch.__version__)')"

# ratios ours / theirs and the goals
for ref in llama.cpp transformers; do
    for c in $levels; do
        a=$W/res-ours-$c.json b=$W/res-$ref-$c.json
        if [ ! -f "$a" ] || [ ! -f "$b" ]; then continue; fi
        jq -rn --slurpfile a "$a" --slurpfile b "$b" --arg ref "$ref" --arg c "$c" '
            def r(x; y): if x == null or y == null or y == 0 then "-"
                         else (x / y * 100 | round / 100 | tostring) end;
            "ours/\($ref) at \($c): tok/s \(r($a[0].tok_s; $b[0].tok_s)), TTFT p50 \(r($a[0].ttft_p50; $b[0].ttft_p50)) p99 \(r($a[0].ttft_p99; $b[0].ttft_p99)), TPOT p50 \(r($a[0].tpot_p50; $b[0].tpot_p50)) p99 \(r($a[0].tpot_p99; $b[0].tpot_p99))"'
    done
done
goal() { # ref conc-filter text; met when ours' tok/s >= factor x theirs at every level given
    ref=$1 f=$2 text=$3 lv=$4 ok=met seen=0
    for c in $lv; do
        a=$W/res-ours-$c.json b=$W/res-$ref-$c.json
        if [ ! -f "$a" ] || [ ! -f "$b" ]; then continue; fi
        seen=1
        jq -en --slurpfile a "$a" --slurpfile b "$b" --argjson f "$f" \
            '$a[0].tok_s >= $f * $b[0].tok_s' >/dev/null || ok=missed
    done
    if [ "$seen" = 1 ]; then echo "goal: $text: $ok"; else echo "goal: $text: not measured"; fi
}
cpu_rows
echo "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
hi=''
for c in $levels; do [ "$c" -ge 8 ] && hi="$hi $c"; done
goal transformers 1 "throughput ahead of transformers at every concurrency" "$levels"
goal llama.cpp 0.8 "within reach of llama.cpp at concurrency 1 (tok/s >= 0.8 x)" 1
goal llama.cpp 1 "ahead of llama.cpp at concurrency 8+" "$hi"
