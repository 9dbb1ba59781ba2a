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
# # 11 · Reward hacking: a loose verifier gets exploited
#
# *Lecture §15, as a pointer: "verifiable" does not mean "unhackable".*
#
# A reward is whatever the checker pays for. When the checker pays for something other than what
# we meant, the policy learns the something else — and every number computed *with that checker*
# says training is going well. Here we train the same tiny GPT twice with GRPO. The two runs share
# everything — starting weights, seed, prompts, temperature, learning rate, length budget — except
# the checker:
#
# - a **loose checker** accepts an answer when its digits appear in order *anywhere* in the output,
#   whatever sits between them (a "lenient" matcher written to tolerate formatting noise);
# - the **strict checker** accepts exactly the answer's digits, then end-of-sequence.
#
# After this notebook you will be able to
#
# 1. recognise reward hacking in a trainer's own metrics: proxy reward up, held-out exact match
#    down, completion length and truncation drifting;
# 2. read, from the run, which dashboard alarm fired first — and which alarms also fire on a
#    healthy run;
# 3. explain what tightening the checker does (it removes the exploit; it does not by itself make
#    the policy better), and what a held-out test with a better checker is for.
#
# **Source.** A proxy reward optimised past the point where it tracks the truth — over-optimisation,
# measured for learned reward models by [Gao et al. 2022](https://arxiv.org/abs/2210.10760); here the proxy is a
# checker.
#
# Budget: the last cell prints how long this run took; `COURSE_FAST=1` (CI) runs the same experiment,
# which is already small. Every sentence below that quotes a number is computed from the run you see.
# `make bench` repeats it over three seeds (section 5); section 5 prints, from its file, on how many
# seeds the loose run was exploited.

# %%
import dataclasses
import os
import sys

import matplotlib.pyplot as plt
import torch
from IPython.display import display

from course_lib.lesson.explore import predict
from course_lib.lesson.stopwatch import Stopwatch
from course_lib.run.dashboard import dashboard
from course_lib.run.hacking import ALARMS, SFT_STEPS, alarm_order, experiment_config, first_alarms
from course_lib.run.starts import sft_start
from course_lib.run.verdicts import committed_benchmarks
from course_lib.tinygpt.evaluation import evaluate, sample_completions
from course_lib.tinygpt.runtime import MetricsLog
from course_lib.tinygpt.task import AdditionTask
from course_lib.trainers.grpo import train_grpo
from course_lib.trainers.trainer import TrainContext

cfg = experiment_config()  # the same with COURSE_FAST=1: this experiment is already small
clock = Stopwatch("COURSE_FAST=1 (the same as the full)" if os.environ.get("COURSE_FAST") == "1" else "full")
SEED = 0
L = cfg.grpo.max_completion_length
_ = torch.manual_seed(SEED)

# %% [markdown]
# ## 1. Two checkers
#
# Both read the characters the model wrote before `<eos>` (or all of them, if it never stopped).
#
# **Predict first.** For the prompt `07+58=` (answer 65), which of `65`, `55`, `5565` and a
# truncated `1637095…` does each checker accept? Answer the question below, then read the next cell.

# %%
task = AdditionTask(cfg.task)
tok = task.tokenizer


def as_ids(text, eos=True):
    return tok.convert_tokens_to_ids(list(text)) + ([tok.eos_token_id] if eos else [])


candidates = [("65", True), ("55", True), ("5565", True), ("1637095", False)]
display(predict("07+58 (answer 65): which completions does the loose checker accept?",
                ["65", "65 and 5565", "65, 5565 and the truncated 1637095…", "all four"],
                "65, 5565 and the truncated 1637095…",
                "It looks for the right digits in order anywhere in what was written; the strict checker "
                "accepts 65 alone. The next cell prints both checkers' verdicts."))

# %%
verdicts = {}
for text, eos in candidates:
    verdicts[text] = (task.strict_reward((7, 58), as_ids(text, eos)), task.loose_reward((7, 58), as_ids(text, eos)))
    print(f"07+58 → {text!r:10} eos={eos!s:5} strict {verdicts[text][0]:.0f}   loose {verdicts[text][1]:.0f}")

# %% [markdown]
# The loose checker pays for `5565` — a hedge between the teacher's wrong answer and the right one —
# and for a truncated spray of digits that happens to contain a 6 followed later by a 5. Whether a
# policy *finds* such outputs depends on how far they are from what it already writes. We start
# from a weak policy (SFT stopped early): honest addition is hard for it, writing more digits is easy.

