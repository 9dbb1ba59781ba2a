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
# # 16 · Recipes: DeepSeek-R1's stages, R1-Zero, and what RL can amplify
#
# *Pointer for readers of the Module 14 lecture: §12, §15 and §16. Everything below stands on its own.*
#
# **Sources.** DeepSeek-R1 and R1-Zero: [Guo et al. 2025](https://arxiv.org/abs/2501.12948).
#
# The notebooks so far trained one method at a time, each from the same SFT policy. Real
# post-training is a **recipe**: an ordered list of stages, each starting from the policy the stage
# before it left. DeepSeek-R1 is the best-documented one. Here the whole recipe runs on the tiny GPT
# with the trainers you already know, and every stage is measured the same way.
#
# After this notebook you will be able to
#
# 1. write a recipe as a list of stages (`course_lib.run.recipes`) and read what each stage added:
#    pass@1 (the share of held-out prompts answered right), pass@8 (the share with at least one right
#    answer among 8 samples), the share of GRPO groups with no signal, the KL each stage moved;
# 2. explain why rejection-sampling fine-tuning — R1's third stage — is SFT and RL at once (the
#    boundary between them is porous), and check that its loss is the SFT loss;
# 3. predict what R1-Zero (RL with no SFT at all) does from a random initialisation, and say why;
# 4. answer "what can RL amplify?" from four starting points measured under the same RL budget: a
#    random initialisation, a base pretrained on digit text, a cold start of few demonstrations,
#    and the full SFT policy.
#
# Budget: the last cell prints how long this run took. The full budget runs the recipes at the
# `cpu` config's sizes: its r1, R1-Zero and digit-base runs are the recipes benchmark's seed 0 (the
# recipes table in docs/results.md gives each stage's CPU seconds, over three seeds). `COURSE_FAST=1` (CI, the quick
# check) runs the same stages shorter: the cold start trains 150 steps instead of 300, every GRPO start gets 20
# steps instead of 300 (RFT and the last GRPO stage a third of that, as the recipe scales them),
# the digit-text base pretrains 100 steps instead of 300, and each KL is estimated from one sample
# per held-out prompt instead of four. Its numbers are noisier; every sentence below that quotes a
# number is computed from whichever budget ran.
#
# **Seeds.** One run is one draw. This notebook walks through seed 0 in the kernel while seeds 1 and 2
# run the same recipes in background processes (`course_lib.run.seeds`, one CPU thread each), each from its
# own initialisation, data and SFT start. The reveals in sections 2–4 say what happened *in this run*
# (seed 0); section 5 states each verdict over the three seeds: per-seed numbers, the median and range
# of the paired difference, "on k of n seeds", and "beyond the seed spread" only when every seed agrees
# (`course_lib.run.verdicts`).

# %%
import dataclasses
import functools
import json
import os
import sys
import tempfile
from pathlib import Path

import matplotlib.pyplot as plt
import torch
from IPython.display import Markdown, display

from course_lib.formulas.advantages import rft_weights
from course_lib.lesson.explore import predict
from course_lib.lesson.sources import cite
from course_lib.lesson.stopwatch import Stopwatch
from course_lib.run import recipes
from course_lib.run.pipeline import build_policy
from course_lib.run.seeds import in_background, recipe_starts
from course_lib.run.starts import sft_start
from course_lib.run.verdicts import committed_benchmarks, evaluation_noise, paired
from course_lib.tinygpt.rewards import resolve_reward
from course_lib.tinygpt.rollout import collect_rollouts
from course_lib.tinygpt.runtime import load_checkpoint
from course_lib.trainers.configs import get_config
from course_lib.trainers.rft import rft_loss
from course_lib.trainers.sft import sft_loss

torch.set_num_threads(1)  # a tiny model: one thread is fastest on a shared CPU
FAST = os.environ.get("COURSE_FAST") == "1"  # the same lesson on smaller budgets (CI's quick check)
clock = Stopwatch("COURSE_FAST=1" if FAST else "full")
SEEDS = (0, 1, 2)
SEED = SEEDS[0]  # the seed this notebook walks through; the others run in the background
RL_STEPS = 20 if FAST else 300  # GRPO steps from every start (section 4 compares starts at the same budget)
PRETRAIN_STEPS = 100 if FAST else 300  # the digit-text base (section 4)
KL_SAMPLES = 1 if FAST else 4  # samples per held-out prompt for each KL
cfg = get_config("cpu")
if FAST:  # r1's cold start trains a quarter of sft.steps: 150 steps instead of 300
    cfg.sft = dataclasses.replace(cfg.sft, steps=600)
