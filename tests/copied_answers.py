"""A module14 submission whose answers only call the course library (issue #14, item 2).

Each answer cell wraps a ``course_lib`` function under the name the question asks for. Outside the
grading sandbox these wrappers earn a good share of the points (tests/test_assignment_tools.py
shows how many); in the sandbox ``course_lib`` cannot be imported, so they must earn at most 10%
(tests/test_assignment.py grades them on the real pipeline).
"""

from __future__ import annotations

ANSWERS = {
    "q1_bradley_terry": {
        "q1_functions": (
            "from course_lib import preference\n\n"
            "def bt_probability(gap):\n    return preference.bt_probability(gap)\n\n"
            "def win_rate_to_gap(p):\n    return preference.win_rate_to_gap(p)\n"
        ),
        "q1_loss_function": "from course_lib.preference import reward_model_loss\n",
        "q1_answers": (
            "import course_lib.preference as cp\n"
            "gap_90, gap_60 = cp.win_rate_to_gap(0.9), cp.win_rate_to_gap(0.6)\n"
            "batch_loss = cp.reward_model_loss([1.2, 0.3, -0.5, 2.0], [0.2, 0.8, -1.5, -0.4])\n"
        ),
    },
    "q2_dpo_margins": {
        "q2_functions": (
            "import course_lib\nimport course_lib.preference\n\n"
            "def dpo_terms(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):\n"
            "    t = course_lib.preference.dpo_terms(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta)\n"
            "    return t.margin, t.loss, t.slope\n"
        ),
        "q2_answers": (
            "z_pair2, _, slope_pair2 = dpo_terms(-12.0, -11.5, -12.8, -11.65, beta=0.1)\n"
            "z_beta05, loss_beta05, slope_beta05 = dpo_terms(-12.0, -11.5, -13.0, -10.8, beta=0.5)\n"
            "_s = dpo_terms([-20.0, -8.0, -15.0], [-22.0, -7.0, -14.0], [-21.0, -9.0, -14.0], [-21.5, -9.0, -17.0])[2]\n"
            "hardest_pair = 'ABC'[int(np.argmax(_s))]\nhardest_reason = 2\n"
        ),
    },
    "q3_group_baselines": {
        "q3_functions": (
            "from course_lib import advantages as adv\n\n"
            "def grpo_advantages(rewards, on_zero_variance='raise'):\n"
            "    return np.asarray(adv.grpo_advantages(rewards, on_degenerate=on_zero_variance))\n\n"
            "def rloo_advantages(rewards):\n    return np.asarray(adv.rloo_advantages(rewards))\n"
        ),
        "q3_zero_variance": (
            "from course_lib.advantages import zero_variance_probability as _zvp\n\n"
            "def zero_variance_probability(p, G):\n    return float(_zvp(p, G))\n"
        ),
        "q3_gradient": (
            "from course_lib.advantages import baseline_gradient\n\n"
            "def expected_gradient(p, G, baseline):\n"
            "    return baseline_gradient(p, G, {'full_mean': 'group_mean'}.get(baseline, baseline))\n"
        ),
    },
    "q4_budgets": {
        "q4_functions": (
            "from course_lib import budgets\n\n"
            "def memory_gib(n_params, n_trainable, n_frozen):\n"
            "    return budgets.stage_memory_gib(n_params, ['train'] * n_trainable + ['frozen_bf16'] * n_frozen)\n\n"
            "generation_seconds = budgets.rollout_generation_seconds\nupdate_seconds = budgets.update_seconds\n"
        ),
        "q4_answers": (
            "def _ratio(t=4000, s=209.4):\n"
            "    return generation_seconds(256, 8, t, s, 8) / update_seconds(8.03e9, 256 * 8 * t, 990e12, 0.4, 8)\n"
            "ppo_gib, dpo_gib, ratio = memory_gib(8.03e9, 2, 2), memory_gib(8.03e9, 1, 1), _ratio()\n"
            "dpo_cached_gib, ppo_70b_gib = memory_gib(8.03e9, 1, 0), memory_gib(70e9, 2, 2)\n"
            "ratio_2000_tokens, ratio_fast_decode = _ratio(t=2000), _ratio(s=3 * 209.4)\n"
        ),
    },
}
