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
    extras = ["tqdm>=4.66", "transformers>=5.15,<6"]
    subprocess.run([*pip, *extras], check=True, env=env)
    importlib.invalidate_caches()

from course_lib.tinygpt.device import on_colab, resolve_device

DEVICE = resolve_device("auto")
print(f"device: {DEVICE.type} · Colab: {'yes' if on_colab() else 'no'}")

# %% [markdown]
# # 10 · The KL term: what a KL penalty pulls on, where it sits, and what β buys on the tiny GPT
#
# *Pointer for readers of the Module 14 lecture: §9, §12 and §17. Everything below stands on its own.*
#
# [The regularised objective](03_the_regularised_objective.ipynb) solved max E_π[r] − β·KL(π‖π_ref)
# exactly: π* ∝ π_ref·exp(r/β), and the KL it names is the reverse one. A trainer never sees the exact
# KL. It sees sampled answers, estimates the KL from each (three estimators, k1/k2/k3:
# [Schulman 2020](http://joschu.net/blog/kl-approx.html)), and puts the estimate either in the reward or in the loss.
# Now that GRPO's advantages, PPO's clip and π_old
# ([From advantages to an update](05_from_advantages_to_an_update.ipynb)) and the tiny GPT's GRPO run
# ([Tiny GPT: the GRPO family](09_tiny_gpt_grpo.ipynb)) are known, this notebook asks what each choice does.
# After this notebook you will be able to
#
# 1. judge k1, k2, k3 twice — as *values* (bias, spread) and as *loss terms* (expected gradient) —
#    and say what TRL's k3 penalty in the loss actually optimises;
# 2. tell KL in the reward from KL in the loss, and say why GRPO's std normalisation changes β's meaning;
# 3. tell π_old from π_ref, and say which one bounds the total drift;
# 4. read an accuracy–KL frontier measured on the tiny GPT.
#
# Everything before section 5 is exact arithmetic and runs in seconds; section 5 trains
# (seven short GRPO runs from a shared SFT start; `COURSE_FAST=1`, CI's quick check, gives each fewer
# steps). The last cell prints how long this run took.

# %%
import copy
import dataclasses
import os
import sys

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import display

from course_lib.formulas.advantages import grpo_advantages, rloo_advantages
from course_lib.formulas.kl import (
    categorical_kl,
    expected_kl_gradient,
    forward_kl_regularised_optimum,
    kl_regularised_optimum,
)
from course_lib.formulas.policy_loss import clipped_surrogate, kl_estimate, kl_shaped_rewards
from course_lib.lesson.explore import figure_png, predict, readout
from course_lib.lesson.stopwatch import Stopwatch
from course_lib.run.passport import passport
from course_lib.run.starts import sft_start
from course_lib.run.verdicts import committed_benchmarks
from course_lib.tinygpt.evaluation import evaluate, reference_kl
from course_lib.tinygpt.runtime import MetricsLog
from course_lib.trainers.configs import get_config, validate
from course_lib.trainers.grpo import train_grpo
from course_lib.trainers.trainer import TrainContext

FAST = os.environ.get("COURSE_FAST") == "1"  # section 5's sweep with fewer GRPO steps (CI's quick check)
clock = Stopwatch("COURSE_FAST=1" if FAST else "full")
rng = np.random.default_rng(0)

# %% [markdown]
# The example of [The regularised objective](03_the_regularised_objective.ipynb): one prompt, five
# answers A–E, a reference π_ref, rewards r, β = 0.5, and the optimum π* of the objective.

# %%
answers = ["A", "B", "C", "D", "E"]
pi_ref = np.array([0.20, 0.10, 0.45, 0.15, 0.10])
reward = np.array([1.0, 0.8, -0.5, -0.2, 0.0])
beta = 0.5
pi_star = kl_regularised_optimum(pi_ref, reward, beta).probs
print("π_ref =", pi_ref, "  r =", reward, "  π* =", np.round(pi_star, 4))


def softmax_rows(logits):
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


# %% [markdown]
# ## 1. k1, k2, k3 as *values*
#
# A trainer cannot sum over all answers; it sees answers sampled from π and estimates the KL from each
# one, with log-ratio ℓ = log π_ref(y) − log π(y) (`course_lib.formulas.policy_loss.kl_estimate`):
#
# k1 = −ℓ,  k2 = ℓ²/2,  k3 = (e^ℓ − 1) − ℓ.
#
# Take π = π* as "the trained policy". The exact mean and spread of each estimator are
# sums over the five answers; a simulation with 200,000 samples must agree.

# %%
predict("Which estimator can come out negative on a single sample?",
        ["k1", "k2", "k3"], "k1",
        "k1 = −ℓ is negative whenever π gives the sampled answer less probability than π_ref; k2 = ℓ²/2 and "
        "k3 = (e^ℓ − 1) − ℓ are never negative.")

# %%
log_pi, log_ref_np = np.log(pi_star), np.log(pi_ref)
true_kl = categorical_kl(pi_star, pi_ref)
samples = rng.choice(5, size=200_000, p=pi_star)
value_rows = {}
print(f"true KL(π*‖π_ref) = {true_kl:.4f}")
print("estimator   exact mean   bias      exact SD   simulated mean ± SE    simulated SD   min value")
for est in ("k1", "k2", "k3"):
    k = kl_estimate(log_pi, log_ref_np, est)  # one value per answer
    mean, sd = pi_star @ k, np.sqrt(pi_star @ (k - pi_star @ k) ** 2)
    sim = k[samples]
    value_rows[est] = {"mean": mean, "bias": mean - true_kl, "sd": sd, "sim_mean": sim.mean(),
                       "sim_se": sim.std() / np.sqrt(len(sim)), "sim_sd": sim.std(), "min": k.min()}
    v = value_rows[est]
    print(f"  {est}        {mean:9.4f}  {v['bias']:+8.4f}   {sd:8.4f}   {v['sim_mean']:.4f} ± {v['sim_se']:.4f}"
          f"       {v['sim_sd']:8.4f}     {v['min']:+.3f}")
