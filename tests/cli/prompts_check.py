#!/usr/bin/env python3
"""Checks for tests/cli/preprocess-prompts.bats (standard library only).

  prompts_check.py expect FIXTURE RENDER
      swift-preprocess --kind prompts --render output against the rows of FIXTURE, built here
      independently: the ChatML text of each row's conversation with the generation prompt
      ("<|im_start|>assistant\\n") at the end, its ids under the byte-level tokenizer of
      tests/fixtures/eval/llama (a byte is its own id; <|endoftext|>, <|im_start|>, <|im_end|>
      and <|pad|> are 256..259), a mask of zeros, and the metadata {"prompt": the last user
      message, then the row's other columns in order}.
  prompts_check.py ref FIXTURE RENDER
      --render output (the rows of FIXTURE, in order) against tests/ref/fixtures/prompts/*.jsonl
      (TRL's GRPOTrainer tokenization with the vendor's Jinja template, from
      tests/ref/gen_prompt_data.py): the same text and ids, mask 0.
  prompts_check.py ids RENDER ENCODED
      each rendered row's ids equal the line of ENCODED (swift-preprocess --encode of its text).
  prompts_check.py shards DIR RENDER [VAL]
      the shard directory DIR (and DIR/val, which must hold VAL samples) read with this file's own
      reader of docs/formats.md: kind "prompts", index version 2, every file version 2 with flags
      2 (the metadata section only), one document a sample, mask 0, and the samples of both
      splits are the rendered rows (ids and metadata, the metadata as compact JSON text, byte for
      byte as the render's), each once; without VAL, in order.
  prompts_check.py left DIR RENDER N
      DIR (made with --truncation left --max-length N, or --max-prompt-length N) holds every
      rendered row in order, cut to its last N tokens when longer, metadata unchanged.
Prints "ok N" or the first difference (exit 1).
"""
import json
import os
import struct
import sys

SPECIAL = {"<|endoftext|>": 256, "<|im_start|>": 257, "<|im_end|>": 258, "<|pad|>": 259}
CONV_KEYS = {"messages", "conversations", "conversation", "prompt", "system", "system_prompt",
             "tools", "history"}


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def byte_ids(text):
    ids, i = [], 0
    while i < len(text):
        for s, v in SPECIAL.items():
            if text.startswith(s, i):
                ids.append(v)
                i += len(s)
                break
        else:
            ids.extend(text[i].encode("utf-8"))
            i += 1
    return ids


def conversation(row):
    """The row's messages and the columns that made them (as swift-preprocess documents)."""
    used = set()
    if "messages" in row:
        msgs = list(row["messages"])
    elif isinstance(row.get("prompt"), str):
        msgs = [{"role": "user", "content": row["prompt"]}]
    elif isinstance(row.get("prompt"), list):
        msgs = list(row["prompt"])
    elif "instruction" in row:
        q = row["instruction"] + ("\n" + row["input"] if row.get("input") else "")
        msgs, used = [{"role": "user", "content": q}], {"instruction", "input"}
    else:
        k = next(k for k in ("query", "prompt", "question", "problem") if k in row)
        msgs, used = [{"role": "user", "content": row[k]}], {k}
    if "system" in row and msgs[0]["role"] != "system":
        msgs = [{"role": "system", "content": row["system"]}] + msgs
    return msgs, used


def expected(row):
    msgs, used = conversation(row)
    text = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in msgs)
    text += "<|im_start|>assistant\n"
    meta = {"prompt": msgs[-1]["content"]}
    for k, v in row.items():
        if k not in CONV_KEYS and k not in used:
            meta[k] = v
    return text, meta


def check_expect(fixture, render):
    rows, out = read_jsonl(fixture), read_jsonl(render)
    if len(rows) != len(out):
        fail(f"{len(out)} rendered rows, {len(rows)} in the fixture")
    for k, (row, o) in enumerate(zip(rows, out)):
        text, meta = expected(row)
        if o.get("kind") != "prompts":
            fail(f"row {k}: kind {o.get('kind')!r}")
        if o["text"] != text:
            fail(f"row {k}: text {o['text']!r}, want {text!r}")
        if o["ids"] != byte_ids(text):
            fail(f"row {k}: ids differ from the byte-level encoding of the text")
        if o["mask"] != [0] * len(o["ids"]) or o["trained_tokens"] != 0:
            fail(f"row {k}: a token is trained")
        if o["meta"] != meta or list(o["meta"]) != list(meta):
            fail(f"row {k}: meta {o['meta']!r}, want {meta!r}")
    print("ok", len(rows))


def check_ref(fixture, render):
    fx, out = read_jsonl(fixture), read_jsonl(render)
    if len(fx) != len(out):
        fail(f"{len(out)} rendered rows, {len(fx)} in the fixture")
    for k, (f, o) in enumerate(zip(fx, out)):
        if o["text"] != f["text"]:
            fail(f"row {k}: text {o['text']!r}, TRL's {f['text']!r}")
        if o["ids"] != f["ids"]:
            fail(f"row {k}: ids {o['ids']}, TRL's {f['ids']}")
        if any(o["mask"]):
            fail(f"row {k}: a token is trained")
    print("ok", len(fx))


