"""PPO with a learned critic for the tiny GPT: per-token values, GAE(γ, λ), a clipped value loss.

Lecture §9 (the Part II overview: a baseline from a learned critic, PPO, or from the other samples
of a group, RLOO/GRPO), §10 (the critic is a second trainable model: ≈ 44% of PPO's persistent
model states in the budgets notebook), §13 (the RLHF pipeline). One step:

1. draw ``batch_prompts`` fresh prompts, sample ``num_generations`` completions each (the same
   number of completions per step as GRPO's B·G when ``batch_prompts·num_generations`` match);
2. score each completion once with the reward (the strict checker, or a reward model);
3. per-token rewards: the score on the completion's last token, minus ``kl_coef`` times the
   per-token k1 estimate of KL to the frozen reference on every token when ``kl_coef > 0``
   (KL *in the reward*, InstructGPT style — GRPO puts it in the loss instead);
4. the critic gives V(s_t) for every completion position; ``advantages.gae`` turns rewards and values into
   advantages Â_t and returns R_t = Â_t + V_t; advantages are whitened over the batch (TRL);
5. ``num_ppo_epochs`` passes over the batch: the policy maximises ``clipped_surrogate`` with the
   per-token advantages; the critic minimises ``policy_loss.clipped_value_loss`` against the returns, with
   its own optimizer; both averaged per token with ``aggregate``.

Names follow TRL's ``PPOConfig``: ``gamma``, ``lam``, ``cliprange``, ``cliprange_value``,
``kl_coef``, ``num_ppo_epochs``, ``whiten_rewards`` (not used here).

No ``vf_coef``. TRL's PPO sums ``pg_loss + vf_coef · vf_loss`` into one AdamW over policy and value
model. Here, as in TRL, the value model is a separate network, so no parameter receives gradient from
both losses, and Adam divides each parameter's step by its own running gradient scale: a constant
weight on the value loss cancels up to Adam's ε (a 10× weight changed the critic's step by 0.8% of
its size in ``tests/test_ppo.py``; under plain SGD it would be 900%). The knob that sets the critic's step is its
learning rate, ``critic_learning_rate``, so that is the option; a weight that does nothing is not
offered (``tests/test_ppo.py`` checks the cancellation).

Simplifications, said out loud:
- The critic is a separate GPT-2 (``GPT2ForSequenceClassification``, one output, the class TRL
  uses for its value model), applied to *every* position's hidden state; it starts from the
  SFT policy's transformer (or from a reward model) with a fresh head. No shared trunk.
- One minibatch per epoch (the whole batch), no early stopping on KL, no adaptive KL controller.
- The GAE recursion assumes each completion's mask is a contiguous run starting at the first
  completion position (true for our sampler: tokens up to and including ``<eos>``).
- No environments (``task.env``): ``train ppo --env`` is refused (its ``register`` line's ``env=``). An episode's
  policy tokens are not one contiguous run (the environment writes between turns), so GAE would have
  to run over the policy's positions only, with the critic's value at the last policy token before an
  observation bootstrapping from the first one after it. GRPO needs none of that: one advantage per
  episode, broadcast over the policy mask.
"""

from __future__ import annotations

import copy
import time

import torch

from course_lib.formulas.advantages import gae, whiten
from course_lib.formulas.policy_loss import aggregate, clipped_surrogate, clipped_value_loss, kl_estimate
from course_lib.tinygpt.evaluation import evaluate
from course_lib.tinygpt.model import (
    attention_pattern,
    build_scalar_model,
    completion_logprobs,
    model_config_of,
    position_ids,
)
from course_lib.tinygpt.rewards import REWARD_MODEL_PREFIX, resolve_reward, reward_granularity, reward_source
from course_lib.tinygpt.rollout import sample_groups
from course_lib.tinygpt.runtime import autocast, make_optimizer, optimizer_step, read_metrics, set_threads, to_device
from course_lib.tinygpt.task import AdditionTask
from course_lib.trainers.configs import PPOConfig
from course_lib.trainers.reward_model import passport_fields, read_info
from course_lib.trainers.trainer import ONLINE_STALENESS, StageContext, StageResult, TrainContext, register, train_loop
from course_lib.trainers.utilisation import ppo_run_flops


