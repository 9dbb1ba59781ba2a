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
# # 12 · The RLHF route: a learned reward model, best-of-N, over-optimisation, PPO with a critic
#
# *Pointer for readers of the Module 14 lecture: §3–§4, §9–§10, §13 and §15. Everything below stands on its own.*
#
# [Tiny GPT: the GRPO family](09_tiny_gpt_grpo.ipynb) trained against a checker that is exactly
# right. The classic RLHF pipeline has no such checker: people compare answers, a **reward model**
# learns their preferences, and RL optimises the reward model — a *proxy* of what people want. Here
# the "people" are a gold rule (the strict checker) whose labels are flipped now and then, so we can
# always measure the truth the proxy stands in for.
#
# After this notebook you will be able to
#
# 1. build a reward model from noisy preference pairs and judge it against the ceiling the noise
#    allows, and say whether its Bradley–Terry probabilities are calibrated;
# 2. predict what best-of-N against a learned reward does to the proxy and to the gold score as N grows;
# 3. read proxy and gold reward against √KL during RL, the shape of reward over-optimisation;
# 4. compute GAE advantages by hand, and weigh PPO's learned critic against GRPO's and RLOO's group
#    baselines in accuracy, time and memory.
#
# **Sources.** The pipeline: [Christiano et al. 2017](https://arxiv.org/abs/1706.03741); InstructGPT,
# [Ouyang et al. 2022](https://arxiv.org/abs/2203.02155). Best-of-N against a reward model and its KL:
# [Stiennon et al. 2020](https://arxiv.org/abs/2009.01325). Over-optimisation:
# [Gao et al. 2022](https://arxiv.org/abs/2210.10760). PPO: [Schulman et al. 2017](https://arxiv.org/abs/1707.06347);
# GAE: [Schulman et al. 2015](https://arxiv.org/abs/1506.02438).
#
# Budget: the last cell prints how long this run took. `COURSE_FAST=1` (CI, the quick check) starts
# from the same SFT policy and trains the reward model and the RL runs on smaller budgets — its
# numbers are noisier, and the text below is computed from whichever ran.
#
# **Seeds.** One run is one draw. This notebook walks through seed 0 in the kernel while seeds 1 and 2
# run the whole route in background processes (`course_lib.run.seeds`, one CPU thread each), each from its
# own SFT start with its own reward model. The reveals in sections 2–6 say what happened *in this run*
# (seed 0); section 7 states each verdict over the three seeds: per-seed numbers, the median and range
# of the paired difference, "on k of n seeds", and "beyond the seed spread" only when every seed agrees
# (`course_lib.run.verdicts`).

# %%
import copy
import dataclasses
import functools
import json
import math
import os

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from IPython.display import display

from course_lib.formulas.advantages import gae
from course_lib.formulas.budgets import stage_memory_gib
from course_lib.formulas.policy_loss import clipped_value_loss
from course_lib.formulas.preference import reward_model_loss
from course_lib.lesson.explore import predict
from course_lib.lesson.stopwatch import Stopwatch
from course_lib.run.seeds import BETAS, grpo_rloo_ppo, in_background, ppo_against, rlhf_route
from course_lib.run.starts import sft_start
from course_lib.run.verdicts import committed_benchmarks, evaluation_noise, paired
from course_lib.tinygpt.rewards import resolve_reward
from course_lib.tinygpt.rollout import sample_groups
from course_lib.trainers.configs import RewardModelConfig, get_config
from course_lib.trainers.reward_model import (
    RewardModelScorer,
    best_of_n_curve,
    best_of_n_scores,
    fit_reward_model,
    over_optimisation,
    scores,
)

torch.set_num_threads(1)  # a tiny model: one thread is fastest on a shared CPU
FAST = os.environ.get("COURSE_FAST") == "1"  # the same lesson on smaller budgets (CI's quick check)
clock = Stopwatch("COURSE_FAST=1" if FAST else "full")
cfg = get_config("cpu")
SEEDS = (0, 1, 2)
SEED = SEEDS[0]  # the seed this notebook walks through; the others run in the background
# FAST: a quarter of the pairs and a third of the steps. With 1,024 prompts and batch 128 the reward model
# reached 59% on seed 0's held-out pairs and best-of-N barely rose: too weak to show the lesson. With these
# pairs, 50 steps depended on the SFT start: 71% gold accuracy from seed 0's start under AVX2 kernels, 54%
# from seed 0's start under AVX-512 kernels (a different start). At 100 steps the six starts measured
# (seeds 0, 1, 2 under AVX2 and AVX-512) reached 66–78% gold, 62–71% against the noisy labels, and best-of-N
# peaked at N = 4 or 8 on each; 100 steps cost about 18 CPU seconds more than 50
RM_CFG = RewardModelConfig(pair_prompts=2048, steps=100, heldout_prompts=200) if FAST else RewardModelConfig()
BON_PROMPTS, BON_K = (100, 32) if FAST else (200, 64)
BON_NS = [n for n in (1, 2, 4, 8, 16, 32, 64) if n <= BON_K]  # the N of best-of-N
# PPO against the reward model (one run per β on each seed): steps, prompts per step, and the moving mean that
# reads the curves
OVEROPT_STEPS, OVEROPT_PROMPTS, WINDOW = (10, 128, 3) if FAST else (80, 128, 5)
# GRPO, RLOO and PPO compared (section 6); FAST: 6 steps (a PPO step, two epochs over policy and critic,
# costs about five GRPO steps)
RL_STEPS = 6 if FAST else cfg.grpo.steps
others = in_background(functools.partial(rlhf_route, cfg=cfg, rm_cfg=RM_CFG, bon_prompts=BON_PROMPTS, bon_ns=BON_NS,
                                         overopt_steps=OVEROPT_STEPS, overopt_prompts=OVEROPT_PROMPTS, window=WINDOW,
                                         rl_steps=RL_STEPS), SEEDS[1:])

