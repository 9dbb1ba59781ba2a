"""The tiny GPT: a GPT-2 built from a ``transformers`` config, and the log-probs of completions.

Lecture §6 (sequence log-probabilities feed DPO), §9 (GRPO's per-token ratios). Sampling
completions lives in ``course_lib.tinygpt.rollout``. No weights are downloaded: the model is initialised from
``GPT2Config`` with the task tokenizer's ids for bos/eos/pad.

Simplifications, said out loud:
- Prompts all have the same length (see ``course_lib.tinygpt.task``), so generation never needs left
  padding; position ids are still derived from the attention mask, so left-padded batches
  would also be handled correctly.
- Attention: batches are right-padded (pad after ``<eos>``), so ``completion_logprobs`` passes no
  mask and attention runs causally (SDPA's ``is_causal``, the fused kernels); a real token never
  sees a pad. A validated call checks the padding and falls back to a dense (N, 1, L, L) pattern
  for any other mask (identical numbers on the CPU: ``tests/test_tinygpt_core.py``).
- Sampling is plain temperature sampling (no top-k/top-p), so the sampling distribution is
  exactly the policy π_θ whose log-probs the losses use. ``<pad>`` and ``<bos>`` are never
  valid outputs: generation suppresses them and ``completion_logprobs`` removes them from
  the softmax too, so both sides use the same distribution over the 13 output tokens.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import torch
from transformers import GenerationConfig, GPT2Config, GPT2ForSequenceClassification, GPT2LMHeadModel
from transformers.modeling_outputs import BaseModelOutputWithPastAndCrossAttentions

from course_lib._validate import number
from course_lib.tinygpt.task import CharTokenizer


@dataclass
class ModelConfig:
    n_layer: int = 3
    n_embd: int = 96
    n_head: int = 4
    n_positions: int = 64


def _no_padding_check(input_ids, attention_mask) -> None:
    return None


def gpt2_config(config: ModelConfig, tokenizer: CharTokenizer, **extra) -> GPT2Config:
    """The one GPT-2 config of the course: the policy's, and (``num_labels=1``) the reward model's and critic's."""
    return GPT2Config(
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
        # GPT-2's tanh-approximated GELU, as torch's one fused kernel rather than the seven
        # elementwise ops of "gelu_new" (the same function; the update runs ~15% faster)
        activation_function="gelu_pytorch_tanh",
        **extra,
    )


def model_config_of(model) -> ModelConfig:
    """The ``ModelConfig`` a built GPT-2 (policy, reward model or critic) was made from."""
    c = model.config
    return ModelConfig(n_layer=c.n_layer, n_embd=c.n_embd, n_head=c.n_head, n_positions=c.n_positions)


def build_model(config: ModelConfig, tokenizer: CharTokenizer) -> GPT2LMHeadModel:
    """A randomly initialised GPT-2 (uses ``torch``'s global RNG: seed before calling)."""
    cfg = gpt2_config(config, tokenizer)
    model = GPT2LMHeadModel(cfg)
    # Without an attention mask transformers checks ``pad_token_id in input_ids[:, [-1, 0]]`` on every
    # forward, only to print a warning: a host read (and an index copy) per decoded token. Here a
    # missing mask means causal attention on right-padded rows, which is exact for every scored
    # position (``completion_logprobs``), so the check is switched off for this model.
    model.transformer.warn_if_padding_and_no_attention_mask = _no_padding_check
    model.generation_config = GenerationConfig(
        bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id,
        pad_token_id=tokenizer.pad_token_id,
    )
    return model


def build_scalar_model(config: ModelConfig, tokenizer: CharTokenizer, policy=None) -> GPT2ForSequenceClassification:
    """The network with a one-output head (TRL's reward and value model class), beside the policy's.

    With ``policy``, its transformer weights are copied in (InstructGPT initialises the reward
    model, TRL the value model, from the SFT policy); the head is fresh.
    """
    model = GPT2ForSequenceClassification(gpt2_config(config, tokenizer, num_labels=1))
    model.transformer.warn_if_padding_and_no_attention_mask = _no_padding_check  # as in build_model
    if policy is not None:
        model.transformer.load_state_dict(policy.transformer.state_dict())
    return model


