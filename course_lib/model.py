"""The tiny GPT: a GPT-2 built from a ``transformers`` config, completion log-probs, rollouts.

Lecture §6 (sequence log-probabilities feed DPO), §9 (GRPO's per-token ratios), §11 (rollout
generation with a KV cache). No weights are downloaded: the model is initialised from
``GPT2Config`` with the task tokenizer's ids for bos/eos/pad.

Simplifications, said out loud:
- Prompts all have the same length (see ``course_lib.task``), so generation never needs left
  padding; position ids are still derived from the attention mask, so left-padded batches
  would also be handled correctly.
- Sampling is plain temperature sampling (no top-k/top-p), so the sampling distribution is
  exactly the policy π_θ whose log-probs the losses use. ``<pad>`` and ``<bos>`` are never
  valid outputs: generation suppresses them and ``completion_logprobs`` removes them from
  the softmax too, so both sides use the same distribution over the 13 output tokens.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import torch
from transformers import GenerationConfig, GPT2Config, GPT2LMHeadModel

from course_lib.task import CharTokenizer


@dataclass
class ModelConfig:
    n_layer: int = 3
    n_embd: int = 96
    n_head: int = 4
    n_positions: int = 64


def build_model(config: ModelConfig, tokenizer: CharTokenizer) -> GPT2LMHeadModel:
    """A randomly initialised GPT-2 (uses ``torch``'s global RNG: seed before calling)."""
    cfg = GPT2Config(
        vocab_size=len(tokenizer),
        n_positions=config.n_positions,
        n_embd=config.n_embd,
        n_layer=config.n_layer,
        n_head=config.n_head,
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
    )
    model = GPT2LMHeadModel(cfg)
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return model


NEVER_LOGIT = -1e9  # finite, so entropies stay 0·(−1e9) = 0 instead of NaN


def n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    """0, 1, 2, … counted over real tokens only (left padding gets position 0)."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def completion_logprobs(model, input_ids, attention_mask, completion_mask, *, with_entropy=False, temperature=1.0):
    """Per-token log π(y_t | x, y_<t) for completion tokens, shape ``(N, L − 1)`` (§6).

    ``input_ids``/``attention_mask``/``completion_mask`` have shape ``(N, L)``; the
    completion mask is 1 on completion tokens (prompt and padding are 0). The logits at
    position t − 1 predict token t, so the result is aligned with ``input_ids[:, 1:]`` and
    ``mask = completion_mask[:, 1:]``: each token is scored exactly once, by the position
    before it. Positions outside the completion are exactly 0. ``temperature`` divides the
    logits first, so the log-probs are those of the distribution the sampler used (as TRL
    does). Returns
    ``(token_logps, mask)`` — or ``(token_logps, mask, token_entropy)`` with
    ``with_entropy=True``. Sum over the last axis for a sequence log-prob.
    """
    if input_ids.shape != attention_mask.shape or input_ids.shape != completion_mask.shape:
        raise ValueError(
            "input_ids, attention_mask and completion_mask must have the same shape; got "
            f"{tuple(input_ids.shape)}, {tuple(attention_mask.shape)}, {tuple(completion_mask.shape)}"
        )
    if bool((completion_mask[:, 0] != 0).any()):
        raise ValueError("completion_mask[:, 0] must be 0: the first token has no position before it")
    out = model(
        input_ids=input_ids,
        attention_mask=attention_mask,
        position_ids=position_ids(attention_mask),
        use_cache=False,
    )
    logits = out.logits[:, :-1].float() / temperature  # position t-1 ...
    never = [model.config.pad_token_id, model.config.bos_token_id]
    logits[..., never] = NEVER_LOGIT  # same distribution as generation (suppress_tokens)
    targets = input_ids[:, 1:]  # ... predicts token t
    mask = completion_mask[:, 1:].to(logits.dtype)
    logp_all = torch.log_softmax(logits, dim=-1)
    token_logps = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1) * mask
    if not with_entropy:
        return token_logps, mask
    entropy = -(logp_all.exp() * logp_all).sum(-1) * mask
    return token_logps, mask, entropy


@dataclass
class Rollout:
    """Prompts and their sampled completions, as the trainers consume them."""

    input_ids: torch.Tensor  # (N, prompt_length + T)
    attention_mask: torch.Tensor  # 1 on prompt and completion tokens up to and including <eos>
    completion_mask: torch.Tensor  # 1 on completion tokens up to and including <eos>
    completions: torch.Tensor  # (N, T) generated ids (pad after <eos>)
    truncated: torch.Tensor  # (N,) bool: no <eos> within max_completion_length
    seconds: float


def completion_masks(completions: torch.Tensor, eos_token_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Mask up to and including the first <eos>; rows with no <eos> are truncated (all kept)."""
    is_eos = completions == eos_token_id
    seen_before = (is_eos.long().cumsum(-1) - is_eos.long()) > 0  # an <eos> strictly earlier
    mask = (~seen_before).long()
    truncated = ~is_eos.any(-1)
    return mask, truncated


@torch.no_grad()
def generate(
    model,
    prompt_ids: torch.Tensor,
    tokenizer: CharTokenizer,
    *,
    max_completion_length: int,
    num_generations: int = 1,
    temperature: float = 1.0,
    greedy: bool = False,
    use_cache: bool = True,
) -> Rollout:
    """Sample completions with transformers' ``generate`` (KV cache on by default, §11).

    Each prompt row is repeated ``num_generations`` times (consecutive rows form a group).
    Sequences that finish early are padded with ``<pad>``; a completion with no ``<eos>``
    within ``max_completion_length`` tokens is *truncated* and flagged — what it earns is
    the checker's decision (the strict checker gives 0).
    """
    was_training = model.training
    model.eval()
    start = time.perf_counter()
    attention = torch.ones_like(prompt_ids)
    kwargs = dict(do_sample=False) if greedy else dict(do_sample=True, temperature=temperature, top_k=0, top_p=1.0)
    out = model.generate(
        input_ids=prompt_ids,
        attention_mask=attention,
        max_new_tokens=max_completion_length,
        num_return_sequences=num_generations,
        pad_token_id=tokenizer.eos_token_id,  # finished rows are filled with <eos>, see below
        eos_token_id=tokenizer.eos_token_id,
        use_cache=use_cache,
        suppress_tokens=[tokenizer.pad_token_id, tokenizer.bos_token_id],
        **kwargs,
    )
    if prompt_ids.device.type == "cuda":
        torch.cuda.synchronize()
    seconds = time.perf_counter() - start
    if was_training:
        model.train()
    plen = prompt_ids.shape[1]
    completions = out[:, plen:]
    if completions.shape[1] < max_completion_length:  # every row stopped early
        pad = torch.full(
            (completions.shape[0], max_completion_length - completions.shape[1]),
            tokenizer.pad_token_id,
            dtype=completions.dtype,
            device=completions.device,
        )
        completions = torch.cat([completions, pad], dim=1)
    cmask, truncated = completion_masks(completions, tokenizer.eos_token_id)
    # transformers drops an all-ones attention mask inside generate; feeding <pad> back for
    # finished rows would then trigger its "padding without attention mask" warning. So
    # finished rows are filled with <eos> while generating and turned into <pad> here.
    completions = completions.masked_fill(cmask == 0, tokenizer.pad_token_id)
    prompts = prompt_ids.repeat_interleave(num_generations, dim=0)
    input_ids = torch.cat([prompts, completions], dim=1)
    completion_mask = torch.cat([torch.zeros_like(prompts), cmask], dim=1)
    attention_mask = torch.cat([torch.ones_like(prompts), cmask], dim=1)
    return Rollout(input_ids, attention_mask, completion_mask, completions, truncated, seconds)
