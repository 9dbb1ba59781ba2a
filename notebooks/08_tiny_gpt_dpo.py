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
# # 08 · A tiny GPT learns to add: SFT, then DPO on its own answers
#
# *Pointers to the lecture: §6 (DPO and its cached reference), §8 (IPO, SimPO, the NLL term).
# Everything needed here is explained here.*
#
# The notebooks before this one computed the formulas on numbers you could check by hand. Here the same
# functions train a real (tiny) language model, live, on your machine. After this notebook you
# will be able to
#
# 1. say what a *verifiable* task is and why this one was built with a flawed teacher;
# 2. compute a completion's log-probability with the right alignment (position t − 1 scores token t);
# 3. build **offline** preference pairs (collected once, before training) from a policy's own samples, cache the
#    reference log-probs once, and train DPO with `course_lib.formulas.preference.dpo_terms` — the function
#    [DPO margins](02_dpo_margins.ipynb) checked by hand;
# 4. follow one DPO update tensor by tensor, from log-probs to the parameter change, and check it
#    against the trainer's own step;
# 5. attribute a gain honestly: how much came from the preference term and how much from the NLL term
#    (the negative log-likelihood of the chosen answer: an SFT loss added to DPO's);
# 6. train a *style* preference — two valid answers, one preferred — and track it on held-out pairs.
#
# Budget: the last cell prints how long this run took. `COURSE_FAST=1` (CI, the quick check) runs the
# same task, model and SFT start with fewer preference pairs and DPO steps; every sentence that quotes
# a number is computed from what is shown.

# %%
import copy
import dataclasses
import os
import sys

import matplotlib.pyplot as plt
import torch
from IPython.display import display

from course_lib.formulas.preference import dpo_terms
from course_lib.lesson.explore import predict
from course_lib.lesson.stopwatch import Stopwatch
from course_lib.run.dashboard import dashboard
from course_lib.run.starts import sft_start
from course_lib.run.verdicts import committed_benchmarks
from course_lib.tinygpt.evaluation import evaluate, sample_completions
from course_lib.tinygpt.model import build_model, completion_logprobs, n_params
from course_lib.tinygpt.rollout import generate
from course_lib.tinygpt.runtime import MetricsLog
from course_lib.tinygpt.task import AdditionTask
from course_lib.trainers.configs import get_config
from course_lib.trainers.dpo import build_preference_pairs, dpo_batch_loss, reference_logprobs, train_dpo
from course_lib.trainers.kto import kto_data_from_pairs, train_kto
from course_lib.trainers.sft import train_sft
from course_lib.trainers.trainer import TrainContext

FAST = os.environ.get("COURSE_FAST") == "1"  # the same lesson on fewer pairs and steps (CI's quick check)
clock = Stopwatch("COURSE_FAST=1" if FAST else "full")
cfg = get_config("cpu")
if FAST:
    cfg.dpo = dataclasses.replace(cfg.dpo, pair_prompts=1024, steps=60, eval_every=20)
SEED = 0
_ = torch.manual_seed(SEED)
print(f"config {cfg.name!r}: {cfg.task.digits}-digit addition, {cfg.task.n_demos} demonstrations")

# %% [markdown]
# ## 1. The task: addition, a flawed teacher, an honest checker
#
# Prompts are zero-padded sums such as `07+58=`; the answer is the sum's digits and an
# end-of-sequence token. An exact-answer checker can score *any* prompt for free. The
# demonstrations are another matter: there are only a few thousand, and most were written by a
# teacher who forgets the carry out of the ones column (`07+58=55` instead of `65`).
#
# Why build it this way? If perfect demonstrations were free and unlimited, more SFT would beat
# every method in this course — RL and preference learning earn their place when labels are
# scarce or wrong but *checking* is cheap. That is the situation here.

# %%
task = AdditionTask(cfg.task)
tok = task.tokenizer
for (a, b), answer in list(zip(task.demo_pairs, task.demo_answers))[:6]:
    mark = "✓" if answer == str(a + b) else "✗ teacher dropped the carry"
    print(f"{task.prompt_text(a, b)}{answer:<5} {mark}")
wrong = sum(ans != str(a + b) for (a, b), ans in zip(task.demo_pairs, task.demo_answers))
print(f"\n{wrong} of {len(task.demo_pairs)} demonstrations are wrong; "
      f"{len(task.heldout_pairs)} held-out prompts are kept for evaluation")
print("tokenizer:", tok.get_vocab())

# %% [markdown]
# ## 2. The model and the log-probability of a completion
#
# A GPT-2 built from a `transformers` config: no weights are downloaded, every parameter starts
# random. DPO needs log π(y | x), the sum over the *completion* tokens of their log-probabilities.
# The logits at position t − 1 predict token t; the prompt and the padding contribute nothing.
# We compute it by hand for one sequence, then check `completion_logprobs`.

