#!/bin/sh
# Tokenizer throughput: lib/tokenizer (bench_tokenizer) side by side with PyPI `tokenizers`
# (Qwen3, Llama-3, GPT-2) and `tiktoken` (GPT-2) on the same corpus made from the shared
# datasets, single-thread and with BENCH_THREADS threads (default 2), plus swift-preprocess
# end to end (alpaca-style JSONL -> Qwen3 shards).
#   BENCH_MB=100 sh tests/bench/preprocess.sh      (default 8 MB keeps a run short)
set -eu
SHARED=${SHARED:-../shared}
BUILD=${SWIFT_BUILD:-build}
MB=${BENCH_MB:-8}
TH=${BENCH_THREADS:-2}
TOK=$SHARED/data/tokenizers
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
python3 tests/bench/preprocess_ref.py corpus "$SHARED" "$dir/corpus.jsonl" "$MB" >/dev/null
echo "corpus: $(wc -c <"$dir/corpus.jsonl") bytes of JSONL, ${MB} MB of text, threads 1 and $TH"
for t in qwen3 llama3 gpt2; do
    "$BUILD/bench/bench_tokenizer" "$TOK/$t" "$dir/corpus.jsonl" 1 "$TH" | sed "s/^/$t /" >>"$dir/res"
    python3 tests/bench/preprocess_ref.py hf "$TOK/$t/tokenizer.json" "$dir/corpus.jsonl" 1 | sed "s/^/$t /" >>"$dir/res"
    RAYON_NUM_THREADS=$TH python3 tests/bench/preprocess_ref.py hf "$TOK/$t/tokenizer.json" "$dir/corpus.jsonl" "$TH" | sed "s/^/$t /" >>"$dir/res"
done
python3 tests/bench/preprocess_ref.py tiktoken "$TOK/gpt2" "$dir/corpus.jsonl" 1 "$TH" | sed "s/^/gpt2 /" >>"$dir/res"
python3 - "$dir/res" <<'PY'
import json, sys
rows = []
for line in open(sys.argv[1]):
    tok, js = line.split(" ", 1)
    r = json.loads(js); r["tok"] = tok; rows.append(r)
print(f"{'tokenizer':10} {'impl':11} {'thr':>3} {'tokens':>11} {'Mtok/s':>8} {'MB/s':>7} {'vs tokenizers':>13}")
for r in rows:
    ref = [x for x in rows if x["tok"] == r["tok"] and x["impl"] == "tokenizers" and x["threads"] == r["threads"]]
    ratio = r["tokens_per_s"] / ref[0]["tokens_per_s"] if ref else float("nan")
    print(f"{r['tok']:10} {r['impl']:11} {r['threads']:>3} {r['tokens']:>11} {r['tokens_per_s']/1e6:>8.2f} {r['mb_per_s']:>7.2f} {ratio:>12.2f}x")
for tok in ("qwen3", "llama3", "gpt2"):
    counts = {(r["impl"], r["threads"]): r["tokens"] for r in rows if r["tok"] == tok}
    same = len(set(counts.values())) == 1
    print(f"{tok}: token counts {'identical' if same else 'DIFFER: ' + str(counts)} across implementations")
PY
# end to end: alpaca-style JSONL -> shards (Qwen3 template, loss masks, binpack)
python3 - "$SHARED" "$dir/alpaca.jsonl" <<'PY'
import json, sys, os
lf = os.path.join(sys.argv[1], "data/datasets/llama-factory-demo")
rows = json.load(open(os.path.join(lf, "alpaca_en_demo.json"))) + json.load(open(os.path.join(lf, "alpaca_zh_demo.json")))
with open(sys.argv[2], "w") as f:
    for _ in range(10):
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
PY
for n in 1 "$TH"; do
    "$BUILD/bin/swift-preprocess" --tokenizer "$TOK/qwen3" -o "$dir/shards$n" --packing binpack \
        --threads "$n" "$dir/alpaca.jsonl" 2>/dev/null >"$dir/e2e$n.json"
    python3 -c 'import json,sys
r = json.load(open(sys.argv[1]))
print("swift-preprocess end to end, %d thread(s): %d alpaca rows, %d tokens in %.2f s = %.0f rows/s (tokenizer load, template, masks, packing, shard writing included)" % (r["threads"], r["rows"], r["tokenized"], r["seconds"], r["rows"] / r["seconds"]))' "$dir/e2e$n.json"
done
# the per-row work of ms-swift's datasets.map path, at the least: Jinja template + HF tokenizer
python3 tests/bench/preprocess_ref.py e2e "$TOK/qwen3" "$dir/alpaca.jsonl" >"$dir/e2e-ref.json"
python3 -c 'import json,sys
r = json.load(open(sys.argv[1])); s = json.load(open(sys.argv[2]))
print("transformers apply_chat_template + tokenizers, 1 core: %d rows, %d tokens in %.2f s = %.0f rows/s; swift-preprocess 1 thread is %.1fx faster per core (same token count: %s)" % (r["rows"], r["tokens"], r["seconds"], r["rows_per_s"], r["seconds"] / s["seconds"], r["tokens"] == s["tokenized"]))' "$dir/e2e-ref.json" "$dir/e2e1.json"
