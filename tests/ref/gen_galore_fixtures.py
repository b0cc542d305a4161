#!/usr/bin/env python3
"""Reference steps of GaLore's optimizer, computed by galore-torch's GaLoreAdamW (PyPI
galore-torch, proj_type "std") for tests/unit/test_galore.c. CI never runs this.

Writes tests/ref/fixtures/galore/galore.safetensors, per case (tall, wide, square):
  <case>.w0          the weight before the first step (rows x cols, torch's [out, in])
  <case>.g.<t>       the gradient given at step t (1-based), before clipping
  <case>.P.<t>       the projection GaLoreAdamW computed at step t (its SVD), where it refreshed
  <case>.w.<t>       the weight after step t
and in __metadata__ the hyper-parameters (the C test uses the same constants).

The gradients are multiplied by the case's gscale before each step (as clip_grad_norm_ does);
STEPS steps with update_proj_gap GAP, so the projection is refreshed at steps 1, 1+GAP, ...

Run from the repository root: /work/venv-trl/bin/python tests/ref/gen_galore_fixtures.py
"""
import os
import warnings

import torch
from galore_torch import GaLoreAdamW
from safetensors.torch import save_file

OUT = "tests/ref/fixtures/galore/galore.safetensors"
LR, B1, B2, EPS, WD, SCALE, GAP, STEPS = 1e-2, 0.9, 0.95, 1e-8, 0.1, 0.25, 2, 5
# name: (rows, cols, rank, gscale)
CASES = {"tall": (12, 6, 3, 1.0), "wide": (5, 11, 2, 1.0), "square": (8, 8, 4, 0.5)}


def run(name, rows, cols, rank, gscale, out):
    gen = torch.Generator().manual_seed(sum(map(ord, name)))
    w = torch.nn.Parameter(torch.randn(rows, cols, generator=gen, dtype=torch.float32))
    out[f"{name}.w0"] = w.detach().clone()
    opt = GaLoreAdamW([{"params": [w], "rank": rank, "update_proj_gap": GAP, "scale": SCALE,
                        "proj_type": "std"}],
                      lr=LR, betas=(B1, B2), eps=EPS, weight_decay=WD)
    for t in range(1, STEPS + 1):
        g = torch.randn(rows, cols, generator=gen, dtype=torch.float32)
        # a spread of singular values so the SVD's subspaces are well separated
        g = g * torch.linspace(1.0, 3.0, cols)
        out[f"{name}.g.{t}"] = g.clone()
        w.grad = g * gscale
        opt.step()
        if (t - 1) % GAP == 0:
            out[f"{name}.P.{t}"] = opt.state[w]["projector"].ortho_matrix.detach().clone().contiguous()
        out[f"{name}.w.{t}"] = w.detach().clone()


def main():
    warnings.simplefilter("ignore")
    out = {}
    for name, (rows, cols, rank, gscale) in CASES.items():
        run(name, rows, cols, rank, gscale, out)
    meta = {"lr": repr(LR), "b1": repr(B1), "b2": repr(B2), "eps": repr(EPS), "wd": repr(WD),
            "scale": repr(SCALE), "gap": str(GAP), "steps": str(STEPS),
            "torch": torch.__version__}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file(out, OUT, metadata=meta)
    print("wrote", OUT, len(out), "tensors")


if __name__ == "__main__":
    main()
