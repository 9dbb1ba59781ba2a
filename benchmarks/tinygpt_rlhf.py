"""The RLHF route on the tiny GPT: reward-model accuracy against the noise ceiling, best-of-N
against it, and PPO with a learned critic against GRPO and RLOO at the same number of sampled
completions. Prints per-seed lines and medians over seeds (single runs mislead).

Targets (issue 13): held-out pairwise accuracy >= 90% of the noise ceiling; best-of-16 raises gold
(strict) accuracy over best-of-1; PPO within 10 points of GRPO's held-out accuracy, with the
critic's measured memory and the wall time reported.

    python benchmarks/tinygpt_rlhf.py [--seeds 0 1 2] [--threads 1] [--rl-steps 300] [--json out.json]
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import statistics

import torch

from course_lib.configs import PPOConfig, RewardModelConfig, get_config
from course_lib.evaluation import evaluate
from course_lib.grpo import train_grpo
from course_lib.model import build_model
from course_lib.ppo import build_critic, train_ppo
from course_lib.reward_model import (
    RewardModelScorer,
    best_of_n_curve,
    best_of_n_scores,
    fit_reward_model,
)
from course_lib.rewards import resolve_reward
from course_lib.sft import train_sft
from course_lib.task import AdditionTask

NS = (1, 2, 4, 8, 16, 32, 64)


def one_seed(seed: int, rl_steps: int, bon_prompts: int) -> dict:
    cfg = get_config("cpu")
    task = AdditionTask(cfg.task)
    torch.manual_seed(seed)
    policy = build_model(cfg.model, task.tokenizer)
    sft = train_sft(policy, task, cfg.sft, seed=seed, show_progress=False)
    sft_weights = copy.deepcopy(policy.state_dict())

    rm = fit_reward_model(policy, task, RewardModelConfig(), seed=seed)
    scorer = RewardModelScorer(rm["model"], task)
    torch.manual_seed(seed)
    proxy, gold = best_of_n_scores(policy, task, task.heldout_pairs[:bon_prompts], scorer, k=max(NS))
    bon = best_of_n_curve(proxy, gold, NS)

    out = {"seed": seed, "rl_steps": rl_steps, "sft_accuracy": sft["accuracy"], "rm": rm["metrics"], "bon": bon, "rl": {}}
    grpo_cfg = dataclasses.replace(cfg.grpo, steps=rl_steps, eval_every=rl_steps)
    for name, advantage in (("GRPO", "grpo"), ("RLOO", "rloo")):
        policy.load_state_dict(sft_weights)
        torch.manual_seed(seed)
        res = train_grpo(policy, task, dataclasses.replace(grpo_cfg, advantage=advantage),
                         generator=torch.Generator().manual_seed(seed + 1), show_progress=False)
        out["rl"][name] = {"accuracy": evaluate(policy, task, max_completion_length=grpo_cfg.max_completion_length)["accuracy"],
                           "rl_seconds": res["rl_seconds"]}
    policy.load_state_dict(sft_weights)
    torch.manual_seed(seed)
    ppo_cfg = PPOConfig(steps=rl_steps, batch_prompts=grpo_cfg.batch_prompts * grpo_cfg.num_generations,
                        eval_every=rl_steps, max_completion_length=grpo_cfg.max_completion_length)
    critic = build_critic(policy, task.tokenizer)
    res = train_ppo(policy, critic, task, ppo_cfg, resolve_reward("strict", task), generator=torch.Generator().manual_seed(seed + 1),
                    show_progress=False)
    mem = res["memory"]
    out["rl"]["PPO"] = {"accuracy": evaluate(policy, task, max_completion_length=ppo_cfg.max_completion_length)["accuracy"],
                        "rl_seconds": res["rl_seconds"], "bytes": mem["policy"]["total"] + mem["critic"]["total"],
                        "critic_bytes": mem["critic"]["total"], "policy_bytes": mem["policy"]["total"]}
    for name in ("GRPO", "RLOO"):  # the same policy and AdamW, measured in the PPO run; no critic (beta = 0: no reference)
        out["rl"][name]["bytes"] = mem["policy"]["total"]
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rl-steps", type=int, default=300)
    parser.add_argument("--bon-prompts", type=int, default=200)
    parser.add_argument("--json", default=None, help="also write every number to this file")
    parser.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                        help="print per-seed lines and medians from files written by --json (seeds run in parallel)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    results = []
    if args.merge:
        for path in args.merge:
            with open(path, encoding="utf-8") as fh:
                results += json.load(fh)
    for r in results if args.merge else (one_seed(seed, args.rl_steps, args.bon_prompts) for seed in args.seeds):
        if not args.merge:
            results.append(r)
        seed = r["seed"]
        m, b = r["rm"], {row["n"]: row for row in r["bon"]}
        rl = r["rl"]
        print(f"seed {seed}: SFT {r['sft_accuracy']:.3f}; RM held-out {m['heldout_accuracy']:.3f} of ceiling "
              f"{m['noise_ceiling']:.3f} = {m['of_ceiling']:.1%} (gold {m['heldout_gold_accuracy']:.3f}, ECE {m['ece']:.3f}, "
              f"{m['train_pairs']} pairs); BoN gold " + " ".join(f"{n}:{b[n]['gold']:.3f}" for n in NS) + "; "
              + "; ".join(f"{k} {v['accuracy']:.3f} in {v['rl_seconds']:.0f} s" for k, v in rl.items())
              + f"; critic {rl['PPO']['critic_bytes'] / 2**20:.2f} MiB", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as fh:
            json.dump(results, fh, indent=2)

    def med(f):
        return statistics.median(f(r) for r in results)

    print(f"\nmedian over {len(results)} seeds ({results[0].get('rl_steps', args.rl_steps)} RL steps, 256 sampled completions per step):")
    print(f"reward model: held-out pairwise accuracy {med(lambda r: r['rm']['heldout_accuracy']):.3f}, noise ceiling "
          f"{med(lambda r: r['rm']['noise_ceiling']):.3f}, {med(lambda r: r['rm']['of_ceiling']):.1%} of the ceiling; "
          f"against gold {med(lambda r: r['rm']['heldout_gold_accuracy']):.3f}; ECE {med(lambda r: r['rm']['ece']):.3f}")
    bon = {n: (med(lambda r, n=n: next(x['gold'] for x in r['bon'] if x['n'] == n)),
               med(lambda r, n=n: next(x['proxy'] for x in r['bon'] if x['n'] == n))) for n in NS}
    print("best-of-N (gold strict accuracy / proxy reward): " + ", ".join(f"N={n} {g:.3f}/{p:.2f}" for n, (g, p) in bon.items()))
    print(f"best-of-16 minus best-of-1, gold: {bon[16][0] - bon[1][0]:+.3f}")
    for k in ("GRPO", "RLOO", "PPO"):
        print(f"{k}: held-out {med(lambda r, k=k: r['rl'][k]['accuracy']):.3f} in {med(lambda r, k=k: r['rl'][k]['rl_seconds']):.0f} s, "
              f"trained-model states {med(lambda r, k=k: r['rl'][k]['bytes']) / 2**20:.2f} MiB")
    gap = med(lambda r: r["rl"]["GRPO"]["accuracy"] - r["rl"]["PPO"]["accuracy"])
    share = med(lambda r: r["rl"]["PPO"]["critic_bytes"] / r["rl"]["PPO"]["bytes"])
    print(f"PPO − GRPO: {-100 * gap:+.1f} points; critic = {share:.0%} of PPO's trained-model states "
          f"(+ {med(lambda r: r['rl']['PPO']['critic_bytes']) / 2**20:.2f} MiB); PPO/GRPO time "
          f"{med(lambda r: r['rl']['PPO']['rl_seconds'] / r['rl']['GRPO']['rl_seconds']):.2f}x")


if __name__ == "__main__":
    main()
