"""Concurrent streaming load against an OpenAI-compatible /v1/completions (tests/bench/infer.sh).

infer_client.py --url http://127.0.0.1:8000/v1 --model M --prompts prompts.json
    --concurrency C --requests R --max-tokens T [--extra JSON]

R requests (prompt i is prompts[i % len]), at most C in flight (a new one starts as one ends),
each `stream: true`, greedy (temperature 0), max_tokens T, plus the --extra body fields (e.g.
{"ignore_eos": true} or {"min_tokens": T}). Per request: TTFT = first chunk carrying text or a
token minus the send time; the output tokens are usage.completion_tokens when the server sends
usage (stream_options.include_usage), else max_tokens when finish_reason is "length", else the
number of chunks with a choice; TPOT = (last
chunk - first chunk) / (tokens - 1). Prints one JSON object: requests, tokens (total), min/max
tokens per request, wall_s (first send to last end), tok_s (tokens / wall_s), ttft_p50/p99 and
tpot_p50/p99 in seconds (nearest rank). Needs the `openai` package (PyPI).
"""

import argparse
import asyncio
import json
import math
import time

from openai import AsyncOpenAI


def pct(xs, p):
    if not xs:
        return None
    s = sorted(xs)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)]


async def one(client, model, prompt, max_tokens, extra, sem):
    async with sem:
        t0 = time.perf_counter()
        first = last = None
        chunks = 0
        usage = None
        finish = None
        stream = await client.completions.create(
            model=model,
            prompt=prompt,
            max_tokens=max_tokens,
            temperature=0,
            stream=True,
            stream_options={"include_usage": True},
            extra_body=extra,
        )
        async for ch in stream:
            now = time.perf_counter()
            if getattr(ch, "usage", None):
                usage = ch.usage.completion_tokens
            if ch.choices:
                chunks += 1
                finish = ch.choices[0].finish_reason or finish
                if first is None:
                    first = now
                last = now
        # a server that sends no usage may merge tokens into one chunk (llama.cpp holds back
        # the bytes of an unfinished UTF-8 character): finish_reason "length" means max_tokens
        n = usage if usage else (max_tokens if finish == "length" else chunks)
        return t0, first, last, n


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--url", required=True)
    ap.add_argument("--model", default="model")
    ap.add_argument("--prompts", required=True)
    ap.add_argument("--concurrency", type=int, required=True)
    ap.add_argument("--requests", type=int, required=True)
    ap.add_argument("--max-tokens", type=int, required=True)
    ap.add_argument("--extra", default="{}")
    a = ap.parse_args()
    prompts = json.load(open(a.prompts))
    extra = json.loads(a.extra)
    client = AsyncOpenAI(base_url=a.url, api_key="none", timeout=3600, max_retries=0)
    sem = asyncio.Semaphore(a.concurrency)
    res = await asyncio.gather(
        *(
            one(client, a.model, prompts[i % len(prompts)], a.max_tokens, extra, sem)
            for i in range(a.requests)
        )
    )
    toks = [r[3] for r in res]
    ttft = [r[1] - r[0] for r in res if r[1] is not None]
    tpot = [(r[2] - r[1]) / (r[3] - 1) for r in res if r[1] is not None and r[3] > 1]
    wall = max(r[2] or r[0] for r in res) - min(r[0] for r in res)
    out = {
        "requests": len(res),
        "tokens": sum(toks),
        "min_tokens": min(toks),
        "max_tokens": max(toks),
        "wall_s": wall,
        "tok_s": sum(toks) / wall if wall > 0 else 0,
        "ttft_p50": pct(ttft, 50),
        "ttft_p99": pct(ttft, 99),
        "tpot_p50": pct(tpot, 50),
        "tpot_p99": pct(tpot, 99),
    }
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main())
