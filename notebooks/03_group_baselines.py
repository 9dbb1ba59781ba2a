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
# # 03 · Group baselines: RLOO, GRPO and what happens next to the advantage
#
# *Lecture §9 and §12.*
#
# After this notebook you will be able to
#
# 1. compute GRPO and RLOO advantages for a group of sampled answers, and say how they differ;
# 2. predict how often a group carries no signal at all, and decide what to do with it;
# 3. read the PPO/GRPO clipped objective, including DAPO's wider upper clip;
# 4. tell apart the three averaging units (per response, per token, Dr. GRPO's constant) on a tiny example.

# %%
import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import display

from course_lib.advantages import (
    dr_grpo_advantages,
    grpo_advantages,
    rloo_advantages,
    zero_variance_probability,
)
from course_lib.policy_loss import aggregate, clipped_surrogate

# %% [markdown]
# ## 1. A group of eight answers, scored by a verifier
#
# For one prompt the policy samples G = 8 answers; a checker gives reward 1 to a correct one, 0 otherwise.
# There is no critic network. Instead, the group itself provides the baseline: an answer is good if it did
# better than its siblings. GRPO standardises inside the group, A_i = (r_i − mean) / std.

# %%
rewards = np.array([1, 0, 0, 1, 0, 0, 1, 0], dtype=float)
G = len(rewards)
mean_r = rewards.sum() / G
std_r = np.sqrt(((rewards - mean_r) ** 2).sum() / G)  # population std: divide by G (ddof = 0)
adv = (rewards - mean_r) / std_r
adv_plus, adv_minus, adv_sum = adv[0], adv[1], round(adv.sum(), 12) + 0.0  # + 0.0 turns −0.0 into 0.0
print(f"mean = {mean_r:.3f}   std = {std_r:.4f}")
print(f"A+ = {adv_plus:.3f}   A− = {adv_minus:.3f}   sum of advantages = {adv_sum:.1f}")
assert np.allclose(adv, grpo_advantages(rewards))

# %% [markdown]
# The advantages sum to zero by construction (centring). That is an identity of the arithmetic, not
# evidence that they estimate the true advantage without bias: each answer's reward sits inside the mean
# and the std used to judge it. Notebook 04 measures the bias this causes.
#
# **RLOO** judges answer i against the mean of the *other* G − 1 answers, b_i = (Σ_j r_j − r_i)/(G − 1).
# Because that baseline does not contain r_i, the REINFORCE gradient stays unbiased. **Dr. GRPO**
# keeps the centring but drops the division by std.

# %%
others_mean = (rewards.sum() - rewards) / (G - 1)
rloo = rewards - others_mean
assert np.allclose(rloo, rloo_advantages(rewards))
assert np.allclose(rloo, G / (G - 1) * (rewards - mean_r))  # RLOO = G/(G−1) × centred reward
dr = dr_grpo_advantages(rewards)
print(f"RLOO:     success {rloo[0]:+.3f}, failure {rloo[1]:+.3f}")
print(f"Dr. GRPO: success {dr[0]:+.3f}, failure {dr[1]:+.3f}")

fig, ax = plt.subplots(figsize=(8, 3.2))
x = np.arange(G)
for k, (name, values) in enumerate([("GRPO", adv), ("RLOO", rloo), ("Dr. GRPO", dr)]):
    ax.bar(x + (k - 1) * 0.27, values, width=0.27, label=name)
ax.axhline(0, color="grey", lw=0.8)
ax.set(xticks=x, xticklabels=[f"#{i + 1}\nr={int(r)}" for i, r in enumerate(rewards)], ylabel="advantage",
       title="advantages per sample, rewards [1,0,0,1,0,0,1,0]")
ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# All three give every success the same positive value and every failure the same negative value; they
# differ in scale, and scale is the learning rate in disguise.
#
# ## 2. Population or sample std? ddof = 0 vs ddof = 1
#
# Dividing by G − 1 instead of G makes the std larger by √(G/(G−1)), so every advantage shrinks by
# √((G−1)/G) = √(7/8):