# %%
model = build_model(cfg.model, tok).to(DEVICE)
print(f"{n_params(model):,} parameters")

a, b = task.heldout_pairs[0]
ids, attn, comp = task.encode_pairs([(a, b)], [str(a + b)], DEVICE)
with torch.no_grad():
    logits = model(input_ids=ids, attention_mask=attn).logits[0]
    logits[:, [tok.pad_token_id, tok.bos_token_id]] = -1e9  # never valid outputs (as in generation)
    logp = torch.log_softmax(logits, dim=-1)
    by_hand = sum(float(logp[t - 1, ids[0, t]]) for t in range(1, ids.shape[1]) if comp[0, t] == 1)
    token_logps, mask = completion_logprobs(model, ids, attn, comp)
print("tokens:", tok.convert_ids_to_tokens(ids[0].tolist()))
print(f"by hand {by_hand:.5f}   completion_logprobs {float(token_logps.sum()):.5f}   "
      f"({int(mask.sum())} completion tokens scored)")

# %% [markdown]
# ## 3. SFT: the reference policy
#
# Supervised fine-tuning on the demonstrations, errors included. Watch the held-out accuracy, and
# especially its split: prompts whose ones column carries are where the teacher was wrong.
# Every tiny-GPT notebook starts from this same SFT policy, so `sft_start` trains it once per machine
# (`pipeline.sft_policy`, the SFT stage of every run) and later reads it from a disk cache.

# %%
task, model, sft_info = sft_start(cfg, seed=SEED, device=DEVICE)
baseline = evaluate(model, task)
print(f"SFT held-out exact match {baseline['accuracy']:.1%}  "
      f"(no carry {baseline['accuracy_no_carry']:.1%}, carry {baseline['accuracy_carry']:.1%}) "
      f"after {cfg.sft.steps} steps ({sft_info['sft_seconds']:.0f} s of training when the start was built)")
for line in sample_completions(model, task, task.heldout_pairs[:4], n=2):
    print(line)

# %% [markdown]
# ## 4. Offline pairs from the policy's own samples, and a cached reference
#
# For each of many fresh prompts we sample a few answers from the SFT policy and let the checker
# pick one correct (chosen) and one incorrect (rejected) answer. The reference policy is this SFT
# checkpoint; because the pairs never change, its log-probs are computed **once** and cached —
# DPO then keeps one trainable model and no reference in memory (§6, §10).

# %%
sft_weights = copy.deepcopy(model.state_dict())
data = build_preference_pairs(model, task, cfg.dpo, generator=torch.Generator().manual_seed(SEED + 1))
data.update(reference_logprobs(model, data, prompt_length=task.prompt_length))
print(f"{data['n_pairs']} pairs from {data['n_prompts']} prompts")
for i in range(3):
    print("chosen", tok.decode(data["chosen_ids"][i], skip_special_tokens=True),
          "  rejected", tok.decode(data["rejected_ids"][i], skip_special_tokens=True))

# %% [markdown]
# At the start, policy = reference, so every margin is 0 and the DPO loss is log 2 ≈ 0.693 for
# every pair. Check it with the same `dpo_terms` [DPO margins](02_dpo_margins.ipynb) used on the lecture's pair I:

# %%
ref_w = data["ref_chosen_token_logps"][:4].sum(-1)
ref_l = data["ref_rejected_token_logps"][:4].sum(-1)
terms = dpo_terms(ref_w, ref_l, ref_w, ref_l, beta=cfg.dpo.beta)
print("margins", terms.margin.tolist(), " losses", [round(x, 4) for x in terms.loss.tolist()])

# %% [markdown]
# ## 5. One DPO update, tensor by tensor
#
# Before handing the pairs to the trainer, take its first step by hand: draw the batch the trainer
# will draw, compute the log-probs, the margin and the loss, back-propagate, clip the gradient, and
# apply AdamW's update. Then let the trainer take the same step from the same weights and compare
# every parameter.

# %%
n_pairs = data["chosen_ids"].shape[0]
step_gen = torch.Generator().manual_seed(SEED + 2)  # the generator the trainer gets below
idx = torch.randint(0, n_pairs, (min(cfg.dpo.batch_size, n_pairs),), generator=step_gen)  # its first draw
batch = {k: v[idx].to(DEVICE) for k, v in data.items() if isinstance(v, torch.Tensor)}
model.load_state_dict(sft_weights)
model.train()

# (1) per-token log-probs of the chosen and rejected completions under the policy, shape (n, L − P)
P = task.prompt_length  # score completion positions only, as the cached reference was
tok_w, mask_w = completion_logprobs(model, batch["chosen_ids"], batch["chosen_attention"], batch["chosen_completion"],
                                    start=P)
tok_l, mask_l = completion_logprobs(model, batch["rejected_ids"], batch["rejected_attention"],
                                    batch["rejected_completion"], start=P)
