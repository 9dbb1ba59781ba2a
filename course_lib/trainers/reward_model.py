"""A learned reward model for the tiny GPT: Bradley–Terry on noisy preference labels, best-of-N.

Lecture §3–§4 (the reward model and its loss), §13 (the RLHF pipeline: SFT → reward model → RL),
§15 (a proxy reward gets optimised, not the intention). The reward model is ``transformers``'
``GPT2ForSequenceClassification`` with ``num_labels=1`` — the class TRL's ``RewardTrainer``
trains — built from a config (no download) and initialised from the SFT policy's transformer,
as InstructGPT initialises its reward model from the SFT model. Its loss is
``course_lib.formulas.preference.reward_model_loss``: −log σ(r_chosen − r_rejected).

Where the preferences come from (the labelling rule)
----------------------------------------------------
Human labellers are replaced by a **gold rule with label noise**:

- for each prompt the SFT policy samples ``samples_per_prompt`` completions; one the strict
  checker accepts and one it rejects make a pair (up to ``pairs_per_prompt`` pairs, no sample
  used twice; prompts without both kinds are skipped), shown in random order;
- the **gold** preference is the strict checker's: the exact answer beats anything else;
- each label is then **flipped with probability** ``noise`` (a labeller's slip), independently.

So the gold reward is the strict checker, and the learned reward model is a *proxy* of it.
On held-out pairs labelled the same noisy way, even the gold rule itself agrees with only the
unflipped labels: that fraction (≈ 1 − noise) is the **noise ceiling** for pairwise accuracy.

Optimisation (measured, seed 0, 7,930 training pairs, 477 held-out pairs, noise 0.1): with 64
pairs per step at lr 3e-4 the model underfits — 71.7% held-out pairwise accuracy after 400 steps,
training accuracy still rising; a larger step at that batch is worse (lr 1e-3: 65.6%, 3e-3:
54.7%), and so is a start from scratch (61.4%). At equal pairs seen and lr 3e-4 the batch size
hardly matters (256 × 200 steps: 75.5%; 64 × 800 steps: 75.4%): the model needs
more pairs seen and a larger step, and the larger step is safe with 256 pairs per step. lr 6e-4
with 256 pairs gives 83.4% / 86.6% / 87.2% (92.3% / 95.8% / 96.5% of the noise ceiling) after
200 / 300 / 400 steps. The defaults are 256 pairs, lr 6e-4, 300 steps (1.5× the pairs seen of
64 × 800). Why a larger batch tolerates the larger step (flipped labels averaging out
is the likely reason) was not isolated; lr 6e-4 at 64 pairs was not run.

Simplifications, said out loud:
- The gold rule is binary, so only (correct, incorrect) pairs carry information; real
  preference data also compares two imperfect answers.
- Pairs come from the SFT policy only (one round of data collection, no refresh as the RL
  policy moves): exactly why the RL policy can later wander where the proxy was never taught.
- Right-padded inputs; the classification head reads the last non-pad token
  (transformers' rule), i.e. ``<eos>`` or, for a truncated completion, its last character.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from dataclasses import asdict
from pathlib import Path

import torch
from transformers import GPT2ForSequenceClassification
from transformers.utils import logging as hf_logging

from course_lib.formulas.preference import bt_probability, reward_model_loss
from course_lib.tinygpt.model import ModelConfig, attention_pattern, build_scalar_model, model_config_of
from course_lib.tinygpt.rewards import REWARD_MODEL_PREFIX, register_source, resolve_reward, reward_source
from course_lib.tinygpt.rollout import generate
from course_lib.tinygpt.runtime import MetricsLog, full_precision, read_metrics, to_device
from course_lib.tinygpt.task import AdditionTask, CharTokenizer, TaskConfig
from course_lib.trainers.configs import RewardModelConfig
from course_lib.trainers.dpo import select_pairs
from course_lib.trainers.trainer import StageContext, StageResult, TrainContext, register, train_offline
from course_lib.trainers.utilisation import rm_run_flops

FORMAT = "course_lib-reward-model-1"
INFO_FILE = "reward_model.json"
LABELLING_RULE = (
    "pairs of SFT samples for one prompt, one accepted and one rejected by the strict checker "
    "(exact answer then <eos>); the accepted one is preferred; each label flipped with probability noise"
)


# ---- the model -----------------------------------------------------------------------------------
def build_reward_model(config: ModelConfig, tokenizer: CharTokenizer, policy=None) -> GPT2ForSequenceClassification:
    """GPT-2 with a one-output score head (``model.build_scalar_model``); with ``policy``, its transformer."""
    return build_scalar_model(config, tokenizer, policy)


def sequences(task: AdditionTask, pairs, completions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Prompt + completion ids (right-padded: pad after <eos>) and their attention mask."""
    if completions.ndim != 2:
        raise ValueError(f"completions must have shape (N, L); got {tuple(completions.shape)}")
    if len(pairs) != completions.shape[0]:
        raise ValueError(f"pairs ({len(pairs)}) and completions ({completions.shape[0]} rows) must match one to one")
    ids = torch.cat([task.encode_prompts(pairs, completions.device), completions.long()], dim=1)
    return ids, (ids != task.tokenizer.pad_token_id).long()


