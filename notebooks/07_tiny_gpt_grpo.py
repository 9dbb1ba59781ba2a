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
# # 07 · The GRPO family on a tiny GPT: GRPO, RLOO, Dr. GRPO, DAPO's options
#
# *Lecture §9 (group baselines, the clipped update), §11 (generation vs update time), §12 (what
# the variants fix), §15 (the checker is the reward).*
#
# Notebook 06 trained from fixed pairs. Here the policy writes its own training data every step:
# B prompts × G completions, scored by the exact-answer checker, turned into group-relative
# advantages with `course_lib.advantages`, and into an update with `course_lib.policy_loss` —
# the functions notebook 03 checked by hand. After this notebook you will be able to
#
# 1. run one GRPO step by hand and check it against the library;
# 2. read a GRPO dashboard: reward, held-out accuracy, length, zero-variance rate, entropy, KL, clip;
# 3. compare GRPO, RLOO, Dr. GRPO and DAPO's clip-higher + dynamic sampling on the same budget;
# 4. put the measured generation-vs-update split beside §11's model, and explain the gap.
#
# Budget: about 4–5 minutes on a laptop CPU (`COURSE_FAST=1` in CI: a toy budget).

# %%
import copy
import dataclasses
import os

import matplotlib.pyplot as plt
import torch

from course_lib.advantages import grpo_advantages, rloo_advantages
from course_lib.budgets import rollout_generation_seconds, update_seconds
from course_lib.configs import get_config
from course_lib.dashboard import dashboard
from course_lib.evaluation import evaluate, sample_completions
from course_lib.grpo import train_grpo
from course_lib.model import build_model, n_params
from course_lib.passport import format_passport, passport
from course_lib.rollout import generate
from course_lib.runtime import MetricsLog
from course_lib.sft import train_sft
from course_lib.task import AdditionTask

FAST = os.environ.get("COURSE_FAST") == "1"  # CI: a toy budget that only checks the code runs
cfg = get_config("test" if FAST else "cpu")
SEED = 0
torch.manual_seed(SEED)

# %% [markdown]
# ## 1. The starting point: an SFT policy that learned its teacher's mistake
#
# Same task as notebook 06: addition, demonstrations from a teacher who forgets the ones carry,
# and a checker that knows the truth. RL can draw as many fresh prompts as it likes — only the
# *checking* is needed, never a new label.

# %%
task = AdditionTask(cfg.task)
model = build_model(cfg.model, task.tokenizer)
print(f"{n_params(model):,} parameters, {cfg.task.digits}-digit addition")
train_sft(model, task, cfg.sft, seed=SEED)
baseline = evaluate(model, task)
sft_weights = copy.deepcopy(model.state_dict())
print(f"SFT held-out exact match {baseline['accuracy']:.1%} "
      f"(no carry {baseline['accuracy_no_carry']:.1%}, carry {baseline['accuracy_carry']:.1%})")

# %% [markdown]
# ## 2. One group, by hand
#
# Sample G completions for one prompt, score them, and compute the GRPO advantage
# (r − mean)/std with the population std — then check against `grpo_advantages`.

# %%
G = cfg.grpo.num_generations
pair = next(p for p in task.heldout_pairs if task.ones_carry(*p)) if any(task.ones_carry(*p) for p in task.heldout_pairs) else task.heldout_pairs[0]
torch.manual_seed(SEED)
roll = generate(model, task.encode_prompts([pair]), task.tokenizer, max_completion_length=cfg.grpo.max_completion_length, num_generations=G)
rewards = torch.tensor([task.strict_reward(pair, c) for c in roll.completions])
for c, r in zip(roll.completions, rewards):
    text, ended = task.completion_text(c)
    print(f"{task.prompt_text(*pair)}{text:<6} reward {r:.0f}{'' if ended else '  (truncated)'}")
mean, std = rewards.mean(), rewards.std(correction=0)
if std > 0:
    by_hand = (rewards - mean) / std
    print("by hand :", [round(x, 3) for x in by_hand.tolist()])
    print("library :", [round(x, 3) for x in grpo_advantages(rewards).tolist()])
    print("RLOO    :", [round(x, 3) for x in rloo_advantages(rewards).tolist()])
else:
    print("a zero-variance group: no relative signal — GRPO must be told what that means (§9)")

# %% [markdown]
# ## 3. GRPO, live
#
# B prompts × G completions per step, β = 0 (no reference model kept, as in DAPO), μ = 1 inner
# epoch, token-mean aggregation. The progress bar shows the latest held-out accuracy and reward.
# Before training, the run prints its passport (§17): the choices §12 says must be documented.

# %%
print(format_passport(passport(cfg, "grpo")))


def grpo_run(**overrides):
    model.load_state_dict(sft_weights)
    gcfg = dataclasses.replace(cfg.grpo, **overrides)
    log = MetricsLog()
    torch.manual_seed(SEED)
    out = train_grpo(model, task, gcfg, generator=torch.Generator().manual_seed(SEED + 1), log=log,
                     reference_state=sft_weights)
    return {**evaluate(model, task, max_completion_length=gcfg.max_completion_length), **out}, log.rows


runs, logs = {}, {}
runs["GRPO"], logs["GRPO"] = grpo_run()
print(f"GRPO: {baseline['accuracy']:.1%} → {runs['GRPO']['accuracy']:.1%} in {runs['GRPO']['rl_seconds']:.0f} s")
for line in sample_completions(model, task, task.heldout_pairs[:4], n=2, max_completion_length=cfg.grpo.max_completion_length):
    print(line)

# %%
fig = dashboard(logs["GRPO"], title="GRPO on the tiny GPT", baseline_accuracy=baseline["accuracy"])
plt.show()

