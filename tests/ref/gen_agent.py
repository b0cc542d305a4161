#!/usr/bin/env python3
"""Reference ids for the agent templates (tools, tool calls, tool results) in the models' own
formats, made by transformers' apply_chat_template(tools=...) with the vendors' official Jinja
templates (../shared/data/chat-templates) and the HF tokenizers. Writes
tests/ref/template/agent_<name>.jsonl: {"row": <input row as swift-preprocess reads it>,
"template": <our --template>, "agent": <our --agent-template>, "text": ..., "ids": [...]} per
conversation; tests/unit/test_agent.c checks our ids against them token for token.

  agent_qwen2_5   Qwen-Qwen2.5-7B-Instruct.jinja         --template qwen2_5  --agent-template hermes
  agent_qwen3     Qwen-Qwen3-0.6B.jinja                  --template qwen3    --agent-template hermes
  agent_llama3_1  meta-llama-Llama-3.1-8B-Instruct.jinja --template llama3_1 --agent-template llama3
  agent_llama3_2  meta-llama-Llama-3.2-3B-Instruct.jinja --template llama3_2 --agent-template llama3
                  (date_string="26 Jul 2024": the template's fallback; HF would write today)
  agent_llama3_3  meta-llama-Llama-3.3-70B-Instruct.jinja --template llama3_1 --agent-template llama3

Conversations: hand-made (one call, parallel calls, a call followed by its result and a final
answer, two results in a row, no tools, a system prompt with tools) and 8 glaive demo
conversations (llama-factory-demo/glaive_toolcall_{en,zh}_demo.json, ShareGPT function_call /
observation turns converted as lib/preprocess/dataset.c does). The Llama 3.1 templates refuse
parallel calls (raise_exception), so those rows are left out of the Llama fixtures.

Run: /work/venv-trl/bin/python tests/ref/gen_agent.py [SHARED]
"""
import json
import os
import random
import sys

from transformers import PreTrainedTokenizerFast

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_template import sharegpt_to_messages  # noqa: E402

SHARED = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), "../../../shared")
DATA = os.path.join(SHARED, "data")
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "template")


def msg(role, content, **kw):
    d = {"role": role, "content": content}
    d.update(kw)
    return d


def fn(name, desc, props, required):
    return {"type": "function", "function": {"name": name, "description": desc, "parameters": {
        "type": "object", "properties": props, "required": required}}}


TOOLS = [fn("get_weather", "Weather for a city", {"city": {"type": "string"}, "unit": {
             "type": "string", "enum": ["celsius", "fahrenheit"]}}, ["city"]),
         fn("get_time", "Local time in a time zone", {"tz": {"type": "string"}}, ["tz"])]


def call(name, args):
    return {"type": "function", "function": {"name": name, "arguments": args}}


W = call("get_weather", {"city": "Paris"})
W2 = call("get_weather", {"city": "東京", "unit": "celsius"})
T = call("get_time", {"tz": "Europe/Paris"})

HAND = [
    # one call (the conversation ends with it)
    {"messages": [msg("user", "Weather in Paris?"), msg("assistant", "", tool_calls=[W])], "tools": TOOLS},
    # parallel calls
    {"messages": [msg("user", "Weather and time in Paris?"), msg("assistant", "", tool_calls=[W, T])],
     "tools": TOOLS},
    # a call, its result, the final answer
    {"messages": [msg("user", "Weather in Tokyo, in celsius?"), msg("assistant", "", tool_calls=[W2]),
                  msg("tool", "{\"temp\": 18, \"sky\": \"clear\"}"), msg("assistant", "18 °C and clear.")],
     "tools": TOOLS},
    # a system prompt, content next to the call, two results in a row (parallel)
    {"messages": [msg("system", "You are a travel assistant."), msg("user", "Paris: weather and time?"),
                  msg("assistant", "Let me check both.", tool_calls=[W, T]),
                  msg("tool", "{\"temp\": 21}"), msg("tool", "{\"time\": \"14:05\"}"),
                  msg("assistant", "21 degrees, and it is 14:05.")], "tools": TOOLS},
    # tools offered, none called
    {"messages": [msg("user", "Hi there"), msg("assistant", "Hello! How can I help?")], "tools": TOOLS},
    # no tools at all
    {"messages": [msg("user", "2+2?"), msg("assistant", "4")]},
    {"messages": [msg("system", "Be brief."), msg("user", "Capital of France?"), msg("assistant", "Paris.")]},
]


def main():
    os.makedirs(OUT, exist_ok=True)
    rnd = random.Random(24)
    demo = os.path.join(DATA, "datasets", "llama-factory-demo")
    en = json.load(open(os.path.join(demo, "glaive_toolcall_en_demo.json"), encoding="utf-8"))
    zh = json.load(open(os.path.join(demo, "glaive_toolcall_zh_demo.json"), encoding="utf-8"))
    glaive = rnd.sample(en, 6) + rnd.sample(zh, 2)
    tpl_dir = os.path.join(DATA, "chat-templates")

    def jinja(name):
        return open(os.path.join(tpl_dir, name), encoding="utf-8").read()

    qtok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(DATA, "tokenizers", "qwen3", "tokenizer.json"))
    ltok = PreTrainedTokenizerFast(tokenizer_file=os.path.join(DATA, "tokenizers", "llama3-instruct", "tokenizer.json"),
                                   bos_token="<|begin_of_text|>")
    cases = [("agent_qwen2_5", "qwen2_5", "hermes", jinja("Qwen-Qwen2.5-7B-Instruct.jinja"), qtok, {}),
             ("agent_qwen3", "qwen3", "hermes", jinja("Qwen-Qwen3-0.6B.jinja"), qtok, {}),
             ("agent_llama3_1", "llama3_1", "llama3", jinja("meta-llama-Llama-3.1-8B-Instruct.jinja"), ltok, {}),
             ("agent_llama3_2", "llama3_2", "llama3", jinja("meta-llama-Llama-3.2-3B-Instruct.jinja"), ltok,
              {"date_string": "26 Jul 2024"}),
             ("agent_llama3_3", "llama3_1", "llama3", jinja("meta-llama-Llama-3.3-70B-Instruct.jinja"), ltok, {})]
    rows = [(r, r["messages"], r.get("tools")) for r in HAND]
    # an empty "tools" list ("[]" in glaive rows without tools) means no tools, as in ms-swift and
    # lib/preprocess/dataset.c (the Llama Jinja would otherwise announce an empty tool list)
    rows += [(r, m, t or None) for r in glaive for m, t in [sharegpt_to_messages(r)]]
    for fname, tpl, agent, src, tok, kw in cases:
        n = 0
        with open(os.path.join(OUT, fname + ".jsonl"), "w", encoding="utf-8") as f:
            for row, messages, tools in rows:
                try:
                    text = tok.apply_chat_template(messages, tools=tools, chat_template=src, tokenize=False,
                                                   add_generation_prompt=False, **kw)
                except Exception as e:  # Llama 3.1: "only supports single tool-calls at once"
                    if "single tool-calls" not in str(e):
                        raise
                    continue
                ids = tok(text, add_special_tokens=False)["input_ids"]
                f.write(json.dumps({"row": row, "template": tpl, "agent": agent, "text": text, "ids": ids},
                                   ensure_ascii=False) + "\n")
                n += 1
        print(fname, n, "rows")


if __name__ == "__main__":
    main()
