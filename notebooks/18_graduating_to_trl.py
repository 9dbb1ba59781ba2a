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
# # 18 · Graduating to TRL: the same recipes in Hugging Face's trainer
#
# *Lecture §6 (DPO), §9 and §12 (GRPO and its options), §17 (say what you ran).*
#
# Everything so far ran on `course_lib`, small enough to read in an afternoon. To train a real
# model, on Colab or on several GPUs, people use [TRL](https://huggingface.co/docs/trl). This
# notebook moves the course's recipes there without changing them: `course_lib.trl.trl_bridge` turns a
# course config into TRL's config, datasets and reward function, and lists every option that has
# no exact TRL equivalent. After this notebook you will be able to
#
# 1. read a bridged recipe and name the settings where TRL's formula differs from the course's;
# 2. train the tiny GPT with TRL's `GRPOTrainer` and `DPOTrainer` beside `course_lib` on the same
#    SFT start, and compare reward curves, held-out accuracy and seconds per step;
# 3. point the same GRPO recipe at a real instruct model on a GPU, and launch it on several GPUs.
#
# Budget: the last cell prints how long this run took (`COURSE_FAST=1`, CI's quick check: the same task,
# model and SFT start, fewer steps).

# %%
import copy
import dataclasses
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile

if importlib.util.find_spec("trl") is None:  # Colab does not ship TRL; the course pins the tested versions
    subprocess.run([sys.executable, "-m", "pip", "install", "-q", "trl==1.16.0", "accelerate==1.15.0"],
                   check=True, env={**os.environ, "PIP_ROOT_USER_ACTION": "ignore"})
    importlib.invalidate_caches()

import matplotlib.pyplot as plt
import torch
from IPython.display import display

from course_lib.formulas.advantages import grpo_advantages
from course_lib.lesson.explore import predict
from course_lib.lesson.stopwatch import Stopwatch
from course_lib.run.pipeline import rl_generator
from course_lib.run.starts import sft_start
from course_lib.run.verdicts import committed_benchmarks
from course_lib.tinygpt.evaluation import evaluate
from course_lib.tinygpt.model import n_params
from course_lib.tinygpt.runtime import MetricsLog
from course_lib.trainers.configs import get_config
from course_lib.trainers.dpo import build_preference_pairs, reference_logprobs, train_dpo
from course_lib.trainers.grpo import train_grpo
from course_lib.trainers.trainer import TrainContext
from course_lib.trl import trl_bridge

trl_bridge.quiet()  # TRL's progress bars and transformers' deprecation notices, nothing else
FAST = os.environ.get("COURSE_FAST") == "1"  # the same comparison with fewer steps (CI's quick check)
clock = Stopwatch("COURSE_FAST=1" if FAST else "full")
cfg = get_config("cpu")
cfg.grpo = dataclasses.replace(cfg.grpo, steps=10 if FAST else 60, eval_every=5 if FAST else 10)
if FAST:
    cfg.dpo = dataclasses.replace(cfg.dpo, pair_prompts=512, steps=30)
SEED = 0
OUT = tempfile.mkdtemp(prefix="trl-")  # TRL wants an output folder; nothing is saved there

# %% [markdown]
# ## 1. The recipe, translated
#
# *Predict first:* the course's GRPO recipe has options for the advantage, the averaging unit,
# zero-variance groups and the KL. Which of them do you expect TRL to lack, or to compute
# differently, in this recipe?

# %%
bridged = trl_bridge.translate(cfg, "grpo", output_dir=OUT)
FOUR = {"grpo.advantage": "the advantage", "grpo.unit": "the averaging unit",
        "grpo.zero_variance": "zero-variance groups", "grpo.kl": "the KL"}
