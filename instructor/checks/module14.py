"""Checks for the assignment ``module14`` (Q1–Q5); expected values come from solutions/module14.

One entry per autograded test cell. ``visible=True`` marks the checks the notebook's own test cell
shows (so students can self-check with Validate); every other check is hidden: its inputs are drawn
from ``rng`` for each grading run where a random input makes sense (so a table of memorised outputs
earns nothing), or are fixed edge cases and bad input. Every cell has at least one value check on a
random input when it checks a function, so a function that always raises ``ValueError`` earns
nothing either. Answers the student computes are checked for the student's own variant where the
notebook has a cell of given numbers (``GIVEN``: Q1's 1c, Q2's 2c, Q4's 4b), else they are fixed values
(Q2's ``hardest_reason``). Q5's passport is checked against the report drawn for the submitter's id
(``STUDENT_ID_CELLS``).

Answers not on the shelf: Q1–Q4 ask for what ``course_lib`` does not hold in one function
(a matrix of win probabilities, chains of wins, a loss over indexed comparisons; DPO from masked
per-token log-probs and its gradients; advantages for a ragged batch of groups, zero variance with
several reward values; memory of partly trainable models, a step's time with scorers), so neither a
call nor a renamed copy of a library function passes a cell (tests/copied_answers.py).
"""

from __future__ import annotations

import numpy as np

from instructor.grading import check

PASSPORT = ("feedback_source", "reward_granularity", "data_timing", "roles", "kl_placement",
            "averaging_unit", "zero_variance", "loop")


