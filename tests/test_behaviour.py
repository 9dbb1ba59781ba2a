"""The behaviour correction π_old/π_behaviour (course_lib.formulas.behaviour): hand-made tensors, and TRL's own code.

The cap and the mask do what they say on tensors whose ratios we chose; the ratio is exactly 1
when sampler and trainer agree; bad bounds are refused by name; and on identical tensors the
weights equal the ``importance_sampling_ratio`` that TRL 1.16's ``GRPOTrainer`` computes (its
``vllm_importance_sampling_*`` code, run by TRL itself with a sampler's log-probs we chose),
and the corrected loss equals TRL's ``_compute_loss`` — value and gradient.
"""

from __future__ import annotations

import dataclasses
import math

import pytest
import torch

from course_lib.formulas.behaviour import IS_MODES, behaviour_weights, check_bounds, mismatch

LN = math.log


def _pair(ratios):
    """old and sampler log-probs (1, T) whose per-token ratio old/sampler is ``ratios``."""
    sampler = torch.full((1, len(ratios)), -1.0, dtype=torch.float64)
    return sampler + torch.tensor([[LN(r) for r in ratios]], dtype=torch.float64), sampler


@pytest.mark.parametrize("mode", IS_MODES)
def test_weights_are_exactly_one_when_sampler_and_trainer_agree(mode):
    logps = -torch.rand(3, 5, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 3
    mask = torch.tensor([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1], [1, 0, 0, 0, 0]])
    w, outside = behaviour_weights(logps, logps.clone(), mask, mode, 0.5, 2.0)
    assert bool((w == 1).all()) and not bool(outside.any())
    d = mismatch(logps, logps.clone(), mask, w, outside)
    assert float(d["mismatch_kl"]) == 0.0 and float(d["is_ess"]) == 1.0 and float(d["is_clipped_fraction"]) == 0.0


def test_token_truncate_caps_each_token_into_the_band():
    old, sampler = _pair([0.25, 1.0, 1.5, 5.0])
    w, outside = behaviour_weights(old, sampler, torch.ones(1, 4), "token_truncate", 0.5, 2.0)
    assert torch.allclose(w, torch.tensor([[0.5, 1.0, 1.5, 2.0]], dtype=torch.float64))
    assert outside.tolist() == [[True, False, False, True]]
    w, _ = behaviour_weights(old, sampler, torch.ones(1, 4), "token_truncate", None, 2.0)  # no lower bound
    assert torch.allclose(w, torch.tensor([[0.25, 1.0, 1.5, 2.0]], dtype=torch.float64))


def test_token_mask_zeroes_tokens_outside_the_band_and_keeps_the_others_unbounded_inside():
    old, sampler = _pair([0.25, 1.0, 1.5, 5.0])
    w, outside = behaviour_weights(old, sampler, torch.ones(1, 4), "token_mask", 0.5, 2.0)
    assert torch.allclose(w, torch.tensor([[0.0, 1.0, 1.5, 0.0]], dtype=torch.float64))
    d = mismatch(old, sampler, torch.ones(1, 4), w, outside)
    assert float(d["is_clipped_fraction"]) == 0.5
    assert math.isclose(float(d["is_ess"]), 2.5**2 / (4 * (1 + 1.5**2)))  # (Σw)² / (n Σw²)


def test_sequence_modes_use_the_product_over_real_tokens_only():
    old, sampler = _pair([2.0, 1.5, 7.0])  # the third token is padding: it never counts
    mask = torch.tensor([[1, 1, 0]])
    w, outside = behaviour_weights(old, sampler, mask, "sequence_truncate", None, 2.0)
    assert w.shape == (1, 1) and math.isclose(float(w), 2.0) and bool(outside)  # 2 · 1.5 = 3 > 2: capped
    w, _ = behaviour_weights(old, sampler, mask, "sequence_truncate", None, 4.0)
    assert math.isclose(float(w), 3.0)
    w, outside = behaviour_weights(old, sampler, mask, "sequence_mask", None, 2.0)
    assert float(w) == 0.0  # the whole completion leaves the update
    assert float(mismatch(old, sampler, mask, w, outside)["is_clipped_fraction"]) == 1.0  # its 2 real tokens


