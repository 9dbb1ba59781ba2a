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
# # 09 · The GRPO family on a tiny GPT, and its honest control
#
# *Pointers to the lecture: §9 (group baselines, the clipped update), §11 (generation vs update
# time), §12 (what the variants fix), §15 (the checker is the reward). Everything needed here is
# explained here.*
#
# [Tiny GPT: SFT then DPO](08_tiny_gpt_dpo.ipynb) trained from fixed pairs. Here the policy writes its own training
# data every step: B prompts × G completions, scored by the exact-answer checker, turned into group-relative
# advantages with `course_lib.formulas.advantages`, and into an update with `course_lib.formulas.policy_loss` —
# the functions [Group baselines](04_group_baselines.ipynb) checked by hand. After this notebook you will be able to
#
# 1. run one GRPO group by hand and check it against the library;
# 2. read a GRPO dashboard: reward, held-out accuracy, length, zero-variance rate, entropy, clip;
# 3. say which advantage change AdamW cancels in exact arithmetic (a constant scale) and which it
#    never does (a per-group scale), and read from runs whether the constant survived on a real one;
# 4. compare GRPO with its honest control — fine-tuning on the policy's own checker-approved samples
#    (RFT) — and say from measurements what GRPO's baseline and negative samples add;
# 5. read DAPO's options one change at a time, with the same optimiser steps, from the benchmark
#    table, and run DAPO with all four mechanisms and Dr. GRPO with its constant unit live;
# 6. put the measured generation-vs-update split beside the lecture's time model, and explain the gap.
#
# Budget: the last cell prints how long this run took. `COURSE_FAST=1` (CI, the quick check) runs the
# same task, model and SFT starts with fewer GRPO steps; every sentence that quotes a number is
# computed from what is shown.
#
# **Seeds.** One run is one draw. This notebook walks through seed 0 in the kernel while seeds 1 and 2
# run the same RL runs in background processes (`course_lib.run.seeds`, one CPU thread each), each from its
# own SFT start. The reveals say what happened *in this run* (seed 0); section 8 states each verdict
# over the three seeds: per-seed numbers, the median and range of the paired difference, "on k of n
# seeds", and "beyond the seed spread" only when every seed agrees (`course_lib.run.verdicts`).

# %%
import copy
import dataclasses
import functools
import os
import sys

import matplotlib.pyplot as plt
import torch
from IPython.display import display

from course_lib.formulas.advantages import dr_grpo_advantages, grpo_advantages, rloo_advantages
from course_lib.formulas.budgets import rollout_generation_seconds, update_seconds
from course_lib.lesson.explore import predict
from course_lib.lesson.stopwatch import Stopwatch
from course_lib.run.dashboard import dashboard
from course_lib.run.passport import format_passport, passport
from course_lib.run.seeds import in_background, rl_from_sft, variants_from_start
from course_lib.run.starts import sft_start
from course_lib.run.verdicts import committed_benchmarks, evaluation_noise, paired
from course_lib.tinygpt.evaluation import evaluate, sample_completions
from course_lib.tinygpt.model import n_params
from course_lib.tinygpt.rollout import generate
from course_lib.trainers.configs import get_config

FAST = os.environ.get("COURSE_FAST") == "1"  # the same lesson with fewer GRPO steps (CI's quick check)
clock = Stopwatch("COURSE_FAST=1" if FAST else "full")
cfg = get_config("cpu")
RL_STEPS = 30 if FAST else 150  # the full budget is the benchmark's (section 6)
cfg.grpo = dataclasses.replace(cfg.grpo, steps=RL_STEPS, unit="sequence_mean", eval_every=10 if FAST else 25)
SEEDS = (0, 1, 2)
SEED = SEEDS[0]  # the seed this notebook walks through; the others run in the background
_ = torch.manual_seed(SEED)
# every RL run below, by name: (trainer, the GRPO options it changes); section 6 explains DAPO's
spare = cfg.grpo.max_completion_length - (cfg.task.digits + 2)  # C: every token past the longest right answer
DAPO = dict(num_iterations=2, steps=RL_STEPS // 2, epsilon_high=0.28, zero_variance="resample", unit="token_mean",
            soft_punish_cache=spare)
VARIANTS = {"GRPO": ("grpo", {}), "RLOO": ("grpo", {"advantage": "rloo"}),
            "Dr. GRPO adv.": ("grpo", {"advantage": "dr_grpo"}), "RFT": ("rft", {}), "DAPO": ("grpo", DAPO),
            "Dr. GRPO": ("grpo", {"advantage": "dr_grpo", "unit": "constant"})}
