"""Trainers for the tiny GPT: SFT (the reference policy) and offline DPO; shared plumbing.

Lecture §6 (DPO with a cached reference), §8 (IPO, SimPO, the NLL term), §17 (the passport).
GRPO lives in ``course_lib.grpo``; both trainers use this module's evaluation, metrics log
and atomic checkpoints. The losses are ``course_lib.preference``'s functions — the very ones
notebook 02 reproduces by hand — applied to sequence log-probs from
``course_lib.model.completion_logprobs``.

Simplifications, said out loud:
- One process, one device; AdamW with a constant learning rate and gradient clipping.
- DPO pairs come from the SFT policy itself: for each prompt we sample candidates and pair
  one the checker accepts with one it rejects (prompts with no such pair are skipped). The
  reference log-probs of every pair are computed once, before training, and cached (§6).
- ``ipo`` uses *summed* token log-probs, as ``course_lib.preference.ipo_loss`` does (TRL
  averages them over length for IPO).
- Held-out accuracy is greedy exact match on a fixed set of prompts never used in training.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import time
from dataclasses import asdict
from pathlib import Path

import torch
from tqdm.auto import tqdm

from course_lib.configs import DPOConfig, SFTConfig
from course_lib.model import completion_logprobs, generate
from course_lib.preference import dpo_terms, implicit_reward, ipo_loss, simpo_loss
from course_lib.task import AdditionTask

CHECKPOINT_FORMAT = "course_lib-tinygpt-1"


# ---- small utilities -------------------------------------------------------------------------
def autocast(device: torch.device):
    """bf16 autocast on CUDA; nothing elsewhere (CPU runs in float32)."""
    if device.type == "cuda":
        return torch.autocast("cuda", dtype=torch.bfloat16)
    return contextlib.nullcontext()


def make_optimizer(model, learning_rate: float) -> torch.optim.Optimizer:
    return torch.optim.AdamW(model.parameters(), lr=learning_rate, weight_decay=0.0)


@torch.no_grad()
def evaluate(model, task: AdditionTask, *, batch_size: int = 512, max_completion_length: int | None = None) -> dict:
    """Greedy decoding on the held-out prompts.

    Returns strict exact match (``accuracy``), the loose checker's score (``loose_accuracy``)
    and strict accuracy split by whether the ones column carries (``accuracy_carry`` /
    ``accuracy_no_carry``) — the split that shows the flawed teacher's mark.
    """
    device = next(model.parameters()).device
    length = max_completion_length or task.answer_length
    pairs = task.heldout_pairs
    strict, loose = [], []
    for i in range(0, len(pairs), batch_size):
        chunk = pairs[i : i + batch_size]
        with autocast(device):
            roll = generate(model, task.encode_prompts(chunk, device), task.tokenizer, max_completion_length=length, greedy=True)
        comps = roll.completions.cpu()
        strict += [task.strict_reward(p, c) for p, c in zip(chunk, comps)]
        loose += [task.loose_reward(p, c) for p, c in zip(chunk, comps)]
    carry = [task.ones_carry(a, b) for a, b in pairs]

    def mean(xs):
        return sum(xs) / len(xs) if xs else None

    return {
        "accuracy": mean(strict),
        "loose_accuracy": mean(loose),
        "accuracy_carry": mean([s for s, c in zip(strict, carry) if c]),
        "accuracy_no_carry": mean([s for s, c in zip(strict, carry) if not c]),
    }


def sample_completions(model, task: AdditionTask, pairs, *, n: int = 1, max_completion_length: int = 6) -> list[str]:
    """Readable samples ``'123+045=168'`` (``…`` marks a truncated completion)."""
    device = next(model.parameters()).device
    with autocast(device):
        roll = generate(model, task.encode_prompts(pairs, device), task.tokenizer, max_completion_length=max_completion_length, num_generations=n)
    out = []
    for i, comp in enumerate(roll.completions.cpu()):
        a, b = pairs[i // n]
        text, ended = task.completion_text(comp)
        out.append(f"{task.prompt_text(a, b)}{text}{'' if ended else '…'}")
    return out


class MetricsLog:
    """Per-step metrics in memory and in ``metrics.jsonl`` (one JSON object per line)."""

    def __init__(self, path: str | os.PathLike | None = None, rows: list[dict] | None = None):
        self.path = Path(path) if path else None
        self.rows = list(rows or [])
        if self.path:  # rewrite what the checkpoint knows, dropping rows logged after it
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with open(self.path, "w", encoding="utf-8") as fh:
                for row in self.rows:
                    fh.write(json.dumps(row) + "\n")

    def append(self, row: dict) -> None:
        self.rows.append(row)
        if self.path:
            with open(self.path, "a", encoding="utf-8") as fh:
                fh.write(json.dumps(row) + "\n")


def save_checkpoint(path, state: dict) -> None:
    """Write atomically: a temporary file in the same folder, then ``os.replace``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    torch.save({"format": CHECKPOINT_FORMAT, **state}, tmp)
    os.replace(tmp, path)