def scores(rm, ids: torch.Tensor, attention: torch.Tensor, *, validate: bool = True) -> torch.Tensor:
    """One scalar reward per row, read at the last non-pad token (shape ``(N,)``).

    Right-padded rows run with no mask (``model.attention_pattern``): the last real token sees
    exactly the real tokens. ``validate=False`` assumes right padding (no host read).

    Always float32 with TF32 off (``runtime.full_precision``), also inside a policy's bf16 autocast:
    the reward ranks close completions, and its numbers must not depend on who calls it.
    """
    with full_precision(ids.device):
        mask = attention_pattern(attention, validate=validate)
        return rm(input_ids=ids, attention_mask=mask).logits.squeeze(-1).float()


# ---- preference data --------------------------------------------------------------------------
@torch.no_grad()
def preference_data(policy, task: AdditionTask, prompts, cfg: RewardModelConfig, *,
                    generator: torch.Generator) -> dict:
    """Pairs from ``policy``'s samples, gold-labelled by the strict checker, then noised.

    Returns tensors ``a_ids``/``b_ids`` (prompt + completion, right-padded), ``gold`` (1 where
    a is the gold-preferred answer), ``label`` (the noisy label the model is trained on),
    ``flipped`` (label ≠ gold), and ``n_prompts``/``n_pairs``.
    """
    device = next(policy.parameters()).device
    k = cfg.samples_per_prompt
    roll = generate(policy, task.encode_prompts(prompts, device), task.tokenizer,
                    max_completion_length=cfg.max_completion_length, num_generations=k, temperature=cfg.temperature)
    comps = roll.completions.cpu()
    good_rows, bad_rows, used = [], [], []
    accepted = [[bool(task.strict_reward(pair, comps[i * k + j])) for j in range(k)] for i, pair in enumerate(prompts)]
    for i, g, b in select_pairs(accepted, cfg.pairs_per_prompt):
        good_rows.append(i * k + g)
        bad_rows.append(i * k + b)
        used.append(prompts[i])
    if not used:
        raise ValueError("the policy produced no (accepted, rejected) pair: sample more prompts or train SFT more")
    n = len(used)
    gold = torch.randint(0, 2, (n,), generator=generator).bool()  # where the gold-preferred answer is shown first
    flipped = torch.rand(n, generator=generator) < cfg.noise
    good_c, bad_c = comps[good_rows], comps[bad_rows]
    a = torch.where(gold[:, None], good_c, bad_c)
    b = torch.where(gold[:, None], bad_c, good_c)
    a_ids, _ = sequences(task, used, a)
    b_ids, _ = sequences(task, used, b)
    return {"a_ids": a_ids, "b_ids": b_ids, "gold": gold, "label": gold ^ flipped, "flipped": flipped,
            "pairs": used, "n_prompts": len(prompts), "n_pairs": n}


def _oriented(data: dict, idx) -> tuple[torch.Tensor, torch.Tensor]:
    """(chosen, rejected) ids according to the noisy label."""
    lab = data["label"][idx][:, None]
    a, b = data["a_ids"][idx], data["b_ids"][idx]
    return torch.where(lab, a, b), torch.where(lab, b, a)


