#!/usr/bin/env python3
"""Reference fixtures for kernels/cpu/quant4.c from PyPI bitsandbytes on CPU (tests/ref/fixtures/nf4/).

    /work/venv-trl/bin/python tests/ref/gen_nf4_fixtures.py

For each weight tensor wK (shapes below; w1 and w2 end in a ragged 64-block, w2 also in a ragged
256-block of the double quantization) and each quant_type T in nf4 fp4:
wK.f32                  the float32 weight (row-major)
wK.T.codes              quantize_4bit(w, blocksize=64, quant_type=T)[0]: two codes per byte
wK.T.absmax.f32         its absmax (one float per 64-block)
wK.T.deq.f32            dequantize_4bit of the above
wK.T.dq.codes           the same with compress_statistics=True (same packed codes)
wK.T.dq.qabsmax         state.absmax: the absmax minus their mean, 8-bit dynamic codes
wK.T.dq.absmax2.f32     state.state2.absmax (one float per 256 absmax)
wK.T.dq.offset.f32      state.offset
wK.T.dq.deq.f32         dequantize_4bit with the nested state
make test reads these files only; it never runs Python.

The dequantized files come from bitsandbytes' reference (torch) dequantizer, the "default" backend's
_dequantize_4bit_compute, which is what quantize_4bit's layout means (element e uses block e // 64,
as the CUDA kernels do). bitsandbytes 0.50.2's native CPU dequantize_4bit agrees with it on w1 and
w2 but not on w0 (64 x 96, rows not a multiple of the block): there it scales elements with the
wrong block's absmax (max error 1.5 on unit normals, against 0.43 for the reference), a bug on
their side; the generator prints where the two differ.

The double quantization's 8-bit codes: bitsandbytes' native CPU quantize_blockwise looks the
dynamic map up with BinSearch's Direct2 grid, which now and then returns a neighbour of the
nearest code (w2: 2 of 329); ours is always the nearest. tests/unit/test_quant4.c checks that
every differing code is off by one, rare, and that ours is the nearest, and checks the
dequantization bit for bit with bitsandbytes' codes.
"""
import os

import numpy as np
import torch
import bitsandbytes.functional as F
from bitsandbytes.backends.default.ops import _dequantize_4bit_compute
from bitsandbytes.backends.utils import _get_4bit_code

out = "tests/ref/fixtures/nf4"
os.makedirs(out, exist_ok=True)
g = torch.Generator().manual_seed(20)


def deq(q, absmax, t, shape, native, path):
    ref = _dequantize_4bit_compute(q.reshape(-1), absmax, _get_4bit_code(t, q.device), 64, shape,
                                   torch.float32)
    if not torch.equal(ref, native):
        print("%s: bitsandbytes' native CPU dequantize_4bit differs from its reference"
              " (max %.3g)" % (path, (ref - native).abs().max().item()))
    ref.numpy().astype(np.float32).tofile(path)


shapes = {"w0": (64, 96), "w1": (37, 50), "w2": (300, 70)}
for name, shape in shapes.items():
    w = torch.randn(shape, generator=g) * 0.02
    if name == "w0":
        w[0, 5] = 0.5         # an outlier
        w[3, 0:64] = 0.0      # an all-zero block (rows are 96 wide: crosses a row)
        w[10, 7] = -0.3
    if name == "w2":
        w[100:140, :] *= 20.0  # blocks with much larger absmax: a wide spread for the offset
    w.numpy().astype(np.float32).tofile(os.path.join(out, name + ".f32"))
    for t in ("nf4", "fp4"):
        base = os.path.join(out, "%s.%s" % (name, t))
        q, st = F.quantize_4bit(w, blocksize=64, quant_type=t)
        q.numpy().tofile(base + ".codes")
        st.absmax.numpy().astype(np.float32).tofile(base + ".absmax.f32")
        deq(q, st.absmax, t, shape, F.dequantize_4bit(q, st), base + ".deq.f32")
        q2, st2 = F.quantize_4bit(w, blocksize=64, quant_type=t, compress_statistics=True)
        assert torch.equal(q, q2)
        q2.numpy().tofile(base + ".dq.codes")
        st2.absmax.numpy().astype(np.uint8).tofile(base + ".dq.qabsmax")
        st2.state2.absmax.numpy().astype(np.float32).tofile(base + ".dq.absmax2.f32")
        np.array([float(st2.offset)], dtype=np.float32).tofile(base + ".dq.offset.f32")
        assert st2.state2.blocksize == 256
        am = F.dequantize_blockwise(st2.absmax, st2.state2) + st2.offset
        deq(q2, am, t, shape, F.dequantize_4bit(q2, st2), base + ".dq.deq.f32")
        print(name, t, tuple(shape), "blocks", st.absmax.numel(), "dq blocks",
              st2.state2.absmax.numel(), "offset", float(st2.offset))
