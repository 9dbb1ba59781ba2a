"""The training dashboard: one matplotlib figure from a run's per-step metrics (§15).

A mature RLVR dashboard shows more than mean reward: held-out accuracy, completion length,
the zero-variance-group rate, verifier failures (the checker raised or found no answer it could
parse: ``rewards.CheckerReward``), policy entropy, KL to the reference, the clip fraction and
where the time goes; with an environment (§16), tool use (held-out and sampled), the reward
split by tool use and by carry, turns and tokens per episode, and environment errors.
``dashboard(rows)`` draws whichever of these the rows contain (SFT and
DPO rows carry fewer keys), so the same function serves every trainer and notebook.

Layout rules (what a reader can check at a glance):
- a panel's title says what it measures and on which data: held-out numbers and
  training-data numbers never share a panel called "held-out";
- lines are labelled in words (``LABELS``), never by raw metric keys;
- legends sit outside the axes (a run legend under the grid, a metric legend under a panel
  that holds several metrics), so they never cover a curve;
- the figure is 9 inches wide: shown at its natural size in a notebook, not shrunk;
- a panel asked for by name is always drawn: with no data it says what was not logged (e.g. the
  KL to the reference, which a run without a reference cannot log), instead of vanishing.
"""

from __future__ import annotations

import matplotlib.pyplot as plt

# panel title, metric keys, y-axis label
PANELS = [
    ("reward on the policy's samples", ["reward_mean"], "mean reward"),
    ("held-out accuracy (greedy)", ["accuracy", "loose_accuracy"], "share of prompts"),
    ("carry vs no carry (held-out)", ["accuracy_carry", "accuracy_no_carry"], "share of prompts"),
    ("tool use (held-out, greedy)", ["tool_use_carry", "tool_use_no_carry"], "share of episodes"),
    ("tool calls (sampled episodes)", ["tool_call_rate", "tool_call_rate_carry", "tool_call_rate_no_carry",
                                       "tool_error_rate"],
     "share"),
    ("reward by tool use (sampled)", ["reward_with_tool", "reward_without_tool", "reward_carry_with_tool",
                                      "reward_carry_without_tool"], "mean reward"),
    ("reward by carry (sampled)", ["reward_carry", "reward_no_carry"], "mean reward"),
    ("episode size", ["turns_per_episode", "tokens_per_episode"], "per episode"),
    ("environment errors", ["env_errors"], "episodes per step"),
    ("preference accuracy", ["preference_accuracy", "val_preference_accuracy"], "share of pairs"),
    ("DPO implicit rewards", ["margin", "val_margin", "reward_chosen", "reward_rejected"], "β · log-ratio"),
    ("completion length", ["completion_length"], "tokens"),
    ("wasted samples", ["zero_variance_rate", "truncated_rate"], "share"),
    ("verifier failures", ["verifier_failure_rate"], "share of completions"),
    ("policy entropy", ["entropy"], "nats / token"),
    ("drift from the reference", ["kl", "kl_sequence", "kl_drift_offline"], "KL estimate"),
    ("PPO clip", ["clip_fraction"], "share of tokens"),
    ("time per step", ["gen_seconds", "update_seconds", "wait_seconds"], "seconds"),
    ("CPU seconds per step", ["gen_cpu_seconds", "update_cpu_seconds"], "CPU seconds"),
    ("adaptive completion length", ["length_cap"], "tokens (generation cap)"),
    ("rollout staleness (async)", ["staleness"], "optimiser steps"),
    ("sampler vs trainer mismatch", ["mismatch_kl"], "KL(behaviour ‖ old)"),
    ("behaviour importance weights", ["is_ess", "is_clipped_fraction"], "share"),
    ("training loss", ["loss", "nll"], "loss"),
]

LABELS = {
    "reward_mean": "mean reward of sampled completions",
    "accuracy": "exact answer (strict checker)",
    "loose_accuracy": "loose checker",
    "accuracy_carry": "ones column carries",
    "accuracy_no_carry": "no carry",
    "tool_use_carry": "calls the tool: carry prompts",
    "tool_use_no_carry": "calls the tool: no-carry prompts",
    "tool_call_rate": "episodes with a tool call",
    "tool_call_rate_carry": "with a call: carry prompts",
    "tool_call_rate_no_carry": "with a call: no-carry prompts",
    "tool_error_rate": "malformed calls per call",
    "reward_with_tool": "episodes with a call",
    "reward_without_tool": "episodes without a call",
    "reward_carry": "carry prompts",
    "reward_no_carry": "no-carry prompts",
    "reward_carry_with_tool": "carry prompts, with a call",
    "reward_carry_without_tool": "carry prompts, without a call",
    "turns_per_episode": "policy turns",
    "tokens_per_episode": "tokens (policy + environment)",
    "env_errors": "ended by an environment error",
    "preference_accuracy": "training pairs",
    "val_preference_accuracy": "held-out pairs",
    "margin": "margin, training pairs",
    "val_margin": "margin, held-out pairs",
    "reward_chosen": "chosen (training pairs)",
    "reward_rejected": "rejected (training pairs)",
    "completion_length": "mean completion length",
    "zero_variance_rate": "groups with zero variance",
    "truncated_rate": "truncated completions",
    "verifier_failure_rate": "checker raised or could not parse",
    "entropy": "entropy",
    "kl": "KL to reference: k3, token mean (GRPO)",
    "kl_sequence": "KL to reference: Σ k1 per completion (PPO)",
    "kl_drift_offline": "KL(ref ‖ policy) on pair tokens",
    "clip_fraction": "clipped tokens",
    "gen_seconds": "generation",
    "update_seconds": "update",
    "wait_seconds": "trainer waiting for a rollout",
    "gen_cpu_seconds": "sampling and scoring (its process)",
    "update_cpu_seconds": "update (trainer)",
    "length_cap": "the cap the step generated with",
    "staleness": "steps between sampler and trainer weights",
    "mismatch_kl": "k3 per token, behaviour vs old policy",
    "is_ess": "effective sample size (share)",
    "is_clipped_fraction": "tokens capped or masked",
    "loss": "loss",
    "nll": "NLL of chosen answers",
}
WIDTH = 9.0  # inches: fits a notebook's output area at 100 dpi without being scaled down


