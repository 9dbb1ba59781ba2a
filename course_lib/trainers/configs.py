"""Every knob of the tiny-GPT trainers, with TRL's names where TRL has one, and named configs.

A config is a tree of small dataclasses (``RunConfig``). Named configs:

- ``cpu``  (default) the budget measured on a 2-core laptop CPU: minutes, not hours;
- ``gpu``  a bigger model on 4-digit addition for Colab or a real GPU;
- ``test`` a toy budget that exercises every code path in seconds (CI).

Override any field from the CLI (``--beta 0.04``) or in Python with ``dataclasses.replace``. Each
section checks itself when built and ``validate`` checks the run as a whole, every numeric option
with one rule (``_validate.number``: finite, within its bounds, the error naming the option and what
it accepts).

Mapping to TRL (``DPOConfig`` / ``GRPOConfig``; ``PPOConfig`` and ``RewardModelConfig`` use TRL's
``PPOConfig`` / ``RewardConfig`` names, see ``course_lib.trainers.ppo`` and ``course_lib.trainers.reward_model``):

=========================  ===================================  =========================================
here                        TRL                                  meaning
=========================  ===================================  =========================================
``beta``                    ``beta``                             DPO temperature / GRPO KL coefficient
``loss_type`` (DPO)         ``loss_type`` (sigmoid, ipo);        which pairwise loss
                            SimPO: ``CPOTrainer(loss_type=
                            "simpo")``
``rpo_alpha``               ``rpo_alpha``                        weight of the NLL term on chosen answers
``simpo_gamma``             ``simpo_gamma``                      SimPO target margin
``num_generations``         ``num_generations``                  G, completions per prompt
``batch_prompts``           per-device batch = B·G completions   B, prompts per step
``num_iterations``          ``num_iterations``                   μ, inner epochs on one rollout
``epsilon``                 ``epsilon``                          lower clip ε_low
``epsilon_high``            ``epsilon_high``                     upper clip ε_high (DAPO clip-higher)
``advantage`` grpo          ``scale_rewards="group"``            (r − mean)/std per group
``advantage`` dr_grpo       ``scale_rewards="none"``             r − mean, no std
``advantage`` rloo          ``RLOOTrainer``                      leave-one-out baseline
``unit`` sequence_mean      ``loss_type="grpo"``                 mean over tokens, then completions
``unit`` token_mean         ``loss_type="dapo"`` / ``"bnpo"``    mean over all completion tokens
``unit`` constant           ``loss_type="dr_grpo"``              Σ tokens / (G·L_max)
``kl_estimator``            (k3, fixed)                          k1 / k2 / k3
``kl_placement`` loss       (the only placement)                 β·KL per token in the loss (GRPO)
``kl_placement`` reward     ``RLOOTrainer`` / PPO                β·KL folded into the reward (InstructGPT)
``zero_variance`` resample  DAPO dynamic sampling                refill the batch with informative groups
``max_completion_length``   ``max_completion_length``            L_max; longer completions are truncated
``mask_truncated``          ``mask_truncated_completions``       drop truncated completions from the loss
``loss_type`` cispo         ``loss_type="cispo"``                CISPO: capped IS weight × A × log π, token
                                                                 mean; ``epsilon_high`` is ε_max
``importance_sampling_level`` ``importance_sampling_level``      GSPO: one length-normalised ratio per
sequence                    ``="sequence"``                      completion (TRL: with ``loss_type="grpo"``,
                                                                 here ``unit="sequence_mean"``)
``soft_punish_cache``       ``get_soft_overlong_punishment(``    DAPO overlong shaping: a reward function
                            ``max_completion_len=L_max,``        added to the checker's reward
                            ``soft_punish_cache=C)``
``max_staleness``           ``AsyncGRPOConfig.max_staleness``    K: rollouts sampled K steps behind (async)
``worker_timeout``          (none)                               seconds without a batch before a stopped or
                                                                 hung rollout worker fails the run
``sampler_temperature``     (none: a deliberate fault)           the sampler's temperature, when it differs
                                                                 from the one the trainer's log-probs assume
``adaptive_length_quantile`` (none)                              next step's generation cap: a quantile of
``adaptive_length_margin``                                       this step's lengths + margin
``vllm_importance_sampling  ``vllm_importance_sampling_*``       the behaviour correction π_old/π_behaviour
_correction``, ``_mode``,                                        of stale rollouts (``course_lib.formulas.behaviour``)
``_clip_min``, ``_clip_max``
``task.env`` (``--env``)    ``GRPOTrainer(environment_factory=)``  the environment of every rollout
``mask_env_tokens``         (``tool_mask``, always on)           environment tokens out of the loss
``EpisodeLimits``           ``max_tool_calling_iterations``;     tool calls per episode; tool results
                            ``max_completion_length``            count in the token limit
``kto.beta``                ``KTOConfig.beta``                   β of KTO's value function
``kto.desirable_weight``    ``desirable_weight``                 λ_D on desirable answers
``kto.undesirable_weight``  ``undesirable_weight``               λ_U on undesirable answers
``kto.desirable_fraction``  (none: a dataset choice)             share of desirable answers kept
``orpo.beta``               ``ORPOConfig.beta``                  λ on the odds-ratio term
=========================  ===================================  =========================================

TRL's ``loss_type`` names two things at once: the per-token objective and the averaging unit.
Here the unit has one home, ``unit``; ``loss_type`` picks only the objective (``"clipped"``, the
PPO/GRPO surrogate, or ``"cispo"``). TRL's unit names given as ``loss_type`` are refused with
the ``unit`` they mean (``GRPO_LOSS_TYPE_UNITS``).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from course_lib._validate import number
from course_lib.formulas.behaviour import IS_MODES, check_bounds
from course_lib.formulas.policy_loss import GRPO_LOSS_TYPES, IMPORTANCE_SAMPLING_LEVELS, KL_ESTIMATORS, UNITS
from course_lib.tinygpt.environments import ENVIRONMENTS, TOOL_CALLS
from course_lib.tinygpt.model import ModelConfig
from course_lib.tinygpt.rewards import check_reward_spec
from course_lib.tinygpt.task import TaskConfig

DPO_LOSSES = ("sigmoid", "ipo", "simpo")
ADVANTAGES = ("grpo", "rloo", "dr_grpo")
ZERO_VARIANCE = ("keep", "drop", "resample")
KL_PLACEMENTS = ("loss", "reward")
# Which KL estimators pull towards the reference in each placement (exact expected gradients on a
# categorical policy: course_lib.formulas.kl.expected_kl_gradient, tests/test_kl.py, notebook 10_the_kl_term
# section 3b).
KL_ESTIMATORS_BY_PLACEMENT = {
    "loss": (("k2", "k3"), "in the loss k1 has zero expected gradient on on-policy samples (E[∇k1] = 0): it adds "
                           "noise and no pull towards the reference; k2 gives ∇KL(π‖π_ref), k3 ∇KL(π_ref‖π)"),
    "reward": (("k1",), "in the reward only k1 is a valid per-sequence penalty (its score-function gradient is "
                        "∇KL(π‖π_ref), as in TRL's RLOO and PPO); k2 or k3 in the reward can point away from the "
                        "reference (cosine < 0 with ∇KL, notebook 10_the_kl_term)"),
}
CHOICES = {  # the accepted values of every string option (the CLI shows them in --help)
    "loss_type": DPO_LOSSES, "advantage": ADVANTAGES, "unit": UNITS, "zero_variance": ZERO_VARIANCE,
    "kl_estimator": KL_ESTIMATORS, "kl_placement": KL_PLACEMENTS, "vllm_importance_sampling_mode": IS_MODES,
    "env": ("", *ENVIRONMENTS),  # task.env: "" (none) or an environment with tools
    "tool_call": TOOL_CALLS,  # task.tool_call: what a tool demonstration asks the calculator
    "init": ("sft", "scratch"),  # rm.init: the reward model's transformer from the SFT policy, or from scratch
}
# GSPO's clipping range (ε_low, ε_high) in its paper (Zheng et al. 2025, v2 §5.1) and TRL's docs. A length-normalised
# sequence ratio moves far less than a token's, so GRPO's 0.2 rarely clips it; the course keeps one ``epsilon`` default
# for both levels and says so wherever GSPO is offered (CLI help, passport).
GSPO_PAPER_EPSILONS = (3e-4, 4e-4)
# TRL's loss_type values that are only an averaging unit here: the one home of the unit is ``unit``
GRPO_LOSS_TYPE_UNITS = {"grpo": "sequence_mean", "bnpo": "token_mean", "dapo": "token_mean", "dr_grpo": "constant"}
SECTION_CHOICES = {  # where one option name means different things in two sections
    ("grpo", "loss_type"): GRPO_LOSS_TYPES,
    ("grpo", "importance_sampling_level"): IMPORTANCE_SAMPLING_LEVELS,
}


def choices_for(section: str, name: str):
    """The accepted values of option ``name`` in config section ``section`` (None: not a string choice)."""
    return SECTION_CHOICES.get((section, name), CHOICES.get(name))


MAX_STALENESS = 32  # K's upper bound: the worker's ring holds K + 1 copies of the weights (see check_staleness)
COUNT = {"integer": True, "low": 1}  # rules of ``_validate.number`` shared by many options
# Upper bounds on the sizes, with room above the ``gpu`` config (6 layers of 256 in 8 heads, 64 positions, a 4-digit
# task with 5000 prompts): past them a run fails at allocation, or 10^digits overflows torch's int64 sampler.
SIZE = " (the tiny GPT's sizes; the gpu config is far inside)"
SIZES = {"model": {"n_layer": 48, "n_embd": 4096, "n_head": 64, "n_positions": 4096},
         "task": {"digits": 18, "n_demos": 1_000_000, "n_heldout": 100_000}}
STEPS = {"integer": True, "low": 0}
POSITIVE = {"low": 0, "low_open": True}
NON_NEGATIVE = {"low": 0}


def _refuse(checks) -> None:
    """Raise ValueError with the message of the first failed ``(ok, message)`` check."""
    for ok, message in checks:
        if not ok:
            raise ValueError(message)


def _numbers(label: str, section, rules: dict) -> None:
    """``_validate.number`` on each ``name: rule`` of ``rules``, named ``label.name``, in order (the first bad one
    raises)."""
    for name, rule in rules.items():
        number(getattr(section, name), f"{label}.{name}" if label else name, **rule)


def _check_trainer(label: str, section) -> None:
    """The rules every trainer section shares: its string options (``choices_for``), steps, learning rate,
    evaluation period and (where it has one) batch size."""
    for name in vars(section):
        allowed = choices_for(label, name)
        if allowed and getattr(section, name) not in allowed:
            raise ValueError(f"{label}.{name} must be one of {allowed}; got {getattr(section, name)!r}")
    _numbers(label, section, {"steps": STEPS, "learning_rate": POSITIVE, "eval_every": COUNT})
    if hasattr(section, "batch_size"):
        _numbers(label, section, {"batch_size": COUNT})


def _check_reward(label: str, spec) -> None:
    """``spec`` names a checker or ``rm:DIR`` (``rewards.check_reward_spec``), else ValueError naming
    ``label.reward``."""
    try:
        check_reward_spec(spec)
    except ValueError as err:
        raise ValueError(f"{label}.{err}") from None


@dataclass
class SFTConfig:
    steps: int = 1200
    batch_size: int = 64
    learning_rate: float = 1e-3
    eval_every: int = 200

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise ValueError naming the first bad option (also run by ``validate`` after overrides)."""
        _check_trainer("sft", self)


