#!/usr/bin/env python3
"""Token shards for the swift-train CLI tests: tinyshakespeare (../shared/data) as characters
(byte & 127, the vocabulary of the tiny fixture models), written in the shard format of
docs/formats.md with Python's struct and zlib, independently of lib/formats/shard.c.

tests/fixtures/shards/: 96 samples of 32 tokens; every third sample packs two documents; the
first 4 tokens of each document are context (mask 0). val/: 16 more samples.
Run from the repository root: python3 tests/ref/gen_train_fixtures.py [SHARED]
"""
import json
import os
import struct
import sys
import zlib

SHARED = sys.argv[1] if len(sys.argv) > 1 else "../shared"
T = 32


def shard(samples):
    """samples: list of (ids, mask, doc_lens)"""
    ntok = sum(len(s[0]) for s in samples)
    ndocs = sum(len(s[2]) for s in samples)
    tok_off, doc_off = [0], [0]
    for ids, _, dl in samples:
        tok_off.append(tok_off[-1] + len(ids))
        doc_off.append(doc_off[-1] + len(dl))
    payload = bytearray()

    def align():
        while (64 + len(payload)) % 8:
            payload.append(0)
    payload += struct.pack("<%dQ" % len(tok_off), *tok_off)
    align()
    payload += struct.pack("<%dQ" % len(doc_off), *doc_off)
    align()
    payload += struct.pack("<%dI" % ndocs, *[d for s in samples for d in s[2]])
    align()
    payload += struct.pack("<%dI" % ntok, *[t for s in samples for t in s[0]])
    align()
    payload += bytes([m for s in samples for m in s[1]])
    align()
    crc = zlib.crc32(bytes(payload)) & 0xffffffff
    hdr = b"SWSHARD\0" + struct.pack("<IIQQQQIIQ", 1, 64, len(samples), ndocs, ntok,
                                     len(payload), crc, 0, 0)
    return hdr + bytes(payload), crc, ntok, ndocs


def write_dir(d, samples, split):
    os.makedirs(d, exist_ok=True)
    data, crc, ntok, ndocs = shard(samples)
    with open(os.path.join(d, "shard-00000.bin"), "wb") as f:
        f.write(data)
    trained = sum(sum(s[1]) for s in samples)
    ix = {"format": "swift-shards", "version": 1, "split": split, "tokenizer": "bytes&127",
          "template": "none", "loss": "default", "truncation": "delete", "packing": "sequential",
          "max_length": T, "vocab_size": 128, "seed": 1,
          "counts": {"samples": len(samples), "documents": ndocs, "dropped": 0, "truncated": 0,
                     "tokens": ntok, "trained_tokens": trained},
          "shards": [{"file": "shard-00000.bin", "samples": len(samples), "tokens": ntok,
                      "crc32": crc}]}
    with open(os.path.join(d, "index.json"), "w") as f:
        json.dump(ix, f, indent=1)


def make(text, n, start):
    out, p = [], start
    for i in range(n):
        if i % 3 == 2:
            dl = [14, 18]
        else:
            dl = [T - (i % 4)]   # some shorter samples, padded by the trainer
        ids, mask = [], []
        for L in dl:
            chunk = [b & 127 for b in text[p:p + L]]
            p += L
            ids += chunk
            mask += [0] * 4 + [1] * (L - 4)
        out.append((ids, mask, dl))
    return out, p


def main():
    text = open(os.path.join(SHARED, "data/datasets/tinyshakespeare/input.txt"), "rb").read()
    train, p = make(text, 96, 0)
    val, _ = make(text, 16, p)
    write_dir("tests/fixtures/shards", train, "train")
    write_dir("tests/fixtures/shards/val", val, "val")


if __name__ == "__main__":
    main()
