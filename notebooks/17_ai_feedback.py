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
# # 17 · AI feedback: a judge taught by written principles, and the biases it hands on
#
# *Pointer for readers of the Module 14 lecture: §15. Everything below stands on its own: the terms it
# shares with [the RLHF route](12_the_rlhf_route.ipynb) (a reward model, proxy and gold, PPO) are defined
# again where they are used.*
#
# A **reward model** scores an answer; it is trained on pairs of answers labelled "this one is better".
# Constitutional AI ([Bai et al. 2022](https://arxiv.org/abs/2212.08073)) and RLAIF
# ([Lee et al. 2023](https://arxiv.org/abs/2309.00267)) replace the people who compare answers with a **judge**: a
# model that reads a prompt and two answers and says which is better, guided by a short written list of **principles**
# (a *constitution*). Its labels train the reward model; RL optimises that. Judges are known to have biases of their
# own — they favour the answer shown first, or the longer one ([Zheng et al. 2023](https://arxiv.org/abs/2306.05685)).
# Here every step is measured against the gold rule (the strict checker), which real AI feedback does not have.
#
# After this notebook you will be able to
#
# 1. write a constitution as checkable principles and say which pairs each one decides;
# 2. measure a judge against gold: agreement, **position bias** with the swap test (every pair in both
#    orders), and **length bias**;
# 3. read what a reward model trained on the judge's labels, and RL against it, do to proxy and gold;
# 4. change one principle, and measure the bias it removes — and what it does not fix.
#
# Budget: the last cell prints how long this run took. `COURSE_FAST=1` (CI, the quick check) starts from
# the same SFT policies and trains the judge, the reward model and RL on smaller budgets; the text below is
# computed from whichever ran.
#
# **Seeds.** One run is one draw: a statement about what training does is a statement about a
# distribution of runs. This notebook walks through seed 0 in the kernel while seeds 1 and 2 run the same
# steps in background processes (`course_lib.run.seeds`, one CPU thread each), each from its own SFT start;
# the reveals below say what happened *in this run* (seed 0), and section 6 states every verdict over the
# three seeds: per-seed numbers, the median and range of the paired difference, "on k of n seeds", and
# "beyond the seed spread" only when every seed agrees (`course_lib.run.verdicts`).

# %%
import collections
import dataclasses
import functools
import os

import ipywidgets as widgets
import matplotlib.pyplot as plt
import torch
from IPython.display import Markdown, display

from course_lib.lesson.explore import predict
from course_lib.lesson.sources import cite
from course_lib.lesson.stopwatch import Stopwatch
from course_lib.run.ai_feedback import CONSTITUTIONS, feedback_run, notebook_budget, seed_run, seed_summary
from course_lib.run.seeds import in_background
from course_lib.run.starts import sft_start
from course_lib.run.verdicts import paired
from course_lib.trainers.configs import get_config
from course_lib.trainers.judge import (
    BIASED,
    PRINCIPLES,
    UNBIASED_POSITION,
    constitution_labels,
    constitution_text,
    fit_judge,
    judge_pairs,
    measure_judge,
    principles_judge,
)

torch.set_num_threads(1)  # a tiny model: one thread is fastest on a shared CPU
FAST = os.environ.get("COURSE_FAST") == "1"  # the same lesson on smaller budgets (CI's quick check)
clock = Stopwatch("COURSE_FAST=1" if FAST else "full")
cfg = get_config("cpu")
SEEDS = (0, 1, 2)
SEED = SEEDS[0]  # the seed this notebook walks through; the others run in the background
# the judge, the reward model on its labels, PPO against it, and the moving mean that reads PPO's curves;
# FAST trains each on fewer pairs for fewer steps (`ai_feedback.notebook_budget`)
BUDGET = "fast" if FAST else "full"
JUDGE, RM_CFG, PPO_CFG, WINDOW = notebook_budget(BUDGET)
# seeds 1 and 2: every step below, for both constitutions, in worker processes (`ai_feedback.seed_run`)
others = in_background(functools.partial(seed_run, budget=BUDGET), SEEDS[1:])
display(Markdown(f"Sources: {cite('constitutional_ai')} · {cite('rlaif')} · {cite('llm_judge')}"))

