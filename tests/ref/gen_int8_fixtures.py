#!/usr/bin/env python3
"""Reference fixtures for kernels/cpu/quant8.c from PyPI bitsandbytes on CPU (tests/ref/fixtures/int8/).

    /work/venv-trl/bin/python tests/ref/gen_int8_fixtures.py

For each weight tensor wK (shapes below; w0 has an outlier, an all-zero row, values that round to
float16 subnormals and exact .5 ties after scaling; w2 has rows of very different scales):
wK.f32          the float32 weight (row-major)
wK.cb           Int8Params(w, has_fp16_weights=False).to("cpu"): CB, int8 (out, in)
wK.scb.f32      its SCB, float32 (out): the absmax of each row of w in float16
wK.deq.f32      int8_vectorwise_dequant(CB, SCB): CB * SCB * (1/127) in float32
Int8Params is what transformers' load_in_8bit (BitsAndBytesConfig) stores; it quantizes
w.to(float16) with int8_vectorwise_quant (threshold 0: no outlier columns), which the generator
checks it equals. make test reads these files only; it never runs Python.
"""
import os

import numpy as np
import torch
import bitsandbytes as bnb
import bitsandbytes.functional as F

out = "tests/ref/fixtures/int8"
os.makedirs(out, exist_ok=True)
g = torch.Generator().manual_seed(8)

shapes = {"w0": (64, 96), "w1": (37, 50), "w2": (300, 70)}
for name, shape in shapes.items():
    w = torch.randn(shape, generator=g) * 0.02
    if name == "w0":
        w[0, 5] = 0.5          # an outlier
        w[3, :] = 0.0          # an all-zero row
        w[5, 1:4] = torch.tensor([1e-7, -3e-8, 5e-6])  # float16 subnormals
        w[7, 0] = 1.0          # row absmax 1: 127 * x, ties at x = k.5 / 127
        w[7, 1:6] = torch.tensor([0.5, 1.5, 2.5, -0.5, -2.5]) / 127.0
        w[9, 2] = 70000.0 / 65536.0 * 0.03  # needs float16 rounding
    if name == "w2":
        w[100:140, :] *= 20.0
        w[200:210, :] *= 1e-3
    w.numpy().astype(np.float32).tofile(os.path.join(out, name + ".f32"))
    p = bnb.nn.Int8Params(w.clone(), requires_grad=False, has_fp16_weights=False).to("cpu")
    cb, scb = p.CB, p.SCB
    assert cb.dtype == torch.int8 and scb.dtype == torch.float32 and tuple(cb.shape) == shape
    cb2, scb2, _ = F.int8_vectorwise_quant(w.to(torch.float16))
    assert torch.equal(cb, cb2) and torch.equal(scb, scb2)
    base = os.path.join(out, name)
    cb.numpy().tofile(base + ".cb")
    scb.numpy().astype(np.float32).tofile(base + ".scb.f32")
    deq = F.int8_vectorwise_dequant(cb, scb)
    assert deq.dtype == torch.float32
    deq.numpy().astype(np.float32).tofile(base + ".deq.f32")
    print(name, tuple(shape), "max |w - deq| %.3g" % (w - deq).abs().max().item(),
          "zero rows", int((scb == 0).sum()))
