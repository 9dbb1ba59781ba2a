"""Submissions built from the course library: one that calls it, one that copies it, for module14 (Q1–Q4)
and systems14 (Q6–Q8).

Both keep the solutions' answer cells except the functions a question asks for:

- ``calls``: each asked function wraps the closest ``course_lib`` function (arguments passed through,
  signatures adapted, nothing computed that the library does not compute). In the grading sandbox
  ``course_lib`` cannot be imported, and the scan flags every such cell.
- ``copies``: each asked function is the library function's own source (``inspect.getsource``, so the
  copy follows the library), renamed to the asked name, after the library module and its helpers
  (``course_lib/_validate.py``) pasted whole. Nothing names ``course_lib``: the sandbox and the scan
  see ordinary code, so only the design of the questions stands between such a copy and the points.

Each must earn at most 10% of the autograded points; tests/test_assignment_tools.py measures them
outside the sandbox, tests/test_assignment.py (module14) and tests/test_systems14.py on the real pipeline.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import pkgutil
import re
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = "module14"

# asked name -> (course_lib module, the closest library function)
MODULE14_CLOSEST = {
    "bt_matrix": ("preference", "bt_probability"),
    "chain_win_rate": ("preference", "win_rate_to_gap"),
    "pairwise_loss": ("preference", "reward_model_loss"),
    "dpo_terms": ("preference", "dpo_terms"),
    "dpo_gradients": ("preference", "dpo_terms"),
    "grpo_advantages": ("advantages", "grpo_advantages"),
    "rloo_advantages": ("advantages", "rloo_advantages"),
    "zero_variance_probability": ("advantages", "zero_variance_probability"),
    "expected_gradient": ("advantages", "baseline_gradient"),
    "aggregate": ("policy_loss", "aggregate"),
    "memory_gib": ("budgets", "stage_memory_gib"),
    "step_seconds": ("budgets", "update_seconds"),
}

# the wrappers of the "calls" submission: one library call per asked function, no new computation
MODULE14_CALLS = {
    "bt_matrix": "def bt_matrix(scores):\n    return preference.bt_probability(scores)\n",
    "chain_win_rate": ("def chain_win_rate(win_rates):\n"
                       "    return preference.bt_probability(preference.win_rate_to_gap(win_rates))\n"),
    "pairwise_loss": ("def pairwise_loss(scores, winners, losers):\n    s = np.asarray(scores, dtype=float)\n"
                      "    return preference.reward_model_loss(s[winners], s[losers])\n"),
    "dpo_terms": ("def dpo_terms(policy_chosen, policy_rejected, ref_chosen, ref_rejected, chosen_mask, rejected_mask,"
                  " beta=0.1):\n"
                  "    t = preference.dpo_terms(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta)\n"
                  "    return t.margin, t.loss, t.slope\n"),
    "dpo_gradients": ("def dpo_gradients(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta=0.1):\n"
                      "    t = preference.dpo_terms(policy_chosen, policy_rejected, ref_chosen, ref_rejected, beta)\n"
                      "    return -t.slope, t.slope\n"),
    "grpo_advantages": ("def grpo_advantages(rewards, group_ids, on_zero_variance='raise'):\n"
                        "    return np.asarray(advantages.grpo_advantages(rewards, "
                        "on_degenerate=on_zero_variance))\n"),
    "rloo_advantages": ("def rloo_advantages(rewards, group_ids):\n"
                        "    return np.asarray(advantages.rloo_advantages(rewards))\n"),
    "zero_variance_probability": ("def zero_variance_probability(probs, G):\n"
                                  "    return float(advantages.zero_variance_probability(probs[0], G))\n"),
    "expected_gradient": ("def expected_gradient(p, G, baseline, wrong_reward=0.0):\n"
                          "    return advantages.baseline_gradient(p, G, {'full_mean': 'group_mean'}.get(baseline, "
                          "baseline))\n"),
    "aggregate": ("def aggregate(token_values, unit):\n"
                  "    unit = {'response': 'sequence_mean', 'token': 'token_mean'}.get(unit, unit)\n"
                  "    width = max(len(v) for v in token_values)\n"
                  "    values = [list(v) + [0.0] * (width - len(v)) for v in token_values]\n"
                  "    mask = [[1] * len(v) + [0] * (width - len(v)) for v in token_values]\n"
                  "    return float(policy_loss.aggregate(values, mask, unit))\n"),
    "memory_gib": ("def memory_gib(models):\n"
                   "    roles = ['train' if trainable else 'frozen_bf16' for _, trainable in models]\n"
                   "    return budgets.stage_memory_gib(models[0][0], roles)\n"),
    "step_seconds": ("def step_seconds(n_params, tokens, tokens_per_second, flops_per_device, mfu, devices,"
                     " scorer_params=()):\n"
                     "    return (budgets.rollout_generation_seconds(1, 1, tokens, tokens_per_second, devices), 0.0,\n"
                     "            budgets.update_seconds(n_params, tokens, flops_per_device, mfu, devices))\n"),
}


SYSTEMS14_CLOSEST = {
    "sampler_versions": ("behaviour", "check_bounds"),  # no library function gives the version per batch
    "behaviour_weights": ("behaviour", "behaviour_weights"),
    "mismatch_stats": ("behaviour", "mismatch"),
    "correction_gain": ("verdicts", "paired"),
    "policy_mask": ("environments", "episode_batch"),
    "outcome_advantages": ("advantages", "grpo_advantages"),
    "step_advantages": ("environments", "process_advantages"),
    "tool_call_rates": ("environments", "episode_stats"),
    "verifier_rewards": ("rewards", "checker_reward"),
    "judge_audit": ("judge", "measure_judge"),
    "bias_removed": ("verdicts", "paired"),
}
_PADDED = ("    width = max(len(r) for r in old_logps)\n"
           "    pad = lambda rows: [list(r) + [0.0] * (width - len(r)) for r in rows]\n"
           "    mask = [[1] * len(r) + [0] * (width - len(r)) for r in old_logps]\n")
SYSTEMS14_CALLS = {
    "sampler_versions": ("def sampler_versions(n_batches, K):\n"
                         "    behaviour.check_bounds('token_mask', None, K)\n"
                         "    return list(range(n_batches))\n"),
    "behaviour_weights": ("def behaviour_weights(old_logps, sampler_logps, mode, clip_min=None, clip_max=3.0):\n"
                          + _PADDED
                          + "    w, out = behaviour.behaviour_weights(pad(old_logps), pad(sampler_logps), mask, mode,"
                          " clip_min, clip_max)\n    return w.tolist(), out.tolist()\n"),
    "mismatch_stats": ("def mismatch_stats(old_logps, sampler_logps, mode, clip_min=None, clip_max=3.0):\n" + _PADDED
                       + "    o, s, m = (behaviour.torch.tensor(x, dtype=behaviour.torch.float64)"
                       " for x in (pad(old_logps), pad(sampler_logps), mask))\n"
                       "    w, out = behaviour.behaviour_weights(o, s, m, mode, clip_min, clip_max)\n"
                       "    d = behaviour.mismatch(o, s, m, w, out)\n"
                       "    return {'masked_share': float(d['is_clipped_fraction']), 'ess': float(d['is_ess']),"
                       " 'mismatch_kl': float(d['mismatch_kl'])}\n"),
    "correction_gain": ("def correction_gain(corrected, uncorrected, margin):\n"
                        "    seeds = sorted(corrected)\n"
                        "    v = verdicts.paired([corrected[s] for s in seeds], [uncorrected[s] for s in seeds],"
                        " name_a='corrected', name_b='uncorrected', margin=margin)\n"
                        "    return list(v.differences), v.median, v.beyond\n"),
    "policy_mask": ("def policy_mask(episode):\n"
                    "    return environments.episode_batch(episode, 0)['completion_mask'][0].tolist()\n"),
    "outcome_advantages": ("def outcome_advantages(episodes, rewards):\n"
                           "    return advantages.grpo_advantages(rewards, on_degenerate='zeros').tolist()\n"),
    "step_advantages": ("def step_advantages(episodes, step_rewards):\n"
                        "    return environments.process_advantages(step_rewards)\n"),
    "tool_call_rates": ("def tool_call_rates(episodes, carry):\n"
                        "    stats = environments.episode_stats(episodes)\n"
                        "    return stats['tool_call_rate_carry'], stats['tool_call_rate_no_carry']\n"),
    "verifier_rewards": ("def verifier_rewards(episodes, truths):\n"
                         "    return rewards.checker_reward(episodes, truths)\n"),
    "judge_audit": ("def judge_audit(p_ab, p_ba, a_better, len_a, len_b, tie_margin=0.0):\n"
                    "    s = judge.swap_test(lambda a, b: a, {'a_ids': judge.torch.tensor(p_ab),"
                    " 'b_ids': judge.torch.tensor(p_ba)}, tie_margin)\n"
                    "    return {'position_bias': s['position_bias'], 'flip_rate': s['flip_rate']}\n"),
    "bias_removed": ("def bias_removed(before, after, margin, threshold=0.1):\n"
                     "    seeds = sorted(before)\n"
                     "    v = verdicts.paired([before[s] for s in seeds], [after[s] for s in seeds], name_a='before',"
                     " name_b='after', margin=margin)\n"
                     "    return list(v.differences), v.median, v.beyond\n"),
}

# per assignment: the closest library functions, the wrappers, the solution notebooks with asked functions
CLOSEST = {"module14": MODULE14_CLOSEST, "systems14": SYSTEMS14_CLOSEST}
CALLS = {"module14": MODULE14_CALLS, "systems14": SYSTEMS14_CALLS}
ANSWERED = {"module14": "q[1-4]_*.ipynb", "systems14": "q[6-8]_*.ipynb"}


def _without_library_imports(source: str) -> str:
    keep = [line for line in source.splitlines()
            if not line.startswith(("from __future__", "from course_lib", "import course_lib"))]
    return "\n".join(keep) + "\n"


def _library(name: str):
    """The course_lib module called ``name``, wherever it sits in the package."""
    import course_lib

    for info in pkgutil.walk_packages(course_lib.__path__, "course_lib."):
        if info.name.rpartition(".")[2] == name:
            return importlib.import_module(info.name)
    raise ValueError(f"course_lib has no module called {name!r}")


def _copy(asked: str, closest: dict) -> str:
    """The closest library function's source, renamed to the asked name."""
    module, name = closest[asked]
    function = getattr(_library(module), name)
    return re.sub(rf"^def {name}\(", f"def {asked}(", inspect.getsource(function), count=1, flags=re.M)


