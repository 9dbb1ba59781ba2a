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
# # 06 · Which baseline is biased? Enumerate every group and see
#
# *Pointer for readers of the Module 14 lecture: §3 (REINFORCE with a baseline) and §12 (the exact bias
# example). Everything below stands on its own.*
#
# After this notebook you will be able to
#
# 1. write the REINFORCE gradient for a one-parameter policy and compute its exact expectation under a
#    group baseline by listing all 2ᴳ groups;
# 2. say, from the exact expectation, how much of the true gradient the full group mean and leave-one-out keep;
# 3. confirm the exact values by simulation, with error bars, and say what dividing by the std adds.

# %%
import itertools

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import Markdown, display

from course_lib.formulas.advantages import baseline_gradient, conditional_advantage, grpo_advantages
from course_lib.formulas.policy_loss import aggregate, clipped_surrogate
from course_lib.lesson.explore import predict, readout

# %% [markdown]
# ## 1. A policy small enough to enumerate
#
# One parameter θ, one action a ∈ {0, 1} with P(a = 1) = p = σ(θ), and reward r = a. The expected
# reward is J(θ) = p, so the true gradient is dJ/dθ = σ'(θ) = p(1 − p): 0.21 at p = 0.3.
#
# REINFORCE estimates it without differentiating the reward: sample a, then use (r − b)·∂log π(a)/∂θ.
# For this policy ∂log π(a)/∂θ = a − p (check: for a = 1 it is 1 − p, for a = 0 it is −p). With G samples
# per group we average the G per-sample terms. The baseline b_i may use the other samples of the group:
#
# - **none**: b_i = 0;
# - **full group mean** (GRPO's centring): b_i = mean of all G rewards, *including r_i*;
# - **leave-one-out** (RLOO): b_i = mean of the other G − 1 rewards.

# %%
p, G = 0.3, 8
true_grad = p * (1 - p)
print(f"true gradient p(1 − p) = {true_grad:.2f}")


def group_gradient(actions, p, baseline):
    """Average over one group of (r_i − b_i)·(a_i − p), with reward r = a."""
    a = np.asarray(actions, dtype=float)
    if baseline == "none":
        b = np.zeros_like(a)
    elif baseline == "full mean":
        b = np.full_like(a, a.mean())
    else:  # leave-one-out
        b = (a.sum() - a) / (len(a) - 1)
    return float(np.mean((a - b) * (a - p)))


# %% [markdown]
# ## 2. All 2⁸ = 256 groups, exactly
#
# Every group is a string of eight 0/1 actions. Its probability is pᵏ(1 − p)ᴳ⁻ᵏ with k successes. The
# expected gradient is the probability-weighted sum of the group gradients — no sampling, no noise.
# Before the enumeration runs:

# %%
predict("p = 0.3, G = 8, true gradient 0.21. What expected gradient does the full-group-mean baseline give?",
        ["0.21: any baseline leaves the expectation unchanged", "0.18375 = 7/8 × 0.21",
         "0: the advantages sum to zero"],
        "0.18375 = 7/8 × 0.21",
        "The full mean contains the sample's own reward, so 1/G of each sample's signal is subtracted from itself; "
        "only a baseline independent of the sample (leave-one-out) keeps the expectation at 0.21.")

# %%
rows = []
for actions in itertools.product((0, 1), repeat=G):
    k = sum(actions)
    rows.append((actions, p**k * (1 - p) ** (G - k),
                 *(group_gradient(actions, p, b) for b in ("none", "full mean", "leave-one-out"))))
print(f"{len(rows)} groups, total probability {sum(r[1] for r in rows):.6f}")
print("first rows:   actions            probability  grad(none) grad(full mean) grad(LOO)")
for actions, prob, g_none, g_mean, g_loo in rows[:4] + rows[-2:]:
    print(f"              {''.join(map(str, actions))}           {prob:.6f}    {g_none:+.4f}    {g_mean:+.4f}        "
          f"{g_loo:+.4f}")