others = in_background(functools.partial(variants_from_start, cfg=cfg, variants=VARIANTS), SEEDS[1:])

# %% [markdown]
# ## 1. The starting point: an SFT policy that learned its teacher's mistake
#
# Same task as [Tiny GPT: SFT then DPO](08_tiny_gpt_dpo.ipynb): addition, demonstrations from a teacher who forgets the
# ones carry, and a checker that knows the truth. RL can draw as many fresh prompts as it likes — only the
# *checking* is needed, never a new label.

# %%
# trained once per machine (course_lib.run.starts), then read from disk
task, model, _ = sft_start(cfg, seed=SEED, device=DEVICE)
print(f"{n_params(model):,} parameters, {cfg.task.digits}-digit addition, {cfg.sft.steps} SFT steps")
baseline = evaluate(model, task)
sft_weights = copy.deepcopy(model.state_dict())
print(f"SFT held-out exact match {baseline['accuracy']:.1%} "
      f"(no carry {baseline['accuracy_no_carry']:.1%}, carry {baseline['accuracy_carry']:.1%})")

# %% [markdown]
# ## 2. One group, by hand
#
# Sample G completions for one prompt, score them, and compute the GRPO advantage
# (r − mean)/std with the population std — then check against `grpo_advantages`. A group whose G
# answers all score alike has std 0 and no advantage to compute, so the cell takes the first carry
# prompt (in held-out order) whose group is mixed, trying at most 20.

# %%
G = cfg.grpo.num_generations
carry_pairs = [p for p in task.heldout_pairs if task.ones_carry(*p)] or task.heldout_pairs
_ = torch.manual_seed(SEED)
for pair in carry_pairs[:20]:
    roll = generate(model, task.encode_prompts([pair], DEVICE), task.tokenizer,
                    max_completion_length=cfg.grpo.max_completion_length, num_generations=G)
    rewards = torch.tensor([task.strict_reward(pair, c) for c in roll.completions])
    if rewards.std() > 0:
        break
for c, r in zip(roll.completions, rewards):
    text, ended = task.completion_text(c)
    print(f"{task.prompt_text(*pair)}{text:<6} reward {r:.0f}{'' if ended else '  (truncated)'}")
mean, std = rewards.mean(), rewards.std(correction=0)
if std > 0:
    by_hand = (rewards - mean) / std
    print("by hand  :", [round(x, 3) for x in by_hand.tolist()])
    print("library  :", [round(x, 3) for x in grpo_advantages(rewards).tolist()])
    print("RLOO     :", [round(x, 3) for x in rloo_advantages(rewards).tolist()])
    print("Dr. GRPO :", [round(x, 3) for x in dr_grpo_advantages(rewards).tolist()])
else:
    print("a zero-variance group: every answer scored the same, so there is no relative signal;"
          " GRPO gives every completion advantage 0")

# %% [markdown]
# ## 3. GRPO, live
#
# B prompts × G completions per step, β = 0 (no KL term in the objective, as in DAPO; a frozen copy of the SFT policy
# is kept only to measure the KL the dashboard shows), μ = 1 inner epoch, and the published GRPO objective: each
# completion's per-token terms are averaged over its own tokens, then over completions (`unit="sequence_mean"`). Before
# training, the run prints its passport: the choices a report must disclose for anyone to interpret the result.

# %%
print(format_passport(passport(cfg, "grpo", reference=True)))


def rl_run(name):
    """The run ``VARIANTS[name]`` from the SFT weights, same seed and prompts; returns final metrics and the log.
    (GRPO keeps the SFT weights as reference only to log the KL: β = 0 adds no term.)"""
    trainer, overrides = VARIANTS[name]
    return rl_from_sft(model, task, dataclasses.replace(cfg.grpo, **overrides), sft_weights=sft_weights, seed=SEED,
                       trainer=trainer, name=name)