# %%
# trained once per machine (course_lib.run.starts)
_, model, _ = sft_start(cfg, seed=SEED, steps=SFT_STEPS, device=DEVICE)
start = evaluate(model, task, max_completion_length=L)
start_weights = {k: v.clone() for k, v in model.state_dict().items()}
print(f"start: strict held-out {start['accuracy']:.1%}, loose held-out {start['loose_accuracy']:.1%}")
_ = torch.manual_seed(SEED)
before = sample_completions(model, task, task.heldout_pairs[:6], max_completion_length=L)
print("\n".join(before))

# %% [markdown]
# ## 2. The same GRPO, two checkers
#
# The two configurations are built from one, and the cell prints every option in which they
# differ — there must be exactly one. Every five steps both runs are evaluated on held-out prompts
# with *both* checkers, so the proxy and the truth sit side by side.

# %%
configs = {reward: dataclasses.replace(cfg.grpo, reward=reward) for reward in ("loose", "strict")}
differ = {f.name: (getattr(configs["loose"], f.name), getattr(configs["strict"], f.name))
          for f in dataclasses.fields(configs["loose"])
          if getattr(configs["loose"], f.name) != getattr(configs["strict"], f.name)}
print("options that differ between the two runs:", differ)
assert list(differ) == ["reward"]

# %% [markdown]
# **Predict first**, in the two questions below the runs: after 40 steps, which run has the higher
# *strict* held-out accuracy? Which of these alarms fires first on the loose run: length, truncation,
# entropy, strict accuracy falling, or the gap between the loose and the strict held-out score?

# %%
def grpo_run(reward):
    model.load_state_dict(start_weights)
    log = MetricsLog()
    torch.manual_seed(SEED)
    train_grpo(model, task, configs[reward], TrainContext(log=log), generator=torch.Generator().manual_seed(SEED + 1))
    torch.manual_seed(SEED)
    samples = sample_completions(model, task, task.heldout_pairs[:6], max_completion_length=L)
    return log.rows, evaluate(model, task, max_completion_length=L), samples


rows, final, after = {}, {}, {}
for reward in ("loose", "strict"):
    rows[reward], final[reward], after[reward] = grpo_run(reward)
alarms = {reward: first_alarms(rows[reward], start["accuracy"]) for reward in rows}
order = alarm_order(alarms["loose"])
strict_gap = final["strict"]["accuracy"] - final["loose"]["accuracy"]
display(predict("After 40 steps, which run has the higher strict held-out accuracy?",
                ["the loose-checker run", "the strict-checker run", "they tie"],
                "the strict-checker run" if strict_gap > 0 else "the loose-checker run" if strict_gap < 0
                else "they tie",
                f"Strict held-out: loose run {final['loose']['accuracy']:.1%}, strict run "
                f"{final['strict']['accuracy']:.1%}."))
tied_first = [name for name, step in order if step == order[0][1]] if order else []
display(predict("Which alarm fires first on the loose run?", [*ALARMS, "none fires"],
                tied_first[0] if tied_first else "none fires",
                (f"At step {order[0][1]}: {', '.join(tied_first)}"
                 + (" (tied: any of them counts)" if len(tied_first) > 1
                   else "") + "." if order else "No alarm fired.")
                + " Section 3 prints every alarm's step."))

# %%
for reward in ("loose", "strict"):
    print(f"{reward}-trained: strict held-out {start['accuracy']:.1%} → {final[reward]['accuracy']:.1%}, "
          f"loose held-out {start['loose_accuracy']:.1%} → {final[reward]['loose_accuracy']:.1%}")
print(f"\n{'before':<22} {'after (loose checker)':<26} after (strict checker)")
print("\n".join(f"{b:<22} {a:<26} {c}" for b, a, c in zip(before, after["loose"], after["strict"])))

# %% [markdown]
# `…` marks a completion cut at `max_completion_length` with no `<eos>`.
#
# ## 3. What the dashboard showed, and when

# %%
fig = dashboard(rows["loose"], runs={"loose checker": rows["loose"], "strict checker": rows["strict"]},
                title="Same GRPO, two checkers", baseline_accuracy=start["accuracy"],
                panels=["reward on the policy's samples", "held-out accuracy (greedy)", "completion length",
                        "wasted samples", "policy entropy", "training loss"])
