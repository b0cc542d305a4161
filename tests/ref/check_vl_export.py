#!/usr/bin/env python3
"""Check swift-export's merged vision-language directory against transformers + peft.

    python3 tests/ref/check_vl_export.py BASE_DIR ADAPTER_DIR MERGED_DIR
    python3 tests/ref/check_vl_export.py --gguf FILE.gguf MODEL_DIR [--llama-cpp OUT.npy]
    python3 tests/ref/check_vl_export.py --compare-hf MODEL_DIR OUT.npy
    python3 tests/ref/check_vl_export.py --mmproj MMPROJ.gguf MODEL_DIR

BASE_DIR: a Qwen2-VL or Qwen2.5-VL directory (tests/cli/vl_fixture.bash's vl_model makes one from
the committed fixtures), ADAPTER_DIR: swift-train's LoRA checkpoint on it, MERGED_DIR:
`swift-export BASE_DIR --merge-lora ADAPTER_DIR -o MERGED_DIR`. Loads the base with its
ForConditionalGeneration class plus the adapter with peft's PeftModel.from_pretrained (checking
that every LoRA tensor of the file landed in the model), and the merged directory alone
(checking no missing or unexpected keys), and compares their logits on an image prompt made by
the Qwen2-VL processor from LLaMA-Factory's demo image ($SHARED/data/datasets/llama-factory-demo),
as max|merged - peft| / max|peft|; also how far the adapter moves them from the base.

--gguf: FILE.gguf is swift-export --to gguf of MODEL_DIR (a VL directory): read with gguf-py's
GGUFReader, checks the qwen2vl keys (rope.dimension_sections), that every language-model tensor
is there with its shape and no vision tensor is. With --llama-cpp, also loads it with
llama-cpp-python, prints its greedy continuation of a text-only prompt (PROMPT_IDS, token ids)
and saves the prompt's logits to OUT.npy; --compare-hf then runs MODEL_DIR's
ForConditionalGeneration on the same prompt (text only: M-RoPE is then plain RoPE) and compares
logits and greedy tokens.

--mmproj: MMPROJ.gguf is swift-export --mmproj of MODEL_DIR: every tensor, read with gguf-py,
against what llama.cpp's converter (Qwen2VLVisionModel, gguf-py's tensor_mapping names) makes of
the safetensors: the patch embedding's two temporal taps, qkv split in three, the other names
mapped; values to F16 rounding; and the clip keys.

The first form needs torch, torchvision, transformers 5, peft (e.g. /work/venv-vl/bin/python);
--gguf needs the gguf package (pip install gguf) and, for --llama-cpp, llama-cpp-python.
`make test` never runs it (docs/export.md says what it reported).
"""
import json
import os
import sys

if sys.argv[1] not in ("--gguf", "--mmproj"):  # these run without torch
    import torch
    from PIL import Image
    from safetensors.torch import load_file
    from transformers import (AutoTokenizer, Qwen2_5_VLForConditionalGeneration,
                              Qwen2VLForConditionalGeneration, Qwen2VLImageProcessor)
    from peft import PeftModel


def model_class(d):
    mt = json.load(open(os.path.join(d, "config.json")))["model_type"]
    return Qwen2VLForConditionalGeneration if mt == "qwen2_vl" else Qwen2_5_VLForConditionalGeneration


def inputs(base):
    shared = os.environ.get("SHARED", "/work/shared")
    img = Image.open(os.path.join(shared, "data/datasets/llama-factory-demo/mllm_demo_data/1.jpg"))
    proc = Qwen2VLImageProcessor(min_pixels=3136, max_pixels=12544)
    px = proc(images=[img.convert("RGB")], return_tensors="pt")
    grid = px["image_grid_thw"]
    npad = int(grid.prod()) // 4
    tok = AutoTokenizer.from_pretrained(base)
    cfg = json.load(open(os.path.join(base, "config.json")))
    pre = tok("<|im_start|>user\n", add_special_tokens=False)["input_ids"]
    post = tok("Who are they?<|im_end|>\n<|im_start|>assistant\nThey are",
               add_special_tokens=False)["input_ids"]
    ids = pre + [cfg["vision_start_token_id"]] + [cfg["image_token_id"]] * npad + \
        [cfg["vision_end_token_id"]] + post
    ids_t = torch.tensor([ids])
    return dict(input_ids=ids_t, attention_mask=torch.ones(1, len(ids), dtype=torch.long),
                mm_token_type_ids=(ids_t == cfg["image_token_id"]).long(),
                pixel_values=px["pixel_values"], image_grid_thw=grid)