# %%
ddof_ratio = grpo_advantages(rewards, ddof=1)[0] / grpo_advantages(rewards, ddof=0)[0]
print(f"A(ddof=1) / A(ddof=0) = {ddof_ratio:.4f}   √(7/8) = {np.sqrt(7 / 8):.4f}")

# %% [markdown]
# Same direction, 6.5% smaller step at the same learning rate. A run report that says "GRPO" without the
# ddof leaves this open.
#
# ## 3. Groups that say nothing
#
# If all eight answers are right, or all wrong, every advantage is 0/0. With Bernoulli(p) rewards the
# chance of that is pᴳ + (1 − p)ᴳ.

# %%
p_zero_var = 0.3**8 + 0.7**8
print(f"P(zero-variance group | p = 0.3, G = 8) = 0.3⁸ + 0.7⁸ = {p_zero_var:.4f}")
assert np.isclose(p_zero_var, zero_variance_probability(0.3, 8))
try:
    grpo_advantages([1, 1, 1, 1, 1, 1, 1, 1])
except ValueError as err:
    print("grpo_advantages refuses to guess:", err)
print("with on_degenerate='zeros':", grpo_advantages([1, 1, 1, 1, 1, 1, 1, 1], on_degenerate="zeros"))

# %%
ps = np.linspace(0, 1, 201)
fig, ax = plt.subplots(figsize=(7, 3.4))
for group_size in (2, 4, 8, 16, 32):
    ax.plot(ps, zero_variance_probability(ps, group_size), label=f"G = {group_size}")
ax.scatter([0.3], [p_zero_var], color="C2", zorder=3)
ax.annotate("0.0577", (0.3, p_zero_var), textcoords="offset points", xytext=(6, 8))
ax.set(xlabel="success probability p of the prompt", ylabel="P(all rewards equal)", title="zero-variance groups")
ax.grid(alpha=0.3)
ax.legend()
fig.tight_layout()
plt.show()

# %% [markdown]
# Easy prompts (p near 1) and hopeless ones (p near 0) waste their whole group; a larger G helps only in
# the middle. What to do is a decision, and it should be written down: skip the group (the batch gets
# smaller, and the averaging denominator changes), resample until it has signal (DAPO's dynamic sampling;
# costs rollouts), or give it zero advantages (a KL term can still move the model). Adding a small ε to the
# std only hides the decision.
#
# ## 4. From advantage to update: the clipped objective
#
# With ρ = π_θ(token)/π_old(token) the per-token objective to maximise is
# q = min(ρA, clip(ρ, 1 − ε_low, 1 + ε_high)·A). For A > 0, pushing ρ past 1 + ε_high earns nothing more;
# for A < 0, pushing ρ below 1 − ε_low earns nothing more. DAPO's *clip-higher* widens only the upper
# side (ε_high = 0.28 vs ε_low = 0.2) so that unlikely-but-good tokens can grow faster, which helps
# exploration.

# %%
rho = np.linspace(0.4, 1.7, 400)
fig, axes = plt.subplots(1, 2, figsize=(10, 3.6), sharey=False)
for ax, a in zip(axes, (1.0, -1.0), strict=True):
    ax.plot(rho, rho * a, color="grey", ls=":", label="unclipped ρA")
    ax.plot(rho, clipped_surrogate(rho, a, eps_low=0.2, eps_high=0.2), label="PPO/GRPO ε = 0.2")
    ax.plot(rho, clipped_surrogate(rho, a, eps_low=0.2, eps_high=0.28), ls="--", label="DAPO ε_low 0.2, ε_high 0.28")
    for edge in (0.8, 1.2, 1.28):
        ax.axvline(edge, color="grey", lw=0.6)
    ax.set(xlabel="ratio ρ = π_θ / π_old", ylabel="objective q", title=f"advantage A = {a:+.0f}")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# Clipping shapes the objective: it removes the incentive to move further. It does not stop an optimiser
