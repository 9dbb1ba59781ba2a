"""The training dashboard: one matplotlib figure from a run's per-step metrics (§15).

A mature RLVR dashboard shows more than mean reward: held-out accuracy, completion length,
the zero-variance-group rate, policy entropy, KL to the reference, the clip fraction and
where the time goes. ``dashboard(rows)`` draws whichever of these the rows contain (SFT and
DPO rows carry fewer keys), so the same function serves every trainer and notebook.
"""

from __future__ import annotations

import matplotlib.pyplot as plt

PANELS = [
    ("reward", ["reward_mean"], "reward (training checker)"),
    ("accuracy", ["accuracy", "loose_accuracy", "preference_accuracy"], "held-out accuracy"),
    ("length", ["completion_length"], "completion length (tokens)"),
    ("zero variance", ["zero_variance_rate", "truncated_rate"], "rate"),
    ("entropy", ["entropy"], "nats / token"),
    ("KL", ["kl", "kl_drift_offline"], "KL estimate"),
    ("clip", ["clip_fraction"], "fraction of tokens"),
    ("time", ["gen_seconds", "update_seconds"], "seconds / step"),
    ("DPO margin", ["margin", "reward_chosen", "reward_rejected"], "value"),
    ("loss", ["loss", "nll"], "loss"),
]


def _series(rows, key):
    pts = [(r["step"], r[key]) for r in rows if r.get(key) is not None]
    return [p[0] for p in pts], [p[1] for p in pts]


def dashboard(rows: list[dict], *, title: str = "", baseline_accuracy: float | None = None, runs: dict | None = None):
    """Return a figure. ``rows`` are metric dicts with a ``step``; ``runs`` overlays named runs."""
    runs = runs or {"run": rows}
    present = [p for p in PANELS if any(_series(r, k)[0] for r in runs.values() for k in p[1])]
    n = max(len(present), 1)
    cols = 4 if n > 4 else n
    nrows = -(-n // cols)
    fig, axes = plt.subplots(nrows, cols, figsize=(3.4 * cols, 2.6 * nrows), squeeze=False)
    for ax, (name, keys, ylabel) in zip(axes.flat, present):
        for r, (run_name, run_rows) in enumerate(runs.items()):
            for k, key in enumerate(keys):
                xs, ys = _series(run_rows, key)
                if xs:
                    # one run: a colour per metric; several runs: a colour per run, a dash per metric
                    color = f"C{k}" if len(runs) == 1 else f"C{r}"
                    dash = "-" if len(runs) == 1 else ("-", "--", ":")[k % 3]
                    label = key if len(runs) == 1 else f"{run_name}: {key}"
                    ax.plot(xs, ys, dash, color=color, marker="o" if len(xs) < 40 else None, ms=3, lw=1.2, label=label)
        if name == "accuracy" and baseline_accuracy is not None:
            ax.axhline(baseline_accuracy, color="grey", ls="--", lw=1, label="SFT baseline")
        ax.set_title(name, fontsize=10)
        ax.set_xlabel("step", fontsize=8)
        ax.set_ylabel(ylabel, fontsize=8)
        ax.tick_params(labelsize=7)
        ax.legend(fontsize=6)
    for ax in list(axes.flat)[len(present):]:
        ax.axis("off")
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    return fig


def save_dashboard(rows, path, **kwargs) -> None:
    fig = dashboard(rows, **kwargs)
    fig.savefig(path, dpi=90)
    plt.close(fig)