# ---- the critic --------------------------------------------------------------------------------------
def build_critic(policy, tokenizer, source=None):
    """A value model: GPT-2 with a one-output head, transformer copied from ``source`` or the policy."""
    critic = build_scalar_model(model_config_of(policy), tokenizer, policy)
    if source is not None:
        critic.load_state_dict(source.state_dict())
    return critic.to(next(policy.parameters()).device)


def token_values(critic, input_ids, attention_mask, *, validate: bool = True) -> torch.Tensor:
    """V(s_t) at every position of ``(N, L)`` inputs, aligned like ``completion_logprobs``: ``(N, L − 1)``.

    Entry t − 1 is the value of the state that predicts token t (the prefix up to t − 1). Values
    at padding positions are not meaningful (right-padded rows run with no mask:
    ``model.attention_pattern``); ``validate=False`` assumes right padding (no host read).
    """
    hidden = critic.transformer(input_ids=input_ids,
                                attention_mask=attention_pattern(attention_mask, validate=validate),
                                position_ids=position_ids(attention_mask), use_cache=False).last_hidden_state
    return critic.score(hidden).squeeze(-1)[:, :-1].float()


def persistent_bytes(module: torch.nn.Module, optimizer: torch.optim.Optimizer | None = None) -> dict:
    """Bytes actually held by a model's weights, gradients and optimizer state (measured on tensors)."""
    weights = sum(p.numel() * p.element_size() for p in module.parameters())
    grads = sum(p.grad.numel() * p.grad.element_size() for p in module.parameters() if p.grad is not None)
    opt = 0
    if optimizer is not None:
        for state in optimizer.state.values():
            opt += sum(v.numel() * v.element_size() for v in state.values() if isinstance(v, torch.Tensor))
    return {"weights": weights, "grads": grads, "optimizer": opt, "total": weights + grads + opt}


# ---- one PPO step ------------------------------------------------------------------------------------
def collect(policy, task: AdditionTask, cfg: PPOConfig, reward_fn, generator: torch.Generator, gold_fn=None) -> dict:
    device = next(policy.parameters()).device
    pairs = task.sample_pairs(cfg.batch_prompts, generator)
    roll = sample_groups(policy, task, pairs, num_generations=cfg.num_generations,
                         max_completion_length=cfg.max_completion_length, temperature=cfg.temperature)
    repeated = [p for p in pairs for _ in range(cfg.num_generations)]
    t0 = time.perf_counter()
    scores = to_device(reward_fn(repeated, roll.completions).float(), device)
    out = {"roll": roll, "scores": scores, "score_seconds": time.perf_counter() - t0}
    if gold_fn is not None:  # a second opinion on the very same samples (never used for training)
        out["gold_mean"] = gold_fn(repeated, roll.completions).float().mean()
    return out


