"""Checks for the assignment ``systems14`` (Q6–Q8, the systems half); expected values come from
solutions/systems14.

One entry per autograded test cell, as for module14 (instructor/checks/module14.py): ``visible=True``
marks the checks the notebook's own test cell shows; every other check is hidden, on inputs drawn from
``rng`` for each grading run, on fixed edge cases or on bad input (the reference raises ``ValueError``,
so the student's function must too). Every function cell has a value check on a random input, so
memorised numbers, ``None`` or a function that always raises earn nothing. Every answer the student
computes comes from a locked cell of given numbers drawn per student (``GIVEN``: Q6's 6d, Q7's 7d,
Q8's 8c), so a friend's numbers miss.

Answers not on the shelf: the questions ask for what ``course_lib`` does not compute in one call
(the behaviour correction on ragged lists of completions, its diagnostics and a verdict across seeds;
per-token advantages of episodes given as segments, outcome and per-step; tool use and a loose verifier
from episodes; a judge's audit from a table of verdicts in both orders, with ties and decided pairs), so
neither a call nor a renamed copy of a library function passes a cell (tests/copied_answers.py).
"""

from __future__ import annotations

import statistics

from instructor.grading import check

MODES = ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask")
# the examples the notebooks' test cells use, under the same names
EXAMPLE = {"_old": [[-1.0, -2.0], [-0.5]], "_new": [[-1.5, -1.0], [-0.5]]}
EPISODES = {"ep_tool": [("prompt", "37+45="), ("call", "[7+5]"), ("obs", "12"), ("turn", "82")],
            "ep_plain": [("prompt", "37+45="), ("turn", "72")]}
TABLE = {"p_ab": [0.9, 0.8, 0.52, 0.7], "p_ba": [0.2, 0.75, 0.44, 0.35], "a_better": [True, False, True, False],
         "len_a": [3, 2, 2, 5], "len_b": [2, 2, 3, 2]}


def _logps(rng, n: int | None = None, spread: float = 0.6) -> tuple[list, list]:
    """A ragged batch: old and sampler log-probs of n completions of 1-5 tokens, close to each other."""
    n = n or int(rng.integers(1, 6))
    old, new = [], []
    for _ in range(n):
        t = int(rng.integers(1, 6))
        a = rng.uniform(-4.0, -0.05, size=t)
        old.append([round(float(x), 3) for x in a])
        new.append([round(float(x), 3) for x in a + rng.normal(0.0, spread, size=t)])
    return old, new


def _accuracies(rng, seeds, low=0.3, high=0.8, decimals: int | None = None) -> dict:
    """{seed: accuracy}: unrounded for hidden checks (a median equal to the margin has probability 0)."""
    values = {int(s): float(rng.uniform(low, high)) for s in seeds}
    return values if decimals is None else {s: round(v, decimals) for s, v in values.items()}


def _sign_not_range(rng, seeds) -> tuple[dict, dict, float]:
    """(corrected, uncorrected, margin): a small gain of one sign on every seed, its median above the
    margin, while the runs lie far apart (ranges >= 0.4 > any gain): beyond the seed spread by the
    course's rule, not by a range rule (mean gain > the larger range)."""
    sign = float(rng.choice([-1.0, 1.0]))
    base = [0.3 + float(rng.uniform(0, 0.02)), 0.75 + float(rng.uniform(0, 0.02))]
    base += [float(rng.uniform(0.35, 0.7)) for _ in seeds[2:]]
    gains = [sign * float(rng.uniform(0.01, 0.03)) for _ in seeds]
    return ({s: b + g for s, b, g in zip(seeds, base, gains)}, dict(zip(seeds, base)),
            float(rng.uniform(0.0, 0.009)))


def _range_not_sign(rng, seeds) -> tuple[dict, dict]:
    """(corrected, uncorrected) on 4+ seeds: a large gain on all seeds but one, which loses a little; both
    runs' ranges are r, the mean gain 2r(n-1)/n - e > r: a range rule calls it beyond the seed
    spread, the course's rule (one sign on every seed) does not."""
    level, r, e = float(rng.uniform(0.4, 0.6)), float(rng.uniform(0.05, 0.1)), float(rng.uniform(0.001, 0.005))
    loser = int(rng.integers(len(seeds)))
    uncorrected = {s: level + (r if i == loser else 0.0) for i, s in enumerate(seeds)}
    corrected = {s: level + r - e + (0.0 if i == loser else r) for i, s in enumerate(seeds)}
    return corrected, uncorrected