spread = "less" if value_rows["k3"]["sd"] < value_rows["k1"]["sd"] else "more"
print(f"here k3 is {spread} spread than k1 (SD {value_rows['k3']['sd']:.3f} vs {value_rows['k1']['sd']:.3f}); "
      f"k2 is off by {value_rows['k2']['bias']:+.4f}, far more than its simulation's standard error")

# %% [markdown]
# k1 and k3 are unbiased (their exact means equal the KL); k2 is not. k1 goes negative on answers the
# policy likes less than the reference did; k3 = (e^ℓ − 1) − ℓ ≥ 0 never does. How do bias and spread
# depend on how far π is from π_ref? Slide π along the path π_t ∝ π_ref^(1−t)·π*^t (t = 0 is π_ref,
# t = 1 is π*, t = 2.5 is beyond it):

# %%
ts = np.linspace(0.0, 2.5, 60)
path = softmax_rows((1 - ts)[:, None] * log_ref_np + ts[:, None] * log_pi)
path_kl = categorical_kl(path, pi_ref)
bias_curves, sd_curves = {}, {}
for est in ("k1", "k2", "k3"):
    k = kl_estimate(np.log(path), np.broadcast_to(log_ref_np, path.shape), est)
    mean = (path * k).sum(-1)
    bias_curves[est] = mean - path_kl
    sd_curves[est] = np.sqrt((path * (k - mean[:, None]) ** 2).sum(-1))

fig, (ax_b, ax_s) = plt.subplots(1, 2, figsize=(9.5, 3.4))
for i, est in enumerate(("k1", "k2", "k3")):
    ax_b.plot(path_kl, bias_curves[est], color=f"C{i}", label=est)
    ax_s.plot(path_kl, sd_curves[est], color=f"C{i}", label=est)
ax_b.set(xlabel="true KL(π_t‖π_ref)", ylabel="E[k] − KL", title="bias of one sample's estimate (exact)")
ax_s.set(xlabel="true KL(π_t‖π_ref)", ylabel="standard deviation", title="spread of one sample's estimate (exact)")
for ax in (ax_b, ax_s):
    ax.grid(alpha=0.3)
    ax.legend()
fig.tight_layout()
plt.show()
overtakes = (path_kl[np.argmax(sd_curves["k3"] > sd_curves["k1"])] if (sd_curves["k3"] > sd_curves["k1"]).any()
             else None)
print(f"at the far end (KL = {path_kl[-1]:.2f}): SD k1 {sd_curves['k1'][-1]:.3f}, k3 {sd_curves['k3'][-1]:.3f}; "
      f"bias of k2 {bias_curves['k2'][-1]:+.3f}")
print("k3's spread stays below k1's along the whole path" if overtakes is None
      else f"k3's spread overtakes k1's from KL ≈ {overtakes:.2f} on")

# %% [markdown]
# As a value — a number to log, or to fold into a reward — k3 is the usual choice near the reference:
# unbiased, never negative, and (near π_ref) less spread than k1. Far from the reference its spread can
# grow without bound, because e^ℓ is unbounded where π gives an answer much less probability than π_ref;
# the printout says where that happens on this example.

# %% [markdown]
# ## 2. k1, k2, k3 as *loss terms*: what their gradients pull on
#
# A trainer that puts β·k(y) **in the loss** differentiates it with respect to θ through log π_θ(y) of the
# sampled answers — the samples themselves are held fixed. Its expected gradient on on-policy samples
# is Σ_y π(y)·∇_θ k(y). Before working it out:

# %%
predict("In the loss, which estimator's expected gradient is the gradient of the *forward* KL(π_ref‖π)?",
        ["k1", "k2", "k3", "none of them"], "k3",
        "E[∇k3] = Σ(π − π_ref)∇log π = −Σ π_ref ∇log π = ∇KL(π_ref‖π).")

# %% [markdown]
# With ∇k1 = ∇log π, ∇k2 = (log π − log π_ref)·∇log π and ∇k3 = (1 − π_ref/π)·∇log π,
# and Σ_y π(y)∇log π(y) = ∇Σπ = 0:
#
# - E[∇k1] = 0: **no KL pressure at all**, only noise;
# - E[∇k2] = Σ π·log(π/π_ref)·∇log π = ∇KL(π‖π_ref): the reverse KL the objective names;
# - E[∇k3] = Σ (π − π_ref)·∇log π = −Σ π_ref·∇log π = ∇KL(π_ref‖π): the **forward** KL.
#
# These are exact for the one-step bandit here: one sampled answer, one log-ratio. Over a sequence
# with per-token terms the scope narrows: k2 summed over tokens in the loss differentiates only each
# token's own log-probability, so it drops the term through the later states a token leads to (it is
# not ∇ of the sequence's reverse KL), and k3 gives the forward KL at each visited state, not the
# forward KL of whole sequences.
#
# An unbiased *value* does not make a useful *loss term*. Put the penalty **in the reward** instead
# (a detached number subtracted from the reward) and it acts through the policy gradient's
# **score function** ∇log π(y): E[k(y)·∇log π(y)]; for k1 that is ∇KL(π‖π_ref) again.
#
# Check with exact sums on a softmax policy π_θ = softmax(θ), taken beyond π* on the path of section 1.

