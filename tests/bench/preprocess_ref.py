#!/usr/bin/env python3
"""Helpers for tests/bench/preprocess.sh.

  preprocess_ref.py corpus SHARED OUT.jsonl SIZE_MB
      Build a corpus of {"text": ...} lines (about SIZE_MB of text) from the shared datasets:
      alpaca en/zh, glaive tool calls, gsm8k, identity, MMLU and tinyshakespeare paragraphs,
      repeated in a fixed order until the size is reached.
  preprocess_ref.py hf TOKENIZER.json CORPUS THREADS...
      PyPI tokenizers: THREADS=1 encodes text by text with Tokenizer.encode (no rayon);
      THREADS>1 uses encode_batch with RAYON_NUM_THREADS=THREADS (set by the caller).
  preprocess_ref.py tiktoken GPT2_DIR CORPUS THREADS...
      tiktoken's GPT-2 encoding built from the local encoder.json + vocab.bpe; encode_ordinary
      per text, or encode_ordinary_batch(num_threads=THREADS).
Each measurement prints one JSON line like bench_tokenizer's.
"""
import csv
import glob
import json
import os
import sys
import time


def corpus(shared, out, size_mb):
    d = os.path.join(shared, "data", "datasets")
    texts = []
    lf = os.path.join(d, "llama-factory-demo")
    for name in ["alpaca_en_demo.json", "alpaca_zh_demo.json", "identity.json"]:
        for r in json.load(open(os.path.join(lf, name), encoding="utf-8")):
            texts.append("\n".join(x for x in (r["instruction"], r["input"], r["output"]) if x))
    for name in ["glaive_toolcall_en_demo.json", "glaive_toolcall_zh_demo.json"]:
        for r in json.load(open(os.path.join(lf, name), encoding="utf-8")):
            texts.append(r["tools"] + "\n" + "\n".join(m["value"] for m in r["conversations"]))
    for name in ["train.jsonl", "test.jsonl"]:
        for line in open(os.path.join(d, "gsm8k", name), encoding="utf-8"):
            r = json.loads(line)
            texts.append(r["question"] + "\n" + r["answer"])
    for path in sorted(glob.glob(os.path.join(d, "mmlu", "dev", "*.csv"))):
        for row in csv.DictReader(open(path, encoding="utf-8")):
            texts.append(" ".join(row.values()))
    sh = open(os.path.join(d, "tinyshakespeare", "input.txt"), encoding="utf-8").read()
    texts += [p for p in sh.split("\n\n") if p.strip()]
    want = int(float(size_mb) * 1e6)
    n = 0
    with open(out, "w", encoding="utf-8") as f:
        while n < want:
            for t in texts:
                f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
                n += len(t.encode("utf-8"))
                if n >= want:
                    break
    print(json.dumps({"corpus": out, "bytes": n, "texts_per_round": len(texts)}))


def load(path):
    return [json.loads(l)["text"] for l in open(path, encoding="utf-8")]


def report(impl, threads, texts, ntok, secs):
    b = sum(len(t.encode("utf-8")) for t in texts)
    print(json.dumps({"impl": impl, "threads": threads, "texts": len(texts), "tokens": ntok, "bytes": b,
                      "seconds": round(secs, 3), "tokens_per_s": round(ntok / secs),
                      "mb_per_s": round(b / secs / 1e6, 2)}), flush=True)


def hf(tok_path, path, threads):
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(tok_path)
    texts = load(path)
    for th in threads:
        t0 = time.perf_counter()
        if th == 1:
            ntok = sum(len(tok.encode(t, add_special_tokens=False).ids) for t in texts)
        else:
            ntok = sum(len(e.ids) for e in tok.encode_batch(texts, add_special_tokens=False))
        report("tokenizers", th, texts, ntok, time.perf_counter() - t0)


def tt(gpt2_dir, path, threads):
    import tiktoken
    from tiktoken.load import data_gym_to_mergeable_bpe_ranks
    ranks = data_gym_to_mergeable_bpe_ranks(os.path.join(gpt2_dir, "vocab.bpe"),
                                            os.path.join(gpt2_dir, "encoder.json"))
    enc = tiktoken.Encoding("gpt2", pat_str=r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+""",
                            mergeable_ranks=ranks, special_tokens={"<|endoftext|>": 50256})
    texts = load(path)
    for th in threads:
        t0 = time.perf_counter()
        if th == 1:
            ntok = sum(len(enc.encode_ordinary(t)) for t in texts)
        else:
            ntok = sum(len(x) for x in enc.encode_ordinary_batch(texts, num_threads=th))
        report("tiktoken", th, texts, ntok, time.perf_counter() - t0)


def e2e(tok_dir, path):
    """What ms-swift's datasets.map path does per row, at the least: render the chat template
    (Qwen3 Jinja, transformers) and tokenize it with the HF tokenizer, one process, one core."""
    from transformers import PreTrainedTokenizerFast
    cfg = json.load(open(os.path.join(tok_dir, "tokenizer_config.json")))
    tok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(tok_dir, "tokenizer.json"))
    rows = [json.loads(l) for l in open(path, encoding="utf-8")]
    t0 = time.perf_counter()
    ntok = 0
    for r in rows:
        q = r["instruction"] + ("\n" + r["input"] if r["input"] else "")
        msgs = [{"role": "user", "content": q}, {"role": "assistant", "content": r["output"]}]
        out = tok.apply_chat_template(msgs, chat_template=cfg["chat_template"], tokenize=True,
                                      add_generation_prompt=False)
        ntok += len(out["input_ids"] if hasattr(out, "keys") else out)
    secs = time.perf_counter() - t0
    print(json.dumps({"impl": "transformers apply_chat_template", "rows": len(rows), "tokens": ntok,
                      "seconds": round(secs, 3), "rows_per_s": round(len(rows) / secs)}))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "corpus":
        corpus(sys.argv[2], sys.argv[3], sys.argv[4])
    elif cmd == "hf":
        hf(sys.argv[2], sys.argv[3], [int(x) for x in sys.argv[4:]])
    elif cmd == "e2e":
        e2e(sys.argv[2], sys.argv[3])
    elif cmd == "tiktoken":
        tt(sys.argv[2], sys.argv[3], [int(x) for x in sys.argv[4:]])
