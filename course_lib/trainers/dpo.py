"""Offline DPO, IPO and SimPO for the tiny GPT, with a cached reference (§6, §8).

The losses are ``course_lib.formulas.preference``'s functions — the very ones notebook 02_dpo_margins reproduces by
hand — applied to sequence log-probs from ``course_lib.tinygpt.model.completion_logprobs``.

Simplifications, said out loud:
- Pairs come from the SFT policy itself: for each prompt we sample candidates and pair one the
  checker accepts with one it rejects (prompts with no such pair are skipped). The reference
  log-probs of every pair are computed once, before training, and cached (§6): DPO then keeps
  one trainable model and no reference in memory.
- ``ipo`` uses *summed* token log-probs, as ``course_lib.formulas.preference.ipo_loss`` does by default
  (TRL averages them over length for IPO).
- AdamW with a constant learning rate and gradient clipping; batches of pairs drawn with
  replacement by a dedicated ``torch.Generator``.
"""

from __future__ import annotations

import time

import torch

from course_lib.formulas.policy_loss import aggregate, kl_estimate
from course_lib.formulas.preference import dpo_terms, implicit_reward, ipo_loss, simpo_loss
from course_lib.tinygpt.model import completion_logprobs
from course_lib.tinygpt.rewards import resolve_reward, reward_source
from course_lib.tinygpt.rollout import sample_groups
from course_lib.tinygpt.runtime import autocast, progress, to_device
from course_lib.tinygpt.task import AdditionTask
from course_lib.trainers.configs import DPOConfig
from course_lib.trainers.trainer import (
    StageContext,
    StageResult,
    TrainContext,
    TRLRecipe,
    TRLRow,
    Unmatched,
    register,
    train_offline,
    trl_per_device,
)
from course_lib.trainers.utilisation import supervised_run_flops

PAIR_CHUNK = 256  # prompts sampled per generate call while building pairs (one progress tick each)