cfg.grpo = dataclasses.replace(cfg.grpo, steps=RL_STEPS)
OUT = Path(tempfile.mkdtemp(prefix="recipes-"))  # each recipe writes its stages' policies and passports here
RUN = dict(seed=SEED, device=DEVICE.type, show_progress=False, verbose=False, threads=1, kl_samples=KL_SAMPLES)
PCT = 100  # percentage points
others = in_background(functools.partial(recipe_starts, cfg=cfg, pretrain_steps=PRETRAIN_STEPS, kl_samples=KL_SAMPLES),
                       SEEDS[1:])


def stage_table(entries, names=None):
    """One line per stage: the numbers `course_lib.run.recipes` measured."""
    print(f"{'stage':24} {'pass@1':>7} {'sampled':>8} {'pass@8':>7} {'no-signal':>10} {'accepted':>9} "
          f"{'KL start':>9} {'KL first':>9} {'length':>7} {'CPU s':>6}")
    for i, e in enumerate(entries):
        name = names[i] if names else f"{e['stage']}. {e['kind']}"
        zv = f"{e['zero_variance_share']:.0%}" if e.get("zero_variance_share") is not None else "—"
        acc = f"{e['acceptance_rate']:.1%}" if e.get("acceptance_rate") is not None else "—"
        print(f"{name:24} {e['pass@1']:7.1%} {e['sampled_pass@1']:8.1%} {e['pass@8']:7.1%} {zv:>10} {acc:>9} "
              f"{e['kl_to_stage_start']:9.2f} {e['kl_to_first_policy']:9.2f} {e['completion_length']:7.2f} "
              f"{e['cpu_seconds']:6.1f}")


# %% [markdown]
# ## 1. A recipe is a list of stages
#
# DeepSeek-R1 ([Guo et al. 2025](https://arxiv.org/abs/2501.12948)) was trained in four stages, each from the last
# one's policy:
#
# 1. **cold start**: SFT on a few thousand long, readable demonstrations;
# 2. **reasoning RL**: GRPO with verifiable rewards (a checker, as in [the GRPO notebook](09_tiny_gpt_grpo.ipynb));
# 3. **rejection sampling and SFT**: sample many answers from the RL policy, keep the ones a checker
#    approves, fine-tune on them (with other SFT data);
# 4. **RL again**, for all scenarios (reasoning, plus helpfulness and harmlessness rewards).
#
# **R1-Zero** is the same RL with no SFT before it: straight from the pretrained base model.
#
# `course_lib.run.recipes` writes a recipe as a list of stages, each a trainer the course already has
# (`sft`, `grpo`, `rft`, `dpo`, `kto`, `ppo`, and `pretrain`, met in section 4), with its own
# overrides. The named recipe `r1` scales R1's stages to the tiny GPT: a cold start on a tenth of the
# demonstrations for a quarter of SFT's steps, GRPO, online rejection-sampling fine-tuning (RFT, as in
# [the GRPO notebook](09_tiny_gpt_grpo.ipynb)) for a third of GRPO's steps, GRPO again for a third.
# Its stage 4 keeps the same checker (the tiny GPT has no helpfulness to reward).
#
# Every stage is measured on the same 500 held-out prompts:
#
# - **pass@1**: greedy exact match; **sampled pass@1**: the share of samples (temperature 1) the
#   checker accepts — what RL and rejection sampling actually draw;
# - **pass@8**: the share of prompts with at least one accepted answer among 8 samples: what the
#   policy *can* produce, if asked often enough;
# - **no-signal share**: the share of GRPO's groups (8 answers to one prompt) whose rewards are all
#   equal — all wrong or all right. Their group-relative advantages are all zero
#   ([group baselines](04_group_baselines.ipynb)): those prompts teach GRPO nothing;
# - **accepted**: the share of RFT's samples the checker approved (what it fine-tunes on);
# - **KL start / KL first**: the sequence KL(π ‖ π_ref) in nats, sampled on held-out prompts, to the
#   policy the stage started from and to the recipe's first policy: how far each stage moved.

# %%
display(Markdown("Sources (`course_lib.lesson.sources`): "
                 + ", ".join(cite(key) for key in ("deepseek_r1", "star", "yue2025", "gandhi2025"))))
