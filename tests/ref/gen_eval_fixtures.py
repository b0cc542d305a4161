#!/usr/bin/env python3
"""Reference fixtures for swift-eval: log-probs and greedy generation of tiny random models,
computed by transformers (eager attention, float32, CPU).

For each ARCH in llama, qwen2, qwen3 this writes tests/fixtures/eval/ARCH/:
  config.json, model.safetensors, generation_config.json   save_pretrained, as users have them
  tokenizer.json, tokenizer_config.json                     a byte-level tokenizer (256 byte
                                                            tokens, no merges) + 3 specials
  ref.safetensors
    prompt_ids [P,TP] int32, prompt_len [P]      P prompts of different lengths, right-padded
    seq_ids [P,TS] int32, seq_len [P]            prompt + a continuation (for scoring)
    logprobs [P,TS,V] float32                    log_softmax of the logits at every position of
                                                 seq_ids[p,:seq_len[p]] (zero past seq_len)
    cont_loglik [P] float64                      sum of log p(seq[t] | seq[<t]) over the
                                                 continuation (t >= prompt_len)
    greedy_ids [P,G] int32, greedy_len [P]       generate(do_sample=False, max_new_tokens=G),
                                                 new tokens only; stops after eos (included)
  llama only: adapter/ (peft save_pretrained of a LoRA r=4, alpha=8, all-linear, random B) and
    lora_logprobs [P,TS,V] in ref.safetensors: the log-probs of the same sequences through
    the PeftModel (swift-eval --adapters, on the fly and merged)

The llama model is the one the issue names: hidden 64, 2 layers, vocab 260 (256 bytes + specials
<|endoftext|> 256, <|im_start|> 257, <|im_end|> 258, <|pad|> 259). qwen2 (QKV bias, tied
embeddings) and qwen3 (QK-norm) are smaller. Norm weights and biases are randomised so that a
kernel ignoring them fails. Run from the repository root: python3 tests/ref/gen_eval_fixtures.py
"""
import json
import os
import shutil

import torch
import transformers
from safetensors.torch import save_file
from peft import LoraConfig, get_peft_model
from transformers import (LlamaConfig, LlamaForCausalLM, Qwen2Config, Qwen2ForCausalLM,
                          Qwen3Config, Qwen3ForCausalLM)

OUT = "tests/fixtures/eval"
V = 260
EOS = 256
PROMPT_LENS = [1, 5, 12, 23]
CONT_LENS = [4, 3, 6, 2]
G = 12

common = dict(vocab_size=V, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
              max_position_embeddings=128, hidden_act="silu", initializer_range=0.2,
              bos_token_id=EOS, eos_token_id=EOS, pad_token_id=259)
ARCHS = {
    "llama": (LlamaConfig, LlamaForCausalLM,
              dict(hidden_size=64, intermediate_size=128, rms_norm_eps=1e-5,
                   tie_word_embeddings=False,
                   rope_parameters={"rope_type": "default", "rope_theta": 10000.0})),
    "qwen2": (Qwen2Config, Qwen2ForCausalLM,
              dict(hidden_size=32, intermediate_size=64, rms_norm_eps=1e-6,
                   tie_word_embeddings=True,
                   rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})),
    "qwen3": (Qwen3Config, Qwen3ForCausalLM,
              dict(hidden_size=32, intermediate_size=64, rms_norm_eps=1e-6, head_dim=16,
                   tie_word_embeddings=False,
                   rope_parameters={"rope_type": "default", "rope_theta": 1000000.0})),
}


def bytes_to_unicode():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, [chr(c) for c in cs]))


def write_tokenizer(d):
    b2u = bytes_to_unicode()
    vocab = {b2u[b]: b for b in range(256)}
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|pad|>"]
    added = [{"id": 256 + i, "content": s, "single_word": False, "lstrip": False,
              "rstrip": False, "normalized": False, "special": True}
             for i, s in enumerate(specials)]
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True,
                          "use_regex": True},
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                           "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True,
                    "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None,
                  "continuing_subword_prefix": None, "end_of_word_suffix": None,
                  "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                  "vocab": vocab, "merges": []},
    }
    with open(os.path.join(d, "tokenizer.json"), "w") as f:
        json.dump(tok, f, ensure_ascii=False)
    chatml = ("{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + "
              "message['content'] + '<|im_end|>' + '\\n'}}{% endfor %}"
              "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}")
    with open(os.path.join(d, "tokenizer_config.json"), "w") as f:
        json.dump({"eos_token": "<|endoftext|>", "pad_token": "<|pad|>",
                   "chat_template": chatml, "model_max_length": 128}, f, indent=1)
    # check that it loads and round-trips
    from tokenizers import Tokenizer
    t = Tokenizer.from_file(os.path.join(d, "tokenizer.json"))
    ids = t.encode("Hi <|im_end|> é").ids
    assert ids == [72, 105, 32, 258, 32, 195, 169], ids