def _pad_rows(rows: list[list[int]], width: int, pad: int) -> torch.Tensor:
    out = torch.full((len(rows), width), pad, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return out


def select_pairs(accepted: list[list[bool]], pairs_per_prompt: int = 1) -> list[tuple[int, int, int]]:
    """The one rule that turns checked samples into preference pairs (DPO, the reward model, the lab).

    ``accepted[i][j]``: did the checker accept sample j of prompt i. Per prompt, the first accepted
    sample pairs with the first rejected one, the second with the second, … up to
    ``pairs_per_prompt`` pairs, no sample used twice; a prompt without both kinds gives none.
    Returns ``(prompt, accepted sample, rejected sample)`` triples, samples indexed within the prompt.
    """
    out = []
    for i, row in enumerate(accepted):
        good = [j for j, ok in enumerate(row) if ok]
        bad = [j for j, ok in enumerate(row) if not ok]
        out += [(i, g, b) for g, b in list(zip(good, bad))[:pairs_per_prompt]]
    return out


@torch.no_grad()
def build_preference_pairs(model, task: AdditionTask, cfg: DPOConfig, *, generator: torch.Generator,
                           show_progress: bool = False, chunk: int = PAIR_CHUNK) -> dict:
    """Offline pairs from the SFT policy: per prompt, one accepted and one rejected sample.

    Returns tensors ``chosen_ids``/``rejected_ids`` (right-padded prompt + completion), their
    attention and completion masks, and ``n_prompts``/``n_pairs`` counts. Samples are scored
    by the strict checker. ``chunk``: prompts per ``generate`` call (the samples depend on it, the
    distribution does not).
    """
    pairs = task.sample_pairs(cfg.pair_prompts, generator)
    k = cfg.samples_per_prompt
    checker = resolve_reward("strict", task)
    chosen, rejected = [], []
    bar = progress(len(pairs), "dpo pairs", show_progress)
    for c0 in range(0, len(pairs), chunk):
        part = pairs[c0 : c0 + chunk]
        roll = sample_groups(model, task, part, num_generations=k, max_completion_length=cfg.max_completion_length)
        ok = checker([p for p in part for _ in range(k)], roll.completions).view(len(part), k).tolist()
        lengths = (task.prompt_length + roll.completion_mask.sum(-1)).tolist()
        ids = roll.input_ids.tolist()
        for i, g, b in select_pairs([[bool(x) for x in row] for row in ok]):
            chosen.append(ids[i * k + g][: lengths[i * k + g]])
            rejected.append(ids[i * k + b][: lengths[i * k + b]])
        bar.update(len(part))
    bar.close()
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
def reference_logprobs(model, data: dict, *, prompt_length: int = 1, batch_size: int = 512,
                       names: tuple[str, ...] = ("chosen", "rejected")) -> dict:
    """Per-token reference log-probs of every chosen and rejected answer, computed once (§6).

    Aligned with ``input_ids[:, prompt_length:]`` (see ``completion_logprobs``'s ``start``).
    ``names``: which ``{name}_ids``/``_attention``/``_completion`` sets to score (KTO: its answers
    and their mismatched pairs); the result holds ``ref_{name}_token_logps`` for each.
    """
    device = next(model.parameters()).device
    out = {}
    for name in names:
        parts = []
        for i in range(0, data[f"{name}_ids"].shape[0], batch_size):
            sl = slice(i, i + batch_size)
            with autocast(device):
                lp, _ = completion_logprobs(
                    model, data[f"{name}_ids"][sl].to(device), data[f"{name}_attention"][sl].to(device),
                    data[f"{name}_completion"][sl].to(device), start=prompt_length,
                )
            parts.append(lp.float().cpu())
        out[f"ref_{name}_token_logps"] = torch.cat(parts)
    return out


def dpo_batch_loss(model, batch: dict, cfg: DPOConfig, *, prompt_length: int = 1,
                   validate: bool = True) -> tuple[torch.Tensor, dict]:
    """Loss and logged quantities for one batch of pairs (chosen and rejected in one forward).

    ``prompt_length`` must match the one the cached reference log-probs were computed with.
    ``validate=False`` skips the input checks of the log-prob, NLL and KL helpers (hot loop).
    """
    n = batch["chosen_ids"].shape[0]
    ids = torch.cat([batch["chosen_ids"], batch["rejected_ids"]])
    attn = torch.cat([batch["chosen_attention"], batch["rejected_attention"]])
    comp = torch.cat([batch["chosen_completion"], batch["rejected_completion"]])
    token_logps, mask = completion_logprobs(model, ids, attn, comp, start=prompt_length, validate=validate)
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
    nll = aggregate(-token_logps[:n], mask[:n], unit="token_mean", validate=validate)  # NLL of the chosen answers
    loss = pref_loss + cfg.rpo_alpha * nll if cfg.rpo_alpha > 0 else pref_loss
    with torch.no_grad():
        # KL(π_ref ‖ π_θ) on the pair tokens, which π_ref (the SFT policy) sampled: the k1
        # estimator with the roles of the two policies swapped. The checker selected the
        # tokens afterwards, so this is a drift gauge, not an exact KL.
        drift = kl_estimate(ref_tok, token_logps.detach(), estimator="k1", validate=validate)
        stats = torch.stack([
            loss, pref_loss, nll, terms.margin.mean(), (terms.margin > 0).float().mean(),
            implicit_reward(pw, rw, cfg.beta).mean(), implicit_reward(pl, rl, cfg.beta).mean(),
            pw.mean(), pl.mean(), aggregate(drift, mask, unit="token_mean", validate=validate),
        ]).tolist()
    names = ("loss", "preference_loss", "nll", "margin", "preference_accuracy", "reward_chosen", "reward_rejected",
             "logp_chosen", "logp_rejected", "kl_drift_offline")
    return loss, dict(zip(names, stats))


def train_dpo(
    model,
    task: AdditionTask,
    cfg: DPOConfig,
    data: dict,
    ctx: TrainContext | None = None,
    *,
    generator: torch.Generator,
) -> dict:
    """Offline DPO/IPO/SimPO (+ optional NLL on chosen, ``rpo_alpha``) on cached pairs.

    ``data`` holds the pairs and cached reference log-probs (``build_preference_pairs`` +
    ``reference_logprobs`` with ``prompt_length=task.prompt_length``). ``ctx.state`` (from a
    checkpoint) resumes optimizer, step and seconds; the caller restores the RNG.
    ``ctx.checkpoint(step, {"optimizer": …}, seconds)`` is called every ``ctx.checkpoint_every`` steps, at the
    end, and before stopping on a requested stop (Ctrl-C). Runs until ``ctx.steps`` in total.
    """
    keys = [k for k, v in data.items() if isinstance(v, torch.Tensor)]
    return train_offline("dpo", model, task, cfg, random_pairs(data, keys, cfg.batch_size, generator, model),
                         lambda batch, validate: dpo_batch_loss(model, batch, cfg, prompt_length=task.prompt_length,
                                                                validate=validate),
                         ctx)


def random_pairs(data: dict, keys, batch_size: int, generator: torch.Generator, model):
    """``batch_of(step)``: ``batch_size`` pairs drawn with replacement from ``generator`` (DPO's and ORPO's
    batches), the ``keys`` of ``data`` copied to the model's device once, not per step."""
    device = next(model.parameters()).device
    n_pairs = data["chosen_ids"].shape[0]
    on_device = {k: data[k].to(device) for k in keys}

    def batch_of(step: int) -> dict:
        idx = to_device(torch.randint(0, n_pairs, (min(batch_size, n_pairs),), generator=generator), device)
        return {k: v[idx] for k, v in on_device.items()}

    return batch_of


def dpo_passport(cfg, info: dict) -> dict:
    """DPO's passport sections (``course_lib.run.passport``)."""
    d = cfg.dpo
    loss = {"sigmoid": "DPO", "ipo": "IPO", "simpo": "SimPO"}[d.loss_type]
    return dict(
        data_and_policy={"examples": f"preference pairs from {d.pair_prompts} prompts × {d.samples_per_prompt} "
                                     f"samples",
                         "generated_by": "the SFT checkpoint, once, before training (offline)",
                         "reuse": "pairs reused for every step", "overlap": "held-out prompts excluded"},
        reward_contract={"source": reward_source("strict") + ", used only to label chosen vs rejected",
                         "granularity": "once per completion",
                         "truncation": "a truncated sample is a rejected answer"},
        optimisation={"algorithm": f"offline {loss}, beta={d.beta}"
                                   + (f", + rpo_alpha={d.rpo_alpha} × NLL(chosen)" if d.rpo_alpha else ""),
                      "roles": (["policy", "reference (log-probs cached once)"] if d.loss_type != "simpo"
                                else ["policy"]),
                      "kl": "implicit, through beta and the reference ratio", "averaging_unit": "mean over pairs"},
    )


TRL_TRUNCATED = Unmatched(
    "truncated answers (no <eos>)", "scored as sampled",
    "TRL appends <eos> to every completion that lacks one; the course's pairs keep a truncated answer as it was "
    "sampled (identical data when every answer ends in <eos>)")
TRL_VOCABULARY = Unmatched("model: <pad>/<bos> removed from the softmax", True,
                           "TRL's log-probs use the full vocabulary (after SFT these two tokens carry ~0 mass)")


def pairs_unmatched_in_trl(label: str, cfg) -> list[Unmatched]:
    """What TRL does differently with DPO's pairs when ``label`` (KTO, ORPO) trains on them."""
    d = cfg.dpo
    return [
        Unmatched("dpo.pair_prompts / samples_per_prompt", (d.pair_prompts, d.samples_per_prompt),
                  f"course-side data: {label}'s answers are DPO's pairs, built before training "
                  "(dpo.build_preference_pairs); TRL trains on a finished dataset"),
        TRL_TRUNCATED,
        TRL_VOCABULARY,
    ]


def dpo_trl(cfg, num_processes: int) -> TRLRecipe:
    """The DPO family as TRL's ``DPOTrainer`` (SimPO: ``CPOTrainer``) (``TRLRow.translate``)."""
    d = cfg.dpo
    batch = trl_per_device(d.batch_size, num_processes, "dpo.batch_size")
    length = cfg.task.prompt_length + d.max_completion_length
    unmatched = [
        Unmatched("dpo.pair_prompts / samples_per_prompt", (d.pair_prompts, d.samples_per_prompt),
                  "course-side data: pairs are built before training (preference_dataset); TRL trains on a "
                  "finished dataset"),
        Unmatched("dpo data order", "with replacement", "TRL walks shuffled epochs over the pairs"),
        Unmatched("dpo.eval_every", d.eval_every, "not a TRL option: HeldoutAccuracy(task, every=...) callback"),
        TRL_TRUNCATED,
        TRL_VOCABULARY,
    ]
    if d.loss_type == "simpo":
        config = dict(
            per_device_train_batch_size=batch, loss_type="simpo", beta=d.beta, simpo_gamma=d.simpo_gamma,
            cpo_alpha=d.rpo_alpha,  # CPO's NLL weight on chosen; 0 = pure SimPO
            max_length=length,
        )
        return TRLRecipe("CPOTrainer", "CPOConfig", config, unmatched, module="trl.experimental.cpo")
    loss_type, weights = [d.loss_type], [1.0]
    if d.rpo_alpha > 0:  # DPO + NLL: TRL 1.x spells rpo_alpha as a weighted "sft" term
        loss_type, weights = [d.loss_type, "sft"], [1.0, d.rpo_alpha]
    config = dict(
        per_device_train_batch_size=batch, loss_type=loss_type, loss_weights=weights, beta=d.beta,
        precompute_ref_log_probs=True,  # the course caches reference log-probs once (§6)
        max_length=length,
    )
    if d.loss_type == "ipo":
        unmatched.append(Unmatched(
            "dpo.loss_type", "ipo",
            "TRL's ipo averages each completion's log-ratio over its tokens; the course trainer sums them "
            "(preference.ipo_loss(chosen_lengths=..., rejected_lengths=...) is TRL's form)",
        ))
    return TRLRecipe("DPOTrainer", "DPOConfig", config, unmatched)


@register("dpo", DPOConfig, passport=dpo_passport, trl=TRLRow(dpo_trl, data="pairs"),
          flops=lambda cfg, rows, **kw: supervised_run_flops(cfg, rows, vocab=kw["vocab"],
                                                              sequences=2 * cfg.dpo.batch_size),
          gpu=dict(steps=300, batch_size=128, pair_prompts=4096, max_completion_length=7),
          test=dict(steps=4, batch_size=8, pair_prompts=32, samples_per_prompt=4, max_completion_length=4,
                    eval_every=2))
def dpo_stage(ctx: StageContext) -> StageResult:
    """``train dpo``: pairs from the SFT policy (cached reference log-probs; kept in the checkpoint), then DPO."""
    if ctx.train.state is not None:
        data = ctx.train.saved_data()
    else:
        ctx.say("[course_lib] sampling preference pairs from the SFT policy, caching reference log-probs")
        t0 = time.perf_counter()
        data = build_preference_pairs(ctx.model, ctx.task, ctx.cfg.dpo, generator=ctx.generator,
                                      show_progress=ctx.train.show_progress)
        data.update(reference_logprobs(ctx.model, data, prompt_length=ctx.task.prompt_length))
        data["pair_seconds"] = time.perf_counter() - t0  # counted in rl_seconds: DPO's data cost
        ctx.say(f"[course_lib] {data['n_pairs']} pairs from {data['n_prompts']} prompts")
    res = train_dpo(ctx.model, ctx.task, ctx.cfg.dpo, data,
                    ctx.train.keeping(data),
                    generator=ctx.generator)
    return StageResult(steps=res["steps"], rl_seconds=res["rl_seconds"] + data["pair_seconds"])
