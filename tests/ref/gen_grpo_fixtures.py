#!/usr/bin/env python3
"""Reference values for GRPO's loss (lib/train/grpo_loss.h) and the model's per-token log-probs
(swift_model_token_logps / swift_model_token_grad), computed by TRL's own GRPOTrainer on the tiny
Llama tests/fixtures/eval/llama (byte-level tokenizer, vocabulary 260, float32, eager attention).
CI never runs this; tests/unit/test_grpo_loss.c compares against what it writes.

Writes tests/fixtures/grpo/:
  expected.json       the batch (prompt ids, completion ids, rewards, G, max_completion_length),
                      the versions of trl/torch/transformers, and per case: TRL's GRPOConfig values,
                      TRL's loss, the metrics TRL logged (kl, clip_ratio/*, entropy),
                      num_items_in_batch, whether old/ref log-probs were given and whether the
                      parameter gradients are stored
  tensors.safetensors per case "<case>.advantages" (R) as TRL computes them from the rewards,
                      "<case>.logps" (R, Tc) TRL's per_token_logps (0 on padding), "<case>.old",
                      "<case>.ref" (R, Tc) the old / reference log-probs handed to TRL (when
                      given), "<case>.dlogp" (R, Tc) d loss / d per_token_logps (autograd), and for
                      two cases "<case>.grad.<HF name>" d loss / d every parameter (full tuning)

How TRL is run: a real trl.GRPOTrainer per case (GRPOConfig: output_dir in a temp dir, use_cpu,
bf16 False (GRPOConfig's default True would run the forward under bfloat16 autocast; the
fixture is float32 throughout), report_to none, the case's loss_type / scale_rewards / beta /
epsilon / epsilon_high / temperature / use_bias_correction_kl, num_generations G,
max_completion_length), a dummy reward function and a tiny Dataset. Generation is replaced by
hand-made inputs laid out as _generate_and_score_completions returns them (grpo_trainer.py:2897):
prompt_ids/prompt_mask left-padded with the pad token (259), completion_ids/completion_mask
right-padded (mask 1 up to and including the first EOS, 256), advantages from fixed rewards by
TRL's lines (advantages() below), old_per_token_logps and ref_per_token_logps = TRL's own
per-token log-probs plus fixed perturbations (so that clipping happens on both sides),
num_items_in_batch = completion_mask.sum() (grpo_trainer.py:2498, one process). Then the
trainer's real `_compute_loss(model, inputs)` (grpo_trainer.py:3020) in train mode with
current_gradient_accumulation_steps = 1, and loss.backward(); the per_token_logps of
_get_per_token_logps_and_entropies are kept with retain_grad() for d loss / d logps.

Run from the repository root: /work/venv-trl/bin/python tests/ref/gen_grpo_fixtures.py
"""
import json
import math
import os
import tempfile
from collections import defaultdict

import torch

OUT = "tests/fixtures/grpo"
MODEL = "tests/fixtures/eval/llama"
PAD, EOS = 259, 256
G = 4
MAX_COMPLETION_LENGTH = 12

PROMPTS = ["2+3=", "Name a colour:", "Hi"]
# G completions per prompt; "$" stands for EOS (the mask ends there, padding follows)
COMPLETIONS = [
    [" 5$", " five$", "5", " 6 I think$"],
    [" red$", " blue, or", " g$", " teal and$"],
    ["!$", " there$", " hello!", "$"],
]
REWARDS = [1.0, 0.5, 0.0, 0.25, 0.2, 0.9, 0.9, 0.1, 1.0, 1.0, 1.0, 1.0]  # prompt 3: std 0

# case -> GRPOConfig values (+ old: give old_per_token_logps; grads: store parameter gradients)
CASES = {}
for lt in ("grpo", "bnpo", "dr_grpo", "dapo"):
    for sc in ("group", "batch", "none"):
        CASES["%s-%s" % (lt, sc)] = dict(loss_type=lt, scale_rewards=sc, beta=0.0)
    CASES[lt + "-beta"] = dict(loss_type=lt, scale_rewards="group", beta=0.04)
CASES["dapo-group"]["grads"] = True  # TRL's defaults (beta 0, epsilon 0.2, dapo, group)
CASES["dapo-noold"] = dict(loss_type="dapo", scale_rewards="group", beta=0.0, old=False)
CASES["grpo-beta-t07"] = dict(loss_type="grpo", scale_rewards="group", beta=0.04, epsilon=0.2,
                              epsilon_high=0.28, temperature=0.7, grads=True)
CASES["dr_grpo-beta-plainkl"] = dict(loss_type="dr_grpo", scale_rewards="group", beta=0.04,
                                     use_bias_correction_kl=False)
