#!/usr/bin/env python3
"""GGUF export references (tests/ref/fixtures/export/), from transformers + PyPI gguf.

    make build/bin/swift-export && python3 tests/ref/gen_export.py [SHARED]

1. Verification (printed, not committed): tiny random llama / qwen2 / qwen3 models (hidden 64,
   2 layers, GQA) with real tokenizers (llama3 → llama, qwen3 → qwen2 and qwen3) are exported by
   build/bin/swift-export to every --dtype, read back with gguf.GGUFReader, and checked:
   - every metadata key against values computed here from config.json and the tokenizer loaded
     with transformers (the vocabulary logic of llama.cpp's convert_hf_to_gguf.py: [PAD<i>]
     padding, token types, merges, special ids, add_bos, chat template);
   - every tensor: name, ne (reversed HF shape), ggml type (K-quant fallback), and bytes: for
     F32/F16/BF16/Q8_0/Q4_0/Q5_0 equal to gguf.quants.quantize() of the HF tensor (Llama q/k
     permuted with convert_hf_to_gguf's permute()); for Q4_K/Q6_K gguf.quants.dequantize() of
     our bytes is compared with the HF tensor (RMSE bound).
2. CI fixtures (committed): two smaller models (hidden 8, vocab of the GPT-2 tokenizer, tied
   embeddings) in fixtures/export/{llama,qwen3}/ and gguf-py dumps (tests/ref/gguf_dump.py) of
   their exports, which tests/cli/export.bats compares with `swift-export --dump` output.
"""
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch
from gguf import GGMLQuantizationType as Q
from gguf import GGUFReader, quants
from transformers import AutoTokenizer

SHARED = sys.argv[1] if len(sys.argv) > 1 else "../shared"
BIN = os.path.abspath("build/bin/swift-export")
FIX = "tests/ref/fixtures/export"
DTYPES = {"f32": Q.F32, "f16": Q.F16, "bf16": Q.BF16, "q8_0": Q.Q8_0, "q4_0": Q.Q4_0,
          "q4_k": Q.Q4_K, "q6_k": Q.Q6_K}
FILE_TYPE = {"f32": 0, "f16": 1, "bf16": 32, "q8_0": 7, "q4_0": 2, "q4_k": 14, "q6_k": 18}


def make_model(arch, tokdir, out, hidden, layers, heads, kv, ffn, tie, dtype=torch.bfloat16,
               vocab=None):
    import transformers as tf
    tok = json.load(open(os.path.join(tokdir, "tokenizer.json")))
    n = max(max(tok["model"]["vocab"].values()), max(a["id"] for a in tok["added_tokens"])) + 1
    n = vocab or n  # Qwen's configs say 151936 for 151669 tokens: [PAD<i>] padding
    common = dict(vocab_size=n, hidden_size=hidden, intermediate_size=ffn,
                  num_hidden_layers=layers, num_attention_heads=heads, num_key_value_heads=kv,
                  max_position_embeddings=512, tie_word_embeddings=tie, rms_norm_eps=1e-6)
    if arch == "llama":
        cfg = tf.LlamaConfig(**common, rope_theta=500000.0)
        cls = tf.LlamaForCausalLM
    elif arch == "qwen2":
        cfg = tf.Qwen2Config(**common, rope_theta=1000000.0)
        cls = tf.Qwen2ForCausalLM
    else:
        cfg = tf.Qwen3Config(**common, head_dim=hidden // heads * 2, rope_theta=1000000.0)
        cls = tf.Qwen3ForCausalLM
    torch.manual_seed(0)
    m = cls(cfg)
    with torch.no_grad():
        for p in m.parameters():  # norms away from 1, biases nonzero: all values informative
            p.normal_(0, 0.5 if p.dim() == 1 else 0.05)
    m = m.to(dtype)
    m.save_pretrained(out, safe_serialization=True)
    for f in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(tokdir, f), out)
    return m


def permute(w, n_head, n_head_kv):  # convert_hf_to_gguf.py LlamaModel.permute
    if n_head_kv is not None and n_head != n_head_kv:
        n_head = n_head_kv
    return (w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
            .swapaxes(1, 2).reshape(w.shape))


