#!/usr/bin/env python3
"""A synthetic task for the before/after fine-tuning test of swift-eval (tests/cli/eval.bats):
the colour of 16 animals, a table a tiny model must memorise.

Writes tests/fixtures/eval/synth/:
  train/index.json + train/shard-00000.bin   swift shards (docs/formats.md "Shards"): one
      document per sample, "Question: What colour is the cat?\nAnswer: red" + <|endoftext|>,
      byte-level ids of tests/fixtures/eval/llama's tokenizer; the loss mask trains the answer
      (" red") and the end token
  mc.jsonl      {question, choices (the 8 colours), answer}: swift-eval --task mc
  exact.jsonl   {question, answer}: swift-eval --task exact (generation stops at <|endoftext|>)
Standard library only, deterministic. Run from the repository root.
"""
import json
import os
import struct
import zlib

ANIMALS = ["cat", "dog", "fox", "owl", "bee", "cow", "pig", "elk", "yak", "ant", "bat", "emu",
           "hen", "ram", "eel", "gnu"]
COLOURS = ["red", "blue", "green", "pink", "gold", "grey", "teal", "plum"]
EOS = 256
OUT = "tests/fixtures/eval/synth"


def align8(x):
    return (x + 7) & ~7


def write_shard(path, docs):
    """docs: list of (ids, mask); one sample per document."""
    ns = nd = len(docs)
    nt = sum(len(i) for i, _ in docs)
    hdr = 64
    o_tok = align8(hdr)
    o_doc = o_tok + 8 * (ns + 1)
    o_len = o_doc + 8 * (ns + 1)
    o_ids = align8(o_len + 4 * nd)
    o_mask = o_ids + 4 * nt
    end = align8(o_mask + nt)
    buf = bytearray(end)
    off = 0
    for k, (ids, mask) in enumerate(docs):
        struct.pack_into("<Q", buf, o_tok + 8 * k, off)
        struct.pack_into("<Q", buf, o_doc + 8 * k, k)
        struct.pack_into("<I", buf, o_len + 4 * k, len(ids))
        for t, (i, m) in enumerate(zip(ids, mask)):
            struct.pack_into("<I", buf, o_ids + 4 * (off + t), i)
            buf[o_mask + off + t] = m
        off += len(ids)
    struct.pack_into("<Q", buf, o_tok + 8 * ns, off)
    struct.pack_into("<Q", buf, o_doc + 8 * ns, nd)
    payload = bytes(buf[hdr:])
    crc = zlib.crc32(payload) & 0xFFFFFFFF
    struct.pack_into("<8sIIQQQQIIQ", buf, 0, b"SWSHARD\0", 1, hdr, ns, nd, nt, len(payload),
                     crc, 0, 0)
    with open(path, "wb") as f:
        f.write(buf)
    return ns, nt, crc


def main():
    colour = {a: COLOURS[i % len(COLOURS)] for i, a in enumerate(ANIMALS)}
    docs = []
    for a in ANIMALS:
        prompt = list(f"Question: What colour is the {a}?\nAnswer:".encode())
        answer = list(f" {colour[a]}".encode()) + [EOS]
        docs.append((prompt + answer, [0] * len(prompt) + [1] * len(answer)))
    d = os.path.join(OUT, "train")
    os.makedirs(d, exist_ok=True)
    ns, nt, crc = write_shard(os.path.join(d, "shard-00000.bin"), docs)
    lens = [len(i) for i, _ in docs]
    mean = sum(lens) / len(lens)
    index = {"format": "swift-shards", "version": 1, "split": "train",
             "tokenizer": "tests/fixtures/eval/llama", "template": "none", "loss": "default",
             "truncation": "delete", "packing": "none", "max_length": 64, "vocab_size": 260,
             "seed": 0,
             "counts": {"samples": ns, "documents": ns, "dropped": 0, "truncated": 0,
                        "tokens": nt, "trained_tokens": sum(sum(m) for _, m in docs)},
             "packing_efficiency": 0.0,
             "length": {"mean": mean,
                        "std": (sum((x - mean) ** 2 for x in lens) / len(lens)) ** 0.5,
                        "min": min(lens), "max": max(lens)},
             "shards": [{"file": "shard-00000.bin", "samples": ns, "tokens": nt, "crc32": crc}]}
    with open(os.path.join(d, "index.json"), "w") as f:
        json.dump(index, f, indent=1)
    with open(os.path.join(OUT, "mc.jsonl"), "w") as f:
        for a in ANIMALS:
            f.write(json.dumps({"question": f"What colour is the {a}?", "choices": COLOURS,
                                "answer": COLOURS.index(colour[a])}) + "\n")
    with open(os.path.join(OUT, "exact.jsonl"), "w") as f:
        for a in ANIMALS:
            f.write(json.dumps({"question": f"What colour is the {a}?",
                                "answer": colour[a]}) + "\n")


if __name__ == "__main__":
    main()
