#!/usr/bin/env python3
"""Reference values for the preference objectives (swift-train --rlhf dpo|orpo|simpo|cpo), computed
by TRL's own loss code on the tiny Llama fixture (tests/fixtures/model/llama) and four pairs of
dpo_en_demo.json. CI never runs this; tests/cli/train-pref-ref.bats compares against what it writes.

Writes tests/fixtures/pairs-ref/:
  shard-00000.bin, index.json   the pairs as a pair shard ("kind": "pairs"): one sample per pair,
                                doc 0 = prompt+chosen, doc 1 = prompt+rejected, mask 1 on the
                                response tokens (EOS included), written with struct+zlib
  adapter-zero/                 the fixture adapter (tests/fixtures/model/llama/adapter) with every
                                lora_B set to 0: policy = reference, gradient still defined by A
  expected.json                 per case: the swift-train flags, and for the states "zero"
                                (adapter-zero) and "adapter" (the fixture adapter, B != 0): loss,
                                grad_norm and every metric TRL logs, under TRL's names; for ORPO,
                                CPO, SimPO also "swift_convention": logits/* as DPO defines them
  grads.safetensors             "<case>.<state>.<lora param>" (peft's saved names): d loss / d param

Which TRL code computes what (the version matters, see tests/ref/README-train.md):
  dpo-* cases   TRL 0.19.1 (a DPOTrainer of the 0.x line, whose rpo_alpha and cDPO label_smoothing
                ms-swift's --rpo_alpha / --label_smoothing pass through; TRL 1.x dropped both): DPOTrainer.get_batch_loss_metrics = concatenated_forward +
                compute_ref_log_probs (adapters disabled) + dpo_loss, batch from its
                DataCollatorForPreference. Needs `pip install --no-deps --target DIR trl==0.19.1`
                (--trl-old DIR, default /tmp/trl-old); run in a subprocess, with two import shims
                for transformers 5 (an alias and stubs for optional imports, nothing numeric).
                Cross-check: the same cases with TRL 1.16's DPOTrainer._compute_loss (sigmoid, hinge,
                ipo, robust; rpo as loss_type [sigmoid, sft] with weights [1, alpha]; 1.16 has no cDPO)
                go under "trl_1_16".
  orpo, cpo, simpo   TRL 1.16 trl.experimental ORPOTrainer / CPOTrainer get_batch_loss_metrics
                (concatenated_forward + odds_ratio_loss / cpo_loss), batch from
                DPODataCollatorWithPadding.
The trainers are created with object.__new__ and given the attributes their loss code reads
(constructing them would tokenize text; with a PeftModel that already has an adapter TRL 1.16's
DPOTrainer would also copy it as the reference, while here the reference is the base model with
adapters disabled, as for a new adapter and as the issue asks). One micro-batch of all 4 pairs,
gradient accumulation 1, float32, train mode with dropout 0.

Run from the repository root: /work/venv-trl/bin/python tests/ref/gen_pref_fixtures.py [SHARED]
"""
import argparse
import importlib.machinery
import json
import os
import shutil
import subprocess
import sys
import types
from collections import defaultdict

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
OUT = "tests/fixtures/pairs-ref"
MODEL = "tests/fixtures/model/llama"
ADAPTER = "tests/fixtures/model/llama/adapter"
BOS, EOS = 1, 2
NPAIRS = 4

# case -> (swift-train flags, objective parameters)
CASES = {
    "dpo-sigmoid": ("--rlhf dpo --beta 0.1 --loss-type sigmoid",
                    dict(kind="dpo", loss_type="sigmoid", beta=0.1)),
    "dpo-ipo": ("--rlhf dpo --beta 0.1 --loss-type ipo",
                dict(kind="dpo", loss_type="ipo", beta=0.1)),
    "dpo-hinge": ("--rlhf dpo --beta 0.1 --loss-type hinge",
                  dict(kind="dpo", loss_type="hinge", beta=0.1)),
    "dpo-label-smoothing": ("--rlhf dpo --beta 0.1 --loss-type sigmoid --label-smoothing 0.2",
                            dict(kind="dpo", loss_type="sigmoid", beta=0.1, label_smoothing=0.2)),
    "dpo-robust": ("--rlhf dpo --beta 0.1 --loss-type robust --label-smoothing 0.2",
                   dict(kind="dpo", loss_type="robust", beta=0.1, label_smoothing=0.2)),
    "dpo-rpo": ("--rlhf dpo --beta 0.1 --loss-type sigmoid --rpo-alpha 0.5",
                dict(kind="dpo", loss_type="sigmoid", beta=0.1, rpo_alpha=0.5)),
    "simpo": ("--rlhf simpo --beta 2.0 --simpo-gamma 0.5 --cpo-alpha 0",
              dict(kind="cpo", loss_type="simpo", beta=2.0, simpo_gamma=0.5, cpo_alpha=0.0)),
    "orpo": ("--rlhf orpo --beta 0.1", dict(kind="orpo", beta=0.1)),
    "cpo": ("--rlhf cpo --beta 0.1 --cpo-alpha 1.0",
            dict(kind="cpo", loss_type="sigmoid", beta=0.1, cpo_alpha=1.0)),
}
STATES = {"zero": OUT + "/adapter-zero", "adapter": ADAPTER}
COMMON = ("--model tests/fixtures/model/llama --tuner lora --per-device-train-batch-size 4 "
          "--gradient-accumulation-steps 1 --max-steps 1 --logging-steps 1 --lora-dropout 0 "
          "--seed 1 -j 1")