differ_trl = [label for key, label in FOUR.items() if any(u.option.startswith(key) for u in bridged.unmatched)]
display(predict("Of the four, which one does TRL compute differently in this recipe?",
                [*FOUR.values(), "none of them", "more than one"],
                differ_trl[0] if len(differ_trl) == 1 else "none of them" if not differ_trl else "more than one",
                "The bridge's report in the next cell lists every option with no exact TRL equivalent, and why."))

# %%
print(bridged.report())

# %% [markdown]
# Most names carry over one for one (`num_generations`, `epsilon`, `epsilon_high`, `beta`,
# `num_iterations`, `max_completion_length`, `temperature`). A course step is B prompts × G
# completions, so `per_device_train_batch_size` is B·G and `steps_per_generation=1`. Two settings
# are the bridge's, not TRL's defaults: TRL 1.x turns on `bf16` and gradient checkpointing by
# default, even on a CPU; the course computes in float32 on a CPU without checkpointing.
# Everything in the "no exact TRL equivalent" list is a place where the two runs below differ.
#
# ## 2. One formula, two conventions
#
# TRL's `scale_rewards="group"` divides by the *sample* std (ddof = 1) plus 1e-4; the course
# trainer divides by the population std. By hand on one group, then against the library. Predict first:

# %%
display(predict("Rewards [1,0,0,1,0,0,1,0] (G = 8). TRL's advantage divided by the course's is about …",
                ["1 (the same)", "√(7/8) ≈ 0.935", "7/8 = 0.875", "8/7 ≈ 1.143"], "√(7/8) ≈ 0.935",
                "The sample std is √(G/(G − 1)) times the population std, so every advantage shrinks by "
                "√((G − 1)/G); the 1e-4 barely moves it."))

# %%
r = torch.tensor([1.0, 0, 0, 1, 0, 0, 1, 0])
G = len(r)
course_adv = grpo_advantages(r)
trl_by_hand = (r - r.mean()) / (r.std(correction=1) + 1e-4)
trl_form = grpo_advantages(r, ddof=1, epsilon=1e-4)
ratio = float(trl_by_hand[0] / course_adv[0])
print("course (population std):", [round(x, 4) for x in course_adv.tolist()])
print("TRL by hand            :", [round(x, 4) for x in trl_by_hand.tolist()])
print("library, ddof=1, 1e-4  :", [round(x, 4) for x in trl_form.tolist()])
print(f"ratio TRL / course = {ratio:.4f}; sqrt((G-1)/G) = {((G - 1) / G) ** 0.5:.4f}")

# %% [markdown]
# The two differ by one constant factor per group, close to √((G−1)/G), which AdamW cancels within the
# conditions of [Group baselines, section 3](04_group_baselines.ipynb). It is still a different number, and
# `tests/test_trl_parity.py` pins it by running TRL's own advantage code. The same tests check, on identical tensors
# and to 1e-6, that the clipped surrogate, the three averaging units (`grpo`, `dapo`/`bnpo`, `dr_grpo`), k3 in the
# loss,
# `mask_truncated_completions`, DPO, IPO (length-normalised), DPO + NLL and SimPO agree.
#
# ## 3. One SFT start for both
#
# The course's SFT stage, the start every tiny-GPT notebook shares (trained once per machine, `course_lib.run.starts`);
# both trainers start from copies of it.

# %%
task, sft_model, _ = sft_start(cfg, seed=SEED, device=DEVICE)
L = cfg.grpo.max_completion_length
baseline = evaluate(sft_model, task, max_completion_length=L)
print(f"SFT held-out exact match {baseline['accuracy']:.1%}")

# %% [markdown]
# ## 4. GRPO: `course_lib` beside TRL's `GRPOTrainer`
#
# Same recipe (B = 32 × G = 8, L_max = 6, μ = 1, β = 0, lr 3e-4, token mean), same prompts
# sampler and strict checker. *Predict*, in the question below the runs: will TRL's run reach the same
# held-out accuracy? Will its steps take the same time?

