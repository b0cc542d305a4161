#!/usr/bin/env python3
"""Check swift-infer --serve with the official `openai` client (not part of make test).

Starts `swift-infer MODEL --serve --port 0` on loopback, then through openai.OpenAI: a chat
completion, the same streamed with usage (the joined deltas equal the whole answer), n=2, a
request with tools (the answer parses; a random fixture model emits no tool call), a
completions request, models.list, a wrong key (AuthenticationError) and an unknown model
(NotFoundError); SIGTERM then, exit 0 and "0 KV blocks in use".

With --toolcall, MODEL_DIR is a model that really generates hermes calls (as
tests/cli/infer-toolcall.bats trains one: the tiny Qwen2 fixture overfit on "Weather in Paris?"
-> get_weather {"city": "Paris"} and "Rome and Oslo?" -> "Two cities." and two calls): the
client reads message.tool_calls (whole and streamed, the streamed deltas joined per index as
clients do), sends the call's result back as a `tool` message, and checks tool_choice "none".

    /work/venv-infer/bin/python tests/ref/check_openai_client.py build/bin/swift-infer \\
        tests/fixtures/eval/qwen2
    /work/venv-infer/bin/python tests/ref/check_openai_client.py --toolcall build/bin/swift-infer \\
        RUN/checkpoint-120
"""
import json
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
    # the same usage but for the cached tokens: the stream finds the first request's prompt in
    # the prefix cache
    assert text == whole.choices[0].message.content
    assert usage.model_dump(exclude={"prompt_tokens_details"}) == whole.usage.model_dump(
        exclude={"prompt_tokens_details"})
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


TOOLS = [{"type": "function", "function": {
    "name": "get_weather", "description": "Weather for a city",
    "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                   "required": ["city"]}}}]


def streamed_calls(stream):
    """The calls of a stream, joined by index as clients join vLLM's argument pieces."""
    calls, content, finish = {}, "", None
    for ch in stream:
        if not ch.choices:
            continue
        d = ch.choices[0].delta
        content += d.content or ""
        finish = ch.choices[0].finish_reason or finish
        for tc in d.tool_calls or []:
            c = calls.setdefault(tc.index, {"id": None, "name": "", "arguments": ""})
            c["id"] = tc.id or c["id"]
            c["name"] += tc.function.name or ""
            c["arguments"] += tc.function.arguments or ""
    return [calls[i] for i in sorted(calls)], content, finish


def check_toolcall(binary, model):
    key = "sk-check"
    p, err, port = start(binary, model, key)
    c = openai.OpenAI(base_url=f"http://127.0.0.1:{port}/v1", api_key=key)
    ask = [{"role": "user", "content": "Weather in Paris?"}]
    r = c.chat.completions.create(model="tiny", messages=ask, tools=TOOLS, max_tokens=200)
    m = r.choices[0].message
    print("tool call:", m.tool_calls, repr(m.content), r.choices[0].finish_reason)
    tc = m.tool_calls[0]
    assert r.choices[0].finish_reason == "tool_calls" and m.content is None
    assert tc.id.startswith("call_") and tc.type == "function"
    assert tc.function.name == "get_weather" and json.loads(tc.function.arguments) == {
        "city": "Paris"}
    calls, content, finish = streamed_calls(c.chat.completions.create(
        model="tiny", messages=ask, tools=TOOLS, max_tokens=200, stream=True))
    print("streamed:", calls, repr(content), finish)
    assert finish == "tool_calls" and content == "" and len(calls) == 1
    assert calls[0]["name"] == "get_weather" and json.loads(calls[0]["arguments"]) == {
        "city": "Paris"} and calls[0]["id"].startswith("call_")
    two = c.chat.completions.create(model="tiny", tools=TOOLS, max_tokens=200, messages=[
        {"role": "user", "content": "Rome and Oslo?"}])
    m2 = two.choices[0].message
    print("two calls:", [(t.function.name, t.function.arguments) for t in m2.tool_calls],
          repr(m2.content))
    assert [json.loads(t.function.arguments) for t in m2.tool_calls] == [
        {"city": "Rome"}, {"city": "Oslo", "unit": "C"}] and m2.content == "Two cities."
    calls, content, finish = streamed_calls(c.chat.completions.create(
        model="tiny", tools=TOOLS, max_tokens=200, stream=True, messages=[
            {"role": "user", "content": "Rome and Oslo?"}]))
    assert [json.loads(x["arguments"]) for x in calls] == [
        {"city": "Rome"}, {"city": "Oslo", "unit": "C"}] and content == "Two cities."
    # the call and its result go back as the client's next turn (the answer is whatever the
    # overfit model says; the request must render and be answered)
    back = c.chat.completions.create(model="tiny", tools=TOOLS, max_tokens=8, messages=ask + [
        m.model_dump(exclude_none=True),
        {"role": "tool", "tool_call_id": tc.id, "content": '{"temp": 21}'}])
    print("with the result:", back.choices[0].finish_reason, back.usage)
    none = c.chat.completions.create(model="tiny", messages=ask, tools=TOOLS, max_tokens=200,
                                     tool_choice="none")
    print("tool_choice none:", repr(none.choices[0].message.content),
          none.choices[0].finish_reason)
    assert none.choices[0].message.tool_calls is None
    assert none.choices[0].message.content.startswith("<tool_call>")
    p.send_signal(signal.SIGTERM)
    rc = p.wait(timeout=30)
    err.seek(0)
    log = err.read()
    print("exit:", rc, log.strip().splitlines()[-1])
    assert rc == 0 and " 0 KV blocks in use" in log
    print("ok")


if __name__ == "__main__":
    args = sys.argv[1:]
    tool = args[:1] == ["--toolcall"]
    if tool:
        args = args[1:]
    if len(args) != 2:
        sys.exit("usage: check_openai_client.py [--toolcall] SWIFT_INFER MODEL_DIR")
    (check_toolcall if tool else check)(args[0], args[1])
