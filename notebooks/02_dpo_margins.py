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
# # 02 · DPO margins: what one preference pair contributes
#
# *Pointer for readers of the Module 14 lecture: §6–§8 (worked example B). Everything below stands on
# its own.*
#
# After this notebook you will be able to
#
# 1. compute the DPO margin z, the pair loss −log σ(z) and its local slope σ(−z) from four log-probabilities,
#    and those four from masked per-token log-probabilities;
# 2. say which pairs pull hardest on the policy, what reaches its log-probabilities (−β·σ(−z)), and what
#    changing β does and does not mean;
# 3. read DPO's "implicit reward" for what it is;
# 4. place IPO, SimPO, ORPO and KTO next to DPO by the data they need and the margin they push.
#
# **Sources.** DPO: [Rafailov et al. 2023](https://arxiv.org/abs/2305.18290). IPO:
# [Azar et al. 2023](https://arxiv.org/abs/2310.12036). SimPO: [Meng et al. 2024](https://arxiv.org/abs/2405.14734).
# ORPO: [Hong et al. 2024](https://arxiv.org/abs/2403.07691). KTO:
# [Ethayarajh et al. 2024](https://arxiv.org/abs/2402.01306).

# %%
import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import display

from course_lib.formulas.preference import (
    dpo_terms,
    implicit_reward,
    ipo_loss,
    kto_loss,
    kto_reference_point,
    orpo_loss,
    simpo_loss,
)
from course_lib.lesson.explore import figure_png, predict, readout

# %% [markdown]
# ## 1. From four log-probabilities to one margin
#
# DPO (direct preference optimisation) compares how much the policy π_θ moved away from a frozen **reference model**
# π_ref (a copy of the policy before this training) on the preferred answer
# y_w and on the rejected answer y_l. Each log-probability is the **sum** of the answer's token
# log-probabilities. Step by step, for the lecture's pair I:
#
# | | policy log π_θ | reference log π_ref |
# |---|---|---|
# | preferred y_w | −12.0 | −13.0 |
# | rejected y_l | −11.5 | −10.8 |

# %%
beta = 0.1
policy_w, policy_l = -12.0, -11.5
ref_w, ref_l = -13.0, -10.8

ratio_w = policy_w - ref_w  # log π_θ(y_w)/π_ref(y_w): the policy likes y_w more than the reference did
ratio_l = policy_l - ref_l  # and y_l less
z_I = beta * (ratio_w - ratio_l)
print(f"log-ratio chosen {ratio_w:+.1f}, rejected {ratio_l:+.1f}  →  z = β·({ratio_w:.1f} − ({ratio_l:.1f})) = "
      f"{z_I:.3f}")

# %% [markdown]
# The loss is the loss of [Bradley–Terry](01_bradley_terry.ipynb) applied to z: L = −log σ(z) = log(1 + e^(−z)).
# Its derivative with respect to z is −σ(−z), so the size of the pull on this pair is σ(−z).

# %%
loss_I = np.logaddexp(0.0, -z_I)
slope_I = 1.0 / (1.0 + np.exp(z_I))
print(f"pair I:  z = {z_I:.3f}   loss = {loss_I:.4f}   slope |dL/dz| = {slope_I:.4f}")

terms = dpo_terms(policy_w, policy_l, ref_w, ref_l, beta=beta)
assert np.allclose([terms.margin, terms.loss, terms.slope], [z_I, loss_I, slope_I])
print(f"course_lib.formulas.preference.dpo_terms agrees: z = {terms.margin:.3f}, loss = {terms.loss:.4f}, slope = "
      f"{terms.slope:.4f}")

# %% [markdown]
# Where do the four sums come from? A model returns one log-probability per **token**, for the prompt
# and the answer alike, and a batch pads every sequence to one length. A 0/1 mask marks the answer's
# own tokens, and a sequence log-probability is the sum where the mask is 1. Padding often holds `nan`
# or `-inf`, and `nan · 0` is `nan`: select the tokens with the mask (`np.where`), do not multiply.

# %%
token_logps_w = np.array([-0.7, -2.0, -4.5, -5.5, np.nan])  # a prompt token, three answer tokens, padding
mask_w = np.array([0, 1, 1, 1, 0])
with np.errstate(invalid="ignore"):
    multiplied = (token_logps_w * mask_w).sum()