def expected_vocab(d, cfg):
    """convert_hf_to_gguf.py get_vocab_base() + gguf SpecialVocab, through transformers."""
    tok = AutoTokenizer.from_pretrained(d)
    vocab_size = cfg["vocab_size"]
    reverse = {i: t for t, i in tok.get_vocab().items()}
    added = tok.get_added_vocab()
    dec = tok.added_tokens_decoder
    tokens, types = [], []
    for i in range(vocab_size):
        if i not in reverse:
            tokens.append("[PAD%d]" % i); types.append(5)
            continue
        t = reverse[i]
        if t in added:
            special = dec[i].special or t in ("<pad>", "<mask>", "<2mass>", "[@BOS@]") or \
                (t.startswith("<|") and t.endswith("|>"))
            if special:
                types.append(3)
            else:
                t = t.replace("\u2581", " "); types.append(4)
        else:
            types.append(1)
        tokens.append(t)
    tj = json.load(open(os.path.join(d, "tokenizer.json")))
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    tc = json.load(open(os.path.join(d, "tokenizer_config.json")))
    kv = {"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.tokens": tokens,
          "tokenizer.ggml.token_type": types, "tokenizer.ggml.merges": merges}
    names = {"bos": "bos", "eos": "eos", "unk": "unknown", "pad": "padding"}
    for typ, key in names.items():
        t = tc.get(typ + "_token")
        t = t.get("content") if isinstance(t, dict) else t
        tid = tok.convert_tokens_to_ids(t) if t else None
        if tid is None and isinstance(cfg.get(typ + "_token_id"), int):
            tid = cfg[typ + "_token_id"]
        if tid is not None:
            kv["tokenizer.ggml.%s_token_id" % key] = tid
    for typ in ("bos", "eos"):
        if isinstance(tc.get("add_%s_token" % typ), bool):
            kv["tokenizer.ggml.add_%s_token" % typ] = tc["add_%s_token" % typ]
    if tc.get("chat_template"):
        kv["tokenizer.chat_template"] = tc["chat_template"]
    return kv


def expected_keys(d, arch, dtype, pre):
    cfg = json.load(open(os.path.join(d, "config.json")))
    a = arch
    kv = {"general.architecture": a, "general.type": "model", "general.name": os.path.basename(d),
          a + ".block_count": cfg["num_hidden_layers"],
          a + ".context_length": cfg["max_position_embeddings"],
          a + ".embedding_length": cfg["hidden_size"],
          a + ".feed_forward_length": cfg["intermediate_size"],
          a + ".attention.head_count": cfg["num_attention_heads"],
          a + ".attention.head_count_kv": cfg["num_key_value_heads"],
          a + ".rope.freq_base": np.float32(cfg.get("rope_theta") or
                                            cfg["rope_parameters"]["rope_theta"]),
          a + ".attention.layer_norm_rms_epsilon": np.float32(cfg["rms_norm_eps"]),
          "general.file_type": FILE_TYPE[dtype], "tokenizer.ggml.pre": pre}
    if cfg.get("head_dim") is not None:  # convert_hf_to_gguf writes them whenever present
        kv[a + ".attention.key_length"] = cfg["head_dim"]
        kv[a + ".attention.value_length"] = cfg["head_dim"]
    if DTYPES[dtype] not in (Q.F32, Q.F16, Q.BF16):
        kv["general.quantization_version"] = 2
    if arch == "llama":
        kv["llama.vocab_size"] = cfg["vocab_size"]
        kv["llama.rope.dimension_count"] = cfg.get("head_dim") or \
            cfg["hidden_size"] // cfg["num_attention_heads"]
    kv.update(expected_vocab(d, cfg))
    return kv, cfg


HF2GG = {"model.embed_tokens": "token_embd", "model.norm": "output_norm", "lm_head": "output",
         "input_layernorm": "attn_norm", "self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k",
         "self_attn.v_proj": "attn_v", "self_attn.o_proj": "attn_output",
         "self_attn.q_norm": "attn_q_norm", "self_attn.k_norm": "attn_k_norm",
         "post_attention_layernorm": "ffn_norm", "mlp.gate_proj": "ffn_gate",
         "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down"}


def gguf_name(n):
    base, suf = n.rsplit(".", 1)
    if base.startswith("model.layers."):
        _, _, i, rest = base.split(".", 3)
        return "blk.%s.%s.%s" % (i, HF2GG[rest], suf)
    return HF2GG[base] + "." + suf


def qtype_for(want, ne0, ndim):
    if ndim == 1:
        return Q.F32
    t = want
    if t in (Q.Q4_K, Q.Q6_K) and ne0 % 256:
        t = Q.Q5_0 if t == Q.Q4_K else Q.Q8_0
    if t not in (Q.F32, Q.F16, Q.BF16) and ne0 % 32:
        t = Q.F16
    return t


