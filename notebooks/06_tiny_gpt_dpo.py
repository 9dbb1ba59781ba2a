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
    extras = ["tqdm>=4.66", "transformers>=5.0,<6"]
    subprocess.run([*pip, *extras], check=True, env=env)
    importlib.invalidate_caches()

from course_lib.device import on_colab, resolve_device

DEVICE = resolve_device("auto")
print(f"device: {DEVICE.type} · Colab: {'yes' if on_colab() else 'no'}")

# %% [markdown]
# # 06 · A tiny GPT learns to add: SFT, then DPO on its own answers
#
# *Lecture §6 (DPO and its cached reference) and §8 (IPO, SimPO, the NLL term).*
#
# Notebooks 01–05 computed the formulas on numbers you could check by hand. Here the same
# functions train a real (tiny) language model, live, on your machine. After this notebook you
# will be able to
#
# 1. say what a *verifiable* task is and why this one was built with a flawed teacher;
# 2. compute a completion's log-probability with the right alignment (position t − 1 scores token t);
# 3. build offline preference pairs from a policy's own samples, cache the reference log-probs once,
#    and train DPO with `course_lib.preference.dpo_terms` — the function notebook 02 checked by hand;
# 4. attribute a gain honestly: how much came from the preference term and how much from the NLL term.
#
# Budget: about 3–4 minutes on a laptop CPU. (CI runs it with `COURSE_FAST=1`: a toy budget whose
# numbers mean nothing.)

# %%
import copy
import dataclasses
import os

import matplotlib.pyplot as plt
import torch

from course_lib.configs import get_config
from course_lib.dashboard import dashboard
from course_lib.dpo import build_preference_pairs, reference_logprobs, train_dpo
from course_lib.evaluation import evaluate, sample_completions
from course_lib.model import build_model, completion_logprobs, n_params
from course_lib.preference import dpo_terms
from course_lib.runtime import MetricsLog
from course_lib.sft import train_sft
from course_lib.task import AdditionTask

FAST = os.environ.get("COURSE_FAST") == "1"  # CI: a toy budget that only checks the code runs
cfg = get_config("test" if FAST else "cpu")
SEED = 0
torch.manual_seed(SEED)
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
model = build_model(cfg.model, tok)
print(f"{n_params(model):,} parameters")

a, b = task.heldout_pairs[0]
ids, attn, comp = task.encode_pairs([(a, b)], [str(a + b)])
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

# %%
sft_log = MetricsLog()
sft_result = train_sft(model, task, cfg.sft, seed=SEED, log=sft_log)
baseline = evaluate(model, task)
print(f"SFT held-out exact match {baseline['accuracy']:.1%}  "
      f"(no carry {baseline['accuracy_no_carry']:.1%}, carry {baseline['accuracy_carry']:.1%}) "
      f"after {sft_result['seconds']:.0f} s")
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
# every pair. Check it with the same `dpo_terms` notebook 02 used on the lecture's pair I:

# %%
ref_w = data["ref_chosen_token_logps"][:4].sum(-1)
ref_l = data["ref_rejected_token_logps"][:4].sum(-1)
terms = dpo_terms(ref_w, ref_l, ref_w, ref_l, beta=cfg.dpo.beta)
print("margins", terms.margin.tolist(), " losses", [round(x, 4) for x in terms.loss.tolist()])

# %% [markdown]
# ## 5. Three runs from the same SFT checkpoint
#
# - **DPO** (β = 1, lr 1e-4): the preference term alone.
# - **DPO + NLL** (`rpo_alpha = 1`, TRL's name): also maximise the chosen answer's likelihood.
# - **NLL only**: SFT on the chosen (checker-approved) answers, no preference term at all —
#   the control that tells us what the NLL term does by itself.

# %%
def dpo_run(**overrides):
    model.load_state_dict(sft_weights)
    dcfg = dataclasses.replace(cfg.dpo, **overrides)
    log = MetricsLog()
    train_dpo(model, task, dcfg, data, log=log, generator=torch.Generator().manual_seed(SEED + 2))
    return evaluate(model, task), log.rows


results, logs = {}, {}
results["DPO"], logs["DPO"] = dpo_run()
results["DPO + NLL"], logs["DPO + NLL"] = dpo_run(rpo_alpha=1.0)

# NLL only: plain SFT on the chosen answers (same steps, batch size and learning rate)
model.load_state_dict(sft_weights)
nll_cfg = dataclasses.replace(cfg.sft, steps=cfg.dpo.steps, learning_rate=cfg.dpo.learning_rate,
                              batch_size=cfg.dpo.batch_size, eval_every=cfg.dpo.eval_every)
nll_log = MetricsLog()
train_sft(model, task, nll_cfg, seed=SEED + 2, log=nll_log,
          demos=(data["chosen_ids"], data["chosen_attention"], data["chosen_completion"]))
results["NLL only"], logs["NLL only"] = evaluate(model, task), nll_log.rows

print(f"{'':10} held-out   no carry   carry")
print(f"{'SFT':10} {baseline['accuracy']:8.1%} {baseline['accuracy_no_carry']:9.1%} {baseline['accuracy_carry']:7.1%}")
for name, r in results.items():
    print(f"{name:10} {r['accuracy']:8.1%} {r['accuracy_no_carry']:9.1%} {r['accuracy_carry']:7.1%}")

# %% [markdown]
# ## 6. The dashboard
#
# DPO logs what §6–§7 predict: the margin z grows, the implicit rewards β·log(π/π_ref) of chosen
# and rejected answers move apart, preference accuracy on the pairs rises, and the policy drifts
# away from the reference (`kl_drift_offline`: KL(π_ref ‖ π_θ) estimated on the pair tokens,
# which π_ref sampled).

# %%
fig = dashboard(logs["DPO"], runs={k: v for k, v in logs.items() if k != "NLL only"},
                title="DPO vs DPO + NLL", baseline_accuracy=baseline["accuracy"])
plt.show()

# %% [markdown]
# ## 7. Reading the numbers honestly
#
# Measured while writing the course on the default CPU config: SFT 59% → plain DPO 84% (+27
# points) → DPO + NLL 94% (+30), medians of 3 seeds (README); and in this notebook at seed 0,
# **NLL only reached 97%** — as good as, or better than, both. Plain DPO does help: chosen and
# rejected answers differ exactly where the teacher was wrong (the tens digit of carry prompts),
# so "prefer 65 over 55" is the missing lesson. But the NLL term alone is rejection-sampling
# fine-tuning — keep the answers the checker approves, train on them — and here it earns the
# whole gain by itself. Crediting the "DPO + NLL" result to the preference term would be wrong;
# the "NLL only" row is the control that says so. With a checker at hand, that is the cheap,
# strong baseline any preference method has to beat. Compare your three rows above.
#
# ## Check yourself
#
# 1. Why is the DPO loss exactly log 2 at the first step, whatever the pairs?
#    <details><summary>Answer</summary>
#    The policy starts equal to the reference, so both log-ratios are 0, the margin z = 0 and
#    −log σ(0) = log 2.
#    </details>
# 2. Why can the reference log-probs be computed once here, but not in GRPO (notebook 07)?
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