# ---- training and evaluation --------------------------------------------------------------------
def train_reward_model(rm, data: dict, cfg: RewardModelConfig, ctx: TrainContext | None = None, *,
                       generator: torch.Generator, heldout: dict | None = None) -> list[dict]:
    """Minimise ``reward_model_loss`` on noisy-labelled pairs; returns per-step rows (``loss``,
    ``train_accuracy``, and for ``utilisation``'s FLOP count ``batch_pairs`` and ``sequence_length``:
    the mean real tokens, prompt included, of the step's chosen and rejected sequences).

    ``ctx.state`` (a checkpoint: optimizer and generator; the caller loads the weights) resumes;
    ``ctx.checkpoint(step, {"optimizer", "reward_model", "rm_generator"}, seconds)`` as ``train_loop``
    (default ``ctx``: no progress bar, torch's threads left alone).
    """
    device = next(rm.parameters()).device
    pad = rm.config.pad_token_id
    ctx = ctx if ctx is not None else TrainContext(show_progress=False, threads=None)
    ctx = ctx if ctx.log is not None else ctx.replace(log=MetricsLog())
    if ctx.state is not None:
        generator.set_state(ctx.state["rm_generator"])
    n = data["n_pairs"]

    def batch_of(step: int) -> dict:
        idx = torch.randint(0, n, (min(cfg.batch_size, n),), generator=generator)
        chosen, rejected = _oriented(data, idx)
        both = torch.cat([chosen, rejected])
        real = float((both != pad).sum(-1).float().mean())  # on the host already: no sync; for the FLOP count
        return {"ids": to_device(both, device), "pairs": len(idx), "sequence_length": real}

    def loss_of(batch: dict, validate: bool) -> tuple[torch.Tensor, dict]:
        ids, k = batch["ids"], batch["pairs"]
        r = scores(rm, ids, (ids != pad).long(), validate=False)
        loss = reward_model_loss(r[:k], r[k:])
        return loss, read_metrics({"loss": loss, "train_accuracy": (r[:k] > r[k:]).float().mean(), "batch_pairs": k,
                                   "sequence_length": batch["sequence_length"]})

    def held_out() -> dict:
        out = {f"heldout_{k}": v for k, v in pairwise_accuracy(rm, heldout).items()}
        rm.train()
        return out

    train_offline("rm", rm, None, cfg, batch_of, loss_of, ctx,
                  held_out=held_out if heldout is not None else None, mixed_precision=False,
                  extra_state=lambda: {"reward_model": rm.state_dict(), "rm_generator": generator.get_state()})
    return ctx.log.rows


@torch.no_grad()
def pair_scores(rm, data: dict, batch_size: int = 1024) -> tuple[torch.Tensor, torch.Tensor]:
    """Reward of the a and b side of every pair (CPU tensors)."""
    rm.eval()
    device = next(rm.parameters()).device
    pad = rm.config.pad_token_id
    out = {}
    for side in ("a", "b"):
        parts = []
        for i in range(0, data["n_pairs"], batch_size):
            ids = data[f"{side}_ids"][i : i + batch_size].to(device)
            parts.append(scores(rm, ids, (ids != pad).long()).cpu())
        out[side] = torch.cat(parts)
    return out["a"], out["b"]


def pairwise_accuracy(rm, data: dict) -> dict:
    """Agreement of ``r_a > r_b`` with the noisy labels and with gold, and the noise ceiling.

    ``ceiling`` is the accuracy of the gold rule itself against the noisy labels: the share of
    pairs whose label was not flipped. ``of_ceiling`` = ``accuracy / ceiling``.
    """
    ra, rb = pair_scores(rm, data)
    says_a = ra > rb
    acc = float((says_a == data["label"]).float().mean())
    ceiling = 1.0 - float(data["flipped"].float().mean())
    return {"accuracy": acc, "gold_accuracy": float((says_a == data["gold"]).float().mean()),
            "ceiling": ceiling, "of_ceiling": acc / ceiling}


def calibration(rm, data: dict, n_bins: int = 10) -> dict:
    """Bradley–Terry predicted P(a ≻ b) = σ(r_a − r_b) against the observed (noisy) win rate.

    Returns per-bin ``predicted``, ``observed`` and ``count`` (empty bins dropped) and the
    expected calibration error ``ece`` (count-weighted mean |predicted − observed|).
    """
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1; got {n_bins}")
    ra, rb = pair_scores(rm, data)
    p = bt_probability(ra - rb)
    y = data["label"].float()
    edges = torch.linspace(0, 1, n_bins + 1)
    which = torch.bucketize(p, edges[1:-1])
    predicted, observed, count = [], [], []
    for b in range(n_bins):
        sel = which == b
        if sel.any():
            predicted.append(float(p[sel].mean()))
            observed.append(float(y[sel].mean()))
            count.append(int(sel.sum()))
    total = sum(count)
    ece = sum(c * abs(pr - ob) for pr, ob, c in zip(predicted, observed, count)) / total
    return {"predicted": predicted, "observed": observed, "count": count, "ece": ece}


