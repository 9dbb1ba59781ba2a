"""AI feedback, run level: a reward model on a trained judge's labels, RL against it, notebook 17's seeds.

Lecture §15 (Constitutional AI, Bai et al. 2022; RLAIF, Lee et al. 2023): instead of people, a model
compares two answers, guided by a short written list of principles; a preference model is trained
on its labels and RL optimises that. Here every step is measured against the gold rule (the strict
checker), which real AI feedback does not have.

The judge itself (the principles and constitutions, its model, its training, its measurements
against gold) is a trainer: ``course_lib.trainers.judge`` (``train judge``). This module chains it
with the others:

- **A reward model on the judge's labels** (``judge_labels`` then ``reward_model.train_reward_model``):
  fresh pairs labelled by the judge (abstaining where |P − 0.5| <= ``tie_margin``), the Bradley–Terry
  reward model of ``course_lib.trainers.reward_model``, scored against gold on held-out pairs. RL against it
  is PPO as in the RLHF-route notebook (``rl_against``): proxy and gold on the same samples.
- **Notebook 17 on one seed** (``seed_run``): for each of ``CONSTITUTIONS``, on the same pairs, the
  judge, a reward model on its labels and PPO against it, at the notebook's budgets (``notebook_budget``).

What it measures, seed by seed (the judge's agreement and biases, the reward model on its labels, proxy
and gold under PPO): ``benchmarks/tinygpt_ai_feedback.py``, its table generated into ``docs/results.md``.

Simplifications, said out loud:
- One round of labelling from the SFT policy's samples, as in ``course_lib.trainers.reward_model``.
- The reward model's pairs are fresh pairs of the same sampler (``reward_model.preference_data``
  with no label noise): only (correct, incorrect) pairs, as for the judge.
"""

from __future__ import annotations

import copy
import dataclasses
import time

import torch

from course_lib.run.starts import sft_start
from course_lib.tinygpt.model import model_config_of
from course_lib.tinygpt.rewards import resolve_reward
from course_lib.tinygpt.runtime import MetricsLog
from course_lib.tinygpt.task import AdditionTask
from course_lib.trainers.configs import PPOConfig, RewardModelConfig, get_config
from course_lib.trainers.judge import (
    BIASED,
    UNBIASED_POSITION,
    JudgeConfig,
    decided_shares,
    fit_judge,
    judge_pairs,
    length_split,
    verdicts,
)
from course_lib.trainers.ppo import build_critic, train_ppo
from course_lib.trainers.reward_model import (
    RewardModelScorer,
    build_reward_model,
    over_optimisation,
    pair_scores,
    pairwise_accuracy,
    preference_data,
    train_reward_model,
)
from course_lib.trainers.trainer import TrainContext

BUDGETS = ("fast", "full")  # notebook 17's budgets (``COURSE_FAST=1`` and the full one), and its benchmark's


def notebook_budget(name: str = "full") -> tuple[JudgeConfig, RewardModelConfig, PPOConfig, int]:
    """``(judge, reward model, PPO, window)`` of notebook 17 and ``benchmarks/tinygpt_ai_feedback.py`` on the ``cpu``
    config: ``full``, or ``fast`` (its ``COURSE_FAST=1`` run: fewer pairs and steps); ``window`` is the moving mean
    (steps) that reads PPO's proxy and gold curves (``reward_model.over_optimisation``)."""
    if name == "fast":
        return (dataclasses.replace(get_config("cpu").judge, pair_prompts=512, heldout_prompts=300, steps=60),
                RewardModelConfig(pair_prompts=1024, steps=30, heldout_prompts=200),
                PPOConfig(steps=8, batch_prompts=96, eval_every=8), 3)
    if name == "full":
        return (dataclasses.replace(get_config("cpu").judge, steps=300),
                RewardModelConfig(pair_prompts=4096, steps=200),
                PPOConfig(steps=40, batch_prompts=128, eval_every=40), 5)
    raise ValueError(f"budget must be one of {BUDGETS}; got {name!r}")


