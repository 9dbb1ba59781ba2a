"""KTO's unpaired data and batches, and the ORPO stage's start from the base model (cheap, no training)."""

from __future__ import annotations

import pytest
import torch

from course_lib.formulas.preference import label_balance, mismatched_order
from course_lib.run.pipeline import build_policy
from course_lib.tinygpt.model import build_model
from course_lib.tinygpt.task import AdditionTask
from course_lib.trainers.configs import KTOConfig, get_config
from course_lib.trainers.kto import kto_batch_loss, kto_batches, unpaired_examples
from course_lib.trainers.orpo import base_weights

P = 5  # prompt length of the 1-digit task


def _pairs(n=6):
    # chosen row i: prompt i then completion token 100+i; rejected: 200+i (recognisable after shuffling)
    ids_c = torch.arange(P)[None, :].repeat(n, 1)
    out = {}
    for side, base in (("chosen", 100), ("rejected", 200)):
        ids = torch.cat([ids_c + 10 * torch.arange(n)[:, None], (base + torch.arange(n))[:, None]], 1)
        comp = torch.zeros_like(ids)
        comp[:, P:] = 1
        out.update({f"{side}_ids": ids, f"{side}_attention": torch.ones_like(ids), f"{side}_completion": comp})
    return out


def test_pairs_taken_apart_and_batches_mismatched_as_trl_does():
    ex = unpaired_examples(_pairs())
    assert ex["label"].tolist() == [True] * 6 + [False] * 6
    assert ex["ids"][:, P].tolist() == list(range(100, 106)) + list(range(200, 206))
    data = kto_batches(ex, 4, prompt_length=P, generator=torch.Generator().manual_seed(0))
    assert (data["n_batches"] == 3 and data["ids"].shape[0] == 12
            and (data["n_desirable"], data["n_undesirable"]) == (6, 6))
    for s in range(3):
        rows = slice(4 * s, 4 * s + 4)
        assert torch.equal(data["kl_ids"][rows, :P], data["ids"][rows, :P])  # own prompt
        # row j-1's answer
        assert data["kl_ids"][rows, P].tolist() == data["ids"][rows, P][mismatched_order(4)].tolist()


def test_imbalanced_subset_keeps_every_undesirable_answer():
    ex = unpaired_examples(_pairs(), desirable_fraction=0.34, generator=torch.Generator().manual_seed(1))
    assert int(ex["label"].sum()) == 2 and int((~ex["label"]).sum()) == 6
    k = KTOConfig()
    assert label_balance(2, 6, desirable_weight=k.desirable_weight,
                         undesirable_weight=k.undesirable_weight) == pytest.approx(1 / 3)
    assert label_balance(2, 0) == float("inf")


def test_kto_trains_on_desirable_answers_only_and_refuses_a_single_answer():
    cfg = get_config("test")
    task = AdditionTask(cfg.task)
    torch.manual_seed(0)
    model = build_model(cfg.model, task.tokenizer)
    prompts = [(1, 2), (3, 4), (5, 1)]
    ids, attn, comp = task.encode_pairs(prompts, [str(a + b) for a, b in prompts])
    only_good = {"ids": ids, "attention": attn, "completion": comp, "label": torch.ones(3, dtype=torch.bool)}
    data = kto_batches(only_good, 3, prompt_length=task.prompt_length, generator=torch.Generator().manual_seed(0))
    batch = {k: v for k, v in data.items() if isinstance(v, torch.Tensor)}
    width = ids.shape[1] - task.prompt_length
    batch["ref_token_logps"] = torch.full((3, width), -1.0) * comp[:, task.prompt_length:]
    batch["ref_kl_token_logps"] = torch.full((3, width), -20.0) * comp[:, task.prompt_length:]  # z0 > 0
    loss, stats = kto_batch_loss(model, batch, KTOConfig(), prompt_length=task.prompt_length)
    loss.backward()
    assert stats["desirable_share"] == 1.0 and stats["kl"] > 0
    assert all(p.grad is not None for p in model.parameters() if p.requires_grad)
    with pytest.raises(ValueError, match="at least 2 answers"):
        kto_batches({k: v[:1] for k, v in only_good.items()}, 4, prompt_length=P, generator=torch.Generator())


def test_orpo_starts_from_the_runs_base_initialisation_without_touching_the_rng():
    cfg = get_config("test")
    _, model = build_policy(cfg, seed=3, device="cpu")
    state = torch.random.get_rng_state()
    base = base_weights(cfg, AdditionTask(cfg.task), 3)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(base[k], v) for k, v in model.state_dict().items())