exact = {name: sum(r[1] * r[2 + i] for r in rows) for i, name in enumerate(("none", "full mean", "leave-one-out"))}
full_mean_grad, loo_grad = exact["full mean"], exact["leave-one-out"]
print(f"\nexpected gradient: no baseline {exact['none']:.4f}   full mean {full_mean_grad:.5f}   leave-one-out "
      f"{loo_grad:.4f}")

# %% [markdown]
# Groups with the same number of successes k have the same gradient, so the 256 rows collapse into nine:

# %%
print(" k  groups  P(k successes)  grad(full mean)  grad(LOO)")
for k in range(G + 1):
    same_k = [r for r in rows if sum(r[0]) == k]
    print(f"{k:2d}  {len(same_k):6d}  {sum(r[1] for r in same_k):14.5f}  {same_k[0][3]:15.4f}  {same_k[0][4]:9.4f}")

# %% [markdown]
# The full-group mean gives 0.18375 = (G − 1)p(1 − p)/G = 7/8 × 0.21, leave-one-out gives 0.21. Why:
# b_i = mean(r) contains r_i / G, so a fraction 1/G of every sample's own reward is subtracted from itself.
# That piece is correlated with a_i − p and takes away exactly 1/G of the signal. The leave-one-out
# baseline does not contain r_i, is independent of a_i, and leaves the expectation alone.
#
# The library's `baseline_gradient` does the same enumeration, vectorised:

# %%
for name, key in (("none", "none"), ("full mean", "group_mean"), ("leave-one-out", "leave_one_out")):
    library = baseline_gradient(p, G, key, method="exact")
    print(f"{name:>14}: ours {exact[name]:.5f}   course_lib {library:.5f}")
    assert np.isclose(exact[name], library)
assert np.isclose(full_mean_grad, (G - 1) * p * (1 - p) / G)

# %% [markdown]
# The full-mean bias is a constant factor (G − 1)/G on the expected update, the same for every prompt.
# Under plain SGD that is a smaller learning rate; under AdamW it cancels, within the conditions of
# [Group baselines, section 3](04_group_baselines.ipynb). What this bias changes there is only how it combines with
# factors that are *not* constant, such as GRPO's per-group std (section 4).
#
# ## 3. Monte-Carlo: simulation agrees, within its error bars
#
# In training nobody enumerates; groups are sampled. The simulated mean of many group gradients converges
# to the exact values, with a standard error that shrinks like 1/√n.

# %%
sizes = [100, 300, 1_000, 3_000, 10_000, 30_000, 100_000]
simulated = {
    key: [baseline_gradient(p, G, key, method="simulate", n_groups=n, seed=n) for n in sizes]
    for key in ("group_mean", "leave_one_out")
}
fig, ax = plt.subplots(figsize=(8, 3.6))
for i, (key, label) in enumerate((("group_mean", "full group mean"), ("leave_one_out", "leave-one-out"))):
    means = [est.mean for est in simulated[key]]
    errors = [2 * est.stderr for est in simulated[key]]
    ax.errorbar(np.array(sizes) * (1 + 0.08 * i), means, yerr=errors, fmt="o", capsize=3, color=f"C{i}",
                label=f"simulated, {label} (±2 s.e.)")
ax.axhline(full_mean_grad, color="C0", ls="--", label=f"exact {full_mean_grad:.5f}")
ax.axhline(loo_grad, color="C1", ls="--", label=f"exact {loo_grad:.2f}")
ax.set(xscale="log", xlabel="number of simulated groups", ylabel="estimated dJ/dθ", title="p = 0.3, G = 8")
ax.grid(alpha=0.3)
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()
mc = simulated["group_mean"][-1], simulated["leave_one_out"][-1]
print(f"100,000 groups: full mean {mc[0].mean:.4f} ± {mc[0].stderr:.4f}   leave-one-out {mc[1].mean:.4f} ± "
      f"{mc[1].stderr:.4f}")
