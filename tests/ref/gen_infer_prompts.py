#!/usr/bin/env python3
"""Reference prompts for swift-infer's chat requests: the OpenAI request's messages (and tools)
rendered by transformers' apply_chat_template(add_generation_prompt=True) with the vendors'
official Jinja templates, as vLLM renders them (tool call arguments, a JSON string in the API,
parsed into a dict first; chat_template_kwargs passed to the template), and tokenized by the HF
tokenizer. Writes tests/ref/template/prompt_<template>.jsonl: {"request": <body>, "text", "ids"}.

  qwen2_5 <- Qwen-Qwen2.5-7B-Instruct.jinja   qwen3 <- Qwen-Qwen3-0.6B.jinja (tokenizers/qwen3)
  llama3  <- tokenizers/llama3-instruct/tokenizer_config.json chat_template

Run: /work/venv-trl/bin/python tests/ref/gen_infer_prompts.py [SHARED]
"""
import copy
import json
import os
import sys

from transformers import PreTrainedTokenizerFast

SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../../../shared")
DATA = os.path.join(SHARED, "data")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "template")

TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                         "required": ["city"]}}}]
CALL = [{"id": "call_1", "type": "function",
         "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]

REQ = [
    {"messages": [{"role": "user", "content": "Hello"}]},
    {"messages": [{"role": "system", "content": "You are terse."}, {"role": "user", "content": "2+2?"}]},
    {"messages": [{"role": "user", "content": [{"type": "text", "text": "part one"},
                                               {"type": "text", "text": "part two"}]}]},
    {"messages": [{"role": "user", "content": "Hi"}, {"role": "assistant", "content": "Hello!"},
                  {"role": "user", "content": "Again"}]},
    {"messages": [{"role": "user", "content": "Think"}], "chat_template_kwargs": {"enable_thinking": False}},
    {"messages": [{"role": "user", "content": "Think"}], "chat_template_kwargs": {"enable_thinking": True}},
    {"messages": [{"role": "user", "content": "Weather in Paris?"}], "tools": TOOLS},
    {"messages": [{"role": "user", "content": "Weather in Paris?"},
                  {"role": "assistant", "content": None, "tool_calls": CALL},
                  {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"}], "tools": TOOLS},
    {"messages": [{"role": "system", "content": "Use tools."}, {"role": "user", "content": "Weather?"}],
     "tools": TOOLS, "chat_template_kwargs": {"enable_thinking": False}},
]


def for_template(req):
    """What vLLM hands the Jinja template: text parts joined, tool call arguments as dicts."""
    msgs = []
    for m in req["messages"]:
        m = copy.deepcopy(m)
        if isinstance(m.get("content"), list):
            m["content"] = "\n".join(p["text"] for p in m["content"])
        if m.get("content") is None:
            m["content"] = ""
        for tc in m.get("tool_calls") or []:
            tc["function"]["arguments"] = json.loads(tc["function"]["arguments"])
        msgs.append(m)
    return msgs


def main():
    tpl_dir = os.path.join(DATA, "chat-templates")
    q25 = open(os.path.join(tpl_dir, "Qwen-Qwen2.5-7B-Instruct.jinja")).read()
    q3 = open(os.path.join(tpl_dir, "Qwen-Qwen3-0.6B.jinja")).read()
    l3 = json.load(open(os.path.join(DATA, "tokenizers", "llama3-instruct", "tokenizer_config.json")))["chat_template"]
    qtok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(DATA, "tokenizers", "qwen3", "tokenizer.json"))
    ltok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(DATA, "tokenizers", "llama3-instruct", "tokenizer.json"),
                                   bos_token="<|begin_of_text|>")
    for name, jinja, tok, tools_ok in [("qwen2_5", q25, qtok, True), ("qwen3", q3, qtok, True),
                                       ("llama3", l3, ltok, False)]:
        with open(os.path.join(OUT, "prompt_" + name + ".jsonl"), "w", encoding="utf-8") as f:
            for req in REQ:
                if not tools_ok and (req.get("tools") or any(m["role"] == "tool" for m in req["messages"])):
                    continue
                kw = req.get("chat_template_kwargs", {})
                text = tok.apply_chat_template(for_template(req), tools=req.get("tools"), chat_template=jinja,
                                               tokenize=False, add_generation_prompt=True, **kw)
                ids = tok(text, add_special_tokens=False)["input_ids"]
                f.write(json.dumps({"request": req, "text": text, "ids": ids}, ensure_ascii=False) + "\n")
    print("ok", OUT)


if __name__ == "__main__":
    main()
