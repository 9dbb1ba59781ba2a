"""Seeds side by side: a list of seeds trained in parallel processes, one CPU thread each.

A verdict about training is read over seeds (``course_lib.run.verdicts``), so seeds must be cheap. On a
CPU they do not batch cheaply into one model: ``torch.func.vmap`` over four stacked copies of the
``cpu``-config GPT costs 4.2–4.6× one model's forward + backward (SDPA's backward has no batching
rule; eager attention is no better), while four models one after the other cost 3.6–3.7×. The bound
is the cores, so ``over_seeds`` runs each seed in its own process with one torch thread (as the
rollout worker does: ``fork`` on Linux, ``spawn`` elsewhere), as many at a time as the machine has
cores, and returns the results in seed order; ``in_background`` starts them (``spawn``: below) and
returns at once (a notebook walks through one seed while the others run). What seeds can share, they
share: the task is the config's, and each seed's SFT start comes from the disk cache
(``course_lib.run.starts``, keyed by seed, config, torch's version and CPU kernel set), trained once per
machine.

``train_seeds(kind, cfg, seeds)`` is the trainers' entry for a list of seeds: any registered trainer
that trains a policy (``kinds()``), its registered stage run from each seed's cached start by
``pipeline.stage_from_sft``, the same code and seeding (``pipeline.rl_generator``) as a run's stage after
its SFT stage (for ``"sft"``, the start provider, the stage reports the start itself). Each result holds the
start's and the final held-out evaluation, the per-step metrics, and the process's wall and CPU seconds.
``rl_from_sft`` is a notebook's RL run on a GRPO section, through the registered stage of GRPO or of a
stage on its section (RFT, its control).
``run_seeds(kind, cfg, out, seeds)`` is ``pipeline.run`` for a list of seeds (the CLI's
``--seed 0 1 2``): each seed a whole run into its own folder ``out/seed-N``, then the per-seed
summary and the paired verdicts over the seeds (``seed_verdicts``) in ``out/seeds.json``.

Simplifications, said out loud: one seed per process at a time (no seed axis inside a model: it
did not pay on a CPU, above); the pool's processes are started per call; ``train_seeds`` and
``run_seeds`` refuse a trainer whose options start a rollout worker (``register(rollout_worker=)``: GRPO
with ``max_staleness`` ≥ 1; it would be a second process per seed; notebook 14's ``staleness_runs``
accepts that cost for its few short runs);
on an accelerator ``run_seeds`` runs the seeds one after the other in this process.
With one process (one seed, or ``processes=1``) the seeds run in this process, one after the other.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import multiprocessing
import os
import sys
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import torch

from course_lib._validate import number
from course_lib.run.verdicts import evaluation_noise, paired
from course_lib.tinygpt.runtime import Interrupted, MetricsLog, stop_on_interrupt
from course_lib.trainers import configs
from course_lib.trainers.trainer import StageContext, TrainContext, entry, stage_entry, stages, trainers

GRPO = "grpo"  # the section rl_from_sft runs: GRPO's, read by GRPO and the stages registered on it (RFT)


def kinds() -> tuple[str, ...]:
    """What ``train_seeds`` trains from each seed's start: every registered trainer that trains a policy."""
    return tuple(k for k, e in trainers().items() if e.trains_policy)


class SeedFailed(RuntimeError):
    """A seed's run raised; the message names the seed and carries the error."""


def cores() -> int:
    """The CPU cores this process may run on (its affinity where the OS says, else ``os.cpu_count()``)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


def default_start_method() -> str:
    return "fork" if sys.platform.startswith("linux") else "spawn"


def _check_seeds(seeds) -> list[int]:
    if isinstance(seeds, (str, bytes)) or not isinstance(seeds, Sequence) or not seeds:
        raise ValueError(f"seeds must be a non-empty list of integers; got {seeds!r}")
    for i, s in enumerate(seeds):
        number(s, f"seeds[{i}]", integer=True, low=0)
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"seeds must be distinct (a repeated seed is the same run); got {list(seeds)!r}")
    return list(seeds)


def _one_thread() -> None:
    torch.set_num_threads(1)


def _timed(fn: Callable, seed: int):
    """``fn(seed)`` with the process's wall and CPU seconds it took."""
    t0, c0 = time.perf_counter(), time.process_time()
    result = fn(seed)
    return result, time.perf_counter() - t0, time.process_time() - c0


