"""The primary sources the course cites: one home for every reference, its link and its date.

Lecture §2 (the history) and §20 (its list of primary sources). A notebook cites a method where it
first uses it with ``cite("dpo")`` (a Markdown link with authors and year); the closing notebook draws
the timeline from the same entries. Dates of arXiv papers come from their identifiers (``2305.18290``
is May 2023: the first version's month), so no date is typed twice.

Simplifications, said out loud:
- One entry per idea, not per paper version; a software stack is dated by the year the lecture
  places it in, and marked ``kind="software"``.
- ``lecture=True`` marks the nineteen sources the lecture lists; the others are the course's own
  additions for methods it implements or names (Bradley–Terry, REINFORCE, PPO, GAE, best-of-N,
  over-optimisation, rejection-sampling fine-tuning, the KL estimators, GSPO, CISPO, TR-DPO, TRL, RLAIF's judge
  and its measured biases) and for claims its notebooks test (STaR, what RL amplifies in a base model).
- A source without an arXiv identifier links to its DOI (or its repository) and states its year.
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
    "bradley_terry": Source("Bradley and Terry", "Rank Analysis of Incomplete Block Designs: I. The Method of Paired "
                            "Comparisons", "https://doi.org/10.2307/2334029", "a win probability σ(score gap)",
                            lecture=False, year=1952),
    "williams1992": Source("Williams", "Simple Statistical Gradient-Following Algorithms for Connectionist "
                           "Reinforcement Learning (REINFORCE)", "https://doi.org/10.1007/BF00992696",
                           "the score-function gradient and its baselines", lecture=False, year=1992),
    "christiano2017": Source("Christiano et al.", "Deep Reinforcement Learning from Human Preferences",
                             "https://arxiv.org/abs/1706.03741", "a reward model from human comparisons"),
    "ppo": Source("Schulman et al.", "Proximal Policy Optimization Algorithms", "https://arxiv.org/abs/1707.06347",
                  "the clipped surrogate", lecture=False),
    "gae": Source("Schulman et al.", "High-Dimensional Continuous Control Using Generalized Advantage Estimation",
                  "https://arxiv.org/abs/1506.02438", "GAE(γ, λ) for the critic's advantages", lecture=False),
    "stiennon2020": Source("Stiennon et al.", "Learning to Summarize from Human Feedback",
                           "https://arxiv.org/abs/2009.01325",
                           "best-of-N against a reward model, and its KL log N − (N − 1)/N", lecture=False),
    "instructgpt": Source("Ouyang et al.", "Training Language Models to Follow Instructions with Human Feedback",
                          "https://arxiv.org/abs/2203.02155", "SFT → reward model → PPO under a KL term"),
    "constitutional_ai": Source("Bai et al.", "Constitutional AI: Harmlessness from AI Feedback",
                                "https://arxiv.org/abs/2212.08073", "AI feedback from written principles"),
    "gao2022": Source("Gao et al.", "Scaling Laws for Reward Model Overoptimization",
                      "https://arxiv.org/abs/2210.10760",
                      "the proxy rises while the gold reward peaks, then falls", lecture=False),
    "rft": Source("Yuan et al.",
                  "Scaling Relationship on Learning Mathematical Reasoning with Large Language Models (RFT)",
                  "https://arxiv.org/abs/2308.01825", "rejection-sampling fine-tuning on checked samples",
                  lecture=False),
    "llm_judge": Source("Zheng et al.", "Judging LLM-as-a-Judge with MT-Bench and Chatbot Arena",
                        "https://arxiv.org/abs/2306.05685",
                        "an AI judge's position and verbosity biases; the swap test",
                        lecture=False),
    "rlaif": Source("Lee et al.",
                    "RLAIF vs. RLHF: Scaling Reinforcement Learning from Human Feedback with AI Feedback",
                    "https://arxiv.org/abs/2309.00267", "preference labels from an AI judge, both orders averaged",
                    lecture=False),
    "dpo": Source("Rafailov et al.", "Direct Preference Optimization", "https://arxiv.org/abs/2305.18290",
                  "the reward as a policy ratio; a pairwise loss, no RL loop"),
    "ipo": Source("Azar et al.",
                  "A General Theoretical Paradigm to Understand Learning from Human Preferences (ΨPO / IPO)",
                  "https://arxiv.org/abs/2310.12036", "a squared margin target instead of a sigmoid"),
    "kto": Source("Ethayarajh et al.", "KTO: Model Alignment as Prospect Theoretic Optimization",
                  "https://arxiv.org/abs/2402.01306", "unpaired desirable / undesirable labels"),
    "deepseekmath": Source("Shao et al.", "DeepSeekMath (GRPO)", "https://arxiv.org/abs/2402.03300",
                           "group-relative advantages, no critic"),
    "rloo": Source("Ahmadian et al.", "Back to Basics: Revisiting REINFORCE Style Optimization (RLOO)",
                   "https://arxiv.org/abs/2402.14740", "the leave-one-out baseline"),
    "orpo": Source("Hong et al.", "ORPO: Monolithic Preference Optimization without Reference Model",
                   "https://arxiv.org/abs/2403.07691", "SFT and an odds-ratio preference term in one stage"),
    "tr_dpo": Source("Gorbatovski et al.", "Learn Your Reference Model for Real Good Alignment (TR-DPO)",
                     "https://arxiv.org/abs/2404.09656", "refreshing the reference model during training",
                     lecture=False),
    "simpo": Source("Meng et al.", "SimPO: Simple Preference Optimization with a Reference-Free Reward",
                    "https://arxiv.org/abs/2405.14734", "length-normalised, reference-free margins"),
    "tulu3": Source("Lambert et al.", "Tülu 3: Pushing Frontiers in Open Language Model Post-Training",
                    "https://arxiv.org/abs/2411.15124", "an open multi-stage recipe with verifiable rewards"),
    "deepseek_r1": Source("Guo et al.", "DeepSeek-R1", "https://arxiv.org/abs/2501.12948",
                          "R1-Zero and R1's four stages"),
    "star": Source("Zelikman et al.", "STaR: Bootstrapping Reasoning With Reasoning",
                   "https://arxiv.org/abs/2203.14465",
                   "fine-tune on the model's own checked answers, repeat", lecture=False),
    "yue2025": Source("Yue et al.", "Does Reinforcement Learning Really Incentivize Reasoning Capacity in LLMs Beyond "
                      "the Base Model?", "https://arxiv.org/abs/2504.13837",
                      "RL raises pass@1 within the base model's pass@k", lecture=False),
    "gandhi2025": Source("Gandhi et al.", "Cognitive Behaviors that Enable Self-Improving Reasoners",
                         "https://arxiv.org/abs/2503.01307", "the base model decides whether RL self-improves",
                         lecture=False),
    "dapo": Source("Yu et al.", "DAPO: An Open-Source LLM Reinforcement Learning System at Scale",
                   "https://arxiv.org/abs/2503.14476", "clip-higher, dynamic sampling, token loss, overlong shaping"),
    "dr_grpo": Source("Liu et al.", "Understanding R1-Zero-Like Training (Dr. GRPO)",
                      "https://arxiv.org/abs/2503.20783",
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
    "trl": Source("von Werra et al.", "TRL: Transformer Reinforcement Learning", "https://github.com/huggingface/trl",
                  "the trainers whose option names the course follows", lecture=False, kind="software", year=2020),
    "verl": Source("verl", "verl: Volcano Engine Reinforcement Learning for LLMs",
                   "https://github.com/verl-project/verl",
                   "rollout workers, asynchronous and one-step-off training", kind="software", year=2026),
    "nemo_rl": Source("NVIDIA", "NeMo RL", "https://github.com/NVIDIA-NeMo/RL",
                      "trajectory age limits, multi-node RL", kind="software", year=2026),
    "areal": Source("Fu et al.",
                    "AReaL: A Large-Scale Asynchronous Reinforcement Learning System for Language Reasoning",
                    "https://arxiv.org/abs/2505.24298", "fully asynchronous rollouts with bounded staleness "
                    "(max_head_offpolicyness)", lecture=False),
    "pipelinerl": Source("Piché et al.",
                         "PipelineRL: Faster On-policy Reinforcement Learning for Long Sequence Generation",
                         "https://arxiv.org/abs/2509.19128", "in-flight weight updates during generation",
                         lecture=False),
    "prime_rl": Source("Prime Intellect", "prime-rl: asynchronous RL at scale",
                       "https://github.com/PrimeIntellect-ai/prime-rl",
                       "an orchestrator that lets rollouts run max_async_level steps ahead", lecture=False,
                       kind="software", year=2025),
    "nemo_gym": Source("NVIDIA", "NeMo Gym", "https://docs.nvidia.com/nemo/gym",
                       "environments as data + harness + tools + verifier", kind="software", year=2026),
    "openenv": Source("Meta PyTorch and Hugging Face", "OpenEnv", "https://github.com/meta-pytorch/OpenEnv",
                      "an environment as reset() / step() behind one interface", lecture=False, kind="software",
                      year=2025),
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

