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
# # 03 · The regularised objective: π* in closed form, DPO derived from it, and which way KL looks
#
# *Pointer for readers of the Module 14 lecture: §4 and §6. Everything below stands on its own.*
#
# Every RLHF recipe (reinforcement learning from human feedback:
# [Christiano et al. 2017](https://arxiv.org/abs/1706.03741)) writes the same objective: maximise reward while staying
# close to a **reference model** π_ref (a frozen copy of the starting policy, usually the SFT model: the one trained by
# supervised fine-tuning on good answers), with a KL penalty of weight β. [DPO margins](02_dpo_margins.ipynb) used one
# consequence of it (the implicit reward) without deriving it. Here the objective is solved exactly on a small example,
# DPO is derived from it step by step, and the penalty's direction is taken apart.
# After this notebook you will be able to
#
# 1. solve max E_π[r] − β·KL(π‖π_ref) in closed form, π* ∝ π_ref·exp(r/β), and check it numerically;
# 2. derive the DPO loss from it, naming every assumption, including "replace π* by π_θ";
# 3. tell forward from reverse KL (mode-covering vs mode-seeking) and say which one the objective names.
#
# Everything here is exact arithmetic and runs in seconds; what a KL penalty does inside a trainer
# (its estimators, where it sits, and a β sweep on the tiny GPT) comes in
# [The KL term](10_the_kl_term.ipynb), once the course has trained a model against a KL penalty. The last cell prints
# how long this run took.

# %%
import os

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import display

from course_lib.formulas.kl import categorical_kl, kl_regularised_optimum, regularised_objective
from course_lib.formulas.preference import bt_probability, dpo_terms
from course_lib.lesson.explore import figure_png, predict, readout
from course_lib.lesson.stopwatch import Stopwatch

FAST = os.environ.get("COURSE_FAST") == "1"  # nothing here trains: FAST only labels the timing
clock = Stopwatch("COURSE_FAST=1" if FAST else "full")
rng = np.random.default_rng(0)

# %% [markdown]
# ## 1. The objective, solved exactly
#
# Take one prompt with five possible answers A–E. The reference policy (the SFT model) gives them
# probabilities π_ref; a reward model scores them r. The RLHF objective for this prompt is
#
# $$J(\pi) = \sum_y \pi(y)\,r(y) \;-\; \beta \sum_y \pi(y) \log\frac{\pi(y)}{\pi_{\mathrm{ref}}(y)}.$$
#
# Maximise over all distributions π (a Lagrange multiplier for Σπ = 1): the derivative
# r(y) − β·log(π(y)/π_ref(y)) − β − λ must vanish for every y, so log π(y) = log π_ref(y) + r(y)/β + const:
#
# $$\pi^*(y) = \frac{\pi_{\mathrm{ref}}(y)\, e^{r(y)/\beta}}{Z}, \qquad Z = \sum_y \pi_{\mathrm{ref}}(y)\,
# e^{r(y)/\beta}.$$
#
# The reference is re-weighted by exp(r/β): β is the exchange rate between reward and log-probability.
# The answers below: A has the best reward, C is the reference's favourite.

# %%
predict("With β = 0.5, which answer does π* make most likely?",
        ["A, the best reward", "C, the reference's favourite", "all five about equally"],
        "A, the best reward",
        "exp(r/β) multiplies A's reference probability by e² ≈ 7.4 and C's by e⁻¹ ≈ 0.37: A overtakes C.")

# %%
answers = ["A", "B", "C", "D", "E"]
pi_ref = np.array([0.20, 0.10, 0.45, 0.15, 0.10])
reward = np.array([1.0, 0.8, -0.5, -0.2, 0.0])
beta = 0.5

weights = pi_ref * np.exp(reward / beta)  # by hand
Z = weights.sum()
pi_star = weights / Z
optimum = kl_regularised_optimum(pi_ref, reward, beta)  # the library
assert np.allclose(optimum.probs, pi_star, atol=1e-14) and np.isclose(optimum.log_partition, np.log(Z))

