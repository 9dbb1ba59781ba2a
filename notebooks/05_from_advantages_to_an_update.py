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
# # 05 · From advantages to an update: clipping, averaging units, length bias
#
# *Pointer for readers of the Module 14 lecture: §9 ("turning an advantage into an update") and §12
# (DAPO, Dr. GRPO). Everything below stands on its own; [Group baselines](04_group_baselines.ipynb) computed the
# advantages.*
#
# After this notebook you will be able to
#
# 1. read the PPO/GRPO clipped objective for A > 0 and A < 0, including DAPO's wider upper clip, and say
#    which tokens the clip takes out of the gradient;
# 2. tell apart the three averaging units (per response, per token, Dr. GRPO's constant) and compute the
#    response-length bias the per-response mean causes;
# 3. follow one full GRPO update on a tiny GPT, tensor by tensor: log-probs → ratio → clipped surrogate →
#    aggregate → backward → parameter change, and check it against the trainer's own step.
#
# **Sources.** PPO's clipped objective: [Schulman et al. 2017](https://arxiv.org/abs/1707.06347). DAPO's clip-higher
# and token mean: [Yu et al. 2025](https://arxiv.org/abs/2503.14476). Dr. GRPO's constant denominator:
# [Liu et al. 2025](https://arxiv.org/abs/2503.20783).

# %%
import copy

import ipywidgets as widgets
import matplotlib.pyplot as plt
import numpy as np
import torch
from IPython.display import display

from course_lib.formulas.advantages import dr_grpo_advantages, grpo_advantages
from course_lib.formulas.policy_loss import aggregate, clipped_surrogate
from course_lib.lesson.explore import predict, readout
from course_lib.tinygpt.model import build_model, completion_logprobs
from course_lib.tinygpt.rollout import completion_masks
from course_lib.tinygpt.task import AdditionTask
from course_lib.trainers.configs import GRPOConfig, get_config
from course_lib.trainers.grpo import policy_step

torch.set_num_threads(1)  # tiny tensors: one thread is fastest and never fights other jobs

# %% [markdown]
# ## 1. The clipped objective
#
# PPO's (proximal policy optimisation) **clipped objective** keeps one update close to the policy that sampled the
# batch. The policy that sampled the answers is **π_old**; the policy being trained is π_θ. For each token, the
# **importance ratio** ρ = π_θ(token)/π_old(token) says how much more likely the token has become. The per-token
# objective to maximise is
#
# q = min(ρA, clip(ρ, 1 − ε_low, 1 + ε_high)·A),
#
# with the answer's advantage A on every one of its tokens. DAPO's *clip-higher* widens only the upper
# side (ε_high = 0.28 against ε_low = 0.2), so that unlikely-but-good tokens can grow further in one update.

# %%
predict("A bad token (A = −1) has become MORE likely: ρ = 1.5, with ε = 0.2. Does the clip remove its gradient?",
        ["yes: ρ is outside [0.8, 1.2], so it is clipped", "no: the full penalty ρA applies"],
        "no: the full penalty ρA applies",
        "min(1.5·(−1), 1.2·(−1)) = −1.5 is the unclipped term: the minimum always keeps the worse value, "
        "so a penalty is never capped. The clip only stops rewarding a move that already went far enough.")

# %%
rho = np.linspace(0.4, 1.7, 400)
edges = {"1 − ε_low = 0.8": 0.8, "1 + ε = 1.2": 1.2, "1 + ε_high = 1.28": 1.28}
clip_fig, axes = plt.subplots(1, 2, figsize=(9.5, 3.8))
for ax, a in zip(axes, (1.0, -1.0), strict=True):
    ax.plot(rho, rho * a, color="grey", ls=":", label="unclipped ρA")
    ax.plot(rho, clipped_surrogate(rho, a, eps_low=0.2, eps_high=0.2), label="PPO/GRPO ε = 0.2")
    ax.plot(rho, clipped_surrogate(rho, a, eps_low=0.2, eps_high=0.28), ls="--", label="DAPO ε_high = 0.28")
    for k, (name, edge) in enumerate(edges.items()):
        ax.axvline(edge, color="grey", lw=0.6)
        height = 0.02 + 0.09 * k if a > 0 else 0.93 - 0.09 * k  # where the curves leave room
        ax.text(edge, height, f" {name}", transform=ax.get_xaxis_transform(), fontsize=8, color="dimgrey")
    ax.set(xlabel="ratio ρ = π_θ / π_old", ylabel="objective q", title=f"advantage A = {a:+.0f}")
    ax.grid(alpha=0.3)