bias_gap = loo_grad - full_mean_grad
print(f"the bias to detect: {loo_grad:.2f} − {full_mean_grad:.5f} = {bias_gap:.5f}")
stderr_of = {n: simulated["group_mean"][i].stderr for i, n in enumerate(sizes)}
for n in sizes:
    z = abs(simulated["group_mean"][sizes.index(n)].mean - loo_grad) / stderr_of[n]
    print(f"{n:>7,} groups: full-mean estimate s.e. {stderr_of[n]:.4f}; this run's estimate lies {z:5.1f} of its "
          "standard errors from 0.21")

# %% [markdown]
# Each line measures *this run's* simulated estimate, noise included, against 0.21. (Question 3 of
# "Check yourself" measures a different thing in the same unit: the *exact* bias, 0.21 − 0.18375,
# divided by a run's standard error — what a run would show on average.)
#
# The standard error falls like 1/√n: each tenfold increase in groups divides it by about 3.2. In this
# one-parameter toy the per-group noise is small, so even the smallest run puts 0.21 several standard
# errors away from the biased estimate. The number of groups a run needs to expose a bias grows like
# (noise / bias)²: a bias that is small against the noise of a real gradient can hide in any single run.
#
# ## 4. What dividing by the std adds
#
# GRPO also divides each group by its std (and must decide what a zero-variance group means; here: zero
# advantages). That makes each group's contribution depend on how spread its rewards happen to be:

# %%
grpo_grad = baseline_gradient(p, G, "group_mean_std", method="exact")
print(f"p = 0.3, G = 8: with std normalisation the expected update is {grpo_grad:.4f}, "
      f"{grpo_grad / true_grad:.2f} × the true gradient")

grid = np.linspace(0.02, 0.98, 49)
curves = {key: np.array([baseline_gradient(float(q), G, key) for q in grid])
          for key in ("leave_one_out", "group_mean", "group_mean_std")}
fig, (ax, ax_ratio) = plt.subplots(1, 2, figsize=(9.5, 3.6))
for key, label in (("leave_one_out", "leave-one-out = true p(1−p)"), ("group_mean", "full mean"),
                   ("group_mean_std", "full mean ÷ std (GRPO)")):
    ax.plot(grid, curves[key], label=label)
    ax_ratio.plot(grid, curves[key] / (grid * (1 - grid)), label=label)
ax.set(xlabel="p", ylabel="expected update", title=f"exact expected update, G = {G}")
ax_ratio.set(xlabel="p", ylabel="expected update / true gradient", title="relative to the true gradient")
for a in (ax, ax_ratio):
    a.grid(alpha=0.3)
    a.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# Without the std, the bias is a constant factor (G − 1)/G for every prompt. With the std, the factor
# depends on p: prompts the policy almost always solves or almost always fails get their (rare) informative
# groups blown up by a small std. That is a *difficulty-dependent* reweighting, not just a rescaling — one of
# the biases later analyses and Dr. GRPO point at. Unlike the constant (G − 1)/G, it survives Adam: it
# changes how prompts are weighted against each other, so it changes the direction of the update.
#
# ## 5. Explorer: p and G

# %%
p_slider = widgets.FloatSlider(value=0.3, min=0.02, max=0.98, step=0.01, description="p")
g_slider = widgets.IntSlider(value=8, min=2, max=16, description="G")


bias_text = widgets.HTML()


def show_bias(_=None):
    p, G = p_slider.value, g_slider.value
    true = p * (1 - p)
    lines = [f"true gradient p(1−p)        {true:.5f}"]
    for key, label in (("group_mean", "full mean"), ("leave_one_out", "leave-one-out"),
                       ("group_mean_std", "full mean ÷ std")):
        value = baseline_gradient(p, G, key)
        lines.append(f"{label:<28}{value:.5f}   ({value / true:.3f} × true)")
    lines.append(f"(G−1)/G                     {(G - 1) / G:.5f}")
    bias_text.value = readout(lines)


p_slider.observe(show_bias, names="value")
g_slider.observe(show_bias, names="value")
show_bias()
display(widgets.VBox([p_slider, g_slider, bias_text]))