def main():
    for k, (arch, (Cfg, Model, extra)) in enumerate(ARCHS.items()):
        torch.manual_seed(k)
        g = torch.Generator().manual_seed({"llama": 11, "qwen2": 12, "qwen3": 13}[arch])
        cfg = Cfg(**common, **extra)
        cfg._attn_implementation = "eager"
        model = Model(cfg).float().eval()
        with torch.no_grad():
            for n, p in model.named_parameters():
                if "norm" in n:
                    p.copy_(1.0 + 0.2 * torch.randn(p.shape, generator=g))
                elif n.endswith("bias"):
                    p.copy_(0.2 * torch.randn(p.shape, generator=g))
        d = os.path.join(OUT, arch)
        shutil.rmtree(d, ignore_errors=True)
        os.makedirs(d)
        model.save_pretrained(d)
        write_tokenizer(d)

        P = len(PROMPT_LENS)
        TP = max(PROMPT_LENS)
        TS = max(a + b for a, b in zip(PROMPT_LENS, CONT_LENS))
        prompt_ids = torch.zeros(P, TP, dtype=torch.int32)
        seq_ids = torch.zeros(P, TS, dtype=torch.int32)
        logprobs = torch.zeros(P, TS, V)
        cont = torch.zeros(P, dtype=torch.float64)
        greedy = torch.full((P, G), -1, dtype=torch.int32)
        glen = torch.zeros(P, dtype=torch.int32)
        slen = torch.zeros(P, dtype=torch.int32)
        for p, (lp, lc) in enumerate(zip(PROMPT_LENS, CONT_LENS)):
            seq = torch.randint(0, 256, (lp + lc,), generator=g)
            prompt_ids[p, :lp] = seq[:lp].int()
            seq_ids[p, :lp + lc] = seq.int()
            slen[p] = lp + lc
            with torch.no_grad():
                lg = model(input_ids=seq[None]).logits[0].double()
                ls = torch.log_softmax(lg, -1)
                logprobs[p, :lp + lc] = ls.float()
                cont[p] = sum(float(ls[t - 1, seq[t]]) for t in range(lp, lp + lc))
                out = model.generate(input_ids=seq[None, :lp], attention_mask=torch.ones(1, lp),
                                     do_sample=False, max_new_tokens=G, eos_token_id=EOS,
                                     pad_token_id=259)[0, lp:]
            greedy[p, :len(out)] = out.int()
            glen[p] = len(out)
        extra_t = {}
        if arch == "llama":
            pm = get_peft_model(model, LoraConfig(r=4, lora_alpha=8, target_modules="all-linear",
                                                  lora_dropout=0.0, bias="none"))
            with torch.no_grad():
                for n, p_ in pm.named_parameters():
                    if "lora_B" in n:
                        p_.copy_(0.3 * torch.randn(p_.shape, generator=g))
            pm.save_pretrained(os.path.join(d, "adapter"))
            os.remove(os.path.join(d, "adapter", "README.md"))
            lp = torch.zeros(P, TS, V)
            for p in range(P):
                with torch.no_grad():
                    lg = pm(input_ids=seq_ids[p:p + 1, :slen[p]].long()).logits[0].double()
                lp[p, :slen[p]] = torch.log_softmax(lg, -1).float()
            extra_t["lora_logprobs"] = lp.contiguous()
        save_file({**extra_t, "prompt_ids": prompt_ids, "prompt_len": torch.tensor(PROMPT_LENS).int(),
                   "seq_ids": seq_ids, "seq_len": slen, "logprobs": logprobs.contiguous(),
                   "cont_loglik": cont, "greedy_ids": greedy, "greedy_len": glen},
                  os.path.join(d, "ref.safetensors"),
                  metadata={"format": "pt", "transformers": transformers.__version__,
                            "torch": torch.__version__})
        print(arch, "greedy", [greedy[p, :glen[p]].tolist() for p in range(P)],
              "cont_loglik", cont.tolist())


if __name__ == "__main__":
    main()
