#!/usr/bin/env python3
"""PyTorch DDP (gloo, CPU) reference for tests/bench/dist.sh: the same model directory, micro-batch,
sequence length and global batch as the swift-train runs, one thread per rank, full fine-tuning
with AdamW. Prints one JSON line: mean step time, and the time of one all-reduce of all the
gradients' bytes through gloo (the communication DDP does per step, without overlap).
usage: dist_torch.py MODEL_DIR WORLD MICRO_BATCH SEQ STEPS"""
import json
import os
import socket
import sys
import time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
from torch.nn.parallel import DistributedDataParallel as DDP
from transformers import AutoModelForCausalLM


def worker(rank, world, model_dir, B, T, steps, port, q):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32).train()
    ddp = DDP(model) if world > 1 else model
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, betas=(0.9, 0.95), weight_decay=0.1)
    ga = 2 // world  # global batch: 2 micro-batches
    g = torch.Generator().manual_seed(rank)
    ids = torch.randint(0, model.config.vocab_size, (B, T), generator=g)
    times = []
    for i in range(steps + 1):
        t0 = time.perf_counter()
        for a in range(ga):
            out = ddp(input_ids=ids, labels=ids)
            out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        if i:
            times.append(time.perf_counter() - t0)
    n = sum(p.numel() for p in model.parameters() if p.requires_grad)
    flat = torch.ones(n)
    ar = 0.0
    if world > 1:
        dist.all_reduce(flat)
        t0 = time.perf_counter()
        for _ in range(3):
            dist.all_reduce(flat)
        ar = (time.perf_counter() - t0) / 3
    if rank == 0:
        q.put({"impl": "torch-ddp-gloo", "world": world, "step_s": sum(times) / len(times),
               "grad_bytes": n * 4, "allreduce_s": ar, "torch": torch.__version__})
    dist.destroy_process_group()


def main():
    model_dir, world, B, T, steps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    ctx = mp.get_context("spawn")
    q = ctx.SimpleQueue()
    mp.spawn(worker, args=(world, model_dir, B, T, steps, port, q), nprocs=world, join=True)
    print(json.dumps(q.get()))


if __name__ == "__main__":
    main()