# %%
theta_now = (1 - 1.5) * log_ref_np + 1.5 * log_pi  # a policy past π* on the path of section 1
theta_t = torch.tensor(theta_now, requires_grad=True)
(grad_reverse,) = torch.autograd.grad(categorical_kl(torch.softmax(theta_t, -1), torch.tensor(pi_ref)), theta_t)
theta_t = torch.tensor(theta_now, requires_grad=True)
(grad_forward,) = torch.autograd.grad(categorical_kl(torch.tensor(pi_ref), torch.softmax(theta_t, -1)), theta_t)
grad_reverse, grad_forward = grad_reverse.numpy(), grad_forward.numpy()
expected_grads = {(est, place): expected_kl_gradient(theta_now, log_ref_np, est, place)
                  for est in ("k1", "k2", "k3") for place in ("loss", "reward")}

print("gradient w.r.t. the five logits        A        B        C        D        E")
print(f"∇KL(π‖π_ref)  (reverse)           {np.array2string(grad_reverse, precision=4, floatmode='fixed')}")
print(f"∇KL(π_ref‖π)  (forward)           {np.array2string(grad_forward, precision=4, floatmode='fixed')}")
for (est, place), g in expected_grads.items():
    print(f"E[gradient], {est} in the {place:6}      {np.array2string(g, precision=4, floatmode='fixed')}")
gradient_checks = {
    "k1 loss = 0": np.abs(expected_grads["k1", "loss"]).max(),
    "k2 loss = ∇reverse": np.abs(expected_grads["k2", "loss"] - grad_reverse).max(),
    "k3 loss = ∇forward": np.abs(expected_grads["k3", "loss"] - grad_forward).max(),
    "k1 reward = ∇reverse": np.abs(expected_grads["k1", "reward"] - grad_reverse).max(),
}
print("largest deviation:", ", ".join(f"{k}: {v:.1e}" for k, v in gradient_checks.items()))

# %%
fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.6), sharey=True)
xpos = np.arange(5)
for ax, place in zip(axes, ("loss", "reward")):
    ax.bar(xpos - 0.2, grad_reverse, width=0.4, color="C7", alpha=0.6, label="∇KL(π‖π_ref) reverse")
    ax.bar(xpos + 0.2, grad_forward, width=0.4, color="C9", alpha=0.6, label="∇KL(π_ref‖π) forward")
    for i, (est, marker) in enumerate((("k1", "o"), ("k2", "s"), ("k3", "D"))):
        ax.scatter(xpos + (i - 1) * 0.12, expected_grads[est, place], marker=marker, color=f"C{i}", zorder=3,
                   label=f"E[∇] of {est} in the {place}")
    ax.axhline(0, color="black", lw=0.6)
    ax.set_xticks(xpos, answers)
    ax.set(title=f"penalty in the {place}", xlabel="logit of answer")
    ax.legend(fontsize=7)
axes[0].set_ylabel("expected gradient (per unit β)")
fig.tight_layout()
plt.show()

# %% [markdown]
# Left, in the loss: k1's markers sit on zero, k2's on the reverse-KL bars, k3's on the forward-KL bars.
# Right, in the reward: k1 lands on the reverse KL; k2 and k3 land on neither (a detached value only
# reaches θ through the score function, so only an estimator whose *value* is unbiased — k1, k3 — has the
# right total, and only k1's entire gradient sits in the score term).
#
# **Where does each penalty lead?** Run exact gradient ascent on E_π[r] − β·(penalty) from π_ref, using
# the expected gradients above, and compare where it stops with π* (the reverse-KL optimum) and with the
# optimum of E[r] − β·KL(π_ref‖π) (`forward_kl_regularised_optimum`).
#
# %%
predict("Where does exact gradient ascent with k1 in the loss end up?",
        ["at π*", "at the forward-KL optimum", "on the best answer, as if β = 0"],
        "on the best answer, as if β = 0",
        "E[∇k1] = 0: the penalty adds nothing to the expected gradient, so only the reward term acts.")

# %%
pi_forward = forward_kl_regularised_optimum(pi_ref, reward, beta)
dynamics = {}
for est, place in (("k1", "loss"), ("k2", "loss"), ("k3", "loss"), ("k1", "reward")):
    theta = log_ref_np.copy()
    kl_path = []
    for _ in range(400):
        p = softmax_rows(theta)
        reward_grad = p * (reward - p @ reward)  # ∇_θ E_π[r] for a softmax policy
        theta = theta + 3.0 * (reward_grad - beta * expected_kl_gradient(theta, log_ref_np, est, place))
        kl_path.append(categorical_kl(softmax_rows(theta), pi_ref))
    final = softmax_rows(theta)
    dynamics[f"{est} in the {place}"] = {"probs": final, "kl": kl_path,
                                         "to_reverse_opt": np.abs(final - pi_star).max(),
                                         "to_forward_opt": np.abs(final - pi_forward).max()}