axes[0].legend(fontsize=9, loc="upper left")
clip_fig.tight_layout()
plt.show()

# %% [markdown]
# **A > 0 (left).** The objective rises with ρ until 1 + ε_high, then goes flat: once a good token is
# that much more likely, pushing it further earns nothing. Below 1 the objective keeps the full slope, so a
# good token that became *less* likely is pulled back with full force.
#
# **A < 0 (right).** Here the objective is ρA: it falls as a bad token becomes more likely. Below
# 1 − ε_low it goes flat at (1 − ε_low)·A: once a bad token is already 20% less likely, making it even
# rarer earns nothing more. Above 1 there is no flat part at all: the more likely the bad token became,
# the larger the penalty, without limit. Clipping removes *incentive* to move further in the helpful
# direction; it never removes a penalty. The gradient says the same, token by token:

# %%
ratios = torch.tensor([0.7, 1.0, 1.5], requires_grad=True)
objective, clipped = clipped_surrogate(ratios, torch.tensor(-1.0), eps_low=0.2, eps_high=0.2, return_clipped=True)
objective.sum().backward()
for r, q_value, grad, c in zip(ratios.tolist(), objective.tolist(), ratios.grad.tolist(), clipped.tolist(),
                               strict=True):
    print(f"A = −1, ρ = {r:.1f}: objective {q_value:+.2f}, dq/dρ = {grad:+.1f}, clipped: {c}")
clip_gradients = ratios.grad.tolist()

# %% [markdown]
# Only the token at ρ = 0.7 loses its gradient. Clipping shapes the objective; it does not stop an
# optimiser step from overshooting the interval (section 4 shows a step that does).
#
# ## 2. The averaging unit is part of the algorithm
#
# Per-token values q must become one number. Two answers of lengths 1 and 3; every token of the first has
# value q = 2, every token of the second q = 0. A padded batch of width 4 stores them with a 0/1 mask.

# %%
q = np.array([[2.0, 0.0, 0.0, 0.0], [0.0, 0.0, 0.0, 0.0]])
mask = np.array([[1, 0, 0, 0], [1, 1, 1, 0]])
lengths = mask.sum(axis=1)
per_response = (q * mask).sum(axis=1) / lengths
seq_mean = per_response.mean()  # original GRPO: average tokens inside each answer, then answers
tok_mean = (q * mask).sum() / lengths.sum()  # DAPO: every real token counts once
L_max = 4
const_mean = (q * mask).sum() / (len(q) * L_max)  # Dr. GRPO: a constant denominator G·L_max
print(f"response mean = {seq_mean:.1f}   token mean = {tok_mean:.1f}   constant G·L_max = {const_mean:.2f}")
assert np.isclose(seq_mean, aggregate(q, mask, unit="sequence_mean"))
assert np.isclose(tok_mean, aggregate(q, mask, unit="token_mean"))
assert np.isclose(const_mean, aggregate(q, mask, unit="constant", max_length=L_max))

# %% [markdown]
# Per response, the short answer's single token weighs as much as the long answer's three together; per
# token, each token weighs the same; Dr. GRPO's denominator G·L_max does not depend on the sampled lengths
# at all. Padding never counts. The same per-token values give three different losses, which is why
# "GRPO" alone is not enough to reproduce a run.
#
# ## 3. The response-length bias Dr. GRPO removes
#
# A group of four: two correct answers of 5 tokens, and two wrong ones, of **2** and of **20** tokens.
# Take Dr. GRPO advantages (no std, so only the unit differs): +0.5 for the correct answers, −0.5 for the
# wrong ones. The loss is −aggregate(A·log π), so the gradient reaching each token's log-probability is
# a *weight*: how hard that token is pushed up (> 0) or down (< 0). Before computing:

# %%
predict("Under the per-response mean (original GRPO), which wrong answer's tokens are each pushed down harder?",
        ["the 2-token answer's, 10× harder", "the 20-token answer's, 10× harder", "both the same"],
        "the 2-token answer's, 10× harder",
        "Each answer's tokens are averaged inside the answer first: a weight of A/(G·|y|) per token, so "
        "−0.5/(4·2) = −0.0625 against −0.5/(4·20) = −0.00625.")