plt.show()

for reward in ("loose", "strict"):
    print(f"{reward} checker")
    print(f"{'step':>5} {'train reward':>12} {'loose held-out':>14} {'strict held-out':>15} {'length':>7} "
          f"{'truncated':>9} {'entropy':>8}")
    for r in (r for r in rows[reward] if "accuracy" in r):
        print(f"{r['step']:5d} {r['reward_mean']:12.2f} {r['loose_accuracy']:14.1%} {r['accuracy']:15.1%} "
              f"{r['completion_length']:7.1f} {r['truncated_rate']:9.1%} {r['entropy']:8.2f}")

print(f"\n{'alarm':38} {'loose run':>10} {'strict run':>11}")
for name in ALARMS:
    show = [str(alarms[r][name]) if alarms[r][name] is not None else "—" for r in ("loose", "strict")]
    print(f"{name:38} {show[0]:>10} {show[1]:>11}")

# %% [markdown]
# The table gives the first step at which each alarm fires ("—": never). The next cell reads the
# run for you: which alarm came first, what the strict run did, and which alarms were false alarms
# (they also fired on the run whose reward was honest).

# %%
false_alarms = [name for name, step in alarms["strict"].items() if step is not None]
gap = {r: final[r]["loose_accuracy"] - final[r]["accuracy"] for r in final}
exploited = gap["loose"] > 0.10 and final["loose"]["accuracy"] < start["accuracy"]
lines = []
if exploited:
    lines.append(f"In this run (one seed) the loose run was exploited: its proxy (loose held-out) ends "
                 f"{gap['loose']:.0%} above the "
                 f"truth (strict held-out {final['loose']['accuracy']:.1%}, from {start['accuracy']:.1%}).")
else:
    lines.append(f"In this run the exploit did not take hold: loose minus strict held-out is {gap['loose']:.0%}.")
if order:
    first_step = order[0][1]
    firsts = [name for name, step in order if step == first_step]
    later = ", ".join(f"{name} (step {step})" for name, step in order if step != first_step)
    lines.append(f"First alarm{'s' if len(firsts) > 1 else ''} on the loose run, at step {first_step}: "
                 f"{', '.join(firsts)}." + (f" Then: {later}." if later else ""))
delta = final["strict"]["accuracy"] - start["accuracy"]
lines.append(f"The strict run, strict held-out: {start['accuracy']:.1%} → {final['strict']['accuracy']:.1%} "
             f"({100 * delta:+.1f} points in this run; section 5 reads it over seeds), completions "
             f"{rows['strict'][-1]['completion_length']:.1f} tokens long at the end.")
lines.append("Alarms that also fired on the strict run (false alarms): " + (", ".join(false_alarms) or "none") + ".")
print("\n".join(lines))

# %% [markdown]
# Mean training reward alone is a poor alarm: it does not say *how* the reward is earned, and in the
# loose run it looks like success. Length and truncation describe the *form* of the outputs and
# need no second checker; the strict held-out test and the loose-minus-strict gap measure the
# *intent*, but only exist because someone wrote a better checker than the training one. An alarm
# that also fires on the healthy run (the strict column) is noise at this threshold: held-out
# accuracy on a weak start is noisy, which is why a single dip is weak evidence.
#
# ## 4. The strict checker: not exploited, and not by itself a better policy
#
# The strict run's only way to earn reward is to add correctly. Its completions stay short and end
# with `<eos>` (compare the two "after" columns in section 2), so the exploit is gone. Whether it
# also *learned* is a separate question: section 3's line says what its accuracy did in your run,
# and section 5 counts the benchmark's seeds on which it moved by more than 2 points in 40 steps, then reads
# the change seed by seed.
# Tightening the verifier removes the exploit; it does not by itself teach the task
# ([Tiny GPT: the GRPO family](09_tiny_gpt_grpo.ipynb)'s longer runs from a stronger start do). A held-out test
# with the *strict* checker is how we knew the loose run needed it.
#
# ## 5. Three seeds (`make bench`)
#
# One seed is one draw. `benchmarks/tinygpt_reward_hacking.py` runs this very experiment at seeds
# 0, 1, 2 and stores every curve in `benchmarks/results/reward_hacking.json`. The cell counts, from
# that file, the seeds whose loose run was exploited (by the same rule as section 3) and the seeds
# whose strict run moved by more than 2 points. Then it reads each change seed by seed with the rule of
# [Tiny GPT: SFT then DPO](08_tiny_gpt_dpo.ipynb), section 8: beyond the seed spread only when every seed
# agrees, by more than the evaluation noise (two standard errors of a difference of two held-out accuracies).
# The cell reads that file when the repository is at hand (not on Colab, where only `course_lib` is
# installed).

