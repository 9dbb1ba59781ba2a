"""course_lib.run.verdicts: the sentence about an effect over seeds, its rule, and its refusals."""

from __future__ import annotations

import math

import pytest
from conftest import ROOT
from hypothesis import given
from hypothesis import strategies as st

from course_lib.run.verdicts import MIN_SEEDS, committed_benchmarks, evaluation_noise, paired

values = st.floats(min_value=-1.0, max_value=1.0, allow_nan=False)
diffs = st.lists(values, min_size=1, max_size=9)


def test_a_known_case_reads_as_written():
    v = paired([0.50, 0.40, 0.60], [0.476, 0.416, 0.624], name_a="GRPO", name_b="RFT", seeds=[0, 1, 2])
    assert v.sentence() == ("GRPO − RFT: +2.4 / -1.6 / -2.4 pts (seeds 0 / 1 / 2); median -1.6, range -2.4 to +2.4; "
                            "GRPO ahead on 1 of 3 seeds; within the seed spread")
    w = paired([0.05, 0.02, 0.09], name_a="DPO", name_b="SFT", margin=0.01)
    assert w.beyond and w.sentence().endswith("DPO ahead on 3 of 3 seeds; beyond the seed spread, by more than 1.0 "
                                              "pts: DPO ahead on every seed")
    assert paired([-0.1, -0.2, -0.3], name_a="a",
                  name_b="b").sentence().endswith("beyond the seed spread: b ahead on every seed")
    assert not paired([0.05, 0.02, 0.09], name_a="a", name_b="b", margin=0.06).beyond  # median 0.05 is under the floor


def test_two_seeds_never_judge():
    v = paired([0.3, 0.2], name_a="A", name_b="B")
    assert not v.beyond and "too few seeds to judge (2; a verdict needs 3)" in v.sentence()


@given(diffs)
def test_k_of_n_median_and_range(d):
    v = paired(d, name_a="A", name_b="B")
    assert v.n == len(d) and v.k == sum(x > 0 for x in d) and v.k + v.ties <= v.n
    assert v.low <= v.median <= v.high
    assert f"A ahead on {v.k} of {v.n} seeds" in v.sentence()


@given(diffs, st.floats(min_value=0.0, max_value=0.5))
def test_beyond_means_the_stated_rule(d, margin):
    v = paired(d, name_a="A", name_b="B", margin=margin)
    rule = (len(d) >= MIN_SEEDS and (all(x > 0 for x in d) or all(x < 0 for x in d)) and abs(v.median) > margin)
    assert v.beyond == rule
    assert ("beyond the seed spread" in v.sentence()) == rule


@given(st.lists(values, min_size=1, max_size=9), st.lists(values, min_size=1, max_size=9))
def test_swapping_a_and_b_mirrors_the_verdict(a, b):
    n = min(len(a), len(b))
    a, b = a[:n], b[:n]
    ab, ba = paired(a, b, name_a="A", name_b="B"), paired(b, a, name_a="B", name_b="A")
    assert math.isclose(ab.median, -ba.median, abs_tol=1e-12)
    assert ab.beyond == ba.beyond
    assert ab.ties == ba.ties and ab.k + ba.k + ab.ties == n


@given(diffs, st.randoms())
def test_the_order_of_the_seeds_does_not_matter(d, rnd):
    shuffled = list(d)
    rnd.shuffle(shuffled)
    v, w = paired(d, name_a="A", name_b="B"), paired(shuffled, name_a="A", name_b="B")
    assert (v.median, v.k, v.beyond, v.low, v.high) == (w.median, w.k, w.beyond, w.low, w.high)


@given(st.lists(st.floats(min_value=0.0, max_value=1.0), min_size=MIN_SEEDS, max_size=9))
def test_a_shift_past_every_seed_is_beyond_the_spread(d):
    assert paired([x + 1.5 for x in d], name_a="A", name_b="B", margin=0.5).beyond


@pytest.mark.parametrize("kwargs, message", [
    ({"a": [0.1, float("nan"), 0.2]}, r"a\[1\] must be a finite number"),
    ({"a": [0.1, 0.2], "b": [0.1]}, "a and b must hold one value per seed each; got 2 and 1"),
    ({"a": []}, "at least one seed"),
    ({"a": "0.1"}, "a must be a sequence of numbers"),
    ({"a": [0.1, 0.2], "seeds": [0]}, "seeds must name one seed per value"),
    ({"a": [0.1], "margin": -0.1}, "margin must be a finite number >= 0"),
    ({"a": [True]}, r"a\[0\] must be a finite number"),
])
def test_bad_input_is_refused_by_name(kwargs, message):
    with pytest.raises(ValueError, match=message):
        paired(**kwargs, name_a="A", name_b="B")


def test_evaluation_noise_is_two_standard_errors_of_a_difference():
    assert evaluation_noise(500) == pytest.approx(2 * math.sqrt(2) * math.sqrt(0.25 / 500))  # 6.3 points
    assert evaluation_noise(500) == pytest.approx(0.0632, abs=1e-4) and evaluation_noise(2000) < evaluation_noise(500)
    with pytest.raises(ValueError, match="n_prompts must be an integer >= 1"):
        evaluation_noise(0)


def test_committed_benchmarks_is_the_repository_folder_with_that_results_file(monkeypatch, tmp_path):
    assert committed_benchmarks("dpo") == ROOT / "benchmarks"  # whatever the working directory
    monkeypatch.chdir(tmp_path)
    assert committed_benchmarks("dpo") == ROOT / "benchmarks"
    assert committed_benchmarks("no_such_benchmark") is None  # a name without its results file: nothing to read
