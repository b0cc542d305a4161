#!/usr/bin/env python3
"""Checks for tests/cli/preprocess-pref.bats (standard library only).

  pref_check.py ref FIXTURE RENDER [chatml|llama3]
      swift-preprocess --render output (pairs and KTO rows, in the fixture's order) against
      tests/ref/fixtures/pref/*.jsonl (TRL's tokenization, tests/ref/gen_pref_data.py): each
      document's ids are TRL's prompt + completion ids, prompt_tokens is TRL's prompt length, and
      the mask is TRL's completion mask, less the "\\n" after the final <|im_end|> for ChatML
      (SFT never trains it), equal for Llama 3.
  pref_check.py shards DIR RENDER
      the shard directory DIR holds the rendered rows in order: kind "pairs" -> two documents per
      sample, equal to chosen / rejected; kind "kto" -> one document and the row's label.
  pref_check.py trunc FULL CUT right|left|prompt N
      CUT (a pair directory made with --truncation right or left at --max-length N, or with
      --max-prompt-length N) against FULL (the same rows uncut): every pair of CUT is, in order,
      a pair of FULL cut as said (right: each document's first N tokens; left: the same number of
      tokens off the start of both, each at most N long; prompt: the prompt's last N tokens),
      and both documents share the prompt.
Prints "ok N" or the first difference (exit 1).
"""
import json
import os
import struct
import sys


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def sides(rec):
    if "chosen" in rec:
        return [rec["chosen"], rec["rejected"]]
    return [rec]


def check_ref(fixture, render, style):
    fx, out = read_jsonl(fixture), read_jsonl(render)
    if len(fx) != len(out):
        fail(f"{len(out)} rendered rows, {len(fx)} in the fixture")
    n = 0
    for k, (f, o) in enumerate(zip(fx, out)):
        p = f["prompt_ids"]
        comps = [f["chosen_ids"], f["rejected_ids"]] if "chosen_ids" in f else [f["completion_ids"]]
        if o["prompt_tokens"] != len(p):
            fail(f"row {k}: prompt_tokens {o['prompt_tokens']}, TRL's prompt has {len(p)}")
        if "label" in f and o.get("label") != f["label"]:
            fail(f"row {k}: label {o.get('label')}, want {f['label']}")
        for s, c in zip(sides(o), comps):
            if s["ids"] != p + c:
                fail(f"row {k}: ids differ from TRL's prompt + completion")
            want = [0] * len(p) + [1] * len(c)
            if style == "chatml":  # SFT's mask stops at <|im_end|>: the final "\n" is not trained
                if s["ids"][-2:] != [151645, 198]:
                    fail(f"row {k}: does not end with <|im_end|>\\n")
                want[-1] = 0
            if s["mask"] != want:
                fail(f"row {k}: mask differs from TRL's completion mask")
            n += 1
    print("ok", n)


def read_shard(path):
    b = open(path, "rb").read()
    if b[:8] != b"SWSHARD\0":
        fail(f"{path}: bad magic")
    version, hdr, ns, nd, nt = struct.unpack_from("<IIQQQ", b, 8)
    flags = struct.unpack_from("<I", b, 52)[0]
    a8 = lambda x: (x + 7) & ~7
    st = a8(hdr)
    sd = st + 8 * (ns + 1)
    dl = sd + 8 * (ns + 1)
    ids = a8(dl + 4 * nd)
    mask = ids + 4 * nt
    lab = mask + nt
    stok = struct.unpack_from(f"<{ns + 1}Q", b, st)
    sdoc = struct.unpack_from(f"<{ns + 1}Q", b, sd)
    dlen = struct.unpack_from(f"<{nd}I", b, dl)
    tid = struct.unpack_from(f"<{nt}I", b, ids)
    samples = []
    for i in range(ns):
        t0, t1 = stok[i], stok[i + 1]
        docs, off = [], t0
        for d in range(sdoc[i], sdoc[i + 1]):
            docs.append((list(tid[off:off + dlen[d]]), list(b[mask + off:mask + off + dlen[d]])))
            off += dlen[d]
        samples.append((docs, b[lab + i] if flags & 1 else None))
    return version, flags, samples


def check_shards(d, render):
    ix = json.load(open(os.path.join(d, "index.json")))
    out = read_jsonl(render)
    samples = []
    for e in ix["shards"]:
        version, flags, s = read_shard(os.path.join(d, e["file"]))
        kto = ix.get("kind") == "kto"
        if (version, flags) != ((2, 1) if kto else (1, 0)):
            fail(f"{e['file']}: version {version} flags {flags} for kind {ix.get('kind')}")
        samples += s
    if len(samples) != len(out):
        fail(f"{len(samples)} samples, {len(out)} rendered rows")
    for k, ((docs, label), o) in enumerate(zip(samples, out)):
        want = [(s["ids"], s["mask"]) for s in sides(o)]
        if docs != want:
            fail(f"sample {k}: documents differ from the rendered row")
        if ix.get("kind") == "kto" and label != (1 if o["label"] else 0):
            fail(f"sample {k}: label {label}, the row says {o['label']}")
    print("ok", len(samples))


def read_dir(d):
    ix = json.load(open(os.path.join(d, "index.json")))
    samples = []
    for e in ix["shards"]:
        samples += [docs for docs, _ in read_shard(os.path.join(d, e["file"]))[2]]
    return ix, samples


def prompt_len(doc):
    return doc[1].index(1)


def check_trunc(full_dir, cut_dir, mode, n):
    _, full = read_dir(full_dir)
    ix, cut = read_dir(cut_dir)
    if ix.get("kind") != "pairs":
        fail(f"kind {ix.get('kind')}")
    j = 0
    for k, c in enumerate(cut):
        p = prompt_len(c[0])
        if len(c) != 2 or prompt_len(c[1]) != p or c[0][0][:p] != c[1][0][:p]:
            fail(f"sample {k}: the documents do not share the prompt")
        while j < len(full):
            f = full[j]
            j += 1
            if mode == "right":
                ok = all(c[i] == (f[i][0][:n], f[i][1][:n]) for i in (0, 1))
            else:
                cutk = len(f[0][0]) - len(c[0][0])
                ok = cutk >= 0 and all(c[i] == (f[i][0][cutk:], f[i][1][cutk:]) for i in (0, 1))
                if mode == "left":
                    ok = ok and max(len(c[0][0]), len(c[1][0])) <= n
                else:
                    ok = ok and p == min(n, prompt_len(f[0]))
            if ok:
                break
        else:
            fail(f"sample {k} of {cut_dir} is no {mode} cut of a pair of {full_dir}")
    print("ok", len(cut))


if __name__ == "__main__":
    if sys.argv[1] == "ref":
        check_ref(sys.argv[2], sys.argv[3], sys.argv[4])
    elif sys.argv[1] == "trunc":
        check_trunc(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]))
    else:
        check_shards(sys.argv[2], sys.argv[3])
