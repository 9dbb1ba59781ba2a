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
# # 19 · Closing: the map, the sources, and where to go next
#
# *Pointer for readers of the Module 14 lecture: §2 (how the pipeline came about) and §20 (takeaways and
# sources). Everything below stands on its own.*
#
# After this notebook you will be able to
#
# 1. place each method of the course on the timeline it came from, with its primary source;
# 2. state the lecture's takeaways and point to the notebook where you saw each one happen;
# 3. say which tools take over where the course stops.

# %%
import ipywidgets as widgets
import matplotlib.pyplot as plt
from IPython.display import Markdown, display

from course_lib.formulas.advantages import zero_variance_probability
from course_lib.formulas.budgets import rollout_generation_seconds, rollout_tokens, stage_memory_gib, update_seconds
from course_lib.formulas.preference import bt_probability, dpo_terms, win_rate_to_gap
from course_lib.lesson.explore import predict, readout
from course_lib.lesson.sources import SOURCES, cite, date, timeline

# %% [markdown]
# ## 1. How the pipeline came about
#
# The methods of this course were not designed together. Each answered a problem the previous one left.
# Before the timeline is drawn, a question about its order:

# %%
predict("Which came first?",
        ["DPO removed the RL loop, then GRPO dropped the critic",
         "GRPO dropped the critic, then DPO removed the RL loop",
         "both in the same month"],
        "DPO removed the RL loop, then GRPO dropped the critic",
        f"DPO is from {date('dpo')[0]}-{date('dpo')[1]:02d}; GRPO arrived with DeepSeekMath in "
        f"{date('deepseekmath')[0]}-{date('deepseekmath')[1]:02d}. RL did not disappear after DPO: verifiable "
        "rewards brought online RL back, with cheaper baselines.")

# %%
entries = timeline()
fig, ax = plt.subplots(figsize=(9.5, 1.5 + 0.22 * len(entries)))
for row, ((year, month), key) in enumerate(entries):
    source = SOURCES[key]
    x = year + (month - 0.5) / 12 if month else year + 0.5
    early = x < 2015  # the foundations (1952, 1992) sit at the left edge, their year in the label
    style = "<" if early else {"paper": "o", "note": "s", "software": "D"}[source.kind]
    x = max(x, 2015.1)
    ax.plot(x, row, style, color="C0" if source.lecture else "C1", ms=6)
    label = f"{source.authors}{f' ({year})' if early else ''}: {source.idea}"
    right = x > 2021  # late entries write their label to the left of the marker, where the years are free
    room = int(12 * ((x - 2015.2) if right else (2027.2 - x - 0.15)))  # about 12 characters per year at this size
    if len(label) > room:  # cut at the last clause that fits, never inside a formula
        cut = label[:room - 1]
        label = (cut[:cut.rfind(", ")] if ", " in cut[len(source.authors) + 2:] else cut) + "…"
    ax.text(x - 0.15 if right else x + 0.15, row, label, va="center", ha="right" if right else "left", fontsize=8)
ax.set_yticks([])
ax.set_ylim(len(entries), -1)
ax.set_xlim(2015, 2027.2)
ax.set_xticks(range(2015, 2027))
ax.set_xlabel("year (arXiv month for papers; year alone for software, notes and the pre-2015 foundations)")
ax.set_title("The methods of the course in time")
ax.legend(handles=[plt.Line2D([], [], marker="o", ls="", color="C0", label="paper the lecture lists"),
                   plt.Line2D([], [], marker="o", ls="", color="C1", label="added by the course"),
                   plt.Line2D([], [], marker="s", ls="", color="C1", label="note"),
                   plt.Line2D([], [], marker="D", ls="", color="C0", label="software stack"),
                   plt.Line2D([], [], marker="<", ls="", color="C1", label="before 2015 (year in the label)")],
          loc="lower left", fontsize=8)
ax.grid(axis="x", alpha=0.3)
fig.tight_layout()
plt.show()