# %% [markdown]
# ## 1. Step one of the pipeline: the SFT policy
#
# The same tiny GPT and task as the DPO and GRPO runs: 2-digit addition, demonstrations from a teacher who
# often forgets the carry.

# %%
# every tiny-GPT notebook's SFT policy, trained once per machine
task, policy, sft = sft_start(cfg, seed=SEED, device=DEVICE)
sft_weights = copy.deepcopy(policy.state_dict())
print(f"SFT policy: held-out exact match {sft['accuracy']:.1%} "
      f"(carry prompts {sft['accuracy_carry']:.1%}, no carry {sft['accuracy_no_carry']:.1%})")

# %% [markdown]
# ## 2. Preference pairs from a gold rule, with label noise
#
# For each prompt the SFT policy writes several answers. One the strict checker accepts and one it
# rejects make a pair, shown in random order. The **gold** label prefers the correct one; then each
# label is flipped with probability `noise` — a labeller's slip. The reward model only ever sees the
# noisy labels.
#
# **Predict first.** With `noise = 0.1`, a reward model that agrees with the gold rule on *every* pair
# is scored against held-out pairs labelled the same noisy way. What pairwise accuracy does it get?

# %%
display(predict("A reward model that always agrees with the gold rule, scored against labels with 10% flipped, "
                "reaches …",
                ["100%", "about 90%", "about 80%", "about 50%"], "about 90%",
                "It disagrees exactly with the flipped labels: accuracy = 1 − (share flipped)."))

# %%
rm_run = fit_reward_model(policy, task, RM_CFG, seed=SEED)
train_pairs, heldout_pairs = rm_run["train"], rm_run["heldout"]
m = rm_run["metrics"]
p_len = task.prompt_length
for i in range(4):
    a = task.completion_text(train_pairs["a_ids"][i, p_len:])[0]
    b = task.completion_text(train_pairs["b_ids"][i, p_len:])[0]
    pa, pb = train_pairs["pairs"][i]
    print(f"{task.prompt_text(pa, pb)}  a={a!r:6} b={b!r:6}  gold prefers {'a' if train_pairs['gold'][i] else 'b'}, "
          f"label says {'a' if train_pairs['label'][i] else 'b'}{'  (flipped)' if train_pairs['flipped'][i] else ''}")
print(f"\n{m['train_pairs']} training pairs from {m['train_prompts']} prompts, {m['heldout_pairs']} held-out pairs; "
      f"{m['train_flipped']:.1%} of training labels flipped")
print(f"noise ceiling on the held-out pairs: {m['noise_ceiling']:.1%} (the share of labels not flipped)")

# %% [markdown]
# The gold rule itself only agrees with the unflipped labels: about 1 − noise. That is the **noise
# ceiling**; a reward model "above" it would be fitting the slips.
#
# ## 3. The reward model: `transformers`' GPT-2 with a one-output head
#
# `GPT2ForSequenceClassification(num_labels=1)` — the class TRL's `RewardTrainer` trains — reads the
# last real token and outputs one number. It starts from the SFT policy's transformer (InstructGPT
# does the same) with a fresh head, and is trained with the Bradley–Terry loss −log σ(r_chosen −
# r_rejected) from [Bradley–Terry](01_bradley_terry.ipynb). By hand on four training pairs, against
# `course_lib.formulas.preference.reward_model_loss`:

# %%
rm = rm_run["model"]
lab = train_pairs["label"][:4, None]
chosen = torch.where(lab, train_pairs["a_ids"][:4], train_pairs["b_ids"][:4]).to(DEVICE)
rejected = torch.where(lab, train_pairs["b_ids"][:4], train_pairs["a_ids"][:4]).to(DEVICE)
pad = task.tokenizer.pad_token_id
with torch.no_grad():
    r_c = scores(rm, chosen, (chosen != pad).long())
    r_r = scores(rm, rejected, (rejected != pad).long())
by_hand = sum(-math.log(1 / (1 + math.exp(-(c - r)))) for c, r in zip(r_c.tolist(), r_r.tolist())) / 4
library = float(reward_model_loss(r_c, r_r))
print(f"loss by hand {by_hand:.6f}   reward_model_loss {library:.6f}")
assert abs(by_hand - library) < 1e-5

