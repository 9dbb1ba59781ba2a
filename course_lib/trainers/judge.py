"""The AI-feedback judge as a trainer: a constitution's labels, a pairwise judge, measured against gold.

Lecture §15 (Constitutional AI, Bai et al. 2022; RLAIF, Lee et al. 2023): instead of people, a model
compares two answers, guided by a short written list of principles. Here the judge is measured
against the gold rule (the strict checker), which real AI feedback does not have.

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
  entropy, a tie's target 0.5, through ``trainer.train_offline``), so it inherits the principles'
  biases and adds its own errors (a few hundred steps on a few thousand pairs).
- **Measured against gold** on held-out pairs (``measure_judge``): the share of ties (|P − 0.5| <=
  ``tie_margin``, the one tie rule, ``verdicts``) and agreement on the pairs it decides (its verdict
  in the order shown); the **swap test**: every pair judged in both orders, P(prefers the answer shown
  first) and position bias = P(first) − P(second), both from the two orders, and the share of
  pairs whose verdict flips with the order; **length bias**: agreement on decided pairs whose
  longer answer is the right one minus agreement on decided pairs whose longer answer is wrong.
- **The run** (``judge_stage``, registered as ``judge``; its config section ``JudgeConfig``): from the
  run's SFT policy, the pairs (``judge_pairs``), the constitution's labels, the judge trained
  (``fit_judge``: resumable, the pairs kept in the checkpoint) and measured, saved in the run folder
  (``save_judge``: ``save_pretrained`` and ``judge.json``), its passport sections (``judge_passport``).
  It trains no policy. A reward model on its labels and RL against it: ``course_lib.run.ai_feedback``.

Simplifications, said out loud:
- The tiny GPT cannot read English, so the judge is not *prompted* with its principles: it is
  *trained* on their labels (closer to RLAIF's distilled preference model than to prompting a
  large model). The written sentences are the constitution's documentation and its one source
  of truth (``label_pair`` applies exactly those rules).
- The principles are rules on the text, not judgements: a real AI judge's biases are learnt
  from pre-training, here they are written down so that each can be switched off and measured.
- Pairs are the reward model's (``reward_model.preference_data`` with no label noise): one answer
  the strict checker accepts and one it rejects, from the SFT policy, shown in random order; gold
  is binary, so two wrong answers are never compared. One round of labelling, never refreshed.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import NamedTuple

import torch

from course_lib._validate import number
from course_lib.tinygpt.model import build_scalar_model, model_config_of
from course_lib.tinygpt.runtime import MetricsLog, read_metrics, to_device
from course_lib.tinygpt.task import AdditionTask, TaskConfig
from course_lib.trainers.configs import RewardModelConfig
from course_lib.trainers.reward_model import preference_data, quiet_bars
from course_lib.trainers.trainer import StageContext, StageResult, TrainContext, register, train_offline
from course_lib.trainers.utilisation import judge_run_flops


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
    """The judge's section of the run config (``train judge``): its data, constitution and optimisation."""

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

    def input_length(self, prompt_length: int) -> int:
        """The judge's row in tokens: prompt | A | B | <eos>, each answer in a slot of ``max_completion_length``
        (``configs.validate`` holds it within ``model.n_positions``)."""
        return prompt_length + 2 * self.max_completion_length + 1

    def pair_config(self, prompts: int) -> RewardModelConfig:
        """The reward model's pair sampler with these sampling options and no label noise."""
        return RewardModelConfig(pair_prompts=prompts, heldout_prompts=self.heldout_prompts,
                                 samples_per_prompt=self.samples_per_prompt, pairs_per_prompt=self.pairs_per_prompt,
                                 temperature=self.temperature, max_completion_length=self.max_completion_length,
                                 noise=0.0)


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
        return loss, read_metrics({"loss": loss, "train_agreement": ((logits > 0).float() == y).float().mean(),
                                   "batch_pairs": len(y)})

    def held_out() -> dict:
        p = PairJudge(judge, task, cfg.max_completion_length)(heldout["a_ids"], heldout["b_ids"])
        judge.train()
        return {"heldout_gold_agreement": decided_agreement(verdicts(p, cfg.tie_margin), heldout["gold"])}

    train_offline("judge", judge, None, cfg, batch_of, loss_of, ctx,
                  held_out=held_out if heldout is not None else None, mixed_precision=False,
                  extra_state=lambda: {"judge": judge.state_dict(), "judge_generator": generator.get_state()})
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


