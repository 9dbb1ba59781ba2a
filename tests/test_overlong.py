"""DAPO's overlong reward shaping: the penalty at the documented lengths, and TRL's own function."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from course_lib.tinygpt.rewards import overlong_penalty


def test_the_penalty_at_the_documented_lengths():
    # L = 100, C = 20: free up to 80 tokens, then a linear ramp to −1 at 100, −1 beyond (TRL's example: 90 → −0.5)
    got = overlong_penalty([10, 80, 81, 90, 100, 101], max_length=100, cache=20)
    assert got.tolist() == pytest.approx([0.0, 0.0, -0.05, -0.5, -1.0, -1.0])


@settings(deadline=None)
@given(st.lists(st.integers(0, 40), min_size=1, max_size=20), st.integers(1, 30), st.data())
def test_it_is_trl_soft_overlong_punishment(lengths, max_length, data):
    trl_rewards = pytest.importorskip("trl.rewards", reason="TRL is not installed: pip install -e '.[trl]'")
    cache = data.draw(st.integers(0, max_length))
    theirs = trl_rewards.get_soft_overlong_punishment(max_length, cache)([[1] * n for n in lengths])
    assert overlong_penalty(lengths, max_length, cache).tolist() == pytest.approx(theirs, abs=1e-6)


@settings(deadline=None)
@given(st.integers(1, 50), st.integers(0, 50))
def test_the_penalty_never_rises_with_length_and_stays_in_minus_one_to_zero(max_length, cache):
    cache = min(cache, max_length)
    p = overlong_penalty(torch.arange(0, max_length + 5), max_length, cache)
    assert bool((p[1:] <= p[:-1]).all()) and bool(((p >= -1) & (p <= 0)).all())


@pytest.mark.parametrize("kwargs, match", [
    ({"lengths": [3], "max_length": 0, "cache": 0}, "max_length must be an integer >= 1"),
    ({"lengths": [3], "max_length": 4, "cache": 5},
     r"cache must be an integer in \[0, 4\] \(the soft zone C, at most max_length\)"),
    ({"lengths": [3], "max_length": 4, "cache": 1.5}, "cache must be an integer"),
    ({"lengths": [[3]], "max_length": 4, "cache": 1}, "lengths must be a 1-d sequence"),
    ({"lengths": [-1], "max_length": 4, "cache": 1}, "token counts >= 0"),
])
def test_bad_input_is_refused_by_name(kwargs, match):
    with pytest.raises(ValueError, match=match):
        overlong_penalty(**kwargs)
