"""Online GRPO / RLOO / Dr. GRPO / DAPO options for the tiny GPT, and the run's passport.

Lecture §9 (group baselines, the clipped surrogate), §11 (generation versus update time),
§12 (clip-higher, dynamic sampling, token-level loss, Dr. GRPO), §15 (the checker is the
reward), §17 (the passport). One step:

1. draw B fresh prompts; sample G completions each with the KV cache (``generate``);
2. score every completion with the checker (reward 1 or 0, once per completion);
3. zero-variance groups: ``keep`` (zero advantage), ``drop``, or ``resample`` — draw more
   prompts until B informative groups are found (DAPO's dynamic sampling), at most
   ``max_resample_rounds`` extra rounds;
4. advantages from ``course_lib.advantages`` (``grpo`` with population std, ``rloo``,
   ``dr_grpo``), one per completion, applied to each of its tokens;
5. μ = ``num_iterations`` inner epochs: ratio ρ = π_θ/π_old against log-probs frozen right
   after sampling, ``clipped_surrogate`` with ε_low/ε_high, minus β·KL to a frozen reference
   (``kl_estimate``, in the loss, per token) when β > 0, averaged with ``aggregate`` over the
   chosen unit; loss = −objective.

Simplifications, said out loud (nanochat-style):
- Synchronous and colocated: the same model generates, then trains; rollouts are never stale
  by more than the μ inner epochs on one batch. No value network, no reward model.
- With μ = 1 the old log-probs *are* the current ones (detached), as in TRL: ρ = 1 and the
  clip is inactive on the first and only pass; it matters only for μ > 1.
- No overlong reward shaping: a completion without ``<eos>`` is truncated and gets what the
  checker says (the strict checker: 0); ``mask_truncated`` drops such completions from the
  loss instead (TRL's ``mask_truncated_completions``).
- β = 0 builds no reference model at all, so the logged ``kl`` is ``None`` then.
"""

from __future__ import annotations

import copy
import time

import torch

from course_lib.advantages import dr_grpo_advantages, grpo_advantages, rloo_advantages
from course_lib.configs import GRPOConfig, RunConfig
from course_lib.model import completion_logprobs, generate
from course_lib.policy_loss import aggregate, clipped_surrogate, kl_estimate
from course_lib.task import AdditionTask
from course_lib.train import MetricsLog, autocast, evaluate, make_optimizer, progress


def compute_advantages(rewards: torch.Tensor, kind: str) -> torch.Tensor:
    """(n_groups, G) rewards → advantages, zero-variance groups giving zeros for ``grpo``."""
    if kind == "grpo":
        return grpo_advantages(rewards, on_degenerate="zeros")
    if kind == "rloo":
        return rloo_advantages(rewards)
    return dr_grpo_advantages(rewards)