# (2) sequence log-probs, and log-ratios to the cached reference
ratio_w = tok_w.sum(-1) - batch["ref_chosen_token_logps"].sum(-1)
ratio_l = tok_l.sum(-1) - batch["ref_rejected_token_logps"].sum(-1)
# (3) margin z = β·(ratio_w − ratio_l) and loss −log σ(z), averaged over the batch
z = cfg.dpo.beta * (ratio_w - ratio_l)
loss = -torch.nn.functional.logsigmoid(z).mean()
trainer_loss, _ = dpo_batch_loss(model, batch, cfg.dpo, prompt_length=P)
print(f"batch of {len(idx)} pairs; token log-probs {tuple(tok_w.shape)}; margins z[:3] = {z[:3].tolist()}")
print(f"loss by hand {loss.item():.6f}   dpo_batch_loss {trainer_loss.item():.6f}   log 2 = 0.693147")

# (4) gradients, then the global-norm clip the trainer applies (max norm cfg.max_grad_norm)
model.zero_grad()
loss.backward()
params = list(model.parameters())
before_step = [p.detach().clone() for p in params]
grads = [p.grad.detach().clone() for p in params]
norm = torch.sqrt(sum((g**2).sum() for g in grads))
clip = min(1.0, cfg.max_grad_norm / (float(norm) + 1e-6))
# (5) AdamW's first step (β1 = 0.9, β2 = 0.999, ε = 1e-8, no weight decay), bias-corrected:
#     m̂ = g, v̂ = g², so the step is lr · g / (|g| + ε) ≈ lr · sign(g)
lr, eps = cfg.dpo.learning_rate, 1e-8
by_hand_new = []
for p, g in zip(params, grads):
    g = g * clip
    m_hat = (1 - 0.9) * g / (1 - 0.9)
    v_hat = (1 - 0.999) * g * g / (1 - 0.999)
    by_hand_new.append(p.detach() - lr * m_hat / (v_hat.sqrt() + eps))
print(f"gradient norm {float(norm):.4f} → clip factor {clip:.4f}")

# %% [markdown]
# **Predict first.** On this first step, one weight has a gradient 1,000× larger than another's.
# Which one moves more, and by how much?

# %%
display(predict("AdamW's first step: weight a has a gradient 1,000× larger than weight b's (both well above ε = "
                "1e-8). How far does a move compared with b?",
                ["1,000× as far", "about √1000 ≈ 32× as far", "about as far: both by ≈ the learning rate"],
                "about as far: both by ≈ the learning rate",
                "On the first step m̂ = g and v̂ = g², so the step is lr·g/(|g| + ε) ≈ lr·sign(g), whatever |g|."))

# %%
# (6) the trainer's own first step, from the same weights with the same generator
model.load_state_dict(sft_weights)
train_dpo(model, task, dataclasses.replace(cfg.dpo, eval_every=10**6), data,
          TrainContext(steps=1, show_progress=False),
          generator=torch.Generator().manual_seed(SEED + 2))
step_diff = max(float((p.detach() - q).abs().max()) for p, q in zip(model.parameters(), by_hand_new))
moved = torch.cat([(q - b).abs().flatten() for q, b in zip(by_hand_new, before_step)])
g_all = torch.cat([g.abs().flatten() for g in grads])
print(f"largest difference between the hand-made step and the trainer's: {step_diff:.1e} "
      f"(float32 rounding of weights of size ~1 is ~1e-7)")
big, small = g_all > 1e-3, (g_all > 1e-6) & (g_all < 1e-5)
print(f"weights with |gradient| > 1e-3 moved by {float(moved[big].mean()):.2e} on average; "
      f"weights with |gradient| in (1e-6, 1e-5) by {float(moved[small].mean()):.2e}; lr = {lr:.0e}")

# %% [markdown]
# On its first step AdamW moves every weight with a non-negligible gradient by almost exactly the
# learning rate, whatever the gradient's size: the bias-corrected moments are m̂ = g and v̂ = g², so
# the step is lr·g/(|g| + ε). Only weights whose gradient is comparable to ε = 1e-8 move less. Later
# steps average over many gradients and differ from sign(g). (A constant factor on the *whole* loss
# cancels under Adam, within the conditions of [Group baselines, section 3](04_group_baselines.ipynb); a factor on one
# term of a sum, such as
# `rpo_alpha` on the NLL term, changes the balance of the terms and does matter.)
#
# ## 6. Three runs from the same SFT checkpoint
#
# - **DPO** (β = 1, lr 1e-4): the preference term alone.
# - **DPO + NLL** (`rpo_alpha = 1`, TRL's name): also maximise the chosen answer's likelihood.
# - **NLL only**: SFT on the chosen (checker-approved) answers, no preference term at all —
#   the control that tells us what the NLL term does by itself.
#
# **Predict first**, in the question below the runs: which row ends highest?

