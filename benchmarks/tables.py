"""Benchmark tables from the benchmarks' JSON: the only way a measured number reaches the docs.

Each ``benchmarks/tinygpt_*.py`` writes ``benchmarks/results/<name>.json``. This script
renders every table the ``docs/*.md`` pages show from those files and writes them
between markers, wherever a block stands (``tools/doc_blocks.py``)::

    <!-- bench:grpo_family -->
    ...generated...
    <!-- /bench:grpo_family -->

``python benchmarks/tables.py`` rewrites the pages; ``--check`` only compares and exits 1
when a table differs from what the JSON says (``tests/test_bench_tables.py`` runs it).
Medians are over seeds; per-seed values are shown beside them. The goals a table judges a run
against are in ``goals.py``; the results files are written by ``writer.py``. Rendering reads files
and runs nothing (no git, no training). The verdict lines over seeds (``*_verdicts``) are also what a notebook
that trains one seed prints beside its own numbers (found through ``course_lib.run.verdicts.committed_benchmarks``).
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
sys.path.insert(0, str(HERE))
sys.path.insert(1, str(HERE.parent))  # tools.doc_blocks, course_lib
import goals  # noqa: E402

from course_lib.run.verdicts import (  # noqa: E402  (the one maker of sentences over seeds)
    Verdict,
    evaluation_noise,
    paired,
)
from tools import doc_blocks  # noqa: E402

# A seed whose SFT start is below this held-out accuracy is flagged as degenerate: almost every
# group scores all zero, so nothing learns from it, and it decides no comparison.
DEGENERATE_START = 0.10


def load(name: str, results: Path = RESULTS) -> dict:
    path = results / f"{name}.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} is missing: run `make bench` (or benchmarks/tinygpt_*.py) first")
    return json.loads(path.read_text())


def source(data: dict) -> str:
    """Where a table's numbers came from: the command and the commit it ran at."""
    return f"`{data['command']}` at commit {data['commit']}"


def footer(data: dict) -> str:
    """The closing line of a table: its source, and the machine when the file names one."""
    return source(data) + (f" ({data['machine']})" if data.get("machine") else "") + ".\n"


def by_seed(a: dict, b: dict, name_a: str, name_b: str, **how) -> Verdict | None:
    """A − B seed by seed over the seeds both ``{seed: value}`` hold (the same seed: the same start and
    data), read by ``course_lib.run.verdicts.paired``; None when no seed has both."""
    seeds = sorted(set(a) & set(b))
    if not seeds:
        return None
    return paired([a[s] for s in seeds], [b[s] for s in seeds], name_a=name_a, name_b=name_b, seeds=seeds, **how)


def pct(x: float) -> str:
    return f"{100 * x:.1f}%"


def _rows(data: dict, setting: str, variant: str) -> list[dict]:
    return sorted((r for r in data["runs"] if r["setting"] == setting and r["variant"] == variant),
                  key=lambda r: r["seed"])


