"""The course's glossary: each term, the notebook that defines it, and a one-line definition.

One home: a notebook that uses a term before its defining notebook (in course order, the sorted
notebook stems) is a forward reference, and ``tests/test_glossary.py`` fails on it. The defining
notebook shows the term in bold where it defines it. ``pattern`` is what counts as a use (a regular
expression, matched case-insensitively unless the term is an acronym); the test ignores code, code
spans, the course maps' rows and the text of links to other notebooks, which name a notebook rather
than use a term.

Simplification, said out loud: a pattern cannot tell senses apart ("trajectory" of an optimiser and of
a policy), so a term's first use in any sense must come at or after its definition.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Term:
    stem: str  # the notebook that defines it
    definition: str  # one line
    pattern: str  # a use of the term (regular expression)
    case_sensitive: bool = False


GLOSSARY: dict[str, Term] = {
    "reward model": Term("00_start_here", "a network that scores an answer, fitted to comparisons (Bradley–Terry)",
                         r"\breward[- ]models?\b"),
    "RLVR": Term("00_start_here", "reinforcement learning with verifiable rewards: a program checks each answer",
                 r"\bRLVR\b", case_sensitive=True),
    "reference model": Term("02_dpo_margins", "π_ref, a frozen copy of the policy before training, the anchor of "
                            "DPO's margin and of the KL penalty", r"\breference (?:model|policy)\b|π_ref"),
    "KL drift": Term("02_dpo_margins", "how far, in KL, the policy has moved from the reference model",
                     r"\bKL drift\b"),
    "critic": Term("04_group_baselines", "a learned value function that predicts the reward of a partial answer "
                   "(PPO trains one; GRPO and RLOO do without)", r"\bcritics?\b"),
    "rollout": Term("04_group_baselines", "one sampled completion of a prompt by the policy, scored by the reward",
                    r"\brollouts?\b"),
    "trajectory": Term("04_group_baselines", "a rollout seen as a sequence of actions (tokens, tool calls) and the "
                       "rewards they received", r"\btrajector(?:y|ies)\b"),
    "advantage": Term("04_group_baselines", "how much better an answer did than a baseline (the group's mean, its "
                      "siblings, or a critic's prediction)", r"\badvantages?\b"),
    "REINFORCE": Term("04_group_baselines", "the plain policy gradient: reward (minus a baseline) times ∇log π of "
                      "the sampled answer", r"\bREINFORCE\b", case_sensitive=True),
    "zero-variance group": Term("04_group_baselines", "a group whose answers all got the same reward: every "
                                "advantage is zero and it teaches nothing", r"\bzero-variance\b"),
    "π_old": Term("05_from_advantages_to_an_update", "the policy that sampled the current batch, refreshed at "
                  "every rollout", r"π_old"),
    "importance ratio": Term("05_from_advantages_to_an_update", "ρ = π_θ/π_old of a token: how much more likely "
                             "the policy being trained makes it than the one that sampled it",
                             r"\bimportance ratio\b|\bratio ρ\b|ρ = π_θ"),
    "clip": Term("05_from_advantages_to_an_update", "PPO's clipped objective: min(ρA, clip(ρ, 1 − ε_low, "
                 "1 + ε_high)·A), which takes tokens whose ratio left the range out of the gradient",
                 r"\bclipped (?:objective|surrogate)\b|\bPPO's clip\b|\bratio clip\b|\bclip-higher\b"),
    "on-policy": Term("06_baseline_bias_enumeration", "trained on answers the current policy sampled itself "
                      "(π_old = π_θ)", r"\bon-policy\b"),
    "offline": Term("08_tiny_gpt_dpo", "trained on data collected once before training and not resampled as the "
                    "policy changes (DPO's pairs)", r"\boffline\b"),
    "policy entropy": Term("09_tiny_gpt_grpo", "−Σ π log π of the policy's next-token distribution, averaged over "
                           "a completion's tokens: how spread its choices are", r"\bentropy\b"),
    "score function": Term("10_the_kl_term", "∇log π(y): a detached value reaches θ only multiplied by it, "
                           "E[k(y)·∇log π(y)]", r"\bscore[- ]function\b"),
    "process reward": Term("15_environments_and_tools", "a reward for every step (policy turn) of an episode, "
                           "not only its end; each turn is credited with its own and the later steps' rewards",
                           r"\bprocess rewards?\b|\bper-step \(process\) rewards?\b"),
}
