#!/usr/bin/env python3
"""Write tests/fixtures/safetensors/ref.safetensors with the reference `safetensors` package.

test_safetensors.c reads it (values known from this script) and checks that our writer produces
the same bytes for the same tensors. Run from the repository root:
    python3 tests/ref/gen_safetensors_fixture.py
"""
import torch
from safetensors.torch import save_file

t = {
    "a": torch.arange(6, dtype=torch.float32).reshape(2, 3) * 0.5 - 1.0,
    "b": torch.tensor([1.0, -2.5, 3.140625, 65504.0], dtype=torch.bfloat16),
    "c": torch.tensor([0.5, -1.0, 6.1035156e-05], dtype=torch.float16),
    "d": torch.tensor([7, -9], dtype=torch.int64),
    "e": torch.tensor(42.0, dtype=torch.float32),
    "model.layers.0.self_attn.q_proj.weight": torch.tensor([[1.5, 2.0]], dtype=torch.float32),
    "z": torch.zeros(0, 4, dtype=torch.uint8),
}
save_file(t, "tests/fixtures/safetensors/ref.safetensors", metadata={"format": "pt"})
