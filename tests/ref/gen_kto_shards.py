#!/usr/bin/env python3
"""KTO shards for the swift-train --rlhf kto tests: rows of the LLaMA-Factory demo
kto_en_demo.json (../shared/data) as characters (byte & 127, the vocabulary of the tiny fixture
models), written in the shard format of docs/formats.md (kind "kto": shard version 2 with the
label section, index.json version 2) with Python's struct and zlib. swift-preprocess --kind kto
makes the same layout from a real tokenizer (tests/cli/preprocess-pref.bats); the tiny model's
128-token vocabulary needs these byte ids instead.

One sample per row, one document: prompt (the user turn's first PROMPT characters and a newline)
+ completion (the assistant turn's first 6..16 characters and EOS 2), mask 1 on the completion,
the row's label in the label section. Rows with more than one turn are skipped.

tests/fixtures/kto/: 64 rows; val/: the next 16.
Run from the repository root: python3 tests/ref/gen_kto_shards.py [SHARED]
"""
import json
import os
import struct
import sys
import zlib

T = 32
PROMPT = 12
BOS, EOS = 1, 2


def ids_of(text):
    return [b & 127 for b in text.encode("utf-8")]


def shard_bytes(rows):
    """rows: dicts with prompt_ids, completion_ids, label -> (file bytes, crc, tokens, trained)"""
    docs = [x["prompt_ids"] + x["completion_ids"] for x in rows]
    mask = [m for x in rows for m in [0] * len(x["prompt_ids"]) + [1] * len(x["completion_ids"])]
    ntok = sum(len(d) for d in docs)
    tok_off = [0]
    for d in docs:
        tok_off.append(tok_off[-1] + len(d))
    payload = bytearray()

    def align():
        while (64 + len(payload)) % 8:
            payload.append(0)
    payload += struct.pack("<%dQ" % len(tok_off), *tok_off)
    align()
    payload += struct.pack("<%dQ" % len(tok_off), *range(len(rows) + 1))  # one doc per sample
    align()
    payload += struct.pack("<%dI" % len(docs), *[len(d) for d in docs])
    align()
    payload += struct.pack("<%dI" % ntok, *[t for d in docs for t in d])
    payload += bytes(mask)  # ids, mask and labels follow each other directly
    payload += bytes([1 if x["label"] else 0 for x in rows])
    align()
    crc = zlib.crc32(bytes(payload)) & 0xffffffff
    hdr = b"SWSHARD\0" + struct.pack("<IIQQQQIIQ", 2, 64, len(rows), len(rows), ntok,
                                     len(payload), crc, 1, 0)  # version 2, flags: labels
    return hdr + bytes(payload), crc, ntok, sum(mask)


def write_dir(d, rows, split, max_length=T):
    os.makedirs(d, exist_ok=True)
    data, crc, ntok, trained = shard_bytes(rows)
    with open(os.path.join(d, "shard-00000.bin"), "wb") as f:
        f.write(data)
    ix = {"format": "swift-shards", "version": 2, "kind": "kto", "split": split,
          "tokenizer": "bytes&127", "template": "none", "loss": "default",
          "truncation": "delete", "packing": "none", "max_length": max_length,
          "vocab_size": 128, "seed": 1,
          "counts": {"samples": len(rows), "documents": len(rows), "dropped": 0, "truncated": 0,
                     "tokens": ntok, "trained_tokens": trained},
          "shards": [{"file": "shard-00000.bin", "samples": len(rows), "tokens": ntok,
                      "crc32": crc}]}
    with open(os.path.join(d, "index.json"), "w") as f:
        json.dump(ix, f, indent=1)


def make(rows, n, start):
    out, i = [], start
    while len(out) < n:
        r = rows[i]
        i += 1
        m = r["messages"]
        if len(m) != 2:
            continue
        p = [BOS] + ids_of(m[0]["content"])[:PROMPT] + [10]
        c = ids_of(m[1]["content"])[:6 + (len(out) * 5) % 11] + [EOS]
        if min(p[1:] + c[:-1]) <= EOS:
            continue
        out.append({"prompt_ids": p, "completion_ids": c, "label": bool(r["label"])})
    return out, i


def main():
    shared = sys.argv[1] if len(sys.argv) > 1 else "../shared"
    rows = json.load(open(os.path.join(shared,
                                       "data/datasets/llama-factory-demo/kto_en_demo.json")))
    train, i = make(rows, 64, 0)
    val, _ = make(rows, 16, i)
    write_dir("tests/fixtures/kto", train, "train")
    write_dir("tests/fixtures/kto/val", val, "val")
    print("train: %d desirable of %d; val: %d of %d" % (
        sum(x["label"] for x in train), len(train), sum(x["label"] for x in val), len(val)))


if __name__ == "__main__":
    main()