def family_summary(data: dict, setting: str) -> dict[str, dict]:
    """variant -> medians over seeds (and the per-seed values), in the benchmark's row order."""
    out = {}
    for variant in dict.fromkeys(r["variant"] for r in data["runs"] if r["setting"] == setting):
        rows = _rows(data, setting, variant)
        out[variant] = {
            "seeds": [r["seed"] for r in rows],
            "baseline": statistics.median(r["baseline_accuracy"] for r in rows),
            "starts": [r["baseline_accuracy"] for r in rows],
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
    starts = next(iter(summary.values()))["starts"]  # every row of a seed starts from the same SFT checkpoint
    lines.append(f"| SFT start | {pct(base)} | | {' / '.join(pct(x) for x in starts)} | | | | |")
    for name, v in summary.items():
        lines.append(
            f"| {name} | **{pct(v['final'])}** | {100 * v['lift']:+.1f} pts | "
            f"{' / '.join(pct(x) for x in v['per_seed'])} | {pct(v['carry'])} | {v['optimizer_steps']:.0f} | "
            f"{v['groups_sampled']:,.0f} | {v['rl_seconds']:.0f} |"
        )
    return "\n".join(lines) + "\n"


def grpo_family(results: Path = RESULTS) -> str:
    data = load("grpo_family", results)
    parts = []
    titles = {"main": "strong start (SFT 1,200 steps{}), binary strict checker",
              "weak": "weak start (SFT 300 steps{}), binary or partial credit"}
    steps = f"{data['grpo_steps']} optimiser steps per row"
    for setting in dict.fromkeys(r["setting"] for r in data["runs"]):
        starts = seed_starts(data, setting)
        title = titles.get(setting, setting + "{}").format(
            f": {pct(statistics.median(starts.values()))} held-out exact match at the start, median; per seed "
            + " / ".join(pct(x) for x in starts.values()))
        flags = [f"seed {s} starts at {pct(x)}" for s, x in starts.items() if x < DEGENERATE_START]
        flag = (f"\n\n**Degenerate start**: {', '.join(flags)}, below {pct(DEGENERATE_START)} — almost every group "
                "scores all zero, so nothing learns from it; the verdicts below also read the seeds without "
                "it.") if flags else ""
        parts.append(f"*{title}; {steps}; the GRPO row is sequence mean*{flag}\n\n{family_table(data, setting)}")
    lines = verdicts(data)
    if lines:
        parts.append("What the table supports (a gap within the spread between seeds is not a measured difference; "
                     "runs of one seed share the SFT start and the prompts, so the seed-by-seed differences are the "
                     "sharper reading, and three seeds are still few):\n\n"
                     + "\n".join(lines) + "\n")
    parts.append(f"{source(data)} — {data['machine']}.\n")
    return "\n".join(parts)


def seed_starts(data: dict, setting: str) -> dict[int, float]:
    """seed -> held-out accuracy of the SFT start every row of that seed and setting shares."""
    return {r["seed"]: r["baseline_accuracy"] for r in sorted(data["runs"], key=lambda r: r["seed"])
            if r["setting"] == setting}


def verdicts(data: dict) -> list[str]:
    """What the family table supports: for each comparison, the paired (same-seed) differences read by
    ``course_lib.run.verdicts.paired``. Seeds with a degenerate start are flagged and the paired reading is
    repeated without them."""
    out = []
    summaries = {s: family_summary(data, s) for s in dict.fromkeys(r["setting"] for r in data["runs"])}
    pairs = [("main", "GRPO", "RFT"), ("main", "GRPO", "more SFT"), ("weak", "GRPO", "RFT"),
             ("weak", "GRPO partial", "reward-weighted partial"), ("weak", "GRPO partial", "GRPO")]
    for setting, a, b in pairs:
        summ = summaries.get(setting, {})
        if a not in summ or b not in summ:
            continue
        x, y = (dict(zip(summ[v]["seeds"], summ[v]["per_seed"])) for v in (a, b))
        starts = seed_starts(data, setting)
        both = sorted(set(x) & set(y))
        line = f"- {setting} start: {by_seed(x, y, a, b).sentence()}"
        healthy = [s for s in both if starts[s] >= DEGENERATE_START]
        if 1 < len(healthy) < len(both):
            line += (f". Without the degenerate start ({', '.join(f'seed {s}' for s in both if s not in healthy)}): "
                     f"{by_seed({s: x[s] for s in healthy}, y, a, b).sentence()}")
        out.append(line)
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


def hacking_verdicts(data: dict) -> list[str]:
    """What the reward-hacking runs support, seed by seed, in points of held-out accuracy (the floor: the
    evaluation noise on the file's held-out prompts): what each run did to strict accuracy from its start, and
    how far the loose run's proxy ends above the truth."""
    by = {(r["seed"], r["reward"]): r for r in data["runs"]}
    noise = evaluation_noise(data["n_heldout"])

    def read(value, name_a, name_b, reward):
        return by_seed(*({s: value(by[s, reward], side) for (s, w) in by if w == reward} for side in (0, 1)),
                       name_a, name_b, margin=noise)

    out = []
    for reward in ("loose", "strict"):
        got = read(lambda r, side: r["final" if side == 0 else "start"]["accuracy"], f"{reward}-checker run, strict "
                   "held-out at the end", "at the start", reward)
        if got:
            out.append(f"- {got.sentence()}")
    got = read(lambda r, side: r["final"]["loose_accuracy" if side == 0 else "accuracy"],
               "loose-checker run at the end, loose held-out", "strict held-out", "loose")
    if got:
        out.append(f"- {got.sentence()}")
    return out


def reward_hacking(results: Path = RESULTS) -> str:
    data = load("reward_hacking", results)
    return (f"{hacking_table(data)}\n{source(data)}: "
            f"{data['rl_steps']} GRPO steps from {data['sft_steps']} SFT steps, {data['n_heldout']} held-out "
            "prompts.\n")


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
    return "\n".join(lines) + f"\n\nmedian (per seed {', '.join(map(str, data['seeds']))}); {source(data)}.\n"


def dpo(results: Path = RESULTS) -> str:
    """DPO, DPO + NLL and (when measured) NLL only: SFT on the chosen answers of the same pairs."""
    return _per_seed_table(load("dpo", results), [("SFT start", "sft_accuracy", pct), ("final", "final_accuracy", pct),
                                                  ("seconds (pairs + updates)", "rl_seconds", lambda x: f"{x:.0f}")])


def dpo_verdicts(data: dict, n_heldout: int) -> list[str]:
    """What the DPO table supports, seed by seed (the same seed: the same SFT start and pairs), in points of
    held-out accuracy on ``n_heldout`` prompts (the floor: their evaluation noise): DPO against its SFT start,
    what the preference term adds beside the NLL term (DPO + NLL − NLL only), what the NLL term adds to DPO, and
    KTO (DPO's answers, unpaired) against DPO."""
    acc: dict[str, dict[int, float]] = {}
    for r in data["runs"]:
        acc.setdefault(r["variant"], {})[r["seed"]] = r["final_accuracy"]
        acc.setdefault("its SFT start", {})[r["seed"]] = r["sft_accuracy"]
    out = []
    for a, b in (("DPO", "its SFT start"), ("DPO + NLL", "NLL only"), ("DPO + NLL", "DPO"), ("KTO", "DPO")):
        read = by_seed(acc.get(a, {}), acc.get(b, {}), a, b, margin=evaluation_noise(n_heldout))
        if read:
            out.append(f"- {read.sentence()}")
    return out


def grpo(results: Path = RESULTS) -> str:
    data = load("grpo", results)
    return (f"GRPO here: `unit={data['unit']}`, {data['steps']} steps — not the family table's GRPO row.\n\n"
            + _per_seed_table(data, [
        ("SFT start", "sft_accuracy", pct), ("GRPO", "final_accuracy", pct),
        ("same wall-clock on more SFT", "control_accuracy", pct), ("RL seconds", "rl_seconds", lambda x: f"{x:.0f}"),
        ("generation share of a step", "generation_fraction", lambda x: f"{100 * x:.0f}%")]))


def seeds(results: Path = RESULTS) -> str:
    """GRPO seeds side by side (``course_lib.run.seeds``): wall and CPU seconds for 1, 2, 4 seeds at once."""
    data = load("seeds", results)
    walls = {int(n): w for n, w in data["wall_seconds"].items()}
    one = walls.get(1)
    lines = ["| seeds side by side | wall s | × the wall of one seed | CPU s, all processes | "
             "held-out accuracy after GRPO, per seed |",
             "|---|---|---|---|---|"]
    for n, wall in walls.items():
        rows = sorted((r for r in data["runs"] if r["n_seeds"] == n and r["round"] == 0), key=lambda r: r["seed"])
        cpu = data["cpu_seconds"][str(n)]
        ratio = f"{wall / one:.2f}×" if one else "—"
        lines.append(f"| {n} | {wall:.1f} | {ratio} | {cpu:.1f} | "
                     f"{' / '.join(pct(r['final_accuracy']) for r in rows)} |")
    goal = ""
    if one and goals.SEEDS_SIDE_BY_SIDE in walls:
        r4 = walls[goals.SEEDS_SIDE_BY_SIDE] / one
        goal = (f" Goal: {goals.SEEDS_SIDE_BY_SIDE} seeds in ≤ {goals.SEEDS_WALL_RATIO:g}× the wall of one on 2 "
                f"cores: **{r4:.2f}×**, {'met' if r4 <= goals.SEEDS_WALL_RATIO else 'not met'} on this run's "
                f"{data['cores']} core(s).")
    return ("\n".join(lines) + f"\n\n{data['steps']} GRPO steps per seed on the `{data['config']}` config, each seed "
            f"in its own process with one thread, from its cached SFT start."
            + (f" Wall and CPU seconds: medians of {data['repeats']} rounds, the counts interleaved."
               if data["repeats"] > 1 else "")
            + f"{goal} Wall-clock is evidence only on an otherwise idle machine. " + footer(data))


def _recipe_label(r: dict) -> str:
    if r["stage"] == 0:
        return f"{r['variant']} (untrained)"
    steps = f" ({r['steps']} steps)" if r.get("steps") else ""
    return f"{r['variant']}: stage {r['stage']} {r['kind']}{steps}"


def _stage(data: dict, variant: str, stage: int) -> dict[int, dict]:
    """seed -> that variant's stage entry (stage 0 of r1 and r1-zero is the random initialisation's row)."""
    if stage == 0:
        variant = "random init"
    return {r["seed"]: r for r in data["runs"] if r["variant"] == variant and r.get("stage") == stage}


def recipe_verdicts(data: dict) -> list[str]:
    """What the recipes table supports, seed by seed: what each r1 stage added, and what GRPO amplified from each
    start."""

    def spread(values, fmt):
        return f"median {fmt(statistics.median(values))} (per seed {' / '.join(fmt(v) for v in values)})"

    def points(x):
        return f"{100 * x:+.1f} pts"

    out = []
    names = {2: "GRPO (stage 2)", 3: "RFT (stage 3)", 4: "GRPO again (stage 4)"}
    for k, name in names.items():
        read = by_seed(*({s: r["pass@1"] for s, r in _stage(data, "r1", j).items()} for j in (k, k - 1)),
                       name, f"stage {k - 1}")
        if read:
            out.append("- r1, pass@1: " + read.sentence())
    cold, grpo, rft = (_stage(data, "r1", k) for k in (1, 2, 3))
    seeds = sorted(set(cold) & set(grpo) & set(rft))
    if seeds:
        gain = {s: grpo[s]["pass@1"] - cold[s]["pass@1"] for s in seeds}
        best = max(seeds, key=lambda s: cold[s]["pass@8"])
        added = by_seed(gain, {s: rft[s]["pass@1"] - grpo[s]["pass@1"] for s in seeds},
                        "GRPO's pass@1 gain (stage 2)", "RFT's (stage 3)")
        out.append(f"- r1: {added.sentence()}; the seed "
                   f"whose cold start sampled the most right answers (seed {best}, pass@8 "
                   f"{pct(cold[best]['pass@8'])}) "
                   + ("had GRPO's largest gain" if gain[best] == max(gain.values())
                      else "did not have GRPO's largest gain")
                   + f" ({points(gain[best])})")
    starts = {"random init (R1-Zero)": ("r1-zero", 0, "r1-zero", 1),
              "digit-text base": ("digit base", 1, "digit base", 2),
              "weak start": ("weak start", 1, "weak start", 2), "cold start (r1)": ("r1", 1, "r1", 2)}
    for name, (sv, si, gv, gi) in starts.items():
        start, rl = _stage(data, sv, si), _stage(data, gv, gi)
        seeds = sorted(set(start) & set(rl))
        if not seeds:
            continue
        gain = by_seed(*({s: r[s]["pass@1"] for s in seeds} for r in (rl, start)), "after GRPO", "start")
        out.append(f"- GRPO from the {name}: start pass@1 {spread([start[s]['pass@1'] for s in seeds], pct)}, "
                   f"pass@8 {spread([start[s]['pass@8'] for s in seeds], pct)}; after GRPO pass@1 "
                   f"{spread([rl[s]['pass@1'] for s in seeds], pct)}; pass@1 {gain.sentence()}; groups without "
                   f"signal {spread([rl[s]['zero_variance_share'] for s in seeds], pct)}")
    return out


def recipes(results: Path = RESULTS) -> str:
    """One row per recipe stage: medians over seeds (per-seed values in brackets) of the stage's numbers, then
    what they support seed by seed."""
    data = load("recipes", results)
    flat = {"runs": [{**r, "variant": _recipe_label(r)} for r in data["runs"] if "stage" in r],
            "seeds": data["seeds"], "command": data["command"], "commit": data["commit"]}
    stopped = [f"{r['variant']} seed {r['seed']}: stage {r['stopped']['stage']} ({r['stopped']['kind']}) did not start"
               for r in data["runs"] if "stopped" in r]
    missing = []
    for variant in dict.fromkeys(r["variant"] for r in data["runs"]):
        seeds = sorted({r["seed"] for r in data["runs"] if r["variant"] == variant})
        if seeds != data["seeds"]:
            missing.append(f"{variant} ran on seed(s) {', '.join(map(str, seeds))} only")

    def two(x):
        return f"{x:.2f}"

    table = _per_seed_table(flat, [
        ("pass@1 (greedy)", "pass@1", pct), ("sampled pass@1", "sampled_pass@1", pct), ("pass@8", "pass@8", pct),
        ("KL to the stage's start, nats", "kl_to_stage_start", two),
        ("zero-variance groups", "zero_variance_share", pct),
        ("RFT acceptance", "acceptance_rate", pct), ("CPU s", "cpu_seconds", lambda x: f"{x:.0f}")])
    notes = "".join(f"\n{s}." for s in (*missing, *stopped))
    lines = recipe_verdicts(data)
    verdicts = ("\nWhat it supports, seed by seed (a seed fixes the random initialisation and the data draws; every "
                "run is scored on the same held-out prompts; a difference "
                f"within the seeds' spread is not a measured one, and {len(data['seeds'])} seeds are few):\n\n"
                + "\n".join(lines) + "\n"
                if lines else "")
    machine = f"\n{data['machine']}.\n" if data.get("machine") else ""
    return table + (notes + "\n" if notes else "") + verdicts + machine


def ai_feedback(results: Path = RESULTS) -> str:
    """Notebook 17's judge, reward model and PPO over seeds, with and without the position rule."""
    data = load("ai_feedback", results)

    def signed(x):
        return f"{x:+.2f}"

    def points(x):
        return f"{100 * x:+.1f} pts"

    table = _per_seed_table(data, [
        ("rules: position bias", "rules_position_bias", signed),
        ("judge: agreement with gold", "judge_agreement", pct),
        ("judge: position bias", "judge_position_bias", signed), ("judge: length bias", "judge_length_bias", signed),
        ("RM on its labels: held-out agreement with gold", "rm_heldout_gold_accuracy", pct),
        ("RM: length bias", "rm_length_bias", signed), ("PPO: gold at the start", "ppo_gold_start", pct),
        ("PPO: gold, end − start", "ppo_gold_change", points), ("PPO: proxy, end − start", "ppo_proxy_change", signed),
        ("CPU s", "cpu_seconds", lambda x: f"{x:.0f}")])
    out = []
    for variant in dict.fromkeys(r["variant"] for r in data["runs"]):
        rows = [r for r in data["runs"] if r["variant"] == variant]
        n = len(rows)
        out.append(f"- {variant}: the judge's |position bias| < 0.1 on "
                   f"{sum(abs(r['judge_position_bias']) < 0.1 for r in rows)} of {n} seeds, length bias > 0.3 on "
                   f"{sum(r['judge_length_bias'] > 0.3 for r in rows)} of {n}; under PPO the proxy rose on "
                   f"{sum(r['ppo_proxy_change'] > 0 for r in rows)} of {n} and gold fell on "
                   f"{sum(r['ppo_gold_change'] < 0 for r in rows)} of {n}")
    budget = (f"Notebook 17's `{data['budget']}` budget: the judge {data['judge_steps']} steps, the reward model "
              f"{data['rm_steps']}, PPO {data['ppo_steps']} ({data['window']}-step moving means); each seed's own SFT "
              "start.")
    return (table + "\n" + budget + " Seed by seed:\n\n" + "\n".join(out) + "\n"
            + (f"\n{data['machine']}.\n" if data.get("machine") else ""))


def tools(results: Path = RESULTS) -> str:
    """GRPO with the calculator and without, the masking ablation: medians over seeds (per seed in brackets)."""
    data = load("tools", results)

    def two(x):
        return f"{x:.2f}"

    table = _per_seed_table(data, [
        ("start", "start_accuracy", pct), ("after GRPO", "final_accuracy", pct),
        ("carry prompts", "final_accuracy_carry", pct), ("no-carry prompts", "final_accuracy_no_carry", pct),
        ("greedy tool use, carry: start", "start_tool_use_carry", pct), ("end", "final_tool_use_carry", pct),
        ("sampled call rate, carry: first quarter", "call_rate_carry_first", pct),
        ("last quarter", "call_rate_carry_last", pct),
        ("log-prob of the tool's answer", "tool_answer_logprob", two),
        ("GRPO CPU s", "grpo_cpu_seconds", lambda x: f"{x:.0f}")])
    said = tools_verdicts(data)
    setting = (f"{data['grpo_steps']} GRPO steps per row ({data['config']} config); the tool start: "
               f"{data['tool_sft']} SFT steps in which the first {data['tool_demos']} carry demonstrations call the "
               f"tool for {'the whole sum' if data['tool_call'] == 'sum' else 'the ones column'}")
    return (f"*{setting}. CPU seconds of GRPO alone, on a shared machine.*\n\n"
            + table + ("\n" + "\n".join(said) + "\n" if said else ""))


def tools_verdicts(data: dict) -> list[str]:
    """What the tools table supports, seed by seed: whether GRPO raised each start's sampled call rate on carry
    prompts, and each tool start's held-out accuracy after GRPO against the start with the same extra SFT and no
    tool demonstration."""
    by = {(r["variant"], r["seed"]): r for r in data["runs"]}
    variants = list(dict.fromkeys(r["variant"] for r in data["runs"]))
    said = []
    for v in variants:  # did GRPO raise the sampled call rate on carry prompts?
        rows = [r for r in data["runs"] if r["variant"] == v and r.get("call_rate_carry_first") is not None]
        if rows:
            said.append(f"- {v}, sampled call rate on carry prompts: " + by_seed(
                *({r["seed"]: r[key] for r in rows} for key in ("call_rate_carry_last", "call_rate_carry_first")),
                "last quarter of the steps", "first").sentence() + ".")
    control = "no tool, same extra SFT"
    for v in variants:  # each tool row against the start with the same extra SFT and no tool demonstration
        read = by_seed(*({s: r["final_accuracy"] for (w, s), r in by.items() if w == name} for name in (v, control)),
                       v, control)
        if v.startswith("tool") and read:
            said.append("- held-out accuracy after GRPO: " + read.sentence() + ".")
    return said


def masking_verdicts(data: dict, n_heldout: int) -> list[str]:
    """The masking ablation seed by seed (the same seed: the same tool start and prompts): with the environment's
    tokens in the loss against masked, the log-prob of the tool's answer (nats; no floor) and held-out accuracy
    (points on ``n_heldout`` prompts, the floor their evaluation noise)."""
    masked, unmasked = "tool, every carry demo", "tool, every carry demo, env tokens in the loss"
    rows = {v: {r["seed"]: r for r in data["runs"] if r["variant"] == v} for v in (masked, unmasked)}
    nats, points = {"scale": 1.0, "unit": " nats", "digits": 2}, {"margin": evaluation_noise(n_heldout)}
    out = []
    for key, what, how in (("tool_answer_logprob", "log-prob of the tool's answer", nats),
                           ("final_accuracy", "held-out accuracy after GRPO", points)):
        values = ({s: r[key] for s, r in rows[v].items() if r.get(key) is not None} for v in (unmasked, masked))
        read = by_seed(*values, "env tokens in the loss", "masked", **how)
        if read:
            out.append(f"- {what}: {read.sentence()}")
    return out


def rollout(results: Path = RESULTS) -> str:
    return _per_seed_table(load("rollout", results), [
        ("cached, s", "cached_seconds", lambda x: f"{x:.3f}"),
        ("uncached, s", "uncached_seconds", lambda x: f"{x:.3f}"),
        ("speed-up", "speedup", lambda x: f"{x:.1f}×"),
        ("cached tokens/s", "cached_tokens_per_second", lambda x: f"{x:,.0f}")])


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
                   f"{' / '.join(f'{x:.2f}' for x in ratios)}); the goal is ≤ {goals.TRL_CPU_STEP_RATIO:g}: "
                   f"{'met' if r <= goals.TRL_CPU_STEP_RATIO else 'not met'}. {data['steps']} steps per run "
                   f"({data['machine']}).\n")
    return table + summary


