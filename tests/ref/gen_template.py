#!/usr/bin/env python3
"""Reference ids for the chat templates, made by transformers' apply_chat_template with the
vendors' official Jinja templates (../shared/data/chat-templates, tokenizer_config.json) and the
HF tokenizers. Writes tests/ref/template/<template>.jsonl: {"row": <input row as swift-preprocess
reads it>, "text": <rendered text>, "ids": [...]} per conversation.

  qwen2_5 <- Qwen-Qwen2.5-7B-Instruct.jinja        (tokenizers/qwen3: the same BPE)
  qwen    <- the same Jinja with Qwen2's default system "You are a helpful assistant."
  qwen3   <- Qwen-Qwen3-0.6B.jinja                 (tokenizers/qwen3)
  llama3  <- tokenizers/llama3-instruct/tokenizer_config.json chat_template

Rows in ShareGPT form (glaive tool calls) are converted the way lib/dataset does it (and ms-swift):
human->user, gpt->assistant, function_call->assistant tool_calls, observation->tool, tools wrapped
as {"type": "function", "function": ...}.

Run: python3 tests/ref/gen_template.py [SHARED]
"""
import json
import os
import random
import sys

from transformers import PreTrainedTokenizerFast

SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../../../shared")
DATA = os.path.join(SHARED, "data")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "template")


def msg(role, content, **kw):
    d = {"role": role, "content": content}
    d.update(kw)
    return d


TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
          "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                         "required": ["city"]}}}]
CALL = [{"type": "function", "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]

HAND = [
    {"messages": [msg("user", "Hello"), msg("assistant", "Hi! How can I help?")]},
    {"messages": [msg("system", "You are terse."), msg("user", "2+2?"), msg("assistant", "4")]},
    {"messages": [msg("user", "Tell me a joke"), msg("assistant", "Why did the chicken cross the road?"),
                  msg("user", "Why?"), msg("assistant", "To get to the other side.")]},
    {"messages": [msg("user", "中文问题：你好吗？"), msg("assistant", "我很好，谢谢！😊 👨‍👩‍👧")]},
    {"messages": [msg("user", "Combining e\u0301 and CRLF\r\nline"), msg("assistant", "  padded answer \n\n")]},
    {"messages": [msg("user", "Think first"), msg("assistant", "<think>\nLet me think.\n</think>\n\nThe answer is 42.")]},
    {"messages": [msg("user", "Q1"), msg("assistant", "<think>old reasoning</think>A1"),
                  msg("user", "Q2"), msg("assistant", "<think>\nnew reasoning\n</think>\n\nA2")]},
    {"messages": [msg("user", "code please"), msg("assistant", "```python\ndef f(x):\n\treturn x ** 2\n```\n")]},
    {"messages": [msg("user", "Weather in Paris?"), msg("assistant", "", tool_calls=CALL),
                  msg("tool", "{\"temp\": 21}"), msg("assistant", "It is 21 degrees.")], "tools": TOOLS},
    {"messages": [msg("system", "Use tools."), msg("user", "Weather in Paris?"),
                  msg("assistant", "Let me check.", tool_calls=CALL),
                  msg("tool", "{\"temp\": 21}"), msg("tool", "{\"humidity\": 40}"),
                  msg("assistant", "21 degrees, 40% humidity.")], "tools": TOOLS},
]


def sharegpt_to_messages(row):
    out = []
    if row.get("system"):
        out.append(msg("system", row["system"]))
    for m in row["conversations"]:
        f, v = m["from"], m["value"]
        if f == "human":
            out.append(msg("user", v))
        elif f == "gpt":
            out.append(msg("assistant", v))
        elif f == "function_call":
            call = json.loads(v)
            tc = [{"type": "function", "function": call}]
            if out and out[-1]["role"] == "assistant" and "tool_calls" not in out[-1]:
                out[-1]["tool_calls"] = tc
            else:
                out.append(msg("assistant", "", tool_calls=tc))
        elif f == "observation":
            out.append(msg("tool", v))
        else:
            raise ValueError(f)
    tools = [t if "function" in t else {"type": "function", "function": t}
             for t in json.loads(row["tools"])] if row.get("tools") else None
    return out, tools


def main():
    os.makedirs(OUT, exist_ok=True)
    rnd = random.Random(7)
    glaive = json.load(open(os.path.join(DATA, "datasets", "llama-factory-demo", "glaive_toolcall_en_demo.json")))
    glaive_rows = rnd.sample(glaive, 6)
    tpl_dir = os.path.join(DATA, "chat-templates")
    q25 = open(os.path.join(tpl_dir, "Qwen-Qwen2.5-7B-Instruct.jinja")).read()
    q3 = open(os.path.join(tpl_dir, "Qwen-Qwen3-0.6B.jinja")).read()
    l3 = json.load(open(os.path.join(DATA, "tokenizers", "llama3-instruct", "tokenizer_config.json")))["chat_template"]
    qwen2 = q25.replace("You are Qwen, created by Alibaba Cloud. You are a helpful assistant.", "You are a helpful assistant.")
    qtok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(DATA, "tokenizers", "qwen3", "tokenizer.json"))
    ltok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(DATA, "tokenizers", "llama3-instruct", "tokenizer.json"),
                                   bos_token="<|begin_of_text|>")
    cases = [("qwen2_5", q25, qtok, True), ("qwen", qwen2, qtok, True), ("qwen3", q3, qtok, True),
             ("llama3", l3, ltok, False)]
    for name, jinja, tok, tools_ok in cases:
        with open(os.path.join(OUT, name + ".jsonl"), "w", encoding="utf-8") as f:
            rows = [(r, r["messages"], r.get("tools")) for r in HAND]
            rows += [(r, *sharegpt_to_messages(r)) for r in glaive_rows]
            for row, messages, tools in rows:
                if tools and not tools_ok:
                    continue  # the Llama 3 template has no tool syntax
                if not tools_ok and any(m["role"] == "tool" or m.get("tool_calls") for m in messages):
                    continue
                text = tok.apply_chat_template(messages, tools=tools, chat_template=jinja,
                                               tokenize=False, add_generation_prompt=False)
                ids = tok(text, add_special_tokens=False)["input_ids"]
                f.write(json.dumps({"row": row, "text": text, "ids": ids}, ensure_ascii=False) + "\n")
    print("ok", OUT)


if __name__ == "__main__":
    main()