selected = np.where(mask_w == 1, token_logps_w, 0.0).sum()
print(f"multiplied by the mask: {multiplied}   selected with the mask: {selected}  (policy_w = {policy_w})")
assert np.isnan(multiplied) and selected == policy_w

# %% [markdown]
# ## 2. A pair that is barely ordered pulls harder
#
# Pair II keeps the policy numbers and changes the reference to (−12.8, −11.65). The log-ratios become
# 0.8 and 0.15, a gap of 0.65 instead of 1.7.

# %%
pair_II = dpo_terms(policy_w, policy_l, -12.8, -11.65, beta=0.1)
z_II, slope_II = pair_II.margin, pair_II.slope
print(f"pair II: z = {z_II:.3f}   loss = {pair_II.loss:.4f}   slope = {slope_II:.4f}")
print(f"at the boundary z = 0 the slope is {dpo_terms(0.0, 0.0, 0.0, 0.0).slope:.1f}; "
      f"a misordered pair (z = −2) gets {dpo_terms(-20.0, 0.0, 0.0, 0.0).slope:.3f}")

# %% [markdown]
# The slope σ(−z) is 0.5 at the decision boundary, below 0.5 for well-ordered pairs and above 0.5 for
# misordered ones, approaching 1. DPO spends most of its effort where the policy orders a pair badly or
# barely.
#
# ## 3. The same pair under β = 0.5
#
# Keep pair I's four log-probabilities and raise β from 0.1 to 0.5: the margin z = β·h grows five-fold.
# Predict first, then run the cell after the question.

# %%
predict("β goes from 0.1 to 0.5 on pair I. What happens to the parameter-level pull β·σ(−z) on this pair?",
        ["it shrinks: the loss and the slope fell", "it stays the same", "it grows about threefold"],
        "it grows about threefold",
        "σ(−z) falls from 0.458 to 0.299, but β grows fivefold: β·σ(−z) goes from 0.046 to 0.150.")

# %%
pair_I_beta05 = dpo_terms(policy_w, policy_l, ref_w, ref_l, beta=0.5)
z_beta05, loss_beta05, slope_beta05 = pair_I_beta05
print(f"β = 0.5:  z = {z_beta05:.2f}   loss = {loss_beta05:.3f}   slope = {slope_beta05:.3f}")
print(f"parameter-level weight β·σ(−z):  β=0.1 → {0.1 * slope_I:.4f}   β=0.5 → {0.5 * slope_beta05:.4f}")

# %% [markdown]
# The loss fell and the slope σ(−z) shrank. But the gradient with respect to the model's parameters is
# dL/dθ = −σ(−z)·β·∇h: it carries an extra factor β.
#
# What reaches the policy goes through its log-probabilities. Raising log π_θ(y_w) by 1 raises z by β,
# so ∂L/∂log π_θ(y_w) = −β·σ(−z), and ∂L/∂log π_θ(y_l) = +β·σ(−z): push the chosen answer up and the
# rejected one down, each with the weight β·σ(−z). A finite difference on the library's loss agrees:

# %%
eps = 1e-6
bumped = [dpo_terms(policy_w + d, policy_l, ref_w, ref_l, beta=0.5).loss for d in (eps, -eps)]
numeric = (bumped[0] - bumped[1]) / (2 * eps)
print(f"β = 0.5: ∂L/∂log π_θ(y_w) by finite difference {numeric:.5f}, −β·σ(−z) = {-0.5 * slope_beta05:.5f}")
assert np.isclose(numeric, -0.5 * slope_beta05, atol=1e-6)

# %% [markdown]
# A lower loss and a smaller slope do **not** mean β = 0.5 trains more gently. The gradient with respect
# to the model's parameters is −β·σ(−z)·∇(log-ratio gap): the extra factor β makes this pair's
# parameter-level weight about three times *larger* here. What β really sets is the scale on which movement
# away from the reference is judged — tune it while watching **KL drift** (how far, in KL, the policy has moved from
# π_ref; the Kullback–Leibler divergence KL(π_θ‖π_ref) = Σ_y π_θ(y)·log(π_θ(y)/π_ref(y)) is zero when the two agree and
# grows as they part), answer quality and the spread of pair margins.
#
# The figure shows, against the log-ratio gap h = z/β, the loss, the slope σ(−βh) and the weight that
# reaches the parameters, β·σ(−βh), for several β; the dots are pair I (h = 1.7).