def _q1(rng) -> dict:
    n = int(rng.integers(2, 8))
    scores = [float(x) for x in rng.normal(0, 3, size=n)]
    rates = [float(x) for x in rng.uniform(0.02, 0.98, size=int(rng.integers(1, 7)))]
    m_scores = [float(x) for x in rng.normal(0, 2, size=int(rng.integers(3, 8)))]
    pairs = [rng.choice(len(m_scores), size=2, replace=False) for _ in range(int(rng.integers(1, 11)))]
    winners, losers = [int(p[0]) for p in pairs], [int(p[1]) for p in pairs]
    return {
        "q1_test_probability": [
            check("bt_matrix([0.0, 1.0, 3.0])", "all pairs of three models", visible=True),
            check("bt_matrix([0.0, 1e4, -1e4])", "stable for gaps of ±1e4 (no overflow, no nan)", visible=True,
                  tol=1e-12),
            check("bt_matrix([1.0, float('nan')])", "a nan score must raise ValueError", visible=True),
            check("bt_matrix([2.0])", "a single model must raise ValueError", visible=True),
            check("bt_matrix(s)", "all pairs of random scores (a list)", s=scores),
            check("bt_matrix(s)", "all pairs of random scores (an array)",
                  s=rng.normal(0, 2, size=int(rng.integers(2, 6)))),
            check("bt_matrix(s) + bt_matrix(s).T", "P[i, j] + P[j, i] must be 1", s=scores, tol=1e-12),
            check("bt_matrix(s)", "stable for random huge gaps", s=rng.uniform(-1e4, 1e4, size=4), tol=1e-12),
            check("bt_matrix([[0.0, 1.0], [1.0, 0.0]])", "a 2-D input must raise ValueError"),
            check("bt_matrix([0.0, float('inf')])", "an infinite score must raise ValueError"),
            check("bt_matrix([])", "no model at all must raise ValueError"),
        ],
        "q1_test_chain": [
            check("chain_win_rate([0.75, 0.75])", "two 75% links give 90%", visible=True),
            check("chain_win_rate([0.6])", "a chain of one link", visible=True),
            check("chain_win_rate([0.75, 0.25])", "opposite links cancel", visible=True),
            check("chain_win_rate([1e-6] * 60)", "stable for a long chain of losses", visible=True, tol=1e-300),
            check("chain_win_rate([0.9, 1.0])", "a win rate of 1 must raise ValueError", visible=True),
            check("chain_win_rate([0.5, float('nan')])", "a nan win rate must raise ValueError", visible=True),
            check("chain_win_rate(p)", "a random chain (a list)", p=rates),
            check("chain_win_rate(p)", "a random chain (an array)", p=rng.uniform(0.05, 0.95, size=3)),
            check("chain_win_rate([p, 1 - p])", "a win and the opposite win cancel", p=rates[0], tol=1e-12),
            check("chain_win_rate([0.999999] * 60)", "stable for a long chain of wins", tol=1e-12),
            check("chain_win_rate([])", "an empty chain must raise ValueError"),
            check("chain_win_rate([0.0, 0.5])", "a win rate of 0 must raise ValueError"),
            check("chain_win_rate([0.5, 1.5])", "a win rate above 1 must raise ValueError"),
            check("chain_win_rate([-0.25])", "a negative win rate must raise ValueError"),
        ],
        "q1_test_loss": [
            check("pairwise_loss([0.0, 0.0], [0], [1])", "a tie costs log 2", visible=True),
            check("pairwise_loss([2.0, 1.0, 0.0], [0, 1], [1, 2])", "mean loss of two gaps of 1", visible=True),
            check("pairwise_loss([2.0, 1.0, 0.0], [2], [0])", "an upset", visible=True),
            check("pairwise_loss([0.0, 1e4], [0], [1])", "stable (the gap, not inf) for a gap of -1e4", visible=True,
                  tol=1e-6),
            check("pairwise_loss([0.0, 1e4], [1], [0])", "stable (close to 0) for a gap of +1e4", visible=True,
                  tol=1e-12),
            check("pairwise_loss([1.0, 2.0], [0, 1], [1])", "different lengths must raise ValueError", visible=True),
            check("pairwise_loss([1.0, 2.0], [0], [2])", "an index out of range must raise ValueError", visible=True),
            check("pairwise_loss(s, w, l)", "mean loss of a random tournament (lists)", s=m_scores, w=winners,
                  l=losers),
            check("pairwise_loss(s, w, l)", "mean loss of a random tournament (arrays)", s=np.asarray(m_scores),
                  w=np.asarray(winners), l=np.asarray(losers)),
            check("pairwise_loss(s, w, l)", "whole-float indices are accepted", s=m_scores,
                  w=[float(i) for i in winners], l=[float(i) for i in losers]),
            check("pairwise_loss([0.0, big], [0], [1])", "stable for a random huge negative gap",
                  big=float(rng.uniform(1e3, 1e4)), tol=1e-6),
            check("pairwise_loss([1.0, 2.0], [], [])", "no comparison at all must raise ValueError"),
            check("pairwise_loss([1.0, 2.0], [-1], [0])", "a negative index must raise ValueError"),
            check("pairwise_loss([1.0, 2.0], [0.5], [1])", "a non-integer index must raise ValueError"),
            check("pairwise_loss([1.0, float('nan')], [0], [1])", "a nan score must raise ValueError"),
        ],
        "q1_test_answers": [  # for this student's given numbers (GIVEN)
            check("p_a_beats_c", "p_a_beats_c is the chain chain_ac", visible=True, tol=1e-6),
            check("p_a_beats_d", "p_a_beats_d is the chain chain_ad", tol=1e-6),
            check("tournament_loss", "tournament_loss is the mean loss of the given tournament", tol=1e-6),
        ],
    }


def _q1_given(rng) -> dict:
    """A student's numbers for 1c (the released ones: 75%, 75%; 60%, 70%, 80%; a tournament of 4)."""
    pairs = [rng.choice(4, size=2, replace=False) for _ in range(5)]
    return {"chain_ac": [round(float(p), 2) for p in rng.uniform(0.55, 0.95, size=2)],
            "chain_ad": [round(float(p), 2) for p in rng.uniform(0.55, 0.95, size=3)],
            "t_scores": [round(float(x), 1) for x in rng.normal(0, 1.5, size=4)],
            "t_winners": [int(p[0]) for p in pairs], "t_losers": [int(p[1]) for p in pairs]}


def _q4_given(rng) -> dict:
    """A student's scenario for 4b (the released one: notebook 07's 8.03B policy on 8 devices)."""
    n = round(float(rng.uniform(1.0, 70.0)), 2) * 1e9
    return {"n_params": n, "tokens_per_step": 256 * 8 * int(rng.integers(10, 81)) * 100,
            "tokens_per_second": round(float(rng.uniform(100.0, 400.0)), 1), "devices": int(rng.choice([4, 8, 16])),
            "peak_flops": float(rng.choice([312e12, 990e12])), "mfu": round(float(rng.uniform(0.3, 0.5)), 2),
            "lora_params": float(rng.integers(4, 65)) * 1e6,
            "small_params": round(float(rng.uniform(0.1, 0.5)) * n, -8),
            "reward_params": round(float(rng.uniform(0.05, 0.25)) * n, -8), "decode_speedup": int(rng.integers(2, 5))}