# %%
course_model = copy.deepcopy(sft_model)
log = MetricsLog()
course_out = train_grpo(course_model, task, cfg.grpo, TrainContext(log=log, show_progress=False),
                        generator=rl_generator(SEED))
course = {
    "final": evaluate(course_model, task, max_completion_length=L)["accuracy"],
    "reward": [row["reward_mean"] for row in log.rows],
    "curve": [(0, baseline["accuracy"])] + [(row["step"], row["accuracy"]) for row in log.rows if "accuracy" in row],
    "step_s": statistics.median(row["gen_seconds"] + row["update_seconds"] + row["other_seconds"] for row in log.rows),
    "seconds": course_out["rl_seconds"],
}

trl_model = copy.deepcopy(sft_model)
held = trl_bridge.HeldoutAccuracy(task, cfg.grpo.eval_every, max_completion_length=L)
rl_generator(SEED)
trainer, _ = trl_bridge.make_trainer("grpo", trl_model, task, cfg, seed=SEED + 1, output_dir=OUT, callbacks=[held])
trainer.train()
history = [row for row in trainer.state.log_history if "step_time" in row]
trl = {
    "final": evaluate(trl_model, task, max_completion_length=L)["accuracy"],
    "reward": [row["reward"] for row in history],
    "curve": [(row["step"], row["accuracy"]) for row in held.rows],
    "step_s": statistics.median(row["step_time"] for row in history),
    "seconds": sum(row["step_time"] for row in history),
}
speed = trl["step_s"] / course["step_s"]
display(predict("Same recipe, same start: a TRL GRPOTrainer step takes … a course_lib step",
                ["less than 0.8× the time of", "about the time of (0.8–1.25×)", "more than 1.25× the time of"],
                "less than 0.8× the time of" if speed < 0.8 else "more than 1.25× the time of" if speed > 1.25
                else "about the time of (0.8–1.25×)",
                f"Measured: {speed:.2f}× (medians over the steps). The cell after the figure says why."))

# %%
print(f"{'trainer':12} {'held-out':>17} {'s/step':>7} {'RL s':>6}")
for name, run in (("course_lib", course), ("TRL", trl)):
    print(f"{name:12} {baseline['accuracy']:6.1%} → {run['final']:6.1%} {run['step_s']:7.3f} {run['seconds']:6.1f}")

# %%
fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.5))
for name, run in (("course_lib", course), ("TRL GRPOTrainer", trl)):
    ax1.plot(range(1, len(run["reward"]) + 1), run["reward"], label=name)
    ax2.plot(*zip(*run["curve"]), marker="o", label=name)
ax1.set(xlabel="step", ylabel="mean reward on own samples", title="reward")
ax2.set(xlabel="step", ylabel="held-out exact match", title="held-out accuracy")
ax2.legend()
plt.tight_layout()
plt.show()

# %% [markdown]
# Two runs of one seed cannot rank the trainers: the next cell's "in this run" line is one draw. Its "over seeds"
# lines are `benchmarks/trl_vs_course_grpo.py`, which repeats the comparison at three seeds (with TRL's gradient
# checkpointing off and on; docs/trl.md reports its medians and speeds), each difference read seed by seed with
# the rule of [Tiny GPT: SFT then DPO](08_tiny_gpt_dpo.ipynb), section 8: beyond the seed spread only when every
# seed agrees, by more than the evaluation noise.

# %%
lift_course = course["final"] - baseline["accuracy"]
lift_trl = trl["final"] - baseline["accuracy"]
print(f"In this run (one seed), held-out lift over SFT: course_lib {100 * lift_course:+.1f} points, TRL "
      f"{100 * lift_trl:+.1f} points after {cfg.grpo.steps} steps each; course_lib − TRL "
      f"{100 * (course['final'] - trl['final']):+.1f} points.")
