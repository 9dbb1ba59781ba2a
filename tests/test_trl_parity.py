"""Parity with Hugging Face TRL, computed by TRL's own code on identical tensors.

Each test builds a real TRL trainer around the tiny GPT (float64, so 1e-6 relative is a statement
about formulas, not rounding) and calls the method TRL itself trains with:

- advantages: ``GRPOTrainer._generate_and_score_completions`` / ``RLOOTrainer``'s, with a reward
  function that returns rewards we chose, against ``course_lib.formulas.advantages``;
- policy losses: ``GRPOTrainer._compute_loss`` on one batch with perturbed old log-probs (so the
  clip is active), against ``clipped_surrogate`` + ``aggregate`` (+ ``kl_estimate``) on TRL's
  own per-token log-probs — values and gradients;
- preference losses: ``DPOTrainer._compute_loss`` on a batch from TRL's own collator, and
  ``CPOTrainer.cpo_loss`` (SimPO), against ``course_lib.formulas.preference``.

Where the formulas are meant to agree they agree to 1e-6 relative; where they are not (the course
trainer's population-std GRPO advantage) the test pins the exact relation instead. Skipped, with
the reason, when TRL is not installed (``pip install -e .[trl]``).
"""

from __future__ import annotations

import dataclasses

import pytest
import torch

trl = pytest.importorskip("trl", reason="TRL is not installed: pip install -e '.[trl]' (make test installs it)")

from course_lib.formulas.advantages import dr_grpo_advantages, grpo_advantages, rloo_advantages  # noqa: E402
from course_lib.formulas.policy_loss import (  # noqa: E402
    aggregate,
    cispo_objective,
    clipped_surrogate,
    kl_estimate,
    sequence_ratio,
)
from course_lib.formulas.preference import (  # noqa: E402
    dpo_terms,
    ipo_loss,
    kto_loss,
    kto_reference_point,
    mismatched_order,
    odds_ratio_penalty,
    simpo_loss,
)
from course_lib.tinygpt.model import build_model  # noqa: E402
from course_lib.tinygpt.task import AdditionTask  # noqa: E402
from course_lib.trainers.configs import get_config  # noqa: E402
from course_lib.trl import trl_bridge  # noqa: E402

REL = 1e-6
G = 4


def close(a, b, rel=REL):
    a, b = torch.as_tensor(a, dtype=torch.float64), torch.as_tensor(b, dtype=torch.float64)
    scale = max(float(a.abs().max()), float(b.abs().max()), 1e-12)
    return float((a - b).abs().max()) <= rel * scale


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    trl_bridge.quiet()
    cfg = get_config("test")
    cfg.grpo = dataclasses.replace(cfg.grpo, num_generations=G, batch_prompts=4, max_completion_length=4)
    task = AdditionTask(cfg.task)
    torch.manual_seed(0)
    model = build_model(cfg.model, task.tokenizer).double()
    return cfg, task, model, str(tmp_path_factory.mktemp("trl"))


def _online_trainer(setup, kind="grpo", **grpo):
    cfg, task, model, out = setup
    cfg = dataclasses.replace(cfg, grpo=dataclasses.replace(cfg.grpo, **grpo))
    trainer, _ = trl_bridge.make_trainer(kind, model, task, cfg, output_dir=out)
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    return trainer, cfg


def _trl_advantages(trainer, task, rewards: torch.Tensor) -> torch.Tensor:
    """Run TRL's own rollout-and-score step with a reward function that returns ``rewards``."""
    pairs = task.sample_pairs(rewards.shape[0], torch.Generator().manual_seed(1))
    flat = rewards.flatten().tolist()

    def chosen(prompts, completions, completion_ids, r, **kwargs):
        return list(r)

    trainer.reward_funcs = [chosen]
    trainer.reward_func_names = ["chosen"]
    rows = [{"prompt": trl_bridge.prompt_text(task, a, b), "a": a, "b": b, "r": flat[i * G + j]}
            for i, (a, b) in enumerate(pairs) for j in range(G)]
    return trainer._generate_and_score_completions(rows)["advantages"].double().view(-1, G)