def _steady_gain(rng, seeds) -> tuple[dict, dict, float]:
    """(corrected, uncorrected, margin): the same gain g on every seed, both ranges below 0.006 < g, and a
    margin above g: a range rule calls it beyond the seed spread, the course's rule (|median| > margin)
    does not."""
    level, g = float(rng.uniform(0.4, 0.6)), float(rng.uniform(0.02, 0.05))
    uncorrected = {s: level + float(rng.uniform(-0.002, 0.002)) for s in seeds}
    corrected = {s: u + g + float(rng.uniform(-0.001, 0.001)) for s, u in uncorrected.items()}
    return corrected, uncorrected, g + float(rng.uniform(0.01, 0.05))


def _q6(rng) -> dict:
    old, new = _logps(rng)
    old2, new2 = _logps(rng, spread=1.5)
    mode = str(rng.choice(MODES))
    lo, hi = round(float(rng.uniform(0.1, 0.9)), 2), round(float(rng.uniform(1.1, 4.0)), 2)
    seeds = [int(s) for s in rng.choice(100, size=int(rng.integers(3, 7)), replace=False)]
    corrected, uncorrected = _accuracies(rng, seeds), _accuracies(rng, seeds)
    shuffled = dict(reversed(list(uncorrected.items())))
    every = {s: u + float(rng.uniform(0.01, 0.1)) for s, u in uncorrected.items()}  # a gain on every seed
    small, spread_apart, tiny = _sign_not_range(rng, seeds)
    four = [int(s) for s in rng.choice(100, size=int(rng.integers(4, 7)), replace=False)]
    won, lost = _range_not_sign(rng, four)
    steady, base, above = _steady_gain(rng, seeds)
    margin = float(rng.uniform(0.0, 0.05))
    call = "behaviour_weights(o, s, m, clip_min=lo, clip_max=hi)"
    return {
        "q6_test_versions": [
            check("sampler_versions(6, 2)", "K = 2 over 6 batches", visible=True),
            check("sampler_versions(3, 0)", "K = 0 is synchronous", visible=True),
            check("sampler_versions(2, 5)", "a lag longer than the run", visible=True),
            check("sampler_versions(4, -1)", "a negative K must raise ValueError", visible=True),
            check("sampler_versions(n, K)", "a random run and lag", n=int(rng.integers(1, 30)),
                  K=int(rng.integers(0, 8))),
            check("sampler_versions(1, K)", "one batch is always sampled by the start", K=int(rng.integers(0, 5))),
            check("sampler_versions(0, 1)", "no batch must raise ValueError"),
            check("sampler_versions(3.0, 1)", "a float number of batches must raise ValueError"),
            check("sampler_versions(3, True)", "a bool K must raise ValueError"),
        ],
        "q6_test_weights": [
            check("behaviour_weights(_old, _new, 'token_truncate', clip_max=1.5)", "token_truncate, capped at 1.5",
                  visible=True, **EXAMPLE),
            check("behaviour_weights(_old, _new, 'sequence_mask', clip_min=0.8)", "sequence_mask with a lower bound",
                  visible=True, **EXAMPLE),
            check("behaviour_weights([[-1.0, -2.0]], [[-1.0]], 'token_mask')",
                  "lengths that differ must raise ValueError",
                  visible=True),
            check(call, "a random ragged batch in a random mode and band", o=old, s=new, m=mode, lo=lo, hi=hi),
            *[check(f"behaviour_weights(o, s, {m!r}, clip_min=lo, clip_max=hi)", f"a random ragged batch, mode {m}",
                    o=old2, s=new2, lo=lo, hi=hi) for m in MODES],
            check("behaviour_weights(o, s, 'token_mask', clip_max=None)", "no bound at all: the plain ratios",
                  o=old, s=new),
            check("behaviour_weights(o, o, 'sequence_truncate')", "a sampler equal to pi_old: every weight is 1",
                  o=old),
            check("behaviour_weights(o, s, 'token_mask', clip_min=-0.5)", "a negative bound must raise ValueError",
                  o=old, s=new),
            check("behaviour_weights(o, s, 'token_mask', clip_max=float('nan'))", "a nan bound must raise ValueError",
                  o=old, s=new),
            check("behaviour_weights([], [], 'token_mask')", "no completion must raise ValueError"),
            check("behaviour_weights([[-1.0], []], [[-1.0], []], 'token_mask')",
                  "an empty completion must raise ValueError"),
            check("behaviour_weights([[-1.0]], [[float('nan')]], 'token_mask')",
                  "a nan log-prob must raise ValueError"),
            check("behaviour_weights([[-1.0]], [[-1.0], [-2.0]], 'token_mask')",
                  "different numbers of completions must raise ValueError"),
            check("behaviour_weights([[-1.0]], [[-1.0]], 'sequence_truncate', clip_min=None, clip_max=None)",
                  "truncating with no bound must raise ValueError"),
        ],
        "q6_test_stats": [
            check("mismatch_stats([[-1.0, -2.0], [-0.5]], [[-1.5, -1.0], [-0.5]], 'token_mask', clip_min=0.5, "
                  "clip_max=1.5)",
                  "the worked example", visible=True),
            check("mismatch_stats([[-1.0], [-2.0, -0.5]], [[-1.0], [-2.0, -0.5]], 'sequence_mask')",
                  "a sampler equal to pi_old", visible=True),
            *[check(f"mismatch_stats(o, s, {m!r}, clip_min=lo, clip_max=hi)", f"a random ragged batch, mode {m}",
                    o=old2, s=new2, lo=lo, hi=hi, tol=1e-9, rtol=1e-7) for m in MODES],
            check("mismatch_stats(o, s, 'sequence_mask', clip_min=2.0 ** 40, clip_max=2.0 ** 41)",
                  "every weight masked: ESS 0", o=old, s=new),
            check("mismatch_stats(o, s, 'token_clip')", "an unknown mode must raise ValueError", o=old, s=new),
        ],
        "q6_test_gain": [
            check("correction_gain({0: 0.70, 1: 0.64, 2: 0.67}, {0: 0.60, 1: 0.58, 2: 0.59}, 0.02)",
                  "a gain on every seed, above the margin", visible=True),
            check("correction_gain({0: 0.40, 1: 0.75, 2: 0.55}, {0: 0.37, 1: 0.71, 2: 0.52}, 0.02)",
                  "a small gain on every seed, seeds far apart", visible=True),
            check("correction_gain({'a': 0.5, 'b': 0.9, 'c': 0.7}, {'c': 0.6, 'b': 0.7, 'a': 0.6}, 0.0)",
                  "seeds paired by name", visible=True),
            check("correction_gain({0: 0.5, 1: 0.6, 2: 0.7}, {0: 0.5, 1: 0.6, 3: 0.6}, 0.0)",
                  "different seeds must raise ValueError", visible=True),
            check("correction_gain(c, u, m)", "a random table over seeds", c=corrected, u=uncorrected, m=margin),
            check("correction_gain(c, u, m)", "the same table, seeds in another order", c=corrected, u=shuffled,
                  m=margin),
            check("correction_gain(c, u, m)", "a random gain on every seed", c=every, u=uncorrected,
                  m=float(rng.uniform(0.0, 0.1))),
            check("correction_gain(c, u, m)", "a loss on every seed, runs far apart", c=small, u=spread_apart, m=tiny),
            check("correction_gain(c, u, 0.0)", "a large mean gain, but one seed lost", c=won, u=lost),
            check("correction_gain(c, u, m)", "the same gain on every seed, below the margin", c=steady, u=base,
                  m=above),
            check("correction_gain({0: 0.6, 1: 0.7, 2: 0.8}, {0: 0.6, 1: 0.6, 2: 0.6}, 0.0)",
                  "a tie on one seed is no direction"),
            check("correction_gain({0: 0.5, 1: 0.6}, {0: 0.4, 1: 0.5}, 0.0)",
                  "two seeds must raise ValueError (the rule judges 3 or more)"),
            check("correction_gain({0: 0.5, 1: 1.2, 2: 0.5}, {0: 0.5, 1: 0.6, 2: 0.5}, 0.0)",
                  "an accuracy above 1 must raise ValueError"),
            check("correction_gain({0: 0.5, 1: float('nan'), 2: 0.5}, {0: 0.5, 1: 0.6, 2: 0.5}, 0.0)",
                  "a nan accuracy must raise ValueError"),
            check("correction_gain(c, u, -0.01)", "a negative margin must raise ValueError", c=corrected,
                  u=uncorrected),
        ],
        "q6_test_answers": [
            check(name, f"{name} for your given numbers", visible=name == "versions", tol=1e-9, rtol=1e-9)
            for name in ("versions", "token_weights", "sequence_weights", "stats", "hot_kl", "gains", "median_gain",
                         "beyond_spread")
        ],
    }


