"""KTO for the tiny GPT: unpaired desirable/undesirable answers, a batch KL reference point (§8).

Ethayarajh et al. (2024) need no pairs: each answer carries one label, desirable or undesirable,
and its implied reward r = log π_θ(y|x) − log π_ref(y|x) is compared with a reference point
z0 = KL(π_θ‖π_ref), estimated on the batch itself from *mismatched* prompt–completion pairs,
clamped at 0 and detached (``course_lib.formulas.preference.kto_reference_point``; the loss is
``preference.kto_loss``, the very function notebook 02_dpo_margins draws).

The data: DPO's preference pairs (``dpo.build_preference_pairs``, same prompts, samples and
checker, so for one seed KTO and DPO see the same answers) taken apart — each chosen answer is a
desirable example and each rejected one an undesirable example (``unpaired_examples``);
``kto.desirable_fraction < 1`` keeps only that share of the desirable ones (imbalanced data).

Data with only one label kind is **accepted**, not refused: the loss is a sum of per-answer terms,
each defined against z0, which is estimated from the batch's own answers whatever their labels;
nothing in the method pairs a desirable with an undesirable answer (the paper trains with up to
90% of the desirable data discarded; TRL's ``KTOTrainer`` only warns when the weighted label
counts are unbalanced). ``preference.label_balance`` reports λ_D·n_D / (λ_U·n_U), which the paper advises to
keep in [1, 4/3]. Refused: fewer than two answers, since z0 needs a batch of at least two to
mismatch prompts and completions.

Simplifications, said out loud:
- As TRL does (``train_sampling_strategy="sequential"``): the answers are shuffled once, cut into
  batches of ``kto.batch_size`` (a last, incomplete batch is dropped), and each batch's
  completions are rotated by one to make its mismatched pairs; the batches repeat in the same
  order every epoch, so the reference log-probs of answers *and* mismatched pairs are computed
  once, before training, and cached (no reference model in memory, as for DPO).
- The policy's log-probs of the mismatched pairs are computed without gradient (TRL's
  ``torch.no_grad()``): z0 is a baseline, not a target.
- AdamW with a constant learning rate and gradient clipping.
"""

from __future__ import annotations

import time

import torch

from course_lib.formulas.preference import kto_loss, kto_reference_point, label_balance, mismatched_order
from course_lib.tinygpt.model import completion_logprobs
from course_lib.tinygpt.rewards import reward_source
from course_lib.tinygpt.task import AdditionTask
from course_lib.trainers.configs import KTOConfig
from course_lib.trainers.dpo import build_preference_pairs, pairs_unmatched_in_trl, reference_logprobs
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
from course_lib.trainers.utilisation import kto_run_flops

FIELDS = ("ids", "attention", "completion")


def unpaired_examples(pairs: dict, *, desirable_fraction: float = 1.0,
                      generator: torch.Generator | None = None) -> dict:
    """DPO's pairs taken apart: ``{"ids", "attention", "completion", "label"}`` (label True = desirable).

    Every rejected answer is kept; with ``desirable_fraction < 1`` a random share of the chosen
    answers (at least one) is kept, drawn with ``generator``.
    """
    if not 0 < desirable_fraction <= 1:
        raise ValueError(f"desirable_fraction must lie in (0, 1]; got {desirable_fraction}")
    n = pairs["chosen_ids"].shape[0]
    keep = torch.arange(n)
    if desirable_fraction < 1:
        keep = torch.randperm(n, generator=generator)[: max(1, round(desirable_fraction * n))].sort().values
    out = {f: torch.cat([pairs[f"chosen_{f}"][keep], pairs[f"rejected_{f}"]]) for f in FIELDS}
    out["label"] = torch.cat([torch.ones(len(keep), dtype=torch.bool), torch.zeros(n, dtype=torch.bool)])
    return out