BENCH = committed_benchmarks("trl_vs_course_grpo")  # the committed runs over three seeds (`make bench`); None on Colab
if BENCH:
    sys.path.insert(0, str(BENCH))
    from tables import load, trl_verdicts

    bench = load("trl_vs_course_grpo", BENCH / "results")
    bench_lines = trl_verdicts(bench, len(task.heldout_pairs))
    print(f"Over seeds (the committed benchmark, seeds {', '.join(map(str, bench['seeds']))}, {bench['steps']} steps "
          "each; held-out accuracy):\n" + "\n".join(bench_lines))
else:
    bench_lines = []
    print("benchmarks/results/trl_vs_course_grpo.json is not here (e.g. on Colab): see docs/trl.md")
if speed > 1:
    print(f"A TRL step took {speed:.1f}× the course's here. The course trainer does less model work: each group's "
          "prompt runs once (not G times) when sampling and in the update, and zero-variance groups, whose "
          "advantages and so gradients are exactly zero, are left out of the forward and backward passes. Around "
          "its passes TRL also tokenises text prompts, decodes completions, gathers metrics and runs a "
          "general-purpose Trainer loop: fixed costs that weigh heavily next to a "
          f"{n_params(sft_model):,}-parameter model's tiny passes.")
else:
    print(f"A TRL step took {speed:.2f}× the course's here: no slower on this run.")

# %% [markdown]
# ## 5. DPO: `course_lib` beside TRL's `DPOTrainer`
#
# The same offline pairs (sampled once from the SFT policy, one accepted and one rejected answer
# per prompt) become a TRL preference dataset of prompt / chosen / rejected text. Both runs cache
# the reference log-probs before training (`precompute_ref_log_probs=True`).

# %%
pairs = build_preference_pairs(sft_model, task, cfg.dpo, generator=rl_generator(SEED))
print(f"{pairs['n_pairs']} pairs from {pairs['n_prompts']} prompts; first as TRL sees it:",
      trl_bridge.preference_dataset(task, pairs)[0])

# %% [markdown]
# *Predict*, in the question below the runs: how close will the two held-out accuracies be?

# %%

course_dpo = copy.deepcopy(sft_model)
data = {**pairs, **reference_logprobs(course_dpo, pairs, prompt_length=task.prompt_length)}
dpo_out = train_dpo(course_dpo, task, cfg.dpo, data, TrainContext(show_progress=False), generator=rl_generator(SEED))

trl_dpo = copy.deepcopy(sft_model)
dpo_trainer, _ = trl_bridge.make_trainer("dpo", trl_dpo, task, cfg, seed=SEED + 1, output_dir=OUT, pairs=pairs)
dpo_trainer.train()
trl_dpo_seconds = dpo_trainer.state.log_history[-1]["train_runtime"]
dpo_results = {
    "course_lib": (evaluate(course_dpo, task)["accuracy"], dpo_out["rl_seconds"]),
    "TRL DPOTrainer": (evaluate(trl_dpo, task)["accuracy"], trl_dpo_seconds),
}
dpo_gap = abs(dpo_results["course_lib"][0] - dpo_results["TRL DPOTrainer"][0])
display(predict("course_lib's DPO and TRL's DPOTrainer, same pairs and steps: their held-out accuracies end …",
                ["within 5 points of each other", "more than 5 points apart"],
                "within 5 points of each other" if dpo_gap <= 0.05 else "more than 5 points apart",
                f"Measured: {100 * dpo_gap:.1f} points apart."))

# %%
for name, (acc, seconds) in dpo_results.items():
    print(f"{name:15} held-out {baseline['accuracy']:.1%} → {acc:.1%} in {seconds:.1f} s ({cfg.dpo.steps} steps)")