CASES["bnpo-eps"] = dict(loss_type="bnpo", scale_rewards="batch", beta=0.04, epsilon=0.1,
                         epsilon_high=0.3)


def ids_of(s):
    return [EOS if ch == "$" else b for ch in s for b in ch.encode("utf-8")]


def batch():
    """TRL's layout: prompts left-padded, completions right-padded, G rows per prompt."""
    pr = [ids_of(p) for p in PROMPTS for _ in range(G)]
    co = [ids_of(c) for cs in COMPLETIONS for c in cs]
    P, C = max(map(len, pr)), max(map(len, co))
    prompt_ids = torch.tensor([[PAD] * (P - len(p)) + p for p in pr])
    prompt_mask = torch.tensor([[0] * (P - len(p)) + [1] * len(p) for p in pr])
    completion_ids = torch.tensor([c + [PAD] * (C - len(c)) for c in co])
    # TRL's mask: 1 up to and including the first EOS (grpo_trainer.py, "Mask everything after
    # the first EOS token"); a completion without EOS (cut at the length limit) keeps every token
    completion_mask = torch.tensor([[1] * len(c) + [0] * (C - len(c)) for c in co])
    return pr, co, prompt_ids, prompt_mask, completion_ids, completion_mask


def advantages(rewards, scale_rewards, num_generations):
    """trl 1.16.0 grpo_trainer.py:2762-2788 (multi_objective_aggregation "sum_then_normalize",
    the default; one reward function of weight 1, every row scorable), verbatim but for names."""
    from trl.trainer.utils import nanstd
    mean_grouped_rewards = torch.nanmean(rewards.view(-1, num_generations), dim=1)
    mean_grouped_rewards = mean_grouped_rewards.repeat_interleave(num_generations, dim=0)
    if scale_rewards in ["group", "none"]:
        if num_generations > 1:
            std_rewards = nanstd(rewards.view(-1, num_generations), dim=1)
            std_rewards = std_rewards.repeat_interleave(num_generations, dim=0)
        else:
            std_rewards = torch.zeros_like(rewards)
    elif scale_rewards == "batch":
        if rewards.numel() > 1:
            std_rewards = nanstd(rewards).expand_as(rewards)
        else:
            std_rewards = torch.zeros_like(rewards)
    advantages = rewards - mean_grouped_rewards
    if scale_rewards != "none":
        advantages = advantages / (std_rewards + 1e-4)
    is_std_zero = torch.isclose(std_rewards, torch.zeros_like(std_rewards))
    return torch.nan_to_num(advantages, nan=0.0), std_rewards, is_std_zero


def trainer(cfg):
    from datasets import Dataset
    from transformers import AutoTokenizer, LlamaForCausalLM
    from trl import GRPOConfig, GRPOTrainer
    tok = AutoTokenizer.from_pretrained(MODEL)
    model = LlamaForCausalLM.from_pretrained(MODEL, dtype=torch.float32,
                                             attn_implementation="eager")
    kw = {k: cfg[k] for k in ("loss_type", "scale_rewards", "beta", "epsilon", "epsilon_high",
                              "temperature", "use_bias_correction_kl") if k in cfg}
    args = GRPOConfig(output_dir=tempfile.mkdtemp(prefix="grpo-ref-"), report_to="none",
                      use_cpu=True, bf16=False, num_generations=G,
                      per_device_train_batch_size=G * len(PROMPTS),
                      max_completion_length=MAX_COMPLETION_LENGTH, gradient_checkpointing=False,
                      **kw)
    tr = GRPOTrainer(model=model, reward_funcs=lambda completions, **k: [0.0] * len(completions),
                     args=args, train_dataset=Dataset.from_dict({"prompt": PROMPTS}),
                     processing_class=tok)
    tr.model.train()  # training_step's mode (dropout is 0 in the fixture anyway)
    tr.current_gradient_accumulation_steps = 1  # the Trainer's loop sets it; one micro-batch
    return tr


def perturb(logps, mask, seed, lo, hi):
    g = torch.Generator().manual_seed(seed)
    d = lo + (hi - lo) * torch.rand(logps.shape, generator=g, dtype=torch.float32)
    return ((logps + d) * mask).detach()