def trl_verdicts(data: dict, n_heldout: int) -> list[str]:
    """What the side-by-side runs support, seed by seed (the same seed: the same SFT start): each trainer's
    held-out lift over its SFT start, and course_lib's against TRL's, in points on ``n_heldout`` prompts (the
    floor: their evaluation noise)."""
    course, trl = "course_lib `train_grpo`", "TRL `GRPOTrainer` (bridge)"
    final = {v: {r["seed"]: r["final_accuracy"] for r in data["runs"] if r["variant"] == v} for v in (course, trl)}
    start = {r["seed"]: r["baseline_accuracy"] for r in data["runs"] if r["variant"] == course}
    noise = evaluation_noise(n_heldout)
    reads = [by_seed(final[course], start, "course_lib", "its SFT start", margin=noise),
             by_seed(final[trl], start, "TRL", "its SFT start", margin=noise),
             by_seed(final[course], final[trl], "course_lib", "TRL", margin=noise)]
    return [f"- {read.sentence()}" for read in reads if read]


def kl_frontier_verdicts(data: dict, n_heldout: int) -> list[str]:
    """What the frontier supports, seed by seed (the same seed: the same SFT start and prompts): for each
    placement, the largest β against β = 0 in held-out accuracy (points on ``n_heldout`` prompts, the floor their
    evaluation noise) and in KL(π‖π_ref) (nats; no floor), and the two placements' KL at the largest β."""
    runs = {(r["placement"], r["beta"]): {} for r in data["runs"]}
    for r in data["runs"]:
        runs[r["placement"], r["beta"]][r["seed"]] = r
    top = max(b for _, b in runs)
    free = runs.get(("none", 0.0), {})

    def values(key, setting):
        return {s: r[key] for s, r in runs.get(setting, {}).items()}

    nats = {"scale": 1.0, "unit": " nats", "digits": 3}
    out = []
    for placement in ("loss", "reward"):
        name = f"KL in the {placement}, β = {top:g}"
        for read in (by_seed(values("accuracy", (placement, top)), values("accuracy", ("none", 0.0)), name,
                             "β = 0", margin=evaluation_noise(n_heldout)),
                     by_seed(values("kl", (placement, top)), values("kl", ("none", 0.0)), name, "β = 0", **nats)):
            if read and free:
                out.append(f"- {'held-out accuracy' if read.unit == ' pts' else 'KL(π‖π_ref)'}: {read.sentence()}")
    read = by_seed(values("kl", ("loss", top)), values("kl", ("reward", top)), f"k3 in the loss, β = {top:g}",
                   f"k1 in the reward, β = {top:g}", **nats)
    if read:
        out.append(f"- KL(π‖π_ref): {read.sentence()}")
    return out