# %%
def dpo_run(**overrides):
    model.load_state_dict(sft_weights)
    dcfg = dataclasses.replace(cfg.dpo, **overrides)
    log = MetricsLog()
    train_dpo(model, task, dcfg, data, TrainContext(log=log), generator=torch.Generator().manual_seed(SEED + 2))
    return evaluate(model, task), log.rows


results, logs = {}, {}
results["DPO"], logs["DPO"] = dpo_run()
results["DPO + NLL"], logs["DPO + NLL"] = dpo_run(rpo_alpha=1.0)

# NLL only: plain SFT on the chosen answers (same steps, batch size and learning rate)
model.load_state_dict(sft_weights)
nll_cfg = dataclasses.replace(cfg.sft, steps=cfg.dpo.steps, learning_rate=cfg.dpo.learning_rate,
                              batch_size=cfg.dpo.batch_size, eval_every=cfg.dpo.eval_every)
nll_log = MetricsLog()
train_sft(model, task, nll_cfg, TrainContext(log=nll_log), seed=SEED + 2,
          demos=(data["chosen_ids"], data["chosen_attention"], data["chosen_completion"]))
results["NLL only"], logs["NLL only"] = evaluate(model, task), nll_log.rows
top = max(r["accuracy"] for r in results.values())
leaders = [name for name, r in results.items() if r["accuracy"] == top]
rank_answer = leaders[0] if len(leaders) == 1 else "a tie at the top"
display(predict("From the same SFT checkpoint, same steps: which row ends with the highest held-out accuracy?",
                ["DPO", "DPO + NLL", "NLL only", "a tie at the top"], rank_answer,
                "In this run: " + ", ".join(f"{name} {r['accuracy']:.1%}" for name, r in results.items())
                + f" (SFT {baseline['accuracy']:.1%}). One seed; section 8 reads it."))

# %%
print(f"{'':10} held-out   no carry   carry")
print(f"{'SFT':10} {baseline['accuracy']:8.1%} {baseline['accuracy_no_carry']:9.1%} {baseline['accuracy_carry']:7.1%}")
for name, r in results.items():
    print(f"{name:10} {r['accuracy']:8.1%} {r['accuracy_no_carry']:9.1%} {r['accuracy_carry']:7.1%}")

# %% [markdown]
# ## 7. The dashboard
#
# DPO logs what its loss predicts: the margin z grows, the implicit rewards β·log(π/π_ref) of
# chosen and rejected answers move apart, preference accuracy *on the training pairs* rises (the
# held-out accuracy panel is the task's exact-match on held-out prompts, a different number), and
# the policy drifts away from the reference.
#
# About the drift gauge `kl_drift_offline`: it averages log π_ref(y_t) − log π_θ(y_t) over the
# tokens of the pairs, which estimates **KL(π_ref ‖ π_θ)** — the reference first (this plain average of
# log-ratios is the estimator [The KL term](10_the_kl_term.ipynb) calls k1). The
# direction is set by who sampled the tokens: an average of log q − log p over samples from q
# estimates KL(q ‖ p), and these tokens were sampled by the SFT policy, π_ref. GRPO's `kl` in
# [Tiny GPT: the GRPO family](09_tiny_gpt_grpo.ipynb) averages over the *policy's* samples, so it estimates KL(π_θ ‖
# π_ref), the other direction: the two numbers are not comparable. And the checker picked which samples became
# pairs, so even this is a gauge of drift, not an exact KL.

# %%
fig = dashboard(logs["DPO"], runs={k: v for k, v in logs.items() if k != "NLL only"},
                title="DPO vs DPO + NLL", baseline_accuracy=baseline["accuracy"],
                panels=["held-out accuracy (greedy)", "preference accuracy", "DPO implicit rewards",
                        "drift from the reference", "training loss"])
plt.show()

# %% [markdown]
# ## 8. Reading the numbers honestly
#
# The NLL term alone is rejection-sampling fine-tuning (RFT, [Yuan et al. 2023](https://arxiv.org/abs/2308.01825)):
# keep the answers the checker approves, train on them. It uses the same information as the pairs' chosen side,
# so **DPO + NLL − NLL only** is what the preference term adds beside the NLL term.
#
# One run is one draw: runs that differ only in their seed (the initialisation, the order of the
# demonstrations, the sampled pairs) end at different numbers. How far the seed alone moves a result is its
# **seed spread**. Two methods are compared *paired*: each seed trains both from its own SFT start, and the
# course reads the per-seed differences with one rule (`course_lib.run.verdicts`): a difference is **beyond
# the seed spread** when, on at least three seeds, it has the same sign on every seed and its median exceeds
# the evaluation noise (two standard errors of a difference of two held-out accuracies: a smaller gap is one
# the held-out prompts cannot see). Anything else is within the seed spread. The rule asks for a consistent
# direction, not significance: with no effect at all, three seeds share a sign one time in four, so every
# verdict says on how many seeds it stands.
#
# This notebook trains one seed. The next cell prints this run's differences as numbers, then the verdicts of
# the committed benchmark (`benchmarks/tinygpt_dpo.py`: the same runs at seeds 0, 1, 2 with the `cpu` config's
# full DPO budget), read by that rule. The verdicts are the benchmark's, not this run's.