# %%
log = rm_run["log"]
evals = [r for r in log if "heldout_accuracy" in r]
fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(9.5, 3))
ax_loss.plot([r["step"] for r in log], [r["loss"] for r in log], lw=0.8)
eps = RM_CFG.noise
ax_loss.axhline(-(eps * math.log(eps) + (1 - eps) * math.log(1 - eps)), ls=":", c="k",
                label="entropy of the label noise")
ax_loss.set(xlabel="step", ylabel="loss", title="reward-model loss (training batches)")
ax_loss.legend()
ax_acc.plot([r["step"] for r in evals], [r["heldout_accuracy"] for r in evals], "o-", label="vs noisy labels")
ax_acc.plot([r["step"] for r in evals], [r["heldout_gold_accuracy"] for r in evals], "s-", label="vs gold")
ax_acc.axhline(m["noise_ceiling"], ls="--", c="k", label="noise ceiling")
ax_acc.set(xlabel="step", ylabel="pairwise accuracy", title="held-out pairs", ylim=(0.4, 1.02))
ax_acc.legend()
fig.tight_layout()
plt.show()
print(f"held-out pairwise accuracy {m['heldout_accuracy']:.1%} = {m['of_ceiling']:.1%} of the noise ceiling "
      f"({m['noise_ceiling']:.1%}); against gold labels {m['heldout_gold_accuracy']:.1%}")

# %% [markdown]
# **Why 256 pairs per step.** The full run trains on 256 pairs per step at learning rate 6e-4 for
# 300 steps (`RewardModelConfig`'s defaults). With 64 pairs per step at 3e-4 the same model
# underfit: 71.7% held-out pairwise accuracy after 400 steps on seed 0, with a larger step at that
# batch doing worse, not better. It needed to see more pairs and to take larger steps, and the
# larger step was safe with 256 pairs per step (why was not isolated; a likely reason is that the
# gradient of a larger batch depends less on which few of its labels were flipped). (Each measurement is listed in
# `course_lib.trainers.reward_model`'s docstring; the RLHF table in docs/results.md has the medians over seeds.)
# `COURSE_FAST=1` trains on fewer pairs for fewer steps (section 2 printed how many pairs): expect a weaker model.
#
# ### Calibration: do its Bradley–Terry probabilities mean what they say?
#
# For each held-out pair the model predicts P(a ≻ b) = σ(r_a − r_b). Group pairs by that prediction
# and compare with how often the (noisy) label actually preferred a. A calibrated model sits on the
# diagonal. Note what noise does: a model that knew the gold answer *for certain* would predict 0 or 1,
# yet observe only 1 − noise — confident and wrong by exactly the flip rate.

# %%
cal = rm_run["calibration"]
fig, ax = plt.subplots(figsize=(4.2, 4))
ax.plot([0, 1], [0, 1], ls=":", c="k")
ax.scatter(cal["predicted"], cal["observed"], s=[8 + c for c in cal["count"]], alpha=0.7)
ax.set(xlabel="predicted P(a ≻ b)", ylabel="observed win rate of a", title="reliability diagram (held-out)")
plt.show()
print(f"expected calibration error {cal['ece']:.3f} over {sum(cal['count'])} pairs "
      f"(a perfectly confident gold model would score {1 - m['noise_ceiling']:.3f}: the flip rate)")

# %% [markdown]
# ## 4. Best-of-N against the reward model
#
# The simplest way to use a reward model: sample N answers, keep the one it scores highest. No training
# at all. The often-quoted KL of best-of-N to the base policy, log N − (N − 1)/N, is exact only when no
# two samples can be equal; otherwise it is an upper bound. The tiny GPT's answers repeat (many of the
# samples drawn for a prompt — 64 in the full run, 32 at `COURSE_FAST=1` — are the same string; the line
# under the table counts them), so the KL here is computed exactly for each prompt's
# empirical distribution of its samples, repeats counted and ties in the reward model's score handled
# (`course_lib.trainers.reward_model.empirical_best_of_n_kl`), and the bound is printed beside it.
#
# **Predict first.** As N grows, the proxy score of the chosen answer rises (it is a maximum over
# more samples). What does the *gold* accuracy do? (The samples are drawn and scored below; nothing
# is shown until you reveal.)

# %%
scorer = RewardModelScorer(rm, task)
torch.manual_seed(SEED)
proxy, gold, ids = best_of_n_scores(policy, task, task.heldout_pairs[:BON_PROMPTS], scorer, k=BON_K)
ns = BON_NS
bon = best_of_n_curve(proxy, gold, ns, ids=ids)
best = max(bon, key=lambda r: r["gold"])
falls = bon[-1]["gold"] < best["gold"] - 0.01
if falls:
    bon_answer = "rises, then falls" if best["n"] > 1 else "falls from the start"
else:
    bon_answer = "keeps rising" if bon[-1]["gold"] > bon[0]["gold"] + 0.01 else "stays flat"