REWARDS = {
    "binary with a zero-variance group": torch.tensor([[1, 0, 0, 1], [1, 1, 1, 1], [0, 0, 0, 1], [0, 1, 1, 1.0]]),
    "continuous": torch.rand(4, G, generator=torch.Generator().manual_seed(3), dtype=torch.float64),
}


@pytest.mark.parametrize("name", REWARDS)
def test_grpo_advantages_ddof1_epsilon_1e4_are_trl_scale_rewards_group(setup, name):
    trainer, _ = _online_trainer(setup, advantage="grpo")
    assert trainer.scale_rewards == "group"
    rewards = REWARDS[name]
    theirs = _trl_advantages(trainer, setup[1], rewards)
    assert close(theirs, grpo_advantages(rewards, ddof=1, epsilon=1e-4, on_degenerate="zeros"))
    # the course trainer's default (population std, no epsilon) is a different, pinned scale
    ours = grpo_advantages(rewards, on_degenerate="zeros")
    informative = rewards.std(-1) > 0
    std1 = rewards[informative].std(-1, correction=1, keepdim=True)
    factor = std1 * ((G - 1) / G) ** 0.5 / (std1 + 1e-4)  # population std / (sample std + 1e-4)
    assert close(theirs[informative], ours[informative] * factor)


@pytest.mark.parametrize("name", REWARDS)
def test_dr_grpo_advantages_are_trl_scale_rewards_none(setup, name):
    trainer, _ = _online_trainer(setup, advantage="dr_grpo")
    assert trainer.scale_rewards == "none"
    assert close(_trl_advantages(trainer, setup[1], REWARDS[name]), dr_grpo_advantages(REWARDS[name]))


@pytest.mark.parametrize("name", REWARDS)
def test_rloo_advantages_are_trl_rloo_trainer(setup, name):
    trainer, _ = _online_trainer(setup, kind="rloo", advantage="rloo")
    assert close(_trl_advantages(trainer, setup[1], REWARDS[name]), rloo_advantages(REWARDS[name]))


def _batch(task, model, *, truncated_rows=()):
    """A GRPO batch of 8 completions with varied lengths, as TRL's _compute_loss consumes it."""
    gen = torch.Generator().manual_seed(7)
    n, T = 2 * G, 4
    prompt_ids = task.encode_prompts(task.sample_pairs(n, gen))
    lengths = torch.tensor([1, 2, 3, 4, 4, 2, 3, 1])
    completion_mask = (torch.arange(T)[None, :] < lengths[:, None]).long()
    completion_ids = torch.randint(3, len(task.tokenizer), (n, T), generator=gen) * completion_mask
    for r in truncated_rows:  # TRL zeroes the whole row's mask under mask_truncated_completions
        completion_mask[r] = 0
    advantages = torch.randn(n, generator=gen, dtype=torch.float64)
    return {
        "prompt_ids": prompt_ids, "prompt_mask": torch.ones_like(prompt_ids),
        "completion_ids": completion_ids, "completion_mask": completion_mask,
        "advantages": advantages, "num_items_in_batch": completion_mask.sum(),
    }


LOSSES = [  # (course unit, TRL loss_type, eps_low, eps_high, beta, truncated rows)
    ("sequence_mean", "grpo", 0.2, 0.2, 0.0, ()),
    ("token_mean", "dapo", 0.2, 0.28, 0.0, ()),
    ("token_mean", "bnpo", 0.2, 0.2, 0.0, ()),
    ("constant", "dr_grpo", 0.1, 0.3, 0.0, ()),
    ("token_mean", "dapo", 0.2, 0.2, 0.04, ()),
    ("sequence_mean", "grpo", 0.2, 0.2, 0.0, (1, 4, 6)),  # mask_truncated: rows stay in the denominator
    ("constant", "dr_grpo", 0.2, 0.2, 0.0, (0, 2, 3, 5)),
]


