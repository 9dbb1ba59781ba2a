"""Model FLOPs utilisation (MFU): the FLOPs a run needed, over its seconds, over the device's peak.

Counted honestly for the tiny GPT, from the shapes the trainers actually run:

- matmul FLOPs only: per token and layer 24·d² (QKV 6d², output d·d 2d², MLP 16d²) plus attention
  4·d·c for a token that attends to c positions (QKᵀ and AV); the language-model head 2·d·V only
  where its logits are used. Embeddings, layer norms, GELU and the softmax are not counted;
- one forward where no gradient flows (sampling, the reference), three (forward + backward) in an
  update; the last token of a sequence is scored but never fed on, so its body is not counted;
- GRPO: each group's prompt runs once and is shared by its G completions (as the trainer does);
  prompt tokens get no head (``start=prompt_length``); the update runs only the groups it keeps
  (zero-variance groups are skipped when no KL term reaches them); the reference forward is
  counted whenever a reference is kept (the pipeline always keeps the SFT weights, to log the KL);
- the reward model (``rm``): forward + backward on both sequences of each pair; the reward is read
  at the last real token, so every token is fed on; its scalar head (2·d per position, as
  ``GPT2ForSequenceClassification`` runs it) on every real position. It runs in float32 with TF32
  off (``reward_model.scores``), so its MFU is against the fp32 peak (``compute_dtype``), over its
  training seconds (the pipeline leaves out sampling and labelling the pairs; the held-out checks
  every ``eval_every`` steps stay in, uncounted: a lower bound);
- the AI-feedback judge (``judge``): the same, on one row per pair, ``prompt | A | B | <eos>`` with each
  answer in a slot of ``max_completion_length`` tokens: every position is attended and fed on (the pads
  inside the slots are tokens of its layout), float32 (no autocast), over its training seconds;
- PPO, per step: sampling as GRPO's; then forward only, on every row (``ppo.ppo_update`` shares no
  prompt), the old policy's log-probs and the reference's (kept only when ``kl_coef > 0``), with the
  head on every position but the last (``completion_logprobs`` from ``start=1``: the prompt's logits
  are computed too), and the critic's values (scalar head on every real position); then per epoch
  forward + backward of policy and critic on the same shapes;
- padding after ``<eos>`` is not counted: it is work the device does, not work the model needs, so
  MFU here is a lower bound of the hardware's busy fraction.

Peaks are dense (no sparsity) tensor-core numbers from the vendors' data sheets, by exact device
name, for the dtype the run's matmuls use there (``compute_dtype``): a T4 runs the course in fp32
(8.1 TFLOP/s; its 65 fp16 TFLOP/s serve TRL's fp16), and bf16 on a T4 is emulated (no peak).
"""

from __future__ import annotations

from course_lib.tinygpt.model import ModelConfig

# torch.cuda.get_device_name() → dense peak TFLOP/s by dtype; None: no hardware path for that dtype.
PEAK_TFLOPS = {
    "Tesla T4": {"fp16": 65.0, "fp32": 8.1, "bf16": None},  # sm_75: bf16 is emulated
    "NVIDIA L4": {"bf16": 121.0, "fp16": 121.0, "fp32": 30.3},
    "NVIDIA A100-SXM4-40GB": {"bf16": 312.0, "fp16": 312.0, "fp32": 19.5},
    "NVIDIA A100-SXM4-80GB": {"bf16": 312.0, "fp16": 312.0, "fp32": 19.5},
    "NVIDIA A100-PCIE-40GB": {"bf16": 312.0, "fp16": 312.0, "fp32": 19.5},
    "NVIDIA A100 80GB PCIe": {"bf16": 312.0, "fp16": 312.0, "fp32": 19.5},
    "NVIDIA H100 80GB HBM3": {"bf16": 989.0, "fp16": 989.0, "fp32": 67.0},  # SXM
    "NVIDIA H100 PCIe": {"bf16": 756.0, "fp16": 756.0, "fp32": 51.0},
    "NVIDIA H200": {"bf16": 989.0, "fp16": 989.0, "fp32": 67.0},
}


def peak_flops(device_name: str, precision: str) -> float | None:
    """FLOP/s peak of ``device_name`` in ``precision`` (``"bf16" | "fp16" | "fp32"``); None if unknown."""
    if precision not in ("bf16", "fp16", "fp32"):
        raise ValueError(f"precision must be one of 'bf16', 'fp16', 'fp32'; got {precision!r}")
    peak = PEAK_TFLOPS.get(device_name, {}).get(precision)
    return None if peak is None else peak * 1e12


