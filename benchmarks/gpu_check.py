"""The ``gpu`` config on a CUDA device, every trainer: time, held-out accuracy, tokens/s and MFU.

One prepared script for the first run that has a GPU; docs/results.md says "unmeasured" until its JSON
exists. It runs ``pipeline.run(kind, get_config("gpu"), device="cuda")`` for every pipeline
trainer: sft, dpo, grpo, rm, ppo, kto, orpo and judge (each with its own SFT stage; orpo starts from the
base model), the instruct recipe's smoke test (TRL's GRPOTrainer on a tiny random chat model,
``trl_bridge.tiny_instruct_standin``), and on CUDA the launch-bound levers: sampling throughput
at 1×, 4× and 16× the batch (B·G), and the update's forward eager vs
``torch.compile(mode="reduce-overhead")`` (CUDA graphs), and the training notebooks' course path on the
device: each of ``NOTEBOOKS`` run as a script with ``COURSE_FAST=1`` (its first cell picks the GPU and
every model it builds or loads goes to that ``DEVICE``: the shared SFT start, hand-made steps, the
trainers, the evaluations), ``--jobs`` at a time, with a start cache of their own, and GRPO with
notebook 14's rollout worker (K = 1) beside a model on the device. Writes ``OUT/gpu_check.json``.

Time guard: ``--max-seconds`` (default 480 = 8 minutes). sft, dpo, grpo, kto, orpo and judge stop at a
step boundary when their share of the budget is spent (``runtime.request_stop``; the row says
"stopped" and the step reached); rm and ppo cannot stop on request, so they run with capped steps
(``RM_STEPS``, ``PPO_STEPS``); a trainer that would start with too little time left is skipped. The
notebooks run first and share ``NOTEBOOK_SHARE`` of the budget: one still running at its end is killed
and one that would start with less than ``MIN_NOTEBOOK_SECONDS`` left is skipped (each reported so);
``--tiny`` skips them (their FAST runs on the CPU are tests/test_tinygpt_notebooks.py).

MFU: ``course_lib.trainers.utilisation`` (FLOPs counted from the shapes run, against the dense peak of the
exact device for the dtype the run's matmuls use there: the course's, but fp32 for rm and judge, which
run in float32; their seconds are their training's, without sampling and labelling the pairs).

    python benchmarks/gpu_check.py [--max-seconds 480] [--out runs/gpu_check]
    python benchmarks/gpu_check.py --device cpu --tiny      # the code path on the CPU (test config)

Without CUDA (and without ``--device cpu``) it prints why and exits 0.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import torch

from course_lib._validate import number
from course_lib.run.pipeline import run
from course_lib.tinygpt import runtime
from course_lib.tinygpt.task import AdditionTask
from course_lib.trainers.configs import get_config
from course_lib.trainers.utilisation import compute_dtype, peak_flops, run_flops

KINDS = ("sft", "dpo", "grpo", "rm", "ppo", "kto", "orpo", "judge")  # every pipeline trainer (pipeline.KINDS)
STOPPABLE = ("sft", "dpo", "grpo", "kto", "orpo", "judge")
RM_STEPS, PPO_STEPS = 100, 40  # of the gpu config's 500 and 200: they do not stop on request
MIN_START_SECONDS = 20  # a trainer is skipped when less than this is left
# The training notebooks, at COURSE_FAST=1 (18_graduating_to_trl is not here: on a GPU it downloads a 0.5B
# instruct model, which the device machine cannot reach).
NOTEBOOKS = ("08_tiny_gpt_dpo", "09_tiny_gpt_grpo", "10_the_kl_term", "11_reward_hacking", "12_the_rlhf_route",
             "14_rl_as_a_system", "15_environments_and_tools", "16_recipes", "17_ai_feedback")
NOTEBOOK_DIR = Path(__file__).resolve().parents[1] / "notebooks"
NOTEBOOK_SHARE = 0.5  # of --max-seconds
MIN_NOTEBOOK_SECONDS = 30
# the notebook, then its models' devices
PROBE = ("import json, runpy, sys, torch; ns = runpy.run_path(sys.argv[1], run_name='__main__'); "
         "print('MODELS ' + json.dumps({k: str(next(v.parameters()).device) for k, v in ns.items() "
         "if isinstance(v, torch.nn.Module) and any(True for _ in v.parameters())}))")


def _rows(out: Path) -> list[dict]:
    path = out / "metrics.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def trainer_run(kind: str, cfg, out: Path, *, device: str, budget: float, peak: float | None, dtype: str) -> dict:
    """One trainer under a time budget; time, accuracy, tokens/s and MFU from its summary and rows."""
    timer = threading.Timer(budget, runtime.request_stop) if kind in STOPPABLE else None
    start = time.perf_counter()
    stopped = False
    if timer:
        timer.start()
    try:
        summary = run(kind, cfg, out, device=device, seed=0, overwrite=True, show_progress=False, verbose=False)
    except runtime.Interrupted:
        summary, stopped = None, True
    finally:
        if timer:
            timer.cancel()
        runtime.clear_stop()
    wall = time.perf_counter() - start
    rows = _rows(out)
    evals = [r for r in rows if "accuracy" in r]
    seconds = ({"sft": summary["sft_seconds"], "rm": summary.get("reward_model", {}).get("train_seconds"),
                "judge": summary.get("judge", {}).get("train_seconds")}.get(kind)
               or summary["rl_seconds"]) if summary else \
        sum(r.get("update_seconds", 0.0) + r.get("gen_seconds", 0.0) for r in rows)
    vocab = len(AdditionTask(cfg.task).tokenizer)
    flops = run_flops(kind, cfg, rows, vocab=vocab)
    generated = sum(r.get("generated_tokens", 0) for r in rows)
    gen_seconds = sum(r.get("gen_seconds", 0.0) for r in rows)
    return {
        "kind": kind, "stopped": stopped, "steps": len(rows), "wall_seconds": wall, "train_seconds": seconds,
        "accuracy": summary["final_accuracy"] if summary else (evals[-1]["accuracy"] if evals else None),
        "generated_tokens_per_second": generated / gen_seconds if gen_seconds > 0 else None,
        "dtype": dtype, "flops": flops, "mfu": flops / seconds / peak if flops and peak and seconds > 0 else None,
    }


def instruct_smoke(out: Path) -> dict:
    """The instruct recipe's smoke test: TRL's GRPOTrainer, 2 steps, on a tiny random chat model."""
    from course_lib.trl import trl_bridge

    trl_bridge.quiet()
    cfg = get_config("test")
    cfg.grpo = dataclasses.replace(cfg.grpo, steps=2)
    model, tokenizer = trl_bridge.tiny_instruct_standin()
    if torch.cuda.is_available():
        model = model.cuda()
    start = time.perf_counter()
    trainer, _ = trl_bridge.instruct_recipe(model, tokenizer, AdditionTask(cfg.task), cfg, output_dir=str(out))
    trainer.train()
    return {"steps": trainer.state.global_step, "seconds": time.perf_counter() - start}


def notebook_path(source: Path, out: Path, timeout: float) -> dict:
    """A training notebook's course path: its Jupytext source run as a script (``COURSE_FAST=1``, figures to
    Agg, a start cache under ``out``), killed after ``timeout`` seconds. Returns its exit status (None: killed),
    seconds, the device line its first cell printed, where each model it left in its namespace lives (``models``:
    name -> device) and the output's tail."""
    # course_lib from this checkout (the first cell then installs nothing)
    root = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "COURSE_FAST": "1", "MPLBACKEND": "Agg", "COURSE_CACHE": str(out / "cache"),
           "PYTHONPATH": os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH")) if p)}
    start = time.perf_counter()
    try:
        proc = subprocess.run([sys.executable, "-c", PROBE, source.name], cwd=source.parent, env=env,
                              capture_output=True, timeout=timeout)
        rc, text = proc.returncode, (proc.stdout + proc.stderr).decode(errors="replace")
    except subprocess.TimeoutExpired as err:
        rc, text = None, ((err.stdout or b"") + (err.stderr or b"")).decode(errors="replace")
    device = next((line for line in text.splitlines() if line.startswith("device: ")), None)
    models = next((json.loads(line[7:]) for line in text.splitlines() if line.startswith("MODELS ")), None)
    return {"notebook": source.stem, "returncode": rc, "seconds": time.perf_counter() - start, "device_line": device,
            "models": models, "tail": text[-1500:]}