display(predict(f"Best-of-N against the reward model, N = 1 … {ns[-1]}: gold accuracy of the kept answer …",
                ["keeps rising", "rises, then falls", "falls from the start", "stays flat"], bon_answer,
                f"In this run: {bon[0]['gold']:.1%} at N=1, {best['gold']:.1%} at N={best['n']}, "
                f"{bon[-1]['gold']:.1%} at N={bon[-1]['n']}."))

# %%
distinct = sum(len(set(row.tolist())) for row in ids) / len(ids)
print(f"{distinct:.1f} distinct answers among a prompt's {BON_K} samples, on average\n")
for row in bon:
    print(f"N={row['n']:2d}  KL {row['kl']:.3f} (bound log N − (N − 1)/N: {row['kl_bound']:.3f})  "
          f"proxy {row['proxy']:+.3f}  gold {row['gold']:.1%}")
gain16 = next(r["gold"] for r in bon if r["n"] == min(16, BON_K)) - bon[0]["gold"]
print(f"\ngold peaks at N={best['n']} ({best['gold']:.1%})"
      + (f", then falls to {bon[-1]['gold']:.1%} at N={bon[-1]['n']} while the proxy keeps rising" if falls
         else f" and has not fallen by N={bon[-1]['n']} at this budget"))
print(f"best-of-{min(16, BON_K)} minus best-of-1, gold: {gain16:+.1%}")

# %%
fig, ax = plt.subplots(figsize=(6, 3.8), layout="constrained")
x = [math.sqrt(r["kl"]) for r in bon]
ax.plot(x, [r["gold"] for r in bon], "o-", c="C2", label="gold (strict accuracy)")
ax.set(xlabel="√KL(best-of-N ‖ SFT), exact over each prompt's samples", ylabel="gold accuracy")
ax2 = ax.twinx()
ax2.plot(x, [r["proxy"] for r in bon], "s--", c="C0", label="proxy (reward model)")
ax2.set_ylabel("proxy reward")
for r, xi in zip(bon, x):
    ax.annotate(f"N={r['n']}", (xi, r["gold"]), textcoords="offset points", xytext=(0, 6), ha="center", fontsize=8)
ax.margins(x=0.08, y=0.15)  # room for the N labels inside the axes
fig.legend(loc="outside lower center", ncols=2)  # below the axes: it covered the x label
ax.set_title("best-of-N: proxy vs gold")
plt.show()

# %% [markdown]
# Explore one prompt at a time: the slider picks N; you see the N samples the reward model chose from
# and which one it kept.

# %%
n_slider = widgets.SelectionSlider(options=ns, value=min(16, BON_K), description="N")
prompt_slider = widgets.IntSlider(value=0, min=0, max=9, description="prompt")
torch.manual_seed(SEED + 7)
explore_pairs = task.heldout_pairs[:10]
explore_roll = sample_groups(policy, task, explore_pairs, num_generations=BON_K, max_completion_length=6)
explore_prompts = [p for p in explore_pairs for _ in range(BON_K)]
explore_proxy = scorer(explore_prompts, explore_roll.completions).view(10, BON_K)
explore_gold = resolve_reward("strict", task)(explore_prompts, explore_roll.completions).view(10, BON_K)


def show_choice(n, i):
    comps = explore_roll.completions[i * BON_K : i * BON_K + n]
    proxy_i, gold_i = explore_proxy[i, :n], explore_gold[i, :n]
    kept = int(proxy_i.argmax())
    a, b = explore_pairs[i]
    print(f"{task.prompt_text(a, b)}  (answer {a + b})")
    for j, c in enumerate(comps):
        text, ended = task.completion_text(c)
        mark = "← kept" if j == kept else ""
        print(f"  {text + ('' if ended else '…'):8} proxy {float(proxy_i[j]):+.2f}  gold {int(gold_i[j])}  {mark}")


display(widgets.VBox([n_slider, prompt_slider,
                      widgets.interactive_output(show_choice, {"n": n_slider, "i": prompt_slider})]))

# %% [markdown]
# ## 5. RL against the reward model: over-optimisation
#
# Now PPO (built in section 6) optimises the reward model's score directly, with the KL to the SFT
# policy *in the reward* (InstructGPT): each token pays β times its k1 estimate. Two runs on this seed
# (`course_lib.run.seeds.ppo_against`), β = 0 and β = 0.05; every step logs the proxy and the gold score **on the same
# samples**, and the sampled KL to the SFT policy.
#
# **Predict first**, in the two questions below the runs: will gold rise, rise then fall, or fall? And
# which β moves further in KL?

# %%
over = {(SEED, beta): ppo_against(policy, task, scorer, sft_weights, seed=SEED, beta=beta, steps=OVEROPT_STEPS,
                                  prompts=OVEROPT_PROMPTS) for beta in BETAS}
summary = [{"seed": seed, "beta": beta, **over_optimisation(rows, window=WINDOW)}
           for (seed, beta), rows in over.items()]