# %%
h = np.linspace(-10, 25, 400)
betas = [0.05, 0.1, 0.5, 1.0]
h_I = ratio_w - ratio_l
fig, (ax_loss, ax_slope, ax_weight) = plt.subplots(1, 3, figsize=(9.5, 3.4))
for i, b in enumerate(betas):
    t = dpo_terms(h, 0.0, 0.0, 0.0, beta=b)
    point = dpo_terms(policy_w, policy_l, ref_w, ref_l, beta=b)
    for ax, curve, dot in ((ax_loss, t.loss, point.loss), (ax_slope, t.slope, point.slope),
                           (ax_weight, b * t.slope, b * point.slope)):
        ax.plot(h, curve, color=f"C{i}", label=f"β = {b}")
        ax.scatter([h_I], [dot], color=f"C{i}", zorder=3)
ax_loss.set(xlabel="log-ratio gap h", ylabel="loss −log σ(βh)", title="loss")
ax_slope.set(xlabel="log-ratio gap h", ylabel="σ(−βh) = |dL/dz|", title="slope in z")
ax_weight.set(xlabel="log-ratio gap h", ylabel="β·σ(−βh)", title="weight on the parameters")
for ax in (ax_loss, ax_slope, ax_weight):
    ax.axvline(0, color="grey", lw=0.8)
    ax.grid(alpha=0.3)
ax_weight.legend(fontsize=9)
fig.tight_layout()
plt.show()
# where the parameter-level weights of β = 0.1 and β = 0.5 cross (h > 0)
weight_gap = 0.5 * dpo_terms(h, 0.0, 0.0, 0.0, beta=0.5).slope - 0.1 * dpo_terms(h, 0.0, 0.0, 0.0, beta=0.1).slope
h_cross = float(h[np.argmax((h > 0) & (weight_gap < 0))])
print(f"β·σ(−βh): β = 0.5 weighs a pair more than β = 0.1 while h < {h_cross:.1f}, less beyond")

# %% [markdown]
# Read the right panel: the curves **cross**. A larger β pulls harder on pairs the policy has not yet
# separated (small or negative h, pair I included) and lets go sooner of pairs it already separates
# well. The left two panels alone would suggest the opposite.

# %% [markdown]
# ## 4. The implicit reward
#
# DPO's derivation (taken step by step in [The regularised objective](03_the_regularised_objective.ipynb))
# shows that the best policy π* of the KL-regularised objective (maximise reward, pay β × the KL to π_ref) satisfies
# r(x, y) = β log π*(y|x)/π_ref(y|x) + β log Z(x), where Z(x) is a normaliser that depends on the prompt only. It
# cancels in a pairwise difference, so r̂(x, y) = β log π_θ(y|x)/π_ref(y|x) plays the role of a reward, and the margin
# z is exactly the difference of two implicit rewards:

# %%
reward_w = implicit_reward(policy_w, ref_w, beta=0.1)
reward_l = implicit_reward(policy_l, ref_l, beta=0.1)
print(f"implicit rewards: chosen {reward_w:+.3f}, rejected {reward_l:+.3f}, difference {reward_w - reward_l:.3f} = z")
assert np.isclose(reward_w - reward_l, z_I)

# %% [markdown]
# It needs **both** policies to evaluate and only orders answers relative to the reference. It is not a
# standalone judge that can score any answer, and a positive gap says nothing about quality beyond the
# comparisons DPO was trained on.
#
# ## 5. Four relatives of DPO, side by side
#
# Each direct preference loss is best described by its contract: what data it needs, what it is
# anchored to, and which margin it pushes.
#
# | method | data | anchor | loss in terms of its margin |
# |---|---|---|---|
# | DPO | pairs | reference policy | −log σ(βh), pushes h up without limit |
# | IPO | pairs | reference policy | (h − 1/(2β))², pulls h to a finite target |
# | SimPO | pairs | none; length-normalised | −log σ(β·Δℓ̄ − γ), Δℓ̄ = gap of mean token log-probs |
# | ORPO | pairs | none; joint with SFT (supervised fine-tuning) | −ℓ̄_w − λ·log σ(log-odds gap) |
# | KTO | single answers labelled good/bad | reference policy and a reference point z0 | 1 − σ(β(r − z0)) for good, 1 − σ(β(z0 − r)) for bad |
#
# Below, each curve is computed by the library function of that method. Methods that measure the same
# thing share an axis: DPO, IPO and KTO are anchored to the reference, so their variable is a log-ratio
# log π_θ − log π_ref (the pair's gap h for DPO and IPO, one answer's log-ratio for KTO), all at β = 0.1.
# SimPO and ORPO have no reference; both read the gap of *mean token* log-probs ℓ̄_w − ℓ̄_l (here with
# ℓ̄_l fixed at −1, so ℓ̄_w = −1 + gap).