def _q6_given(rng) -> dict:
    """A student's 6d: a lag and run length, a ragged stale batch, a hot sampler's batch, runs over seeds."""
    old, new = _logps(rng, n=int(rng.integers(3, 6)), spread=0.5)
    hot_old, hot_new = _logps(rng, n=int(rng.integers(2, 5)), spread=0.8)
    seeds = list(range(int(rng.integers(3, 6))))
    # 3 decimals, as a table prints them: a median of such gains ends in 0 or 5 at the 4th decimal, the
    # margin in 25, so the verdict never sits on |median| = margin
    base = _accuracies(rng, seeds, 0.45, 0.7, decimals=3)
    boost = float(rng.uniform(-0.03, 0.1))
    corrected = {s: round(min(1.0, a + boost + float(rng.normal(0, 0.02))), 3) for s, a in base.items()}
    return {"lag": int(rng.integers(1, 6)), "n_steps": int(rng.integers(5, 13)),
            "clip_max": float(rng.choice([1.5, 2.0, 2.5, 3.0])), "old": old, "sampler": new,
            "hot_old": hot_old, "hot_sampler": hot_new, "runs_corrected": corrected, "runs_uncorrected": base,
            "gain_margin": round(float(rng.uniform(0.005, 0.04)), 3) + 0.00025}