def judge_pairs(policy, task: AdditionTask, cfg: JudgeConfig, *, seed: int = 0) -> tuple[dict, dict]:
    """``(train, heldout)``: the pairs every constitution of a seed is trained and measured on."""
    gen = torch.Generator().manual_seed(seed)
    sampler = cfg.pair_config(cfg.pair_prompts)  # the reward model's pair sampler, with no label noise
    train = preference_data(policy, task, task.sample_pairs(cfg.pair_prompts, gen), sampler, generator=gen)
    heldout = preference_data(policy, task, task.heldout_pairs[: cfg.heldout_prompts], sampler, generator=gen)
    return train, heldout


def fit_judge(policy, task: AdditionTask, cfg: JudgeConfig, ctx: TrainContext | None = None, *, seed: int = 0,
              data: dict | None = None, heldout: dict | None = None) -> dict:
    """Label pairs with ``cfg.principles``, train a judge on them, measure it (and the constitution) on held-out pairs.

    ``data``/``heldout`` (both, or neither: then ``judge_pairs(policy, task, cfg, seed=seed)``) reuse pairs
    already sampled (two constitutions compared on the same pairs). The judge's head and its batches are
    seeded by ``seed``. ``ctx.state`` (a checkpoint of this function: judge, optimizer, batch generator)
    resumes; ``ctx.checkpoint`` as ``train_loop`` (default ``ctx``: no progress bar, torch's threads left
    alone). Returns ``{"judge", "judge_fn", "train", "heldout", "targets", "decided_by", "log", "metrics",
    "rules", "train_seconds"}``: ``metrics`` is ``measure_judge`` of the trained judge, ``rules`` the same of
    the constitution itself, ``train_seconds`` the training's (resumed seconds included).
    """
    cfg.check()
    if (data is None) != (heldout is None):
        raise ValueError("data and heldout come together (pairs from judge_pairs): give both or neither")
    row = cfg.input_length(task.prompt_length)
    if row > model_config_of(policy).n_positions:
        raise ValueError(f"judge.max_completion_length ({cfg.max_completion_length}) makes the judge's row (prompt | "
                         f"A | B | <eos>) {row} tokens, longer than model.n_positions "
                         f"({model_config_of(policy).n_positions})")
    if data is None:
        data, heldout = judge_pairs(policy, task, cfg, seed=seed)
    ctx = ctx if ctx is not None else TrainContext(show_progress=False, threads=None)
    gen = torch.Generator().manual_seed(seed)
    targets, decided_by = constitution_labels(task, data, cfg.principles)
    torch.manual_seed(seed)
    judge = build_judge(policy, task, cfg.init).to(next(policy.parameters()).device)
    if ctx.state is not None:
        judge.load_state_dict(ctx.state["judge"])
        gen.set_state(ctx.state["judge_generator"])
    t0 = time.perf_counter()
    log = train_judge(judge, task, data, targets, cfg, ctx, generator=gen, heldout=heldout)
    train_seconds = time.perf_counter() - t0 + (ctx.state["seconds"] if ctx.state is not None else 0.0)
    judge_fn = PairJudge(judge, task, cfg.max_completion_length)
    return {"judge": judge, "judge_fn": judge_fn, "train": data, "heldout": heldout, "targets": targets,
            "decided_by": decided_by, "log": log, "metrics": measure_judge(judge_fn, task, heldout, cfg.tie_margin),
            "rules": measure_judge(principles_judge(task, cfg.principles), task, heldout, cfg.tie_margin),
            "train_seconds": train_seconds}


