#!/usr/bin/env python3
"""Models saved in bitsandbytes' layouts by transformers, with reference logits (tests/ref/fixtures/bnb/).

    /work/venv-trl/bin/python tests/ref/gen_bnb_models.py

tests/fixtures/eval/llama (float32, 2 layers, hidden 64, intermediate 128, vocabulary 260, with a
byte-level tokenizer; every linear's rows a multiple of the 64-block: bitsandbytes 0.50.2's native
CPU dequantize_4bit takes the wrong block's absmax on narrower rows, so transformers' own forward
would be wrong there) loaded by transformers 5.24 with a
BitsAndBytesConfig on the CPU and written back with save_pretrained:
nf4-dq/   load_in_4bit, bnb_4bit_quant_type nf4, bnb_4bit_use_double_quant true
fp4/      load_in_4bit, bnb_4bit_quant_type fp4, no double quantization
int8/     load_in_8bit (Int8Params: weight int8 + SCB)
Each directory holds config.json (with quantization_config), the source's tokenizer files,
model.safetensors (per quantized
linear: weight (uint8 packed codes), weight.absmax, weight.quant_map, [weight.nested_absmax,
weight.nested_quant_map,] weight.quant_state.bitsandbytes__nf4|fp4 (JSON bytes); 8-bit: weight
int8 and SCB) and ref_logits.safetensors: "tokens" (int32, T) and "logits" (float32, T x V), the
quantized model's forward on those ids in transformers (bitsandbytes' CPU kernels), compute dtype
float32, and "logits_deq": the float32 model with each quantized linear replaced by its
dequantized weight (bitsandbytes' reference _dequantize_4bit_compute, or int8_vectorwise_dequant).
For 4 bits the two agree (bitsandbytes dequantizes, then matmuls in float32); for 8 bits
transformers runs LLM.int8 (activations cast to float16 and quantized to int8 too, outlier columns
above llm_int8_threshold 6.0 in float16), which swift's weight-only int8 does not, so only
logits_deq is ours to float tolerance. make test reads these files only; it never runs Python.
"""
import os
import shutil

import numpy as np
import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, BitsAndBytesConfig
import bitsandbytes.functional as F
from bitsandbytes.backends.default.ops import _dequantize_4bit_compute

src = "tests/fixtures/eval/llama"
out = "tests/ref/fixtures/bnb"
tokens = torch.tensor([[256, 72, 101, 108, 108, 111, 32, 119, 111, 114, 108, 100, 33, 10, 200, 3]],
                      dtype=torch.long)

variants = {
    "nf4-dq": BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="nf4",
                                 bnb_4bit_use_double_quant=True,
                                 bnb_4bit_compute_dtype=torch.float32),
    "fp4": BitsAndBytesConfig(load_in_4bit=True, bnb_4bit_quant_type="fp4",
                              bnb_4bit_use_double_quant=False,
                              bnb_4bit_compute_dtype=torch.float32),
    "int8": BitsAndBytesConfig(load_in_8bit=True),
}
for name, cfg in variants.items():
    d = os.path.join(out, name)
    os.makedirs(d, exist_ok=True)
    m = AutoModelForCausalLM.from_pretrained(src, quantization_config=cfg, device_map="cpu",
                                             dtype=torch.float32)
    m.eval()
    m.save_pretrained(d)
    for f in os.listdir(d):
        if f not in ("config.json", "model.safetensors", "generation_config.json"):
            os.remove(os.path.join(d, f))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(src, f), d)
    # the forward of the model as saved: load it back
    m2 = AutoModelForCausalLM.from_pretrained(d, device_map="cpu", dtype=torch.float32)
    for mod in list(m.modules()) + list(m2.modules()):
        # bitsandbytes' AVX512-BF16 CPU path repacks the codes and rounds the absmax to bfloat16
        # before its first forward; the layout's own dequantization (float32 absmax) is kept
        if hasattr(mod, "support_avx512bf16_for_cpu"):
            mod.support_avx512bf16_for_cpu = False
    with torch.no_grad():
        logits = m2(tokens).logits[0].float().contiguous()
        l1 = m(tokens).logits[0].float()
    assert torch.equal(logits, l1), name
    ref = AutoModelForCausalLM.from_pretrained(src, device_map="cpu", dtype=torch.float32)
    qmods = dict(m2.named_modules())
    with torch.no_grad():
        for nm, mod in ref.named_modules():
            if not isinstance(mod, torch.nn.Linear) or nm == "lm_head":
                continue
            w = qmods[nm].weight
            if name == "int8":
                scb = w.SCB if w.SCB is not None else qmods[nm].state.SCB
                deq = F.int8_vectorwise_dequant(w.data, scb)
            else:
                qs = w.quant_state
                am = qs.absmax
                if qs.nested:
                    am = F.dequantize_blockwise(qs.absmax, qs.state2) + qs.offset
                deq = _dequantize_4bit_compute(w.data.reshape(-1), am, qs.code, qs.blocksize,
                                               qs.shape, torch.float32)
            mod.weight.copy_(deq.reshape(mod.weight.shape))
        logits_deq = ref(tokens).logits[0].float().contiguous()
    err = (logits - logits_deq).abs().max().item()
    print(name, "bitsandbytes' forward vs the dequantized float model: max %.3g" % err)
    assert name == "int8" or err < 1e-5
    save_file({"tokens": tokens[0].to(torch.int32).contiguous(), "logits": logits,
               "logits_deq": logits_deq},
              os.path.join(d, "ref_logits.safetensors"))
    print(name, type(m.model.layers[0].mlp.up_proj).__name__, "max |logit| %.3g" % logits.abs().max())