def _score(task: AdditionTask, reward_fn, pairs, completions, G: int) -> torch.Tensor:
    comps = completions.cpu()
    r = [reward_fn(pairs[i // G], comps[i]) for i in range(len(comps))]
    return torch.tensor(r, dtype=torch.float32).view(len(pairs), G)


def collect_rollouts(model, task: AdditionTask, cfg: GRPOConfig, generator: torch.Generator) -> dict:
    """Sample, score and filter one batch of groups according to ``cfg.zero_variance``."""
    device = next(model.parameters()).device
    reward_fn = task.reward_fn(cfg.reward)
    G = cfg.num_generations
    gen_seconds, groups_sampled, rounds = 0.0, 0, 0
    kept_pairs, kept = [], []
    all_rewards, all_truncated, all_lengths, zero_var = [], [], [], []
    want = cfg.batch_prompts
    while True:
        pairs = task.sample_pairs(want if cfg.zero_variance != "resample" or rounds == 0 else cfg.batch_prompts, generator)
        with autocast(device):
            roll = generate(
                model, task.encode_prompts(pairs, device), task.tokenizer,
                max_completion_length=cfg.max_completion_length, num_generations=G, temperature=cfg.temperature,
            )
        gen_seconds += roll.seconds
        rewards = _score(task, reward_fn, pairs, roll.completions, G)
        degenerate = rewards.std(-1) == 0
        groups_sampled += len(pairs)
        all_rewards.append(rewards)
        all_truncated.append(roll.truncated.view(len(pairs), G).cpu())
        all_lengths.append(roll.completion_mask.sum(-1).view(len(pairs), G).cpu().float())
        zero_var.append(degenerate)
        keep = torch.ones_like(degenerate) if cfg.zero_variance == "keep" else ~degenerate
        for gi in torch.nonzero(keep).flatten().tolist():
            if len(kept_pairs) < cfg.batch_prompts:
                kept_pairs.append(pairs[gi])
                kept.append((roll, gi, rewards[gi]))
        rounds += 1
        if cfg.zero_variance != "resample" or len(kept_pairs) >= cfg.batch_prompts or rounds > cfg.max_resample_rounds:
            break
    rewards_all = torch.cat(all_rewards)
    stats = {
        "reward_mean": float(rewards_all.mean()),
        "zero_variance_rate": float(torch.cat(zero_var).float().mean()),
        "completion_length": float(torch.cat(all_lengths).mean()),
        "truncated_rate": float(torch.cat(all_truncated).float().mean()),
        "groups_sampled": groups_sampled,
        "groups_used": len(kept_pairs),
        "gen_seconds": gen_seconds,
        "generated_tokens": int(torch.cat(all_lengths).sum()),
    }
    if not kept:
        return {"stats": stats}
    rows = [torch.arange(gi * G, (gi + 1) * G) for _, gi, _ in kept]
    batch = {
        "input_ids": torch.cat([roll.input_ids[r.to(roll.input_ids.device)] for (roll, _, _), r in zip(kept, rows)]),
        "attention_mask": torch.cat([roll.attention_mask[r.to(roll.input_ids.device)] for (roll, _, _), r in zip(kept, rows)]),
        "completion_mask": torch.cat([roll.completion_mask[r.to(roll.input_ids.device)] for (roll, _, _), r in zip(kept, rows)]),
        "truncated": torch.cat([roll.truncated[r.to(roll.input_ids.device)] for (roll, _, _), r in zip(kept, rows)]),
        "rewards": torch.stack([rw for _, _, rw in kept]),
    }
    return {"stats": stats, "batch": batch, "pairs": kept_pairs}


def policy_step(model, ref_model, opt, batch: dict, cfg: GRPOConfig, *, prompt_length: int, max_grad_norm: float) -> dict:
    """μ inner epochs of the clipped, optionally KL-regularised surrogate on one batch of groups."""
    device = next(model.parameters()).device
    adv = compute_advantages(batch["rewards"], cfg.advantage).flatten().to(device)
    ids, attn, cmask = batch["input_ids"], batch["attention_mask"], batch["completion_mask"]
    if cfg.mask_truncated:  # advantages were computed on whole groups; now drop truncated rows
        keep = ~batch["truncated"].to(device)
        if not bool(keep.any()):
            return {"loss": 0.0, "clip_fraction": 0.0, "entropy": None, "kl": None, "skipped": 1}
        ids, attn, cmask, adv = ids[keep], attn[keep], cmask[keep], adv[keep]
    sl = slice(prompt_length - 1, None)  # token-level tensors restricted to completion positions
    T = cfg.temperature  # log-probs of the distribution the sampler actually used
    old_logps = ref_logps = None
    if cfg.num_iterations > 1:
        with torch.no_grad(), autocast(device):
            old_logps = completion_logprobs(model, ids, attn, cmask, temperature=T)[0][:, sl].float()
    if ref_model is not None:
        with torch.no_grad(), autocast(device):
            ref_logps = completion_logprobs(ref_model, ids, attn, cmask, temperature=T)[0][:, sl].float()
    kl_value, losses = None, []
    for _ in range(cfg.num_iterations):
        with autocast(device):
            logps, mask, ent = completion_logprobs(model, ids, attn, cmask, with_entropy=True, temperature=T)
        logps, mask, ent = logps[:, sl], mask[:, sl], ent[:, sl]
        old = logps.detach() if old_logps is None else old_logps
        ratio = torch.exp(logps - old)
        objective = clipped_surrogate(ratio, adv, eps_low=cfg.epsilon, eps_high=cfg.epsilon_high)
        if ref_logps is not None:
            kl_tok = kl_estimate(logps, ref_logps, estimator=cfg.kl_estimator)
            objective = objective - cfg.beta * kl_tok
            kl_value = float(aggregate(kl_tok.detach(), mask, unit="token_mean"))
        loss = -aggregate(objective, mask, unit=cfg.unit, max_length=cfg.max_completion_length)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)
        opt.step()
        losses.append(loss.item())
    with torch.no_grad():  # diagnostics of the last inner epoch
        a, r = adv[:, None], ratio.detach()
        is_clipped = ((r > 1 + cfg.epsilon_high) & (a > 0)) | ((r < 1 - cfg.epsilon) & (a < 0))
        clip_fraction = float((is_clipped.float() * mask).sum() / mask.sum())
        entropy = float((ent.detach() * mask).sum() / mask.sum())
    return {"loss": sum(losses) / len(losses), "clip_fraction": clip_fraction, "entropy": entropy, "kl": kl_value, "skipped": 0}


def train_grpo(
    model,
    task: AdditionTask,
    cfg: GRPOConfig,
    *,
    generator: torch.Generator,
    log: MetricsLog | None = None,
    state: dict | None = None,
    reference_state: dict | None = None,
    max_grad_norm: float = 1.0,
    steps: int | None = None,
    checkpoint=None,
    checkpoint_every: int = 10,
    show_progress: bool = True,
    eval_fn=None,
) -> dict:
    """Run GRPO-family RL from the current weights of ``model`` (normally the SFT policy).

    ``reference_state`` is the frozen reference's state dict (defaults to the starting
    weights; unused when ``cfg.beta == 0``). ``state`` resumes optimizer, step, time and RNG
    (the caller restores RNG before calling). ``eval_fn(model) -> dict`` defaults to
    ``evaluate`` (held-out strict and loose accuracy).
    """
    device = next(model.parameters()).device
    ref_model = None
    if cfg.beta > 0:
        ref_model = copy.deepcopy(model)
        if reference_state is not None:
            ref_model.load_state_dict(reference_state)
        ref_model.eval().requires_grad_(False)
    opt = make_optimizer(model, cfg.learning_rate)
    log = log if log is not None else MetricsLog()
    eval_fn = eval_fn or (lambda m: evaluate(m, task, max_completion_length=cfg.max_completion_length))
    step, seconds = 0, 0.0
    if state is not None:
        opt.load_state_dict(state["optimizer"])
        step, seconds = state["step"], state["rl_seconds"]
    total = cfg.steps if steps is None else steps
    bar = progress(total, f"grpo[{cfg.advantage}]", show_progress, initial=step)
    while step < total:
        t0 = time.perf_counter()
        rollout = collect_rollouts(model, task, cfg, generator)
        stats = rollout["stats"]
        t1 = time.perf_counter()
        if "batch" in rollout:
            model.train()
            upd = policy_step(model, ref_model, opt, rollout["batch"], cfg, prompt_length=task.prompt_length, max_grad_norm=max_grad_norm)
            model.eval()
        else:
            upd = {"loss": 0.0, "clip_fraction": 0.0, "entropy": None, "kl": None, "skipped": 1}
        if device.type == "cuda":
            torch.cuda.synchronize()
        t2 = time.perf_counter()
        step += 1
        seconds += t2 - t0
        row = {
            "step": step,
            **stats,
            **upd,
            "update_seconds": t2 - t1,
            "other_seconds": (t1 - t0) - stats["gen_seconds"],
            "tokens_per_second": stats["generated_tokens"] / max(stats["gen_seconds"], 1e-9),
            "rl_seconds": seconds,
        }
        if step % cfg.eval_every == 0 or step == total:
            row.update(eval_fn(model))
            bar.set_postfix(acc=f"{row['accuracy']:.2f}", reward=f"{stats['reward_mean']:.2f}")
        log.append(row)
        bar.update(1)
        if checkpoint is not None and (step % checkpoint_every == 0 or step == total):
            checkpoint(step, opt, seconds)
    bar.close()
    model.eval()
    return {"steps": step, "rl_seconds": seconds}


# ---- the passport (§17) ------------------------------------------------------------------------
def passport(cfg: RunConfig, kind: str, *, time_split: dict | None = None) -> dict:
    """What this run did, in the four groups of §17 plus the six choices of §12."""
    g, d = cfg.grpo, cfg.dpo
    checker = {
        "strict": "deterministic rule: exact answer digits followed by <eos> (course_lib.task.strict_reward)",
        "loose": "deterministic rule, deliberately loose: answer digits in order anywhere in the output (loose_reward)",
    }
    demos = (
        f"{cfg.task.n_demos} demonstrations of {cfg.task.digits}-digit addition, "
        f"{cfg.task.teacher_error_rate:.0%} from a teacher that drops the ones-column carry"
    )
    out = {"kind": kind, "config": cfg.name}
    if kind == "sft":
        out.update(
            data_and_policy={"examples": demos, "generated_by": "fixed teacher (offline)", "reuse": "sampled with replacement every step",
                             "overlap": "held-out prompts excluded from the demonstrations"},
            reward_contract={"source": "none (imitation of demonstrations)", "granularity": "per token (NLL)"},
            optimisation={"algorithm": "supervised, offline", "roles": ["policy"], "kl": "none", "averaging_unit": "token_mean"},
        )
    elif kind == "dpo":
        loss = {"sigmoid": "DPO", "ipo": "IPO", "simpo": "SimPO"}[d.loss_type]
        out.update(
            data_and_policy={"examples": f"preference pairs from {d.pair_prompts} prompts × {d.samples_per_prompt} samples",
                             "generated_by": "the SFT checkpoint, once, before training (offline)",
                             "reuse": "pairs reused for every step", "overlap": "held-out prompts excluded"},
            reward_contract={"source": checker["strict"] + ", used only to label chosen vs rejected",
                             "granularity": "once per completion", "truncation": "a truncated sample is a rejected answer"},
            optimisation={"algorithm": f"offline {loss}, beta={d.beta}" + (f", + rpo_alpha={d.rpo_alpha} × NLL(chosen)" if d.rpo_alpha else ""),
                          "roles": ["policy", "reference (log-probs cached once)"] if d.loss_type != "simpo" else ["policy"],
                          "kl": "implicit, through beta and the reference ratio", "averaging_unit": "mean over pairs"},
        )
    else:
        zv = {"keep": "kept with zero advantage", "drop": "dropped from the batch",
              "resample": f"dropped and refilled with fresh prompts (DAPO dynamic sampling, ≤{g.max_resample_rounds} extra rounds)"}[g.zero_variance]
        adv = {"grpo": "GRPO (r − mean)/std, population std", "rloo": "RLOO leave-one-out", "dr_grpo": "Dr. GRPO r − mean, no std"}[g.advantage]
        kl = f"in the loss, per token, beta={g.beta}, estimator {g.kl_estimator}" if g.beta > 0 else "none (beta=0, no reference model kept)"
        trunc = "truncated completions masked out of the loss" if g.mask_truncated else "truncated completions get the checker's reward (strict: 0)"
        roles = ["policy", "old policy (frozen log-probs)" if g.num_iterations > 1 else "old policy = current (mu=1)"]
        if g.beta > 0:
            roles.append("reference (frozen SFT copy)")
        out.update(
            data_and_policy={"examples": f"online trajectories: {g.batch_prompts} prompts × {g.num_generations} completions per step",
                             "generated_by": f"the current actor, temperature {g.temperature}", "reuse": f"each rollout used for mu={g.num_iterations} inner epoch(s), then discarded",
                             "overlap": "training prompts drawn fresh; held-out prompts never drawn"},
            reward_contract={"source": checker[g.reward], "granularity": "once per completion (binary)", "truncation": trunc,
                             "verifier_evidence": "unit tests of the checker; loose vs strict compared in notebook 08"},
            optimisation={"algorithm": "on-policy", "advantage": adv, "roles": roles, "kl": kl, "averaging_unit": g.unit,
                          "clip": f"epsilon={g.epsilon}, epsilon_high={g.epsilon_high}", "zero_variance_groups": zv},
        )
    split = time_split or {}
    out["systems"] = {
        "placement": "colocated: one process, generation and training share the weights",
        "loop": "synchronous (generate, then update)",
        "staleness": "none beyond the inner epochs on one rollout" if kind == "grpo" else "offline data (not applicable)",
        "time_split": split or "not measured yet",
    }
    if kind == "grpo":
        out["six_choices"] = {
            "reward_definition": checker[g.reward],
            "zero_variance_groups": zv,
            "averaging_unit": g.unit,
            "kl_placement_and_coefficient": kl,
            "rollout_freshness": f"fresh every step; mu={g.num_iterations}",
            "prompt_difficulty_and_length": f"uniform {cfg.task.digits}-digit prompts (fixed difficulty); max_completion_length={g.max_completion_length}",
        }
    return out


def format_passport(p: dict) -> str:
    lines = [f"post-training passport — {p['kind']} ({p['config']} config)"]
    for section, content in p.items():
        if not isinstance(content, dict):
            continue
        lines.append(f"  {section.replace('_', ' ')}:")
        for k, v in content.items():
            if isinstance(v, dict):
                v = ", ".join(f"{a}={b:.3g}" if isinstance(b, float) else f"{a}={b}" for a, b in v.items())
            elif isinstance(v, list):
                v = ", ".join(v)
            lines.append(f"    {k.replace('_', ' ')}: {v}")
    return "\n".join(lines)