# %%
answer_lengths = [5, 5, 2, 20]
group_rewards = np.array([1.0, 1.0, 0.0, 0.0])
advantages_dr = torch.as_tensor(dr_grpo_advantages(group_rewards))
width, budget = 20, 24  # padded width; Dr. GRPO's L_max, the generation budget
token_mask = torch.tensor([[1.0] * n + [0.0] * (width - n) for n in answer_lengths])


def token_weights(unit):
    """d(objective)/d(log π) per token: what the aggregate does to each token's push."""
    logp = torch.zeros(len(answer_lengths), width, requires_grad=True)  # the weights do not depend on its value
    aggregate(advantages_dr[:, None] * logp, token_mask, unit=unit, max_length=budget).backward()
    return logp.grad


weights = {unit: token_weights(unit) for unit in ("sequence_mean", "token_mean", "constant")}
print(f"{'unit':<15}{'per token, 2-token wrong':>26}{'per token, 20-token wrong':>27}{'ratio':>8}"
      f"{'whole answer, 2 / 20 tokens':>30}")
for unit, w in weights.items():
    short, long = float(w[2, 0]), float(w[3, 0])
    print(f"{unit:<15}{short:>26.5f}{long:>27.5f}{short / long:>8.1f}"
          f"{float(w[2].sum()):>15.4f} / {float(w[3].sum()):.4f}")
length_bias_ratio = float(weights["sequence_mean"][2, 0] / weights["sequence_mean"][3, 0])

# %% [markdown]
# Under the per-response mean, every token of the 20-token wrong answer is pushed down ten times less than
# every token of the 2-token one: both *answers* get the same total push, spread over 10× more tokens.
# A long mistake is barely discouraged token by token, so among wrong answers the long ones lose
# probability slowest — the drift towards long wrong answers that Dr. GRPO (Liu et al., 2025) reported
# and removed. (For correct answers the same rule favours short ones.) Under the token mean and under
# Dr. GRPO's constant, every token of every wrong answer gets the same push (ratio 1.0).
#
# The two differ in what they divide by: the token mean divides by the tokens in *this* batch (a
# denominator that changes from step to step, which [Group baselines](04_group_baselines.ipynb) showed Adam does not
# cancel); the constant divides by G·L_max, fixed for the whole run.
#
# ## 4. One GRPO update, tensor by tensor
#
# Now the whole path on a real (tiny, untrained) GPT from `course_lib.tinygpt.model`: one prompt, a group of four
# completions written by hand so that the rewards are known, one optimiser step. Every tensor is printed;
# at the end the same step is run by the trainer's own `course_lib.trainers.grpo.policy_step` on a copy of the
# model, and the parameters must agree.

# %%
torch.manual_seed(0)
run_config = get_config("cpu")
task = AdditionTask(run_config.task)
tok = task.tokenizer
model = build_model(run_config.model, tok)
pair, answers = (7, 58), ["65", "65", "64", "6"]
prompt_ids = task.encode_prompts([pair])
prompt_length, T = prompt_ids.shape[1], 4
completions = torch.full((len(answers), T), tok.pad_token_id)
for i, text in enumerate(answers):
    ids = tok.convert_tokens_to_ids(list(text)) + [tok.eos_token_id]
    completions[i, : len(ids)] = torch.tensor(ids)
cmask, truncated = completion_masks(completions, tok.eos_token_id)
input_ids = torch.cat([prompt_ids.repeat(len(answers), 1), completions], dim=1)
completion_mask = torch.cat([torch.zeros(len(answers), prompt_length, dtype=torch.long), cmask], dim=1)
attention_mask = torch.cat([torch.ones(len(answers), prompt_length, dtype=torch.long), cmask], dim=1)
group = torch.tensor([[task.strict_reward(pair, c) for c in completions]])
print(f"prompt {task.prompt_text(*pair)!r}; answers {answers} (+<eos>); rewards {group.tolist()[0]}")
print("input_ids (prompt | completion, padded):\n", input_ids)

# %% [markdown]
# **Step 1: log-probs.** `completion_logprobs` scores every token by the position before it; with
# `start=prompt_length` it scores only the completion positions. Padding gets mask 0.

