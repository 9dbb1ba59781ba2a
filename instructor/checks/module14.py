"""Checks for the assignment ``module14`` (Q1–Q5); expected values come from solutions/module14.

One entry per autograded test cell. ``visible=True`` marks the checks the notebook's own test cell
shows (so students can self-check with Validate); every other check is hidden: its inputs are drawn
from ``rng`` for each grading run where a random input makes sense (so a table of memorised outputs
earns nothing), or are fixed edge cases and bad input. Every cell has at least one value check on a
random input when it checks a function, so a function that always raises ``ValueError`` earns
nothing either; answers the student computes (``gap_90``, the passport) are fixed values.
"""

from __future__ import annotations

from instructor.grading import check

PASSPORT = ("feedback_source", "reward_granularity", "data_timing", "roles", "kl_placement",
            "averaging_unit", "zero_variance", "loop")


def _q1(rng) -> dict:
    gaps = [float(x) for x in rng.uniform(-6, 6, size=3)]
    win = float(rng.uniform(0.02, 0.98))
    n = int(rng.integers(3, 7))
    chosen, rejected = rng.normal(0, 2, size=n).tolist(), rng.normal(0, 2, size=n).tolist()
    return {
        "q1_test_probability": [
            check("bt_probability(0.0)", "equal scores are a coin flip", visible=True),
            check("bt_probability(1.0)", "a gap of 1 (lecture §5)", visible=True),
            check("bt_probability(2.0)", "a gap of 2", visible=True),
            *[check("bt_probability(g)", "probability for a random gap", g=g) for g in gaps],
            check("bt_probability(g) + bt_probability(-g)", "P(w beats l) + P(l beats w) must be 1",
                  g=gaps[0], tol=1e-12),
            check("bt_probability(1e4)", "stable (close to 1) for a very large positive gap", visible=True, tol=1e-12),
            check("bt_probability(-1e4)", "stable (0, not nan) for a very large negative gap", visible=True,
                  tol=1e-300),
            check("bt_probability(-800.0)", "no overflow for a large negative gap", tol=1e-300),
        ],
        "q1_test_inverse": [
            check("win_rate_to_gap(0.75)", "log 3 (lecture §5)", visible=True),
            check("win_rate_to_gap(0.5)", "a 50% win rate means no gap", visible=True, tol=1e-12),
            check("win_rate_to_gap(1.0)", "a 100% win rate has no finite gap", visible=True),
            check("win_rate_to_gap(p)", "gap for a random win rate", p=win),
            check("win_rate_to_gap(0.999)", "gap for a win rate close to 1"),
            check("bt_probability(win_rate_to_gap(p))", "bt_probability(win_rate_to_gap(p)) must give p back",
                  p=float(rng.uniform(0.05, 0.95)), tol=1e-12),
            check("win_rate_to_gap(0.0)", "a win rate of 0 must raise ValueError"),
            check("win_rate_to_gap(1.5)", "a win rate above 1 must raise ValueError"),
            check("win_rate_to_gap(-0.25)", "a negative win rate must raise ValueError"),
            check("win_rate_to_gap(float('nan'))", "a nan win rate must raise ValueError", visible=True),
        ],
        "q1_test_loss": [
            check("reward_model_loss([0.0], [0.0])", "a tie costs log 2", visible=True),
            check("reward_model_loss([1.0, 2.0], [0.0, 0.0])", "mean loss of gaps 1 and 2", visible=True),
            check("reward_model_loss(chosen, rejected)", "mean loss of a random batch (lists)",
                  chosen=chosen, rejected=rejected),
            check("reward_model_loss(chosen, rejected)", "mean loss of a random batch (arrays)",
                  chosen=rng.normal(0, 3, size=n), rejected=rng.normal(0, 3, size=n)),
            check("reward_model_loss([1e4], [0.0])", "stable (close to 0) for a gap of +1e4", visible=True, tol=1e-12),
            check("reward_model_loss(big, zero)", "stable (close to 0) for a huge positive gap",
                  big=rng.uniform(1e3, 1e4, size=1), zero=[0.0], tol=1e-12),
            check("reward_model_loss([0.0], [1e4])", "stable (the gap, not inf) for a huge negative gap",
                  visible=True, tol=1e-6),
            check("reward_model_loss([1.0, 2.0], [0.0])", "sequences of different lengths must raise ValueError",
                  visible=True),
            check("reward_model_loss([], [])", "an empty batch must raise ValueError"),
        ],
        "q1_test_answers": [
            check("gap_90", "gap_90 = log 9", visible=True, tol=1e-6),
            check("gap_60", "gap_60 is the gap behind a 60% win rate", tol=1e-6),
            check("batch_loss", "batch_loss is the mean loss of the four given pairs", tol=1e-6),
        ],
    }


