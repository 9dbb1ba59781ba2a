"""The course map: every lecture notebook, what it teaches, and when to do the assignments.

One source for every place the map appears: the README's course map and ``docs/course-map.md``
(``python -m tools.course_map`` writes them between ``<!-- map:NAME -->`` markers; ``--check``
compares, and a test runs it) and notebook 00, which displays ``notebook_map()``. Links are
written from the repository root and rewritten for the folder a map is read from (``at``).

Simplified: the lecture sections are pointers for readers who have the Module 14 lecture, typed
here by hand; nothing checks them against the lecture.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from course_lib.lesson.colab import BADGE, colab_url, notebook_path


@dataclass(frozen=True)
class Notebook:
    stem: str  # file name without .ipynb, e.g. "02_dpo_margins"
    title: str  # the title the maps link with, after the number
    lecture: str  # the Module 14 lecture's sections it follows ("—": none)
    does: str  # what you do there, in one line (the README's and notebook 00's map)
    teaches: str  # what it teaches, in full (docs/course-map.md)

    @property
    def label(self) -> str:
        return f"{self.stem[:2]} {self.title}"


NOTEBOOKS = (
    Notebook(
        '00_start_here', 'Start here', '—',
        'set up, check the environment, find your way',
        ('the course map, running locally (`make lab`) or on Colab, and an environment check: '
         'versions and the device (CUDA, MPS or CPU)'),
    ),
    Notebook(
        '01_bradley_terry', 'Bradley–Terry', '§3, §5',
        'turn score gaps into win rates and back; the reward-model loss on toy pairs',
        ('score gaps ↔ win rates: σ(1)=0.731, a 75% win rate is a gap of log 3 = 1.099; the '
         'reward-model loss on toy pairs; a field of models: the win-probability matrix, chains of'
         ' wins (two 75% wins make 90%), the loss over (winner, loser) indices'),
    ),
    Notebook(
        '02_dpo_margins', 'DPO margins', '§6–§8',
        'read a DPO margin, its loss and its pull; compare IPO, SimPO, ORPO, KTO',
        ('the DPO margin, loss and slope of one pair, sequence log-probs as masked token sums, the'
         " pull −β·σ(−z) on the policy's log-probabilities, what β does, the implicit reward; IPO,"
         ' SimPO, ORPO and KTO side by side'),
    ),
    Notebook(
        '03_the_regularised_objective', 'The regularised objective', '§4, §6',
        ('solve the KL-regularised objective exactly, derive DPO from it, tell forward from '
         'reverse KL'),
        ('E[r] − β·KL(π‖π_ref) solved exactly (π* ∝ π_ref·exp(r/β)) and checked against 20,000 '
         'competitors; DPO derived from it step by step, with what "replace π* by π_θ" assumes; '
         'forward vs reverse KL (mode-covering vs mode-seeking)'),
    ),
    Notebook(
        '04_group_baselines', 'Group baselines', '§9, §12',
        ('GRPO, RLOO and Dr. GRPO advantages; what a constant scale does under SGD and under Adam;'
         ' zero-variance groups'),
        ('GRPO, RLOO and Dr. GRPO advantages; ddof; a constant advantage scale is a smaller step '
         'under SGD and cancels under Adam (an exact run), what survives Adam; zero-variance '
         'groups, also in floating point and with partial credit; groups of different sizes in one'
         ' flat batch'),
    ),
    Notebook(
        '05_from_advantages_to_an_update', 'From advantages to an update', '§9, §12',
        ('the clipped objective, averaging units and the length bias, one GRPO update walked '
         'tensor by tensor'),
        ("the clipped objective for A > 0 and A < 0 with DAPO's clip-higher, averaging units and "
         'the response-length bias Dr. GRPO removes, one GRPO update on a tiny GPT walked tensor '
         'by tensor and checked against the trainer'),
    ),
    Notebook(
        '06_baseline_bias_enumeration', 'Baseline bias by enumeration', '§12',
        'enumerate all 2⁸ groups to see which baseline is biased, then simulate',
        ('all 2⁸ groups enumerated: the full-group mean keeps 7/8 of the gradient, leave-one-out '
         'all of it; simulation with error bars; GRPO with two answers as an exact contrastive '
         "(DPO-like) pair; a correct answer's advantage under-rated on hard prompts and over-rated"
         ' on easy ones'),
    ),
    Notebook(
        '07_memory_and_rollout_budgets', 'Memory and rollout budgets', '§10–§11',
        'size PPO vs DPO memory; see rollout generation dwarf the update',
        ("PPO needs 269.2 GiB of model states to DPO's 134.6; rollout generation takes 39× the "
         'update; per-parameter counting for LoRA, smaller critics and scoring passes; '
         'calculators'),
    ),
    Notebook(
        '08_tiny_gpt_dpo', 'Tiny GPT: SFT then DPO', '§6, §8',
        'train a tiny GPT on a checkable task, then improve it with DPO',
        ('a tiny GPT learns a checkable task, then DPO on offline pairs with cached reference '
         'log-probs raises held-out accuracy'),
    ),
    Notebook(
        '09_tiny_gpt_grpo', 'Tiny GPT: the GRPO family', '§9, §11–§12, §15',
        ("online GRPO, RLOO and Dr. GRPO's advantage live on the same tiny GPT; DAPO with all four"
         " mechanisms and Dr. GRPO's constant unit live; GSPO and CISPO defined, measured beside μ"
         ' = 2 in the family benchmark (3 seeds)'),
        ("online GRPO, RLOO and Dr. GRPO's advantage live on the same model, with a live dashboard"
         ' and measured generation vs update time; DAPO with all four mechanisms (clip-higher at μ'
         " = 2, dynamic sampling, token mean, overlong shaping) and Dr. GRPO's constant unit live "
         'at the same optimiser steps; GSPO and CISPO defined, measured beside μ = 2 in the family'
         ' benchmark (3 seeds)'),
    ),
    Notebook(
        '10_the_kl_term', 'The KL term', '§9, §12, §17',
        ("see what each KL estimator's gradient pulls on, KL in the reward vs in the loss, π_old "
         'vs π_ref, sweep β on the tiny GPT'),
        ('k1/k2/k3 as values and as loss terms (in the loss k1 pulls on nothing, k3 on the forward'
         " KL); KL in the reward vs in the loss (GRPO's std turns a 0.01·KL difference into unit "
         'advantages); π_old vs π_ref; a β sweep on the tiny GPT (accuracy–KL frontier)'),
    ),
    Notebook(
        '11_reward_hacking', 'Reward hacking', '§15',
        'watch a loose verifier get exploited',
        ('a loose verifier gets exploited: the proxy reward rises while strict held-out accuracy '
         'falls'),
    ),
    Notebook(
        '12_the_rlhf_route', 'The RLHF route', '§3–§4, §10, §15',
        ('fit a reward model to noisy preferences, best-of-N and RL against it, PPO with a learned'
         ' critic'),
        ('a reward model from noisy preferences (accuracy against the noise ceiling, calibration),'
         ' best-of-N and RL against it (proxy vs gold over √KL), PPO with a learned critic vs GRPO'
         ' and RLOO'),
    ),
    Notebook(
        '13_the_passport', 'The passport', '§12, §17',
        'read a post-training run report field by field; what it must disclose',
        ('reading a post-training passport: its four groups and eight fields on worked run '
         'reports, why the averaging unit and zero-variance rule change a run, what a report '
         'leaves out and why behaviour cannot fill the gap'),
    ),
    Notebook(
        '14_rl_as_a_system', 'RL as a system', '§2, §11',
        ('overlap rollouts with updates: a rollout worker K steps behind, the behaviour '
         'correction, a mismatched sampler, the KV cache, dynamic sampling and an adaptive length,'
         ' measured'),
        ('the KV cache measured against no cache (same samples, CPU seconds); synchronous GRPO vs '
         'a rollout worker 1 and 4 steps behind, with and without the behaviour correction '
         'π_old/π_behaviour: accuracy, CPU seconds split into generation and update, mismatch KL '
         'and effective sample size; a deliberately mismatched sampler (`sampler_temperature`) at '
         'K = 0; dynamic sampling and an adaptive completion length (`adaptive_length_quantile`) '
         'live; the overlap bound from the measured split; prime-rl, AReaL, verl, TRL, NeMo RL and'
         ' PipelineRL knobs mapped to ours'),
    ),
    Notebook(
        '15_environments_and_tools', 'Environments and tools', '§16',
        ('an episode as reset/step with a calculator tool; which tokens the policy wrote; when '
         'GRPO keeps or drops a tool; a verifier it can exploit'),
        ('an episode as reset/step with data, harness, tools and verifier in one environment; a '
         'calculator tool on the addition task and the policy-token mask; tool use on carry vs '
         'no-carry prompts after SFT and GRPO, and when GRPO keeps or drops the tool; the '
         "environment tokens in the loss (the policy learns to write the tool's answer); a loose "
         "verifier exploited; the mapping to TRL's `environment_factory` and NeMo Gym"),
    ),
    Notebook(
        '16_recipes', 'Recipes', '§12, §15–§16',
        ("DeepSeek-R1's four stages and R1-Zero on the tiny GPT; RFT as the porous boundary; what "
         'RL can amplify from four starts'),
        ("post-training as a list of stages: DeepSeek-R1's four (cold-start SFT → GRPO → "
         'rejection-sampling fine-tuning → GRPO) run on the tiny GPT with pass@1, pass@8, the '
         "no-signal share of GRPO's groups and the KL of every stage; RFT's loss checked equal to "
         "SFT's (the porous boundary); R1-Zero from a random initialisation; what RL amplifies "
         'from four starts (random, a digit-text base, a cold start, the SFT policy)'),
    ),
    Notebook(
        '17_ai_feedback', 'AI feedback', '§15',
        ('a judge trained on written principles: its agreement, position and length biases; a '
         'reward model and RL on its labels; one principle changed'),
        ('a judge trained on a written constitution of checkable principles (Constitutional AI, '
         'RLAIF), measured against gold: agreement, position bias by the swap test (every pair in '
         'both orders), length bias; a reward model on its labels and PPO against it (proxy vs '
         'gold, the length bias handed on); one principle dropped and the position bias gone, '
         'measured'),
    ),
    Notebook(
        '18_graduating_to_trl', 'Graduating to TRL', '—',
        'the same recipes in Hugging Face TRL, on a real model on a GPU, on several GPUs',
        ("the same recipes in Hugging Face TRL: a course config bridged to TRL's configs (and what"
         " has no equivalent), TRL's `GRPOTrainer` and `DPOTrainer` beside `course_lib` on one SFT"
         ' start, the GRPO recipe on a real instruct model on a GPU, `accelerate` on several GPUs'),
    ),
    Notebook(
        '19_closing', 'Closing', '§2, §20',
        ('the history on one timeline with its sources, the takeaways, what each notebook showed, '
         'where to go next'),
        ("the methods on a timeline with their primary sources (the lecture's list, plus the "
         "course's additions), the lecture's takeaways recomputed and tied to the notebook that "
         'showed each, and where to go next: TRL and the production RL stacks'),
    ),
)

ASSIGNMENTS = (
    "**When to do the assignments.** The graded assignment `module14` has one notebook per"
    " question:"
    " Q1 after [Bradley–Terry](notebooks/01_bradley_terry.ipynb),"
    " Q2 after [DPO margins](notebooks/02_dpo_margins.ipynb),"
    " Q3 after [Baseline bias by enumeration](notebooks/06_baseline_bias_enumeration.ipynb)"
    " (it uses group baselines, the update and the enumeration),"
    " Q4 after [Memory and rollout budgets](notebooks/07_memory_and_rollout_budgets.ipynb),"
    " Q5 after [The passport](notebooks/13_the_passport.ipynb)."
    " The coding lab `lab14` (you write the pieces of the training loop and the grader trains the"
    " tiny GPT with them) comes after"
    " [Tiny GPT: the GRPO family](notebooks/09_tiny_gpt_grpo.ipynb),"
    " which is after group baselines and the tiny-GPT DPO run."
    " The systems assignment `systems14` grades the systems half:"
    " Q6 (stale rollouts) after [RL as a system](notebooks/14_rl_as_a_system.ipynb),"
    " Q7 (an episode with a tool) after [Environments and tools](notebooks/15_environments_and_tools.ipynb),"
    " Q8 (auditing a judge) after [AI feedback](notebooks/17_ai_feedback.ipynb)."
    " All three live in `exercises/` (see [the instructor's guide](docs/instructors.md))."
)


def _colab_badge(nb: Notebook, at: str) -> str:
    return f"[![Open in Colab][colab]]({colab_url(notebook_path(nb.stem))})"


COLUMNS = {
    "lecture": ("lecture § (pointer)", lambda nb, at: nb.lecture),
    "does": ("what you do there", lambda nb, at: nb.does),
    "teaches": ("what it teaches", lambda nb, at: nb.teaches),
    "colab": ("Colab", _colab_badge),
}
# the badge image, once under a table with a Colab column (a markdown reference: short rows)
BADGE_REFERENCE = f"[colab]: {BADGE}"
FOLDERS = ("", "notebooks", "docs")


def relative_links(text: str, at: str = "") -> str:
    """Links into ``notebooks/`` and ``docs/``, written from the root, as read from ``at``."""
    if at not in FOLDERS:
        raise ValueError(f"at must be one of {FOLDERS} (the folder the map is read in), got {at!r}")
    if not at:
        return text

    def rewrite(m: re.Match) -> str:
        folder, rest = m.group(1), m.group(2)
        return f"]({rest}" if folder == at else f"](../{folder}/{rest}"

    return re.sub(r"\]\((notebooks|docs)/([^)]*)", rewrite, text)


def table(columns: tuple[str, ...], at: str = "") -> str:
    """The map as a markdown table: the linked notebook, then ``columns`` (keys of ``COLUMNS``)."""
    unknown = [c for c in columns if c not in COLUMNS]
    if unknown or not columns:
        raise ValueError(f"columns must be a non-empty tuple of {sorted(COLUMNS)}, got {columns!r}")
    head = ["notebook", *(COLUMNS[c][0] for c in columns)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for nb in NOTEBOOKS:
        link = f"[{nb.label}]({notebook_path(nb.stem)})"
        cells = [link, *(COLUMNS[c][1](nb, at) for c in columns)]
        lines.append("| " + " | ".join(cells) + " |")
    if "colab" in columns:
        lines += ["", BADGE_REFERENCE]
    return relative_links("\n".join(lines), at) + "\n"


def assignments(at: str = "") -> str:
    """When to do the graded assignment's questions and the coding lab, as a markdown paragraph."""
    return relative_links(ASSIGNMENTS, at) + "\n"


def notebook_map() -> str:
    """Notebook 00's map: the lecture's sections and what you do there, then the assignments."""
    return table(("lecture", "does"), at="notebooks") + "\n" + assignments(at="notebooks")


BLOCKS = {
    "table": lambda: table(("does", "colab")),  # README.md
    "assignments": assignments,  # README.md
    "full": lambda: table(("lecture", "teaches"), at="docs"),  # docs/course-map.md
}
