"""Tools on the tiny GPT: GRPO with the calculator environment against GRPO without it, and
the masking ablation, over seeds (``course_lib.tinygpt.environments``, notebook 15).

Every row of a seed takes the same GRPO (the ``--config`` section, ``--steps`` steps) with the same prompts:

- ``no tool``: GRPO from the seed's shared SFT start (no tool in its vocabulary);
- ``no tool, same extra SFT``: GRPO with the environment from a start grown and trained exactly like the
  tool start but with no tool demonstration (the extra SFT steps alone: the control for the tool start);
- ``tool, few demos``: GRPO with ``--env calculator`` from a rarely-calling tool start: the shared start
  grown by the tool's characters, ``--tool-sft`` SFT steps on the demonstrations, the first ``--tool-demos``
  carry demonstrations of which ask the calculator for ``--tool-call`` (``starts.env_start``);
- ``tool, every carry demo``: the same start recipe with every carry demonstration calling the tool;
- ``tool, every carry demo, env tokens in the loss``: that row with ``mask_env_tokens=False`` (the ablation).

Per run: held-out exact match at the start and the end, on carry and no-carry prompts; how often the
greedy policy calls the tool on carry / no-carry prompts (start, end); the sampled call rate on carry
prompts over the first and the last quarter of the steps; the log-prob the policy gives the tool's answer
on held-out carry prompts (``environments.tool_answer_probe``: what the ablation changes); CPU seconds
of the start's extra SFT (when this run built it) and of GRPO. Writes ``benchmarks/results/tools.json``
after every run; ``python benchmarks/tables.py`` renders its table in docs/results.md.

    python benchmarks/tinygpt_tools.py [--seeds 0 1 2] [--steps 100] [--tool-call ones] [--tool-demos 100]
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from pathlib import Path

import torch

from course_lib.run.starts import env_start, sft_start
from course_lib.tinygpt.environments import TOOL_CALLS, tool_answer_probe
from course_lib.tinygpt.evaluation import evaluate
from course_lib.tinygpt.runtime import MetricsLog, set_threads
from course_lib.trainers.configs import CONFIGS, get_config
from course_lib.trainers.grpo import train_grpo
from course_lib.trainers.trainer import TrainContext

sys.path.insert(0, str(Path(__file__).resolve().parent))
from writer import RESULTS, record_start, save  # noqa: E402

KEYS = ("accuracy", "accuracy_carry", "accuracy_no_carry", "tool_use_carry", "tool_use_no_carry")


def quarter_means(rows: list[dict], key: str) -> tuple[float | None, float | None]:
    """The mean of ``key`` over the first and the last quarter of the training steps (None where never logged)."""
    vals = [r[key] for r in rows if "reward_mean" in r and r.get(key) is not None]
    if not vals:
        return None, None
    k = max(1, len(vals) // 4)
    return sum(vals[:k]) / k, sum(vals[-k:]) / k


def one_run(variant: str, cfg, seed: int, tool_sft: int, **grpo_overrides) -> dict:
    """Start, GRPO and the measurements of one row (see the module docstring)."""
    c0 = time.process_time()
    if cfg.task.env:
        task, model, start = env_start(cfg, seed=seed, steps=tool_sft, verbose=False)
    else:
        task, model, start = sft_start(cfg, seed=seed, verbose=False)
    start_cpu = time.process_time() - c0
    carry_pairs = [p for p in task.heldout_pairs if task.ones_carry(*p)]
    probe_start = tool_answer_probe(model, task, carry_pairs) if cfg.task.env else (None, None)
    log = MetricsLog()
    torch.manual_seed(seed)
    c1 = time.process_time()
    out = train_grpo(model, task, dataclasses.replace(cfg.grpo, **grpo_overrides),
                     TrainContext(log=log, show_progress=False, threads=None),
                     generator=torch.Generator().manual_seed(seed + 1))
    grpo_cpu = time.process_time() - c1
    end = evaluate(model, task)
    probe_end = tool_answer_probe(model, task, carry_pairs) if cfg.task.env else (None, None)
    first, last = quarter_means(log.rows, "tool_call_rate_carry")
    first_nc, last_nc = quarter_means(log.rows, "tool_call_rate_no_carry")
    with_first, with_last = quarter_means(log.rows, "reward_carry_with_tool")
    without_first, without_last = quarter_means(log.rows, "reward_carry_without_tool")
    return {"variant": variant, "seed": seed, "steps": out["steps"],
            **{f"start_{k}": start.get(k) for k in KEYS}, **{f"final_{k}": end.get(k) for k in KEYS},
            "call_rate_carry_first": first, "call_rate_carry_last": last,
            "call_rate_no_carry_first": first_nc, "call_rate_no_carry_last": last_nc,
            "reward_carry_with_tool_first": with_first, "reward_carry_with_tool_last": with_last,
            "reward_carry_without_tool_first": without_first, "reward_carry_without_tool_last": without_last,
            "tool_answer_logprob_start": probe_start[0], "tool_answer_logprob": probe_end[0],
            "tool_answer_own_share": probe_end[1],
            "start_cpu_seconds": start_cpu if not start.get("cached") else None, "grpo_cpu_seconds": grpo_cpu,
            "rl_seconds": out["rl_seconds"]}


def main(argv=None) -> None:
    record_start()  # the commit and sources digest of the code that runs: the code now
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--config", default="cpu", choices=tuple(CONFIGS))
    parser.add_argument("--steps", type=int, default=100, help="GRPO steps of every row")
    parser.add_argument("--tool-call", default="ones", choices=TOOL_CALLS)
    parser.add_argument("--tool-demos", type=int, default=100, help="tool demonstrations of the rarely-calling start")
    parser.add_argument("--tool-sft", type=int, default=150, help="SFT steps that teach the tool (starts.env_start)")
    parser.add_argument("--only", nargs="+", default=None, help="run only these rows")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--results", default=str(RESULTS), help="folder of the JSON (default: benchmarks/results)")
    args = parser.parse_args(argv)
    set_threads(args.threads)
    base = get_config(args.config)
    base.grpo = dataclasses.replace(base.grpo, steps=args.steps, eval_every=args.steps)

    def env_cfg(demos):
        return dataclasses.replace(base, task=dataclasses.replace(base.task, env="calculator", tool_demos=demos,
                                                                  tool_call=args.tool_call))

    rows = {"no tool": (base, {}), "no tool, same extra SFT": (env_cfg(0), {}),
            "tool, few demos": (env_cfg(args.tool_demos), {}),
            "tool, every carry demo": (env_cfg(base.task.n_demos), {}),
            "tool, every carry demo, env tokens in the loss": (env_cfg(base.task.n_demos), {"mask_env_tokens": False})}
    unknown = set(args.only or ()) - set(rows)
    if unknown:
        parser.error(f"--only must name rows among {sorted(rows)}; got {sorted(unknown)}")
    runs = []
    for seed in args.seeds:
        for variant, (cfg, overrides) in rows.items():
            if args.only and variant not in args.only:
                continue
            r = one_run(variant, cfg, seed, args.tool_sft, **overrides)
            runs.append(r)
            print(f"seed {seed} {variant:>46}: {r['start_accuracy']:.3f} -> {r['final_accuracy']:.3f} (carry "
                  f"{r['final_accuracy_carry']:.3f}), tool use on carry {r['start_tool_use_carry']} -> "
                  f"{r['final_tool_use_carry']}, sampled on carry {r['call_rate_carry_first']} -> "
                  f"{r['call_rate_carry_last']}, carry reward with / without a call "
                  f"{r['reward_carry_with_tool_first']} / {r['reward_carry_without_tool_first']} -> "
                  f"{r['reward_carry_with_tool_last']} / {r['reward_carry_without_tool_last']}, "
                  f"GRPO {r['grpo_cpu_seconds']:.0f} CPU s", flush=True)
            save("tools", ["tinygpt_tools.py", *sys.argv[1:]], runs, results=Path(args.results), config=args.config,
                 grpo_steps=args.steps, tool_call=args.tool_call, tool_demos=args.tool_demos, tool_sft=args.tool_sft,
                 threads=args.threads)


if __name__ == "__main__":
    main()
