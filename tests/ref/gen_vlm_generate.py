#!/usr/bin/env python3
"""Reference generations of the vision-language models (swift-infer's engine on lib/model/vlm.h):
tiny random Qwen2-VL and Qwen2.5-VL models with a byte-level tokenizer, greedy
generate(do_sample=False) by transformers on chat prompts with 0, 1 and 2 images of different
sizes.

Writes tests/fixtures/vlm_gen/:
  images/a.png, b.png, c.png   small RGB PNGs (40x30, 70x50, 100x60: 6, 4 and 8 image tokens
                               after the Qwen2-VL image processor's smart resize)
  qwen2_vl/, qwen2_5_vl/       config.json, model.safetensors (the hub's key layout),
                               tokenizer.json (byte-level BPE: ids 0..255 the bytes, no merges,
                               then the chat and vision special tokens), tokenizer_config.json,
                               preprocessor_config.json
  inputs.safetensors           per prompt k: input_ids.k [T] (the qwen2_vl chat template with the
                               generation prompt, each image's <|image_pad|> run expanded),
                               pixel_values.k [P, 1176] and image_grid_thw.k [n, 3] (the
                               processor's; absent for the text-only prompt)
  */gen.safetensors            tokens.k: the generated ids (at most MAX_NEW, ending at <|im_end|>
                               if it came); expected.json: the same as {"k": [ids]};
                               loss.json: {"loss", "tokens"} of LOSS_ROWS (swift-eval's loss)
  prompts.json                 the prompts: [{"text", "images": [file names]}] in the order k

Run from the repository root with torch, torchvision and transformers 5.24:
    /work/venv-vl/bin/python tests/ref/gen_vlm_generate.py
"""
import json
import os

import numpy as np
import torch
from PIL import Image
from safetensors.torch import load_file, save_file
from transformers import (Qwen2VLConfig, Qwen2VLForConditionalGeneration, Qwen2_5_VLConfig,
                          Qwen2_5_VLForConditionalGeneration, Qwen2VLImageProcessor)

OUT = "tests/fixtures/vlm_gen"
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|vision_start|>", "<|vision_end|>",
           "<|image_pad|>", "<|video_pad|>"]