@pytest.mark.parametrize(("unit", "loss_type", "eps_low", "eps_high", "beta", "truncated"), LOSSES)
def test_clipped_surrogate_and_units_are_trl_compute_loss(setup, unit, loss_type, eps_low, eps_high, beta, truncated):
    cfg, task, model, _ = setup
    advantage = "dr_grpo" if loss_type == "dr_grpo" else "grpo"
    trainer, cfg = _online_trainer(setup, unit=unit, epsilon=eps_low, epsilon_high=eps_high, beta=beta,
                                   advantage=advantage, mask_truncated=bool(truncated))
    trainer.loss_type = loss_type  # bnpo is TRL's second name for the token mean on one process
    inputs = _batch(task, model, truncated_rows=truncated)
    logps_of = _perturbed_old_logps(trainer, model, inputs, with_ref=bool(beta))

    def ours():
        logps = logps_of()
        ratio = torch.exp(logps - inputs["old_per_token_logps"])
        objective, clipped = clipped_surrogate(ratio, inputs["advantages"], eps_low, eps_high, return_clipped=True)
        assert bool((clipped & inputs["completion_mask"].bool()).any()), "the clip must be active somewhere"
        if beta:
            objective = objective - beta * kl_estimate(logps, inputs["ref_per_token_logps"], "k3")
        return -aggregate(objective, inputs["completion_mask"], unit, max_length=cfg.grpo.max_completion_length)

    _theirs_and_ours(trainer, model, inputs, ours)


def _perturbed_old_logps(trainer, model, inputs, *, with_ref=False):
    """Old (and, ``with_ref``, reference) log-probs moved off TRL's own ones, so the clip is active;
    returns a function giving the policy's differentiable per-token log-probs of the batch."""
    ids = torch.cat([inputs["prompt_ids"], inputs["completion_ids"]], 1)
    attn = torch.cat([inputs["prompt_mask"], inputs["completion_mask"]], 1)
    T = inputs["completion_ids"].shape[1]
    with torch.no_grad():
        logps0, _, _ = trainer._get_per_token_logps_and_entropies(model, ids, attn, T)
    gen = torch.Generator().manual_seed(11)
    inputs["old_per_token_logps"] = logps0 + 0.4 * torch.randn(logps0.shape, generator=gen, dtype=torch.float64)
    if with_ref:
        inputs["ref_per_token_logps"] = logps0 + 0.3 * torch.randn(logps0.shape, generator=gen, dtype=torch.float64)
    return lambda: trainer._get_per_token_logps_and_entropies(model, ids, attn, T)[0]


def _theirs_and_ours(trainer, model, inputs, ours_from_logps):
    model.zero_grad()
    theirs = trainer._compute_loss(model, inputs)
    theirs.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    ours = ours_from_logps()
    ours.backward()
    assert close(theirs.detach(), ours.detach())
    for g_theirs, p in zip(grads, model.parameters()):
        assert close(g_theirs, p.grad)


@pytest.mark.parametrize("truncated", [(), (1, 4)])
def test_gspo_is_trl_sequence_level_importance_sampling(setup, truncated):
    """GSPO = TRL's importance_sampling_level="sequence" with loss_type="grpo" (its recommended unit)."""
    cfg, task, model, _ = setup
    trainer, cfg = _online_trainer(setup, unit="sequence_mean", epsilon=0.1, epsilon_high=0.1,
                                   mask_truncated=bool(truncated))
    trainer.importance_sampling_level = "sequence"
    inputs = _batch(task, model, truncated_rows=truncated)
    logps_of = _perturbed_old_logps(trainer, model, inputs)
    mask = inputs["completion_mask"]
    s0 = sequence_ratio(logps_of().detach(), inputs["old_per_token_logps"], mask)
    assert bool(((s0 - 1).abs() > 0.1).any()), "some completion's ratio must be outside the clip band"

    def ours():
        s = sequence_ratio(logps_of(), inputs["old_per_token_logps"], mask)
        objective = clipped_surrogate(s, inputs["advantages"], 0.1, 0.1)
        return -aggregate(objective[:, None].expand(mask.shape), mask, "sequence_mean")

    _theirs_and_ours(trainer, model, inputs, ours)