def ppo_update(policy, critic, ref_model, opt, critic_opt, roll, scores: torch.Tensor, cfg: PPOConfig, *,
               prompt_length: int, max_grad_norm: float = 1.0) -> dict:
    """Advantages from GAE on one rollout, then ``num_ppo_epochs`` clipped updates of policy and critic."""
    device = next(policy.parameters()).device
    ids, attn, cmask = roll.input_ids, roll.attention_mask, roll.completion_mask
    sl = slice(prompt_length - 1, None)
    T = cfg.temperature
    with torch.no_grad(), autocast(device):
        old_logps, mask = completion_logprobs(policy, ids, attn, cmask, temperature=T, validate=False)
        old_logps, mask = old_logps[:, sl].float(), mask[:, sl]
        old_values = token_values(critic, ids, attn, validate=False)[:, sl] * mask
        rewards = torch.zeros_like(old_logps)
        last = mask.sum(-1).long() - 1  # index of each completion's last real token
        rewards[torch.arange(len(last), device=device), last] = scores
        kl_tok = None
        if ref_model is not None:
            ref_logps = completion_logprobs(ref_model, ids, attn, cmask, temperature=T,
                                            validate=False)[0][:, sl].float()
            kl_tok = kl_estimate(old_logps, ref_logps, estimator="k1", validate=False) * mask
            if cfg.kl_coef > 0:
                rewards = rewards - cfg.kl_coef * kl_tok
        advantages, returns = gae(rewards, old_values, mask, gamma=cfg.gamma, lam=cfg.lam)
        advantages = whiten(advantages, mask)
    pol_losses, val_losses = [], []
    for _ in range(cfg.num_ppo_epochs):
        with autocast(device):
            logps, _, ent = completion_logprobs(policy, ids, attn, cmask, with_entropy=True, temperature=T,
                                                validate=False)
            values = token_values(critic, ids, attn, validate=False)[:, sl]
        logps, ent = logps[:, sl], ent[:, sl]
        ratio = torch.exp(logps - old_logps)
        objective, is_clipped = clipped_surrogate(ratio, advantages, eps_low=cfg.cliprange, eps_high=cfg.cliprange,
                                                  return_clipped=True, validate=False)
        policy_loss = -aggregate(objective, mask, unit="token_mean", validate=False)
        v_tok, v_clipped = clipped_value_loss(values, old_values, returns, cfg.cliprange_value)
        value_loss = aggregate(v_tok, mask, unit="token_mean", validate=False)
        # separate models: each optimizer sees only its own loss
        optimizer_step(policy_loss + value_loss, max_grad_norm, (policy, opt), (critic, critic_opt))
        pol_losses.append(policy_loss.detach())
        val_losses.append(value_loss.detach())
    with torch.no_grad():
        n_tok = mask.sum()
        ret_last = returns[:, 0]
        var_ret = ret_last.var()
        # no host read here: the step's numbers are read once, together (runtime.read_metrics)
        explained = torch.where(var_ret > 0, 1 - (ret_last - old_values[:, 0]).var() / var_ret, float("nan"))
        return {
            "loss": torch.stack(pol_losses).mean(),
            "value_loss": torch.stack(val_losses).mean(),
            "clip_fraction": (is_clipped.float() * mask).sum() / n_tok,
            "value_clip_fraction": (v_clipped.float() * mask).sum() / n_tok,
            "entropy": (ent.detach() * mask).sum() / n_tok,
            "kl_sequence": None if kl_tok is None else kl_tok.sum(-1).mean(),
            "value_mean": (old_values * mask).sum() / n_tok,
            "explained_variance": explained,
        }