def kl_frontier(results: Path = RESULTS) -> str:
    data = load("kl_frontier", results)
    lines = ["| KL placement | β | estimator | held-out accuracy | KL(π‖π_ref) on held-out prompts |",
             "|---|---|---|---|---|"]
    for row in data["table"]:
        acc = " / ".join(pct(v) for v in row["accuracy_per_seed"])
        kl = " / ".join(f"{v:.2f}" for v in row["kl_per_seed"])
        estimator = row["estimator"] if row["beta"] > 0 else "—"
        lines.append(f"| {row['placement']} | {row['beta']:g} | {estimator} | {pct(row['accuracy'])} ({acc}) | "
                     f"{row['kl']:.2f} ({kl}) |")
    return ("\n".join(lines) + f"\n\nmedian (per seed {', '.join(map(str, data['seeds']))}), "
            f"{data['steps']} GRPO steps; " + footer(data))


def rlhf(results: Path = RESULTS) -> str:
    """The RLHF route (notebook 12_the_rlhf_route): one row per measure, the median over seeds and each seed's
    value."""
    data = load("rlhf", results)
    runs = sorted(data["runs"], key=lambda r: r["seed"])

    def bon(n):
        return lambda r: next(x["gold"] for x in r["bon"] if x["n"] == n)

    def mib(x):
        return f"{x / 2**20:.2f} MiB"

    rows = [("SFT held-out exact match", lambda r: r["sft_accuracy"], pct),
            ("reward model: held-out pairwise accuracy (noisy labels)", lambda r: r["rm"]["heldout_accuracy"], pct),
            ("noise ceiling (held-out labels not flipped)", lambda r: r["rm"]["noise_ceiling"], pct),
            (f"**reward model / noise ceiling** (target ≥ {100 * goals.RM_OF_NOISE_CEILING:.0f}%)",
             lambda r: r["rm"]["of_ceiling"], pct),
            ("reward model against gold labels", lambda r: r["rm"]["heldout_gold_accuracy"], pct),
            ("reward model calibration error (ECE)", lambda r: r["rm"]["ece"], lambda x: f"{x:.3f}"),
            ("reward model training pairs", lambda r: r["rm"]["train_pairs"], lambda x: f"{x:,.0f}"),
            ("reward model training seconds", lambda r: r["rm"]["train_seconds"], lambda x: f"{x:.0f}"),
            ("best-of-1 gold (strict) accuracy", bon(1), pct),
            ("best-of-8 gold accuracy", bon(8), pct),
            ("**best-of-16** gold accuracy", bon(16), pct),
            ("best-of-64 gold accuracy", bon(64), pct),
            ("best-of-N: the N with the highest gold", lambda r: max(r["bon"], key=lambda x: x["gold"])["n"],
             lambda x: f"{x:g}")]
    rows += [("best-of-N: √KL at that N, exact (each prompt's 64 samples, repeats counted)",
              lambda r: max(r["bon"], key=lambda x: x["gold"])["kl"] ** 0.5, lambda x: f"{x:.2f}"),
             ("best-of-64: √KL exact / √(log N − (N − 1)/N), the bound",
              lambda r: (r["bon"][-1]["kl"] / r["bon"][-1]["kl_bound"]) ** 0.5, lambda x: f"{x:.2f}")]
    for i, o in enumerate(runs[0]["overopt"]):
        def get(key, i=i):
            return lambda r: r["overopt"][i][key]

        head = f"PPO against the reward model, β = {o['beta']:g}, {o['steps']} steps × {o['batch_prompts']}"
        rows += [(f"{head}: gold at start", get("gold_start"), pct),
                 (f"{head}: gold at its peak", get("gold_peak"), pct),
                 (f"{head}: √KL at the gold peak", get("sqrt_kl_peak"), lambda x: f"{x:.2f}"),
                 (f"{head}: gold at the end", get("gold_end"), pct),
                 (f"{head}: proxy at start → end",
                  lambda r, i=i: r["overopt"][i]["proxy_end"] - r["overopt"][i]["proxy_start"],
                  lambda x: f"{x:+.2f}"),
                 (f"{head}: √KL at the end", get("sqrt_kl_end"), lambda x: f"{x:.2f}")]
    n, per = data["rl_steps"], data["completions_per_step"]
    steps = f"{n} steps × {per} sampled completions, strict checker"
    configured = {"GRPO": f"{n} optimiser steps, 32 prompts × 8", "RLOO": f"{n} optimiser steps, 32 prompts × 8",
                  "PPO": f"{2 * n} optimiser steps (2 epochs), 256 prompts × 1"}
    for k in ("GRPO", "RLOO", "PPO"):
        rows.append((f"as configured: {k} held-out exact match ({steps}; {configured[k]})",
                     lambda r, k=k: r["rl"][k]["accuracy"], pct))
    rows += [("as configured: PPO − GRPO, points",
              lambda r: 100 * (r["rl"]["PPO"]["accuracy"] - r["rl"]["GRPO"]["accuracy"]),
              lambda x: f"{x:+.1f}")]
    matched = ("GRPO, matched optimiser steps", "GRPO, PPO's wall-clock")
    for k in matched:
        what = {"GRPO, matched optimiser steps": "μ = 2: PPO's optimiser steps on the same samples",
                "GRPO, PPO's wall-clock": "μ = 1, as many steps as fit in PPO's RL seconds"}[k]
        rows += [(f"{k} ({what}): held-out exact match", lambda r, k=k: r["rl"][k]["accuracy"], pct),
                 (f"{k}: optimiser steps", lambda r, k=k: r["rl"][k]["optimizer_steps"], lambda x: f"{x:,.0f}"),
                 (f"{k}: PPO − this GRPO, points",
                  lambda r, k=k: 100 * (r["rl"]["PPO"]["accuracy"] - r["rl"][k]["accuracy"]),
                  lambda x: f"{x:+.1f}")]
    for k in ("GRPO", "RLOO", "PPO", *matched):
        rows.append((f"{k} RL seconds", lambda r, k=k: r["rl"][k]["rl_seconds"], lambda x: f"{x:.0f}"))
    rows += [("PPO time / GRPO time", lambda r: r["rl"]["PPO"]["rl_seconds"] / r["rl"]["GRPO"]["rl_seconds"],
              lambda x: f"{x:.2f}×"),
             ("critic: extra measured memory (weights, grads, AdamW)", lambda r: r["rl"]["PPO"]["critic_bytes"], mib),
             ("critic share of PPO's trained-model states",
              lambda r: r["rl"]["PPO"]["critic_bytes"] / r["rl"]["PPO"]["bytes"], pct)]
    lines = [f"| measure | median | per seed {' / '.join(str(r['seed']) for r in runs)} |", "|---|---|---|"]
    for name, f, fmt in rows:
        vals = [f(r) for r in runs]
        lines.append(f"| {name} | {fmt(statistics.median(vals))} | {' / '.join(fmt(v) for v in vals)} |")
    shapes = [f"seed {r['seed']}: " + ", ".join(f"β = {o['beta']:g} {o['shape']}" for o in r["overopt"]) for r in runs]
    peaked = [r for r in runs if 1 < max(r["bon"], key=lambda x: x["gold"])["n"] < r["bon"][-1]["n"]
              and r["bon"][-1]["gold"] < max(x["gold"] for x in r["bon"]) - 0.03]
    return ("\n".join(lines) + "\n\nBest-of-N: gold rises, peaks at an N between the ends and falls by more than 3 "
            f"points by N = {runs[0]['bon'][-1]['n']} in {len(peaked)} of {len(runs)} seeds. "
            "Gold under PPO against the reward model (5-step moving means, a move counts above 3 points): "
            + "; ".join(shapes) + ". PPO's time covers its critic and two passes over each batch (GRPO and RLOO: "
            "one); its 256 prompts per step are each sampled once, GRPO's 32 eight times. Seconds are wall time on a "
            "shared, loaded machine.\n\n" + footer(data))


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
             "", "| trainer | steps | seconds | held-out accuracy | sampled tokens/s | MFU |",
             "|---|---|---|---|---|---|"]
    for r in data["trainers"]:
        if "skipped" in r:
            lines.append(f"| {r['kind']} | skipped: {r['skipped']} | | | | |")
            continue
        steps = f"{r['steps']}" + (" (stopped by the time budget)" if r["stopped"] else "")
        dtype = f" ({r['dtype']})" if r.get("dtype") else ""  # the peak it is measured against
        lines.append(f"| {r['kind']} | {steps} | {r['train_seconds']:.1f} | {cell(r['accuracy'], '.1%')} | "
                     f"{cell(r['generated_tokens_per_second'], ',.0f')} | {cell(r['mfu'], '.3%')}{dtype} |")
    notebooks = data.get("notebooks")
    if isinstance(notebooks, list):  # the training notebooks at COURSE_FAST=1 on the device
        runs = [f"{n['notebook']} " + (f"skipped ({n['skipped']})" if "skipped" in n else
                                       f"passed in {n['seconds']:.0f} s" if n["returncode"] == 0 else
                                       f"killed at {n['seconds']:.0f} s" if n["returncode"] is None else
                                       f"FAILED (exit {n['returncode']})") for n in notebooks]
        lines += ["", "Training notebooks at `COURSE_FAST=1` on the device: " + "; ".join(runs) + "."]
    lines += ["", f"Instruct recipe smoke test: {data['instruct_smoke']}. Levers: "
                  f"{data.get('levers', 'not measured')}.",
              "", f"{source(data)}.\n"]
    return "\n".join(lines)


