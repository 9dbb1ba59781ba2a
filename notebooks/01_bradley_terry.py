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
# # 01 · Bradley–Terry: from a score gap to a win rate and back
#
# *Pointer for readers of the Module 14 lecture: §3 and §5 (worked example A). Everything below stands
# on its own.*
#
# After this notebook you will be able to
#
# 1. turn a score gap into a preference probability with the sigmoid, and a win rate back into a gap;
# 2. explain why a gap of "1.099" is a coordinate of a logistic model, not a measured human utility;
# 3. compute the reward-model loss −log σ(r_w − r_l) on a batch of pairs, stably;
# 4. work with a whole field of models: every pairwise probability at once, chains of wins, and the
#    loss of comparisons stored as (winner, loser) indices.
#
# **Source.** The Bradley–Terry model of paired comparisons: [Bradley and Terry 1952](https://doi.org/10.2307/2334029).
#
# Some cells ask you to **predict** before the next cell shows the answer: pick an option, press
# *Reveal*, then read on.

# %%
import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import display

from course_lib.formulas.preference import bt_probability, reward_model_loss, win_rate_to_gap
from course_lib.lesson.explore import predict, readout

# %% [markdown]
# ## 1. A score per item, a probability per pair
#
# Give every item a latent score s. Bradley–Terry says item i beats item j with probability
# σ(s_i − s_j), where σ(u) = 1 / (1 + e^(−u)) squeezes any real number into (0, 1). Only the
# *difference* of scores matters: adding the same constant to every score changes nothing.
#
# A gap of 1 gives σ(1) = 0.731. Before computing it: what does a gap of 2 give?

# %%
predict("σ(1) = 0.731. What is σ(2), the win rate for a gap twice as large?",
        ["about 0.96 (double the edge over 0.5)", "about 0.88", "exactly 0.731 · 2 − 0.5 = 0.962"],
        "about 0.88", "σ(2) = 0.881: the curve flattens towards 1, so doubling the gap less than doubles "
        "the edge over a coin flip (0.231 → 0.381).")

# %% [markdown]
# Written directly from the definition:

# %%
def sigmoid(u):
    return 1.0 / (1.0 + np.exp(-u))


sigma_1 = sigmoid(1.0)
sigma_2 = sigmoid(2.0)
print(f"σ(1) = {sigma_1:.3f}   σ(2) = {sigma_2:.3f}   σ(0) = {sigmoid(0.0):.3f}")

# %% [markdown]
# A gap of 1 means the better item wins about 73% of comparisons; a gap of 2, about 88%. Doubling the
# gap does not double the win rate: the curve flattens as it approaches 1.
#
# The direct formula has one weakness: for a very negative u, `np.exp(-u)` overflows. A form that is
# safe for any gap: σ(u) = 1 / (1 + e^(−u)) = exp(−log(1 + e^(−u))), and log(1 + e^(−u)) is
# `np.logaddexp(0, -u)`, which never overflows. Same numbers where both work, and the library agrees:

# %%
def stable_sigmoid(u):
    return np.exp(-np.logaddexp(0.0, -np.asarray(u, dtype=float)))


for gap in (1.0, 2.0, -3.0):
    print(f"gap {gap:+.1f}:  direct {sigmoid(gap):.6f}   stable {stable_sigmoid(gap):.6f}   "
          f"course_lib {bt_probability(gap):.6f}")
assert np.isclose(sigma_1, bt_probability(1.0)) and np.isclose(sigma_2, bt_probability(2.0))
assert stable_sigmoid(-1e4) == bt_probability(-1e4) == 0.0 and stable_sigmoid(1e4) == 1.0
print(f"gap -1e4: stable form {stable_sigmoid(-1e4):.1f}, course_lib {bt_probability(-1e4):.1f}, no overflow warning")

# %% [markdown]
# ## 2. Inverting the model: which gap explains a win rate?
#
# Solve p = σ(Δr) for Δr. Take 1 − p = σ(−Δr), divide, and take logs:
#
# Δr = log(p / (1 − p)),
#
# the *logit* of p. A completion that wins 75% of its comparisons sits at Δr = log(0.75/0.25) = log 3.