# %%
BENCH = committed_benchmarks("reward_hacking")  # the committed runs over three seeds (`make bench`); None on Colab
if BENCH:
    sys.path.insert(0, str(BENCH))
    from tables import hacking_verdicts, load

    bench = load("reward_hacking", BENCH / "results")
    print(f"{'seed':>4} {'checker':>8} {'strict start → end':>20} {'loose start → end':>19}  alarms in order")
    for run in bench["runs"]:
        s, f = run["start"], run["final"]
        fired = ", ".join(f"{n} ({st})" for n, st in alarm_order(run["alarms"])) or "none"
        print(f"{run['seed']:4d} {run['reward']:>8} {s['accuracy']:8.1%} → {f['accuracy']:6.1%} "
              f"{s['loose_accuracy']:8.1%} → {f['loose_accuracy']:6.1%}  {fired}")
    by = {(run["seed"], run["reward"]): run for run in bench["runs"]}
    hacked = [s for s in bench["seeds"]
              if by[s, "loose"]["final"]["loose_accuracy"] - by[s, "loose"]["final"]["accuracy"] > 0.10
              and by[s, "loose"]["final"]["accuracy"] < by[s, "loose"]["start"]["accuracy"]]
    moved = [s for s in bench["seeds"]  # 1e-9: 0.11 − 0.09 is 0.02 plus rounding, not a move above 2 points
             if abs(by[s, "strict"]["final"]["accuracy"] - by[s, "strict"]["start"]["accuracy"]) > 0.02 + 1e-9]
    print(f"\nloose run exploited on {len(hacked)} of {len(bench['seeds'])} seeds; "
          "strict run moved by more than 2 points "
          f"on {len(moved)} of {len(bench['seeds'])} ({bench['rl_steps']} steps)")
    bench_lines = hacking_verdicts(bench)
    print("\n".join(bench_lines))
else:
    bench_lines = []
    print("benchmarks/results/reward_hacking.json is not here (e.g. on Colab): see the table in docs/results.md")

# %% [markdown]
# ## Your turn
#
# Keep the loose checker, but set `mask_truncated=True` (truncated completions leave the loss) and
# re-run: `configs["loose"] = dataclasses.replace(configs["loose"], mask_truncated=True)`, then
# `grpo_run("loose")`. Predict before you run: does the exploit survive?
#
# <details><summary>Answer</summary>
#
# The spray that runs out of room no longer earns gradient, so this exploit is much weaker — but the
# checker is unchanged, and a policy can still hedge *inside* the length budget (`5565` ends with
# `<eos>` and passes). Masking closes one loophole; only the checker says what "correct" means.
# Compare your run's loose-minus-strict gap with section 3's.
# </details>
#
# ## Check yourself
#
# 1. Which alarm fired first in your run, and which would you trust most?
#    <details><summary>Answer</summary>
#    Section 3 prints the order for your run; it can differ between seeds (section 5). The
#    loose-minus-strict gap measures the intent most directly, but it needs the better checker; length
#    and truncation need nothing extra and catch this exploit, not every exploit.
#    </details>
# 2. Why did the policy not simply learn to add correctly, which the loose checker also rewards?
#    <details><summary>Answer</summary>
#    RL amplifies what the policy can already reach. Writing more digits is a small change to the
#    starting policy; correct carries are not. From a strong SFT start
#    ([Tiny GPT: the GRPO family](09_tiny_gpt_grpo.ipynb)) the honest route is close, so the exploit should pay less
#    there — a prediction: this course runs the loose checker only from the weak start (SFT stopped at `SFT_STEPS`);
#    try it from 09's start to test it.
#    </details>
# 3. Why must the two runs differ only in the checker?
#    <details><summary>Answer</summary>
#    Otherwise a difference in outcome could come from the other option. Sampling both runs hotter
#    than the policy (temperature 1.3, say) from a weak start can degrade both runs, and the
#    comparison then says nothing about the checker. With one difference, any gap is the checker's.
#    </details>

# %%
print(clock.report())