def notebooks_on_device(sources: list[Path], out: Path, deadline: float, jobs: int) -> list[dict]:
    """Each notebook through ``notebook_path``, ``jobs`` at a time, all killed at ``deadline`` (a
    ``time.perf_counter()`` value); one that would start with under ``MIN_NOTEBOOK_SECONDS`` left is skipped."""
    from concurrent.futures import ThreadPoolExecutor

    number(jobs, "jobs", integer=True, low=1)

    def one(source: Path) -> dict:
        left = deadline - time.perf_counter()
        if left < MIN_NOTEBOOK_SECONDS:
            return {"notebook": source.stem, "skipped": f"{max(left, 0):.0f} s left of the notebooks' share"}
        return notebook_path(source, out, left)  # one start cache for all: starts.py locks it

    with ThreadPoolExecutor(max_workers=jobs) as pool:
        return list(pool.map(one, sources))


def async_grpo(out: Path, device: str) -> dict:
    """Notebook 14's rollout worker beside a model on ``device`` (the worker samples on the CPU in its own
    process, forked after the trainer has touched the device): 3 GRPO steps, K = 1, on the test config."""
    cfg = get_config("test")
    cfg.sft = dataclasses.replace(cfg.sft, steps=10)
    cfg.grpo = dataclasses.replace(cfg.grpo, steps=3, eval_every=3, max_staleness=1)
    try:
        summary = run("grpo", cfg, out, device=device, seed=0, overwrite=True, show_progress=False, verbose=False)
    except Exception as err:  # noqa: BLE001 - reported, not hidden
        return {"failed": f"{type(err).__name__}: {str(err)[:300]}"}
    return {"steps": summary["steps"], "device": summary["device"]}