def _check_processes(processes) -> None:
    if processes is not None:
        number(processes, "processes", integer=True, low=1, why=" (seeds run at once) or None for the cores")


def _check_method(start_method) -> str:
    method = start_method or default_start_method()
    if method not in multiprocessing.get_all_start_methods():
        raise ValueError(f"start_method must be one of {multiprocessing.get_all_start_methods()}; got {method!r}")
    return method


def _entry(seed: int, got: tuple) -> dict:
    return {"seed": seed, "result": got[0], "wall_seconds": got[1], "cpu_seconds": got[2]}


class InBackground:
    """Seeds running in worker processes while this process goes on; ``results()`` waits for them.

    ``in_background(fn, seeds)`` starts it. A notebook uses it to run its other seeds while it walks
    through one seed in the kernel: the seeds share the machine's cores with the kernel.
    """

    def __init__(self, fn: Callable, seeds: Sequence[int], processes: int | None = None,
                 start_method: str | None = None):
        self.seeds = _check_seeds(seeds)
        _check_processes(processes)
        method = _check_method(start_method)
        self._pool = ProcessPoolExecutor(min(len(self.seeds), processes or cores()),
                                         mp_context=multiprocessing.get_context(method), initializer=_one_thread)
        self._futures = {s: self._pool.submit(_timed, fn, s) for s in self.seeds}
        self._results: list[dict] | None = None

    def results(self) -> list[dict]:
        """``[{"seed", "result", "wall_seconds", "cpu_seconds"}, …]`` in seed order, once all have finished;
        a seed that raised raises ``SeedFailed`` naming it (the others are cancelled)."""
        if self._results is None:
            try:
                done = []
                for s in self.seeds:
                    try:
                        done.append(_entry(s, self._futures[s].result()))
                    except Exception as err:
                        raise SeedFailed(f"seed {s} failed: {type(err).__name__}: {err}") from err
                self._results = done
            finally:
                self._pool.shutdown(wait=True, cancel_futures=True)
        return self._results


def in_background(fn: Callable, seeds: Sequence[int], *, processes: int | None = None,
                  start_method: str = "spawn") -> InBackground:
    """Start ``fn(seed)`` for every seed in worker processes (one torch thread each, at most ``processes``
    at once, default ``cores()``) and return at once; ``.results()`` collects them (see ``over_seeds``).

    Workers start with ``spawn`` by default: a notebook's kernel has threads and sockets of its own that a
    forked child would inherit mid-use, which can deadlock; a
    spawned worker imports torch and course_lib afresh (seconds), while the kernel works on its own seed.
    ``fn`` must therefore be importable (a module's function or a ``functools.partial`` of one)."""
    return InBackground(fn, seeds, processes, start_method)


def over_seeds(fn: Callable, seeds: Sequence[int], *, processes: int | None = None,
               start_method: str | None = None) -> list[dict]:
    """``[{"seed", "result", "wall_seconds", "cpu_seconds"}, …]``: ``fn(seed)`` for every seed, in seed order.

    At most ``processes`` (default: ``cores()``) run at once, each in its own process with one torch
    thread; with one process they run here, one after the other (torch's thread count set to 1 for
    them, then restored). ``fn`` and its results cross a process boundary: with ``spawn`` (macOS,
    Windows) ``fn`` must be importable (a module's function or a ``functools.partial`` of one).
    A seed that raises stops the call with ``SeedFailed`` naming it.
    """
    seeds = _check_seeds(seeds)
    _check_processes(processes)
    _check_method(start_method)
    if min(len(seeds), processes or cores()) > 1:
        return InBackground(fn, seeds, processes, start_method).results()
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    done = []
    try:
        for s in seeds:
            try:
                done.append(_entry(s, _timed(fn, s)))
            except Exception as err:
                raise SeedFailed(f"seed {s} failed: {type(err).__name__}: {err}") from err
    finally:
        torch.set_num_threads(threads)
    return done