# %%
logps, token_mask_4 = completion_logprobs(model, input_ids, attention_mask, completion_mask, start=prompt_length)
print("log π_θ per token:\n", logps.detach().numpy().round(3) + 0.0)
print("mask:\n", token_mask_4.numpy())

# %% [markdown]
# **Step 2: ratio.** The sampler's log-probs are frozen (detached). In the first pass over a fresh batch
# π_θ *is* π_old, so ρ = 1 exactly, but its gradient is not zero: ∂ρ/∂θ = ∇log π_θ.
#
# **Step 3: advantages and the clipped surrogate.** GRPO advantages, one per completion, on each token.

# %%
old_logps = logps.detach()
ratio = torch.exp(logps - old_logps)
adv_group = grpo_advantages(group, on_degenerate="zeros").flatten()
surrogate = clipped_surrogate(ratio, adv_group, eps_low=0.2, eps_high=0.2)
print("ratio:\n", ratio.detach().numpy())
print("advantages:", adv_group.numpy().round(3))
print("clipped surrogate per token (× mask):\n", (surrogate * token_mask_4).detach().numpy().round(3) + 0.0)

# %% [markdown]
# **Why multiplying by the mask is safe here, and when it is not.** [DPO margins](02_dpo_margins.ipynb) said *select*
# tokens with the mask, do not multiply: `nan · 0` is `nan`. The prints above multiply, and the library's `aggregate`
# does too, because `completion_logprobs` returns exact zeros outside the completion: at a padding
# position ρ = exp(0 − 0) = 1 and the surrogate is a finite number times 0. Log-probs taken at *every*
# position are another matter (the coding lab's `(N, L − 1)` log-probs, after
# [Tiny GPT: the GRPO family](09_tiny_gpt_grpo.ipynb), are): after `<eos>` the padding is junk the policy never chose,
# and a junk token can be one whose logit is masked to −∞ (a `<pad>` the sampler may never emit). Its log-prob under
# the new and the old policy is then −∞ (or −1e9), their difference is `nan` or a huge number.

# %%
predict("At a padding position, logp − old = 100 (junk). The loss multiplies the surrogate by the mask (0) "
        "there. What gradient reaches the parameters?",
        ["zero: the mask is 0 there", "nan: inf · 0 is nan, and nan spreads through the backward pass",
         "a large but finite number"],
        "nan: inf · 0 is nan, and nan spreads through the backward pass",
        "exp(100) overflows float32 (largest ≈ 3.4e38 = exp(88.7)) to inf; the masked product inf · 0 is nan in the "
        "forward pass, and in the backward pass the mask's 0 multiplies exp's inf derivative: nan. Selecting after "
        "exp does not help either.")

# %%
junk = torch.tensor([[0.1, -0.2, 100.0]], requires_grad=True)  # logp − old; the last position is padding
pad_mask = torch.tensor([[1.0, 1.0, 0.0]])
multiplied = (torch.exp(junk) * pad_mask).sum()
multiplied.backward()
grad_multiplied = junk.grad.clone()
junk.grad = None
selected_late = torch.where(pad_mask.bool(), torch.exp(junk), 0.0).sum()  # select after exp
selected_late.backward()
grad_selected_late = junk.grad.clone()
junk.grad = None
selected_early = torch.exp(torch.where(pad_mask.bool(), junk, 0.0)).mul(pad_mask).sum()  # select before exp
selected_early.backward()
print(f"multiply by the mask:  loss {multiplied.item()}, gradient {grad_multiplied.tolist()}")
print(f"select after exp:      loss {selected_late.item():.4f}, gradient {grad_selected_late.tolist()}")
print(f"select before exp:     loss {selected_early.item():.4f}, gradient {junk.grad.tolist()}")
assert torch.isnan(multiplied) and torch.isnan(grad_multiplied).any()
assert torch.isfinite(selected_late) and torch.isnan(grad_selected_late).any()  # finite loss, nan gradient
assert torch.isfinite(selected_early) and torch.isfinite(junk.grad).all() and junk.grad[0, 2] == 0

# %% [markdown]
# Only selecting *before* the nonlinearity is safe: with `torch.where` after exp the forward pass is
# finite, yet the backward pass still multiplies a 0 by exp's infinite derivative. So compute the
# difference, select it with the mask (0 at padding), and only then exponentiate; or, as the library
# does, never let a padding position hold anything but an exact 0.

