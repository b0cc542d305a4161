#!/usr/bin/env python3
"""Reference fixtures for packed rows of the vision-language models (lib/model/vlm.h, "Packing"):
transformers' own packed path on the committed tiny models of gen_vlm_fixtures.py.

The samples [row 1, row 0, row 1] of tests/fixtures/vlm/inputs.safetensors in one row of 3T
tokens, run by Qwen2VLForConditionalGeneration / Qwen2_5_VLForConditionalGeneration (eager
attention, float32, no cache) with position_ids [4, 1, 3T]: the text positions restarting at each
sample (transformers builds the block-diagonal mask from them, masking_utils'
find_packed_sequence_indices, as flash-attention varlen does on a GPU) and each sample's own
get_rope_index (what ms-swift's packing passes). Writes tests/fixtures/vlm/<kind>/packed.safetensors:
input_ids [1,3T], labels [1,3T] (each sample's first label is -100, so no target crosses a
sample), position_ids [4,1,3T], logits [1,3T,V], loss [], grad.<name> for the parameters
gen_vlm_fixtures.py selects (the names as saved in that directory).

Run from the repository root with torch + transformers 5 (e.g. /work/venv-trl/bin/python), after
gen_vlm_fixtures.py:
    python3 tests/ref/gen_vlm_packed.py
"""
import os
import sys

import torch
from safetensors.torch import load_file, save_file
from transformers import Qwen2VLForConditionalGeneration, Qwen2_5_VLForConditionalGeneration

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_vlm_fixtures import IMG, OUT, old_name, selected  # noqa: E402

ORDER = [1, 0, 1]


def main():
    inp = load_file(os.path.join(OUT, "inputs.safetensors"))
    ids, labels = inp["input_ids"].long(), inp["labels"].long()
    pix, grid = inp["pixel_values"], inp["image_grid_thw"].long()
    T = ids.shape[1]
    # which images each row holds (row 0 both, row 1 none): the packed row's in order
    per_row = {0: [0, 1], 1: []}
    packed_grid = torch.stack([grid[i] for r in ORDER for i in per_row[r]])
    npatch = [int(g.prod()) for g in grid]
    offs = [sum(npatch[:i]) for i in range(len(npatch))]
    packed_pix = torch.cat([pix[offs[i]:offs[i] + npatch[i]] for r in ORDER for i in per_row[r]])
    for kind, cls in (("qwen2_vl", Qwen2VLForConditionalGeneration),
                      ("qwen2_5_vl", Qwen2_5_VLForConditionalGeneration)):
        d = os.path.join(OUT, kind)
        model = cls.from_pretrained(d, attn_implementation="eager", dtype=torch.float32)
        model.train()
        saved = set(load_file(os.path.join(d, "model.safetensors")))
        pos = []
        for r in ORDER:  # each sample's get_rope_index as if it were alone
            one = ids[r:r + 1]
            g = grid[per_row[r]] if per_row[r] else None
            p, _ = model.model.get_rope_index(one, (one == IMG).int(), image_grid_thw=g)
            pos.append(p)
        text = torch.cat([torch.arange(T)] * len(ORDER))[None, None]
        position_ids = torch.cat([text, torch.cat(pos, dim=2)], 0)
        row = torch.cat([ids[r] for r in ORDER])[None]
        lab = torch.cat([labels[r] for r in ORDER])[None]
        out = model(input_ids=row, pixel_values=packed_pix, image_grid_thw=packed_grid,
                    labels=lab, position_ids=position_ids, use_cache=False,
                    mm_token_type_ids=(row == IMG).int())
        out.loss.backward()
        ref = {"input_ids": row.int().contiguous(), "labels": lab.int().contiguous(),
               "position_ids": position_ids.int().contiguous(),
               "logits": out.logits.detach().contiguous(), "loss": out.loss.detach().reshape(())}
        for n, p in model.named_parameters():
            if p.grad is None or not selected(n):
                continue
            key = n if kind == "qwen2_vl" else old_name(n)
            if key not in saved:
                raise SystemExit(f"{n}: not among the saved keys")
            ref["grad." + key] = p.grad.detach().contiguous()
        save_file(ref, os.path.join(d, "packed.safetensors"))
        print(kind, "packed loss", out.loss.item(), "grads",
              sum(1 for k in ref if k.startswith("grad.")))


if __name__ == "__main__":
    main()