def test_mismatch_kl_is_k3_of_behaviour_against_old_on_real_tokens():
    old, sampler = _pair([2.0, 0.5])
    w, outside = behaviour_weights(old, sampler, torch.ones(1, 2), "token_truncate", None, 3.0)
    # samples come from the behaviour policy: log r = log π_old − log π_b = log ρ; k3 = (ρ − 1) − log ρ
    expected = ((2.0 - 1 - LN(2.0)) + (0.5 - 1 - LN(0.5))) / 2
    assert math.isclose(float(mismatch(old, sampler, torch.ones(1, 2), w, outside)["mismatch_kl"]), expected)


@pytest.mark.parametrize(("mode", "lo", "hi", "match"), [
    ("token_clip", None, 3.0, "vllm_importance_sampling_mode must be one of"),
    ("token_truncate", 2.0, 2.0, "clip_min .* must be less than"),
    ("sequence_truncate", None, None, "set at least one of"),
    ("token_mask", -1.0, 3.0, "clip_min must be None \\(no bound\\) or a finite number >= 0"),
    ("token_mask", None, float("nan"), "clip_max must be None \\(no bound\\) or a finite number >= 0"),
])
def test_bad_bounds_are_refused_by_name(mode, lo, hi, match):
    with pytest.raises(ValueError, match=match):
        check_bounds(mode, lo, hi)


@pytest.mark.parametrize("mode", IS_MODES)
def test_a_nan_sampler_log_prob_means_no_correction_checked_or_not(mode):
    # as TRL's nan_to_num: the token's log-ratio counts as 0, in the validated first step and in the hot loop alike
    old = torch.tensor([[-1.0, -2.0, -0.5], [-0.3, -0.2, -0.1]])
    sampler = torch.tensor([[float("nan"), -2.5, -0.5], [-0.4, -0.2, -0.1]])
    mask = torch.ones(2, 3)
    checked = behaviour_weights(old, sampler, mask, mode, 0.1, 3.0, validate=True)
    hot = behaviour_weights(old, sampler, mask, mode, 0.1, 3.0, validate=False)
    clean = behaviour_weights(old, torch.where(sampler.isnan(), old, sampler), mask, mode, 0.1, 3.0)
    for a, b, c in zip(checked, hot, clean, strict=True):
        assert torch.equal(a, b) and torch.equal(a, c)
    with pytest.raises(ValueError, match="old_logps must contain only finite values"):
        behaviour_weights(sampler, old, mask, mode, 0.1, 3.0)  # the trainer's own log-probs are never NaN


def test_masks_without_an_upper_bound_are_allowed_as_in_trl():
    check_bounds("token_mask", 0.5, None)
    check_bounds("sequence_mask", None, None)  # TRL allows it: nothing is masked


# ---- parity with TRL's own correction code -------------------------------------------------------------
G = 4


@pytest.fixture(scope="module")
def trl_setup(tmp_path_factory):
    pytest.importorskip("trl", reason="TRL is not installed: pip install -e '.[trl]'")
    from course_lib.tinygpt.model import build_model
    from course_lib.tinygpt.task import AdditionTask
    from course_lib.trainers.configs import get_config
    from course_lib.trl import trl_bridge

    trl_bridge.quiet()
    cfg = get_config("test")
    cfg.grpo = dataclasses.replace(cfg.grpo, num_generations=G, batch_prompts=2, max_completion_length=4,
                                   unit="sequence_mean")
    task = AdditionTask(cfg.task)
    torch.manual_seed(0)
    model = build_model(cfg.model, task.tokenizer).double()
    trainer, _ = trl_bridge.make_trainer("grpo", model, task, cfg, output_dir=str(tmp_path_factory.mktemp("trl")))
    trainer.model.train()
    trainer.current_gradient_accumulation_steps = 1
    return trainer, task, model


