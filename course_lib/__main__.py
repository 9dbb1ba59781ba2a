"""The command line, ``python -m course_lib``: argument parsing only, the runs live elsewhere.

Use the course's environment: ``.venv/bin/python -m course_lib …`` (or activate ``.venv``).
The run itself is ``course_lib.run.pipeline.run``. Flags come in sections, shown by ``--help``
with their choices and each named config's default:

- run options: ``--config``, ``--out`` (refused if it holds a run, unless ``--overwrite``),
  ``--resume DIR``, ``--steps`` (the trainer's *total* steps), ``--seed`` (one seed, or several:
  ``--seed 0 1 2`` runs them side by side, ``course_lib.run.seeds.run_seeds``), ``--device``,
  ``--threads``, ``--control``, ``--sft-checkpoint``, ``--no-progress``;
- the trainer's own options under their plain names (``--beta`` is GRPO's β in ``train grpo``
  and DPO's β in ``train dpo``); in every run but ``train sft`` the SFT stage's options are
  ``--sft-steps``, ``--sft-batch-size``, ``--sft-learning-rate``, ``--sft-eval-every``;
- the task (``--digits``, ``--n-demos``, …, ``--task-seed``) and the model (``--n-layer``, …).

Booleans are ``--mask-truncated`` / ``--no-mask-truncated``. Ctrl-C stops after the current
step, saves a checkpoint and prints the ``--resume`` command. Examples::

    .venv/bin/python -m course_lib train grpo --out runs/grpo --control
    .venv/bin/python -m course_lib train grpo --out runs/grpo-rft --control rft
    .venv/bin/python -m course_lib train dpo --out runs/dpo --rpo-alpha 1.0
    .venv/bin/python -m course_lib train grpo --config test --steps 4 --out /tmp/t --overwrite
    .venv/bin/python -m course_lib train grpo --resume runs/grpo --steps 120
    .venv/bin/python -m course_lib train grpo --out runs/grpo-async --max-staleness 1
    .venv/bin/python -m course_lib train grpo --out runs/grpo-seeds --seed 0 1 2 --control rft
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from pathlib import Path

from course_lib.run import recipes
from course_lib.run.pipeline import run
from course_lib.run.seeds import cores, run_seeds, seed_folder
from course_lib.tinygpt.device import DEVICES
from course_lib.tinygpt.rewards import SPEC_HELP
from course_lib.tinygpt.runtime import (
    DEFAULT_THREADS,
    Interrupted,
    StepFailed,
    check_threads,
    resume_command,
    stop_on_interrupt,
)
from course_lib.trainers import configs
from course_lib.trainers.judge import PRINCIPLES
from course_lib.trainers.trainer import entry, stage_entry, trainers

RUN_FIELDS = ("max_grad_norm", "checkpoint_every")
HELP = {
    "reward": SPEC_HELP,
    "beta": "GRPO: KL coefficient (0 keeps no reference); DPO: temperature; KTO: value-function beta; ORPO: lambda, "
            "the odds-ratio weight",
    "kl_estimator": "k1's expected gradient is zero in the loss: use it with --kl-placement reward",
    "steps": "TOTAL optimizer steps of the trainer (a resumed run continues up to it)",
    "env": "an environment with tools (sft, grpo): 'calculator' lets the policy call [a+b]; '' none",
    "tool_demos": "with --env: carry demonstrations the teacher writes with the tool",
    "tool_call": "with --env: what the tool demonstrations ask the calculator: the ones column [7+5] or the whole sum "
                 "[37+45]",
    "loss_type": "GRPO: the objective (clipped surrogate, or CISPO's capped weight: set --epsilon-high, ε_max, >= 1); "
                 "TRL's unit names are --unit here. DPO: the pairwise loss",
    "importance_sampling_level": "sequence = GSPO (one length-normalised ratio per completion; needs --unit "
                                 "sequence_mean). GSPO's paper and TRL's docs clip at --epsilon 3e-4 --epsilon-high "
                                 "4e-4; the defaults here are GRPO's 0.2, which a sequence ratio rarely reaches",
    "soft_punish_cache": "DAPO overlong shaping: completions longer than max_completion_length minus this lose up to "
                         "1 reward (0 = off)",
    "max_staleness": "K >= 0: a rollout worker process samples batch s with the weights of step s-K (0: synchronous)",
    "worker_timeout": "seconds the trainer waits for the rollout worker's next batch; a worker silent that long "
                      "(stopped or hung) fails the run, its completed steps saved",
    "vllm_importance_sampling_clip_min": "a number, or none",
    "sampler_temperature": "a deliberately mismatched sampler: sample at this temperature, log-probs at --temperature "
                           "(none: the same)",
    "adaptive_length_quantile": "q in (0, 1]: the next step generates at most the q-quantile of this step's lengths + "
                                "--adaptive-length-margin tokens (none: off)",
    "vllm_importance_sampling_clip_max": "a number, or none",
    "principles": f"the judge's constitution, in order (the first that tells two answers apart decides): names from "
                  f"{', '.join(PRINCIPLES)}",
}


NONE_GIVEN = object()  # "--flag none": set the option to None (a plain None means "flag not given")


def optional_float(text: str):
    """A float, or ``none`` for None (the optional bounds of the behaviour correction)."""
    return NONE_GIVEN if text.strip().lower() == "none" else float(text)


optional_float.__name__ = "float_or_none"  # argparse names the type in its error and its metavar

SEED_ACCEPTS = "a seed is an integer >= 0, several are distinct ones separated by spaces (--seed 0 1 2)"


def seed_value(text: str) -> int:
    """One value of ``--seed``: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"{SEED_ACCEPTS}; got {text!r}")
    return value