def _async_runs(data: dict, K: int, correction: bool = True) -> list[dict]:
    return sorted((r for r in data["runs"] if r["max_staleness"] == K and (K == 0 or r["correction"] == correction)),
                  key=lambda r: r["seed"])


def async_speed(results: Path = RESULTS) -> str:
    """Synchronous GRPO vs a rollout worker one step behind: optimiser steps per wall-clock second, per seed.

    From ``tinygpt_async.py --staleness 1 --out results/async_speed.json`` run on an otherwise idle
    machine (two free cores: one per process): the one setting where wall-clock is evidence.
    """
    data = load("async_speed", results)
    sync, k1 = {r["seed"]: r for r in _async_runs(data, 0)}, {r["seed"]: r for r in _async_runs(data, 1)}
    seeds = sorted(set(sync) & set(k1))
    if not seeds:
        raise ValueError("async_speed.json has no seed with both K = 0 and K = 1")
    ratio = {s: k1[s]["steps_per_second"] / sync[s]["steps_per_second"] for s in seeds}
    lines = ["| seed | synchronous: steps/s | K = 1: steps/s | ratio | CPU s, all processes (sync → K = 1) | "
             "held-out accuracy (sync → K = 1) |", "|---|---|---|---|---|---|"]
    for s in seeds:
        lines.append(f"| {s} | {sync[s]['steps_per_second']:.2f} | {k1[s]['steps_per_second']:.2f} | {ratio[s]:.2f}× "
                     f"| {sync[s]['cpu_seconds']:.1f} → {k1[s]['cpu_seconds']:.1f} | "
                     f"{pct(sync[s]['accuracy'])} → {pct(k1[s]['accuracy'])} |")

    def med(rows, key):
        return statistics.median(r[key] for r in rows)

    S, A = [sync[s] for s in seeds], [k1[s] for s in seeds]
    r_med = statistics.median(ratio.values())
    lines.append(f"| **median** | {med(S, 'steps_per_second'):.2f} | {med(A, 'steps_per_second'):.2f} | "
                 f"**{r_med:.2f}×** | {med(S, 'cpu_seconds'):.1f} → {med(A, 'cpu_seconds'):.1f} | "
                 f"{pct(med(S, 'accuracy'))} → {pct(med(A, 'accuracy'))} |")
    met = sum(ratio[s] >= goals.ASYNC_SPEEDUP for s in seeds)
    work = [k1[s]["cpu_seconds"] / sync[s]["cpu_seconds"] for s in seeds]
    held_out = by_seed({s: k1[s]["accuracy"] for s in seeds}, {s: sync[s]["accuracy"] for s in seeds}, "K = 1",
                       "synchronous")
    return ("\n".join(lines) + "\n\nMeasured on an otherwise idle machine (two cores: the trainer on one, the "
            f"rollout worker on the other), {data['steps']} optimiser steps per run on the `{data['config']}` config, "
            f"evaluation excluded from the seconds. Against the goal of ≥ {goals.ASYNC_SPEEDUP:g}× optimiser steps "
            f"per wall-clock second: median **{r_med:.2f}×**, {'met' if r_med >= goals.ASYNC_SPEEDUP else 'not met'} "
            f"on the median, reached by {met} of {len(seeds)} seeds (per seed "
            f"{' / '.join(f'{ratio[s]:.2f}×' for s in seeds)}). Held-out accuracy, {held_out.sentence()}. The CPU "
            f"column is the work done by both processes: K = 1 used {100 * min(work):.0f}–{100 * max(work):.0f}% of "
            "the synchronous run's CPU seconds, "
            + ("about the same work, spread over two cores. " if all(0.8 <= w <= 1.25 for w in work) else
               "a different amount of work, not only a different placement. ")
            + f"{source(data)}, {data['date']} ({data['machine']}).\n")


