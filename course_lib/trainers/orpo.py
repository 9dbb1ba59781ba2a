"""ORPO for the tiny GPT: SFT and preference in one stage, from the base model, no reference (§8).

Hong et al. (2024) replace "SFT, then align against the SFT reference" by one objective on
preference pairs: the NLL of the chosen answer (SFT's loss) plus λ times the odds-ratio penalty
−log σ(log odds(y_w) − log odds(y_l)) (``course_lib.formulas.preference.odds_ratio_penalty``, the very
function notebook 02_dpo_margins draws; λ is TRL's ``beta``). No reference model, no reference log-probs.

The data: the same preference pairs DPO trains on (``dpo.build_preference_pairs``: same prompts,
samples and checker, so for one seed ORPO and DPO see the same pairs). They are a fixed, offline
dataset; ORPO does not care who wrote them, as in the paper, whose pairs come from other models.
Here they are sampled from the run's SFT policy, which is therefore trained first and counted
(``sft_seconds``) — then the **policy is reset to the base initialisation** (the weights the SFT
stage started from) and ORPO trains it in one stage. The chosen answers are its SFT data.

Simplifications, said out loud:
- The NLL counts the chosen *completion* tokens, pooled over the batch (the course's SFT loss,
  ``policy_loss.aggregate(unit="token_mean")``); TRL's ``ORPOTrainer`` also counts the prompt
  tokens (tests/test_trl_parity.py pins both the penalty and that difference).
- A mean token log-prob of exactly 0 (probability 1 in float32) has infinite odds; it is
  clamped to −1e-6 before the penalty (a completion the model is certain of contributes no
  gradient through the clamp).
- Batches of pairs drawn with replacement by the stage's generator; AdamW with a constant
  learning rate (SFT's by default: the policy learns the task) and gradient clipping.
"""

from __future__ import annotations

import time

import torch

from course_lib.formulas.policy_loss import aggregate
from course_lib.formulas.preference import odds_ratio_penalty
from course_lib.tinygpt.evaluation import evaluate
from course_lib.tinygpt.model import build_model, completion_logprobs
from course_lib.tinygpt.rewards import reward_source
from course_lib.tinygpt.task import AdditionTask
from course_lib.trainers.configs import ORPOConfig
from course_lib.trainers.dpo import build_preference_pairs, pairs_unmatched_in_trl, random_pairs
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

CERTAIN = -1e-6  # the largest mean token log-prob the odds see (see the module docstring)
PAIR_KEYS = tuple(f"{side}_{f}" for side in ("chosen", "rejected") for f in ("ids", "attention", "completion"))


def orpo_batch_loss(model, batch: dict, cfg: ORPOConfig, *, prompt_length: int = 1,
                    validate: bool = True) -> tuple[torch.Tensor, dict]:
    """NLL of the chosen completions (token mean) + λ · mean odds-ratio penalty, for one batch of pairs."""
    n = batch["chosen_ids"].shape[0]
    ids = torch.cat([batch["chosen_ids"], batch["rejected_ids"]])
    attn = torch.cat([batch["chosen_attention"], batch["rejected_attention"]])
    comp = torch.cat([batch["chosen_completion"], batch["rejected_completion"]])
    token_logps, mask = completion_logprobs(model, ids, attn, comp, start=prompt_length, validate=validate)
    lengths = mask.sum(-1)
    seq = torch.minimum(token_logps.sum(-1), CERTAIN * lengths)  # mean log-prob <= CERTAIN
    penalty = odds_ratio_penalty(seq[:n], seq[n:], lengths[:n], lengths[n:])
    nll = aggregate(-token_logps[:n], mask[:n], unit="token_mean", validate=validate)
    loss = nll + cfg.beta * penalty.mean()
    with torch.no_grad():
        mw, ml = seq[:n] / lengths[:n], seq[n:] / lengths[n:]
        stats = torch.stack([loss, nll, penalty.mean(), (mw > ml).float().mean(), mw.mean(), ml.mean()]).tolist()
    names = ("loss", "nll", "odds_ratio_penalty", "preference_accuracy", "mean_logp_chosen", "mean_logp_rejected")
    return loss, dict(zip(names, stats))


def train_orpo(
    model,
    task: AdditionTask,
    cfg: ORPOConfig,
    data: dict,
    ctx: TrainContext | None = None,
    *,
    generator: torch.Generator,
) -> dict:
    """ORPO on preference pairs (``dpo.build_preference_pairs``' output), from whatever weights ``model`` holds.

    ``ctx.state`` (from a checkpoint) resumes optimizer, step and seconds; the caller restores the RNG.
    Runs until ``ctx.steps`` in total.
    """
    return train_offline("orpo", model, task, cfg, random_pairs(data, PAIR_KEYS, cfg.batch_size, generator, model),
                         lambda batch, validate: orpo_batch_loss(model, batch, cfg, prompt_length=task.prompt_length,
                                                                 validate=validate),
                         ctx)