# %% [markdown]
# The course samples each DPO batch with replacement, TRL walks shuffled epochs over the pairs
# (listed by the bridge), so the two runs see the pairs in a different order: compare the
# direction and size of the change, not the third digit.
#
# ## 5b. KTO and ORPO in TRL's words
#
# The same pairs feed two more methods from the lecture's direct-preference family. KTO takes them
# apart into single answers labelled desirable or undesirable and compares each answer's implied
# reward with a reference point z0, a detached KL estimate on the batch; ORPO trains from the base
# model in one stage, with no reference model. `trl_bridge.make_trainer("kto", ...)` and
# `make_trainer("orpo", ...)` train them with TRL's `KTOTrainer` and `ORPOTrainer` (the latter
# still in `trl.experimental` in TRL 1.16). *Predict first:* which of their course options do you
# expect TRL's `KTOConfig` and `ORPOConfig` to lack, or to compute differently?

# %%
preference_bridges = {kind: trl_bridge.translate(cfg, kind, output_dir=OUT) for kind in ("kto", "orpo")}
orpo_nll_differs = any("NLL" in str(u) for u in preference_bridges["orpo"].unmatched)
display(predict("For ORPO, which part of the course's loss does TRL compute differently?",
                ["the odds-ratio penalty", "the NLL term (which tokens it counts)", "nothing: ORPO matches exactly"],
                "the NLL term (which tokens it counts)" if orpo_nll_differs else "nothing: ORPO matches exactly",
                "The bridge's list of unmatched options below says which, and why."))

# %%
for kind, b in preference_bridges.items():
    shown_args = ", ".join(f"{k}={b.config[k]!r}" for k in ("beta", "per_device_train_batch_size", "learning_rate"))
    print(f"{kind} -> trl.{b.trainer}(args=trl.{b.config_class}({shown_args}, ...))")
    print("\n".join(f"    - {u}" for u in b.unmatched))

# %% [markdown]
# KTO's loss, its weights and z0 are TRL's exactly; the bridge hands TRL the answers in the course's
# shuffled order and TRL walks them sequentially, so both trainers see the same batches
# (`tests/test_trl_bridge.py` compares their logged losses step by step). ORPO's odds-ratio term is
# TRL's, but TRL's NLL also counts the prompt tokens. The whole course ↔ TRL 1.16 table, the one
# docs/trl.md shows, is data in `course_lib.trl.trl_translate`:

# %%
from IPython.display import Markdown, display

from course_lib.trl.trl_translate import mapping_markdown

display(Markdown(mapping_markdown()))

# %% [markdown]
# ## 6. The same recipe on a real instruct model
#
# On a Colab GPU (*Runtime → Change runtime type*), the cell below loads a small instruct model,
# asks it the task's questions as chat messages ("What is 7 + 58? Reply with the number only.")
# and trains it with the same GRPO options and the same strict checker, applied to its text.
# Without a GPU it runs the identical code path on a tiny *random* chat model built from a config
# (no download): its rewards mean nothing, it only shows the code runs. We have not measured the
# GPU run ourselves; what it reaches is yours to find out.

# %%
if DEVICE.type == "cuda":
    from transformers import AutoModelForCausalLM, AutoTokenizer

    chat_tokenizer = AutoTokenizer.from_pretrained(trl_bridge.INSTRUCT_MODEL)
    # bf16 weights from sm_80 (A100, L4, H100); float32 on a T4, where TRL trains in fp16 with a GradScaler
    chat_model = AutoModelForCausalLM.from_pretrained(trl_bridge.INSTRUCT_MODEL,
                                                      dtype=trl_bridge.instruct_dtype(DEVICE)).to(DEVICE)
    chat_grpo = dict(steps=50, batch_prompts=8, num_generations=8, max_completion_length=16, learning_rate=1e-6)
else:
    chat_model, chat_tokenizer = trl_bridge.tiny_instruct_standin(SEED)
    chat_grpo = dict(steps=2, batch_prompts=2, num_generations=4, max_completion_length=8)