@dataclass
class DPOConfig:
    steps: int = 100
    loss_type: str = "sigmoid"  # sigmoid (= DPO) | ipo | simpo
    beta: float = 1.0
    rpo_alpha: float = 0.0  # weight of the NLL term on the chosen answer (0 = plain DPO)
    simpo_gamma: float = 0.5
    learning_rate: float = 1e-4
    batch_size: int = 64
    pair_prompts: int = 4096  # prompts sampled from the SFT policy to build pairs
    samples_per_prompt: int = 8  # candidates per prompt; one correct + one incorrect make a pair
    max_completion_length: int = 6
    eval_every: int = 25

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise ValueError naming the first bad option (also run by ``validate`` after overrides)."""
        _check_trainer("dpo", self)
        _numbers("dpo", self, {"beta": POSITIVE, "rpo_alpha": NON_NEGATIVE,
                               "simpo_gamma": {**NON_NEGATIVE, "why": " (SimPO's target reward margin)"},
                               "pair_prompts": COUNT, "samples_per_prompt": {"integer": True, "low": 2},
                               "max_completion_length": COUNT})


@dataclass
class GRPOConfig:
    steps: int = 300
    batch_prompts: int = 32  # B
    num_generations: int = 8  # G
    learning_rate: float = 3e-4
    num_iterations: int = 1  # μ: inner epochs against frozen old log-probs
    epsilon: float = 0.2  # ε_low
    epsilon_high: float = 0.2  # ε_high
    loss_type: str = "clipped"  # clipped (PPO/GRPO surrogate) | cispo (capped IS weight; epsilon_high is ε_max)
    importance_sampling_level: str = "token"  # token (GRPO) | sequence (GSPO: one ratio per completion; its paper
    # clips at epsilon=3e-4, epsilon_high=4e-4, GSPO_PAPER_EPSILONS: set them, the defaults are GRPO's 0.2)
    beta: float = 0.0  # KL coefficient; 0 keeps no reference model in memory
    kl_estimator: str = "k3"  # k1 | k2 | k3
    kl_placement: str = "loss"  # loss (GRPO, per token) | reward (InstructGPT/RLOO, before the baseline)
    advantage: str = "grpo"  # grpo | rloo | dr_grpo
    unit: str = "token_mean"  # sequence_mean | token_mean | constant
    zero_variance: str = "keep"  # keep (zero advantage) | drop | resample (DAPO)
    max_resample_rounds: int = 4
    max_completion_length: int = 6
    mask_truncated: bool = False
    soft_punish_cache: int = 0  # DAPO overlong shaping: the soft zone C before max_completion_length; 0 = off
    temperature: float = 1.0
    reward: str = "strict"  # a checker of course_lib.tinygpt.rewards.CHECKERS, or rm:DIR (a saved reward model)
    share_prompt: bool = True  # run each group's prompt once in the update (same numbers, less work)
    mask_env_tokens: bool = True  # with --env: environment tokens out of the loss (False: the ablation)
    eval_every: int = 20
    # RL as a system (course_lib.trainers.rollout_worker, course_lib.formulas.behaviour): TRL's AsyncGRPOConfig /
    # GRPOConfig names
    max_staleness: int = 0  # K: 0 synchronous; K >= 1 a rollout worker samples batch s with the weights of step s-K
    worker_timeout: float = 600.0  # seconds the trainer waits for the rollout worker's next batch, then fails the run
    vllm_importance_sampling_correction: bool = True  # reweight by π_old/π_behaviour when the sampler's weights lag
    # token_truncate | token_mask | sequence_truncate | sequence_mask
    vllm_importance_sampling_mode: str = "sequence_mask"
    vllm_importance_sampling_clip_min: float | None = None  # C_min (None: no lower bound)
    vllm_importance_sampling_clip_max: float | None = 3.0  # C_max (None: no upper bound)
    # A deliberately mismatched sampler (no TRL name): sample at this temperature while the trainer's
    # log-probs assume ``temperature`` (None: the same). Shows why the behaviour correction exists.
    sampler_temperature: float | None = None
    # Adaptive completion length (no TRL name): the next step generates at most the q-quantile of this
    # step's completion lengths + adaptive_length_margin tokens, never fewer than the longest right answer
    # + <eos>, never more than max_completion_length (None: off, every step generates up to L_max).
    adaptive_length_quantile: float | None = None
    adaptive_length_margin: int = 1

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise ValueError naming the first bad option (also run by ``validate`` after overrides)."""
        if self.loss_type in GRPO_LOSS_TYPE_UNITS:  # TRL's name for an averaging unit, not an objective
            raise ValueError(f"grpo.loss_type must be one of {GRPO_LOSS_TYPES}; got {self.loss_type!r}, which is "
                             f"TRL's name for the averaging unit: set unit={GRPO_LOSS_TYPE_UNITS[self.loss_type]!r} "
                             f"(loss_type='clipped')")
        _check_trainer("grpo", self)
        _check_reward("grpo", self.reward)
        _numbers("grpo", self, {
            "num_generations": {"integer": True, "low": 2, "why": " (a group needs a baseline)"},
            "batch_prompts": COUNT, "max_resample_rounds": STEPS,
            "epsilon": {**NON_NEGATIVE, "why": " (>= 1 means no lower clip, as in TRL)"},
            "epsilon_high": NON_NEGATIVE, "beta": NON_NEGATIVE,
            "temperature": {**POSITIVE, "why": " (0 would divide the logits by zero)"},
            "num_iterations": COUNT, "max_completion_length": COUNT})  # soft_punish_cache: validate (needs the task)
        _refuse([_kl_pair_check(self)])
        check_staleness(self)


