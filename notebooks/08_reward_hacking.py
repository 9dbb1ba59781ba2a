# ---
# jupyter:
#   jupytext:
#     formats: ipynb,py:percent
#     text_representation:
#       extension: .py
#       format_name: percent
#       format_version: '1.3'
#       jupytext_version: 1.19.6
#   kernelspec:
#     display_name: Python 3 (course)
#     language: python
#     name: python3
# ---

# %% tags=["colab-setup"]
# Set-up: does nothing where the course is installed (make lab). On Colab or any
# fresh runtime it installs course_lib from the course repository, keeps the
# runtime's own torch, and picks the device.
import importlib
import importlib.util
import os
import subprocess
import sys

if importlib.util.find_spec("course_lib") is None:
    source = os.environ.get(
        "COURSE_LIB_SOURCE",
        "git+https://github.com/learning-from-feedback/learning-from-feedback.git@main",
    )
    pip = [sys.executable, "-m", "pip", "install", "-q"]
    # Colab runs pip as root; this silences pip's warning about it.
    env = {**os.environ, "PIP_ROOT_USER_ACTION": "ignore"}
    subprocess.run([*pip, "--no-deps", source], check=True, env=env)
    extras = ["tqdm>=4.66", "transformers>=5.0,<6"]
    subprocess.run([*pip, *extras], check=True, env=env)
    importlib.invalidate_caches()

from course_lib.device import on_colab, resolve_device

DEVICE = resolve_device("auto")
print(f"device: {DEVICE.type} · Colab: {'yes' if on_colab() else 'no'}")

# %% [markdown]
# # 08 · Reward hacking: a loose verifier gets exploited
#
# *Lecture §15: "verifiable" does not mean "unhackable". The policy optimises the checker that
# exists, not the intention behind it.*
#
# We train the same tiny GPT twice with GRPO, from the same starting checkpoint and seed:
#
# - against a **loose checker** that accepts an answer when its digits appear in order *anywhere*
#   in the output, whatever sits between them — a "lenient" matcher written to tolerate
#   formatting noise;
# - against the **strict checker**: exactly the answer's digits, then end-of-sequence.
#
# After this notebook you will be able to
#
# 1. recognise reward hacking in the trainer's own metrics: proxy reward up, held-out exact match
#    down, completion length and entropy drifting;
# 2. say at which step a dashboard with length, entropy and held-out tests would have warned;
# 3. fix it by tightening the checker, and check that the re-run behaves.
#
# Budget: about 4 minutes on a laptop CPU, reproducible with a fixed seed. (`COURSE_FAST=1` in CI
# runs fewer steps — the exploit already shows.)

# %%
import copy
import dataclasses
import os

import matplotlib.pyplot as plt
import torch

from course_lib.configs import get_config
from course_lib.dashboard import dashboard
from course_lib.evaluation import evaluate, sample_completions
from course_lib.grpo import train_grpo
from course_lib.model import build_model
from course_lib.runtime import MetricsLog
from course_lib.sft import train_sft
from course_lib.task import AdditionTask

FAST = os.environ.get("COURSE_FAST") == "1"
cfg = get_config("cpu")
if FAST:
    cfg.task.n_heldout = 200  # fewer held-out prompts: cheaper evaluations
SEED = 0
SFT_STEPS = 300  # a weak starting policy: the honest route is hard, the exploit is near
RL_STEPS = 25 if FAST else 40
MAX_LEN = 12  # room to write more than an answer
TEMPERATURE = 1.3  # sample a little hotter than the policy, for exploration (both runs alike)
torch.manual_seed(SEED)

# %% [markdown]
# ## 1. Two checkers
#
# Both read the characters the model wrote before `<eos>` (or all of them, if it never stopped).

# %%
task = AdditionTask(cfg.task)
tok = task.tokenizer


def as_ids(text, eos=True):
    return tok.convert_tokens_to_ids(list(text)) + ([tok.eos_token_id] if eos else [])


for text, eos in [("65", True), ("55", True), ("5565", True), ("1637095", False)]:
    print(f"07+58 → {text!r:10} eos={eos!s:5} strict {task.strict_reward((7, 58), as_ids(text, eos)):.0f}"
          f"   loose {task.loose_reward((7, 58), as_ids(text, eos)):.0f}")

# %% [markdown]
# The loose checker pays for `5565` — a hedge between the teacher's wrong answer and the right one
# — and for a truncated spray of digits that happens to contain a 6 followed later by a 5. Whether a policy *finds* that depends on how far the
# exploit is from what it already does. We start from a weak policy (a short SFT run): honest
# addition is hard for it, writing more digits is easy.

# %%
model = build_model(cfg.model, tok)
train_sft(model, task, cfg.sft, seed=SEED, steps=SFT_STEPS)
start = evaluate(model, task, max_completion_length=MAX_LEN)
start_weights = copy.deepcopy(model.state_dict())
print(f"start: strict held-out {start['accuracy']:.1%}, loose held-out {start['loose_accuracy']:.1%}")
torch.manual_seed(SEED)
before = sample_completions(model, task, task.heldout_pairs[:6], max_completion_length=MAX_LEN)
print("\n".join(before))

# %% [markdown]
# ## 2. The same GRPO, two rewards
#
# Identical options (B = 32 prompts × G = 8, β = 0, token-mean, `max_completion_length = 12`,
# sampling temperature 1.3 for exploration); only `reward` differs. Every few steps both runs are evaluated on held-out prompts with *both*
# checkers, so we can see the proxy and the truth side by side.

