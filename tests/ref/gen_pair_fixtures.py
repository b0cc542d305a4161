#!/usr/bin/env python3
"""Preference-pair shards for the swift-train --rlhf tests: tinyshakespeare (../shared/data) as
characters (byte & 127, the vocabulary of the tiny fixture models), written in the shard format
of docs/formats.md with Python's struct and zlib (gen_train_fixtures.py's writer).

The pair contract (docs/preference.md): one sample per pair with exactly two documents, doc 0 =
prompt+chosen, doc 1 = prompt+rejected, mask 1 on the response tokens; index.json "kind": "pairs".
Here the prompt is 12 characters of the play, the chosen response the next 8..16 characters,
the rejected one the same characters reversed (a preference the tiny model can learn).

tests/fixtures/pairs/: 64 pairs; val/: 16 more.
Run from the repository root: python3 tests/ref/gen_pair_fixtures.py [SHARED]
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_train_fixtures import shard  # noqa: E402

SHARED = sys.argv[1] if len(sys.argv) > 1 else "../shared"
T = 32
PROMPT = 12


def make(text, n, start):
    out, p = [], start
    for i in range(n):
        lr = 8 + (i * 5) % 9
        prompt = [b & 127 for b in text[p:p + PROMPT]]
        chosen = [b & 127 for b in text[p + PROMPT:p + PROMPT + lr]]
        rejected = chosen[::-1]
        p += PROMPT + lr
        ids = prompt + chosen + prompt + rejected
        mask = [0] * PROMPT + [1] * lr + [0] * PROMPT + [1] * lr
        out.append((ids, mask, [PROMPT + lr, PROMPT + lr]))
    return out, p


def write_dir(d, samples, split):
    os.makedirs(d, exist_ok=True)
    data, crc, ntok, ndocs = shard(samples)
    with open(os.path.join(d, "shard-00000.bin"), "wb") as f:
        f.write(data)
    trained = sum(sum(s[1]) for s in samples)
    ix = {"format": "swift-shards", "version": 1, "kind": "pairs", "split": split,
          "tokenizer": "bytes&127", "template": "none", "loss": "default",
          "truncation": "delete", "packing": "none", "max_length": T, "vocab_size": 128,
          "seed": 1,
          "counts": {"samples": len(samples), "documents": ndocs, "dropped": 0, "truncated": 0,
                     "tokens": ntok, "trained_tokens": trained},
          "shards": [{"file": "shard-00000.bin", "samples": len(samples), "tokens": ntok,
                      "crc32": crc}]}
    with open(os.path.join(d, "index.json"), "w") as f:
        json.dump(ix, f, indent=1)


def main():
    text = open(os.path.join(SHARED, "data/datasets/tinyshakespeare/input.txt"), "rb").read()
    train, p = make(text, 64, 0)
    val, _ = make(text, 16, p)
    write_dir("tests/fixtures/pairs", train, "train")
    write_dir("tests/fixtures/pairs/val", val, "val")


if __name__ == "__main__":
    main()