# %%
best = max(results, key=lambda k: results[k]["accuracy"])
lift = {k: r["accuracy"] - baseline["accuracy"] for k, r in results.items()}
diffs = {(a, b): results[a]["accuracy"] - results[b]["accuracy"]
         for a, b in (("DPO + NLL", "NLL only"), ("DPO + NLL", "DPO"))}
print("in this run (one seed): lift over SFT " + ", ".join(f"{k} {100 * v:+.1f} pts" for k, v in lift.items())
      + "; " + ", ".join(f"{a} − {b} {100 * d:+.1f} pts" for (a, b), d in diffs.items())
      + f"; highest: {', '.join(k for k, r in results.items() if r['accuracy'] == results[best]['accuracy'])}")
BENCH = committed_benchmarks("dpo")  # the committed benchmark (`make bench`); None on Colab
if BENCH:
    sys.path.insert(0, str(BENCH))
    from tables import dpo_verdicts, load

    bench = load("dpo", BENCH / "results")
    bench_lines = dpo_verdicts(bench, len(task.heldout_pairs))
    print(f"\nover seeds (the committed benchmark, seeds {', '.join(map(str, bench['seeds']))}, the full budget; "
          "held-out accuracy):\n" + "\n".join(bench_lines))
else:
    bench_lines = []
    print("benchmarks/results/dpo.json is not here (e.g. on Colab): see the DPO table in docs/results.md")

# %% [markdown]
# ## 8b. The same answers without the pairs: KTO
#
# KTO ([Ethayarajh et al. 2024](https://arxiv.org/abs/2402.01306)) needs no pairs: each answer has one
# label, desirable or undesirable. Its loss compares an answer's log-ratio r = log π_θ − log π_ref with
# a reference point z0, pushing desirable answers above it and undesirable ones below. The method
# defines z0 as KL(π_θ ‖ π_ref), estimated on each batch from *mismatched* pairs (every prompt with
# another answer of the batch), clamped at 0 and detached: no gradient flows through it
# (`course_lib.formulas.preference.kto_reference_point`). Here we take the section-4 pairs apart — every chosen
# answer becomes a desirable example, every rejected one an undesirable example — and train from the
# same SFT policy for DPO's steps, on as many answers per step as DPO has completions.
#
# **Predict first**, in the question below the run: KTO sees exactly DPO's answers but never learns
# which two belong to the same prompt. Will it end above, level with, or below DPO? And where does z0
# start?

# %%
kto_cfg = dataclasses.replace(cfg.kto, steps=cfg.dpo.steps, eval_every=cfg.dpo.eval_every,
                              batch_size=2 * cfg.dpo.batch_size)
model.load_state_dict(sft_weights)  # the reference, then the start
kto_data = kto_data_from_pairs(model, task, data, kto_cfg, generator=torch.Generator().manual_seed(SEED + 5))
kto_log = MetricsLog()
train_kto(model, task, kto_cfg, kto_data, TrainContext(log=kto_log, show_progress=False))
results_kto = evaluate(model, task)
z0 = [row["kl"] for row in kto_log.rows]
gap = results_kto["accuracy"] - results["DPO"]["accuracy"]
tie = abs(gap) < 0.5 / len(task.heldout_pairs)
display(predict("KTO on DPO's answers taken apart (no pairing), same steps: its held-out accuracy ends …",
                ["above DPO's", "level with DPO's", "below DPO's"],
                "level with DPO's" if tie else "above DPO's" if gap > 0 else "below DPO's",
                f"In this run: DPO {results['DPO']['accuracy']:.1%}, KTO {results_kto['accuracy']:.1%}. "
                "z0 starts at 0: at the first step the policy is the reference."))

# %%
print(f"{kto_data['n_desirable']} desirable + {kto_data['n_undesirable']} undesirable answers, "
      f"{kto_data['n_batches']} batches of {kto_data['batch_size']}")
print(f"held-out accuracy: SFT {baseline['accuracy']:.1%}, DPO {results['DPO']['accuracy']:.1%}, "
      f"KTO {results_kto['accuracy']:.1%}")
positive = [i + 1 for i, v in enumerate(z0) if v > 0]
print(f"z0 at the first step {z0[0]:.3f} (policy = reference); above 0 on {len(positive)} of {len(z0)} steps"
      + (f" (largest {max(z0):.3f}, last at step {positive[-1]})" if positive else "")
      + f"; at the last step {z0[-1]:.3f}" + (" (the clamp at 0 holds it)" if z0[-1] == 0 else ""))