print(f"π* (reverse-KL optimum)     {np.round(pi_star, 4)}   KL(·‖π_ref) {categorical_kl(pi_star, pi_ref):.4f}")
print(f"forward-KL optimum          {np.round(pi_forward, 4)}   KL(·‖π_ref) {categorical_kl(pi_forward, pi_ref):.4f}")
for name, d in dynamics.items():
    print(f"{name:16} stops at {np.round(d['probs'], 4)}   KL(·‖π_ref) {d['kl'][-1]:.4f}   "
          f"max|Δ| to π* {d['to_reverse_opt']:.1e}, to forward optimum {d['to_forward_opt']:.1e}")

gap_by_beta = {b: np.abs(kl_regularised_optimum(pi_ref, reward, b).probs
                         - forward_kl_regularised_optimum(pi_ref, reward, b)).max() for b in (0.1, 0.5, 2.0, 10.0)}
print("max |π* − forward-KL optimum| by β:", ", ".join(f"β={b}: {gap:.3f}" for b, gap in gap_by_beta.items()))

fig, ax = plt.subplots(figsize=(7, 3))
for i, (name, d) in enumerate(dynamics.items()):
    ax.plot(d["kl"], color=f"C{i}", label=name)
ax.axhline(categorical_kl(pi_star, pi_ref), color="grey", ls=":", label="KL(π*‖π_ref)")
ax.set(xlabel="exact gradient step", ylabel="KL(π‖π_ref)", title=f"where each penalty leads (β = {beta})")
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# k1 in the loss applies no penalty: the policy climbs to the best answer as if β = 0. k2 in the loss and
# k1 in the reward both reach π*. k3 in the loss — TRL's GRPO penalty (`per_token_kl = exp(ref − logp) −
# (ref − logp) − 1`, added to the loss) — reaches the optimum of **E[r] − β·KL(π_ref‖π)**: on on-policy
# samples it regularises the forward KL, which never lets an answer of the reference die out. Near the
# reference the two KLs agree to second order, so the two optima differ little when β is large (the
# policy stays close) and more when β is small — the last printout measures it. It is still a
# different objective, and a passport that says "KL(π‖π_ref), k3 in the loss" describes the value it
# logs, not what its gradient does. (k3 *in the reward* is worse: its score-function gradient is
# ∇KL(π‖π_ref) − ∇KL(π_ref‖π), the right panel above.)
#
# **Explorer: the two optima as β moves.** The bars are π_ref, π* (where k2 in the loss and k1 in the
# reward lead) and the forward-KL optimum (where k3 in the loss leads); the printout gives the largest
# gap between the two optima and the reverse KL each one pays.

# %%
kl_beta_slider = widgets.FloatSlider(value=0.5, min=0.01, max=5.0, step=0.01, description="β",
                                     style={"description_width": "40px"})
optima_text, optima_plot = widgets.HTML(), widgets.Image(format="png")


def show_optima(_=None):
    b = kl_beta_slider.value
    reverse_opt = kl_regularised_optimum(pi_ref, reward, b).probs
    forward_opt = forward_kl_regularised_optimum(pi_ref, reward, b)
    optima_text.value = readout(
        f"β = {b:.3g}: max |π* − forward optimum| = {np.abs(reverse_opt - forward_opt).max():.4f}   "
        f"KL(π*‖π_ref) = {categorical_kl(reverse_opt, pi_ref):.4f}   "
        f"KL(forward optimum‖π_ref) = {categorical_kl(forward_opt, pi_ref):.4f}")
    fig, ax = plt.subplots(figsize=(6, 2.6))
    xpos = np.arange(5)
    ax.bar(xpos - 0.27, pi_ref, width=0.27, label="π_ref", color="C7")
    ax.bar(xpos, reverse_opt, width=0.27, label="π* (k2 in the loss, k1 in the reward)", color="C0")
    ax.bar(xpos + 0.27, forward_opt, width=0.27, label="forward optimum (k3 in the loss)", color="C9")
    ax.set_xticks(xpos, [f"{a}\nr={r:+.1f}" for a, r in zip(answers, reward)])
    ax.set(ylim=(0, 1), ylabel="probability")
    ax.legend(fontsize=7)
    optima_plot.value = figure_png(fig)


kl_beta_slider.observe(show_optima, names="value")
show_optima()
display(widgets.VBox([kl_beta_slider, optima_text, optima_plot]))

# %% [markdown]
# ## 3. KL in the reward vs KL in the loss
#
# | | KL **in the reward** (InstructGPT-style PPO, [Ouyang et al. 2022](https://arxiv.org/abs/2203.02155); RLOO) | KL **in the loss** (GRPO, TRL's `GRPOTrainer`) |
# |---|---|---|
# | what is computed | r_i − β·Σ_t k(t), one number per completion, **before** the baseline | β·k(t) per token, added to the per-token objective |
# | how it reaches θ | through the advantage and the score function (like any reward) | differentiated directly through log π_θ |
# | estimator that gives ∇KL(π‖π_ref) | k1 (the default of `kl_shaped_rewards`) | k2 for one step (k3 gives the forward KL, k1 nothing); per token over a sequence, k2 drops the future-state term and k3 gives a forward KL per visited state |
# | scaled by | the advantage normalisation (group std!) | β alone, then the averaging unit |
# | noise | a score-function (REINFORCE) estimate: the penalty's spread times ∇log π | a direct (pathwise) term per token, no score function |
#
# The row "scaled by" deserves a number. In GRPO the advantage is divided by the group's reward std. Take
# a group where every completion is correct (reward 1) — a zero-variance group, which teaches nothing
# without a penalty — and fold in a tiny KL with β = 0.01.