# ---- save / load -----------------------------------------------------------------------------------
@contextlib.contextmanager
def quiet_bars():
    """No "Writing model shards" / "Loading weights" bars on stderr (notebooks must stay clean): the reward model's
    saves and loads, the judge's saves (``course_lib.trainers.judge``)."""
    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()


def save_reward_model(rm, tokenizer: CharTokenizer, directory, *, task_config: TaskConfig, cfg: RewardModelConfig,
                      metrics: dict) -> Path:
    """``save_pretrained`` for model and tokenizer, plus ``reward_model.json`` (data, rule, noise, accuracy)."""
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    with quiet_bars():
        rm.save_pretrained(directory)
        tokenizer.save_pretrained(directory)
    info = {"format": FORMAT, "labelling_rule": LABELLING_RULE,
            "gold": "strict checker (course_lib.tinygpt.task.AdditionTask.strict_reward)", "noise": cfg.noise,
            "task": asdict(task_config), "config": asdict(cfg), "metrics": metrics}
    (directory / INFO_FILE).write_text(json.dumps(info, indent=2))
    return directory


def load_reward_model(directory, tokenizer: CharTokenizer | None = None, *, task_config: TaskConfig | None = None):
    """Load a saved reward model; returns ``(model, info)``. Clear errors for anything else.

    ``tokenizer`` (the policy's) must have exactly the vocabulary the reward model was trained
    with — ids are the reward model's language; ``task_config`` must have the same digits.
    """
    directory = Path(directory)
    if not directory.is_dir():
        raise ValueError(f"reward model directory {str(directory)!r} does not exist")
    info_path = directory / INFO_FILE
    if not info_path.is_file():
        raise ValueError(f"{directory} is not a reward-model run directory: {INFO_FILE} is missing (train one with "
                         "`python -m course_lib train rm --out DIR`)")
    try:
        info = json.loads(info_path.read_text())
    except json.JSONDecodeError as err:
        raise ValueError(f"{info_path} is not valid JSON ({err})") from err
    if info.get("format") != FORMAT:
        raise ValueError(f"{info_path} has format {info.get('format')!r}; expected {FORMAT!r}")
    for needed in ("config.json", "vocab.json"):
        if not (directory / needed).is_file():
            raise ValueError(f"{directory} lacks {needed}: the reward model was not saved completely")
    saved_vocab = json.loads((directory / "vocab.json").read_text())
    if tokenizer is not None and saved_vocab != tokenizer.get_vocab():
        raise ValueError(f"tokenizer mismatch: the reward model in {directory} was trained with vocabulary "
                         f"{sorted(saved_vocab, key=saved_vocab.get)}, the policy's tokenizer has "
                         f"{sorted(tokenizer.get_vocab(), key=tokenizer.get_vocab().get)}")
    if task_config is not None and info["task"]["digits"] != task_config.digits:
        raise ValueError(f"the reward model in {directory} was trained on {info['task']['digits']}-digit addition; "
                         f"the task has digits={task_config.digits}")
    try:
        with quiet_bars():
            rm = GPT2ForSequenceClassification.from_pretrained(directory)
    except (OSError, ValueError) as err:
        raise ValueError(f"cannot load the reward model weights from {directory} ({err})") from err
    if rm.config.num_labels != 1:
        raise ValueError(f"{directory} holds a classifier with {rm.config.num_labels} labels; a reward model has 1")
    return rm.eval().requires_grad_(False), info


class RewardModelScorer:
    """A batched reward ``(pairs, completions: LongTensor[N, L]) -> FloatTensor[N]`` from a reward model."""

    def __init__(self, rm, task: AdditionTask, batch_size: int = 1024):
        self.rm, self.task, self.batch_size = rm, task, batch_size

    @torch.no_grad()
    def __call__(self, pairs, completions: torch.Tensor) -> torch.Tensor:
        device = next(self.rm.parameters()).device
        ids, attention = sequences(self.task, pairs, completions.to(device))
        out = [scores(self.rm, ids[i : i + self.batch_size], attention[i : i + self.batch_size])
               for i in range(0, ids.shape[0], self.batch_size)]
        return torch.cat(out).to(completions.device)