# %% [markdown]
# ## 1. The answers to judge
#
# The same tiny GPT and task as the earlier notebooks: 2-digit addition, an SFT policy trained on
# demonstrations from a teacher who often forgets the carry (writing 55 for 07+58). For each prompt the
# policy writes several answers; one the strict checker accepts and one it rejects make a pair, shown in
# random order — the pairs of [the RLHF route](12_the_rlhf_route.ipynb), with no labels yet.

# %%
task, policy, sft = sft_start(cfg, seed=SEED, device=DEVICE)  # the shared SFT policy, trained once per machine
print(f"SFT policy: held-out exact match {sft['accuracy']:.1%} "
      f"(carry prompts {sft['accuracy_carry']:.1%}, no carry {sft['accuracy_no_carry']:.1%})")

# %% [markdown]
# ## 2. A constitution: principles a cheap judge can check
#
# Each principle is one sentence and a rule on the two answers. The constitution lists them in order;
# the **first principle that tells the answers apart decides**, and if none does the pair is a tie.
# This judge can check the format, the *last digit* of the sum, the length, and the order it was shown —
# not the whole sum (a real judge, too, checks what is cheap to check).

# %%
print("The constitution:\n" + constitution_text(BIASED))
print("\nOther principles in the library: " + "; ".join(f"[{k}] {p.sentence}" for k, p in PRINCIPLES.items()
                                                        if k not in BIASED))

# %% [markdown]
# **Predict first.** Most wrong answers of this policy are the teacher's carry error: 55 for 65, 93 for
# 103. Which principle decides most pairs?

# %%
train_pairs, heldout_pairs = judge_pairs(policy, task, JUDGE, seed=SEED)  # every constitution uses these pairs
targets, decided_by = constitution_labels(task, train_pairs, BIASED)
shares = collections.Counter(decided_by)
top = max(shares, key=shares.get)
display(predict("The principle that decides the most training pairs is …", list(BIASED), top,
                f"In this run: {', '.join(f'{k} {shares[k] / len(decided_by):.0%}' for k in BIASED)} of "
                f"{len(decided_by)} pairs."))

# %%
p_len = task.prompt_length
first_of_prompt = [i for i, pair in enumerate(train_pairs["pairs"]) if pair not in train_pairs["pairs"][:i]]
for i in first_of_prompt[:6]:
    a = task.completion_text(train_pairs["a_ids"][i, p_len:])[0]
    b = task.completion_text(train_pairs["b_ids"][i, p_len:])[0]
    x, y = train_pairs["pairs"][i]
    verdict = {1.0: "A", 0.0: "B", 0.5: "tie"}[float(targets[i])]
    print(f"{task.prompt_text(x, y)}  A={a!r:6} B={b!r:6}  gold prefers {'A' if train_pairs['gold'][i] else 'B'}; "
          f"the constitution says {verdict} ({decided_by[i]})")
print("\n" + "; ".join(f"{k} decides {shares[k] / len(decided_by):.1%}" for k in BIASED)
      + f" of {len(decided_by)} training pairs")
rules_agree = float(((targets > 0.5) == train_pairs["gold"]).float().mean())
print(f"the constitution agrees with gold on {rules_agree:.1%} of them")

# %% [markdown]
# The carry error passes the last-digit check and usually has the same length, so the fallback rule
# — *prefer the answer shown first* — labels most pairs. Since pairs are shown in random order, those
# labels are coin flips as far as correctness goes.
#
# ## 3. The judge: a model trained on the constitution's labels
#
# The tiny GPT cannot read English, so the judge is not *prompted* with the sentences: it is *trained*
# on the labels they produce. It reads `prompt | A | B` (each answer in a fixed slot) and outputs the
# log-odds that A is better; its loss is binary cross entropy against the label (a tie's target is 0.5).
# It starts from the SFT policy's weights, like the reward model. So it inherits the principles' biases
# and adds its own errors.
#
# **How to measure a judge against gold.** The judge gives P, its probability that the answer shown first
# is better. Its **verdict** is *first* when P − 0.5 > `tie_margin`, *second* when 0.5 − P > `tie_margin`,
# and a **tie** otherwise, |P − 0.5| ≤ `tie_margin` (the judge's configuration sets the margin,
# `JUDGE.tie_margin`; an exact 0.5 is a tie even at margin 0). A pair that is not a tie is **decided**; the
# **tie rate** is the share of pairs that are ties. Read as a verdict on the *answers*, it is A, B or a tie.
# *Agreement*: among the pairs decided in the order shown, the share whose verdict is gold's (a tie is no
# vote). The **swap test**: ask it about every pair in *both* orders; P(first) is the mean of the
# probabilities it gives the answer shown first, over both orders of every pair, and the **position bias**
# is P(first) − P(second) = 2·P(first) − 1 (0 for a judge that ignores the order, 1 for one that always
# picks the first); the **flip rate** is the share of pairs whose verdict on the answers (A, B or a tie)
# changes when the two answers swap places (0 for a judge that ignores the order; 1 for one that always
# picks the first, which says A in one order and B in the other). **Length bias**: among the decided pairs
# whose answers differ in length, agreement on those whose longer answer is right minus agreement on those
# whose longer answer is wrong; the counts of both kinds of pair are printed beside it, since a few pairs
# make a coarse rate.
#
# **Predict first.** The trained judge's position bias on held-out pairs is …