seed_value.__name__ = "seed"


def _default_text(section: str, name: str) -> str:
    values = {c: getattr(getattr(configs.get_config(c), section) if section != "run" else configs.get_config(c), name)
              for c in configs.CONFIGS}
    shown = {c: "''" if v == "" else v for c, v in values.items()}  # an empty string, visible
    if len(set(map(repr, values.values()))) == 1:
        return f"default: {next(iter(shown.values()))}"
    return "default: " + " | ".join(f"{c} {v}" for c, v in shown.items())


def _add_field(group, section: str, f: dataclasses.Field, flag: str) -> None:
    dest = f"{section}.{f.name}"
    text = "; ".join(x for x in (HELP.get(f.name, ""), _default_text(section, f.name)) if x)
    if f.type in (bool, "bool"):
        group.add_argument(flag, dest=dest, action=argparse.BooleanOptionalAction, default=None, help=text)
        return
    if f.type in (tuple, "tuple"):  # a list of names (judge.principles), checked by its section
        group.add_argument(flag, dest=dest, nargs="+", default=None, metavar="NAME", help=text)
        return
    kind = {"int": int, "float": float, "str": str, "float | None": optional_float}.get(f.type, f.type)
    choices = configs.choices_for(section, f.name)
    metavar = "{" + ",".join(c if c else "''" for c in choices) + "}" if choices else kind.__name__.upper()
    group.add_argument(flag, dest=dest, type=kind, default=None, choices=choices, metavar=metavar, help=text)


def _summary(stage, default: str = "") -> str:
    """The first line of the docstring of the module that registered ``stage``."""
    return (sys.modules[stage.__module__].__doc__ or default).strip().splitlines()[0]


def _trainer_parser(sub, kind: str) -> argparse.ArgumentParser:
    summary = _summary(entry(kind).stage, f"train {kind} end to end")
    first = "" if entry(kind).start_provider else " An SFT stage runs first (or --sft-checkpoint gives its policy)."
    p = sub.add_parser(kind, help=summary, formatter_class=argparse.RawDescriptionHelpFormatter,
                       description=summary + first)
    r = p.add_argument_group("run")
    add_run_options(r, f"run folder (default: runs/{kind})", "continue the run in DIR with its saved options",
                    several_seeds=True)
    r.add_argument("--steps", type=int, default=None, help=HELP["steps"] + "; default from the config")
    if not entry(kind).start_provider:
        controls = entry(kind).controls
        if controls:
            r.add_argument("--control", nargs="?", const="sft", default=None, choices=controls,
                           help="also run a control: 'sft' (the flag alone) spends the same wall-clock on more SFT"
                           + "".join(f"; '{c}': {_summary(stage_entry(c).stage)}" for c in controls if c != "sft"))
        r.add_argument("--sft-checkpoint", default=None, metavar="FILE",
                       help="start from this SFT policy (sft.pt, or a `train sft` checkpoint.pt) "
                            "instead of training SFT")
    for f in dataclasses.fields(configs.RunConfig):
        if f.name in RUN_FIELDS:
            _add_field(r, "run", f, "--" + f.name.replace("_", "-"))
    own = p.add_argument_group(f"{kind} options")
    for f in dataclasses.fields(entry(kind).config):
        if f.name != "steps":
            _add_field(own, kind, f, "--" + f.name.replace("_", "-"))
    if not entry(kind).start_provider:
        sft = p.add_argument_group("SFT stage options")
        for f in dataclasses.fields(configs.SFTConfig):
            _add_field(sft, "sft", f, "--sft-" + f.name.replace("_", "-"))
    for section, cls in (("task", configs.TaskConfig), ("model", configs.ModelConfig)):
        g = p.add_argument_group(f"{section} options")
        for f in dataclasses.fields(cls):
            name = "task-seed" if (section, f.name) == ("task", "seed") else f.name.replace("_", "-")
            _add_field(g, section, f, "--" + name)
    return p