# ---- the registered trainer: ``train judge`` ---------------------------------------------------------------------
INFO_FILE = "judge.json"  # beside the weights (``save_pretrained``) in the run folder
FORMAT = "course_lib-judge-1"
GOLD = "strict checker (course_lib.tinygpt.task.strict_reward), used only to measure the judge"


def decided_shares(decided_by: list) -> dict:
    """The share of pairs each principle decided (``None``: the constitution left them tied), in order of first use."""
    return {k: decided_by.count(k) / len(decided_by) for k in dict.fromkeys(decided_by)}


def save_judge(judge, tokenizer, directory, *, task_config: TaskConfig, cfg: JudgeConfig, metrics: dict) -> Path:
    """``save_pretrained`` for the judge and the tokenizer, and ``judge.json``: constitution, config, measurements."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with quiet_bars():
        judge.save_pretrained(directory)
        tokenizer.save_pretrained(directory)
    info = {"format": FORMAT, "constitution": constitution_text(cfg.principles).splitlines(), "gold": GOLD,
            "layout": "prompt | A | B | <eos>, each answer in a slot of max_completion_length tokens",
            "task": asdict(task_config), "config": asdict(cfg), "metrics": metrics}
    (directory / INFO_FILE).write_text(json.dumps(info, indent=2))
    return directory


def read_judge_info(directory) -> dict:
    """A saved judge's ``judge.json`` (its passport entry)."""
    return json.loads((Path(directory) / INFO_FILE).read_text())


def _pct(x: float) -> str:
    return "nan (nothing decided)" if x != x else f"{x:.1%}"


def judge_fields(info: dict) -> dict:
    """The trained judge's passport entry: its pairs, its measurements against gold and the constitution's own."""
    m = info["metrics"]
    j, r = m["judge"], m["constitution"]

    def measured(x: dict) -> str:
        return (f"agreement with gold {_pct(x['agreement'])} on {x['decided']} decided pairs, ties {x['ties']:.1%}, "
                f"position bias {x['position_bias']:+.3f}, flip rate {x['flip_rate']:.1%}, "
                f"length bias {x['length_bias']:+.3f}")

    return {"data": (f"{m['train_pairs']} training pairs from {m['train_prompts']} prompts; {m['heldout_pairs']} "
                     f"held-out pairs from the task's held-out prompts"),
            "decided_by": ", ".join(f"{k} {v:.1%}" for k, v in m["decided_by"].items()),
            "steps": m["steps"],
            "judge": measured(j),
            "constitution_itself": measured(r)}


def judge_passport(cfg, info: dict) -> dict:
    """The judge's passport sections (``course_lib.run.passport``): its pairs, its constitution, its training, and
    after a run (``info["reward_model_info"]``: its ``judge.json``) its measurements against gold."""
    j = cfg.judge
    out = dict(
        data_and_policy={"examples": f"preference pairs from {j.pair_prompts} prompts × {j.samples_per_prompt} SFT "
                                     f"samples (≤ {j.pairs_per_prompt} pairs per prompt): one answer the strict "
                                     f"checker accepts, one it rejects, in random order",
                         "generated_by": f"the SFT checkpoint, once, temperature {j.temperature} (offline)",
                         "reuse": "pairs sampled with replacement every step",
                         "overlap": f"held-out pairs come from the task's first {j.heldout_prompts} held-out prompts "
                                    f"only"},
        reward_contract={"source": "a written constitution, not gold: the first principle that tells two answers "
                                   "apart decides, none: a tie (label 0.5)",
                         "constitution": constitution_text(j.principles).splitlines(),
                         "gold": GOLD,
                         "abstains": f"|P(A better) − 0.5| <= {j.tie_margin} is a tie"},
        optimisation={"algorithm": "binary cross entropy of the judge's log-odds against the constitution's labels",
                      "roles": ["judge (GPT2ForSequenceClassification, 1 label) reading prompt | A | B | <eos>, "
                                + ("initialised from the SFT policy" if j.init == "sft" else "from scratch"),
                                "SFT policy (sampler, init)"],
                      "steps": f"{j.steps} steps of {j.batch_size} pairs at learning rate {j.learning_rate}",
                      "kl": "none", "averaging_unit": "mean over pairs"},
    )
    if info["reward_model_info"] is not None:
        out["judge"] = judge_fields(info["reward_model_info"])
    return out