def async_sweep(results: Path = RESULTS) -> str:
    """The staleness sweep: K = 0, 1, 2, 4, 8, with and without the behaviour correction, medians and ranges over
    seeds."""
    data = load("async", results)
    settings = dict.fromkeys((r["max_staleness"], r["max_staleness"] == 0 or r["correction"]) for r in data["runs"])
    lines = ["| K | correction | held-out accuracy: median (range) | per seed | mismatch KL per token | ESS | "
             "masked share | CPU s, all processes |", "|---|---|---|---|---|---|---|---|"]

    def med(rows, key, fmt):
        vals = [r[key] for r in rows if r.get(key) is not None]
        return fmt(statistics.median(vals)) if vals else "—"

    for K, correction in sorted(settings, key=lambda kc: (kc[0], not kc[1])):
        rows = _async_runs(data, K, correction)
        acc = [r["accuracy"] for r in rows]
        label = "— (synchronous)" if K == 0 else ("on" if correction else "off")
        lines.append(f"| {K} | {label} | {pct(statistics.median(acc))} ({pct(min(acc))}–{pct(max(acc))}) | "
                     f"{' / '.join(pct(a) for a in acc)} | {med(rows, 'mismatch_kl', lambda x: f'{x:.4f}')} | "
                     f"{med(rows, 'is_ess', lambda x: f'{x:.2f}')} | "
                     f"{med(rows, 'is_clipped_fraction', lambda x: f'{100 * x:.1f}%')} | "
                     f"{med(rows, 'cpu_seconds', lambda x: f'{x:.0f}')} |")
    starts = {r["seed"]: r["sft_accuracy"] for r in data["runs"] if r.get("sft_accuracy") is not None}
    loads = [x for r in data["runs"] for x in (r.get("load_before"), r.get("load_after")) if x is not None]
    n_settings = len(settings)
    budget = (f"{data['steps']} optimiser steps per run"
              + (f" (the config's {data['config_steps']}, cut to fit the time "
              "this sweep had)" if data.get("config_steps") and data["config_steps"] != data["steps"] else ""))
    text = ("\n".join(lines) + f"\n\nSeeds {', '.join(map(str, data['seeds']))}, {budget}, `{data['config']}` config"
            + (f"; SFT start per seed {' / '.join(pct(starts[s]) for s in sorted(starts))}" if starts else "")
            + (f" ({data['sft_start']})" if data.get("sft_start") else "")
            + ". Mismatch KL is KL(π_behaviour ‖ π_old) per sampled token, ESS the behaviour weights' effective "
            "sample size as a share, the masked share the tokens whose completion left the band [0, 3] "
            "(`sequence_mask`); each is the mean over a run's steps, then the median over seeds. With the correction "
            "off they are measured, not applied. **The machine was shared**"
            + (f" (load average {min(loads):.1f}–{max(loads):.1f} on 2 cores during the runs)" if loads else "")
            + ": accuracies, mismatch KL, ESS, masked share and CPU seconds reproduce on any machine; wall-clock "
            "does not, so none is shown (the speed table above is the idle-machine measurement).")
    if not data.get("complete", True):
        planned = data.get("planned_runs", n_settings * len(data["seeds"]))
        text += f" **Incomplete**: {len(data['runs'])} of {planned} runs had finished when it stopped."
    text += "".join(f"\n{line}" for line in async_paired(data))
    return text + "\n\n" + footer(data)