# %%
predict("After folding β = 0.01 × KL into the rewards of this all-correct group, how large are its GRPO advantages?",
        ["about 0.01", "exactly zero: the group is still degenerate", "order 1, like a real reward difference"],
        "order 1, like a real reward difference",
        "GRPO divides by the group's std, which is now the tiny spread of the KL terms: whatever that spread, "
        "the advantages come out with unit standard deviation.")

# %%
group_rewards = torch.ones(4, dtype=torch.float64)
tok_logps = torch.log(torch.tensor([[0.9, 0.8, 0.7], [0.6, 0.9, 0.9], [0.95, 0.95, 0.9], [0.5, 0.6, 0.9]],
                                   dtype=torch.float64))
tok_ref = torch.log(torch.tensor([[0.7, 0.8, 0.6], [0.6, 0.5, 0.9], [0.9, 0.9, 0.9], [0.6, 0.6, 0.8]],
                                 dtype=torch.float64))
tok_mask = torch.ones_like(tok_logps)
shaped = kl_shaped_rewards(group_rewards, tok_logps, tok_ref, tok_mask, beta=0.01, estimator="k1")
by_hand_shaped = group_rewards - 0.01 * (tok_logps - tok_ref).sum(-1)
assert torch.allclose(shaped, by_hand_shaped)
shaped_grpo = grpo_advantages(shaped[None, :], on_degenerate="zeros")[0]
shaped_rloo = rloo_advantages(shaped[None, :])[0]
print("rewards              ", group_rewards.tolist())
print("KL-shaped rewards    ", [round(v, 5) for v in shaped.tolist()])
print("GRPO advantages      ", [round(v, 3) for v in shaped_grpo.tolist()], " ← unit scale, from a 0.01·KL difference")
print("RLOO advantages      ", [round(v, 5) for v in shaped_rloo.tolist()], " ← stays at the KL's own scale")
grpo_kl_amplification = float(shaped_grpo.abs().max() / shaped_rloo.abs().max())

# %% [markdown]
# With the std normalisation the penalty's effective size is no longer β: in this group the KL
# differences are blown up to the scale of a real reward difference (the GRPO advantages are larger
# than RLOO's by the factor printed below). RLOO, without a std, keeps them at their own scale. The GRPO
# paper (DeepSeekMath) adds the KL to the loss instead of the reward so as not to complicate the
# advantage; this is one concrete complication. In the loss, β means the same thing in every group.
# `kl_shaped_rewards` is applied *before* the baseline, so a penalty in the reward is treated exactly
# like reward — including by the normalisation.

# %%
print(f"GRPO / RLOO advantage scale in this group: {grpo_kl_amplification:.0f}×")

# %% [markdown]
# ### 3b. Why the reward placement takes k1 only
#
# In the reward the penalty reaches θ only through the score function, E[k(y)·∇log π(y)]. For k1 that is
# ∇KL(π‖π_ref); for k2 and k3 it is some other vector, and nothing makes it point towards the reference.
# Measure the angle exactly: a six-answer softmax policy, moved away from a reference along a fixed
# direction until KL(π‖π_ref) is 0.05 (close) and 2 (far), and the cosine between each estimator's
# expected gradient in the reward and ∇KL(π‖π_ref). A cosine of +1 pulls straight back to the reference;
# a negative one pushes away from it.

# %%
predict("At KL 0.05 — very close to the reference — what is the cosine of k3-in-the-reward's gradient with ∇KL?",
        ["close to +1: near the reference all estimators agree", "about 0: unrelated", "negative: it pushes away"],
        "negative: it pushes away",
        "k3's value is unbiased, but a detached value times ∇log π is not its gradient: the score term of k3 "
        "is ∇KL(π‖π_ref) − ∇KL(π_ref‖π), which need not point anywhere useful, even close to π_ref.")

# %%
six_rng = np.random.default_rng(2)
six_ref = np.exp(six_rng.normal(size=6))
six_ref /= six_ref.sum()
six_direction = six_rng.normal(size=6)


def logits_at_kl(target):
    """log π_ref + t·direction with KL(π‖π_ref) = target (bisection on t)."""
    lo, hi = 0.0, 100.0
    for _ in range(200):
        t = (lo + hi) / 2
        kl_t = categorical_kl(softmax_rows(np.log(six_ref) + t * six_direction), six_ref)
        lo, hi = (t, hi) if kl_t < target else (lo, t)
    return np.log(six_ref) + lo * six_direction


reward_placement_cosines = {}
for distance in (0.05, 2.0):
    logits = logits_at_kl(distance)
    theta_t = torch.tensor(logits, requires_grad=True)
    (true_grad,) = torch.autograd.grad(categorical_kl(torch.softmax(theta_t, -1), torch.tensor(six_ref)), theta_t)
    true_grad = true_grad.numpy()
    for est in ("k1", "k2", "k3"):
        g = expected_kl_gradient(logits, np.log(six_ref), est, "reward")
        reward_placement_cosines[est, distance] = float(g @ true_grad / np.linalg.norm(g) / np.linalg.norm(true_grad))
print("cosine with ∇KL(π‖π_ref) of the expected gradient of the penalty in the reward")
for est in ("k1", "k2", "k3"):
    print(f"  {est}: at KL 0.05 {reward_placement_cosines[est, 0.05]:+.3f}, "
          f"at KL 2 {reward_placement_cosines[est, 2.0]:+.3f}")

# %% [markdown]
# k1's cosine is +1 at both distances; the printout shows where k2's and k3's point on this policy. A
# penalty whose gradient points away from the reference makes "β·KL in the reward" train the policy
# *away* from π_ref, while the logged KL says a penalty is on. So `course_lib`'s config refuses every
# pair but k1 in the reward and k2/k3 in the loss, with this reason in the error:

# %%
bad_pair = get_config("test")
bad_pair.grpo.beta, bad_pair.grpo.kl_placement, bad_pair.grpo.kl_estimator = 0.1, "reward", "k3"
try:
    validate(bad_pair)
except ValueError as refused:
    print("refused:", refused)

# %% [markdown]
# ## 4. Two anchors: π_old and π_ref
#
# | | π_old | π_ref |
# |---|---|---|
# | what it is | the policy that sampled the current batch | a frozen copy, usually the SFT model |
# | refreshed | every rollout (each step); equal to π_θ on the first inner epoch | never, in this course; TRL's `sync_ref_model` (from TR-DPO, [Gorbatovski et al. 2024](https://arxiv.org/abs/2404.09656)) mixes the policy into it every `ref_model_sync_steps` |
# | where it enters | the ratio ρ = π_θ/π_old inside the clipped surrogate | the KL penalty, weight β |
# | time scale | one batch | the whole run |
#
# Run exact PPO updates on the five-answer example (4 inner epochs per batch, ε = 0.2, exact
# expectations): once without a reference penalty, once with β·KL(π‖π_ref).

# %%
predict("Without a reference penalty, does the clip against π_old stop the policy from drifting away from π_ref?",
        ["yes: the ratio is clipped at 1 ± ε", "no: π_old moves with the policy"],
        "no: π_old moves with the policy",
        "The clip bounds each batch's step; the next batch starts from the new policy, so steps add up.")

# %%
def ppo_run(beta_ref, outer_steps=150, inner=4, lr=1.0):
    theta = torch.log(torch.tensor(pi_ref)).clone().requires_grad_(True)
    r_t, ref_t = torch.tensor(reward), torch.tensor(pi_ref)
    step_kl, ref_kl = [], []
    for _ in range(outer_steps):
        old = torch.softmax(theta.detach(), -1)  # π_old: refreshed at every rollout
        adv = r_t - old @ r_t
        for _ in range(inner):
            pi = torch.softmax(theta, -1)
            surrogate = (old * clipped_surrogate(pi / old, adv, 0.2, 0.2)).sum()  # exact expectation under π_old
            objective = surrogate - beta_ref * categorical_kl(pi, ref_t)
            (grad,) = torch.autograd.grad(objective, theta)
            with torch.no_grad():
                theta += lr * grad
        new = torch.softmax(theta.detach(), -1)
        step_kl.append(float(categorical_kl(new, old)))
        ref_kl.append(float(categorical_kl(new, ref_t)))
    return np.array(step_kl), np.array(ref_kl)


anchor_runs = {"β = 0 (π_old only)": ppo_run(0.0), f"β = {beta} (π_old and π_ref)": ppo_run(beta)}
fig, (ax_step, ax_ref) = plt.subplots(1, 2, figsize=(9.5, 3.2))
for i, (name, (step_kl, ref_kl)) in enumerate(anchor_runs.items()):
    ax_step.plot(step_kl, color=f"C{i}", label=name)
    ax_ref.plot(ref_kl, color=f"C{i}", label=name)
    print(f"{name:28}: largest one-step KL(π_new‖π_old) {step_kl.max():.4f}; "
          f"KL to π_ref after {len(ref_kl)} batches {ref_kl[-1]:.4f}")
ax_ref.axhline(categorical_kl(pi_star, pi_ref), color="grey", ls=":", label="KL(π*‖π_ref)")
ax_ref.axhline(-np.log(pi_ref[0]), color="grey", ls="--", label="−log π_ref(A): all mass on A")
ax_step.set(xlabel="batch", ylabel="KL(π_new‖π_old)", title="per-batch step (π_old's job)")
ax_ref.set(xlabel="batch", ylabel="KL(π‖π_ref)", title="total drift (π_ref's job)")
for ax in (ax_step, ax_ref):
    ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
drift_no_ref, drift_with_ref = (anchor_runs["β = 0 (π_old only)"][1][-1],
                                anchor_runs[f"β = {beta} (π_old and π_ref)"][1][-1])
print(f"without π_ref the policy walks to KL {drift_no_ref:.3f} (the ceiling −log π_ref(A) = {-np.log(pi_ref[0]):.3f} "
      f"is all mass on A); with β = {beta} it stops at {drift_with_ref:.4f} = KL(π*‖π_ref) "
      f"{categorical_kl(pi_star, pi_ref):.4f}")

# %% [markdown]
# Both runs take steps of similar size — that is the clip against π_old at work, refreshed every batch:
# π_old constrains the size of *one* update (a trust region per batch), π_ref the *total* drift from the
# start (softly, through β).
# Only the run with a reference penalty stops: π_old moves with the policy, so it cannot hold the policy
# anywhere; π_ref does not move, so β·KL(π‖π_ref) decides where the run ends (here exactly at π*). A
# passport must name both: the clip (ε_low, ε_high) with the number of inner epochs μ, and the
# reference with β, the estimator and the placement.