# %%
def logit(p):
    return np.log(p / (1.0 - p))


gap_75 = logit(0.75)
print(f"75% win rate → gap log 3 = {gap_75:.3f}")
assert np.isclose(gap_75, win_rate_to_gap(0.75)) and np.isclose(gap_75, np.log(3))

# %% [markdown]
# The picture: σ on the left maps gaps to probabilities, the logit on the right undoes it. The marked
# points are the lecture's three numbers.

# %%
u = np.linspace(-6, 6, 400)
p = np.linspace(0.005, 0.995, 400)
fig, (left, right) = plt.subplots(1, 2, figsize=(9.5, 3.8))
left.plot(u, bt_probability(u), color="C0")
left.scatter([1, 2, gap_75], [sigma_1, sigma_2, 0.75], color="C3", zorder=3)
for x, y, label in [(1, sigma_1, "σ(1)=0.731"), (2, sigma_2, "σ(2)=0.881"), (gap_75, 0.75, "75% ↔ 1.099")]:
    left.annotate(label, (x, y), textcoords="offset points", xytext=(8, -14 if x == gap_75 else 4))
left.set(xlabel="score gap Δr = r_w − r_l", ylabel="P(w beats l)", title="σ: gap → win rate")
right.plot(p, win_rate_to_gap(p), color="C1")
right.scatter([0.75], [gap_75], color="C3", zorder=3)
right.set(xlabel="win rate p", ylabel="gap log(p / (1 − p))", title="logit: win rate → gap")
for ax in (left, right):
    ax.grid(alpha=0.3)
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 3. Why the gap has no universal unit
#
# "A 75% win rate is a gap of 1.099" is true *inside this model*, for three reasons you can compute.
#
# **Only differences are identified.** Add 5 to every score: every gap, and so every predicted win
# rate, is unchanged. No experiment that only compares items can tell the two sets of scores apart, so a
# single score (0.3, or 5.3) means nothing; only gaps do.
#
# **The link is a modelling choice.** Bradley–Terry turns a gap into a probability with the logistic
# function σ. The Thurstone model uses the normal CDF Φ instead (probit). Both fit the same win rates;
# they place them at different gaps:

# %%
from statistics import NormalDist

probit_75 = NormalDist().inv_cdf(0.75)
print(f"75% win rate → gap {gap_75:.3f} under the logistic link, {probit_75:.3f} under the probit link "
      f"(ratio {gap_75 / probit_75:.2f})")

# %% [markdown]
# The same win rate, two coordinate systems, two different gaps. Neither is "the" utility difference.

# %% [markdown]
# **Finite data and regularisation shrink gaps.** A reward model is fitted to a finite set of comparisons,
# usually with a penalty on large scores. Take two items compared n times, the first winning k times, and
# fit the gap d by maximising k·log σ(d) + (n − k)·log σ(−d) − λd²/2. Its derivative k − n·σ(d) − λd
# decreases in d, so bisection finds the fitted gap:

# %%
def fitted_gap(wins, n, lam, lo=-50.0, hi=50.0):
    """The gap maximising the L2-penalised Bradley–Terry log-likelihood of `wins` out of `n`."""
    for _ in range(200):
        mid = (lo + hi) / 2
        if wins - n * bt_probability(mid) - lam * mid > 0:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


shrink = {}
for k, n in ((3, 4), (30, 40), (4, 4)):
    for lam in (0.0, 1.0):
        # 4 wins of 4 without a penalty: the likelihood grows for ever, the fitted gap is +∞
        shrink[k, n, lam] = np.inf if (k == n and lam == 0) else fitted_gap(k, n, lam)
        print(f"{k:>2} wins of {n:>2}, λ = {lam:.0f}: fitted gap {shrink[k, n, lam]:6.3f}")

