"""Recipes, not algorithms: post-training as an ordered list of stages (lecture §16, §15, §12).

DeepSeek-R1 (Guo et al. 2025, https://arxiv.org/abs/2501.12948, ``sources.SOURCES["deepseek_r1"]``)
is a recipe: a cold start of a few thousand long demonstrations (SFT), reasoning RL with
verifiable rewards (GRPO), rejection sampling on the RL policy's verified outputs followed by
another SFT, then RL again; R1-Zero is the same RL with no SFT before it. Each piece exists here
already (``train_sft``, GRPO, RFT, DPO, PPO); a recipe chains them, each stage starting from the
previous stage's policy:

- ``r1``       cold-start SFT on a tenth of the demonstrations, for a quarter of the SFT steps →
               GRPO → RFT on the RL policy's own checker-approved samples (R1's stage 3, and the
               "porous boundary": an SFT loss on data the RL policy wrote) → GRPO again;
- ``r1-zero``  GRPO from the random initialisation (from a weak start: ``sft:...,grpo``, or from a base
               that knows digits but not the task: ``pretrain:steps=300,grpo``).

A ``pretrain`` stage is next-token training on plain digit text (``digit_text``: random digit
strings of random length, each ended by ``<eos>``; no ``+``, no ``=``, no sums), through the SFT
loop with its ``sft`` options: a "base model" that knows what digits are and that text ends, and
has never seen the task. ``run_recipe(..., init=weights)`` starts the first stage from given
weights (e.g. the cached SFT start of ``course_lib.run.starts``) instead of the random initialisation.

``run_recipe(stages, cfg, out)`` writes, per stage, ``out/stage_N_kind/`` with ``policy.pt``,
``metrics.jsonl`` (the trainer's rows), ``summary.json`` and ``passport.json``, and the recipe's
``recipe.json`` (its stages, options and every finished stage's numbers). Per stage: held-out
greedy accuracy (pass@1) and, from ``k`` samples per held-out prompt, sampled pass@1 and pass@k,
the completion length and the entropy (``evaluation.sampled_eval``); the sequence KL to the
stage's start and to the recipe's first policy (``evaluation.reference_kl``, ``kl_samples`` completions per
prompt; at stage 1 the start is the first policy, so it is measured once); the rejection-sampling
acceptance rate of an RFT stage and the zero-variance share of a GRPO stage (their trainers'
rows); CPU seconds.

Seeds: the model is initialised after ``torch.manual_seed(seed)`` and the first stage draws its
data from ``torch.Generator().manual_seed(seed)`` (as ``pipeline.run``); stage N ≥ 2 re-seeds
torch and its data generator with ``seed + N - 1``. So the stages ``sft,grpo`` are exactly
``train grpo``, and a recipe resumed at a stage boundary is exactly the uninterrupted one on a CPU.

Simplifications, said out loud:
- R1's stage 3 samples ~800k outputs once, filters them (correctness, readability, language
  mixing) and fine-tunes the *base* model on them with other SFT data; here RFT is online (fresh
  samples every step, ``course_lib.trainers.rft``) and continues from the RL policy. R1's stage 4 adds
  helpfulness and harmlessness rewards; here the same checker. The cold start is the course's own
  flawed teacher's demonstrations, only fewer and shorter-trained, not long chains of thought.
- Pretraining is tiny and shaped like the demonstrations: documents as wide as a demonstration, one
  fresh document per example (``steps × batch_size`` of them, drawn with the stage's generator),
  and the loss on the positions where an answer sits (from ``task.prompt_length`` on), because the
  SFT loop scores only those; the earlier positions are context. A real base model reads trillions
  of tokens of every kind; this one knows only digit strings and their end.
- Resumable at a stage boundary only: a stage stopped midway (Ctrl-C) is rerun from its start.
- A stage's options are the config's plus that stage's overrides; the model's shape and the
  held-out prompts are the recipe's (they cannot change between stages). An RFT stage reads the
  ``grpo`` section, as ``train_rft`` does.
"""

from __future__ import annotations

import copy
import dataclasses
import json
import shutil
import time
from pathlib import Path

import torch