# TRL's metric name -> swift-train's logging.jsonl key (the same names; TRL has more)
SWIFT_KEYS = ["rewards/chosen", "rewards/rejected", "rewards/accuracies", "rewards/margins",
              "logps/chosen", "logps/rejected", "logits/chosen", "logits/rejected", "nll_loss"]


# ---------------------------------------------------------------- data


def ids_of(text):
    return [b & 127 for b in text.encode("utf-8")]


def make_pairs(shared):
    rows = json.load(open(os.path.join(shared,
                                       "data/datasets/llama-factory-demo/dpo_en_demo.json")))
    pairs = []
    for r in rows:
        if len(r["conversations"]) != 1:
            continue
        i = len(pairs)
        # prompt: BOS, the question's first 8+i bytes, newline; responses cut to different
        # lengths (chosen shorter than rejected in some pairs, longer in others) + EOS
        p = [BOS] + ids_of(r["conversations"][0]["value"])[:8 + i] + [10]
        c = ids_of(r["chosen"]["value"])[:9 + 3 * i] + [EOS]
        j = ids_of(r["rejected"]["value"])[:17 - 2 * i] + [EOS]
        assert min(p[1:] + c[:-1] + j[:-1]) > EOS and len(p) + max(len(c), len(j)) <= 32
        pairs.append({"prompt_ids": p, "chosen_ids": c, "rejected_ids": j,
                      "text": [r["conversations"][0]["value"][:8 + i],
                               r["chosen"]["value"][:9 + 3 * i],
                               r["rejected"]["value"][:17 - 2 * i]]})
        if len(pairs) == NPAIRS:
            return pairs
    raise SystemExit("not enough pairs")


def write_shard(pairs):
    from gen_train_fixtures import shard
    samples = []
    for x in pairs:
        p, c, j = x["prompt_ids"], x["chosen_ids"], x["rejected_ids"]
        ids = p + c + p + j
        mask = [0] * len(p) + [1] * len(c) + [0] * len(p) + [1] * len(j)
        samples.append((ids, mask, [len(p) + len(c), len(p) + len(j)]))
    data, crc, ntok, ndocs = shard(samples)
    with open(os.path.join(OUT, "shard-00000.bin"), "wb") as f:
        f.write(data)
    ix = {"format": "swift-shards", "version": 1, "kind": "pairs", "split": "train",
          "tokenizer": "bytes&127", "template": "none", "loss": "default",
          "truncation": "delete", "packing": "none", "max_length": 32, "vocab_size": 128,
          "seed": 1,
          "counts": {"samples": len(samples), "documents": ndocs, "dropped": 0, "truncated": 0,
                     "tokens": ntok, "trained_tokens": sum(sum(s[1]) for s in samples)},
          "shards": [{"file": "shard-00000.bin", "samples": len(samples), "tokens": ntok,
                      "crc32": crc}]}
    with open(os.path.join(OUT, "index.json"), "w") as f:
        json.dump(ix, f, indent=1)


def write_zero_adapter():
    from safetensors.torch import load_file, save_file
    d = STATES["zero"]
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    shutil.copy(os.path.join(ADAPTER, "adapter_config.json"), d)
    t = load_file(os.path.join(ADAPTER, "adapter_model.safetensors"))
    t = {k: (torch.zeros_like(v) if "lora_B" in k else v) for k, v in t.items()}
    save_file(t, os.path.join(d, "adapter_model.safetensors"), metadata={"format": "pt"})


# ---------------------------------------------------------------- model


