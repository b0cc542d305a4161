#!/usr/bin/env python3
"""Reference values for swift-train --rlhf kto, computed by TRL's own KTO loss code
(trl.trainer.kto_trainer.KTOTrainer._compute_loss, TRL 1.16) on the tiny Llama fixture
(tests/fixtures/model/llama) and four rows of kto_en_demo.json (two desirable, two undesirable).
CI never runs this; tests/cli/train-kto-ref.bats compares against what it writes.

Writes tests/fixtures/kto-ref/:
  shard-00000.bin, index.json   the rows as a KTO shard ("kind": "kto", shard version 2 with the
                                label section): one document per row, prompt + completion, mask 1
                                on the completion (EOS included), bytes & 127 as token ids
  expected.json                 per case: the swift-train flags, and for the states "zero"
                                (tests/fixtures/pairs-ref/adapter-zero, lora_B = 0: policy =
                                reference) and "adapter" (the fixture adapter, B != 0): loss,
                                grad_norm and every metric TRL logs, under TRL's names
  grads.safetensors             "<case>.<state>.<lora param>": d loss / d param

The trainer is created with object.__new__ and given the attributes _compute_loss reads; the batch
is TRL's own: prompt_ids/completion_ids per row, KL_completion_ids by TRL's add_kl_completion_ids
(the completions rotated by +1 within the batch), DataCollatorForUnpairedPreference. With a
PeftModel and no ref_model, the reference is the model with adapters disabled (use_adapter). One
micro-batch of the 4 rows, float32, train mode, dropout 0.

Run from the repository root: /work/venv-trl/bin/python tests/ref/gen_kto_fixtures.py [SHARED]
"""
import argparse
import json
import os
import sys
import types
from collections import defaultdict

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from gen_pref_fixtures import (ADAPTER, BOS, EOS, MODEL, accelerator, grads_of,  # noqa: E402
                               ids_of, load_policy)

OUT = "tests/fixtures/kto-ref"
NROWS = 4
CASES = {
    "kto": ("--rlhf kto --beta 0.1", dict(loss_type="kto", beta=0.1, wd=1.0, wu=1.0)),
    "kto-weights": ("--rlhf kto --beta 0.5 --desirable-weight 1.5 --undesirable-weight 0.7",
                    dict(loss_type="kto", beta=0.5, wd=1.5, wu=0.7)),
    "apo-zero-unpaired": ("--rlhf kto --beta 0.1 --loss-type apo_zero_unpaired",
                          dict(loss_type="apo_zero_unpaired", beta=0.1, wd=1.0, wu=1.0)),
}
STATES = {"zero": "tests/fixtures/pairs-ref/adapter-zero", "adapter": ADAPTER}
COMMON = ("--model tests/fixtures/model/llama --tuner lora --per-device-train-batch-size 4 "
          "--gradient-accumulation-steps 1 --max-steps 1 --logging-steps 1 --lora-dropout 0 "
          "--seed 1 -j 1")
SWIFT_KEYS = ["kl", "rewards/chosen", "rewards/rejected", "rewards/margins", "logps/chosen",
              "logps/rejected", "logits/chosen", "logits/rejected"]


def make_rows(shared):
    rows = json.load(open(os.path.join(shared,
                                       "data/datasets/llama-factory-demo/kto_en_demo.json")))
    out, want = [], {True: 2, False: 2}
    for r in rows:
        m = r["messages"]
        if len(m) != 2 or want[r["label"]] == 0:
            continue
        want[r["label"]] -= 1
        i = len(out)
        p = [BOS] + ids_of(m[0]["content"])[:8 + 2 * i] + [10]
        c = ids_of(m[1]["content"])[:14 - 3 * i + (5 if i == 3 else 0)] + [EOS]
        assert min(p[1:] + c[:-1]) > EOS and len(p) + len(c) <= 32
        out.append({"prompt_ids": p, "completion_ids": c, "label": bool(r["label"]),
                    "text": [m[0]["content"][:8 + 2 * i], m[1]["content"][:len(c) - 1]]})
        if len(out) == NROWS:
            return out
    raise SystemExit("not enough rows")


def write_shard(rows):
    from gen_kto_shards import write_dir
    write_dir(OUT, rows, "train")


M64 = (1 << 64) - 1


def train_mix(x):  # lib/train/loader.c
    x = (x + 0x9e3779b97f4a7c15) & M64
    x = ((x ^ (x >> 30)) * 0xbf58476d1ce4e5b9) & M64
    x = ((x ^ (x >> 27)) * 0x94d049bb133111eb) & M64
    return x ^ (x >> 31)


