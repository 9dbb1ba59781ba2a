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
# # 15 · Environments and tools: a calculator for the tiny GPT
#
# *Pointers to the lecture: §15 (the checker is the reward, and a loose one is exploited), §16 (for
# agents the environment is part of the training specification). Everything needed here is explained
# here.*
#
# So far every rollout was one completion, scored once. An agent's rollout is an **episode**: the
# policy writes, an environment answers (a tool's output, an error, a new observation), the policy
# writes again, and a verifier scores the end. The environment then holds four things that a training
# run depends on: the **data** (which prompts), the **harness** (whose turn it is, what counts as a
# call, when an episode stops), the **tools**, and the **verifier**. Change any of them and you train
# on a different problem. After this notebook you will be able to
#
# 1. play an episode by hand with `reset` / `step`, and say which tokens the policy wrote and which the
#    environment wrote, and why only the first kind get a log-probability, a loss and a KL term;
# 2. measure tool use on the prompts where the tool helps (the ones column carries) and where it does
#    not, after SFT and after GRPO, and compare held-out accuracy with plain GRPO;
# 3. say, from this run's numbers, when GRPO keeps a tool and when it drops it, and why: whether the episodes that
#    call are right more often than those that do not;
# 4. show what the policy learns when the environment's tokens stay in the loss;
# 5. watch RL exploit a loose verifier in an environment, and map all of it to TRL's and NeMo Gym's
#    ([NVIDIA 2026](https://docs.nvidia.com/nemo/gym)) interfaces.
#
# Budget: the last cell prints how long this run took. `COURSE_FAST=1` runs the same starts and the
# same runs with fewer GRPO steps; every sentence that quotes a number is computed from the run.

# %%
import copy
import dataclasses
import os
import sys

import matplotlib.pyplot as plt
import torch
from IPython.display import Markdown, display

from course_lib.formulas.advantages import grpo_advantages
from course_lib.lesson.explore import predict
from course_lib.lesson.sources import cite
from course_lib.lesson.stopwatch import Stopwatch
from course_lib.run.dashboard import dashboard
from course_lib.run.starts import env_start, sft_start
from course_lib.run.verdicts import committed_benchmarks
from course_lib.tinygpt.environments import CalculatorEnv, EnvTask, EpisodeLimits, process_advantages, run_episode
from course_lib.tinygpt.evaluation import evaluate
from course_lib.tinygpt.runtime import MetricsLog
from course_lib.trainers.configs import get_config
from course_lib.trainers.grpo import train_grpo
from course_lib.trainers.trainer import TrainContext

FAST = os.environ.get("COURSE_FAST") == "1"  # the same lesson with fewer GRPO steps (CI's quick check)
clock = Stopwatch("COURSE_FAST=1" if FAST else "full")
SEED = 0
RL_STEPS = 14 if FAST else 100
TOOL_SFT_STEPS = 150  # the short SFT that teaches the tool (section 2); the same in both budgets
cfg = get_config("cpu")
cfg.grpo = dataclasses.replace(cfg.grpo, steps=RL_STEPS, eval_every=7 if FAST else 25)
_ = torch.manual_seed(SEED)

# %% [markdown]
# ## 1. An episode, by hand
#
# The environment is the course's addition task with a **calculator**. A policy turn is either a tool
# call `[a+b]` — the environment writes the sum into the context — or the final answer, digits then
# `<eos>`, which the exact-answer checker scores. The rules live in the environment, in one place:
#
# - `reset(pair)` starts an episode and returns the prompt; `step(turn)` takes one policy turn and
#   returns `(observation, reward, done, info)` — the shape of OpenEnv's and NeMo Gym's environments;
# - a turn that ends in `]` but is not exactly `[digits+digits]` is a **malformed call**: the
#   environment answers `!` and counts a tool error;
# - **limits**: at most `max_tool_calls` calls (one more ends the episode with reward 0) and at most
#   `max_tokens` tokens after the prompt, the policy's and the environment's together (an episode that
#   reaches it without an answer is truncated, reward 0);
# - an environment that raises ends that episode with reward 0, and training goes on.
#
# The teacher of the earlier notebooks forgets the carry out of the ones column. With a calculator the
# natural call is exactly that column:

# %%
plain_task = EnvTask(dataclasses.replace(cfg.task, env="calculator"))
env = CalculatorEnv(plain_task)
print("reset       →", repr(env.reset((37, 45))))
for turn in ["[7+5]", "82<eos>"]:
    print(f"step({turn!r:9}) →", env.step(turn))