# ------------------------------------------------------------------------------ Q7: episodes


KINDS = ("tool_right", "plain_right", "plain_wrong", "tool_wrong", "bad_call")


def _episode(rng, pair: tuple[int, int] | None = None) -> tuple[list, int, bool]:
    """(segments, the right sum, carry?) of a random kind of episode on ``pair`` (else a random 2-digit sum)."""
    a, b = pair or (int(x) for x in rng.integers(10, 90, size=2))
    s, ones = a + b, a % 10 + b % 10
    prompt, wrong = ("prompt", f"{a}+{b}="), str(s - 10 if ones >= 10 else s + 1)
    call, obs = ("call", f"[{a % 10}+{b % 10}]"), ("obs", str(ones))
    segments = {"tool_right": [prompt, call, obs, ("turn", str(s))],
                "plain_right": [prompt, ("turn", str(s))],
                "plain_wrong": [prompt, ("turn", wrong)],
                "tool_wrong": [prompt, call, obs, ("turn", wrong)],
                "bad_call": [prompt, ("call", f"[{a % 10}+{b % 10}+1]"), ("obs", "!"), ("turn", wrong)]}
    return segments[str(rng.choice(KINDS))], s, ones >= 10


def _group(rng, size: int) -> tuple[list, int]:
    """``size`` episodes on one prompt (a GRPO group) and its right sum."""
    pair = tuple(int(x) for x in rng.integers(10, 90, size=2))
    return [_episode(rng, pair)[0] for _ in range(size)], sum(pair)


def _steps(rng, episodes) -> list:
    return [[float(rng.choice([0.0, 0.5, 1.0])) for k, _ in e if k in ("call", "turn")] for e in episodes]


