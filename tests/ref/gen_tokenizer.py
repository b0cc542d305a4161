#!/usr/bin/env python3
"""Reference token ids for tests/unit/test_tokenizer.c, made by PyPI `tokenizers`.

Writes tests/ref/tokenizer/corpus.jsonl (one {"text": ...} per line) and, per tokenizer,
tests/ref/tokenizer/<name>.jsonl: {"ids": [...], "ids_special": [...]} per text, where
"ids" = Tokenizer.encode(text, add_special_tokens=False) with special tokens *not* parsed
(split_special_tokens... see below) and "ids_special" = encode(text) with HF's defaults
(special tokens in the text recognised, post-processor applied).

Run: python3 tests/ref/gen_tokenizer.py [SHARED]   (SHARED defaults to ../shared)
"""
import json
import os
import random
import sys

from tokenizers import Tokenizer

SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../../../shared")
DATA = os.path.join(SHARED, "data")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tokenizer")

HANDWRITTEN = [
    "Hello world",
    " leading space and trailing space ",
    "中文分词测试：我们今天去北京大学吃饭了。",
    "混合 English 和中文，还有数字 12345 与标点！？",
    "Emoji with ZWJ: 👨‍👩‍👧‍👦 family, 🏳️‍🌈 flag, 👍🏽 skin tone, ❤️ heart",
    "Combining: e\u0301 a\u0300 o\u0308 n\u0303 (NFC composes these) and \u212b angstrom, \u1e9b\u0323",
    "Hangul jamo \u1100\u1161\u11a8 and precomposed 각; kana か\u3099 vs が",
    "CJK compatibility \uf900\uf901 and full-width ＡＢＣ１２３",
    "Long digits 1234567890123456789012345678901234567890 and 3.14159265358979 and 1,000,000",
    "CRLF line\r\nnext line\r\n\r\nblank above\rCR only",
    "Tabs\tand\t\tmultiple   spaces     here\u00a0nbsp\u2009thin\u3000ideographic",
    "Odd whitespace: \u2028 line sep \u2029 para sep \u0085 nel \u000b vt \u000c ff",
    "def fib(n):\n    if n < 2:\n        return n\n    return fib(n - 1) + fib(n - 2)\n",
    "int main(void) {\n\tprintf(\"%d\\n\", x++ <<= 2);\n\treturn 0; // done\n}\n",
    "{\"key\": [1, 2, {\"nested\": null}], 'single': \"quotes\"}",
    "Contractions: I'm you're he's they've we'll she'd it's DON'T WON'T I'M",
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n4<|im_end|>\n",
    "<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>",
    "text <|endoftext|> more text<|endoftext|>",
    "Ünïcödé àccents: café naïve résumé Zoë Øresund Ångström",
    "Русский текст и ελληνικά и العربية и עברית и हिन्दी",
    "    \n\n\n   \t  ",
    "a" * 300,
    "=" * 200 + "\n" + "-" * 150,
    "𝕳𝖊𝖑𝖑𝖔 mathematical 𝟏𝟐𝟑 and ﬁ ligature",
    "URL https://example.com/path?query=1&x=y#frag and email a.b@c.org",
    "",
    " ",
    "\n",
]


def corpus():
    texts = list(HANDWRITTEN)
    rnd = random.Random(1234)
    ddir = os.path.join(DATA, "datasets", "llama-factory-demo")
    for name in ["alpaca_zh_demo.json", "alpaca_en_demo.json"]:
        rows = json.load(open(os.path.join(ddir, name), encoding="utf-8"))
        for r in rnd.sample(rows, 20):
            texts.append(r["instruction"] + "\n" + r["input"] + "\n" + r["output"])
    rows = json.load(open(os.path.join(ddir, "glaive_toolcall_en_demo.json"), encoding="utf-8"))
    for r in rnd.sample(rows, 5):
        texts.append(r["tools"])
        texts.append("\n".join(m["value"] for m in r["conversations"]))
    with open(os.path.join(DATA, "datasets", "gsm8k", "test.jsonl"), encoding="utf-8") as f:
        lines = f.readlines()
    for line in rnd.sample(lines, 10):
        r = json.loads(line)
        texts.append(r["question"] + "\n" + r["answer"])
    sh = open(os.path.join(DATA, "datasets", "tinyshakespeare", "input.txt"), encoding="utf-8").read()
    for _ in range(5):
        s = rnd.randrange(0, len(sh) - 2000)
        texts.append(sh[s:s + 1500])
    return texts


def main():
    os.makedirs(OUT, exist_ok=True)
    texts = corpus()
    with open(os.path.join(OUT, "corpus.jsonl"), "w", encoding="utf-8") as f:
        for t in texts:
            f.write(json.dumps({"text": t}, ensure_ascii=False) + "\n")
    for name in ["qwen3", "llama3", "llama3-instruct", "gpt2"]:
        tok = Tokenizer.from_file(os.path.join(DATA, "tokenizers", name, "tokenizer.json"))
        plain = Tokenizer.from_file(os.path.join(DATA, "tokenizers", name, "tokenizer.json"))
        plain.encode_special_tokens = True  # special-token text not parsed as special
        with open(os.path.join(OUT, name + ".jsonl"), "w") as f:
            for t in texts:
                ids = plain.encode(t, add_special_tokens=False).ids
                ids_sp = tok.encode(t).ids
                dec = tok.decode(ids_sp, skip_special_tokens=False)
                f.write(json.dumps({"ids": ids, "ids_special": ids_sp, "decoded": dec},
                                   ensure_ascii=False) + "\n")
    print(f"{len(texts)} texts -> {OUT}")


if __name__ == "__main__":
    main()