def test_cispo_is_trl_loss_type_cispo(setup):
    """CISPO = TRL's loss_type="cispo" (epsilon_high is ε_max), normalised by the batch's tokens."""
    cfg, task, model, _ = setup
    trainer, cfg = _online_trainer(setup, unit="token_mean")
    trainer.loss_type, trainer.epsilon_high = "cispo", 1.3
    inputs = _batch(task, model)
    logps_of = _perturbed_old_logps(trainer, model, inputs)

    def ours():
        logps = logps_of()
        ratio = torch.exp(logps - inputs["old_per_token_logps"])
        objective, capped = cispo_objective(ratio, inputs["advantages"], logps, eps_max=1.3, return_clipped=True)
        assert bool((capped & inputs["completion_mask"].bool()).any()), "the cap must be active somewhere"
        return -aggregate(objective, inputs["completion_mask"], "token_mean")

    _theirs_and_ours(trainer, model, inputs, ours)


def _dpo_trainer(setup, **dpo):
    cfg, task, model, out = setup
    cfg = dataclasses.replace(cfg, dpo=dataclasses.replace(cfg.dpo, **dpo))
    torch.manual_seed(1)
    policy = build_model(cfg.model, task.tokenizer).double()
    trainer, bridged = trl_bridge.make_trainer("dpo", policy, task, cfg, output_dir=out, pairs=_pairs(task))
    with torch.no_grad():  # move the policy away from the reference TRL just cached
        for p in policy.parameters():
            p.add_(0.05 * torch.randn_like(p))
    return trainer, cfg, bridged


def _pairs(task):
    gen = torch.Generator().manual_seed(5)
    prompts = task.sample_pairs(6, gen)
    chosen = [str(a + b) for a, b in prompts]
    rejected = [str((a + b + 1) % 10) + "1" * (i % 2) for i, (a, b) in enumerate(prompts)]  # different lengths
    ids_c, attn_c, comp_c = task.encode_pairs(prompts, chosen)
    ids_r, attn_r, comp_r = task.encode_pairs(prompts, rejected)
    return {"n_pairs": 6, "chosen_ids": ids_c, "chosen_attention": attn_c, "rejected_ids": ids_r,
            "rejected_attention": attn_r}


def _sequence_logps(model, ids, attn, cmask):
    logits = model(input_ids=ids, attention_mask=attn).logits[:, :-1]
    tok = torch.log_softmax(logits, -1).gather(-1, ids[:, 1:, None]).squeeze(-1)
    mask = cmask[:, 1:].to(tok.dtype)
    return (tok * mask).sum(-1), mask.sum(-1), tok * mask, mask


@pytest.mark.parametrize(("loss_type", "rpo_alpha"), [("sigmoid", 0.0), ("sigmoid", 0.7), ("ipo", 0.0)])
def test_dpo_losses_are_trl_dpo_trainer(setup, loss_type, rpo_alpha):
    trainer, cfg, _ = _dpo_trainer(setup, loss_type=loss_type, rpo_alpha=rpo_alpha, beta=0.3)
    model = trainer.model
    batch = next(iter(trainer.get_train_dataloader()))
    theirs = trainer._compute_loss(model, batch, return_outputs=False)
    seq, lengths, tok, mask = _sequence_logps(model, batch["input_ids"], batch["attention_mask"],
                                              batch["completion_mask"])
    n = seq.shape[0] // 2
    pw, pl, rw, rl = seq[:n], seq[n:], batch["ref_chosen_logps"], batch["ref_rejected_logps"]
    if loss_type == "sigmoid":
        ours = dpo_terms(pw, pl, rw, rl, beta=0.3).loss.mean()
    else:  # TRL's IPO is the length-normalised form
        ours = ipo_loss(pw, pl, rw, rl, beta=0.3, chosen_lengths=lengths[:n], rejected_lengths=lengths[n:]).mean()
    if rpo_alpha:
        ours = ours + rpo_alpha * (-tok[:n].sum() / mask[:n].sum())
    assert close(theirs.detach(), ours.detach())
    if loss_type == "ipo":  # and the course trainer's summed form is not TRL's
        summed = ipo_loss(pw, pl, rw, rl, beta=0.3).mean()
        assert not close(theirs.detach(), summed.detach(), rel=1e-3)