def _q2_given(rng) -> dict:
    """A student's batch and pairs for 2c (the released ones: notebook 02's pairs I and II; A, B, C).

    Two pairs of token log-probabilities (position 0 the prompt, ``nan`` at padding, completions of
    1 to T − 1 tokens), and three pairs of sequence log-probabilities whose largest slope σ(−z) at
    β = 0.1 leads the next by at least 0.01, so ``hardest_pair`` has one answer."""
    out = {}
    for side in ("chosen", "rejected"):
        t = int(rng.integers(3, 6))
        lengths = [int(k) for k in rng.integers(1, t, size=2)]
        mask = [[0] + [1] * k + [0] * (t - 1 - k) for k in lengths]
        for who in ("policy", "ref"):
            values = rng.uniform(-9.5, -0.3, size=(2, t))
            out[f"{who}_{side}"] = [[round(float(v), 2) if i == 0 or m else float("nan") for i, (v, m) in
                                     enumerate(zip(row, mrow))] for row, mrow in zip(values, mask)]
        out[f"{side}_mask"] = mask
    while True:
        pairs = {name: tuple(round(float(x), 1) for x in rng.uniform(-25.0, -5.0, size=4)) for name in "ABC"}
        slopes = sorted(1.0 / (1.0 + np.exp(0.1 * ((pw - rw) - (pl - rl)))) for pw, pl, rw, rl in pairs.values())
        if slopes[-1] - slopes[-2] >= 0.01:
            break
    order = ("policy_chosen", "ref_chosen", "chosen_mask", "policy_rejected", "ref_rejected", "rejected_mask")
    return {**{name: out[name] for name in order}, "pairs_abc": pairs}


# Q5's report is drawn from the id the student types in this cell (the bank and the draw: the locked
# cell q5_report; the key: the solution region of q5_passport). The reference reads the report of the
# submitter's id (grading.reference_id_cells), and a typed id that is not theirs is reported.
STUDENT_ID_CELLS = {"q5_student_id": "student_id"}

# Locked cells of given numbers, drawn per student at grading time (grading.given_cells): answers
# computed from the names follow the student's own numbers, numbers copied from a friend do not.
GIVEN = {"q1_given": _q1_given, "q2_given": _q2_given, "q4_given": _q4_given}


PAIR_ONE = dict(pc=[-0.7, -2.0, -4.5, -5.5], pr=[-0.7, -3.0, -8.5], rc=[-0.9, -2.5, -4.0, -6.5],
                rr=[-0.9, -2.8, -8.0], mc=[0, 1, 1, 1], mr=[0, 1, 1])


def _token_batch(rng, pairs: int | None) -> dict:
    """Random per-token log-probs and masks (nan at masked positions): one pair, or a batch of pairs."""
    out = {}
    for side in ("c", "r"):
        t = int(rng.integers(1, 7))
        shape = (t,) if pairs is None else (pairs, t)
        mask = rng.random(shape) < 0.7
        mask[..., int(rng.integers(0, t))] = True  # every completion has a token
        for who in ("p", "r"):
            out[who + side] = np.where(mask, rng.uniform(-8, -0.1, size=shape), np.nan)
        out["m" + side] = mask.astype(int) if side == "c" else mask  # 0/1 and booleans
    return out