def from_start(seed: int, *, kind: str, cfg: configs.RunConfig, steps: int | None = None) -> dict:
    """One seed of ``train_seeds``: the cached SFT start of ``seed``, then ``kind``'s registered stage from it as a
    run trains it (``pipeline.stage_from_sft``, seeded by ``pipeline.rl_generator``), on the CPU."""
    from course_lib.run.pipeline import rl_generator, stage_from_sft
    from course_lib.run.starts import sft_start

    task, model, info = sft_start(cfg, seed=seed, verbose=False)
    start = {k: v for k, v in info.items() if k not in ("path", "cached")}
    sft = {"eval": start, "seconds": info["sft_seconds"], "steps": info["steps"]}
    sft_weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    log = MetricsLog()
    train = TrainContext(log=log, max_grad_norm=cfg.max_grad_norm, steps=steps, show_progress=False, threads=None)
    result, final = stage_from_sft(kind, cfg, task, model, train, seed=seed, sft=sft, sft_weights=sft_weights,
                                   generator=rl_generator(seed), say=lambda *a, **k: None)
    return {"start": start, "final": final, "steps": result.steps, "rows": log.rows, "rl_seconds": result.rl_seconds}


def rl_from_sft(model, task, gcfg, *, sft_weights: dict, seed: int, trainer: str = GRPO,
                show_progress: bool = True, name: str | None = None) -> tuple[dict, list[dict]]:
    """One RL run of a notebook from the SFT weights: ``(held-out evaluation + the trainer's result, per-step rows)``.

    ``model`` is reset to ``sft_weights``; torch is seeded with ``seed`` (sampling) and the data generator
    with ``seed + 1``; ``trainer`` is a registered stage on GRPO's section (``rl_kinds()``): ``"grpo"`` (the SFT
    weights kept as the reference, to log the KL) or ``"rft"`` (``course_lib.trainers.rft``, GRPO's control), run
    through its registered stage function. ``gcfg`` is the GRPO section to run; a progress bar
    (labelled ``name``) unless ``show_progress`` is False. The held-out evaluation is the trainer's own at its
    last step (the training loop evaluates there), not a second one of the same weights.
    """
    from course_lib.tinygpt.evaluation import evaluate

    if trainer not in rl_kinds():
        raise ValueError(f"trainer must be one of {rl_kinds()} (a stage on GRPO's section); got {trainer!r}")
    model.load_state_dict(sft_weights)
    log = MetricsLog()
    torch.manual_seed(seed)
    gen = torch.Generator().manual_seed(seed + 1)
    last: dict = {}

    def held_out(m) -> dict:
        last["evaluation"] = evaluate(m, task, max_completion_length=gcfg.max_completion_length)
        return last["evaluation"]

    train = TrainContext(log=log, show_progress=show_progress)
    no_numbers = {"eval": None, "seconds": None, "steps": None}  # from the SFT policy, whose numbers it has not
    ctx = StageContext(cfg=configs.RunConfig(grpo=gcfg), task=task, model=model, seed=seed, out=None, train=train,
                       sft_weights=sft_weights, generator=gen, sft=no_numbers, held_out=held_out,
                       label=name)  # the stage reads its section only
    result = stage_entry(trainer).stage(ctx)
    out = {"steps": result.steps, "rl_seconds": result.rl_seconds, **result.summary}
    evaluated_last = bool(log.rows) and log.rows[-1].get("accuracy") is not None  # the final weights' evaluation
    return {**(last["evaluation"] if evaluated_last else held_out(model)), **out}, log.rows


def rl_kinds() -> tuple[str, ...]:
    """The trainers ``rl_from_sft`` runs on a GRPO section: GRPO and every stage registered on its section (RFT)."""
    return (GRPO, *(k for k, s in stages().items() if s.section == GRPO))