def add_run_options(group, out_help: str, resume_help: str, several_seeds: bool = False) -> None:
    """The options every ``train`` command shares: the config, the folder, resuming, seed, device, threads, progress
    (``several_seeds``: ``--seed`` takes a list, run side by side)."""
    group.add_argument("--config", default="cpu", choices=tuple(configs.CONFIGS), help="named config (default: cpu)")
    group.add_argument("--out", default=None, help=out_help)
    group.add_argument("--overwrite", action="store_true", help="replace what --out holds")
    group.add_argument("--resume", default=None, metavar="DIR", help=resume_help)
    if several_seeds:
        group.add_argument("--seed", type=seed_value, nargs="+", default=[0], metavar="SEED",
                           help="training seed (default: 0); several (--seed 0 1 2) run side by side, one process and "
                                "one thread each (at most the cores), into OUT/seed-N, and print the paired verdicts")
    else:
        group.add_argument("--seed", type=seed_value, default=0, help="training seed (default: 0)")
    group.add_argument("--device", default="auto", choices=DEVICES, help="default: auto (CUDA, then MPS, else CPU)")
    group.add_argument("--threads", type=int, default=DEFAULT_THREADS,
                       help=f"CPU threads for torch (default: {DEFAULT_THREADS}; see benchmarks/tinygpt_threads.py)")
    group.add_argument("--no-progress", action="store_true", help="hide the progress bars")


def _recipe_parser(sub) -> None:
    """``train recipe`` (``course_lib.run.recipes``): stages chained, each from the last one's policy."""
    names = "; ".join(f"{k}: {v[1]}" for k, v in recipes.RECIPES.items())
    p = sub.add_parser("recipe", help="train a recipe: stages chained, each from the last one's policy",
                       description=f"Run a post-training recipe. Named recipes: {names}. "
                                   f"Stages: {', '.join(recipes.stage_kinds())}.")
    p.add_argument("recipe", nargs="?", default=None,
                   help=f"a named recipe {tuple(recipes.RECIPES)} or stages 'sft:steps=300:task.n_demos=200,grpo'")
    p.add_argument("--stages", default=None, metavar="LIST|FILE",
                   help="your own stages: 'sft,grpo:steps=100' or a JSON file with a list of {\"kind\": …, option: "
                        "value}")
    add_run_options(p, "recipe folder (default: runs/recipe-NAME)",
                    "continue the recipe in DIR after its last finished stage")
    p.add_argument("--until", type=int, default=None, metavar="N", help="stop after stage N (--resume continues)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m course_lib", description="Train the course's tiny GPT.")
    sub = parser.add_subparsers(dest="command", required=True)
    tr = sub.add_parser("train", help="train the tiny GPT: one trainer, or a recipe of stages")
    kinds = tr.add_subparsers(dest="kind", required=True)
    for kind in trainers():
        _trainer_parser(kinds, kind)
    _recipe_parser(kinds)  # train recipe r1 | --stages sft,grpo,rft,grpo
    return parser


def apply_overrides(cfg: configs.RunConfig, values: dict) -> configs.RunConfig:
    """Put ``{"grpo.beta": 0.1, "run.max_grad_norm": 0.5, …}`` into the config."""
    for key, value in values.items():
        configs.set_option(cfg, *key.split("."), None if value is NONE_GIVEN else value)
    return cfg