def _q2(rng) -> dict:
    lp = [float(x) for x in rng.uniform(-30, -5, size=4)]
    beta = float(rng.uniform(0.05, 1.0))
    one, batch = _token_batch(rng, None), _token_batch(rng, int(rng.integers(2, 5)))
    call = "dpo_terms(pc, pr, rc, rr, mc, mr, beta=beta)"
    bad = "dpo_terms([-1.0, -2.0], [-1.5], [-1.0, -1.5], [-1.5], [1, 1], [1], beta=0.0)"
    return {
        "q2_test_pair_one": [
            check("dpo_terms(pc, pr, rc, rr, mc, mr, beta=0.1)", "pair I token by token: (z, loss, slope)",
                  visible=True, **PAIR_ONE),
            check("dpo_terms([float('nan'), -1.0], [-2.0], [float('-inf'), -1.5], [-1.5], [0, 1], [1], beta=0.5)",
                  "masked positions are ignored, even nan and -inf", visible=True),
            check("dpo_terms([-5000.0], [-10.0], [-10.0], [-5000.0], [1], [1], beta=1.0)",
                  "loss and slope stable for a strongly misordered pair", visible=True, tol=1e-6),
            check("dpo_terms([-10.0], [-5000.0], [-5000.0], [-10.0], [1], [1], beta=1.0)",
                  "loss and slope stable for a very well-ordered pair", visible=True, tol=1e-12),
            check(call, "(z, loss, slope) of a random pair with masked nan padding and a random beta",
                  beta=beta, **one),
            check(call, "(z, loss, slope) of a random padded batch of pairs", beta=beta, **batch),
            check("dpo_terms([-20.0, -1.0], [-5.0], [-5.0, -1.0], [-20.0], [1, 0], [1], beta=0.2)",
                  "a misordered pair"),
        ],
        "q2_test_bad_input": [
            check("dpo_terms([-1.0, -2.0], [-1.5], [-1.0, -1.5], [-1.5], [1, 1], [1], beta=0.5)",
                  "z for a simple pair",
                  visible=True),
            check(bad, "beta = 0 must raise ValueError", visible=True),
            check("dpo_terms([-1.0, float('nan')], [-1.5], [-1.0, -1.5], [-1.5], [1, 1], [1])",
                  "a nan log-probability at a completion token must raise ValueError", visible=True),
            check("dpo_terms([-1.0, -2.0], [-1.5], [-1.0, -1.5], [-1.5], [1, 2], [1])",
                  "a mask value of 2 must raise ValueError", visible=True),
            check("dpo_terms([-1.0, -2.0], [-1.5], [-1.0, -1.5], [-1.5], [1, 1], [0])",
                  "a completion with no token must raise ValueError", visible=True),
            check("dpo_terms([-1.0, -2.0], [-1.5], [-1.0], [-1.5], [1, 1], [1])",
                  "a log-prob array with another shape than its mask must raise ValueError", visible=True),
            check(call, "a valid random batch is not bad input", beta=beta, **_token_batch(rng, 2)),
            check(bad.replace("0.0)", "-0.1)"), "a negative beta must raise ValueError"),
            check(bad.replace("0.0)", "float('nan'))"), "a nan beta must raise ValueError"),
            check(bad.replace("0.0)", "float('inf'))"), "an infinite beta must raise ValueError"),
            check("dpo_terms([-1.0, -2.0], [float('-inf')], [-1.0, -1.5], [-1.5], [1, 1], [1])",
                  "an infinite log-probability at a completion token must raise ValueError"),
            check("dpo_terms([-1.0, -2.0], [-1.5], [-1.0, -1.5], [-1.5], [1, float('nan')], [1])",
                  "a nan in a mask must raise ValueError"),
            check("dpo_terms(pc, pr, rc, rr, mc, mr)",
                  "chosen and rejected with different numbers of pairs must raise "
                  "ValueError", pc=[[-1.0], [-2.0]], rc=[[-1.5], [-1.5]], mc=[[1], [1]], pr=[[-1.0], [-2.0], [-3.0]],
                  rr=[[-1.0], [-1.0], [-1.0]], mr=[[1], [1], [1]]),
        ],
        "q2_test_gradients": [
            check("dpo_gradients(-12.0, -11.5, -13.0, -10.8, beta=0.1)", "pair I at β = 0.1", visible=True),
            check("dpo_gradients([-12.0, -12.0], -11.5, [-13.0, -12.8], [-10.8, -11.65], beta=0.1)",
                  "two pairs in, two values of each out", visible=True),
            check("dpo_gradients(-5000.0, -10.0, -10.0, -5000.0, beta=1.0)", "stable for a strongly misordered pair",
                  visible=True, tol=1e-9),
            check("dpo_gradients(float('nan'), -2.0, -1.5, -1.5)", "a nan log-probability must raise ValueError",
                  visible=True),
            check("dpo_gradients(a, b, c, d, beta=beta)", "gradients of a random pair and beta",
                  a=lp[0], b=lp[1], c=lp[2], d=lp[3], beta=beta),
            check("dpo_gradients(pc, pr, rc, rr, beta=beta)", "scalars must broadcast against arrays",
                  pc=rng.uniform(-30, -5, size=3), pr=lp[1], rc=rng.uniform(-30, -5, size=3), rr=lp[3], beta=beta),
            check("dpo_gradients(-10.0, -5000.0, -5000.0, -10.0, beta=1.0)", "stable for a very well-ordered pair",
                  tol=1e-12),
            check("dpo_gradients(-1.0, -2.0, -1.5, -1.5, beta=0.0)", "beta = 0 must raise ValueError"),
            check("dpo_gradients(-1.0, -2.0, -1.5, -1.5, beta=float('inf'))",
                  "an infinite beta must raise ValueError"),
            check("dpo_gradients([-1.0, float('-inf')], -2.0, -1.5, -1.5)",
                  "an infinite log-probability must raise ValueError"),
        ],
        "q2_test_answers": [
            check("z_pair2", "z_pair2 (notebook 02's pair II)", visible=True, tol=1e-6),
            check("z_beta05", "z_beta05 (pair I at β = 0.5)", visible=True, tol=1e-6),
            check("slope_pair2", "slope_pair2", tol=1e-6),
            check("loss_beta05", "loss_beta05", tol=1e-6),
            check("slope_beta05", "slope_beta05", tol=1e-6),
            check("pull_beta01", "pull_beta01 = |∂L/∂log π(y_w)| of pair I at β = 0.1", tol=1e-6),
            check("pull_beta05", "pull_beta05 = |∂L/∂log π(y_w)| of pair I at β = 0.5", tol=1e-6),
            check("hardest_pair", "hardest_pair is the pair with the largest |∂L/∂z|"),
            check("hardest_reason", "hardest_reason is the right explanation"),
        ],
    }


