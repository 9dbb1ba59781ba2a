"""Notebook 11_reward_hacking's alarm rules (course_lib.run.hacking) on hand-made metric rows."""

from __future__ import annotations

import pytest

from course_lib.run.hacking import ALARMS, alarm_order, experiment_config, first_alarms


def row(step, length=3.0, trunc=0.0, ent=1.0, acc=None, loose=None):
    r = {"step": step, "completion_length": length, "truncated_rate": trunc, "entropy": ent}
    if acc is not None:
        r.update(accuracy=acc, loose_accuracy=loose)
    return r


def test_first_alarms_and_their_order():
    rows = [row(1), row(2, length=4.0), row(3, trunc=0.2), row(4, length=5.0, ent=1.4), row(5, acc=0.05, loose=0.30)]
    alarms = first_alarms(rows, start_accuracy=0.12)
    assert list(alarms) == list(ALARMS)
    assert alarms == {"length > 1.5 × start": 4, "truncated > 10%": 3, "entropy > 1.3 × start": 4,
                      "strict held-out 5 points below start": 5, "loose − strict held-out > 10 points": 5}
    assert alarm_order(alarms)[0] == ("truncated > 10%", 3)
    assert [name for name, _ in alarm_order(alarms)][1:3] == ["length > 1.5 × start", "entropy > 1.3 × start"]


def test_a_healthy_run_fires_nothing():
    rows = [row(s, acc=0.13, loose=0.14) if s % 5 == 0 else row(s) for s in range(1, 21)]
    assert all(step is None for step in first_alarms(rows, start_accuracy=0.12).values())
    assert alarm_order(first_alarms(rows, start_accuracy=0.12)) == []


def test_bad_input_and_the_experiment_options():
    with pytest.raises(ValueError, match="rows"):
        first_alarms([], start_accuracy=0.1)
    cfg = experiment_config()
    assert cfg.grpo.temperature == 1.0 and cfg.grpo.reward == "strict" and cfg.task.n_heldout == 200