def _pasted_modules(modules: set[str]) -> str:
    """course_lib/_validate.py and the modules the copies come from, pasted whole (no course_lib import)."""
    sources = [inspect.getsource(importlib.import_module("course_lib._validate"))]
    sources += [inspect.getsource(_library(m)) for m in sorted(modules)]
    return "".join(_without_library_imports(s) for s in sources)


def _asked(source: str, closest: dict) -> list[str]:
    return [node.name for node in ast.parse(source).body if isinstance(node, ast.FunctionDef) and node.name in closest]


def _rest(source: str, asked: list[str]) -> str:
    """The solution cell without the asked functions (the answers it computes with them stay)."""
    tree = ast.parse(source)
    tree.body = [node for node in tree.body if not (isinstance(node, ast.FunctionDef) and node.name in asked)]
    return ast.unparse(tree) + "\n" if tree.body else ""


def submission(kind: str, assignment: str = ASSIGNMENT) -> dict[str, dict[str, str]]:
    """{notebook: {grade_id: code}} for every answer cell of the notebooks that ask for functions (module14:
    Q1–Q4; systems14: Q6–Q8); ``kind`` is "calls" or "copies"."""
    if kind not in ("calls", "copies"):
        raise ValueError(f"kind must be 'calls' or 'copies'; got {kind!r}")
    if assignment not in CLOSEST:
        raise ValueError(f"assignment must be one of {sorted(CLOSEST)}; got {assignment!r}")
    closest, calls = CLOSEST[assignment], CALLS[assignment]
    out: dict[str, dict[str, str]] = {}
    for path in sorted((ROOT / "solutions" / assignment).glob(ANSWERED[assignment])):
        cells = out.setdefault(path.stem, {})
        for cell in nbformat.read(str(path), as_version=4).cells:
            meta = cell.metadata.get("nbgrader", {})
            if cell.cell_type != "code" or not meta.get("solution"):
                continue
            asked = _asked(cell.source, closest)
            if not asked:
                cells[meta["grade_id"]] = cell.source  # the answers, computed with the functions above
                continue
            modules = {closest[name][0] for name in asked}
            if kind == "calls":
                head = "".join(f"from {_library(m).__package__} import {m}\n" for m in sorted(modules)) + "\n"
                body = "\n\n".join(calls[name] for name in asked)
            else:
                head = _pasted_modules(modules) + "\n"
                body = "\n\n".join(_copy(name, closest) for name in asked)
            cells[meta["grade_id"]] = head + body + "\n" + _rest(cell.source, asked)
    return out