def _q7(rng) -> dict:
    group, truth = _group(rng, int(rng.integers(2, 7)))
    rewards = [round(float(x), 2) for x in rng.uniform(-1, 1, size=len(group))]
    steps = _steps(rng, group)
    level = float(rng.uniform(0, 1))
    batch = [_episode(rng) for _ in range(int(rng.integers(3, 9)))]
    episodes, truths, carry = [e for e, _, _ in batch], [t for _, t, _ in batch], [c for _, _, c in batch]
    as_lists = [[list(seg) for seg in e] for e in episodes]
    return {
        "q7_test_mask": [
            check("policy_mask(ep_tool)", "prompt, call, observation, answer", visible=True, **EPISODES),
            check("policy_mask([['prompt', '1+2='], ['turn', '3']])", "segments may be lists", visible=True),
            check("policy_mask([('call', '[1+2]'), ('turn', '3')])", "no prompt first must raise ValueError",
                  visible=True),
            check("[policy_mask(e) for e in es]", "random episodes", es=episodes),
            check("[policy_mask(e) for e in es]", "random episodes, segments as lists", es=as_lists),
            check("policy_mask([('prompt', '1+2='), ('obs', '3')])", "no policy segment must raise ValueError"),
            check("policy_mask([('prompt', '1+2='), ('turn', '')])", "an empty text must raise ValueError"),
            check("policy_mask([('prompt', '1+2='), ('tool', '3')])", "an unknown kind must raise ValueError"),
            check("policy_mask([('prompt', '1+2='), ('prompt', '2+3='), ('turn', '3')])",
                  "a second prompt must raise ValueError"),
            check("policy_mask([('prompt', '1+2=')])", "a prompt alone must raise ValueError"),
        ],
        "q7_test_outcome": [
            check("outcome_advantages([ep_tool, ep_plain], [1.0, 0.0])", "rewards 1 and 0", visible=True, **EPISODES),
            check("outcome_advantages([ep_tool, ep_plain], [1.0, 1.0])", "equal rewards give zeros", visible=True,
                  **EPISODES),
            check("outcome_advantages([ep_tool, ep_plain, ep_plain], [0.1, 0.1, 0.1])",
                  "equal rewards whose computed std is not exactly 0 give zeros", visible=True, **EPISODES),
            check("outcome_advantages([ep_tool, ep_plain], [1.0])",
                  "one reward for two episodes must raise ValueError",
                  visible=True, **EPISODES),
            check("outcome_advantages(g, r)", "a random group with random rewards", g=group, r=rewards),
            check("outcome_advantages(g, [v] * len(g))", "a random group with equal rewards", g=group,
                  v=float(rng.uniform(-2, 2))),
            check("outcome_advantages([ep_tool], [1.0])", "a group of one must raise ValueError", **EPISODES),
            check("outcome_advantages([ep_tool, ep_plain], [1.0, float('inf')])",
                  "an infinite reward must raise ValueError", **EPISODES),
            check("outcome_advantages([ep_tool, ep_plain], [True, False])", "bool rewards must raise ValueError",
                  **EPISODES),
        ],
        "q7_test_steps": [
            check("step_advantages([ep_tool, ep_plain], [[1.0, 1.0], [0.0]])", "the worked example", visible=True,
                  **EPISODES),
            check("step_advantages([ep_tool, ep_plain], [[1.0], [0.0]])", "too few step rewards must raise ValueError",
                  visible=True, **EPISODES),
            check("step_advantages(g, s)", "a random group with random step rewards", g=group, s=steps),
            check("step_advantages(g, s)", "equal step rewards give zeros", g=group,
                  s=[[level] * len(row) for row in steps]),
            check("step_advantages([ep_tool, ep_plain], [[1.0, 0.0], [0.0], [1.0]])",
                  "more lists of step rewards than episodes must raise ValueError", **EPISODES),
            check("step_advantages([ep_tool, ep_plain], [[1.0, float('nan')], [0.0]])", "a nan must raise ValueError",
                  **EPISODES),
        ],
        "q7_test_rates": [
            check("tool_call_rates([ep_tool, ep_plain], [True, False])", "one carry episode that calls", **EPISODES),
            check("tool_call_rates([ep_plain], [True])", "no no-carry episode", visible=True, **EPISODES),
            check("tool_call_rates(es, c)", "a random batch", es=episodes, c=carry),
            check("tool_call_rates(es, [True] * len(es))", "all carry", es=episodes),
            check("tool_call_rates([ep_tool, ep_plain], [True])",
                  "a carry list of another length must raise ValueError",
                  **EPISODES),
            check("tool_call_rates([ep_tool], [1])", "a carry that is not a bool must raise ValueError", **EPISODES),
            check("tool_call_rates([], [])", "no episode must raise ValueError"),
        ],
        "q7_test_verifier": [
            check("verifier_rewards([ep_tool, ep_plain], [82, 82])", "strict and loose", **EPISODES),
            check("verifier_rewards([ep_tool], [-82])", "a negative truth must raise ValueError", visible=True,
                  **EPISODES),
            check("verifier_rewards(es, t)", "a random batch", es=episodes, t=truths),
            check("verifier_rewards(es, t)", "a random batch, segments as lists", es=as_lists, t=truths),
            check("verifier_rewards([[('prompt', '1+2='), ('call', '[1+2]'), ('obs', '3')]], [3])",
                  "no final answer: strict 0, loose 1 (a successful call)"),
            check("verifier_rewards([[('prompt', '1+2='), ('turn', '3'), ('call', '[1+2]'), ('obs', '3'), ('turn', "
                  "'4')]], [3])",
                  "the last turn is the final answer"),
            check("verifier_rewards([ep_tool], [82, 82])", "a truth too many must raise ValueError", **EPISODES),
            check("verifier_rewards([ep_tool], [82.0])", "a float truth must raise ValueError", **EPISODES),
        ],
        "q7_test_answers": [
            check(name, f"{name} for your given episodes", visible=name == "strict", tol=1e-9, rtol=1e-9)
            for name in ("strict", "loose", "exploits", "rates", "adv_outcome", "adv_steps", "sign_changes")
        ],
    }


