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
# # 07 · Memory and rollout budgets: where the hardware goes
#
# *Pointer for readers of the Module 14 lecture: §10 (worked example D) and §11 (worked example E).
# Everything below stands on its own.*
#
# After this notebook you will be able to
#
# 1. estimate the persistent model-state memory of PPO, DPO and SFT from a parameter count, and say what
#    the estimate leaves out;
# 2. estimate how long an RL step spends generating rollouts versus updating the model;
# 3. use both calculators for your own model size, completion length, throughput and utilisation;
# 4. count memory and time per parameter for set-ups the fixed stages do not cover: models of other
#    sizes, LoRA adapters on a frozen base, and scoring passes by frozen models.

# %%
import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
from IPython.display import display

from course_lib.formulas.budgets import (
    BYTES_PER_PARAM,
    rollout_generation_seconds,
    rollout_tokens,
    stage_memory_gib,
    update_seconds,
)
from course_lib.lesson.explore import figure_png, predict, readout

# %% [markdown]
# ## 1. Bytes per parameter
#
# A model being trained with Adam in mixed precision keeps, for every parameter: bf16 weights (2 bytes),
# bf16 gradients (2), an fp32 master copy (4) and Adam's two fp32 moments (4 + 4) — 16 bytes. A frozen
# bf16 copy keeps only its weights: 2 bytes. A GiB is 2³⁰ bytes.

# %%
n_params = 8.03e9
train_bytes = 2 + 2 + 4 + 4 + 4
frozen_bytes = 2
assert (train_bytes, frozen_bytes) == (BYTES_PER_PARAM["train"], BYTES_PER_PARAM["frozen_bf16"])
trainable_gib = n_params * train_bytes / 2**30  # = course_lib.formulas.budgets.GIB
frozen_gib = n_params * frozen_bytes / 2**30
print(f"8.03B parameters: trainable copy {trainable_gib:.1f} GiB, frozen bf16 copy {frozen_gib:.2f} GiB")

parts = [("bf16 weights", 2), ("bf16 gradients", 2), ("fp32 master", 4), ("Adam m", 4), ("Adam v", 4)]
fig, ax = plt.subplots(figsize=(8, 2.6))
left = 0
for i, (label, nbytes) in enumerate(parts):
    ax.barh(["trained", "frozen"], [nbytes, 2 if i == 0 else 0], left=[left, 0 if i == 0 else 2], color=f"C{i}",
            label=label)
    left += nbytes
ax.set(xlabel="bytes per parameter",
       title=f"16 bytes → {trainable_gib:.1f} GiB, 2 bytes → {frozen_gib:.2f} GiB at 8.03B parameters")
ax.legend(ncol=5, fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.5))
fig.tight_layout()
plt.show()

# %% [markdown]
# ## 2. PPO needs twice DPO's model states
#
# Classical RLHF ([Christiano et al. 2017](https://arxiv.org/abs/1706.03741);
# [Ouyang et al. 2022](https://arxiv.org/abs/2203.02155)) with PPO
# ([Schulman et al. 2017](https://arxiv.org/abs/1707.06347)) has four roles: the policy and the critic are trained; the
# reference and the reward model are frozen. DPO with a resident reference has two: the trained policy and the frozen
# reference.

# %%
ppo_gib = 2 * trainable_gib + 2 * frozen_gib  # policy, critic, reference, reward model
dpo_gib = trainable_gib + frozen_gib  # policy, reference
ratio_mem = ppo_gib / dpo_gib
critic_share = trainable_gib / ppo_gib
print(f"PPO {ppo_gib:.1f} GiB   DPO {dpo_gib:.1f} GiB   ratio {ratio_mem:.2f}   critic = {critic_share:.0%} of PPO")
assert (np.isclose(ppo_gib, stage_memory_gib(n_params, "ppo"))
        and np.isclose(dpo_gib, stage_memory_gib(n_params, "dpo")))

# %%
roles = {  # stage → [(role, GiB)] bottom to top
    "PPO": [("policy (trained)", trainable_gib), ("critic (trained)", trainable_gib),
            ("reference (frozen)", frozen_gib), ("reward model (frozen)", frozen_gib)],
    "DPO": [("policy (trained)", trainable_gib), ("reference (frozen)", frozen_gib)],
    "DPO, cached ref": [("policy (trained)", stage_memory_gib(n_params, "dpo_cached_ref"))],
    "SFT": [("policy (trained)", stage_memory_gib(n_params, "sft"))],
}
colors = {"policy (trained)": "C0", "critic (trained)": "C1", "reference (frozen)": "C2",
          "reward model (frozen)": "C3"}
