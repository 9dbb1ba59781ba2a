"""AI feedback: preference labels from a judge trained on written principles, measured against gold.

Lecture §15 (Constitutional AI, Bai et al. 2022; RLAIF, Lee et al. 2023): instead of people, a model
compares two answers, guided by a short written list of principles; a preference model is trained
on its labels and RL optimises that. Here every step is measured against the gold rule (the strict
checker), which real AI feedback does not have.

The pieces
----------
- **Principles** (``PRINCIPLES``): named, checkable rules, each stated in one sentence, e.g.
  ``ones``: "Prefer the answer whose last digit is the last digit of the sum." A **constitution**
  is an ordered list of them: the first principle that tells the two answers apart decides; if
  none does, the pair is a tie (label 0.5). A principle sees what a cheap judge can check (the
  format, the last digit, the length, the order shown), not the whole sum: the flawed teacher's
  carry error keeps the last digit right, so the default constitution cannot see it, and its
  fallback rules (``longer``, ``first``) decide those pairs.
- **The judge** (``build_judge``): the tiny GPT with a one-output head (``model.build_scalar_model``,
  initialised from the SFT policy like the reward model) reading ``prompt | A | B`` — the prompt,
  answer A in a slot of ``max_completion_length`` tokens, answer B in another, then ``<eos>`` — and
  giving the log-odds that A is better. It is *trained* on the constitution's labels (binary cross
  entropy, a tie's target 0.5), so it inherits the principles' biases and adds its own errors
  (a few hundred steps on a few thousand pairs).
- **Measured against gold** on held-out pairs (``measure_judge``): the share of ties (|P − 0.5| <=
  ``tie_margin``, the one tie rule, ``verdicts``) and agreement on the pairs it decides (its verdict
  in the order shown); the **swap test**: every pair judged in both orders, P(prefers the answer shown
  first) and position bias = P(first) − P(second), both from the two orders, and the share of
  pairs whose verdict flips with the order; **length bias**: agreement on decided pairs whose
  longer answer is the right one minus agreement on decided pairs whose longer answer is wrong.
- **A reward model on the judge's labels** (``judge_labels`` then ``reward_model.train_reward_model``):
  fresh pairs labelled by the judge (abstaining where |P − 0.5| <= ``tie_margin``), the Bradley–Terry
  reward model of ``course_lib.trainers.reward_model``, scored against gold on held-out pairs. RL against it
  is PPO as in the RLHF-route notebook (``rl_against``): proxy and gold on the same samples.

What it measures, seed by seed (the judge's agreement and biases, the reward model on its labels, proxy
and gold under PPO): ``benchmarks/tinygpt_ai_feedback.py``, its table generated into ``docs/results.md``.

Simplifications, said out loud:
- The tiny GPT cannot read English, so the judge is not *prompted* with its principles: it is
  *trained* on their labels (closer to RLAIF's distilled preference model than to prompting a
  large model). The written sentences are the constitution's documentation and its one source
  of truth (``label_pair`` applies exactly those rules).
- The principles are rules on the text, not judgements: a real AI judge's biases are learnt
  from pre-training, here they are written down so that each can be switched off and measured.
- Pairs are the reward model's (``reward_model.preference_data`` with no label noise): one answer
  the strict checker accepts and one it rejects, from the SFT policy, shown in random order; gold
  is binary, so two wrong answers are never compared.
- One round of labelling from the SFT policy's samples, as in ``course_lib.trainers.reward_model``.
"""

from __future__ import annotations

import copy
import dataclasses
import time
from dataclasses import dataclass
from typing import NamedTuple

import torch

from course_lib._validate import number
from course_lib.run.starts import sft_start
from course_lib.tinygpt.model import build_scalar_model, model_config_of
from course_lib.tinygpt.rewards import resolve_reward
from course_lib.tinygpt.runtime import MetricsLog, read_metrics, to_device
from course_lib.tinygpt.task import AdditionTask
from course_lib.trainers.configs import PPOConfig, RewardModelConfig, get_config
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
from course_lib.trainers.trainer import TrainContext, train_offline


# ---- principles ----------------------------------------------------------------------------------------
class Principle(NamedTuple):
    """A checkable rule: ``rule(sum_text, a, b)`` → +1 (prefer A), −1 (prefer B) or 0 (undecided), where
    ``a`` and ``b`` are ``(text, ended)`` as ``AdditionTask.completion_text`` gives them."""

    sentence: str
    rule: object


