#!/usr/bin/env python3
"""--method gptq references (tests/ref/fixtures/gptq/method/), computed with auto-gptq's own
GPTQ code (auto_gptq/quantization/gptq.py and quantizer.py of auto-gptq 0.7.1 from PyPI, loaded
from the installed package's files as they are; the package's CUDA extensions are not imported):

  layer.safetensors   one linear layer: W (96,256), the Hessian H that GPTQ.add_batch built from
                      correlated inputs (one input column never fires), and fasterquant's codes
                      and scales for int4 group 64 (groups starting inside a 128-column block)
                      and int8 group 128.
  qwen3/              a tiny random Qwen3 (QK-norm), fp32, made with transformers.
  calib.safetensors   calibration token ids (16 rows of 48).
  ref-<model>.safetensors  auto-gptq's layer-by-layer, true-sequential quantization of the
                      whole model on those rows ({q,k,v}, {o}, {gate,up}, {down}; each group's
                      inputs captured by forward hooks with the layer's earlier groups already
                      quantized; the quantized layer's outputs feed the next layer), int4 group
                      32, damp 0.01, blocksize 128: per linear `<name>.codes` (uint8, out x in)
                      and `<name>.scales` (f32, groups x out). Models: qwen2 (the merge
                      fixture's base, with q/k/v biases) and qwen3.

  dequant-int4.safetensors, dequant-int8.safetensors  auto-gptq's QuantLinear (qlinear_cuda_old,
                      its pure-torch CPU path: weight = scales * (q - ((qzeros >> shift) + 1 &
                      mask)), fp16) applied to an identity matrix, on the round-to-nearest
                      checkpoints of tests/ref/fixtures/gptq/ref-int{4,8}.safetensors (the
                      merge base, group 32; byte-equal to `swift-export --quant`): layer 0's
                      dequantized weights, what a GPTQ loader computes. Our loader
                      (swift_model_load of a GPTQ directory) must give the same.

tests/unit/test_gptq.c compares lib/gptq and `swift-export --method gptq` with these.

    pip install --no-deps auto-gptq==0.7.1   # only its Python files are used
    python3 tests/ref/gen_gptq_method.py
"""
import importlib
import importlib.util
import os
import sys
import types

import torch
from safetensors.torch import save_file
from transformers import AutoModelForCausalLM, Qwen3Config, Qwen3ForCausalLM

FIX = "tests/ref/fixtures/gptq/method"
SUBSETS = [["self_attn.q_proj", "self_attn.k_proj", "self_attn.v_proj"], ["self_attn.o_proj"],
           ["mlp.gate_proj", "mlp.up_proj"], ["mlp.down_proj"]]


def load_auto_gptq():
    spec = importlib.util.find_spec("auto_gptq")
    if spec is None:
        sys.exit("pip install --no-deps auto-gptq==0.7.1")
    base = os.path.join(os.path.dirname(spec.origin), "quantization")
    pkg = types.ModuleType("agq")
    pkg.__path__ = [base]
    sys.modules["agq"] = pkg
    torch.cuda.synchronize = lambda *a, **k: None  # fasterquant ends with it; CPU here
    qpkg = types.ModuleType("agq_nn")
    qpkg.__path__ = [os.path.join(os.path.dirname(spec.origin), "nn_modules", "qlinear")]
    sys.modules["agq_nn"] = qpkg
    return (importlib.import_module("agq.gptq").GPTQ,
            importlib.import_module("agq_nn.qlinear_cuda_old").QuantLinear)


GPTQ, QuantLinear = load_auto_gptq()


def dequant_case():
    from safetensors.torch import load_file
    for bits in (4, 8):
        ck = load_file(f"tests/ref/fixtures/gptq/ref-int{bits}.safetensors")
        out = {}
        for k in sorted(ck):
            if not (k.startswith("model.layers.0.") and k.endswith(".qweight")):
                continue
            base = k[:-len("qweight")]
            outf = ck[k].shape[1]
            inf = ck[k].shape[0] * 32 // bits
            ql = QuantLinear(bits, 32, inf, outf, bias=False)
            ql.qweight, ql.qzeros = ck[base + "qweight"], ck[base + "qzeros"]
            ql.scales, ql.g_idx = ck[base + "scales"], ck[base + "g_idx"]
            with torch.no_grad():
                w = ql(torch.eye(inf, dtype=torch.float16))  # (in, out) = W^T
            out[base + "weight"] = w.t().float().contiguous()
        save_file(out, f"{FIX}/dequant-int{bits}.safetensors")