def exit_code(command) -> int:
    """Run ``command()`` under the Ctrl-C handler; the exit code every ``train`` command returns.

    0 (or what ``command`` returns), 130 on a stop request (the first Ctrl-C saved a checkpoint)
    or a second Ctrl-C, 1 when the rollout worker failed (the completed steps are saved), 2 on
    bad input (the error printed).
    """
    try:
        with stop_on_interrupt():
            return command() or 0
    except Interrupted:
        return 130
    except KeyboardInterrupt:  # a second Ctrl-C: at once, without finishing the step in progress
        print("error: stopped at once by a second Ctrl-C; the last checkpoint written is kept", file=sys.stderr)
        return 130
    except StepFailed as err:  # the rollout worker failed; the completed steps are saved
        print(f"error: {err}", file=sys.stderr)
        return 1
    except (ValueError, FileNotFoundError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def train(args: dict) -> int:
    """``train KIND``: a run of ``pipeline.run`` from parsed arguments."""
    overrides = {k: v for k, v in args.items() if "." in k and v is not None}
    check_threads(args["threads"])
    if args["resume"]:
        if overrides or args.get("sft_checkpoint"):
            raise ValueError("--resume continues a run with its saved options; only --steps may change")
        cfg, out = None, args["resume"]
    else:
        cfg = configs.validate(apply_overrides(configs.get_config(args["config"]), overrides))  # checked as built
        out = args["out"] or f"runs/{args['kind']}"
    seeds = args["seed"]
    if len(seeds) > 1:
        return several_seeds(args, cfg, out, seeds)
    run(args["kind"], cfg, out, device=args["device"], seed=seeds[0], steps=args["steps"],
        control=args.get("control"), resume=bool(args["resume"]), sft_checkpoint=args.get("sft_checkpoint"),
        overwrite=args["overwrite"], threads=args["threads"], show_progress=not args["no_progress"])
    return 0


def several_seeds(args: dict, cfg, out, seeds: list[int]) -> int:
    """``--seed A B …``: the seeds side by side (``run_seeds``), then the per-seed summary and the verdicts."""
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"--seed must list distinct seeds (a repeated seed is the same run; {SEED_ACCEPTS}); "
                         f"got {' '.join(map(str, seeds))}")
    if args["resume"] or args.get("sft_checkpoint"):
        raise ValueError("--seed with several seeds trains each seed from its own start: --resume and "
                         "--sft-checkpoint take one seed's run (resume each OUT/seed-N on its own)")
    if args["threads"] != DEFAULT_THREADS:
        raise ValueError(f"--threads applies to one seed's run; with several seeds each runs on one thread, "
                         f"as many at once as the cores; got --threads {args['threads']}")
    kind = args["kind"]
    processes = min(len(seeds), cores())
    print(f"[course_lib] {kind}, config {cfg.name!r}, seeds {', '.join(map(str, seeds))}: {processes} at a time, "
          f"one process and one CPU thread each, into {Path(out)}/seed-N")
    report = run_seeds(kind, cfg, out, seeds, device=args["device"], steps=args["steps"],
                       control=args.get("control"), overwrite=args["overwrite"], processes=processes)
    for r in report["runs"]:
        control = f", control {r['control_accuracy']:.3f}" if r.get("control_accuracy") is not None else ""
        print(f"[course_lib] seed {r['seed']}: held-out accuracy {r['start_accuracy']:.3f} -> "
              f"{r['final_accuracy']:.3f}{control} ({r['wall_seconds']:.1f} s) in {seed_folder(out, r['seed'])}")
    for line in report["verdicts"]:
        print(f"[course_lib] {line}")
    for s, what in report["stopped"].items():
        print(f"[course_lib] seed {s}: {what}, saved; continue with: {resume_command(kind, seed_folder(out, s))}")
    print(f"[course_lib] wrote {Path(out) / 'seeds.json'} and each seed's summary.json")
    return 130 if report["stopped"] else 0



def train_recipe(args: dict) -> int:
    """``train recipe``: ``recipes.run_recipe`` from parsed arguments; 1 when a stage could not start."""
    check_threads(args["threads"])
    if args["resume"]:
        if args["recipe"] or args["stages"]:
            raise ValueError("--resume continues a recipe with its saved stages; give no recipe and no --stages")
        recipe, cfg, out = None, None, args["resume"]
    else:
        if bool(args["recipe"]) == bool(args["stages"]):
            raise ValueError(f"give a recipe (one of {tuple(recipes.RECIPES)}) or --stages, not both and not neither")
        recipe = args["recipe"] or args["stages"]
        if args["stages"] and Path(args["stages"]).is_file():
            recipe = json.loads(Path(args["stages"]).read_text())
        cfg = configs.get_config(args["config"])
        out = args["out"] or f"runs/recipe-{args['recipe'] or 'custom'}"
    summary = recipes.run_recipe(recipe, cfg, out, seed=args["seed"], device=args["device"], until=args["until"],
                                 resume=bool(args["resume"]), overwrite=args["overwrite"], threads=args["threads"],
                                 show_progress=not args["no_progress"])
    if summary["stopped"]:
        print(f"error: stage {summary['stopped']['stage']} ({summary['stopped']['kind']}) could not start: "
              f"{summary['stopped']['reason']}", file=sys.stderr)
        return 1
    return 0


def main(argv=None) -> int:
    args = vars(build_parser().parse_args(argv))
    return exit_code(lambda: train_recipe(args) if args["kind"] == "recipe" else train(args))

if __name__ == "__main__":
    sys.exit(main())