def _timed(fn, repeats: int = 5) -> float:
    fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(repeats):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - start) / repeats


def levers(cfg) -> dict:
    """CUDA only: is the run launch-bound? Sampling tokens/s as B·G grows, and CUDA graphs on the update's forward."""
    from course_lib.tinygpt.model import build_model, completion_logprobs
    from course_lib.tinygpt.rollout import generate

    task = AdditionTask(cfg.task)
    torch.manual_seed(0)
    model = build_model(cfg.model, task.tokenizer).cuda()
    g, out = cfg.grpo, {}
    pairs = task.sample_pairs(g.batch_prompts * 16, torch.Generator().manual_seed(0))
    for scale in (1, 4, 16):
        prompts = task.encode_prompts(pairs[: g.batch_prompts * scale], "cuda")
        kw = dict(max_completion_length=g.max_completion_length, min_completion_length=g.max_completion_length,
                  num_generations=g.num_generations)
        with runtime.autocast(prompts.device):
            sec = _timed(lambda p=prompts, k=kw: generate(model, p, task.tokenizer, **k), repeats=3)
        sampled = prompts.shape[0] * g.num_generations * g.max_completion_length
        out[f"sample_tokens_per_second_x{scale}"] = sampled / sec
    roll = generate(model, task.encode_prompts(pairs[: g.batch_prompts], "cuda"), task.tokenizer,
                    max_completion_length=g.max_completion_length, num_generations=g.num_generations)
    args = (roll.input_ids, roll.attention_mask, roll.completion_mask)

    def forward(m):
        with torch.no_grad(), runtime.autocast(roll.input_ids.device):
            return completion_logprobs(m, *args, start=task.prompt_length, validate=False)

    out["update_forward_eager_ms"] = 1e3 * _timed(lambda: forward(model))
    try:
        compiled = torch.compile(model, mode="reduce-overhead")
        out["update_forward_cuda_graphs_ms"] = 1e3 * _timed(lambda: forward(compiled))
    except Exception as err:  # noqa: BLE001 - a lever that does not compile is a result too
        out["update_forward_cuda_graphs_ms"] = f"failed: {type(err).__name__}: {str(err)[:200]}"
    return out


