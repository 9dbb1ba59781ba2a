"""KV-cached versus uncached rollout generation (§11), with ``course_lib.tinygpt.rollout.generate``.

One GRPO-sized batch: 32 prompts × 8 completions = 256 samples, on the default CPU model. The
cached loop runs each prompt once and shares its keys/values with the G completions of its
group, then feeds one token per step; the uncached loop re-runs the whole sequence every step.
Completions are forced to the full length (``min_completion_length``) so both do the same
work; the first length is the task's own ``max_completion_length`` (6 on the ``cpu`` config).
transformers' own ``generate`` (cached) is timed alongside for reference. Median over repeats,
modes interleaved within each repeat.

    python benchmarks/tinygpt_rollout.py [--lengths 6 16 32] [--repeats 5] [--threads 1]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

from course_lib.tinygpt.model import build_model
from course_lib.tinygpt.rollout import generate
from course_lib.tinygpt.runtime import set_threads
from course_lib.tinygpt.task import AdditionTask
from course_lib.trainers.configs import get_config

sys.path.insert(0, str(Path(__file__).resolve().parent))
from writer import record_start, save  # noqa: E402


def main() -> None:
    record_start()  # the commit and sources digest of the code that runs: the code now
    cfg = get_config("cpu")
    parser = argparse.ArgumentParser()
    parser.add_argument("--lengths", type=int, nargs="+", default=[cfg.grpo.max_completion_length, 16, 32])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    set_threads(args.threads)
    task = AdditionTask(cfg.task)
    torch.manual_seed(0)
    model = build_model(cfg.model, task.tokenizer).eval()
    prompts = task.encode_prompts(task.sample_pairs(32, torch.Generator().manual_seed(0)))
    tok = task.tokenizer
    G = cfg.grpo.num_generations

    def ours(length, use_cache):
        generate(model, prompts, tok, max_completion_length=length, num_generations=G, use_cache=use_cache,
                 min_completion_length=length)

    def transformers_generate(length):
        with torch.no_grad():
            model.generate(input_ids=prompts, attention_mask=torch.ones_like(prompts), do_sample=True, top_k=0,
                           num_return_sequences=G, max_new_tokens=length, min_new_tokens=length,
                           pad_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id,
                           suppress_tokens=[tok.pad_token_id, tok.bos_token_id])

    print(f"{32 * G} samples per batch, {args.threads} thread(s); median of {args.repeats} (loaded machine: noisy)")
    runs = []
    for length in args.lengths:
        modes = {"cached": lambda n=length: ours(n, True), "uncached": lambda n=length: ours(n, False),
                 "transformers generate (cached)": lambda n=length: transformers_generate(n)}
        times = {name: [] for name in modes}
        for _ in range(args.repeats):
            for name, fn in modes.items():
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
        med = {name: statistics.median(ts) for name, ts in times.items()}
        print(f"{length:3d} new tokens: cached {med['cached']:.3f} s ({32 * G * length / med['cached']:,.0f} tok/s), "
              f"uncached {med['uncached']:.3f} s → {med['uncached'] / med['cached']:.1f}× faster with the KV cache; "
              f"transformers generate {med['transformers generate (cached)']:.3f} s "
              f"({med['transformers generate (cached)'] / med['cached']:.1f}× ours)", flush=True)
        runs.append({"variant": f"{length} new tokens × {32 * G} samples", "seed": 0, "cached_seconds": med["cached"],
                     "uncached_seconds": med["uncached"], "speedup": med["uncached"] / med["cached"],
                     "cached_tokens_per_second": 32 * G * length / med["cached"]})
    save("rollout", ["tinygpt_rollout.py", *sys.argv[1:]], runs, repeats=args.repeats)


if __name__ == "__main__":
    main()