for name in recipes.RECIPES:
    print(f"{name:8} {recipes.RECIPES[name][1]}")
    for stage in recipes.resolve(name, cfg)[1]:
        print(f"         {stage}")

# %% [markdown]
# ## 2. R1's four stages on the tiny GPT: what each one adds
#
# The cell below runs `r1` and prints only the cold start's numbers; the rest waits for your
# predictions.

# %%
r1 = recipes.run_recipe("r1", cfg, OUT / "r1", **RUN)
cold, grpo1, rft, grpo2 = r1["finished"]
p = cold["sampled_pass@1"]
G = cfg.grpo.num_generations
print(f"stage 1, the cold start ({cold['overrides']['task.n_demos']} demonstrations, {cold['steps']} steps): "
      f"pass@1 {cold['pass@1']:.1%}, sampled pass@1 {p:.1%}, pass@8 {cold['pass@8']:.1%}")

# %% [markdown]
# **Predict first.** Stage 2's GRPO samples G = 8 answers to each prompt from that policy. If every
# prompt had the same chance p of a right answer, a group would have no signal with probability
# (1 − p)⁸ + p⁸ (all wrong or all right). What share of stage 2's groups had no signal?

# %%
uniform = (1 - p) ** G + p**G
zv_answer = ("under 25%" if grpo1["zero_variance_share"] < 0.25 else
             "25–75%" if grpo1["zero_variance_share"] <= 0.75 else "over 75%")
display(predict(f"Share of stage 2's GRPO groups with no signal (every prompt alike would give {uniform:.0%}) …",
                ["under 25%", "25–75%", "over 75%"], zv_answer,
                f"Measured {grpo1['zero_variance_share']:.0%}" + (
                    ": prompts are not alike. The cold start answers a few prompts often and most never, so more "
                    "groups are all wrong than one average p predicts." if grpo1["zero_variance_share"] > uniform else
                    ", no more than one average p predicts: in this run the prompts behaved alike.")))

# %% [markdown]
# **Predict first.** Of the three stages after the cold start, which adds the most pass@1?

# %%
gains = {"GRPO (stage 2)": grpo1["pass@1"] - cold["pass@1"], "RFT (stage 3)": rft["pass@1"] - grpo1["pass@1"],
         "GRPO again (stage 4)": grpo2["pass@1"] - rft["pass@1"]}
best = max(gains, key=gains.get)
stage_answer = best if gains[best] >= 0.02 else "none adds 2 points or more"
display(predict("The stage after the cold start that adds the most pass@1 is …",
                [*gains, "none adds 2 points or more"], stage_answer,
                "In this run: " + ", ".join(f"{k} {PCT * v:+.1f} points" for k, v in gains.items()) + "."))

# %%
stage_table(r1["finished"])
fig, ax = plt.subplots(figsize=(7, 3.2))
xs = range(1, 5)
for key, style in (("pass@1", "o-"), ("sampled_pass@1", "s--"), ("pass@8", "^:")):
    ax.plot(xs, [e[key] for e in r1["finished"]], style, label=key)
ax.set(xticks=list(xs), xticklabels=["1 cold SFT", "2 GRPO", "3 RFT", "4 GRPO"], ylabel="held-out share",
       title="r1 on the tiny GPT, stage by stage")
ax.legend()
fig.tight_layout()
plt.show()
print(f"\nlive, this budget (one seed): the cold start reached pass@1 {cold['pass@1']:.1%} from the random "
      "initialisation; then " + ", ".join(f"{k} {PCT * v:+.1f} points" for k, v in gains.items()))
BENCH = committed_benchmarks("recipes")  # the committed run over seeds, full budget (`make bench`); None on Colab
if BENCH:
    sys.path.insert(0, str(BENCH))
    from tables import load, recipe_verdicts

    print("the committed benchmark (benchmarks/tinygpt_recipes.py, three seeds, the full budget), stage by stage:\n"
          + "\n".join(line for line in recipe_verdicts(load("recipes", BENCH / "results"))
                      if line.startswith("- r1, pass@1")))
else:
    print("benchmarks/results/recipes.json is not here (e.g. on Colab): see the recipes table in docs/results.md")
print("(section 5 reads each stage over the three seeds of this budget)")
print(f"GRPO's groups without signal: {grpo1['zero_variance_share']:.0%} in stage 2, "
      f"{grpo2['zero_variance_share']:.0%} in stage 4 (one average p would predict {uniform:.0%} in stage 2)")
