#!/usr/bin/env python3
"""Check swift-infer --serve with the official `openai` client (not part of make test).

Starts `swift-infer MODEL --serve --port 0` on loopback, then through openai.OpenAI: a chat
completion, the same streamed with usage (the joined deltas equal the whole answer), n=2, a
request with tools (the answer parses; a random fixture model emits no tool call), a
completions request, models.list, a wrong key (AuthenticationError) and an unknown model
(NotFoundError); SIGTERM then, exit 0 and "0 KV blocks in use".

    /work/venv-infer/bin/python tests/ref/check_openai_client.py build/bin/swift-infer \\
        tests/fixtures/eval/qwen2
"""
import re
import signal
import subprocess
import sys
import tempfile
import time

import openai


def start(binary, model, key):
    err = tempfile.NamedTemporaryFile("w+", suffix=".err")
    p = subprocess.Popen([binary, model, "--serve", "--port", "0", "--api-key", key,
                          "--served-model-name", "tiny", "--max-model-len", "1024"],
                         stderr=err)
    for _ in range(200):
        err.seek(0)
        m = re.search(r"on http://127\.0\.0\.1:(\d+) ", err.read())
        if m:
            return p, err, int(m.group(1))
        if p.poll() is not None:
            break
        time.sleep(0.05)
    err.seek(0)
    sys.exit("server did not start:\n" + err.read())


def check(binary, model):
    key = "sk-check"
    p, err, port = start(binary, model, key)
    base = f"http://127.0.0.1:{port}/v1"
    c = openai.OpenAI(base_url=base, api_key=key)
    msgs = [{"role": "user", "content": "Hello"}]
    whole = c.chat.completions.create(model="tiny", messages=msgs, max_tokens=8, temperature=0)
    print("chat:", repr(whole.choices[0].message.content), whole.choices[0].finish_reason,
          whole.usage)
    text, usage, finish = "", None, None
    for ch in c.chat.completions.create(model="tiny", messages=msgs, max_tokens=8, stream=True,
                                        stream_options={"include_usage": True}):
        if ch.choices:
            text += ch.choices[0].delta.content or ""
            finish = ch.choices[0].finish_reason or finish
        if ch.usage:
            usage = ch.usage
    print("stream:", repr(text), finish, usage)
    assert text == whole.choices[0].message.content and usage == whole.usage
    two = c.chat.completions.create(model="tiny", messages=msgs, max_tokens=6, n=2)
    print("n=2:", [(x.index, x.message.content) for x in two.choices], two.usage)
    assert len(two.choices) == 2 and two.usage.completion_tokens == 12
    parts = {}
    for ch in c.chat.completions.create(model="tiny", messages=msgs, max_tokens=6, n=2,
                                        stream=True):
        for x in ch.choices:
            parts[x.index] = parts.get(x.index, "") + (x.delta.content or "")
    print("n=2 streamed:", parts)
    assert parts[0] == parts[1] == two.choices[0].message.content
    tools = [{"type": "function", "function": {
        "name": "get_weather", "description": "the weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                       "required": ["city"]}}}]
    t = c.chat.completions.create(model="tiny", messages=[{"role": "user",
                                                           "content": "Weather in Paris?"}],
                                  tools=tools, max_tokens=8)
    print("tools:", t.choices[0].message, t.choices[0].finish_reason, t.usage)
    tt = "".join(ch.choices[0].delta.content or "" for ch in c.chat.completions.create(
        model="tiny", messages=[{"role": "user", "content": "Weather in Paris?"}], tools=tools,
        max_tokens=8, stream=True) if ch.choices)
    assert tt == (t.choices[0].message.content or "")
    comp = c.completions.create(model="tiny", prompt="Hello", max_tokens=5)
    print("completions:", repr(comp.choices[0].text), comp.usage)
    print("models:", [m.id for m in c.models.list().data])
    try:
        openai.OpenAI(base_url=base, api_key="wrong").models.list()
        raise AssertionError("a wrong key was accepted")
    except openai.AuthenticationError as e:
        print("wrong key:", e.status_code)
    try:
        c.completions.create(model="gpt-4", prompt="x", max_tokens=1)
        raise AssertionError("an unknown model was accepted")
    except openai.NotFoundError as e:
        print("unknown model:", e.status_code, e.body)
    p.send_signal(signal.SIGTERM)
    rc = p.wait(timeout=30)
    err.seek(0)
    log = err.read()
    print("exit:", rc, log.strip().splitlines()[-1])
    assert rc == 0 and " 0 KV blocks in use" in log
    print("ok")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        sys.exit("usage: check_openai_client.py SWIFT_INFER MODEL_DIR")
    check(sys.argv[1], sys.argv[2])