def async_paired(data: dict) -> list[str]:
    """Seed-by-seed differences (same seed: same start, same first batch), read by ``course_lib.run.verdicts.paired``:
    what staleness costs against the synchronous run, and what the correction recovers against the same K without
    it."""
    acc = {(r["seed"], r["max_staleness"], r["max_staleness"] == 0 or r["correction"]): r["accuracy"]
           for r in data["runs"]}
    seeds = sorted({r["seed"] for r in data["runs"]})
    if sum((s, 0, True) in acc for s in seeds) < 2:
        return []

    def read(a, b, name_a, name_b):
        read = by_seed(*({s: acc[f(s)] for s in seeds if f(s) in acc} for f in (a, b)), name_a, name_b)
        return read.sentence() if read else f"{name_a} − {name_b}: —"

    lines = ["Seed by seed, in points of held-out accuracy:", ""]
    for K in sorted({r["max_staleness"] for r in data["runs"]} - {0}):
        for a, b, name_a, name_b in (
                (lambda s, K=K: (s, K, True), lambda s: (s, 0, True), f"K = {K} corrected", "synchronous"),
                (lambda s, K=K: (s, K, False), lambda s: (s, 0, True), f"K = {K} uncorrected", "synchronous"),
                (lambda s, K=K: (s, K, True), lambda s, K=K: (s, K, False), f"K = {K} with the correction",
                 "without")):
            lines.append(f"- {read(a, b, name_a, name_b)}")
    return ["", *lines]


def _duration(seconds: float) -> str:
    return f"{seconds:.0f} s" if seconds < 120 else f"{seconds / 60:.0f} min"