fig, ax = plt.subplots(figsize=(8, 3.8))
seen = set()
for x, parts in enumerate(roles.values()):
    bottom = 0.0
    for role, gib in parts:
        ax.bar(x, gib, bottom=bottom, color=colors[role], label=None if role in seen else role)
        seen.add(role)
        bottom += gib
    ax.text(x, bottom + 3, f"{bottom:.1f}", ha="center")
ax.set(xticks=range(len(roles)), xticklabels=list(roles), ylabel="GiB of persistent model states",
       title="8.03B parameters, 16 B/param trained, 2 B/param frozen", ylim=(0, 300))
ax.legend(fontsize=8)
fig.tight_layout()
plt.show()

# %% [markdown]
# This is an anatomy diagram, not a cluster quote. It leaves out activations, the KV cache of rollouts (the attention
# keys and values a sampler keeps for every token so far, so that it need not recompute them),
# temporary buffers, sharding across devices, shared backbones, parameter-efficient fine-tuning and other
# optimisers. A GRPO system drops the critic but may still hold a reference for the KL term, a sampling
# snapshot and separate rollout workers (processes that only generate). With a fixed DPO dataset, reference
# log-probabilities can be computed once and cached; the reference then leaves the training job and DPO's budget
# approaches SFT's.
#
# ## 3. Rollout generation can dwarf the update
#
# One RLVR batch (reinforcement learning with verifiable rewards, named by Tülu 3:
# [Lambert et al. 2024](https://arxiv.org/abs/2411.15124)): 256 prompts, 8 completions each, 4,000 generated tokens per
# completion, on 8 devices. Generation decodes one token at a time at an assumed 209.4 tokens/s per device; the update
# is one forward and backward pass over the same tokens, about 6 FLOPs per parameter per token, at 990 TFLOP/s per
# device and 40% model-FLOP utilisation (MFU: the fraction of the hardware's peak arithmetic a training job really
# achieves).

# %%
predict("For this batch of an 8B model, how does the generation time compare with the update time?",
        ["about the same", "generation is about 4× longer", "generation is about 40× longer",
         "the update is longer: backward passes are expensive"],
        "generation is about 40× longer",
        "81.5 min of decoding against 2.08 min of update: 39.25×. Decoding produces one token per forward "
        "pass per sequence; the update processes all tokens in parallel at high utilisation.")

# %%
prompts, per_prompt, tokens_per_completion = 256, 8, 4_000
tokens_per_second, devices = 209.4, 8
flops_per_device, mfu = 990e12, 0.4

tokens = prompts * per_prompt * tokens_per_completion
gen_s = tokens / (devices * tokens_per_second)  # decoding at an assumed aggregate rate per device
update_flops = 6 * n_params * tokens  # one forward + backward pass ≈ 6 FLOPs per parameter per token
upd_s = update_flops / (devices * flops_per_device * mfu)
gen_min, upd_min = gen_s / 60, upd_s / 60
time_ratio = gen_s / upd_s  # computed before rounding either time
print(f"rollout tokens {tokens:,}")
print(f"generation {gen_s:.1f} s = {gen_min:.1f} min   update {upd_s:.1f} s = {upd_min:.6f} min   ratio "
      f"{time_ratio:.4f}")
assert tokens == rollout_tokens(prompts, per_prompt, tokens_per_completion)
assert np.isclose(gen_s,
                  rollout_generation_seconds(prompts, per_prompt, tokens_per_completion, tokens_per_second, devices))
assert np.isclose(upd_s, update_seconds(n_params, tokens, flops_per_device, mfu, devices))

# %%
fig, ax = plt.subplots(figsize=(8, 2.4))
ax.barh(["update (6ND)", "generation"], [upd_min, gen_min], color=["C1", "C0"])
for y, value in enumerate([upd_min, gen_min]):
    ax.text(value + 1, y, f"{value:.1f} min", va="center")
ax.set(xlabel="minutes per RL step", xlim=(0, gen_min * 1.2), title=f"generation takes {time_ratio:.1f}× the update")
fig.tight_layout()
plt.show()