def _ragged(rng, labels) -> tuple[list[float], list]:
    """A shuffled batch of 2–4 groups of 2–6 real rewards, with the group label of each reward."""
    sizes = rng.integers(2, 7, size=int(rng.integers(2, 5)))
    rewards = [float(x) for x in rng.normal(0, 1.5, size=int(sizes.sum())).round(3)]
    ids = [labels[k] for k, size in enumerate(sizes) for _ in range(int(size))]
    order = rng.permutation(len(ids))
    return [rewards[i] for i in order], [ids[i] for i in order]


# Random inputs are sized so a correct but slow answer never meets the time limit: enumerating all
# len(q) ** G reward outcomes (a right way to compute zero_variance_probability) stays within this.
ENUMERATION_BUDGET = 2 ** 16


def _enumerable_g(rng, values: int) -> int:
    """A group size G in [2, 16] with values ** G <= ENUMERATION_BUDGET."""
    top = 2
    while top < 16 and values ** (top + 1) <= ENUMERATION_BUDGET:
        top += 1
    return int(rng.integers(2, top + 1))


def _q3(rng) -> dict:
    p, small_g, c = float(rng.uniform(0.05, 0.95)), int(rng.integers(2, 7)), float(rng.uniform(0.05, 0.95))
    tokens = [[float(x) for x in rng.normal(0, 2, size=int(k))] for k in rng.integers(1, 6, size=3)]
    binary, one_group = [1, 0, 0, 1, 0, 0, 1, 0], [0] * 8
    r_int, g_int = _ragged(rng, [int(x) for x in rng.permutation(50)[:4]])
    r_str, g_str = _ragged(rng, ["alpha", "beta", "gamma", "delta"])
    v, k = float(rng.uniform(0.05, 3.0)), int(rng.integers(2, 7))
    probs = [float(x) for x in rng.dirichlet(np.ones(int(rng.integers(2, 6))))]
    probs8 = rng.dirichlet(np.ones(int(rng.integers(2, 5))))  # at most 4 ** 8 outcomes for G = 8
    return {
        "q3_test_grpo": [
            check("grpo_advantages(r, g)", "GRPO advantages of one group [1,0,0,1,0,0,1,0] (notebook 04)",
                  visible=True,
                  r=binary, g=one_group),
            check("grpo_advantages([1.0, 0.5, 0.0, 0.2, 0.8], [7, 3, 7, 3, 3])",
                  "two interleaved groups of sizes 2 and 3",
                  visible=True),
            check("grpo_advantages([1, 1, 0, 1], [0, 0, 1, 1], on_zero_variance='zeros')",
                  "'zeros' gives a zero-variance group zeros and the others their advantages", visible=True),
            check("grpo_advantages([1, 1, 0, 1], [0, 0, 1, 1])", "a zero-variance group raises ValueError by default",
                  visible=True),
            check("grpo_advantages([0.1, 0.1, 0.1, 0.0, 1.0], [0, 0, 0, 1, 1])",
                  "[0.1, 0.1, 0.1] has zero variance (its float std is not 0)", visible=True),
            check("grpo_advantages([0.1 + 0.2, 0.3, 0.3, 0.0, 1.0], [0, 0, 0, 1, 1], on_zero_variance='zeros')",
                  "[0.1 + 0.2, 0.3, 0.3] is equal up to rounding: a zero-variance group", visible=True),
            check("grpo_advantages([0.0, 1e-6, 0.5, 0.5], [0, 0, 1, 1], on_zero_variance='zeros')",
                  "[0, 1e-6] differs by far more than rounding: not a zero-variance group"),
            check("grpo_advantages([1.0, 0.0, 1.0], [0, 0, 1])", "a group of one must raise ValueError", visible=True),
            check("grpo_advantages([1.0, float('nan')], [0, 0])", "a nan reward must raise ValueError", visible=True),
            check("grpo_advantages(r, g)", "a random shuffled batch of groups of different sizes", r=r_int, g=g_int),
            check("grpo_advantages(r, g)", "string group labels", r=r_str, g=g_str),
            check("grpo_advantages(r, g)", "NumPy arrays in", r=np.asarray(r_int), g=np.asarray(g_int)),
            check("grpo_advantages(r + [v] * k, g + [99] * k, on_zero_variance='zeros')",
                  "a random zero-variance group among others with 'zeros'", r=r_int, g=g_int, v=v, k=k),
            check("grpo_advantages([1, 0, 1, 0], [0, 0, 1, 1], on_zero_variance='epsilon')",
                  "an unknown policy must raise ValueError"),
            check("grpo_advantages([1.0, 0.0, 1.0], [0, 0])", "lengths that differ must raise ValueError"),
        ],
        "q3_test_rloo": [
            check("rloo_advantages(r, g)", "RLOO advantages of one group [1,0,0,1,0,0,1,0]", visible=True,
                  r=binary, g=one_group),
            check("rloo_advantages([1.0, 0.5, 0.0, 0.2, 0.8], [7, 3, 7, 3, 3])", "two interleaved groups",
                  visible=True),
            check("rloo_advantages([1.0, 0.0], [0, 0, 0])", "lengths that differ must raise ValueError", visible=True),
            check("rloo_advantages(r, g)", "a random shuffled batch of groups of different sizes", r=r_int, g=g_int),
            check("rloo_advantages(r, g)", "string group labels", r=r_str, g=g_str),
            check("rloo_advantages([2.0, 2.0, 1.0, 3.0], [5, 5, 6, 6])", "equal rewards give zero RLOO advantages",
                  tol=1e-15),
            check("rloo_advantages([1.0, 0.0, 1.0], [0, 0, 1])", "a group of one must raise ValueError"),
            check("rloo_advantages([float('inf'), 0.0], [0, 0])", "an infinite reward must raise ValueError"),
        ],
        "q3_test_zero_variance": [
            check("zero_variance_probability([0.3, 0.7], 8)", "pass/fail with p=0.3, G=8 (notebook 04)", visible=True),
            check("zero_variance_probability([0.5, 0.3, 0.2], 4)", "three reward values, G=4", visible=True),
            check("zero_variance_probability([0.5, 0.5], 2.5)", "a non-integer G must raise ValueError", visible=True),
            check("zero_variance_probability([0.5, 0.6], 4)",
                  "probabilities that do not sum to 1 must raise ValueError",
                  visible=True),
            check("zero_variance_probability(q, G)", "random reward-value probabilities and G", q=probs,
                  G=_enumerable_g(rng, len(probs))),
            check("zero_variance_probability([p, 1 - p], G)", "pass/fail at a random p and G", p=p,
                  G=_enumerable_g(rng, 2)),
            check("zero_variance_probability(q, 8.0)", "a whole float G is accepted", q=probs8),
            check("zero_variance_probability([0.0, 1.0], 5)", "a checker that always gives the same reward",
                  tol=1e-12),
            check("zero_variance_probability([1.2, -0.2], 8)", "a probability outside [0, 1] must raise ValueError"),
            check("zero_variance_probability([0.5, 0.5], 1)", "G < 2 must raise ValueError"),
            check("zero_variance_probability([0.5, 0.5], True)", "a bool G must raise ValueError"),
            check("zero_variance_probability([0.5, 0.5], float('nan'))", "a nan G must raise ValueError"),
            check("zero_variance_probability([float('nan'), 0.5], 4)", "a nan probability must raise ValueError"),
        ],
        "q3_test_gradient": [
            check("expected_gradient(0.3, 8, 'full_mean')", "full-group mean at p=0.3, G=8 (notebook 06 §2)",
                  visible=True),
            check("expected_gradient(0.3, 8, 'leave_one_out')", "leave-one-out at p=0.3, G=8", visible=True),
            check("expected_gradient(p, G, 'full_mean')", "full-mean baseline at a random p and G", p=p, G=small_g),
            check("expected_gradient(p, G, 'leave_one_out')", "leave-one-out at a random p and G", p=p, G=small_g),
            check("expected_gradient(0.3, 8, 'full_mean', wrong_reward=0.5)",
                  "full-group mean, wrong answers earn 0.5",
                  visible=True),
            check("expected_gradient(p, G, 'full_mean', wrong_reward=c)",
                  "full-mean baseline, a random partial credit",
                  p=p, G=small_g, c=c),
            check("expected_gradient(p, G, 'leave_one_out', c)", "leave-one-out, a random partial credit",
                  p=p, G=small_g, c=c),
            check("expected_gradient(0.3, 4, 'full_mean', wrong_reward=1.5)", "wrong_reward > 1 must raise ValueError",
                  visible=True),
            check("expected_gradient(0.3, 4, 'full_mean', wrong_reward=float('nan'))",
                  "a nan wrong_reward must raise ValueError"),
            check("expected_gradient(0.5, 2, 'full_mean')", "the smallest group"),
            check("expected_gradient(0.3, 4, 'std')", "an unknown baseline must raise ValueError"),
        ],
        "q3_test_aggregation": [
            check("response_mean_example", "response mean of the example", visible=True),
            check("token_mean_example", "token mean of the example", visible=True),
            check("aggregate(tv, 'response')", "unit 'response' on random responses", tv=tokens),
            check("aggregate(tv, 'token')", "unit 'token' on random responses", tv=tokens),
            check("aggregate([[1.0, 3.0], [5.0]], 'response')", "unit 'response' on [[1, 3], [5]]", visible=True),
            check("aggregate([[1.0, 3.0], [5.0]], 'token')", "unit 'token' on [[1, 3], [5]]", visible=True),
            check("aggregate(tv, 'sequence')", "an unknown unit must raise ValueError", tv=tokens),
            check("aggregate([[1.0]], 'sequence')", "an unknown unit must raise ValueError", visible=True),
            check("aggregate([[1.0], []], 'response')", "a response with no tokens must raise ValueError",
                  visible=True),
            check("aggregate([[1.0], []], 'token')", "a response with no tokens must raise ValueError"),
            check("aggregate([], 'token')", "no responses at all must raise ValueError"),
        ],
    }


