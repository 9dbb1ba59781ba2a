"""README tables from the benchmarks' JSON: the only way a measured number reaches the README.

Each ``benchmarks/tinygpt_*.py`` writes ``benchmarks/results/<name>.json``. This script
renders every table the README shows from those files and writes them between markers::

    <!-- bench:grpo_family -->
    ...generated...
    <!-- /bench:grpo_family -->

``python benchmarks/tables.py`` rewrites the README; ``--check`` only compares and exits 1
when a table differs from what the JSON says (``tests/test_bench_tables.py`` runs it).
Medians are over seeds; per-seed values are shown beside them.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
README = HERE.parent / "README.md"
sys.path.insert(0, str(HERE))
from tinygpt_grpo_family import commit  # noqa: E402  (one provenance helper)

COMMIT_AT_START = commit()
BLOCK = re.compile(r"(<!-- bench:(?P<name>[a-z_]+) -->\n)(?P<body>.*?)(<!-- /bench:(?P=name) -->)", re.S)


def load(name: str, results: Path = RESULTS) -> dict:
    path = results / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: run `make bench` (or benchmarks/tinygpt_*.py) first")
    return json.loads(path.read_text())


def save(name: str, command: list[str], runs: list[dict], results: Path = RESULTS, **meta) -> Path:
    """Write ``results/<name>.json``: the runs, the command line and the git commit they ran at
    (read when this module was first imported, i.e. when the benchmark started)."""
    path = results / f"{name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"benchmark": name, "command": " ".join(command), "commit": COMMIT_AT_START, **meta,
                                "seeds": sorted({r["seed"] for r in runs}), "runs": runs}, indent=1) + "\n")
    return path


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _rows(data: dict, setting: str, variant: str) -> list[dict]:
    return sorted((r for r in data["runs"] if r["setting"] == setting and r["variant"] == variant), key=lambda r: r["seed"])


def family_summary(data: dict, setting: str) -> dict[str, dict]:
    """variant -> medians over seeds (and the per-seed values), in the benchmark's row order."""
    out = {}
    for variant in dict.fromkeys(r["variant"] for r in data["runs"] if r["setting"] == setting):
        rows = _rows(data, setting, variant)
        out[variant] = {
            "seeds": [r["seed"] for r in rows],
            "baseline": statistics.median(r["baseline_accuracy"] for r in rows),
            "final": statistics.median(r["final_accuracy"] for r in rows),
            "per_seed": [r["final_accuracy"] for r in rows],
            "lift": statistics.median(r["final_accuracy"] - r["baseline_accuracy"] for r in rows),
            "carry": statistics.median(r["final_accuracy_carry"] for r in rows),
            "optimizer_steps": statistics.median(r["optimizer_steps"] for r in rows),
            "groups_sampled": statistics.median(r["groups_sampled"] for r in rows),
            "rl_seconds": statistics.median(r["rl_seconds"] for r in rows),
        }
    return out