# %% [markdown]
# ## 6. Two answers per prompt: GRPO as a contrastive pair
#
# Take the smallest group, G = 2, with a 0/1 reward. The pair either agrees (zero variance: no update) or
# it is mixed, and then GRPO's advantages are +1 for the right answer and −1 for the wrong one (mean ½,
# population std ½). The update pushes log π(y⁺) up and log π(y⁻) down by the same amount: the shape of
# DPO's gradient on a (chosen, rejected) pair, with a constant weight where DPO has β·σ(−z). Wu et al.
# read GRPO this way ("It Takes Two: Your GRPO Is Secretly DPO", [Wu et al. 2025](https://arxiv.org/abs/2510.00977)).
# How much of the true gradient does it keep?

# %%
predict("p = 0.3, G = 2. What fraction of the true gradient p(1 − p) does GRPO's expected update keep?",
        ["1/2, like the full mean at G = 2", "all of it", "it depends on p"],
        "all of it",
        "A mixed pair contributes ½[(1 − p) + p] = ½ per answer and happens with probability 2p(1 − p), so the "
        "expectation is exactly p(1 − p) at every p: dividing by the pair's std (½) undoes the full mean's ½.")

# %%
print("GRPO advantages of a mixed pair:", grpo_advantages([1.0, 0.0]).tolist())
for q in (0.1, 0.3, 0.5, 0.9):
    print(f"p = {q}: GRPO at G = 2 → {baseline_gradient(q, 2, 'group_mean_std'):.4f}   "
          f"true p(1 − p) = {q * (1 - q):.4f}   full mean alone → {baseline_gradient(q, 2, 'group_mean'):.4f}")

# %% [markdown]
# The same identity on token sequences, by hand and then through the library's loss: two completions
# with per-token log-probs, **on-policy** (sampled by the policy being trained: π_old = π_θ, so every ratio is 1 and no
# clip is active), averaged per completion. The loss's gradient should be ½(∇ mean log π(y⁺) − ∇ mean log π(y⁻)):

# %%
logps = torch.log(torch.tensor([[0.6, 0.3, 0.8], [0.5, 0.9, 0.2]], dtype=torch.float64)).requires_grad_()
mask = torch.tensor([[1.0, 1.0, 0.0], [1.0, 1.0, 1.0]], dtype=torch.float64)  # y⁺ has 2 tokens, y⁻ has 3
advantages = grpo_advantages(torch.tensor([1.0, 0.0], dtype=torch.float64))
objective = clipped_surrogate(torch.exp(logps - logps.detach()), advantages)
(library_grad,) = torch.autograd.grad(aggregate(objective, mask, "sequence_mean"), logps)
by_hand = 0.5 * torch.stack([mask[0] / 2, -mask[1] / 3])  # ½ ∂(mean log π(y⁺) − mean log π(y⁻))
print("library:", library_grad.numpy().round(4).tolist())
print("by hand:", by_hand.numpy().round(4).tolist())
print(f"largest difference: {float((library_grad - by_hand).abs().max()):.1e}")

# %% [markdown]
# So at G = 2, GRPO is a pairwise, DPO-like objective on length-normalised log-probs (SimPO's averaging),
# built online from the policy's own samples and weighted equally instead of by σ(−z). What it gives up is
# the number of informative pairs: only a fraction 2p(1 − p) of prompts produce one.
#
# ## 7. The advantage once a group carries signal
#
# Section 4 looked at the whole gradient. Yang et al. look at a single answer's advantage ("Your
# Group-Relative Advantage Is Biased", [Yang et al. 2026](https://arxiv.org/abs/2601.08521)). Only
# groups with both outcomes produce an update, so the advantages that actually train the model are
# averages over those groups only. Condition on that, and the expected baseline moves — differently for
# hard and easy prompts. `conditional_advantage(p, G, baseline)` enumerates the other G − 1 answers exactly.