# %% [markdown]
# Read it as four waves:
#
# - **Reward models from comparisons** (2017–2022): a learned reward, then PPO under a KL term — the
#   classical RLHF contract of [Bradley–Terry](01_bradley_terry.ipynb), [Tiny GPT: SFT then DPO](08_tiny_gpt_dpo.ipynb)
#   and [The RLHF route](12_the_rlhf_route.ipynb); Constitutional AI let a judge taught by written principles label the
#   pairs ([AI feedback](17_ai_feedback.ipynb)).
# - **Direct preference losses** (2023–2024): DPO turned the KL-regularised objective into a pairwise loss
#   ([DPO margins](02_dpo_margins.ipynb) and [The regularised objective](03_the_regularised_objective.ipynb)); IPO,
#   KTO, SimPO and ORPO changed the margin or the data each one needs.
# - **Critic-free RL with verifiable rewards** (2024–2025): RLOO and GRPO build baselines from sibling
#   answers ([Group baselines](04_group_baselines.ipynb),
#   [Baseline bias by enumeration](06_baseline_bias_enumeration.ipynb),
#   [Tiny GPT: the GRPO family](09_tiny_gpt_grpo.ipynb)), and DeepSeek-R1 trained a reasoning model this way at scale;
#   DAPO and Dr. GRPO repair what GRPO's normalisation got wrong
#   ([From advantages to an update](05_from_advantages_to_an_update.ipynb),
#   [Tiny GPT: the GRPO family](09_tiny_gpt_grpo.ipynb)); GSPO and CISPO change what is clipped;
#   [Recipes](16_recipes.ipynb) runs R1's stages on the tiny GPT.
# - **RL as a system** (2025–2026): rollout workers, environments and freshness control (verl, NeMo RL,
#   NeMo Gym) — where the optimiser is one stage of a data-generation pipeline
#   ([RL as a system](14_rl_as_a_system.ipynb), [Environments and tools](15_environments_and_tools.ipynb)).
#
# Every source, with its link:

# %%
display(Markdown("\n".join(
    f"- {cite(key)} — *{SOURCES[key].title}*: {SOURCES[key].idea}"
    + ("" if SOURCES[key].lecture else " (added by the course)")
    for _, key in entries)))

# %% [markdown]
# ## 2. The takeaways, and where you saw each one
#
# Each line below is a takeaway of the lecture with the number that goes with it, recomputed by the library
# (not typed), and the notebook where you derived it.

# %%
gen_s = rollout_generation_seconds(256, 8, 4000, 209.4, 8)
upd_s = update_seconds(8.03e9, rollout_tokens(256, 8, 4000), 990e12, 0.4, 8)
takeaways = [
    ("Bradley–Terry: a 75% win rate is a score gap of log 3", f"{win_rate_to_gap(0.75):.3f}", "01_bradley_terry"),
    ("and a gap of 1 wins", f"{bt_probability(1.0):.3f} of the time", "01_bradley_terry"),
    ("DPO's loss of pair I: the implicit reward is a policy ratio",
     f"{dpo_terms(-12.0, -11.5, -13.0, -10.8, beta=0.1).loss:.4f}", "02_dpo_margins"),
    ("GRPO: a group with no spread carries no signal; at p = 0.3, G = 8 it happens",
     f"{zero_variance_probability(0.3, 8):.4f} of the time", "04_group_baselines"),
    ("The frozen memory scenario: PPO vs DPO with a resident reference",
     f"{stage_memory_gib(8.03e9, 'ppo'):.1f} vs {stage_memory_gib(8.03e9, 'dpo'):.1f} GiB",
     "07_memory_and_rollout_budgets"),
    ("The frozen rollout scenario: generation vs one training pass", f"{gen_s / upd_s:.1f} ×",
     "07_memory_and_rollout_budgets"),
]
for claim, value, notebook in takeaways:
    print(f"{claim:<78} {value:>22}   (notebook {notebook.split('_')[0]})")

