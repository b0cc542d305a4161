#!/usr/bin/env python3
"""PyTorch + transformers eager baseline for tests/gpu/run.sh: the same model directory, batch
and sequence length as swift-train, full fine-tuning with torch.optim.AdamW, timed after warm-up.

    torch_bench.py MODEL_DIR --batch B --seq T --steps N --warmup W --peak-tflops P --precision fp32|bf16

fp32: float32 weights, TF32 matmuls (what swift-train's CUDA backend does by default);
bf16: float32 weights under torch.autocast(bfloat16) (the usual transformers Trainer --bf16).
Prints one JSON line: tokens/s, MFU (same FLOPs formula as swift_model_flops_per_token), peak
memory. Device `cpu` is accepted for a dry run of the script.
"""
import argparse
import json
import time

import torch
from transformers import AutoModelForCausalLM


def flops_per_token(c, T):
    H, I, L, V = c.hidden_size, c.intermediate_size, c.num_hidden_layers, c.vocab_size
    NH, NKV = c.num_attention_heads, c.num_key_value_heads
    hd = getattr(c, "head_dim", None) or H // NH
    lin = H * NH * hd + 2 * H * NKV * hd + NH * hd * H + 3 * H * I
    return 6.0 * (lin * L + V * H) + 6.0 * L * NH * hd * T


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("model")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--peak-tflops", type=float, default=989.4)
    ap.add_argument("--precision", default="fp32")
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    dev = torch.device(a.device)
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32,
                                                 attn_implementation="eager").to(dev)
    model.train()
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5, betas=(0.9, 0.95), weight_decay=0.1)
    vocab = model.config.vocab_size
    g = torch.Generator().manual_seed(1)
    ids = torch.randint(0, min(vocab, 515), (a.batch, a.seq), generator=g).to(dev)

    def step():
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=a.precision == "bf16"):
            out = model(input_ids=ids, labels=ids)
        out.loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        opt.zero_grad(set_to_none=True)
        return out.loss

    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    for _ in range(a.warmup):
        step()
    sync()
    if dev.type == "cuda":
        torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(a.steps):
        loss = step()
    sync()
    dt = time.perf_counter() - t0
    tps = a.batch * a.seq * a.steps / dt
    fpt = flops_per_token(model.config, a.seq)
    rec = {
        "impl": "transformers-eager-" + a.precision,
        "torch": torch.__version__,
        "batch": a.batch, "seq": a.seq, "steps": a.steps,
        "step_s": dt / a.steps,
        "tokens_per_s": tps,
        "flops_per_token": fpt,
        "mfu": tps * fpt / (a.peak_tflops * 1e12),
        "peak_mem_gib": (torch.cuda.max_memory_allocated() / 2**30) if dev.type == "cuda" else None,
        "last_loss": float(loss),
    }
    print(json.dumps(rec))


if __name__ == "__main__":
    main()