def variants_from_start(seed: int, *, cfg: configs.RunConfig, variants: dict) -> dict:
    """A notebook's RL runs on one seed, from that seed's cached SFT start: ``{"SFT": its evaluation,
    name: {"final": …, "rows": […]}, …}`` for ``variants`` = ``{name: (trainer, GRPO overrides)}``
    (``rl_from_sft`` runs each)."""
    from course_lib.run.starts import sft_start

    task, model, info = sft_start(cfg, seed=seed, verbose=False)
    sft_weights = {k: v.detach().clone() for k, v in model.state_dict().items()}
    out = {"SFT": {k: v for k, v in info.items() if k not in ("path", "cached")}}
    for name, (trainer, overrides) in variants.items():
        final, rows = rl_from_sft(model, task, dataclasses.replace(cfg.grpo, **overrides), sft_weights=sft_weights,
                                  seed=seed, trainer=trainer, show_progress=False)
        out[name] = {"final": final, "rows": rows}
    return out


HOT = 2.0  # notebook 14's deliberately mismatched sampler: its temperature (the trainer's is 1.0)


def staleness_variants(cfg: configs.RunConfig) -> dict:
    """Notebook 14's GRPO runs, ``{name: ("grpo", GRPO overrides)}`` as ``variants_from_start`` takes them: the
    synchronous loop, a rollout worker K = 1 and K = 4 steps behind (K = 4 with and without the behaviour
    correction, and with a quarter of ``cfg``'s learning rate), a synchronous sampler at temperature ``HOT``
    (with and without the correction), dynamic sampling and an adaptive completion length."""
    lr = cfg.grpo.learning_rate
    no_correction = {"vllm_importance_sampling_correction": False}
    runs = {"synchronous": {}, "K = 1": {"max_staleness": 1}, "K = 4": {"max_staleness": 4},
            "K = 4, no correction": {"max_staleness": 4, **no_correction},
            "K = 4, lr / 4": {"max_staleness": 4, "learning_rate": lr / 4},
            f"sampler T = {HOT}": {"sampler_temperature": HOT},
            f"sampler T = {HOT}, no correction": {"sampler_temperature": HOT, **no_correction},
            "dynamic sampling": {"zero_variance": "resample"},
            "adaptive length": {"adaptive_length_quantile": 0.9, "adaptive_length_margin": 1}}
    return {name: ("grpo", overrides) for name, overrides in runs.items()}


STALENESS_PATHS = ("K = 4", "K = 4, lr / 4")  # the runs whose held-out path notebook 14 reads on every seed


def staleness_runs(seed: int, *, cfg: configs.RunConfig) -> dict:
    """Notebook 14's runs (``staleness_variants``) on one seed, from its cached SFT start (``variants_from_start``).

    Only the runs of ``STALENESS_PATHS`` evaluate every ``cfg.grpo.eval_every`` steps; the others once, at
    their last step (greedy evaluation draws no random number: the runs are the same). The runs with K ≥ 1
    each start a rollout worker: two processes per seed while they run."""
    variants = {name: (trainer, overrides if name in STALENESS_PATHS else {**overrides, "eval_every": cfg.grpo.steps})
                for name, (trainer, overrides) in staleness_variants(cfg).items()}
    return variants_from_start(seed, cfg=cfg, variants=variants)


def ppo_against(policy, task, scorer, sft_weights: dict, *, seed: int, beta: float, steps: int,
                prompts: int) -> list[dict]:
    """PPO with a fresh critic against a learned reward (``scorer``) from ``sft_weights``, the KL in the reward
    with coefficient ``beta``: per step ``{"step", "proxy", "gold", "kl"}`` (gold: the strict checker on the
    same samples; kl: the sampled sequence KL to the SFT policy), as ``reward_model.over_optimisation`` reads."""
    from course_lib.tinygpt.rewards import resolve_reward
    from course_lib.trainers.configs import PPOConfig
    from course_lib.trainers.ppo import build_critic, train_ppo

    policy.load_state_dict(sft_weights)
    torch.manual_seed(seed)
    critic = build_critic(policy, task.tokenizer)
    log = MetricsLog()
    pcfg = PPOConfig(steps=steps, batch_prompts=prompts, kl_coef=beta, eval_every=steps)
    train_ppo(policy, critic, task, pcfg, scorer, TrainContext(log=log, show_progress=False),
              generator=torch.Generator().manual_seed(seed + 1), gold_fn=resolve_reward("strict", task), track_kl=True)
    return [{"step": r["step"], "proxy": r["reward_mean"], "gold": r["gold_mean"], "kl": r["kl_sequence"]}
            for r in log.rows]