def swift_order(n, seed, epoch):
    """The order swift-train's loader takes the samples in, epoch `epoch` (make_perm): the KL
    rows depend on the order of the batch, so TRL gets the batch in this order."""
    perm, st = list(range(n)), seed * 1000003 + epoch
    for i in range(n, 1, -1):
        st = train_mix(st)
        j = st % i
        perm[i - 1], perm[j] = perm[j], perm[i - 1]
    return perm


def run_kto(prm, adapter, rows):
    from trl.trainer.kto_trainer import DataCollatorForUnpairedPreference, KTOTrainer
    pm = load_policy(adapter, fused=True)
    tr = object.__new__(KTOTrainer)
    tr.model = pm
    tr.ref_model = None
    tr.accelerator = accelerator()
    tr.args = types.SimpleNamespace(gradient_checkpointing_kwargs=None)
    tr.aux_loss_enabled = False
    tr.precompute_ref_logps = False
    tr.calculate_KL = prm["loss_type"] != "apo_zero_unpaired"
    tr.loss_type = prm["loss_type"]
    tr.beta = prm["beta"]
    tr.desirable_weight = prm["wd"]
    tr.undesirable_weight = prm["wu"]
    tr._total_train_tokens = 0
    tr._tp_size = 1
    tr._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
    ex = [{"prompt_ids": x["prompt_ids"], "completion_ids": x["completion_ids"],
           "label": x["label"]} for x in rows]
    if tr.calculate_KL:  # TRL's add_kl_completion_ids on one batch of per_device_train_batch_size
        comp = [x["completion_ids"] for x in ex]
        for x, k in zip(ex, [comp[-1]] + comp[:-1]):
            x["KL_completion_ids"] = k
    batch = DataCollatorForUnpairedPreference(pad_token_id=EOS, max_length=1024)(ex)
    pm.zero_grad()
    loss = tr._compute_loss(pm, batch, False)
    loss.backward()
    g, norm = grads_of(pm)
    metrics = {k: sum(v) / len(v) for k, v in tr._metrics["train"].items()}
    return float(loss), metrics, g, norm


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("shared", nargs="?", default="../shared")
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    import peft
    import transformers
    import trl
    from safetensors.torch import save_file
    os.makedirs(OUT, exist_ok=True)
    rows = make_rows(args.shared)
    json.dump(rows, open(os.path.join(OUT, "rows.json"), "w"), indent=1)
    write_shard(rows)
    # the bats test compares the record of step 2 (0-based step 1 = epoch 1 with 4 rows and a
    # batch of 4, seed 1): TRL's batch is the rows in that order
    order = swift_order(NROWS, 1, 1)
    batch_rows = [rows[i] for i in order]
    exp = {"generator": "tests/ref/gen_kto_fixtures.py",
           "versions": {"trl": trl.__version__, "transformers": transformers.__version__,
                        "peft": peft.__version__, "torch": torch.__version__},
           "trl_function": "trl %s KTOTrainer._compute_loss (batch: DataCollatorForUnpaired"
                           "Preference, KL completions rotated by +1 as add_kl_completion_ids)"
                           % trl.__version__,
           "shard": OUT, "rows": NROWS, "labels": [x["label"] for x in rows],
           "batch_order": order,
           "batch_order_what": "the shard's rows in the order swift-train --seed 1 takes them at "
                               "step 2 (epoch 1): TRL's batch, whose KL rows pair row i's prompt "
                               "with row i-1's completion in this order",
           "common_flags": COMMON,
           "states": {"zero": {"adapter": STATES["zero"],
                               "what": "lora_B = 0: policy = reference (kto loss 0.5 per row)"},
                      "adapter": {"adapter": STATES["adapter"],
                                  "what": "the fixture adapter, lora_B != 0"}},
           "swift_keys": SWIFT_KEYS, "cases": {}}
    grads = {}
    for case, (flags, prm) in CASES.items():
        c = {"flags": flags, "params": prm}
        for st, ad in STATES.items():
            loss, m, g, norm = run_kto(prm, ad, batch_rows)
            c[st] = {"loss": loss, "grad_norm": norm, "metrics": m}
            grads.update({"%s.%s.%s" % (case, st, k): v for k, v in g.items()})
            print("%-18s %-8s loss %.7f grad_norm %.7f kl %.7f" % (case, st, loss, norm,
                                                                   m.get("kl", 0)))
        exp["cases"][case] = c
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(exp, f, indent=1)
        f.write("\n")
    save_file({k: v.contiguous() for k, v in sorted(grads.items())},
              os.path.join(OUT, "grads.safetensors"), metadata={"format": "pt"})


if __name__ == "__main__":
    main()