# %% [markdown]
# Nothing in GRPO fixes this ratio: it follows from the completion length, the decode throughput, the model
# size and the utilisation you assumed. It does show why autoregressive decoding, not backpropagation, can
# set the wall-clock scale of RL — and why systems invest in faster inference, adaptive rollout counts and
# lengths, overlapping generation with training, and controlled staleness in asynchronous pipelines
# (at the price of off-policy data: answers sampled by an older policy). The estimate ignores prefill (the one
# parallel pass over the prompt before decoding), reward and reference scoring, extra
# epochs and communication; add them before sizing a real system.
#
# ## 4. Per parameter: models of other sizes, LoRA, and scoring passes
#
# The 16 bytes of section 1 split into 2 bytes for the stored bf16 weight and 14 more that only a
# *trained* parameter needs (gradient 2, fp32 master 4, Adam m and v 4 + 4). Counting per parameter
# handles set-ups the fixed stages do not: a critic smaller than the policy, or **LoRA**, which freezes
# the base model and trains small adapter matrices — only the adapters carry gradients and optimizer
# states. With LoRA, a DPO reference can even be the same base with the adapters switched off (TRL does
# this when no separate reference model is given), so no second copy is stored.

# %%
weight_bytes, extra_trained_bytes = 2, 2 + 4 + 4 + 4
assert weight_bytes + extra_trained_bytes == train_bytes  # the 16 bytes of section 1


def model_gib(stored, trained):
    """GiB of one model that stores `stored` bf16 weights, `trained` of them with gradients and Adam."""
    return (weight_bytes * stored + extra_trained_bytes * trained) / 2**30


adapters = 42e6  # LoRA adapter weights, about 0.5% of the base
lora_dpo_gib = model_gib(n_params + adapters, adapters)  # base frozen, adapters trained, reference = base
small_critic_ppo_gib = model_gib(n_params, n_params) + model_gib(1e9, 1e9) + model_gib(n_params, 0) + model_gib(1e9, 0)
print(f"DPO {dpo_gib:.1f} GiB · DPO with LoRA {lora_dpo_gib:.1f} GiB · "
      f"PPO with a 1B critic and reward model {small_critic_ppo_gib:.1f} GiB (PPO {ppo_gib:.1f})")
assert np.isclose(model_gib(n_params, n_params) + model_gib(n_params, 0), stage_memory_gib(n_params, "dpo"))

# %% [markdown]
# Time can be counted the same way. The 6 FLOPs per parameter per token of the update are a forward pass
# (about 2) and a backward pass (about 4). Scoring the rollout with a frozen model — the reference's
# log-probabilities for the KL term, a reward model's scores — is a forward pass only: about 2 FLOPs per
# parameter of *that* model per token.

# %%
scorers = [n_params, n_params]  # a reference and a reward model of the policy's size
score_s = sum(2 * m * tokens for m in scorers) / (devices * flops_per_device * mfu)
step_s = gen_s + score_s + upd_s
print(f"scoring {score_s:.1f} s = {score_s / upd_s:.3f} × the update; generation {gen_s / step_s:.1%}, "
      f"scoring {score_s / step_s:.1%}, update {upd_s / step_s:.1%} of the step")

# %% [markdown]
# Scoring with two full-size frozen models costs two thirds of an update here — real, but small next to
# decoding. Models of other sizes change only their own term.
#
# ## 5. Calculators
#
# Move the sliders: the memory bars and the time split follow. The model-size slider is in billions of
# parameters; throughput is decoded tokens per second per device.
#
# **One assumption to watch.** By default the decode throughput stays where you set it when the model
# grows, which flatters large models: decoding is usually limited by reading the weights from memory, so
# a model twice as large decodes roughly half as fast on the same hardware. Tick *decode slows with model
# size* to scale the throughput by 8.03B / (model size) — a rough rule, not a measurement.

# %%
wide = {"description_width": "190px"}
size_slider = widgets.FloatSlider(value=8.03, min=0.5, max=70.0, step=0.01, description="parameters (billions)",
                                  style=wide, layout={"width": "560px"})
length_slider = widgets.IntSlider(value=4_000, min=100, max=32_000, step=100, description="tokens per answer",
                                  style=wide, layout={"width": "560px"})
