#!/usr/bin/env python3
"""Reference fixtures for the vision-language model math (lib/model/vlm.h): tiny random Qwen2-VL
and Qwen2.5-VL models built and run by transformers (eager attention, float32).

Writes tests/fixtures/vlm/:
  inputs.safetensors    pixel_values [72, 1176] (two images: grids (1,4,6) and (1,6,8), 24 + 48
                        patches of 3x2x14x14 in the Qwen2-VL image processor's order),
                        image_grid_thw [2,3], input_ids [2,T] (row 0: text, image 0's 6 pads, text,
                        image 1's 12 pads, text; row 1: text only), labels [2,T] (-100: prompt and
                        vision tokens)
  qwen2_vl/             config.json + model.safetensors, the keys renamed to the module layout
                        (model.visual.*, model.language_model.*, lm_head.weight) some
                        checkpoints carry
  qwen2_5_vl/           the same for Qwen2.5-VL (window attention: window_size 56 = 2x2 merged
                        tokens, full attention in block 1), the keys as transformers 5.24's
                        save_pretrained writes them, the hub's layout (visual.*, model.*,
                        lm_head.weight)
  */ref.safetensors     logits [2,T,V], loss [], position_ids [3,2,T] (get_rope_index),
                        image_embeds [18, H] (the merger's output, image order), and
                        grad.<name> (the name as saved in that directory) for the selected
                        parameters: the patch embedding, every tensor of ViT block 0, the merger,
                        every tensor of LLM layer 0, embed_tokens, the final norm, lm_head

The loss is transformers' (mean cross-entropy over trained tokens, token t predicting t+1).
Run from the repository root with torch + transformers 5 (e.g. /work/venv-trl/bin/python):
    python3 tests/ref/gen_vlm_fixtures.py
"""
import json
import os

import torch
from safetensors.torch import load_file, save_file
from transformers import (Qwen2VLConfig, Qwen2VLForConditionalGeneration, Qwen2_5_VLConfig,
                          Qwen2_5_VLForConditionalGeneration)

OUT = "tests/fixtures/vlm"
V, IMG, VS, VE, VID = 128, 100, 98, 99, 101
GRIDS = [(1, 4, 6), (1, 6, 8)]
TEXT = dict(vocab_size=V, hidden_size=32, intermediate_size=48, num_hidden_layers=2,
            num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256,
            rms_norm_eps=1e-6, hidden_act="silu", initializer_range=0.1,
            rope_parameters={"rope_type": "default", "rope_theta": 10000.0,
                             "mrope_section": [2, 3, 3]})
TOP = dict(image_token_id=IMG, video_token_id=VID, vision_start_token_id=VS,
           vision_end_token_id=VE, tie_word_embeddings=False)


def inputs(g):
    npatch = sum(t * h * w for t, h, w in GRIDS)
    pix = torch.randn(npatch, 3 * 2 * 14 * 14, generator=g)
    row0 = ([5, 6, 7, VS] + [IMG] * 6 + [VE, 8, 9, 10, VS] + [IMG] * 12 + [VE] +
            [11, 12, 13, 14, 15, 16])
    T = len(row0)
    row1 = torch.randint(3, 90, (T,), generator=g).tolist()
    ids = torch.tensor([row0, row1])
    labels = ids.clone()
    labels[(ids == IMG) | (ids == VS) | (ids == VE)] = -100
    labels[0, :3] = -100
    labels[1, :4] = -100
    return pix, torch.tensor(GRIDS), ids, labels


def selected(name):
    keys = ["patch_embed", "blocks.0.", "merger", "layers.0.", "embed_tokens", "norm.weight",
            "lm_head"]
    if name.endswith("language_model.norm.weight") or name == "model.norm.weight":
        return True
    return any(k in name for k in keys if k != "norm.weight")


def new_name(n):
    """the hub's key -> the module's layout"""
    if n.startswith("visual."):
        return "model." + n
    if n.startswith("model."):
        return "model.language_model." + n[len("model."):]
    return n


