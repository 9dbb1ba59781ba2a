"""The post-training passport (§17): what a run did, in words a reader can check.

Every run (SFT, DPO, GRPO) writes one: the four groups of §17 (data and policy, reward
contract, optimisation, systems) and, for GRPO, the six choices §12 says a serious
implementation must document. ``format_passport`` prints it.

Simplification: the passport is derived from the run's config (and the measured time split),
not from the code path taken; the tests check that the options it names are the ones run.
"""

from __future__ import annotations

from course_lib.behaviour import sampler_entry
from course_lib.configs import GSPO_PAPER_EPSILONS, RunConfig
from course_lib.ppo import critic_passport
from course_lib.reward_model import LABELLING_RULE, passport_fields
from course_lib.rewards import reward_granularity, reward_source
from course_lib.runtime import DEFAULT_THREADS, describe_precision


def passport(cfg: RunConfig, kind: str, *, time_split: dict | None = None, threads: int | None = DEFAULT_THREADS,
             device: str = "cpu", reference: bool | None = None, reward_model_info: dict | None = None,
             memory: dict | None = None, utilisation: dict | None = None, loop: dict | None = None) -> dict:
    """What this run did, in the four groups of §17 plus the six choices of §12.

    ``reference``: whether a GRPO run kept a frozen reference (default: when β > 0; the
    pipeline always keeps one to log the KL). ``reward_model_info``: a trained reward model's
    ``reward_model.json`` (an ``rm`` run; a ``ppo`` run against ``rm:DIR`` reads DIR's own);
    ``memory``: a PPO run's measured bytes (``train_ppo``'s ``memory``), for the critic entry.
    ``loop``: the trainer's account of the loop that ran (``grpo.loop_entry``: placement, loop,
    staleness); without it the systems fields are derived from the config.
    """
    if kind == "rft":  # GRPO's rollouts, a supervised step on the accepted samples (course_lib.rft)
        out = passport(cfg, "grpo", time_split=time_split, threads=threads, device=device, reference=reference,
                       memory=memory, utilisation=utilisation)
        out.pop("six_choices")
        out["kind"] = "rft"
        out["data_and_policy"]["reuse"] = "each rollout used for one supervised step on its accepted samples, then discarded"
        out["optimisation"] = {"algorithm": "online rejection-sampling fine-tuning (RFT), on-policy",
                               "advantage": "none: weight 1[reward >= 1] per completion (no baseline, no negatives)",
                               "roles": ["policy"], "kl": "none", "averaging_unit": "token_mean (NLL of accepted samples)"}
        return out
    g, d = cfg.grpo, cfg.dpo
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
    elif kind == "pretrain":  # a recipe's base-model stage (course_lib.recipes.digit_text)
        s = cfg.sft
        out.update(
            data_and_policy={"examples": f"{s.steps * s.batch_size} documents of plain digit text (random digit strings "
                                         "of random length, each ended by <eos>; no '+', no '=', no sums)",
                             "generated_by": "a random generator (offline), drawn once before training",
                             "reuse": "sampled with replacement every step",
                             "overlap": "no task prompt at all: the text never shows the task"},
            reward_contract={"source": "none (next-token prediction on digit text)", "granularity": "per token (NLL)"},
            optimisation={"algorithm": "supervised next-token prediction (pretraining), offline", "roles": ["policy"],
                          "kl": "none", "averaging_unit": "token_mean"},
        )
    elif kind == "dpo":
        loss = {"sigmoid": "DPO", "ipo": "IPO", "simpo": "SimPO"}[d.loss_type]
        out.update(
            data_and_policy={"examples": f"preference pairs from {d.pair_prompts} prompts × {d.samples_per_prompt} samples",
                             "generated_by": "the SFT checkpoint, once, before training (offline)",
                             "reuse": "pairs reused for every step", "overlap": "held-out prompts excluded"},
            reward_contract={"source": reward_source("strict") + ", used only to label chosen vs rejected",
                             "granularity": "once per completion", "truncation": "a truncated sample is a rejected answer"},
            optimisation={"algorithm": f"offline {loss}, beta={d.beta}" + (f", + rpo_alpha={d.rpo_alpha} × NLL(chosen)" if d.rpo_alpha else ""),
                          "roles": ["policy", "reference (log-probs cached once)"] if d.loss_type != "simpo" else ["policy"],
                          "kl": "implicit, through beta and the reference ratio", "averaging_unit": "mean over pairs"},
        )
    elif kind == "kto":
        k = cfg.kto
        out.update(
            data_and_policy={"examples": f"unpaired answers: DPO's preference pairs from {d.pair_prompts} prompts × "
                                         f"{d.samples_per_prompt} samples, taken apart (chosen = desirable, rejected = "
                                         f"undesirable; desirable_fraction={k.desirable_fraction})",
                             "generated_by": "the SFT checkpoint, once, before training (offline)",
                             "reuse": "batches fixed once and repeated in order (TRL's sequential sampling)",
                             "overlap": "held-out prompts excluded"},
            reward_contract={"source": reward_source("strict") + ", used only to label desirable vs undesirable",
                             "granularity": "once per completion (binary label)",
                             "truncation": "a truncated sample is an undesirable answer"},
            optimisation={"algorithm": f"offline KTO, beta={k.beta}, desirable_weight={k.desirable_weight}, "
                                       f"undesirable_weight={k.undesirable_weight}",
                          "roles": ["policy", "reference (log-probs of answers and mismatched pairs cached once)"],
                          "kl": "reference point z0: detached batch KL estimate on mismatched pairs, clamped at 0",
                          "averaging_unit": "mean over answers"},
        )
    elif kind == "orpo":
        o = cfg.orpo
        out.update(
            data_and_policy={"examples": f"DPO's preference pairs from {d.pair_prompts} prompts × {d.samples_per_prompt} "
                                         "samples; the chosen answers are the SFT data",
                             "generated_by": "the SFT checkpoint, once (offline); the policy restarts from the base model",
                             "reuse": "pairs sampled with replacement every step", "overlap": "held-out prompts excluded"},
            reward_contract={"source": reward_source("strict") + ", used only to label chosen vs rejected",
                             "granularity": "once per completion", "truncation": "a truncated sample is a rejected answer"},
            optimisation={"algorithm": f"ORPO, one stage from the base model: NLL(chosen) + beta={o.beta} × odds-ratio "
                                       "penalty", "roles": ["policy"], "kl": "none (no reference model)",
                          "averaging_unit": "NLL: token mean over chosen completions; penalty: mean over pairs"},
        )
    elif kind == "rm":
        r = cfg.rm
        out.update(
            data_and_policy={"examples": f"preference pairs from {r.pair_prompts} prompts × {r.samples_per_prompt} SFT samples "
                                         f"(≤ {r.pairs_per_prompt} pairs per prompt)",
                             "generated_by": f"the SFT checkpoint, once, temperature {r.temperature} (offline)",
                             "reuse": "pairs sampled with replacement every step",
                             "overlap": "held-out pairs come from the task's held-out prompts only"},
            reward_contract={"source": "gold rule: " + reward_source("strict"), "labelling_rule": LABELLING_RULE,
                             "noise": f"each label flipped with probability {r.noise}"},
            optimisation={"algorithm": "Bradley–Terry reward-model loss −log σ(r_chosen − r_rejected)",
                          "roles": ["reward model (GPT2ForSequenceClassification, 1 label)", "SFT policy (sampler, init)"],
                          "kl": "none", "averaging_unit": "mean over pairs"},
        )
        if reward_model_info is not None:
            out["reward_model"] = passport_fields(reward_model_info)
    elif kind == "ppo":
        p = cfg.ppo
        out.update(
            data_and_policy={"examples": f"online trajectories: {p.batch_prompts} prompts × {p.num_generations} completion(s) per step",
                             "generated_by": f"the current actor, temperature {p.temperature}",
                             "reuse": f"each rollout used for {p.num_ppo_epochs} PPO epoch(s), then discarded",
                             "overlap": "training prompts drawn fresh; held-out prompts never drawn"},
            reward_contract={"source": reward_source(p.reward), "granularity": reward_granularity(p.reward) + ", on its last token",
                             "truncation": "a truncated completion gets what the reward says (strict: 0)"},
            optimisation={"algorithm": "PPO, on-policy, learned critic", "advantage": f"GAE(gamma={p.gamma}, lambda={p.lam})",
                          "roles": ["policy", "critic (trained)"] + (["reference (frozen SFT copy)"] if p.kl_coef > 0 else []),
                          "kl": (f"in the reward, per token, k1, kl_coef={p.kl_coef}" if p.kl_coef > 0 else "none (kl_coef=0)"),
                          "averaging_unit": "token_mean", "clip": f"cliprange={p.cliprange}, cliprange_value={p.cliprange_value}"},
            critic=critic_passport(p, memory),
        )
        if reward_model_info is not None:
            out["reward_model"] = passport_fields(reward_model_info)
    else:
        zv = {"keep": "kept with zero advantage", "drop": "dropped from the batch",
              "resample": f"dropped and refilled with fresh prompts (DAPO dynamic sampling, ≤{g.max_resample_rounds} extra rounds)"}[g.zero_variance]
        adv = {"grpo": "GRPO (r − mean)/std, population std", "rloo": "RLOO leave-one-out", "dr_grpo": "Dr. GRPO r − mean, no std"}[g.advantage]
        reference = g.beta > 0 if reference is None else reference or g.beta > 0
        if g.beta > 0 and g.kl_placement == "loss":
            kl = f"in the loss, per token (differentiated), beta={g.beta}, estimator {g.kl_estimator}"
        elif g.beta > 0:
            kl = (f"in the reward, per sequence (sum over tokens, folded in before the baseline), beta={g.beta}, "
                  f"estimator {g.kl_estimator}")
        else:
            kl = "none in the objective (beta=0)"
        kl += "; KL to the reference logged every step (k3, per token)" if reference else "; no reference model kept"
        trunc = "truncated completions masked out of the loss" if g.mask_truncated else "truncated completions get the checker's reward (strict: 0)"
        if g.soft_punish_cache:  # DAPO's overlong shaping is part of the reward: disclosed with it
            trunc += (f"; overlong shaping (DAPO): a penalty falling from 0 to −1 over the last {g.soft_punish_cache} "
                      f"token(s) up to {g.max_completion_length}, added to the reward")
        clip = f"epsilon={g.epsilon}, epsilon_high={g.epsilon_high}"
        if g.loss_type == "cispo":
            clip = f"CISPO: importance weight capped at epsilon_high={g.epsilon_high} (constant), no token loses its gradient"
        elif g.importance_sampling_level == "sequence":
            clip = f"GSPO: one length-normalised ratio per completion, clipped; {clip}"
            if (g.epsilon, g.epsilon_high) != GSPO_PAPER_EPSILONS:
                clip += (f" (the GSPO paper and TRL's docs clip at epsilon={GSPO_PAPER_EPSILONS[0]}, "
                         f"epsilon_high={GSPO_PAPER_EPSILONS[1]}: a sequence ratio moves far less than a token's)")
        roles = ["policy", "old policy (frozen log-probs)" if g.num_iterations > 1 else "old policy = current (mu=1)"]
        if reference:
            roles.append("reference (frozen SFT copy)" + ("" if g.beta > 0 else ", only to measure the KL"))
        out.update(
            data_and_policy={"examples": f"online trajectories: {g.batch_prompts} prompts × {g.num_generations} completions per step",
                             "generated_by": (f"the current actor, temperature {g.temperature}" if g.max_staleness == 0 else
                                              f"the actor of {g.max_staleness} optimiser steps ago (a rollout worker), "
                                              f"temperature {g.temperature}"), "reuse": f"each rollout used for mu={g.num_iterations} inner epoch(s), then discarded",
                             "overlap": "training prompts drawn fresh; held-out prompts never drawn"},
            reward_contract={"source": reward_source(g.reward), "granularity": reward_granularity(g.reward), "truncation": trunc,
                             "verifier_evidence": "unit tests of the checker; loose vs strict compared in notebook 11_reward_hacking"},
            optimisation={"algorithm": "on-policy" if g.max_staleness == 0 else
                          f"off-policy by up to {g.max_staleness} step(s), clipped ratio pi_theta/pi_old kept apart from "
                          f"the behaviour correction pi_old/pi_behaviour", "advantage": adv, "roles": roles, "kl": kl, "kl_placement": g.kl_placement,
                          "kl_estimator": g.kl_estimator, "beta": g.beta, "averaging_unit": g.unit,
                          "clip": clip, "zero_variance_groups": zv},
        )
    split = time_split or {}
    out["systems"] = {
        "placement": "colocated: one process, generation and training share the weights",
        "loop": "synchronous (generate, then update)",
        "staleness": "none beyond the inner epochs on one rollout" if kind in ("grpo", "ppo") else "offline data (not applicable)",
        "device": device,
        "precision": describe_precision(device),
        "cpu_threads": threads if threads is not None else "torch's default",
        "time_split": split or "not measured yet",
    }
    if kind == "grpo" and g.max_staleness > 0 and loop is None:  # derived from the config: what would run
        out["systems"].update(placement="two processes: a rollout worker samples, the trainer updates",
                              loop=f"asynchronous, max_staleness={g.max_staleness}",
                              staleness=f"rollouts up to {g.max_staleness} optimiser steps old")
    if kind == "grpo":
        out["systems"]["sampler"] = sampler_entry(g)
    if loop is not None:  # what actually ran
        out["systems"].update({k: loop[k] for k in ("placement", "loop", "staleness", "sampler") if k in loop})
    if utilisation is not None:  # on CUDA: course_lib.utilisation.mfu_entry (FLOPs, seconds, peak, MFU)
        out["systems"]["mfu"] = utilisation
    if kind == "grpo":
        out["six_choices"] = {
            "reward_definition": reward_source(g.reward),
            "zero_variance_groups": zv,
            "averaging_unit": g.unit,
            "kl_placement_and_coefficient": kl,
            "rollout_freshness": (f"fresh every step; mu={g.num_iterations}" if g.max_staleness == 0 else
                                  f"sampled max_staleness={g.max_staleness} steps behind; mu={g.num_iterations}"),
            "prompt_difficulty_and_length": f"uniform {cfg.task.digits}-digit prompts (fixed difficulty); max_completion_length={g.max_completion_length}"
                                            + ("" if g.adaptive_length_quantile is None else
                                               f"; adaptive cap: the {g.adaptive_length_quantile} quantile of the last "
                                               f"step's lengths + {g.adaptive_length_margin}"),
        }
    if cfg.task.env:  # §16: the environment is part of the training specification
        from course_lib.environments import EpisodeLimits

        limits = EpisodeLimits()
        out["environment"] = {
            "name": cfg.task.env,
            "tools": "a calculator: the policy writes [a+b], the environment writes the sum",
            "sft_demonstrations": f"{cfg.task.tool_demos} carry demonstrations rewritten to call the tool "
                                  + ("for the ones column" if cfg.task.tool_call == "ones" else "for the whole sum"),
            "limits": f"{limits.max_tool_calls} tool calls, {limits.max_tokens} tokens per episode (policy + environment; "
                      f"replaces max_completion_length)",
            "verifier": "exact answer after the last turn; malformed call -> error observation '!'",
            "environment_tokens": "context only: no log-prob, loss or KL" if g.mask_env_tokens or kind != "grpo"
                                  else "in the loss (ablation: mask_env_tokens=False)",
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