# ---- the judge's labels, a reward model on them, RL against it -----------------------------------------------
def judge_labels(judge_fn, data: dict, tie_margin: float) -> dict:
    """``data``'s pairs relabelled by the judge, in the order shown; the pairs it leaves tied
    (``verdicts``: |P − 0.5| <= ``tie_margin``) are dropped. ``flipped`` marks a label that
    disagrees with gold (the reward model's noise, here the judge's errors)."""
    p = torch.as_tensor(judge_fn(data["a_ids"], data["b_ids"]), dtype=torch.float32)
    verdict = verdicts(p, tie_margin)
    keep = verdict != 0
    if not keep.any():
        raise ValueError(f"the judge abstained on every pair (|P − 0.5| <= tie_margin={tie_margin}): nothing to "
                         f"learn from")
    label = verdict[keep] == 1
    idx = keep.nonzero().squeeze(-1)
    gold = data["gold"][idx]
    return {"a_ids": data["a_ids"][idx], "b_ids": data["b_ids"][idx], "gold": gold, "label": label,
            "flipped": label != gold, "pairs": [data["pairs"][i] for i in idx.tolist()],
            "n_prompts": data["n_prompts"], "n_pairs": int(keep.sum()), "abstained": float(1 - keep.float().mean())}


def fit_reward_model_on_judge(policy, task: AdditionTask, judge_fn, rm_cfg: RewardModelConfig, *, tie_margin: float,
                              seed: int = 0, data: dict | None = None, heldout: dict | None = None) -> dict:
    """Fresh pairs labelled by the judge → the Bradley–Terry reward model → its agreement with gold.

    Returns ``{"model", "train", "heldout", "log", "metrics"}``; ``metrics`` holds the training pairs,
    the share the judge abstained on, the share of its labels that disagree with gold, and the
    reward model's held-out agreement with the judge's labels and with gold.
    """
    rm_cfg.check()
    gen = torch.Generator().manual_seed(seed + 1)
    sampler = dataclasses.replace(rm_cfg, noise=0.0)
    if data is None:
        data = preference_data(policy, task, task.sample_pairs(rm_cfg.pair_prompts, gen), sampler, generator=gen)
    if heldout is None:
        heldout = preference_data(policy, task, task.heldout_pairs[: rm_cfg.heldout_prompts], sampler, generator=gen)
    train = judge_labels(judge_fn, data, tie_margin)
    held = judge_labels(judge_fn, heldout, 0.0)
    torch.manual_seed(seed)
    rm = build_reward_model(model_config_of(policy), task.tokenizer, policy if rm_cfg.init == "sft" else None)
    rm.to(next(policy.parameters()).device)
    rows = train_reward_model(rm, train, rm_cfg, generator=gen, heldout=held)
    acc = pairwise_accuracy(rm, held)
    ra, rb = pair_scores(rm, held)
    metrics = {"train_pairs": train["n_pairs"], "abstained": train["abstained"],
               "judge_wrong": float(train["flipped"].float().mean()),
               "heldout_judge_accuracy": acc["accuracy"], "heldout_gold_accuracy": acc["gold_accuracy"],
               **{f"rm_{k}": v for k, v in length_split(task, held, torch.sign(ra - rb)).items()}}
    return {"model": rm, "train": train, "heldout": held, "log": rows, "metrics": metrics}


def rl_against(policy, task: AdditionTask, rm, ppo_cfg: PPOConfig, *, seed: int = 0) -> list[dict]:
    """PPO from ``policy``'s weights (a copy: ``policy`` is left as it was) against the reward model.

    Returns ``(rows, trained policy)``; per step a row holds ``proxy`` (the reward model's mean
    score), ``gold`` (the strict checker on the same samples), ``kl`` (sampled KL to the start) and
    ``length`` (mean completion tokens).
    """
    trained = copy.deepcopy(policy)
    torch.manual_seed(seed)
    critic = build_critic(trained, task.tokenizer)
    log = MetricsLog()
    train_ppo(trained, critic, task, ppo_cfg, RewardModelScorer(rm, task), TrainContext(log=log, show_progress=False),
              generator=torch.Generator().manual_seed(seed + 1), gold_fn=resolve_reward("strict", task), track_kl=True)
    rows = [{"step": r["step"], "proxy": r["reward_mean"], "gold": r["gold_mean"], "kl": r["kl_sequence"],
             "length": r["completion_length"]} for r in log.rows]
    return rows, trained