def train_ppo(
    policy,
    critic,
    task: AdditionTask,
    cfg: PPOConfig,
    reward_fn,
    ctx: TrainContext | None = None,
    *,
    generator: torch.Generator,
    reference_state: dict | None = None,
    eval_fn=None,
    gold_fn=None,
    track_kl: bool = False,
) -> dict:
    """PPO from the current weights of ``policy`` (normally SFT), with ``critic`` as the learned baseline.

    ``reward_fn(pairs, completions) -> FloatTensor[N]`` scores completions (the strict checker or
    a reward model). ``gold_fn`` (same signature) is only logged, as ``gold_mean`` on the same
    samples: the truth next to the proxy. The sampled KL to the starting policy (sum of k1 over a
    completion's tokens, mean over completions) is logged as ``kl_sequence`` (GRPO's ``kl`` is another
    quantity: k3 averaged per token) whenever a reference exists: ``kl_coef > 0``, or ``track_kl=True``;
    the reference is ``reference_state`` when given, else the starting weights. ``ctx.state`` (a
    checkpoint: both optimizers and the critic's weights) resumes; ``ctx.checkpoint(step, {"optimizer",
    "critic", "critic_optimizer"}, seconds)`` is called every ``ctx.checkpoint_every`` steps, at the end
    and on a stop request. Returns ``{"steps", "rl_seconds", "memory"}``; ``memory`` holds the
    measured bytes of the policy's and the critic's weights, gradients and AdamW states after
    training, and of the frozen reference when one is kept.
    """
    ctx = ctx if ctx is not None else TrainContext()
    cfg.check()
    state = ctx.state
    set_threads(ctx.threads)
    device = next(policy.parameters()).device
    ref_model = None
    if cfg.kl_coef > 0 or track_kl:
        ref_model = copy.deepcopy(policy).eval().requires_grad_(False)
        if reference_state is not None:
            ref_model.load_state_dict(reference_state)
    opt = make_optimizer(policy, cfg.learning_rate)
    critic_opt = make_optimizer(critic, cfg.critic_learning_rate)
    if state is not None:
        critic.load_state_dict(state["critic"])
        opt.load_state_dict(state["optimizer"])
        critic_opt.load_state_dict(state["critic_optimizer"])
    eval_fn = eval_fn or (lambda m: evaluate(m, task, max_completion_length=cfg.max_completion_length))

    def one_step(step: int) -> dict:
        batch = collect(policy, task, cfg, reward_fn, generator, gold_fn)
        roll = batch["roll"]
        t1 = time.perf_counter()
        policy.train()
        critic.train()
        upd = ppo_update(policy, critic, ref_model, opt, critic_opt, roll, batch["scores"], cfg,
                         prompt_length=task.prompt_length, max_grad_norm=ctx.max_grad_norm)
        policy.eval()
        critic.eval()
        if device.type == "cuda":
            torch.cuda.synchronize()
        return read_metrics({"reward_mean": batch["scores"].mean(), **upd,
                             **({"gold_mean": batch["gold_mean"]} if "gold_mean" in batch else {}),
                             "completion_length": roll.completion_mask.sum(-1).float().mean(),
                             "truncated_rate": roll.truncated.float().mean(), "gen_seconds": roll.seconds,
                             "update_seconds": time.perf_counter() - t1})

    def resumable() -> dict:
        return {"optimizer": opt.state_dict(), "critic": critic.state_dict(),
                "critic_optimizer": critic_opt.state_dict()}

    done = train_loop("ppo", one_step, ctx, total=cfg.steps if ctx.steps is None else ctx.steps,
                      state_dict=resumable, eval_fn=lambda: eval_fn(policy), eval_every=cfg.eval_every,
                      seconds_key="rl_seconds",
                      postfix=lambda row: {"acc": f"{row['accuracy']:.2f}", "reward": f"{row['reward_mean']:.2f}"})
    memory = {"policy": persistent_bytes(policy, opt), "critic": persistent_bytes(critic, critic_opt)}
    if ref_model is not None:
        memory["reference"] = persistent_bytes(ref_model)
    return {"steps": done["steps"], "rl_seconds": done["seconds"], "memory": memory}


def critic_passport(cfg: PPOConfig, memory: dict | None = None) -> dict:
    """The critic's passport entry (§17): what it is, how it learns, and its measured memory."""
    out = {
        "model": "separate GPT2ForSequenceClassification(num_labels=1) applied at every token (TRL's value model), "
                 "transformer initialised from the SFT policy, fresh head",
        "advantages": f"GAE(gamma={cfg.gamma}, lambda={cfg.lam}) on per-token rewards, whitened over the batch",
        "value_loss": f"clipped, cliprange_value={cfg.cliprange_value}, own AdamW lr={cfg.critic_learning_rate}",
        "kl": (f"in the reward, per token, k1, kl_coef={cfg.kl_coef}" if cfg.kl_coef > 0
               else "none (kl_coef=0, no reference model)"),
    }
    if memory is not None:
        c, p = memory["critic"]["total"], memory["policy"]["total"]
        out["memory"] = (f"critic {c / 2**20:.2f} MiB measured (weights, grads, AdamW) next to the policy's "
                         f"{p / 2**20:.2f} MiB")
    return out