print(f"pass@8 went {cold['pass@8']:.1%} → {grpo2['pass@8']:.1%} while pass@1 went {cold['pass@1']:.1%} → "
      f"{grpo2['pass@1']:.1%}; the last policy sits {grpo2['kl_to_first_policy']:.2f} nats from the random "
      f"initialisation and {grpo2['kl_to_stage_start']:.2f} from the start of its own stage")

# %% [markdown]
# Read the no-signal column first: from a cold start that answers a few percent of its samples right,
# most of GRPO's groups are all wrong, and a group that is all wrong has nothing to compare. DeepSeek
# gave R1 its cold start for readable answers and to skip RL's unstable early phase from the base
# model; on the tiny GPT the policy RL starts from decides how much of each batch carries any signal
# at all (section 4 measures it).
# The KL columns say how far each stage moved: the cold start from a random network, each later
# stage from the policy it was handed.
#
# ## 3. The porous boundary: R1's stage 3 is SFT on data RL wrote
#
# Stage 3 samples from the RL policy, keeps what the checker approves, and takes a supervised step
# on it — as STaR ([Zelikman et al. 2022](https://arxiv.org/abs/2203.14465)) did before R1. Is that SFT or RL? Its
# **loss** is SFT's: the token-mean negative log-likelihood of kept answers. Its **data** is RL's: written by the
# current policy and scored by the reward, fresh every step. Written as a policy gradient it is GRPO's update with the
# advantage replaced by 1[reward ≥ 1]: no baseline, no negative answers. The two losses on the same
# kept answers, from the stage-2 policy:

# %%
task, policy = build_policy(cfg, seed=SEED, device=DEVICE)
policy.load_state_dict(load_checkpoint(recipes.stage_dir(OUT / "r1", 1, "grpo") / "policy.pt", kind="recipe")["model"])
rollout = collect_rollouts(policy, task, cfg.grpo, torch.Generator().manual_seed(SEED),
                           resolve_reward(cfg.grpo.reward, task))
batch = rollout["batch"]
weights = rft_weights(batch["rewards"].flatten())
kept = weights > 0
ids, attn, cmask = (batch[k][kept] for k in ("input_ids", "attention_mask", "completion_mask"))
with torch.no_grad():
    as_rft = float(rft_loss(policy, {"input_ids": ids, "attention_mask": attn, "completion_mask": cmask},
                            weights[kept], prompt_length=task.prompt_length))
    as_sft = float(sft_loss(policy, ids, attn, cmask, prompt_length=task.prompt_length))
print(f"one rollout of {len(weights)} samples: the checker kept {int(kept.sum())}")
print(f"RFT's loss on them {as_rft:.6f}   the SFT loss on the same answers {as_sft:.6f}")
assert abs(as_rft - as_sft) < 1e-5
for stage in (cold, rft):
    pp = json.loads((recipes.stage_dir(OUT / "r1", stage["stage"] - 1, stage["kind"]) / "passport.json").read_text())
    print(f"\nstage {stage['stage']} ({stage['kind']}) passport: algorithm: {pp['optimisation']['algorithm']}")
    print(f"  examples: {pp['data_and_policy']['examples']}\n  generated by: {pp['data_and_policy']['generated_by']}")

# %% [markdown]
# Same loss, different data: stage 1 imitates a fixed, flawed teacher; stage 3 imitates the policy's
# own answers that a checker approved. How much there is to imitate is the acceptance rate, and it
# can only be what the policy already gets right when it samples:

# %%
print(f"RFT kept {rft['acceptance_rate']:.1%} of its samples over its {rft['steps']} steps; the GRPO policy "
      f"it started from had a sampled pass@1 of {grpo1['sampled_pass@1']:.1%} on held-out prompts")
print(f"RFT moved the policy {rft['kl_to_stage_start']:.2f} nats in {rft['steps']} steps; "
      f"stage 2's GRPO moved it {grpo1['kl_to_stage_start']:.2f} nats in {grpo1['steps']}")

# %% [markdown]
# R1 does stage 3 offline and at scale (about 800k samples, filtered for correctness and
# readability, then SFT with other data — from the *base* model); the course's RFT is online and
# continues from the RL policy. Both are the same idea: the RL policy as a data generator, a checker
# as the filter, SFT as the update. A recipe can move a method from one side of the "SFT or RL"
# line to the other without changing its loss.
#
# ## 4. R1-Zero, and what RL can amplify
#
# R1-Zero skips the cold start: GRPO straight from the base model. DeepSeek's base had been
# pretrained on trillions of tokens and already solved some problems. The tiny GPT's closest
# analogue of "no SFT at all" is its random initialisation.
#
# **Predict first.** GRPO from the random initialisation, at the same budget as stage 2: what share
# of its groups has no signal?

