"""Per-notebook time on Colab's T4, **estimated** on the CPU (no run of the course has had a GPU).

Method, in one sentence (docs/colab.md states it): for each trainer the notebooks run, a few steps are
run here on the ``cpu`` config and counted — kernel launches (every aten operator dispatched that
launches work, counted with a ``TorchDispatchMode``; views and allocations launch nothing), host
synchronisations (``.item()``-style reads) and matmul FLOPs (``torch.utils.flop_counter``) — and a
T4 step is taken to cost ``host time + launches × 5–20 µs + syncs × 10–50 µs + FLOPs /
(8.1 TFLOP/s × 10–50%)``; each notebook's time is those per-step costs times the steps its code
runs (FAST and full), low–high.

Where the numbers come from:
- launch latency 5–20 µs: ~4–6 µs is the driver's cost to launch one kernel (NVIDIA, "Getting
  Started with CUDA Graphs", developer.nvidia.com/blog/cuda-graphs/), and eager PyTorch adds its
  own dispatch per operator (PyTorch, "Accelerating PyTorch with CUDA Graphs",
  pytorch.org/blog/accelerating-pytorch-with-cuda-graphs/); 20 µs is the slow end of eager
  per-operator cost on the 2 vCPUs of a Colab runtime;
- a sync: 10–50 µs (the queue drains, then a device-to-host copy);
- peak: the course trains in fp32 on a T4 (``runtime.precision``: sm_75 has no bf16 tensor cores),
  8.1 TFLOP/s fp32 (``course_lib.trainers.utilisation.PEAK_TFLOPS``); 10–50% of it for these tiny matmuls;
- host time: the CPU time between operators in the counted run (Python, autograd, reward checks,
  tokenisation: work that stays on the host on any device), less the counter's own cost per operator
  (calibrated on a loop of 1-element adds). It is this machine's CPU; a Colab runtime's 2 vCPUs
  are of the same class but not measured.
Per step: launches, reads, FLOPs and CPU seconds are the slope between a run of ``n1`` and one of
``n2`` steps (setup cancels; a warm-up run first; the least CPU time of two plain runs, the machine
being shared); host seconds, from one counted run each, likewise, or where noise makes that slope
non-positive the mean over both runs' steps, setup included (an upper bound); at most the CPU seconds. Data building
(DPO pairs, reward-model pairs, best-of-N) is per prompt, the same way.
What is not modelled: notebook cells outside the trainers and their evaluations (plots, small
tensors: milliseconds), the SFT start's disk cache (each fresh Colab runtime trains it once), model
downloads and pip installs.

**Where the notebooks train**: they pass ``DEVICE`` to ``starts.sft_start`` and to every model they build
(tested on the CPU only, never run on a GPU), so on a Colab GPU runtime the tiny-GPT trainers
run on the GPU (notebook 18's TRL trainers too: the bridge follows the model's device); notebook 18's
real instruct model is not estimated here. The table gives both: the CPU time (a runtime without a
GPU; measured here per step × steps) and the T4 estimate.

    python benchmarks/t4_estimate.py            # ~2 min CPU; writes benchmarks/results/t4_estimate.json
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import sys
import time
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils.flop_counter import flop_registry

from course_lib.trainers.trainer import TrainContext
from course_lib.trainers.utilisation import peak_flops

T4 = "Tesla T4"
LAUNCH_US = (5.0, 20.0)  # per kernel launch (low, high)
SYNC_US = (10.0, 50.0)  # per host synchronisation
EFFICIENCY = (0.5, 0.1)  # share of the fp32 peak the tiny matmuls reach (low time, high time)
ATEN = torch.ops.aten
# Python-level reads of a tensor's value: on a GPU each one waits for the device (a synchronisation).
# Counted per call, as tests/test_tinygpt_core.py's host-read test counts them; a read of a host copy is
# charged as one too (an upper bound).
HOST_READS = ("item", "tolist", "__bool__", "__float__", "__int__", "numpy", "cpu")
# operators that allocate or only rewrite metadata: no kernel (views are detected from the schema); the
# element reads behind the host reads above launch nothing either
NO_KERNEL = {ATEN.empty.memory_format, ATEN.empty_strided.default, ATEN.empty_like.default, ATEN.lift_fresh.default,
             ATEN.detach.default, ATEN.alias.default, ATEN.set_.source_Storage_storage_offset, ATEN.resize_.default,
             ATEN.is_same_size.default, ATEN._has_compatible_shallow_copy_type.default,
             ATEN._local_scalar_dense.default}


class LaunchCounter(TorchDispatchMode):
    """Count the aten operators a piece of code dispatches, as a GPU run would launch them.

    ``launches``: operators that launch a kernel (everything but views, allocations and element
    reads); ``syncs``: Python-level reads of a tensor's value (``HOST_READS``); ``flops``: matmul
    FLOPs (``torch.utils.flop_counter``'s formulas); ``ops``: launches by name; ``dispatched``: every
    operator (views too); ``gap_seconds``: CPU time between operators (host Python, autograd, and
    this counter's own overhead per operator, which ``host_seconds`` removes).
    """

    def __init__(self):
        super().__init__()
        self.launches = self.syncs = self.dispatched = 0
        self.flops = self.gap_seconds = self.op_seconds = 0.0
        self.ops: dict[str, int] = {}
        self._saved: dict[str, object] = {}
        self._last = 0.0

    def __enter__(self):
        for name in HOST_READS:
            original = self._saved[name] = getattr(torch.Tensor, name)

            def read(tensor, *args, _original=original, **kwargs):
                self.syncs += 1
                return _original(tensor, *args, **kwargs)

            setattr(torch.Tensor, name, read)
        out = super().__enter__()
        self._last = time.process_time()
        return out

    def __exit__(self, *exc):
        self.gap_seconds += time.process_time() - self._last
        for name, original in self._saved.items():
            setattr(torch.Tensor, name, original)
        return super().__exit__(*exc)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        start = time.process_time()
        self.gap_seconds += start - self._last
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        self.op_seconds += time.process_time() - start
        self.dispatched += 1
        if not (func.is_view or func in NO_KERNEL):
            self.launches += 1
            name = func.overloadpacket.__name__
            self.ops[name] = self.ops.get(name, 0) + 1
            if func.overloadpacket in flop_registry:
                self.flops += flop_registry[func.overloadpacket](*args, **kwargs, out_val=out)
        self._last = time.process_time()
        return out

    def host_seconds(self, overhead: float) -> float:
        """CPU seconds of host work between operators, less ``overhead`` per dispatched operator (the counter's
        own)."""
        return max(0.0, self.gap_seconds - self.dispatched * overhead)


def counter_overhead(n: int = 4000) -> float:
    """The counter's own CPU seconds per operator: the gap per operator in a loop of in-place 1-element adds."""
    x = torch.zeros(1)
    with LaunchCounter() as counter:
        for _ in range(n):
            x.add_(1)
    return counter.gap_seconds / counter.dispatched


def count(fn, overhead: float, repeats: int = 2) -> dict:
    """Run ``fn`` plain ``repeats`` times for its CPU seconds (the least: the machine is shared), then
    once counted (launches, syncs, FLOPs, host seconds)."""
    cpu = float("inf")
    for _ in range(repeats):
        start = time.process_time()
        fn()
        cpu = min(cpu, time.process_time() - start)
    with LaunchCounter() as counter:
        fn()
    return {"cpu_seconds": cpu, "launches": counter.launches, "syncs": counter.syncs, "flops": counter.flops,
            "host_seconds": counter.host_seconds(overhead)}


def t4_seconds(m: dict, *, peak: float) -> tuple[float, float]:
    """(low, high) seconds on a T4 for a unit with counts ``m`` (see the module docstring)."""
    return tuple(m["host_seconds"] + m["launches"] * lat * 1e-6 + m["syncs"] * sync * 1e-6 + m["flops"] / (peak * eff)
                 for lat, sync, eff in zip(LAUNCH_US, SYNC_US, EFFICIENCY))


def fit(a: dict, b: dict, n1: int, n2: int) -> dict:
    """Per-unit numbers and a fixed part from a run of ``n1`` units (``a``) and one of ``n2`` (``b``).

    Counts (launches, reads, FLOPs) and CPU seconds: the slope between the runs, and the intercept
    as the fixed part (setup). Host seconds (one counted run each): the slope too, but where the
    shared machine's noise makes it zero or negative, the mean over all ``n1 + n2`` units, setup
    included (an upper bound); at most the unit's CPU seconds."""
    per = {k: max(0.0, (b[k] - a[k]) / (n2 - n1)) for k in a}
    host = per["host_seconds"] or (a["host_seconds"] + b["host_seconds"]) / (n1 + n2)
    per["host_seconds"] = min(host, per["cpu_seconds"])
    fixed = {k: max(0.0, a[k] - n1 * per[k]) for k in a}
    return {"per": per, "fixed": fixed, "runs": {str(n1): a, str(n2): b}}


def slope(make, n1: int, n2: int, overhead: float) -> dict:
    """``fit`` of a run of ``n1`` units and one of ``n2``; ``make(n)`` returns a zero-argument function
    that runs n units from the same starting state. One unmeasured run first fills the one-time
    caches (so they do not land in the ``n1`` run alone)."""
    make(n1)()
    return fit(count(make(n1), overhead), count(make(n2), overhead), n1, n2)


# ---- the units the notebooks run -------------------------------------------------------------------
def measure_units(quick: bool = False, only: list[str] | None = None) -> dict:
    """Every trainer step and data builder the notebooks run, on the ``cpu`` config from its SFT start."""
    from course_lib.run.hacking import MAX_COMPLETION_LENGTH, experiment_config
    from course_lib.run.starts import sft_start
    from course_lib.tinygpt.evaluation import evaluate
    from course_lib.tinygpt.rewards import resolve_reward
    from course_lib.tinygpt.runtime import set_threads
    from course_lib.trainers.configs import PPOConfig, RewardModelConfig, get_config
    from course_lib.trainers.dpo import build_preference_pairs, reference_logprobs, train_dpo
    from course_lib.trainers.grpo import train_grpo
    from course_lib.trainers.kto import kto_data_from_pairs, train_kto
    from course_lib.trainers.ppo import build_critic, train_ppo
    from course_lib.trainers.reward_model import (
        best_of_n_scores,
        build_reward_model,
        preference_data,
        train_reward_model,
    )
    from course_lib.trainers.rft import train_rft
    from course_lib.trainers.sft import train_sft

    set_threads(1)
    cfg = get_config("cpu")
    task, sft_model, _ = sft_start(cfg, seed=0, verbose=False)
    weights = copy.deepcopy(sft_model.state_dict())
    n1, n2 = (1, 2) if quick else (1, 3)
    big = 10**6  # eval_every: no evaluation inside the measured steps (evaluations are their own unit)

    def policy():
        sft_model.load_state_dict(weights)
        torch.manual_seed(0)
        return sft_model

    gen = lambda seed=1: torch.Generator().manual_seed(seed)  # noqa: E731
    g = dataclasses.replace(cfg.grpo, eval_every=big)
    pairs = build_preference_pairs(policy(), task, dataclasses.replace(cfg.dpo, pair_prompts=256), generator=gen(2))
    pairs.update(reference_logprobs(policy(), pairs, prompt_length=task.prompt_length))
    kto_cfg = dataclasses.replace(cfg.kto, eval_every=big)
    kto_data = kto_data_from_pairs(policy(), task, pairs, kto_cfg, generator=gen(5))
    rm_cfg = RewardModelConfig(steps=n2, eval_every=big)
    rm_data = preference_data(policy(), task, task.sample_pairs(512, gen(3)), rm_cfg, generator=gen(4))
    rm = build_reward_model(cfg.model, task.tokenizer)

    def scorer(prompts, comps):
        from course_lib.trainers.reward_model import scores, sequences
        ids, attn = sequences(task, prompts, comps)
        with torch.no_grad():
            return scores(rm, ids, attn)

    hack = experiment_config()

    def quiet(n: int) -> TrainContext:
        return TrainContext(steps=n, show_progress=False, threads=None)

    units = {
        "sft": lambda n: lambda: train_sft(policy(), task, dataclasses.replace(cfg.sft, eval_every=big),
                                           quiet(n), eval_at_end=False),
        "dpo": lambda n: lambda: train_dpo(policy(), task, dataclasses.replace(cfg.dpo, eval_every=big), pairs,
                                           quiet(n), generator=gen(2)),
        "kto": lambda n: lambda: train_kto(policy(), task, kto_cfg, kto_data, quiet(n)),
        "grpo": lambda n: lambda: train_grpo(policy(), task, g, quiet(n), generator=gen(),
                                             reference_state=weights),
        "grpo_mu2": lambda n: lambda: train_grpo(policy(), task, dataclasses.replace(g, num_iterations=2),
                                                 quiet(n), generator=gen(), reference_state=weights),
        "grpo_len12": lambda n: lambda: train_grpo(policy(), task, dataclasses.replace(hack.grpo, eval_every=big),
                                                   quiet(n), generator=gen()),
        "rft": lambda n: lambda: train_rft(policy(), task, g, quiet(n), generator=gen()),
        "ppo": lambda n: lambda: train_ppo(policy(), build_critic(policy(), task.tokenizer), task,
                                           PPOConfig(steps=n, eval_every=big), resolve_reward("strict", task),
                                           quiet(n), generator=gen()),
        "rm": lambda n: lambda: train_reward_model(build_reward_model(cfg.model, task.tokenizer), rm_data,
                                                   dataclasses.replace(rm_cfg, steps=n), generator=gen()),
        # data builders, per prompt
        "dpo_pairs": lambda n: lambda: build_preference_pairs(
            policy(), task, dataclasses.replace(cfg.dpo, pair_prompts=n), generator=gen(2)),
        "rm_pairs": lambda n: lambda: preference_data(policy(), task, task.sample_pairs(n, gen(3)),
                                                      RewardModelConfig(),
                                                      generator=gen(4)),
        "best_of_32": lambda n: lambda: best_of_n_scores(policy(), task, task.heldout_pairs[:n], scorer, k=32),
        # one held-out evaluation (500 prompts, greedy), and notebook 11's (200 prompts, 12 tokens)
        "eval": lambda n: lambda: [evaluate(policy(), task) for _ in range(n)],
        "eval_len12": lambda n: lambda: [evaluate(policy(), task, max_completion_length=MAX_COMPLETION_LENGTH)
                                         for _ in range(n)],
    }
    sizes = {"dpo_pairs": (256, 512), "rm_pairs": (128, 256), "best_of_32": (25, 50), "eval": (1, 2),
             "eval_len12": (1, 2)}
    overhead = counter_overhead()
    out = {}
    for name, make in units.items():
        if only and name not in only:
            continue
        lo, hi = sizes.get(name, (n1, n2))
        out[name] = slope(make, lo, hi, overhead)
        print(f"{name:11s} per unit: {out[name]['per']['cpu_seconds'] * 1e3:8.1f} ms CPU, "
              f"{out[name]['per']['launches']:7.0f} launches, {out[name]['per']['syncs']:5.0f} syncs, "
              f"{out[name]['per']['flops'] / 1e9:7.2f} GFLOP, host {out[name]['per']['host_seconds'] * 1e3:6.1f} ms",
              flush=True)
    return out


# ---- what each notebook runs: (unit, count) for FAST and full, read from its code ------------------
def _evals(runs: int, steps: int, every: int, extra: int = 1) -> int:
    """Held-out evaluations of ``runs`` runs: every ``every`` steps and at the end, plus ``extra`` after each."""
    return runs * (steps // every + 1 + extra)


def notebook_work() -> dict:
    """Per notebook and budget, the units it runs (from the notebooks' own constants)."""
    from course_lib.run.hacking import RL_STEPS as HACK_STEPS
    from course_lib.run.hacking import SFT_STEPS as HACK_SFT
    from course_lib.trainers.configs import get_config

    cfg = get_config("cpu")
    sft_start = [("sft", cfg.sft.steps), ("eval", cfg.sft.steps // cfg.sft.eval_every + 1)]

    def nb06(fast):
        steps, prompts, every = (60, 1024, 20) if fast else (cfg.dpo.steps, cfg.dpo.pair_prompts, cfg.dpo.eval_every)
        # DPO, DPO + NLL, the style run: DPO steps; NLL-only: SFT steps; KTO: its steps on DPO's answers
        return [("dpo_pairs", prompts), ("dpo", 3 * steps), ("sft", steps), ("kto", steps),
                ("eval", _evals(4, steps, every) + 1)]

    def nb07(fast):
        steps, every = (30, 10) if fast else (150, 25)
        # GRPO, RLOO, Dr. GRPO's advantage, Dr. GRPO (constant unit); RFT; DAPO at μ = 2 for half the steps
        return [("grpo", 4 * steps), ("rft", steps), ("grpo_mu2", steps // 2), ("eval", _evals(6, steps, every) + 1)]

    def nb02b(fast):
        steps = 20 if fast else 80
        return [("grpo", 7 * steps), ("eval", _evals(7, steps, cfg.grpo.eval_every, extra=2) + 1)]

    def nb08(fast):  # FAST is the full experiment
        return [("grpo_len12", 2 * HACK_STEPS), ("eval_len12", _evals(2, HACK_STEPS, 5) + 1)]

    def nb08b(fast):
        rm_prompts, rm_steps = (2048 + 200, 50) if fast else (8192 + 500, 300)
        bon = (100, 32) if fast else (200, 64)
        seeds, over_steps = (1, 10) if fast else (3, 80)
        rl = 6 if fast else cfg.grpo.steps
        return [("rm_pairs", rm_prompts), ("rm", rm_steps), ("best_of_32", bon[0] * bon[1] // 32),
                ("ppo", 2 * seeds * over_steps // 2),  # 128 prompts per step: half a 256-prompt PPO step
                ("grpo", 2 * rl), ("ppo", rl), ("eval", 2 * seeds + 3 + 1)]

    def nb10(fast):
        grpo_steps, dpo_steps, prompts = (10, 30, 512) if fast else (60, cfg.dpo.steps, cfg.dpo.pair_prompts)
        # the course's trainers here; TRL's on the same steps are counted apart (``trl`` below)
        return [("grpo", grpo_steps), ("dpo_pairs", prompts), ("dpo", dpo_steps),
                ("eval", _evals(1, grpo_steps, 5 if fast else 10) + 2)]

    return {
        "SFT start": {"note": f"once per fresh runtime ({cfg.sft.steps} steps), shared by 08, 09, 10, 12, 18",
                      "fast": sft_start, "full": sft_start},
        "10_the_kl_term": {"note": "section 5's β sweep: 7 GRPO runs", "fast": nb02b(True), "full": nb02b(False)},
        "08_tiny_gpt_dpo": {"note": "pairs, DPO ×2, NLL, KTO, the style run", "fast": nb06(True), "full": nb06(False)},
        "09_tiny_gpt_grpo": {"note": "GRPO, RLOO, Dr. GRPO ×2, RFT, DAPO", "fast": nb07(True), "full": nb07(False)},
        "11_reward_hacking": {"note": f"its own {HACK_SFT}-step SFT start, then 2 GRPO runs; FAST = full",
                              "fast": [("sft", HACK_SFT)] + nb08(True), "full": [("sft", HACK_SFT)] + nb08(False)},
        "12_the_rlhf_route": {"note": "reward model, best-of-N, PPO against it, GRPO/RLOO/PPO",
                               "fast": nb08b(True), "full": nb08b(False)},
        "18_graduating_to_trl": {"note": "the course's GRPO and DPO (TRL's runs and the instruct model not included)",
                                 "fast": nb10(True), "full": nb10(False)},
    }


def estimate(units: dict, work: dict, *, peak: float) -> dict:
    """Per notebook and budget: CPU seconds here (a runtime without a GPU) and the T4 range."""
    data_units = {"dpo_pairs", "rm_pairs", "best_of_32"}  # linear fits: the fixed part counts once per call
    out = {}
    for name, spec in work.items():
        row = {"note": spec["note"]}
        for budget in ("fast", "full"):
            cpu = low = high = 0.0
            for unit, n in spec[budget]:
                u = units[unit]
                parts = [(u["per"], n)] + ([(u["fixed"], 1)] if unit in data_units else [])
                for m, k in parts:
                    lo, hi = t4_seconds(m, peak=peak)
                    cpu, low, high = cpu + k * m["cpu_seconds"], low + k * lo, high + k * hi
            row[budget] = {"cpu_seconds": cpu, "t4_seconds": [low, high], "units": [list(x) for x in spec[budget]]}
        out[name] = row
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1 and 2 steps per trainer (the test's mode)")
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument("--refit", action="store_true", help="refit the stored runs of results/t4_estimate.json")
    args = parser.parse_args(argv)
    peak = peak_flops(T4, "fp32")
    if args.refit:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from tables import load

        stored = load("t4_estimate")["units"]
        units = {name: fit(*(u["runs"][n] for n in u["runs"]), *map(int, u["runs"])) for name, u in stored.items()}
    else:
        units = measure_units(quick=args.quick)
    notebooks = estimate(units, notebook_work(), peak=peak)
    for name, row in notebooks.items():
        print(f"{name:22s} FAST: CPU {row['fast']['cpu_seconds']:6.0f} s, T4 {row['fast']['t4_seconds'][0]:5.0f}–"
              f"{row['fast']['t4_seconds'][1]:5.0f} s | full: CPU {row['full']['cpu_seconds']:6.0f} s, "
              f"T4 {row['full']['t4_seconds'][0]:5.0f}–{row['full']['t4_seconds'][1]:5.0f} s")
    result = {"device": T4, "precision": "fp32 (runtime.precision on sm_75)", "peak_flops": peak,
              "launch_us": LAUNCH_US, "sync_us": SYNC_US, "efficiency": EFFICIENCY, "units": units,
              "notebooks": notebooks}
    if not args.no_save:
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from provenance import record
        from tables import RESULTS

        result.update(benchmark="t4_estimate", **record(), command="python benchmarks/t4_estimate.py"
                      + (" --refit (its measured runs refitted)" if args.refit else ""),
                      machine=f"{torch.get_num_threads()} thread(s), CPU-only machine")
        (RESULTS / "t4_estimate.json").write_text(json.dumps(result, indent=1) + "\n")
    return result


if __name__ == "__main__":
    main()
