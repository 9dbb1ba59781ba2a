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
# # 04 · Group baselines: GRPO, RLOO and Dr. GRPO advantages
#
# *Pointer for readers of the Module 14 lecture: §9 and §12. Everything below stands on its own.*
#
# After this notebook you will be able to
#
# 1. compute GRPO, RLOO and Dr. GRPO advantages for a group of sampled answers, and say how they differ;
# 2. tell whether a constant factor on the advantages changes training under SGD and under Adam,
#    and what survives Adam;
# 3. predict how often a group carries no signal at all, recognise one in floating point, and decide
#    what to do with it.
#
# **Sources.** GRPO: [Shao et al. 2024](https://arxiv.org/abs/2402.03300). RLOO:
# [Ahmadian et al. 2024](https://arxiv.org/abs/2402.14740). Dr. GRPO:
# [Liu et al. 2025](https://arxiv.org/abs/2503.20783).
#
# What happens *after* the advantages — how they become one update, and how its tokens are averaged —
# is [From advantages to an update](05_from_advantages_to_an_update.ipynb). Some cells ask you to **predict** first:
# pick an option, press *Reveal*, then read on.

# %%
import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import display

from course_lib.formulas.advantages import (
    baseline_gradient,
    dr_grpo_advantages,
    grpo_advantages,
    rloo_advantages,
    zero_variance_groups,
    zero_variance_probability,
)
from course_lib.lesson.explore import figure_png, predict, readout

# %% [markdown]
# ## 1. A group of eight answers, scored by a verifier
#
# For one prompt the policy samples G = 8 answers, G **rollouts** (a rollout is one sampled completion; seen
# as the sequence of tokens the policy chose and the reward it got, a **trajectory**); a checker gives reward
# 1 to a correct one, 0 otherwise. There is no **critic** network (a learned value function that predicts the
# reward). Instead, the group itself provides the baseline: an answer's **advantage** is how much better it
# did than the baseline, here its siblings. GRPO (group relative policy optimisation) standardises inside the group,
# A_i = (r_i − mean) / std.
#
# Three of the eight answers are right. Before computing: which gets the larger advantage in size?

# %%
predict("Rewards [1,0,0,1,0,0,1,0]. Which advantage is larger in absolute value?",
        ["a success's", "a failure's", "they are equal in size"], "a success's",
        "Successes are the minority (3 of 8), so each sits further from the mean 0.375: "
        "+1.291 against −0.775. The advantages still sum to zero: 3 × 1.291 = 5 × 0.775.")

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
# and the std used to judge it. [Baseline bias by enumeration](06_baseline_bias_enumeration.ipynb) measures the bias
# this causes.
#
# **RLOO** (REINFORCE leave-one-out) judges answer i against the mean of the *other* G − 1 answers, b_i = (Σ_j r_j −
# r_i)/(G − 1). Because that baseline does not contain r_i, the **REINFORCE** gradient (reward minus baseline, times
# ∇log π of the sampled answer; [Williams 1992](https://doi.org/10.1007/BF00992696)) stays unbiased. **Dr. GRPO**
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
# All three give every success the same positive value and every failure the same negative value. In
# this group they differ only by a constant factor: RLOO is G/(G − 1) = 8/7 times Dr. GRPO, and GRPO is
# Dr. GRPO divided by this group's std. Whether such a factor matters depends on the optimiser
# (section 3).
#
# ## 2. Population or sample std? ddof = 0 vs ddof = 1
#
# Dividing by G − 1 instead of G makes the std larger by √(G/(G−1)), so every advantage shrinks by
# √((G−1)/G) = √(7/8):

# %%
ddof_ratio = grpo_advantages(rewards, ddof=1)[0] / grpo_advantages(rewards, ddof=0)[0]
print(f"A(ddof=1) / A(ddof=0) = {ddof_ratio:.4f}   √(7/8) = {np.sqrt(7 / 8):.4f}")

# %% [markdown]
# Same direction, every advantage 6.5% smaller — for every group of size 8, whatever its rewards. TRL's
# `scale_rewards="group"` uses ddof = 1 (and adds ε = 10⁻⁴ to the std). Is that a smaller step?
#
# ## 3. A constant factor on the advantages, under SGD and under Adam
#
# Some choices scale every advantage by the same constant c: ddof = 1 (c = √(7/8) on GRPO), and RLOO
# against the centred reward (c = 8/7 in every group). The loss is a sum of advantage × log-prob terms,
# so its gradient is multiplied by c too.
#
# - **SGD** steps by lr × gradient: c × gradient is exactly a learning rate of c × lr.
# - **Adam and AdamW** (what the course's trainers use) step by lr × m/(√v + ε), where m and v are running
#   averages of the gradient and of its square, and ε = 10⁻⁸.
#
# Later notebooks link back to this section whenever a constant factor appears.
#
# Predict before the run below:

