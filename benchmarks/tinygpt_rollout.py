"""KV-cached versus uncached rollout generation (§11) with transformers' ``generate``.

One GRPO-sized batch: 32 prompts × 8 completions = 256 samples, on the default CPU model.
Completions are forced to a fixed length (``min_new_tokens``) so both modes do the same work;
the ratio grows with the completion length (uncached decoding recomputes the whole prefix at
every step). Median over repeats.

    python benchmarks/tinygpt_rollout.py [--lengths 4 16 32] [--repeats 3] [--threads 2]
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from course_lib.configs import get_config
from course_lib.model import build_model
from course_lib.task import AdditionTask


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lengths", type=int, nargs="+", default=[4, 16, 32])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    cfg = get_config("cpu")
    cfg.model.n_positions = 64
    task = AdditionTask(cfg.task)
    torch.manual_seed(0)
    model = build_model(cfg.model, task.tokenizer).eval()
    prompts = task.encode_prompts(task.sample_pairs(32, torch.Generator().manual_seed(0)))
    tok = task.tokenizer
    for length in args.lengths:
        times = {}
        for use_cache in (True, False):
            runs = []
            for _ in range(args.repeats):
                t0 = time.perf_counter()
                with torch.no_grad():
                    model.generate(input_ids=prompts, attention_mask=torch.ones_like(prompts), do_sample=True,
                                   top_k=0, num_return_sequences=8, max_new_tokens=length, min_new_tokens=length,
                                   pad_token_id=tok.eos_token_id, eos_token_id=tok.eos_token_id, use_cache=use_cache,
                                   suppress_tokens=[tok.pad_token_id, tok.bos_token_id])
                runs.append(time.perf_counter() - t0)
            times[use_cache] = statistics.median(runs)
        print(f"{length:3d} new tokens × 256 samples: cached {times[True]:.3f} s "
              f"({256 * length / times[True]:,.0f} tok/s), uncached {times[False]:.3f} s → "
              f"{times[False] / times[True]:.1f}× faster with the KV cache", flush=True)


if __name__ == "__main__":
    main()