def _prefer(x: bool, y: bool) -> int:
    return int(x) - int(y)


PRINCIPLES = {
    "correct": Principle("Prefer the answer that is exactly the sum.",
                         lambda s, a, b: _prefer(a[1] and a[0] == s, b[1] and b[0] == s)),
    "finished": Principle("Prefer an answer that ends over one that is cut off.", lambda s, a, b: _prefer(a[1], b[1])),
    "ones": Principle("Prefer the answer whose last digit is the last digit of the sum.",
                      lambda s, a, b: _prefer(a[0][-1:] == s[-1], b[0][-1:] == s[-1])),
    "longer": Principle("Prefer the longer answer.",
                        lambda s, a, b: _prefer(len(a[0]) > len(b[0]), len(b[0]) > len(a[0]))),
    "shorter": Principle("Prefer the shorter answer.",
                         lambda s, a, b: _prefer(len(a[0]) < len(b[0]), len(b[0]) < len(a[0]))),
    "first": Principle("If still undecided, prefer the answer shown first.", lambda s, a, b: 1),
}
BIASED = ("finished", "ones", "longer", "first")  # the default constitution: a cheap judge's
UNBIASED_POSITION = ("finished", "ones", "longer")  # the one change: no "first" rule (undecided = a tie)


def check_principles(principles, field: str = "principles") -> tuple[str, ...]:
    """A constitution: a non-empty list of distinct known principle names; returns it as a tuple."""
    if isinstance(principles, str) or not principles:
        raise ValueError(f"{field} must be a non-empty list of principle names from {tuple(PRINCIPLES)}; got "
                         f"{principles!r}")
    unknown = [p for p in principles if p not in PRINCIPLES]
    if unknown:
        raise ValueError(f"{field} holds unknown principles {unknown}; accepted: {tuple(PRINCIPLES)}")
    if len(set(principles)) != len(principles):
        raise ValueError(f"{field} names a principle twice: {list(principles)}")
    return tuple(principles)


def constitution_text(principles) -> str:
    """The written constitution: one numbered sentence per principle."""
    return "\n".join(f"{i}. {PRINCIPLES[p].sentence}  [{p}]" for i, p in enumerate(check_principles(principles), 1))


def label_pair(principles, total: int, a: tuple[str, bool], b: tuple[str, bool]) -> tuple[float, str | None]:
    """The constitution's label for (A, B): 1.0 (A better), 0.0 (B better) or 0.5 (a tie), and the
    principle that decided (None for a tie). ``total`` is the true sum (the judge may check its digits)."""
    for name in check_principles(principles):
        verdict = PRINCIPLES[name].rule(str(total), a, b)
        if verdict:
            return (1.0 if verdict > 0 else 0.0), name
    return 0.5, None


def answers(task: AdditionTask, data: dict) -> list[tuple[tuple[str, bool], tuple[str, bool]]]:
    """Each pair's two answers as ``((text_a, ended_a), (text_b, ended_b))``."""
    p = task.prompt_length
    return [(task.completion_text(a[p:]), task.completion_text(b[p:])) for a, b in zip(data["a_ids"], data["b_ids"])]


def constitution_labels(task: AdditionTask, data: dict, principles) -> tuple[torch.Tensor, list]:
    """The constitution's label (1, 0 or 0.5) of every pair in the order shown, and which principle decided."""
    out = [label_pair(principles, x + y, a, b) for (x, y), (a, b) in zip(data["pairs"], answers(task, data))]
    return torch.tensor([t for t, _ in out]), [who for _, who in out]