# step from overshooting the interval.
#
# ## 5. The averaging unit is part of the algorithm
#
# Two answers of lengths 1 and 3; every token of the first has value q = 2, every token of the second
# q = 0. A padded batch of width 4 stores them with a 0/1 mask.

# %%
q = np.array([[2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
mask = np.array([[1, 0, 0, 0], [1, 1, 1, 0]])
lengths = mask.sum(axis=1)
per_response = (q * mask).sum(axis=1) / lengths
seq_mean = per_response.mean()  # original GRPO: average tokens inside each answer, then answers
tok_mean = (q * mask).sum() / lengths.sum()  # DAPO: every real token counts once
L_max = 4
const_mean = (q * mask).sum() / (len(q) * L_max)  # Dr. GRPO: a constant denominator G·L_max
print(f"response mean = {seq_mean:.1f}   token mean = {tok_mean:.1f}   constant G·L_max = {const_mean:.2f}")
assert np.isclose(seq_mean, aggregate(q, mask, unit="sequence_mean"))
assert np.isclose(tok_mean, aggregate(q, mask, unit="token_mean"))
assert np.isclose(const_mean, aggregate(q, mask, unit="constant", max_length=L_max))

# %% [markdown]
# Per response, the short answer's single token weighs as much as the long answer's three together; per
# token, each token weighs the same; Dr. GRPO's denominator G·L_max does not depend on the sampled lengths
# at all. Padding never counts. The same per-token values give three different losses, which is why
# "GRPO" alone is not enough to reproduce a run.
#
# ## 6. Explorer: rewards and ddof → advantages
#
# Type a group of rewards (any numbers, comma separated) and choose the std convention.

# %%
reward_box = widgets.Text(value="1, 0, 0, 1, 0, 0, 1, 0", description="rewards")
ddof_choice = widgets.ToggleButtons(options=[("ddof = 0", 0), ("ddof = 1", 1)], value=0, description="std")


def show_advantages(text, ddof):
    try:
        r = np.array([float(v) for v in text.replace(";", ",").split(",") if v.strip()])
        a = grpo_advantages(r, ddof=ddof, on_degenerate="zeros")
    except ValueError as err:
        print(f"cannot use these rewards: {err}")
        return
    print("GRPO:", np.array2string(a, precision=3), "  sum", f"{a.sum():.3f}")
    print("RLOO:", np.array2string(rloo_advantages(r), precision=3))
    if np.all(r == r[0]):
        print("zero-variance group: no relative signal, advantages set to 0")
    fig, ax = plt.subplots(figsize=(6, 2.4))
    ax.bar(np.arange(len(r)), a, color=["C2" if v > 0 else "C3" for v in a])
    ax.axhline(0, color="grey", lw=0.8)
    ax.set(xlabel="sample", ylabel="GRPO advantage")
    plt.show()


display(widgets.VBox([reward_box, ddof_choice, widgets.interactive_output(show_advantages, {"text": reward_box, "ddof": ddof_choice})]))

# %% [markdown]
# ## Check yourself
#
# 1. A group of 8 has a single success. What are its GRPO advantages (ddof = 0)?
#    <details><summary>Answer</summary>
#    mean 0.125, std √(0.125·0.875) = 0.331: the success gets +2.646, each failure −0.378. Rare successes get large advantages.
#    </details>
# 2. At p = 0.9 and G = 8, how often is a group wasted? And at G = 16?
#    <details><summary>Answer</summary>
#    0.9⁸ + 0.1⁸ ≈ 0.430; 0.9¹⁶ + 0.1¹⁶ ≈ 0.185. Easy prompts waste many groups; bigger groups help at a cost.
#    </details>
# 3. A = −1 and ρ = 0.7 with ε_low = 0.2. Does this token still contribute a gradient?
#    <details><summary>Answer</summary>
#    No. ρ < 1 − ε_low, so min(ρA, clip(ρ)A) = min(−0.7, −0.8) = −0.8, the clipped constant: no incentive to push ρ lower.
#    </details>
