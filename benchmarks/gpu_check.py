"""The ``gpu`` config on a CUDA device: time, held-out accuracy, tokens/s and MFU (issue 17, item 6).

Prepared for the first run that has a GPU; the README says "unmeasured" until its output replaces
that line. Per seed it runs ``pipeline.run("grpo", get_config("gpu"), device="cuda")`` (SFT stage,
then GRPO, bf16 autocast) and, with ``--trl``, the same recipe through TRL's GRPOTrainer
(``course_lib.trl_bridge``) from a fresh SFT start. Prints medians over seeds and writes
``OUT/gpu_check.json``.

MFU is an estimate, said out loud: FLOPs per GRPO step ≈ 6·N·(tokens in the update) + 2·N·(tokens
generated), N the parameter count (attention's quadratic term is negligible at these lengths),
divided by the step's wall time and by the device's dense bf16 peak (``--peak-tflops``, or a
table of common datacenter GPUs by name).

    python benchmarks/gpu_check.py [--seeds 0 1 2] [--trl] [--peak-tflops 989]

Without CUDA it prints why and exits 0.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

from course_lib.configs import get_config
from course_lib.pipeline import run

PEAK_BF16_TFLOPS = {"H200": 989.0, "H100": 989.0, "A100": 312.0, "L4": 121.0, "A10G": 125.0, "T4": 65.0}


def peak_flops(override: float | None) -> float | None:
    if override:
        return override * 1e12
    name = torch.cuda.get_device_name()
    return next((tf * 1e12 for key, tf in PEAK_BF16_TFLOPS.items() if key in name), None)


def course_run(cfg, out: Path, seed: int, device: str = "cuda") -> dict:
    summary = run("grpo", cfg, out, device=device, seed=seed, overwrite=True, show_progress=False, verbose=False)
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    n, g = summary["n_params"], cfg.grpo
    prompt_len = 3 + 2 * cfg.task.digits
    flops = sum(6 * n * r["groups_used"] * g.num_generations * (prompt_len + r["completion_length"])
                + 2 * n * r["generated_tokens"] for r in rows)
    return {
        "sft_accuracy": summary["sft_accuracy"], "final_accuracy": summary["final_accuracy"],
        "rl_seconds": summary["rl_seconds"], "sft_seconds": summary["sft_seconds"],
        "tokens_per_second": statistics.median(r["tokens_per_second"] for r in rows),
        "achieved_flops": flops / summary["rl_seconds"],
    }


def trl_run(cfg, out: Path, seed: int, device: str = "cuda") -> dict:
    from course_lib import trl_bridge
    from course_lib.evaluation import evaluate
    from course_lib.pipeline import rl_generator, sft_policy

    trl_bridge.quiet()
    task, model, _ = sft_policy(cfg, seed=seed, device=device, show_progress=False)
    rl_generator(seed)
    trainer, _ = trl_bridge.make_trainer("grpo", model, task, cfg, seed=seed + 1, output_dir=str(out))
    start = time.perf_counter()
    trainer.train()
    if device == "cuda":
        torch.cuda.synchronize()
    return {"final_accuracy": evaluate(model, task, max_completion_length=cfg.grpo.max_completion_length)["accuracy"],
            "rl_seconds": time.perf_counter() - start}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--trl", action="store_true", help="also run the bridged TRL GRPOTrainer")
    parser.add_argument("--peak-tflops", type=float, default=None, help="the device's dense bf16 peak")
    parser.add_argument("--out", default="runs/gpu_check")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("skipped: no CUDA device (the gpu config's numbers stay unmeasured)")
        return
    cfg = get_config("gpu")
    peak = peak_flops(args.peak_tflops)
    results = {"device": torch.cuda.get_device_name(), "peak_flops": peak, "course": [], "trl": []}
    for seed in args.seeds:
        r = course_run(cfg, Path(args.out) / f"course_s{seed}", seed)
        results["course"].append(r)
        mfu = f", MFU ≈ {r['achieved_flops'] / peak:.2%}" if peak else ""
        print(f"seed {seed}: SFT {r['sft_accuracy']:.3f} → GRPO {r['final_accuracy']:.3f} in {r['rl_seconds']:.0f} s "
              f"(SFT {r['sft_seconds']:.0f} s), {r['tokens_per_second']:,.0f} generated tokens/s{mfu}", flush=True)
        if args.trl:
            t = trl_run(cfg, Path(args.out) / f"trl_s{seed}", seed)
            results["trl"].append(t)
            print(f"seed {seed}: TRL GRPOTrainer → {t['final_accuracy']:.3f} in {t['rl_seconds']:.0f} s", flush=True)
    med = statistics.median
    c = results["course"]
    line = (f"{results['device']}, gpu config, medians over seeds {args.seeds}: SFT {med(r['sft_accuracy'] for r in c):.1%} → "
            f"GRPO {med(r['final_accuracy'] for r in c):.1%} in {med(r['rl_seconds'] for r in c):.0f} s of RL, "
            f"{med(r['tokens_per_second'] for r in c):,.0f} generated tokens/s")
    if peak:
        line += f", MFU ≈ {med(r['achieved_flops'] for r in c) / peak:.2%} (estimate, see docstring)"
    print(line)
    Path(args.out).mkdir(parents=True, exist_ok=True)
    (Path(args.out) / "gpu_check.json").write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