def test_simpo_is_trl_cpo_trainer_simpo(setup):
    trainer, cfg, bridged = _dpo_trainer(setup, loss_type="simpo", beta=2.0, simpo_gamma=0.5)
    assert bridged.trainer == "CPOTrainer" and trainer.cpo_alpha == 0
    gen = torch.Generator().manual_seed(9)
    sums_w, sums_l = -5 * torch.rand(8, generator=gen, dtype=torch.float64), -5 * torch.rand(8, generator=gen,
                                                                                             dtype=torch.float64)
    len_w, len_l = torch.randint(1, 6, (8,), generator=gen).double(), torch.randint(1, 6, (8,), generator=gen).double()
    theirs, _, _ = trainer.cpo_loss(sums_w / len_w, sums_l / len_l)  # CPO averages log-probs for SimPO
    assert close(theirs, simpo_loss(sums_w, sums_l, len_w, len_l, beta=2.0, gamma=0.5))


# ---- KTO and ORPO: TRL's own loss code on the same tensors ----------------------------------------

def _kto_trainer(setup, *, labels, seeds, beta=0.3, desirable_weight=1.3, undesirable_weight=0.7):
    from datasets import Dataset
    from trl import KTOConfig, KTOTrainer

    cfg, task, _, out = setup
    torch.manual_seed(seeds[0])
    policy = build_model(cfg.model, task.tokenizer).double()
    torch.manual_seed(seeds[1])
    ref = build_model(cfg.model, task.tokenizer).double()
    prompts = task.sample_pairs(len(labels), torch.Generator().manual_seed(5))
    answers = [str(a + b) if ok else str((a + b + 1) % 10) + "1" * (i % 2) for i, ((a, b), ok) in
               enumerate(zip(prompts, labels))]
    data = Dataset.from_dict({"prompt": [trl_bridge.prompt_text(task, a, b) for a, b in prompts],
                              "completion": answers, "label": list(labels)})
    args = KTOConfig(output_dir=out, per_device_train_batch_size=len(labels), beta=beta,
                     desirable_weight=desirable_weight, undesirable_weight=undesirable_weight, use_cpu=True,
                     bf16=False, report_to="none", disable_tqdm=True, precompute_ref_log_probs=False,
                     gradient_checkpointing=None, activation_checkpointing=False)
    trainer = KTOTrainer(model=policy, ref_model=ref, args=args, processing_class=task.tokenizer, train_dataset=data)
    return trainer, policy, ref


