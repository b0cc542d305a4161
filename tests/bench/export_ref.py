#!/usr/bin/env python3
"""Helpers for tests/bench/export.sh (not a test).

  export_ref.py make DIR MB TOKDIR     random bf16 llama model of about MB megabytes
  export_ref.py gguf-py DIR TYPE OUT   the same tensors written by PyPI gguf's GGUFWriter
                                       (f16: numpy astype; q8_0: gguf.quants.quantize)
  export_ref.py rmse DIR OURS.gguf     RMSE of our Q8_0/Q4_K/Q6_K/F16 tensors (dequantized by
                                       gguf-py) vs the bf16 source, next to the RMSE of
                                       gguf-py's Q8_0 (ggml's reference formula) on the same tensors
"""
import json
import os
import shutil
import sys
import time

import numpy as np


def make(d, mb, tokdir):
    import torch
    from safetensors.torch import save_file
    os.makedirs(d, exist_ok=True)
    hidden, ffn, heads, kv, vocab = 1024, 4096, 16, 8, 50257
    emb = vocab * hidden * 2
    per_layer = (2 * hidden * hidden + 2 * hidden * hidden // 2 + 3 * hidden * ffn) * 2
    layers = max(1, int((mb * 1e6 - emb) // per_layer))
    rng = np.random.default_rng(0)

    def bf16(shape, std=0.02):
        x = (rng.standard_normal(shape, dtype=np.float32) * std).view(np.uint32)
        return torch.from_numpy((x >> 16).astype(np.uint16).view(np.int16)).view(torch.bfloat16)

    cfg = dict(architectures=["LlamaForCausalLM"], model_type="llama", vocab_size=vocab,
               hidden_size=hidden, intermediate_size=ffn, num_hidden_layers=layers,
               num_attention_heads=heads, num_key_value_heads=kv, max_position_embeddings=2048,
               rms_norm_eps=1e-5, rope_theta=500000.0, tie_word_embeddings=True,
               torch_dtype="bfloat16")
    json.dump(cfg, open(os.path.join(d, "config.json"), "w"))
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tokdir, f), d)
    # one shard per layer group keeps the generator's memory small
    names = {}
    shard = 0
    t = {"model.embed_tokens.weight": bf16((vocab, hidden)),
         "model.norm.weight": bf16((hidden,), 1.0)}
    for i in range(layers):
        p = "model.layers.%d." % i
        t[p + "input_layernorm.weight"] = bf16((hidden,), 1.0)
        t[p + "post_attention_layernorm.weight"] = bf16((hidden,), 1.0)
        t[p + "self_attn.q_proj.weight"] = bf16((hidden, hidden))
        t[p + "self_attn.k_proj.weight"] = bf16((hidden // 2, hidden))
        t[p + "self_attn.v_proj.weight"] = bf16((hidden // 2, hidden))
        t[p + "self_attn.o_proj.weight"] = bf16((hidden, hidden))
        t[p + "mlp.gate_proj.weight"] = bf16((ffn, hidden))
        t[p + "mlp.up_proj.weight"] = bf16((ffn, hidden))
        t[p + "mlp.down_proj.weight"] = bf16((hidden, ffn))
        if sum(v.numel() * 2 for v in t.values()) > 400e6 or i == layers - 1:
            fn = "model-%05d.safetensors" % shard
            save_file(t, os.path.join(d, fn), metadata={"format": "pt"})
            names.update({k: fn for k in t})
            shard += 1
            t = {}
    total = sum(os.path.getsize(os.path.join(d, f)) for f in set(names.values()))
    json.dump({"metadata": {"total_size": total}, "weight_map": names},
              open(os.path.join(d, "model.safetensors.index.json"), "w"))
    print(total)


def load(d):
    from safetensors.torch import load_file
    idx = json.load(open(os.path.join(d, "model.safetensors.index.json")))
    for fn in sorted(set(idx["weight_map"].values())):
        for k, v in load_file(os.path.join(d, fn)).items():
            yield k, v.float().numpy()


def gguf_py(d, typ, out):
    from gguf import GGMLQuantizationType as Q
    from gguf import GGUFWriter, quants
    t0 = time.time()
    c0 = time.process_time()
    w = GGUFWriter(out, "llama")
    for k, x in load(d):
        if x.ndim == 1:
            w.add_tensor(k, x)
        elif typ == "f16":
            w.add_tensor(k, x.astype(np.float16))
        else:
            w.add_tensor(k, quants.quantize(x, Q.Q8_0), raw_dtype=Q.Q8_0)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print("%.3f %.3f" % (time.time() - t0, time.process_time() - c0))


def rmse(d, ours):
    from gguf import GGMLQuantizationType as Q
    from gguf import GGUFReader, quants
    r = GGUFReader(ours)
    src = dict(load(d))
    num = {}
    for t in r.tensors:
        if not t.name.startswith("blk.0.") or len(t.shape) != 2 or "attn_q" in t.name or \
                "attn_k" in t.name:  # q/k are permuted
            continue
        hf = [k for k in src if k.startswith("model.layers.0.") and
              {"attn_v": "v_proj", "attn_output": "o_proj", "ffn_gate": "gate_proj",
               "ffn_up": "up_proj", "ffn_down": "down_proj"}[t.name.split(".")[2]] in k][0]
        x = src[hf]
        deq = quants.dequantize(np.asarray(t.data), t.tensor_type).reshape(x.shape)
        r8 = quants.dequantize(quants.quantize(x, Q.Q8_0), Q.Q8_0).reshape(x.shape)
        r4 = quants.dequantize(quants.quantize(x, Q.Q4_0), Q.Q4_0).reshape(x.shape)
        a = num.setdefault(t.tensor_type.name, [0.0, 0.0, 0.0, 0])
        a[0] += float(np.sum((deq - x) ** 2))
        a[1] += float(np.sum((r8 - x) ** 2))
        a[2] += float(np.sum((r4 - x) ** 2))
        a[3] += x.size
    for k, (o, r8, r4, n) in num.items():
        print("rmse %-4s ours %.4e | llama.cpp reference formulas (gguf-py): Q8_0 %.4e, Q4_0 %.4e"
              % (k, (o / n) ** 0.5, (r8 / n) ** 0.5, (r4 / n) ** 0.5))


if __name__ == "__main__":
    cmd = sys.argv[1]
    if cmd == "make":
        make(sys.argv[2], float(sys.argv[3]), sys.argv[4])
    elif cmd == "gguf-py":
        gguf_py(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        rmse(sys.argv[2], sys.argv[3])