def kto_batches(examples: dict, batch_size: int, *, prompt_length: int, generator: torch.Generator) -> dict:
    """Shuffle once, cut into batches, pair each prompt with the previous row's completion (TRL's scheme).

    Returns the rows in training order (``{"ids", "attention", "completion", "label"}``, batch s
    is rows ``s·B … s·B + B − 1``), the mismatched pairs ``kl_ids``/``kl_attention``/``kl_completion``
    (row j: row j's prompt, row ``mismatched_order(B)[j]``'s completion, within its batch),
    ``n_batches``, ``batch_size`` and the label counts. All prompts have ``prompt_length`` tokens.
    """
    labels = examples["label"]
    n = labels.shape[0]
    if n < 2:
        raise ValueError(f"KTO needs at least 2 answers (z0 pairs each prompt with another answer); got {n}")
    b = min(batch_size, n)
    n_batches = n // b
    order = torch.randperm(n, generator=generator)[: n_batches * b]
    rows = {k: v[order] for k, v in examples.items()}
    rotate = torch.tensor(mismatched_order(b))
    partner = (torch.arange(n_batches)[:, None] * b + rotate[None, :]).flatten()
    kl_ids = torch.cat([rows["ids"][:, :prompt_length], rows["ids"][partner, prompt_length:]], 1)
    kl_attn = torch.cat([rows["attention"][:, :prompt_length], rows["attention"][partner, prompt_length:]], 1)
    kl_comp = torch.cat([rows["completion"][:, :prompt_length], rows["completion"][partner, prompt_length:]], 1)
    n_desirable = int(labels.sum())
    return {**rows, "kl_ids": kl_ids, "kl_attention": kl_attn, "kl_completion": kl_comp, "n_batches": n_batches,
            "batch_size": b, "n_desirable": n_desirable, "n_undesirable": n - n_desirable}


def kto_batch_loss(model, batch: dict, cfg: KTOConfig, *, prompt_length: int = 1,
                   validate: bool = True) -> tuple[torch.Tensor, dict]:
    """KTO loss and logged quantities for one batch (its answers, their mismatched pairs, cached reference)."""
    token_logps, mask = completion_logprobs(model, batch["ids"], batch["attention"], batch["completion"],
                                            start=prompt_length, validate=validate)
    with torch.no_grad():  # z0's policy side: no gradient, as in TRL
        kl_token_logps, _ = completion_logprobs(model, batch["kl_ids"], batch["kl_attention"], batch["kl_completion"],
                                                start=prompt_length, validate=validate)
    seq, ref_seq = token_logps.sum(-1), batch["ref_token_logps"].sum(-1)
    z0 = kto_reference_point(kl_token_logps.sum(-1), batch["ref_kl_token_logps"].sum(-1))
    label = batch["label"]
    losses = kto_loss(seq, ref_seq, label, z0, beta=cfg.beta, desirable_weight=cfg.desirable_weight,
                      undesirable_weight=cfg.undesirable_weight)
    loss = losses.mean()
    with torch.no_grad():
        reward = cfg.beta * (seq - ref_seq)
        good = label.to(seq.dtype)
        n_good, n_bad = good.sum().clamp(min=1), (1 - good).sum().clamp(min=1)
        stats = torch.stack([
            loss, z0, (reward * good).sum() / n_good, (reward * (1 - good)).sum() / n_bad,
            (seq * good).sum() / n_good, (seq * (1 - good)).sum() / n_bad, good.mean(),
        ]).tolist()
    names = ("loss", "kl", "reward_desirable", "reward_undesirable", "logp_desirable", "logp_undesirable",
             "desirable_share")
    return loss, dict(zip(names, stats))


def build_kto_data(model, task: AdditionTask, cfg, *, generator: torch.Generator, show_progress: bool = False) -> dict:
    """DPO's pairs (``cfg.dpo``) → unpaired answers (``cfg.kto``) → batches with cached reference log-probs."""
    pairs = build_preference_pairs(model, task, cfg.dpo, generator=generator, show_progress=show_progress)
    return kto_data_from_pairs(model, task, pairs, cfg.kto, generator=generator)