p_mean = (results_kto["accuracy"] + results["DPO"]["accuracy"]) / 2
se = 100 * (p_mean * (1 - p_mean) / len(task.heldout_pairs)) ** 0.5  # one accuracy's sampling error
print(f"in this run (one seed): KTO − DPO {100 * gap:+.1f} pts, KTO − SFT "
      f"{100 * (results_kto['accuracy'] - baseline['accuracy']):+.1f} pts (each accuracy's own sampling error on "
      f"{len(task.heldout_pairs)} held-out prompts is about {se:.1f} points)")
if bench_lines:
    print("\n".join(["over seeds (the committed benchmark, section 8):",
                     *(line for line in bench_lines if line.startswith("- KTO"))]))

# %% [markdown]
# z0 starts at 0: the policy *is* the reference, so every log-ratio is 0. It is an average log-ratio
# of answers to *other* prompts. While training first moves the policy, those mismatched answers can
# gain probability with the rest and z0 rises; as the policy sharpens on each prompt's own answers they
# can become *less* likely than under the reference, the estimate turns negative and the clamp holds z0
# at 0 — KTO then scores each log-ratio against 0. The line above says which happened in this run; an
# answer counts as good or bad only relative to z0, never in absolute terms. Which contract fits
# which data: pairs need two answers to the same prompt, one better; KTO only needs a verdict per
# answer, so it can also use prompts where every sample was right or every sample was wrong (which
# section 4 threw away). ORPO (`python -m course_lib train orpo`) trains the same pairs from the base
# model in one stage, with no reference; its run takes SFT's whole budget, so it is in
# `benchmarks/tinygpt_dpo.py`, not here.

# %% [markdown]
# ## 9. Two valid answers, one preferred: a style preference
#
# So far the chosen answer was *right* and the rejected one *wrong*: a checker could have told them
# apart, and the NLL-only run trains on nothing but the checker's verdicts (section 8 compared it with DPO
# in this run; the DPO table in docs/results.md has the NLL-only row over seeds). Preference learning earns
# its keep when both answers are valid and one is simply preferred — a tone, a format, a house
# style that no checker encodes. Here is a small one: a style guide that wants sums written at a
# fixed width, with a leading zero (`07+58=065`, not `07+58=65`). Both answers have the right value.
#
# Pairs: for a training prompt whose sum has fewer digits than the width, chosen = the fixed-width
# answer, rejected = the plain one. The same construction on held-out prompts gives **held-out
# pairs**, never trained on: their margins and preference accuracy tell us whether the preference
# generalises, as a validation loss would.

# %%
width = cfg.task.digits + 1


def fixed_width(a, b):
    return f"{a + b:0{width}d}"


def style_pairs(prompts):
    """Chosen: the fixed-width answer; rejected: the plain one. Only sums that differ in the two styles."""
    keep = [(a, b) for a, b in prompts if len(str(a + b)) < width]
    out = {"n_pairs": len(keep)}
    for name, answers in (("chosen", [fixed_width(a, b) for a, b in keep]),
                          ("rejected", [str(a + b) for a, b in keep])):
        (out[f"{name}_ids"], out[f"{name}_attention"],
         out[f"{name}_completion"]) = task.encode_pairs(keep, answers, DEVICE)
    model.load_state_dict(sft_weights)  # the reference is the SFT policy
    out.update(reference_logprobs(model, out, prompt_length=task.prompt_length))
    return out, keep