@dataclass
class RewardModelConfig:
    """The reward model of ``train rm`` (``course_lib.trainers.reward_model``): its data, labels and optimisation."""

    pair_prompts: int = 8192  # training prompts sampled to build pairs
    heldout_prompts: int = 500  # held-out prompts (the task's held-out set) for evaluation pairs
    samples_per_prompt: int = 8  # SFT samples per prompt; one accepted + one rejected make a pair
    pairs_per_prompt: int = 2  # at most this many (accepted, rejected) pairs per prompt, samples not reused
    temperature: float = 1.0  # sampling temperature of the SFT policy when building pairs
    max_completion_length: int = 6
    noise: float = 0.1  # probability that a label is flipped
    steps: int = 300
    batch_size: int = 256  # pairs per step (TRL: per_device_train_batch_size); see reward_model's docstring
    learning_rate: float = 6e-4
    init: str = "sft"  # sft: transformer weights from the SFT policy | scratch
    eval_every: int = 100

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise ValueError naming the first bad option (also run by ``validate`` after overrides)."""
        _check_trainer("rm", self)
        _numbers("rm", self, {
            "noise": {"low": 0, "high": 0.5, "high_open": True, "why": " (0.5 makes labels coin flips)"},
            "samples_per_prompt": {"integer": True, "low": 2}, "pairs_per_prompt": COUNT, "pair_prompts": COUNT,
            "heldout_prompts": COUNT, "temperature": POSITIVE, "max_completion_length": COUNT})


@dataclass
class PPOConfig:
    """PPO with a learned critic (``course_lib.trainers.ppo``), TRL ``PPOConfig`` names."""

    steps: int = 300
    batch_prompts: int = 256  # prompts per step
    num_generations: int = 1  # completions per prompt: 256 × 1 = GRPO's 32 × 8 sampled completions
    learning_rate: float = 3e-4  # policy
    critic_learning_rate: float = 3e-4  # the critic's own AdamW; TRL's vf_coef has no effect here (see trainers.ppo)
    num_ppo_epochs: int = 2  # passes over each batch (the value clip needs >= 2 to act)
    cliprange: float = 0.2  # ε of the policy's clipped surrogate
    cliprange_value: float = 0.2  # ε_v of the clipped value loss
    gamma: float = 1.0
    lam: float = 0.95
    kl_coef: float = 0.0  # β of the per-token KL penalty in the reward; 0 keeps no reference
    max_completion_length: int = 6
    temperature: float = 1.0
    reward: str = "strict"  # a checker of course_lib.tinygpt.rewards.CHECKERS, or rm:DIR (a saved reward model)
    eval_every: int = 20

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise ValueError naming the first bad option (also run by ``validate`` after overrides)."""
        _check_trainer("ppo", self)
        _numbers("ppo", self, {
            "batch_prompts": COUNT, "num_generations": COUNT, "critic_learning_rate": POSITIVE,
            "num_ppo_epochs": COUNT,
            "cliprange": {"low": 0, "high": 1, "high_open": True}, "cliprange_value": POSITIVE,
            "gamma": {"low": 0, "high": 1}, "lam": {"low": 0, "high": 1}, "kl_coef": NON_NEGATIVE,
            "max_completion_length": COUNT, "temperature": POSITIVE})
        _check_reward("ppo", self.reward)