def _q2(rng) -> dict:
    lp = [float(x) for x in rng.uniform(-30, -5, size=4)]
    beta = float(rng.uniform(0.05, 1.0))
    arrays = {k: rng.uniform(-30, -5, size=3) for k in ("pc", "rc")}
    shared = [float(x) for x in rng.uniform(-30, -5, size=2)]
    pair_one = "dpo_terms(-12.0, -11.5, -13.0, -10.8, beta=0.1)"
    return {
        "q2_test_pair_one": [
            check(pair_one, "pair I of the lecture: (z, loss, slope)", visible=True),
            check("dpo_terms(a, b, c, d, beta=beta)", "(z, loss, slope) for a random pair and beta",
                  a=lp[0], b=lp[1], c=lp[2], d=lp[3], beta=beta),
            check("dpo_terms(-20.0, -5.0, -5.0, -20.0, beta=0.2)", "a misordered pair"),
            check("dpo_terms(-5000.0, -10.0, -10.0, -5000.0, beta=1.0)",
                  "loss and slope stable for a strongly misordered pair", visible=True, tol=1e-6),
            check("dpo_terms(-10.0, -5000.0, -5000.0, -10.0, beta=1.0)",
                  "loss and slope stable for a very well-ordered pair", visible=True, tol=1e-12),
        ],
        "q2_test_broadcast": [
            check("dpo_terms([-12.0, -12.0], [-11.5, -11.5], [-13.0, -12.8], [-10.8, -11.65], beta=0.1)",
                  "two pairs in, two values of each out", visible=True),
            check("dpo_terms(pc, pr, rc, rr, beta=beta)", "scalars must broadcast against arrays",
                  pc=arrays["pc"], pr=shared[0], rc=arrays["rc"], rr=shared[1], beta=beta),
        ],
        "q2_test_bad_input": [
            check("dpo_terms(-1.0, -2.0, -1.5, -1.5, beta=0.5)", "z for a simple pair", visible=True),
            check("dpo_terms(-1.0, -2.0, -1.5, -1.5, beta=0.0)", "beta = 0 must raise ValueError", visible=True),
            check("dpo_terms(a, b, c, d, beta=beta)", "a valid random pair is not bad input",
                  a=lp[1], b=lp[0], c=lp[3], d=lp[2], beta=beta),
            check("dpo_terms(-1.0, -2.0, -1.5, -1.5, beta=-0.1)", "a negative beta must raise ValueError"),
            check("dpo_terms(-1.0, -2.0, -1.5, -1.5, beta=float('nan'))", "a nan beta must raise ValueError"),
            check("dpo_terms(-1.0, -2.0, -1.5, -1.5, beta=float('inf'))", "an infinite beta must raise ValueError"),
            check("dpo_terms(float('-inf'), -2.0, -1.5, -1.5)", "an infinite log-probability must raise ValueError",
                  visible=True),
            check("dpo_terms([-1.0, float('nan')], -2.0, -1.5, -1.5)", "a nan inside an array must raise ValueError",
                  visible=True),
        ],
        "q2_test_answers": [
            check("z_pair2", "z_pair2 (lecture §7)", visible=True, tol=1e-6),
            check("z_beta05", "z_beta05 (lecture §7)", visible=True, tol=1e-6),
            check("slope_pair2", "slope_pair2", tol=1e-6),
            check("loss_beta05", "loss_beta05", tol=1e-6),
            check("slope_beta05", "slope_beta05", tol=1e-6),
            check("hardest_pair", "hardest_pair is the pair with the largest |∂L/∂z|"),
            check("hardest_reason", "hardest_reason is the right explanation"),
        ],
    }