def kto_answers(task: AdditionTask, pairs: dict, cfg: KTOConfig, *, generator: torch.Generator) -> dict:
    """Pairs → the unpaired answers in training order with their mismatched pairs (no reference yet).

    ``kto_data_from_pairs`` adds the cached reference log-probs; ``trl_bridge`` hands these rows,
    in this order, to TRL's ``KTOTrainer``, which then trains on the same batches.
    """
    examples = unpaired_examples(pairs, desirable_fraction=cfg.desirable_fraction, generator=generator)
    return kto_batches(examples, cfg.batch_size, prompt_length=task.prompt_length, generator=generator)


def kto_data_from_pairs(model, task: AdditionTask, pairs: dict, cfg: KTOConfig, *, generator: torch.Generator) -> dict:
    """Pairs (``dpo.build_preference_pairs``) → ``train_kto``'s data; ``model`` is the reference (the SFT policy)."""
    data = kto_answers(task, pairs, cfg, generator=generator)
    named = {f"{name}_{f}": data[f"{prefix}{f}"] for name, prefix in (("answer", ""), ("kl", "kl_")) for f in FIELDS}
    ref = reference_logprobs(model, named, prompt_length=task.prompt_length, names=("answer", "kl"))
    data["ref_token_logps"], data["ref_kl_token_logps"] = ref["ref_answer_token_logps"], ref["ref_kl_token_logps"]
    data["n_pairs"] = pairs["n_pairs"]
    return data


def train_kto(
    model,
    task: AdditionTask,
    cfg: KTOConfig,
    data: dict,
    ctx: TrainContext | None = None,
) -> dict:
    """KTO on the batches of ``build_kto_data`` (batch ``step mod n_batches`` at each step).

    ``ctx.state`` (from a checkpoint) resumes optimizer, step and seconds; the batches are a function
    of the step, so no generator is drawn from while training. Runs until ``ctx.steps`` in total.
    """
    device = next(model.parameters()).device
    b, n_batches = data["batch_size"], data["n_batches"]
    keys = ("ids", "attention", "completion", "label", "kl_ids", "kl_attention", "kl_completion", "ref_token_logps",
            "ref_kl_token_logps")
    on_device = {k: data[k].to(device) for k in keys}

    def batch_of(step: int) -> dict:
        s = (step % n_batches) * b
        return {k: v[s : s + b] for k, v in on_device.items()}

    return train_offline("kto", model, task, cfg, batch_of,
                         lambda batch, validate: kto_batch_loss(model, batch, cfg, prompt_length=task.prompt_length,
                                                                validate=validate),
                         ctx)


def kto_passport(cfg, info: dict) -> dict:
    """KTO's passport sections (``course_lib.run.passport``)."""
    d, k = cfg.dpo, cfg.kto
    return dict(
        data_and_policy={"examples": f"unpaired answers: DPO's preference pairs from {d.pair_prompts} prompts × "
                                     f"{d.samples_per_prompt} samples, taken apart (chosen = desirable, rejected = "
                                     f"undesirable; desirable_fraction={k.desirable_fraction})",
                         "generated_by": "the SFT checkpoint, once, before training (offline)",
                         "reuse": "batches fixed once and repeated in order (TRL's sequential sampling)",
                         "overlap": "held-out prompts excluded"},
        reward_contract={"source": reward_source("strict") + ", used only to label desirable vs undesirable",
                         "granularity": "once per completion (binary label)",
                         "truncation": "a truncated sample is an undesirable answer"},
        optimisation={"algorithm": f"offline KTO, beta={k.beta}, desirable_weight={k.desirable_weight}, "
                                   f"undesirable_weight={k.undesirable_weight}",
                      "roles": ["policy", "reference (log-probs of answers and mismatched pairs cached once)"],
                      "kl": "reference point z0: detached batch KL estimate on mismatched pairs, clamped at 0",
                      "averaging_unit": "mean over answers"},
    )