@register("judge", JudgeConfig, passport=judge_passport, flops=judge_run_flops,
          trl="no TRL row: TRL 1.16 has no judge trainer (its trl.judges are inference-time judges: a prompted or "
              "pretrained model asked at each step, not a preference model trained on a constitution's labels)",
          trains_policy=False, recipe_stage="a judge trains no policy", full_precision=True,  # float32, no autocast
          # the same one spare token past the longest answer + <eos> (digits + 2) as the policy trainers
          gpu=dict(pair_prompts=8192, heldout_prompts=1000, steps=300, batch_size=256, max_completion_length=7),
          test=dict(pair_prompts=64, heldout_prompts=30, max_completion_length=4, temperature=1.5, steps=20,
                    batch_size=16, eval_every=10))
def judge_stage(ctx: StageContext) -> StageResult:
    """``train judge``: the SFT policy writes the pairs and lends the judge its transformer; the judge is trained on
    the constitution's labels, measured against gold on held-out pairs and saved in the run folder."""
    cfg = ctx.cfg.judge
    if ctx.train.state is not None:
        data = ctx.train.saved_data()
    else:
        ctx.say("[course_lib] sampling the judge's pairs from the SFT policy; the constitution:\n"
                + constitution_text(cfg.principles))
        t0 = time.perf_counter()
        train, heldout = judge_pairs(ctx.model, ctx.task, cfg, seed=ctx.seed)
        data = {"train": train, "heldout": heldout, "pair_seconds": time.perf_counter() - t0}
    fit = fit_judge(ctx.model, ctx.task, cfg, ctx.train.keeping(data).replace(show_progress=False), seed=ctx.seed,
                    data=data["train"], heldout=data["heldout"])
    train, heldout = fit["train"], fit["heldout"]
    shares = {"tie" if k is None else k: v for k, v in decided_shares(fit["decided_by"]).items()}
    metrics = {"principles": list(cfg.principles), "train_pairs": train["n_pairs"],
               "train_prompts": train["n_prompts"], "heldout_pairs": heldout["n_pairs"], "steps": len(fit["log"]),
               "decided_by": shares,
               "judge": fit["metrics"], "constitution": fit["rules"], "data_seconds": data["pair_seconds"],
               "train_seconds": fit["train_seconds"]}
    save_judge(fit["judge"], ctx.task.tokenizer, ctx.out, task_config=ctx.cfg.task, cfg=cfg, metrics=metrics)
    m = fit["metrics"]
    line = (f"[course_lib] judge against gold on {heldout['n_pairs']} held-out pairs: agreement "
            f"{_pct(m['agreement'])} on {m['decided']} decided, ties {m['ties']:.1%}, position bias "
            f"{m['position_bias']:+.3f}, length bias {m['length_bias']:+.3f}; saved in {ctx.out}")
    # the counted FLOPs are the judge's training, without sampling its pairs
    return StageResult(steps=len(fit["log"]), rl_seconds=data["pair_seconds"] + fit["train_seconds"],
                       summary={"judge": metrics}, reward_model_info=read_judge_info(ctx.out), line=line,
                       flop_seconds=fit["train_seconds"])