throughput_slider = widgets.FloatSlider(value=209.4, min=20.0, max=2_000.0, step=0.1,
                                        description="decode tokens/s per device", style=wide,
                                        layout={"width": "560px"})
mfu_slider = widgets.FloatSlider(value=0.4, min=0.05, max=1.0, step=0.01, description="MFU (update)",
                                 style=wide, layout={"width": "560px"})
coupled = widgets.Checkbox(value=False, description="decode slows with model size (throughput × 8.03B / size)",
                           style={"description_width": "initial"}, layout={"width": "560px"})
STAGES = {"ppo": "PPO", "dpo": "DPO", "dpo_cached_ref": "DPO, cached ref", "sft": "SFT"}
budget_text, budget_plot = widgets.HTML(), widgets.Image(format="png")


def show_budget(_=None):
    size_b, length, mfu = size_slider.value, length_slider.value, mfu_slider.value
    throughput = throughput_slider.value * (8.03 / size_b if coupled.value else 1.0)
    n = size_b * 1e9
    memory = {label: stage_memory_gib(n, stage) for stage, label in STAGES.items()}
    gen = rollout_generation_seconds(256, 8, length, throughput, 8) / 60
    upd = update_seconds(n, rollout_tokens(256, 8, length), 990e12, mfu, 8) / 60
    budget_text.value = readout([
        "memory (GiB): " + "   ".join(f"{k} {v:.1f}" for k, v in memory.items()),
        f"decode throughput {throughput:.1f} tokens/s per device "
        + ("(scaled with model size)" if coupled.value else "(held fixed as the model grows)"),
        f"256 prompts × 8 answers × {length:,} tokens on 8 devices: generation {gen:.1f} min, "
        f"update {upd:.2f} min, ratio {gen / upd:.1f}",
    ])
    fig, (ax_mem, ax_time) = plt.subplots(1, 2, figsize=(9.5, 2.8))
    ax_mem.bar(list(memory), list(memory.values()), color="C0")
    ax_mem.set(ylabel="GiB", title="persistent model states")
    ax_mem.tick_params(axis="x", labelsize=9)
    ax_time.barh(["update", "generation"], [upd, gen], color=["C1", "C0"])
    ax_time.set(xlabel="minutes", title="one RL step")
    fig.tight_layout()
    budget_plot.value = figure_png(fig)


for control in (size_slider, length_slider, throughput_slider, mfu_slider, coupled):
    control.observe(show_budget, names="value")
show_budget()
display(widgets.VBox([size_slider, length_slider, throughput_slider, mfu_slider, coupled, budget_text, budget_plot]))

# %% [markdown]
# ## Your turn
#
# A 70B model, same batch, same hardware. (a) Its PPO model states in GiB? (b) The generation/update
# ratio with the throughput held at 209.4 tokens/s, and with it scaled down to 209.4 × 8.03/70? Compute
# with `stage_memory_gib`, `rollout_generation_seconds` and `update_seconds`, then check with the
# calculator.

# %%
# your code here

# %% [markdown]
# <details><summary>Answer</summary>
#
# (a) 70e9 × 36 bytes / 2³⁰ = 2,346.9 GiB. (b) The update grows with the parameter count (18.1 min) while
# generation stays at 81.5 min if the throughput is held: ratio 4.5. With the throughput scaled to
# 24.0 tokens/s, generation takes 710.5 min and the ratio returns to 39.25: under that rule both times
# grow in proportion to the model.
# </details>

# %% [markdown]
# ## Check yourself
#
# 1. What is the PPO-to-DPO memory ratio for a 70B model under the same assumptions?
#    <details><summary>Answer</summary>
#    Still 2.00: both totals scale with the parameter count, (2·16 + 2·2)/(16 + 2) = 36/18.
#    </details>
# 2. Completions get twice as long (8,000 tokens). What happens to the generation/update ratio?
#    <details><summary>Answer</summary>
#    Nothing in this model: both times are proportional to the token count, so the ratio stays 39.25. (Real decode
#    slows down with longer contexts, so in practice it grows.)
#    </details>
# 3. Which one number would you change to model a serving engine that decodes four times faster?
#    <details><summary>Answer</summary>
#    The throughput, 209.4 → 837.6 tokens/s per device: generation falls to about 20.4 min and the ratio to about 9.8.
#    </details>