@pytest.mark.parametrize(("labels", "seeds", "clamped"), [
    ((True, False, True, True, False, False), (3, 1), False),
    ((True, True, True), (1, 2), True),  # desirable answers only, and a negative KL estimate clamped to 0
])
def test_kto_is_trl_kto_trainer(setup, labels, seeds, clamped):
    """KTO = TRL's ``KTOTrainer._compute_loss``: values and gradients, z0 from TRL's mismatched pairs.

    The second case has desirable answers only: TRL trains on it, and so does the course (kto.py's docstring).
    """
    trainer, policy, ref = _kto_trainer(setup, labels=labels, seeds=seeds)
    trainer.model.train()
    batch = next(iter(trainer.get_train_dataloader()))
    n = len(labels)
    # TRL's mismatched pairs are preference.mismatched_order: row j's prompt with row j-1's completion
    answers = [batch["input_ids"][j][batch["completion_mask"][j].bool()].tolist() for j in range(n)]
    kl_answers = [batch["KL_input_ids"][j][batch["KL_completion_mask"][j].bool()].tolist() for j in range(n)]
    assert kl_answers == [answers[i] for i in mismatched_order(n)]
    policy.zero_grad()
    theirs = trainer._compute_loss(policy, batch, return_outputs=False)
    theirs.backward()
    grads = [p.grad.clone() for p in policy.parameters()]
    policy.zero_grad()
    seq, _, _, _ = _sequence_logps(policy, batch["input_ids"], batch["attention_mask"], batch["completion_mask"])
    with torch.no_grad():
        ref_seq, _, _, _ = _sequence_logps(ref, batch["input_ids"], batch["attention_mask"], batch["completion_mask"])
        kl_args = (batch["KL_input_ids"], batch["KL_attention_mask"], batch["KL_completion_mask"])
        z0 = kto_reference_point(_sequence_logps(policy, *kl_args)[0], _sequence_logps(ref, *kl_args)[0])
    assert (float(z0) == 0.0) if clamped else (float(z0) > 0.01), float(z0)
    ours = kto_loss(seq, ref_seq, batch["label"], z0, beta=0.3, desirable_weight=1.3, undesirable_weight=0.7).mean()
    ours.backward()
    assert close(theirs.detach(), ours.detach())
    for g_theirs, p in zip(grads, policy.parameters()):
        assert close(g_theirs, p.grad)


def test_orpo_is_trl_orpo_trainer(setup):
    """ORPO = TRL's ``ORPOTrainer.get_batch_loss_metrics``: NLL + β · ``odds_ratio_penalty``, values and gradients.

    TRL's NLL counts the prompt tokens too (its comment: "computed over the full prompt and response"),
    the course trainer's only the completion (course_lib.trainers.orpo's docstring); the penalty is the same.
    TRL computes the odds in float32, hence 1e-5.
    """
    from datasets import Dataset
    from trl.experimental.orpo import ORPOConfig, ORPOTrainer

    cfg, task, _, out = setup
    torch.manual_seed(1)
    policy = build_model(cfg.model, task.tokenizer).double()
    prompts = task.sample_pairs(6, torch.Generator().manual_seed(5))
    data = Dataset.from_dict({"prompt": [trl_bridge.prompt_text(task, a, b) for a, b in prompts],
                              "chosen": [str(a + b) for a, b in prompts],
                              "rejected": [str((a + b + 1) % 10) + "1" * (i % 2) for i, (a, b) in enumerate(prompts)]})
    args = ORPOConfig(output_dir=out, per_device_train_batch_size=6, beta=0.25, use_cpu=True, bf16=False,
                      report_to="none", disable_tqdm=True, max_length=16)
    trainer = ORPOTrainer(model=policy, args=args, processing_class=task.tokenizer, train_dataset=data)
    batch = next(iter(trainer.get_train_dataloader()))
    policy.zero_grad()
    theirs, _ = trainer.get_batch_loss_metrics(policy, batch)
    theirs.backward()
    grads = [p.grad.clone() for p in policy.parameters()]
    policy.zero_grad()
    sides = {}
    for side in ("chosen", "rejected"):
        ids, attn = batch[f"{side}_input_ids"], batch[f"{side}_attention_mask"]
        sides[side] = _sequence_logps(policy, ids, attn, (batch[f"{side}_labels"] != -100).long())
    (sw, nw, _, _), (sl, nl, _, _) = sides["chosen"], sides["rejected"]
    ids, attn = batch["chosen_input_ids"], batch["chosen_attention_mask"]
    nll_full = -_sequence_logps(policy, ids, attn, attn)[0].sum() / attn[:, 1:].sum()  # prompt + completion tokens
    ours = nll_full + 0.25 * odds_ratio_penalty(sw, sl, nw, nl).mean()
    ours.backward()
    assert close(theirs.detach(), ours.detach(), rel=1e-5)
    for g_theirs, p in zip(grads, policy.parameters()):
        assert close(g_theirs, p.grad, rel=1e-5)