chat_cfg = dataclasses.replace(cfg, grpo=dataclasses.replace(get_config("cpu").grpo, **chat_grpo))
chat_trainer, chat_bridged = trl_bridge.instruct_recipe(chat_model, chat_tokenizer, task, chat_cfg, output_dir=OUT)
chat_trainer.train()
chat_rewards = [row["reward"] for row in chat_trainer.state.log_history if "reward" in row]
chat_mean = sum(chat_rewards) / len(chat_rewards)
display(predict(f"{type(chat_model).__name__}, "
                f"{'a real instruct model' if DEVICE.type == 'cuda' else 'random weights'}: its mean strict reward "
                "over the steps is …",
                ["below 0.2", "between 0.2 and 0.8", "above 0.8"],
                "below 0.2" if chat_mean < 0.2 else "above 0.8" if chat_mean > 0.8 else "between 0.2 and 0.8",
                f"Measured: {chat_mean:.3f}. A random model's text is almost never the right number."))

# %%
print(f"{type(chat_model).__name__}: mean strict reward per step {[round(x, 3) for x in chat_rewards]}")

# %% [markdown]
# For the real model the batch is smaller (8 prompts × 8), completions may be longer (16
# tokens) and the learning rate is TRL's own `GRPOConfig` default, 1e-6: 3e-4 suits the tiny GPT
# (343k parameters on the `cpu` config) trained from scratch, not a pretrained 0.5B model.
#
# ## 7. More than one GPU
#
# `configs/accelerate/multi_gpu.yaml` launches one process per GPU. The bridge divides the B·G
# completions of a step among the processes, so a step still sees the same batch:
#
# ```bash
# accelerate launch --config_file configs/accelerate/multi_gpu.yaml --num_processes 4 \
#     -m course_lib.trl.trl_bridge grpo --config gpu --out runs/trl_grpo
# ```
#
# CI runs the same file with `--num_processes 2` on the CPU (two processes, gloo) and checks that
# both end with identical weights.

# %%
for n in (1, 2, 4, 8):
    per_device = trl_bridge.translate(cfg, "grpo", num_processes=n).config["per_device_train_batch_size"]
    print(f"{n} process(es): {per_device} completions per device per step")

# %% [markdown]
# ## Check yourself
#
# 1. Your TRL GRPO run uses `scale_rewards="group"`. Which `course_lib` call reproduces its
#    advantages exactly, and by what factor does the course trainer's default differ?
#    <details><summary>Answer</summary>
#    `grpo_advantages(rewards, ddof=1, epsilon=1e-4)`. The course's population std is
#    √((G−1)/G) times the sample std, so up to the 1e-4 the course's advantages are TRL's divided
#    by √((G−1)/G) (√(7/8) ≈ 0.935 for G = 8): a constant, which AdamW cancels in exact arithmetic
#    ([Group baselines, section 3](04_group_baselines.ipynb)); a gradient clip that acts on some steps
#    can still separate two runs ([Tiny GPT: the GRPO family](09_tiny_gpt_grpo.ipynb), section 4).
#    </details>
# 2. A colleague ports a GRPO run to TRL on a laptop CPU, keeps TRL's defaults and finds each
#    step several times slower than expected. What two defaults would you check first?
#    <details><summary>Answer</summary>
#    `bf16` (TRL 1.x turns it on unless `fp16` is set, even on a CPU, where many processors have no
#    fast bf16 arithmetic) and gradient checkpointing (on by default: it recomputes activations in
#    the backward pass). The bridge sets both from the device and the course's choices.
#    </details>
# 3. The course's run uses `zero_variance="resample"` (DAPO's dynamic sampling). What happens
#    when you translate it?
#    <details><summary>Answer</summary>
#    The bridge lists it under "no exact TRL equivalent": `GRPOTrainer` keeps zero-variance groups
#    with zero advantage and never refills the batch. The TRL run is then the `keep` recipe, and
#    comparing it with a course `resample` run compares two different recipes.
#    </details>

# %%
print(clock.report())