# %% [markdown]
# ## 5. β on the tiny GPT: the accuracy–KL frontier
#
# Back to the tiny GPT of [Tiny GPT: the GRPO family](09_tiny_gpt_grpo.ipynb): an SFT model that learned its
# teacher's carry mistake, improved by GRPO against the exact-answer checker. The SFT model is the
# reference. Sweep β ∈ {0, 0.01, 0.04, 0.2} for both placements — k3 per token **in the loss** (GRPO's and
# TRL's choice) and k1 per completion **in the reward** (`kl_shaped_rewards`, before the baseline) — with
# everything else fixed: same start, same prompts, same number of steps. For each run, measure
# held-out accuracy (greedy) and the sequence-level KL(π_θ‖π_ref) on held-out prompts
# (`course_lib.tinygpt.evaluation.reference_kl`: the same measurement for every run, whatever trained it).
#
# This sweep is one seed. The end of the section prints it beside the committed benchmark's sweep at three seeds,
# each difference read seed by seed with the rule of [Tiny GPT: SFT then DPO](08_tiny_gpt_dpo.ipynb), section 8
# (beyond the seed spread only when every seed agrees).
#
# *Predict before running:* how much accuracy does the largest β cost here, where the reward is an exact
# checker (nothing to over-optimise)? And which placement will move less at the same β?

# %%
cfg = get_config("cpu")
SWEEP_STEPS = 20 if FAST else 80  # the full budget is the benchmark's (benchmarks/tinygpt_kl_frontier.py)
SEED = 0
# the SFT policy every tiny-GPT notebook starts from, trained once per machine
task, model, _ = sft_start(cfg, seed=SEED, device=DEVICE)
sft_weights = copy.deepcopy(model.state_dict())
reference = copy.deepcopy(model).eval().requires_grad_(False)
baseline = evaluate(model, task)
self_kl = reference_kl(model, reference, task)["kl"]

sweep_settings = [("none", 0.0, "k3")] + [(place, b, est) for place, est in (("loss", "k3"), ("reward", "k1"))
                                          for b in (0.01, 0.04, 0.2)]


def sweep_run(placement, beta, estimator):
    model.load_state_dict(sft_weights)
    gcfg = dataclasses.replace(cfg.grpo, beta=beta, kl_estimator=estimator, steps=SWEEP_STEPS,
                               kl_placement="loss" if placement == "none" else placement)
    log = MetricsLog()
    torch.manual_seed(SEED)
    train_grpo(model, task, gcfg, TrainContext(log=log), generator=torch.Generator().manual_seed(SEED + 1),
               reference_state=sft_weights)
    accuracy = evaluate(model, task, max_completion_length=gcfg.max_completion_length)["accuracy"]
    kl = reference_kl(model, reference, task, max_completion_length=gcfg.max_completion_length)
    return {"placement": placement, "beta": beta, "estimator": estimator, "accuracy": accuracy, **kl,
            "kl_curve": [(r["step"], r["kl"]) for r in log.rows if r.get("kl") is not None]}


sweep = [sweep_run(*setting) for setting in sweep_settings]
strongest = {row["placement"]: row for row in sweep if row["beta"] == 0.2}
display(predict("At β = 0.2, which placement ends closer to the reference (smaller KL(π‖π_ref))?",
                ["k3 per token in the loss", "k1 per completion in the reward"],
                "k3 per token in the loss" if strongest["loss"]["kl"] <= strongest["reward"]["kl"]
                else "k1 per completion in the reward",
                f"Measured in this run: KL {strongest['loss']['kl']:.3f} with k3 in the loss, "
                f"{strongest['reward']['kl']:.3f} with k1 in the reward; the table below has every run, and the end "
                "of this section the same question over three seeds."))

# %%
print(f"SFT reference: held-out accuracy {baseline['accuracy']:.1%}; KL to itself {self_kl:.1f}")
print(f"{'placement':10} {'β':>5} {'estimator':>9} {'held-out accuracy':>18} {'KL(π‖π_ref) ± SE':>18}")
for row in sweep:
    print(f"{row['placement']:10} {row['beta']:5} {row['estimator']:>9} {row['accuracy']:18.1%} "
          f"{row['kl']:11.3f} ± {row['kl_se']:.3f}")

# %% [markdown]
# Each run's post-training passport records where its penalty sat — the "KL placement and coefficient"
# among the six choices every run must document:

# %%
for row in sweep[3::3]:  # the strongest β of each placement
    run_cfg = dataclasses.replace(cfg, grpo=dataclasses.replace(
        cfg.grpo, beta=row["beta"], kl_placement=row["placement"], kl_estimator=row["estimator"]))
    print(passport(run_cfg, "grpo")["six_choices"]["kl_placement_and_coefficient"])

# %%
fig, (ax_front, ax_curve) = plt.subplots(1, 2, figsize=(9.5, 3.8), layout="constrained")
ax_front.scatter([0.0], [baseline["accuracy"]], color="black", marker="*", s=120, zorder=3,
                 label="SFT (the reference)")
free = sweep[0]
# β is shown by the marker's shape (its own legend), not by text labels, which pile up where runs land close together
marker = dict(zip(sorted({r["beta"] for r in sweep}), "osD^vP"))
for i, placement in enumerate(("loss", "reward")):
    rows = [free] + [r for r in sweep if r["placement"] == placement]
    ax_front.plot([r["kl"] for r in rows], [r["accuracy"] for r in rows], "-", color=f"C{i}",
                  label=f"KL in the {placement} ({rows[-1]['estimator']})")
    for r in rows:
        ax_front.plot(r["kl"], r["accuracy"], marker[r["beta"]], color=f"C{i}" if r["beta"] else "grey", ms=6)
run_legend = ax_front.legend(fontsize=8, loc="lower right")
ax_front.add_artist(run_legend)
ax_front.legend([plt.Line2D([], [], ls="", marker=m, color="grey") for m in marker.values()],
                [f"β = {b:g}" for b in marker], fontsize=7, loc="center left", bbox_to_anchor=(1.0, 0.5),
                frameon=False)