def _q3(rng) -> dict:
    group = list(rng.normal(0, 1.5, size=int(rng.integers(3, 9))).round(3))
    group = [float(x) for x in group]
    p, small_g, c = float(rng.uniform(0.05, 0.95)), int(rng.integers(2, 7)), float(rng.uniform(0.05, 0.95))
    tokens = [[float(x) for x in rng.normal(0, 2, size=int(k))] for k in rng.integers(1, 6, size=3)]
    binary = [1, 0, 0, 1, 0, 0, 1, 0]
    return {
        "q3_test_grpo": [
            check("grpo_advantages(r)", "GRPO advantages of [1,0,0,1,0,0,1,0] (lecture §9)", visible=True, r=binary),
            check("grpo_advantages([1, 1, 1, 1])", "a zero-variance group raises ValueError by default", visible=True),
            check("grpo_advantages(r)", "GRPO advantages of random real rewards", r=group),
            check("grpo_advantages(r)", "GRPO advantages of a random NumPy array", r=rng.normal(0, 1, size=5)),
            check("grpo_advantages([0.1, 0.1, 0.1])", "[0.1, 0.1, 0.1] has zero variance (its float std is not 0)",
                  visible=True),
            check("grpo_advantages([v] * k, on_zero_variance='zeros')", "equal random rewards with 'zeros' give zeros",
                  v=float(rng.uniform(0.05, 3.0)), k=int(rng.integers(2, 9))),
            check("grpo_advantages([0.3, 0.3, 0.3], on_zero_variance='zeros')", "on_zero_variance='zeros' gives zeros"),
            check("grpo_advantages([1, 0, 1], on_zero_variance='epsilon')", "an unknown policy must raise ValueError"),
            check("grpo_advantages([1.0])", "a group of one must raise ValueError"),
            check("grpo_advantages([1.0, float('nan')])", "a nan reward must raise ValueError", visible=True),
        ],
        "q3_test_rloo": [
            check("rloo_advantages(r)", "RLOO advantages of [1,0,0,1,0,0,1,0]", visible=True, r=binary),
            check("rloo_advantages(r)", "RLOO advantages of random real rewards", r=group),
            check("rloo_advantages([2.0, 2.0])", "equal rewards give zero RLOO advantages", tol=1e-15),
            check("rloo_advantages([[1.0, 0.0], [0.0, 1.0]])", "a 2-D input must raise ValueError"),
            check("rloo_advantages([float('inf'), 0.0])", "an infinite reward must raise ValueError"),
        ],
        "q3_test_zero_variance": [
            check("zero_variance_probability(0.3, 8)", "p=0.3, G=8 (lecture §9)", visible=True),
            check("zero_variance_probability(p, G)", "a random p and G", p=p, G=int(rng.integers(2, 17))),
            check("zero_variance_probability(0.0, 8)", "with p = 0 every group is all failures", tol=1e-12),
            check("zero_variance_probability(1.2, 8)", "p > 1 must raise ValueError"),
            check("zero_variance_probability(0.5, 1)", "G < 2 must raise ValueError"),
            check("zero_variance_probability(0.5, 2.5)", "a non-integer G must raise ValueError", visible=True),
            check("zero_variance_probability(0.5, 8.0)", "a whole float G is accepted"),
            check("zero_variance_probability(0.5, float('nan'))", "a nan G must raise ValueError"),
        ],
        "q3_test_gradient": [
            check("expected_gradient(0.3, 8, 'full_mean')", "full-group mean at p=0.3, G=8 (lecture §12)", visible=True),
            check("expected_gradient(0.3, 8, 'leave_one_out')", "leave-one-out at p=0.3, G=8", visible=True),
            check("expected_gradient(p, G, 'full_mean')", "full-mean baseline at a random p and G", p=p, G=small_g),
            check("expected_gradient(p, G, 'leave_one_out')", "leave-one-out at a random p and G", p=p, G=small_g),
            check("expected_gradient(0.3, 8, 'full_mean', wrong_reward=0.5)", "full-group mean, wrong answers earn 0.5",
                  visible=True),
            check("expected_gradient(p, G, 'full_mean', wrong_reward=c)", "full-mean baseline, a random partial credit",
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
    n = float(rng.uniform(1e8, 1e11))
    counts = [int(x) for x in rng.integers(0, 4, size=2)]
    counts[0] += 1  # at least one model
    gen_args = dict(p=int(rng.integers(16, 1024)), c=int(rng.integers(1, 17)), t=int(rng.integers(100, 8000)),
                    s=float(rng.uniform(50, 3000)), d=int(rng.integers(1, 65)))
    upd_args = dict(n=n, tokens=float(rng.uniform(1e5, 1e8)), f=float(rng.uniform(1e14, 2e15)),
                    u=float(rng.uniform(0.05, 1.0)), d=int(rng.integers(1, 65)))
    answers = ("ppo_gib", "dpo_gib", "ratio", "dpo_cached_gib", "ppo_70b_gib", "ratio_2000_tokens", "ratio_fast_decode")
    return {
        "q4_test_memory": [
            check("memory_gib(8.03e9, 2, 2)", "PPO for 8.03B params (lecture §10)", visible=True),
            check("memory_gib(8.03e9, 1, 1)", "DPO with a resident reference", visible=True),
            check("memory_gib(n, a, b)", "memory for a random size and random model counts",
                  n=n, a=counts[0], b=counts[1]),
            check("memory_gib(n, 0, 3)", "frozen models only", n=n),
            check("memory_gib(0, 1, 1)", "n_params = 0 must raise ValueError"),
            check("memory_gib(float('inf'), 1, 1)", "an infinite n_params must raise ValueError"),
            check("memory_gib(1e9, -1, 2)", "a negative count must raise ValueError"),
            check("memory_gib(1e9, 0, 0)", "no model at all must raise ValueError", visible=True),
            check("memory_gib(float('nan'), 1, 1)", "a nan n_params must raise ValueError", visible=True),
        ],
        "q4_test_time": [
            check("generation_seconds(256, 8, 4000, 209.4, 8)", "generation time (lecture §11)", visible=True),
            check("update_seconds(8.03e9, 8_192_000, 990e12, 0.4, 8)", "one 6ND pass (lecture §11)", visible=True),
            check("generation_seconds(p, c, t, s, d)", "generation time of a random rollout batch", **gen_args),
            check("update_seconds(n, tokens, f, u, d)", "update time for a random model and hardware", **upd_args),
            check("update_seconds(8.03e9, 8_192_000, 990e12, 1.5, 8)", "mfu > 1 must raise ValueError", visible=True),
            check("update_seconds(8.03e9, 8_192_000, 990e12, 0.0, 8)", "mfu = 0 must raise ValueError"),
            check("generation_seconds(256, 8, 4000, 209.4, 0)", "zero devices must raise ValueError"),
            check("generation_seconds(256, 8, -4000, 209.4, 8)", "a negative length must raise ValueError"),
            check("generation_seconds(256, 8, 4000, float('nan'), 8)", "a nan throughput must raise ValueError"),
            check("generation_seconds(256, 8, 4000, float('inf'), 8)", "an infinite throughput must raise ValueError",
                  visible=True),
        ],
        "q4_test_answers": [
            check(name, f"{name} in the lecture's scenario", visible=name in ("ppo_gib", "dpo_gib", "ratio"),
                  tol=1e-6, rtol=1e-8)
            for name in answers
        ],
    }


def _q5(rng) -> dict:
    return {
        f"q5_test_{key}": [check(f"passport[{key!r}]", f'passport["{key}"] matches the description',
                                 unordered=key == "roles")]
        for key in PASSPORT
    }


def checks(rng) -> dict:
    return {**_q1(rng), **_q2(rng), **_q3(rng), **_q4(rng), **_q5(rng)}
