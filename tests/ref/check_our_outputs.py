#!/usr/bin/env python3
"""Do peft and transformers load what swift-train writes, and compute the same logits?

Inputs (committed, made by swift-train from the fixture models, see tests/ref/README.md):
  tests/fixtures/ours/lora-llama/      a LoRA checkpoint (adapter_config.json,
                                        adapter_model.safetensors) of tests/fixtures/model/llama
  tests/fixtures/ours/full-qwen3/      a full fine-tuning checkpoint (config.json,
                                        model.safetensors) of tests/fixtures/model/qwen3
This script loads them with peft.PeftModel.from_pretrained / AutoModelForCausalLM and writes the
logits on the fixture batch (row 0 of tests/fixtures/model/*/ref.safetensors input_ids) to
  tests/fixtures/ours/*/ref_logits.safetensors
test_model.c compares them with the logits our code computes from the same files.
Run from the repository root after regenerating the checkpoints:
    python3 tests/ref/check_our_outputs.py
"""
import torch
from safetensors.torch import load_file, save_file
from transformers import AutoModelForCausalLM
from peft import PeftModel


def ids_of(arch):
    return load_file(f"tests/fixtures/model/{arch}/ref.safetensors")["input_ids"][:1].long()


def main():
    base = AutoModelForCausalLM.from_pretrained("tests/fixtures/model/llama",
                                                attn_implementation="eager")
    pm = PeftModel.from_pretrained(base, "tests/fixtures/ours/lora-llama")
    # every adapter tensor must have been loaded (peft warns and skips unknown names)
    sd = pm.state_dict()
    ours = load_file("tests/fixtures/ours/lora-llama/adapter_model.safetensors")
    for k, v in ours.items():
        kk = k.replace(".lora_A.weight", ".lora_A.default.weight").replace(
            ".lora_B.weight", ".lora_B.default.weight")
        assert torch.equal(sd[kk], v), k
    with torch.no_grad():
        lg = pm(input_ids=ids_of("llama")).logits[0].contiguous()
    save_file({"logits": lg}, "tests/fixtures/ours/lora-llama/ref_logits.safetensors",
              metadata={"format": "pt"})

    full = AutoModelForCausalLM.from_pretrained("tests/fixtures/ours/full-qwen3",
                                                attn_implementation="eager")
    with torch.no_grad():
        lg = full(input_ids=ids_of("qwen3")).logits[0].contiguous()
    save_file({"logits": lg}, "tests/fixtures/ours/full-qwen3/ref_logits.safetensors",
              metadata={"format": "pt"})
    print("peft and transformers loaded both; logits written")


if __name__ == "__main__":
    main()