def load_reward(directory, task: AdditionTask) -> RewardModelScorer:
    """The reward for ``--reward rm:DIR``: a saved reward model checked against ``task``'s tokenizer."""
    rm, _ = load_reward_model(directory, task.tokenizer, task_config=task.config)
    return RewardModelScorer(rm, task)


# ---- the whole reward-model stage ------------------------------------------------------------------
def fit_reward_model(policy, task: AdditionTask, cfg: RewardModelConfig, ctx: TrainContext | None = None, *,
                     seed: int = 0) -> dict:
    """Sample and label pairs from ``policy``, train a reward model, evaluate it on held-out pairs.

    Returns ``{"model", "train", "heldout", "log", "metrics"}``; ``metrics`` holds the numbers a
    passport needs (pairs, noise, held-out accuracy, ceiling, gold accuracy, ECE, seconds).
    ``ctx.state`` (a checkpoint of this function: pairs, weights, optimizer, generator) resumes;
    ``ctx.checkpoint(step, trainer_state, seconds)`` is called as ``train_loop`` says (default: no
    progress bar, torch's threads left alone).
    """
    cfg.check()
    ctx = ctx if ctx is not None else TrainContext(show_progress=False, threads=None)
    state, checkpoint = ctx.state, ctx.checkpoint
    gen = torch.Generator().manual_seed(seed)
    if state is not None:
        train, heldout, data_seconds = state["rm_train"], state["rm_heldout"], state["rm_data_seconds"]
    else:
        start = time.perf_counter()
        train = preference_data(policy, task, task.sample_pairs(cfg.pair_prompts, gen), cfg, generator=gen)
        heldout = preference_data(policy, task, task.heldout_pairs[: cfg.heldout_prompts], cfg, generator=gen)
        data_seconds = time.perf_counter() - start
    torch.manual_seed(seed)
    rm = build_reward_model(model_config_of(policy), task.tokenizer, policy if cfg.init == "sft" else None)
    rm.to(next(policy.parameters()).device)
    if state is not None:
        rm.load_state_dict(state["reward_model"])
    with_data = None
    if checkpoint is not None:
        def with_data(step, trainer_state, seconds):
            checkpoint(step, {**trainer_state, "rm_train": train, "rm_heldout": heldout,
                              "rm_data_seconds": data_seconds}, seconds)
    t0 = time.perf_counter()
    rows = train_reward_model(rm, train, cfg, ctx.replace(checkpoint=with_data), generator=gen, heldout=heldout)
    train_seconds = time.perf_counter() - t0 + (state["seconds"] if state is not None else 0.0)
    acc = pairwise_accuracy(rm, heldout)
    cal = calibration(rm, heldout)
    metrics = {"train_pairs": train["n_pairs"], "train_prompts": train["n_prompts"],
               "heldout_pairs": heldout["n_pairs"], "noise": cfg.noise,
               "train_flipped": float(train["flipped"].float().mean()),
               "heldout_accuracy": acc["accuracy"], "heldout_gold_accuracy": acc["gold_accuracy"],
               "noise_ceiling": acc["ceiling"], "of_ceiling": acc["of_ceiling"], "ece": cal["ece"],
               "data_seconds": data_seconds, "train_seconds": train_seconds}
    return {"model": rm, "train": train, "heldout": heldout, "log": rows, "metrics": metrics, "calibration": cal}


# ---- best-of-N ----------------------------------------------------------------------------------------
def best_of_n_kl(n: int) -> float:
    """log n − (n − 1)/n: KL(best-of-n ‖ base) when no two samples can be equal (Stiennon et al. 2020).

    For a base distribution with repeated outcomes (a tiny GPT's answers repeat) it is an upper
    bound (Beirami et al. 2024); ``best_of_n_exact_kl`` gives the exact value.
    """
    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer; got {n!r}")
    return math.log(n) - (n - 1) / n