def load_policy(adapter, fused=False):
    """The fixture Llama (float32, eager) with a peft adapter, trainable, train mode."""
    from transformers import LlamaForCausalLM
    from peft import PeftModel
    base = LlamaForCausalLM.from_pretrained(MODEL, torch_dtype=torch.float32,
                                            attn_implementation="eager")
    if fused:  # TRL 1.16's DPOTrainer patches the base model's forward before peft wraps it
        from trl.trainer.utils import add_fused_lm_head
        add_fused_lm_head(base, outputs=("log_probs", "entropy", "mean_logits", "is_top1"))
    pm = PeftModel.from_pretrained(base, adapter, is_trainable=True)
    pm.train()
    return pm


def grads_of(pm):
    named = [(n, p) for n, p in pm.named_parameters() if p.requires_grad]
    g = {n.replace(".default", ""): p.grad.detach().clone().contiguous() for n, p in named}
    norm = torch.sqrt(sum((x.double() ** 2).sum() for x in g.values())).item()
    return g, norm


def accelerator():
    from accelerate import Accelerator
    return Accelerator(cpu=True)


# ---------------------------------------------------------------- TRL 1.16: ORPO, CPO, SimPO


def cpo_orpo_batch(pairs):
    from trl.experimental.utils import DPODataCollatorWithPadding
    feats = []
    for x in pairs:
        p = x["prompt_ids"]
        f = {"prompt_input_ids": p, "prompt_attention_mask": [1] * len(p)}
        for k in ("chosen", "rejected"):
            ids = p + x[k + "_ids"]
            f[k + "_input_ids"] = ids
            f[k + "_attention_mask"] = [1] * len(ids)
            f[k + "_labels"] = [-100] * len(p) + x[k + "_ids"]
        feats.append(f)
    return DPODataCollatorWithPadding(pad_token_id=EOS)(feats)


def run_cpo_orpo(prm, adapter, pairs):
    pm = load_policy(adapter)
    if prm["kind"] == "orpo":
        from trl.experimental.orpo import ORPOTrainer as T
    else:
        from trl.experimental.cpo import CPOTrainer as T
    tr = object.__new__(T)
    tr.accelerator = accelerator()
    tr.is_encoder_decoder = False
    tr.aux_loss_enabled = False
    tr.beta = prm["beta"]
    tr.padding_value = EOS  # ORPO's name for it
    tr.pad_token_id = EOS  # CPO's
    tr.label_pad_token_id = -100
    if prm["kind"] == "cpo":
        tr.loss_type = prm["loss_type"]
        tr.cpo_alpha = prm["cpo_alpha"]
        tr.simpo_gamma = prm.get("simpo_gamma", 0.5)
        tr.label_smoothing = 0.0
        tr.alpha = 0.0  # AlphaPO off
    pm.zero_grad()
    loss, metrics = tr.get_batch_loss_metrics(pm, cpo_orpo_batch(pairs), train_eval="train")
    loss.backward()
    g, norm = grads_of(pm)
    return float(loss), {k: float(v) for k, v in metrics.items()}, g, norm, response_logits(pm, pairs)


def response_logits(pm, pairs):
    """logits/chosen, logits/rejected as DPOTrainer defines them (mean over the response tokens'
    predicting positions and the vocabulary): what swift-train logs for every objective. TRL's
    CPO/ORPO trainers average over every position of the padded rows instead (README-train.md)."""
    out = {}
    with torch.no_grad():
        for k in ("chosen", "rejected"):
            tot, n = 0.0, 0
            for x in pairs:
                p, r = x["prompt_ids"], x[k + "_ids"]
                lg = pm(input_ids=torch.tensor([p + r])).logits[0].double()
                tot += lg[len(p) - 1:len(p) + len(r) - 1].sum().item()
                n += len(r) * lg.shape[-1]
            out["logits/" + k] = tot / n
    return out


# ---------------------------------------------------------------- TRL 1.16: DPO cross-check