ID = {t: 256 + i for i, t in enumerate(SPECIAL)}
V = 263
MAX_NEW = 12
PROMPTS = [
    {"text": "What is in the picture?", "images": ["a.png"]},
    {"text": "Compare the two.", "images": ["b.png", "c.png"]},
    {"text": "Say something.", "images": []},
    {"text": "And this one?", "images": ["c.png"]},
]
SIZES = {"a.png": (40, 30), "b.png": (70, 50), "c.png": (100, 60)}
TEXT = dict(vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
            num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=1024,
            rms_norm_eps=1e-6, hidden_act="silu", initializer_range=0.1,
            eos_token_id=ID["<|im_end|>"], bos_token_id=ID["<|endoftext|>"],
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                             "mrope_section": [2, 3, 3]})
TOP = dict(image_token_id=ID["<|image_pad|>"], video_token_id=ID["<|video_pad|>"],
           vision_start_token_id=ID["<|vision_start|>"], vision_end_token_id=ID["<|vision_end|>"],
           tie_word_embeddings=False)


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + \
        list(range(ord("\xae"), ord("\xff") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def tokenizer_files(d):
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    for t in SPECIAL:
        vocab[t] = ID[t]
    added = [{"id": ID[t], "content": t, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for t in SPECIAL]
    tj = {"version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
          "normalizer": None,
          "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                            "use_regex": True},
          "post_processor": None,
          "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                      "use_regex": True},
          "model": {"type": "BPE", "dropout": None, "unk_token": None,
                    "continuing_subword_prefix": "", "end_of_word_suffix": "",
                    "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                    "vocab": vocab, "merges": []}}
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        json.dump(tj, f, ensure_ascii=False, indent=1)
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"tokenizer_class": "Qwen2Tokenizer", "eos_token": "<|im_end|>",
                   "pad_token": "<|endoftext|>", "bos_token": None,
                   "model_max_length": 1024}, f, indent=1)
    with open(os.path.join(d, "preprocessor_config.json"), "w") as f:
        json.dump({"image_processor_type": "Qwen2VLImageProcessor", "min_pixels": 3136,
                   "max_pixels": 12845056, "patch_size": 14, "temporal_patch_size": 2,
                   "merge_size": 2}, f, indent=1)


def encode(text):
    """the byte-level tokenizer without merges: special tokens, else one id per byte"""
    ids, i = [], 0
    while i < len(text):
        for t in SPECIAL:
            if text.startswith(t, i):
                ids.append(ID[t])
                i += len(t)
                break
        else:
            j = i
            while j < len(text) and not any(text.startswith(t, j) for t in SPECIAL):
                j += 1
            ids += list(text[i:j].encode())
            i = j
    return ids


def images():
    d = os.path.join(OUT, "images")
    os.makedirs(d, exist_ok=True)
    rng = np.random.default_rng(23)
    for name, (w, h) in SIZES.items():
        px = rng.integers(0, 256, (h, w, 3), dtype=np.uint8)
        Image.fromarray(px, "RGB").save(os.path.join(d, name))


def prompt_inputs(p, proc):
    """the qwen2_vl chat template's text, the pads expanded as the processor does"""
    ims = [Image.open(os.path.join(OUT, "images", n)) for n in p["images"]]
    pv = grid = None
    pads = []
    if ims:
        out = proc(images=ims, return_tensors="pt")
        pv, grid = out["pixel_values"], out["image_grid_thw"]
        pads = [int(g.prod()) // 4 for g in grid]
    content = "".join("<|vision_start|>" + "<|image_pad|>" * k + "<|vision_end|>" for k in pads)
    text = ("<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\n" +
            content + p["text"] + "<|im_end|>\n<|im_start|>assistant\n")
    return torch.tensor([encode(text)]), pv, grid


# swift-eval --task loss on these rows' shards (tests/cli/eval-vl.bats writes the same rows):
# transformers' cross-entropy over the assistant answers and their <|im_end|> (what the qwen2_vl
# template trains), summed over the rows' trained tokens and divided by their count
LOSS_ROWS = [("What is in the picture?", ["a.png"], "A cat."),
             ("Compare the two.", ["b.png", "c.png"], "The left one is bigger."),
             ("Say something.", [], "Hello.")]


def ref_loss(model, proc):
    total, count = 0.0, 0
    for text, ims, answer in LOSS_ROWS:
        ids, pv, grid = prompt_inputs({"text": text, "images": ims}, proc)
        full = encode(answer + "<|im_end|>") + encode("\n")
        ids = torch.cat([ids, torch.tensor([full])], 1)
        labels = torch.full_like(ids, -100)
        n = len(full) - 1  # the answer and <|im_end|>, not the newline after it
        labels[0, -len(full):-1] = ids[0, -len(full):-1]
        kw = {} if pv is None else {"pixel_values": pv, "image_grid_thw": grid,
                                    "mm_token_type_ids": (ids == ID["<|image_pad|>"]).int()}
        with torch.no_grad():
            out = model(input_ids=ids, labels=labels, **kw)
        total += float(out.loss) * n
        count += n
    return total / count, count


def build(kind, seed):
    torch.manual_seed(seed)
    if kind == "qwen2_vl":
        vis = dict(depth=2, embed_dim=16, hidden_size=32, mlp_ratio=2, num_heads=2,
                   hidden_act="quick_gelu", initializer_range=0.1)
        model = Qwen2VLForConditionalGeneration(
            Qwen2VLConfig(text_config=TEXT, vision_config=vis, **TOP))
    else:
        vis = dict(depth=3, hidden_size=16, intermediate_size=24, num_heads=2, out_hidden_size=32,
                   hidden_act="silu", window_size=56, fullatt_block_indexes=[1],
                   initializer_range=0.1)
        model = Qwen2_5_VLForConditionalGeneration(
            Qwen2_5_VLConfig(text_config=TEXT, vision_config=vis, **TOP))
    model.config._attn_implementation = "eager"
    for mod in model.modules():
        if hasattr(mod, "config") and hasattr(mod.config, "_attn_implementation"):
            mod.config._attn_implementation = "eager"
    with torch.no_grad():  # logits spread wide enough that greedy has no near ties
        for n, p in model.named_parameters():
            if "norm" in n or "ln_q" in n or n.endswith(".bias"):
                p.add_(0.1 * torch.randn_like(p))
            if n.endswith("lm_head.weight"):
                p.mul_(8.0)
            if "merger" in n and ("mlp.2." in n or "mlp.2" == n.split(".")[-2]):
                p.mul_(16.0)  # the images' embeddings weigh in the text that follows
    model.eval()
    return model


def run(kind, seed, proc):
    model = build(kind, seed)
    d = os.path.join(OUT, kind)
    os.makedirs(d, exist_ok=True)
    model.save_pretrained(d, safe_serialization=True)
    for f in ("generation_config.json",):
        if os.path.exists(os.path.join(d, f)):
            os.remove(os.path.join(d, f))
    tokenizer_files(d)
    ref, inp = {}, {}
    for k, p in enumerate(PROMPTS):
        ids, pv, grid = prompt_inputs(p, proc)
        # mm_token_type_ids as the processor returns it: without it transformers 5.24 falls back
        # to 1-D text positions (no M-RoPE)
        kw = {} if pv is None else {"pixel_values": pv, "image_grid_thw": grid,
                                    "mm_token_type_ids": (ids == ID["<|image_pad|>"]).int()}
        with torch.no_grad():
            out = model.generate(input_ids=ids, attention_mask=torch.ones_like(ids),
                                 do_sample=False, max_new_tokens=MAX_NEW,
                                 eos_token_id=ID["<|im_end|>"], pad_token_id=ID["<|endoftext|>"],
                                 output_scores=True, return_dict_in_generate=True, **kw)
        gen = out.sequences[0, ids.shape[1]:]
        # the margin between the best and second-best logit at each step: a tie would make
        # the reference fragile
        margin = min(float(torch.topk(s[0], 2).values[0] - torch.topk(s[0], 2).values[1])
                     for s in out.scores)
        inp[f"input_ids.{k}"] = ids[0].int().contiguous()
        ref[f"tokens.{k}"] = gen.int().contiguous()
        if pv is not None:
            inp[f"pixel_values.{k}"] = pv.float().contiguous()
            inp[f"image_grid_thw.{k}"] = grid.int().contiguous()
        print(kind, k, "prompt", ids.shape[1], "generated", gen.tolist(), "margin %.4f" % margin)
    save_file(ref, os.path.join(d, "gen.safetensors"))
    with open(os.path.join(d, "expected.json"), "w") as f:  # the same for the CLI tests
        json.dump({str(k): ref[f"tokens.{k}"].tolist() for k in range(len(PROMPTS))}, f)
        f.write("\n")
    loss, count = ref_loss(model, proc)
    with open(os.path.join(d, "loss.json"), "w") as f:
        json.dump({"loss": loss, "tokens": count}, f)
        f.write("\n")
    print(kind, "loss", loss, "tokens", count)
    save_file(inp, os.path.join(OUT, "inputs.safetensors"))
    load_file(os.path.join(d, "gen.safetensors"))


def main():
    os.makedirs(OUT, exist_ok=True)
    images()
    proc = Qwen2VLImageProcessor()
    run("qwen2_vl", 23, proc)
    run("qwen2_5_vl", 12, proc)
    with open(os.path.join(OUT, "prompts.json"), "w") as f:
        json.dump(PROMPTS, f, indent=1)


if __name__ == "__main__":
    main()