# %%
biased = fit_judge(policy, task, JUDGE, seed=SEED, data=train_pairs, heldout=heldout_pairs)
jm, rules = biased["metrics"], biased["rules"]
bias_answer = ("above 0.5" if jm["position_bias"] > 0.5 else "between 0.1 and 0.5" if jm["position_bias"] > 0.1
               else "about 0")
display(predict("The trained judge's position bias P(first) − P(second) is …",
                ["about 0", "between 0.1 and 0.5", "above 0.5"], bias_answer,
                f"In this run {jm['position_bias']:+.2f} (the rules themselves: {rules['position_bias']:+.2f})."))

# %%
def describe(name, m):
    print(f"{name}: agreement with gold on the {m['decided']} pairs it decides {m['agreement']:.1%} (carry prompts "
          f"{m['agreement_carry']:.1%}, no carry {m['agreement_no_carry']:.1%}; ties {m['ties']:.1%}); swap test "
          f"P(first) {m['p_first']:.1%} → position bias {m['position_bias']:+.2f}, verdict flips with the order on "
          f"{m['flip_rate']:.1%} of pairs; length: agreement {m['agreement_longer_right']:.0%} where the longer "
          f"answer is right ({m['n_longer_right']} pairs), {m['agreement_longer_wrong']:.0%} where it is wrong "
          f"({m['n_longer_wrong']}) → length bias {m['length_bias']:+.2f}")


describe("the constitution itself", rules)
describe("the trained judge     ", jm)
print(f"\n{jm['pairs']} held-out pairs; the judge trained {len(biased['log'])} steps")

# %%
fig, ax = plt.subplots(figsize=(7, 3))
names = ["agreement", "position_bias", "length_bias"]
width = 0.38
ax.bar([i - width / 2 for i in range(3)], [rules[k] for k in names], width, label="the constitution (rules)")
ax.bar([i + width / 2 for i in range(3)], [jm[k] for k in names], width, label="the trained judge")
ax.axhline(0, c="k", lw=0.6)
ax.set_xticks(range(3), ["agreement with gold", "position bias", "length bias"])
ax.set(title="a judge measured against gold (held-out pairs)", ylim=(-0.2, 1.05))
ax.legend(fontsize=8)
plt.show()

# %% [markdown]
# ## 4. A reward model on the judge's labels, and RL against it
#
# Fresh pairs, labelled by the judge (it abstains where P is within `tie_margin` of 0.5), train a
# Bradley–Terry reward model (the probability that A beats B is σ(r(A) − r(B)), fitted to the labels).
# Then PPO — the policy-gradient RL algorithm with a learnt value baseline that [the RLHF
# route](12_the_rlhf_route.ipynb) builds — optimises that reward model. Its score is the **proxy**: what RL
# sees and climbs. The strict checker's score on the same samples is **gold**: what we want, which RL
# never sees. Both are logged each step, with the mean answer length. Per-step means are noisy, so the
# curves are read as `WINDOW`-step moving means at the start and the end, and gold's **shape** is named
# from them: *rises*, *falls*, *rises then falls* (up, then down from its peak, by more than 3 points
# each) or *flat*. Over-optimisation is the proxy rising while gold does not.
#
# **Predict first.** During RL against this reward model, gold accuracy …

# %%
def run_feedback(judge_fn):
    return feedback_run(policy, task, judge_fn, RM_CFG, PPO_CFG, WINDOW, tie_margin=JUDGE.tie_margin, seed=SEED)