def _series(rows, key):
    pts = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
    return [p[0] for p in pts], [p[1] for p in pts]


def dashboard(
    rows: list[dict],
    *,
    title: str = "",
    baseline_accuracy: float | None = None,
    runs: dict | None = None,
    panels: list[str] | None = None,
):
    """Return a figure. ``rows`` are metric dicts with a ``step``; ``runs`` overlays named runs.

    ``panels`` picks panels by title (default: every panel some run has data for).
    """
    runs = runs or {"run": rows}
    known = [p[0] for p in PANELS]
    if panels is not None:
        unknown = [p for p in panels if p not in known]
        if unknown:
            raise ValueError(f"panels must be among {known}; got {unknown}")
    chosen = [p for p in PANELS if panels is None or p[0] in panels]
    present = [p for p in chosen if panels is not None or any(_series(r, k)[0] for r in runs.values() for k in p[1])]
    n = max(len(present), 1)
    cols = min(n, 3)
    nrows = -(-n // cols)
    several = len(runs) > 1
    fig, axes = plt.subplots(nrows, cols, figsize=(WIDTH, 2.7 * nrows + 0.5 * several), squeeze=False,
                             layout="constrained")
    fig.get_layout_engine().set(wspace=0.08)  # room between panels for each y-axis label and its ticks
    run_handles = {}
    for ax, (name, keys, ylabel) in zip(axes.flat, present):
        keys_here = [k for k in keys if any(_series(r, k)[0] for r in runs.values())]
        for r, (run_name, run_rows) in enumerate(runs.items()):
            for k, key in enumerate(keys_here):
                xs, ys = _series(run_rows, key)
                if not xs:
                    continue
                # one run: a colour per metric; several runs: a colour per run, a dash per metric
                color = f"C{r}" if several else f"C{k}"
                dash = ("-", "--", ":", "-.")[k % 4]
                (line,) = ax.plot(xs, ys, dash, color=color, marker="o" if len(xs) < 40 else None, ms=3, lw=1.3,
                                  label=LABELS.get(key, key))
                run_handles.setdefault(run_name, line)
        if not keys_here:
            ax.text(0.5, 0.5, f"not logged in this run:\n{', '.join(LABELS.get(k, k) for k in keys)}", ha="center",
                    va="center", fontsize=8, color="grey", transform=ax.transAxes, wrap=True)
        if name.startswith("held-out accuracy") and baseline_accuracy is not None:
            ax.axhline(baseline_accuracy, color="grey", ls="--", lw=1)
            ax.annotate("start", (0.98, baseline_accuracy), xycoords=("axes fraction", "data"), ha="right",
                        va="bottom", fontsize=8, color="grey", annotation_clip=False)
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("step", fontsize=9)
        ax.set_ylabel(ylabel, fontsize=9)
        ax.tick_params(labelsize=8)
        if len(keys_here) > 1:  # name the metrics (line styles) under the panel, not on the curves
            handles = [plt.Line2D([], [], color="black" if several else f"C{k}", ls=("-", "--", ":", "-.")[k % 4])
                       for k in range(len(keys_here))]
            ax.legend(handles, [LABELS.get(k, k) for k in keys_here], fontsize=8, loc="upper center",
                      bbox_to_anchor=(0.5, -0.28), ncol=1, frameon=False)
    for ax in list(axes.flat)[len(present):]:
        ax.axis("off")
    if several:
        fig.legend([run_handles[k] for k in runs if k in run_handles], [k for k in runs if k in run_handles],
                   loc="outside lower center", ncol=min(len(runs), 5), fontsize=9, frameon=False)
    if title:
        fig.suptitle(title, fontsize=11)
    return fig


def save_dashboard(rows, path, **kwargs) -> None:
    fig = dashboard(rows, **kwargs)
    fig.savefig(path, dpi=90)
    plt.close(fig)