def run_dpo_116(prm, adapter, pairs):
    from trl.trainer.dpo_trainer import DataCollatorForPreference, DPOTrainer
    pm = load_policy(adapter, fused=True)
    tr = object.__new__(DPOTrainer)
    tr.model = pm
    tr.ref_model = None
    tr.accelerator = accelerator()
    tr.args = types.SimpleNamespace(gradient_checkpointing_kwargs=None)
    tr.aux_loss_enabled = False
    tr.ld_alpha = None
    tr.precompute_ref_logps = False
    tr.f_divergence_type = "reverse_kl"
    tr.beta = prm["beta"]
    tr.label_smoothing = prm.get("label_smoothing", 0.0)
    tr.use_weighting = False
    tr._total_train_tokens = 0
    tr._tp_size = 1
    if "rpo_alpha" in prm:  # TRL 1.x spells RPO as a second loss
        tr.loss_types, tr.loss_weights = [prm["loss_type"], "sft"], [1.0, prm["rpo_alpha"]]
    else:
        tr.loss_types, tr.loss_weights = [prm["loss_type"]], [1.0]
    batch = DataCollatorForPreference(pad_token_id=EOS)(
        [{k: x[k] for k in ("prompt_ids", "chosen_ids", "rejected_ids")} for x in pairs])
    tr._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
    pm.zero_grad()
    loss = tr._compute_loss(pm, batch, False)
    loss.backward()
    g, norm = grads_of(pm)
    metrics = {k: sum(v) / len(v) for k, v in tr._metrics["train"].items()}
    if "rpo_alpha" in prm:  # the sft term alone: what TRL 0.x logs as nll_loss (1.16 does not)
        tr.loss_types, tr.loss_weights = ["sft"], [1.0]
        tr._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
        with torch.no_grad():
            metrics["nll_loss"] = float(tr._compute_loss(pm, batch, False))
    return float(loss), metrics, g, norm


# ---------------------------------------------------------------- TRL 0.19.1: DPO (subprocess)


def shim_old_trl(path):
    """Import TRL 0.19.1 beside transformers 5: an alias for a renamed mapping and empty modules
    for optional imports its callbacks pull in (mergekit, llm_blender). No numeric code changes."""
    sys.path.insert(0, path)
    import transformers.models.auto.modeling_auto as m
    if not hasattr(m, "MODEL_FOR_VISION_2_SEQ_MAPPING_NAMES"):
        m.MODEL_FOR_VISION_2_SEQ_MAPPING_NAMES = m.MODEL_FOR_IMAGE_TEXT_TO_TEXT_MAPPING_NAMES
    mk = types.ModuleType("trl.mergekit_utils")
    mk.MergeConfig, mk.merge_models, mk.upload_model_to_hf = object, None, None
    sys.modules["trl.mergekit_utils"] = mk
    lb = types.ModuleType("llm_blender")
    lb.__spec__ = importlib.machinery.ModuleSpec("llm_blender", None)
    sys.modules.setdefault("llm_blender", lb)
    import trl
    assert trl.__version__ == "0.19.1", trl.__version__


def run_dpo_019(prm, adapter, pairs):
    from trl.trainer.dpo_trainer import DataCollatorForPreference, DPOTrainer
    pm = load_policy(adapter)
    tr = object.__new__(DPOTrainer)
    tr.model = pm
    tr.ref_model = None
    tr.accelerator = accelerator()
    tr.args = types.SimpleNamespace(rpo_alpha=prm.get("rpo_alpha"), ld_alpha=None,
                                    use_liger_loss=False)
    tr.is_encoder_decoder = False
    tr.is_vision_model = False
    tr.padding_value = EOS
    tr.label_pad_token_id = -100
    tr.max_length = None
    tr.truncation_mode = "keep_end"
    tr.use_logits_to_keep = False
    tr.padding_free = False
    tr.aux_loss_enabled = False
    tr.use_weighting = False
    tr.loss_type = prm["loss_type"]
    tr.beta = prm["beta"]
    tr.label_smoothing = prm.get("label_smoothing", 0.0)
    tr.reference_free = False
    tr.f_divergence_type = "reverse_kl"
    tr.f_divergence_params = {}
    tr.is_peft_model = True
    tr.ref_adapter_name = None
    tr.model_adapter_name = None
    tr._peft_has_been_casted_to_bf16 = False
    batch = DataCollatorForPreference(pad_token_id=EOS)(
        [{k: x[k] for k in ("prompt_input_ids", "chosen_input_ids", "rejected_input_ids")}
         for x in [{"prompt_input_ids": p["prompt_ids"], "chosen_input_ids": p["chosen_ids"],
                    "rejected_input_ids": p["rejected_ids"]} for p in pairs]])
    pm.zero_grad()
    loss, metrics = tr.get_batch_loss_metrics(pm, batch, train_eval="train")
    loss.backward()
    g, norm = grads_of(pm)
    return float(loss), {k: float(v) for k, v in metrics.items()}, g, norm