# %%
zero = recipes.run_recipe("r1-zero", cfg, OUT / "r1-zero", **RUN)
z = zero["finished"][0]
zero_rows = [json.loads(line) for line in (recipes.stage_dir(OUT / "r1-zero", 0, "grpo") / "metrics.jsonl")
             .read_text().splitlines()]
zero_answer = ("under 50%" if z["zero_variance_share"] < 0.5 else "50–90%" if z["zero_variance_share"] <= 0.9
               else "over 90%")
display(predict("GRPO from the random initialisation: share of groups with no signal …",
                ["under 50%", "50–90%", "over 90%"], zero_answer,
                f"Measured {z['zero_variance_share']:.0%}" + (
                    ": a random network almost never writes the exact sum, so almost every group is all wrong and its "
                    "advantages are all zero." if z["zero_variance_share"] > 0.9 else
                    ": in this run the random network's rare right answers gave more groups a signal than that.")))

# %%
_, random_init = build_policy(cfg, seed=SEED, device=DEVICE)


def start_numbers(model):
    """A starting point's pass@1 (greedy), sampled pass@1 and pass@8, measured as every recipe stage is."""
    return recipes.policy_numbers(model.eval(), task, cfg, seed=SEED)


random_start = start_numbers(random_init)
print(f"random initialisation: pass@1 {random_start['pass@1']:.1%}, sampled pass@1 "
      f"{random_start['sampled_pass@1']:.2%}, pass@8 {random_start['pass@8']:.1%}")
stage_table(zero["finished"], ["1. grpo (R1-Zero)"])
print(f"\nR1-Zero on the tiny GPT: {z['zero_variance_share']:.1%} of groups without signal; pass@1 "
      f"{random_start['pass@1']:.1%} → {z['pass@1']:.1%}, pass@8 {random_start['pass@8']:.1%} → {z['pass@8']:.1%}")
form = zero_rows[-1]["truncated_rate"] < zero_rows[0]["truncated_rate"]
print(("what it did learn is the form" if form else "it did not even learn the form")
      + f": truncated answers {zero_rows[0]['truncated_rate']:.0%} → {zero_rows[-1]['truncated_rate']:.0%} of each "
      f"rollout, length {zero_rows[0]['completion_length']:.2f} → {zero_rows[-1]['completion_length']:.2f} tokens "
      "(a truncated answer always scores 0)")

# %% [markdown]
# So RL from nothing has almost nothing to amplify (the lines above say what it did gain: mostly the
# form of an answer). Between nothing and the SFT policy there are two
# weaker starts worth measuring:
#
# - a **base that knows digits**: the `pretrain` stage trains next-token prediction on plain digit
#   text (`recipes.digit_text`) — random digit strings of random length, each ended by `<eos>`;
#   never a `+`, an `=` or a sum. It learns what an answer is made of and that it ends, nothing about
#   addition;
# - the **cold start** of section 2 (a tenth of the demonstrations, a quarter of the steps).
#
# And the strongest: the full SFT policy of [Tiny GPT: SFT then DPO](08_tiny_gpt_dpo.ipynb) and
# [the GRPO notebook](09_tiny_gpt_grpo.ipynb)
# (all 2,000 demonstrations, 1,200 steps; read from the shared cache, `course_lib.run.starts`). Each
# start gets the same GRPO budget as R1-Zero. Three documents of digit text:

# %%
docs, _, _ = recipes.digit_text(task, 3, torch.Generator().manual_seed(SEED))
for row in docs.tolist():
    print(task.tokenizer.decode(row, skip_special_tokens=False).replace("<pad>", ""))

# %% [markdown]
# **Predict first.** After the same GRPO budget, where does the digit-text base land?

# %%
digits = recipes.run_recipe(f"pretrain:steps={PRETRAIN_STEPS},grpo", cfg, OUT / "digits", **RUN)
base, base_rl = digits["finished"]
_, sft_policy, _ = sft_start(get_config("cpu"), seed=SEED, verbose=False, device=DEVICE)  # the shared SFT start
sft_start_numbers = start_numbers(sft_policy)
full = recipes.run_recipe("grpo", cfg, OUT / "sft-start", init=sft_policy, init_name="the shared SFT start", **RUN)
sft_rl = full["finished"][0]