# %%
display(predict("A fresh episode on 37+45. The policy's first turn is `[7+5+1]`. What does the environment do?",
                ["writes 13 into the context", "writes ! (a tool error) and the episode goes on",
                 "ends the episode with reward 0", "raises an exception"],
                "writes ! (a tool error) and the episode goes on",
                "Only [digits+digits] is a call. Anything else that ends in ] is malformed: the environment answers ! "
                "and counts a tool error, and the policy may try again (up to the call limit)."))

# %%
env.reset((37, 45))
print("step('[7+5+1]') →", env.step("[7+5+1]"))
env.reset((37, 45))
print(f"a third call (limit {env.limits.max_tool_calls}) →", [env.step("[7+5]") for _ in range(3)][-1])

# %% [markdown]
# ### Which tokens are actions
#
# `run_episode` drives one episode with any policy and records, token by token, **who wrote it**.
# Here the policy is a script that plays the teacher with a calculator:

# %%
tok = plain_task.tokenizer
script = iter(["[7+5]", "82<eos>"])


def scripted(ids, budget):
    """A policy that plays the next scripted turn (``<eos>`` is one token)."""
    text = next(script)
    return tok.convert_tokens_to_ids([*text.removesuffix("<eos>"), *(["<eos>"] if text.endswith("<eos>") else [])])


episode = run_episode(CalculatorEnv(plain_task), (37, 45), scripted, tok, EpisodeLimits())
tokens = tok.convert_ids_to_tokens(episode.ids)
print("token  :", " ".join(f"{t:>5}" for t in tokens))
print("policy :", " ".join(f"{m:>5}" for m in episode.policy_mask))
print(f"reward {episode.reward}, {episode.turns} policy turns, {episode.policy_tokens} policy tokens")

# %% [markdown]
# The prompt and the tool's answer `12` are **context**: the policy did not choose them, so they are
# not actions. The trainer gets this row of 0s and 1s as its completion mask: log-probabilities,
# the clipped loss and the KL term are taken on the 1s only. Put the environment's tokens in the loss
# and the policy is trained on tokens it never chose, with the episode's advantage as if it had
# chosen them — section 4 measures what that does.
#
# In the trainers the same rules run inside the batched, KV-cached sampler: one environment per row;
# after each sampled token the environment may take over and write its observation, token by token
# (`EpisodeDriver` in `course_lib.tinygpt.environments`). Each episode gets one reward, so one advantage.
#
# ### One reward per episode, or one per step
#
# That single reward at the end is an **outcome reward**. The alternative scores every policy turn as it
# is written: a **per-step (process) reward** — here, a call that asks for the right column earns 1, and
# so does a right answer. What changes is how credit reaches each turn. Take a group of five episodes
# on 37+45 (a GRPO group: one prompt, several samples), written as their policy turns:
#
# - **A** `[7+5]`, then `82`: a right call, a right answer;
# - **B** `82`: a right answer without the tool;
# - **C** `[7+5]`, then `72`: a right call, then the carry forgotten anyway;
# - **D** `72`: a wrong answer;
# - **E** `[3+5]`, then `72`: a wrong call, a wrong answer.
#
# With one reward per episode (1 for A and B, 0 for the others), GRPO's advantage (r − mean) / std of
# [notebook 04](04_group_baselines.ipynb) goes to every policy token of the episode: both turns of C share
# one negative advantage. With a reward per step, DeepSeekMath's *process supervision*
# ([Shao et al. 2024](https://arxiv.org/abs/2402.03300)) normalises **all the step rewards of the group together** by
# their mean and std, and gives each turn the sum of the normalised rewards from that turn to the end of its episode
# (`process_advantages`): a turn is credited with what it and the later turns earned.
#
# **Predict first.** Scored per step, what happens to C's right call?

# %%
group = {"A": (["[7+5]", "82"], [1.0, 1.0]), "B": (["82"], [1.0]), "C": (["[7+5]", "72"], [1.0, 0.0]),
         "D": (["72"], [0.0]), "E": (["[3+5]", "72"], [0.0, 0.0])}  # turns, and the per-step scorer's rewards
outcome = grpo_advantages([1.0 if turns[-1] == "82" else 0.0 for turns, _ in group.values()])
per_step = process_advantages([steps for _, steps in group.values()])
c_call = per_step[2][0]
display(predict("Scored per step, C's right call (followed by a wrong answer) gets an advantage that is …",
                ["negative, as with one reward per episode", "zero: its reward and its answer's cancel", "positive"],
                "negative, as with one reward per episode" if c_call < -1e-9 else "positive" if c_call > 1e-9
                else "zero: its reward and its answer's cancel",
                f"Computed below: {c_call:+.2f} per step, against {float(outcome[2]):+.2f} with one reward per "
                "episode."))

