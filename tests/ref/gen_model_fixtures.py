#!/usr/bin/env python3
"""Reference fixtures for the model math: tiny random Llama, Qwen2 and Qwen3 models built and run
by transformers (eager attention, float32), their LoRA variants by peft.

For each ARCH in llama, qwen2, qwen3 this writes tests/fixtures/model/ARCH/:
  config.json, model.safetensors (qwen2: sharded + index)   save_pretrained, as users have them
  ref.safetensors      input_ids, labels, position_ids [B,T] (row 1 packs two documents),
                       logits [B,T,V], loss [], grad.<param> for every parameter,
                       losses [3], step1.<param> and step3.<param> after 1 and 3 AdamW steps
  adapter/             peft save_pretrained of a LoRA (r=4, alpha=8, all-linear, random B)
  lora_ref.safetensors logits, loss, grad.<lora param>, losses [3], step1/step3.<lora param>

Conventions (the same as swift-train's): packed documents attend only inside themselves and
restart their positions (block-diagonal causal attention); the loss is the sum of cross-entropy
over trained tokens divided by their count, token t predicting token t+1 of the same document.
AdamW as HF Trainer sets it up: lr 1e-2, betas (0.9, 0.95), eps 1e-8, weight decay 0.1 except
biases and norm weights. Run from the repository root: python3 tests/ref/gen_model_fixtures.py
"""
import json
import os
import shutil

import torch
from safetensors.torch import save_file
import transformers
from transformers import (LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM,
                          Qwen3Config, Qwen3ForCausalLM)
from peft import LoraConfig, get_peft_model

OUT = "tests/fixtures/model"
B, T, V = 2, 16, 128
DOC0 = 7  # row 1 = document of 7 tokens + document of 9 tokens
LR, WD, BETAS, EPS = 1e-2, 0.1, (0.9, 0.95), 1e-8

common = dict(vocab_size=V, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
              num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=64,
              hidden_act="silu", initializer_range=0.1, bos_token_id=1, eos_token_id=2)
ARCHS = {
    "llama": (LlamaConfig, LlamaForCausalLM,
              dict(rms_norm_eps=1e-5, tie_word_embeddings=False,
                   rope_parameters={"rope_type": "llama3", "rope_theta": 10000.0, "factor": 8.0,
                                    "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                    "original_max_position_embeddings": 16})),
    "qwen2": (Qwen2Config, Qwen2ForCausalLM,
              dict(rms_norm_eps=1e-6, tie_word_embeddings=True,
                   rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})),
    "qwen3": (Qwen3Config, Qwen3ForCausalLM,
              dict(rms_norm_eps=1e-6, tie_word_embeddings=False, head_dim=16,
                   rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})),
}


def batch(g):
    ids = torch.randint(3, V, (B, T), generator=g)
    pos = torch.arange(T).repeat(B, 1)
    pos[1, DOC0:] = torch.arange(T - DOC0)
    labels = ids.clone()
    labels[0, :3] = -100          # a prompt of 3 tokens, not trained
    labels[1, :2] = -100
    labels[1, DOC0:DOC0 + 4] = -100
    return ids, labels, pos


def docs(T_):
    return [(0, 0, T), (1, 0, DOC0), (1, DOC0, T)]


def forward_loss(model, ids, labels):
    """Run each document separately (what block-diagonal attention computes), then the loss."""
    logits = torch.zeros(B, T, V)
    parts = []
    tot = torch.zeros(())
    n = 0
    for b, s, e in docs(T):
        lg = model(input_ids=ids[b:b + 1, s:e]).logits[0]
        parts.append((b, s, e, lg))
        tgt = labels[b, s + 1:e]
        m = tgt != -100
        if m.any():
            tot = tot + torch.nn.functional.cross_entropy(lg[:-1][m], tgt[m], reduction="sum")
            n += int(m.sum())
    out = torch.zeros(B, T, V)
    for b, s, e, lg in parts:
        out[b, s:e] = lg.detach()
    return out, tot / n


def decay(name):
    return not ("bias" in name or "norm" in name)


def adamw(params):
    dec = [p for n, p in params if decay(n)]
    nodec = [p for n, p in params if not decay(n)]
    return torch.optim.AdamW([{"params": dec, "weight_decay": WD},
                              {"params": nodec, "weight_decay": 0.0}],
                             lr=LR, betas=BETAS, eps=EPS)


def run(model, named, ids, labels, prefix):
    model.zero_grad()
    logits, loss = forward_loss(model, ids, labels)
    loss.backward()
    t = {"logits": logits.contiguous(), "loss": loss.detach().reshape(())}
    for n, p in named:
        t["grad." + prefix(n)] = p.grad.detach().clone().contiguous()
    opt = adamw(named)
    losses = []
    for i in range(3):
        opt.zero_grad()
        _, l = forward_loss(model, ids, labels)
        l.backward()
        opt.step()
        losses.append(l.item())
        if i == 0:
            for n, p in named:
                t["step1." + prefix(n)] = p.detach().clone().contiguous()
    t["losses"] = torch.tensor(losses)
    for n, p in named:
        t["step3." + prefix(n)] = p.detach().clone().contiguous()
    return t


def main():
    torch.manual_seed(0)
    for arch, (Cfg, Model, extra) in ARCHS.items():
        g = torch.Generator().manual_seed({"llama": 1, "qwen2": 2, "qwen3": 3}[arch])
        cfg = Cfg(**common, **extra)
        cfg._attn_implementation = "eager"
        model = Model(cfg).float()
        with torch.no_grad():
            for n, p in model.named_parameters():
                if "norm" in n:
                    p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
                elif n.endswith("bias"):
                    p.copy_(0.2 * torch.randn(p.shape, generator=g))
        d = os.path.join(OUT, arch)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        model.save_pretrained(d, max_shard_size="40KB" if arch == "qwen2" else "50MB")
        ids, labels, pos = batch(g)
        base = {"input_ids": ids.int(), "labels": labels.int(), "position_ids": pos.int()}

        # LoRA first (on a copy, before the full-parameter steps change the base model)
        lmodel = Model(cfg).float()
        lmodel.load_state_dict(model.state_dict())
        lcfg = LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.0,
                          bias="none")
        pm = get_peft_model(lmodel, lcfg)
        with torch.no_grad():
            for n, p in pm.named_parameters():
                if "lora_B" in n:
                    p.copy_(0.3 * torch.randn(p.shape, generator=g))
        pm.save_pretrained(os.path.join(d, "adapter"))
        lnamed = [(n, p) for n, p in pm.named_parameters() if p.requires_grad]
        # peft's saved names drop the adapter name: ...q_proj.lora_A.default.weight -> lora_A.weight
        lt = run(pm, lnamed, ids, labels, lambda n: n.replace(".default", ""))
        save_file({**base, **lt}, os.path.join(d, "lora_ref.safetensors"),
                  metadata={"format": "pt", "transformers": transformers.__version__})

        named = list(model.named_parameters())
        t = run(model, named, ids, labels, lambda n: n)
        save_file({**base, **t}, os.path.join(d, "ref.safetensors"),
                  metadata={"format": "pt", "transformers": transformers.__version__,
                            "torch": torch.__version__})
        print(arch, "loss", float(t["loss"]), "losses", t["losses"].tolist(),
              "lora loss", float(lt["loss"]))


if __name__ == "__main__":
    main()