def _trl_rollout(trainer, task, mode, clip_min, clip_max):
    """TRL's _generate_and_score_completions on completions and sampler log-probs we chose (vLLM's role)."""
    from course_lib.trl import trl_bridge

    gen = torch.Generator().manual_seed(3)
    pairs = task.sample_pairs(2, gen)
    eos = task.tokenizer.eos_token_id
    lengths = [1, 2, 3, 4, 4, 2, 3, 1]
    completion_ids = [torch.randint(3, len(task.tokenizer), (n - 1,), generator=gen).tolist() + [eos] for n in lengths]
    near = -math.log(len(task.tokenizer))  # the untrained model's log-probs are close to uniform
    sampler_logps = [(near + 0.5 * torch.randn(n, generator=gen, dtype=torch.float64)).tolist() for n in lengths]
    prompt_ids = [task.encode_prompts([p])[0].tolist() for p in pairs for _ in range(G)]

    def fake_generate(prompts):
        return prompt_ids, completion_ids, None, ["x"] * len(prompts), sampler_logps, {}, None, None

    trainer._generate = fake_generate
    trainer.use_vllm, trainer.vllm_importance_sampling_correction = True, True
    trainer.vllm_importance_sampling_mode = mode
    trainer.vllm_importance_sampling_clip_min, trainer.vllm_importance_sampling_clip_max = clip_min, clip_max
    rewards = [1.0, 0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 1.0]
    trainer.reward_funcs, trainer.reward_func_names = [lambda prompts, completions, r, **kw: list(r)], ["chosen"]
    rows = [{"prompt": trl_bridge.prompt_text(task, a, b), "a": a, "b": b, "r": rewards[i * G + j]}
            for i, (a, b) in enumerate(pairs) for j in range(G)]
    return trainer._generate_and_score_completions(rows)


@pytest.mark.parametrize("mode", IS_MODES)
def test_weights_are_trl_vllm_importance_sampling_ratio(trl_setup, mode):
    trainer, task, model = trl_setup
    out = _trl_rollout(trainer, task, mode, 0.5, 2.0)
    ours, outside = behaviour_weights(out["old_per_token_logps"], out["sampling_per_token_logps"],
                                      out["completion_mask"], mode, 0.5, 2.0)
    theirs = out["importance_sampling_ratio"]
    assert ours.shape == theirs.shape
    assert torch.allclose(ours, theirs.to(ours.dtype), rtol=1e-6, atol=0)
    assert bool(outside.any()) and not bool(outside.all()), "the band must act on some ratios and not on all"


def test_corrected_loss_is_trl_compute_loss_with_the_ratio(trl_setup):
    """w · min(ρA, clip(ρ)A), averaged per completion: TRL's loss_type='grpo' with importance_sampling_ratio."""
    from course_lib.formulas.policy_loss import aggregate, clipped_surrogate

    trainer, task, model = trl_setup
    out = _trl_rollout(trainer, task, "token_truncate", 0.5, 2.0)
    trainer.loss_type = "grpo"
    w, _ = behaviour_weights(out["old_per_token_logps"], out["sampling_per_token_logps"], out["completion_mask"],
                             "token_truncate", 0.5, 2.0)  # π_old/π_behaviour, fixed when the batch was sampled
    assert bool(((w != 1) & out["completion_mask"].bool()).any()), "the correction must act on some token"
    gen = torch.Generator().manual_seed(5)  # then the update moves π_θ away from π_old: PPO's clip acts
    out["old_per_token_logps"] = out["old_per_token_logps"] + 0.4 * torch.randn(out["old_per_token_logps"].shape,
                                                                                 generator=gen, dtype=torch.float64)
    ids = torch.cat([out["prompt_ids"], out["completion_ids"]], 1)
    attn = torch.cat([out["prompt_mask"], out["completion_mask"]], 1)
    T = out["completion_ids"].shape[1]
    model.zero_grad()
    theirs = trainer._compute_loss(model, out)
    theirs.backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    logps = trainer._get_per_token_logps_and_entropies(model, ids, attn, T)[0]
    ratio = torch.exp(logps - out["old_per_token_logps"])
    objective = clipped_surrogate(ratio, out["advantages"], 0.2, 0.2) * w
    ours = -aggregate(objective, out["completion_mask"], "sequence_mean")
    ours.backward()
    assert math.isclose(float(theirs.detach()), float(ours.detach()), rel_tol=1e-6)
    for g, p in zip(grads, model.parameters()):
        assert torch.allclose(g, p.grad, rtol=1e-6, atol=1e-12)