def grpo_rloo_ppo(policy, task, gcfg, sft_weights: dict, *, seed: int) -> dict:
    """GRPO, RLOO and PPO (a learned critic) from ``sft_weights`` against the strict checker, at the same sampled
    answers per step (PPO: ``gcfg.batch_prompts × num_generations`` prompts, one answer each) and steps.
    Returns ``{"runs": {name: {"accuracy", "rl_seconds"}}, "memory": PPO's, "critic": the trained critic,
    "ppo_rows": PPO's per-step metrics, "ppo_cfg": its PPOConfig}``."""
    from course_lib.tinygpt.evaluation import evaluate
    from course_lib.tinygpt.rewards import resolve_reward
    from course_lib.trainers.configs import PPOConfig
    from course_lib.trainers.grpo import train_grpo
    from course_lib.trainers.ppo import build_critic, train_ppo

    runs = {}
    for name, advantage in (("GRPO", "grpo"), ("RLOO", "rloo")):
        policy.load_state_dict(sft_weights)
        torch.manual_seed(seed)
        res = train_grpo(policy, task, dataclasses.replace(gcfg, advantage=advantage),
                         TrainContext(show_progress=False), generator=torch.Generator().manual_seed(seed + 1))
        runs[name] = {"accuracy": evaluate(policy, task, max_completion_length=6)["accuracy"],
                      "rl_seconds": res["rl_seconds"]}
    policy.load_state_dict(sft_weights)
    torch.manual_seed(seed)
    critic = build_critic(policy, task.tokenizer)
    ppo_cfg = PPOConfig(steps=gcfg.steps, batch_prompts=gcfg.batch_prompts * gcfg.num_generations,
                        eval_every=gcfg.steps)
    log = MetricsLog()
    res = train_ppo(policy, critic, task, ppo_cfg, resolve_reward("strict", task),
                    TrainContext(log=log, show_progress=False), generator=torch.Generator().manual_seed(seed + 1))
    runs["PPO"] = {"accuracy": evaluate(policy, task, max_completion_length=6)["accuracy"],
                   "rl_seconds": res["rl_seconds"]}
    return {"runs": runs, "memory": res["memory"], "critic": critic, "ppo_rows": log.rows, "ppo_cfg": ppo_cfg}


BETAS = (0.0, 0.05)  # notebook 12's over-optimisation runs: without and with the KL in the reward


def rlhf_route(seed: int, *, cfg: configs.RunConfig, rm_cfg, bon_prompts: int, bon_ns: Sequence[int],
               overopt_steps: int, overopt_prompts: int, window: int, rl_steps: int) -> dict:
    """Notebook 12's runs on one seed, from its cached SFT start: the reward model (``rm_cfg``), best-of-N
    against it on ``bon_prompts`` held-out prompts (``max(bon_ns)`` samples each), PPO against it at each of
    ``BETAS`` (``ppo_against``, read by ``over_optimisation`` with ``window``), and GRPO, RLOO and PPO against the
    checker for ``rl_steps`` (``grpo_rloo_ppo``). Returns the numbers (no models)."""
    from course_lib.run.starts import sft_start
    from course_lib.trainers.reward_model import (
        RewardModelScorer,
        best_of_n_curve,
        best_of_n_scores,
        fit_reward_model,
        over_optimisation,
    )

    task, policy, sft = sft_start(cfg, seed=seed, verbose=False)
    sft_weights = {k: v.detach().clone() for k, v in policy.state_dict().items()}
    rm_run = fit_reward_model(policy, task, rm_cfg, seed=seed)
    scorer = RewardModelScorer(rm_run["model"], task)
    torch.manual_seed(seed)
    proxy, gold, ids = best_of_n_scores(policy, task, task.heldout_pairs[:bon_prompts], scorer, k=max(bon_ns))
    summary = [{"seed": seed, "beta": beta, **over_optimisation(
        ppo_against(policy, task, scorer, sft_weights, seed=seed, beta=beta, steps=overopt_steps,
                    prompts=overopt_prompts), window=window)} for beta in BETAS]
    gcfg = dataclasses.replace(cfg.grpo, steps=rl_steps, eval_every=rl_steps)
    return {"sft": sft["accuracy"], "rm": rm_run["metrics"], "bon": best_of_n_curve(proxy, gold, bon_ns, ids=ids),
            "summary": summary, "runs": grpo_rloo_ppo(policy, task, gcfg, sft_weights, seed=seed)["runs"]}