@dataclass
class KTOConfig:
    """KTO (``course_lib.trainers.kto``), TRL ``KTOConfig`` names: unpaired answers from DPO's pairs, a cached
    reference.

    The data are DPO's preference pairs (``dpo.pair_prompts``, ``dpo.samples_per_prompt``,
    ``dpo.max_completion_length``) taken apart: each chosen answer is a desirable example, each
    rejected one an undesirable example; ``desirable_fraction`` keeps only that share of the
    desirable ones (the paper's imbalance experiment). ``batch_size`` counts answers: 128 answers
    = DPO's 64 pairs.
    """

    steps: int = 100
    beta: float = 1.0  # β of KTO's value function (the course's DPO β)
    desirable_weight: float = 1.0  # λ_D
    undesirable_weight: float = 1.0  # λ_U
    desirable_fraction: float = 1.0  # share of the desirable answers kept (1 = all; < 1 = imbalanced data)
    learning_rate: float = 1e-4
    batch_size: int = 128  # answers per step (TRL: per_device_train_batch_size), >= 2 for the KL estimate
    eval_every: int = 25

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise ValueError naming the first bad option (also run by ``validate`` after overrides)."""
        _check_trainer("kto", self)
        _numbers("kto", self, {
            "beta": POSITIVE, "desirable_weight": POSITIVE, "undesirable_weight": POSITIVE,
            "desirable_fraction": {"low": 0, "high": 1, "low_open": True,
                                   "why": " (the share of desirable answers kept)"},
            "batch_size": {"integer": True, "low": 2,
                           "why": ": z0 is estimated by pairing each prompt with another answer of the batch (with 1 "
                                  "it is the answer's own log-ratio)"}})


@dataclass
class ORPOConfig:
    """ORPO (``course_lib.trainers.orpo``), TRL ``ORPOConfig`` names: one stage from the base model, no reference.

    Same preference pairs as DPO; the policy starts from the base (pre-SFT) initialisation and the
    NLL of the chosen answers does SFT's job. ``steps`` defaults to SFT's + DPO's steps (the same
    number of policy updates as the two-stage route).
    """

    steps: int = 1300
    beta: float = 0.1  # λ, the weight of the odds-ratio term (TRL's name and default)
    learning_rate: float = 1e-3  # SFT's: the policy learns the task from scratch
    batch_size: int = 64  # pairs per step
    eval_every: int = 100

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise ValueError naming the first bad option (also run by ``validate`` after overrides)."""
        _check_trainer("orpo", self)
        _numbers("orpo", self, {"beta": {**POSITIVE, "why": " (λ; 0 would be SFT on the chosen answers)"}})