rm_biased, rows_biased, curve_biased = run_feedback(biased["judge_fn"])
shape_answer = {"rises then falls": "rises, then falls", "falls": "falls", "rises": "rises", "flat": "stays flat"}
display(predict("RL against the reward model trained on the judge's labels: gold accuracy …",
                ["rises", "rises, then falls", "falls", "stays flat"], shape_answer[curve_biased["shape"]],
                f"In this run gold went {curve_biased['gold_start']:.1%} → {curve_biased['gold_end']:.1%} while the "
                f"proxy went {curve_biased['proxy_start']:+.2f} → {curve_biased['proxy_end']:+.2f}."))

# %%
def report(name, rm, rows, c):
    print(f"{name}: reward model on {rm['train_pairs']} judge-labelled pairs ({rm['judge_wrong']:.1%} of the labels "
          f"disagree with gold; the judge abstained on {rm['abstained']:.1%}); held-out agreement with gold "
          f"{rm['heldout_gold_accuracy']:.1%}; it prefers the longer answer on {rm['rm_agreement_longer_right']:.0%} "
          f"of the pairs where that is right ({rm['rm_n_longer_right']} pairs) and agrees with gold on "
          f"{rm['rm_agreement_longer_wrong']:.0%} where the longer is wrong ({rm['rm_n_longer_wrong']} pairs): length "
          f"bias {rm['rm_length_bias']:+.2f}")
    print(f"  RL ({len(rows)} PPO steps, {WINDOW}-step moving means): proxy {c['proxy_start']:+.2f} → "
          f"{c['proxy_end']:+.2f}; gold {c['gold_start']:.1%} → {c['gold_end']:.1%} ({c['shape']}); answer length "
          f"{rows[0]['length']:.2f} → {rows[-1]['length']:.2f} tokens")


report("biased judge", rm_biased, rows_biased, curve_biased)

# %% [markdown]
# The reward model can only learn what the labels carry. On the carry error the labels are the
# position rule's coin flips, so the reward model has nothing to learn there; what it can learn is
# the last digit and the length rule (the line above measures the length rule, and its agreement with
# gold says how little that adds up to). RL then climbs the proxy wherever the reward model is wrong — the
# gold curve above says what that cost in this run.
#
# ## 5. One change to the principles: drop "prefer the answer shown first"
#
# Without the position rule, a pair no principle decides is a **tie** (target 0.5). RLAIF does the same in another way:
# it asks the judge in both orders and averages.
#
# **Predict first.** Trained on the new constitution, the judge's position bias will be …, and its
# agreement with gold will …

# %%
fixed = fit_judge(policy, task, dataclasses.replace(JUDGE, principles=UNBIASED_POSITION), seed=SEED,
                  data=train_pairs, heldout=heldout_pairs)
fm = fixed["metrics"]
gone = abs(fm["position_bias"]) < 0.1
display(predict("Without the position rule, the judge's position bias is …", ["about 0", "about the same", "larger"],
                "about 0" if gone else ("larger" if fm["position_bias"] > jm["position_bias"] else "about the same"),
                f"In this run {jm['position_bias']:+.2f} → {fm['position_bias']:+.2f}; agreement with gold "
                f"{jm['agreement']:.1%} → {fm['agreement']:.1%}."))

# %%
print("The new constitution:\n" + constitution_text(UNBIASED_POSITION) + "\n")
describe("the constitution itself", fixed["rules"])
describe("the trained judge     ", fm)
print(f"\nposition bias of the trained judge: {jm['position_bias']:+.2f} with the position rule, "
      f"{fm['position_bias']:+.2f} without it: {'gone' if gone else 'not gone'} (|bias| < 0.1); length bias "
      f"{jm['length_bias']:+.2f} → {fm['length_bias']:+.2f}: the length rule is still there")

# %%
rm_fixed, rows_fixed, curve_fixed = run_feedback(fixed["judge_fn"])
_gold_moved = rows_fixed[-1]["gold"] - rows_fixed[0]["gold"]
display(predict("RL against the reward model trained on the judge without 'first': the policy's gold accuracy …",
                ["rises", "falls or stays where it was"],
                "rises" if _gold_moved > 0 else "falls or stays where it was",
                f"Measured: gold moved {100 * _gold_moved:+.1f} points over the PPO steps. Removing a bias adds no "
                "information the principles lack: they still cannot see the carry."))