proxy_up = [s for s in summary if s["proxy_end"] > s["proxy_start"]]
end_kl = {beta: sorted(s["sqrt_kl_end"] for s in summary if s["beta"] == beta) for beta in BETAS}
shapes = [s["shape"].replace("flat", "stays flat") for s in proxy_up]
common = max(sorted(set(shapes)), key=shapes.count) if shapes else None
display(predict("Over the runs whose proxy reward rose, gold most often …",
                ["rises then falls", "falls", "rises", "stays flat", "no shape is the majority"],
                common if shapes and shapes.count(common) > len(shapes) / 2 else "no shape is the majority",
                "Shapes of the runs whose proxy rose: " + (", ".join(shapes) or "none")
                + ". The next cell plots them."))
display(predict("Which β ends further from the SFT policy (√KL at the last step)?",
                ["β = 0", "β = 0.05", "neither clearly"],
                "β = 0" if min(end_kl[0.0]) > max(end_kl[0.05]) else "β = 0.05" if min(end_kl[0.05]) > max(end_kl[0.0])
                else "neither clearly",
                "√KL at the end: " + "; ".join(f"β={beta}: " + ", ".join(f"{v:.2f}" for v in vals)
                                             for beta, vals in end_kl.items()) + "."))

# %%
fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.4), sharey=False)
for (seed, beta), rows in over.items():
    x = [math.sqrt(max(r["kl"], 0.0)) for r in rows]
    style = "-" if beta == 0 else "--"
    axes[0].plot(x, [r["proxy"] for r in rows], style, c=f"C{seed}", lw=1, label=f"seed {seed}, β={beta}")
    axes[1].plot(x, [r["gold"] for r in rows], style, c=f"C{seed}", lw=1, label=f"seed {seed}, β={beta}")
bon_x = [math.sqrt(r["kl"]) for r in bon]  # best-of-N at its exact KL, on the same axes
axes[0].plot(bon_x, [r["proxy"] for r in bon], "k^:", ms=4, lw=1, label="best-of-N (exact KL)")
axes[1].plot(bon_x, [r["gold"] for r in bon], "k^:", ms=4, lw=1, label="best-of-N (exact KL)")
axes[0].set(xlabel="√KL to SFT (sampled)", ylabel="proxy reward (reward model)", title="what PPO optimises")
axes[1].set(xlabel="√KL to SFT (sampled)", ylabel="gold (strict) on the same samples", title="what we wanted")
axes[1].legend(fontsize=7)
fig.tight_layout()
plt.show()

for s in summary:
    seed, beta = s["seed"], s["beta"]
    print(f"seed {seed} β={beta}: proxy {s['proxy_start']:+.2f} → {s['proxy_end']:+.2f}; gold {s['gold_start']:.1%} → "
          f"peak {s['gold_peak']:.1%} (step {s['peak_step']}, √KL {s['sqrt_kl_peak']:.2f}) → {s['gold_end']:.1%}; "
          f"√KL at the end {s['sqrt_kl_end']:.2f}: gold {s['shape']}")
print(f"\n({WINDOW}-step moving means; a move counts above 3 points.) Proxy rose in {len(proxy_up)} of {len(summary)} "
      f"runs; of those, gold rose then fell in {sum(s['shape'] == 'rises then falls' for s in proxy_up)}, only fell "
      f"in {sum(s['shape'] == 'falls' for s in proxy_up)}, only rose in "
      f"{sum(s['shape'] == 'rises' for s in proxy_up)}")
print("√KL at the end: "
      + "; ".join(f"β={beta}: " + ", ".join(f"{v:.2f}" for v in vals) for beta, vals in end_kl.items())
      + " (section 7 reads β's effect over three seeds)")
KL_FMT = {"scale": 1.0, "unit": "", "digits": 2}
BENCH = committed_benchmarks("rlhf")  # the committed multi-seed run (`make bench`); None on Colab
bench = json.loads((BENCH / "results" / "rlhf.json").read_text()) if BENCH else None
if bench:
    b_kl = {(r["seed"], o["beta"]): o["sqrt_kl_end"] for r in bench["runs"] for o in r["overopt"]}
    b_seeds = [r["seed"] for r in bench["runs"]]
    print(f"the committed benchmark (benchmarks/tinygpt_rlhf.py, {bench['runs'][0]['overopt'][0]['steps']} PPO steps, "
          "β = 0.5 against β = 0.05): " + paired([b_kl[s, 0.5] for s in b_seeds], [b_kl[s, 0.05] for s in b_seeds],
                                                 name_a="√KL at the end, β = 0.5", name_b="β = 0.05", seeds=b_seeds,
                                                 **KL_FMT).sentence())