# %% [markdown]
# Without a penalty, 3 wins of 4 and 30 of 40 both give log 3 = 1.099, and 4 of 4 gives an infinite gap.
# With λ = 1 every gap shrinks, the small sample most: the number a trained reward model reports
# depends on its data and its regularisation, not only on how much people prefer one answer. The same
# coordinate question returns in DPO ([Rafailov et al. 2023](https://arxiv.org/abs/2305.18290);
# [DPO margins](02_dpo_margins.ipynb)), where β sets the scale.

# %% [markdown]
# ## 4. The reward-model loss on toy pairs
#
# A reward model r scores a preferred answer r_w and a rejected one r_l. Fitting Bradley–Terry by maximum
# likelihood means minimising L_RM = −log σ(r_w − r_l), averaged over pairs. Four toy pairs:

# %%
r_chosen = np.array([2.0, 0.5, 1.2, -0.3])
r_rejected = np.array([1.0, 0.8, -0.4, -1.5])
gaps = r_chosen - r_rejected
per_pair = -np.log(sigmoid(gaps))
for g, loss in zip(gaps, per_pair, strict=True):
    print(f"gap {g:+.2f} → loss {loss:.4f}")
rm_loss = per_pair.mean()
print(f"mean reward-model loss = {rm_loss:.4f}")
assert np.isclose(rm_loss, reward_model_loss(r_chosen, r_rejected))

# %% [markdown]
# The second pair is ordered the wrong way (gap −0.30) and costs the most. Every pair still costs
# something: the loss only reaches zero as a gap goes to +∞, so a reward model is always pushed to
# separate its pairs further. (Rejected means "lost this comparison", not "wrong".)
#
# For big gaps, `-np.log(sigmoid(gap))` loses precision; −log σ(u) = log(1 + e^(−u)) is `np.logaddexp(0, -u)`:

# %%
big = np.array([-800.0, 40.0])
print("logaddexp form:", np.logaddexp(0.0, -big), "  course_lib:", reward_model_loss(big, 0.0, reduction="none"))

# %% [markdown]
# ## 5. Explorer: win rate ↔ gap
#
# Move either slider; the other follows through σ or its inverse, rounded to its own step (gap to 0.01,
# win rate to 0.001). The line below the sliders always prints what the two sliders show.

# %%
GAP_STEP, RATE_STEP = 0.01, 0.001
gap_slider = widgets.FloatSlider(value=1.0, min=-5.0, max=5.0, step=GAP_STEP, description="gap Δr",
                                 readout_format=".2f")
rate_slider = widgets.FloatSlider(value=round(float(bt_probability(1.0)), 3), min=0.007, max=0.993,
                                  step=RATE_STEP, description="win rate", readout_format=".3f")
explorer_line = widgets.HTML()
# The value this code last wrote into each slider: the front end may echo it back (snapped to the
# slider's step), and an echo must not move the other slider.
_written = {"gap": gap_slider.value, "rate": rate_slider.value}


def _show():
    gap, rate = gap_slider.value, rate_slider.value
    explorer_line.value = readout(f"gap Δr = {gap:+.2f}  ↔  win rate {rate:.3f}  (σ({gap:.2f}) = "
                                  f"{float(bt_probability(gap)):.4f}, logit({rate:.3f}) = "
                                  f"{float(win_rate_to_gap(rate)):.4f})")


def _from_gap(change):
    if abs(change["new"] - _written["gap"]) > GAP_STEP / 2:  # the student moved the gap
        rate = round(min(max(float(bt_probability(change["new"])), 0.007), 0.993), 3)
        _written.update(gap=change["new"], rate=rate)
        rate_slider.value = rate
    _show()


def _from_rate(change):
    if abs(change["new"] - _written["rate"]) > RATE_STEP / 2:  # the student moved the win rate
        gap = round(min(max(float(win_rate_to_gap(change["new"])), -5.0), 5.0), 2)
        _written.update(gap=gap, rate=change["new"])
        gap_slider.value = gap
    _show()


gap_slider.observe(_from_gap, names="value")
rate_slider.observe(_from_rate, names="value")
_show()
display(widgets.VBox([gap_slider, rate_slider, explorer_line]))