def logits(model, x):
    with torch.no_grad():
        return model(**x).logits.float()


def check_gguf(path, merged):
    from gguf import GGUFReader
    r = GGUFReader(path)
    f = {k: v for k, v in r.fields.items()}

    def val(k):
        v = f[k]
        if len(v.data) == 1:
            x = v.parts[v.data[0]]
            return bytes(x).decode() if v.types[0].name == "STRING" else x.tolist()[0]
        return [v.parts[i].tolist()[0] for i in v.data]

    cfg = json.load(open(os.path.join(merged, "config.json")))
    tc = cfg.get("text_config", cfg)
    sec = (tc.get("rope_parameters") or tc.get("rope_scaling") or cfg.get("rope_scaling"))["mrope_section"]
    assert val("general.architecture") == "qwen2vl", val("general.architecture")
    assert val("qwen2vl.rope.dimension_sections") == sec + [0] * (4 - len(sec)), \
        val("qwen2vl.rope.dimension_sections")
    assert f["qwen2vl.rope.dimension_sections"].types[-1].name == "INT32"
    for k, want in [("block_count", tc["num_hidden_layers"]), ("embedding_length", tc["hidden_size"]),
                    ("feed_forward_length", tc["intermediate_size"]),
                    ("attention.head_count", tc["num_attention_heads"]),
                    ("attention.head_count_kv", tc["num_key_value_heads"])]:
        assert val("qwen2vl." + k) == want, (k, val("qwen2vl." + k), want)
    names = {t.name: [int(x) for x in t.shape] for t in r.tensors}
    assert not any(n.startswith(("v.", "mm.")) for n in names), "vision tensors in the text GGUF"
    H, L = tc["hidden_size"], tc["num_hidden_layers"]
    for l in range(L):
        for n in ("attn_q.weight", "attn_q.bias", "attn_k.bias", "attn_v.bias", "attn_output.weight",
                  "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight", "attn_norm.weight",
                  "ffn_norm.weight"):
            assert f"blk.{l}.{n}" in names, n
    assert names["token_embd.weight"] == [H, tc["vocab_size"]]
    print(f"gguf: {path}: arch qwen2vl, dimension_sections {val('qwen2vl.rope.dimension_sections')}, "
          f"{len(names)} tensors, no vision tensors: ok")


def read_safetensors(d):
    """name -> float32 numpy array, standard library + numpy only"""
    import glob
    import struct
    import numpy as np
    out = {}
    for p in sorted(glob.glob(os.path.join(d, "*.safetensors"))):
        raw = open(p, "rb").read()
        n = struct.unpack("<Q", raw[:8])[0]
        hdr = json.loads(raw[8:8 + n])
        for k, t in hdr.items():
            if k == "__metadata__":
                continue
            b = raw[8 + n + t["data_offsets"][0]:8 + n + t["data_offsets"][1]]
            if t["dtype"] == "BF16":
                a = (np.frombuffer(b, np.uint16).astype(np.uint32) << 16).view(np.float32)
            else:
                a = np.frombuffer(b, {"F32": np.float32, "F16": np.float16}[t["dtype"]])
            out[k] = a.astype(np.float32).reshape(t["shape"])
    return out