def load_checkpoint(path, *, kind: str | None = None) -> dict:
    """Load a checkpoint written by ``save_checkpoint``; clear errors for anything else."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {path}")
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # noqa: BLE001 - any unpickling failure means "not ours"
        raise ValueError(f"{path} is not a readable course_lib checkpoint ({type(err).__name__}: {err})") from err
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path} is not a course_lib tiny-GPT checkpoint (format tag missing or wrong)")
    if kind is not None and state.get("kind") != kind:
        raise ValueError(f"{path} holds a {state.get('kind')!r} checkpoint, but {kind!r} was asked for")
    return state


def rng_state(data_gen: torch.Generator) -> dict:
    state = {"torch": torch.get_rng_state(), "data": data_gen.get_state()}
    if torch.cuda.is_available():
        state["cuda"] = torch.cuda.get_rng_state_all()
    return state


def set_rng_state(state: dict, data_gen: torch.Generator) -> None:
    torch.set_rng_state(state["torch"])
    data_gen.set_state(state["data"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def progress(total: int, desc: str, enabled: bool = True, initial: int = 0):
    return tqdm(total=total, desc=desc, initial=initial, disable=not enabled, leave=False)


# ---- SFT ---------------------------------------------------------------------------------------
def sft_loss(model, ids, attn, cmask) -> torch.Tensor:
    """Token-mean negative log-likelihood of the completion tokens."""
    logps, mask = completion_logprobs(model, ids, attn, cmask)
    return -logps.sum() / mask.sum()


def train_sft(
    model,
    task: AdditionTask,
    cfg: SFTConfig,
    *,
    seed: int = 0,
    steps: int | None = None,
    time_budget: float | None = None,
    max_grad_norm: float = 1.0,
    log: MetricsLog | None = None,
    show_progress: bool = True,
    eval_at_end: bool = True,
    demos: tuple | None = None,
) -> dict:
    """Supervised fine-tuning on the task's (scarce, partly flawed) demonstrations.

    Runs ``steps`` optimizer steps (default ``cfg.steps``), or until ``time_budget`` seconds
    have passed when given (the "same wall-clock on more SFT" control). ``demos`` replaces
    the task's demonstrations with other ``(input_ids, attention_mask, completion_mask)``
    (e.g. checker-approved samples: rejection-sampling fine-tuning). Returns
    ``{"steps", "seconds"}`` plus ``evaluate``'s accuracies.
    """
    device = next(model.parameters()).device
    ids, attn, cmask = (t.to(device) for t in demos) if demos is not None else task.demonstrations(device)
    gen = torch.Generator().manual_seed(seed)
    opt = make_optimizer(model, cfg.learning_rate)
    log = log if log is not None else MetricsLog()
    total = cfg.steps if steps is None else steps
    model.train()
    start = time.perf_counter()
    step = 0
    bar = progress(total if time_budget is None else 0, "sft", show_progress)
    while (time_budget is None and step < total) or (time_budget is not None and time.perf_counter() - start < time_budget):
        idx = torch.randint(0, ids.shape[0], (cfg.batch_size,), generator=gen).to(device)
        with autocast(device):
            loss = sft_loss(model, ids[idx], attn[idx], cmask[idx])
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        opt.step()
        step += 1
        row = {"step": step, "loss": loss.item()}
        if time_budget is None and (step % cfg.eval_every == 0 or step == total):
            row.update(evaluate(model, task))
            bar.set_postfix(acc=f"{row['accuracy']:.2f}")
            model.train()
        log.append(row)
        bar.update(1)
    bar.close()
    seconds = time.perf_counter() - start
    result = {"steps": step, "seconds": seconds}
    if eval_at_end:
        result.update(evaluate(model, task))
    model.eval()
    return result


# ---- DPO ---------------------------------------------------------------------------------------
def _pad_rows(rows: list[list[int]], width: int, pad: int) -> torch.Tensor:
    out = torch.full((len(rows), width), pad, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return out


@torch.no_grad()
def build_preference_pairs(model, task: AdditionTask, cfg: DPOConfig, *, generator: torch.Generator) -> dict:
    """Offline pairs from the SFT policy: per prompt, one accepted and one rejected sample.

    Returns tensors ``chosen_ids``/``rejected_ids`` (right-padded prompt + completion),
    their attention and completion masks, and ``n_prompts``/``n_pairs`` counts.
    """
    device = next(model.parameters()).device
    pairs = task.sample_pairs(cfg.pair_prompts, generator)
    with autocast(device):
        roll = generate(
            model, task.encode_prompts(pairs, device), task.tokenizer,
            max_completion_length=cfg.max_completion_length, num_generations=cfg.samples_per_prompt,
        )
    ids = roll.input_ids.cpu()
    cmask = roll.completion_mask.cpu()
    k = cfg.samples_per_prompt
    chosen, rejected = [], []
    for i, pair in enumerate(pairs):
        rows = range(i * k, (i + 1) * k)
        good = [r for r in rows if task.strict_reward(pair, ids[r, task.prompt_length :])]
        bad = [r for r in rows if not task.strict_reward(pair, ids[r, task.prompt_length :])]
        if good and bad:
            g, b = good[0], bad[0]
            chosen.append(ids[g, : int(task.prompt_length + cmask[g].sum())].tolist())
            rejected.append(ids[b, : int(task.prompt_length + cmask[b].sum())].tolist())
    if not chosen:
        raise ValueError("the SFT policy produced no (correct, incorrect) pair; train SFT longer or sample more")
    width = task.prompt_length + cfg.max_completion_length
    pad = task.tokenizer.pad_token_id
    out = {"n_prompts": len(pairs), "n_pairs": len(chosen)}
    for name, rows in (("chosen", chosen), ("rejected", rejected)):
        t = _pad_rows(rows, width, pad)
        attn = (torch.arange(width)[None, :] < torch.tensor([len(r) for r in rows])[:, None]).long()
        comp = attn.clone()
        comp[:, : task.prompt_length] = 0
        out[f"{name}_ids"], out[f"{name}_attention"], out[f"{name}_completion"] = t, attn, comp
    return out


@torch.no_grad()
def reference_logprobs(model, data: dict, batch_size: int = 512) -> dict:
    """Per-token reference log-probs of every chosen and rejected answer, computed once (§6)."""
    device = next(model.parameters()).device
    out = {}
    for name in ("chosen", "rejected"):
        parts = []
        for i in range(0, data[f"{name}_ids"].shape[0], batch_size):
            sl = slice(i, i + batch_size)
            with autocast(device):
                lp, _ = completion_logprobs(
                    model, data[f"{name}_ids"][sl].to(device), data[f"{name}_attention"][sl].to(device),
                    data[f"{name}_completion"][sl].to(device),
                )
            parts.append(lp.float().cpu())
        out[f"ref_{name}_token_logps"] = torch.cat(parts)
    return out


def dpo_batch_loss(model, batch: dict, cfg: DPOConfig) -> tuple[torch.Tensor, dict]:
    """Loss and logged quantities for one batch of pairs (chosen and rejected in one forward)."""
    n = batch["chosen_ids"].shape[0]
    ids = torch.cat([batch["chosen_ids"], batch["rejected_ids"]])
    attn = torch.cat([batch["chosen_attention"], batch["rejected_attention"]])
    comp = torch.cat([batch["chosen_completion"], batch["rejected_completion"]])
    token_logps, mask = completion_logprobs(model, ids, attn, comp)
    seq = token_logps.sum(-1)
    lengths = mask.sum(-1)
    pw, pl = seq[:n], seq[n:]
    ref_tok = torch.cat([batch["ref_chosen_token_logps"], batch["ref_rejected_token_logps"]])
    ref_seq = ref_tok.sum(-1)
    rw, rl = ref_seq[:n], ref_seq[n:]
    terms = dpo_terms(pw, pl, rw, rl, beta=cfg.beta)  # margin is logged for every loss type
    if cfg.loss_type == "sigmoid":
        pref_loss = terms.loss.mean()
    elif cfg.loss_type == "ipo":
        pref_loss = ipo_loss(pw, pl, rw, rl, beta=cfg.beta).mean()
    else:  # simpo: no reference in the loss
        pref_loss = simpo_loss(pw, pl, lengths[:n], lengths[n:], beta=cfg.beta, gamma=cfg.simpo_gamma).mean()
    nll = -token_logps[:n].sum() / mask[:n].sum()  # token-mean NLL of the chosen answers
    loss = pref_loss + cfg.rpo_alpha * nll if cfg.rpo_alpha > 0 else pref_loss
    with torch.no_grad():
        # KL(π_ref ‖ π_θ), k1 estimate on the pair tokens: they were sampled from π_ref (the
        # SFT policy), then selected by the checker, so this is a drift gauge, not an exact KL.
        kl_tokens = (ref_tok - token_logps.detach()) * mask
        stats = {
            "loss": loss.item(),
            "preference_loss": pref_loss.item(),
            "nll": nll.item(),
            "margin": float(terms.margin.mean()),
            "preference_accuracy": float((terms.margin > 0).float().mean()),
            "reward_chosen": float(implicit_reward(pw, rw, cfg.beta).mean()),
            "reward_rejected": float(implicit_reward(pl, rl, cfg.beta).mean()),
            "logp_chosen": float(pw.mean()),
            "logp_rejected": float(pl.mean()),
            "kl_drift_offline": float(kl_tokens.sum() / mask.sum()),
        }
    return loss, stats


def train_dpo(
    model,
    task: AdditionTask,
    cfg: DPOConfig,
    data: dict,
    *,
    log: MetricsLog | None = None,
    state: dict | None = None,
    generator: torch.Generator,
    max_grad_norm: float = 1.0,
    steps: int | None = None,
    checkpoint: callable | None = None,
    checkpoint_every: int = 10,
    show_progress: bool = True,
) -> dict:
    """Offline DPO/IPO/SimPO (+ optional NLL on chosen, ``rpo_alpha``) on cached pairs.

    ``data`` holds the pairs and cached reference log-probs (``build_preference_pairs`` +
    ``reference_logprobs``). ``state`` (from a checkpoint) resumes optimizer, step and RNG.
    ``checkpoint(step, optimizer)`` is called every ``checkpoint_every`` steps and at the end.
    """
    device = next(model.parameters()).device
    opt = make_optimizer(model, cfg.learning_rate)
    log = log if log is not None else MetricsLog()
    step, seconds = 0, 0.0
    if state is not None:
        opt.load_state_dict(state["optimizer"])
        step, seconds = state["step"], state["rl_seconds"]
    total = cfg.steps if steps is None else steps
    n_pairs = data["chosen_ids"].shape[0]
    bar = progress(total, "dpo", show_progress, initial=step)
    model.train()
    while step < total:
        t0 = time.perf_counter()
        idx = torch.randint(0, n_pairs, (min(cfg.batch_size, n_pairs),), generator=generator)
        batch = {k: v[idx].to(device) for k, v in data.items() if isinstance(v, torch.Tensor)}
        with autocast(device):
            loss, stats = dpo_batch_loss(model, batch, cfg)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        opt.step()
        step += 1
        seconds += time.perf_counter() - t0
        row = {"step": step, **stats, "update_seconds": time.perf_counter() - t0}
        if step % cfg.eval_every == 0 or step == total:
            row.update(evaluate(model, task))
            bar.set_postfix(acc=f"{row['accuracy']:.2f}")
            model.train()
        log.append(row)
        bar.update(1)
        if checkpoint is not None and (step % checkpoint_every == 0 or step == total):
            checkpoint(step, opt, seconds)
    bar.close()
    model.eval()
    return {"steps": step, "rl_seconds": seconds}


def summarise_log(rows: list[dict], key: str) -> list[tuple[int, float]]:
    return [(r["step"], r[key]) for r in rows if key in r and r[key] is not None and not math.isnan(r[key])]


def config_json(cfg) -> str:
    return json.dumps(asdict(cfg), indent=2)