# ---- one seed of notebook 17, end to end (the notebook's other seeds and its benchmark) --------------------------

CONSTITUTIONS = {"default (first as the fallback)": BIASED, "without 'first'": UNBIASED_POSITION}
KEEP = ("agreement", "position_bias", "flip_rate", "length_bias", "ties", "decided", "n_longer_right",
        "n_longer_wrong")


def feedback_run(policy, task: AdditionTask, judge_fn, rm_cfg: RewardModelConfig, ppo_cfg: PPOConfig, window: int, *,
                 tie_margin: float, seed: int = 0) -> tuple[dict, list[dict], dict]:
    """A reward model on the judge's labels, then PPO against it: ``(rm metrics, PPO rows, over-optimisation
    curve)``."""
    rm = fit_reward_model_on_judge(policy, task, judge_fn, rm_cfg, tie_margin=tie_margin, seed=seed)
    rows, _ = rl_against(policy, task, rm["model"], ppo_cfg, seed=seed)
    return rm["metrics"], rows, over_optimisation(rows, window=window)


def seed_summary(seed: int, variant: str, judged: dict, rm: dict, rows: list[dict], curve: dict) -> dict:
    """One constitution on one seed as flat numbers (the notebook's verdicts over seeds and the benchmark's rows)."""
    shares = decided_shares(judged["decided_by"])
    return {"variant": variant, "seed": seed, "pairs": judged["metrics"]["pairs"],
            "top_principle": max(shares, key=shares.get), "decided_by": shares,
            **{f"rules_{k}": judged["rules"][k] for k in KEEP}, **{f"judge_{k}": judged["metrics"][k] for k in KEEP},
            **{f"rm_{k}": v for k, v in rm.items() if not k.startswith("rm_")},
            **{k: v for k, v in rm.items() if k.startswith("rm_")},
            **{f"ppo_{k}": curve[k] for k in ("proxy_start", "proxy_end", "gold_start", "gold_end", "shape")},
            "ppo_gold_change": curve["gold_end"] - curve["gold_start"],
            "ppo_proxy_change": curve["proxy_end"] - curve["proxy_start"],
            "ppo_length_start": rows[0]["length"], "ppo_length_end": rows[-1]["length"]}


def seed_run(seed: int, *, budget: str = "fast", config: str = "cpu") -> list[dict]:
    """Notebook 17 on one seed, from that seed's cached SFT start: for each of ``CONSTITUTIONS`` (on the same
    pairs) the judge, a reward model on its labels and PPO against it, as ``seed_summary`` rows (with the
    SFT start's accuracy and the CPU seconds of each constitution)."""
    judge_cfg, rm_cfg, ppo_cfg, window = notebook_budget(budget)
    task, policy, sft = sft_start(get_config(config), seed=seed, verbose=False)
    train, heldout = judge_pairs(policy, task, judge_cfg, seed=seed)
    out = []
    for variant, principles in CONSTITUTIONS.items():
        cpu0 = time.process_time()
        judged = fit_judge(policy, task, dataclasses.replace(judge_cfg, principles=principles), seed=seed, data=train,
                           heldout=heldout)
        rm, rows, curve = feedback_run(policy, task, judged["judge_fn"], rm_cfg, ppo_cfg, window,
                                       tie_margin=judge_cfg.tie_margin, seed=seed)
        out.append({**seed_summary(seed, variant, judged, rm, rows, curve), "sft_accuracy": sft["accuracy"],
                    "cpu_seconds": time.process_time() - cpu0})
    return out
