"""The primary sources the course cites: one home for every reference, its link and its date.

Lecture §2 (the history) and §20 (its list of primary sources). A notebook cites a method where it
first uses it with ``cite("dpo")`` (a Markdown link with authors and year); the closing notebook draws
the timeline from the same entries. Dates of arXiv papers come from their identifiers (``2305.18290``
is May 2023: the first version's month), so no date is typed twice.

Simplifications, said out loud:
- One entry per idea, not per paper version; a software stack is dated by the year the lecture
  places it in, and marked ``kind="software"``.
- ``lecture=True`` marks the nineteen sources the lecture lists; the others are the course's own
  additions for methods it implements (PPO, GAE, the KL estimators, GSPO, CISPO, RLAIF's judge and its
  measured biases).
"""

from __future__ import annotations

from typing import NamedTuple


class Source(NamedTuple):
    authors: str
    title: str
    url: str
    idea: str  # what the course takes from it, in a few words
    lecture: bool = True
    kind: str = "paper"  # or "software", "note"
    year: int | None = None  # only where the url carries no arXiv identifier


SOURCES: dict[str, Source] = {
    "christiano2017": Source("Christiano et al.", "Deep Reinforcement Learning from Human Preferences",
                             "https://arxiv.org/abs/1706.03741", "a reward model from human comparisons"),
    "ppo": Source("Schulman et al.", "Proximal Policy Optimization Algorithms", "https://arxiv.org/abs/1707.06347",
                  "the clipped surrogate", lecture=False),
    "gae": Source("Schulman et al.", "High-Dimensional Continuous Control Using Generalized Advantage Estimation",
                  "https://arxiv.org/abs/1506.02438", "GAE(γ, λ) for the critic's advantages", lecture=False),
    "instructgpt": Source("Ouyang et al.", "Training Language Models to Follow Instructions with Human Feedback",
                          "https://arxiv.org/abs/2203.02155", "SFT → reward model → PPO under a KL term"),
    "constitutional_ai": Source("Bai et al.", "Constitutional AI: Harmlessness from AI Feedback",
                                "https://arxiv.org/abs/2212.08073", "AI feedback from written principles"),
    "llm_judge": Source("Zheng et al.", "Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena",
                        "https://arxiv.org/abs/2306.05685", "an AI judge's position and verbosity biases; the swap test",
                        lecture=False),
    "rlaif": Source("Lee et al.", "RLAIF vs. RLHF: Scaling Reinforcement Learning from Human Feedback with AI Feedback",
                    "https://arxiv.org/abs/2309.00267", "preference labels from an AI judge, both orders averaged",
                    lecture=False),
    "dpo": Source("Rafailov et al.", "Direct Preference Optimization", "https://arxiv.org/abs/2305.18290",
                  "the reward as a policy ratio; a pairwise loss, no RL loop"),
    "ipo": Source("Azar et al.", "A General Theoretical Paradigm to Understand Learning from Human Preferences (ΨPO / IPO)",
                  "https://arxiv.org/abs/2310.12036", "a squared margin target instead of a sigmoid"),
    "kto": Source("Ethayarajh et al.", "KTO: Model Alignment as Prospect Theoretic Optimization",
                  "https://arxiv.org/abs/2402.01306", "unpaired desirable / undesirable labels"),
    "deepseekmath": Source("Shao et al.", "DeepSeekMath (GRPO)", "https://arxiv.org/abs/2402.03300",
                           "group-relative advantages, no critic"),
    "rloo": Source("Ahmadian et al.", "Back to Basics: Revisiting REINFORCE Style Optimization (RLOO)",
                   "https://arxiv.org/abs/2402.14740", "the leave-one-out baseline"),
    "orpo": Source("Hong et al.", "ORPO: Monolithic Preference Optimization without Reference Model",
                   "https://arxiv.org/abs/2403.07691", "SFT and an odds-ratio preference term in one stage"),
    "simpo": Source("Meng et al.", "SimPO: Simple Preference Optimization with a Reference-Free Reward",
                    "https://arxiv.org/abs/2405.14734", "length-normalised, reference-free margins"),
    "tulu3": Source("Lambert et al.", "Tülu 3: Pushing Frontiers in Open Language Model Post-Training",
                    "https://arxiv.org/abs/2411.15124", "an open multi-stage recipe with verifiable rewards"),
    "deepseek_r1": Source("Guo et al.", "DeepSeek-R1", "https://arxiv.org/abs/2501.12948",
                          "R1-Zero and R1's four stages"),
    "dapo": Source("Yu et al.", "DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
                   "https://arxiv.org/abs/2503.14476", "clip-higher, dynamic sampling, token loss, overlong shaping"),
    "dr_grpo": Source("Liu et al.", "Understanding R1-Zero-Like Training (Dr. GRPO)", "https://arxiv.org/abs/2503.20783",
                      "removing length and std normalisation"),
    "cispo": Source("MiniMax", "MiniMax-M1 (CISPO)", "https://arxiv.org/abs/2506.13585",
                    "clip the importance weight, keep every token's gradient", lecture=False),
    "gspo": Source("Zheng et al.", "Group Sequence Policy Optimization", "https://arxiv.org/abs/2507.18071",
                   "one length-normalised ratio per completion", lecture=False),
    "it_takes_two": Source("Wu et al.", "It Takes Two: Your GRPO Is Secretly DPO", "https://arxiv.org/abs/2510.00977",
                           "GRPO with two answers as a contrastive pair"),
    "biased_advantage": Source("Yang et al.", "Your Group-Relative Advantage Is Biased",
                               "https://arxiv.org/abs/2601.08521", "difficulty-dependent advantage bias"),
    "kl_approx": Source("Schulman", "Approximating KL Divergence", "http://joschu.net/blog/kl-approx.html",
                        "the k1 / k2 / k3 estimators", lecture=False, kind="note", year=2020),
    "verl": Source("verl", "verl: Volcano Engine Reinforcement Learning for LLMs", "https://github.com/verl-project/verl",
                   "rollout workers, asynchronous and one-step-off training", kind="software", year=2026),
    "nemo_rl": Source("NVIDIA", "NeMo RL", "https://github.com/NVIDIA-NeMo/RL",
                      "trajectory age limits, multi-node RL", kind="software", year=2026),
    "nemo_gym": Source("NVIDIA", "NeMo Gym", "https://docs.nvidia.com/nemo/gym",
                       "environments as data + harness + tools + verifier", kind="software", year=2026),
}


def _source(key: str) -> Source:
    if key not in SOURCES:
        raise KeyError(f"no source {key!r}; known: {', '.join(sorted(SOURCES))}")
    return SOURCES[key]


def date(key: str) -> tuple[int, int]:
    """(year, month) of a source: from its arXiv identifier (YYMM.NNNNN), else its stated year (month 0)."""
    source = _source(key)
    if "arxiv.org/abs/" in source.url:
        yymm = source.url.rsplit("/", 1)[1].split(".")[0]
        return 2000 + int(yymm[:2]), int(yymm[2:])
    return source.year, 0


def cite(key: str) -> str:
    """A Markdown citation for a notebook: ``[Rafailov et al. 2023](https://arxiv.org/abs/2305.18290)``."""
    source = _source(key)
    return f"[{source.authors} {date(key)[0]}]({source.url})"


def timeline() -> list[tuple[tuple[int, int], str]]:
    """Every source in date order: ((year, month), key); a source dated by its year alone (month 0)
    sorts in the middle of that year."""
    return sorted(((date(key), key) for key in SOURCES), key=lambda e: (e[0][0], e[0][1] or 6.5, e[1]))

