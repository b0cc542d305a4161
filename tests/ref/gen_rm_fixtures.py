#!/usr/bin/env python3
"""Reference values for reward models (swift-train --rlhf rm, lib/train/rm.c): reward models our
swift-train saved, loaded by transformers (AutoModelForSequenceClassification) and peft, and TRL's
RewardTrainer loss on one batch. CI never runs this; tests/unit/test_score.c and
tests/cli/train-rm.bats compare against what it writes.

Writes tests/fixtures/rm/:
  full/          config.json + model.safetensors of `swift-train --tuner full --rlhf rm` (4 steps on
                 tests/fixtures/pairs from the tiny Llama fixture): LlamaForSequenceClassification
  lora/          adapter_config.json + adapter_model.safetensors of `swift-train --rlhf rm` (LoRA,
                 4 steps): the score head in modules_to_save, as peft writes it for SEQ_CLS
  expected.json  "rows": the 8 token rows of tests/fixtures/pairs-ref/pairs.json (prompt+chosen,
                 prompt+rejected of each of its 4 pairs); "pad_token_id"; "full" and "lora": the
                 score of each row as transformers computes it (the model's logits, one padded
                 batch); "trl_full": TRL 1.16 RewardTrainer.compute_loss on one batch of the 4
                 pairs (DataCollatorForPreference) at the full model: loss and the metrics it logs
                 (accuracy, margin, mean_reward) and grad_norm, the norm of autograd's gradient
                 of that loss over every parameter; "trl_full_center": the same with
                 center_rewards_coefficient 0.01; "trl_lora": the same at the lora/ adapter
                 (PeftModel, LoRA dropout off as --lora-dropout 0), grad_norm over what peft
                 trains (the LoRA A and B and the score head's modules_to_save copy).

Run from the repository root after `make`:
    /work/venv-trl/bin/python tests/ref/gen_rm_fixtures.py [--bin build/bin]
"""
import argparse
import collections
import json
import os
import shutil
import subprocess
import tempfile

import torch
from peft import PeftModel
from transformers import AutoModelForSequenceClassification
from trl import RewardConfig, RewardTrainer
from trl.trainer.reward_trainer import DataCollatorForPreference

BASE = "tests/fixtures/model/llama"
OUT = "tests/fixtures/rm"


def train(binary, out, extra):
    cmd = [os.path.join(binary, "swift-train"), "--model", BASE, "-o", out, "--rlhf", "rm",
           "--max-steps", "4", "--per-device-train-batch-size", "2", "-j", "1", "--seed", "42",
           *extra, "tests/fixtures/pairs"]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return os.path.join(out, "checkpoint-4")


def copy(src, dst, names):
    os.makedirs(dst, exist_ok=True)
    for n in names:
        shutil.copyfile(os.path.join(src, n), os.path.join(dst, n))


def scores(model, rows, pad):
    T = max(len(r) for r in rows)
    ids = torch.tensor([r + [pad] * (T - len(r)) for r in rows])
    mask = torch.tensor([[1] * len(r) + [0] * (T - len(r)) for r in rows])
    with torch.no_grad():
        return model(input_ids=ids, attention_mask=mask).logits.squeeze(-1).tolist()


class Acc:
    def gather_for_metrics(self, x):
        return x

    def gather(self, x):
        return x


def trl_loss(model, pairs, pad, center=None):
    """RewardTrainer.compute_loss as TRL runs it, on one batch (gradient accumulation 1)."""
    tr = object.__new__(RewardTrainer)
    tr.model = model
    tr.args = RewardConfig(output_dir=tempfile.mkdtemp(), report_to=[], bf16=False, use_cpu=True,
                           center_rewards_coefficient=center)
    tr.accelerator = Acc()
    tr._metrics = {"train": collections.defaultdict(list), "eval": collections.defaultdict(list)}
    tr._total_train_tokens = 0
    tr._tp_size = 1
    batch = DataCollatorForPreference(pad_token_id=pad)(
        [{"chosen_ids": p["prompt_ids"] + p["chosen_ids"],
          "rejected_ids": p["prompt_ids"] + p["rejected_ids"]} for p in pairs])
    batch.pop("margin", None)
    model.train()
    model.zero_grad()
    loss = tr.compute_loss(model, batch)
    loss.backward()
    gn = torch.sqrt(sum((p.grad.double() ** 2).sum() for p in model.parameters()
                        if p.grad is not None)).item()
    m = tr._metrics["train"]
    return {"loss": loss.item(), "accuracy": m["accuracy"][0], "margin": m["margin"][0],
            "mean_reward": m["mean_reward"][0], "grad_norm": gn}


def trl_lora(pairs, pad):
    """trl_loss at the lora/ adapter, trainable as peft trains it, dropout off."""
    base = AutoModelForSequenceClassification.from_pretrained(BASE, num_labels=1, pad_token_id=pad,
                                                              dtype=torch.float32)
    lm = PeftModel.from_pretrained(base, os.path.join(OUT, "lora"), is_trainable=True)
    for mod in lm.modules():
        if hasattr(mod, "lora_dropout"):
            for k in list(mod.lora_dropout.keys()):
                mod.lora_dropout[k] = torch.nn.Identity()
    return trl_loss(lm, pairs, pad)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", default="build/bin")
    a = ap.parse_args()
    torch.manual_seed(0)
    tmp = tempfile.mkdtemp()
    full = train(a.bin, os.path.join(tmp, "full"), ["--tuner", "full", "--learning-rate", "1e-3"])
    lora = train(a.bin, os.path.join(tmp, "lora"), ["--learning-rate", "1e-2"])
    copy(full, os.path.join(OUT, "full"), ["config.json", "model.safetensors"])
    copy(lora, os.path.join(OUT, "lora"), ["adapter_config.json", "adapter_model.safetensors"])

    pairs = json.load(open("tests/fixtures/pairs-ref/pairs.json"))
    rows = []
    for p in pairs:
        rows += [p["prompt_ids"] + p["chosen_ids"], p["prompt_ids"] + p["rejected_ids"]]

    fm = AutoModelForSequenceClassification.from_pretrained(os.path.join(OUT, "full"),
                                                            dtype=torch.float32)
    assert fm.config.num_labels == 1, fm.config.num_labels
    assert type(fm).__name__ == "LlamaForSequenceClassification", type(fm).__name__
    pad = fm.config.pad_token_id
    fm.eval()
    exp = {"rows": rows, "pad_token_id": pad, "full": scores(fm, rows, pad)}

    base = AutoModelForSequenceClassification.from_pretrained(BASE, num_labels=1, pad_token_id=pad,
                                                              dtype=torch.float32)
    lm = PeftModel.from_pretrained(base, os.path.join(OUT, "lora"))
    lm.eval()
    exp["lora"] = scores(lm, rows, pad)

    exp["trl_full"] = trl_loss(fm, pairs, pad)
    exp["trl_full_center"] = trl_loss(fm, pairs, pad, center=0.01)
    exp["trl_full_center"]["center_rewards_coefficient"] = 0.01
    exp["trl_lora"] = trl_lora(pairs, pad)
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(exp, f, indent=1)
        f.write("\n")
    print(json.dumps({k: exp[k] for k in ("full", "lora", "trl_full", "trl_full_center", "trl_lora")},
                     indent=1))


if __name__ == "__main__":
    main()