@dataclass(init=False)
class RunConfig:
    """A run's options: ``task``, ``model``, one section per registered trainer (``cfg.grpo``, …), run-wide options.

    The trainer sections are the registry's (``course_lib.trainers.trainer.register``): ``RunConfig()``
    holds each registered config class at its defaults, and ``RunConfig(grpo=GRPOConfig(...))`` or
    ``dataclasses.replace(cfg, grpo=...)`` sets one. ``cfg.NAME`` reads a section.
    """

    name: str = "cpu"
    task: TaskConfig = field(default_factory=TaskConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    max_grad_norm: float = 1.0
    checkpoint_every: int = 10
    sections: dict = field(default_factory=dict)  # the trainer sections, in ``trainer.trainers()``' order

    def __init__(self, name: str = "cpu", task: TaskConfig | None = None, model: ModelConfig | None = None,
                 max_grad_norm: float = 1.0, checkpoint_every: int = 10, sections: dict | None = None, **trainers):
        known = trainer_sections()
        given = {**(sections or {}), **trainers}
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise TypeError(f"RunConfig has no section {unknown[0]!r}; its trainer sections: {', '.join(known)}")
        self.name, self.max_grad_norm, self.checkpoint_every = name, max_grad_norm, checkpoint_every
        self.task = task if task is not None else TaskConfig()
        self.model = model if model is not None else ModelConfig()
        self.sections = {k: given[k] if k in given else cls() for k, cls in known.items()}

    def __getattr__(self, name: str):
        sections = self.__dict__.get("sections")
        if sections is not None and name in sections:
            return sections[name]
        raise AttributeError(f"RunConfig has no option or section {name!r}")

    def __setattr__(self, name: str, value) -> None:
        sections = self.__dict__.get("sections")
        if sections is not None and name in sections:
            sections[name] = value
        else:
            object.__setattr__(self, name, value)


def trainer_sections() -> dict[str, type]:
    """``{section: config class}`` of the registered trainers (``course_lib.trainers.trainer.sections``)."""
    from course_lib.trainers.trainer import sections

    return sections()


def _named(name: str, task: TaskConfig, model: ModelConfig, **run) -> RunConfig:
    """A named config: each trainer section at its registered values for ``name`` (``gpu=``, ``test=``)."""
    from course_lib.trainers.trainer import trainers

    own = {kind: e.config(**getattr(e, name)) for kind, e in trainers().items()}
    return RunConfig(name=name, task=task, model=model, **own, **run)


def _cpu() -> RunConfig:
    return RunConfig()


def _gpu() -> RunConfig:
    return _named("gpu", TaskConfig(digits=4, n_demos=4000, n_heldout=1000),
                  ModelConfig(n_layer=6, n_embd=256, n_head=8), checkpoint_every=50)


def _test() -> RunConfig:
    return _named("test", TaskConfig(digits=1, n_demos=40, n_heldout=30),
                  ModelConfig(n_layer=1, n_embd=32, n_head=2, n_positions=32), checkpoint_every=2)


CONFIGS = {"cpu": _cpu, "gpu": _gpu, "test": _test}


def get_config(name: str = "cpu") -> RunConfig:
    if name not in CONFIGS:
        raise ValueError(f"config must be one of {', '.join(map(repr, CONFIGS))}; got {name!r}")
    return CONFIGS[name]()


def _kl_pair_check(g: GRPOConfig) -> tuple[bool, str]:
    """(ok, message): with β > 0 the estimator must suit the placement (``KL_ESTIMATORS_BY_PLACEMENT``)."""
    allowed, reason = KL_ESTIMATORS_BY_PLACEMENT.get(g.kl_placement, (KL_ESTIMATORS, ""))
    return (not (g.beta > 0 and g.kl_estimator not in allowed),
            f"grpo.kl_estimator {g.kl_estimator!r} with kl_placement={g.kl_placement!r} is refused: {reason}. "
            f"Use kl_estimator in {allowed} with kl_placement={g.kl_placement!r}, or "
            + ("k1 with kl_placement='reward'" if g.kl_placement == "loss" else "k2/k3 with kl_placement='loss'"))


def _objective_checks(g: GRPOConfig, t: TaskConfig) -> list[tuple[bool, str]]:
    """(ok, message) pairs for GSPO, CISPO and overlong shaping: each option where it has a meaning."""
    seq = g.importance_sampling_level == "sequence"
    answer = t.answer_length  # the longest answer plus <eos>
    return [
        (not (seq and g.unit != "sequence_mean"),
         f"grpo.importance_sampling_level='sequence' (GSPO) clips one objective per completion, which only "
         f"unit='sequence_mean' averages as a per-completion objective (a token unit weights each completion by its "
         f"length; TRL warns the same); accepted: unit='sequence_mean'; got unit={g.unit!r}"),
        (not (seq and g.loss_type != "clipped"),
         f"grpo.importance_sampling_level='sequence' (GSPO) clips a sequence ratio: accepted loss_type='clipped'; "
         f"got {g.loss_type!r}"),
        (not (g.loss_type == "cispo" and g.unit != "token_mean"),
         f"grpo.loss_type='cispo' averages over the batch's tokens (MiniMax-M1, TRL's cispo): accepted "
         f"unit='token_mean'; got unit={g.unit!r}"),
        (not (g.loss_type == "cispo" and g.epsilon_high < 1),
         f"grpo.loss_type='cispo' reads epsilon_high as ε_max, the cap on the weight ρ: it must be >= 1 (below 1 even "
         f"an on-policy token, ρ = 1, is scaled down; TRL recommends 5.0); got {g.epsilon_high}"),
        (isinstance(g.soft_punish_cache, int) and 0 <= g.soft_punish_cache <= g.max_completion_length - answer,
         f"grpo.soft_punish_cache must be an integer in [0, max_completion_length − (digits + 2)] = "
         f"[0, {g.max_completion_length - answer}]: the penalty starts at max_completion_length − soft_punish_cache "
         f"tokens and must spare the longest right answer plus <eos> ({answer} tokens); got {g.soft_punish_cache!r}"),
    ]


def check_staleness(g: GRPOConfig) -> None:
    """``max_staleness`` is an integer in [0, ``MAX_STALENESS``]; the behaviour correction's mode and bounds are TRL's.

    K is bounded because the rollout worker's ring holds K + 1 copies of the weights in shared
    memory (K = 10⁶ would ask for about 57 GB on the ``test`` config), and rollouts many steps old
    are mostly masked by the behaviour correction anyway.
    """
    K = g.max_staleness
    _numbers("grpo", g, {
        "max_staleness": {"integer": True, "low": 0, "high": MAX_STALENESS,
                          "why": " (0: synchronous; K: rollouts sampled with the weights of K optimiser steps ago; "
                                 "the worker keeps K + 1 copies of the weights in shared memory)"},
        "worker_timeout": {**POSITIVE, "why": " (seconds the trainer waits for the rollout worker's next batch)"},
        "sampler_temperature": {**POSITIVE, "none": "sample at grpo.temperature"},
        "adaptive_length_quantile": {"low": 0, "high": 1, "low_open": True, "none": "off",
                                     "why": " (the quantile of the last step's completion lengths)"},
        "adaptive_length_margin": {**STEPS, "why": " (tokens above the quantile)"}})
    if not isinstance(g.vllm_importance_sampling_correction, bool):
        raise ValueError(f"grpo.vllm_importance_sampling_correction must be True or False; got "
                         f"{g.vllm_importance_sampling_correction!r}")
    check_bounds(g.vllm_importance_sampling_mode, g.vllm_importance_sampling_clip_min,
                 g.vllm_importance_sampling_clip_max, prefix="grpo.")
    q = g.adaptive_length_quantile
    if q is not None and K > 0:
        raise ValueError(f"grpo.adaptive_length_quantile needs the synchronous loop (grpo.max_staleness=0): the "
                         f"rollout worker samples ahead of the lengths it would read; got max_staleness={K}")


def validate(cfg: RunConfig) -> RunConfig:
    """Raise ValueError naming the first bad option (called before any training starts).

    Each trainer section checks itself (``check()``, run again here: command-line overrides are set
    after construction); what is left here are the rules of the run as a whole: the task and the
    model, the run-wide options, and the lengths that tie the task and the model to every section.
    """
    for section in cfg.sections.values():
        section.check()
    g, t, m = cfg.grpo, cfg.task, cfg.model
    _numbers("task", t, {"digits": {**COUNT, "high": SIZES["task"]["digits"], "why": " (10^digits fits in int64)"},
                         "n_demos": {**COUNT, "high": SIZES["task"]["n_demos"], "why": SIZE},
                         "n_heldout": {**COUNT, "high": SIZES["task"]["n_heldout"],
                                       "why": " (accuracy needs held-out prompts)"},
                         "teacher_error_rate": {"low": 0, "high": 1}, "seed": {"integer": True},
                         "tool_demos": {**STEPS, "why": " (carry demonstrations the teacher writes with the tool, "
                                                        "with task.env)"}})
    _numbers("model", m, {name: {**COUNT, "high": high, "why": SIZE} for name, high in SIZES["model"].items()})
    _numbers("", cfg, {"max_grad_norm": {**POSITIVE, "why": " (0 would zero every update)"},
                       "checkpoint_every": COUNT})
    _refuse([(m.n_embd % m.n_head == 0,
              f"model.n_embd ({m.n_embd}) must be a multiple of model.n_head ({m.n_head})")])
    answer = t.answer_length  # the longest answer plus <eos>
    sampled = {label: s.max_completion_length for label, s in cfg.sections.items()
               if hasattr(s, "max_completion_length")}
    short = [f"{label}.max_completion_length ({length}) must leave room for the longest answer plus <eos>: at least "
             f"task.digits + 2 = {answer} tokens (raise {label}.max_completion_length or lower task.digits)"
             for label, length in sampled.items() if length < answer]
    if short:  # every section too short, in one message
        raise ValueError("; ".join(short))
    rows = {label: s.input_length(t.prompt_length) if hasattr(s, "input_length") else t.prompt_length + length
            for label, s in cfg.sections.items() for length in [sampled.get(label)] if length is not None}
    for label, longest in rows.items():  # a section with input_length() reads more than prompt + completion
        if longest > m.n_positions:
            what = "input" if hasattr(cfg.sections[label], "input_length") else "prompt + completion"
            raise ValueError(f"model.n_positions ({m.n_positions}) is shorter than {label}'s {what} ({longest} tokens "
                             f"with task.digits={t.digits}): raise model.n_positions, or lower task.digits or "
                             f"{label}.max_completion_length")
    if len(str(t.n_demos + t.n_heldout - 1)) > 2 * t.digits:  # more than 10^(2·digits) prompts, without the power
        raise ValueError(f"task.n_demos + task.n_heldout ({t.n_demos} + {t.n_heldout}) exceeds the "
                         f"{10 ** (2 * t.digits)} distinct {t.digits}-digit prompts")
    _refuse(_objective_checks(g, t))  # GSPO, CISPO and overlong shaping: the shaping's window depends on the task
    from course_lib.tinygpt.environments import EpisodeLimits, check_env_name, check_tool_call

    check_tool_call(t.tool_call)
    if t.env:
        check_env_name(t.env)
        if g.reward != "strict" or g.soft_punish_cache:
            raise ValueError(f"with task.env {t.env!r} the environment's verifier is the reward; grpo.reward must be "
                             f"'strict' and grpo.soft_punish_cache 0 (got {g.reward!r}, {g.soft_punish_cache})")
        if g.max_staleness:
            raise ValueError(f"task.env {t.env!r} runs synchronously: grpo.max_staleness must be 0 "
                             f"(got {g.max_staleness})")
        if t.prompt_length + EpisodeLimits().max_tokens > m.n_positions:
            raise ValueError(f"model.n_positions ({m.n_positions}) is shorter than prompt + episode "
                             f"({t.prompt_length + EpisodeLimits().max_tokens} tokens)")
    return cfg


def set_option(cfg: RunConfig, section: str, name: str, value) -> RunConfig:
    """Set option ``section.name`` (``section`` ``"run"``: a run-wide option) in ``cfg``; checked by ``validate``."""
    setattr(cfg if section == "run" else getattr(cfg, section), name, value)
    return cfg


def _plain(section) -> dict:
    """A section as JSON's data (a tuple as a list: what a saved run reads back)."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in dataclasses.asdict(section).items()}


def to_dict(cfg: RunConfig) -> dict:
    """The config as plain data: ``name``, ``task``, ``model``, one entry per trainer section, the run-wide options."""
    return {"name": cfg.name, "task": _plain(cfg.task), "model": _plain(cfg.model),
            **{k: _plain(v) for k, v in cfg.sections.items()},
            "max_grad_norm": cfg.max_grad_norm, "checkpoint_every": cfg.checkpoint_every}


def from_dict(data: dict) -> RunConfig:
    """``to_dict``'s inverse; a section a saved run lacks (a trainer added since) takes its defaults."""
    return RunConfig(name=data["name"], task=TaskConfig(**data["task"]), model=ModelConfig(**data["model"]),
                     **{k: cls(**data.get(k, {})) for k, cls in trainer_sections().items()},
                     max_grad_norm=data["max_grad_norm"], checkpoint_every=data["checkpoint_every"])