# %% [markdown]
# And the takeaways that are not numbers:
#
# - **Distinguish the signals.** Demonstrations give a target, preferences rank alternatives, verifiers score
#   outcomes. Name the feedback format, how it was collected and the update rule separately — the passport
#   ([The passport](13_the_passport.ipynb)) has a field for each.
# - **Direct losses differ by contract.** IPO changes the margin's geometry, KTO needs only pointwise labels,
#   SimPO drops the reference and normalises by length, ORPO folds SFT and preference into one stage
#   ([DPO margins](02_dpo_margins.ipynb)).
# - **Group baselines have identifiable biases.** The full mean keeps (G − 1)/G of the gradient, the std turns
#   it into a difficulty-dependent weight, and zero-variance groups carry nothing
#   ([Group baselines](04_group_baselines.ipynb) and
#   [Baseline bias by enumeration](06_baseline_bias_enumeration.ipynb)).
# - **A verifier is still a target.** The tiny GPT found the loose checker's gap
#   ([Reward hacking](11_reward_hacking.ipynb)); the proxy and the gold reward came apart against a learned reward
#   model ([The RLHF route](12_the_rlhf_route.ipynb)). Held-out accuracy, length, entropy and the share of degenerate
#   groups belong on the dashboard.
# - **The scenarios are conditional.** 269.2 GiB and the 39× ratio follow from stated assumptions (model size,
#   precision, throughput, utilisation); change one and the conclusion moves
#   ([Memory and rollout budgets](07_memory_and_rollout_budgets.ipynb)'s calculators).
# - **RL became a system.** At scale generation dominates a step
#   ([Memory and rollout budgets](07_memory_and_rollout_budgets.ipynb)'s 39×;
#   [Tiny GPT: the GRPO family](09_tiny_gpt_grpo.ipynb) measures the share on your CPU), so production stacks overlap
#   it with updates and control how stale a rollout may be ([RL as a system](14_rl_as_a_system.ipynb)).
#
# ## 3. Explorer: which contract fits your data?
#
# The lecture's advice in one sentence: pick the method whose data contract matches the feedback you
# actually have. Choose what you have; the readout names the methods that consume it and the notebook
# where the course trained or derived each.

# %%
CONTRACTS = {
    "demonstrations only": ("SFT (and rejection-sampling SFT once you have a checker)",
                            ("08_tiny_gpt_dpo", "09_tiny_gpt_grpo"), ["instructgpt"]),
    "pairs: chosen vs rejected": ("DPO, IPO, SimPO (offline); a Bradley–Terry reward model, then RL",
                                  ("01_bradley_terry", "02_dpo_margins", "08_tiny_gpt_dpo", "12_the_rlhf_route"),
                                  ["dpo", "ipo", "simpo"]),
    "single answers labelled good / bad": ("KTO (no pairs needed)", ("02_dpo_margins",), ["kto"]),
    "SFT data and pairs, one stage, no reference": ("ORPO", ("02_dpo_margins",), ["orpo"]),
    "a program that checks answers": ("RLVR: GRPO, RLOO, DAPO, Dr. GRPO (online)",
                                      ("04_group_baselines", "05_from_advantages_to_an_update",
                                       "06_baseline_bias_enumeration", "09_tiny_gpt_grpo", "11_reward_hacking"),
                                      ["deepseekmath", "rloo", "dapo", "dr_grpo"]),
    "a written list of principles": ("AI feedback: a judge labels pairs, then a reward model or DPO",
                                     (), ["constitutional_ai"]),
}
data_choice = widgets.Dropdown(options=list(CONTRACTS), value="pairs: chosen vs rejected",
                               description="you have", style={"description_width": "initial"},
                               layout={"width": "30rem"})
contract_text = widgets.HTML()


