"""The course's recipes in TRL 1.16's words: a pure translation table, no TRL or trainer imported.

``translate(cfg, kind)`` turns a course ``RunConfig`` (SFT, the DPO family, the GRPO family, RLOO,
KTO, ORPO) into a ``Bridged``: which TRL trainer and config class take the recipe (``SFTConfig``,
``DPOConfig``, ``CPOConfig`` for SimPO, ``GRPOConfig``, ``RLOOConfig``, ``KTOConfig``, and
``ORPOConfig``, which TRL 1.16 keeps in ``trl.experimental.orpo``), the config's keyword
arguments, and every course option **without** an exact TRL equivalent (``Unmatched``), each with
what TRL does instead. ``TRL_NAMES`` says, per section, which course option becomes which TRL
argument; ``MAPPING`` is the course ↔ TRL table docs/trl.md shows (``mapping_markdown``), one row
per option or formula, with how closely the two agree. Pure data: it needs neither TRL nor ``transformers``' trainer, so it is
tested on its own (``tests/test_trl_translate.py``); ``course_lib.trl.trl_bridge`` builds the TRL
objects from it (config, datasets, callbacks, trainers, the instruct recipe, the CLI).

Simplifications, said out loud:
- Precision and memory: TRL 1.x defaults to ``bf16=True`` and gradient checkpointing on; the
  course runs float32 on a CPU (bf16 autocast on CUDA sm_80+) without checkpointing, so the table
  sets ``bf16``/``fp16`` from the device (``runtime.trl_precision``: bf16 on sm_80+, fp16 with
  TRL's GradScaler on older GPUs such as Colab's T4) and ``activation_checkpointing=False`` (pass
  ``checkpointing=True`` to trade speed for memory on a real model).
- One process, no gradient accumulation: a course step is one rollout of B·G completions and
  μ = ``num_iterations`` TRL optimiser steps on it (``steps_per_generation=1``; ``max_steps`` is
  steps·μ, so TRL samples exactly ``steps`` rollouts). Under ``accelerate launch`` the per-device batch
  is divided by the number of processes so a step still sees B·G completions.
- KTO and ORPO train on data the course builds first (DPO's pairs; for KTO taken apart and shuffled
  once by ``kto.kto_answers``): TRL receives a finished dataset. For KTO the bridge passes the
  answers in the course's order and TRL walks them sequentially, so the batches (and z0's
  mismatched pairs) are the course's; ORPO's are drawn by TRL's own shuffled epochs.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from course_lib.tinygpt.runtime import trl_precision
from course_lib.trainers.configs import RunConfig, validate

KINDS = ("sft", "dpo", "grpo", "rloo", "kto", "orpo")
VLLM_IS = tuple(f"vllm_importance_sampling_{x}" for x in ("correction", "mode", "clip_min", "clip_max"))

# course option -> TRL argument, for the sections whose every option either has one or is listed as
# Unmatched by translate (tests/test_trl_translate.py checks that nothing falls between the two)
TRL_NAMES = {
    "kto": {"steps": "max_steps", "learning_rate": "learning_rate", "batch_size": "per_device_train_batch_size",
            "beta": "beta", "desirable_weight": "desirable_weight", "undesirable_weight": "undesirable_weight"},
    "orpo": {"steps": "max_steps", "learning_rate": "learning_rate", "batch_size": "per_device_train_batch_size",
             "beta": "beta"},
}


@dataclass
class Unmatched:
    """A course option TRL has no exact equivalent for, and what TRL does instead."""

    option: str
    value: object
    trl_does: str

    def __str__(self) -> str:
        return f"{self.option}={self.value!r}: {self.trl_does}"


@dataclass
class Bridged:
    """The TRL side of one course recipe."""

    kind: str
    trainer: str  # TRL trainer class name
    config_class: str  # TRL config class name
    config: dict  # keyword arguments for the config class
    unmatched: list[Unmatched] = field(default_factory=list)

    def report(self) -> str:
        lines = [f"{self.kind} -> trl.{self.trainer}(args=trl.{self.config_class}(...))"]
        lines += [f"  {k} = {v!r}" for k, v in sorted(self.config.items())]
        lines.append(f"  no exact TRL equivalent ({len(self.unmatched)}):")
        lines += [f"    - {u}" for u in self.unmatched] or ["    (none)"]
        return "\n".join(lines)


def _common(cfg: RunConfig, section, *, output_dir: str, seed: int, cuda: bool, checkpointing: bool) -> dict:
    mixed = trl_precision("cuda") if cuda else "fp32"
    return dict(
        output_dir=output_dir,
        seed=seed,
        learning_rate=section.learning_rate,
        max_steps=section.steps,
        lr_scheduler_type="constant",  # the course's AdamW runs at a constant rate
        warmup_steps=0,
        weight_decay=0.0,
        max_grad_norm=cfg.max_grad_norm,
        gradient_accumulation_steps=1,
        # TRL defaults to bf16 even on a CPU; bf16 only on CUDA sm_80+, fp16 (TRL's GradScaler) below
        bf16=mixed == "bf16",
        fp16=mixed == "fp16",
        use_cpu=not cuda,
        gradient_checkpointing=None,  # the deprecated name; TRL's default would turn it on
        activation_checkpointing=checkpointing,
        logging_steps=1,
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
        ddp_find_unused_parameters=False,  # every parameter gets a gradient; skip DDP's extra graph walk
    )


def translate(
    cfg: RunConfig,
    kind: str,
    *,
    output_dir: str = "trl-out",
    seed: int = 0,
    cuda: bool = False,
    checkpointing: bool = False,
    num_processes: int = 1,
) -> Bridged:
    """The TRL config for the course recipe ``kind`` ('sft', 'dpo', 'grpo', 'rloo', 'kto' or 'orpo').

    ``rloo`` is the GRPO section of ``cfg`` with ``advantage='rloo'``, handed to TRL's
    ``RLOOTrainer``; ``grpo`` with ``advantage='rloo'`` is refused (say ``rloo``).
    ``num_processes`` divides the per-device batch (``accelerate launch``) so one step still
    sees the course's B·G completions (or ``batch_size`` pairs/demonstrations).
    """
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}; got {kind!r}")
    if not isinstance(num_processes, int) or num_processes < 1:
        raise ValueError(f"num_processes must be a positive integer; got {num_processes!r}")
    validate(cfg)
    common = dict(output_dir=output_dir, seed=seed, cuda=cuda, checkpointing=checkpointing)
    if kind == "sft":
        return _sft(cfg, num_processes, **common)
    if kind == "dpo":
        return _dpo(cfg, num_processes, **common)
    if kind == "kto":
        return _kto(cfg, num_processes, **common)
    if kind == "orpo":
        return _orpo(cfg, num_processes, **common)
    return _online(cfg, kind, num_processes, **common)


def _per_device(total: int, num_processes: int, what: str) -> int:
    if total % num_processes:
        raise ValueError(f"{what} ({total}) must be divisible by num_processes ({num_processes})")
    return total // num_processes


def _sft(cfg, num_processes, **common) -> Bridged:
    s = cfg.sft
    config = _common(cfg, s, **common) | dict(
        per_device_train_batch_size=_per_device(s.batch_size, num_processes, "sft.batch_size"),
        completion_only_loss=True,  # token-mean NLL of the completion tokens, as train.sft_loss
        max_length=cfg.task.prompt_length + cfg.task.answer_length,
    )
    unmatched = [
        Unmatched("sft data order", "with replacement", "TRL walks shuffled epochs over the demonstrations"),
        Unmatched("sft.eval_every", s.eval_every, "not a TRL option: HeldoutAccuracy(task, every=...) callback"),
    ]
    return Bridged("sft", "SFTTrainer", "SFTConfig", config, unmatched)


def _dpo(cfg, num_processes, **common) -> Bridged:
    d = cfg.dpo
    batch = _per_device(d.batch_size, num_processes, "dpo.batch_size")
    length = cfg.task.prompt_length + d.max_completion_length
    unmatched = [
        Unmatched("dpo.pair_prompts / samples_per_prompt", (d.pair_prompts, d.samples_per_prompt),
                  "course-side data: pairs are built before training (preference_dataset); TRL trains on a finished dataset"),
        Unmatched("dpo data order", "with replacement", "TRL walks shuffled epochs over the pairs"),
        Unmatched("dpo.eval_every", d.eval_every, "not a TRL option: HeldoutAccuracy(task, every=...) callback"),
        TRUNCATED,
        Unmatched("model: <pad>/<bos> removed from the softmax", True,
                  "TRL's log-probs use the full vocabulary (after SFT these two tokens carry ~0 mass)"),
    ]
    if d.loss_type == "simpo":
        config = _common(cfg, d, **common) | dict(
            per_device_train_batch_size=batch, loss_type="simpo", beta=d.beta, simpo_gamma=d.simpo_gamma,
            cpo_alpha=d.rpo_alpha,  # CPO's NLL weight on chosen; 0 = pure SimPO
            max_length=length,
        )
        return Bridged("dpo", "CPOTrainer", "CPOConfig", config, unmatched)
    loss_type, weights = [d.loss_type], [1.0]
    if d.rpo_alpha > 0:  # DPO + NLL: TRL 1.x spells rpo_alpha as a weighted "sft" term
        loss_type, weights = [d.loss_type, "sft"], [1.0, d.rpo_alpha]
    config = _common(cfg, d, **common) | dict(
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
    return Bridged("dpo", "DPOTrainer", "DPOConfig", config, unmatched)


TRUNCATED = Unmatched("truncated answers (no <eos>)", "scored as sampled",
                      "TRL appends <eos> to every completion that lacks one; the course's pairs keep a truncated answer "
                      "as it was sampled (identical data when every answer ends in <eos>)")


def _preference_data_unmatched(label: str, cfg) -> list[Unmatched]:
    d = cfg.dpo
    return [
        Unmatched("dpo.pair_prompts / samples_per_prompt", (d.pair_prompts, d.samples_per_prompt),
                  f"course-side data: {label}'s answers are DPO's pairs, built before training (dpo.build_preference_pairs); "
                  "TRL trains on a finished dataset"),
        TRUNCATED,
        Unmatched("model: <pad>/<bos> removed from the softmax", True,
                  "TRL's log-probs use the full vocabulary (after SFT these two tokens carry ~0 mass)"),
    ]


def _kto(cfg, num_processes, **common) -> Bridged:
    k = cfg.kto
    config = _common(cfg, k, **common) | dict(
        per_device_train_batch_size=_per_device(k.batch_size, num_processes, "kto.batch_size"),
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
                  "course-side data: the share of desirable answers kept (kto.unpaired_examples) before TRL sees the "
                  "dataset; KTOConfig has no such option (desirable_weight / undesirable_weight reweight instead)"),
        Unmatched("kto.eval_every", k.eval_every, "not a TRL option: HeldoutAccuracy(task, every=...) callback"),
        *_preference_data_unmatched("KTO", cfg),
    ]
    if num_processes > 1:
        unmatched.append(Unmatched(
            "num_processes", num_processes,
            "each process pairs prompts with completions within its own kto.batch_size/num_processes answers and z0 is "
            "the mean over processes; the course estimates z0 on the whole batch"))
    return Bridged("kto", "KTOTrainer", "KTOConfig", config, unmatched)


def _orpo(cfg, num_processes, **common) -> Bridged:
    o = cfg.orpo
    config = _common(cfg, o, **common) | dict(
        per_device_train_batch_size=_per_device(o.batch_size, num_processes, "orpo.batch_size"),
        beta=o.beta,  # λ, the odds-ratio term's weight (the paper's λ, TRL's beta)
        max_length=cfg.task.prompt_length + cfg.dpo.max_completion_length,
    )
    unmatched = [
        Unmatched("orpo NLL tokens", "completion only",
                  "ORPOTrainer's NLL averages over the prompt and the chosen completion tokens; the course's over the "
                  "completion only, as SFT (tests/test_trl_parity.py pins both; the odds-ratio term is the same)"),
        Unmatched("orpo start", "base initialisation",
                  "course-side: the ORPO stage resets the policy to its pre-SFT weights (orpo.base_weights); TRL "
                  "trains the model it is given, so hand it the base model"),
        Unmatched("orpo certain answers", "mean log-prob clamped at orpo.CERTAIN = -1e-6",
                  "TRL computes log(1 − p) unclamped: a completion the model is certain of gives an infinite log-odds"),
        Unmatched("orpo data order", "with replacement", "TRL walks shuffled epochs over the pairs"),
        Unmatched("orpo.eval_every", o.eval_every, "not a TRL option: HeldoutAccuracy(task, every=...) callback"),
        *_preference_data_unmatched("ORPO", cfg),
    ]
    return Bridged("orpo", "ORPOTrainer", "ORPOConfig", config, unmatched)


def _online(cfg, kind, num_processes, **common) -> Bridged:
    g = cfg.grpo
    if kind == "grpo" and g.advantage == "rloo":
        raise ValueError("grpo.advantage='rloo' is TRL's RLOOTrainer: translate(cfg, 'rloo')")
    if kind == "rloo" and g.advantage != "rloo":
        raise ValueError(f"kind='rloo' needs grpo.advantage='rloo' (RLOOTrainer's baseline); got {g.advantage!r}")
    completions = g.batch_prompts * g.num_generations
    per_device = _per_device(completions, num_processes, "batch_prompts × num_generations")
    config = _common(cfg, g, **common) | dict(
        # TRL counts optimiser steps and samples anew every steps_per_generation · num_iterations of
        # them; a course step is one rollout and μ optimiser steps on it: steps rollouts need steps·μ
        max_steps=g.steps * g.num_iterations,
        per_device_train_batch_size=per_device,
        num_generations=g.num_generations,
        steps_per_generation=1,  # one optimiser step per rollout batch, as the course does
        max_completion_length=g.max_completion_length,
        num_iterations=g.num_iterations,
        epsilon=g.epsilon,
        epsilon_high=g.epsilon_high,
        beta=g.beta,
        temperature=g.temperature,
        top_k=0,
        top_p=1.0,
        mask_truncated_completions=g.mask_truncated,
        shuffle_dataset=False,  # prompts are already fresh random draws
    )
    unmatched = [
        Unmatched("grpo.eval_every", g.eval_every, "not a TRL option: HeldoutAccuracy(task, every=...) callback, "
                  f"counted in TRL optimiser steps (num_iterations={g.num_iterations} per course step)"),
        Unmatched("model: <pad>/<bos> removed from the softmax", True,
                  "TRL samples and scores over the full vocabulary (after SFT these two tokens carry ~0 mass)"),
    ]
    if g.max_staleness > 0:
        unmatched.append(Unmatched(
            "grpo.max_staleness", g.max_staleness,
            "GRPOTrainer samples synchronously; TRL's asynchronous trainer is experimental.async_grpo."
            "AsyncGRPOTrainer (a vLLM server) with AsyncGRPOConfig.max_staleness, which drops samples older than K "
            "instead of sampling at a fixed lag; vllm_importance_sampling_* act only with use_vllm=True"))
    if g.sampler_temperature is not None and g.sampler_temperature != g.temperature:
        unmatched.append(Unmatched(
            "grpo.sampler_temperature", g.sampler_temperature,
            "a deliberate fault with no TRL option: TRL samples at temperature and scores at the same one; its "
            "vllm_importance_sampling_* correct the small sampler/trainer gap of a vLLM server"))
    if g.adaptive_length_quantile is not None:
        unmatched.append(Unmatched(
            "grpo.adaptive_length_quantile", g.adaptive_length_quantile,
            f"no TRL option: GRPOTrainer generates up to max_completion_length={g.max_completion_length} every step"))
    if g.zero_variance != "keep":
        unmatched.append(Unmatched("grpo.zero_variance", g.zero_variance,
                                   "TRL keeps zero-variance groups (zero advantage); no drop or dynamic resampling"))
    if g.beta > 0 and kind == "grpo" and g.kl_placement != "loss":
        unmatched.append(Unmatched("grpo.kl_placement", g.kl_placement,
                                   "GRPOTrainer puts the KL in the loss only (RLOOTrainer puts k1 in the reward)"))
    elif g.beta > 0 and kind == "grpo" and g.kl_estimator != "k3":
        unmatched.append(Unmatched("grpo.kl_estimator", g.kl_estimator, "GRPOTrainer always puts k3 in the loss"))
    if g.soft_punish_cache > 0:
        unmatched.append(Unmatched(
            "grpo.soft_punish_cache", g.soft_punish_cache,
            "not a GRPOConfig option: TRL's reward function trl.rewards.get_soft_overlong_punishment("
            f"max_completion_len={g.max_completion_length}, soft_punish_cache={g.soft_punish_cache}), which "
            "make_trainer adds to reward_funcs (summed with weight 1, as the course adds it)"))
    if kind == "grpo":
        scale = {"grpo": "group", "dr_grpo": "none"}[g.advantage]
        # TRL's loss_type is the averaging unit, except cispo (its own objective, token-normalised)
        unit = {"sequence_mean": "grpo", "token_mean": "dapo", "constant": "dr_grpo"}[g.unit]
        config |= dict(scale_rewards=scale, loss_type="cispo" if g.loss_type == "cispo" else unit,
                       importance_sampling_level=g.importance_sampling_level)
        # the behaviour correction under TRL's own names; TRL applies it to a vLLM sampler's log-probs
        # (use_vllm=True), the course to a stale rollout worker's (max_staleness > 0)
        config |= {name: getattr(g, name) for name in VLLM_IS}
        if g.beta > 0:
            # TRL 1.16 multiplies k3 by the importance ratio by default (DeepSeek-V3.2's unbiased
            # reverse-KL gradient); the course's plain k3 in the loss is use_bias_correction_kl=False
            config["use_bias_correction_kl"] = False
        if g.advantage == "grpo":
            unmatched.append(Unmatched(
                "grpo.advantage", "grpo",
                "scale_rewards='group' divides by the sample std (ddof=1) + 1e-4; the course trainer uses the "
                "population std (ddof=0) and no epsilon: grpo_advantages(ddof=1, epsilon=1e-4) is TRL's form, "
                "so TRL's advantages are sqrt((G-1)/G) of ours",
            ))
        return Bridged("grpo", "GRPOTrainer", "GRPOConfig", config, unmatched)
    config |= dict(normalize_advantages=False)
    if g.loss_type != "clipped" or g.importance_sampling_level != "token":
        unmatched.append(Unmatched(
            "grpo.loss_type / importance_sampling_level", (g.loss_type, g.importance_sampling_level),
            "RLOOTrainer has one objective: a clipped ratio per sequence (the sum of its token log-ratios, not "
            "GSPO's mean), no CISPO; translate(cfg, 'grpo') with advantage='grpo' or 'dr_grpo' has both"))
    unmatched.append(Unmatched(
        "grpo.unit", g.unit,
        "RLOOTrainer's ratio is per sequence (sum of token log-ratios) and its loss a mean over completions; "
        "the course clips per token and averages with the unit (the gradients agree only at μ=1 with "
        "unit='constant', max_length=1)",
    ))
    if g.beta > 0 and (g.kl_placement, g.kl_estimator) != ("reward", "k1"):
        unmatched.append(Unmatched(
            "grpo.kl_placement / kl_estimator", (g.kl_placement, g.kl_estimator),
            "RLOOTrainer puts k1 in the reward before the baseline (policy_loss.kl_shaped_rewards): "
            "kl_placement='reward', kl_estimator='k1' is its form",
        ))
    return Bridged("rloo", "RLOOTrainer", "RLOOConfig", config, unmatched)


# ---- the course <-> TRL table docs/trl.md shows (benchmarks/tables.py renders it between <!-- bench:trl_map -->) ----
PARITY = "`tests/test_trl_parity.py`"
MAPPING: tuple[tuple[str, str, str], ...] = (
    # (course, TRL 1.16, agreement)
    ("`grpo_advantages(ddof=1, epsilon=1e-4)`", '`scale_rewards="group"`',
     "exact (1e-6 relative), zero-variance groups included"),
    ('the trainer\'s `advantage="grpo"` (population std, ddof = 0, no epsilon)', '`scale_rewards="group"`',
     "**not exact**: TRL's advantage is ours × std₀ / (std₁ + 1e-4) ≈ √((G−1)/G) per group (the test pins the factor)"),
    ("`dr_grpo_advantages` / `rloo_advantages`",
     '`scale_rewards="none"` / `RLOOTrainer` (`normalize_advantages=False`, β = 0)', "exact"),
    ("`clipped_surrogate(ε_low, ε_high)` + `aggregate` unit `sequence_mean` / `token_mean` / `constant` "
     "(L_max = `max_completion_length`)", "`loss_type` `grpo` / `dapo` (and `bnpo`, one process) / `dr_grpo`",
     "exact, loss and gradients, clip active"),
    ('β·k3 in the loss (`kl_placement="loss"`)', "`beta` with `use_bias_correction_kl=False` (the bridge sets it)",
     "exact; TRL's default `True` multiplies k3 by the importance ratio, which is not the course's term"),
    ("`mask_truncated`: zero mask, the row still counts in every denominator", "`mask_truncated_completions`",
     "exact (the trainer keeps masked rows)"),
    ('GSPO: `sequence_ratio` + `clipped_surrogate`, unit `sequence_mean` (the trainer\'s '
     '`importance_sampling_level="sequence"`)', '`importance_sampling_level="sequence"`, `loss_type="grpo"`', "exact"),
    ('CISPO: `cispo_objective`, unit `token_mean` (the trainer\'s `loss_type="cispo"`)',
     '`loss_type="cispo"`, `epsilon_high` = ε_max', "exact"),
    ("DAPO's overlong shaping: `overlong_penalty` (the trainer's `soft_punish_cache` = C)",
     "not a `GRPOConfig` option: the reward function `trl.rewards.get_soft_overlong_punishment(max_completion_len=L_max, "
     "soft_punish_cache=C)`, which the bridge adds to `reward_funcs`", "exact (`tests/test_overlong.py`)"),
    ("`behaviour_weights`: π_old/π_behaviour of stale rollouts (`vllm_importance_sampling_correction`, `_mode`, "
     "`_clip_min`, `_clip_max`)", "`GRPOConfig.vllm_importance_sampling_*`, same names (TRL corrects a vLLM "
     "sampler's log-probs, `use_vllm=True`)", "exact (`tests/test_behaviour.py` runs TRL's own code)"),
    ("`max_staleness` = K: the rollout worker samples batch s with the weights of step s − K",
     "`trl.experimental.async_grpo.AsyncGRPOConfig.max_staleness` (a vLLM server)",
     "**not exact**: TRL drops samples older than K instead of sampling at a fixed lag (listed)"),
    ("DPO `sigmoid`; `rpo_alpha` (token-mean NLL on chosen)",
     '`loss_type=["sigmoid"]`; `["sigmoid", "sft"]`, `loss_weights=[1, rpo_alpha]`', "exact"),
    ("`ipo_loss(..., chosen_lengths=, rejected_lengths=)` (log-ratios averaged per completion)", '`loss_type=["ipo"]`',
     "exact; the trainer's IPO sums log-probs (the paper's form) and is **not** TRL's"),
    ("`simpo_loss`", '`CPOTrainer(loss_type="simpo", cpo_alpha=0)`', "exact"),
    ("KTO: `kto_loss` with `kto.beta`, `desirable_weight`, `undesirable_weight`; z0 = `kto_reference_point` on "
     "mismatched pairs, clamped at 0, detached", '`KTOTrainer`, `KTOConfig(loss_type="kto")`, same three names',
     "exact, loss and gradients, desirable-only batches included"),
    ("KTO's data: `kto.batch_size` answers shuffled once, cut into batches (last one dropped), each prompt paired "
     "with the previous row's completion for z0",
     '`per_device_train_batch_size`, `train_sampling_strategy="sequential"`, `dataloader_drop_last=True`; TRL\'s '
     "collator rotates the same way", "same batches: TRL's logged losses and z0 are the course trainer's over 3 "
     "steps, a wrap-around included (`tests/test_trl_bridge.py`)"),
    ("`kto.desirable_fraction` (imbalanced data)", "— (a dataset choice)", "course-side data (listed)"),
    ("ORPO: `odds_ratio_penalty` with λ = `orpo.beta`", "`trl.experimental.orpo.ORPOTrainer`, `ORPOConfig.beta`",
     "exact, penalty and gradients"),
    ("ORPO's NLL: token mean over the chosen completion", "`ORPOTrainer`: token mean over prompt and chosen completion",
     "**not exact** (the test pins both)"),
    ("RLOO's loss: per-token ratio, clipped, averaged with the unit",
     "`RLOOTrainer`: one ratio per sequence, mean over completions", "not exact (listed by the bridge)"),
    ("`zero_variance` `drop` / `resample`; `kl_estimator` k1/k2 in the loss; KL in the reward for GRPO", "—",
     "no TRL equivalent (listed)"),
    ("DPO, KTO and ORPO answers without `<eos>` (truncated when sampled)", "appends `<eos>` to every completion",
     "not exact for those answers (listed)"),
    ("`<pad>`/`<bos>` removed from the tiny GPT's softmax", "full vocabulary",
     "not exact (after SFT these tokens carry ~0 probability); exact with the suppression inside the model, an "
     "`lm_head` bias of −1e9 on the two ids (how `tests/test_trl_bridge.py` compares KTO and ORPO)"),
)


def mapping_markdown() -> str:
    """``MAPPING`` as docs/trl.md's markdown table (course | TRL 1.16 | agreement)."""
    lines = ["| course | TRL 1.16 | agreement |", "|---|---|---|"]
    lines += [f"| {course} | {trl} | {agreement} |" for course, trl, agreement in MAPPING]
    return "\n".join(lines) + "\n"


__all__ = ["KINDS", "MAPPING", "TRL_NAMES", "Bridged", "Unmatched", "mapping_markdown", "translate"]