def codes_of(Q, scale, zero, group):
    """q from fasterquant's dequantized Q and its per-group scale/zero ([out, groups])."""
    g = torch.arange(Q.shape[1]) // group
    return torch.round(Q / scale[:, g] + zero[:, g]).to(torch.uint8)


def layer_case():
    torch.manual_seed(0)
    out, inf, n = 96, 256, 1024
    mix = torch.randn(inf, inf) / 16 + torch.eye(inf)
    X = torch.randn(4, n // 4, inf) @ mix
    X[:, :, 7] = 0  # a dead input
    W = torch.randn(out, inf) * 0.05
    W[torch.rand(out, inf) < 0.01] *= 8  # outliers
    tensors = {"W": W.clone().contiguous()}
    for bits, group in ((4, 64), (8, 128)):
        lin = torch.nn.Linear(inf, out, bias=False)
        lin.weight.data = W.clone()
        g = GPTQ(lin)
        g.quantizer.configure(bits, perchannel=True, sym=True, mse=False)
        for b in range(X.shape[0]):
            g.add_batch(X[b:b + 1], None)
        if "H" not in tensors:
            tensors["H"] = g.H.clone().contiguous()
        scale, zero, _ = g.fasterquant(blocksize=128, percdamp=0.01, group_size=group)
        tensors[f"codes{bits}"] = codes_of(lin.weight.data, scale, zero, group).contiguous()
        tensors[f"scales{bits}"] = scale.t().contiguous().float()
    save_file(tensors, f"{FIX}/layer.safetensors")


def causal_mask(T):
    m = torch.full((T, T), float("-inf")).triu(1)
    return m[None, None]


def model_case(model_dir, name, ids, group):
    model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32,
                                                 attn_implementation="eager")
    model.eval()
    S, T = ids.shape
    pos = torch.arange(T)[None]
    out = {}
    with torch.no_grad():
        hs = [model.model.embed_tokens(ids[s:s + 1]) for s in range(S)]
        pe = model.model.rotary_emb(hs[0], pos)
        mask = causal_mask(T)

        def run(layer, h):
            r = layer(h, attention_mask=mask, position_ids=pos, position_embeddings=pe)
            return r[0] if isinstance(r, tuple) else r

        for li, layer in enumerate(model.model.layers):
            for subset in SUBSETS:
                mods = {n: layer.get_submodule(n) for n in subset}
                gq = {}
                hooks = []
                for n, mod in mods.items():
                    gq[n] = GPTQ(mod)
                    gq[n].quantizer.configure(4, perchannel=True, sym=True, mse=False)
                    hooks.append(mod.register_forward_hook(
                        lambda m, i, o, n=n: gq[n].add_batch(i[0].data, o.data)))
                for h in hs:
                    run(layer, h)
                for hk in hooks:
                    hk.remove()
                for n in subset:
                    scale, zero, _ = gq[n].fasterquant(blocksize=128, percdamp=0.01,
                                                       group_size=group)
                    key = f"model.layers.{li}.{n}.weight"
                    out[key + ".codes"] = codes_of(mods[n].weight.data, scale, zero,
                                                   group).contiguous()
                    out[key + ".scales"] = scale.t().contiguous().float()
            hs = [run(layer, h) for h in hs]
    save_file(out, f"{FIX}/ref-{name}.safetensors")
    return out


def make_qwen3(path):
    torch.manual_seed(3)
    cfg = Qwen3Config(vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, head_dim=16,
                      max_position_embeddings=128, tie_word_embeddings=False, rms_norm_eps=1e-6,
                      bos_token_id=1, eos_token_id=2)
    m = Qwen3ForCausalLM(cfg)
    # QK-norm and RMSNorm weights away from 1, so they matter
    for n, p in m.named_parameters():
        if "norm" in n:
            p.data = 1 + 0.2 * torch.randn_like(p)
    m.save_pretrained(path, safe_serialization=True)


def main():
    os.makedirs(FIX, exist_ok=True)
    layer_case()
    dequant_case()
    if not os.path.exists(f"{FIX}/qwen3/config.json"):
        make_qwen3(f"{FIX}/qwen3")
    g = torch.Generator().manual_seed(7)
    ids = torch.randint(3, 256, (16, 48), generator=g)
    save_file({"ids": ids.to(torch.int32).contiguous()}, f"{FIX}/calib.safetensors")
    models = {"qwen2": "tests/ref/fixtures/merge/base", "qwen3": f"{FIX}/qwen3"}
    for name, d in models.items():
        model_case(d, name, ids, 32)


if __name__ == "__main__":
    main()
