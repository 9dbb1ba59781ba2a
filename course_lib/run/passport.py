"""The post-training passport (§17): what a run did, in words a reader can check.

Every run writes one: the four groups of §17 (data and policy, reward contract, optimisation,
systems) and, for GRPO, the six choices §12 says a serious implementation must document. Each
trainer writes its own groups (the ``passport=`` of its ``trainer.register`` line); the systems
group and the environment are common and written here. ``format_passport`` prints it.

Simplification: the passport is derived from the run's config (and the measured time split),
not from the code path taken; the tests check that the options it names are the ones run.
"""

from __future__ import annotations

from course_lib.tinygpt.runtime import DEFAULT_THREADS, describe_precision
from course_lib.trainers import rft  # noqa: F401 - registers RFT's passport
from course_lib.trainers.configs import RunConfig
from course_lib.trainers.trainer import SYNCHRONOUS, passport_sections


def passport(cfg: RunConfig, kind: str, *, time_split: dict | None = None, threads: int | None = DEFAULT_THREADS,
             device: str = "cpu", reference: bool | None = None, reward_model_info: dict | None = None,
             memory: dict | None = None, utilisation: dict | None = None, loop: dict | None = None) -> dict:
    """What this run did, in the four groups of §17 (plus GRPO's six choices of §12).

    The trainer writes its own sections (``register(passport=fn)``: ``fn(cfg, info)``); the
    systems group and the environment are written here. ``reference``: whether a GRPO run kept
    a frozen reference (default: when β > 0; the pipeline always keeps one to log the KL).
    ``reward_model_info``: a trained reward model's ``reward_model.json`` (an ``rm`` run; a
    ``ppo`` run against ``rm:DIR`` reads DIR's own), or a trained judge's ``judge.json``; ``memory``: a
    PPO run's measured bytes (``train_ppo``'s ``memory``), for the critic entry. ``loop``: the trainer's account of the
    loop that ran (``grpo.loop_entry``: placement, loop, staleness); without it the systems
    fields are derived from the config.
    """
    sections = passport_sections(kind)
    systems = {
        **SYNCHRONOUS,
        "staleness": "offline data (not applicable)",  # an online trainer says its own
        "device": device,
        "precision": describe_precision(device),
        "cpu_threads": threads if threads is not None else "torch's default",
        "time_split": time_split or "not measured yet",
    }
    info = {"reference": reference, "reward_model_info": reward_model_info, "memory": memory, "loop": loop,
            "systems": systems, "environment_tokens_in_loss": False}
    out = {"kind": kind, "config": cfg.name, **sections(cfg, info)}
    out.setdefault("systems", systems)
    if loop is not None:  # what actually ran
        systems.update({k: loop[k] for k in ("placement", "loop", "staleness", "sampler") if k in loop})
    if utilisation is not None:  # on CUDA: course_lib.trainers.utilisation.mfu_entry (FLOPs, seconds, peak, MFU)
        systems["mfu"] = utilisation
    if cfg.task.env:  # §16: the environment is part of the training specification
        from course_lib.tinygpt.environments import EpisodeLimits

        limits = EpisodeLimits()
        out["environment"] = {
            "name": cfg.task.env,
            "tools": "a calculator: the policy writes [a+b], the environment writes the sum",
            "sft_demonstrations": f"{cfg.task.tool_demos} carry demonstrations rewritten to call the tool "
                                  + ("for the ones column" if cfg.task.tool_call == "ones" else "for the whole sum"),
            "limits": f"{limits.max_tool_calls} tool calls, {limits.max_tokens} tokens per episode (policy + "
                      f"environment; replaces max_completion_length)",
            "verifier": "exact answer after the last turn; malformed call -> error observation '!'",
            "environment_tokens": "in the loss (ablation: mask_env_tokens=False)" if info["environment_tokens_in_loss"]
                                  else "context only: no log-prob, loss or KL",
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