# %%
report("biased judge ", rm_biased, rows_biased, curve_biased)
report("without 'first'", rm_fixed, rows_fixed, curve_fixed)
fig, axes = plt.subplots(1, 3, figsize=(10, 3))
for rows, name in ((rows_biased, "with 'first'"), (rows_fixed, "without 'first'")):
    for ax, key in zip(axes, ("proxy", "gold", "length")):
        ax.plot([r["step"] for r in rows], [r[key] for r in rows], "o-", ms=3, label=name)
for ax, title in zip(axes, ("proxy (reward model)", "gold (strict) on the same samples", "answer length (tokens)")):
    ax.set(xlabel="PPO step", title=title)
axes[0].legend(fontsize=8)
fig.tight_layout()
plt.show()
print(f"in this run (seed {SEED}), the reward model's held-out agreement with gold: "
      f"{rm_biased['heldout_gold_accuracy']:.1%} → {rm_fixed['heldout_gold_accuracy']:.1%}; section 6 reads it over "
      "seeds")

# %% [markdown]
# ## 6. Over seeds: what holds
#
# A bias measured on one seed is a claim about that seed. Over seeds, read it as [notebook
# 14](14_rl_as_a_system.ipynb) reads a gain (*The seed spread*): per seed, paired (the same seed runs both
# constitutions), by the course's one rule (`course_lib.run.verdicts`: at least three seeds, the paired change
# non-zero with the same sign on every seed, its median above a stated margin). A change **removed** a bias
# when the bias fell beyond the seed spread by that rule *and* what is left is within a threshold of 0 (here
# |position bias| < 0.1); this section states its verdicts with that rule (margin 0) and counts the seeds
# below 0.1.
#
# **Predict first.** Over three seeds, each with its own SFT start: does dropping "first" remove the
# judge's position bias on every seed, and does it raise the judge's agreement with gold on every seed?

# %%
variants = list(CONSTITUTIONS)
with_first, without = variants
seed_rows = [seed_summary(SEED, with_first, biased, rm_biased, rows_biased, curve_biased),
             seed_summary(SEED, without, fixed, rm_fixed, rows_fixed, curve_fixed)]
seed_rows += [row for r in others.results() for row in r["result"]]  # waits for seeds 1 and 2
by = {(r["variant"], r["seed"]): r for r in seed_rows}
BIAS = {"scale": 1.0, "unit": "", "digits": 2}  # biases and proxies are printed as numbers, not points


def over(key, a, b, name_a, name_b, end="", **fmt):
    """Paired over seeds: ``key`` of variant a minus ``end`` (default: ``key``) of variant b."""
    return paired([by[a, s][key] for s in SEEDS], [by[b, s][end or key] for s in SEEDS], name_a=name_a,
                  name_b=name_b, seeds=SEEDS, **fmt)


verdicts = {
    "position": over("judge_position_bias", with_first, without, "the judge's position bias with 'first'", "without",
                     **BIAS),
    "agreement": over("judge_agreement", without, with_first, "the judge's agreement with gold without 'first'",
                      "with"),
    "rm_gold": over("rm_heldout_gold_accuracy", without, with_first,
                    "the reward model's held-out agreement with gold, judge without 'first'", "with"),
    "proxy": over("ppo_proxy_end", with_first, with_first, "PPO's proxy at the end (judge with 'first')",
                  "the proxy at the start", end="ppo_proxy_start", **BIAS),
    "gold": over("ppo_gold_end", with_first, with_first, "gold at the end (judge with 'first')", "gold at the start",
                 end="ppo_gold_start"),
}


def every_seed(v):
    return v.beyond and v.median > 0


removed = ("removes the position bias on every seed" if every_seed(verdicts["position"])
           else "does not remove it on every seed")
raised = ("raises the judge's agreement on every seed" if every_seed(verdicts["agreement"])
          else "does not raise the judge's agreement on every seed")
display(predict("Dropping 'first', over three seeds, …",
                [f"{a}; {b}" for a in ("removes the position bias on every seed", "does not remove it on every seed")
                 for b in ("raises the judge's agreement on every seed",
                           "does not raise the judge's agreement on every seed")],
                f"{removed}; {raised}",
                f"{verdicts['position'].sentence()}. {verdicts['agreement'].sentence()}."))