def ppo_passport(cfg, info: dict) -> dict:
    """PPO's passport sections (``course_lib.run.passport``); ``info["memory"]``: ``train_ppo``'s measured bytes."""
    p = cfg.ppo
    info["systems"]["staleness"] = ONLINE_STALENESS
    out = dict(
        data_and_policy={"examples": f"online trajectories: {p.batch_prompts} prompts × {p.num_generations} "
                                     f"completion(s) per step",
                         "generated_by": f"the current actor, temperature {p.temperature}",
                         "reuse": f"each rollout used for {p.num_ppo_epochs} PPO epoch(s), then discarded",
                         "overlap": "training prompts drawn fresh; held-out prompts never drawn"},
        reward_contract={"source": reward_source(p.reward),
                         "granularity": reward_granularity(p.reward) + ", on its last token",
                         "truncation": "a truncated completion gets what the reward says (strict: 0)"},
        optimisation={"algorithm": "PPO, on-policy, learned critic",
                      "advantage": f"GAE(gamma={p.gamma}, lambda={p.lam})",
                      "roles": ["policy", "critic (trained)"]
                      + (["reference (frozen SFT copy)"] if p.kl_coef > 0 else []),
                      "kl": (f"in the reward, per token, k1, kl_coef={p.kl_coef}" if p.kl_coef > 0
                             else "none (kl_coef=0)"),
                      "averaging_unit": "token_mean",
                      "clip": f"cliprange={p.cliprange}, cliprange_value={p.cliprange_value}"},
        critic=critic_passport(p, info["memory"]),
    )
    if info["reward_model_info"] is not None:
        out["reward_model"] = passport_fields(info["reward_model_info"])
    return out


@register("ppo", PPOConfig, passport=ppo_passport, flops=ppo_run_flops,
          trl="no TRL row: TRL 1.16 ships no PPO trainer (its online trainers are GRPO and RLOO, critic-free)",
          env="PPO's critic and GAE (course_lib.trainers.ppo) read every completion position as a policy state, one "
              "contiguous run from the prompt; an episode interleaves the environment's tokens, whose values and "
              "advantages would have to be skipped (GAE over the policy's tokens only, the critic bootstrapping "
              "across each observation). Not implemented: use grpo with --env",
          completion_length=lambda cfg: cfg.ppo.max_completion_length,
          gpu=dict(steps=200, batch_prompts=1024, max_completion_length=7, eval_every=20),  # 1024 × 1 = GRPO's 128 × 8
          test=dict(steps=4, batch_prompts=16, max_completion_length=4, eval_every=2))
def ppo_stage(ctx: StageContext) -> StageResult:
    """``train ppo``: PPO from the SFT policy with a critic initialised from it; reference = the SFT weights."""
    spec = ctx.cfg.ppo.reward
    reward_fn = resolve_reward(spec, ctx.task)  # a bad rm:DIR fails here, with its reason
    sampling = torch.get_rng_state()
    critic = build_critic(ctx.model, ctx.task.tokenizer)
    if ctx.train.state is not None:  # a resumed run loads the critic: its fresh head must not move the sampling RNG
        torch.set_rng_state(sampling)
    res = train_ppo(ctx.model, critic, ctx.task, ctx.cfg.ppo, reward_fn, ctx.train,
                    generator=ctx.generator, reference_state=ctx.sft_weights)
    info = read_info(spec[len(REWARD_MODEL_PREFIX):]) if spec.startswith(REWARD_MODEL_PREFIX) else None
    return StageResult(steps=res["steps"], rl_seconds=res["rl_seconds"], summary={"memory": res["memory"]},
                       reward_model_info=info)
