#!/usr/bin/env python3
"""Make the demo's synthetic instruction data: small tasks a tiny model learns in minutes on a
CPU, so fine-tuning visibly raises exact-match accuracy. Standard library only, deterministic.

    python3 datasets/make_synthetic.py OUT_DIR [--seed 0]

Writes OUT_DIR/train.jsonl, OUT_DIR/val.jsonl, OUT_DIR/test.jsonl (OpenAI `messages` format,
the answer is the assistant turn) and OUT_DIR/corpus.txt (text for training the tokenizer).
Tasks: addition of numbers below 10, reversing a short word, looking up a fixed colour of an
animal (a table the model must memorise), and the successor of a letter.
"""
import json
import os
import random
import sys

ANIMALS = ["cat", "dog", "fox", "owl", "bee", "cow", "pig", "elk", "yak", "ant", "bat", "emu",
           "hen", "ram", "eel", "gnu"]
COLOURS = ["red", "blue", "green", "pink", "gold", "grey", "teal", "plum"]
WORDS = ["tree", "stone", "river", "cloud", "apple", "bread", "light", "music", "paper", "glass",
         "chair", "smile", "storm", "honey", "ocean", "tiger", "lemon", "piano", "robot", "candy"]


def samples(rng):
    out = []
    for a in range(10):
        for b in range(10):
            out.append(("add", f"What is {a} + {b}?", str(a + b)))
    colour = {a: COLOURS[i % len(COLOURS)] for i, a in enumerate(ANIMALS)}
    for a in ANIMALS:
        for form in ("What colour is the {}?", "Colour of the {}?", "Tell me the colour of the {}."):
            out.append(("colour", form.format(a), colour[a]))
    for w in WORDS:
        out.append(("reverse", f"Reverse the word {w}.", w[::-1]))
    for i in range(25):
        c = chr(ord("a") + i)
        out.append(("next", f"Which letter comes after {c}?", chr(ord(c) + 1)))
    rng.shuffle(out)
    return out


def record(task, q, a):
    return {"messages": [{"role": "user", "content": q}, {"role": "assistant", "content": a}],
            "task": task}


def main():
    if len(sys.argv) < 2:
        print("usage: make_synthetic.py OUT_DIR [--seed N]", file=sys.stderr)
        return 2
    out = sys.argv[1]
    seed = int(sys.argv[sys.argv.index("--seed") + 1]) if "--seed" in sys.argv else 0
    rng = random.Random(seed)
    os.makedirs(out, exist_ok=True)
    data = samples(rng)
    n = len(data)
    # val: 20 held out for the validation loss; test: 100 of the training questions, the same
    # share of each task (memorisation is what a tiny model can show in minutes on a CPU)
    val, train = data[:20], data[20:]
    test = []
    for task in ("add", "colour", "reverse", "next"):
        rows = [r for r in train if r[0] == task]
        test += rows[: max(1, round(100 * len(rows) / len(train)))]
    test = test[:100]
    for name, rows in (("train", train), ("val", val), ("test", test)):
        tmp = os.path.join(out, f".{name}.jsonl.tmp")
        with open(tmp, "w") as f:
            for t, q, a in rows:
                f.write(json.dumps(record(t, q, a)) + "\n")
        os.replace(tmp, os.path.join(out, f"{name}.jsonl"))
    tmp = os.path.join(out, ".corpus.txt.tmp")
    with open(tmp, "w") as f:
        for t, q, a in data * 3:
            f.write(f"user: {q}\nassistant: {a}\n")
    os.replace(tmp, os.path.join(out, "corpus.txt"))
    print(json.dumps({"train": len(train), "val": len(val), "test": len(test), "total": n}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
