#!/usr/bin/env python3
"""Reference outputs for swift-infer's batch mode: transformers' generate(do_sample=False) on the
tiny eval models (tests/fixtures/eval/ARCH, made by gen_eval_fixtures.py), for chat requests
rendered with the models' own chat template (apply_chat_template(add_generation_prompt=True)) and
completions requests given as token ids and as text.

Writes tests/fixtures/infer/ARCH.jsonl: per request {"custom_id", "url", "body", "prompt_ids",
"ids", "finish_reason"}: ids are the new tokens generate returns (the eos included when it ends
there; eos = the model's 256 <|endoftext|> and the template's 258 <|im_end|>), finish_reason
"stop" when it ended at an eos, else "length". The bodies ask for logprobs with
return_tokens_as_token_ids so that the test compares token ids, not text.

Run from the repository root: /work/venv-trl/bin/python tests/ref/gen_infer_fixtures.py
"""
import json
import os

import torch
from transformers import AutoModelForCausalLM, PreTrainedTokenizerFast

EOS = [256, 258]
CHATS = [
    ([{"role": "user", "content": "Hello"}], 6),
    ([{"role": "system", "content": "Be brief."}, {"role": "user", "content": "What is 2+2?"}], 14),
    ([{"role": "user", "content": "Tell me a story about a cat"}, {"role": "assistant", "content": "Once"},
      {"role": "user", "content": "Go on, please, and make it long"}], 24),
    ([{"role": "user", "content": "x"}], 3),
]
TEXTS = [("The quick brown fox", 10), ("a", 17)]
IDS = [([63], 12), ([97, 36, 251, 51, 23], 9), ([152, 154, 30, 235, 235, 183, 112, 3, 46, 123, 252, 208], 20)]


def generate(model, ids, n):
    with torch.no_grad():
        out = model.generate(input_ids=torch.tensor([ids]), attention_mask=torch.ones(1, len(ids)),
                             do_sample=False, max_new_tokens=n, eos_token_id=EOS, pad_token_id=259)
    new = out[0, len(ids):].tolist()
    return new, "stop" if new and new[-1] in EOS else "length"


def main():
    os.makedirs("tests/fixtures/infer", exist_ok=True)
    for arch in ["llama", "qwen2", "qwen3"]:
        d = os.path.join("tests/fixtures/eval", arch)
        model = AutoModelForCausalLM.from_pretrained(d, attn_implementation="eager", dtype=torch.float32)
        model.eval()
        tok = PreTrainedTokenizerFast.from_pretrained(d)
        rows = []
        for i, (msgs, n) in enumerate(CHATS):
            ids = tok.apply_chat_template(msgs, add_generation_prompt=True, tokenize=True, return_dict=False)
            if isinstance(ids, dict) or hasattr(ids, "keys"):
                ids = ids["input_ids"]
            new, fin = generate(model, list(ids), n)
            rows.append({"custom_id": f"chat-{i}", "url": "/v1/chat/completions",
                         "body": {"messages": msgs, "max_tokens": n, "temperature": 0, "logprobs": True,
                                  "return_tokens_as_token_ids": True},
                         "prompt_ids": list(ids), "ids": new, "finish_reason": fin})
        for i, (text, n) in enumerate(TEXTS):
            ids = tok(text)["input_ids"]
            new, fin = generate(model, ids, n)
            rows.append({"custom_id": f"text-{i}", "url": "/v1/completions",
                         "body": {"prompt": text, "max_tokens": n, "temperature": 0, "logprobs": 0,
                                  "return_tokens_as_token_ids": True},
                         "prompt_ids": ids, "ids": new, "finish_reason": fin})
        for i, (ids, n) in enumerate(IDS):
            new, fin = generate(model, ids, n)
            rows.append({"custom_id": f"ids-{i}", "url": "/v1/completions",
                         "body": {"prompt": ids, "max_tokens": n, "logprobs": 0,
                                  "return_tokens_as_token_ids": True},
                         "prompt_ids": ids, "ids": new, "finish_reason": fin})
        with open(os.path.join("tests/fixtures/infer", arch + ".jsonl"), "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
        print(arch, [(r["custom_id"], len(r["prompt_ids"]), len(r["ids"]), r["finish_reason"]) for r in rows])


if __name__ == "__main__":
    main()