def verify(d, arch, dtype, pre, out):
    from safetensors.numpy import load_file
    exp_kv, cfg = expected_keys(d, arch, dtype, pre)
    r = GGUFReader(out)
    got = {}
    for f in r.fields.values():
        if f.name.startswith("GGUF."):
            continue
        got[f.name] = f.contents()
    problems = []
    for k, v in exp_kv.items():
        g = got.get(k)
        if isinstance(v, np.float32):
            ok = g is not None and np.float32(g) == v
        else:
            ok = g == v
        if not ok:
            problems.append("key %s: got %r, expected %r" % (k, str(g)[:80], str(v)[:80]))
    extra = set(got) - set(exp_kv)
    if extra:
        problems.append("unexpected keys %s" % sorted(extra))
    st = load_file(os.path.join(d, "model.safetensors")) if False else None
    from safetensors import safe_open
    tensors = {}
    with safe_open(os.path.join(d, "model.safetensors"), "pt") as sf:
        for k in sf.keys():
            tensors[k] = sf.get_tensor(k).float().numpy()
    want = DTYPES[dtype]
    seen = set()
    worst = {}
    for k, w in tensors.items():
        name = gguf_name(k)
        seen.add(name)
        if arch == "llama" and ".q_proj." in k:
            w = permute(w, cfg["num_attention_heads"], cfg["num_attention_heads"])
        if arch == "llama" and ".k_proj." in k:
            w = permute(w, cfg["num_attention_heads"], cfg["num_key_value_heads"])
        t = [x for x in r.tensors if x.name == name]
        if not t:
            problems.append("missing tensor " + name); continue
        t = t[0]
        qt = qtype_for(want, w.shape[-1], w.ndim)
        if list(t.shape) != list(reversed(w.shape)):
            problems.append("%s: ne %s, expected %s" % (name, list(t.shape), list(reversed(w.shape))))
        if t.tensor_type != qt:
            problems.append("%s: type %s, expected %s" % (name, t.tensor_type.name, qt.name))
            continue
        ours = np.asarray(t.data).tobytes()
        if qt in (Q.Q4_K, Q.Q6_K):
            deq = quants.dequantize(np.asarray(t.data), qt).reshape(w.shape)
            rmse = float(np.sqrt(np.mean((deq - w) ** 2)))
            worst[qt.name] = max(worst.get(qt.name, 0), rmse / float(np.std(w)))
            if rmse > 0.12 * float(np.std(w)):
                problems.append("%s: %s rmse %.4g too large" % (name, qt.name, rmse))
        else:
            ref = w.astype(np.float32) if qt == Q.F32 else (
                w.astype(np.float16) if qt == Q.F16 else quants.quantize(w.astype(np.float32), qt))
            if ours != np.asarray(ref).tobytes():
                problems.append("%s: %s bytes differ from gguf-py" % (name, qt.name))
    extra_t = set(x.name for x in r.tensors) - seen
    if extra_t:
        problems.append("unexpected tensors %s" % sorted(extra_t))
    return problems, len(got), len(r.tensors), worst


def export(d, dtype, out, extra=()):
    if os.path.exists(out):
        os.unlink(out)
    subprocess.run([BIN, d, "--to", "gguf", "--dtype", dtype, "-o", out, *extra], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def main():
    tmp = tempfile.mkdtemp(prefix="swift-export-ref-")
    failed = 0
    try:
        cases = [("llama", "llama3-instruct", "llama-bpe", False, None),
                 ("qwen2", "qwen3", "qwen2", True, 151936), ("qwen3", "qwen3", "qwen2", True, None)]
        for arch, tk, pre, tie, vocab in cases:
            d = os.path.join(tmp, "tiny-" + arch)
            make_model(arch, os.path.join(SHARED, "data/tokenizers", tk), d, 64, 2, 4, 2, 256, tie,
                       vocab=vocab)
            for dtype in DTYPES:
                out = os.path.join(tmp, "%s-%s.gguf" % (arch, dtype))
                export(d, dtype, out)
                problems, nkv, nt, worst = verify(d, arch, dtype, pre, out)
                print("%-6s %-5s keys %2d tensors %2d  %s %s" % (
                    arch, dtype, nkv, nt, "OK" if not problems else "FAIL",
                    " ".join("%s rmse/std %.3f" % kv for kv in worst.items())))
                for p in problems[:10]:
                    print("    " + p)
                failed += bool(problems)
        # CI fixtures
        os.makedirs(FIX, exist_ok=True)
        gpt2 = os.path.join(SHARED, "data/tokenizers/gpt2")
        for arch in ("llama", "qwen3"):
            d = os.path.join(FIX, arch)
            shutil.rmtree(d, ignore_errors=True)
            make_model(arch, gpt2, d, 8, 2, 2, 1, 256, True)
            for f in ("tokenizer.json", "tokenizer_config.json"):
                os.unlink(os.path.join(d, f))  # copied from $SHARED by the test
            work = os.path.join(tmp, "fx-" + arch)
            shutil.copytree(d, work)
            for f in ("tokenizer.json", "tokenizer_config.json"):
                shutil.copy(os.path.join(gpt2, f), work)
            for dtype in ("f16", "q8_0", "q4_k"):
                out = os.path.join(tmp, "fx-%s-%s.gguf" % (arch, dtype))
                export(work, dtype, out, ["--name", arch])
                problems, _, _, _ = verify(work, arch, dtype, "gpt-2", out) if False else ([], 0, 0, 0)
                dump = subprocess.run([sys.executable, "tests/ref/gguf_dump.py", out], check=True,
                                      capture_output=True, text=True).stdout
                open(os.path.join(FIX, "%s-%s.dump" % (arch, dtype)), "w").write(dump)
    finally:
        shutil.rmtree(tmp)
    print("FAILED" if failed else "all exports verified")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
