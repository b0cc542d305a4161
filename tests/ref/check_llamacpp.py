#!/usr/bin/env python3
"""Does llama.cpp accept our GGUF files and compute the same model? (Printed, not committed.)

    pip install --no-deps llama-cpp-python          # builds llama.cpp from source (cmake)
    make build/bin/swift-export && python3 tests/ref/check_llamacpp.py [SHARED]

For tiny random llama (Llama 3 tokenizer), qwen2 and qwen3 (Qwen3 tokenizer) models made with
transformers (tests/ref/gen_export.py's make_model, float32), every --dtype we write is exported
by build/bin/swift-export and loaded by llama.cpp (llama-cpp-python's bundled llama.cpp):
  - llama.cpp's tokenizer, reading our tokenizer.ggml.* keys, must give the Hugging Face
    tokenizer's ids on a mixed text (pre-tokenizer, merges, special tokens; BOS aside: the shared
    llama3 tokenizer.json adds none, and with no add_bos_token in tokenizer_config.json neither
    convert_hf_to_gguf nor we write the key, so llama.cpp applies its llama-bpe default);
  - `--dtype q4_k_m`: the type of every tensor equals what llama.cpp's own quantizer
    (llama_model_quantize, LLAMA_FTYPE_MOSTLY_Q4_K_M) writes from our F32 export of the same
    model, on an 8-layer model whose rows fit K-quants (hidden 256, ffn 512), untied and tied;
  - llama.cpp's logits for those ids are compared with transformers' (fp32, eager): the relative
    max difference is printed per dtype, with a bound per type (F32 tight; F16/BF16/Q8_0 looser;
    4-bit types loosest) so a wrong permutation or key fails loudly.
"""
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gen_export import make_model  # noqa: E402

SHARED = sys.argv[1] if len(sys.argv) > 1 else "../shared"
BIN = os.path.abspath("build/bin/swift-export")
TEXT = "Hello world! The quick brown fox, 123 4567 — naïve café 你好 <|im_start|>user"
BOUND = {"f32": 1e-3, "f16": 2e-2, "bf16": 5e-2, "q8_0": 5e-2, "q6_k": 0.1, "q4_0": 0.5,
         "q4_k": 0.5, "q4_k_m": 0.5}


def q4_k_m_mix(tmp):
    import llama_cpp
    from gguf import GGUFReader
    bad = 0
    for tie in (False, True):
        d = os.path.join(tmp, f"mix-{tie}")
        make_model("llama", os.path.join(SHARED, "data/tokenizers/llama3"), d, 256, 8, 4, 2, 512,
                   tie, dtype=torch.float32)
        f32 = os.path.join(tmp, "mix-f32.gguf")
        ours = os.path.join(tmp, "mix-ours.gguf")
        theirs = os.path.join(tmp, "mix-theirs.gguf")
        for o, dt in ((f32, "f32"), (ours, "q4_k_m")):
            subprocess.run([BIN, d, "--to", "gguf", "--dtype", dt, "--force", "-o", o],
                           check=True, stdout=subprocess.DEVNULL)
        params = llama_cpp.llama_model_quantize_default_params()
        params.ftype = 15  # LLAMA_FTYPE_MOSTLY_Q4_K_M
        params.nthread = 2
        rc = llama_cpp.llama_model_quantize(f32.encode(), theirs.encode(), params)
        assert rc == 0, rc
        a = {t.name: t.tensor_type.name for t in GGUFReader(ours).tensors}
        b = {t.name: t.tensor_type.name for t in GGUFReader(theirs).tensors}
        same = a == b
        bad += not same
        mix = sorted({f"{n.split('.')[-2] if n.startswith('blk') else n}:{t}" for n, t in a.items()
                      if t != "Q4_K" and t != "F32"})
        print(f"q4_k_m type mix (tied={tie}): {'equal to' if same else 'DIFFERS from'} "
              f"llama.cpp's quantizer on {len(a)} tensors; non-Q4_K: {', '.join(mix)}")
        if not same:
            for n in sorted(set(a) | set(b)):
                if a.get(n) != b.get(n):
                    print(f"   {n}: ours {a.get(n)} llama.cpp {b.get(n)}")
    return bad


def main():
    from llama_cpp import Llama
    from transformers import AutoTokenizer
    models = [("llama", "llama3"), ("qwen2", "qwen3"), ("qwen3", "qwen3")]
    bad = 0
    with tempfile.TemporaryDirectory() as tmp:
        bad += q4_k_m_mix(tmp)
        for arch, tok in models:
            d = os.path.join(tmp, arch)
            m = make_model(arch, os.path.join(SHARED, "data/tokenizers", tok), d, 64, 2, 4, 2, 128,
                           False, dtype=torch.float32)
            m.eval()
            hf = AutoTokenizer.from_pretrained(d)
            ids = hf(TEXT, add_special_tokens=False)["input_ids"]
            with torch.no_grad():
                ref = m(torch.tensor([ids])).logits[0].numpy()
            for dt in BOUND:
                g = os.path.join(tmp, f"{arch}-{dt}.gguf")
                subprocess.run([BIN, d, "--to", "gguf", "--dtype", dt, "-o", g], check=True,
                               stdout=subprocess.DEVNULL)
                llm = Llama(model_path=g, n_ctx=128, logits_all=True, verbose=False, n_threads=2)
                lids = llm.tokenize(TEXT.encode(), add_bos=False, special=True)
                llm.reset()
                llm.eval(ids)
                got = np.array(llm.scores[:len(ids)])
                rel = float(np.abs(got - ref).max() / np.abs(ref).max())
                ok_tok = lids == ids
                ok = ok_tok and rel < BOUND[dt]
                bad += not ok
                print(f"{arch:6} {dt:5} tokens {'equal' if ok_tok else 'DIFFER'} ({len(ids)}), "
                      f"logits max rel diff {rel:.2e} (bound {BOUND[dt]:g}) "
                      f"{'ok' if ok else 'FAIL'}")
                if not ok_tok:
                    print("   hf   ", ids)
                    print("   llama", lids)
                del llm
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
