"""course_lib: one home per formula for the Learning from Feedback course (Module 14).

Modules are named after the lecture's ideas:

- ``preference``  Bradley–Terry, the reward-model loss, DPO and its direct variants (§3, §5–§8)
- ``advantages``  group baselines: GRPO, Dr. GRPO, RLOO, zero-variance groups, baseline bias (§9, §12)
- ``policy_loss`` the PPO/GRPO clipped surrogate, aggregation units, KL estimators (§9, §12)
- ``kl``          the KL term exactly on a categorical policy: regularised optima, both directions,
                  the estimators' expected gradients in the loss and in the reward (§4, §6, §12)
- ``budgets``     persistent-state memory and rollout-vs-update time models (§10–§11)
- ``behaviour``   the behaviour correction π_old/π_behaviour of stale rollouts: truncated and
                  masked importance weights, the mismatch diagnostics (§11)

The tiny GPT's trainers: ``task`` and ``model`` (the world and the network), ``rollout``
(sampling, scoring, masks, log-probs), ``rewards`` (checkers or a reward model), ``trainer``
(the one loop every trainer runs through, and the registry of trainers), ``sft``, ``dpo``,
``grpo``, ``rft``, ``ppo``, ``reward_model`` (one trainer each), ``rollout_worker`` (GRPO's
asynchronous sampler process, ``max_staleness``), ``evaluation``, ``passport`` (§17), ``runtime``
(threads, checkpoints, metrics, Ctrl-C) and ``pipeline`` (a run end to end; the CLI in
``__main__`` only parses arguments for it). ``verdicts`` makes every sentence about an effect over
seeds ("on k of n seeds").
"""

__version__ = "0.1.0"