def run_case(name, cfg, data):
    pr, co, prompt_ids, prompt_mask, completion_ids, completion_mask = data
    tr = trainer(cfg)
    model = tr.model
    R = completion_ids.size(0)
    input_ids = torch.cat([prompt_ids, completion_ids], dim=1)
    attention_mask = torch.cat([prompt_mask, completion_mask], dim=1)
    with torch.no_grad():
        logps0, _, _ = tr._get_per_token_logps_and_entropies(
            model, input_ids, attention_mask, completion_ids.size(1))
    mask = completion_mask.float()
    rewards = torch.tensor(REWARDS, dtype=torch.float32)
    adv, std, zero = advantages(rewards, tr.scale_rewards, G)
    inputs = {"prompt_ids": prompt_ids, "prompt_mask": prompt_mask,
              "completion_ids": completion_ids, "completion_mask": completion_mask,
              "advantages": adv, "num_items_in_batch": completion_mask.sum()}
    t = {name + ".advantages": adv}
    if cfg.get("old", True):
        # log ratio in [-0.45, 0.45]: coef_1 from 0.64 to 1.57, past 1 -/+ epsilon both ways
        inputs["old_per_token_logps"] = perturb(logps0, mask, 1, -0.45, 0.45)
        t[name + ".old"] = inputs["old_per_token_logps"]
    if cfg["beta"] != 0.0:
        inputs["ref_per_token_logps"] = perturb(logps0, mask, 2, -0.6, 0.4)
        t[name + ".ref"] = inputs["ref_per_token_logps"]

    kept = {}
    orig = tr._get_per_token_logps_and_entropies

    def keep(*a, **k):
        lp, ent, aux = orig(*a, **k)
        lp.retain_grad()
        kept["logps"] = lp
        return lp, ent, aux

    tr._get_per_token_logps_and_entropies = keep
    tr._metrics = {"train": defaultdict(list), "eval": defaultdict(list)}
    model.zero_grad()
    loss = tr._compute_loss(model, inputs)
    loss.backward()
    lp = kept["logps"]
    assert torch.allclose(lp.detach(), logps0, atol=1e-6)
    t[name + ".logps"] = (lp.detach() * mask).contiguous()
    t[name + ".dlogp"] = lp.grad.detach().contiguous()
    metrics = {k: v[-1] for k, v in tr._metrics["train"].items()}
    if cfg.get("grads"):
        for n, p in model.named_parameters():
            t["%s.grad.%s" % (name, n)] = p.grad.detach().clone().contiguous()
    if cfg.get("old", True) and name.endswith("-group"):
        assert metrics["clip_ratio/low_mean"] > 0 and metrics["clip_ratio/high_mean"] > 0, metrics
    rec = {"params": {"loss_type": tr.loss_type, "scale_rewards": tr.scale_rewards,
                      "beta": tr.beta, "epsilon_low": tr.epsilon_low,
                      "epsilon_high": tr.epsilon_high, "temperature": tr.temperature,
                      "max_completion_length": tr.max_completion_length,
                      "use_bias_correction_kl": tr.args.use_bias_correction_kl},
           "old": "old_per_token_logps" in inputs, "ref": "ref_per_token_logps" in inputs,
           "grads": bool(cfg.get("grads")), "loss": loss.item(),
           "num_items_in_batch": int(completion_mask.sum()),
           "frac_reward_zero_std": zero.float().mean().item(),
           "reward_std_rows": std.tolist(), "metrics": metrics}
    print("%-14s loss %+.7f  %s" % (name, loss.item(),
                                    " ".join("%s %.4g" % (k, v) for k, v in metrics.items())))
    return rec, t


def main():
    import transformers
    import trl
    from safetensors.torch import save_file
    assert trl.__version__ == "1.16.0", trl.__version__
    os.makedirs(OUT, exist_ok=True)
    data = batch()
    pr, co = data[0], data[1]
    exp = {"what": "TRL GRPOTrainer._compute_loss on hand-made GRPO batches "
                   "(tests/ref/gen_grpo_fixtures.py)",
           "versions": {"trl": trl.__version__, "torch": torch.__version__,
                        "transformers": transformers.__version__},
           "trl_function": "trl %s GRPOTrainer._compute_loss (grpo_trainer.py:3020); advantages "
                           "as _generate_and_score_completions (grpo_trainer.py:2762-2810)"
                           % trl.__version__,
           "model": MODEL, "G": G, "max_completion_length": MAX_COMPLETION_LENGTH,
           "pad": PAD, "eos": EOS, "prompt_ids": pr, "completion_ids": co, "rewards": REWARDS,
           "cases": {}}
    tensors = {}
    for name, cfg in CASES.items():
        rec, t = run_case(name, cfg, data)
        exp["cases"][name] = rec
        tensors.update(t)
    with open(os.path.join(OUT, "expected.json"), "w") as f:
        json.dump(exp, f, indent=1)
        f.write("\n")
    save_file({k: v.float().contiguous() for k, v in sorted(tensors.items())},
              os.path.join(OUT, "tensors.safetensors"),
              metadata={"format": "pt", "trl": trl.__version__})
    assert not math.isnan(sum(c["loss"] for c in exp["cases"].values()))


if __name__ == "__main__":
    main()