# ---- the config ---------------------------------------------------------------------------------------
@dataclass
class JudgeConfig:
    """The judge's data, principles and optimisation (``course_lib.run.ai_feedback``)."""

    principles: tuple = BIASED  # the constitution, in order (names of PRINCIPLES)
    pair_prompts: int = 2048  # training prompts for the judge's pairs
    heldout_prompts: int = 500  # held-out prompts (the task's held-out set) for measuring it
    samples_per_prompt: int = 8
    pairs_per_prompt: int = 2
    temperature: float = 1.0
    max_completion_length: int = 6
    steps: int = 200
    batch_size: int = 128  # pairs per step
    learning_rate: float = 6e-4
    init: str = "sft"  # sft: transformer weights from the SFT policy | scratch
    eval_every: int = 50
    tie_margin: float = 0.1  # the judge abstains (a tie, no label) where |P(A better) − 0.5| <= tie_margin

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise ValueError naming the first bad option and its accepted values."""
        self.principles = check_principles(self.principles, "judge.principles")
        count, positive = {"integer": True, "low": 1}, {"low": 0, "low_open": True}
        for name, rule in {"pair_prompts": count, "heldout_prompts": count,
                           "samples_per_prompt": {"integer": True, "low": 2}, "pairs_per_prompt": count,
                           "temperature": positive, "max_completion_length": count,
                           "steps": {"integer": True, "low": 0}, "batch_size": count, "learning_rate": positive,
                           "eval_every": count, "tie_margin": {"low": 0, "high": 0.5, "high_open": True}}.items():
            number(getattr(self, name), f"judge.{name}", **rule)
        if self.init not in ("sft", "scratch"):
            raise ValueError(f"judge.init must be one of ('sft', 'scratch'); got {self.init!r}")

    def pair_config(self, prompts: int) -> RewardModelConfig:
        """The reward model's pair sampler with these sampling options and no label noise."""
        return RewardModelConfig(pair_prompts=prompts, heldout_prompts=self.heldout_prompts,
                                 samples_per_prompt=self.samples_per_prompt, pairs_per_prompt=self.pairs_per_prompt,
                                 temperature=self.temperature, max_completion_length=self.max_completion_length,
                                 noise=0.0)


def judge_config(name: str = "cpu", **overrides) -> JudgeConfig:
    """The judge's budget for a named run config: ``cpu`` or ``test`` (a toy budget for CI)."""
    sizes = {"cpu": {}, "test": {"pair_prompts": 64, "heldout_prompts": 30, "max_completion_length": 4,
                                 "temperature": 1.5, "steps": 20, "batch_size": 16, "eval_every": 10}}
    if name not in sizes:
        raise ValueError(f"judge config must be one of {tuple(sizes)}; got {name!r}")
    return JudgeConfig(**{**sizes[name], **overrides})


BUDGETS = ("fast", "full")  # notebook 17's budgets (``COURSE_FAST=1`` and the full one), and its benchmark's


def notebook_budget(name: str = "full") -> tuple[JudgeConfig, RewardModelConfig, PPOConfig, int]:
    """``(judge, reward model, PPO, window)`` of notebook 17 and ``benchmarks/tinygpt_ai_feedback.py`` on the ``cpu``
    config: ``full``, or ``fast`` (its ``COURSE_FAST=1`` run: fewer pairs and steps); ``window`` is the moving mean
    (steps) that reads PPO's proxy and gold curves (``reward_model.over_optimisation``)."""
    if name == "fast":
        return (judge_config("cpu", pair_prompts=512, heldout_prompts=300, steps=60),
                RewardModelConfig(pair_prompts=1024, steps=30, heldout_prompts=200),
                PPOConfig(steps=8, batch_prompts=96, eval_every=8), 3)
    if name == "full":
        return (judge_config("cpu", steps=300), RewardModelConfig(pair_prompts=4096, steps=200),
                PPOConfig(steps=40, batch_prompts=128, eval_every=40), 5)
    raise ValueError(f"budget must be one of {BUDGETS}; got {name!r}")


# ---- the judge model --------------------------------------------------------------------------------------
def build_judge(policy, task: AdditionTask, init: str = "sft"):
    """The judge: the tiny GPT with one output (log-odds that A is better), from the SFT policy or scratch."""
    if init not in ("sft", "scratch"):
        raise ValueError(f"init must be one of ('sft', 'scratch'); got {init!r}")
    return build_scalar_model(model_config_of(policy), task.tokenizer, policy if init == "sft" else None)