def _q4(rng) -> dict:
    models = []
    for _ in range(int(rng.integers(1, 5))):
        size = float(rng.uniform(1e8, 1e11))
        models.append((size, float(rng.choice([0.0, size, size * rng.uniform(1e-4, 0.05)]))))
    step = dict(n=float(rng.uniform(1e8, 1e11)), t=float(rng.integers(1e5, 1e8)), s=float(rng.uniform(50, 3000)),
                f=float(rng.uniform(1e14, 2e15)), u=float(rng.uniform(0.05, 1.0)), k=int(rng.integers(1, 65)))
    scorers = [float(x) for x in rng.uniform(1e8, 1e11, size=int(rng.integers(1, 4)))]
    lecture = "step_seconds(8.03e9, 8_192_000, 209.4, 990e12, 0.4, 8"
    answers = ("ppo_gib", "dpo_gib", "ratio", "lora_dpo_gib", "ppo_small_gib", "scoring_share", "ratio_fast_decode")
    return {
        "q4_test_memory": [
            check("memory_gib([(8.03e9, 8.03e9), (8.03e9, 8.03e9), (8.03e9, 0), (8.03e9, 0)])",
                  "PPO for 8.03B params (notebook 07)", visible=True),
            check("memory_gib([(8.03e9, 8.03e9), (8.03e9, 0)])", "DPO with a resident reference", visible=True),
            check("memory_gib([(1e9, 0)])", "a frozen 1B model", visible=True),
            check("memory_gib([(1e9, 1e7)])", "a partly trainable 1B model", visible=True),
            check("memory_gib([(float('nan'), 0)])", "a nan n_params must raise ValueError", visible=True),
            check("memory_gib([])", "no model at all must raise ValueError", visible=True),
            check("memory_gib([(1e9, 2e9)])", "more trainable than stored parameters must raise ValueError",
                  visible=True),
            check("memory_gib(models)", "random models, fully trained, frozen or partly trainable", models=models),
            check("memory_gib([[n, t]])", "a model given as a list [n_params, n_trainable]", n=models[0][0],
                  t=models[0][1]),
            check("memory_gib([(0, 0)])", "n_params = 0 must raise ValueError"),
            check("memory_gib([(float('inf'), 0)])", "an infinite n_params must raise ValueError"),
            check("memory_gib([(1e9, -1.0)])", "a negative n_trainable must raise ValueError"),
            check("memory_gib([(1e9, float('nan'))])", "a nan n_trainable must raise ValueError"),
        ],
        "q4_test_time": [
            check(lecture + ")", "generation, scoring and update (notebook 07)", visible=True),
            check(lecture + ", scorer_params=[8.03e9, 8.03e9])", "with a reference and a reward model scoring",
                  visible=True),
            check("step_seconds(8.03e9, 8_192_000, float('inf'), 990e12, 0.4, 8)",
                  "an infinite throughput must raise ValueError", visible=True),
            check(lecture.replace("0.4", "1.5") + ")", "mfu > 1 must raise ValueError", visible=True),
            check(lecture + ", scorer_params=[float('nan')])", "a nan scorer size must raise ValueError",
                  visible=True),
            check("step_seconds(n, t, s, f, u, k)", "a random step without scorers", **step),
            check("step_seconds(n, t, s, f, u, k, scorer_params=m)", "a random step with random scorers", m=scorers,
                  **step),
            check("step_seconds(n, t, s, f, u, k, m)", "scorer_params given by position", m=scorers, **step),
            check("step_seconds(8.03e9, 8_192_000, 209.4, 990e12, 0.4, 0)",
                  "zero devices must raise ValueError"),
            check("step_seconds(8.03e9, -8_192_000, 209.4, 990e12, 0.4, 8)", "negative tokens must raise ValueError"),
            check("step_seconds(8.03e9, 8_192_000, float('nan'), 990e12, 0.4, 8)",
                  "a nan throughput must raise ValueError"),
            check(lecture.replace("0.4", "0.0") + ")", "mfu = 0 must raise ValueError"),
            check(lecture + ", scorer_params=[-1e9])", "a negative scorer size must raise ValueError"),
        ],
        "q4_test_answers": [
            check(name, f"{name} in the given scenario", visible=name in ("ppo_gib", "dpo_gib", "ratio"),
                  tol=1e-6, rtol=1e-8)
            for name in answers
        ],
    }


def _q5(rng) -> dict:
    return {
        f"q5_test_{key}": [check(f"passport[{key!r}]", f'passport["{key}"] matches the report of your student id',
                                 unordered=key == "roles")]
        for key in PASSPORT
    }


def checks(rng) -> dict:
    return {**_q1(rng), **_q2(rng), **_q3(rng), **_q4(rng), **_q5(rng)}
