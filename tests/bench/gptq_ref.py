#!/usr/bin/env python3
"""GPTQ bench reference: `make OUT.safetensors OUT IN N` writes a random layer W (OUT,IN) and
correlated inputs X (N,IN); `auto-gptq FILE` times auto-gptq 0.7.1's own GPTQ (add_batch +
fasterquant, int4, group 128, blocksize 128, damp 0.01; its Python files loaded as in
tests/ref/gen_gptq_method.py) on the CPU with torch's threads = OMP_NUM_THREADS and prints
"hessian_s quantize_s"."""
import importlib
import importlib.util
import os
import sys
import time
import types

import torch
from safetensors.torch import load_file, save_file


def make(path, out, inf, n):
    g = torch.Generator().manual_seed(0)
    mix = torch.randn(inf, inf, generator=g) / inf ** 0.5 + torch.eye(inf)
    X = torch.randn(n, inf, generator=g) @ mix
    W = torch.randn(out, inf, generator=g) * 0.02
    save_file({"W": W.contiguous(), "X": X.contiguous()}, path)


def auto_gptq(path):
    spec = importlib.util.find_spec("auto_gptq")
    if spec is None:
        sys.exit("pip install --no-deps auto-gptq==0.7.1")
    pkg = types.ModuleType("agq")
    pkg.__path__ = [os.path.join(os.path.dirname(spec.origin), "quantization")]
    sys.modules["agq"] = pkg
    torch.cuda.synchronize = lambda *a, **k: None
    GPTQ = importlib.import_module("agq.gptq").GPTQ
    torch.set_num_threads(int(os.environ.get("OMP_NUM_THREADS", "2")))
    t = load_file(path)
    W, X = t["W"], t["X"]
    lin = torch.nn.Linear(W.shape[1], W.shape[0], bias=False)
    lin.weight.data = W.clone()
    q = GPTQ(lin)
    q.quantizer.configure(4, perchannel=True, sym=True, mse=False)
    t0 = time.perf_counter()
    q.add_batch(X[None], None)
    t1 = time.perf_counter()
    q.fasterquant(blocksize=128, percdamp=0.01, group_size=128)
    t2 = time.perf_counter()
    print("%.4f %.4f" % (t1 - t0, t2 - t1))


if __name__ == "__main__":
    if sys.argv[1] == "make":
        make(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    else:
        auto_gptq(sys.argv[2])