def old_name(n):
    """the module's name -> the key save_pretrained writes (the hub's layout)"""
    if n.startswith("model.visual."):
        return n[len("model."):]
    if n.startswith("model.language_model."):
        return "model." + n[len("model.language_model."):]
    return n


def run(kind, pix, grid, ids, labels, seed):
    torch.manual_seed(seed)
    if kind == "qwen2_vl":
        vis = dict(depth=2, embed_dim=16, hidden_size=32, mlp_ratio=2, num_heads=2,
                   hidden_act="quick_gelu", initializer_range=0.1)
        cfg = Qwen2VLConfig(text_config=TEXT, vision_config=vis, **TOP)
        model = Qwen2VLForConditionalGeneration(cfg)
    else:
        vis = dict(depth=3, hidden_size=16, intermediate_size=24, num_heads=2, out_hidden_size=32,
                   hidden_act="silu", window_size=56, fullatt_block_indexes=[1],
                   initializer_range=0.1)
        cfg = Qwen2_5_VLConfig(text_config=TEXT, vision_config=vis, **TOP)
        model = Qwen2_5_VLForConditionalGeneration(cfg)
    cfg._attn_implementation = "eager"
    model.config._attn_implementation = "eager"
    for mod in model.modules():
        if hasattr(mod, "config") and hasattr(mod.config, "_attn_implementation"):
            mod.config._attn_implementation = "eager"
    with torch.no_grad():  # norms away from 1 and biases away from 0, so their math shows
        for n, p in model.named_parameters():
            if "norm" in n or "ln_q" in n or n.endswith(".bias"):
                p.add_(0.1 * torch.randn_like(p))
    d = os.path.join(OUT, kind)
    os.makedirs(d, exist_ok=True)
    model.save_pretrained(d, safe_serialization=True)
    sd = load_file(os.path.join(d, "model.safetensors"))
    if kind == "qwen2_vl":
        save_file({new_name(k): v.contiguous() for k, v in sd.items()},
                  os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
        saved = {new_name(k) for k in sd}
    else:
        saved = set(sd)

    model.train()
    mm = (ids == IMG).int()
    out = model(input_ids=ids, pixel_values=pix, image_grid_thw=grid, labels=labels,
                mm_token_type_ids=mm)
    out.loss.backward()
    pos, _ = model.model.get_rope_index(ids, mm, image_grid_thw=grid)
    with torch.no_grad():
        emb = model.model.get_image_features(pix, image_grid_thw=grid).pooler_output
        emb = torch.cat(list(emb), 0)
    ref = {"logits": out.logits.detach().contiguous(), "loss": out.loss.detach().reshape(()),
           "position_ids": pos.int().contiguous(), "image_embeds": emb.contiguous()}
    # the parameter's name in the module -> its saved key
    names = {n: n for n, _ in model.named_parameters()}
    for n, p in model.named_parameters():
        if p.grad is None or not selected(n):
            continue
        key = n if kind == "qwen2_vl" else old_name(n)
        if key not in saved:
            raise SystemExit(f"{n}: not among the saved keys")
        ref["grad." + key] = p.grad.detach().contiguous()
    save_file(ref, os.path.join(d, "ref.safetensors"))
    print(kind, "loss", out.loss.item(), "grads", sum(1 for k in ref if k.startswith("grad.")),
          "names", len(names))


def main():
    g = torch.Generator().manual_seed(23)
    pix, grid, ids, labels = inputs(g)
    os.makedirs(OUT, exist_ok=True)
    save_file({"pixel_values": pix.contiguous(), "image_grid_thw": grid.int().contiguous(),
               "input_ids": ids.int().contiguous(), "labels": labels.int().contiguous()},
              os.path.join(OUT, "inputs.safetensors"))
    run("qwen2_vl", pix, grid, ids, labels, 1)
    run("qwen2_5_vl", pix, grid, ids, labels, 2)
    for kind in ("qwen2_vl", "qwen2_5_vl"):
        for f in ("generation_config.json",):
            p = os.path.join(OUT, kind, f)
            if os.path.exists(p):
                os.remove(p)
        with open(os.path.join(OUT, kind, "config.json")) as fh:
            json.load(fh)


if __name__ == "__main__":
    main()
