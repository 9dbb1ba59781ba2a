"""The GRPO update's achieved FLOP/s against this machine's measured matmul FLOP/s.

One GRPO policy step (B = 32 × G = 8 on the ``cpu`` config, μ = 1, β = 0) from a short SFT
start: its floating-point operations are counted exactly by ``torch.utils.flop_counter``
(forward and backward matmuls), its time is the median of several steps. The machine's matmul
rate is measured on the same thread count twice: a large square float32 matmul (the best this
CPU does) and matmuls of the update's own shapes (tokens × width). Also times the update with
and without sharing each prompt's forward across its group (``group_size``). Noisy on a loaded
machine: read the ratios, not the seconds.

    python benchmarks/tinygpt_update_flops.py [--repeats 7] [--threads 1] [--sft-steps 300]
"""

from __future__ import annotations

import argparse
import dataclasses
import statistics
import time

import torch
from torch.utils.flop_counter import FlopCounterMode

from course_lib.run.pipeline import rl_generator, sft_policy
from course_lib.tinygpt.rewards import resolve_reward
from course_lib.tinygpt.rollout import collect_rollouts
from course_lib.tinygpt.runtime import make_optimizer, set_threads
from course_lib.trainers.configs import get_config
from course_lib.trainers.grpo import policy_step
from course_lib.trainers.trainer import TrainContext


def matmul_rate(m: int, k: int, n: int, repeats: int) -> float:
    a, b = torch.randn(m, k), torch.randn(k, n)
    for _ in range(3):
        a @ b
    calls = max(1, int(2e8 // (2 * m * k * n)))
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            a @ b
        times.append(time.perf_counter() - t0)
    return 2 * m * k * n * calls / statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sft-steps", type=int, default=300)
    args = parser.parse_args()
    set_threads(args.threads)
    cfg = get_config("cpu")
    task, model, _ = sft_policy(cfg, TrainContext(steps=args.sft_steps, show_progress=False, threads=args.threads),
                                seed=0, device="cpu", eval_at_end=False)
    batch = collect_rollouts(model, task, cfg.grpo, rl_generator(0), resolve_reward("strict", task))["batch"]
    tokens = int(batch["completion_mask"].sum())
    model.train()
    opt = make_optimizer(model, cfg.grpo.learning_rate)

    def step(share: bool):
        gcfg = dataclasses.replace(cfg.grpo, share_prompt=share)
        return policy_step(model, None, opt, batch, gcfg, prompt_length=task.prompt_length, max_grad_norm=1.0,
                           validate=False)

    with FlopCounterMode(display=False) as counter:
        step(True)
    shared_flops = counter.get_total_flops()
    with FlopCounterMode(display=False) as counter:
        step(False)
    full_flops = counter.get_total_flops()
    times = {True: [], False: []}
    for _ in range(args.repeats):
        for share in (True, False):
            t0 = time.perf_counter()
            step(share)
            times[share].append(time.perf_counter() - t0)
    t_shared, t_full = statistics.median(times[True]), statistics.median(times[False])
    rows, width = batch["input_ids"].numel(), cfg.model.n_embd
    peak = matmul_rate(1024, 1024, 1024, args.repeats)
    shaped = matmul_rate(rows, width, 3 * width, args.repeats)
    n = batch["input_ids"].shape[0]
    print(f"update of {n} completions ({tokens} completion tokens), {args.threads} thread(s), median of "
          f"{args.repeats}:")
    print(f"  prompt forward shared per group: {t_shared * 1e3:.0f} ms, {shared_flops / 1e9:.2f} GFLOP "
          f"→ {shared_flops / t_shared / 1e9:.2f} GFLOP/s")
    print(f"  every row runs its prompt:       {t_full * 1e3:.0f} ms, {full_flops / 1e9:.2f} GFLOP "
          f"→ {full_flops / t_full / 1e9:.2f} GFLOP/s  (sharing: {t_full / t_shared:.2f}× faster)")
    print(f"  machine matmul, float32: {peak / 1e9:.1f} GFLOP/s at 1024³, {shaped / 1e9:.1f} GFLOP/s at the update's "
          f"shape ({rows}×{width} · {width}×{3 * width})")
    print(f"  achieved / peak: {shared_flops / t_shared / peak:.0%} (vs same-shape matmul: "
          f"{shared_flops / t_shared / shaped:.0%})")


if __name__ == "__main__":
    main()