# %%
predict("AdamW, two runs identical except that every advantage of the second is multiplied by 7/8. "
        "After 100 steps, how far apart are their parameters?",
        ["about 12% apart, like a 7/8 learning rate", "equal up to rounding (around 1e-8)",
         "the second run diverges"],
        "equal up to rounding (around 1e-8)",
        "Adam divides each step by the running size of the gradient, so a constant factor cancels; only "
        "Adam's ε = 1e-8 in the denominator leaves a trace.")

# %% [markdown]
# **An exact run.** Two prompts share a policy with two parameters θ: prompt j is answered correctly
# with probability p_j = σ(θ · x_j), features x_easy = (1, 1) and x_hard = (1, −1) (reward 1 if correct,
# else 0). For one prompt, ∂log π(a)/∂θ = (a − p_j)·x_j, so the *expected* update of a group baseline
# is `baseline_gradient(p_j, G, baseline)` × x_j — computed exactly by enumerating all 2⁸ groups (the
# function [Baseline bias by enumeration](06_baseline_bias_enumeration.ipynb) derives). No sampling noise: any
# difference between two runs comes from the choice being compared. Each run takes 100 steps from θ = (−2, 1), i.e. p =
# (0.27, 0.05). Three comparisons: RLOO against the full-mean baseline, 7/8 of RLOO (a constant); RLOO against GRPO's ÷
# std (a factor that differs from group to group); and the constant again under AdamW with the gradient
# norm clipped, as the trainers clip it (`max_grad_norm`).

# %%
X = np.array([[1.0, 1.0], [1.0, -1.0]])  # features of the easy and the hard prompt
THETA0, STEPS = (-2.0, 1.0), 100


def success_probabilities(theta):
    return 1.0 / (1.0 + np.exp(-(X @ theta)))


def expected_update(theta, baseline):
    """Mean over the two prompts of the exact expected update of one group of G = 8 samples."""
    p = success_probabilities(theta)
    return np.mean([baseline_gradient(float(pj), 8, baseline) * xj for pj, xj in zip(p, X, strict=True)], axis=0)


def run(optimizer, baseline, max_norm=None):
    """θ after each step of exact expected updates; the gradient norm is clipped at ``max_norm`` if given."""
    theta = torch.tensor(THETA0, dtype=torch.float64, requires_grad=True)
    opt = (torch.optim.SGD([theta], lr=1.0) if optimizer == "SGD"
           else torch.optim.AdamW([theta], lr=0.05, weight_decay=0.0))  # as course_lib.tinygpt.runtime.make_optimizer
    path = [theta.detach().numpy().copy()]
    for _ in range(STEPS):
        theta.grad = torch.from_numpy(-expected_update(theta.detach().numpy(), baseline))
        if max_norm is not None:
            torch.nn.utils.clip_grad_norm_([theta], max_norm)
        opt.step()  # minimising −J: an ascent step on the expected reward J
        path.append(theta.detach().numpy().copy())
    return np.array(path)


runs = {}
for optimizer in ("SGD", "AdamW"):
    runs[optimizer, "RLOO"] = run(optimizer, "leave_one_out")
    runs[optimizer, "full mean (×7/8)"] = run(optimizer, "group_mean")
    runs[optimizer, "GRPO ÷ std"] = run(optimizer, "group_mean_std")
gaps = {}
print(f"{'largest |θ_a − θ_b| over the run':<44}{'SGD':>10}{'AdamW':>10}")
for a, b in [("RLOO", "full mean (×7/8)"), ("RLOO", "GRPO ÷ std")]:
    gaps[a, b] = {opt: float(np.abs(runs[opt, a] - runs[opt, b]).max()) for opt in ("SGD", "AdamW")}
    print(f"{a + '  vs  ' + b:<44}{gaps[a, b]['SGD']:>10.2e}{gaps[a, b]['AdamW']:>10.2e}")

# the constant again, under AdamW, with the gradient norm clipped at RLOO's first gradient norm:
# later gradients of both runs cross it, at different steps
CLIP = float(np.linalg.norm(expected_update(np.array(THETA0), "leave_one_out")))
clipped_adam = float(np.abs(run("AdamW", "leave_one_out", max_norm=CLIP)
                            - run("AdamW", "group_mean", max_norm=CLIP)).max())