# %% [markdown]
# Read the two panels together. The left one is all the trainer sees. Where the right one goes down
# while the left keeps climbing, the policy has found answers the reward model overrates — the reward
# model was fitted on the SFT policy's samples and never saw the regions RL pushes into. The published
# curves (gold against √KL) first rise, then fall; whether the rise shows depends on how good the
# proxy is where the policy first moves: if PPO finds the reward model's blind spots faster than its
# real signal, gold only falls. The count above says which shape *your* runs took; best-of-N (section
# 4) is the gentler optimiser to compare with. Compare also the KL each β reached (the last line
# above): the penalty costs β per nat of KL, so it holds the policy back only once β·KL is
# comparable with the proxy reward it gains.
# The RLHF table in docs/results.md has the β = 0.05 run over three seeds (60 steps of 128 prompts, the
# reward model trained with the full budget), next to best-of-N against the same reward model.
#
# ## 6. PPO with a learned critic, against GRPO and RLOO
#
# GRPO and RLOO get a baseline from the other answers to the same prompt. PPO learns one: a **critic**
# V(s_t) predicts, at every token, the reward still to come, and **GAE** (generalised advantage
# estimation) mixes its predictions with the rewards actually seen:
#
# δ_t = r_t + γ V(s_{t+1}) − V(s_t),  Â_t = δ_t + γλ Â_{t+1}.
#
# Here s_t is the prompt with the first t tokens of the answer, r_t the reward paid at token t (here only
# at the end), γ discounts later rewards, and λ mixes: λ = 0 trusts the critic's next prediction, λ = 1
# adds up the rewards actually seen.
#
# By hand for one answer of three tokens, reward 1 at the end, values 0.2, 0.5, 0.9 and γ = 1,
# λ = 0.95, against `course_lib.formulas.advantages.gae`:

# %%
r_tok, v_tok = [0.0, 0.0, 1.0], [0.2, 0.5, 0.9]
gamma, lam = 1.0, 0.95
deltas = [r_tok[t] + gamma * (v_tok[t + 1] if t + 1 < 3 else 0.0) - v_tok[t] for t in range(3)]
adv_hand = [0.0, 0.0, 0.0]
running = 0.0
for t in (2, 1, 0):
    running = deltas[t] + gamma * lam * running
    adv_hand[t] = running
adv_lib, returns = gae(torch.tensor([r_tok]), torch.tensor([v_tok]), torch.ones(1, 3), gamma=gamma, lam=lam)
print("δ by hand       ", [round(d, 4) for d in deltas])
print("Â by hand       ", [round(a, 4) for a in adv_hand])
print("Â advantages.gae", [round(a, 4) for a in adv_lib[0].tolist()])
assert torch.allclose(adv_lib, torch.tensor([adv_hand]))
v_loss, was_clipped = clipped_value_loss(torch.tensor([0.5]), torch.tensor([0.0]), torch.tensor([1.0]), 0.2)
print(f"clipped value loss: V_old 0, V 0.5, return 1, ε_v 0.2 → {float(v_loss):.2f} (clip active: "
      f"{bool(was_clipped)})")

# %% [markdown]
# The critic's value loss is clipped like the policy's ratio, and like the ratio clip
# ([From advantages to an update](05_from_advantages_to_an_update.ipynb)) it **removes a gradient; it
# does not bound the move**. In the example just printed, V has already moved 0.5 from V_old = 0, more
# than ε_v = 0.2: the clipped term is the larger, so the loss has no gradient in V at all — nothing
# pulls V back, nothing pushes it further. Whether one optimiser step moves V by more than ε_v is up to
# the step size, not the clip:
#
# %%
v = torch.tensor([0.5], requires_grad=True)
clipped_value_loss(v, torch.tensor([0.0]), torch.tensor([1.0]), 0.2)[0].sum().backward()
print(f"V = 0.5, V_old = 0, ε_v = 0.2: d(loss)/dV = {float(v.grad):.1f} — V sits 0.5 from V_old and the clip "
      "neither stopped it nor pulls it back")

# %% [markdown]
# **Predict first.** At the same number of sampled answers per step (256: GRPO's 32 prompts × 8, PPO's
# 256 prompts × 1), will PPO's held-out accuracy land above, near or below GRPO's? And how much memory
# does its critic add? The three runs below print nothing until you reveal. This is the comparison
# *as configured*, not a matched one: PPO takes `num_ppo_epochs` = 2 optimiser steps per batch over
# 256 distinct prompts, GRPO one over 32 prompts sampled 8 times (the next cell prints the counts).
# `make bench` adds GRPO at PPO's optimiser steps (μ = 2, the same samples) and at PPO's wall-clock:
# the RLHF table in docs/results.md names each comparison.

# %%
grpo_cfg = dataclasses.replace(cfg.grpo, steps=RL_STEPS, eval_every=RL_STEPS)
compared = grpo_rloo_ppo(policy, task, grpo_cfg, sft_weights, seed=SEED)  # the three runs, from the SFT policy
runs, memory, critic, ppo_cfg = compared["runs"], compared["memory"], compared["critic"], compared["ppo_cfg"]
gap = runs["PPO"]["accuracy"] - runs["GRPO"]["accuracy"]
ppo_answer = ("more than 10 points above GRPO" if gap > 0.10 else "within 10 points of GRPO" if gap >= -0.10
              else "more than 10 points below GRPO")
display(predict(f"After {RL_STEPS} steps of 256 sampled answers each, PPO's held-out accuracy is …",
                ["more than 10 points above GRPO", "within 10 points of GRPO", "more than 10 points below GRPO"],
                ppo_answer,
                f"In this run PPO − GRPO = {100 * gap:+.1f} points; the critic's states are as large as "
                "the policy's."))