# %%
def grpo_run(reward):
    model.load_state_dict(start_weights)
    gcfg = dataclasses.replace(cfg.grpo, steps=RL_STEPS, reward=reward, max_completion_length=MAX_LEN,
                               temperature=TEMPERATURE, eval_every=5)
    log = MetricsLog()
    torch.manual_seed(SEED)
    train_grpo(model, task, gcfg, generator=torch.Generator().manual_seed(SEED + 1), log=log)
    torch.manual_seed(SEED)
    samples = sample_completions(model, task, task.heldout_pairs[:6], max_completion_length=MAX_LEN)
    return log.rows, evaluate(model, task, max_completion_length=MAX_LEN), samples


loose_rows, loose_final, loose_after = grpo_run("loose")
print(f"loose-trained: proxy (loose) held-out {start['loose_accuracy']:.1%} → {loose_final['loose_accuracy']:.1%}, "
      f"strict held-out {start['accuracy']:.1%} → {loose_final['accuracy']:.1%}")
print("\n".join(f"{b:<22} → {a}" for b, a in zip(before, loose_after)))

# %% [markdown]
# The model now keeps writing digits until it runs out of room: `…` marks a completion cut at
# `max_completion_length` with no `<eos>`. The loose checker is happy more often than before; the
# exact answer — what we wanted — is gone.
#
# ## 3. What the dashboard showed, and when

# %%
fig = dashboard(loose_rows, title="GRPO against the loose checker", baseline_accuracy=start["accuracy"])
plt.show()

evals = [r for r in loose_rows if "accuracy" in r]
print(f"{'step':>4} {'train reward':>12} {'loose held-out':>14} {'strict held-out':>15} {'length':>7} {'truncated':>9} {'entropy':>8}")
for r in evals:
    print(f"{r['step']:4d} {r['reward_mean']:12.2f} {r['loose_accuracy']:14.1%} {r['accuracy']:15.1%} "
          f"{r['completion_length']:7.1f} {r['truncated_rate']:9.1%} {r['entropy']:8.2f}")

first = loose_rows[0]
alarms = {
    "length > 1.5 × start": next((r["step"] for r in loose_rows if r["completion_length"] > 1.5 * first["completion_length"]), None),
    "truncated > 10%": next((r["step"] for r in loose_rows if r["truncated_rate"] > 0.10), None),
    "entropy > 1.3 × start": next((r["step"] for r in loose_rows if r["entropy"] > 1.3 * first["entropy"]), None),
    "strict held-out < start": next((r["step"] for r in evals if r["accuracy"] < start["accuracy"]), None),
}
for name, step in alarms.items():
    print(f"alarm {name:24} first fires at step {step}")
exploit_gap = loose_final["loose_accuracy"] - loose_final["accuracy"]
print(f"\nproxy minus truth at the end: {exploit_gap:.1%} of held-out prompts")

# %% [markdown]
# Mean training reward alone is a poor alarm: it is noisy, and it does not say *how* the reward is
# earned. The length and truncation panels move first and move a lot; entropy rises as the tail of
# each completion becomes a random spray; the strict held-out test shows the damage. These are
# the signals §15 lists for a mature RLVR dashboard — plus reading sampled completions, which
# makes the exploit obvious in one glance.
#
# ## 4. The fix: tighten the checker, re-run

# %%
strict_rows, strict_final, strict_after = grpo_run("strict")
print(f"strict-trained: strict held-out {start['accuracy']:.1%} → {strict_final['accuracy']:.1%}, "
      f"mean length {strict_rows[-1]['completion_length']:.1f}, truncated {strict_rows[-1]['truncated_rate']:.0%}")
print("\n".join(f"{b:<22} → {a}" for b, a in zip(before, strict_after)))

# %%
fig = dashboard(loose_rows, runs={"loose checker": loose_rows, "strict checker": strict_rows},
                title="Same GRPO, two checkers", baseline_accuracy=start["accuracy"])
plt.show()

# %% [markdown]
# With the strict checker the completions stay short and end with `<eos>`, and the only way to earn
# reward is to add correctly — which this weak policy learns slowly, but honestly. Tightening the
# verifier is the fix; a held-out test with the *strict* checker is how we knew it was needed.
#
# ## Check yourself
#
# 1. Which dashboard signal fired first in your run, and which one would you trust most?
#    <details><summary>Answer</summary>
#    Usually completion length / truncation rate, a few steps before the strict held-out accuracy
#    falls. The strict held-out test is the most trustworthy — it measures the intent — but it only
#    exists if someone wrote a better checker than the training one.
#    </details>
# 2. Why did the policy not simply learn to add correctly, which the loose checker also rewards?
#    <details><summary>Answer</summary>
#    RL amplifies what the policy can already reach. Writing more digits was a small change to the
#    starting policy; correct carries were not. Starting from a strong SFT policy (notebook 07), the
#    honest route is close and the exploit matters much less.
#    </details>
# 3. Name a second fix that does not change the checker, and its cost.
#    <details><summary>Answer</summary>
#    Give truncated completions zero reward, or drop them from the loss (`mask_truncated=True`), or
#    shorten `max_completion_length`. Each closes this loophole but not the next one: a policy can
#    still hedge inside the length budget (`5565`). The checker itself has to say what "correct" means.
#    </details>