print(f"{'RLOO  vs  full mean (×7/8), both clipped':<44}{'':>10}{clipped_adam:>10.2e}")

# %%
fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.6), sharey=True)
for ax, optimizer in zip(axes, ("SGD", "AdamW"), strict=True):
    for k, name in enumerate(["RLOO", "full mean (×7/8)", "GRPO ÷ std"]):
        ax.plot(success_probabilities(runs[optimizer, name].T).T[:, 1], color=f"C{k}",
                ls=["-", "--", "-"][k], lw=2 if k == 1 else 1.5, label=name)
    ax.set(xlabel="step", title=optimizer)
    ax.grid(alpha=0.3)
axes[0].set_ylabel("P(correct) on the hard prompt")
axes[1].legend(fontsize=9)
fig.tight_layout()
plt.show()

# %%
constant_sgd = gaps["RLOO", "full mean (×7/8)"]["SGD"]
constant_adam = gaps["RLOO", "full mean (×7/8)"]["AdamW"]
std_adam = gaps["RLOO", "GRPO ÷ std"]["AdamW"]
print(f"a constant factor: SGD runs {constant_sgd:.2f} apart, AdamW runs {constant_adam:.0e} apart")
print(f"under AdamW, dividing by each group's std moves θ by up to {std_adam:.2f}; "
      f"the same constant with the gradient norm clipped at {CLIP:.3f}, by up to {clipped_adam:.2f}")
assert constant_adam < 1e-6 < 0.01 < min(constant_sgd, std_adam, clipped_adam)

# %% [markdown]
# Read the numbers above. Under SGD the 7/8 factor is a smaller learning rate: the dashed curve lags.
# Under AdamW the two constant-factor runs lie on top of each other — the constant cancels: multiply every
# gradient by c and m grows by c, √v by c, so the step is unchanged up to the tiny ε (and so ddof = 1's
# √(7/8) cancels too, for the same reason). What does not cancel:
#
# - **Per-group std scaling.** GRPO divides each group by *its own* std, which is small for groups the
#   policy almost always fails or solves. Different prompts get different factors, so the direction of the
#   summed update changes: a reweighting by difficulty, not a rescaling.
# - **A factor that changes from step to step.** Adam normalises by a *running* average, so a denominator
#   that varies between batches (the averaging units of
#   [the next notebook](05_from_advantages_to_an_update.ipynb)) is not cancelled.
#
# **Where "Adam cancels a constant" holds.** Two conditions, met by the unclipped runs above and not always
# by a trainer:
#
# 1. **β = 0**: the advantage term is the whole loss. A KL penalty β·KL in the loss is not multiplied
#    by c, so c shifts the balance between the two terms.
# 2. **No gradient clipping that acts on some steps and not on others.** The course's trainers clip the
#    gradient norm at `max_grad_norm` = 1.0. A clip that cuts c × g but leaves g alone (or the reverse)
#    makes the two runs' gradients differ by more than c: the clipped pair above drifts apart under AdamW.
#    (A clip that cuts *every* step of both runs cancels c too: both gradients end at the same norm.)
#
# So "ddof or RLOO's G/(G−1) act like a smaller learning rate" is true for SGD and false for Adam, within
# those two conditions. For Adam, what matters is how the factors differ between groups and between steps.
#
# ## 4. Groups that say nothing
#
# If all eight answers are right, or all wrong — a **zero-variance group** — every centred reward is 0 and GRPO's std
# is 0: the advantage is 0/0. With Bernoulli(p) rewards the chance of that is pᴳ + (1 − p)ᴳ.

# %%
p_zero_var = 0.3**8 + 0.7**8
print(f"P(zero-variance group | p = 0.3, G = 8) = 0.3⁸ + 0.7⁸ = {p_zero_var:.4f}")
assert np.isclose(p_zero_var, zero_variance_probability(0.3, 8))
try:
    grpo_advantages([1, 1, 1, 1, 1, 1, 1, 1])
except ValueError as err:
    print("grpo_advantages refuses to guess:", err)
print("with on_degenerate='zeros':", grpo_advantages([1, 1, 1, 1, 1, 1, 1, 1], on_degenerate="zeros"))

# %% [markdown]
# **Equal is not always "std == 0" in floating point.** Partial-credit rewards such as 0.1 cannot be
# stored exactly in binary. Three equal rewards of 0.1:

# %%
tenths = np.array([0.1, 0.1, 0.1])
naive = (tenths - tenths.mean()) / tenths.std()
print(f"std of [0.1, 0.1, 0.1] = {tenths.std():.3e}  (not 0)  →  naive advantages {naive}")
print("zero_variance_groups([0.1, 0.1, 0.1]) =", zero_variance_groups(tenths))
tenths32 = torch.full((2, 8), 0.1, dtype=torch.float32)
print("float32, two groups of eight 0.1s:", zero_variance_groups(tenths32).tolist())
try:
    grpo_advantages(tenths)
except ValueError as err:
    print("grpo_advantages([0.1, 0.1, 0.1]) raises:", str(err).split(":")[0])

# %% [markdown]
# The rounding left a std of about 10⁻¹⁷, and dividing by it turns pure noise into confident advantages
# of size 1. `zero_variance_groups` decides on the values instead: a group is degenerate when
# max − min ≤ 8·ε·max(1, max|r|), with ε the rounding step of its own dtype (`np.finfo(float).eps`
# ≈ 2.2e-16 in float64) — a few rounding steps, so `[0.1 + 0.2, 0.3, 0.3]` counts as equal while
# `[0, 1e-6]` does not. It is the one place the library and the trainer decide this.

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
wasted = {(p, g): float(zero_variance_probability(p, g)) for p in (0.5, 0.9, 0.99) for g in (8, 32)}
for p in (0.5, 0.9, 0.99):
    print(f"p = {p}: wasted groups {wasted[p, 8]:.1%} at G = 8, {wasted[p, 32]:.1%} at G = 32")

# %% [markdown]
# What the figure shows: a larger G lowers the curve at *every* p. In the middle a group is rarely
# wasted even at G = 8; the curves differ most near the edges — at p = 0.9, G = 32 wastes a small
# fraction of what G = 8 wastes. Only very close to p = 0 or 1 does even G = 32 leave most groups
# empty (p = 0.99 above). A larger G buys signal on easy and hard prompts, at G rollouts per prompt.
#
# What to do with a zero-variance group is a decision, and it should be written down: skip the group
# (the batch gets smaller, and a per-batch averaging denominator changes — a factor that varies from
# step to step, which Adam does not cancel: section 3), resample until it has signal (DAPO's dynamic sampling,
# [Yu et al. 2025](https://arxiv.org/abs/2503.14476); costs rollouts), or give it zero advantages (a KL term can still
# move the model). TRL adds ε = 10⁻⁴ to the std, which makes an exactly-equal group's advantages zero without saying
# so: the "zeros" decision, made silently.
#
# ## 5. Groups of different sizes, and partial credit
#
# A real batch is rarely a neat (n_groups, G) array: a filter drops truncated answers, or some prompts
# are sampled more often than others. Such a batch is stored flat, one reward per answer, with the
# label of its group (its prompt) beside it, and every group is standardised with its **own** mean and
# std. The members of a group need not sit next to each other:

# %%
flat_rewards = np.array([1.0, 0.5, 0.0, 0.2, 0.8])
group_ids = np.array([7, 3, 7, 3, 3])  # prompt 7 has two answers, prompt 3 has three
flat_adv = np.zeros_like(flat_rewards)
for label in np.unique(group_ids):
    members = group_ids == label  # a boolean mask: this group's answers, wherever they are
    x = flat_rewards[members]
    flat_adv[members] = (x - x.mean()) / x.std()
    assert np.allclose(flat_adv[members], grpo_advantages(x))
print("rewards   ", flat_rewards, "\ngroups    ", group_ids, "\nadvantages", np.round(flat_adv, 4))

# %% [markdown]
# `reshape(-1, G)` would only be right if every group had G answers stored side by side; here it would
# mix prompts. The same loop gives RLOO (each answer minus the mean of the *other* answers of its group)
# and catches the two degenerate cases per group: a group of one has no siblings, and a group whose
# rewards are all equal has no signal.
#
# With **partial credit** a checker gives one of several reward values, not just pass or fail. A group
# carries no signal when all G answers earn the same value. If one answer earns value k with probability
# q_k, the G answers all earn k with probability q_k^G, so P(all equal) = Σ_k q_k^G — for pass/fail,
# p^G + (1 − p)^G, the curve above. A simulation agrees:

# %%
q = np.array([0.5, 0.3, 0.2])  # P(reward 0), P(reward 0.5), P(reward 1)
group_size = 4
exact = float(np.sum(q**group_size))
draws = np.random.default_rng(0).choice(3, size=(200_000, group_size), p=q)
simulated = float(np.mean(np.all(draws == draws[:, :1], axis=1)))
print(f"P(all {group_size} answers earn the same reward): exact {exact:.4f}, simulated {simulated:.4f}")
assert abs(simulated - exact) < 0.003
assert np.isclose(np.sum(np.array([0.3, 0.7]) ** 8), zero_variance_probability(0.3, 8))  # pass/fail

