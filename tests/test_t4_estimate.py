"""The T4 estimate's pieces: the launch counter against a hand count, the time model by hand,
a notebook's sum over its units, and the docs' table labels every time an estimate."""

from __future__ import annotations

import json
import sys

import pytest
import torch
from conftest import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))
import t4_estimate  # noqa: E402
import tables  # noqa: E402


def test_the_launch_counter_matches_a_hand_count():
    """Forward mm, relu, sum; backward ones_like (the seed), threshold_backward, mm (the expand of sum's
    backward and the transpose are views: no kernel); gt; ``empty`` allocates only. Three host reads."""
    a, b = torch.randn(4, 3, requires_grad=True), torch.randn(3, 5)
    with t4_estimate.LaunchCounter() as counter:
        y = (a @ b).relu().sum()
        y.backward()
        _ = (y.item(), b.t(), torch.empty(3), b.tolist(), bool(y > 0))
    assert (counter.launches, counter.syncs) == (7, 3)
    assert counter.flops == 2 * (4 * 3 * 5) + 2 * (4 * 5 * 3)  # the forward mm and the backward's grad of a
    assert counter.ops == {"mm": 2, "relu": 1, "sum": 1, "ones_like": 1, "threshold_backward": 1, "gt": 1}
    assert torch.Tensor.item.__name__ == "item"  # the patch is undone


def test_the_counters_own_cost_is_taken_out_of_the_host_time():
    """A loop of 1-element adds is almost all counter overhead: what remains per operator is small."""
    overhead = t4_estimate.counter_overhead(2000)
    x = torch.zeros(1)
    with t4_estimate.LaunchCounter() as counter:
        for _ in range(2000):
            x.add_(1)
    assert counter.dispatched == counter.launches == 2000 and overhead > 0
    assert counter.host_seconds(overhead) < counter.gap_seconds and counter.host_seconds(10 * overhead) == 0.0


def test_the_fit_takes_slopes_and_falls_back_to_the_mean_for_a_noisy_host_time():
    a = {"cpu_seconds": 1.0, "host_seconds": 0.5, "launches": 1100, "syncs": 12, "flops": 3.0}
    b = {"cpu_seconds": 1.4, "host_seconds": 0.7, "launches": 1300, "syncs": 16, "flops": 7.0}
    got = t4_estimate.fit(a, b, 1, 3)
    assert got["per"] == {"cpu_seconds": pytest.approx(0.2), "host_seconds": pytest.approx(0.1), "launches": 100,
                          "syncs": 2, "flops": 2.0}
    assert got["fixed"]["launches"] == 1000 and got["fixed"]["host_seconds"] == pytest.approx(0.4)
    noisy = t4_estimate.fit(a, {**b, "host_seconds": 0.4}, 1, 3)["per"]  # host slope < 0: mean, capped at CPU
    assert noisy["host_seconds"] == pytest.approx(min((0.5 + 0.4) / 4, 0.2))


def test_the_time_model_by_hand():
    """6 ms of host work, 1,000 launches, 10 reads, 8.1 GFLOP at 50% / 10% of 8.1 TFLOP/s."""
    unit = {"cpu_seconds": 0.5, "host_seconds": 0.006, "launches": 1000, "syncs": 10, "flops": 8.1e9}
    low, high = t4_estimate.t4_seconds(unit, peak=8.1e12)
    assert low == pytest.approx(0.006 + 0.005 + 0.0001 + 0.002)
    assert high == pytest.approx(0.006 + 0.020 + 0.0005 + 0.010)


def test_a_notebook_is_its_units_times_their_counts():
    zero = {"cpu_seconds": 0.0, "host_seconds": 0.0, "launches": 0, "syncs": 0, "flops": 0.0}
    step = {**zero, "cpu_seconds": 0.5, "launches": 1000}
    units = {"grpo": {"per": step, "fixed": {**zero, "cpu_seconds": 9.0}},  # a step's fixed part is not charged
             "dpo_pairs": {"per": {**zero, "cpu_seconds": 0.01}, "fixed": {**zero, "cpu_seconds": 2.0}}}
    work = {"nb": {"note": "n", "fast": [("grpo", 10)], "full": [("grpo", 100), ("dpo_pairs", 1000)]}}
    out = t4_estimate.estimate(units, work, peak=8.1e12)["nb"]
    assert out["fast"]["cpu_seconds"] == pytest.approx(5.0) and out["fast"]["t4_seconds"] == pytest.approx([0.05, 0.2])
    assert out["full"]["cpu_seconds"] == pytest.approx(50.0 + 10.0 + 2.0)


def test_every_notebook_named_exists_and_every_unit_is_measured():
    work = t4_estimate.notebook_work()
    named = [n for n in work if n != "SFT start"]
    assert all((ROOT / "notebooks" / f"{n}.py").is_file() for n in named)
    data = json.loads((ROOT / "benchmarks" / "results" / "t4_estimate.json").read_text())
    used = {u for spec in work.values() for b in ("fast", "full") for u, _ in spec[b]}
    assert used <= set(data["units"]) and set(data["notebooks"]) == set(work)


def test_the_colab_table_labels_every_time_an_estimate(tmp_path):
    row = {"note": "GRPO", "fast": {"cpu_seconds": 48.0, "t4_seconds": [6.0, 20.0]},
           "full": {"cpu_seconds": 600.0, "t4_seconds": [60.0, 200.0]}}
    data = {"command": "c", "commit": "abc", "machine": "m", "launch_us": [5, 20], "sync_us": [10, 50],
            "efficiency": [0.5, 0.1], "notebooks": {"09_tiny_gpt_grpo": row}}
    (tmp_path / "t4_estimate.json").write_text(json.dumps(data))
    text = tables.render("<!-- bench:t4_estimate -->\n<!-- /bench:t4_estimate -->", tmp_path)
    assert ("| 09_tiny_gpt_grpo | GRPO | 48 s (estimate) | 6 s–20 s (estimate) | "
            "10 min (estimate) | 60 s–3 min (estimate) |") in text
    assert "**Estimates, not measurements**" in text and "5–20 µs" in text and "10%–50%" in text