def check_mmproj(path, model_dir):
    import numpy as np
    from gguf import GGUFReader
    from gguf.constants import MODEL_ARCH, MODEL_TENSOR, TENSOR_NAMES
    from gguf.tensor_mapping import get_tensor_name_map
    cfg = json.load(open(os.path.join(model_dir, "config.json")))
    vc = cfg["vision_config"]
    tmap = get_tensor_name_map(MODEL_ARCH.MMPROJ, max(vc["depth"], 8))  # mm.2 is block 2
    want = {}
    for k, a in read_safetensors(model_dir).items():
        if k.startswith("model.visual."):
            k = k[len("model."):]
        if not k.startswith("visual."):
            continue
        if k == "visual.patch_embed.proj.weight":  # the converter: split Conv3D into Conv2Ds
            a = a.reshape(a.shape[0], 3, 2, vc.get("patch_size", 14), vc.get("patch_size", 14))
            base = TENSOR_NAMES[MODEL_TENSOR.V_ENC_EMBD_PATCH]
            want[base + ".weight"] = a[:, :, 0]
            want[base + ".weight.1"] = a[:, :, 1]
            continue
        stem, sfx = k.rsplit(".", 1)
        if ".attn.qkv" in stem:  # the converter: split QKV
            c = a.shape[0] // 3
            for i, x in enumerate("qkv"):
                want[tmap.get_name(stem.replace(".qkv", "." + x)) + "." + sfx] = a[i * c:(i + 1) * c]
            continue
        want[tmap.get_name(stem) + "." + sfx] = a
    r = GGUFReader(path)
    got = {t.name: t for t in r.tensors}
    assert set(got) == set(want), (sorted(set(got) ^ set(want)))
    worst = 0.0
    for n, t in got.items():
        g = np.array(t.data, dtype=np.float32).reshape(want[n].shape)
        worst = max(worst, float(np.abs(g - want[n]).max() / (np.abs(want[n]).max() + 1e-30)))
    f = r.fields

    def val(k):
        v = f[k]
        if v.types[0].name == "ARRAY":
            return [float(v.parts[i][0]) for i in v.data]
        x = v.parts[v.data[0]]
        return bytes(x).decode() if v.types[0].name == "STRING" else x.tolist()[0]

    v25 = cfg["model_type"] == "qwen2_5_vl"
    assert val("general.architecture") == "clip"
    assert val("clip.projector_type") == ("qwen2.5vl_merger" if v25 else "qwen2vl_merger")
    assert val("clip.vision.block_count") == vc["depth"]
    assert val("clip.vision.attention.head_count") == vc["num_heads"]
    assert val("clip.vision.embedding_length") == (vc["hidden_size"] if v25 else vc["embed_dim"])
    tc = cfg.get("text_config", cfg)
    assert val("clip.vision.projection_dim") == tc["hidden_size"]
    if v25:
        assert val("clip.vision.n_wa_pattern") == vc["fullatt_block_indexes"][0] + 1
    print(f"mmproj: {path}: {len(got)} tensors named as gguf-py's tensor_mapping maps them, "
          f"values within {worst:.3g} relative (F16); clip keys ok")


def prompt_ids():
    return [int(x) for x in os.environ.get("PROMPT_IDS", "5,6,7,8,9").split(",")]


def llama_cpp_run(path, npy, n=8):
    """llama-cpp-python: the prompt's logits (saved to npy) and the greedy continuation"""
    import numpy as np
    from llama_cpp import Llama
    llm = Llama(model_path=path, n_ctx=256, verbose=False, logits_all=True)
    ids = prompt_ids()
    llm.eval(ids)
    np.save(npy, np.array(llm.scores[:len(ids)], dtype=np.float32))
    llm.reset()
    out = []
    for tok in llm.generate(ids, temp=0.0, top_k=1, top_p=1.0, repeat_penalty=1.0):
        out.append(int(tok))
        if len(out) == n:
            break
    print("llama.cpp greedy:", out)


def compare_hf(model_dir, npy, n=8):
    import numpy as np
    ids = prompt_ids()
    cls = model_class(model_dir)
    m = cls.from_pretrained(model_dir, dtype=torch.float32, attn_implementation="eager").eval()
    x = torch.tensor([ids])
    with torch.no_grad():
        lg = m(input_ids=x).logits[0].float().numpy()
        gen = m.generate(input_ids=x, max_new_tokens=n, do_sample=False)[0, len(ids):].tolist()
    ref = np.load(npy)
    d = np.abs(ref - lg).max() / np.abs(lg).max()
    print(f"transformers greedy: {gen}")
    print(f"prompt logits: max|llama.cpp - transformers| / max|transformers| = {d:.3g}")


