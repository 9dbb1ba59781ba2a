"""Offline DPO on the default CPU config: plain DPO, DPO + NLL (rpo_alpha=1) and NLL only, medians
over seeds.

Target: plain DPO (no NLL term) ≥ 10 points over the SFT baseline in ≤ 120 s. The
DPO + NLL row shows how much the NLL term adds, and **NLL only** (notebook 08_tiny_gpt_dpo §6–§8) what the NLL
term does by itself: SFT on the chosen answers of the same pairs (the DPO run's SFT policy and
generator, so the same pairs), with DPO's steps, batch size and learning rate; its seconds, like
DPO's, count sampling the pairs.

**KTO** (``course_lib.trainers.kto``) trains on the same pairs taken apart (each chosen answer desirable,
each rejected one undesirable), from the same SFT policy, for DPO's steps on as many answers per
step as DPO has completions. **ORPO** (``course_lib.trainers.orpo``) trains on the same pairs from the *base*
model in one stage, for SFT's + DPO's steps; its ``sft_accuracy`` is the SFT policy that sampled the
pairs, and its seconds do not count that SFT stage (the pairs are its given dataset).
Reuses ``runs/bench/grpo_s<seed>/sft.pt`` when the GRPO benchmark has written it.

    python benchmarks/tinygpt_dpo.py [--seeds 0 1 2] [--threads 1] [--results DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import sys
import time
from pathlib import Path

from course_lib.run.pipeline import build_policy, rl_generator, run
from course_lib.tinygpt.evaluation import evaluate
from course_lib.tinygpt.runtime import DEFAULT_THREADS, load_checkpoint, set_threads
from course_lib.trainers.configs import get_config
from course_lib.trainers.dpo import build_preference_pairs
from course_lib.trainers.sft import train_sft
from course_lib.trainers.trainer import TrainContext

sys.path.insert(0, str(Path(__file__).resolve().parent))
from writer import RESULTS, record_start, save  # noqa: E402


def nll_only(cfg, sft_path: Path, seed: int) -> dict:
    """SFT on the chosen answers of the pairs the DPO run of this seed trained on (same SFT policy, same generator)."""
    task, model = build_policy(cfg, seed=seed)
    model.load_state_dict(load_checkpoint(sft_path, kind="sft")["model"])
    sft = evaluate(model, task)
    gen = rl_generator(seed)
    t0 = time.perf_counter()
    data = build_preference_pairs(model, task, cfg.dpo, generator=gen, show_progress=False)
    nll_cfg = dataclasses.replace(cfg.sft, steps=cfg.dpo.steps, learning_rate=cfg.dpo.learning_rate,
                                  batch_size=cfg.dpo.batch_size, eval_every=cfg.dpo.eval_every)
    train_sft(model, task, nll_cfg, TrainContext(max_grad_norm=cfg.max_grad_norm, show_progress=False, threads=None),
              generator=gen, eval_at_end=False,
              demos=(data["chosen_ids"], data["chosen_attention"], data["chosen_completion"]))
    return {"sft_accuracy": sft["accuracy"], "final_accuracy": evaluate(model, task)["accuracy"],
            "rl_seconds": time.perf_counter() - t0}


def main() -> None:
    record_start()  # the commit and sources digest of the code that runs: the code now
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=DEFAULT_THREADS)
    parser.add_argument("--out", default="runs/bench")
    parser.add_argument("--results", default=str(RESULTS), help="folder for dpo.json")
    args = parser.parse_args()
    results, runs = {"DPO": [], "DPO + NLL": [], "NLL only": [], "KTO": [], "ORPO": []}, []

    def record(name: str, seed: int, s: dict) -> None:  # one run's numbers: kept, saved, printed
        results[name].append((s["sft_accuracy"], s["final_accuracy"], s["rl_seconds"]))
        runs.append({"variant": name, "seed": seed, "sft_accuracy": s["sft_accuracy"],
                     "final_accuracy": s["final_accuracy"], "rl_seconds": s["rl_seconds"]})
        save("dpo", ["tinygpt_dpo.py", *sys.argv[1:]], runs, Path(args.results))
        print(f"seed {seed} {name:9}: SFT {s['sft_accuracy']:.3f} → {s['final_accuracy']:.3f} "
              f"({100 * (s['final_accuracy'] - s['sft_accuracy']):+.1f} pts) in {s['rl_seconds']:.0f} s", flush=True)

    for seed in args.seeds:
        sft = Path(f"{args.out}/grpo_s{seed}/sft.pt")
        for name, alpha in (("DPO", 0.0), ("DPO + NLL", 1.0)):
            cfg = get_config("cpu")
            cfg.dpo.rpo_alpha = alpha
            s = run("dpo", cfg, f"{args.out}/dpo{'_nll' if alpha else ''}_s{seed}", seed=seed,
                    sft_checkpoint=str(sft) if sft.exists() else None, overwrite=True, threads=args.threads,
                    show_progress=False, verbose=False)
            record(name, seed, s)
        for name, kind in (("KTO", "kto"), ("ORPO", "orpo")):
            s = run(kind, get_config("cpu"), f"{args.out}/{kind}_s{seed}", seed=seed,
                    sft_checkpoint=str(Path(f"{args.out}/dpo_s{seed}/sft.pt")), overwrite=True, threads=args.threads,
                    show_progress=False, verbose=False)
            record(name, seed, s)
        set_threads(args.threads)
        s = nll_only(get_config("cpu"), Path(f"{args.out}/dpo_s{seed}/sft.pt"), seed)
        results["NLL only"].append((s["sft_accuracy"], s["final_accuracy"], s["rl_seconds"]))
        runs.append({"variant": "NLL only", "seed": seed, **s})
        save("dpo", ["tinygpt_dpo.py", *sys.argv[1:]], runs, Path(args.results))
        print(f"seed {seed} NLL only : SFT {s['sft_accuracy']:.3f} → {s['final_accuracy']:.3f} "
              f"({100 * (s['final_accuracy'] - s['sft_accuracy']):+.1f} pts) in {s['rl_seconds']:.0f} s", flush=True)
    print()
    for name, rows in results.items():
        lift = statistics.median(100 * (f - b) for b, f, _ in rows)
        print(f"median over {len(rows)} seeds, {name:9}: SFT {statistics.median(r[0] for r in rows):.3f} → "
              f"{statistics.median(r[1] for r in rows):.3f} (lift {lift:+.1f} pts), "
              f"{statistics.median(r[2] for r in rows):.0f} s")


if __name__ == "__main__":
    main()
