"""course_lib.run.seeds: seeds side by side give the numbers each seed gives alone, from its cached start."""

from __future__ import annotations

import dataclasses
import functools

import pytest

from course_lib.run.seeds import SeedFailed, in_background, over_seeds, train_seeds
from course_lib.run.starts import cache_dir
from course_lib.trainers.configs import get_config


def _numbers(run: dict) -> dict:
    rows = [{k: v for k, v in r.items() if "seconds" not in k and k not in ("tokens_per_second", "wall")}
            for r in run["rows"]]
    return {"seed": run["seed"], "start": run["start"]["accuracy"], "final": run["final"], "steps": run["steps"],
            "rows": rows}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("COURSE_CACHE", str(tmp_path))  # forked workers inherit it
    return tmp_path


@pytest.mark.parametrize("kind", ["grpo", "dpo"])
def test_side_by_side_equals_one_after_the_other(cache, kind):
    cfg = get_config("test")
    apart = train_seeds(kind, cfg, [0, 1], processes=1, steps=4)
    together = train_seeds(kind, cfg, [0, 1], processes=2, steps=4)
    assert [_numbers(r) for r in together] == [_numbers(r) for r in apart]
    assert [r["seed"] for r in together] == [0, 1] and all(r["steps"] == 4 for r in together)
    assert all(r["wall_seconds"] > 0 and r["cpu_seconds"] > 0 for r in together)
    # each seed its own start, cached once and shared by both calls
    assert len(list(cache_dir().glob("test_s0_*.pt"))) == 1 and len(list(cache_dir().glob("test_s1_*.pt"))) == 1
    assert _numbers(together[0])["rows"] != _numbers(together[1])["rows"]  # two seeds are two runs


def _square_or_fail(seed: int) -> int:
    if seed == 3:
        raise ValueError("bad seed")
    return seed * seed


def test_results_come_back_in_seed_order_and_a_failure_names_its_seed():
    assert [r["result"] for r in over_seeds(_square_or_fail, [2, 0, 1], processes=2)] == [4, 0, 1]
    with pytest.raises(SeedFailed, match="seed 3 failed: ValueError: bad seed"):
        over_seeds(_square_or_fail, [0, 3], processes=2)
    with pytest.raises(SeedFailed, match="seed 3 failed"):
        over_seeds(_square_or_fail, [3], processes=1)
    running = in_background(_square_or_fail, [2, 0])  # returns at once; results() waits
    assert [r["result"] for r in running.results()] == [4, 0] and running.results()[0]["seed"] == 2
    with pytest.raises(SeedFailed, match="seed 3 failed"):
        in_background(_square_or_fail, [3, 1]).results()


@pytest.mark.parametrize("call, message", [
    (lambda: over_seeds(abs, []), "seeds must be a non-empty list"),
    (lambda: over_seeds(abs, [0, 0]), "seeds must be distinct"),
    (lambda: over_seeds(abs, [0, "1"]), r"seeds\[1\] must be an integer >= 0; got '1'"),
    (lambda: over_seeds(abs, [0, -1]), r"seeds\[1\] must be an integer >= 0; got -1"),
    (lambda: over_seeds(abs, [0], processes=0), "processes must be an integer >= 1"),
    (lambda: over_seeds(abs, [0], start_method="thread"), "start_method must be one of"),
    (lambda: train_seeds("rm", get_config("test"), [0]),
     r"kind must be one of \('sft', 'dpo', 'grpo', 'ppo', 'kto', 'orpo'\) \(the trainers that train a policy\); "
     r"got 'rm'"),
    (lambda: train_seeds("grpo", get_config("test"), [0], steps=-1), "steps must be an integer >= 0"),
])
def test_bad_input_is_refused_by_name(call, message):
    with pytest.raises(ValueError, match=message):
        call()


def test_a_stale_grpo_is_refused():
    cfg = get_config("test")
    cfg.grpo.max_staleness = 1
    with pytest.raises(ValueError, match="a rollout worker per seed would be a second process per seed; got "
                                         "grpo.max_staleness=1"):
        train_seeds("grpo", cfg, [0])


def test_a_notebooks_variants_on_a_background_seed_equal_the_kernels_own_runs(cache):
    """``variants_from_start`` (a background seed) and ``rl_from_sft`` (the notebook's seed in its kernel) agree."""
    from course_lib.run.seeds import rl_from_sft, variants_from_start
    from course_lib.run.starts import sft_start
    from course_lib.tinygpt.evaluation import evaluate

    cfg = get_config("test")
    variants = {"GRPO": ("grpo", {"steps": 3}), "RFT": ("rft", {"steps": 3})}
    (bg,) = [r["result"] for r in over_seeds(functools.partial(variants_from_start, cfg=cfg, variants=variants), [1],
                                             processes=1)]
    task, model, _ = sft_start(cfg, seed=1, verbose=False)
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    for name, (trainer, overrides) in variants.items():
        final, rows = rl_from_sft(model, task, dataclasses.replace(cfg.grpo, **overrides), sft_weights=weights, seed=1,
                                  trainer=trainer, show_progress=False)
        assert bg[name]["final"]["accuracy"] == final["accuracy"] and len(rows) == 3
        # the final evaluation (the trainer's own at its last step) is that of the final weights
        fresh = evaluate(model, task, max_completion_length=cfg.grpo.max_completion_length)
        assert {k: final[k] for k in fresh} == fresh
        assert [r["reward_mean"] for r in bg[name]["rows"]] == [r["reward_mean"] for r in rows]
    with pytest.raises(ValueError, match=r"trainer must be one of \('grpo', 'rft'\)"):
        rl_from_sft(model, task, cfg.grpo, sft_weights=weights, seed=1, trainer="ppo")


def test_notebook_14s_runs_are_the_same_whatever_their_evaluation_cadence(cache):
    """``staleness_runs`` evaluates most runs only at their last step: the runs (a rollout worker's included) must
    not change with it, since greedy evaluation draws no random number."""
    from course_lib.run.seeds import (
        STALENESS_PATHS,
        rl_from_sft,
        staleness_runs,
        staleness_variants,
    )
    from course_lib.run.starts import sft_start

    cfg = get_config("test")
    cfg.grpo = dataclasses.replace(cfg.grpo, steps=4, eval_every=1)
    variants = staleness_variants(cfg)
    assert set(STALENESS_PATHS) <= set(variants) and variants["K = 4"][1]["max_staleness"] == 4
    task, model, _ = sft_start(cfg, seed=1, verbose=False)
    weights = {k: v.clone() for k, v in model.state_dict().items()}
    got = {}
    for every in (1, cfg.grpo.steps):
        final, rows = rl_from_sft(model, task, dataclasses.replace(cfg.grpo, max_staleness=1, eval_every=every),
                                  sft_weights=weights, seed=1, show_progress=False)
        got[every] = (final["accuracy"], [r["reward_mean"] for r in rows], [r.get("accuracy") for r in rows])
    assert got[1][:2] == got[cfg.grpo.steps][:2] and got[1][2][-1] == got[cfg.grpo.steps][2][-1]
    assert got[cfg.grpo.steps][2][:-1] == [None] * (cfg.grpo.steps - 1)
    runs = staleness_runs(1, cfg=cfg)
    assert set(runs) == {"SFT", *variants}
    for name in variants:
        evaluated = [r.get("accuracy") is not None for r in runs[name]["rows"]]
        assert evaluated == ([True] * 4 if name in STALENESS_PATHS else [False] * 3 + [True]), name