# %%
print(f"{'episode':8} {'turns':16} {'one reward per episode':>24} {'one reward per step':>22}")
for (name, (turns, _)), whole, steps in zip(group.items(), outcome.tolist(), per_step):
    print(f"{name:8} {' then '.join(turns):16} {'  '.join(f'{whole:+.2f}' for _ in turns):>24} "
          f"{'  '.join(f'{a:+.2f}' for a in steps):>22}")

# %% [markdown]
# Per turn, and so for every token of that turn (the policy mask above says which tokens those are).
# Three things changed. The turns of one episode no longer share one advantage: A's call gets more than
# its answer, because the call is credited with the answer's reward too. C's right call is no longer
# pushed down with its wrong answer (here its own +1 and its answer's −1 cancel), and E's wrong call is
# pushed down harder than D's wrong answer alone. And the scorer of the steps is now part of the reward: a
# step scorer that is loose (paying any call, as section 5's verifier does) is exploited step by step.
# The trainers here use the outcome reward only; `process_advantages` is this section's worked example.

# %% [markdown]
# ## 2. Four starting points
#
# - **Plain**: the shared SFT start of the earlier notebooks (no tool in its vocabulary).
# - **Tool, 100 demos**: the same start, its vocabulary grown by `[`, `]`, `!`, then a short SFT on the
#   same 2,000 demonstrations in which the first 100 of those whose ones column carries are rewritten by
#   a teacher with a calculator: `[7+5]`, the tool's `12` (masked in SFT too), then the right sum.
# - **Tool, every carry demo**: the same, with every carry demonstration rewritten that way.
# - **No tool demo** (the control): the same grown vocabulary and the same short SFT, with no demonstration
#   rewritten. The tool starts had those extra SFT steps; plain GRPO did not, so this is the start that
#   says what the tool itself adds.
#
# Everything else — model, prompts, held-out set, the flawed teacher elsewhere — is shared.

# %%
task, plain_model, plain_info = sft_start(cfg, seed=SEED, device=DEVICE)
tool_cfg = {}
for name, demos in [("100 demos", 100), ("every carry demo", cfg.task.n_demos), ("no tool demo", 0)]:
    tool_cfg[name] = dataclasses.replace(cfg, task=dataclasses.replace(cfg.task, env="calculator", tool_demos=demos))
starts, start_weights, tool_tasks = {"plain": plain_info}, {}, {}  # each start's held-out evaluation
for name, c in tool_cfg.items():
    tool_tasks[name], tool_model, starts[name] = env_start(c, seed=SEED, steps=TOOL_SFT_STEPS, device=DEVICE)
    start_weights[name] = copy.deepcopy(tool_model.state_dict())
carry_demos = sum(task.ones_carry(*p) for p in task.demo_pairs)
n_tool = {name: len(t.tool_demo_index) for name, t in tool_tasks.items()}
print(f"{carry_demos} of {len(task.demo_pairs)} demonstrations carry; tool demonstrations: {n_tool}")

# %% [markdown]
# **Predict first.** After SFT with 100 tool demonstrations out of the ~900 that carry, how often
# will the greedy policy call the tool on a carry prompt: almost never, about 100/900, or almost always?
# And with every carry demonstration using it?

# %%
_few = starts["100 demos"]["tool_use_carry"]
display(predict("After SFT with 100 tool demonstrations, the greedy policy calls the tool on carry prompts …",
                ["almost never (under 5%)", "about as often as the demonstrations (5–50%)",
                 "almost always (over 50%)"],
                "almost never (under 5%)" if _few < 0.05 else "almost always (over 50%)" if _few > 0.5
                else "about as often as the demonstrations (5–50%)",
                f"Measured: {_few:.1%} of carry prompts. The table below has every start."))


# %%
def row(name, r):
    tool = (f"   tool use: carry {r['tool_use_carry']:6.1%}  no carry {r['tool_use_no_carry']:6.1%}"
            if "tool_use_carry" in r else "")
    return (f"{name:28} held-out {r['accuracy']:6.1%}   carry {r['accuracy_carry']:6.1%}   "
            f"no carry {r['accuracy_no_carry']:6.1%}{tool}")


for name, r in starts.items():
    print(row(f"SFT, {name}", r))

# %% [markdown]
# Greedy decoding takes the most likely first token. A minority of tool demonstrations makes `[` a
# minority first token on carry prompts, so greedy decoding rarely calls; *sampling* (what GRPO does)
# can still draw a call now and then, and only a sampled call can be reinforced (section 3 prints the
# sampled rate). When every carry demonstration calls, the policy
# has learned *where* the tool helps: it calls on carry prompts and not on the others — a condition on
# the prompt it was never told.
#
# ## 3. GRPO with the tool, and without
#
# The same GRPO (B = 32 prompts × G = 8 episodes, the strict verifier, β = 0), the same seed and
# prompts, from each start. With the tool, a rollout is an episode of at most 16 tokens after the
# prompt; the verifier is the environment's. The runs here are one seed; after them, the committed tools
# benchmark (`benchmarks/tinygpt_tools.py`: the same starts at seeds 0, 1, 2) is read seed by seed with the rule
# of [Tiny GPT: SFT then DPO](08_tiny_gpt_dpo.ipynb), section 8: beyond the seed spread only when every seed agrees.

