#!/usr/bin/env python3
"""Reference values for DoRA (swift-train --lora-dora), computed by PEFT's own DoRA code
(LoraConfig(use_dora=True): DoraLinearVariant / DoraLinearLayer, peft 0.21) on the tiny Llama
fixture (tests/fixtures/model/llama). CI never runs this; tests/unit/test_dora.c compares against
what it writes.

Writes tests/fixtures/dora-ref/:
  adapter/            a DoRA adapter saved by PEFT's save_pretrained: r 4, alpha 8, all-linear,
                      A as PEFT initialises it, then B ~ N(0, 0.05^2) and the magnitude times
                      (1 + 0.1 N(0,1)) so that neither the LoRA path nor the m/||W+sBA|| factor
                      is trivial
  ref.safetensors     "tokens", "targets" (F32 holding the ids; -1 = not trained), B=2 rows of T=8
                      at positions 0..7; "logits" (16,128) of the adapter model in train mode with
                      dropout 0; "loss" (1) = mean cross-entropy over the trained tokens;
                      "grad.<name>" d loss / d param for every adapter parameter under the names
                      PEFT saves (lora_A.weight, lora_B.weight, lora_magnitude_vector)
  ours-peft.safetensors  only when tests/fixtures/dora-ref/ours/ exists (an adapter saved by
                      swift-train --lora-dora): "logits" of PeftModel.from_pretrained(base, ours)
                      on the same batch (eval mode): our saved layout loads in PEFT, and the C test
                      checks our logits of that adapter against these

Run from the repository root: /work/venv-trl/bin/python tests/ref/gen_dora_fixtures.py
"""
import os

import torch
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM

MODEL = "tests/fixtures/model/llama"
OUT = "tests/fixtures/dora-ref"
B, T = 2, 8


def base():
    return AutoModelForCausalLM.from_pretrained(MODEL, dtype=torch.float32)


def batch():
    g = torch.Generator().manual_seed(7)
    tok = torch.randint(3, 128, (B, T), generator=g)
    tgt = torch.full((B, T), -1)
    tgt[:, :-1] = tok[:, 1:]
    tgt[1, :2] = -1  # untrained tokens too (a prompt)
    return tok, tgt


def saved_name(n):
    n = n.replace(".lora_A.default.weight", ".lora_A.weight")
    n = n.replace(".lora_B.default.weight", ".lora_B.weight")
    return n.replace(".lora_magnitude_vector.default.weight", ".lora_magnitude_vector")


def main():
    os.makedirs(OUT, exist_ok=True)
    torch.manual_seed(0)
    cfg = LoraConfig(r=4, lora_alpha=8, target_modules="all-linear", lora_dropout=0.0,
                     use_dora=True)
    pm = get_peft_model(base(), cfg)
    with torch.no_grad():
        for n, p in pm.named_parameters():
            if ".lora_B." in n:
                p.copy_(torch.randn_like(p) * 0.05)
            elif "lora_magnitude_vector" in n:
                p.mul_(1 + 0.1 * torch.randn_like(p))
    pm.save_pretrained(os.path.join(OUT, "adapter"))
    os.remove(os.path.join(OUT, "adapter", "README.md"))  # PEFT's model card

    tok, tgt = batch()
    pm.train()
    logits = pm(input_ids=tok).logits
    lg = logits.reshape(B * T, -1)
    loss = torch.nn.functional.cross_entropy(lg, tgt.reshape(-1), ignore_index=-1)
    loss.backward()
    ref = {
        "tokens": tok.reshape(-1).float(),
        "targets": tgt.reshape(-1).float(),
        "logits": lg.detach().contiguous(),
        "loss": loss.detach().reshape(1),
    }
    for n, p in pm.named_parameters():
        if p.requires_grad:
            ref["grad." + saved_name(n)] = p.grad.detach().contiguous()
    save_file(ref, os.path.join(OUT, "ref.safetensors"))
    print("loss", loss.item(), "tensors", len(ref))

    ours = os.path.join(OUT, "ours")
    if os.path.isdir(ours):
        om = PeftModel.from_pretrained(base(), ours)
        om.eval()
        assert om.peft_config["default"].use_dora
        with torch.no_grad():
            ol = om(input_ids=tok).logits.reshape(B * T, -1)
            plain = base()(input_ids=tok).logits.reshape(B * T, -1)
        print("ours: max |logits - base| =", (ol - plain).abs().max().item())
        save_file({"logits": ol.contiguous()}, os.path.join(OUT, "ours-peft.safetensors"))


if __name__ == "__main__":
    main()