# %%
mib = 2**20
for name, r in runs.items():
    extra = f"   + critic {memory['critic']['total'] / mib:.2f} MiB" if name == "PPO" else ""
    print(f"{name:5} held-out {r['accuracy']:.1%} (SFT {sft['accuracy']:.1%})   RL {r['rl_seconds']:.1f} s   "
          f"policy states {memory['policy']['total'] / mib:.2f} MiB{extra}")
print(f"\nas configured, {RL_STEPS} steps × 256 sampled answers: GRPO {RL_STEPS * grpo_cfg.num_iterations} optimiser "
      f"steps over {grpo_cfg.batch_prompts} prompts a step, PPO {RL_STEPS * ppo_cfg.num_ppo_epochs} over "
      f"{ppo_cfg.batch_prompts}")
print(f"this run (seed 0): PPO − GRPO: {100 * gap:+.1f} points at {RL_STEPS} steps (section 7 reads it over three "
      f"seeds); PPO took {runs['PPO']['rl_seconds'] / runs['GRPO']['rl_seconds']:.2f}× GRPO's time (timings on a "
      "shared CPU are noisy)")
if bench:
    print(f"the committed benchmark ({bench['rl_steps']} steps, the seeds' own SFT starts): held-out accuracy, "
          + paired([r["rl"]["PPO"]["accuracy"] for r in bench["runs"]],
                   [r["rl"]["GRPO"]["accuracy"] for r in bench["runs"]],
                   name_a="PPO", name_b="GRPO", seeds=b_seeds).sentence())
last = compared["ppo_rows"][-1]
print(f"last step: value loss {last['value_loss']:.4f}, explained variance {last['explained_variance']:.2f}, "
      f"value clip fraction {last['value_clip_fraction']:.1%}")

# %% [markdown]
# ### Where the critic's memory goes, and the 44% of the budgets notebook
#
# [Memory and rollout budgets](07_memory_and_rollout_budgets.ipynb) counted PPO's persistent model
# states as two trained models (16 bytes per parameter each) plus two frozen bf16 copies (2 each): the
# critic is 16/36 ≈ 44%. Here every tensor is fp32 on the CPU, and the tensors were measured: the
# critic holds weights, gradients and AdamW's two moments.

# %%
n_critic = sum(p.numel() for p in critic.parameters())
measured_share = memory["critic"]["total"] / (memory["policy"]["total"] + memory["critic"]["total"]
                                              + 2 * memory["policy"]["weights"])
lecture_share = stage_memory_gib(n_critic, ["train"]) / stage_memory_gib(n_critic, "ppo")
print(f"critic: {n_critic:,} parameters, measured {memory['critic']['total']:,} bytes = "
      f"{memory['critic']['total'] / n_critic:.1f} bytes/parameter")
print(f"critic share of PPO's model states: lecture stack {lecture_share:.0%}; measured here with fp32 frozen "
      f"reference and reward model (4 bytes/parameter each) {measured_share:.0%}")

# %% [markdown]
# The measured share is lower than 44% only because our frozen copies are fp32 (4 bytes per parameter,
# not bf16's 2): 16/(16 + 16 + 4 + 4) = 40%. Against GRPO and RLOO, which keep no critic, PPO's extra
# model is a whole second set of trained states — as large as the policy's.
#
# ## 7. Over seeds: what holds
#
# Every number above was seed 0's. Seeds 1 and 2 ran the same route in the background
# (`course_lib.run.seeds.rlhf_route`), each from its own SFT start with its own reward model. A verdict is
# read over the three seeds by the course's one rule (`course_lib.run.verdicts`): the per-seed
# differences, "on k of n seeds", and "beyond the seed spread" only when the difference has the same
# sign on every seed and its median exceeds a stated floor (for accuracies, the evaluation noise: two
# standard errors of a difference of two accuracies on the prompts measured).
#
# **Predict first.** On how many of the three seeds does best-of-N's gold peak above N = 1? And on how
# many does PPO end above GRPO?

# %%
per_seed = {SEED: {"sft": sft["accuracy"], "rm": m, "bon": bon, "summary": summary, "runs": runs}}
for r in others.results():  # waits for seeds 1 and 2
    per_seed[r["seed"]] = r["result"]
N_MID = min(16, BON_K)


def bon_gold(s, n):
    return next(row["gold"] for row in per_seed[s]["bon"] if row["n"] == n)


def end_sqrt_kl(s, beta):
    return next(x["sqrt_kl_end"] for x in per_seed[s]["summary"] if x["beta"] == beta)