# %%
shares_first = [by[with_first, s]["decided_by"].get("first", 0.0) for s in SEEDS]
top_first = sum(by[with_first, s]["top_principle"] == "first" for s in SEEDS)
gone_on = sum(abs(by[without, s]["judge_position_bias"]) < 0.1 for s in SEEDS)
print(f"'first' decides the most training pairs on {top_first} of {len(SEEDS)} seeds "
      f"(its share per seed: {' / '.join(f'{x:.0%}' for x in shares_first)})")
print(f"without 'first', the judge's |position bias| < 0.1 on {gone_on} of {len(SEEDS)} seeds")
for name in ("position", "agreement", "rm_gold", "proxy", "gold"):
    print("- " + verdicts[name].sentence())
print("the judge's length bias with 'first', per seed: "
      + " / ".join(f"{by[with_first, s]['judge_length_bias']:+.2f} (from {by[with_first, s]['judge_n_longer_right']} "
                   f"and {by[with_first, s]['judge_n_longer_wrong']} pairs)" for s in SEEDS))
print("the reward model's length bias (judge with 'first'), per seed: "
      + " / ".join(f"{by[with_first, s]['rm_length_bias']:+.2f}" for s in SEEDS))

# %% [markdown]
# Explore: write your own constitution (principle names, in order, separated by commas) and see what the
# rules themselves — no training — would measure on the held-out pairs.

# %%
constitution_box = widgets.Text(value=", ".join(BIASED), description="principles", layout={"width": "420px"})


def show_constitution(text):
    names = [name.strip() for name in text.split(",") if name.strip()]
    try:
        describe("these rules", measure_judge(principles_judge(task, names), task, heldout_pairs))
    except ValueError as err:
        print(err)


display(widgets.VBox([constitution_box, widgets.interactive_output(show_constitution, {"text": constitution_box})]))

# %% [markdown]
# Removing the position rule removes the position bias — the swap test says so, in numbers. It does not
# make the judge see the carry error: those pairs became ties, and the reward model gets no labels
# there instead of coin flips. Only a principle that checks more of the sum can add that information.
#
# ## Your turn
#
# Put `"correct"` ("Prefer the answer that is exactly the sum.") first in the constitution and measure
# the constitution itself on the held-out pairs (no training needed: `principles_judge(task, principles)`
# is the rules as a judge, and `measure_judge` measures it, as the explorer above does).
# What are its agreement, position bias and length bias, and why?

# %%
# your code here

# %% [markdown]
# <details><summary>Answer</summary>
#
# `measure_judge(principles_judge(task, ("correct", *BIASED)), task, heldout_pairs)`: agreement 100%,
# position bias 0, length bias 0. Every pair holds one correct and one wrong answer, so the first
# principle always decides, and the others are never reached. That is the gold rule itself: a judge
# that can check everything has no room for biases — the biases live in the pairs its principles cannot
# decide.
# </details>
#
# ## Check yourself
#
# 1. Why must the swap test judge each pair in both orders, rather than count how often the judge picks
#    A over a set of pairs shown once?
#    <details><summary>Answer</summary>
#    Shown once, "A wins" mixes the order with the answers: if the better answer happened to be shown
#    first more often, an unbiased judge would look biased. In both orders every answer sits first once,
#    so a judge that ignores the order prefers the first exactly half the time: P(first) − P(second) = 0.
#    </details>
# 2. The judge without the position rule has no position bias. Why should its agreement with gold not be
#    expected to rise (section 6 printed what it did over three seeds)?
#    <details><summary>Answer</summary>
#    The pairs the position rule decided are pairs no other principle can tell apart; without it they are
#    ties, and a tie's verdict is still about 50% right. Removing a bias removes a systematic error; it
#    does not add the information the principles lack (here: the carry).
#    </details>
# 3. Real AI feedback has no gold rule. How would you detect this judge's position bias there?
#    <details><summary>Answer</summary>
#    The swap test needs no gold: ask in both orders and count how often the verdict flips, or compute
#    P(first) − P(second). Length bias needs a reference (a small set of human or verified labels), or a
#    controlled test: the same answer padded longer should not win.
#    </details>

# %%
print(clock.report())

# %% [markdown]
# **Graded: systems14 Q8** covers this notebook: a judge's agreement with gold on decided pairs, its tie
# rate, position bias by the swap test, flip rate and length bias, and whether a constitution change
# removed a bias, judged across seeds. Do it now.