def family_table(data: dict, setting: str) -> str:
    summary = family_summary(data, setting)
    if not summary:
        raise ValueError(f"setting must be one of those measured; {setting!r} has no runs")
    seeds = sorted({s for v in summary.values() for s in v["seeds"]})
    lines = [
        f"| row | held-out exact match, median of seeds {', '.join(map(str, seeds))} | lift over SFT | per seed "
        "| carry prompts | optimiser steps | groups generated | seconds |",
        "|---|---|---|---|---|---|---|---|",
    ]
    base = statistics.median(v["baseline"] for v in summary.values())
    lines.append(f"| SFT start | {pct(base)} | | | | | | |")
    for name, v in summary.items():
        lines.append(
            f"| {name} | **{pct(v['final'])}** | {100 * v['lift']:+.1f} pts | {' / '.join(pct(x) for x in v['per_seed'])} "
            f"| {pct(v['carry'])} | {v['optimizer_steps']:.0f} | {v['groups_sampled']:,.0f} | {v['rl_seconds']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def grpo_family(results: Path = RESULTS) -> str:
    data = load("grpo_family", results)
    parts = []
    titles = {"main": "strong start (SFT 1,200 steps{}), binary strict checker",
              "weak": "weak start (SFT 300 steps{}), binary or partial credit"}
    for setting in dict.fromkeys(r["setting"] for r in data["runs"]):
        start = statistics.median(r["baseline_accuracy"] for r in data["runs"] if r["setting"] == setting)
        title = titles.get(setting, setting + "{}").format(f": {pct(start)} held-out exact match at the start, median")
        parts.append(f"*{title}*\n\n{family_table(data, setting)}")
    lines = verdicts(data)
    if lines:
        parts.append("What the table supports (a gap within the spread between seeds is not a measured difference; "
                     "runs of one seed share the SFT start and the prompts, so the seed-by-seed differences are the "
                     "sharper reading, and three seeds are still few):\n\n"
                     + "\n".join(lines) + "\n")
    parts.append(f"`{data['command']}` at commit {data.get('commit', 'unknown')} — {data['machine']}.\n")
    return "\n".join(parts)


def verdicts(data: dict) -> list[str]:
    """What the family table supports: each comparison's median gap against the seed-to-seed spread."""
    out = []
    summaries = {s: family_summary(data, s) for s in dict.fromkeys(r["setting"] for r in data["runs"])}
    pairs = [("main", "GRPO", "RFT"), ("main", "GRPO", "more SFT"), ("weak", "GRPO", "RFT"),
             ("weak", "GRPO partial", "reward-weighted partial"), ("weak", "GRPO partial", "GRPO")]
    for setting, a, b in pairs:
        summ = summaries.get(setting, {})
        if a not in summ or b not in summ:
            continue
        d = summ[a]["final"] - summ[b]["final"]
        spread = max(max(v["per_seed"]) - min(v["per_seed"]) for v in (summ[a], summ[b]))
        n = min(len(summ[a]["per_seed"]), len(summ[b]["per_seed"]))
        if n < 2:
            word = "one seed only: no spread to compare with"
        else:
            word = ("larger than" if abs(d) > spread else "within") + f" the seed-to-seed spread ({100 * spread:.1f} pts)"
        # the same seed means the same SFT start and prompts: the paired difference is the sharper test
        by_seed = [(x - y) for s, x in zip(summ[a]["seeds"], summ[a]["per_seed"])
                   for t, y in zip(summ[b]["seeds"], summ[b]["per_seed"]) if s == t]
        ahead = sum(x > 0 for x in by_seed)
        paired = (f"; seed by seed {' / '.join(f'{100 * x:+.1f}' for x in by_seed)}: {a} ahead in {ahead} of "
                  f"{len(by_seed)}") if len(by_seed) > 1 else ""
        out.append(f"- {setting} start: {a} − {b} = {100 * d:+.1f} pts (medians), {word}{paired}")
    return out


def hacking_table(data: dict) -> str:
    lines = ["| seed | start, strict held-out | loose-checker run: strict → / loose → | strict-checker run: strict → "
             "| alarms on the loose run, first step | alarms on the strict run |",
             "|---|---|---|---|---|---|"]
    for seed in data["seeds"]:
        loose = next(r for r in data["runs"] if r["seed"] == seed and r["reward"] == "loose")
        strict = next(r for r in data["runs"] if r["seed"] == seed and r["reward"] == "strict")

        def fired(run):
            got = sorted(((s, n) for n, s in run["alarms"].items() if s is not None))
            return ", ".join(f"{n} ({s})" for s, n in got) or "none"

        lines.append(f"| {seed} | {pct(loose['start']['accuracy'])} | {pct(loose['final']['accuracy'])} / "
                     f"{pct(loose['final']['loose_accuracy'])} | {pct(strict['final']['accuracy'])} | {fired(loose)} "
                     f"| {fired(strict)} |")
    return "\n".join(lines) + "\n"


def reward_hacking(results: Path = RESULTS) -> str:
    data = load("reward_hacking", results)
    return (f"{hacking_table(data)}\n`{data['command']}` at commit {data.get('commit', 'unknown')}: "
            f"{data['rl_steps']} GRPO steps from {data['sft_steps']} SFT steps, {data['n_heldout']} held-out prompts.\n")


def _per_seed_table(data: dict, columns: list[tuple[str, str, callable]]) -> str:
    """One row per variant: the median of each column over seeds, per-seed values in brackets."""
    head = "| run | " + " | ".join(c[0] for c in columns) + " |"
    lines = [head, "|" + "---|" * (len(columns) + 1)]
    for variant in dict.fromkeys(r["variant"] for r in data["runs"]):
        rows = sorted((r for r in data["runs"] if r["variant"] == variant), key=lambda r: r["seed"])
        cells = []
        for _, key, fmt in columns:
            vals = [r[key] for r in rows if r.get(key) is not None]
            cells.append(f"{fmt(statistics.median(vals))} ({' / '.join(fmt(v) for v in vals)})" if vals else "—")
        lines.append(f"| {variant} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + f"\n\nmedian (per seed {', '.join(map(str, data['seeds']))}); `{data['command']}` at commit {data['commit']}.\n"


def dpo(results: Path = RESULTS) -> str:
    return _per_seed_table(load("dpo", results), [("SFT start", "sft_accuracy", pct), ("final", "final_accuracy", pct),
                                                  ("seconds (pairs + updates)", "rl_seconds", lambda x: f"{x:.0f}")])


def grpo(results: Path = RESULTS) -> str:
    return _per_seed_table(load("grpo", results), [
        ("SFT start", "sft_accuracy", pct), ("GRPO", "final_accuracy", pct),
        ("same wall-clock on more SFT", "control_accuracy", pct), ("RL seconds", "rl_seconds", lambda x: f"{x:.0f}"),
        ("generation share of a step", "generation_fraction", lambda x: f"{100 * x:.0f}%")])


def rollout(results: Path = RESULTS) -> str:
    return _per_seed_table(load("rollout", results), [
        ("cached, s", "cached_seconds", lambda x: f"{x:.3f}"), ("uncached, s", "uncached_seconds", lambda x: f"{x:.3f}"),
        ("speed-up", "speedup", lambda x: f"{x:.1f}×"), ("cached tokens/s", "cached_tokens_per_second", lambda x: f"{x:,.0f}")])


def trl_vs_course_grpo(results: Path = RESULTS) -> str:
    data = load("trl_vs_course_grpo", results)
    table = _per_seed_table(data, [
        ("SFT start", "baseline_accuracy", pct), ("after GRPO", "final_accuracy", pct),
        ("lift, points", "lift", lambda x: f"{100 * x:+.1f}"), ("s/step (wall)", "step_seconds", lambda x: f"{x:.3f}"),
        ("CPU s/step", "cpu_step_seconds", lambda x: f"{x:.3f}"), ("RL seconds", "rl_seconds", lambda x: f"{x:.0f}")])
    by = {(r["variant"], r["seed"]): r for r in data["runs"]}
    course, trl = "course_lib `train_grpo`", "TRL `GRPOTrainer` (bridge)"
    ratios = [by[course, s]["cpu_step_seconds"] / by[trl, s]["cpu_step_seconds"] for s in data["seeds"]
              if by.get((course, s), {}).get("cpu_step_seconds") and by.get((trl, s), {}).get("cpu_step_seconds")]
    summary = ""
    if ratios:
        r = statistics.median(ratios)
        summary = (f"\nCourse ÷ TRL (checkpointing off), CPU seconds per step: median **{r:.2f}** (per seed "
                   f"{' / '.join(f'{x:.2f}' for x in ratios)}); the goal is ≤ 0.5: "
                   f"{'met' if r <= 0.5 else 'not met'}. {data['steps']} steps per run ({data['machine']}).\n")
    return table + summary


def kl_frontier(results: Path = RESULTS) -> str:
    data = load("kl_frontier", results)
    lines = ["| KL placement | β | estimator | held-out accuracy | KL(π‖π_ref) on held-out prompts |", "|---|---|---|---|---|"]
    for row in data["table"]:
        acc = " / ".join(pct(v) for v in row["accuracy_per_seed"])
        kl = " / ".join(f"{v:.2f}" for v in row["kl_per_seed"])
        estimator = row["estimator"] if row["beta"] > 0 else "—"
        lines.append(f"| {row['placement']} | {row['beta']:g} | {estimator} | {pct(row['accuracy'])} ({acc}) | "
                     f"{row['kl']:.2f} ({kl}) |")
    return ("\n".join(lines) + f"\n\nmedian (per seed {', '.join(map(str, data['seeds']))}), {data['steps']} GRPO steps; "
            f"`{data['command']}` at commit {data.get('commit') or 'not recorded'} ({data['machine']}).\n")


def rlhf(results: Path = RESULTS) -> str:
    """The RLHF route (notebook 08b): one row per measure, the median over seeds and each seed's value."""
    data = load("rlhf", results)
    runs = sorted(data["runs"], key=lambda r: r["seed"])

    def bon(n):
        return lambda r: next(x["gold"] for x in r["bon"] if x["n"] == n)

    def mib(x):
        return f"{x / 2**20:.2f} MiB"

    rows = [("SFT held-out exact match", lambda r: r["sft_accuracy"], pct),
            ("reward model: held-out pairwise accuracy (noisy labels)", lambda r: r["rm"]["heldout_accuracy"], pct),
            ("noise ceiling (held-out labels not flipped)", lambda r: r["rm"]["noise_ceiling"], pct),
            ("**reward model / noise ceiling** (target ≥ 90%)", lambda r: r["rm"]["of_ceiling"], pct),
            ("reward model against gold labels", lambda r: r["rm"]["heldout_gold_accuracy"], pct),
            ("reward model calibration error (ECE)", lambda r: r["rm"]["ece"], lambda x: f"{x:.3f}"),
            ("reward model training pairs", lambda r: r["rm"]["train_pairs"], lambda x: f"{x:,.0f}"),
            ("reward model training seconds", lambda r: r["rm"]["train_seconds"], lambda x: f"{x:.0f}"),
            ("best-of-1 gold (strict) accuracy", bon(1), pct),
            ("best-of-8 gold accuracy", bon(8), pct),
            ("**best-of-16** gold accuracy", bon(16), pct),
            ("best-of-64 gold accuracy", bon(64), pct),
            ("best-of-N: the N with the highest gold", lambda r: max(r["bon"], key=lambda x: x["gold"])["n"], lambda x: f"{x:g}"),
            ("best-of-N: √KL at that N, √(log N − (N − 1)/N)",
             lambda r: max(r["bon"], key=lambda x: x["gold"])["kl"] ** 0.5, lambda x: f"{x:.2f}")]
    for i, o in enumerate(runs[0]["overopt"]):
        def get(key, i=i):
            return lambda r: r["overopt"][i][key]

        head = f"PPO against the reward model, β = {o['beta']:g}, {o['steps']} steps × {o['batch_prompts']}"
        rows += [(f"{head}: gold at start", get("gold_start"), pct), (f"{head}: gold at its peak", get("gold_peak"), pct),
                 (f"{head}: √KL at the gold peak", get("sqrt_kl_peak"), lambda x: f"{x:.2f}"),
                 (f"{head}: gold at the end", get("gold_end"), pct),
                 (f"{head}: proxy at start → end", lambda r, i=i: r["overopt"][i]["proxy_end"] - r["overopt"][i]["proxy_start"],
                  lambda x: f"{x:+.2f}"),
                 (f"{head}: √KL at the end", get("sqrt_kl_end"), lambda x: f"{x:.2f}")]
    steps = f"{data['rl_steps']} steps × {data['completions_per_step']} sampled completions, strict checker"
    for k in ("GRPO", "RLOO", "PPO"):
        rows.append((f"{k} held-out exact match ({steps})", lambda r, k=k: r["rl"][k]["accuracy"], pct))
    rows += [("PPO − GRPO, points", lambda r: 100 * (r["rl"]["PPO"]["accuracy"] - r["rl"]["GRPO"]["accuracy"]),
              lambda x: f"{x:+.1f}")]
    for k in ("GRPO", "RLOO", "PPO"):
        rows.append((f"{k} RL seconds", lambda r, k=k: r["rl"][k]["rl_seconds"], lambda x: f"{x:.0f}"))
    rows += [("PPO time / GRPO time", lambda r: r["rl"]["PPO"]["rl_seconds"] / r["rl"]["GRPO"]["rl_seconds"], lambda x: f"{x:.2f}×"),
             ("critic: extra measured memory (weights, grads, AdamW)", lambda r: r["rl"]["PPO"]["critic_bytes"], mib),
             ("critic share of PPO's trained-model states", lambda r: r["rl"]["PPO"]["critic_bytes"] / r["rl"]["PPO"]["bytes"], pct)]
    lines = [f"| measure | median | per seed {' / '.join(str(r['seed']) for r in runs)} |", "|---|---|---|"]
    for name, f, fmt in rows:
        vals = [f(r) for r in runs]
        lines.append(f"| {name} | {fmt(statistics.median(vals))} | {' / '.join(fmt(v) for v in vals)} |")
    shapes = [f"seed {r['seed']}: " + ", ".join(f"β = {o['beta']:g} {o['shape']}" for o in r["overopt"]) for r in runs]
    peaked = [r for r in runs if 1 < max(r["bon"], key=lambda x: x["gold"])["n"] < r["bon"][-1]["n"]
              and r["bon"][-1]["gold"] < max(x["gold"] for x in r["bon"]) - 0.03]
    return ("\n".join(lines) + f"\n\nBest-of-N: gold rises, peaks at an N between the ends and falls by more than 3 points "
            f"by N = {runs[0]['bon'][-1]['n']} in {len(peaked)} of {len(runs)} seeds. "
            "Gold under PPO against the reward model (5-step moving means, a move counts above 3 points): "
            + "; ".join(shapes) + ". PPO's time covers its critic and two passes over each batch (GRPO and RLOO: one); "
            "its 256 prompts per step are each sampled once, GRPO's 32 eight times. Seconds are wall time on a shared, "
            f"loaded machine.\n\n`{data['command']}` at commit {data.get('commit', 'unknown')} ({data['machine']}).\n")


def gpu_check(results: Path = RESULTS) -> str:
    """The GPU table from ``benchmarks/gpu_check.py --save``; "unmeasured" until such a run exists."""
    path = results / "gpu_check.json"
    if not path.is_file():
        return ("No GPU machine was available while this was written: the `gpu` config is exercised on the CPU by "
                "tests (a few steps, and `benchmarks/gpu_check.py --device cpu --tiny`), but its time, accuracy, "
                "tokens/s and MFU on a GPU are **unmeasured**. `python benchmarks/gpu_check.py --save` on a CUDA "
                "machine (at most 8 minutes) writes `benchmarks/results/gpu_check.json`, and this paragraph becomes "
                "its table.\n")
    data = json.loads(path.read_text())

    def cell(x, fmt):
        return "—" if x is None else format(x, fmt)

    lines = [f"`gpu` config on {data['device']} ({data['precision']}), one seed, {data['wall_seconds']:.0f} s in all:",
             "", "| trainer | steps | seconds | held-out accuracy | sampled tokens/s | MFU |", "|---|---|---|---|---|---|"]
    for r in data["trainers"]:
        if "skipped" in r:
            lines.append(f"| {r['kind']} | skipped: {r['skipped']} | | | | |")
            continue
        steps = f"{r['steps']}" + (" (stopped by the time budget)" if r["stopped"] else "")
        lines.append(f"| {r['kind']} | {steps} | {r['train_seconds']:.1f} | {cell(r['accuracy'], '.1%')} | "
                     f"{cell(r['generated_tokens_per_second'], ',.0f')} | {cell(r['mfu'], '.3%')} |")
    lines += ["", f"Instruct recipe smoke test: {data['instruct_smoke']}. Levers: {data.get('levers', 'not measured')}.",
              "", f"`{data.get('command', 'benchmarks/gpu_check.py --save')}` at commit {data.get('commit', 'unknown')}.\n"]
    return "\n".join(lines)


RENDERERS = {"gpu_check": gpu_check, "grpo_family": grpo_family, "reward_hacking": reward_hacking, "dpo": dpo, "grpo": grpo, "rollout": rollout,
             "trl_vs_course_grpo": trl_vs_course_grpo, "kl_frontier": kl_frontier, "rlhf": rlhf}


def render(text: str, results: Path = RESULTS) -> str:
    """Return ``text`` with every known ``bench:`` block regenerated from the JSON."""

    def repl(m: re.Match) -> str:
        name = m.group("name")
        if name not in RENDERERS:
            raise ValueError(f"README has a bench block {name!r} with no renderer; known: {sorted(RENDERERS)}")
        try:
            body = RENDERERS[name](results)
        except FileNotFoundError:
            body = "*Not measured in this copy: run `make bench`.*\n"
        return m.group(1) + body + m.group(4)

    return BLOCK.sub(repl, text)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="regenerate the README's benchmark tables")
    parser.add_argument("--check", action="store_true", help="exit 1 if the README differs from the JSON")
    parser.add_argument("--readme", default=str(README))
    args = parser.parse_args(argv)
    path = Path(args.readme)
    text = path.read_text()
    new = render(text)
    if args.check:
        if new != text:
            print(f"{path} is stale: run python benchmarks/tables.py", file=sys.stderr)
            return 1
        return 0
    path.write_text(new)
    print(f"updated {len(BLOCK.findall(text))} table(s) in {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