def base_weights(cfg, task: AdditionTask, seed: int) -> dict:
    """The initialisation every run of this seed starts from (``pipeline.build_policy``), without touching the RNG."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        return build_model(cfg.model, task.tokenizer).state_dict()


def orpo_passport(cfg, info: dict) -> dict:
    """ORPO's passport sections (``course_lib.run.passport``)."""
    d, o = cfg.dpo, cfg.orpo
    return dict(
        data_and_policy={"examples": f"DPO's preference pairs from {d.pair_prompts} prompts × {d.samples_per_prompt} "
                                     "samples; the chosen answers are the SFT data",
                         "generated_by": "the SFT checkpoint, once (offline); the policy restarts from the base model",
                         "reuse": "pairs sampled with replacement every step", "overlap": "held-out prompts excluded"},
        reward_contract={"source": reward_source("strict") + ", used only to label chosen vs rejected",
                         "granularity": "once per completion",
                         "truncation": "a truncated sample is a rejected answer"},
        optimisation={"algorithm": f"ORPO, one stage from the base model: NLL(chosen) + beta={o.beta} × odds-ratio "
                                   "penalty", "roles": ["policy"], "kl": "none (no reference model)",
                      "averaging_unit": "NLL: token mean over chosen completions; penalty: mean over pairs"},
    )


def orpo_trl(cfg, num_processes: int) -> TRLRecipe:
    """ORPO as TRL's ``ORPOTrainer``, which TRL 1.16 keeps in ``trl.experimental.orpo`` (``TRLRow.translate``)."""
    o = cfg.orpo
    config = dict(
        per_device_train_batch_size=trl_per_device(o.batch_size, num_processes, "orpo.batch_size"),
        beta=o.beta,  # λ, the odds-ratio term's weight (the paper's λ, TRL's beta)
        max_length=cfg.task.prompt_length + cfg.dpo.max_completion_length,
    )
    unmatched = [
        Unmatched("orpo NLL tokens", "completion only",
                  "ORPOTrainer's NLL averages over the prompt and the chosen completion tokens; the course's over "
                  "the completion only, as SFT (tests/test_trl_parity.py pins both; the odds-ratio term is the "
                  "same)"),
        Unmatched("orpo start", "base initialisation",
                  "course-side: the ORPO stage resets the policy to its pre-SFT weights (orpo.base_weights); TRL "
                  "trains the model it is given, so hand it the base model"),
        Unmatched("orpo certain answers", "mean log-prob clamped at orpo.CERTAIN = -1e-6",
                  "TRL computes log(1 − p) unclamped: a completion the model is certain of gives an infinite "
                  "log-odds"),
        Unmatched("orpo data order", "with replacement", "TRL walks shuffled epochs over the pairs"),
        Unmatched("orpo.eval_every", o.eval_every, "not a TRL option: HeldoutAccuracy(task, every=...) callback"),
        *pairs_unmatched_in_trl("ORPO", cfg),
    ]
    return TRLRecipe("ORPOTrainer", "ORPOConfig", config, unmatched, module="trl.experimental.orpo")


ORPO_TRL = TRLRow(orpo_trl, data="pairs", start=base_weights, names={
    "steps": "max_steps", "learning_rate": "learning_rate", "batch_size": "per_device_train_batch_size",
    "beta": "beta"})


@register("orpo", ORPOConfig, passport=orpo_passport, trl=ORPO_TRL,
          # chosen and rejected, forward + backward; no reference
          flops=lambda cfg, rows, **kw: supervised_run_flops(cfg, rows, vocab=kw["vocab"],
                                                              sequences=2 * cfg.orpo.batch_size),
          gpu=dict(steps=1800, batch_size=128, eval_every=150),  # SFT's + DPO's steps
          test=dict(steps=4, batch_size=8, eval_every=2),
          recipe_stage="ORPO starts from the base model by definition (SFT and preference in one stage), so it "
                       "cannot continue a previous stage's policy: run `train orpo` on its own")
def orpo_stage(ctx: StageContext) -> StageResult:
    """``train orpo``: DPO's pairs from the SFT policy, then the policy reset to its base weights and ORPO."""
    if ctx.train.state is not None:
        data = ctx.train.saved_data()
    else:
        ctx.say("[course_lib] sampling DPO's preference pairs from the SFT policy; ORPO then starts from the base "
                "model")
        t0 = time.perf_counter()
        data = build_preference_pairs(ctx.model, ctx.task, ctx.cfg.dpo, generator=ctx.generator,
                                      show_progress=ctx.train.show_progress)
        data["pair_seconds"] = time.perf_counter() - t0  # counted in rl_seconds: ORPO's data cost
        ctx.model.load_state_dict(base_weights(ctx.cfg, ctx.task, ctx.seed))
        data["base_accuracy"] = evaluate(ctx.model, ctx.task)["accuracy"]
        ctx.say(f"[course_lib] {data['n_pairs']} pairs from {data['n_prompts']} prompts; base model held-out accuracy "
                f"{data['base_accuracy']:.3f}")
    res = train_orpo(ctx.model, ctx.task, ctx.cfg.orpo, data,
                     ctx.train.keeping(data),
                     generator=ctx.generator)
    final = evaluate(ctx.model, ctx.task)
    line = (f"[course_lib] ORPO from the base model: held-out accuracy {data['base_accuracy']:.3f} -> "
            f"{final['accuracy']:.3f} (the SFT policy that sampled the pairs: {ctx.sft['eval']['accuracy']:.3f})")
    summary = {"orpo": {"base_accuracy": data["base_accuracy"], "n_pairs": data["n_pairs"]}}
    return StageResult(steps=res["steps"], rl_seconds=res["rl_seconds"] + data["pair_seconds"], final=final,
                       summary=summary, line=line)