style_train, _ = style_pairs(task.sample_pairs(cfg.dpo.pair_prompts // 4, torch.Generator().manual_seed(SEED + 3)))
style_val, val_prompts = style_pairs(task.heldout_pairs)
print(f"{style_train['n_pairs']} training pairs, {style_val['n_pairs']} held-out pairs; e.g. chosen "
      f"{tok.decode(style_val['chosen_ids'][0], skip_special_tokens=True)!r}, rejected "
      f"{tok.decode(style_val['rejected_ids'][0], skip_special_tokens=True)!r}")

# %% [markdown]
# **Predict first**, in the question below the run: the SFT policy never saw a leading zero. After DPO
# on these pairs, what share of held-out answers will be written at fixed width? Will their *values*
# stay right?

# %%
val_batch = {k: v.to(DEVICE) for k, v in style_val.items() if isinstance(v, torch.Tensor)}
val_track = {}


def track_validation(step, opt, seconds):
    """Called by the trainer every few steps: margins and preference accuracy on the held-out pairs."""
    with torch.no_grad():
        _, stats = dpo_batch_loss(model, val_batch, cfg.dpo, prompt_length=task.prompt_length)
    val_track[step] = {"val_margin": stats["margin"], "val_preference_accuracy": stats["preference_accuracy"]}


def style_report(prompts):
    """Greedy answers on held-out prompts: share at fixed width, share with the right value."""
    with torch.no_grad():
        roll = generate(model, task.encode_prompts(prompts, DEVICE), tok, max_completion_length=task.answer_length,
                        greedy=True)
    texts = [task.completion_text(c)[0] for c in roll.completions]
    fixed = sum(len(t) == width and t.startswith("0") for t in texts) / len(texts)
    value = sum(t.isdigit() and int(t) == a + b for t, (a, b) in zip(texts, prompts)) / len(texts)
    return fixed, value


def pair_logprobs():
    """Log-probability of each held-out pair's whole answer under the current policy: (fixed width, plain)."""
    with torch.no_grad():
        return tuple(completion_logprobs(model, val_batch[f"{side}_ids"], val_batch[f"{side}_attention"],
                                         val_batch[f"{side}_completion"], start=task.prompt_length)[0].sum(-1)
                     for side in ("chosen", "rejected"))


def style_run(**changes):
    """DPO on the style pairs from the SFT policy, with ``changes`` to the DPO options; what changed."""
    val_track.clear()
    log = MetricsLog()
    model.load_state_dict(sft_weights)
    run_cfg = dataclasses.replace(cfg.dpo, eval_every=10**6, **changes)
    every = max(1, run_cfg.steps // 10)
    ctx = TrainContext(log=log, checkpoint=track_validation, checkpoint_every=every, show_progress=False)
    train_dpo(model, task, run_cfg, style_train, ctx, generator=torch.Generator().manual_seed(SEED + 4))
    for row in log.rows:
        row.update(val_track.get(row["step"], {}))
    chosen, rejected = pair_logprobs()
    return {"rows": log.rows, "style": style_report(val_prompts),
            "logp": (chosen.mean().item(), rejected.mean().item()),
            "chosen_more_likely": (chosen > rejected).float().mean().item()}


model.load_state_dict(sft_weights)
before_style = style_report(val_prompts)
ref_logp = (val_batch["ref_chosen_token_logps"].sum(-1), val_batch["ref_rejected_token_logps"].sum(-1))
style = {"DPO": style_run()}
style_rows, after_style = style["DPO"]["rows"], style["DPO"]["style"]
last = style_rows[-1]
style_answer = ("under 10%" if after_style[0] < 0.1 else "over 90%" if after_style[0] > 0.9 else "between 10% and 90%")
display(predict("After DPO on the style pairs, the share of held-out answers written at fixed width is …",
                ["under 10%", "between 10% and 90%", "over 90%"], style_answer,
                f"Measured: {before_style[0]:.1%} before, {after_style[0]:.1%} after; right values "
                f"{before_style[1]:.1%} → {after_style[1]:.1%}."))

# %%
print(f"held-out pairs: margin {last['val_margin']:.2f}, preference accuracy {last['val_preference_accuracy']:.1%} "
      f"(training pairs: {last['margin']:.2f}, {last['preference_accuracy']:.1%})")
print(f"held-out answers at fixed width: {before_style[0]:.1%} → {after_style[0]:.1%}; "
      f"right value: {before_style[1]:.1%} → {after_style[1]:.1%}")

# %%
fig = dashboard(style_rows, title="DPO on a style preference", panels=["preference accuracy", "DPO implicit rewards"])
plt.show()

# %% [markdown]
# Held-out margins and preference accuracy are this run's validation curves: if the training-pair
# curve rises and the held-out one does not, the model memorised pairs instead of learning the
# style. The two style lines printed above say whether greedy answers actually changed style, and
# whether the values stayed right — preference accuracy alone cannot tell you that.
#
# Preference accuracy counts a pair as won when the margin z = β·[(log π(y_w) − log π_ref(y_w)) −
# (log π(y_l) − log π_ref(y_l))] is positive: a comparison of *changes* against the reference. Greedy
# decoding compares the answers themselves, log π(y_w) against log π(y_l). The next cell prints both
# for the held-out pairs (each log-probability is of the whole answer, summed over its tokens).

# %%
dpo_logp = style["DPO"]["logp"]
print(f"held-out pairs, mean log-probability of the whole answer (SFT reference → after DPO):\n"
      f"  fixed width (chosen) {ref_logp[0].mean():7.2f} → {dpo_logp[0]:7.2f}\n"
      f"  plain       (rejected){ref_logp[1].mean():6.2f} → {dpo_logp[1]:7.2f}\n"
      f"pairs whose fixed-width answer is the more likely one: {(ref_logp[0] > ref_logp[1]).float().mean():.1%} → "
      f"{style['DPO']['chosen_more_likely']:.1%}")

# %% [markdown]
# DPO's loss is satisfied by a large margin. A chosen answer that the reference found very unlikely can
# gain many nats and still sit below a rejected answer that lost a few: the printout says how far
# apart the two are in this run. Section 8's second row adds the NLL term, which raises the chosen
# answer's own log-probability, not only its lead over the rejected one.
#
# **Predict first**, in the question below the run: with `rpo_alpha = 1` (DPO + NLL) on the same
# pairs, what share of held-out answers will be written at fixed width?

# %%
style["DPO + NLL"] = style_run(rpo_alpha=1.0)
nll_style = style["DPO + NLL"]["style"]
nll_answer = ("under 10%" if nll_style[0] < 0.1 else "over 90%" if nll_style[0] > 0.9 else "between 10% and 90%")
display(predict("After DPO + NLL on the style pairs, the share of held-out answers written at fixed width is …",
                ["under 10%", "between 10% and 90%", "over 90%"], nll_answer,
                f"Measured: {nll_style[0]:.1%} (plain DPO: {after_style[0]:.1%})."))

# %%
print(f"{'':12} {'fixed width':>11} {'right value':>11} {'chosen more likely':>19}")
print(f"{'SFT':12} {before_style[0]:11.1%} {before_style[1]:11.1%} {(ref_logp[0] > ref_logp[1]).float().mean():19.1%}")
for name, r in style.items():
    print(f"{name:12} {r['style'][0]:11.1%} {r['style'][1]:11.1%} {r['chosen_more_likely']:19.1%}")
taught = [name for name, r in style.items() if r["style"][0] > 0.5]
print("in this run, the style was taught (over half the held-out answers at fixed width) by: "
      + (", ".join(taught) if taught else "neither run"))
for name, r in style.items():
    change = r["style"][1] - before_style[1]
    print(f"{name}: right values {before_style[1]:.1%} → {r['style'][1]:.1%} ({100 * change:+.1f} points)")

# %% [markdown]
# Read the table with both columns. The style column says whether a preference that no checker
# encodes reached the greedy answers; the value column is the capability nobody asked the pairs
# about. These pairs hold only sums below 100, in one format, and every run here changed the
# policy's answers on that whole slice: if the right-value column fell, the style came at a price
# that the preference data could not show, since every pair in it had the right value on both sides.
# Only a separate check of the task (here, the strict checker on the *values*) reveals that price.
# The strict checker itself wants the plain style, so it would mark every fixed-width answer wrong:
# a checker encodes one style, and a preference is a way to teach another (the table says which run
# did, in this run).
#
# ## Your turn
#
# 1. Rerun section 9's plain DPO with `beta=0.1`: `small_beta = style_run(beta=0.1)`.
#    Predict first: larger or smaller margins? More or less drift?
#    <details><summary>Answer</summary>
#    The margin z = β·(log-ratio difference) is measured in units of β, so for the same change in
#    log-probs it is 10× smaller; the loss −log σ(z) keeps pushing until z is large, so a smaller β
#    lets the policy move further from the reference before the loss saturates. Compare
#    `small_beta["rows"][-1]["kl_drift_offline"]` with `style["DPO"]["rows"][-1]["kl_drift_offline"]`.
#    </details>
# 2. Swap chosen and rejected in `style_pairs` (prefer the plain style) and rerun. What happens to the
#    held-out answers, and why is the run almost uneventful?
#    <details><summary>Answer</summary>
#    The SFT policy already writes the plain style, so the chosen answers are already likely: the
#    margins grow by pushing the (already unlikely) fixed-width answers down, and greedy answers do
#    not change. DPO moves probability between the two answers; it cannot show a change the policy
#    already made.
#    </details>
#
# ## Check yourself
#
# 1. Why is the DPO loss exactly log 2 at the first step, whatever the pairs?
#    <details><summary>Answer</summary>
#    The policy starts equal to the reference, so both log-ratios are 0, the margin z = 0 and
#    −log σ(0) = log 2.
#    </details>
# 2. Why can the reference log-probs be computed once here, but not in GRPO
#    ([Tiny GPT: the GRPO family](09_tiny_gpt_grpo.ipynb))?
#    <details><summary>Answer</summary>
#    DPO's pairs are fixed (offline), so π_ref(y|x) of each pair never changes. GRPO samples new
#    completions every step, and each needs its own reference log-probs (when β > 0).
#    </details>
# 3. Which pairs exist at all? What happens to prompts where the SFT policy is always right, or
#    always wrong?
#    <details><summary>Answer</summary>
#    Only prompts with at least one correct and one incorrect sample make a pair. Always-right and
#    always-wrong prompts give nothing — the offline cousin of GRPO's zero-variance groups.
#    </details>
# 4. In section 9, preference accuracy on the training pairs reaches 100%. What does the held-out
#    curve add?
#    <details><summary>Answer</summary>
#    Evidence that the style generalises to prompts never trained on. A training-pair accuracy of 100%
#    is also what memorising the pairs would give.
#    </details>

# %%
print(clock.report())