# %% [markdown]
# **Step 4: aggregate, backward, step.** Token mean (the trainer's default unit), loss = −objective,
# gradient-norm clipping at 1.0 as the trainer does, then one AdamW step at the trainer's learning rate.

# %%
grpo_config = GRPOConfig(num_generations=len(answers), num_iterations=1, unit="token_mean")
twin = copy.deepcopy(model)  # the trainer gets an identical copy
optimizer = torch.optim.AdamW(model.parameters(), lr=grpo_config.learning_rate, weight_decay=0.0)
before = [p.detach().clone() for p in model.parameters()]
loss = -aggregate(surrogate, token_mask_4, unit="token_mean", max_length=grpo_config.max_completion_length)
optimizer.zero_grad()
loss.backward()
grad_norm = float(torch.nn.utils.clip_grad_norm_(model.parameters(), run_config.max_grad_norm))
optimizer.step()
change = torch.cat([(p.detach() - b).flatten() for p, b in zip(model.parameters(), before, strict=True)])
print(f"loss {loss.item():+.4f}   gradient norm {grad_norm:.3f} (clipped to {run_config.max_grad_norm})")
print(f"parameter change: {change.numel():,} numbers, largest |Δθ| {change.abs().max():.2e}, "
      f"mean |Δθ| {change.abs().mean():.2e}")

# %% [markdown]
# **Step 5: what changed.** Each answer's log-probability (summed over its tokens) before and after:

# %%
with torch.no_grad():
    new_logps = completion_logprobs(model, input_ids, attention_mask, completion_mask, start=prompt_length)[0]
sequence_before = (old_logps * token_mask_4).sum(-1)
sequence_after = (new_logps * token_mask_4).sum(-1)
for text, r, b, a in zip(answers, group[0].tolist(), sequence_before.tolist(), sequence_after.tolist(), strict=True):
    print(f"{text + '<eos>':<8} reward {r:.0f}: log π {b:7.3f} → {a:7.3f}  ({a - b:+.3f})")
assert sequence_after[0] > sequence_before[0] and sequence_after[2] < sequence_before[2]  # what the text says

# %% [markdown]
# The correct answer became more likely and the wrong "64" less likely. The wrong "6" shares its first
# token with the correct answers, and a shared token's gradients from right and wrong answers partly cancel;
# what moves it is how the network generalises, not the loss on it alone. One Adam step moves every
# parameter by about the learning rate, so on a fresh model one step changes probabilities a lot.
#
# **The check.** The trainer's `policy_step` on the identical copy, with the same batch and settings. The
# trainer computes the same numbers along a faster path (each prompt runs once per group), so they agree
# to float32 rounding, not bit for bit. Adam divides each gradient by its own size, so where a gradient is
# nearly zero (around Adam's ε = 1e-8) a rounding difference can change that coordinate's step by as much
# as the learning rate. We compare the loss, the gradients, and the step where the gradient is clear of
# that (|g| > 1e-6):

# %%
trainer_optimizer = torch.optim.AdamW(twin.parameters(), lr=grpo_config.learning_rate, weight_decay=0.0)
batch = {"input_ids": input_ids, "attention_mask": attention_mask, "completion_mask": completion_mask,
         "truncated": truncated, "rewards": group}
stats = policy_step(twin, None, trainer_optimizer, batch, grpo_config, prompt_length=prompt_length,
                    max_grad_norm=run_config.max_grad_norm)
pairs = list(zip(model.parameters(), twin.parameters(), strict=True))
grad_gap = max(float((p.grad - q.grad).abs().max()) for p, q in pairs) / max(float(p.grad.abs().max())
                                                                             for p, _ in pairs)
clear = [p.grad.abs() > 1e-6 for p, _ in pairs]  # gradients well above Adam's ε
trainer_gap = max(float(((p - q).detach().abs() * m).max()) for (p, q), m in zip(pairs, clear, strict=True))
trainer_loss = float(stats["loss"])
print(f"trainer loss {trainer_loss:+.4f} (ours {loss.item():+.4f}); gradients agree to {grad_gap:.1e} of the largest; "
      f"largest parameter difference where |g| > 1e-6: {trainer_gap:.1e} (the step itself moved parameters by up to "
      f"{change.abs().max():.1e})")