def _q7_given(rng) -> dict:
    """A student's 7d: a group of 4-6 episodes on one prompt with step rewards, and a batch of 5-8."""
    group, truth = _group(rng, int(rng.integers(4, 7)))
    batch = [_episode(rng) for _ in range(int(rng.integers(5, 9)))]
    return {"truth": truth, "group": group, "step_rewards": _steps(rng, group),
            "batch": [e for e, _, _ in batch], "batch_truths": [t for _, t, _ in batch],
            "batch_carry": [c for _, _, c in batch]}


# ------------------------------------------------------------------------------ Q8: a judge


def _table(rng, n: int | None = None) -> dict:
    n = n or int(rng.integers(4, 13))
    lengths = rng.integers(1, 7, size=(2, n))
    return {"p_ab": [round(float(p), 2) for p in rng.uniform(0, 1, size=n)],
            "p_ba": [round(float(p), 2) for p in rng.uniform(0, 1, size=n)],
            "a_better": [bool(x) for x in rng.random(n) < 0.5],
            "len_a": [int(x) for x in lengths[0]], "len_b": [int(x) for x in lengths[1]]}


def _removed_not_by_range(rng, seeds) -> tuple[dict, dict, float]:
    """(before, after, margin): the bias shrinks on every seed to |after| < 0.04, its median drop above the
    margin, while the seeds' biases before lie far apart (lowest L < 0.09, range R >= 0.6 > 6L, so on at
    most 6 seeds the mean drop < L + 5R/6 < R): removed by the course's rule, not by a range rule (mean drop
    > the larger range)."""
    low, r = float(rng.uniform(0.06, 0.09)), float(rng.uniform(0.6, 0.8))
    before = [low, low + r] + [float(rng.uniform(low, low + r)) for _ in seeds[2:]]
    after = [float(rng.uniform(-0.04, 0.04)) for _ in seeds]
    return dict(zip(seeds, before)), dict(zip(seeds, after)), float(rng.uniform(0.0, 0.015))


def _grew_on_one_seed(rng, seeds) -> tuple[dict, dict]:
    """(before, after) on 4+ seeds: a bias near 0.3 that falls to about 0 on all seeds but one, where a bias
    b near 0.13 grows a little: the mean drop (about 0.75 * 0.3) exceeds both ranges (about 0.3 - b and
    b): a range rule calls it removed, the course's rule (one sign on every seed) does not."""
    level, b, grow = float(rng.uniform(0.3, 0.32)), float(rng.uniform(0.12, 0.14)), float(rng.uniform(0.005, 0.015))
    grew = int(rng.integers(len(seeds)))
    before = {s: b if i == grew else level + float(rng.uniform(-0.002, 0.002)) for i, s in enumerate(seeds)}
    after = {s: b + grow if i == grew else float(rng.uniform(-0.002, 0.002)) for i, s in enumerate(seeds)}
    return before, after