from course_lib._validate import number
from course_lib.lesson.sources import cite
from course_lib.run.passport import format_passport, passport
from course_lib.run.pipeline import build_policy
from course_lib.tinygpt.evaluation import evaluate, reference_kl, sampled_eval
from course_lib.tinygpt.model import build_model, n_params
from course_lib.tinygpt.runtime import (
    DEFAULT_THREADS,
    Interrupted,
    MetricsLog,
    StepFailed,
    load_checkpoint,
    resume_command,
    save_checkpoint,
    set_threads,
)
from course_lib.trainers import configs
from course_lib.trainers.sft import sft_from_context
from course_lib.trainers.trainer import (
    StageContext,
    StageResult,
    StageStopped,
    TrainContext,
    register_stage,
    stage_entry,
    stages,
    trainers,
)


def stage_kinds() -> tuple[str, ...]:
    """The kinds a recipe's stage can be: ``pretrain``, ``sft``, every registered trainer that can continue a
    policy (``register(recipe_stage=True)``), every other registered stage (``register_stage``: ``rft``)."""
    own = sorted(k for k, e in trainers().items() if e.recipe_stage is True and k != "sft")
    return ("pretrain", "sft", *own, *sorted(k for k in stages() if k != "pretrain"))


def _section(kind: str) -> str:
    """The config section a stage kind reads."""
    return stages()[kind].section if kind in stages() else kind


FIXED = ("model.", "task.digits", "task.n_heldout", "task.seed")  # shared by every stage of a recipe
PASS_K = 8  # samples per held-out prompt for pass@k
KL_SAMPLES = 4  # samples per held-out prompt for the KL measurements


