#!/usr/bin/env python3
"""8-bit AdamW fixtures: bitsandbytes' AdamW8bit (CPU backend) on given gradients, for
tests/unit/test_optim8.c (make test needs no Python: the output is committed).

tests/fixtures/adam8/adam8.safetensors holds, for each parameter P of a few sizes (below
bitsandbytes' min_8bit_size 4096 = 32-bit states; exactly 16 blocks of 256; a ragged last
block; a 2-D weight), the initial weights `init.P`, the gradient of every step `grad.S.P`
(S = 1..STEPS) and what AdamW8bit holds after each step: the weights `param.S.P` and the
states, `state1.S.P` / `state2.S.P` (uint8 codes) with `absmax1.S.P` / `absmax2.S.P` (float32,
one per block of 256) for 8-bit parameters, `exp_avg.S.P` / `exp_avg_sq.S.P` (float32) for
32-bit ones. `qmap1` / `qmap2` are bitsandbytes' dynamic maps (kernels/qmap8.h must equal
them). __metadata__: lr of each step (comma-separated), betas, eps, weight_decay, steps,
bitsandbytes and torch versions. The hyper-parameters are float32 values (what swift-train
passes), so both sides derive their scalars from the same numbers.

Run from the repository root with the venv that has bitsandbytes and torch:
    /work/venv-trl/bin/python tests/ref/gen_adam8_fixtures.py
"""
import os

import bitsandbytes as bnb
import bitsandbytes.functional as F
import numpy as np
import torch
from safetensors.torch import save_file

OUT = "tests/fixtures/adam8/adam8.safetensors"
STEPS = 4
SIZES = {"small": (1000,), "blocks16": (4096,), "ragged": (48, 100)}
LRS = [1e-3, 5e-3, 3e-3, 1e-3]  # a schedule: the lr changes between steps
BETAS = (0.9, 0.95)
EPS = 1e-8
WD = 0.1


def f32(x):
    return float(np.float32(x))


def main():
    torch.manual_seed(20)
    params = {k: torch.nn.Parameter(torch.randn(*s) * 0.5) for k, s in SIZES.items()}
    out = {f"init.{k}": p.detach().clone() for k, p in params.items()}
    opt = bnb.optim.AdamW8bit(list(params.values()), lr=f32(LRS[0]),
                              betas=(f32(BETAS[0]), f32(BETAS[1])), eps=f32(EPS),
                              weight_decay=f32(WD))
    for s in range(1, STEPS + 1):
        for g in opt.param_groups:
            g["lr"] = f32(LRS[s - 1])
        for k, p in params.items():
            # gradients of changing scale (one step much larger), so absmax moves
            scale = 10.0 if s == 3 else 0.1 * s
            p.grad = torch.randn_like(p) * scale
            out[f"grad.{s}.{k}"] = p.grad.clone()
        opt.step()
        for k, p in params.items():
            st = opt.state[p]
            out[f"param.{s}.{k}"] = p.detach().clone()
            if st["state1"].dtype == torch.uint8:
                for n in ("state1", "state2", "absmax1", "absmax2"):
                    out[f"{n}.{s}.{k}"] = st[n].clone()
            else:
                out[f"exp_avg.{s}.{k}"] = st["state1"].clone()
                out[f"exp_avg_sq.{s}.{k}"] = st["state2"].clone()
    out["qmap1"] = F.create_dynamic_map(signed=True)
    out["qmap2"] = F.create_dynamic_map(signed=False)
    meta = {"lr": ",".join(repr(f32(x)) for x in LRS), "beta1": repr(f32(BETAS[0])),
            "beta2": repr(f32(BETAS[1])), "eps": repr(f32(EPS)), "weight_decay": repr(f32(WD)),
            "steps": str(STEPS), "params": ",".join(SIZES), "bitsandbytes": bnb.__version__,
            "torch": torch.__version__}
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    save_file({k: v.contiguous() for k, v in out.items()}, OUT, metadata=meta)
    print(OUT, len(out), "tensors")


if __name__ == "__main__":
    main()