def _q8(rng) -> dict:
    t = _table(rng)
    margin = round(float(rng.uniform(0.0, 0.2)), 2) + 0.005  # never |p - 0.5| of a 2-decimal p: no verdict on a bound
    seeds = [int(s) for s in rng.choice(50, size=int(rng.integers(3, 7)), replace=False)]
    before = {s: float(rng.uniform(0.2, 0.7)) for s in seeds}
    after = {s: float(rng.uniform(-0.1, 0.15)) for s in seeds}
    wide, small, tiny = _removed_not_by_range(rng, seeds)
    four = [int(s) for s in rng.choice(50, size=int(rng.integers(4, 7)), replace=False)]
    high, grown = _grew_on_one_seed(rng, four)
    steady_before = {s: 0.15 + float(rng.uniform(-0.005, 0.005)) for s in seeds}  # drops near 0.15 ...
    steady_after = {s: float(rng.uniform(-0.005, 0.005)) for s in seeds}  # ... both ranges <= 0.01
    call = "judge_audit(p_ab, p_ba, a_better, len_a, len_b, m)"
    return {
        "q8_test_agreement": [
            check("judge_audit(**T)", "the example at margin 0", visible=True, T=TABLE),
            check("judge_audit(**T, tie_margin=0.05)", "the example at margin 0.05", visible=True, T=TABLE),
            check("judge_audit([0.5], [0.5], [True], [1], [1])", "no decided pair: nan", visible=True),
            check("judge_audit(**T, tie_margin=0.5)", "a tie margin of 0.5 must raise ValueError", visible=True,
                  T=TABLE),
            check(call + "['agreement']", "agreement of a random table", m=margin, **t),
            check(call + "['tie_rate']", "tie rate of a random table", m=margin, **t),
            check("judge_audit(p_ab, p_ba, a_better, len_a, len_b)", "the whole audit of a random table at margin 0",
                  **t),
            check("judge_audit([0.9, 0.2], [0.1], [True, False], [1, 1], [1, 1])",
                  "lists of different lengths must raise "
                  "ValueError"),
            check("judge_audit([0.9], [float('nan')], [True], [1], [1])", "a nan probability must raise ValueError"),
            check("judge_audit([0.9], [0.1], [1], [1], [1])", "a gold label that is not a bool must raise ValueError"),
            check("judge_audit([0.9], [0.1], [True], [0], [1])", "a length of 0 must raise ValueError"),
            check("judge_audit([], [], [], [], [])", "no pair must raise ValueError"),
            check("judge_audit([0.9], [0.1], [True], [1], [1], -0.1)", "a negative tie margin must raise ValueError"),
        ],
        "q8_test_swap": [
            check("judge_audit(**T)['position_bias']", "position bias of the example", visible=True, T=TABLE),
            check("judge_audit(**T)['flip_rate']", "flip rate of the example", visible=True, T=TABLE),
            check(call + "['position_bias']", "position bias of a random table", m=margin, **t),
            check(call + "['flip_rate']", "flip rate of a random table", m=margin, **t),
            check("judge_audit(p, [1 - x for x in p], [True] * len(p), [1] * len(p), [1] * len(p))['position_bias']",
                  "a judge that ignores the order has no position bias", p=t["p_ab"], tol=1e-12),
        ],
        "q8_test_length": [
            check("judge_audit(**T)['length_bias']", "length bias of the example", visible=True, T=TABLE),
            check("judge_audit([0.9], [0.1], [True], [2], [2])['length_bias']", "no pair of different lengths: nan",
                  visible=True),
            check(call + "['length_bias']", "length bias of a random table", m=margin, **t),
            check("judge_audit(p_ab, p_ba, a_better, len_a, len_b, 0.495)['length_bias']", "every pair a tie: nan",
                  **t),
        ],
        "q8_test_seeds": [
            check("bias_removed({0: 0.62, 1: 0.55, 2: 0.60}, {0: 0.03, 1: -0.02, 2: 0.05}, 0.05)", "removed",
                  visible=True),
            check("bias_removed({0: 0.30, 1: 0.32, 2: 0.31, 3: 0.12}, {0: 0.00, 1: 0.01, 2: 0.00, 3: 0.13}, 0.05)",
                  "the bias grew on one seed", visible=True),
            check("bias_removed({0: 0.5, 1: 0.4}, {0: 0.0, 1: 0.1}, 0.05)", "two seeds must raise ValueError",
                  visible=True),
            check("bias_removed(b, a, m)", "a random table over seeds", b=before, a=after,
                  m=float(rng.uniform(0.0, 0.6))),
            check("bias_removed(b, a, 0.0, threshold=h)", "a random threshold", b=before, a=after,
                  h=float(rng.uniform(0.01, 0.2))),
            check("bias_removed(a, b, 0.0)", "the other way round: nothing removed", b=before, a=after),
            check("bias_removed(b, a, m)", "a drop on every seed, the seeds far apart before", b=wide, a=small,
                  m=tiny),
            check("bias_removed(b, a, 0.0)", "a large mean drop, but the bias grew on one seed", b=high, a=grown),
            check("bias_removed(b, a, m)", "the same drop on every seed, below the margin", b=steady_before,
                  a=steady_after, m=float(rng.uniform(0.17, 0.3))),
            check("bias_removed({0: 0.5, 1: 0.4, 2: 0.3}, {0: 0.0, 1: 0.1, 3: 0.1}, 0.0)",
                  "different seeds must raise ValueError"),
            check("bias_removed({0: 0.5, 1: 1.4, 2: 0.3}, {0: 0.0, 1: 0.1, 2: 0.1}, 0.0)",
                  "a bias above 1 must raise ValueError"),
            check("bias_removed({0: 0.5, 1: 0.4, 2: 0.3}, {0: 0.0, 1: 0.1, 2: 0.1}, 0.0, threshold=0)",
                  "a threshold of 0 must raise ValueError"),
            check("bias_removed({0: 0.5, 1: 0.4, 2: 0.3}, {0: 0.0, 1: 0.1, 2: 0.1}, float('nan'))",
                  "a nan margin must raise ValueError"),
        ],
        "q8_test_answers": [
            check("audit", "audit for your given table", tol=1e-9, rtol=1e-9),
            check("removed", "removed for your given seeds", tol=1e-9, rtol=1e-9),
        ],
    }