# %%
predict("p = 0.05 (a hard prompt), G = 8, full-mean baseline. Over the groups that produce an update, is a "
        "correct answer's average advantage above or below its true advantage 1 − p = 0.95?",
        ["above", "below", "equal: the advantages sum to zero"],
        "below",
        "A group that produces an update has at least one other right answer or at least one wrong one; for a hard "
        "prompt a correct answer's group mean is at least 1/8, so its advantage is at most 0.875 — less than 0.95. "
        "On an easy prompt at least one other answer had to fail, which pushes a correct answer's advantage up.")

# %%
for q in (0.05, 0.2, 0.5, 0.8, 0.95):
    mean_b, std_b = conditional_advantage(q, G, "group_mean"), conditional_advantage(q, G, "group_mean_std")
    print(f"p = {q:4}: full mean {mean_b.estimate:+.3f} vs true {mean_b.true:+.3f}   "
          f"÷ std {std_b.estimate:+.3f} vs true {std_b.true:+.3f}")

grid = np.linspace(0.02, 0.98, 49)
fig, ax = plt.subplots(figsize=(6, 3.4))
for key, label in (("group_mean", "full mean"), ("group_mean_std", "full mean ÷ std (GRPO)")):
    ratio = [conditional_advantage(float(q), G, key).estimate / conditional_advantage(float(q), G, key).true
             for q in grid]
    ax.plot(grid, ratio, label=label)
ax.axhline(1.0, color="grey", lw=0.8, ls="--")
ax.set(xlabel="p (how often the policy solves the prompt)", ylabel="estimate / true advantage",
       title=f"a correct answer's advantage, G = {G}, given an update")
ax.grid(alpha=0.3)
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# Below the dashed line on hard prompts, above it on easy ones: the estimator under-rates the rare
# successes that matter most for learning and over-rates answers the policy already gives. Larger G
# shrinks the effect (try `conditional_advantage(0.05, 64)`), and the paper's repair reweights each prompt
# by a running estimate of its difficulty. Neither analysis makes GRPO wrong; each names an inductive bias a
# run report should know about.

# %% [markdown]
# ## Your turn
#
# Use `baseline_gradient` to find, at p = 0.3, the smallest G for which the full-mean baseline keeps at
# least 95% of the true gradient. Then check your answer against the formula (G − 1)/G.

# %%
# your code here

# %% [markdown]
# <details><summary>Answer</summary>
#
# (G − 1)/G ≥ 0.95 means G ≥ 20: `baseline_gradient(0.3, 20, "group_mean") / 0.21` = 0.95 (G = 19 gives
# 0.947). The same G at every p, since the factor does not depend on p.
# </details>

# %% [markdown]
# ## Check yourself
#
# 1. At G = 2, what fraction of the true gradient does the full-group-mean baseline keep?
#    <details><summary>Answer</summary>
#    (G − 1)/G = 1/2. The bias matters most for small groups.
#    </details>
# 2. Why is a leave-one-out baseline allowed to depend on the other samples but not on sample i?
#    <details><summary>Answer</summary>
#    E[(b)(a_i − p)] = E[b]·E[a_i − p] = 0 when b is independent of a_i, because the score has mean zero. If b
#    contains r_i, the product no longer factorises and the expectation shifts.
#    </details>

# %%
se_100, se_1000 = stderr_of[100], stderr_of[1_000]
still_clear = " — still clear here" if bias_gap / se_100 > 3 else ", too few to be sure"
display(Markdown(f"""3. This notebook's simulation with 1,000 groups gives the full-mean baseline a standard error of
   {se_1000:.4f}. Could a single such run tell the full-mean estimate (about 0.184) apart from 0.21?
   <details><summary>Answer</summary>
   Yes: the exact bias 0.21 − 0.18375 = {bias_gap:.4f} is {bias_gap / se_1000:.0f} times that standard error. With 100
   groups (s.e. {se_100:.4f}) it is {bias_gap / se_100:.1f} times{still_clear}.
   (Section 3's lines are another quantity: how far one run's noisy estimate landed from 0.21, in its s.e.)
   The standard error shrinks like 1/√n.
   </details>"""))