def best_of_n_exact_kl(probs, rewards, n: int) -> float:
    """Exact KL(best-of-n ‖ base) for a base distribution over distinct outcomes.

    ``probs[i]`` is outcome i's base probability (summing to 1), ``rewards[i]`` its reward. Draw n
    outcomes, keep one with the highest reward; outcomes with equal rewards form one class, and
    the kept sample is the first of the n drawn in the top class, so within a class best-of-n
    keeps the base proportions. With F_c and G_c the base probabilities of a reward below and
    at most class c's, best-of-n puts mass w_c = G_c^n − F_c^n on class c, and
    KL = Σ_c w_c log(w_c / P(c)). With no repeats and no ties it tends to log n − (n − 1)/n as
    every outcome's probability goes to 0, and stays below it.
    """
    if int(n) != n or n < 1:
        raise ValueError(f"n must be a positive integer; got {n!r}")
    probs = torch.as_tensor(probs, dtype=torch.float64).flatten()
    rewards = torch.as_tensor(rewards, dtype=torch.float64).flatten()
    if probs.shape != rewards.shape or probs.numel() == 0:
        raise ValueError(f"probs and rewards must be non-empty and the same length; got {probs.numel()}, "
                         f"{rewards.numel()}")
    if (probs < 0).any() or abs(float(probs.sum()) - 1) > 1e-6:
        raise ValueError(f"probs must be non-negative and sum to 1; got sum {float(probs.sum())}")
    levels, cls = torch.unique(rewards, return_inverse=True)  # sorted reward levels, class of each outcome
    mass = torch.zeros(len(levels), dtype=torch.float64).index_add_(0, cls, probs)
    at_most = mass.cumsum(0).clamp(max=1.0)
    below = at_most - mass
    w = at_most**n - below**n
    keep = (w > 0) & (mass > 0)
    return float((w[keep] * (w[keep] / mass[keep]).log()).sum())


def sample_ids(task: AdditionTask, completions: torch.Tensor, k: int) -> torch.Tensor:
    """``(P, k)`` ids of ``P·k`` completions, k per prompt: equal ids within a row mean the same text
    (characters before <eos>, and whether <eos> came)."""
    keys = [task.completion_text(c) for c in completions]
    if len(keys) % k:
        raise ValueError(f"k must divide the {len(keys)} completions; got {k}")
    rows = [keys[i : i + k] for i in range(0, len(keys), k)]
    return torch.tensor([[row.index(key) for key in row] for row in rows])


def empirical_best_of_n_kl(proxy: torch.Tensor, ids: torch.Tensor, n: int) -> float:
    """Mean over prompts of the exact best-of-n KL under each prompt's empirical sample distribution.

    ``proxy`` and ``ids`` are ``(P, K)``: the K samples' scores and ids (``sample_ids``). Each
    prompt's base distribution is its samples' frequencies (repeats counted), each outcome scored by
    the proxy (the first copy's score); ``best_of_n_exact_kl`` does the rest.
    """
    proxy, ids = torch.as_tensor(proxy), torch.as_tensor(ids)
    if proxy.ndim != 2 or proxy.shape != ids.shape:
        raise ValueError(f"proxy and ids must both have shape (prompts, samples); got {tuple(proxy.shape)}, "
                         f"{tuple(ids.shape)}")
    total = 0.0
    for p_row, i_row in zip(proxy, ids):
        outcomes, first, counts = [], {}, {}
        for j, key in enumerate(i_row.tolist()):
            if key not in first:
                first[key] = j
                outcomes.append(key)
            counts[key] = counts.get(key, 0) + 1
        probs = torch.tensor([counts[o] / len(i_row) for o in outcomes], dtype=torch.float64)
        total += best_of_n_exact_kl(probs, p_row[[first[o] for o in outcomes]], n)
    return total / proxy.shape[0]