def kto_trl(cfg, num_processes: int) -> TRLRecipe:
    """KTO as TRL's ``KTOTrainer``, on the course's batches (``TRLRow.translate``)."""
    k = cfg.kto
    config = dict(
        per_device_train_batch_size=trl_per_device(k.batch_size, num_processes, "kto.batch_size"),
        loss_type="kto", beta=k.beta, desirable_weight=k.desirable_weight, undesirable_weight=k.undesirable_weight,
        # the course's batches: answers shuffled once (the bridge hands them over in that order), cut into
        # batch_size, a last incomplete batch dropped, the same batches every epoch; z0 from each batch's
        # rotated prompt-completion pairs, which TRL's collator builds the same way
        train_sampling_strategy="sequential", dataloader_drop_last=True,
        precompute_ref_log_probs=True,  # the course caches the reference log-probs of answers and mismatched pairs
        max_length=cfg.task.prompt_length + cfg.dpo.max_completion_length,
    )
    unmatched = [
        Unmatched("kto.desirable_fraction", k.desirable_fraction,
                  "course-side data: the share of desirable answers kept (kto.unpaired_examples) before TRL sees "
                  "the dataset; KTOConfig has no such option (desirable_weight / undesirable_weight reweight "
                  "instead)"),
        Unmatched("kto.eval_every", k.eval_every, "not a TRL option: HeldoutAccuracy(task, every=...) callback"),
        *pairs_unmatched_in_trl("KTO", cfg),
    ]
    if num_processes > 1:
        unmatched.append(Unmatched(
            "num_processes", num_processes,
            "each process pairs prompts with completions within its own kto.batch_size/num_processes answers and z0 "
            "is the mean over processes; the course estimates z0 on the whole batch"))
    return TRLRecipe("KTOTrainer", "KTOConfig", config, unmatched)


KTO_TRL = TRLRow(kto_trl, data="answers", prepare=kto_answers, names={
    "steps": "max_steps", "learning_rate": "learning_rate", "batch_size": "per_device_train_batch_size",
    "beta": "beta", "desirable_weight": "desirable_weight", "undesirable_weight": "undesirable_weight"})


@register("kto", KTOConfig, passport=kto_passport, flops=kto_run_flops, trl=KTO_TRL,
          gpu=dict(steps=300, batch_size=256),  # DPO's 128 pairs, taken apart
          test=dict(steps=4, batch_size=8, eval_every=2))
def kto_stage(ctx: StageContext) -> StageResult:
    """``train kto``: DPO's pairs from the SFT policy taken apart, reference log-probs cached, then KTO."""
    if ctx.train.state is not None:
        data = ctx.train.saved_data()
    else:
        ctx.say("[course_lib] sampling DPO's preference pairs from the SFT policy, taking them apart for KTO")
        t0 = time.perf_counter()
        data = build_kto_data(ctx.model, ctx.task, ctx.cfg, generator=ctx.generator,
                              show_progress=ctx.train.show_progress)
        data["pair_seconds"] = time.perf_counter() - t0  # counted in rl_seconds: KTO's data cost
        k = ctx.cfg.kto
        balance = label_balance(data["n_desirable"], data["n_undesirable"], desirable_weight=k.desirable_weight,
                                undesirable_weight=k.undesirable_weight)
        ctx.say(f"[course_lib] {data['n_desirable']} desirable + {data['n_undesirable']} undesirable answers from "
                f"{data['n_pairs']} pairs; λ_D·n_D/(λ_U·n_U) = "
                f"{balance:.2f} (the paper: 1 to 4/3)")
    res = train_kto(ctx.model, ctx.task, ctx.cfg.kto, data,
                    ctx.train.keeping(data))
    kept = ("n_pairs", "n_desirable", "n_undesirable", "n_batches", "batch_size")
    summary = {"kto_data": {k: data[k] for k in kept}}
    return StageResult(steps=res["steps"], rl_seconds=res["rl_seconds"] + data["pair_seconds"], summary=summary)