# %%
def grpo_run(model, task, weights=None, **overrides):
    """GRPO from ``weights`` (same seed and prompts for every run); held-out metrics and the log."""
    if weights is not None:
        model.load_state_dict(weights)
    log = MetricsLog()
    torch.manual_seed(SEED)
    out = train_grpo(model, task, dataclasses.replace(cfg.grpo, **overrides),
                     TrainContext(log=log, show_progress=False), generator=torch.Generator().manual_seed(SEED + 1))
    return {**evaluate(model, task), "rl_seconds": out["rl_seconds"]}, log.rows


plain_weights = copy.deepcopy(plain_model.state_dict())
runs, logs = {}, {}
runs["plain"], logs["plain"] = grpo_run(plain_model, task, plain_weights)
for name in tool_cfg:
    runs[name], logs[name] = grpo_run(tool_model, tool_tasks[name], start_weights[name])
    if name == "every carry demo":
        kept_weights = copy.deepcopy(tool_model.state_dict())


def quarter(rows, key, first):
    """The mean of ``key`` over the first (or last) quarter of the steps, skipping steps where it is undefined
    (None when it never is: no episode of that kind was sampled)."""
    k = max(1, len(rows) // 4)
    vals = [r[key] for r in (rows[:k] if first else rows[-k:]) if r.get(key) is not None]
    return sum(vals) / len(vals) if vals else None


def call_rate(rows, first):
    """Sampled tool-call rate over the first (or last) quarter of the steps."""
    return quarter(rows, "tool_call_rate", first)


sampled = {name: (call_rate(logs[name], True), call_rate(logs[name], False)) for name in tool_cfg}
# does a call pay? On carry prompts, over the first quarter of the steps: reward of episodes with a call, without one
pays = {name: (quarter(logs[name], "reward_carry_with_tool", True),
               quarter(logs[name], "reward_carry_without_tool", True))
        for name in tool_cfg}
# the steps of the first quarter (as in quarter); the episodes behind each rate:
k_first = max(1, len(logs["plain"]) // 4)
pays_n = {name: tuple(sum(r[key] for r in logs[name][:k_first]) for key in
                      ("episodes_carry_with_tool", "episodes_carry_without_tool")) for name in tool_cfg}
few = "100 demos"
dropped = runs[few]["tool_use_carry"] <= starts[few]["tool_use_carry"] and sampled[few][1] < sampled[few][0]
display(predict(f"From the start with 100 tool demonstrations, {RL_STEPS} GRPO steps later the sampled tool-call rate "
                "has …",
                ["risen: the tool pays on carry prompts", "fallen: GRPO found another way"],
                "fallen: GRPO found another way" if sampled[few][1] < sampled[few][0] else
                "risen: the tool pays on carry prompts",
                f"In this run it went {sampled[few][0]:.3f} → {sampled[few][1]:.3f} (first vs last quarter of the "
                "steps)."))

# %% [markdown]
# GRPO raises whatever scores above the other episodes of its group. The calculator is always right, so
# the question is whether the *episodes that call it* are right: the policy has to write the call and
# then use the tool's answer, a skill it saw in 100 demonstrations.
#
# **Predict first**, before the table and the dashboard below: over the first quarter of the GRPO steps
# from the 100-demonstration start, on carry prompts, which sampled episodes were right more often, those
# that called the tool or those that did not?

# %%
_with, _without = pays[few]
display(predict("From the 100-demonstration start, early in GRPO, on carry prompts: which episodes score higher?",
                ["those that call the tool", "those that do not call it", "about the same (within 5 points)"],
                "about the same (within 5 points)" if _with is None or abs(_with - _without) <= 0.05 else
                "those that call the tool" if _with > _without else "those that do not call it",
                "Measured in the section after the dashboard, from this run's sampled episodes."))

# %%
for name, r in starts.items():
    print(row(f"SFT, {name}", r))
print()
for name, r in runs.items():
    print(row(f"GRPO, {name}", r))
print()
for name, (a, b) in sampled.items():
    print(f"sampled tool-call rate, start {name:17}: {a:.3f} over the first quarter of the steps → {b:.3f} over the "
          "last")
fig = dashboard([], title="GRPO with the calculator", runs={k: logs[k] for k in tool_cfg},
                panels=["held-out accuracy (greedy)", "tool calls (sampled episodes)", "tool use (held-out, greedy)",
                        "reward by tool use (sampled)"])
plt.show()

# %%
ctl = "no tool demo"
best_name = max((n for n in tool_cfg if n != ctl), key=lambda n: runs[n]["accuracy"])
best_tool = runs[best_name]["accuracy"]
lines = [
    f"In this run (one seed, {RL_STEPS} GRPO steps from each start):",
    "",
    f"- Plain GRPO: {starts['plain']['accuracy']:.1%} → {runs['plain']['accuracy']:.1%} held-out "
    f"(carry {starts['plain']['accuracy_carry']:.1%} → {runs['plain']['accuracy_carry']:.1%}); from the control "
    f"(the same extra SFT, no tool demonstration) {starts[ctl]['accuracy']:.1%} → {runs[ctl]['accuracy']:.1%} "
    f"(carry {runs[ctl]['accuracy_carry']:.1%}).",
    f"- Of the runs from a start with tool demonstrations, the best ({best_name}, greedy tool use on carry prompts "
    f"{runs[best_name]['tool_use_carry']:.1%}) reaches {best_tool:.1%}: "
    + (f"{100 * (best_tool - runs[ctl]['accuracy']):.1f} points above GRPO from the control."
       if best_tool > runs[ctl]["accuracy"] else
       f"{100 * (runs[ctl]['accuracy'] - best_tool):.1f} points below GRPO from the control."),
    f"- From 100 tool demonstrations, greedy tool use on carry prompts went {starts[few]['tool_use_carry']:.1%} → "
    f"{runs[few]['tool_use_carry']:.1%} and the sampled call rate {sampled[few][0]:.3f} → {sampled[few][1]:.3f}: "
    + ("GRPO is dropping the tool. It raised carry accuracy without it "
       f"({starts[few]['accuracy_carry']:.1%} → {runs[few]['accuracy_carry']:.1%}): a carry is one more digit to "
       "learn, and a call is rewarded only when the answer after it is right (the next section measures how often it "
       "was)."
       if dropped else
       "GRPO did not drop the tool in this run."),
    f"- From every carry demonstration, greedy tool use on carry prompts went "
    f"{starts['every carry demo']['tool_use_carry']:.1%} → {runs['every carry demo']['tool_use_carry']:.1%} "
    f"(no carry: {runs['every carry demo']['tool_use_no_carry']:.1%}), sampled {sampled['every carry demo'][0]:.3f} → "
    f"{sampled['every carry demo'][1]:.3f}: "
    + ("GRPO keeps a tool the policy already relies on; the next section measures whether a call paid for this policy."
       if runs["every carry demo"]["tool_use_carry"] >= 0.5 else "GRPO did not keep the tool in this run."),
]
display(Markdown("\n".join(lines)))
BENCH = committed_benchmarks("tools")  # the same runs over three seeds (`make bench`); None on Colab
if BENCH:
    sys.path.insert(0, str(BENCH))
    from tables import load, masking_verdicts, tools_verdicts

    bench = load("tools", BENCH / "results")
    bench_lines = tools_verdicts(bench)
    print(f"Over seeds (the committed benchmark, benchmarks/tinygpt_tools.py: seeds "
          f"{', '.join(map(str, bench['seeds']))}, {bench['grpo_steps']} GRPO steps from each start; "
          "'tool, few demos' is the start with 100 demos, 'no tool, same extra SFT' the control):\n"
          + "\n".join(bench_lines))
else:
    bench_lines = []
    print("benchmarks/results/tools.json is not here (e.g. on Colab): see the tools table in docs/results.md")

# %% [markdown]
# ### Does a call pay?
#
# The dashboard's *reward by tool use* answers the question asked before it, on the carry prompts where the
# tool could help; the next cell prints it with the number of episodes behind each rate.


# %%
def share(x):
    return "none sampled" if x is None else f"{x:.1%}"


for name, (w, wo) in pays.items():
    n_w, n_wo = pays_n[name]
    print(f"start {name:17}: carry prompts, first {k_first} steps: right with a call {share(w):>12} "
          f"({n_w} episodes), without one {share(wo):>12} ({n_wo} episodes)")
w, wo = pays[few]
calls_lost = w is not None and wo is not None and w <= wo
print(
    f"\nFrom 100 tool demonstrations, early in GRPO, the carry episodes that called were right {share(w)} of the time "
    f"({pays_n[few][0]} episodes) and those that did not {share(wo)} ({pays_n[few][1]} episodes). "
    + ("A call paid less than the policy's own answer, so GRPO had no reason to raise it: it raised the other path, "
       f"learning the carry ({starts[few]['accuracy_carry']:.1%} → {runs[few]['accuracy_carry']:.1%} on held-out "
       f"carry prompts), and the sampled call rate went {sampled[few][0]:.3f} → {sampled[few][1]:.3f}."
       if calls_lost else
       f"A call paid at least as much as the policy's own answer; the sampled call rate went {sampled[few][0]:.3f} → "
       f"{sampled[few][1]:.3f}."))

# %% [markdown]
# The honest reading: **RL raises what pays relative to the alternatives it samples, as the policy can do it
# now.** A tool is one way to be right on carry prompts; learning the carry is another. From a start where
# calls are rare, they are also a half-learned skill, and on this task the other path is short: the
# carry is one more unit in one digit, which GRPO learns in the same run (the carry accuracy above). From a start where
# the policy already calls on carry prompts and answers correctly after the call, the episodes that call are
# the rewarded ones and the tool stays. Neither start gets a reward *for* calling: the verifier scores
# only the final answer.
#
# So "RL raises tool use where it pays" holds with its condition, *where a call pays for this policy*, and
# from the rarely-calling start here it did not (the lines above). A tool should win where the policy's own
# answers stay wrong for longer than its calls take to become right: harder sums (3 or 4 digits, carry
# chains), or a start that writes calls well but rarely. The runs here do not show such a setting; the
# benchmark's lines above say whether the same starts, over three seeds, show a tool start ahead. To explore:
# `TaskConfig.tool_call="sum"` makes the teacher call `[37+45]` for the whole sum (the policy then only copies
# the tool's answer), and `env_start(..., steps=…)` sets how long SFT teaches the call; compare the two numbers
# above.
#
# ## 4. The ablation: the environment's tokens in the loss
#
# Same start (every carry demonstration uses the tool), same GRPO, one change: `mask_env_tokens=False`,
# so the tool's answer gets a log-probability, a share of the episode's advantage, and a loss term.
#
# **Predict first.** Will accuracy change much? And what will the policy have learned about the
# tool's answer — the two digits after `[7+5]`?

# %%
runs["env tokens in the loss"], logs["env tokens in the loss"] = grpo_run(
    tool_model, tool_tasks["every carry demo"], start_weights["every carry demo"], mask_env_tokens=False)
unmasked_weights = copy.deepcopy(tool_model.state_dict())


@torch.no_grad()
def tool_answer(model, task, pairs):
    """Teacher-forced on ``prompt [a1+b1] s``: the summed log-prob of the tool's answer ``s`` under the
    policy (mean over pairs), and the share of pairs where greedy decoding would write ``s`` itself."""
    tok = task.tokenizer
    texts = [task.prompt_text(a, b) + f"[{a % 10}+{b % 10}]" + str(a % 10 + b % 10) for a, b in pairs]
    ids = torch.tensor([[tok.bos_token_id, *tok.convert_tokens_to_ids(list(t))] for t in texts], device=DEVICE)
    logp = model(input_ids=ids).logits.float().log_softmax(-1)[:, :-1]
    target = ids[:, 1:]
    span = slice(target.shape[1] - 2, target.shape[1])  # the two digits of a carry column's sum
    token_logp = logp.gather(-1, target.unsqueeze(-1)).squeeze(-1)[:, span]
    own = (logp.argmax(-1)[:, span] == target[:, span]).all(-1)
    return float(token_logp.sum(-1).mean()), float(own.float().mean())


carry_pairs = [p for p in task.heldout_pairs if task.ones_carry(*p)]
probe = {}
for name, weights in [("SFT start", start_weights["every carry demo"]), ("GRPO, masked", kept_weights),
                      ("GRPO, env tokens in the loss", unmasked_weights)]:
    tool_model.load_state_dict(weights)
    probe[name] = tool_answer(tool_model, tool_tasks["every carry demo"], carry_pairs)

_lp_gap = probe["GRPO, env tokens in the loss"][0] - probe["GRPO, masked"][0]
display(predict("With the environment's tokens in the loss, the log-prob the policy gives the tool's answer …",
                ["rises by more than 1 nat (it learns to write the answer itself)", "moves by less than 1 nat",
                 "falls by more than 1 nat"],
                "rises by more than 1 nat (it learns to write the answer itself)" if _lp_gap > 1
                else "falls by more than 1 nat" if _lp_gap < -1 else "moves by less than 1 nat",
                f"Measured: {_lp_gap:+.2f} nats against the masked run; the numbers are below."))

# %%
print(row("GRPO, masked", runs["every carry demo"]))
print(row("GRPO, env tokens in the loss", runs["env tokens in the loss"]))
print()
for name, (lp, own) in probe.items():
    print(f"{name:30} log-prob of the tool's answer {lp:7.2f}   greedy writes it itself: {own:6.1%}")
masked_lp, unmasked_lp = probe["GRPO, masked"][0], probe["GRPO, env tokens in the loss"][0]
gap_acc = runs["env tokens in the loss"]["accuracy"] - runs["every carry demo"]["accuracy"]
print("\nWith the environment's tokens in the loss the policy gives the tool's answer a log-prob of "
      f"{unmasked_lp:.2f} instead of {masked_lp:.2f} "
      f"(×{torch.tensor(unmasked_lp - masked_lp).exp():.3g} more likely), "
      "while held-out "
      f"accuracy moved {100 * gap_acc:+.1f} points (in this run).")
masking_lines = masking_verdicts(bench, len(task.heldout_pairs)) if BENCH else []
if masking_lines:
    print("Over seeds (the committed benchmark, as in section 3):\n" + "\n".join(masking_lines))

# %% [markdown]
# Accuracy is a weak witness here (the line above gives the difference); what the policy *learned* is not. Trained on
# the tool's tokens, the policy learns to write the tool's output itself: the probability it gives the calculator's
# answer grows, and the closer it gets, the less the call matters — on a real task, a model that
# "hallucinates tool results" instead of waiting for them. Masked, the tool's answer stays something the
# policy reads, never something it writes. This is why TRL masks tool results (`tool_mask`) and why
# every agent trainer carries a mask of the policy's own tokens.
#
# ## 5. A loose verifier in the environment
#
# Section 3's runs never paid for calling. Suppose the environment's author wants to encourage the tool
# and writes the verifier as *"if the policy used the calculator, trust the answer"* — any final answer
# after a successful call scores 1. Nothing else changes. This is [reward hacking](11_reward_hacking.ipynb)
# again, now living in the environment: the verifier is part of the environment, so a bug there is a
# bug in the reward.

# %%
class TrustingCalculator(CalculatorEnv):
    """The calculator with a loose verifier: after a successful tool call, any final answer scores 1."""

    def step(self, turn):
        out = super().step(turn)
        if out.done and "answer" in out.info and self.tool_calls > self.tool_errors:
            return out._replace(reward=1.0)
        return out


mid_cfg = dataclasses.replace(cfg, task=dataclasses.replace(cfg.task, env="calculator", tool_demos=300))
# 300 carry demos use the tool
mid_task, mid_model, _ = env_start(mid_cfg, seed=SEED, steps=TOOL_SFT_STEPS, device=DEVICE)
loose_task = EnvTask(mid_cfg.task, env_cls=TrustingCalculator)  # the same task and tool; only the verifier differs
before = {"proxy": evaluate(mid_model, loose_task), "strict": evaluate(mid_model, mid_task)}
runs["loose verifier"], logs["loose verifier"] = grpo_run(tool_model, loose_task, mid_model.state_dict())
proxy = evaluate(tool_model, loose_task)  # what the loose verifier reports on the held-out prompts
strict = evaluate(tool_model, mid_task)  # the same policy, scored by the strict verifier
sampled["loose verifier"] = (call_rate(logs["loose verifier"], True), call_rate(logs["loose verifier"], False))
display(predict(f"A start whose SFT saw 300 tool demonstrations, then {RL_STEPS} GRPO steps with the trusting "
                "verifier. The sampled tool-call rate …",
                ["falls, as from the 100-demonstration start", "rises"],
                "rises" if sampled["loose verifier"][1] > sampled["loose verifier"][0]
                else "falls, as from the 100-demonstration start",
                f"In this run: {sampled['loose verifier'][0]:.3f} → {sampled['loose verifier'][1]:.3f} "
                f"(first vs last quarter of the steps)."))

# %%
print(f"sampled call rate: {sampled['loose verifier'][0]:.3f} over the first quarter of the steps → "
      f"{sampled['loose verifier'][1]:.3f} over the last")
for name, r in [("start", before), (f"after {RL_STEPS} GRPO steps", {"proxy": proxy, "strict": strict})]:
    print(f"{name:22} loose verifier's score {r['proxy']['accuracy']:6.1%}   strict accuracy "
          f"{r['strict']['accuracy']:6.1%}   tool use: carry {r['strict']['tool_use_carry']:6.1%}, no carry "
          f"{r['strict']['tool_use_no_carry']:6.1%}")
fig = dashboard(logs["loose verifier"], title="GRPO against the trusting verifier",
                panels=["reward on the policy's samples", "tool calls (sampled episodes)",
                        "reward by tool use (sampled)"])
plt.show()
proxy_gain = proxy["accuracy"] - before["proxy"]["accuracy"]
strict_gain = strict["accuracy"] - before["strict"]["accuracy"]
display(Markdown(
    f"In this run (one seed; the tools benchmark does not run this verifier), against the trusting verifier the "
    f"sampled call rate went {sampled['loose verifier'][0]:.3f} → "
    f"{sampled['loose verifier'][1]:.3f}. The verifier's held-out score went {before['proxy']['accuracy']:.1%} → "
    f"{proxy['accuracy']:.1%} ({100 * proxy_gain:+.1f} points); strict accuracy of the same policy "
    f"{before['strict']['accuracy']:.1%} → {strict['accuracy']:.1%} ({100 * strict_gain:+.1f} points). "
    + (f"The reported score gained {100 * (proxy_gain - strict_gain):.1f} points more than the truth, and the "
       "policy calls more: RL moves towards the call because the call is paid."
       if proxy_gain - strict_gain > 0.02 and sampled["loose verifier"][1] > sampled["loose verifier"][0] + 0.02 else
       f"In this budget RL did not visibly chase the loophole (the call rate and the gap barely moved); what the "
       f"loose verifier does at once is over-report: {100 * (proxy['accuracy'] - strict['accuracy']):.1f} points of "
       "its score are answers the strict checker rejects.")))

# %% [markdown]
# Two audits catch this, and both are cheap: score a sample of episodes with an independent strict
# checker (the gap above), and read the dashboard's *reward by tool use* — when episodes that call are
# paid more than their answers are worth, the verifier is paying for the call.
#
# ## 6. The same ideas in TRL and NeMo Gym

# %%
display(Markdown(f"Sources: TRL {cite('trl')} (GRPO with `environment_factory`), NeMo Gym {cite('nemo_gym')} "
                 f"(environments as data, harness, tools and verifier), OpenEnv {cite('openenv')} (`reset()` / "
                 "`step()`)."))

# %% [markdown]
# | here (`course_lib.tinygpt.environments`) | TRL | NeMo Gym / OpenEnv |
# |---|---|---|
# | `CalculatorEnv.reset(pair)` → the prompt | `environment_factory`: one environment per rollout; its `reset` may return text for the prompt | a resource server's episode start / OpenEnv `reset()` |
# | `step(turn)` → `(observation, reward, done, info)` | the environment's public methods are the tools; the trainer parses tool calls from the chat template and appends the results | tool endpoints of the resource server / OpenEnv `step(action)` |
# | the verifier inside the environment (`step`'s reward at the end) | `reward_funcs`, or the environment's `get_reward` | the resource server's `verify` |
# | `EpisodeLimits.max_tool_calls` | `GRPOConfig.max_tool_calling_iterations` | the agent harness's turn limit |
# | `EpisodeLimits.max_tokens` (policy + environment tokens) | `max_completion_length` (tool results count in it) | the harness's token budget |
# | the policy mask; `mask_env_tokens=False` is the ablation | `tool_mask`: tool results are out of the loss (always on) | rollouts returned with which tokens the model generated |
# | `--env calculator` on `train sft|grpo` | `GRPOTrainer(..., environment_factory=...)` (experimental in TRL 1.16) | an environment config beside the RL framework (NeMo RL) |
#
# The simplifications here, said out loud: one tool with one operation; the tool syntax is three extra
# characters, not a chat template; the trainers reward only the end of an episode (section 1 scores a group
# per step, by hand); episodes run synchronously
# with the update; PPO with an environment is refused (`train ppo --env` explains why). The
# [graduating to TRL](18_graduating_to_trl.ipynb) notebook runs TRL's trainers on this tiny GPT.
#
# ## 7. Check yourself
#
# 1. An episode is `[7+5]`, `12`, `82<eos>` after the prompt. Which tokens get a log-probability term?
#    <details><summary>Answer</summary>
#    The policy's: `[7+5]` and `82<eos>` (8 tokens). `12` is the environment's observation: context only.
#    </details>
# 2. GRPO dropped the tool in one run and kept it in another, with the same verifier. What differed?
#    <details><summary>Answer</summary>
#    The start: how often the policy called, and how well it answered after a call. GRPO compares the
#    episodes it samples; a behaviour it rarely samples, or that is not better than the alternative it
#    samples, is not reinforced.
#    </details>
# 3. Why does accuracy not reveal the masking ablation, and what does?
#    <details><summary>Answer</summary>
#    Both runs call the tool on carry prompts and read its answer, so masking changes little about
#    whether the final answer is right (section 4 printed the difference in this run). The probe of what
#    the policy predicts at the environment's positions does: unmasked, it learns to write the tool's
#    output itself.
#    </details>
# 4. Name the four parts of an environment whose change changes the training problem.
#    <details><summary>Answer</summary>
#    Data (prompts), harness (turns, call syntax, limits), tools, verifier.
#    </details>

# %%
print(clock.report())

# %% [markdown]
# **Graded: systems14 Q7** covers this notebook: the policy's own tokens in an episode, per-token advantages
# of a group with one reward per episode and with one reward per step, the tool-call rate on carry and
# no-carry prompts, and a loose verifier against a strict one. Do it now.
