#!/usr/bin/env python3
"""Reference fixtures for lib/formats/quant.c from PyPI gguf's quants module (tests/ref/fixtures/quant/).

    make build/tests/test_quant && python3 tests/ref/gen_quant.py

x.f32          4 rows x 512 float32 inputs (normal, outliers, an all-zero block, tiny values)
T.ref.bin      gguf.quants.quantize(x, T) for T in f16 bf16 q8_0 q4_0 q5_0: ours must be equal
T.ref.deq.f32  gguf.quants.dequantize(T.ref.bin, T): our dequantizer must give the same floats
q4_k.ours.bin, q6_k.ours.bin   our encoder's bytes (gguf-py has no K-quant encoder), written by
               build/tests/test_quant with SWIFT_QUANT_WRITE=DIR
T.ours.deq.f32 gguf-py's dequantization of our K-quant bytes: checks the layout bit for bit
"""
import os
import subprocess
import sys

import numpy as np
from gguf import GGMLQuantizationType as Q
from gguf import quants

out = "tests/ref/fixtures/quant"
os.makedirs(out, exist_ok=True)
rng = np.random.default_rng(1234)
x = rng.standard_normal((4, 512)).astype(np.float32) * 0.05
x[0, 7] = 1.5          # outliers
x[1, 300] = -2.0
x[2, 0:32] = 0.0       # an all-zero block
x[3, :] *= 1e-4        # tiny values (fp16 subnormal scales)
x.tofile(os.path.join(out, "x.f32"))

types = {"f16": Q.F16, "bf16": Q.BF16, "q8_0": Q.Q8_0, "q4_0": Q.Q4_0, "q5_0": Q.Q5_0}
for name, t in types.items():
    if t == Q.F16:
        b = x.astype(np.float16).view(np.uint8)
    else:
        b = quants.quantize(x, t)
    b.tofile(os.path.join(out, name + ".ref.bin"))
    d = quants.dequantize(b, t).astype(np.float32) if t != Q.F16 else \
        b.view(np.float16).astype(np.float32)
    d.tofile(os.path.join(out, name + ".ref.deq.f32"))

env = dict(os.environ, SWIFT_QUANT_WRITE=out)
subprocess.run([sys.argv[1] if len(sys.argv) > 1 else "build/tests/test_quant"], env=env,
               check=True, stdout=subprocess.DEVNULL)
for name, t in {"q4_k": Q.Q4_K, "q6_k": Q.Q6_K}.items():
    b = np.fromfile(os.path.join(out, name + ".ours.bin"), dtype=np.uint8).reshape(4, -1)
    d = quants.dequantize(b, t).astype(np.float32)
    d.tofile(os.path.join(out, name + ".ours.deq.f32"))
    rmse = float(np.sqrt(np.mean((d - x) ** 2)))
    print("%s rmse %.6g (gguf-py dequant of our bytes)" % (name, rmse))
for name, t in types.items():
    d = np.fromfile(os.path.join(out, name + ".ref.deq.f32"), dtype=np.float32).reshape(4, -1)
    print("%s rmse %.6g (gguf-py)" % (name, float(np.sqrt(np.mean((d - x) ** 2)))))