def t4_estimate(results: Path = RESULTS) -> str:
    """The Colab section's per-notebook times on a T4: estimates from CPU counts (``benchmarks/t4_estimate.py``)."""
    data = load("t4_estimate", results)
    lat, sync, eff = data["launch_us"], data["sync_us"], data["efficiency"]

    def span(pair):
        lo, hi = pair
        return f"{_duration(lo)}–{_duration(hi)} (estimate)" if _duration(lo) != _duration(hi) else \
            f"{_duration(lo)} (estimate)"

    lines = ["| notebook | what trains | FAST on the runtime's CPU | FAST on a T4 | "
             "full on the runtime's CPU | full on a T4 |",
             "|---|---|---|---|---|---|"]
    for name, row in data["notebooks"].items():
        fast, full = row["fast"], row["full"]
        lines.append(f"| {name} | {row['note']} | {_duration(fast['cpu_seconds'])} (estimate) | "
                     f"{span(fast['t4_seconds'])} | {_duration(full['cpu_seconds'])} (estimate) | "
                     f"{span(full['t4_seconds'])} |")
    return ("**Estimates, not measurements** (no run of the course has had a GPU). Method: each trainer's step was "
            "run here on the `cpu` config and its kernel launches, host reads and matmul FLOPs counted; a T4 step is "
            "taken to cost the step's host time between operators (Python, autograd, reward checks) + launches × "
            f"{lat[0]:g}–{lat[1]:g} µs + host reads × {sync[0]:g}–{sync[1]:g} µs + FLOPs at {eff[1]:.0%}–{eff[0]:.0%} "
            "of the T4's fp32 peak (the course trains in fp32 there), times the steps each notebook's code runs; the "
            "CPU columns are this machine's CPU seconds per step × the same steps (training and evaluation only).\n\n"
            + "\n".join(lines)
            + "\n\n" + footer(data))


def class_grading(results: Path = RESULTS) -> str:
    data = load("class_grading", results)
    lines = ["| jobs | class | wall time | seconds per student | speed-up | load before → after |",
             "|---|---|---|---|---|---|"]
    for run in data["runs"]:
        lines.append(f"| {run['jobs']} | {run['students']} | {run['seconds']:.0f} s | "
                     f"{run['seconds_per_student']:.1f} | {run['speedup']:.2f}× | {run['load_before']:g} → "
                     f"{run['load_after']:g} |")
    last = min(data["runs"], key=lambda r: r["seconds"])  # the fastest setting: the jobs an instructor would pick
    size, goal = goals.CLASS_SIZE, goals.CLASS_MINUTES
    if data["class_size"] >= size:  # the goal's class size or more: the time was measured, not extrapolated
        per_class = size * last["seconds_per_student"] / 60
        return ("\n".join(lines) + f"\n\nMeasured on a class of {data['class_size']} ({data['assignment']}, all "
                f"five notebooks each): with {last['jobs']} jobs it took {last['seconds'] / 60:.1f} min, "
                f"{'within' if per_class <= goal else 'over'} the goal of ≤ {goal} min for {size} on 2 cores "
                f"(measured, not extrapolated). " + footer(data))
    minutes = size * last["seconds_per_student"] / 60
    return ("\n".join(lines) + f"\n\nMeasured on a class of {data['class_size']} ({data['assignment']}, all five "
            f"notebooks each), not {size}: at this rate a class of {size} with {last['jobs']} jobs would take about "
            f"{minutes:.1f} min (an extrapolation; the goal is ≤ {goal} min on 2 cores). " + footer(data))


def trl_map(results: Path = RESULTS) -> str:
    """The course ↔ TRL 1.16 table: ``course_lib.trl.trl_translate.MAPPING``, the data the bridge's tests check (no
    JSON)."""
    from course_lib.trl.trl_translate import mapping_markdown

    return mapping_markdown()


def provenance(results: Path = RESULTS) -> str:
    """One line on where every results file came from: one version of the code (the sources digest,
    ``provenance.py``) and the commits it was run at, or which file ran which version."""
    files = sorted(results.glob("*.json"))
    if not files:
        raise FileNotFoundError(f"no results in {results}")
    data = {f.stem: json.loads(f.read_text()) for f in files}

    def grouped(field: str) -> tuple[list[str], str]:
        values = {name: d.get(field) or "not recorded" for name, d in data.items()}
        distinct = sorted(set(values.values()))
        return distinct, "; ".join(f"{v}: {', '.join(n for n, vv in values.items() if vv == v)}" for v in distinct)

    digests, by_digest = grouped("sources")
    commits, by_commit = grouped("commit")
    kernels = grouped("cpu_kernels")[1]  # torch's CPU kernel set rounds differently (docs/testing.md)
    if len(digests) == 1 and digests[0] != "not recorded" and not digests[0].endswith("+changes"):
        head = (f"Every table below ran the same code: sources digest {digests[0]} (`benchmarks/provenance.py`: "
                f"course_lib, configs and the benchmark scripts), {len(files)} results files, at commit"
                + (f" {commits[0]}." if len(commits) == 1 else f"s {', '.join(commits)} (the same sources at each)."))
    else:
        head = (f"**The tables below do not all come from one committed version of the code** (sources digest "
                f"{by_digest}; commits {by_commit}); `make bench` re-runs every benchmark not at the current code.")
    return f"{head} torch's CPU kernels: {kernels}.\n"


RENDERERS = {"provenance": provenance, "gpu_check": gpu_check, "t4_estimate": t4_estimate, "grpo_family": grpo_family,
             "reward_hacking": reward_hacking, "dpo": dpo, "grpo": grpo, "rollout": rollout,
             "trl_vs_course_grpo": trl_vs_course_grpo, "kl_frontier": kl_frontier, "rlhf": rlhf,
             "class_grading": class_grading, "recipes": recipes, "ai_feedback": ai_feedback, "trl_map": trl_map,
             "async_speed": async_speed, "async_sweep": async_sweep, "tools": tools, "seeds": seeds}


def block(name: str, results: Path = RESULTS) -> str:
    """The body of the ``bench:NAME`` block, from the JSON in ``results``."""
    if name not in RENDERERS:
        raise ValueError(f"a page has a bench block {name!r} with no renderer; known: {sorted(RENDERERS)}")
    try:
        return RENDERERS[name](results)
    except FileNotFoundError:
        return "*Not measured in this copy: run `make bench`.*\n"


def render(text: str, results: Path = RESULTS) -> str:
    """Return ``text`` with every known ``bench:`` block regenerated from the JSON."""
    return doc_blocks.render(text, "bench", lambda name: block(name, results))


def main(argv=None) -> int:
    return doc_blocks.main(argv, kind="bench", body=block, command="python benchmarks/tables.py",
                           description="regenerate the benchmark tables in README.md and docs/*.md")


if __name__ == "__main__":
    sys.exit(main())