# %% [markdown]
# ## 6. Explorer: rewards and ddof → advantages
#
# Type a group of rewards (any numbers, comma separated) and choose the std convention.

# %%
reward_box = widgets.Text(value="1, 0, 0, 1, 0, 0, 1, 0", description="rewards")
ddof_choice = widgets.ToggleButtons(options=[("ddof = 0", 0), ("ddof = 1", 1)], value=0, description="std")
advantage_text, advantage_plot = widgets.HTML(), widgets.Image(format="png")


def show_advantages(_=None):
    try:
        r = np.array([float(v) for v in reward_box.value.replace(";", ",").split(",") if v.strip()])
        a = grpo_advantages(r, ddof=ddof_choice.value, on_degenerate="zeros")
    except ValueError as err:
        advantage_text.value = readout(f"cannot use these rewards: {err}")
        return
    lines = ["GRPO: " + np.array2string(a, precision=3) + f"   sum {round(float(a.sum()), 12) + 0.0:.3f}",
             "RLOO: " + np.array2string(rloo_advantages(r), precision=3)]
    degenerate = bool(zero_variance_groups(r))
    if degenerate:
        lines.append("zero-variance group: no relative signal, advantages set to 0")
    advantage_text.value = readout(lines)
    fig, ax = plt.subplots(figsize=(6, 2.4))
    ax.bar(np.arange(len(r)), a, color=["C2" if v > 0 else "C3" for v in a])
    ax.axhline(0, color="grey", lw=0.8)
    if degenerate:  # all bars have height 0: say so inside the plot
        ax.set_ylim(-1, 1)
        ax.text(0.5, 0.6, "all rewards equal: every advantage is 0", ha="center", transform=ax.transAxes)
    ax.set_xticks(np.arange(len(r)), [f"#{i + 1}" for i in range(len(r))])
    ax.set(xlabel="sample", ylabel="GRPO advantage")
    advantage_plot.value = figure_png(fig)


reward_box.observe(show_advantages, names="value")
ddof_choice.observe(show_advantages, names="value")
show_advantages()
display(widgets.VBox([reward_box, ddof_choice, advantage_text, advantage_plot]))

# %% [markdown]
# ## Your turn
#
# A group of four gets partial-credit rewards [0.2, 0.5, 0.5, 0.8]. Compute its GRPO (ddof = 0), RLOO and
# Dr. GRPO advantages by hand with NumPy, then check with the library. Which two of the three differ by
# a constant factor, and what is it?

# %%
# your code here

# %% [markdown]
# <details><summary>Answer</summary>
#
# Mean 0.5, population std √(0.045) = 0.2121. Dr. GRPO: [−0.3, 0, 0, 0.3]; GRPO: [−1.414, 0, 0, 1.414];
# RLOO: r_i − (2.0 − r_i)/3 = [−0.4, 0, 0, 0.4]. RLOO = G/(G−1) × Dr. GRPO = 4/3 × Dr. GRPO in every group;
# GRPO = Dr. GRPO / std, a factor that depends on the group.
# </details>
#
# ## Check yourself
#
# 1. A group of 8 has a single success. What are its GRPO advantages (ddof = 0)?
#    <details><summary>Answer</summary>
#    mean 0.125, std √(0.125·0.875) = 0.331: the success gets +2.646, each failure −0.378. Rare successes get large
#    advantages.
#    </details>
# 2. At p = 0.9 and G = 8, how often is a group wasted? And at G = 16?
#    <details><summary>Answer</summary>
#    0.9⁸ + 0.1⁸ ≈ 0.430; 0.9¹⁶ + 0.1¹⁶ ≈ 0.185. Easy prompts waste many groups; bigger groups help, at the cost of
#    more rollouts.
#    </details>
# 3. You switch a GRPO run from ddof = 0 to ddof = 1 and keep AdamW and the learning rate. Does training change?
#    <details><summary>Answer</summary>
#    Essentially not, with two conditions: ddof = 1 multiplies every advantage by √((G−1)/G), a constant, and
#    Adam's update does not change when every gradient is multiplied by the same constant (up to its ε) —
#    provided β = 0 (a KL term is not multiplied, so the constant would shift the balance between the two terms)
#    and gradient clipping does not act on some steps and not others (the course's trainers clip the norm at
#    1.0; section 3's clipped pair shows a clip that acts breaking the invariance). Under plain SGD it would be a 6.5%
#    smaller step.
#    </details>