def starts_of(runs):
    """start -> (its numbers before RL, the GRPO stage that followed), from one seed's runs."""
    return {"random init": (runs["random_start"], runs["zero"][0]), "digit-text base": tuple(runs["digits"]),
            "cold start": tuple(runs["r1"][:2]), "SFT start": (runs["sft_start"], runs["full"][0])}


mine = {"r1": r1["finished"], "zero": zero["finished"], "digits": digits["finished"], "full": full["finished"],
        "random_start": random_start, "sft_start": sft_start_numbers}  # seed 0's runs, as recipe_starts returns them
starts = starts_of(mine)
after = {name: rl["pass@1"] for name, (_, rl) in starts.items()}
refs = {"near 0, like the random init": after["random init"], "near the cold start's after RL": after["cold start"],
        "near the SFT start's after RL": after["SFT start"]}  # the options carry no number: the table shows them
digit_answer = min(refs, key=lambda k: abs(refs[k] - after["digit-text base"]))
display(predict("A base that knows digits but never saw a sum, after the same GRPO budget: its pass@1 lands …",
                list(refs), digit_answer,
                f"Measured {after['digit-text base']:.1%} (from {base['pass@1']:.1%}; pass@8 before RL "
                f"{base['pass@8']:.1%}); after the same RL the random init reached {after['random init']:.1%}, the "
                f"cold start {after['cold start']:.1%}, the SFT start {after['SFT start']:.1%}."))

# %%
print(f"{'start':16} {'pass@1':>7} {'pass@8':>7}   →  {'pass@1':>7} {'pass@8':>7} {'gain':>7} {'no-signal':>10}")
for name, (before, rl) in starts.items():
    print(f"{name:16} {before['pass@1']:7.1%} {before['pass@8']:7.1%}   →  {rl['pass@1']:7.1%} {rl['pass@8']:7.1%} "
          f"{PCT * (rl['pass@1'] - before['pass@1']):+6.1f}p {rl['zero_variance_share']:10.0%}")
fig, ax = plt.subplots(figsize=(7, 3.4))
names = list(starts)
width = 0.27
for j, (label, values) in enumerate((("start pass@1", [starts[n][0]["pass@1"] for n in names]),
                                     ("start pass@8", [starts[n][0]["pass@8"] for n in names]),
                                     ("pass@1 after GRPO", [starts[n][1]["pass@1"] for n in names]))):
    ax.bar([i + (j - 1) * width for i in range(len(names))], values, width, label=label)
ax.set(xticks=range(len(names)), xticklabels=names, ylabel="held-out share",
       title=f"what {RL_STEPS} GRPO steps amplified, by starting point")
ax.legend()
fig.tight_layout()
plt.show()
gain = {name: rl["pass@1"] - before["pass@1"] for name, (before, rl) in starts.items()}
below = [name for name, (before, rl) in starts.items() if rl["pass@1"] <= before["pass@8"]]
by_pass8 = sorted(starts, key=lambda n: starts[n][0]["pass@8"])
print("\nordered by the start's pass@8: " + ", ".join(f"{n} {starts[n][0]['pass@8']:.1%} (gain "
                                                     f"{PCT * gain[n]:+.1f} points)" for n in by_pass8))
top = max(gain, key=gain.get)
print(f"the largest gain came from the {top}, "
      + ("the start with the highest pass@8" if top == by_pass8[-1] else f"not from the start with the highest "
         f"pass@8 ({by_pass8[-1]})"))
print(f"after GRPO, pass@1 stayed at or below the start's pass@8 in {len(below)} of {len(starts)} starts"
      + (f" (not: {', '.join(n for n in starts if n not in below)})" if len(below) < len(starts) else ""))
print(f"the digit-text base: {base_rl['zero_variance_share']:.0%} of its groups without signal, pass@1 "
      f"{base['pass@1']:.1%} → {base_rl['pass@1']:.1%}; the SFT start: {sft_rl['zero_variance_share']:.0%}, "
      f"{sft_start_numbers['pass@1']:.1%} → {sft_rl['pass@1']:.1%}")
past = sft_rl["pass@1"] > sft_start_numbers["pass@8"]
print(f"from the SFT start, pass@1 rose {'past' if past else 'towards'} the start's pass@8 "
      f"({sft_start_numbers['pass@8']:.1%}), and pass@8 itself went {sft_start_numbers['pass@8']:.1%} → "
      f"{sft_rl['pass@8']:.1%}")

