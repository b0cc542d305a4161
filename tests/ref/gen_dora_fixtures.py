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
  qwen2-ref.safetensors  "ids" (1,8) and "logits" of PEFT with tests/ref/fixtures/merge/adapter-dora
                      on the merge fixtures' Qwen2 base (q/k/v biases: DoRA leaves the bias
                      unscaled)
And tests/ref/fixtures/merge/adapter-dora (r 4, alpha 8, q/k/v/down_proj, random A, B, magnitude)
with ref-dora.safetensors: what peft's merge_and_unload() makes of the adapted weights
(tests/unit/test_export_merge.c compares swift-export's merge with it).
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


def merge_ref():
    import transformers as tf
    fix = "tests/ref/fixtures/merge"
    base_dir = os.path.join(fix, "base")
    torch.manual_seed(3)
    m = get_peft_model(tf.Qwen2ForCausalLM.from_pretrained(base_dir),
                       LoraConfig(task_type="CAUSAL_LM", r=4, lora_alpha=8, use_dora=True,
                                  target_modules=["q_proj", "k_proj", "v_proj", "down_proj"]))
    with torch.no_grad():
        for n, p in m.named_parameters():
            if ".lora_A." in n or ".lora_B." in n:
                p.normal_(0, 0.1)
            elif "lora_magnitude_vector" in n:
                p.mul_(1 + 0.1 * torch.randn_like(p))
    ad_dir = os.path.join(fix, "adapter-dora")
    m.save_pretrained(ad_dir)
    os.remove(os.path.join(ad_dir, "README.md"))
    pm = PeftModel.from_pretrained(tf.Qwen2ForCausalLM.from_pretrained(base_dir), ad_dir)
    pm.eval()
    ids = torch.tensor([[3, 17, 42, 99, 200, 5, 7, 250]])
    with torch.no_grad():
        logits = pm(ids).logits
    save_file({"ids": ids.float(), "logits": logits[0].contiguous()},
              os.path.join(OUT, "qwen2-ref.safetensors"))
    sd = pm.merge_and_unload().state_dict()
    targets = {k: v.contiguous() for k, v in sd.items()
               if any(("." + t + ".weight") in k for t in ["q_proj", "k_proj", "v_proj", "down_proj"])}
    save_file(targets, os.path.join(fix, "ref-dora.safetensors"), metadata={"format": "pt"})
    print("merge reference:", len(targets), "tensors")


def main():
    os.makedirs(OUT, exist_ok=True)
    merge_ref()
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
