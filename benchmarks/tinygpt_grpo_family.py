"""The GRPO family, one change at a time, with the RFT control; medians over seeds.

Every row starts from the same SFT checkpoint of its seed, draws the same prompts (the data
generator is seeded alike) and takes the same number of optimiser steps (``--steps``, 150 by
default: half the ``cpu`` config's 300, so that three seeds of every row fit in about half
an hour on an idle 2-core CPU, and rows still differ in how fast they learn). Rows (notebook 09_tiny_gpt_grpo shows
this table):

setting ``main`` (the ``cpu`` config: SFT 1,200 steps, binary strict checker)
- ``GRPO``: (r − mean)/std, the original response ("sequence") mean, μ = 1;
- ``token mean``: DAPO's/TRL's token-level mean instead (one change);
- ``dynamic sampling``: zero-variance groups replaced by fresh ones (≤ 4 extra rounds), the
  extra generation counted in ``groups_sampled``;
- ``mu=2``: two inner epochs per rollout, half the rollouts (same 300 optimiser steps);
- ``mu=2 + clip-higher``: ε_high = 0.28 on top of μ = 2 (with μ = 1 the ratio is exactly 1,
  so clip-higher alone changes nothing; ``tests/test_rft.py`` checks that);
- ``RFT``: supervised steps on the policy's own checker-approved samples (``course_lib.trainers.rft``);
- ``more SFT``: the same number of steps of SFT on the same flawed demonstrations;
- ``mu=2 + GSPO``: one length-normalised ratio per completion (``importance_sampling_level=
  "sequence"``), beside ``mu=2``; ``mu=2 + CISPO``: the capped importance weight
  (``loss_type="cispo"``, ε_max = 5, token mean);
- ``DAPO (all four)``: clip-higher (ε_high = 0.28, with μ = 2 so that it can act), dynamic
  sampling, token mean and overlong shaping (``soft_punish_cache``: the tokens past the longest
  right answer); ``Dr. GRPO (constant unit)``: no std and the constant denominator.

setting ``weak`` (where the baseline may matter: SFT stopped at 300 steps, fewer right samples)
- ``GRPO`` and ``RFT`` with the strict checker; ``GRPO partial`` with partial credit
  (``reward="partial"``); ``reward-weighted partial``: SFT weighted by the partial reward,
  i.e. the same signal without a baseline or negative samples.

Writes ``benchmarks/results/grpo_family.json`` (every run, its curve, and the command line);
``python benchmarks/tables.py`` turns it into the tables in docs/results.md.

    python benchmarks/tinygpt_grpo_family.py [--seeds 0 1 2] [--threads 1] [--only main]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import platform
import sys
import time
import zlib
from pathlib import Path

import torch

from course_lib.tinygpt.evaluation import evaluate
from course_lib.tinygpt.model import build_model
from course_lib.tinygpt.runtime import MetricsLog
from course_lib.tinygpt.task import AdditionTask
from course_lib.trainers.configs import get_config, validate
from course_lib.trainers.grpo import train_grpo
from course_lib.trainers.rft import train_rft
from course_lib.trainers.sft import train_sft
from course_lib.trainers.trainer import TrainContext

sys.path.insert(0, str(Path(__file__).resolve().parent))
from provenance import record  # noqa: E402

RESULTS = Path(__file__).resolve().parent / "results"

# name -> (trainer, GRPOConfig overrides, share of the optimiser steps taken as rollouts)
MAIN = {
    "GRPO": ("grpo", {}),
    "RFT": ("rft", {}),
    "dynamic sampling": ("grpo", {"zero_variance": "resample"}),
    "mu=2": ("grpo", {"num_iterations": 2}),
    "mu=2 + clip-higher": ("grpo", {"num_iterations": 2, "epsilon_high": 0.28}),
    "token mean": ("grpo", {"unit": "token_mean"}),
    "more SFT": ("sft", {}),
    # the objectives that differ from GRPO only off-policy (μ = 2: at μ = 1 every ratio is 1 and
    # GSPO's and CISPO's gradients are GRPO's), DAPO with all four mechanisms, Dr. GRPO with both changes
    "mu=2 + GSPO": ("grpo", {"num_iterations": 2, "importance_sampling_level": "sequence"}),
    "mu=2 + CISPO": ("grpo", {"num_iterations": 2, "loss_type": "cispo", "epsilon_high": 5.0, "unit": "token_mean"}),
    "DAPO (all four)": ("grpo", {"num_iterations": 2, "epsilon_high": 0.28, "zero_variance": "resample",
                                 "unit": "token_mean", "soft_punish_cache": "spare"}),
    "Dr. GRPO (constant unit)": ("grpo", {"advantage": "dr_grpo", "unit": "constant"}),
}
WEAK = {
    "GRPO": ("grpo", {}),
    "RFT": ("rft", {}),
    "GRPO partial": ("grpo", {"reward": "partial"}),
    "reward-weighted partial": ("rft_weighted", {"reward": "partial"}),
}
FIRST = [("main", "GRPO"), ("main", "RFT"), ("weak", "GRPO partial"), ("weak", "reward-weighted partial"),
         ("weak", "GRPO"), ("weak", "RFT")]
SETTINGS = {"main": {"sft_steps": None, "variants": MAIN}, "weak": {"sft_steps": 300, "variants": WEAK}}
BASE = {"unit": "sequence_mean"}  # the published GRPO objective is the row every other changes


def resolve(cfg, overrides: dict) -> dict:
    """``soft_punish_cache="spare"``: every token past the longest right answer and its <eos> (2 on ``cpu``)."""
    spare = cfg.grpo.max_completion_length - (cfg.task.digits + 2)
    return {k: spare if v == "spare" else v for k, v in overrides.items()}


def sft_start(cfg, task, seed: int, sft_steps: int | None, cache: Path) -> tuple[dict, dict]:
    path = cache / f"sft{sft_steps or cfg.sft.steps}_s{seed}.pt"
    if path.exists():
        saved = torch.load(path, weights_only=True)
        return saved["model"], saved["metrics"]
    torch.manual_seed(seed)
    model = build_model(cfg.model, task.tokenizer)
    train_sft(model, task, cfg.sft, TrainContext(steps=sft_steps, show_progress=False), seed=seed, eval_at_end=False)
    metrics = evaluate(model, task)
    cache.mkdir(parents=True, exist_ok=True)
    torch.save({"model": model.state_dict(), "metrics": metrics}, path)
    return model.state_dict(), metrics


def one_run(cfg, task, weights, seed: int, trainer: str, overrides: dict) -> dict:
    torch.manual_seed(seed)
    model = build_model(cfg.model, task.tokenizer)
    model.load_state_dict(weights)
    gcfg = dataclasses.replace(cfg.grpo, **{**BASE, **overrides})
    validate(dataclasses.replace(cfg, grpo=gcfg))  # each row's combination, refused by name if it has no meaning
    rollouts = gcfg.steps // gcfg.num_iterations  # same optimiser steps for every row
    log = MetricsLog()
    gen = torch.Generator().manual_seed(seed + 1)
    torch.manual_seed(seed)
    if trainer == "sft":
        res = train_sft(model, task, dataclasses.replace(cfg.sft, eval_every=10**9),
                        TrainContext(steps=cfg.grpo.steps, show_progress=False, log=log), seed=seed + 2,
                        eval_at_end=False)
        out = {"steps": res["steps"], "rl_seconds": res["seconds"]}
        for r in log.rows:
            r.update(groups_sampled=0, generated_tokens=0, zero_variance_rate=0.0, reward_mean=None, gen_seconds=0.0)
    elif trainer == "grpo":
        out = train_grpo(model, task, gcfg, TrainContext(log=log, steps=rollouts, show_progress=False), generator=gen)
    else:
        weighting = "reward" if trainer == "rft_weighted" else "filter"
        out = train_rft(model, task, gcfg, TrainContext(log=log, steps=rollouts, show_progress=False), generator=gen,
                        weighting=weighting)
    final = evaluate(model, task, max_completion_length=gcfg.max_completion_length)
    rows = log.rows
    return {
        "final_accuracy": final["accuracy"],
        "final_accuracy_carry": final["accuracy_carry"],
        "final_accuracy_no_carry": final["accuracy_no_carry"],
        "rollouts": out["steps"],
        "optimizer_steps": out["steps"] * (gcfg.num_iterations if trainer == "grpo" else 1),
        "gen_seconds": sum(r["gen_seconds"] for r in rows),
        "update_seconds": sum(r["update_seconds"] for r in rows) if trainer != "sft" else out["rl_seconds"],
        "groups_sampled": sum(r["groups_sampled"] for r in rows),
        "generated_tokens": sum(r["generated_tokens"] for r in rows),
        "rl_seconds": out["rl_seconds"],
        "zero_variance_rate": sum(r["zero_variance_rate"] for r in rows) / len(rows),
        "accuracy_curve": [[r["step"], r["accuracy"]] for r in rows if "accuracy" in r],
        "reward_curve": [r["reward_mean"] for r in rows],
    }


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--only", choices=sorted(SETTINGS), nargs="+", default=sorted(SETTINGS))
    parser.add_argument("--steps", type=int, default=150, help="optimiser steps of every row")
    parser.add_argument("--config", default="cpu", help="named config (test: a seconds-long smoke run)")
    parser.add_argument("--cache", default="runs/bench/family", help="per-run results and SFT checkpoints")
    parser.add_argument("--out", default=str(RESULTS / "grpo_family.json"))
    args = parser.parse_args(argv)
    args.argv = list(argv if argv is not None else sys.argv[1:])
    args.provenance = record()  # the code this process runs: read once, before anything can change it
    torch.set_num_threads(args.threads)
    cfg = get_config(args.config)
    cfg.grpo.steps, cfg.grpo.eval_every = args.steps, 25
    task = AdditionTask(cfg.task)
    # cached runs are reused only for the same config, task data and step budget
    # (and the same code: the sources digest, so an edited course_lib never reuses an old run)
    tag = zlib.crc32(f"{args.config} {args.steps} {task.heldout_pairs} {task.demo_answers} "
                     f"{args.provenance['sources']}".encode())
    cache = Path(args.cache) / f"{tag:08x}"
    cache.mkdir(parents=True, exist_ok=True)
    # Rows in order of what they decide: the RFT control and the baseline's settings first (every
    # seed), then the one-change rows. Results are written after every run, so a stopped
    # benchmark keeps what it measured (and a rerun skips what is cached).
    first = [r for r in FIRST if r[0] in args.only]
    rest = [(s, v) for s in args.only for v in SETTINGS[s]["variants"] if (s, v) not in first]
    runs = []
    for tier in (first, rest):
        for seed in args.seeds:
            for setting, name in tier:
                trainer, overrides = SETTINGS[setting]["variants"][name]
                overrides = resolve(cfg, overrides)
                done = cache / f"{setting}_{name.replace(' ', '_')}_s{seed}.json"
                if done.exists():
                    row = json.loads(done.read_text())
                else:
                    weights, base = sft_start(cfg, task, seed, SETTINGS[setting]["sft_steps"], cache)
                    t0 = time.perf_counter()
                    row = {"setting": setting, "variant": name, "seed": seed, "trainer": trainer,
                           "overrides": {**BASE, **overrides}, "baseline_accuracy": base["accuracy"],
                           "baseline_accuracy_carry": base["accuracy_carry"],
                           **one_run(cfg, task, weights, seed, trainer, overrides)}
                    row["wall_seconds"] = time.perf_counter() - t0
                    done.write_text(json.dumps(row))
                runs.append(row)
                print(f"seed {seed} {setting:4} {name:24} SFT {row['baseline_accuracy']:.3f} → "
                      f"{row['final_accuracy']:.3f}  groups {row['groups_sampled']:5d}  {row['rl_seconds']:.0f} s",
                      flush=True)
                write(args, cfg, runs)
    print(f"wrote {args.out}")


def write(args, cfg, runs) -> None:
    """The results file: every run so far (the table renderer takes medians over what is there)."""
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    Path(args.out).write_text(json.dumps({
        "benchmark": "grpo_family",
        "command": " ".join(["tinygpt_grpo_family.py", *args.argv]),
        **args.provenance,
        "config": args.config,
        "seeds": sorted({r["seed"] for r in runs}),
        "machine": f"{platform.machine()}, {args.threads} thread(s), shared 2-core CPU",
        "grpo_steps": cfg.grpo.steps,
        "runs": runs,
    }, indent=1) + "\n")


if __name__ == "__main__":
    main()