def recipe_starts(seed: int, *, cfg: configs.RunConfig, pretrain_steps: int, kl_samples: int) -> dict:
    """Notebook 16's runs on one seed: the recipes ``r1``, ``r1-zero``, a digit-text base
    (``pretrain:steps=pretrain_steps,grpo``) and GRPO from the seed's shared SFT start (the named config's,
    ``course_lib.run.starts``), each stage measured by ``course_lib.run.recipes``; plus the random initialisation's and
    the SFT start's numbers before RL. Returns ``{"r1", "zero", "digits", "full": [finished stages],
    "random_start", "sft_start": numbers}``; the recipes' folders are temporary."""
    import tempfile

    from course_lib.run import recipes
    from course_lib.run.pipeline import build_policy
    from course_lib.run.starts import sft_start

    run = dict(seed=seed, device="cpu", show_progress=False, verbose=False, threads=1, kl_samples=kl_samples)
    with tempfile.TemporaryDirectory(prefix=f"recipes-seed{seed}-") as tmp:
        out = Path(tmp)
        got = {"r1": recipes.run_recipe("r1", cfg, out / "r1", **run),
               "zero": recipes.run_recipe("r1-zero", cfg, out / "r1-zero", **run),
               "digits": recipes.run_recipe(f"pretrain:steps={pretrain_steps},grpo", cfg, out / "digits", **run)}
        task, random_init = build_policy(cfg, seed=seed)
        _, sft_policy, _ = sft_start(configs.get_config(cfg.name), seed=seed, verbose=False)
        numbers = {"random_start": recipes.policy_numbers(random_init.eval(), task, cfg, seed=seed),
                   "sft_start": recipes.policy_numbers(sft_policy.eval(), task, cfg, seed=seed)}
        got["full"] = recipes.run_recipe("grpo", cfg, out / "sft-start", init=sft_policy,
                                         init_name="the shared SFT start", **run)
    return {**{k: v["finished"] for k, v in got.items()}, **numbers}


def train_seeds(kind: str, cfg: configs.RunConfig, seeds: Sequence[int], *, steps: int | None = None,
                processes: int | None = None, start_method: str | None = None) -> list[dict]:
    """``kind`` (a registered trainer that trains a policy: ``kinds()``) from each seed's cached SFT start, seeds
    side by side (``"sft"``: the start itself).

    Returns one dict per seed, in seed order: ``seed``, ``start`` and ``final`` (held-out evaluations:
    ``accuracy``, …), ``steps``, ``rows`` (the stage's per-step metrics), ``rl_seconds``, and the
    process's ``wall_seconds`` and ``cpu_seconds`` (the SFT start's reading or training included).
    ``steps`` overrides the stage's step count (default: the config's).
    """
    if kind not in kinds():
        raise ValueError(f"kind must be one of {kinds()} (the trainers that train a policy); got {kind!r}")
    if steps is not None:
        number(steps, "steps", integer=True, low=0, why=" (the stage's total) or None for the config's")
    cfg = configs.validate(cfg)
    _refuse_rollout_worker(kind, cfg, "train_seeds")
    runs = over_seeds(functools.partial(from_start, kind=kind, cfg=cfg, steps=steps), seeds, processes=processes,
                      start_method=start_method)
    return [{"seed": r["seed"], **r["result"], "wall_seconds": r["wall_seconds"], "cpu_seconds": r["cpu_seconds"]}
            for r in runs]


def _refuse_rollout_worker(kind: str, cfg: configs.RunConfig, what: str) -> None:
    """Refuse a ``kind`` whose section starts a rollout worker process (``register(rollout_worker=)``)."""
    worker = entry(kind).rollout_worker
    options = worker(getattr(cfg, kind)) if worker is not None else ""
    if options:
        raise ValueError(f"{what} runs synchronous {kind.upper()} (one process per seed): a rollout worker per seed "
                         f"would be a second process per seed; got {kind}.{options}")


