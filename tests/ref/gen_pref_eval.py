#!/usr/bin/env python3
"""peft's numbers for a DPO LoRA adapter that swift-train saved (swift-eval --task pref).
CI never runs this; tests/cli/eval-pref.bats compares swift-eval against what it writes.

Writes tests/fixtures/pairs-eval/:
  adapter/        adapter_config.json + adapter_model.safetensors of
                  `swift-train --rlhf dpo` (16 LoRA steps on tests/fixtures/pairs, --seed 1; the
                  command is in expected.json), copied from --adapter (default /tmp/pref-eval-dpo,
                  made by this script with SWIFT_BIN when missing)
  expected.json   per pair of tests/fixtures/pairs-ref (four dpo_en_demo.json pairs as byte ids,
                  tests/ref/gen_pref_fixtures.py) the summed log-prob of the chosen and of the
                  rejected response under the policy (the fixture Llama with the adapter, loaded
                  by peft.PeftModel.from_pretrained, eval mode) and under the reference (the same
                  model inside peft's disable_adapter()), and the metrics swift-eval --task pref
                  reports for --beta 0.1: accuracy, margin, rewards/*, logps/*, ref_logps/*

Run from the repository root:
  SWIFT_BIN=build/bin /work/venv-trl/bin/python tests/ref/gen_pref_eval.py
"""
import argparse
import json
import os
import shutil
import subprocess

import torch

MODEL = "tests/fixtures/model/llama"
PAIRS = "tests/fixtures/pairs-ref/pairs.json"
OUT = "tests/fixtures/pairs-eval"
BETA = 0.1
TRAIN = ["--model", MODEL, "--rlhf", "dpo", "--max-steps", "16", "--save-steps", "16",
         "--logging-steps", "16", "--per-device-train-batch-size", "4", "--learning-rate",
         "5e-3", "--seed", "1", "-j", "1", "tests/fixtures/pairs"]


def train(dest):
    run = dest + ".run"
    shutil.rmtree(run, ignore_errors=True)
    exe = os.path.join(os.environ.get("SWIFT_BIN", "build/bin"), "swift-train")
    subprocess.run([exe, "-o", run] + TRAIN, check=True, stdout=subprocess.DEVNULL)
    shutil.rmtree(dest, ignore_errors=True)
    shutil.copytree(os.path.join(run, "checkpoint-16"), dest)


def logp(model, prompt, response):
    """Summed log-prob of the response tokens after the prompt (float64 log-softmax)."""
    ids = torch.tensor([prompt + response])
    with torch.no_grad():
        lg = model(input_ids=ids).logits[0].double()
    lp = torch.log_softmax(lg, dim=-1)
    n = len(prompt)
    return sum(lp[n - 1 + i, t].item() for i, t in enumerate(response))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--adapter", default="/tmp/pref-eval-dpo")
    a = ap.parse_args()
    if not os.path.isdir(a.adapter):
        train(a.adapter)
    from transformers import LlamaForCausalLM
    from peft import PeftModel
    import peft
    import transformers
    os.makedirs(os.path.join(OUT, "adapter"), exist_ok=True)
    for f in ("adapter_config.json", "adapter_model.safetensors"):
        shutil.copy(os.path.join(a.adapter, f), os.path.join(OUT, "adapter", f))
    base = LlamaForCausalLM.from_pretrained(MODEL, torch_dtype=torch.float32,
                                            attn_implementation="eager")
    pm = PeftModel.from_pretrained(base, os.path.join(OUT, "adapter"))
    pm.eval()
    pairs = json.load(open(PAIRS))
    rows = []
    for x in pairs:
        p = x["prompt_ids"]
        row = {"policy": [logp(pm, p, x["chosen_ids"]), logp(pm, p, x["rejected_ids"])]}
        with pm.disable_adapter():
            row["reference"] = [logp(pm, p, x["chosen_ids"]), logp(pm, p, x["rejected_ids"])]
        rows.append(row)
    n = len(rows)
    rc = [BETA * (r["policy"][0] - r["reference"][0]) for r in rows]
    rr = [BETA * (r["policy"][1] - r["reference"][1]) for r in rows]
    metrics = {
        "accuracy": sum(c > j for c, j in zip(rc, rr)) / n,
        "margin": sum(c - j for c, j in zip(rc, rr)) / n,
        "rewards/chosen": sum(rc) / n,
        "rewards/rejected": sum(rr) / n,
        "logps/chosen": sum(r["policy"][0] for r in rows) / n,
        "logps/rejected": sum(r["policy"][1] for r in rows) / n,
        "ref_logps/chosen": sum(r["reference"][0] for r in rows) / n,
        "ref_logps/rejected": sum(r["reference"][1] for r in rows) / n,
        "pairs": n,
    }
    exp = {"generator": "tests/ref/gen_pref_eval.py",
           "versions": {"torch": torch.__version__, "transformers": transformers.__version__,
                        "peft": peft.__version__},
           "adapter_made_by": "swift-train " + " ".join(TRAIN),
           "beta": BETA, "pairs": rows, "metrics": metrics}
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(exp, f, indent=1)
        f.write("\n")
    print(json.dumps(metrics, indent=1))


if __name__ == "__main__":
    main()
