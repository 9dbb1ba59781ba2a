"""The RLHF route on the tiny GPT, over seeds: the reward model against the noise ceiling,
best-of-N against it, PPO with β > 0 against it (over-optimisation), and PPO with a learned
critic against GRPO and RLOO at the same number of sampled completions, and again at matched
optimiser steps and at equal wall-clock.

Per seed: SFT (cpu config), then a reward model (``RewardModelConfig()`` defaults) on noisy
gold-labelled pairs; best-of-N gold and proxy for N = 1 … 64 on held-out prompts; PPO against
the reward model with the KL in the reward (``--overopt-beta``), logging proxy and gold on the
same samples and the sampled KL to the SFT policy every step; GRPO, RLOO and PPO against the
strict checker for ``--rl-steps`` steps of 256 sampled completions each. Best-of-N's KL is exact
for each prompt's empirical distribution of the 64 samples (``empirical_best_of_n_kl``: answers
repeat, so log N − (N − 1)/N is only a bound, also stored).

Three GRPO–PPO comparisons, each named in the table:
- *as configured*: the same steps and 256 sampled completions per step; PPO takes two optimiser
  steps per batch (``num_ppo_epochs=2``) over 256 distinct prompts, GRPO one over 32 prompts × 8;
- *matched optimiser steps and samples*: GRPO with μ = 2 (``num_iterations=2``): the same
  rollouts, two optimiser steps per batch, as PPO;
- *equal wall-clock*: GRPO (μ = 1) for as many steps as fit in PPO's RL seconds, at GRPO's
  measured seconds per step.

Writes ``benchmarks/results/rlhf.json`` (or ``--results``) after every seed (``tables.py``
renders its block in docs/results.md). ``--sft-steps``, ``--rm-steps`` and ``--rm-prompts`` shrink a run for a
quick check; the command line is saved with the results.

Targets: held-out pairwise accuracy >= 90% of the noise ceiling; best-of-16 raises gold
(strict) accuracy over best-of-1; PPO within 10 points of GRPO's held-out accuracy, with the
critic's measured memory and the wall time reported.

    python benchmarks/tinygpt_rlhf.py [--seeds 0 1 2] [--threads 1] [--rl-steps 50] [--sft-dir DIR] [--results DIR]
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import math
import platform
import statistics
import sys
import time
from pathlib import Path

import torch

from course_lib.tinygpt.evaluation import evaluate
from course_lib.tinygpt.model import build_model
from course_lib.tinygpt.rewards import resolve_reward
from course_lib.tinygpt.runtime import MetricsLog
from course_lib.tinygpt.task import AdditionTask
from course_lib.trainers.configs import PPOConfig, RewardModelConfig, get_config
from course_lib.trainers.grpo import train_grpo
from course_lib.trainers.ppo import build_critic, train_ppo
from course_lib.trainers.reward_model import (
    RewardModelScorer,
    best_of_n_curve,
    best_of_n_scores,
    fit_reward_model,
    over_optimisation,
)
from course_lib.trainers.sft import train_sft
from course_lib.trainers.trainer import TrainContext

sys.path.insert(0, str(Path(__file__).resolve().parent))
from writer import RESULTS, record_start, save  # noqa: E402

NS = (1, 2, 4, 8, 16, 32, 64)


def one_seed(seed: int, args) -> dict:
    cfg = get_config("cpu")
    task = AdditionTask(cfg.task)
    torch.manual_seed(seed)
    policy = build_model(cfg.model, task.tokenizer)
    cached = Path(args.sft_dir) / f"sft_s{seed}.pt" if args.sft_dir else None
    if cached is not None and cached.is_file():  # the same SFT run, saved by an earlier call with this --sft-dir
        policy.load_state_dict(torch.load(cached))
        sft = evaluate(policy, task)  # as train_sft evaluates at its end
    else:
        sft = train_sft(policy, task, cfg.sft, TrainContext(steps=args.sft_steps, show_progress=False), seed=seed)
        if cached is not None:
            cached.parent.mkdir(parents=True, exist_ok=True)
            torch.save(policy.state_dict(), cached)
    sft_weights = copy.deepcopy(policy.state_dict())
    strict = resolve_reward("strict", task)

    rm_cfg = RewardModelConfig()
    rm_cfg = dataclasses.replace(rm_cfg, steps=args.rm_steps or rm_cfg.steps,
                                 pair_prompts=args.rm_prompts or rm_cfg.pair_prompts)
    rm = fit_reward_model(policy, task, rm_cfg, seed=seed)
    scorer = RewardModelScorer(rm["model"], task)
    torch.manual_seed(seed)
    proxy, gold, ids = best_of_n_scores(policy, task, task.heldout_pairs[: args.bon_prompts], scorer, k=max(NS))
    out = {"seed": seed, "sft_accuracy": sft["accuracy"], "rm": rm["metrics"],
           "bon": best_of_n_curve(proxy, gold, NS, ids=ids),
           "overopt": [], "rl": {}}

    for beta in args.overopt_beta:  # RL against the learned reward model, KL in the reward
        policy.load_state_dict(sft_weights)
        torch.manual_seed(seed)
        critic = build_critic(policy, task.tokenizer)
        log = MetricsLog()
        pcfg = PPOConfig(steps=args.overopt_steps, batch_prompts=args.overopt_prompts, kl_coef=beta,
                         eval_every=args.overopt_steps)
        t0 = time.perf_counter()
        train_ppo(policy, critic, task, pcfg, scorer, TrainContext(log=log, show_progress=False),
                  generator=torch.Generator().manual_seed(seed + 1), gold_fn=strict, track_kl=True)
        rows = [{"step": r["step"], "proxy": r["reward_mean"], "gold": r["gold_mean"], "kl": r["kl_sequence"]}
                for r in log.rows]
        out["overopt"].append({"beta": beta, "steps": args.overopt_steps, "batch_prompts": args.overopt_prompts,
                               "rows": rows, "heldout_accuracy": log.rows[-1]["accuracy"],
                               "seconds": time.perf_counter() - t0, **over_optimisation(rows)})

    grpo_cfg = dataclasses.replace(cfg.grpo, steps=args.rl_steps, eval_every=args.rl_steps)
    L = grpo_cfg.max_completion_length
    samples = grpo_cfg.batch_prompts * grpo_cfg.num_generations

    def grpo_run(**overrides):
        gcfg = dataclasses.replace(grpo_cfg, **overrides)
        policy.load_state_dict(sft_weights)
        torch.manual_seed(seed)
        res = train_grpo(policy, task, gcfg, TrainContext(show_progress=False),
                         generator=torch.Generator().manual_seed(seed + 1))
        return {"accuracy": evaluate(policy, task, max_completion_length=L)["accuracy"],
                "rl_seconds": res["rl_seconds"],
                "steps": gcfg.steps, "optimizer_steps": gcfg.steps * gcfg.num_iterations,
                "samples": gcfg.steps * samples}

    for name, advantage in (("GRPO", "grpo"), ("RLOO", "rloo")):
        out["rl"][name] = grpo_run(advantage=advantage)
    policy.load_state_dict(sft_weights)
    torch.manual_seed(seed)
    ppo_cfg = PPOConfig(steps=args.rl_steps, batch_prompts=grpo_cfg.batch_prompts * grpo_cfg.num_generations,
                        eval_every=args.rl_steps, max_completion_length=L)
    critic = build_critic(policy, task.tokenizer)
    res = train_ppo(policy, critic, task, ppo_cfg, strict, TrainContext(show_progress=False),
                    generator=torch.Generator().manual_seed(seed + 1))
    mem = res["memory"]
    out["rl"]["PPO"] = {"accuracy": evaluate(policy, task, max_completion_length=L)["accuracy"],
                        "rl_seconds": res["rl_seconds"],
                        "bytes": mem["policy"]["total"] + mem["critic"]["total"],
                        "critic_bytes": mem["critic"]["total"],
                        "policy_bytes": mem["policy"]["total"], "steps": args.rl_steps,
                        "optimizer_steps": args.rl_steps * ppo_cfg.num_ppo_epochs, "samples": args.rl_steps * samples}
    # matched: GRPO's two passes over each batch give PPO's optimiser steps on the same samples
    out["rl"]["GRPO, matched optimiser steps"] = grpo_run(num_iterations=ppo_cfg.num_ppo_epochs)
    # equal wall-clock: as many GRPO steps as fit in PPO's RL seconds, at GRPO's measured pace
    pace = out["rl"]["GRPO"]["rl_seconds"] / args.rl_steps
    out["rl"]["GRPO, PPO's wall-clock"] = grpo_run(steps=max(1, round(out["rl"]["PPO"]["rl_seconds"] / pace)))
    for name in out["rl"]:  # the same policy and AdamW, measured in the PPO run; no critic (beta = 0: no reference)
        if name != "PPO":
            out["rl"][name]["bytes"] = mem["policy"]["total"]
    return out


def print_seed(r: dict) -> None:
    m, b, rl = r["rm"], {row["n"]: row for row in r["bon"]}, r["rl"]
    print(f"seed {r['seed']}: SFT {r['sft_accuracy']:.3f}; RM held-out {m['heldout_accuracy']:.3f} of ceiling "
          f"{m['noise_ceiling']:.3f} = {m['of_ceiling']:.1%} (gold {m['heldout_gold_accuracy']:.3f}, ECE "
          f"{m['ece']:.3f}, {m['train_pairs']} pairs, {m['train_seconds']:.0f} s); BoN gold "
          + " ".join(f"{n}:{b[n]['gold']:.3f}" for n in NS))
    for o in r["overopt"]:
        print(f"  PPO vs RM, beta={o['beta']}: proxy {o['proxy_start']:+.2f} → {o['proxy_end']:+.2f}; gold "
              f"{o['gold_start']:.3f} → peak {o['gold_peak']:.3f} (step {o['peak_step']}, √KL "
              f"{o['sqrt_kl_peak']:.2f}) → {o['gold_end']:.3f}; √KL end {o['sqrt_kl_end']:.2f}")
    print("  " + "; ".join(f"{k} {v['accuracy']:.3f} in {v['rl_seconds']:.0f} s" for k, v in rl.items())
          + f"; critic {rl['PPO']['critic_bytes'] / 2**20:.2f} MiB", flush=True)


def print_medians(results: list[dict]) -> None:
    def med(f):
        return statistics.median(f(r) for r in results)

    print(f"\nmedian over {len(results)} seeds:")
    print(f"reward model: held-out pairwise accuracy {med(lambda r: r['rm']['heldout_accuracy']):.3f}, noise ceiling "
          f"{med(lambda r: r['rm']['noise_ceiling']):.3f}, {med(lambda r: r['rm']['of_ceiling']):.1%} of the ceiling")
    bon = {n: med(lambda r, n=n: next(x["gold"] for x in r["bon"] if x["n"] == n)) for n in NS}
    print("best-of-N gold: " + ", ".join(f"N={n} {g:.3f}" for n, g in bon.items()))
    for k in results[0]["rl"]:
        print(f"{k}: held-out {med(lambda r, k=k: r['rl'][k]['accuracy']):.3f} in "
              f"{med(lambda r, k=k: r['rl'][k]['rl_seconds']):.0f} s")


def main() -> None:
    record_start()  # the commit and sources digest of the code that runs: the code now
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rl-steps", type=int, default=50, help="GRPO/RLOO/PPO steps against the strict checker")
    parser.add_argument("--bon-prompts", type=int, default=200)
    parser.add_argument("--overopt-beta", type=float, nargs="+", default=[0.05, 0.5],
                        help="kl_coef of PPO against the RM")
    parser.add_argument("--overopt-steps", type=int, default=60)
    parser.add_argument("--overopt-prompts", type=int, default=128)
    parser.add_argument("--sft-dir", default=None, help="cache the SFT policy of each seed here (reused when present)")
    parser.add_argument("--sft-steps", type=int, default=None, help="SFT steps (default: the cpu config's)")
    parser.add_argument("--rm-steps", type=int, default=None, help="reward-model steps (default: RewardModelConfig's)")
    parser.add_argument("--rm-prompts", type=int, default=None,
                        help="reward-model pair prompts (default: RewardModelConfig's)")
    parser.add_argument("--results", default=str(RESULTS), help="folder for rlhf.json")
    args = parser.parse_args()
    if any(b <= 0 or not math.isfinite(b) for b in args.overopt_beta):
        parser.error("--overopt-beta values must be > 0 (the over-optimisation runs are about the KL term)")
    torch.set_num_threads(args.threads)
    results = []
    for seed in args.seeds:
        results.append(one_seed(seed, args))
        print_seed(results[-1])
        save("rlhf", ["tinygpt_rlhf.py", *sys.argv[1:]], results, Path(args.results), rl_steps=args.rl_steps,
             completions_per_step=256,
             machine=f"{platform.machine()}, {args.threads} thread(s), shared 2-core CPU")
    print_medians(results)


if __name__ == "__main__":
    main()
