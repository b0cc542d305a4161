#!/usr/bin/env python3
"""transformers reference for tests/bench/eval.sh: the same Llama config, threads, batch, prompt
and decode length as bench_eval.c; prefill = one forward of the prompts with use_cache, decode =
NEW greedy steps of one token per sequence through past_key_values (what generate() does,
without its Python overhead beyond the model call). fp32, CPU, eager attention. One JSON line.
usage: eval_torch.py 10M|100M THREADS BATCH PROMPT NEW"""
import json
import sys
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

name, th, B, P, G = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
torch.set_num_threads(th)
dims = {"10M": dict(vocab_size=16000, hidden_size=256, intermediate_size=768, num_hidden_layers=6,
                    num_attention_heads=8, num_key_value_heads=4),
        "100M": dict(vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
                     num_attention_heads=12, num_key_value_heads=12)}[name]
cfg = LlamaConfig(**dims, tie_word_embeddings=True, max_position_embeddings=8192)
cfg._attn_implementation = "eager"
torch.manual_seed(0)
model = LlamaForCausalLM(cfg).float().eval()
ids = torch.randint(0, cfg.vocab_size, (B, P))


def run():
    with torch.inference_mode():
        t0 = time.perf_counter()
        out = model(input_ids=ids, use_cache=True)
        t1 = time.perf_counter()
        pkv = out.past_key_values
        nxt = out.logits[:, -1].argmax(-1, keepdim=True)
        for _ in range(G):
            out = model(input_ids=nxt, past_key_values=pkv, use_cache=True)
            pkv = out.past_key_values
            nxt = out.logits[:, -1].argmax(-1, keepdim=True)
        t2 = time.perf_counter()
    return t1 - t0, t2 - t1


run()  # warm-up
pf, dc = run()
print(json.dumps({"impl": "transformers", "config": name, "threads": th, "batch": B, "prompt": P,
                  "new": G, "prefill_tokens_per_s": round(B * P / pf, 1),
                  "decode_tokens_per_s": round(B * G / dc, 1), "torch": torch.__version__}))
