#!/usr/bin/env python3
"""Reference encodings for the tokenizer our BPE trainer writes (tests/fixtures/bpe/tokenizer.json),
computed by the real Hugging Face `tokenizers` (PyPI). Proves the file loads there unchanged and
gives the ids our own tokenizer must reproduce. Run by hand; CI only reads the output.

    python3 tests/ref/gen_bpe_fixture.py   # writes tests/fixtures/bpe/encodings.jsonl
"""
import json
import os

from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
FIX = os.path.join(HERE, "..", "fixtures", "bpe")

TEXTS = [
    "First Citizen:\nBefore we proceed any further, hear me speak.",
    "What is 13 + 19?",
    "  leading spaces and trailing   ",
    "Unicode: café, naïve, 東京, emoji 👩‍💻 and tabs\tand\r\nCRLF",
    "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\nhello<|im_end|>\n",
    "digits 1234567890 and 3.14159",
    "",
]


def main():
    tok = Tokenizer.from_file(os.path.join(FIX, "tokenizer.json"))
    with open(os.path.join(FIX, "encodings.jsonl"), "w") as f:
        for t in TEXTS:
            ids = tok.encode(t, add_special_tokens=False).ids
            assert tok.decode(ids, skip_special_tokens=False) == t, t
            f.write(json.dumps({"text": t, "ids": ids}, ensure_ascii=False) + "\n")
    print("wrote", os.path.join(FIX, "encodings.jsonl"))


if __name__ == "__main__":
    main()
