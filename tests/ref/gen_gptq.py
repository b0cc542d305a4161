#!/usr/bin/env python3
"""--quant int4|int8 --method rtn references (tests/ref/fixtures/gptq/): GPTQ's Quantizer
(sym=True, per group) and auto-gptq's QuantLinear.pack() layout, in torch, on the merge
fixture's base model; then our output is compared with it bit for bit and dequantized with
auto-gptq's formula W = scales[g_idx] * (unpack(qweight) - (unpack(qzeros) + 1)).

    make build/bin/swift-export && python3 tests/ref/gen_gptq.py
"""
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import torch
from safetensors.torch import load_file, save_file

BASE = "tests/ref/fixtures/merge/base"
FIX = "tests/ref/fixtures/gptq"
BIN = os.path.abspath("build/bin/swift-export")
LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")


def find_params(x, bits):  # GPTQ quant.py Quantizer.find_params, sym=True, per row
    maxq = 2 ** bits - 1
    zero = torch.zeros(x.shape[0])
    xmin = torch.minimum(x.min(1)[0], zero)
    xmax = torch.maximum(x.max(1)[0], zero)
    xmax = torch.maximum(torch.abs(xmin), xmax)
    tmp = xmin < 0
    xmin[tmp] = -xmax[tmp]
    tmp = (xmin == 0) & (xmax == 0)
    xmin[tmp] = -1
    xmax[tmp] = +1
    scale = (xmax - xmin) / maxq
    return scale, torch.full_like(scale, (maxq + 1) / 2)


def quantize(w, bits, group):
    out, inf = w.shape
    maxq = 2 ** bits - 1
    ng = inf // group
    q = torch.zeros(out, inf, dtype=torch.int64)
    scales = torch.zeros(ng, out, dtype=torch.float16)
    zeros = torch.zeros(ng, out, dtype=torch.int64)
    for g in range(ng):
        x = w[:, g * group:(g + 1) * group]
        s, z = find_params(x, bits)
        s16 = s.half()  # quantize with the fp16 scale the checkpoint stores
        q[:, g * group:(g + 1) * group] = torch.clamp(
            torch.round(x / s16.float()[:, None]) + z[:, None], 0, maxq).long()
        scales[g] = s16
        zeros[g] = z.long()
    return q, scales, zeros


def pack(q, scales, zeros, bits, group):  # auto-gptq QuantLinear.pack (integer part)
    intweight = q.t().contiguous().numpy().astype(np.uint32)  # [in, out]
    pf = 32 // bits
    qweight = np.zeros((intweight.shape[0] // pf, intweight.shape[1]), dtype=np.uint32)
    for row in range(qweight.shape[0]):
        for j in range(pf):
            qweight[row] |= intweight[row * pf + j] << (bits * j)
    z = (zeros.numpy() - 1).astype(np.uint32)  # [ng, out]
    qzeros = np.zeros((z.shape[0], z.shape[1] // pf), dtype=np.uint32)
    for col in range(qzeros.shape[1]):
        for j in range(pf):
            qzeros[:, col] |= z[:, col * pf + j] << (bits * j)
    g_idx = torch.tensor([i // group for i in range(q.shape[1])], dtype=torch.int32)
    return (torch.from_numpy(qweight.view(np.int32)), torch.from_numpy(qzeros.view(np.int32)),
            scales, g_idx)


def dequant(qweight, qzeros, scales, g_idx, bits):  # auto-gptq's torch dequantization
    pf = 32 // bits
    mask = 2 ** bits - 1
    qw = qweight.numpy().view(np.uint32)
    w = np.stack([(qw >> (bits * j)) & mask for j in range(pf)], 1).reshape(-1, qw.shape[1])
    qz = qzeros.numpy().view(np.uint32)
    z = np.stack([(qz >> (bits * j)) & mask for j in range(pf)], 2).reshape(qz.shape[0], -1) + 1
    g = g_idx.numpy()
    return (scales.float().numpy()[g] * (w.astype(np.int64) - z[g].astype(np.int64))).T


def main():
    shutil.rmtree(FIX, ignore_errors=True)
    os.makedirs(FIX)
    sd = load_file(os.path.join(BASE, "model.safetensors"))
    tmp = tempfile.mkdtemp()
    ok = True
    try:
        for bits in (4, 8):
            group = 32
            ref = {}
            errs = []
            for k, w in sd.items():
                if not any(("." + m + ".weight") in k for m in LINEAR):
                    continue
                q, s, z = quantize(w.float(), bits, group)
                qw, qz, sc, gi = pack(q, s, z, bits, group)
                p = k[:-len("weight")]
                ref.update({p + "qweight": qw, p + "qzeros": qz, p + "scales": sc, p + "g_idx": gi})
                d = dequant(qw, qz, sc, gi, bits)
                errs.append(float(np.sqrt(np.mean((d - w.float().numpy()) ** 2))) /
                            float(np.sqrt(np.mean(w.float().numpy() ** 2))))
            save_file(ref, os.path.join(FIX, "ref-int%d.safetensors" % bits),
                      metadata={"format": "pt"})
            out = os.path.join(tmp, "int%d" % bits)
            subprocess.run([BIN, BASE, "--quant", "int%d" % bits, "--group-size", str(group),
                            "-o", out], check=True, stdout=subprocess.DEVNULL)
            ours = load_file(os.path.join(out, "model.safetensors"))
            bad = [k for k in ref if not torch.equal(ref[k], ours[k])]
            extra = [k for k in ours if k.endswith(".weight") and
                     any(("." + m + ".") in k for m in LINEAR)]
            ok &= not bad and not extra
            print("int%d group %d: %d tensors, %d differ from the reference packing%s; "
                  "relative RMSE of auto-gptq's dequantization: mean %.4f max %.4f" % (
                      bits, group, len(ref), len(bad), " (unexpected %s)" % extra if extra else "",
                      float(np.mean(errs)), float(np.max(errs))))
    finally:
        shutil.rmtree(tmp)
    print("gptq layout verified" if ok else "FAILED")
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