def body_flops(model: ModelConfig, start: float, stop: float) -> float:
    """Forward FLOPs of positions ``start … stop−1`` of one sequence through every layer (each
    attending to itself and all earlier positions). Fractional bounds give the mean over rows."""
    if stop <= start:
        return 0.0
    d, tokens = model.n_embd, stop - start
    attended = (stop * (stop + 1) - start * (start + 1)) / 2  # Σ (t + 1) for t in [start, stop)
    return model.n_layer * (24 * d * d * tokens + 4 * d * attended)


def head_flops(model: ModelConfig, vocab: int, positions: float) -> float:
    return 2 * model.n_embd * vocab * positions


def scored_forward(model: ModelConfig, vocab: int, prompt_length: int, completion: float, *, share: int = 1) -> float:
    """Forward FLOPs of one completion scored after its prompt; the prompt's share is 1/``share``
    (G completions of one prompt run it once)."""
    return (body_flops(model, 0, prompt_length) / share
            + body_flops(model, prompt_length, prompt_length + completion - 1) + head_flops(model, vocab, completion))


def grpo_step_flops(model: ModelConfig, vocab: int, *, prompt_length: int, completion_length: float,
                    groups_sampled: int, batch_groups: int, update_groups: int, num_generations: int,
                    num_iterations: int = 1, reference: bool = True) -> float:
    """FLOPs one GRPO step needs: sampling ``groups_sampled`` groups; the reference forward (if kept)
    on the ``batch_groups`` groups of the batch; μ updates (forward + backward = 3 forwards) on the
    ``update_groups`` groups the update keeps. ``completion_length``: mean real tokens per completion."""
    per_group = num_generations * scored_forward(model, vocab, prompt_length, completion_length, share=num_generations)
    ref = batch_groups * per_group if reference else 0.0
    return groups_sampled * per_group + ref + 3 * num_iterations * update_groups * per_group


def supervised_step_flops(model: ModelConfig, vocab: int, *, prompt_length: int, completion_length: float,
                          sequences: int) -> float:
    """FLOPs of one SFT or DPO step: forward + backward on ``sequences`` scored completions (DPO: 2 per
    pair; its reference log-probs are computed once before training, not per step)."""
    return 3 * sequences * scored_forward(model, vocab, prompt_length, completion_length)


def scalar_step_flops(model: ModelConfig, *, sequence_length: float, sequences: int) -> float:
    """FLOPs of one step of a one-output model (the reward model, the judge): forward + backward on
    ``sequences`` sequences of ``sequence_length`` tokens, every one fed on (the output is read at the
    last); the scalar head on every position."""
    one = body_flops(model, 0, sequence_length) + head_flops(model, 1, sequence_length)
    return 3 * sequences * one


def reward_model_step_flops(model: ModelConfig, *, sequence_length: float, pairs: int) -> float:
    """FLOPs of one Bradley–Terry reward-model step: the chosen and the rejected sequence of ``pairs``
    pairs, ``sequence_length`` real tokens each (prompt included)."""
    return scalar_step_flops(model, sequence_length=sequence_length, sequences=2 * pairs)


def ppo_step_flops(model: ModelConfig, vocab: int, *, prompt_length: int, completion_length: float, prompts: int,
                   num_generations: int, num_ppo_epochs: int, reference: bool) -> float:
    """FLOPs one PPO step needs (``ppo.ppo_update``): sampling ``prompts``·G completions (each prompt
    once per group); forward only, on every row, the old policy's log-probs, the reference's (if
    kept) and the critic's values; then ``num_ppo_epochs`` × forward + backward of policy and critic.
    Those forwards run each row's own prompt, the policy's head on every position but the last
    (``start=1``), the critic's scalar head on every position. ``completion_length``: mean real tokens."""
    P, c, n = prompt_length, completion_length, prompts * num_generations
    sample = n * scored_forward(model, vocab, P, c, share=num_generations)
    body = body_flops(model, 0, P + c - 1)
    policy = body + head_flops(model, vocab, P + c - 1)
    critic = body + head_flops(model, 1, P + c)
    return sample + n * ((2 if reference else 1) * policy + critic) + 3 * num_ppo_epochs * n * (policy + critic)


def run_flops(kind: str, cfg, rows: list[dict], *, vocab: int, reference: bool = True) -> float | None:
    """The FLOPs a finished run needed, from its metrics rows: the trainer's registered count
    (``register(flops=)``, one of the ``*_run_flops`` below); None for a ``kind`` that counts none."""
    from course_lib.trainers.trainer import trainers

    count = trainers()[kind].flops if kind in trainers() else None
    return None if count is None else count(cfg, rows, vocab=vocab, reference=reference)