J_star = regularised_objective(pi_star, pi_ref, reward, beta)
print("answer   π_ref   reward    π*")
for a, p0, rr, p1 in zip(answers, pi_ref, reward, pi_star):
    print(f"  {a}     {p0:.3f}   {rr:+.2f}    {p1:.4f}")
print(f"E_π*[r] = {pi_star @ reward:.4f}, KL(π*‖π_ref) = {categorical_kl(pi_star, pi_ref):.4f}, "
      f"J(π*) = {J_star:.4f} = β·log Z = {beta * np.log(Z):.4f}")
for b in (0.01, 100.0):
    print(f"β = {b:>6}: π* = {np.round(kl_regularised_optimum(pi_ref, reward, b).probs, 3)}")

# %% [markdown]
# Small β: π* piles onto the best answer (reward maximisation). Large β: π* stays at π_ref. The value at
# the optimum is β·log Z — a soft maximum of the rewards, weighted by the reference.
#
# **Does π\* really beat everything else?** Try 20,000 competitors: random distributions over the five
# answers, and small random perturbations of π*'s logits.

# %%
def softmax_rows(logits):
    e = np.exp(logits - logits.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


competitors = np.vstack([
    rng.dirichlet(np.ones(5), size=10_000),
    softmax_rows(np.log(pi_star) + rng.normal(scale=0.05, size=(10_000, 5))),
])
J_competitors = regularised_objective(competitors, pi_ref, reward, beta)
perturbation_gap = J_star - J_competitors.max()
print(f"best of {len(competitors):,} competitors: J = {J_competitors.max():.6f} < J(π*) = {J_star:.6f} "
      f"(gap {perturbation_gap:.2e}); competitors beating π*: {(J_competitors >= J_star).sum()}")

# %% [markdown]
# ## 2. From π* to the DPO loss, step by step
#
# **Step 1 — solve for the reward.** Take logs of π* = π_ref·exp(r/β)/Z and rearrange:
#
# $$r(y) = \beta \log\frac{\pi^*(y)}{\pi_{\mathrm{ref}}(y)} + \beta \log Z.$$
#
# This needs Z finite (true for finitely many answers) and π_ref(y) > 0 for every answer we reason about.

# %%
recovered = beta * np.log(pi_star / pi_ref) + beta * np.log(Z)
reward_recovery_error = np.abs(recovered - reward).max()
print(f"β·log(π*/π_ref) + β·log Z = {np.round(recovered, 6)}  (max error {reward_recovery_error:.1e})")

# %% [markdown]
# **Step 2 — Z cancels in a comparison.** Under Bradley–Terry (see [Bradley–Terry](01_bradley_terry.ipynb))
# P(y_w ≻ y_l) = σ(r(y_w) − r(y_l)). Z depends on the prompt, not on the answer, so in the difference
# the β·log Z terms cancel:
#
# $$P(y_w \succ y_l) = \sigma\!\left(\beta \log\frac{\pi^*(y_w)}{\pi_{\mathrm{ref}}(y_w)} - \beta
# \log\frac{\pi^*(y_l)}{\pi_{\mathrm{ref}}(y_l)}\right).$$
#
# Check on all 20 ordered pairs: the preference probability computed from the rewards and computed from
# the two policies alone (no Z anywhere) agree.

# %%
pairs = [(win, lose) for win in range(5) for lose in range(5) if win != lose]
from_rewards = np.array([bt_probability(reward[w] - reward[lo]) for w, lo in pairs])
log_ratio_star = np.log(pi_star / pi_ref)
from_policies = np.array([bt_probability(beta * (log_ratio_star[w] - log_ratio_star[lo])) for w, lo in pairs])
bt_cancel_error = np.abs(from_rewards - from_policies).max()
print(f"{len(pairs)} pairs, max |P from rewards − P from policies| = {bt_cancel_error:.1e}")

# %% [markdown]
# **Step 3 — replace π\* by π_θ.** We do not know r, so we do not know π*. DPO *parametrises* the unknown
# optimum by the policy we train: it writes the Bradley–Terry likelihood of the observed preferences
# with β·log(π_θ/π_ref) in place of the reward, and maximises it over θ. The loss of one pair is
# −log σ(z) with z = β·[log π_θ(y_w)/π_ref(y_w) − log π_θ(y_l)/π_ref(y_l)] — exactly `dpo_terms`.
# This step is sound when
#
# - the preferences really follow Bradley–Terry with *some* reward r (the data's labelling model);
# - π_θ can represent π* (here: a softmax with one logit per answer can represent anything);
# - β and π_ref in the loss are the β and π_ref of the objective we mean to solve;
# - the pairs cover the answers: the loss only sees answers that appear in pairs.
#
# Then the best π_θ for the preferences *is* π*. Check it: minimise the expected DPO loss over all 20
# ordered pairs, each labelled by Bradley–Terry with the true r, starting from π_θ = π_ref.

# %%
w_idx = torch.tensor([w for w, _ in pairs])
l_idx = torch.tensor([lo for _, lo in pairs])
p_label = torch.tensor(from_rewards)
log_ref = torch.log(torch.tensor(pi_ref))


def fit_dpo(pair_weight, steps=300):
    """Minimise the expected DPO loss over the pairs (weighted by how often each is seen)."""
    theta = log_ref.clone().requires_grad_(True)
    opt = torch.optim.LBFGS([theta], lr=1.0, max_iter=steps, tolerance_grad=1e-12, tolerance_change=1e-14,
                            line_search_fn="strong_wolfe")

    def closure():
        opt.zero_grad()
        logp = torch.log_softmax(theta, -1)
        terms = dpo_terms(logp[w_idx], logp[l_idx], log_ref[w_idx], log_ref[l_idx], beta=beta)
        flipped = dpo_terms(logp[l_idx], logp[w_idx], log_ref[l_idx], log_ref[w_idx], beta=beta)
        loss = (pair_weight * (p_label * terms.loss + (1 - p_label) * flipped.loss)).sum()
        loss.backward()
        return loss

    opt.step(closure)
    return torch.softmax(theta.detach(), -1).numpy()


pi_dpo = fit_dpo(torch.ones(len(pairs), dtype=torch.float64))
dpo_fit_error = np.abs(pi_dpo - pi_star).max()
print(f"DPO fit on all pairs:  π_θ = {np.round(pi_dpo, 4)}   max |π_θ − π*| = {dpo_fit_error:.1e}")

never_E = torch.tensor([float(4 not in pair) for pair in pairs], dtype=torch.float64)
pi_dpo_no_E = fit_dpo(never_E)
uncovered_error = np.abs(pi_dpo_no_E - pi_star).max()
print(f"pairs never showing E: π_θ = {np.round(pi_dpo_no_E, 4)}   max |π_θ − π*| = {uncovered_error:.3f}")

# %% [markdown]
# With every pair represented, DPO recovers π* to optimiser precision without ever seeing r. Remove the
# pairs that involve E and the loss cannot see E's logit at all (log-softmax's normaliser cancels in
# z), so E keeps the reference's logit and every other probability is off: the "implicit reward" is
# only pinned down where there is data. Real DPO adds more ways to miss: finitely many pairs, labels that
# do not follow Bradley–Terry, a shared network that cannot represent π*, and a loss minimised only
# approximately.
#
# ## 3. Explorer: β reshapes π*
#
# Move β. The bars are π_ref and π*; the printout gives E[r], the KL paid for it, and J(π*) = β·log Z.

# %%
# a linear slider whose grid holds 0.5: a log slider's grid (10^(−2 + 0.05k)) does not, and the browser
# would snap the start to β = 0.501
beta_slider = widgets.FloatSlider(value=0.5, min=0.01, max=5.0, step=0.01, description="β",
                                  style={"description_width": "40px"})
optimum_text, optimum_plot = widgets.HTML(), widgets.Image(format="png")


def show_optimum(_=None):
    b = beta_slider.value
    opt = kl_regularised_optimum(pi_ref, reward, b)
    kl = categorical_kl(opt.probs, pi_ref)
    optimum_text.value = readout(f"β = {b:.3g}: E_π*[r] = {opt.probs @ reward:.4f}   KL(π*‖π_ref) = {kl:.4f}   "
                                 f"J(π*) = β·log Z = {b * opt.log_partition:.4f}")
    fig, ax = plt.subplots(figsize=(6, 2.6))
    xpos = np.arange(5)
    ax.bar(xpos - 0.2, pi_ref, width=0.4, label="π_ref", color="C7")
    ax.bar(xpos + 0.2, opt.probs, width=0.4, label="π*", color="C0")
    ax.set_xticks(xpos, [f"{a}\nr={r:+.1f}" for a, r in zip(answers, reward)])
    ax.set(ylim=(0, 1), ylabel="probability")
    ax.legend()
    optimum_plot.value = figure_png(fig)


beta_slider.observe(show_optimum, names="value")
show_optimum()
display(widgets.VBox([beta_slider, optimum_text, optimum_plot]))

# %% [markdown]
# ## 4. Two directions: forward and reverse KL
#
# KL is not symmetric. The objective penalises the **reverse** KL(π‖π_ref), an average under π of
# log(π/π_ref); the **forward** KL(π_ref‖π) is the average under π_ref of log(π_ref/π).
#
# Fit a single bump q (a discretised Gaussian, mean μ and width σ) to a two-mode target p by
# minimising each direction over a grid of (μ, σ): q plays π and p plays π_ref, so the reverse direction is
# KL(q‖p) and the forward one KL(p‖q).
#
# %%
predict("Which direction's best single bump sits on one of the two modes?",
        ["reverse KL(q‖p)", "forward KL(p‖q)", "neither: both straddle the modes"],
        "reverse KL(q‖p)",
        "KL(q‖p) averages under q: q is punished for mass between the modes, where p is tiny, and only mildly "
        "for missing a mode. KL(p‖q) averages under p: q must cover both modes.")

# %%
x = np.linspace(-6, 6, 241)


def bumps(mu, sigma):
    d = np.exp(-0.5 * ((x - np.asarray(mu)[..., None]) / np.asarray(sigma)[..., None]) ** 2)
    return d / d.sum(-1, keepdims=True)


target = 0.5 * bumps(-2.0, 0.6) + 0.5 * bumps(2.0, 0.6)
mus, sigmas = np.meshgrid(np.arange(-4, 4.001, 0.1), np.arange(0.3, 4.001, 0.05), indexing="ij")
candidates = bumps(mus.ravel(), sigmas.ravel())
reverse = categorical_kl(candidates, target)  # KL(q‖p)
forward = categorical_kl(target, candidates)  # KL(p‖q)
i_rev, i_fwd = reverse.argmin(), forward.argmin()
mode_seeking = (mus.ravel()[i_rev], sigmas.ravel()[i_rev])
mode_covering = (mus.ravel()[i_fwd], sigmas.ravel()[i_fwd])
target_sd = np.sqrt((target * x**2).sum() - (target * x).sum() ** 2)
print(f"reverse KL(q‖p) picks μ = {mode_seeking[0]:+.1f}, σ = {mode_seeking[1]:.2f}  (KL {reverse[i_rev]:.3f})")
print(f"forward KL(p‖q) picks μ = {mode_covering[0]:+.1f}, σ = {mode_covering[1]:.2f}  (KL {forward[i_fwd]:.3f}); "
      f"the target's own standard deviation is {target_sd:.2f}")

fig, ax = plt.subplots(figsize=(7, 3))
ax.fill_between(x, target, color="C7", alpha=0.4, label="target p (two modes)")
ax.plot(x, bumps(*mode_seeking), color="C3", label=f"argmin KL(q‖p): mode-seeking (μ = {mode_seeking[0]:+.1f})")
ax.plot(x, bumps(*mode_covering), color="C0", label=f"argmin KL(p‖q): mode-covering (σ = {mode_covering[1]:.2f})")
ax.set(xlabel="answer (a continuous stand-in)", ylabel="probability", title="One bump fitted to two modes")
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# The reverse fit sits on one mode (the other mode gives the same value by symmetry) and ignores the
# other; the forward fit straddles both and puts mass between them where p has almost none. The reason is
# where each average is taken: the reverse KL(π‖π_ref) averages under π, so π pays heavily for putting mass
# where π_ref has little, and only a bounded price for ignoring part of π_ref (keeping π_ref's shape on a
# region of reference mass m costs −log m). The forward KL(π_ref‖π) averages under π_ref: π pays without
# bound for any region π_ref covers and π does not. For RLHF: the penalty KL(π‖π_ref) lets the policy
# *drop* answers the reference liked, as long as what it keeps stays where the reference puts mass.
#
# The objective's KL(π‖π_ref) is the reverse one. Trainers never compute it exactly: they estimate it
# from sampled answers, and where they put the estimate (in the reward or in the loss) decides what its
# gradient pulls on — the subject of [The KL term](10_the_kl_term.ipynb).

# %% [markdown]
# ## Your turn
#
# At β = 2, compute π* by hand with NumPy, then the objective at π* two ways — E_π*[r] − β·KL(π*‖π_ref) with
# `categorical_kl`, and β·log Z. Which answer is now the most likely? Then find (by bisection, or by moving
# the explorer) the β at which π*(A) reaches 1/2.

# %%
# your code here

# %% [markdown]
# <details><summary>Answer</summary>
#
# π* = π_ref·exp(r/2)/Z = (0.3096, 0.1401, 0.3290, 0.1274, 0.0939): with the weaker pull of the reward,
# C is back in the lead (0.329 against A's 0.310). Both ways give J(π*) = 0.1262. π*(A) = 1/2 at β ≈ 0.770;
# below it A holds most of the mass.
# </details>

# %% [markdown]
# ## Check yourself
#
# 1. You double β. Which way does π* move, what happens to KL(π*‖π_ref), and what is J(π*) in terms of Z?
#    <details><summary>Answer</summary>
#    π* ∝ π_ref·exp(r/β) moves back toward π_ref (the exponent shrinks), so the KL it pays falls (move the
#    explorer's slider to see it). At the optimum the objective is exactly β·log Z, with Z = Σ π_ref·exp(r/β).
#    </details>
# 2. In the DPO derivation, where does Z go, and what has to be true for "replace π* by π_θ" to recover π*?
#    <details><summary>Answer</summary>
#    Z depends on the prompt only, so β·log Z cancels in the Bradley–Terry difference r(y_w) − r(y_l).
#    Replacing π* by π_θ recovers π* when the preferences follow Bradley–Terry, π_θ can represent π*, β and
#    π_ref are those of the objective, and the pairs cover the answers — section 2 shows an answer that no
#    pair mentions staying where the reference put its logit.
#    </details>
# 3. Does a KL penalty to the reference keep the policy's answers as diverse as the reference's?
#    <details><summary>Answer</summary>
#    No. The objective's KL(π‖π_ref) averages under π: π pays for mass where π_ref has little, and only a
#    bounded price for dropping answers π_ref liked (section 4's reverse fit sits on one mode). Only the
#    forward KL(π_ref‖π) punishes dropping an answer without bound.
#    </details>

# %%
print(clock.report())