# %% [markdown]
# This is the lecture's claim that the base checkpoint decides what RL can amplify, measured here on
# seed 0 (section 5 reads it over three seeds; the recipes table in docs/results.md repeats the random,
# digit-text and cold starts over three seeds at the full budget). GRPO learns from groups with both right and wrong
# answers; a start whose pass@8 is near zero gives it almost none at this budget. Knowing digits and when an answer
# ends is not knowing addition: the digit-text base writes answers of the right form, and right answers only by luck.
# Where the start already answers many prompts *sometimes* (a high pass@8 over a lower pass@1), RL turns
# "sometimes" into "usually": it raises pass@1 towards the pass@8 the start already had (the last line
# above says whether, in this run, it went past it, and how far pass@8 itself moved).
# [Yue et al. 2025](https://arxiv.org/abs/2504.13837) measured on large models that RL-trained models win at pass@1
# while their base models catch up at large k (hundreds of samples); this notebook measures only k = 8, where pass@8
# can still move with RL (the last line above says how far it did from the SFT start), and
# [Gandhi et al. 2025](https://arxiv.org/abs/2503.01307) found that whether RL self-improves depends on behaviours the
# base model already shows. This table cannot say why R1-Zero worked for DeepSeek; it is consistent with one reading —
# that a base pretrained on the web already answers many problems *sometimes*, as the SFT start here does, unlike the
# random one — which a toy task can illustrate but not establish.
#
# ## 5. Over seeds: what holds
#
# Every number above was seed 0's. Seeds 1 and 2 ran the same four recipes in the background
# (`course_lib.run.seeds.recipe_starts`), each from its own initialisation, data and SFT start. A verdict
# is read over the three seeds by the course's one rule (`course_lib.run.verdicts`): the per-seed
# differences, "on k of n seeds", and "beyond the seed spread" only when the difference has the same
# sign on every seed and its median exceeds the evaluation noise (two standard errors of a difference
# of two held-out accuracies: a gap below it is one the held-out prompts cannot see).
#
# **Predict first.** Over three seeds, which stage of r1 after the cold start adds pass@1 beyond the
# seed spread? And on how many seeds does GRPO gain the most pass@1 from the SFT start?

# %%
per_seed = {SEED: mine}
for r in others.results():  # waits for seeds 1 and 2
    per_seed[r["seed"]] = r["result"]
NOISE = evaluation_noise(len(task.heldout_pairs))
STAGES = ("the cold start", "GRPO (stage 2)", "RFT (stage 3)", "GRPO again (stage 4)")
verdicts = {STAGES[k]: paired([per_seed[s]["r1"][k]["pass@1"] for s in SEEDS],
                              [per_seed[s]["r1"][k - 1]["pass@1"] for s in SEEDS], name_a=STAGES[k],
                              name_b=f"its start ({STAGES[k - 1]}), pass@1", seeds=SEEDS, margin=NOISE)
            for k in (1, 2, 3)}
seed_gains = {s: {name: rl["pass@1"] - before["pass@1"] for name, (before, rl) in starts_of(per_seed[s]).items()}
              for s in SEEDS}
for other in ("random init", "digit-text base", "cold start"):
    verdicts[other] = paired([seed_gains[s]["SFT start"] for s in SEEDS], [seed_gains[s][other] for s in SEEDS],
                             name_a="the SFT start", name_b=f"the {other}", seeds=SEEDS, margin=NOISE,
                             unit=" pts of pass@1 gained by GRPO")
tops = {s: max(seed_gains[s], key=seed_gains[s].get) for s in SEEDS}
sft_top = sum(t == "SFT start" for t in tops.values())
added = [k for k in STAGES[1:] if verdicts[k].beyond and verdicts[k].median > 0]
stage_answer = max(added, key=lambda k: verdicts[k].median) if added else "none of them"
display(predict("Over three seeds, the stage of r1 after the cold start that adds the most pass@1 beyond the seed "
                "spread is …", [*STAGES[1:], "none of them"], stage_answer,
                " ".join(verdicts[k].sentence() + "." for k in STAGES[1:])))
counts = [f"{k} of {len(SEEDS)}" for k in range(len(SEEDS) + 1)]
display(predict("GRPO's largest pass@1 gain of the four starts came from the SFT start on … seeds", counts,
                f"{sft_top} of {len(SEEDS)}", "The start with the largest gain, per seed: "
                + ", ".join(f"seed {s}: {t}" for s, t in tops.items()) + "."))

