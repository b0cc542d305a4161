#!/usr/bin/env python3
"""PyTorch eager reference for tests/bench/train.sh: the same Llama config, threads, batch and
sequence as bench_train.c, AdamW, fp32 master weights, CPU. Prints one JSON line.
DTYPE bfloat16: the forward (and so the backward) under torch.autocast("cpu", torch.bfloat16),
what ms-swift's --torch_dtype bfloat16 mixed precision computes on linear layers.
usage: train_torch.py 10M|100M THREADS BATCH SEQ STEPS [DTYPE]"""
import contextlib
import json
import sys
import time

import torch
from transformers import LlamaConfig, LlamaForCausalLM

name, th, B, T, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
dtype = sys.argv[6] if len(sys.argv) > 6 else "float32"
ctx = (lambda: torch.autocast("cpu", dtype=torch.bfloat16)) if dtype == "bfloat16" else contextlib.nullcontext
torch.set_num_threads(th)
dims = {"10M": dict(vocab_size=16000, hidden_size=256, intermediate_size=768, num_hidden_layers=6,
                    num_attention_heads=8, num_key_value_heads=4),
        "100M": dict(vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=12,
                     num_attention_heads=12, num_key_value_heads=12)}[name]
cfg = LlamaConfig(**dims, tie_word_embeddings=True, max_position_embeddings=8192)
torch.manual_seed(0)
model = LlamaForCausalLM(cfg).float().train()
opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)
ids = torch.randint(0, cfg.vocab_size, (B, T))
t0 = c0 = 0
for i in range(steps + 1):
    if i == 1:
        t0 = time.perf_counter()
        c0 = time.process_time()
    with ctx():
        out = model(input_ids=ids, labels=ids)
    out.loss.backward()
    torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad(set_to_none=True)
dt = (time.perf_counter() - t0) / steps
dc = (time.process_time() - c0) / steps  # user + system CPU of the process, all threads
print(json.dumps({"impl": "torch", "dtype": dtype, "config": name, "threads": th, "batch": B, "seq": T,
                  "step_s": round(dt, 4), "tokens_per_s": round(B * T / dt, 1),
                  "cpu_step_s": round(dc, 4), "tokens_per_cpu_s": round(B * T / dc, 1),
                  "torch": torch.__version__}))
