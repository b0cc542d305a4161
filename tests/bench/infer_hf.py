"""transformers generate at a given concurrency, for tests/bench/infer.sh.

infer_hf.py MODEL_DIR prompts.json --concurrency C --requests R --max-tokens T --threads N

The R requests (prompt i is prompts[i % len]) in batches of C, each batch padded on the left,
generate(do_sample=False, max_new_tokens=T, min_new_tokens=T) in fp32 on the CPU with N torch
threads. A logits processor stamps the time of every step: TTFT of each request in a batch is its
first stamp (after the prefill forward) minus its batch's start (as the client's clock starts
when it sends a request); TPOT = (last stamp
- first stamp) / (T - 1). Prints the JSON object infer_client.py prints.
"""

import argparse
import json
import math
import time

import torch
from transformers import AutoModelForCausalLM, AutoTokenizer, LogitsProcessor


def pct(xs, p):
    s = sorted(xs)
    return s[max(0, math.ceil(p / 100 * len(s)) - 1)] if s else None


class Stamp(LogitsProcessor):
    def __init__(self):
        self.t = []

    def __call__(self, input_ids, scores):
        self.t.append(time.perf_counter())
        return scores


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("prompts")
    ap.add_argument("--concurrency", type=int, required=True)
    ap.add_argument("--requests", type=int, required=True)
    ap.add_argument("--max-tokens", type=int, required=True)
    ap.add_argument("--threads", type=int, default=2)
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    tok = AutoTokenizer.from_pretrained(a.model)
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32).eval()
    prompts = json.load(open(a.prompts))
    reqs = [prompts[i % len(prompts)] for i in range(a.requests)]
    # one warm-up generate (allocator, kernels), not timed
    with torch.no_grad():
        enc = tok(reqs[:1], return_tensors="pt")
        model.generate(**enc, do_sample=False, max_new_tokens=2, pad_token_id=tok.pad_token_id)
    ttft, tpot, toks = [], [], []
    start = time.perf_counter()
    cpu0 = time.process_time()  # user+sys of every thread of this process
    for b in range(0, len(reqs), a.concurrency):
        batch = reqs[b : b + a.concurrency]
        enc = tok(batch, return_tensors="pt", padding=True)
        st = Stamp()
        t0 = time.perf_counter()
        with torch.no_grad():
            out = model.generate(
                **enc,
                do_sample=False,
                max_new_tokens=a.max_tokens,
                min_new_tokens=a.max_tokens,
                pad_token_id=tok.pad_token_id,
                logits_processor=[st],
            )
        n = out.shape[1] - enc["input_ids"].shape[1]
        for _ in batch:
            ttft.append(st.t[0] - t0)
            if n > 1:
                tpot.append((st.t[-1] - st.t[0]) / (n - 1))
            toks.append(n)
    wall = time.perf_counter() - start
    cpu = time.process_time() - cpu0
    print(
        json.dumps(
            {
                "requests": len(reqs),
                "tokens": sum(toks),
                "min_tokens": min(toks),
                "max_tokens": max(toks),
                "wall_s": wall,
                "cpu_s": cpu,
                "tok_s": sum(toks) / wall,
                "ttft_p50": pct(ttft, 50),
                "ttft_p99": pct(ttft, 99),
                "tpot_p50": pct(tpot, 50),
                "tpot_p99": pct(tpot, 99),
            }
        )
    )


if __name__ == "__main__":
    main()