# %%
print("pass@1 per seed (" + " / ".join(map(str, SEEDS)) + "):")
for k, stage in enumerate(STAGES):
    print(f"  r1 stage {k + 1}, {stage:22} " + " / ".join(f"{per_seed[s]['r1'][k]['pass@1']:.1%}" for s in SEEDS))
for name in starts:
    print(f"  GRPO's gain from the {name:16} " + " / ".join(f"{PCT * seed_gains[s][name]:+.1f}p" for s in SEEDS))
for v in verdicts.values():
    print("- " + v.sentence())
zero_share = [per_seed[s]["zero"][0]["zero_variance_share"] for s in SEEDS]
print(f"- the largest gain of the four starts came from the SFT start on {sft_top} of {len(SEEDS)} seeds")
print("- R1-Zero's groups without signal: " + " / ".join(f"{x:.1%}" for x in zero_share)
      + f" (over 90% on {sum(x > 0.9 for x in zero_share)} of {len(SEEDS)} seeds)")

# %% [markdown]
# Read "beyond the seed spread" as the one claim these runs support: the same sign on every seed and a
# median above the evaluation noise. Three seeds sharing a sign happens by chance one time in four
# when there is no effect at all, so the sentence always says how many seeds it stands on. A stage
# "within the seed spread" did not add anything these seeds can see at this budget, whatever seed 0's
# section 2 showed; the committed benchmark (section 2's last lines) reads r1 at the full budget.
#
# ## Your turn
#
# The cold start of section 2 had a sampled pass@1 of p (printed there). (a) If every prompt had
# that same p, what share of GRPO's groups would carry signal with G = 8 and with G = 32? (b) Where the
# measured share without signal was higher than the uniform formula, which prompts make up the
# difference?

# %%
# your code here

# %% [markdown]
# <details><summary>Answer</summary>
#
# (a) `1 - (1 - p) ** G - p ** G` with `p = cold["sampled_pass@1"]`: with G = 32 more groups carry
# signal than with G = 8 (`1 - (1 - p) ** 32` against `1 - (1 - p) ** 8`, the `p ** G` terms being
# negligible): about 2.5 times as many at p = 4%, twice as many at p = 7% (compute it for the p printed in
# section 2), and the ratio approaches 32/8 = 4 as p falls towards 0 —
# more samples per prompt is one way to buy signal from a weak start, at G times the generation cost.
# (b) Prompts the policy never answers right (p = 0 for them, e.g. many prompts with a carry, which
# the flawed teacher taught it to get wrong): their groups are all wrong whatever G is, while the
# uniform formula spreads the successes over every prompt.
# </details>
#
# ## Check yourself
#
# 1. Why does R1-Zero work for DeepSeek but not from the tiny GPT's random initialisation?
#    <details><summary>Answer</summary>
#    GRPO needs groups with at least one right answer. DeepSeek-V3-Base, pretrained on trillions of
#    tokens, already solves some problems when sampled (a non-zero pass@k); the random network writes
#    the exact sum almost never, so nearly every group is all wrong and carries no signal.
#    </details>
# 2. Is rejection-sampling fine-tuning SFT or RL?
#    <details><summary>Answer</summary>
#    Both: its loss is the SFT loss (section 3 checked it on the same answers), its data is written by
#    the policy and filtered by the reward, fresh every step. As a policy gradient it is GRPO with the
#    advantage 1[reward ≥ 1]: no baseline, no negative answers.
#    </details>
# 3. A GRPO run reports 95% of groups without signal. Name two ways to get more signal, and one
#    that only hides the problem.
#    <details><summary>Answer</summary>
#    A stronger start (a cold start on more or better demonstrations), and more samples per prompt
#    (a larger G) or easier prompts (a curriculum) or partial credit (a denser reward). Dropping or
#    resampling zero-variance groups (DAPO's dynamic sampling) keeps the batch full of informative
#    groups but cannot create them when almost none exist.
#    </details>
# 4. Which two numbers of section 4 would you compare to decide whether RL taught the policy something
#    it could not do before?
#    <details><summary>Answer</summary>
#    The policy's pass@1 after RL and the start's pass@k (here pass@8). RL moving pass@1 up to the
#    start's pass@k is sharpening what was there; pass@k after RL rising well above the start's pass@k
#    would be new ability. At this budget, compare the pass@8 columns before and after.
#    </details>

# %%
print(clock.report())