def seed_folder(out, seed: int):
    """Where ``run_seeds`` writes seed ``seed``'s run: ``out/seed-N``."""
    return Path(out) / f"seed-{seed}"


def _run_seed(seed: int, *, kind: str, cfg: configs.RunConfig, out, device: str, steps: int | None, control) -> dict:
    """One seed of ``run_seeds``: ``pipeline.run`` into its folder, quietly; a Ctrl-C stops it after the step
    in progress with its checkpoint saved (``{"stopped": …}`` instead of the summary)."""
    from course_lib.run.pipeline import run

    try:
        with stop_on_interrupt():
            return run(kind, cfg, seed_folder(out, seed), device=device, seed=seed, steps=steps, control=control,
                       threads=None, show_progress=False, verbose=False)
    except Interrupted as stop:
        return {"stopped": str(stop)}


def seed_verdicts(kind: str, runs: list[dict], n_heldout: int) -> list[str]:
    """The paired verdicts over ``runs`` (``run_seeds``' summaries, one per seed): what the trained stage
    changed in held-out accuracy against where it started (the SFT policy; for ``sft`` the random
    initialisation) and, with a control, against the control. None for a stage that trains no policy."""
    if not entry(kind).trains_policy:
        return []
    seeds, name = [r["seed"] for r in runs], kind.upper()
    noise = evaluation_noise(n_heldout)
    start = "its random initialisation" if entry(kind).start_provider else "its SFT start"
    said = [paired([r["final_accuracy"] for r in runs], [r["start_accuracy"] for r in runs], name_a=name,
                   name_b=start, seeds=seeds, margin=noise).sentence()]
    if runs[0].get("control"):
        control = "same-time SFT control" if runs[0]["control"] == "sft" else f"{runs[0]['control'].upper()} control"
        said.append(paired([r["final_accuracy"] for r in runs], [r["control_accuracy"] for r in runs], name_a=name,
                           name_b=control, seeds=seeds, margin=noise).sentence())
    return said


def run_seeds(kind: str, cfg: configs.RunConfig, out, seeds: Sequence[int], *, device: str = "auto",
              steps: int | None = None, control=None, overwrite: bool = False, processes: int | None = None) -> dict:
    """``pipeline.run`` for every seed, side by side (``over_seeds``: one process and one torch thread per
    seed, at most ``processes``, default the cores; on an accelerator one after the other here), each
    into ``out/seed-N``. Every folder is checked before any seed trains (``overwrite`` as in ``run``).

    Returns (and writes to ``out/seeds.json``) ``{"kind", "config", "seeds", "runs": [per-seed summary],
    "verdicts": [sentences], "stopped": {seed: what}}``; a seed stopped by Ctrl-C is in ``stopped``, not
    in ``runs``, its checkpoint saved in its folder.
    """
    from course_lib.run.pipeline import prepare_out
    from course_lib.tinygpt.device import resolve_device

    entry(kind)  # a ValueError names the registered trainers
    seeds = _check_seeds(seeds)
    _check_processes(processes)
    cfg = configs.validate(cfg)
    _refuse_rollout_worker(kind, cfg, "run_seeds")
    if resolve_device(device).type != "cpu":
        processes = 1  # one accelerator: the seeds take turns on it
    for s in seeds:
        prepare_out(seed_folder(out, s), overwrite, kind)
    done = over_seeds(functools.partial(_run_seed, kind=kind, cfg=cfg, out=out, device=device, steps=steps,
                                        control=control), seeds, processes=processes)
    runs = [{k: v for k, v in d["result"].items() if k not in ("passport", "options")}
            | {"process_wall_seconds": d["wall_seconds"], "process_cpu_seconds": d["cpu_seconds"]}
            for d in done if "stopped" not in d["result"]]
    stopped = {d["seed"]: d["result"]["stopped"] for d in done if "stopped" in d["result"]}
    report = {"kind": kind, "config": cfg.name, "seeds": seeds, "runs": runs,
              "verdicts": seed_verdicts(kind, runs, cfg.task.n_heldout) if runs else [], "stopped": stopped}
    (Path(out) / "seeds.json").write_text(json.dumps(report, indent=2))
    return report