runs, logs = {}, {}
runs["GRPO"], logs["GRPO"] = rl_run("GRPO")
zv = [r["zero_variance_rate"] for r in logs["GRPO"]]
k = max(1, len(zv) // 4)
zv_first, zv_last = sum(zv[:k]) / k, sum(zv[-k:]) / k
zv_answer = ("it rises" if zv_last > zv_first + 0.02 else "it falls" if zv_last < zv_first - 0.02
             else "it stays about the same")

# %% [markdown]
# **Predict first.** The *zero-variance share* is the fraction of groups whose G answers all scored
# alike (all right or all wrong): those groups carry no relative signal.

# %%
display(predict("As GRPO trains, the share of zero-variance groups …",
                ["it rises", "it falls", "it stays about the same"], zv_answer,
                f"In this run: {zv_first:.2f} over the first {k} steps, {zv_last:.2f} over the last {k}. "
                "A prompt solved with probability p gives a zero-variance group with probability p^G + (1 − p)^G, "
                "which grows as p approaches 1."))

# %%
grpo_gain = runs["GRPO"]["accuracy"] - baseline["accuracy"]
print(f"GRPO: {baseline['accuracy']:.1%} → {runs['GRPO']['accuracy']:.1%} in {runs['GRPO']['rl_seconds']:.0f} s "
      f"({RL_STEPS} steps): " + (f"a gain of {100 * grpo_gain:.1f} points over SFT" if grpo_gain > 0
                                 else f"no gain over SFT ({100 * grpo_gain:+.1f} points)"))
for line in sample_completions(model, task, task.heldout_pairs[:4], n=2,
                               max_completion_length=cfg.grpo.max_completion_length):
    print(line)

# %%
fig = dashboard(logs["GRPO"], title="GRPO on the tiny GPT", baseline_accuracy=baseline["accuracy"],
                panels=["reward on the policy's samples", "held-out accuracy (greedy)", "completion length",
                        "wasted samples", "policy entropy", "drift from the reference", "PPO clip"])
plt.show()
print(f"zero-variance rate: {zv_first:.2f} over the first {k} steps, {zv_last:.2f} over the last {k}")
entropy = [r["entropy"] for r in logs["GRPO"]]
print(f"policy entropy:     {sum(entropy[:k]) / k:.3f} over the first {k} steps, {sum(entropy[-k:]) / k:.3f} over the "
      f"last {k} (nats per token)")

# %% [markdown]
# Read it panel by panel. The **reward** is measured on the policy's own samples (temperature 1);
# **held-out accuracy** is greedy decoding on prompts never trained on — the number that matters.
# The **zero-variance rate** is the share of groups where all G answers scored the same: those
# groups have zero advantage and teach nothing. For a prompt the policy solves with probability p,
# that happens with probability p^G + (1 − p)^G, which grows as p approaches 1: the printed line
# above says what it did in this run. **Entropy** (of the policy: −Σ π log π over the next token,
# averaged over a completion) falls as the policy sharpens; the second printed line says whether it
# did in this run. **KL** to the SFT reference
# starts at 0 (the policy *is* the reference) and moves away from it: at β = 0 nothing pulls it
# back ([The KL term](10_the_kl_term.ipynb) sweeps β). **Clip** stays at 0:
# with μ = 1 the ratio π_θ/π_old is exactly 1 on the only pass, so PPO's clip never acts.
#
# ## 4. A constant advantage scale and a per-group one, under AdamW on the tiny GPT
#
# RLOO's advantage is Dr. GRPO's multiplied by the constant G/(G − 1); GRPO divides each group by its
# own std, a factor that changes from group to group. On an exact run,
# [Group baselines, section 3](04_group_baselines.ipynb) showed that AdamW cancels a constant factor
# (within two conditions: β = 0, and no gradient clip that acts on some steps only) and not a per-group one. Here the
# same comparison runs on the tiny GPT, same averaging unit, same seed.

# %%
runs["RLOO"], logs["RLOO"] = rl_run("RLOO")
runs["Dr. GRPO adv."], logs["Dr. GRPO adv."] = rl_run("Dr. GRPO adv.")
curve = {name: torch.tensor([r["reward_mean"] for r in logs[name]]) for name in ("GRPO", "RLOO", "Dr. GRPO adv.")}
d_const = float((curve["RLOO"] - curve["Dr. GRPO adv."]).abs().max())
d_group = float((curve["GRPO"] - curve["Dr. GRPO adv."]).abs().max())
display(predict("RLOO and Dr. GRPO advantages (a constant factor G/(G − 1) apart), same unit and seed, AdamW: "
                "their per-step reward curves are …",
                ["the same at every step", "different"], "the same at every step" if d_const == 0 else "different",
                f"In this run the largest per-step difference is {d_const:.4f}; the next cell says why."))

# %%
print(f"largest per-step difference in mean reward over {len(curve['GRPO'])} steps:")
print(f"  RLOO vs Dr. GRPO (constant factor G/(G−1)): {d_const:.4f}")
print(f"  GRPO vs Dr. GRPO (per-group 1/std):         {d_group:.4f}")
print("RLOO and Dr. GRPO: " + ("identical at every step: AdamW cancelled the constant" if d_const == 0 else
      f"they drift apart by up to {d_const:.3f} — gradient clipping (max norm 1) or Adam's ε broke exact invariance"))
print("GRPO vs Dr. GRPO: " + ("identical reward curves in this short run: the per-group scale changed no sample"
                               if d_group == 0 else
                               "different: dividing each group by its own std reweights groups, which no optimiser "
                               "undoes"))

# %% [markdown]
# In exact arithmetic, what survives Adam is the per-group std
# ([Group baselines, section 3](04_group_baselines.ipynb)): a group with one success in eight (std 0.33) is weighted
# about 1.5× as much as a half-right group (std 0.5) — a difficulty reweighting. On a real run the constant can survive
# too: the printed lines above say whether RLOO and Dr. GRPO stayed together in this run. A clip on the gradient's norm
# acts on some steps and not others, and once one sampled token differs the two runs draw different samples, so from
# there on the gap also holds sampling noise. Compare the two gaps above before reading either as an effect of the
# advantage.
#
# ## 5. The honest control: fine-tuning on the policy's own approved samples (RFT)
#
# Section 3 printed what GRPO gained over SFT in this run. But GRPO also *samples* from the policy and *checks* with a
# checker that knows the truth — information SFT on the flawed teacher never had. **Rejection-sampling
# fine-tuning** (RFT) uses exactly that information and nothing else: the same prompts, samples,
# checker, optimiser and number of steps, but each step is plain SFT on the completions the checker
# approved. As a policy gradient, RFT is GRPO with advantage 1 for approved and 0 for rejected
# completions: no baseline and no negative samples. The difference between the two is what GRPO's
# advantage buys.
#
# **Predict first**, before the table: where does RFT end against GRPO's held-out accuracy?

# %%
runs["RFT"], logs["RFT"] = rl_run("RFT")
gap = runs["GRPO"]["accuracy"] - runs["RFT"]["accuracy"]
rft_answer = ("within 5 points of GRPO" if abs(gap) <= 0.05 else
              "more than 5 points below GRPO" if gap > 0 else "more than 5 points above GRPO")
display(predict("Same prompts, samples, checker and steps; RFT's held-out accuracy ends …",
                ["more than 5 points below GRPO", "within 5 points of GRPO", "more than 5 points above GRPO"],
                rft_answer,
                f"This seed: GRPO − RFT = {100 * gap:+.1f} points (one draw; section 8 reads three seeds)."))

# %%
print(f"{'run':14} {'held-out':>9} {'carry':>7} {'no carry':>9}")
print(f"{'SFT':14} {baseline['accuracy']:9.1%} {baseline['accuracy_carry']:7.1%} {baseline['accuracy_no_carry']:9.1%}")
for name in ("GRPO", "RFT"):
    r = runs[name]
    print(f"{name:14} {r['accuracy']:9.1%} {r['accuracy_carry']:7.1%} {r['accuracy_no_carry']:9.1%}")
print(f"\nthis seed: GRPO − RFT = {100 * gap:+.1f} points; SFT → GRPO = "
      f"{100 * (runs['GRPO']['accuracy'] - baseline['accuracy']):+.1f} points")

# %%
fig = dashboard(logs["GRPO"], runs={"GRPO": logs["GRPO"], "RFT": logs["RFT"]}, title="GRPO and its RFT control",
                baseline_accuracy=baseline["accuracy"],
                panels=["reward on the policy's samples", "held-out accuracy (greedy)", "policy entropy"])
plt.show()

# %% [markdown]
# One seed is one draw. The benchmark (`make bench`, `benchmarks/tinygpt_grpo_family.py`) runs
# every row at seeds 0, 1, 2 from the `cpu` config with 150 optimiser steps, in two settings: the
# strong start above, and a **weak start** (SFT stopped at 300 steps, so fewer of the policy's
# samples are right: the table's "SFT start" row says how many, per seed — a median can hide a seed
# that starts near zero, which the table flags as degenerate) — with the binary checker and with **partial credit**
# (the share of digit places that are right,
# `reward="partial"`). Partial credit is where a baseline should matter: without one
# ("reward-weighted partial": SFT weighted by the reward), a half-right answer such as the teacher's
# `55` for 65 is still pushed *up*; with GRPO's group mean subtracted, it is pushed down whenever
# its group did better. The next cell prints the measured table and reads it.

# %%
bench_dir = committed_benchmarks("grpo_family")  # the committed benchmark (`make bench`); None on Colab
if bench_dir:
    sys.path.insert(0, str(bench_dir))
    from tables import family_table, load, verdicts

    bench = load("grpo_family", bench_dir / "results")
    for setting in ("main", "weak"):
        if any(r["setting"] == setting for r in bench["runs"]):
            print(f"setting {setting!r}:\n{family_table(bench, setting)}")
    print("\n".join(verdicts(bench)) or "no comparison measured yet")
else:
    print("benchmarks/results/grpo_family.json is not here (e.g. on Colab): see the tables in docs/results.md")

# %% [markdown]
# Read the verdict lines, not the headline: each compares two rows seed by seed first (same SFT
# start, same prompts), then without a degenerate start; a difference of medians smaller than the
# spread between seeds is not a difference this benchmark can see. Where GRPO and RFT agree, the gain over SFT came
# from sampling and checking — any method that trains on the checker's verdicts gets it — not from
# GRPO's baseline and negative samples.
#
# ## 6. DAPO's options, one change at a time, then all four at once
#
# The benchmark's `main` table above has one row per change to the GRPO row, all from the same SFT
# checkpoint, the same prompts and **the same 150 optimiser steps**. It also has the two rows run
# live below, and two newer objectives beside μ = 2: GSPO
# ([Zheng et al. 2025](https://arxiv.org/abs/2507.18071)) clips one ratio per completion — the geometric mean of its
# tokens' ratios,
# `importance_sampling_level="sequence"` — instead of one per token; CISPO
# ([MiniMax 2025](https://arxiv.org/abs/2506.13585)) caps the importance *weight* at ε_max and keeps it as a constant,
# so no token loses its gradient (`loss_type="cispo"`). The one-change rows:
#
# | row | the one change | generation budget |
# |---|---|---|
# | GRPO | — (sequence mean, μ = 1, ε = 0.2, zero-variance groups kept) | 150 steps × 32 groups |
# | token mean | average over all tokens of the batch (DAPO, TRL's default) | same |
# | dynamic sampling | zero-variance groups replaced by fresh ones, ≤ 4 extra rounds per step | up to 5× (the "groups generated" column) |
# | μ = 2 | two optimiser steps per rollout | half: 75 rollouts |
# | μ = 2 + clip-higher | ε_high = 0.28 on top of μ = 2 | as μ = 2 |
#
# Clip-higher alone, at μ = 1, is missing on purpose: the ratio is exactly 1 on the only pass, so
# the clip never acts and the run is identical to GRPO's (a test checks this). Clip-higher can only
# act from the second inner epoch on, hence its row sits on top of μ = 2.
#
# **DAPO, live.** DAPO ([Yu et al. 2025](https://arxiv.org/abs/2503.14476)) is four mechanisms at
# once. Three are in the table: clip-higher, dynamic sampling, the token-level mean. The fourth is
# **overlong reward shaping**: with a length cap L_max = `max_completion_length` and a soft zone of
# C = `soft_punish_cache` tokens, a completion of |y| tokens gets 0 added to its reward up to
# L_max − C tokens, then a penalty that falls linearly to −1 at L_max (−1 beyond). A truncated
# answer is cut off with no chance of being right; the ramp tells the policy that length itself
# costs before the cliff (`course_lib.tinygpt.rewards.overlong_penalty`, TRL's
# `get_soft_overlong_punishment`). Here L_max = 6 and the longest right answer plus `<eos>` is
# 4 tokens, so C = 2: 5 tokens cost 0.5, 6 tokens cost 1. The DAPO run takes μ = 2 (so that
# clip-higher can act) and half the rollouts: the same optimiser steps as GRPO.
#
# **Dr. GRPO, live.** Dr. GRPO ([Liu et al. 2025](https://arxiv.org/abs/2503.20783)) is two changes:
# no division by the group's std (`advantage="dr_grpo"`, run in section 4 with the sequence mean)
# and a **constant denominator**: every completion's token terms summed and divided by
# rows × L_max (`unit="constant"`), so no completion's tokens weigh more because it is short.
#
# **Predict first**, in the two questions below the runs: (1) will DAPO end above or below GRPO's
# held-out accuracy here? (2) how much will overlong shaping cost the average completion — how long
# are the SFT policy's answers? Think also about (3): will the constant unit move Dr. GRPO's reward
# curve away from the sequence-mean run of section 4?

# %%
runs["DAPO"], logs["DAPO"] = rl_run("DAPO")
runs["Dr. GRPO"], logs["Dr. GRPO"] = rl_run("Dr. GRPO")


def totals(name, mu=1):
    rows = logs[name]
    return {"optimiser steps": runs[name]["steps"] * mu, "groups": sum(r["groups_sampled"] for r in rows),
            "penalty": sum(r.get("overlong_penalty", 0.0) for r in rows) / len(rows),
            "truncated": sum(r["truncated_rate"] for r in rows) / len(rows),
            "failures": sum(r["verifier_failures"] for r in rows),
            "clip": sum(r["clip_fraction"] for r in rows) / len(rows)}


live = {name: totals(name, 2 if name == "DAPO" else 1) for name in ("GRPO", "DAPO", "Dr. GRPO adv.", "Dr. GRPO")}
dapo_gap = runs["DAPO"]["accuracy"] - runs["GRPO"]["accuracy"]
penalty = live["DAPO"]["penalty"]
display(predict("With the same optimiser steps, DAPO's held-out accuracy ends …",
                ["above GRPO's", "level with GRPO's", "below GRPO's"],
                "above GRPO's" if dapo_gap > 0 else "level with GRPO's" if dapo_gap == 0 else "below GRPO's",
                f"This seed: DAPO − GRPO = {100 * dapo_gap:+.1f} points; four mechanisms changed at once."))
display(predict("Overlong shaping's average cost per sampled completion in the DAPO run is …",
                ["under 0.01 reward: it almost never fires", "0.01 reward or more: it fires often"],
                "under 0.01 reward: it almost never fires" if -penalty < 0.01
                else "0.01 reward or more: it fires often",
                f"Measured: {-penalty:.4f}. The soft zone starts after the longest right answer."))

# %%
print(f"{'run':14} {'held-out':>9} {'opt. steps':>10} {'groups':>7} {'overlong':>9} {'truncated':>9} "
      f"{'verifier fail.':>14} {'clip':>6}")
for name, t in live.items():
    print(f"{name:14} {runs[name]['accuracy']:9.1%} {t['optimiser steps']:10d} {t['groups']:7d} {t['penalty']:9.4f} "
          f"{t['truncated']:9.2%} {t['failures']:14d} {t['clip']:6.3f}")
dapo_cost = live["DAPO"]["groups"] / live["GRPO"]["groups"]
print(f"\nDAPO − GRPO = {100 * dapo_gap:+.1f} points with the same {live['GRPO']['optimiser steps']} optimiser steps, "
      f"for {dapo_cost:.2f}× the generated groups")
print(f"overlong shaping: {-penalty:.4f} reward per sampled completion on average — "
      + ("it almost never fired: the policy ends its answers before the soft zone, so on this task the "
         "fourth mechanism is insurance, not a lever" if -penalty < 0.01 else
         "it fired: completions reached the soft zone often enough to cost reward"))
dr_curve = torch.tensor([r["reward_mean"] for r in logs["Dr. GRPO"]])
d_unit = float((dr_curve - curve["Dr. GRPO adv."]).abs().max())
print(f"Dr. GRPO, constant unit vs sequence mean (same advantages): largest per-step difference in mean reward "
      f"{d_unit:.4f}, held-out {runs['Dr. GRPO']['accuracy']:.1%} vs {runs['Dr. GRPO adv.']['accuracy']:.1%}")

# %%
fig = dashboard(logs["GRPO"], runs={k: logs[k] for k in ("GRPO", "DAPO", "Dr. GRPO")},
                title="GRPO, DAPO (all four mechanisms) and Dr. GRPO (both changes)",
                baseline_accuracy=baseline["accuracy"],
                panels=["reward on the policy's samples", "held-out accuracy (greedy)", "completion length",
                        "wasted samples", "verifier failures", "PPO clip"])
plt.show()

# %% [markdown]
# Read the printed lines, not the curves' shapes: one seed is one draw, and the DAPO run differs
# from GRPO in four ways at once, so a gap here does not say which mechanism made it — the
# one-change rows of the table do. The **reward** DAPO logs includes the overlong penalty (that is
# what it optimises); the **clip** column is positive only where μ = 2 gives a second pass. The
# **verifier failures** panel counts completions the checker could not read — no `<eos>`, or not
# digits — a number a production RLVR run must watch: a policy that learns to break the verifier's
# parser looks, in the reward alone, like a policy that is merely wrong. The constant unit differs
# from the sequence mean only through completion lengths: each token weighs 1/L_max instead of
# 1/|y|, so under the sequence mean a 3-token answer's tokens (two digits and `<eos>`) weigh 4/3 as
# much as a 4-token answer's, under the constant unit the same — and the overall scale 1/L_max is a
# constant AdamW cancels ([Group baselines, section 3](04_group_baselines.ipynb)). Once one sampled token differs, the
# two runs draw different samples, so the printed difference also holds sampling noise from there on.
#
# Two things the figure draws differently from the table: its x axis counts rollouts, so DAPO's
# curves end halfway (each of its rollouts gives μ = 2 optimiser steps: the same total as GRPO); and its
# **wasted samples** share counts every group DAPO sampled, including the zero-variance groups that
# dynamic sampling threw away and replaced, so it measures generation spent, not what reached the update.
#
# ## 7. Where the time goes
#
# Each metrics row records the seconds spent generating and the seconds spent updating. The
# lecture's time model ([Memory and rollout budgets](07_memory_and_rollout_budgets.ipynb)) predicts generation ≈ 39×
# the update for an 8B model writing 4,000-token answers.

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
print(f"lecture's model: generation {lecture_gen:.1f} s vs update {lecture_upd:.1f} s → ratio "
      f"{lecture_gen / lecture_upd:.1f}")

# %% [markdown]
# Our split is nowhere near 39 : 1, and nothing in GRPO fixes the ratio. Our completions have a
# handful of tokens, not 4,000, so decoding takes a handful of sequential steps; the model is so
# small that each step's cost is Python and kernel-launch overhead rather than memory bandwidth;
# and the update runs on the same CPU cores. Stretch the completions (or grow the model on a GPU)
# and generation's share climbs. The knobs of the time model — completion length, throughput,
# model size, utilisation — are the ones to change.
#
# ## 8. Over seeds: what holds
#
# Every comparison above was one seed. Seeds 1 and 2 ran the same runs in the background, each from its
# own SFT start (its own initialisation, demonstrations order and prompts).
#
# **Predict first.** On how many of the three seeds does GRPO end above its SFT start, and on how many
# above RFT?

# %%
per_seed = {SEED: {"SFT": baseline, **{name: runs[name] for name in VARIANTS}}}
curves = {SEED: {name: [r["reward_mean"] for r in logs[name]] for name in VARIANTS}}
for r in others.results():  # waits for seeds 1 and 2
    per_seed[r["seed"]] = {name: (v if name == "SFT" else v["final"]) for name, v in r["result"].items()}
    curves[r["seed"]] = {name: [row["reward_mean"] for row in r["result"][name]["rows"]] for name in VARIANTS}


def acc(name):
    return [per_seed[s][name]["accuracy"] for s in SEEDS]


NOISE = evaluation_noise(len(task.heldout_pairs))  # a gap below it is one the held-out prompts cannot see
verdicts = {"gain": paired(acc("GRPO"), acc("SFT"), name_a="GRPO", name_b="its SFT start", seeds=SEEDS, margin=NOISE),
            "rft": paired(acc("GRPO"), acc("RFT"), name_a="GRPO", name_b="RFT", seeds=SEEDS, margin=NOISE),
            "dapo": paired(acc("DAPO"), acc("GRPO"), name_a="DAPO", name_b="GRPO", seeds=SEEDS, margin=NOISE),
            "unit": paired(acc("Dr. GRPO"), acc("Dr. GRPO adv."), name_a="Dr. GRPO (constant unit)",
                           name_b="Dr. GRPO's advantage with the sequence mean", seeds=SEEDS, margin=NOISE)}
same_const = sum(curves[s]["RLOO"] == curves[s]["Dr. GRPO adv."] for s in SEEDS)
counts = [f"{k} of {len(SEEDS)}" for k in range(len(SEEDS) + 1)]
display(predict("Over three seeds, GRPO ends above its SFT start on … seeds", counts,
                f"{verdicts['gain'].k} of {len(SEEDS)}", verdicts["gain"].sentence() + "."))
display(predict("… and above RFT on … seeds", counts, f"{verdicts['rft'].k} of {len(SEEDS)}",
                verdicts["rft"].sentence() + "."))

# %%
print("held-out accuracy per seed (" + " / ".join(map(str, SEEDS)) + "):")
for name in ("SFT", *VARIANTS):
    print(f"  {name:14} " + " / ".join(f"{x:.1%}" for x in acc(name)))
for v in verdicts.values():
    print("- " + v.sentence())
print(f"- RLOO and Dr. GRPO's advantage: identical reward curves on {same_const} of {len(SEEDS)} seeds")

# %% [markdown]
# Read "beyond the seed spread" as the one claim these runs support: the difference had the same sign on
# every seed, and its median exceeded the evaluation noise (two standard errors of a difference of two
# held-out accuracies: a gap below it is one the held-out prompts cannot see). A median with a range that
# crosses zero is a difference three seeds cannot see, however large seed 0's gap looked in its section.
#
# ## Your turn
#
# 1. Run clip-higher alone: `VARIANTS["clip-higher"] = ("grpo", {"epsilon_high": 0.28})`, then
#    `run, log = rl_run("clip-higher")`, and compare `log` with `logs["GRPO"]`
#    (for instance the `reward_mean` of every step). Predict first.
#    <details><summary>Answer</summary>
#    Identical at every step: with μ = 1 the ratio is exactly 1, inside any clip interval, so ε_high
#    never enters the gradient. The clip fraction column stays 0 in both.
#    </details>
# 2. The zero-variance probability for success rate p and group size G is p^G + (1 − p)^G. Using the
#    mean reward of GRPO's last step as p, compute it and compare with that step's logged
#    `zero_variance_rate`. Why do they differ?
#    <details><summary>Answer</summary>
#    The formula assumes every prompt has the same p. Real prompts differ (carry prompts are harder),
#    and p^G + (1 − p)^G is convex in p, so mixing easy and hard prompts gives *more* zero-variance
#    groups than one average p predicts (Jensen's inequality).
#    </details>
#
# ## Check yourself
#
# 1. A zero-variance rate of 0.5: what does it mean for the batch?
#    <details><summary>Answer</summary>
#    Half the groups carry zero advantage: half the generation time buys no gradient. (The update
#    at least skips them: with no KL term their gradient is exactly zero, so `policy_step` leaves
#    their rows out of the forward and backward passes.) Dynamic sampling refills the batch with
#    informative groups — and pays for it in generation (section 6's "groups generated" column).
#    </details>
# 2. Why does the clip fraction stay 0 with μ = 1, and become positive with μ = 2?
#    <details><summary>Answer</summary>
#    With one pass, π_old is the current policy, so ρ = 1 everywhere. On the second pass the
#    parameters have moved; tokens whose ratio left [1 − ε_low, 1 + ε_high] in the advantage's
#    direction are clipped.
#    </details>
# 3. Someone reports "RLOO beat Dr. GRPO by 2 points" with the same unit, optimiser AdamW, one seed.
#    What do you say?
#    <details><summary>Answer</summary>
#    The two advantages differ by a constant factor, which AdamW cancels in exact arithmetic
#    (section 4). With the same seed and unit the runs coincide only while nothing else breaks the
#    invariance; section 4 printed whether they did in this run (a gradient clip that acts on some
#    steps, or Adam's ε, can separate them, and then sampling noise grows the gap). One seed's 2 points
#    is not evidence about the baseline: ask for several seeds, and for the same-seed gap between the
#    two curves.
#    </details>
# 4. Why do the benchmark's GSPO and CISPO rows sit on top of μ = 2, and not at μ = 1?
#    <details><summary>Answer</summary>
#    At μ = 1 every ratio is exactly 1. GSPO's sequence ratio is then 1 and its gradient,
#    A·(mean over the completion's tokens of ∇log π), is GRPO's with the sequence mean; CISPO's weight
#    min(1, ε_max) = 1 gives A·∇log π on every token, GRPO's with the token mean. They can only
#    differ from GRPO once the policy has moved away from the one that sampled: the second pass.
#    </details>
# 5. When GRPO beats SFT by many points, why is that not yet evidence for GRPO's baseline?
#    <details><summary>Answer</summary>
#    SFT never saw the checker. RFT does, with no baseline and no negative samples; only the
#    GRPO − RFT difference, measured over seeds, isolates what the advantage adds.
#    </details>

# %%
print(clock.report())