def main(argv: list[str] | None = None) -> dict | None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--device", choices=("cuda", "cpu"), default="cuda")
    parser.add_argument("--tiny", action="store_true", help="the test config, a few steps (the CPU smoke mode)")
    parser.add_argument("--max-seconds", type=float, default=480.0, help="the whole script's time budget")
    parser.add_argument("--peak-tflops", type=float, default=None, help="override the device's dense peak")
    parser.add_argument("--jobs", type=int, default=max(1, min(4, (os.cpu_count() or 1) // 4)),
                        help="notebooks run at once (default: a quarter of the cores, at most 4)")
    parser.add_argument("--out", default="runs/gpu_check")
    parser.add_argument("--save", action="store_true",
                        help="also write benchmarks/results/gpu_check.json (the table in docs/results.md)")
    args = parser.parse_args(argv)
    if args.max_seconds <= 0:
        parser.error(f"--max-seconds must be > 0; got {args.max_seconds}")
    if args.jobs < 1:
        parser.error(f"--jobs must be >= 1; got {args.jobs}")
    if args.device == "cuda" and not torch.cuda.is_available():
        print("skipped: no CUDA device (the gpu config's numbers stay unmeasured)")
        return None
    start, out = time.perf_counter(), Path(args.out)
    device = torch.device(args.device)
    cfg = get_config("test" if args.tiny else "gpu")
    if args.tiny:
        cfg.sft = dataclasses.replace(cfg.sft, steps=10)
    else:
        cfg.rm = dataclasses.replace(cfg.rm, steps=RM_STEPS, eval_every=RM_STEPS)
        cfg.ppo = dataclasses.replace(cfg.ppo, steps=PPO_STEPS, eval_every=PPO_STEPS)
    name = torch.cuda.get_device_name() if device.type == "cuda" else "cpu"

    def peak_of(dtype):
        return args.peak_tflops * 1e12 if args.peak_tflops else (peak_flops(name, dtype) if device.type == "cuda"
                                                                 else None)

    peak = peak_of(runtime.precision(device))
    results = {"device": name, "precision": runtime.describe_precision(device), "peak_flops": peak,
               "config": cfg.name, "max_seconds": args.max_seconds, "trainers": []}
    if args.tiny:
        results["notebooks"] = {"skipped": "--tiny (the notebooks' FAST runs are tests/test_tinygpt_notebooks.py)"}
    else:
        deadline = start + NOTEBOOK_SHARE * args.max_seconds
        results["notebooks"] = notebooks_on_device([NOTEBOOK_DIR / f"{n}.py" for n in NOTEBOOKS], out / "notebooks",
                                                   deadline, args.jobs)
        for nb in results["notebooks"]:
            state = nb.get("skipped") or ("passed" if nb["returncode"] == 0 else
                                          "killed at the deadline" if nb["returncode"] is None
                                          else f"exit {nb['returncode']}")
            print(f"notebook {nb['notebook']} (COURSE_FAST=1): {state}"
                  + (f" in {nb['seconds']:.0f} s, {nb['device_line']}, models on {nb['models']}" if "seconds" in nb
                     else "")
                  + ("" if "skipped" in nb or nb["returncode"] == 0 else f"\n{nb['tail']}"), flush=True)
    reserve = 0.15 * args.max_seconds  # for the smoke test, the rollout worker and the levers
    for i, kind in enumerate(KINDS):
        left = args.max_seconds - reserve - (time.perf_counter() - start)
        if left < MIN_START_SECONDS and not args.tiny:
            results["trainers"].append({"kind": kind, "skipped": f"{left:.0f} s left of --max-seconds"})
            continue
        dtype = compute_dtype(kind, device)
        r = trainer_run(kind, cfg, out / kind, device=args.device, budget=max(left / (len(KINDS) - i), 1.0),
                        peak=peak_of(dtype), dtype=dtype)
        results["trainers"].append(r)
        acc = "—" if r["accuracy"] is None else f"{r['accuracy']:.3f}"
        tps = "—" if r["generated_tokens_per_second"] is None else f"{r['generated_tokens_per_second']:,.0f}"
        mfu = "—" if r["mfu"] is None else f"{r['mfu']:.3%}"
        print(f"{kind:5s} {r['steps']:5d} steps{' (stopped by the budget)' if r['stopped'] else ''} in "
              f"{r['train_seconds']:.1f} s: accuracy {acc}, sampled tokens/s {tps}, MFU {mfu}", flush=True)
    try:
        results["instruct_smoke"] = instruct_smoke(out / "instruct")
    except Exception as err:  # noqa: BLE001 - reported, not hidden
        results["instruct_smoke"] = {"failed": f"{type(err).__name__}: {str(err)[:300]}"}
    print(f"instruct recipe smoke test: {results['instruct_smoke']}", flush=True)
    results["async_grpo"] = async_grpo(out / "async_grpo", args.device)
    print(f"GRPO with a rollout worker (K = 1): {results['async_grpo']}", flush=True)
    if device.type == "cuda" and time.perf_counter() - start < args.max_seconds - 30:
        results["levers"] = levers(cfg)
        print(f"levers: {results['levers']}", flush=True)
    results["wall_seconds"] = time.perf_counter() - start
    out.mkdir(parents=True, exist_ok=True)
    (out / "gpu_check.json").write_text(json.dumps(results, indent=2))
    if args.save:
        import sys

        sys.path.insert(0, str(Path(__file__).parent))
        from provenance import record
        from tables import RESULTS

        results.update(command="python benchmarks/gpu_check.py "
                       + " ".join(argv if argv is not None else sys.argv[1:]),
                       **record())
        (RESULTS / "gpu_check.json").write_text(json.dumps(results, indent=1) + "\n")
    print(f"{name} ({results['precision']}): {results['wall_seconds']:.0f} s in all; wrote {out / 'gpu_check.json'}")
    return results


if __name__ == "__main__":
    main()