def best_of_n_curve(proxy: torch.Tensor, gold: torch.Tensor, ns, ids: torch.Tensor | None = None) -> list[dict]:
    """Gold and proxy reward of best-of-n selection, from ``(P, K)`` scores of K samples per prompt.

    For each n dividing K, the K samples of a prompt are split into K/n disjoint groups; the
    proxy's favourite of each group is kept (first one on ties). Returns one row per n with
    mean ``gold`` and ``proxy`` of the kept samples, ``kl_bound`` (log n − (n − 1)/n) and
    ``kl``: with ``ids`` (``(P, K)`` sample ids, ``sample_ids``) the exact KL under each prompt's
    empirical sample distribution (``empirical_best_of_n_kl``), else the bound.
    """
    proxy, gold = torch.as_tensor(proxy, dtype=torch.float32), torch.as_tensor(gold, dtype=torch.float32)
    if proxy.ndim != 2 or proxy.shape != gold.shape:
        raise ValueError(f"proxy and gold must both have shape (prompts, samples); got {tuple(proxy.shape)}, "
                         f"{tuple(gold.shape)}")
    k = proxy.shape[1]
    rows = []
    for n in ns:
        if int(n) != n or n < 1 or k % n:
            raise ValueError(f"every n must be a positive divisor of the {k} samples per prompt; got {n!r}")
        p = proxy.reshape(proxy.shape[0], k // n, n)
        g = gold.reshape(gold.shape[0], k // n, n)
        best = p.argmax(-1, keepdim=True)
        bound = best_of_n_kl(int(n))
        rows.append({"n": int(n), "gold": float(g.gather(-1, best).mean()), "proxy": float(p.gather(-1, best).mean()),
                     "kl": bound if ids is None else empirical_best_of_n_kl(proxy, ids, int(n)), "kl_bound": bound})
    return rows


@torch.no_grad()
def best_of_n_scores(policy, task: AdditionTask, pairs, proxy, *, k: int = 64, max_completion_length: int = 6,
                     temperature: float = 1.0) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Sample ``k`` completions per prompt; return proxy and gold (strict checker) scores and the
    samples' ids (``sample_ids``: equal ids, equal completions), each ``(P, k)``."""
    device = next(policy.parameters()).device
    roll = generate(policy, task.encode_prompts(pairs, device), task.tokenizer,
                    max_completion_length=max_completion_length, num_generations=k, temperature=temperature)
    repeated = [p for p in pairs for _ in range(k)]
    comps = roll.completions
    gold = resolve_reward("strict", task)(repeated, comps).view(len(pairs), k)
    return proxy(repeated, comps).view(len(pairs), k).cpu(), gold, sample_ids(task, comps, k)


def over_optimisation(rows, window: int = 5, tol: float = 0.03) -> dict:
    """Proxy and gold over an RL run against a reward model, read as the published curves are.

    ``rows``: per step ``{"step", "proxy", "gold", "kl"}`` (gold scored on the same samples as the
    proxy, ``kl`` the sampled KL to the reference). Per-step means of a batch are noisy, so every
    number is a ``window``-step moving mean: start (first window), end (last window), and the
    gold peak with its step and √KL. ``shape`` names what gold did, with ``tol`` as the smallest
    move that counts: "rises then falls" (up by > tol, then down by > tol from the peak),
    "falls", "rises" or "flat". The maximum of a noisy curve is biased upwards: a peak only a
    little above the start is not evidence of a peak.
    """
    if window < 1 or len(rows) < window:
        raise ValueError(f"window must lie in [1, len(rows)={len(rows)}]; got {window}")

    def smooth(key):
        vals = [float(r[key]) for r in rows]
        return [sum(vals[i : i + window]) / window for i in range(len(vals) - window + 1)]

    gold, proxy, kl = smooth("gold"), smooth("proxy"), smooth("kl")
    peak = max(range(len(gold)), key=gold.__getitem__)
    rose, fell = gold[peak] > gold[0] + tol, gold[-1] < gold[peak] - tol
    if rose and fell:
        shape = "rises then falls"
    elif gold[-1] < gold[0] - tol:
        shape = "falls"
    elif gold[-1] > gold[0] + tol:
        shape = "rises"
    else:
        shape = "flat"
    return {"proxy_start": proxy[0], "proxy_end": proxy[-1], "gold_start": gold[0], "gold_peak": gold[peak],
            "gold_end": gold[-1], "peak_step": rows[peak + window // 2]["step"],
            "sqrt_kl_peak": math.sqrt(max(kl[peak], 0.0)), "sqrt_kl_end": math.sqrt(max(kl[-1], 0.0)), "shape": shape}


def passport_fields(info: dict) -> dict:
    """The reward model's passport entry (§17): data, labelling rule, noise, accuracy, from ``reward_model.json``."""
    c, m = info["config"], info["metrics"]
    return {
        "data": (f"{m['train_pairs']} pairs from {m['train_prompts']} prompts, {c['samples_per_prompt']} SFT samples "
                 f"per prompt at temperature {c['temperature']} (one round, never refreshed); "
                 f"{m['heldout_pairs']} held-out pairs from the task's held-out prompts"),
        "labelling_rule": info["labelling_rule"],
        "noise": f"each label flipped with probability {info['noise']} ({m['train_flipped']:.1%} of training labels)",
        "model": "GPT2ForSequenceClassification(num_labels=1), initialised from "
                 + ("the SFT policy" if c["init"] == "sft" else "scratch"),
        "accuracy": (f"held-out pairwise {m['heldout_accuracy']:.1%} = {m['of_ceiling']:.1%} of the noise ceiling "
                     f"{m['noise_ceiling']:.1%}; against gold {m['heldout_gold_accuracy']:.1%}; ECE {m['ece']:.3f}"),
    }


def read_info(directory) -> dict:
    """A saved reward model's ``reward_model.json`` (its passport entry travels with runs that use it)."""
    return json.loads((Path(directory) / INFO_FILE).read_text())


def rm_passport(cfg, info: dict) -> dict:
    """The reward model's passport sections (``course_lib.run.passport``)."""
    r = cfg.rm
    out = dict(
        data_and_policy={"examples": f"preference pairs from {r.pair_prompts} prompts × {r.samples_per_prompt} SFT "
                                     f"samples (≤ {r.pairs_per_prompt} pairs per prompt)",
                         "generated_by": f"the SFT checkpoint, once, temperature {r.temperature} (offline)",
                         "reuse": "pairs sampled with replacement every step",
                         "overlap": "held-out pairs come from the task's held-out prompts only"},
        reward_contract={"source": "gold rule: " + reward_source("strict"), "labelling_rule": LABELLING_RULE,
                         "noise": f"each label flipped with probability {r.noise}"},
        optimisation={"algorithm": "Bradley–Terry reward-model loss −log σ(r_chosen − r_rejected)",
                      "roles": ["reward model (GPT2ForSequenceClassification, 1 label)", "SFT policy (sampler, init)"],
                      "kl": "none", "averaging_unit": "mean over pairs"},
    )
    if info["reward_model_info"] is not None:
        out["reward_model"] = passport_fields(info["reward_model_info"])
    return out


@register("rm", RewardModelConfig, passport=rm_passport, flops=rm_run_flops,
          trl="no TRL row: TRL's RewardTrainer trains a sequence classifier on a preference dataset; the bridge "
              "does not translate the course's reward model (a head on the SFT policy's transformer)",
          trains_policy=False, recipe_stage="a reward model trains no policy", full_precision=True,
          # the same one spare token past the longest answer + <eos> (digits + 2) as the policy trainers
          gpu=dict(pair_prompts=16384, heldout_prompts=1000, steps=500, batch_size=512, max_completion_length=7),
          test=dict(pair_prompts=64, heldout_prompts=30, samples_per_prompt=8, max_completion_length=4,
                    temperature=1.5, steps=20, batch_size=16, eval_every=10))
def reward_model_stage(ctx: StageContext) -> StageResult:
    """``train rm``: the SFT policy writes the pairs and lends the reward model its transformer."""
    fit = fit_reward_model(ctx.model, ctx.task, ctx.cfg.rm, ctx.train.replace(show_progress=False), seed=ctx.seed)
    save_reward_model(fit["model"], ctx.task.tokenizer, ctx.out, task_config=ctx.cfg.task, cfg=ctx.cfg.rm,
                      metrics=fit["metrics"])
    m = fit["metrics"]
    ctx.say(f"[course_lib] reward model: {m['train_pairs']} pairs, held-out pairwise accuracy "
            f"{m['heldout_accuracy']:.3f} = {m['of_ceiling']:.1%} of the noise ceiling {m['noise_ceiling']:.3f} "
            f"(gold {m['heldout_gold_accuracy']:.3f})")
    line = (f"[course_lib] reward model held-out pairwise accuracy {m['heldout_accuracy']:.3f} = "
            f"{m['of_ceiling']:.1%} of the noise ceiling; use it with --reward rm:{ctx.out}")
    # the counted FLOPs are the reward model's training, without sampling and labelling its pairs
    return StageResult(steps=ctx.cfg.rm.steps, rl_seconds=m["data_seconds"] + m["train_seconds"],
                       summary={"reward_model": m}, reward_model_info=read_info(ctx.out), line=line,
                       flop_seconds=m["train_seconds"])


register_source(REWARD_MODEL_PREFIX, load_reward)