ax_front.set(xlabel="measured KL(π_θ‖π_ref) on held-out prompts (nats per completion)",
             ylabel="held-out accuracy", title="accuracy–KL frontier (one seed)")
for i, row in enumerate(sweep):
    if row["kl_curve"]:
        steps_, kls = zip(*row["kl_curve"])
        ax_curve.plot(steps_, kls, color=f"C{i}", label=f"{row['placement']} β={row['beta']}")
ax_curve.set(xlabel="GRPO step", ylabel="KL logged in training", title="KL to π_ref during training")
ax_curve.legend(fontsize=7)
plt.show()

# %%
free_kl, free_acc = free["kl"], free["accuracy"]
for placement in ("loss", "reward"):
    strongest = [r for r in sweep if r["placement"] == placement][-1]
    share = f"{strongest['kl'] / free_kl:.0%} of it" if free_kl > 0 else "β = 0 did not move at all"
    print(f"in this run (one seed): KL in the {placement}, β = {strongest['beta']}: KL {strongest['kl']:.3f} vs "
          f"{free_kl:.3f} at β = 0 ({share}); accuracy {strongest['accuracy']:.1%} vs {free_acc:.1%} "
          f"({100 * (strongest['accuracy'] - free_acc):+.1f} points)")
BENCH = committed_benchmarks("kl_frontier")  # the committed sweep over three seeds (`make bench`); None on Colab
if BENCH:
    sys.path.insert(0, str(BENCH))
    from tables import kl_frontier_verdicts, load

    bench = load("kl_frontier", BENCH / "results")
    bench_lines = kl_frontier_verdicts(bench, len(task.heldout_pairs))
    print(f"\nover seeds (the committed benchmark, seeds {', '.join(map(str, bench['seeds']))}, {bench['steps']} GRPO "
          "steps each):\n" + "\n".join(bench_lines))
else:
    bench_lines = []
    print("benchmarks/results/kl_frontier.json is not here (e.g. on Colab): see the frontier table in docs/results.md")

# %% [markdown]
# Read the printout, not a slogan. The lines "in this run" are one seed, and on this task single runs move by
# several points; the lines "over seeds" are the committed benchmark (`benchmarks/tinygpt_kl_frontier.py`: the
# same sweep, with the settings of this run as its seed 0, at seeds 0, 1, 2 and a longer budget; for accuracy the
# floor is the evaluation noise). In the KL lines, the side "ahead" is the one farther from the reference.
# What a sweep measures is how β trades distance from the reference against accuracy; neighbouring β values
# (and their order on the frontier) are within the run-to-run spread, which is why
# the printout compares only the strongest β with β = 0. Here the reward is an
# exact checker, so moving away from the SFT model is what is wanted: the penalty protects nothing on this
# task, and the printout shows what it cost in this run. Its value shows up when the reward can be gamed
# (see [Reward hacking](11_reward_hacking.ipynb)) or when the reference's other skills must survive. The two
# placements are not the same knob at the same β: in the reward the k1 penalty is centred by the group
# baseline and scaled by the group std, in the loss k3 acts on every token directly (section 3).


# %% [markdown]
# ## Your turn
#
# The sampled answer is C, which π* (the trained policy here) gives less probability than π_ref. Compute
# k1, k2 and k3 for it by hand with NumPy from ℓ = log π_ref(C) − log π*(C), check them with `kl_estimate`,
# and say which one would lower the logged KL below zero on this sample.

# %%
# your code here

# %% [markdown]
# <details><summary>Answer</summary>
#
# π*(C) = 0.0708 against π_ref(C) = 0.45, so ℓ = log(0.45/0.0708) = +1.850: k1 = −ℓ = −1.850,
# k2 = ℓ²/2 = 1.711, k3 = (e^ℓ − 1) − ℓ = 3.509. Only k1 is negative; averaged over samples from π* it is
# still unbiased (section 1), but a single value can pull the logged mean below zero.
# </details>

# %% [markdown]
# ## Check yourself
#
# 1. A run uses `kl_estimator="k1"` in the loss with β = 0.1, and its logged KL keeps climbing. Will β = 1 fix it?
#    <details><summary>Answer</summary>
#    No. E[∇k1] = 0 on on-policy samples: β multiplies a term whose gradient is pure noise. Use k2 in the loss
#    (expected gradient ∇KL(π‖π_ref)) or put k1 in the reward (`kl_shaped_rewards`).
#    </details>
# 2. TRL's GRPO logs a KL computed with k3 and adds β·k3 to the loss. What does the logged number estimate,
#    and what does the penalty's gradient pull on?
#    <details><summary>Answer</summary>
#    The logged mean is an unbiased estimate of the reverse KL(π‖π_ref). The gradient, on on-policy samples,
#    is β·∇KL(π_ref‖π): the forward KL, whose regularised optimum keeps every answer of the reference alive
#    (section 2: the k3 run stops at `forward_kl_regularised_optimum`, not at π*).
#    </details>
# 3. GRPO with μ = 1 and β = 0: what stops the policy from drifting arbitrarily far from the SFT model?
#    <details><summary>Answer</summary>
#    Nothing but the learning rate and the number of steps. π_old is refreshed every batch, so the clip only
#    limits each step (and with μ = 1 the ratio is 1 on the only pass, so it does not even do that); only a
#    reference penalty, β > 0, anchors the total drift (section 4).
#    </details>

# %%
print(clock.report())