def judge_inputs(task: AdditionTask, a_ids: torch.Tensor, b_ids: torch.Tensor, slot: int) -> torch.Tensor:
    """``prompt | A | B | <eos>``: the prompt, A's completion in a slot of ``slot`` tokens (``<pad>`` after
    it), B's in another, then ``<eos>``: A and B always sit at the same positions."""
    p, pad, eos = task.prompt_length, task.tokenizer.pad_token_id, task.tokenizer.eos_token_id
    if a_ids.ndim != 2 or b_ids.ndim != 2 or a_ids.shape[0] != b_ids.shape[0]:
        raise ValueError(f"a_ids and b_ids must be (N, L) rows of one batch; got {tuple(a_ids.shape)}, "
                         f"{tuple(b_ids.shape)}")
    if max(a_ids.shape[1], b_ids.shape[1]) > p + slot:
        raise ValueError(f"completions longer than the judge's slot of {slot} tokens: widths {a_ids.shape[1] - p}, "
                         f"{b_ids.shape[1] - p}")

    def fill(ids):
        out = torch.full((ids.shape[0], slot), pad, dtype=torch.long)
        out[:, : ids.shape[1] - p] = ids[:, p:]
        return out

    end = torch.full((a_ids.shape[0], 1), eos, dtype=torch.long)
    return torch.cat([a_ids[:, :p].long(), fill(a_ids), fill(b_ids), end], dim=1)


def judge_logits(judge, ids: torch.Tensor) -> torch.Tensor:
    """Log-odds that A is better, one per row. Every token is attended (pads inside the slots are
    tokens of the layout); the head reads the final ``<eos>``."""
    return judge(input_ids=ids).logits.squeeze(-1).float()


class PairJudge:
    """A trained judge as a function ``(a_ids, b_ids) -> P(A better)`` on prompt + completion rows."""

    def __init__(self, judge, task: AdditionTask, slot: int, batch_size: int = 1024):
        self.judge, self.task, self.slot, self.batch_size = judge, task, slot, batch_size

    @torch.no_grad()
    def __call__(self, a_ids: torch.Tensor, b_ids: torch.Tensor) -> torch.Tensor:
        self.judge.eval()
        device = next(self.judge.parameters()).device
        ids = judge_inputs(self.task, a_ids, b_ids, self.slot)
        out = [torch.sigmoid(judge_logits(self.judge, ids[i : i + self.batch_size].to(device))).cpu()
               for i in range(0, ids.shape[0], self.batch_size)]
        return torch.cat(out) if out else torch.zeros(0)


def train_judge(judge, task: AdditionTask, data: dict, targets: torch.Tensor, cfg: JudgeConfig,
                ctx: TrainContext | None = None, *, generator: torch.Generator,
                heldout: dict | None = None) -> list[dict]:
    """Binary cross entropy of the judge's log-odds against the constitution's labels (1, 0, 0.5).

    Default ``ctx``: no progress bar, torch's threads left alone.
    """
    device = next(judge.parameters()).device
    ids = judge_inputs(task, data["a_ids"], data["b_ids"], cfg.max_completion_length)
    n = ids.shape[0]
    if targets.shape != (n,):
        raise ValueError(f"targets must have shape ({n},), one per pair; got {tuple(targets.shape)}")
    ctx = ctx if ctx is not None else TrainContext(show_progress=False, threads=None)
    ctx = ctx if ctx.log is not None else ctx.replace(log=MetricsLog())

    def batch_of(step: int) -> dict:
        idx = torch.randint(0, n, (min(cfg.batch_size, n),), generator=generator)
        return {"ids": to_device(ids[idx], device), "y": to_device(targets[idx], device)}

    def loss_of(batch: dict, validate: bool) -> tuple[torch.Tensor, dict]:
        logits, y = judge_logits(judge, batch["ids"]), batch["y"]
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y)
        return loss, read_metrics({"loss": loss, "train_agreement": ((logits > 0).float() == y).float().mean()})

    def held_out() -> dict:
        p = PairJudge(judge, task, cfg.max_completion_length)(heldout["a_ids"], heldout["b_ids"])
        judge.train()
        return {"heldout_gold_agreement": decided_agreement(verdicts(p, cfg.tie_margin), heldout["gold"])}

    train_offline("judge", judge, None, cfg, batch_of, loss_of, ctx,
                  held_out=held_out if heldout is not None else None, mixed_precision=False)
    return ctx.log.rows


# ---- measured against gold ------------------------------------------------------------------------------
def verdicts(p: torch.Tensor, tie_margin: float = 0.0) -> torch.Tensor:
    """+1 (A better), −1 (B better) or 0 (a tie: |P − 0.5| <= ``tie_margin``) from P(A better).

    The one tie rule: every measurement and every label of this module decides with it (an exact
    0.5 is a tie even at ``tie_margin = 0``, never a vote for either answer)."""
    return torch.where((p - 0.5).abs() <= tie_margin, 0, torch.where(p > 0.5, 1, -1))


