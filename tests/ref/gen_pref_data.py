#!/usr/bin/env python3
"""Reference ids for preference data (swift-preprocess --kind pairs / kto), made the way TRL
tokenizes it: trl.data_utils._tokenize (apply_chat_template) and common_prefix_length, exactly as
DPOTrainer's and KTOTrainer's tokenize_fn do (TRL 1.16):

    prompt_ids          = apply_chat_template(prompt, add_generation_prompt=True)
    prompt_chosen_ids   = apply_chat_template(prompt + chosen)
    prompt_rejected_ids = apply_chat_template(prompt + rejected)
    n = min(common_prefix_length(prompt_ids, prompt_chosen_ids),
            common_prefix_length(prompt_ids, prompt_rejected_ids))
    -> prompt_ids[:n], chosen_ids = prompt_chosen_ids[n:], rejected_ids = prompt_rejected_ids[n:]

(KTO: one completion, n = common_prefix_length(prompt_ids, prompt_completion_ids).) Templates:
the vendors' Jinja (../shared/data/chat-templates, tokenizer_config.json), as gen_template.py.

Rows: the 4 shortest pairs of llama-factory-demo/dpo_en_demo.json and of dpo_zh_demo.json (ShareGPT
conversations + chosen + rejected, converted human->user, gpt->assistant as lib/dataset does) and
the 4 shortest rows of kto_en_demo.json (messages + label; the last message is the completion).
Writes tests/ref/fixtures/pref/<template>.jsonl, one object per row:
  {"file", "index", "row", "prompt_ids", "chosen_ids", "rejected_ids"}     (pairs)
  {"file", "index", "row", "prompt_ids", "completion_ids", "label"}        (kto)

Run: /work/venv-trl/bin/python tests/ref/gen_pref_data.py [SHARED]   (transformers, trl)
"""
import json
import os
import sys

from transformers import PreTrainedTokenizerFast
from trl.data_utils import _tokenize, common_prefix_length

SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../../../shared")
DATA = os.path.join(SHARED, "data")
LF = os.path.join(DATA, "datasets", "llama-factory-demo")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures", "pref")
ROLE = {"human": "user", "gpt": "assistant", "system": "system"}


def sharegpt(msgs):
    return [{"role": ROLE[m["from"]], "content": m["value"]} for m in msgs]


def shortest(rows, n, size):
    order = sorted(range(len(rows)), key=lambda i: (size(rows[i]), i))
    return sorted(order[:n])


def main():
    os.makedirs(OUT, exist_ok=True)
    tpl_dir = os.path.join(DATA, "chat-templates")
    q3 = open(os.path.join(tpl_dir, "Qwen-Qwen3-0.6B.jinja")).read()
    l3 = json.load(open(os.path.join(DATA, "tokenizers", "llama3-instruct", "tokenizer_config.json")))["chat_template"]
    qtok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(DATA, "tokenizers", "qwen3", "tokenizer.json"))
    ltok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(DATA, "tokenizers", "llama3-instruct", "tokenizer.json"),
                                   bos_token="<|begin_of_text|>")
    pair_size = lambda r: len(json.dumps(r, ensure_ascii=False))
    sources = []
    for name in ("dpo_en_demo.json", "dpo_zh_demo.json"):
        rows = json.load(open(os.path.join(LF, name)))
        sources += [(name, i, rows[i]) for i in shortest(rows, 4, pair_size)]
    kto = json.load(open(os.path.join(LF, "kto_en_demo.json")))
    kto_idx = shortest(kto, 4, pair_size)
    for tname, jinja, tok in (("qwen3", q3, qtok), ("llama3", l3, ltok)):
        kw = {"chat_template": jinja}
        with open(os.path.join(OUT, tname + ".jsonl"), "w", encoding="utf-8") as f:
            for name, i, row in sources:
                prompt = sharegpt(row["conversations"])
                chosen, rejected = sharegpt([row["chosen"]]), sharegpt([row["rejected"]])
                p = _tokenize(tok, prompt, add_generation_prompt=True, **kw)["input_ids"]
                pc = _tokenize(tok, prompt + chosen, **kw)["input_ids"]
                pr = _tokenize(tok, prompt + rejected, **kw)["input_ids"]
                n = min(common_prefix_length(p, pc), common_prefix_length(p, pr))
                f.write(json.dumps({"file": name, "index": i, "row": row, "prompt_ids": p[:n],
                                    "chosen_ids": pc[n:], "rejected_ids": pr[n:]},
                                   ensure_ascii=False) + "\n")
            for i in kto_idx:
                row = kto[i]
                prompt, completion = row["messages"][:-1], row["messages"][-1:]
                p = _tokenize(tok, prompt, add_generation_prompt=True, **kw)["input_ids"]
                pc = _tokenize(tok, prompt + completion, **kw)["input_ids"]
                n = common_prefix_length(p, pc)
                f.write(json.dumps({"file": "kto_en_demo.json", "index": i, "row": row,
                                    "prompt_ids": p[:n], "completion_ids": pc[n:], "label": row["label"]},
                                   ensure_ascii=False) + "\n")
    print("ok", OUT)


if __name__ == "__main__":
    main()