peaks = {s: max(per_seed[s]["bon"], key=lambda row: row["gold"])["n"] for s in SEEDS}
verdicts = {
    "bon": paired([bon_gold(s, N_MID) for s in SEEDS], [bon_gold(s, 1) for s in SEEDS], name_a=f"best-of-{N_MID} gold",
                  name_b="best-of-1", seeds=SEEDS, margin=evaluation_noise(BON_PROMPTS)),
    "beta": paired([end_sqrt_kl(s, 0.05) for s in SEEDS], [end_sqrt_kl(s, 0.0) for s in SEEDS],
                   name_a="√KL at the end, β = 0.05", name_b="β = 0", seeds=SEEDS, **KL_FMT),
    "ppo": paired([per_seed[s]["runs"]["PPO"]["accuracy"] for s in SEEDS], [per_seed[s]["runs"]["GRPO"]["accuracy"]
                                                                             for s in SEEDS],
                  name_a="PPO", name_b="GRPO", seeds=SEEDS, margin=evaluation_noise(len(task.heldout_pairs))),
}
counts = [f"{k} of {len(SEEDS)}" for k in range(len(SEEDS) + 1)]
bon_up = sum(n > 1 for n in peaks.values())
display(predict("Best-of-N's gold peaks above N = 1 on … seeds", counts, f"{bon_up} of {len(SEEDS)}",
                "The N where gold peaked, per seed: " + ", ".join(f"seed {s}: N={n}" for s, n in peaks.items()) + "."))
display(predict(f"After {RL_STEPS} steps, PPO ends above GRPO on … seeds", counts,
                f"{verdicts['ppo'].k} of {len(SEEDS)}", verdicts["ppo"].sentence() + "."))

# %%
everyone = [x for s in SEEDS for x in per_seed[s]["summary"]]
rose = [x for x in everyone if x["proxy_end"] > x["proxy_start"]]
print("per seed (" + " / ".join(map(str, SEEDS)) + "):")
print("  SFT held-out accuracy       " + " / ".join(f"{per_seed[s]['sft']:.1%}" for s in SEEDS))
print("  reward model, gold pairs    "
      + " / ".join(f"{per_seed[s]['rm']['heldout_gold_accuracy']:.1%}" for s in SEEDS))
print("  best-of-N's gold peaks at N " + " / ".join(str(peaks[s]) for s in SEEDS))
for verdict in verdicts.values():
    print("- " + verdict.sentence())
print(f"- best-of-N's gold peaked above N = 1 on {bon_up} of {len(SEEDS)} seeds")
print(f"- PPO against the reward model raised the proxy in {len(rose)} of {len(everyone)} runs; gold in those: "
      + (", ".join(x["shape"] for x in rose) or "none"))

# %% [markdown]
# Read "beyond the seed spread" as the one claim these runs support: the same sign on every seed and a
# median above the stated floor (the √KL comparison states none: any consistent sign counts). Three
# seeds sharing a sign happens by chance one time in four when there is no effect at all, so the
# sentence always says how many seeds it stands on. The committed benchmark's lines in sections 5 and 6
# read the same comparisons at the full budget.
#
# ## Your turn
#
# A labelling team flips 25% of its labels. (a) What is the noise ceiling on labels of that quality?
# (b) A reward model that knows the gold answer and says so with certainty (P = 0 or 1): what is its
# expected calibration error? (c) Check `best_of_n_kl(16)` against log N − (N − 1)/N by hand.

# %%
# your code here

# %% [markdown]
# <details><summary>Answer</summary>
#
# (a) 75%: the gold rule agrees with exactly the unflipped labels. (b) 0.25: it predicts 1 where the
# observed win rate is 0.75 (and 0 where it is 0.25). (c) `math.log(16) - 15 / 16` = 1.8351, the value
# `course_lib.trainers.reward_model.best_of_n_kl(16)` returns.
# </details>
#
# ## Check yourself
#
# 1. Your reward model reaches 80% held-out pairwise accuracy with `noise = 0.1`. Is that 80% of
#    "perfect"?
#    <details><summary>Answer</summary>
#    No: with 10% of held-out labels flipped, even the gold rule scores about 90%. 80% is about 89% of
#    the ceiling — and against the gold labels it is higher than 80%.
#    </details>
# 2. Best-of-64 has a KL of at most log 64 − 63/64 ≈ 3.17 nats, whatever the reward model (exactly that
#    only if no two samples can be equal). Why can gold accuracy fall as N grows even though nothing
#    was trained?
#    <details><summary>Answer</summary>
#    Selection is optimisation: the larger N, the more the kept answer is the one the proxy *overrates
#    most*, not the one that is best. Where the reward model's errors are largest (answers it rarely saw)
#    a big N finds them.
#    </details>
# 3. PPO's critic doubles the trained-model states. What does it buy, and what do GRPO and RLOO pay
#    instead?
#    <details><summary>Answer</summary>
#    A per-token baseline from one sample per prompt (credit assignment inside the answer, usable when
#    only one answer per prompt is affordable). GRPO and RLOO pay with G samples per prompt and a
#    per-answer (not per-token) baseline, and keep no second model.
#    </details>
# 4. In section 5, which curve would you show a manager who asks "is RL still helping?" — and which
#    number would you need that real RLHF does not have?
#    <details><summary>Answer</summary>
#    The gold curve against KL: it shows when to stop. Real RLHF has no gold rule; it estimates the gold
#    curve with fresh human (or stronger-model) comparisons on held-out prompts, and stops or raises β
#    when the proxy rises while those comparisons do not.
#    </details>

# %%
print(clock.report())