# %%
fig, (ax_ref, ax_free) = plt.subplots(1, 2, figsize=(9.5, 4.0))
zero = np.zeros_like(h)
ax_ref.plot(h, dpo_terms(h, zero, zero, zero, beta=0.1).loss, label="DPO")
ax_ref.plot(h, ipo_loss(h, zero, zero, zero, beta=0.1), label="IPO")
ax_ref.plot(h, kto_loss(h, 0.0, True, beta=0.1), label="KTO, desirable answer")
ax_ref.plot(h, kto_loss(h, 0.0, False, beta=0.1), label="KTO, undesirable answer")
ax_ref.axvline(1 / (2 * 0.1), color="grey", ls=":", label="IPO target 1/(2β)")
ax_ref.set(ylim=(0, 4), xlabel="log-ratio to the reference (gap h, or one answer's)",
           title="anchored to π_ref (β = 0.1)")

mean_gap = np.linspace(-2.0, 0.95, 400)
ax_free.plot(mean_gap, simpo_loss(-1.0 + mean_gap, -1.0, 1.0, 1.0, beta=2.0, gamma=0.5), color="C4",
             label="SimPO (β = 2, γ = 0.5)")
ax_free.plot(mean_gap, orpo_loss(-1.0 + mean_gap, -1.0, 1.0, 1.0, beta=0.1), color="C5", label="ORPO (λ = 0.1)")
ax_free.plot(mean_gap, 1.0 - mean_gap, color="C5", ls="--", label="ORPO's NLL part −ℓ̄_w")
ax_free.axvline(0.5 / 2.0, color="grey", ls=":", label="SimPO zero-margin point γ/β")
ax_free.set(ylim=(0, 4), xlabel="mean log-prob gap ℓ̄_w − ℓ̄_l", title="no reference model")
for ax, corner in ((ax_ref, "upper left"), (ax_free, "upper right")):
    ax.set_ylabel("loss")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=9, loc=corner)
fig.tight_layout()
plt.show()

# %% [markdown]
# What the shapes say: DPO never stops rewarding a larger gap; IPO is content at h = 1/(2β) and
# penalises overshooting — useful when labels are noisy or pairs are close, harmful if the target is
# wrong. SimPO saturates like DPO but on mean token log-probs, without a reference model (less memory),
# and the length normalisation changes which answers it prefers. ORPO adds the chosen answer's NLL, so
# it keeps rewarding a likelier chosen answer even when the pair is well separated. KTO's losses are
# bounded: each example is judged alone against the reference point, and the undesirable curve is the
# desirable one mirrored.
#
# The curves put z0 at 0. In KTO ([Ethayarajh et al. 2024](https://arxiv.org/abs/2402.01306)) z0 is not a free
# constant: it estimates KL(π_θ‖π_ref) on the batch itself. Each prompt is paired with *another* answer of the batch,
# the policy's and the reference's log-probs of those mismatched pairs are averaged, the mean is clamped at
# 0 (a KL is never negative) and no gradient flows through it (`kto_reference_point`, as TRL
# ([von Werra et al. 2020](https://github.com/huggingface/trl)) computes it). An answer then counts as desirable-enough
# only when its log-ratio beats how far the policy has drifted overall. Three mismatched pairs:

# %%
mismatched_policy = np.array([-3.1, -2.0, -4.2])  # log π_θ(y′|x): each prompt with another prompt's answer
mismatched_ref = np.array([-3.3, -2.4, -4.0])
z0 = kto_reference_point(mismatched_policy, mismatched_ref)
z0_shrunk = kto_reference_point(mismatched_policy - 1.0, mismatched_ref)  # the policy made them all less likely
print(f"z0 = mean(0.2, 0.4, −0.2) = {z0:.4f};  after the policy lowered them by 1: {z0_shrunk} (clamped at 0)")
assert np.isclose(z0, 0.4 / 3) and z0_shrunk == 0

# %% [markdown]
# [Tiny GPT: SFT then DPO](08_tiny_gpt_dpo.ipynb) trains KTO on the tiny GPT and prints how often z0 stays above 0.
#
# ## 6. Explorer: β and the four log-probabilities
#
# Start at pair I and move β: the margin, loss and slope update; so does the point on the loss curve.

# %%
beta_slider = widgets.FloatSlider(value=0.1, min=0.01, max=1.0, step=0.01, description="β",
                                  style={"description_width": "110px"})
logp_sliders = {
    name: widgets.FloatSlider(value=value, min=-20.0, max=-5.0, step=0.05, description=name,
                              style={"description_width": "110px"})
    for name, value in [("log π_θ(y_w)", -12.0), ("log π_θ(y_l)", -11.5), ("log π_ref(y_w)", -13.0),
                        ("log π_ref(y_l)", -10.8)]
}


explorer_text, explorer_plot = widgets.HTML(), widgets.Image(format="png")


def show_pair(_=None):
    beta = beta_slider.value
    pw, pl, rw, rl = (s.value for s in logp_sliders.values())
    t = dpo_terms(pw, pl, rw, rl, beta=beta)
    explorer_text.value = readout(f"z = {t.margin:.3f}   loss = {t.loss:.4f}   slope = {t.slope:.4f}   "
                                  f"β·slope = {beta * t.slope:.4f}")
    grid = np.linspace(-4, 4, 200)
    fig, ax = plt.subplots(figsize=(5, 2.6))
    ax.plot(grid, np.logaddexp(0.0, -grid), color="C0")
    ax.scatter([t.margin], [t.loss], color="C3", zorder=3)
    ax.set(xlabel="margin z", ylabel="−log σ(z)")
    ax.grid(alpha=0.3)
    explorer_plot.value = figure_png(fig)


for s in (beta_slider, *logp_sliders.values()):
    s.observe(show_pair, names="value")
show_pair()
display(widgets.VBox([beta_slider, *logp_sliders.values(), explorer_text, explorer_plot]))

# %% [markdown]
# ## Your turn
#
# A pair has policy log-probs (−20.0, −21.0) and reference log-probs (−20.5, −20.0). At β = 0.1, compute z,
# the loss and the slope by hand with NumPy, then check with `dpo_terms`. Is the pair ordered the right way?

# %%
# your code here

# %% [markdown]
# <details><summary>Answer</summary>
#
# Log-ratios: chosen −20.0 − (−20.5) = +0.5, rejected −21.0 − (−20.0) = −1.0; h = 1.5, z = 0.15,
# loss log(1 + e^(−0.15)) = 0.621, slope σ(−0.15) = 0.463. Yes: z > 0, the policy moved towards the
# preferred answer relative to the reference, though the loss is still close to log 2 = 0.693.
# </details>

# %% [markdown]
# ## Check yourself
#
# 1. Three pairs have margins z = 1.5, 0.05 and −0.8. Which pulls hardest on the policy at fixed β, and which least?
#    <details><summary>Answer</summary>
#    Slopes σ(−z): 0.182, 0.488, 0.690. The misordered pair (z = −0.8) pulls hardest, the well-ordered one (1.5) least.
#    </details>
# 2. You cache the reference log-probabilities of a fixed pair dataset, then re-tokenise the data. Is the cache still
#    valid?
#    <details><summary>Answer</summary>
#    No. The cached numbers are sums over the old tokens; a new tokenisation (or a new reference checkpoint) needs them
#    recomputed.
#    </details>
# 3. Raising β from 0.1 to 0.5 lowered pair I's loss from 0.6118 to 0.356. Has training become weaker on this pair?
#    <details><summary>Answer</summary>
#    Not necessarily: the parameter gradient carries β·σ(−z), which rose from 0.046 to 0.150. β changes the scale of
#    the comparison, not simply the strength of the update.
#    </details>
