#!/usr/bin/env python3
"""Small GGUF seeds for tests/fuzz/corpus/gguf, written by PyPI gguf's GGUFWriter."""
import numpy as np
from gguf import GGUFWriter, GGMLQuantizationType

out = "tests/fuzz/corpus/gguf/"
w = GGUFWriter(out + "small.gguf", "llama")
w.add_block_count(2)
w.add_float32("llama.attention.layer_norm_rms_epsilon", 1e-5)
w.add_bool("tokenizer.ggml.add_bos_token", True)
w.add_array("tokenizer.ggml.tokens", ["a", "b", "\u0120c"])
w.add_array("tokenizer.ggml.token_type", [1, 3, 5])
w.add_tensor("x", np.arange(8, dtype=np.float32).reshape(2, 4))
w.add_tensor("h", np.ones(32, dtype=np.float16))
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
w = GGUFWriter(out + "aligned64.gguf", "qwen2")
w.add_uint32("general.alignment", 64)
w.add_string("general.name", "x")
w.add_tensor("q", np.zeros((1, 34), dtype=np.uint8), raw_dtype=GGMLQuantizationType.Q8_0)
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
