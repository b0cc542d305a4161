#!/usr/bin/env python3
"""TRL 1.16 GRPOTrainer reference for tests/bench/grpo.sh: the same task as the swift-train run
there (the byte-level tiny Llama, the fixture prompts with the chat template's generation
prompt, reward 1 when the completion starts with a lowercase ASCII letter, 8 completions per
prompt, 16 per step, at most 8 tokens each, full fine-tuning, AdamW, cosine, dapo, beta 0), on
the CPU with transformers' generate (KV cache). Prints one JSON line: the median step time, the
completion tokens per second, the mean reward of the first and last 10 steps, and where the
step's time went (TRL's own profiling spans: transformers.generate, _calculate_rewards,
compute_loss; its step_time; callbacks around optimizer.step()), in grpo_report.py's form.
usage: grpo_trl.py MODEL PROMPTS.jsonl THREADS STEPS LR SEED"""
import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
import warnings

import torch

model_dir, prompts, th, steps, lr, seed = sys.argv[1:7]
th, steps, lr, seed = int(th), int(steps), float(lr), int(seed)
torch.set_num_threads(th)
warnings.filterwarnings("ignore")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import transformers  # noqa: E402
import trl  # noqa: E402
from datasets import Dataset  # noqa: E402
from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback  # noqa: E402
from trl import GRPOConfig, GRPOTrainer  # noqa: E402
from trl.extras import profiling  # noqa: E402

from grpo_report import PHASES, summary  # noqa: E402

# TRL's profiling spans only go to wandb/mlflow/trackio: collect them per optimizer step instead
spans = {}
_log = profiling.ProfilingContext._log_metrics


def _collect(self, duration):
    name = self.name.split(".", 1)[-1]
    spans[name] = spans.get(name, 0.0) + duration
    return _log(self, duration)


profiling.ProfilingContext._log_metrics = _collect


class StepClock(TrainerCallback):
    """wall seconds of each optimizer step, from the end of the previous one (data, generation,
    rewards, forward, backward, clipping, AdamW, logging: the whole loop), its profiling spans
    and its optimizer.step()"""

    def __init__(self):
        self.t = self.t_opt = None
        self.steps = []

    def on_train_begin(self, args, state, control, **kw):
        self.t = time.perf_counter()

    def on_pre_optimizer_step(self, args, state, control, **kw):
        self.t_opt = time.perf_counter()

    def on_optimizer_step(self, args, state, control, **kw):
        spans["optimizer"] = time.perf_counter() - self.t_opt

    def on_step_end(self, args, state, control, **kw):
        now = time.perf_counter()
        self.steps.append((now - self.t, dict(spans)))
        spans.clear()
        self.t = now


def first_lower(completions, **kw):
    return [1.0 if re.match(r"[a-z]", c[0]["content"]) else 0.0 for c in completions]


tok = AutoTokenizer.from_pretrained(model_dir)
model = AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32)
# stop at the end of turn too, as swift-train does (eos, then the chat template's <|im_end|>)
model.generation_config.eos_token_id = [tok.eos_token_id, tok.convert_tokens_to_ids("<|im_end|>")]
rows = [{"prompt": json.loads(line)["messages"]} for line in open(prompts)]
ds = Dataset.from_list(rows)
out = tempfile.mkdtemp(prefix="swift-bench-trl.")
cfg = GRPOConfig(output_dir=out, per_device_train_batch_size=16, num_generations=8,
                 max_completion_length=8, learning_rate=lr, weight_decay=0.0, adam_beta2=0.95,
                 max_grad_norm=1.0, lr_scheduler_type="cosine", warmup_steps=0, max_steps=steps,
                 loss_type="dapo", beta=0.0, seed=seed, logging_steps=1, report_to="none",
                 use_cpu=True, bf16=False, save_strategy="no", disable_tqdm=True)
clock = StepClock()
tr = GRPOTrainer(model=model, reward_funcs=first_lower, args=cfg, train_dataset=ds,
                 processing_class=tok, callbacks=[clock])
with contextlib.redirect_stdout(sys.stderr):  # the trainer prints its records
    tr.train()
logs = [h for h in tr.state.log_history if "reward" in h]
step_s = [s for s, _ in clock.steps]
# the phases over steps 2..N (step 1 pays one-time costs); training_step = _prepare_inputs
# (generation, rewards, advantages) + compute_loss (forward, loss) + backward: TRL's step_time
tot = dict.fromkeys(PHASES, 0.0)
rest = list(zip(clock.steps, logs))[1:] or list(zip(clock.steps, logs))
for (s, sp), h in rest:
    tot["generate"] += sp.get("transformers.generate", 0.0)
    tot["reward"] += sp.get("_calculate_rewards", 0.0)
    tot["forward"] += sp.get("compute_loss", 0.0)
    tot["backward"] += h["step_time"] - sp.get("_prepare_inputs", 0.0) - sp.get("compute_loss", 0.0)
    tot["optimizer"] += sp.get("optimizer", 0.0)
all_s = sum(s for (s, _), _ in rest)
tot["other"] = all_s - sum(tot[p] for p in PHASES[:-1])
r = summary("TRL", th, step_s, logs, tot, len(rest), all_s)
r.update({"trl": trl.__version__, "torch": torch.__version__, "transformers": transformers.__version__})
shutil.rmtree(out, ignore_errors=True)
print(json.dumps(r))
