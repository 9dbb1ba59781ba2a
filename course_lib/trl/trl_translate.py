"""The course's recipes in TRL 1.16's words: a pure translation table, no TRL or trainer imported.

``translate(cfg, kind)`` turns a course ``RunConfig`` (SFT, the DPO family, the GRPO family, RLOO,
KTO, ORPO) into a ``Bridged``: which TRL trainer and config class take the recipe (``SFTConfig``,
``DPOConfig``, ``CPOConfig`` for SimPO, ``GRPOConfig``, ``RLOOConfig``, ``KTOConfig``, and
``ORPOConfig``, which TRL 1.16 keeps in ``trl.experimental.orpo``), the config's keyword
arguments, and every course option **without** an exact TRL equivalent (``Unmatched``), each with
what TRL does instead. What each trainer knows is its registry row, in the trainer's own file
(``register(trl=TRLRow(...))``, ``course_lib.trainers.trainer``): a trainer with a row is translated
here without editing this module; a trainer without one says why (``Registered.trl``, e.g. PPO).
This module adds what every recipe shares (precision, steps, clipping, logging). A row's ``names``
says which course option becomes which TRL argument (KTO's, ORPO's: every other option is listed
unmatched, ``tests/test_trl_translate.py``); ``MAPPING`` is the course ↔ TRL table docs/trl.md
shows (``mapping_markdown``), one row per option or formula, with how closely the two agree. Pure
data: it needs neither TRL nor ``transformers``' trainer, so it is tested on its own
(``tests/test_trl_translate.py``); ``course_lib.trl.trl_bridge`` builds the TRL objects from it
(config, datasets, callbacks, trainers, the instruct recipe, the CLI).

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

from course_lib._validate import number
from course_lib.tinygpt.runtime import trl_precision
from course_lib.trainers.configs import RunConfig, validate
from course_lib.trainers.trainer import TRLRow, Unmatched, trl_rows


def kinds() -> tuple[str, ...]:
    """The recipes ``translate`` takes: every registered trainer's TRL rows (``register(trl=)``)."""
    return tuple(trl_rows())


def row(kind: str) -> TRLRow:
    """The TRL row of ``kind``; a ValueError names the kinds the bridge translates."""
    rows = trl_rows()
    if kind not in rows:
        raise ValueError(f"kind must be one of {tuple(rows)}; got {kind!r}")
    return rows[kind]



@dataclass
class Bridged:
    """The TRL side of one course recipe: TRL's trainer and config class (in ``module``), the config's keyword
    arguments, the course options without an exact TRL equivalent."""

    kind: str
    trainer: str  # TRL trainer class name
    config_class: str  # TRL config class name
    config: dict  # keyword arguments for the config class
    unmatched: list[Unmatched] = field(default_factory=list)
    module: str = "trl"  # where TRL keeps both classes (trl.experimental.orpo for ORPO)

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
    """The TRL config for the course recipe ``kind`` (one of ``kinds()``: 'sft', 'dpo', 'grpo', 'rloo', 'kto',
    'orpo' and any trainer registered with a TRL row).

    The trainer's row (``register(trl=)``) translates its section; the options every recipe
    shares (precision, steps, learning rate, clipping, logging) are added here. ``rloo`` is the
    GRPO section of ``cfg`` with ``advantage='rloo'``, handed to TRL's ``RLOOTrainer``; ``grpo``
    with ``advantage='rloo'`` is refused (say ``rloo``). ``num_processes`` divides the per-device
    batch (``accelerate launch``) so one step still sees the course's B·G completions (or
    ``batch_size`` pairs/demonstrations).
    """
    r = row(kind)
    number(num_processes, "num_processes", integer=True, low=1)
    validate(cfg)
    section = getattr(cfg, r.section)
    for name, value in r.requires.items():
        if getattr(section, name) != value:
            raise ValueError(f"kind={kind!r} needs {r.section}.{name}={value!r}; got {getattr(section, name)!r}")
    recipe = r.translate(cfg, num_processes)
    common = _common(cfg, section, output_dir=output_dir, seed=seed, cuda=cuda, checkpointing=checkpointing)
    return Bridged(kind, recipe.trainer, recipe.config_class, common | recipe.config, list(recipe.unmatched),
                   recipe.module)


# ---- the course <-> TRL table docs/trl.md shows (benchmarks/tables.py renders it between <!-- bench:trl_map -->) ----
PARITY = "`tests/test_trl_parity.py`"
MAPPING: tuple[tuple[str, str, str], ...] = (
    # (course, TRL 1.16, agreement)
    ("`grpo_advantages(ddof=1, epsilon=1e-4)`", '`scale_rewards="group"`',
     "exact (1e-6 relative), zero-variance groups included"),
    ('the trainer\'s `advantage="grpo"` (population std, ddof = 0, no epsilon)', '`scale_rewards="group"`',
     "**not exact**: TRL's advantage is ours × std₀ / (std₁ + 1e-4) ≈ √((G−1)/G) per group (the test pins the "
     "factor)"),
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
     "not a `GRPOConfig` option: the reward function "
     "`trl.rewards.get_soft_overlong_punishment(max_completion_len=L_max, soft_punish_cache=C)`, which the bridge "
     "adds to `reward_funcs`", "exact (`tests/test_overlong.py`)"),
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
    ("ORPO's NLL: token mean over the chosen completion",
     "`ORPOTrainer`: token mean over prompt and chosen completion",
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


__all__ = ["MAPPING", "Bridged", "Unmatched", "kinds", "mapping_markdown", "row", "translate"]