assert abs(trainer_loss - loss.item()) < 1e-6 and grad_gap < 1e-4 and trainer_gap < 0.01 * float(change.abs().max())

# %% [markdown]
# **A second pass (μ = 2).** μ counts the *inner epochs*: the optimiser passes made on one sampled batch
# before sampling again (μ = 1 above). Had the trainer made a second inner epoch on the same batch, the ratios
# would no longer be 1, and the clip would act:

# %%
second_ratio = torch.exp(new_logps - old_logps)
_, second_clipped = clipped_surrogate(second_ratio, adv_group, return_clipped=True)
clip_fraction = float((second_clipped * token_mask_4).sum() / token_mask_4.sum())
print("ratio after one step:\n", (second_ratio * token_mask_4).numpy().round(3))
print(f"tokens whose gradient the clip would remove: {clip_fraction:.0%}")
assert float(((second_ratio - 1).abs() > 0.2)[token_mask_4.bool()].float().mean()) > 0  # overshoot, as the text says

# %% [markdown]
# The step overshot the interval [0.8, 1.2] for several tokens: clipping did not prevent it (section 1).
#
# ## 5. Explorer: the length bias
#
# Change the length of the long wrong answer and the unit. The readout gives the per-token weight of each
# wrong answer, as in section 3.

# %%
long_slider = widgets.IntSlider(value=20, min=2, max=40, description="long wrong answer (tokens)",
                                style={"description_width": "200px"}, layout={"width": "520px"})
unit_choice = widgets.ToggleButtons(options=["sequence_mean", "token_mean", "constant"], value="sequence_mean",
                                    description="unit")
bias_text = widgets.HTML()


def show_bias(_=None):
    n_long = long_slider.value
    lengths_now = [5, 5, 2, n_long]
    grid = max(lengths_now)
    mask_now = torch.tensor([[1.0] * n + [0.0] * (grid - n) for n in lengths_now])
    logp = torch.zeros(4, grid, requires_grad=True)
    aggregate(advantages_dr[:, None] * logp, mask_now, unit=unit_choice.value, max_length=max(budget, grid)).backward()
    short, long = float(logp.grad[2, 0]), float(logp.grad[3, 0])
    bias_text.value = readout([f"per-token push: 2-token wrong answer {short:+.5f}, {n_long}-token wrong answer "
                               f"{long:+.5f}",
                               f"ratio short/long: {short / long:.1f}"])


long_slider.observe(show_bias, names="value")
unit_choice.observe(show_bias, names="value")
show_bias()
display(widgets.VBox([long_slider, unit_choice, bias_text]))

# %% [markdown]
# ## Your turn
#
# In section 3, replace the Dr. GRPO advantages by GRPO's (divide by the group's std). Do the ratios in the
# table change? Then set L_max (`budget`) to 40: which column changes, and which does not?

# %%
# your code here

# %% [markdown]
# <details><summary>Answer</summary>
#
# The group's std is one number for the whole group, so every weight is multiplied by 1/std = 2 and the
# ratios stay 10.0 / 1.0 / 1.0. With L_max = 40 only the `constant` weights change (−0.5/(4·40) per token
# instead of −0.5/(4·24)); the ratio between answers stays 1.0.
# </details>
#
# ## Check yourself
#
# 1. A = −1 and ρ = 0.7 with ε_low = 0.2. Does this token still contribute a gradient?
#    <details><summary>Answer</summary>
#    No. ρ < 1 − ε_low, so min(ρA, clip(ρ)A) = min(−0.7, −0.8) = −0.8, the clipped constant: no incentive to push ρ
#    lower.
#    </details>
# 2. A = −1 and ρ = 1.4. Clipped or not?
#    <details><summary>Answer</summary>
#    Not clipped: min(−1.4, −1.2) = −1.4 is the unclipped term. The penalty for a bad token that became more likely is
#    never capped.
#    </details>
# 3. Why does the per-response mean let wrong answers grow longer?
#    <details><summary>Answer</summary>
#    Each wrong answer gets the same total push, divided among its tokens: a 20-token mistake is pushed down 10× less
#    per token than a 2-token one, so long mistakes lose probability slowest. Token mean and Dr. GRPO's constant give
#    every token the same weight.
#    </details>