def count_loaded(pm, sd):
    """how many LoRA tensors of the file hold their values in the peft model"""
    state = pm.state_dict()
    loaded = 0
    for k, v in sd.items():
        mod, ab = k.rsplit(".lora_", 1)
        mod = mod.replace(".language_model", "")
        hits = [s for s in state if f".lora_{ab[0]}.default.weight" in s and
                s.replace(".language_model", "").startswith(mod + ".")]
        loaded += any(torch.equal(state[s].float(), v.float()) for s in hits)
    return loaded


def with_peft(cls, base, adapter):
    """base + adapter through PeftModel; when the adapter's keys name the language model in the
    hub's layout (base_model.model.model.layers.*), which transformers 5's module tree
    (model.language_model.layers.*) does not have, say so and load a renamed copy"""
    m0 = cls.from_pretrained(base, dtype=torch.float32, attn_implementation="eager").eval()
    sd = load_file(os.path.join(adapter, "adapter_model.safetensors"))
    pm = PeftModel.from_pretrained(m0, adapter).eval()
    loaded = count_loaded(pm, sd)
    print(f"peft: {loaded}/{len(sd)} adapter tensors loaded into the model as saved")
    if loaded == len(sd):
        return pm, loaded, len(sd)
    import shutil
    import tempfile
    from safetensors.torch import save_file
    tmp = tempfile.mkdtemp()
    shutil.copy(os.path.join(adapter, "adapter_config.json"), tmp)
    pre = "base_model.model.model."
    ren = {(pre + "language_model." + k[len(pre):] if k.startswith(pre) and
            not k.startswith(pre + "language_model.") else k): v for k, v in sd.items()}
    save_file(ren, os.path.join(tmp, "adapter_model.safetensors"), metadata={"format": "pt"})
    m0 = cls.from_pretrained(base, dtype=torch.float32, attn_implementation="eager").eval()
    pm = PeftModel.from_pretrained(m0, tmp).eval()
    loaded = count_loaded(pm, ren)
    print(f"peft: {loaded}/{len(sd)} loaded with the keys renamed to model.language_model.layers.*")
    shutil.rmtree(tmp)
    return pm, loaded, len(sd)


def main():
    base, adapter, merged = sys.argv[1:4]
    torch.manual_seed(0)
    cls = model_class(base)
    x = inputs(base)
    m0 = cls.from_pretrained(base, dtype=torch.float32, attn_implementation="eager").eval()
    l0 = logits(m0, x)
    pm, loaded, total = with_peft(cls, base, adapter)
    lp = logits(pm, x)
    mm, info = cls.from_pretrained(merged, dtype=torch.float32, attn_implementation="eager",
                                   output_loading_info=True)
    mm.eval()
    bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys")}
    print(f"merged dir: loading info {bad or 'clean (no missing or unexpected keys)'}")
    lm = logits(mm, x)
    scale = lp.abs().max().item()
    d = (lm - lp).abs().max().item() / scale
    moved = (l0 - lp).abs().max().item() / scale
    print(f"logits on an image prompt ({x['input_ids'].shape[1]} tokens, grid "
          f"{x['image_grid_thw'].tolist()}): max|merged - base+peft| / max|base+peft| = {d:.3g} "
          f"(the adapter moves them {moved:.3g})")
    ok = loaded == total and not bad and d < 1e-5 and moved > 1e-3
    print("ok" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    if sys.argv[1] == "--gguf":
        check_gguf(sys.argv[2], sys.argv[3])
        if "--llama-cpp" in sys.argv:
            llama_cpp_run(sys.argv[2], sys.argv[sys.argv.index("--llama-cpp") + 1])
        sys.exit(0)
    if sys.argv[1] == "--mmproj":
        check_mmproj(sys.argv[2], sys.argv[3])
        sys.exit(0)
    if sys.argv[1] == "--compare-hf":
        compare_hf(sys.argv[2], sys.argv[3])
        sys.exit(0)
    sys.exit(main())