def _r1(cfg: configs.RunConfig) -> list[dict]:
    return [
        {"kind": "sft", "task.n_demos": max(1, cfg.task.n_demos // 10), "steps": max(1, cfg.sft.steps // 4)},
        {"kind": "grpo"},
        {"kind": "rft", "steps": max(1, cfg.grpo.steps // 3)},
        {"kind": "grpo", "steps": max(1, cfg.grpo.steps // 3)},
    ]


RECIPES = {  # name -> (the stages for a config, one line on what it is)
    "r1": (_r1, "DeepSeek-R1: cold-start SFT on few demos -> GRPO -> RFT on the RL policy's verified samples -> GRPO"),
    "r1-zero": (lambda cfg: [{"kind": "grpo"}], "DeepSeek-R1-Zero: GRPO from the random initialisation, no SFT"),
}


# ---- the list of stages ------------------------------------------------------------------------------
def _field_type(section: str, name: str):
    owner = configs.RunConfig if section == "run" else configs.trainer_sections().get(section)
    if owner is None:  # task, model
        owner = type(getattr(configs.RunConfig(), section))
    fields = {f.name: f.type for f in dataclasses.fields(owner) if f.name != "sections"}
    if name not in fields:
        raise ValueError(f"{section} has no option {name!r}; its options: {', '.join(sorted(fields))}")
    typ = fields[name] if isinstance(fields[name], str) else fields[name].__name__  # an annotation, or a class
    return {"int": int, "float": float, "str": str, "bool": bool}.get(typ, str)


def _key(kind: str, key: str) -> tuple[str, str]:
    """``steps`` -> the stage's own section; ``task.n_demos`` -> (task, n_demos); run-level fields as (run, name)."""
    if "." in key:
        section, name = key.split(".", 1)
    elif key in ("max_grad_norm", "checkpoint_every"):
        section, name = "run", key
    else:
        section, name = _section(kind), key
    sections = ("run", "task", "model", *configs.trainer_sections(), "max_grad_norm", "checkpoint_every")
    if section not in sections:
        raise ValueError(f"stage option {key!r}: no config section {section!r}; sections: {', '.join(sections)}")
    if any(f"{section}.{name}".startswith(fixed) for fixed in FIXED):
        raise ValueError(f"stage option {key!r} cannot change between stages (the policy and the held-out prompts are "
                         f"the recipe's: {', '.join(FIXED)}); set it in the config instead")
    _field_type(section, name)
    return section, name


def _parse_value(kind: str, key: str, text):
    if not isinstance(text, str):
        return text
    typ = _field_type(*_key(kind, key))
    if typ is bool:
        if text.lower() not in ("true", "false"):
            raise ValueError(f"stage option {key!r} takes true or false; got {text!r}")
        return text.lower() == "true"
    try:
        return typ(text)
    except ValueError:
        raise ValueError(f"stage option {key!r} takes a {typ.__name__}; got {text!r}") from None


def parse_stages(spec) -> list[dict]:
    """A recipe's stages: a named recipe stays a name; ``"sft:steps=300:task.n_demos=200,grpo"`` or a list of dicts.

    Each stage is ``{"kind": K, option: value, …}``; ``option`` is a field of the stage's own
    config section (``steps``), or ``section.field`` (``task.n_demos``). Unknown kinds and options
    are refused with the accepted ones.
    """
    if isinstance(spec, str):
        if spec in RECIPES:
            return spec
        if spec.lstrip().startswith("["):
            stages = json.loads(spec)
        else:
            stages = []
            for part in spec.split(","):
                kind, *options = part.strip().split(":")
                stage = {"kind": kind}
                for option in options:
                    if "=" not in option:
                        raise ValueError(f"stage option {option!r} of {kind!r} must read key=value")
                    key, value = option.split("=", 1)
                    stage[key.strip()] = value.strip()
                stages.append(stage)
    else:
        stages = [dict(s) for s in spec]
    if not stages:
        raise ValueError("a recipe needs at least one stage")
    out = []
    for stage in stages:
        kind = stage.get("kind")
        if kind not in stage_kinds():
            why = trainers()[kind].recipe_stage if kind in trainers() else None
            hint = f" ({why})" if why else ""
            raise ValueError(f"unknown stage {kind!r}{hint}; stages are one of {stage_kinds()}, "
                             f"recipes one of {tuple(RECIPES)}")
        out.append({"kind": kind, **{k: _parse_value(kind, k, v) for k, v in stage.items() if k != "kind"}})
    return out


def resolve(recipe, cfg: configs.RunConfig) -> tuple[str, list[dict]]:
    """(name, stages) with every override concrete for ``cfg`` ("custom" for a list of stages)."""
    parsed = parse_stages(recipe)
    if isinstance(parsed, str):
        return parsed, parse_stages(RECIPES[parsed][0](cfg))
    return "custom", parsed


def stage_config(cfg: configs.RunConfig, stage: dict) -> configs.RunConfig:
    """The recipe's config with one stage's overrides, validated."""
    out = copy.deepcopy(cfg)
    for key, value in stage.items():
        if key == "kind":
            continue
        configs.set_option(out, *_key(stage["kind"], key), value)
    return configs.validate(out)


# ---- measuring a policy ------------------------------------------------------------------------------
def measure(model, task, cfg: configs.RunConfig, start_model, first_model, *, seed: int,
            kl_samples: int = KL_SAMPLES) -> dict:
    """Held-out numbers of a stage's policy (see the module docstring); the training RNG is untouched.

    ``first_model=None``: the stage started at the first policy, so both KLs are one measurement.
    """
    numbers = policy_numbers(model, task, cfg, seed=seed)
    length = max(cfg.grpo.max_completion_length, task.answer_length)
    kl_start = reference_kl(model, start_model, task, samples_per_prompt=kl_samples, max_completion_length=length,
                            seed=seed)
    kl_first = kl_start if first_model is None else reference_kl(
        model, first_model, task, samples_per_prompt=kl_samples, max_completion_length=length, seed=seed)
    return {**numbers, "kl_to_stage_start": kl_start["kl"], "kl_to_first_policy": kl_first["kl"]}


def policy_numbers(model, task, cfg: configs.RunConfig, *, seed: int) -> dict:
    """A policy's held-out pass@1 (greedy), sampled pass@1, pass@k, completion length and entropy, as every
    stage is measured (``measure`` adds the KLs): also a recipe's starting point (e.g. the random initialisation)."""
    length = max(cfg.grpo.max_completion_length, task.answer_length)
    greedy = evaluate(model, task, max_completion_length=length)
    sampled = sampled_eval(model, task, k=PASS_K, max_completion_length=length, seed=seed)
    return {"pass@1": greedy["accuracy"], "loose_accuracy": greedy["loose_accuracy"],
            "sampled_pass@1": sampled["pass@1"], f"pass@{PASS_K}": sampled["pass@k"],
            "completion_length": sampled["completion_length"], "entropy": sampled["entropy"]}


# ---- the pretraining text ----------------------------------------------------------------------------
def digit_text(task, n: int, generator: torch.Generator) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``n`` documents of plain digit text, as ``(input_ids, attention_mask, loss_mask)`` like
    ``task.demonstrations()``.

    A document is ``<bos>``, a string of uniformly random digits of uniformly random length (1 to
    the demonstrations' width − 2), then ``<eos>``, right-padded to that width: no ``+``, no ``=``,
    no sum. The loss mask covers the real tokens from ``task.prompt_length`` on (the ``<eos>``
    included): the positions the SFT loop scores (see the module docstring).
    """
    number(n, "n", integer=True, low=1, why=" (documents)")
    tok = task.tokenizer
    width = task.prompt_length + task.answer_length
    digits = torch.tensor(tok.convert_tokens_to_ids(list("0123456789")))
    lengths = torch.randint(1, width - 1, (n,), generator=generator)
    body = digits[torch.randint(0, 10, (n, width - 2), generator=generator)]
    ids = torch.full((n, width), tok.pad_token_id, dtype=torch.long)
    ids[:, 0] = tok.bos_token_id
    ids[:, 1:-1] = torch.where(torch.arange(width - 2) < lengths[:, None], body, tok.pad_token_id)
    ids[torch.arange(n), lengths + 1] = tok.eos_token_id
    attention = (ids != tok.pad_token_id).long()
    loss_mask = attention.clone()
    loss_mask[:, : task.prompt_length] = 0
    return ids, attention, loss_mask


def pretrain_passport(cfg, info: dict) -> dict:
    """A ``pretrain`` stage's passport sections: next-token training on ``digit_text``."""
    s = cfg.sft
    return dict(
        data_and_policy={"examples": f"{s.steps * s.batch_size} documents of plain digit text (random digit strings "
                                     "of random length, each ended by <eos>; no '+', no '=', no sums)",
                         "generated_by": "a random generator (offline), drawn once before training",
                         "reuse": "sampled with replacement every step",
                         "overlap": "no task prompt at all: the text never shows the task"},
        reward_contract={"source": "none (next-token prediction on digit text)", "granularity": "per token (NLL)"},
        optimisation={"algorithm": "supervised next-token prediction (pretraining), offline", "roles": ["policy"],
                      "kl": "none", "averaging_unit": "token_mean"},
    )


# ---- one stage ---------------------------------------------------------------------------------------
@register_stage("pretrain", "sft", passport=pretrain_passport)
def pretrain_stage(ctx: StageContext) -> StageResult:
    """The SFT loop on ``digit_text``: ``steps × batch_size`` documents, drawn before training with the stage's
    generator."""
    s = ctx.cfg.sft
    return sft_from_context(ctx, demos=digit_text(ctx.task, max(1, s.steps * s.batch_size), ctx.generator))


def run_stage(index: int, stage: dict, cfg, task, model, *, seed, out, show_progress, say) -> dict:
    """Train ``model`` in place through one stage; returns what the trainer reports (steps, seconds, rows)."""
    kind = stage["kind"]
    if index == 0:
        gen = torch.Generator().manual_seed(seed)
    else:
        torch.manual_seed(seed + index)
        gen = torch.Generator().manual_seed(seed + index)
    log = MetricsLog(out / "metrics.jsonl")
    start_weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    nothing = lambda *args: None  # noqa: E731 - resumable at a stage boundary only: no checkpoint inside a stage
    train = TrainContext(log=log, checkpoint=nothing, checkpoint_every=cfg.checkpoint_every,
                         max_grad_norm=cfg.max_grad_norm, show_progress=show_progress, threads=None)
    ctx = StageContext(cfg=cfg, task=task, model=model, seed=seed, out=out, train=train,
                       sft_weights=start_weights, generator=gen, sft=None, say=say)
    try:
        res = stage_entry(kind).stage(ctx)
    except ValueError as err:
        if log.rows:  # it had started: a real error
            raise
        raise StageStopped(f"{kind} cannot start: {err}") from err
    return {"steps": res.steps, "seconds": res.rl_seconds, "rows": log.rows, "summary": res.summary}


def stage_passport(cfg, kind: str, index: int, stages: list[dict], device: str,
                   init: str = "the random initialisation") -> dict:
    pp = passport(cfg, kind, threads=torch.get_num_threads(), device=device, reference=True)
    start = init if index == 0 else f"stage {index}'s policy ({stages[index - 1]['kind']})"
    overrides = {k: v for k, v in stages[index].items() if k != "kind"}
    pp["recipe"] = {"stage": f"{index + 1} of {len(stages)}", "starts_from": start,
                    "stages": " -> ".join(s["kind"] for s in stages), "overrides": overrides or "none"}
    return pp


# ---- the recipe --------------------------------------------------------------------------------------
def stage_dir(out: Path, index: int, kind: str) -> Path:
    return out / f"stage_{index + 1}_{kind}"


def run_recipe(
    recipe="r1",
    cfg: configs.RunConfig | None = None,
    out: str | Path = "runs/recipe",
    *,
    seed: int = 0,
    device: str = "auto",
    until: int | None = None,
    resume: bool = False,
    overwrite: bool = False,
    threads: int | None = DEFAULT_THREADS,
    show_progress: bool = True,
    verbose: bool = True,
    init=None,
    init_name: str = "a given policy",
    kl_samples: int = KL_SAMPLES,
) -> dict:
    """Run the stages of ``recipe`` (a name of ``RECIPES``, ``"sft,grpo,…"``, or a list of stage dicts).

    ``until=N`` stops after stage N (``resume=True`` continues). ``resume=True`` continues the
    recipe in ``out`` with its saved options after its last finished stage (``recipe`` and ``cfg``
    are then read from ``out``). ``init``: a model or state dict of this config's shape that the
    first stage starts from instead of the random initialisation (``init_name`` says what it is,
    in the passports). ``kl_samples``: completions per held-out prompt for the KL measurements.
    Returns the recipe's summary (``recipe.json``): its stages, each finished stage's numbers, and
    ``stopped`` (the stage that could not start and why) or None.
    """
    out = Path(out)
    say = print if verbose else (lambda *a, **k: None)
    set_threads(threads)
    if until is not None:
        number(until, "until", integer=True, low=1, why=" (the last stage to run)")
    number(kl_samples, "kl_samples", integer=True, low=1, why=" (completions per held-out prompt)")
    if resume:
        if init is not None:
            raise ValueError("resume=True continues from the saved policies; give no init")
        saved = json.loads((out / "recipe.json").read_text()) if (out / "recipe.json").is_file() else None
        if saved is None:
            raise FileNotFoundError(f"no recipe to resume in {out} (recipe.json missing)")
        cfg, seed, name, stages = configs.from_dict(saved["options"]), saved["seed"], saved["recipe"], saved["stages"]
        kl_samples = saved.get("kl_samples", KL_SAMPLES)
        summary = saved
        summary["stopped"] = None
    else:
        cfg = configs.validate(copy.deepcopy(cfg or configs.get_config()))
        name, stages = resolve(recipe, cfg)
        for stage in stages:
            stage_config(cfg, stage)  # refuse a bad stage before any training
        if out.exists() and any(out.iterdir()):
            if not overwrite:
                raise ValueError(f"{out} already holds files; pass overwrite=True (--overwrite) to replace them, "
                                 f"or resume=True to continue a recipe ({resume_command('recipe', out)})")
        summary = {"recipe": name, "source": cite("deepseek_r1") if name in RECIPES else None, "stages": stages,
                   "seed": seed, "config": cfg.name, "options": configs.to_dict(cfg), "kl_samples": kl_samples,
                   "starts_from": "the random initialisation" if init is None else init_name,
                   "finished": [], "stopped": None}
    task, model = build_policy(cfg, seed=seed, device=device)
    dev = next(model.parameters()).device
    first_path = out / "first_policy.pt"
    if resume:
        first = build_model(cfg.model, task.tokenizer).to(dev)
        first.load_state_dict(load_checkpoint(first_path, kind="recipe")["model"])
    else:
        if init is not None:
            weights = init.state_dict() if isinstance(init, torch.nn.Module) else init
            try:
                model.load_state_dict(weights)
            except (RuntimeError, TypeError) as err:
                raise ValueError(f"init must be a model or state dict of config {cfg.name!r}'s shape: {err}") from None
        if out.exists():
            shutil.rmtree(out)  # refused above unless overwrite=True
        out.mkdir(parents=True)
        first = copy.deepcopy(model)
        save_checkpoint(first_path, {"kind": "recipe", "model": model.state_dict()})
        (out / "recipe.json").write_text(json.dumps(summary, indent=2))  # resumable from before stage 1 ends
    first.eval().requires_grad_(False)
    done = len(summary["finished"])
    model.load_state_dict(first.state_dict() if not done else load_checkpoint(
        stage_dir(out, done - 1, stages[done - 1]["kind"]) / "policy.pt", kind="recipe")["model"])
    say(f"[course_lib] recipe {name}: {' -> '.join(s['kind'] for s in stages)} on {dev.type}, config {cfg.name!r}, "
        f"{n_params(model):,} parameters, seed {seed}" + (f"; resuming after stage {done}" if done else ""))
    last = len(stages) if until is None else min(until, len(stages))
    for index in range(done, last):
        stage = stages[index]
        kind, scfg = stage["kind"], stage_config(cfg, stage)
        task, folder = type(task)(scfg.task, task.tokenizer), stage_dir(out, index, stage["kind"])
        if folder.exists():
            shutil.rmtree(folder)  # a stage stopped midway before: rerun from its start
        folder.mkdir(parents=True)
        say(f"[course_lib] stage {index + 1}/{len(stages)}: {kind}"
            + (f" ({', '.join(f'{k}={v}' for k, v in stage.items() if k != 'kind')})" if len(stage) > 1 else ""))
        start = copy.deepcopy(model).eval().requires_grad_(False)
        cpu0 = time.process_time()
        try:
            res = run_stage(index, stage, scfg, task, model, seed=seed, out=folder, show_progress=show_progress,
                            say=say)
        except StageStopped as stop:
            shutil.rmtree(folder)
            summary["stopped"] = {"stage": index + 1, "kind": kind, "reason": str(stop)}
            (out / "recipe.json").write_text(json.dumps(summary, indent=2))
            say(f"[course_lib] stage {index + 1} ({kind}) stopped: {stop}; stages 1-{index} are kept in {out}")
            return summary
        except (Interrupted, StepFailed):
            say(f"[course_lib] stage {index + 1} stopped midway; this reruns it from its start: "
                f"{resume_command('recipe', out)}")
            raise
        cpu = time.process_time() - cpu0
        model.eval()
        numbers = measure(model, task, scfg, start, None if index == 0 else first, seed=seed, kl_samples=kl_samples)
        rows = res["rows"]
        entry = {"stage": index + 1, "kind": kind, "overrides": {k: v for k, v in stage.items() if k != "kind"},
                 "steps": res["steps"], "seconds": res["seconds"], "cpu_seconds": cpu, **numbers}
        numbers = stage_entry(kind).recipe_numbers  # e.g. GRPO's and RFT's rewards
        if numbers is not None:
            entry.update(numbers(rows))
        pp = stage_passport(scfg, kind, index, stages, dev.type,
                            summary.get("starts_from", "the random initialisation"))
        save_checkpoint(folder / "policy.pt", {"kind": "recipe", "stage": index + 1, "model": model.state_dict()})
        (folder / "summary.json").write_text(json.dumps({**entry, "passport": pp}, indent=2))
        (folder / "passport.json").write_text(json.dumps(pp, indent=2))
        summary["finished"].append(entry)
        (out / "recipe.json").write_text(json.dumps(summary, indent=2))
        say(format_passport(pp))
        say(format_stage(entry))
    if last < len(stages):
        say(f"[course_lib] stopped after stage {last} as asked; continue with: {resume_command('recipe', out)}")
    return summary


def format_stage(entry: dict) -> str:
    extra = ""
    if entry.get("acceptance_rate") is not None:
        extra += f", acceptance {entry['acceptance_rate']:.3f}"
    if entry.get("zero_variance_share") is not None:
        extra += f", zero-variance groups {entry['zero_variance_share']:.0%}"
    return (f"[course_lib] stage {entry['stage']} {entry['kind']}: pass@1 {entry['pass@1']:.3f}, "
            f"sampled pass@1 {entry['sampled_pass@1']:.3f}, pass@{PASS_K} {entry[f'pass@{PASS_K}']:.3f}, "
            f"length {entry['completion_length']:.2f}, entropy {entry['entropy']:.3f}, "
            f"KL to start {entry['kl_to_stage_start']:.3f}, to first {entry['kl_to_first_policy']:.3f}{extra}; "
            f"{entry['cpu_seconds']:.1f} CPU s")