# %% [markdown]
# ## 6. A field of models: all pairs, chains of wins, a tournament
#
# An arena ranks many models with one score each. Every pairwise probability follows from the score
# differences, so one broadcast gives them all: P[i, j] = σ(s_i − s_j), with 0.5 on the diagonal and
# P[i, j] + P[j, i] = 1. (For scores far apart, write σ in the stable form of section 1.)

# %%
field = np.array([0.0, 1.0, 3.0])
gap_matrix = field[:, None] - field[None, :]  # gap_matrix[i, j] = s_i − s_j
P = sigmoid(gap_matrix)
print(np.round(P, 4))
assert np.allclose(P, bt_probability(gap_matrix)) and np.allclose(P + P.T, 1.0)

# %% [markdown]
# Row 2 says the strongest model beats the weakest with σ(3) = 0.953. Since only gaps matter, gaps add
# along a chain: if A beats B with win rate p and B beats C with win rate q, the gap from A to C is
# logit p + logit q. Before computing it: A beats B in 75% of comparisons and B beats C in 75%.

# %%
predict("A beats B 75% of the time, B beats C 75% of the time. How often does A beat C under Bradley–Terry?",
        ["75% (the same edge again)", "90%", "56% (0.75 · 0.75)"],
        "90%", "The gaps add: log 3 + log 3 = log 9, and σ(log 9) = 9/10. Win rates do not multiply; "
        "0.75 · 0.75 would be the chance of winning two separate games.")

# %%
chain_gap = float(win_rate_to_gap(0.75) + win_rate_to_gap(0.75))
p_chain = float(bt_probability(chain_gap))
print(f"gap A→C = log 3 + log 3 = {chain_gap:.4f} (log 9 = {np.log(9):.4f});  P(A beats C) = {p_chain:.4f}")

# %% [markdown]
# The chain is a *prediction* about a match nobody observed, and it fails when preferences are not
# transitive: if A beats B, B beats C and C beats A, each more than half of the time, no three scores
# fit. To fit the scores of a field, comparisons are stored as index pairs (winner, loser), and the
# loss is the mean of −log σ(s[winner] − s[loser]); NumPy's integer indexing picks each pair's scores.

# %%
scores = np.array([1.0, 0.0, -0.5])
winners, losers = np.array([0, 1, 2, 0]), np.array([1, 2, 0, 2])  # the third comparison is an upset
per_comparison = np.logaddexp(0.0, -(scores[winners] - scores[losers]))
field_loss = per_comparison.mean()
print("loss per comparison:", np.round(per_comparison, 4), f"  mean {field_loss:.4f}")
assert np.isclose(field_loss, reward_model_loss(scores[winners], scores[losers]))

# %% [markdown]
# ## Your turn
#
# A reward model puts a gap of 0.4 between two answers. (a) What win rate does it predict? (b) Which gap
# would a 95% win rate need under the logistic link, and under the probit link? Write your code below,
# then open the answer.

# %%
# your code here

# %% [markdown]
# <details><summary>Answer</summary>
#
# (a) `bt_probability(0.4)` = σ(0.4) = 0.599. (b) `win_rate_to_gap(0.95)` = log 19 = 2.944 (logistic);
# `NormalDist().inv_cdf(0.95)` = 1.645 (probit). Same win rate, two different gaps.
# </details>

# %% [markdown]
# ## Check yourself
#
# 1. Item A beats item B with probability 0.881. What is the score gap, and what does that number depend on?
#    <details><summary>Answer</summary>
#    log(0.881/0.119) ≈ 2.0 under the logistic link (≈ 1.18 under probit), and a fitted model with little data or a
#    strong penalty reports less. It is a coordinate of the model, not a utility.
#    </details>
# 2. Why can a win rate of exactly 100% not be inverted?
#    <details><summary>Answer</summary>
#    log(1/0) is infinite: no finite gap gives probability 1. `win_rate_to_gap(1.0)` raises a ValueError.
#    </details>
# 3. All four toy rewards of the chosen answers increase by 10. What happens to the loss of pair 2?
#    <details><summary>Answer</summary>
#    Its gap becomes +9.7 and its loss falls to about 0.0001. The loss sees gaps, not absolute scores.
#    </details>
