#!/usr/bin/env python3
"""Reference FLOP counts for the vision side of a Qwen2-VL / Qwen2.5-VL step (lib/model/vlm_flops.h),
by torch.utils.flop_counter.FlopCounterMode on transformers' own vision tower and merger.

Loads the committed tiny models of tests/ref/gen_vlm_fixtures.py (tests/fixtures/vlm/qwen2_vl,
qwen2_5_vl) with their inputs (two images, grids (1,4,6) and (1,6,8)) and counts, for each
combination of frozen groups, the FLOPs of model.model.visual(pixel_values, grid_thw) and, when
a group trains (requires_grad), of the backward of its output's sum. Writes
tests/fixtures/vlm/flops.json: {kind: {"grids", "cases": [{"frozen": SWIFT_VLM_* bits,
"flops"}]}} (VIT = 1, ALIGNER = 2). tests/unit/test_vlm_flops.c compares
swift_vlm_vision_flops with these.

FlopCounterMode counts matmuls (mm, addmm, bmm), convolutions and attention, 2 per
multiply-add, as our count does; norms, activations and rotary are not counted by either.
Run from the repository root with torch + transformers 5 (e.g. /work/venv-trl/bin/python):
    python3 tests/ref/gen_vlm_flops.py
"""
import json

import torch
from safetensors.torch import load_file
from torch.utils.flop_counter import FlopCounterMode
from transformers import Qwen2VLForConditionalGeneration, Qwen2_5_VLForConditionalGeneration

FIX = "tests/fixtures/vlm"
VIT, ALIGNER = 1, 2


def count(model, pix, grid, frozen):
    vis = model.model.visual
    for n, p in vis.named_parameters():
        merger = n.startswith("merger.")
        p.requires_grad_(not (frozen & (ALIGNER if merger else VIT)))
    with FlopCounterMode(display=False) as fc:
        out = vis(pix, grid_thw=grid)
        emb = out.pooler_output if hasattr(out, "pooler_output") else out
        if (frozen & (VIT | ALIGNER)) != (VIT | ALIGNER):
            emb.sum().backward()
    return int(fc.get_total_flops())


def main():
    inp = load_file(f"{FIX}/inputs.safetensors")
    pix, grid = inp["pixel_values"], inp["image_grid_thw"].long()
    res = {}
    for kind, cls in (("qwen2_vl", Qwen2VLForConditionalGeneration),
                      ("qwen2_5_vl", Qwen2_5_VLForConditionalGeneration)):
        model = cls.from_pretrained(f"{FIX}/{kind}", attn_implementation="eager",
                                    dtype=torch.float32)
        cases = [{"frozen": f, "flops": count(model, pix, grid, f)}
                 for f in (VIT | ALIGNER, VIT, ALIGNER, 0)]
        res[kind] = {"grids": grid.tolist(), "cases": cases}
    with open(f"{FIX}/flops.json", "w") as fp:
        json.dump(res, fp, indent=1)
        fp.write("\n")
    print(json.dumps(res))


if __name__ == "__main__":
    main()
