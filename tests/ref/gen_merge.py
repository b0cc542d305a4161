#!/usr/bin/env python3
"""--merge-lora references (tests/ref/fixtures/merge/), from transformers + peft.

    make build/bin/swift-export && python3 tests/ref/gen_merge.py

Writes a tiny random Qwen2 base (fp32, hidden 64, 2 layers, vocab 256), two PEFT adapters with
random A and B (r=8 alpha=16 on q/v/down_proj; and r=4 alpha=8 use_rslora on k/o/up_proj) and
the tensors peft's merge_and_unload() produces for the adapted modules (ref-*.safetensors).
Then it checks build/bin/swift-export's merged directories with transformers: they load, and
give the logits of PeftModel(base, adapter) (fp32: max |diff| printed; bf16 within bf16 error).
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import torch
import transformers as tf
from peft import LoraConfig, PeftModel, get_peft_model
from safetensors.torch import save_file

FIX = "tests/ref/fixtures/merge"
BIN = os.path.abspath("build/bin/swift-export")
ADAPTERS = {"lora": dict(r=8, lora_alpha=16, target_modules=["q_proj", "v_proj", "down_proj"]),
            "rslora": dict(r=4, lora_alpha=8, use_rslora=True,
                           target_modules=["k_proj", "o_proj", "up_proj"])}


def main():
    shutil.rmtree(FIX, ignore_errors=True)
    os.makedirs(FIX)
    cfg = tf.Qwen2Config(vocab_size=256, hidden_size=64, intermediate_size=128,
                         num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                         max_position_embeddings=128, tie_word_embeddings=True,
                         bos_token_id=1, eos_token_id=2)
    torch.manual_seed(0)
    base = tf.Qwen2ForCausalLM(cfg)
    with torch.no_grad():
        for p in base.parameters():
            p.normal_(0, 0.5 if p.dim() == 1 else 0.05)
    base_dir = os.path.join(FIX, "base")
    base.save_pretrained(base_dir)
    json.dump({"bos_token_id": 1, "eos_token_id": 2}, open(os.path.join(base_dir, "tokenizer_config.json"), "w"))
    ids = torch.tensor([[3, 17, 42, 99, 200, 5, 7, 250]])
    tmp = tempfile.mkdtemp(prefix="swift-merge-ref-")
    ok = True
    try:
        for name, kw in ADAPTERS.items():
            torch.manual_seed(1 if name == "lora" else 2)
            m = get_peft_model(tf.Qwen2ForCausalLM.from_pretrained(base_dir),
                               LoraConfig(task_type="CAUSAL_LM", **kw))
            with torch.no_grad():
                for n, p in m.named_parameters():
                    if "lora_" in n:
                        p.normal_(0, 0.1)
            ad_dir = os.path.join(FIX, "adapter-" + name)
            m.save_pretrained(ad_dir)
            os.unlink(os.path.join(ad_dir, "README.md"))
            # reference: peft on the saved files
            pm = PeftModel.from_pretrained(tf.Qwen2ForCausalLM.from_pretrained(base_dir), ad_dir)
            pm.eval()
            with torch.no_grad():
                ref_logits = pm(ids).logits
            merged = pm.merge_and_unload()
            sd = merged.state_dict()
            targets = {k: v.contiguous() for k, v in sd.items()
                       if any(("." + t + ".weight") in k for t in kw["target_modules"])}
            save_file(targets, os.path.join(FIX, "ref-%s.safetensors" % name),
                      metadata={"format": "pt"})
            for dtype, tol in (("fp32", 1e-4), ("bf16", 0.1)):
                out = os.path.join(tmp, "%s-%s" % (name, dtype))
                subprocess.run([BIN, base_dir, "--merge-lora", ad_dir, "--dtype", dtype,
                                "--max-shard-size", "100K", "-o", out], check=True,
                               stdout=subprocess.DEVNULL)
                ours = tf.AutoModelForCausalLM.from_pretrained(out, dtype=torch.float32)
                with torch.no_grad():
                    logits = ours(ids).logits
                d = (logits - ref_logits).abs().max().item()
                shards = sorted(f for f in os.listdir(out) if f.endswith(".safetensors"))
                good = d < tol
                ok &= good
                print("%-6s %-4s transformers loads %d shards; max |logits - peft| = %.3g %s" % (
                    name, dtype, len(shards), d, "OK" if good else "FAIL"))
    finally:
        shutil.rmtree(tmp)
    print("all merges verified" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