# %% [markdown]
# Read it panel by panel. The **reward** is measured on the policy's own samples (temperature 1);
# **accuracy** is greedy decoding on held-out prompts — the number that matters. The
# **zero-variance rate** is the share of groups where all G answers scored the same: those groups
# have zero advantage and teach nothing. Watch it rise as prompts become easy — the §9 formula
# p^G + (1 − p)^G in action. **Entropy** falls as the policy sharpens. **Clip** stays at 0 here: with
# μ = 1 the ratio π_θ/π_old is exactly 1 on the only pass, so PPO's clip never acts.
#
# ## 4. The family, on the same budget
#
# Same SFT start, same seed, same number of steps. Each variant changes one line of the recipe:
#
# | run | advantage | unit | clip (ε_low, ε_high) | zero-variance groups |
# |---|---|---|---|---|
# | GRPO | (r − mean)/std | token_mean | 0.2, 0.2 | kept (advantage 0) |
# | RLOO | leave-one-out | token_mean | 0.2, 0.2 | kept |
# | Dr. GRPO | r − mean | constant (G·L_max) | 0.2, 0.2 | kept |
# | DAPO options | (r − mean)/std | token_mean | 0.2, 0.28 | resampled |
#
# With μ = 1 clip-higher cannot act (the ratio is 1); we use μ = 2 for the DAPO run so that it does.

# %%
runs["RLOO"], logs["RLOO"] = grpo_run(advantage="rloo")
runs["Dr. GRPO"], logs["Dr. GRPO"] = grpo_run(advantage="dr_grpo", unit="constant")
runs["DAPO options"], logs["DAPO options"] = grpo_run(epsilon_high=0.28, zero_variance="resample", num_iterations=2)

print(f"{'run':14} {'held-out':>9} {'carry':>7} {'RL s':>6} {'zero-var':>9} {'clip':>6}")
print(f"{'SFT':14} {baseline['accuracy']:9.1%} {baseline['accuracy_carry']:7.1%}")
for name, r in runs.items():
    rows = logs[name]
    zv = sum(x["zero_variance_rate"] for x in rows) / len(rows)
    clip = sum(x["clip_fraction"] for x in rows) / len(rows)
    print(f"{name:14} {r['accuracy']:9.1%} {r['accuracy_carry']:7.1%} {r['rl_seconds']:6.0f} {zv:9.2f} {clip:6.3f}")

# %%
fig = dashboard(logs["GRPO"], runs=logs, title="GRPO family, same budget", baseline_accuracy=baseline["accuracy"])
plt.show()

# %% [markdown]
# The zero-variance column counts every group sampled; for the DAPO run that includes the groups
# it discarded and replaced, so a high value there means extra generation, not wasted updates.
#
# One run per variant is one draw: curves this small are noisy (20-point swings between
# evaluations happen), so do not rank the variants from a single seed. The README reports medians
# over seeds. What *is* robust: all of them beat the SFT baseline, because the checker fixes the
# very prompts the teacher got wrong (compare the *carry* column with SFT's).
#
# ## 5. Where the time goes (§11)
#
# Each metrics row records the seconds spent generating and the seconds spent updating.

# %%
rows = logs["GRPO"]
gen_s = sum(r["gen_seconds"] for r in rows)
upd_s = sum(r["update_seconds"] for r in rows)
tokens = sum(r["generated_tokens"] for r in rows)
tok_per_s = tokens / gen_s
mean_len = tokens / (len(rows) * cfg.grpo.batch_prompts * G)
print(f"measured: generation {gen_s:.1f} s, update {upd_s:.1f} s → generation share {gen_s / (gen_s + upd_s):.0%}")
print(f"          {tok_per_s:,.0f} generated tokens/s, {mean_len:.1f} tokens per completion")
lecture_gen = rollout_generation_seconds(256, 8, 4000, 209.4, 8)
lecture_upd = update_seconds(8.03e9, 256 * 8 * 4000, 990e12, 0.4, 8)
print(f"§11 model: generation {lecture_gen:.1f} s vs update {lecture_upd:.1f} s → ratio {lecture_gen / lecture_upd:.1f}")

# %% [markdown]
# Our split is nowhere near §11's 39 : 1, and that is the point of §11: nothing in GRPO fixes the
# ratio. Our completions have ~4 tokens, not 4,000, so decoding takes a handful of sequential
# steps; the model is so small that each step's cost is Python and kernel-launch overhead rather
# than memory bandwidth; and the update runs on the same CPU cores. Stretch the completions (or
# grow the model on a GPU) and generation's share climbs. The knobs §11 names — completion
# length, throughput, model size, utilisation — are the ones to change.
#
# ## Check yourself
#
# 1. Halfway through training the zero-variance rate is 0.5. What does that mean for the batch?
#    <details><summary>Answer</summary>
#    Half the groups (all-correct, mostly) carry zero advantage: half the generation time buys no
#    gradient. DAPO's dynamic sampling refills the batch with informative groups instead.
#    </details>
# 2. Why does the clip fraction stay 0 with μ = 1, and become positive with μ = 2?
#    <details><summary>Answer</summary>
#    With one pass, π_old is the current policy, so ρ = 1 everywhere. On the second pass the
#    parameters have moved; tokens whose ratio left [1 − ε_low, 1 + ε_high] in the advantage's
#    direction are clipped.
#    </details>
# 3. Dr. GRPO divides by G·L_max, a constant. What does that change compared with token_mean when
#    completions get shorter?
#    <details><summary>Answer</summary>
#    With token_mean the per-token weight is 1/(total tokens): shorter completions → larger weight
#    per token. With a constant denominator the weight does not depend on the lengths actually
#    generated, so there is no length-dependent rescaling of the update.
#    </details>