def check_ids(render, encoded):
    out = read_jsonl(render)
    with open(encoded, encoding="utf-8") as f:
        enc = [json.loads(line) for line in f]
    if len(out) != len(enc):
        fail(f"{len(out)} rendered rows, {len(enc)} encoded")
    for k, (o, e) in enumerate(zip(out, enc)):
        if o["ids"] != e:
            fail(f"row {k}: ids {o['ids']} differ from the tokenizer's {e}")
    print("ok", len(out))


def read_shard(path):
    """[(ids, mask, n_docs, meta bytes)] of one file, per docs/formats.md."""
    with open(path, "rb") as f:
        b = f.read()
    if b[:8] != b"SWSHARD\0":
        fail(f"{path}: bad magic")
    version, hdr = struct.unpack_from("<II", b, 8)
    ns, nd, nt, payload = struct.unpack_from("<QQQQ", b, 16)
    (flags,) = struct.unpack_from("<I", b, 52)
    if version != 2 or flags != 2:
        fail(f"{path}: version {version}, flags {flags}; want 2 and 2 (metadata only)")
    if len(b) != hdr + payload:
        fail(f"{path}: size {len(b)}, header says {hdr + payload}")
    al = lambda x: (x + 7) & ~7
    st, sd = hdr, hdr + 8 * (ns + 1)
    dl = sd + 8 * (ns + 1)
    ids_at = al(dl + 4 * nd)
    mask_at = ids_at + 4 * nt
    mo = al(mask_at + nt)
    meta_at = mo + 8 * (ns + 1)
    tok = struct.unpack_from(f"<{ns + 1}Q", b, st)
    doc = struct.unpack_from(f"<{ns + 1}Q", b, sd)
    moff = struct.unpack_from(f"<{ns + 1}Q", b, mo)
    if al(meta_at + moff[ns]) != len(b):
        fail(f"{path}: the metadata ({moff[ns]} bytes at {meta_at}) does not end the file")
    ids = struct.unpack_from(f"<{nt}I", b, ids_at)
    out = []
    for i in range(ns):
        out.append((list(ids[tok[i]:tok[i + 1]]), list(b[mask_at + tok[i]:mask_at + tok[i + 1]]),
                    doc[i + 1] - doc[i], b[meta_at + moff[i]:meta_at + moff[i + 1]]))
    return out


def read_dir(d):
    with open(os.path.join(d, "index.json"), encoding="utf-8") as f:
        ix = json.load(f)
    if ix.get("kind") != "prompts" or ix.get("version") != 2:
        fail(f"{d}: index kind {ix.get('kind')!r}, version {ix.get('version')}")
    if ix["counts"]["trained_tokens"] != 0 or ix.get("loss") is not None:
        fail(f"{d}: trained tokens {ix['counts']['trained_tokens']}, loss {ix.get('loss')!r}")
    samples = []
    for e in ix["shards"]:
        samples += read_shard(os.path.join(d, e["file"]))
    if len(samples) != ix["counts"]["samples"] or ix["counts"]["documents"] != len(samples):
        fail(f"{d}: {len(samples)} samples, index counts {ix['counts']}")
    for k, (ids, mask, nd, meta) in enumerate(samples):
        if nd != 1 or any(mask):
            fail(f"{d}: sample {k}: {nd} documents, mask {mask}")
    return samples


def as_key(ids, meta_text):
    return (tuple(ids), meta_text)


def compact(o):
    return json.dumps(o["meta"], ensure_ascii=False, separators=(",", ":")).encode("utf-8")


def check_shards(d, render, val=None):
    out = read_jsonl(render)
    train = read_dir(d)
    got = [as_key(s[0], s[3]) for s in train]
    if val is not None:
        vs = read_dir(os.path.join(d, "val"))
        if len(vs) != int(val):
            fail(f"{len(vs)} val samples, want {val}")
        got += [as_key(s[0], s[3]) for s in vs]
    want = [as_key(o["ids"], compact(o)) for o in out]
    if val is None and got != want:
        k = next((i for i, (g, w) in enumerate(zip(got, want)) if g != w), min(len(got), len(want)))
        fail(f"sample {k} differs from rendered row {k} ({len(got)} samples, {len(want)} rows)")
    if sorted(got) != sorted(want):
        fail("the splits' samples are not the rendered rows, each once")
    print("ok", len(got))


def check_left(d, render, n):
    n = int(n)
    out = read_jsonl(render)
    got = [as_key(s[0], s[3]) for s in read_dir(d)]
    want = [as_key(o["ids"][-n:], compact(o)) for o in out]
    if got != want:
        fail(f"{len(got)} samples are not the {len(want)} rows' last {n} tokens")
    print("ok", len(got))


def main():
    a = sys.argv[1:]
    if a and a[0] == "expect" and len(a) == 3:
        check_expect(a[1], a[2])
    elif a and a[0] == "ref" and len(a) == 3:
        check_ref(a[1], a[2])
    elif a and a[0] == "ids" and len(a) == 3:
        check_ids(a[1], a[2])
    elif a and a[0] == "shards" and len(a) in (3, 4):
        check_shards(*a[1:])
    elif a and a[0] == "left" and len(a) == 4:
        check_left(a[1], a[2], a[3])
    else:
        print(__doc__)
        sys.exit(2)


if __name__ == "__main__":
    main()