def _q8_given(rng) -> dict:
    """A student's 8c: a table of 8-12 pairs (the first four decided, lengths differing both ways) and
    two tables of position bias over 3-5 seeds."""
    t = _table(rng, int(rng.integers(8, 13)))
    for i, longer_right in enumerate((True, True, False, False)):  # decided pairs, the longer answer right or wrong
        t["p_ab"][i] = round(float(rng.choice([rng.uniform(0.65, 1.0), rng.uniform(0.0, 0.35)])), 2)
        short, long_ = int(rng.integers(1, 4)), int(rng.integers(4, 7))
        a_long = t["a_better"][i] == longer_right
        t["len_a"][i], t["len_b"][i] = (long_, short) if a_long else (short, long_)
    seeds = list(range(int(rng.integers(3, 6))))
    while True:  # 3 decimals, as a table prints them; the verdict must not sit on |median after| = 0.1
        level = float(rng.uniform(0.05, 0.5))
        before = {s: round(min(1.0, level + float(rng.normal(0, 0.06))), 3) for s in seeds}
        after = {s: round(float(rng.uniform(-0.08, 0.12)), 3) for s in seeds}
        if abs(abs(statistics.median(after.values())) - 0.1) > 1e-6:
            break
    margin = round(float(rng.uniform(0.0, 0.1)), 2) + 0.005  # never |p - 0.5| of a 2-decimal p
    # a median of 3-decimal drops ends in 0 or 5 at the 4th decimal, bias_margin in 25: never on it
    return {**t, "tie_margin": margin, "bias_before": before, "bias_after": after,
            "bias_margin": round(float(rng.uniform(0.02, 0.1)), 3) + 0.00025}


# Locked cells of given numbers, drawn per student at grading time (grading.given_cells): answers
# computed from the names follow the student's own numbers, numbers copied from a friend do not.
GIVEN = {"q6_given": _q6_given, "q7_given": _q7_given, "q8_given": _q8_given}


def checks(rng) -> dict:
    return {**_q6(rng), **_q7(rng), **_q8(rng)}