def show_contract(_=None):
    methods, notebooks, keys = CONTRACTS[data_choice.value]
    authors = ", ".join(f"{SOURCES[k].authors} {date(k)[0]}" for k in keys)
    contract_text.value = readout([f"use: {methods}",
                                   "notebooks: "
                                   f"{', '.join(s.split('_')[0] for s in notebooks) or 'none yet (next steps)'}",
                                   f"sources: {authors}"])


data_choice.observe(show_contract, names="value")
show_contract()
display(widgets.VBox([data_choice, contract_text]))

# %% [markdown]
# ## 4. Where to go next
#
# - **Hugging Face TRL** — the trainers you met in [Graduating to TRL](18_graduating_to_trl.ipynb) (`GRPOTrainer`,
#   `DPOTrainer`, `RLOOTrainer`,
#   `KTOTrainer`, `PPOTrainer`), with the same option names this course uses; the first step to a real model.
# - **Production RL stacks** — where rollout workers, asynchronous queues and environments are components:

# %%
display(Markdown("\n".join(f"- {cite(key)}: {SOURCES[key].idea}"
                           for key, s in SOURCES.items() if s.kind == "software")))

# %% [markdown]
# - **The next module** studies reasoning models and test-time compute: here we changed the policy; next we
#   decide how much computation an already trained policy should spend on one request.
#
# ## Your turn
#
# List, with `SOURCES`, `date` and `cite`, the sources of 2025 and later that the lecture itself lists
# (`lecture=True`). Which of them does the course implement in `course_lib`?

# %%
# your code here

# %% [markdown]
# <details><summary>Answer</summary>
#
# `[cite(k) for k, s in SOURCES.items() if s.lecture and date(k)[0] >= 2025]` gives DeepSeek-R1, DAPO,
# Dr. GRPO, It Takes Two, Yang et al. and the three software stacks. The course implements DAPO's options
# and Dr. GRPO's unit and advantages (`policy_loss`, `advantages`), and both analyses exactly
# (`advantages.baseline_gradient`, `advantages.conditional_advantage`,
# [Baseline bias by enumeration](06_baseline_bias_enumeration.ipynb)).
# </details>
#
# ## Check yourself
#
# 1. Why did verifiable rewards bring online RL back after DPO had removed it?
#    <details><summary>Answer</summary>
#    DPO needs preference pairs collected in advance. A checker can score any answer the current policy
#    writes, so fresh on-policy samples are cheap to label — and critic-free baselines (RLOO, GRPO) made
#    the update cheap too.
#    </details>
# 2. Which two numbers of the lecture are conditional calculations, and on what?
#    <details><summary>Answer</summary>
#    269.2 GiB (PPO's persistent state) and the 39× generation-to-update ratio: both follow from stated
#    assumptions — 8.03B parameters, the precision of each copy, decode throughput, MFU, device count.
#    </details>
# 3. A run report says "GRPO, β = 0". Name two choices it still leaves open that change the update.
#    <details><summary>Answer</summary>
#    The averaging unit (sequence mean, token mean, constant) and the zero-variance rule (keep, drop,
#    resample) — two of the passport's fields ([The passport](13_the_passport.ipynb)). The question below asks
#    for a third.
#    </details>

# %%
predict("A run report says 'GRPO, β = 0'. Which question does it leave open that changes the update's "
        "direction, not just its size?",
        ["the learning rate", "whether the std normalisation was on", "the number of GPUs"],
        "whether the std normalisation was on",
        "Dividing by the group's std reweights prompts by difficulty (group baselines, and GRPO on the tiny GPT); "
        "Adam cancels a constant scale such as the learning rate's effect on the loss, and the device count changes "
        "nothing in the formula.")

# %%
predict("Which method needs neither a reward model nor a reference model during training?",
        ["PPO", "DPO", "SimPO"], "SimPO",
        "SimPO's margin is a length-normalised log-probability difference with no reference term; DPO keeps a "
        "reference (its log-probs can be cached), PPO needs a reward and usually a critic and a reference.")