def old_part(args):
    """Subprocess: every dpo-* case with TRL 0.19.1; JSON on stdout, gradients to a file."""
    shim_old_trl(args.trl_old)
    import trl
    from safetensors.torch import save_file
    pairs = json.load(open(os.path.join(OUT, "pairs.json")))
    res, grads = {"trl": trl.__version__}, {}
    for case, (_, prm) in CASES.items():
        if prm["kind"] != "dpo":
            continue
        for st, ad in STATES.items():
            loss, m, g, norm = run_dpo_019(prm, ad, pairs)
            res[case + "." + st] = {"loss": loss, "grad_norm": norm, "metrics": m}
            grads.update({"%s.%s.%s" % (case, st, k): v for k, v in g.items()})
    save_file(grads, args.old_grads)
    json.dump(res, sys.stdout)


# ---------------------------------------------------------------- main


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shared", nargs="?", default="../shared")
    ap.add_argument("--trl-old", default="/tmp/trl-old",
                    help="pip install --no-deps --target DIR trl==0.19.1")
    ap.add_argument("--old-part", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--old-grads", default="/tmp/pref-old-grads.safetensors")
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    if args.old_part:
        return old_part(args)

    import peft
    import transformers
    import trl
    from safetensors.torch import load_file, save_file
    os.makedirs(OUT, exist_ok=True)
    pairs = make_pairs(args.shared)
    json.dump(pairs, open(os.path.join(OUT, "pairs.json"), "w"), indent=1)
    write_shard(pairs)
    write_zero_adapter()

    out = subprocess.run([sys.executable, __file__, args.shared, "--old-part",
                          "--trl-old", args.trl_old, "--old-grads", args.old_grads],
                         check=True, stdout=subprocess.PIPE).stdout
    old = json.loads(out)
    grads = load_file(args.old_grads)

    exp = {"generator": "tests/ref/gen_pref_fixtures.py",
           "versions": {"trl": trl.__version__, "trl_dpo": old["trl"],
                        "transformers": transformers.__version__, "peft": peft.__version__,
                        "torch": torch.__version__},
           "shard": OUT, "pairs": NPAIRS, "common_flags": COMMON,
           "states": {"zero": {"adapter": STATES["zero"],
                               "what": "lora_B = 0: policy = reference (DPO sigmoid loss = ln 2)"},
                      "adapter": {"adapter": STATES["adapter"],
                                  "what": "the fixture adapter, lora_B != 0: policy != reference"}},
           "swift_keys": SWIFT_KEYS, "cases": {}}
    for case, (flags, prm) in CASES.items():
        c = {"flags": flags, "params": prm}
        for st, ad in STATES.items():
            if prm["kind"] == "dpo":
                r = old[case + "." + st]
                r["trl_function"] = ("trl 0.19.1 DPOTrainer.get_batch_loss_metrics "
                                     "(concatenated_forward, compute_ref_log_probs, dpo_loss)")
                if prm["loss_type"] != "sigmoid" or "label_smoothing" not in prm:
                    loss, m, g, norm = run_dpo_116(prm, ad, pairs)
                    r["trl_1_16"] = {"loss": loss, "grad_norm": norm, "metrics": m,
                                     "trl_function": "trl %s DPOTrainer._compute_loss"
                                     % trl.__version__}
                    for k, v in g.items():
                        d = (v - grads["%s.%s.%s" % (case, st, k)]).abs().max().item()
                        assert d < 1e-5 * max(1.0, v.abs().max().item()), (case, st, k, d)
            else:
                loss, m, g, norm, resp = run_cpo_orpo(prm, ad, pairs)
                fn = {"orpo": "ORPOTrainer.get_batch_loss_metrics (concatenated_forward, "
                              "odds_ratio_loss)",
                      "cpo": "CPOTrainer.get_batch_loss_metrics (concatenated_forward, cpo_loss)"}
                r = {"loss": loss, "grad_norm": norm, "metrics": m,
                     "trl_function": "trl %s trl.experimental.%s" % (trl.__version__,
                                                                     fn[prm["kind"]]),
                     "swift_convention": resp}
                grads.update({"%s.%s.%s" % (case, st, k): v for k, v in g.items()})
            c[st] = r
            print("%-20s %-8s loss %.7f grad_norm %.7f" % (case, st, r["loss"], r["grad_norm"]))
        exp["cases"][case] = c
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(exp, f, indent=1)
        f.write("\n")
    save_file({k: v.contiguous() for k, v in sorted(grads.items())},
              os.path.join(OUT, "grads.safetensors"),
              metadata={"format": "pt", "trl": trl.__version__, "trl_dpo": old["trl"]})


if __name__ == "__main__":
    main()
