"""The dashboard: held-out and training-data numbers never share the held-out panel; words, not keys."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from course_lib.run.dashboard import LABELS, PANELS, WIDTH, dashboard  # noqa: E402


def dpo_rows():
    rows = []
    for step in range(1, 11):
        row = {"step": step, "margin": 0.1 * step, "preference_accuracy": 0.5 + 0.05 * step, "loss": 0.7 - 0.01 * step,
               "reward_chosen": 0.01 * step, "reward_rejected": -0.01 * step, "kl_drift_offline": 0.01 * step}
        if step % 5 == 0:
            row.update(accuracy=0.6, loose_accuracy=0.62, val_margin=0.05 * step, val_preference_accuracy=0.7)
        rows.append(row)
    return rows


def test_held_out_panel_holds_held_out_metrics_only():
    fig = dashboard(dpo_rows(), runs={"DPO": dpo_rows(), "DPO + NLL": dpo_rows()}, baseline_accuracy=0.55)
    panels = {ax.get_title(): ax for ax in fig.axes if ax.get_title()}
    held_out = panels["held-out accuracy (greedy)"]
    # two runs × (strict, loose): no training-pair preference accuracy in the held-out panel
    assert len([ln for ln in held_out.get_lines() if not ln.get_label().startswith("_")]) == 4  # not the start line
    labels = {ln.get_label() for ln in held_out.get_lines()}
    assert LABELS["preference_accuracy"] not in labels
    pref = {ln.get_label() for ln in panels["preference accuracy"].get_lines()}
    assert {LABELS["preference_accuracy"], LABELS["val_preference_accuracy"]} <= pref
    plt.close(fig)


def test_labels_are_words_and_legends_sit_outside_the_axes():
    fig = dashboard(dpo_rows(), runs={"DPO": dpo_rows(), "DPO + NLL": dpo_rows()})
    assert fig.get_size_inches()[0] == WIDTH <= 9.5
    fig.canvas.draw()
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None:
            continue
        assert all("_" not in t.get_text() for t in legend.get_texts())
        # the legend box lies below the plotting area, not on it
        assert legend.get_window_extent().y1 <= ax.get_window_extent().y0 + 1
    assert all(key in LABELS for _, keys, _ in PANELS for key in keys)
    plt.close(fig)


def test_unknown_panel_is_refused():
    with pytest.raises(ValueError, match="panels must be among"):
        dashboard(dpo_rows(), panels=["accuracy"])


def test_grpo_and_ppo_kl_are_two_quantities_with_two_names():
    """GRPO logs k3 averaged per token (``kl``), PPO Σ k1 per completion (``kl_sequence``): one panel,
    two labels that say which estimator and which unit."""
    fig = dashboard([{"step": 1, "kl": 0.1}, {"step": 2, "kl": 0.2}],
                    runs={"GRPO": [{"step": 1, "kl": 0.1}], "PPO": [{"step": 1, "kl_sequence": 0.5}]})
    panel = {ax.get_title(): ax for ax in fig.axes if ax.get_title()}["drift from the reference"]
    labels = {ln.get_label() for ln in panel.get_lines()}
    assert any(LABELS["kl"] in label for label in labels) and any(LABELS["kl_sequence"] in label for label in labels)
    assert "k3" in LABELS["kl"] and "token" in LABELS["kl"]
    assert "k1" in LABELS["kl_sequence"] and "completion" in LABELS["kl_sequence"]
    plt.close(fig)


def test_the_kl_panel_is_drawn_from_logged_kl_and_says_so_when_it_is_missing():
    rows = [{"step": s, "reward_mean": 0.1 * s, "kl": 0.01 * s * s} for s in range(1, 6)]
    fig = dashboard(rows, panels=["reward on the policy's samples", "drift from the reference"])
    kl_ax = next(ax for ax in fig.axes if ax.get_title() == "drift from the reference")
    (line,) = [ln for ln in kl_ax.get_lines() if ln.get_label() == LABELS["kl"]]
    assert list(line.get_ydata()) == pytest.approx([0.01 * s * s for s in range(1, 6)])
    plt.close(fig)
    # a run without a reference logs kl = None: the panel asked for is drawn, and says what is missing
    fig = dashboard([{**r, "kl": None} for r in rows],
                    panels=["reward on the policy's samples", "drift from the reference"])
    kl_ax = next(ax for ax in fig.axes if ax.get_title() == "drift from the reference")
    assert not kl_ax.get_lines() and "not logged in this run" in kl_ax.texts[0].get_text()
    # unasked, an empty panel is left out as before
    assert "drift from the reference" not in {ax.get_title()
                                              for ax in dashboard([{**r, "kl": None} for r in rows]).axes}
    plt.close("all")


def test_panels_their_labels_and_legends_do_not_overlap():
    rows = [{"step": s, "margin": 0.02 * s, "reward_chosen": 0.01 * s, "reward_rejected": -0.01 * s,
             "loss": 1.9 - 0.02 * s,
             "nll": 1.2 - 0.02 * s, "preference_accuracy": 0.2 * s, "kl_drift_offline": 0.001 * s,
             **({"accuracy": 0.0, "loose_accuracy": 0.0} if s % 2 == 0 else {})} for s in range(1, 5)]
    fig = dashboard(rows, runs={"DPO": rows, "DPO + NLL": rows}, baseline_accuracy=0.0,
                    panels=["held-out accuracy (greedy)", "preference accuracy", "DPO implicit rewards",
                            "drift from the reference", "training loss"])
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    drawn = [ax for ax in fig.axes if ax.axison]
    boxes = [ax.get_tightbbox(renderer) for ax in drawn]  # title, tick labels, axis labels, legend
    for i in range(len(boxes)):
        for j in range(i + 1, len(boxes)):
            assert not boxes[i].overlaps(boxes[j]), (drawn[i].get_title(), drawn[j].get_title())
    page = fig.bbox
    assert all(page.x0 <= b.x0 and b.x1 <= page.x1 and page.y0 <= b.y0 and b.y1 <= page.y1 for b in boxes)
    plt.close(fig)
