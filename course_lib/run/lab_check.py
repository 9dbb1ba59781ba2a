"""The coding lab's training check: the tiny GPT trained with a student's own loss functions.

The lab (``exercises/lab14``) asks for the pieces of a training loop: masked completion
log-probs, the DPO loss on a batch, group advantages, and the clipped, aggregated policy loss.
This module trains the tiny GPT *with those functions* — a short DPO run and a short GRPO run,
each from the same SFT policy — and judges each run on two things:

1. **the run computed the objective it was configured with**: at every step the student's loss
   and its gradient with respect to the logits (and, for GRPO, the advantages) agree with the
   same quantities computed by ``course_lib``'s own functions on the very same logits;
2. **the run helped**: greedy held-out exact-match accuracy rose by at least ``min_gain``.

Why both. A sign flip makes accuracy fall, but on this task *every* averaging unit trains (the
answers are 3–4 tokens long), and a log-prob that forgets the mask can still train through a
correctly masked average; accuracy alone would pass such runs. The run is only the student's
if it optimised what the configuration names — so a wrong unit or a missing mask fails (1),
and an objective that is right on paper but does not train fails (2).

Trust boundary. The model, the data, sampling, rewards, held-out evaluation and both verdicts
live in the caller's process. The student's functions are reached through one narrow door,
``remote(op, payload) -> dict``, that carries plain data only: numbers, strings and arrays
encoded by ``course_lib.run.kernel_codec``, the grading probe's codec (``pack``/``unpack`` put tensors
through it). What comes back is checked (keys, kinds, shapes, finiteness) before it is used;
nothing the student wrote is ever called here. ``KERNEL_ADAPTER`` is the code that runs on the
student's side of the door (in their kernel at grading time, or beside their functions for a
self-check): the codec's own source, run in a namespace of its own, and a call of the four lab
functions by name.

Simplifications, said out loud:
- One fixed setting (``LabConfig``): 2-digit addition with the flawed teacher of
  ``course_lib.tinygpt.task``, the ``cpu`` model, a short SFT baseline that is trained once and cached.
- Nothing here is a second copy of the library: the SFT baseline is ``sft.train_sft``; the DPO
  pairs are ``dpo.build_preference_pairs`` (one accepted and one rejected answer per prompt,
  sampled once from it) with ``dpo.reference_logprobs`` cached; GRPO's rollouts are
  ``rollout.collect_rollouts``; both runs step through ``trainer.train_loop`` and are judged by
  ``evaluation.evaluate``. Only the update (loss and gradient) comes from the student's side.
- GRPO: synchronous, strict checker, zero-variance groups kept with zero advantage, no KL
  term (β = 0), μ = 2 inner epochs so that the ratio and the clip are exercised.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
import time
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from types import SimpleNamespace

import torch

from course_lib.formulas.advantages import compute_advantages
from course_lib.formulas.policy_loss import aggregate, clipped_surrogate
from course_lib.formulas.preference import dpo_terms
from course_lib.run import kernel_codec
from course_lib.tinygpt.evaluation import evaluate
from course_lib.tinygpt.model import NEVER_LOGIT, ModelConfig, build_model, completion_logprobs, position_ids
from course_lib.tinygpt.rewards import resolve_reward
from course_lib.tinygpt.rollout import collect_rollouts, sequence_logprobs
from course_lib.tinygpt.runtime import clip_gradients, full_precision, make_optimizer, set_threads
from course_lib.tinygpt.task import AdditionTask, TaskConfig
from course_lib.trainers.configs import DPOConfig, GRPOConfig, SFTConfig
from course_lib.trainers.dpo import build_preference_pairs, reference_logprobs
from course_lib.trainers.sft import train_sft
from course_lib.trainers.trainer import TrainContext, train_loop

SCALE_OF_ADVANTAGE = {"grpo": "group", "dr_grpo": "none"}  # GRPOConfig.advantage → the lab's ``scale`` argument


def _sft() -> SFTConfig:  # the SFT baseline (trained once, cached)
    return SFTConfig(steps=600, batch_size=64, learning_rate=1e-3)


def _dpo() -> DPOConfig:  # DPO on offline pairs (3e-4 lowers held-out accuracy on the trainer's held-out draw)
    return DPOConfig(steps=30, batch_size=32, learning_rate=1e-4, beta=1.0, pair_prompts=1024, samples_per_prompt=8)


def _grpo() -> GRPOConfig:  # GRPO, online: strict checker, groups kept, β = 0
    return GRPOConfig(steps=16, batch_prompts=16, num_generations=8, learning_rate=3e-4, num_iterations=2,
                      epsilon=0.2, epsilon_high=0.28, unit="token_mean", advantage="grpo", zero_variance="keep",
                      reward="strict")


@dataclass(frozen=True)
class LabConfig:
    """The lab's one setting: the library's own SFT, DPO and GRPO sections with the lab's values (every other
    option the library's default), and the verdicts' tolerances.

    ``max_completion_length`` is the one length of DPO's pairs, GRPO's rollouts and the held-out
    evaluation (it overrides the sections'); the SFT baseline evaluates once, at its end. The
    GRPO section's ``advantage`` (``grpo`` or ``dr_grpo``) is what the lab calls ``scale``
    (``"group"`` or ``"none"``).
    """

    seed: int = 0
    threads: int = 1
    max_completion_length: int = 6
    sft: SFTConfig = field(default_factory=_sft)
    dpo: DPOConfig = field(default_factory=_dpo)
    grpo: GRPOConfig = field(default_factory=_grpo)
    # verdicts
    # Held-out accuracy must rise by at least this much. Verdict (1) already makes a passing run the
    # library's own run, so this only asks that it trained: set well below honest runs' gains
    # (DPO +5.4 to +13.4 points over eight SFT/batch draws), not at their edge.
    min_gain: float = 0.02
    rtol: float = 1e-3  # relative agreement of loss and gradient with course_lib's
    max_grad_norm: float = 1.0

    def __post_init__(self):
        if self.grpo.advantage not in SCALE_OF_ADVANTAGE:
            raise ValueError(f"grpo.advantage must be one of {tuple(SCALE_OF_ADVANTAGE)} (the lab's scale "
                             f"'group' or 'none'); got {self.grpo.advantage!r}")
        length = {"max_completion_length": self.max_completion_length}
        object.__setattr__(self, "sft", dataclasses.replace(self.sft, eval_every=max(self.sft.steps, 1)))
        object.__setattr__(self, "dpo", dataclasses.replace(self.dpo, **length))
        object.__setattr__(self, "grpo", dataclasses.replace(self.grpo, **length))

    @property
    def scale(self) -> str:
        """The GRPO section's advantage in the lab's words: ``"group"`` (GRPO's std) or ``"none"`` (Dr. GRPO)."""
        return SCALE_OF_ADVANTAGE[self.grpo.advantage]


OPS = ("dpo", "grpo")


# ---- plain data across the trust boundary ----------------------------------------------------


def pack(t) -> dict:
    """A tensor as the codec's plain data: an ``array`` of kind "f" (float32 values) or "i" (int64)."""
    a = torch.as_tensor(t).detach().cpu()
    a = a.to(torch.float32 if a.is_floating_point() else torch.int64).contiguous().numpy()
    return kernel_codec.encode(a)


def unpack(obj, name: str, *, shape: tuple | None = None, dtype: str = "float32") -> torch.Tensor:
    """The tensor behind ``pack``'s output (float32 or int64), refusing anything else (ValueError naming
    ``name``: ``kernel_codec.decode_array``)."""
    kind = {"float32": "f", "int64": "i"}[dtype]
    out = torch.from_numpy(kernel_codec.decode_array(obj, name, kind, shape))
    return out.to(torch.float32) if kind == "f" else out


def plain_float(value, name: str) -> float:
    if type(value) not in (int, float) or not math.isfinite(value):
        raise ValueError(f"{name} must be a finite number; got {type(value).__name__}")
    return float(value)


# The code on the student's side of the door. It reads a JSON request (arrays decoded by the codec,
# whose source it carries), calls the lab functions by name, differentiates the loss with respect to
# the logits and answers with JSON. Self-contained.
KERNEL_ADAPTER = r'''
def _lab_call(_request_json):
    import builtins as _builtins
    import json as _json

    import torch as _torch

    _codec = {"__builtins__": _builtins, "__name__": "__course_codec__"}
    _builtins.exec(CODEC_SOURCE, _codec)

    def _get(o):
        a = _torch.from_numpy(_codec["decode"](o))
        return a.to(_torch.float32) if a.is_floating_point() else a

    def _put(t):
        return _codec["encode"](_torch.as_tensor(t).detach().to(_torch.float32).contiguous().numpy())

    _req = _json.loads(_request_json)
    _p = _req["payload"]
    _logits = _get(_p["logits"]).requires_grad_(True)
    _ids, _cmask = _get(_p["input_ids"]), _get(_p["completion_mask"])
    _out = {}
    if _req["op"] == "dpo":
        _loss = dpo_batch_loss(_logits, _ids, _cmask, _get(_p["ref_token_logps"]), _p["beta"])
    else:
        _adv = group_advantages(_get(_p["rewards"]), _p["group_size"], scale=_p["scale"])
        _adv = _torch.as_tensor(_adv, dtype=_torch.float32)
        _out["advantages"] = _put(_adv)
        _loss = grpo_loss(_logits, _ids, _cmask, _get(_p["old_token_logps"]), _adv,
                          _p["epsilon_low"], _p["epsilon_high"], _p["unit"], _p["max_length"])
    _loss = _torch.as_tensor(_loss)
    if _loss.requires_grad:
        _loss.backward()
    _grad = _logits.grad if _logits.grad is not None else _torch.zeros_like(_logits)
    _out["loss"] = float(_loss.detach())
    _out["grad"] = _put(_grad)
    return _json.dumps(_out)
'''.replace("CODEC_SOURCE", repr(Path(kernel_codec.__file__).read_text()))


def in_process_remote(namespace: dict):
    """A door to functions defined in ``namespace`` (a notebook's ``globals()``), for self-checks.

    Requests and answers still travel as JSON text, exactly as they would to a kernel; an
    exception in the student's code becomes ``{"error": ...}``.
    """
    scope = dict(namespace)
    exec(KERNEL_ADAPTER, scope)  # noqa: S102 - the adapter above, not student code
    call = scope["_lab_call"]

    def remote(op: str, payload: dict) -> dict:
        try:
            return json.loads(call(json.dumps({"op": op, "payload": payload})))
        except Exception as err:  # noqa: BLE001 - the student's error is the verdict's reason
            return {"error": f"{type(err).__name__}: {err}"}

    return remote


# ---- the fixed setting: task, SFT baseline, DPO pairs -----------------------------------------
@dataclass
class LabSetup:
    config: LabConfig
    task: AdditionTask
    sft_state: dict
    baseline_accuracy: float
    pairs: dict  # dpo.build_preference_pairs's chosen_*/rejected_* rows, n_pairs, ref_*_token_logps (start=1)


# The recipe's version, part of the cache key: a cached setup from an older recipe is not reused.
RECIPE = 2  # 2: the library's SFT loop, pair builder and reference log-probs


def _model(task: AdditionTask) -> torch.nn.Module:
    return build_model(ModelConfig(), task.tokenizer)


def heldout_accuracy(model, task: AdditionTask, max_completion_length: int) -> float:
    """Greedy exact match (strict checker) on the task's held-out prompts (``evaluation.evaluate``)."""
    return evaluate(model, task, max_completion_length=max_completion_length)["accuracy"]


def _sft(task: AdditionTask, cfg: LabConfig) -> dict:
    """The SFT baseline, trained by the library's one SFT loop (``sft.train_sft``)."""
    torch.manual_seed(cfg.seed)
    model = _model(task)
    train_sft(model, task, cfg.sft,
              TrainContext(max_grad_norm=cfg.max_grad_norm, show_progress=False, threads=cfg.threads), seed=cfg.seed,
              eval_at_end=False)
    return model.state_dict()


def _pairs(model, task: AdditionTask, cfg: LabConfig) -> dict:
    """One (accepted, rejected) pair per prompt where the SFT policy produced both (``dpo``'s builder),
    with the reference's per-token log-probs aligned as the logits sent to the student (``start=1``)."""
    gen = torch.Generator().manual_seed(cfg.seed + 1)
    torch.manual_seed(cfg.seed + 1)
    out = build_preference_pairs(model, task, cfg.dpo, generator=gen, chunk=cfg.dpo.pair_prompts)
    out.update(reference_logprobs(model, out, prompt_length=1))
    return out


_PREPARED: dict[str, LabSetup] = {}  # this process's setups, by config


def prepare(config: LabConfig | None = None, cache_dir: str | Path | None = None) -> LabSetup:
    """The SFT baseline and the DPO pairs: from this process's memory, from ``cache_dir`` when
    already computed there, or trained now (about a minute on a laptop CPU)."""
    cfg = config or LabConfig()
    set_threads(cfg.threads)
    task = AdditionTask(TaskConfig())
    recipe = {**dataclasses.asdict(cfg), "recipe": RECIPE}
    key = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]
    if key in _PREPARED:
        return _PREPARED[key]
    path = Path(cache_dir) / f"lab-setup-{key}.pt" if cache_dir else None
    if path is not None and path.is_file():
        saved = torch.load(path, weights_only=True)
        _PREPARED[key] = LabSetup(cfg, task, saved["sft_state"], saved["baseline_accuracy"], saved["pairs"])
        return _PREPARED[key]
    state = _sft(task, cfg)
    model = _model(task)
    model.load_state_dict(state)
    model.eval()
    baseline = heldout_accuracy(model, task, cfg.max_completion_length)
    pairs = _pairs(model, task, cfg)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(path.name + ".tmp")
        torch.save({"sft_state": state, "baseline_accuracy": baseline, "pairs": pairs}, tmp)
        tmp.replace(path)
    _PREPARED[key] = LabSetup(cfg, task, state, baseline, pairs)
    return _PREPARED[key]


# ---- what course_lib says the same logits should give ----------------------------------------
class _GivenLogits:
    """Stands in for the model so that ``completion_logprobs`` reads logits we already hold.

    ``completion_logprobs`` runs ``model.transformer`` and then ``model.lm_head`` on the
    positions it scores: here the "hidden states" are the logits and the head is the identity.
    """

    def __init__(self, logits: torch.Tensor, config):
        self.logits, self.config = logits, config

    def transformer(self, **_inputs):
        return SimpleNamespace(last_hidden_state=self.logits)

    @staticmethod
    def lm_head(hidden: torch.Tensor) -> torch.Tensor:
        return hidden


def _reference_logps(logits, ids, cmask, model_config):
    return completion_logprobs(_GivenLogits(logits, model_config), ids, torch.ones_like(ids), cmask)


def reference_dpo_loss(logits, ids, cmask, ref_token_logps, beta: float, model_config) -> torch.Tensor:
    logps, _ = _reference_logps(logits, ids, cmask, model_config)
    seq, ref = logps.sum(-1), ref_token_logps.sum(-1)
    n = seq.shape[0] // 2
    return dpo_terms(seq[:n], seq[n:], ref[:n], ref[n:], beta=beta).loss.mean()


def reference_advantages(rewards: torch.Tensor, group_size: int, advantage: str) -> torch.Tensor:
    """The configured baseline's advantages (``advantages.compute_advantages``: zero-variance groups give zeros)."""
    return compute_advantages(rewards.view(-1, group_size), advantage).flatten()


def reference_grpo_loss(logits, ids, cmask, old_token_logps, advantages, cfg: LabConfig, model_config):
    logps, mask = _reference_logps(logits, ids, cmask, model_config)
    ratio = torch.exp(logps - old_token_logps)
    objective = clipped_surrogate(ratio, advantages, eps_low=cfg.grpo.epsilon, eps_high=cfg.grpo.epsilon_high)
    return -aggregate(objective, mask, unit=cfg.grpo.unit, max_length=cfg.max_completion_length)


# ---- one step through the door ---------------------------------------------------------------
class Deviation(Exception):
    """The student's side answered something other than what the configured objective gives."""


def _suppressed(logits: torch.Tensor, model_config) -> torch.Tensor:
    never = torch.zeros(logits.shape[-1], dtype=torch.bool)
    never[[model_config.pad_token_id, model_config.bos_token_id]] = True
    return logits.masked_fill(never, NEVER_LOGIT)


def _agree(student: torch.Tensor, reference: torch.Tensor, rtol: float) -> bool:
    scale = float(reference.norm()) + 1e-6
    return float((student - reference).norm()) <= rtol * scale


def _exchange(remote, op: str, payload: dict, logits: torch.Tensor, reference_loss, cfg: LabConfig,
              reference_adv: torch.Tensor | None = None) -> float:
    """Send one request, validate the answer, compare it, backpropagate the student's gradient."""
    answer = remote(op, payload)
    if not isinstance(answer, dict):
        raise Deviation("the answer was not a JSON object")
    if "error" in answer:
        raise Deviation(f"your code raised {str(answer['error'])[:300]}")
    try:
        loss = plain_float(answer.get("loss"), "loss")
        grad = unpack(answer.get("grad"), "the gradient", shape=tuple(logits.shape))
        adv = None
        if reference_adv is not None:
            adv = unpack(answer.get("advantages"), "advantages", shape=tuple(reference_adv.shape))
    except ValueError as err:
        raise Deviation(str(err)) from err
    if adv is not None and not _agree(adv, reference_adv, cfg.rtol):
        raise Deviation("group_advantages gave other advantages than the configured baseline")
    sent = logits.detach().requires_grad_(True)
    with full_precision(sent.device):
        ref_loss = reference_loss(sent)
        (ref_grad,) = torch.autograd.grad(ref_loss, sent)
    ref_loss = float(ref_loss.detach())
    if abs(loss - ref_loss) > cfg.rtol * (abs(ref_loss) + 1e-3):
        raise Deviation(f"the loss was {loss:.6g} where the configured objective gives {ref_loss:.6g}")
    if not _agree(grad, ref_grad, cfg.rtol):
        cos = float(torch.nn.functional.cosine_similarity(grad.flatten(), ref_grad.flatten(), dim=0))
        raise Deviation(f"the gradient differs from the configured objective's (cosine {cos:+.3f})")
    logits.backward(grad)
    return loss


def _verdict(kind, before, after, steps, seconds, cfg, deviation=None) -> dict:
    gain = None if after is None else after - before
    passed = deviation is None and gain is not None and gain >= cfg.min_gain
    if deviation is not None:
        reason = f"step {steps + 1}: {deviation}"
    elif not passed:
        reason = f"held-out accuracy {before:.1%} → {after:.1%}: it must rise by at least {cfg.min_gain:.0%}"
    else:
        reason = f"held-out accuracy {before:.1%} → {after:.1%}"
    return {"run": kind, "passed": passed, "reason": reason, "accuracy_before": before,
            "accuracy_after": after, "steps": steps, "seconds": round(seconds, 2)}


def _policy(setup: LabSetup) -> torch.nn.Module:
    set_threads(setup.config.threads)
    model = _model(setup.task)
    model.load_state_dict(setup.sft_state)
    return model


def _forward(model, ids, attn) -> torch.Tensor:
    """The logits the checks compare, in float32 with TF32 off (``runtime.full_precision``)."""
    with full_precision(next(model.parameters()).device):
        return model(input_ids=ids, attention_mask=attn, position_ids=position_ids(attn), use_cache=False).logits


def _train(kind: str, setup: LabSetup, model, total: int, update) -> dict:
    """Run ``update(step)`` (one optimiser step through the door) in the library's loop
    (``trainer.train_loop``), then evaluate held out (``evaluation.evaluate``) and decide."""
    cfg = setup.config
    start = time.perf_counter()

    def step_fn(step: int) -> dict:
        try:
            return {"loss": update(step)}
        except Deviation as dev:
            dev.step = step
            raise

    try:
        train_loop(f"lab {kind}", step_fn, TrainContext(show_progress=False), total=total, state_dict=dict)
    except Deviation as dev:
        return _verdict(kind, setup.baseline_accuracy, None, dev.step, time.perf_counter() - start, cfg, dev)
    model.eval()
    after = heldout_accuracy(model, setup.task, cfg.max_completion_length)
    return _verdict(kind, setup.baseline_accuracy, after, total, time.perf_counter() - start, cfg)


def _dpo_payload(logits, ids, cmask, ref, beta: float) -> dict:
    return {"logits": pack(logits), "input_ids": pack(ids), "completion_mask": pack(cmask),
            "ref_token_logps": pack(ref), "beta": beta}


def _grpo_payload(logits, ids, cmask, old, rewards, cfg: LabConfig) -> dict:
    return {"logits": pack(logits), "input_ids": pack(ids), "completion_mask": pack(cmask),
            "old_token_logps": pack(old), "rewards": pack(rewards.float()), "group_size": cfg.grpo.num_generations,
            "scale": cfg.scale, "epsilon_low": cfg.grpo.epsilon, "epsilon_high": cfg.grpo.epsilon_high,
            "unit": cfg.grpo.unit, "max_length": cfg.max_completion_length}


def dpo_run(remote, setup: LabSetup) -> dict:
    """Offline DPO on the cached pairs, every loss and gradient from the student's side."""
    cfg = setup.config
    model = _policy(setup)
    opt = make_optimizer(model, cfg.dpo.learning_rate)
    data, n = setup.pairs, setup.pairs["n_pairs"]
    gen = torch.Generator().manual_seed(cfg.seed + 2)

    def update(step: int) -> float:
        idx = torch.randperm(n, generator=gen)[: cfg.dpo.batch_size]
        ids, attn, cmask, ref = (torch.cat([data[k.format("chosen")][idx], data[k.format("rejected")][idx]])
                                 for k in ("{}_ids", "{}_attention", "{}_completion", "ref_{}_token_logps"))
        model.train()
        logits = _suppressed(_forward(model, ids, attn), model.config)
        opt.zero_grad(set_to_none=True)
        loss = _exchange(remote, "dpo", _dpo_payload(logits, ids, cmask, ref, cfg.dpo.beta), logits, cfg=cfg,
                         reference_loss=partial(reference_dpo_loss, ids=ids, cmask=cmask, ref_token_logps=ref,
                                                beta=cfg.dpo.beta, model_config=model.config))
        clip_gradients(model, cfg.max_grad_norm)
        opt.step()
        return loss

    return _train("dpo", setup, model, cfg.dpo.steps, update)


def grpo_run(remote, setup: LabSetup) -> dict:
    """Online GRPO from the SFT policy, every advantage, loss and gradient from the student's side.

    The rollouts are the library's (``rollout.collect_rollouts`` with the strict checker, every group kept);
    only the update goes through the door."""
    cfg, task = setup.config, setup.task
    model = _policy(setup)
    opt = make_optimizer(model, cfg.grpo.learning_rate)
    gen = torch.Generator().manual_seed(cfg.seed + 3)
    torch.manual_seed(cfg.seed + 3)
    gcfg, reward_fn = cfg.grpo, resolve_reward(cfg.grpo.reward, task)
    G = cfg.grpo.num_generations

    def update(step: int) -> float:
        model.eval()
        batch = collect_rollouts(model, task, gcfg, gen, reward_fn)["batch"]  # every group kept: never empty
        ids, attn, cmask = batch["input_ids"], batch["attention_mask"], batch["completion_mask"]
        rewards = batch["rewards"].flatten()
        old = sequence_logprobs(model, batch, prompt_length=1)
        ref_adv = reference_advantages(rewards, G, cfg.grpo.advantage)
        model.train()
        losses = []
        for _ in range(cfg.grpo.num_iterations):
            logits = _suppressed(_forward(model, ids, attn), model.config)
            opt.zero_grad(set_to_none=True)
            losses.append(_exchange(
                remote, "grpo", _grpo_payload(logits, ids, cmask, old, rewards, cfg), logits, cfg=cfg,
                reference_adv=ref_adv, reference_loss=partial(reference_grpo_loss, ids=ids, cmask=cmask,
                                                              old_token_logps=old, advantages=ref_adv, cfg=cfg,
                                                              model_config=model.config)))
            clip_gradients(model, cfg.max_grad_norm)
            opt.step()
        return sum(losses) / len(losses)

    return _train("grpo", setup, model, cfg.grpo.steps, update)


RUNS = {"dpo": dpo_run, "grpo": grpo_run}


def one_step(run: str, remote, config: LabConfig | None = None, seed: int = 0) -> str | None:
    """One step of ``run`` on an untrained tiny GPT (about a second): ``None`` when the student's
    side computed the configured objective, else the reason. No SFT, no accuracy: a quick check.

    DPO: pairs of a correct answer and the flawed teacher's answer on carry prompts, against a
    perturbed reference. GRPO: responses of different lengths with random 0/1 rewards (one group
    without variance) and perturbed old log-probs, so that advantages, the ratio, both clip edges
    and the averaging unit all matter.
    """
    if run not in RUNS:
        raise ValueError(f"run must be one of {', '.join(map(repr, RUNS))}; got {run!r}")
    cfg = config or LabConfig()
    set_threads(cfg.threads)
    task = AdditionTask(TaskConfig())
    torch.manual_seed(seed)
    model = _model(task)
    gen = torch.Generator().manual_seed(seed)
    try:
        if run == "dpo":
            carry = [p for p in task.sample_pairs(64, gen) if task.ones_carry(*p)][:8]
            right = task.encode_pairs(carry, [str(a + b) for a, b in carry])
            wrong = task.encode_pairs(carry, [task.flawed_teacher(a, b) for a, b in carry])
            ids, attn, cmask = (torch.cat([x, y]) for x, y in zip(right, wrong))
            with torch.no_grad():
                noise = 0.5 * torch.randn(ids.shape[0], 1, generator=gen)
                ref = completion_logprobs(model, ids, attn, cmask)[0] + noise
                ref = ref * cmask[:, 1:]
            logits = _suppressed(_forward(model, ids, attn), model.config)
            _exchange(remote, "dpo", _dpo_payload(logits, ids, cmask, ref, cfg.dpo.beta), logits, cfg=cfg,
                      reference_loss=lambda x: reference_dpo_loss(x, ids, cmask, ref, cfg.dpo.beta, model.config))
        else:
            G = cfg.grpo.num_generations
            prompts = [p for p in task.sample_pairs(4, gen) for _ in range(G)]
            lengths = torch.randint(1, task.answer_length, (len(prompts),), generator=gen).tolist()
            answers = ["".join(str(d) for d in torch.randint(0, 10, (k,), generator=gen).tolist()) for k in lengths]
            ids, attn, cmask = task.encode_pairs(prompts, answers)  # responses of 2 to 4 tokens
            rewards = (torch.rand(len(prompts), generator=gen) < 0.5).float()
            rewards[:G] = 1.0  # one zero-variance group
            with torch.no_grad():
                old = completion_logprobs(model, ids, attn, cmask)[0]
                old = (old + 0.3 * torch.randn(old.shape, generator=gen)) * cmask[:, 1:]
            ref_adv = reference_advantages(rewards, G, cfg.grpo.advantage)
            logits = _suppressed(_forward(model, ids, attn), model.config)
            _exchange(remote, "grpo", _grpo_payload(logits, ids, cmask, old, rewards, cfg), logits, cfg=cfg,
                      reference_adv=ref_adv,
                      reference_loss=lambda x: reference_grpo_loss(x, ids, cmask, old, ref_adv, cfg, model.config))
    except Deviation as dev:
        return str(dev)
    return None


def self_check(run: str, namespace: dict, config: LabConfig | None = None, cache_dir=None) -> dict:
    """Train the tiny GPT with the lab functions in ``namespace`` and print the verdict.

    For students: ``self_check("dpo", globals())`` in the lab notebook (tens of seconds on a
    laptop CPU; the SFT baseline is trained first when ``cache_dir`` holds none).
    """
    if run not in RUNS:
        raise ValueError(f"run must be one of {', '.join(map(repr, RUNS))}; got {run!r}")
    setup = prepare(config, cache_dir)
    verdict = RUNS[run](in_process_remote(namespace), setup)
    print(f"{run}: {'passed' if verdict['passed'] else 'FAILED'} — {verdict['reason']} "
          f"({verdict['seconds']:.0f} s)")
    return verdict


__all__ = ["LabConfig", "LabSetup", "KERNEL_ADAPTER", "pack", "unpack", "prepare", "dpo_run", "grpo_run",
           "one_step", "in_process_remote", "self_check", "heldout_accuracy"]