# transformers 5.24 renamed the KV cache ``past_key_values`` -> ``cache``, both the output field and
# the forward keyword; Colab ships 5.15. The installed version's output class says which name it uses.
KV_CACHE_NAME = ("cache" if "cache" in BaseModelOutputWithPastAndCrossAttentions.__dataclass_fields__
                 else "past_key_values")


def kv_cache(output):
    """The KV cache a forward with ``use_cache=True`` returned, under the installed transformers' name."""
    return getattr(output, KV_CACHE_NAME)


def with_kv_cache(cache) -> dict:
    """The keyword argument that passes ``cache`` back to a forward: ``model(ids, **with_kv_cache(c))``."""
    return {KV_CACHE_NAME: cache}


NEVER_LOGIT = -1e9  # finite, so entropies stay 0·(−1e9) = 0 instead of NaN


@functools.cache
def suppressed_index(pad_token_id: int, bos_token_id: int, device: torch.device) -> torch.Tensor:
    """The ids never sampled or scored (``<pad>``, ``<bos>``) as an index tensor, made once per device
    (not one host-to-device copy per forward)."""
    return torch.tensor([pad_token_id, bos_token_id], device=device)


def n_params(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def position_ids(attention_mask: torch.Tensor) -> torch.Tensor:
    """0, 1, 2, … counted over real tokens only (left padding gets position 0)."""
    return (attention_mask.long().cumsum(-1) - 1).clamp(min=0)


def causal_attention(attention_mask: torch.Tensor) -> torch.Tensor:
    """The dense (N, 1, L, L) boolean attention pattern: causal, padding keys hidden (True = attend).

    Only for masks that are not right-padded (``completion_logprobs`` otherwise passes no mask and
    lets attention run causally, fused): it grows as N·L² and rules out the fused kernels. Built
    without reading the mask's values; a position always sees itself, so no row attends to nothing.
    """
    length = attention_mask.shape[-1]
    causal = torch.ones(length, length, dtype=torch.bool, device=attention_mask.device).tril()
    diagonal = torch.eye(length, dtype=torch.bool, device=attention_mask.device)
    return (causal & (attention_mask.bool()[:, None, :] | diagonal))[:, None].contiguous()


def right_padded(attention_mask: torch.Tensor) -> bool:
    """True when every row is 1s then 0s (a host read): causal attention alone is then exact."""
    return not bool((attention_mask[:, 1:] > attention_mask[:, :-1]).any())


def attention_pattern(attention_mask: torch.Tensor, *, validate: bool = True) -> torch.Tensor | None:
    """The attention mask to hand the transformer: ``None`` for right-padded rows, else the dense pattern.

    Right padding (every producer here pads after <eos>): a real token's causal window holds only
    real tokens, so plain causal attention gives every real position exactly its value with no mask
    at all (SDPA's is_causal: fused kernels, no N·L² tensor, and none of transformers' host reads of
    a 2-D mask). Padding positions change but are never read. Any other mask takes the dense
    pattern. ``validate=False`` skips the check (a host read) and assumes right padding: for
    trainers whose batches come from the course's own rollouts.
    """
    return causal_attention(attention_mask) if validate and not right_padded(attention_mask) else None


def completion_logprobs(
    model, input_ids, attention_mask, completion_mask, *, with_entropy=False, temperature=1.0, start=1, validate=True,
    group_size=1,
):
    """Per-token log π(y_t | x, y_<t) for completion tokens, aligned with ``input_ids[:, start:]`` (§6).

    ``input_ids``/``attention_mask``/``completion_mask`` have shape ``(N, L)``; the
    completion mask is 1 on completion tokens (prompt and padding are 0). The logits at
    position t − 1 predict token t, so each token is scored exactly once, by the position
    before it. ``start`` is the first position scored: the default 1 scores every position
    (shape ``(N, L − 1)``); pass the prompt length and the language-model head runs only where
    completion tokens are (shape ``(N, L − prompt_length)``). Returns ``(token_logps, mask)``
    with ``mask = completion_mask[:, start:]`` and exact zeros outside the completion — or
    ``(token_logps, mask, token_entropy)`` with ``with_entropy=True`` (computed outside the
    autograd graph: it is a diagnostic). ``temperature`` divides the logits first, so the
    log-probs are those of the distribution the sampler used (as TRL does). Sum over the last
    axis for a sequence log-prob. ``validate=False`` skips the checks that read tensor values
    (host synchronisations): for trainers that validated their batch once.

    ``group_size=G > 1``: rows ``g·G … g·G+G−1`` share the same first ``start`` tokens (G
    completions of one prompt, as rollouts produce them). The prompt then runs through the
    model once per group and its keys and values are shared by the G completions — the same
    numbers, about half the work when prompt and completion are equally long.
    """
    if input_ids.shape != attention_mask.shape or input_ids.shape != completion_mask.shape:
        raise ValueError(
            "input_ids, attention_mask and completion_mask must have the same shape; got "
            f"{tuple(input_ids.shape)}, {tuple(attention_mask.shape)}, {tuple(completion_mask.shape)}"
        )
    number(start, "start", integer=True, low=1, high=input_ids.shape[1] - 1)
    if validate and bool((completion_mask[:, :start] != 0).any()):
        raise ValueError(f"completion_mask[:, :{start}] must be 0: positions before start are never scored")
    rows = f" dividing the {input_ids.shape[0]} rows"
    if number(group_size, "group_size", integer=True, low=1, why=rows) and input_ids.shape[0] % group_size:
        raise ValueError(f"group_size must be an integer >= 1{rows}; got {group_size!r}")
    if validate and group_size > 1:
        heads = input_ids[:, :start].view(-1, group_size, start)
        if bool((heads != heads[:, :1]).any()):
            raise ValueError(f"group_size={group_size}: rows of a group must share their first start={start} tokens")
    # Right padding needs no mask at all (see attention_pattern); validate=False assumes it.
    dense = validate and not right_padded(attention_mask)

    def pattern(mask):
        return causal_attention(mask) if dense else None

    if group_size == 1:
        hidden = model.transformer(
            input_ids=input_ids,
            attention_mask=pattern(attention_mask),
            position_ids=position_ids(attention_mask),
            use_cache=False,
        ).last_hidden_state[:, start - 1 : -1]
    else:
        prompt = model.transformer(
            input_ids=input_ids[::group_size, :start],
            attention_mask=pattern(attention_mask[::group_size, :start]),
            position_ids=position_ids(attention_mask[::group_size, :start]),
            use_cache=True,
        )
        cache = kv_cache(prompt)
        cache.batch_repeat_interleave(group_size)
        rest = model.transformer(
            input_ids=input_ids[:, start:],
            attention_mask=causal_attention(attention_mask)[:, :, start:].contiguous() if dense else None,
            position_ids=position_ids(attention_mask)[:, start:],
            use_cache=True,
            **with_kv_cache(cache),
        ).last_hidden_state
        last_prompt = prompt.last_hidden_state[:, -1:].repeat_interleave(group_size, dim=0)
        hidden = torch.cat([last_prompt, rest[:, :-1]], dim=1)
    logits = model.lm_head(hidden).float()  # position t-1 ...
    if temperature != 1.0:
        logits = logits / temperature
    never = suppressed_index(model.config.pad_token_id, model.config.bos_token_id, logits.device)
    logits = logits.index_fill(-1, never, NEVER_LOGIT)  # same distribution as generation (suppress_tokens)
    targets = input_ids[:, start:]  # ... predicts token t
    mask = completion_mask[:, start:].to(logits.dtype)
    logp_all = torch.log_softmax(logits, dim=-1)
    token_logps = logp_all.gather(-1, targets.unsqueeze(-1)).squeeze(-1) * mask
    if not with_entropy:
        return token_logps, mask
    with torch.no_grad():
        entropy = -(logp_all.exp() * logp_all).sum(-1) * mask
    return token_logps, mask, entropy