def decided_agreement(verdict: torch.Tensor, gold: torch.Tensor) -> float:
    """Agreement of ``verdicts`` with gold (True: A better) on the pairs decided (verdict ≠ 0); nan if none."""
    decided = verdict != 0
    if not decided.any():
        return float("nan")
    return float(((verdict[decided] == 1) == gold[decided]).float().mean())


def swap_test(judge_fn, data: dict, tie_margin: float = 0.0) -> dict:
    """Every pair judged in both orders: ``judge_fn(a_ids, b_ids) -> P(A better)``.

    ``p_first``: P(the judge prefers the answer shown first), averaged over both orders of every
    pair; ``position_bias`` = P(first) − P(second) = 2·p_first − 1 (0 for a judge that ignores the
    order, 1 for one that always picks the first); ``flip_rate``: the share of pairs whose verdict
    on the *answers* (A, B or a tie, ``verdicts``) changes when the order does.
    """
    p_ab = torch.as_tensor(judge_fn(data["a_ids"], data["b_ids"]), dtype=torch.float32)
    p_ba = torch.as_tensor(judge_fn(data["b_ids"], data["a_ids"]), dtype=torch.float32)
    if p_ab.shape != p_ba.shape or p_ab.ndim != 1:
        raise ValueError(f"judge_fn must return one probability per pair; got shapes {tuple(p_ab.shape)}, "
                         f"{tuple(p_ba.shape)}")
    p_first = float(torch.cat([p_ab, p_ba]).mean())
    flips = verdicts(p_ab, tie_margin) != -verdicts(p_ba, tie_margin)  # swapped, A is shown second
    return {"p_first": p_first, "position_bias": 2 * p_first - 1, "flip_rate": float(flips.float().mean()),
            "p_ab": p_ab, "p_ba": p_ba}


def length_split(task: AdditionTask, data: dict, verdict: torch.Tensor) -> dict:
    """Agreement with gold on decided pairs whose answers differ in length, split by whether the longer is right.

    ``verdict`` is one ``verdicts`` value per pair (+1 A, −1 B, 0 a tie: left out). ``length_bias`` =
    agreement where the longer answer is right − agreement where it is wrong (0 for a judge blind
    to length, 1 for one that always picks the longer).
    """
    right, wrong = [], []
    for (a, b), gold, v in zip(answers(task, data), data["gold"].tolist(), verdict.tolist()):
        if len(a[0]) == len(b[0]) or v == 0:
            continue
        longer_is_a = len(a[0]) > len(b[0])
        (right if longer_is_a == gold else wrong).append((v == 1) == gold)
    mean = lambda xs: sum(xs) / len(xs) if xs else float("nan")  # noqa: E731
    return {"n_longer_right": len(right), "n_longer_wrong": len(wrong), "agreement_longer_right": mean(right),
            "agreement_longer_wrong": mean(wrong), "length_bias": mean(right) - mean(wrong)}


def measure_judge(judge_fn, task: AdditionTask, data: dict, tie_margin: float = 0.0) -> dict:
    """The judge on ``data``'s pairs, in the order shown: ``ties`` (the share it leaves undecided,
    ``verdicts``) and ``decided`` (how many it decides); agreement with gold and the length split
    on the decided pairs only (a tie is no vote: nan when nothing is decided); the swap test."""
    swap = swap_test(judge_fn, data, tie_margin)
    verdict, gold = verdicts(swap["p_ab"], tie_margin), data["gold"]
    carry = torch.tensor([task.ones_carry(x, y) for x, y in data["pairs"]])
    both = verdicts((swap["p_ab"] + 1 - swap["p_ba"]) / 2, tie_margin)  # P(A better) averaged over both orders
    return {"agreement": decided_agreement(verdict, gold),
            "agreement_carry": decided_agreement(verdict[carry], gold[carry]),
            "agreement_no_carry": decided_agreement(verdict[~carry], gold[~carry]),
            "both_orders_agreement": decided_agreement(both, gold),
            "ties": float((verdict == 0).float().mean()), "decided": int((verdict != 0).sum()),
            "pairs": int(data["n_pairs"]), **{k: v for k, v in swap.items() if k not in ("p_ab", "p_ba")},
            **length_split(task, data, verdict)}