def supervised_run_flops(cfg, rows: list[dict], *, vocab: int, sequences: int) -> float:
    """SFT, DPO and ORPO: ``sequences`` completions per step forward and backward, each counted at the longest
    answer + ``<eos>`` (an upper bound); a reference's log-probs are cached before training."""
    t = cfg.task
    per = supervised_step_flops(cfg.model, vocab, prompt_length=t.prompt_length, completion_length=t.answer_length,
                                sequences=sequences)
    return per * len(rows)


def kto_run_flops(cfg, rows: list[dict], *, vocab: int, reference: bool = True) -> float:
    """KTO: its answers forward + backward, and one no-gradient forward of their mismatched pairs (z0)."""
    t, b = cfg.task, cfg.kto.batch_size
    per = (supervised_step_flops(cfg.model, vocab, prompt_length=t.prompt_length, completion_length=t.answer_length,
                                 sequences=b)
           + b * scored_forward(cfg.model, vocab, t.prompt_length, t.answer_length))
    return per * len(rows)


def rm_run_flops(cfg, rows: list[dict], *, vocab: int, reference: bool = True) -> float:
    """The reward model: its rows carry their batch's pairs and mean real length (rows written before they did:
    the batch size and the longest sample, an upper bound)."""
    longest = cfg.task.prompt_length + cfg.rm.max_completion_length
    return sum(reward_model_step_flops(cfg.model, sequence_length=r.get("sequence_length", longest),
                                       pairs=r.get("batch_pairs", cfg.rm.batch_size)) for r in rows)


def judge_run_flops(cfg, rows: list[dict], *, vocab: int, reference: bool = True) -> float:
    """The judge: one row ``prompt | A | B | <eos>`` per pair (its two slots' pads are tokens of the layout), each
    row's batch of pairs (the batch size for rows without it)."""
    length = cfg.task.prompt_length + 2 * cfg.judge.max_completion_length + 1
    return sum(scalar_step_flops(cfg.model, sequence_length=length,
                                 sequences=r.get("batch_pairs", cfg.judge.batch_size)) for r in rows)


def ppo_run_flops(cfg, rows: list[dict], *, vocab: int, reference: bool = True) -> float:
    """PPO: keeps a reference only when ``kl_coef > 0`` (the pipeline sets no ``track_kl``)."""
    p = cfg.ppo
    return sum(ppo_step_flops(cfg.model, vocab, prompt_length=cfg.task.prompt_length,
                              completion_length=r["completion_length"], prompts=p.batch_prompts,
                              num_generations=p.num_generations, num_ppo_epochs=p.num_ppo_epochs,
                              reference=reference and p.kl_coef > 0)
               for r in rows)


def grpo_run_flops(cfg, rows: list[dict], *, vocab: int, reference: bool = True) -> float:
    """GRPO: each row's sampled groups, and the groups its update kept."""
    g, total = cfg.grpo, 0.0
    skips = not (g.beta > 0)  # no KL term: the update leaves zero-variance groups out
    for r in rows:
        if r.get("skipped"):
            kept = batch = 0
        else:
            batch = r["groups_used"] if g.zero_variance == "drop" else g.batch_prompts
            informative = round(r["groups_sampled"] * (1 - r["zero_variance_rate"]))
            kept = min(informative, g.batch_prompts) if skips else batch
        total += grpo_step_flops(cfg.model, vocab, prompt_length=cfg.task.prompt_length,
                                 completion_length=r["completion_length"], groups_sampled=r["groups_sampled"],
                                 batch_groups=batch, update_groups=kept, num_generations=g.num_generations,
                                 num_iterations=g.num_iterations, reference=reference)
    return total


def compute_dtype(kind: str, device) -> str:
    """The dtype ``kind``'s matmuls run in on ``device``: ``runtime.precision``, but fp32 for a trainer registered
    with ``full_precision`` (the reward model)."""
    from course_lib.tinygpt.runtime import precision
    from course_lib.trainers.trainer import trainers

    return "fp32" if kind in trainers() and trainers()[kind].full_precision else precision(device)


def mfu_entry(kind: str, cfg, rows: list[dict], seconds: float, device, *, vocab: int) -> dict | None:
    """The passport's ``mfu`` entry on CUDA (None elsewhere): FLOPs, seconds, peak, MFU, and how counted."""
    import torch

    device = torch.device(device)
    if device.type != "cuda":
        return None
    flops = run_flops(kind, cfg, rows, vocab=vocab)
    name, dtype = torch.cuda.get_device_name(device), compute_dtype(kind, device)
    peak = peak_flops(name, dtype)
    entry = {"gpu": name, "dtype": dtype, "seconds": seconds, "flops": flops,
             "peak_flops": peak, "counted_by": "course_lib.trainers.utilisation (matmul FLOPs, no padding)"}
    entry["mfu"] = flops / seconds / peak if flops is not None and peak and seconds > 0 else None
    return entry
