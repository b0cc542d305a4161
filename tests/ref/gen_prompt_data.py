#!/usr/bin/env python3
"""Reference ids for GRPO prompt data (swift-preprocess --kind prompts), made the way TRL 1.16's
GRPOTrainer tokenizes a conversational prompt (_tokenize_prompts):

    prompt_ids = processing_class.apply_chat_template(conversation, add_generation_prompt=True,
                                                      tokenize=True, return_dict=True)["input_ids"]

Templates: the vendors' Jinja (../shared/data/chat-templates, tokenizer_config.json), as
gen_pref_data.py. Rows: tests/fixtures/grpo/prompts.jsonl, each turned into its conversation as
swift-preprocess documents it (tests/cli/prompts_check.py's conversation(): messages, TRL's
prompt as a string = one user message or a list, the query columns). Writes
tests/ref/fixtures/prompts/<template>.jsonl, one object per row: {"row", "text", "ids"}.

Run: /work/venv-trl/bin/python tests/ref/gen_prompt_data.py [SHARED]   (transformers)
"""
import json
import os
import sys

from transformers import PreTrainedTokenizerFast

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "cli"))
from prompts_check import conversation  # noqa: E402

SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "../../../shared")
DATA = os.path.join(SHARED, "data")
OUT = os.path.join(HERE, "fixtures", "prompts")
ROWS = os.path.join(HERE, "..", "fixtures", "grpo", "prompts.jsonl")


def main():
    os.makedirs(OUT, exist_ok=True)
    q3 = open(os.path.join(DATA, "chat-templates", "Qwen-Qwen3-0.6B.jinja")).read()
    l3 = json.load(open(os.path.join(DATA, "tokenizers", "llama3-instruct", "tokenizer_config.json")))["chat_template"]
    qtok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(DATA, "tokenizers", "qwen3", "tokenizer.json"))
    ltok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(DATA, "tokenizers", "llama3-instruct", "tokenizer.json"),
                                   bos_token="<|begin_of_text|>")
    rows = [json.loads(line) for line in open(ROWS, encoding="utf-8")]
    for tname, jinja, tok in (("qwen3", q3, qtok), ("llama3", l3, ltok)):
        with open(os.path.join(OUT, tname + ".jsonl"), "w", encoding="utf-8") as f:
            for row in rows:
                msgs, _ = conversation(row)
                text = tok.apply_chat_template(msgs, chat_template=jinja, add_generation_prompt=True,
                                               tokenize=False)
                ids = tok.apply_chat_template(msgs, chat_template=jinja, add_generation_prompt=True,
                                              tokenize=True, return_dict=True)["input_ids"]
                f.write(json.dumps({"row": row, "text": text, "ids": list(ids)}, ensure_ascii=False) + "\n")
    print("ok", OUT)


if __name__ == "__main__":
    main()