def principles_judge(task: AdditionTask, principles):
    """The constitution itself as a judge (no model): P(A better) = its label. For comparing the trained
    judge with the rules it was taught, and for tests."""
    def judge_fn(a_ids, b_ids):
        pairs = _pairs_of(task, a_ids)
        return constitution_labels(task, {"a_ids": a_ids, "b_ids": b_ids, "pairs": pairs}, principles)[0]
    return judge_fn


def _pairs_of(task: AdditionTask, ids: torch.Tensor) -> list[tuple[int, int]]:
    """The prompts ``(a, b)`` read back from prompt + completion rows."""
    p = task.prompt_length
    return [task.parse_prompt(task.completion_text(row[1:p])[0]) for row in ids]


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


def fit_judge(policy, task: AdditionTask, cfg: JudgeConfig, *, seed: int = 0, data: dict | None = None,
              heldout: dict | None = None) -> dict:
    """Sample pairs from ``policy``, label them with ``cfg.principles``, train a judge, measure it on held-out pairs.

    ``data``/``heldout`` (pairs from ``reward_model.preference_data``) reuse pairs already sampled
    (two constitutions compared on the same pairs). Returns ``{"judge", "judge_fn", "train",
    "heldout", "targets", "decided_by", "log", "metrics", "rules"}``: ``metrics`` is
    ``measure_judge`` of the trained judge, ``rules`` the same of the constitution itself.
    """
    cfg.check()
    gen = torch.Generator().manual_seed(seed)
    if data is None:
        data = preference_data(policy, task, task.sample_pairs(cfg.pair_prompts, gen),
                               cfg.pair_config(cfg.pair_prompts), generator=gen)
    if heldout is None:
        heldout = preference_data(policy, task, task.heldout_pairs[: cfg.heldout_prompts],
                                  cfg.pair_config(cfg.pair_prompts), generator=gen)
    targets, decided_by = constitution_labels(task, data, cfg.principles)
    torch.manual_seed(seed)
    judge = build_judge(policy, task, cfg.init).to(next(policy.parameters()).device)
    log = train_judge(judge, task, data, targets, cfg, generator=gen, heldout=heldout)
    judge_fn = PairJudge(judge, task, cfg.max_completion_length)
    return {"judge": judge, "judge_fn": judge_fn, "train": data, "heldout": heldout, "targets": targets,
            "decided_by": decided_by, "log": log, "metrics": measure_judge(judge_fn, task, heldout, cfg.tie_margin),
            "rules": measure_judge(principles_judge(task, cfg.principles), task, heldout, cfg.tie_margin)}


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


def judge_pairs(policy, task: AdditionTask, cfg: JudgeConfig, *, seed: int = 0) -> tuple[dict, dict]:
    """``(train, heldout)``: the pairs every constitution of a seed is trained and measured on."""
    gen = torch.Generator().manual_seed(seed)
    sampler = cfg.pair_config(cfg.pair_prompts)  # the reward model's pair sampler, with no label noise
    train = preference_data(policy, task, task.sample_pairs(cfg.pair_prompts, gen), sampler, generator=gen)
    heldout = preference_data(policy, task, task.heldout_pairs[: cfg.heldout_prompts], sampler, generator=gen)
    return train, heldout


def feedback_run(policy, task: AdditionTask, judge_fn, rm_cfg: RewardModelConfig, ppo_cfg: PPOConfig, window: int, *,
                 tie_margin: float, seed: int = 0) -> tuple[dict, list[dict], dict]:
    """A reward model on the judge's labels, then PPO against it: ``(rm metrics, PPO rows, over-optimisation
    curve)``."""
    rm = fit_reward_model_on_judge(policy, task, judge_fn, rm_cfg, tie_margin=tie_margin, seed=seed)
    rows, _ = rl_against(policy, task, rm["model"], ppo_cfg, seed=seed)
    return rm["metrics"], rows, over_optimisation(rows, window=window)


def seed_summary(seed: int, variant: str, judged: dict, rm: dict, rows: list[dict], curve: dict) -> dict:
    """One constitution on one seed as flat numbers (the notebook's verdicts over seeds and the benchmark's rows)."""
    decided = judged["decided_by"]
    shares = {k: decided.count(k) / len(decided) for k in dict.fromkeys(decided)}
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
