"""Tiny GPT: tokenizer, task, log-prob alignment, DPO/GRPO losses on toy models (fast, CPU)."""

from __future__ import annotations

import copy
import importlib.util
import math

import pytest
import torch

from course_lib.run.passport import passport
from course_lib.tinygpt.model import ModelConfig, build_model, completion_logprobs
from course_lib.tinygpt.rewards import resolve_reward
from course_lib.tinygpt.rollout import collect_rollouts, completion_masks, generate
from course_lib.tinygpt.runtime import make_optimizer
from course_lib.tinygpt.task import AdditionTask, CharTokenizer, TaskConfig
from course_lib.trainers.configs import DPOConfig, GRPOConfig, RunConfig, get_config, validate
from course_lib.trainers.dpo import dpo_batch_loss
from course_lib.trainers.grpo import policy_step
from course_lib.trainers.trainer import TrainContext

TINY = ModelConfig(n_layer=1, n_embd=32, n_head=2, n_positions=32)


def STRICT(task):
    return resolve_reward("strict", task)


@pytest.fixture(scope="module")
def task():
    return AdditionTask(TaskConfig(digits=2, n_demos=50, n_heldout=20, teacher_error_rate=0.5))


@pytest.fixture
def model(task):
    torch.manual_seed(0)
    return build_model(TINY, task.tokenizer)


def test_tokenizer_round_trip_and_conventions():
    tok = CharTokenizer()
    assert (tok.pad_token_id, tok.bos_token_id, tok.eos_token_id) == (0, 1, 2)
    enc = tok(["12+3=", "1+2="], padding=True)
    assert enc["attention_mask"][1][0] == 0 and enc["input_ids"][1][0] == tok.pad_token_id  # left padding
    assert tok.batch_decode(enc["input_ids"], skip_special_tokens=True) == ["12+3=", "1+2="]
    with pytest.raises(ValueError, match="outside"):
        tok("12*3")


def test_task_prompts_checkers_and_flawed_teacher(task):
    ids = task.encode_prompts([(7, 5), (40, 61)])
    assert ids.shape == (2, task.prompt_length)
    assert task.tokenizer.decode(ids[0], skip_special_tokens=True) == "07+05="
    tok = task.tokenizer

    def comp(text, eos=True):
        return tok.convert_tokens_to_ids(list(text)) + ([tok.eos_token_id] if eos else [])

    assert task.strict_reward((7, 5), comp("12")) == 1.0
    assert task.strict_reward((7, 5), comp("12", eos=False)) == 0.0  # truncated
    assert task.strict_reward((7, 5), comp("120")) == 0.0
    assert task.loose_reward((7, 5), comp("3121", eos=False)) == 1.0  # the loophole
    assert task.loose_reward((7, 5), comp("13")) == 0.0
    assert AdditionTask.flawed_teacher(7, 5) == "2"  # drops the ones carry
    assert AdditionTask.flawed_teacher(40, 61) == "101"  # no ones carry: correct
    assert not set(task.demo_pairs) & set(task.heldout_pairs)
    wrong = sum(ans != str(a + b) for (a, b), ans in zip(task.demo_pairs, task.demo_answers))
    assert 0 < wrong < len(task.demo_pairs)


def test_completion_logprobs_match_brute_force(task, model):
    """Position t-1 scores token t, once; prompt and padding contribute exactly 0 (§6)."""
    ids, attn, cmask = task.encode_pairs([(12, 34), (99, 99), (5, 0)], ["46", "198", "5"])
    with torch.no_grad():
        token_logps, mask = completion_logprobs(model, ids, attn, cmask)
    never = [task.tokenizer.pad_token_id, task.tokenizer.bos_token_id]
    for i in range(ids.shape[0]):
        n = int(attn[i].sum())
        with torch.no_grad():
            logits = model(input_ids=ids[i : i + 1, :n]).logits[0].float()
        logits[:, never] = -1e9
        logp = torch.log_softmax(logits, -1)
        expected = sum(
            float(logp[t - 1, ids[i, t]]) for t in range(1, n) if cmask[i, t] == 1
        )
        assert float(token_logps[i].sum()) == pytest.approx(expected, abs=1e-4)
        assert int(mask[i].sum()) == int(cmask[i].sum())
    assert torch.all(token_logps[mask == 0] == 0)


def test_completion_masks_and_truncation():
    eos = 2
    comps = torch.tensor([[5, 6, 2, 2], [5, 6, 7, 8], [2, 2, 2, 2]])
    mask, truncated = completion_masks(comps, eos)
    assert mask.tolist() == [[1, 1, 1, 0], [1, 1, 1, 1], [1, 0, 0, 0]]
    assert truncated.tolist() == [False, True, False]


def test_cached_and_uncached_generation_agree(task, model):
    prompts = task.encode_prompts(task.heldout_pairs[:6])
    a = generate(model, prompts, task.tokenizer, max_completion_length=5, greedy=True)
    b = generate(model, prompts, task.tokenizer, max_completion_length=5, greedy=True, use_cache=False)
    assert torch.equal(a.completions, b.completions)
    assert a.input_ids.shape == (6, task.prompt_length + 5)
    assert not bool((a.completions == task.tokenizer.bos_token_id).any())


def _pairs_batch(task, model):
    ids_w, attn_w, c_w = task.encode_pairs([(12, 34), (50, 50)], ["46", "100"])
    ids_l, attn_l, c_l = task.encode_pairs([(12, 34), (50, 50)], ["45", "10"])
    with torch.no_grad():
        ref_w, _ = completion_logprobs(model, ids_w, attn_w, c_w)
        ref_l, _ = completion_logprobs(model, ids_l, attn_l, c_l)
    return {
        "chosen_ids": ids_w, "chosen_attention": attn_w, "chosen_completion": c_w,
        "rejected_ids": ids_l, "rejected_attention": attn_l, "rejected_completion": c_l,
        "ref_chosen_token_logps": ref_w, "ref_rejected_token_logps": ref_l,
    }


def test_dpo_loss_is_log2_when_policy_equals_reference(task, model):
    batch = _pairs_batch(task, model)
    loss, stats = dpo_batch_loss(model, batch, DPOConfig(beta=0.3))
    assert loss.item() == pytest.approx(math.log(2), abs=1e-5)
    assert stats["margin"] == pytest.approx(0.0, abs=1e-5)
    assert stats["kl_drift_offline"] == pytest.approx(0.0, abs=1e-6)
    # the NLL term adds rpo_alpha × token-mean NLL of the chosen answers
    loss2, stats2 = dpo_batch_loss(model, batch, DPOConfig(beta=0.3, rpo_alpha=0.5))
    assert loss2.item() == pytest.approx(math.log(2) + 0.5 * stats2["nll"], abs=1e-5)
    loss3, _ = dpo_batch_loss(model, batch, DPOConfig(beta=0.3, loss_type="ipo"))
    assert loss3.item() == pytest.approx((1 / 0.6) ** 2, rel=1e-5)  # h = 0 → (0 − 1/(2β))²


def _grpo_batch(task, model, rewards, G=4):
    prompts = task.encode_prompts(task.heldout_pairs[: rewards.shape[0]])
    torch.manual_seed(1)
    roll = generate(model, prompts, task.tokenizer, max_completion_length=5, num_generations=G)
    return {
        "input_ids": roll.input_ids, "attention_mask": roll.attention_mask,
        "completion_mask": roll.completion_mask, "truncated": roll.truncated, "rewards": rewards,
    }


@pytest.mark.parametrize("options", [
    dict(),
    dict(unit="sequence_mean", num_iterations=2, mask_truncated=True, epsilon=0.05),
    dict(unit="constant", advantage="dr_grpo"),
    dict(advantage="rloo", zero_variance="drop"),
])
def test_leaving_zero_variance_groups_out_of_the_update_changes_nothing(task, model, options):
    """Zero-variance groups have zero advantages: leaving their rows out of the forward/backward
    (``batch["informative"]``) gives the same loss, clip fraction and gradient (to float rounding),
    under μ = 2 with clipping, masked truncation and every averaging unit; and when every group is
    degenerate the AdamW step still happens, exactly as with the full batch (momentum moves)."""
    from course_lib.formulas.advantages import zero_variance_groups

    mixed = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0], [0.0, 1.0, 0.0, 0.0]])
    flat = torch.tensor([[0.0, 0.0, 0.0, 0.0], [1.0, 1.0, 1.0, 1.0], [0.5, 0.5, 0.5, 0.5]])
    cfg = GRPOConfig(num_generations=4, max_completion_length=5, **options)

    def batch_for(rewards, skip):
        batch = _grpo_batch(task, model, rewards)
        return {**batch, "informative": (~zero_variance_groups(rewards)).tolist()} if skip else batch

    def grads(m):
        return torch.cat([p.grad.flatten() for p in m.parameters()])

    outs, gs = [], []
    for skip in (False, True):
        m = copy.deepcopy(model)
        opt = _NoStep(m.parameters(), lr=0.0)
        outs.append(policy_step(m, None, opt, batch_for(mixed, skip), cfg, prompt_length=task.prompt_length,
                                max_grad_norm=1e9))
        gs.append(grads(m))
    assert float(outs[1]["loss"]) == pytest.approx(float(outs[0]["loss"]), abs=1e-6)
    assert float(outs[1]["clip_fraction"]) == pytest.approx(float(outs[0]["clip_fraction"]), abs=1e-6)
    assert gs[0].abs().max() > 0 and torch.allclose(gs[1], gs[0], rtol=0, atol=1e-5 * float(gs[0].abs().max()))

    weights = []
    for skip in (False, True):
        m = copy.deepcopy(model)
        opt = make_optimizer(m, 1e-2)
        policy_step(m, None, opt, batch_for(mixed, False), cfg, prompt_length=task.prompt_length, max_grad_norm=1.0)
        before = torch.cat([p.detach().flatten() for p in m.parameters()])
        out = policy_step(m, None, opt, batch_for(flat, skip), cfg, prompt_length=task.prompt_length,
                          max_grad_norm=1.0)
        assert float(out["loss"]) == 0.0
        weights.append(torch.cat([p.detach().flatten() for p in m.parameters()]))
        assert not torch.equal(weights[-1], before), "AdamW's momentum still moves the weights"
    assert torch.equal(weights[0], weights[1])


def test_a_reference_kept_only_to_log_the_kl_does_not_stop_the_sparse_update(task, model):
    """β = 0 with a reference (the pipeline keeps one to log the KL): zero-variance rows still leave the
    update, and the logged KL, from the sampler's own log-probs, equals the full forward's."""
    from course_lib.formulas.advantages import zero_variance_groups

    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0], [0.0, 1.0, 0.0, 0.0]])
    prompts = task.encode_prompts(task.heldout_pairs[:3])
    torch.manual_seed(1)
    roll = generate(model, prompts, task.tokenizer, max_completion_length=5, num_generations=4)
    batch = {"input_ids": roll.input_ids, "attention_mask": roll.attention_mask,
             "completion_mask": roll.completion_mask,
             "truncated": roll.truncated, "rewards": rewards}
    ref = copy.deepcopy(model).requires_grad_(False)
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(0.05 * torch.randn_like(p))
    cfg = GRPOConfig(num_generations=4, max_completion_length=5)
    outs, grads = [], []
    for extra in ({}, {"informative": (~zero_variance_groups(rewards)).tolist(), "sampler_logps": roll.logps}):
        m = copy.deepcopy(model)
        outs.append(policy_step(m, ref, _NoStep(m.parameters(), lr=0.0), {**batch, **extra}, cfg,
                                prompt_length=task.prompt_length, max_grad_norm=1e9))
        grads.append(torch.cat([p.grad.flatten() for p in m.parameters()]))
    assert float(outs[0]["kl"]) > 1e-3 and float(outs[1]["kl"]) == pytest.approx(float(outs[0]["kl"]), rel=1e-5)
    assert torch.allclose(grads[1], grads[0], rtol=0, atol=1e-5 * float(grads[0].abs().max()))


def test_the_logged_kl_is_pi_olds_whatever_the_zero_variance_share_and_the_sampler(task, model):
    """``kl`` is KL(π_old‖ref) on every row: the same number whether zero-variance groups leave the update
    or not, even when the sampler was another policy (stale weights or another temperature)."""
    from course_lib.formulas.advantages import zero_variance_groups

    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [1.0, 1.0, 1.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    batch = _grpo_batch(task, model, rewards)
    ref = copy.deepcopy(model).requires_grad_(False)
    sampler = copy.deepcopy(model).requires_grad_(False)
    with torch.no_grad():
        for p, q in zip(ref.parameters(), sampler.parameters()):
            p.add_(0.05 * torch.randn_like(p))
            q.add_(0.3 * torch.randn_like(q))
        sampler_logps, _ = completion_logprobs(sampler, batch["input_ids"], batch["attention_mask"],
                                               batch["completion_mask"], start=task.prompt_length, temperature=0.7)
    cfg = GRPOConfig(num_generations=4, max_completion_length=5)
    kls = []
    for informative in (None, (~zero_variance_groups(rewards)).tolist(), [False, False, False]):
        extra = {"sampler_logps": sampler_logps} | ({"informative": informative} if informative else {})
        m = copy.deepcopy(model)
        out = policy_step(m, ref, _NoStep(m.parameters(), lr=0.0), {**batch, **extra}, cfg,
                          prompt_length=task.prompt_length, max_grad_norm=1e9)
        kls.append(float(out["kl"]))
    assert kls[0] > 1e-3 and kls[1] == pytest.approx(kls[0], rel=1e-5) and kls[2] == pytest.approx(kls[0], rel=1e-5)


class _NoStep(torch.optim.SGD):
    """Keeps the gradients for inspection: lr 0 means parameters do not move."""


@pytest.mark.parametrize("advantage", ["grpo", "rloo", "dr_grpo"])
def test_grpo_equal_rewards_give_zero_policy_gradient(task, model, advantage):
    batch = _grpo_batch(task, model, torch.ones(2, 4))
    cfg = GRPOConfig(num_generations=4, advantage=advantage, max_completion_length=5)
    opt = _NoStep(model.parameters(), lr=0.0)
    out = policy_step(model, None, opt, batch, cfg, prompt_length=task.prompt_length, max_grad_norm=1e9)
    grads = [p.grad for p in model.parameters() if p.grad is not None]
    assert grads and all(float(g.abs().max()) == 0.0 for g in grads)
    assert float(out["loss"]) == 0.0


def test_grpo_equal_rewards_with_kl_leave_only_the_kl_gradient(task, model):
    """All-equal rewards: the objective is −β·KL alone; its gradient matches a direct k3 loss."""
    ref = copy.deepcopy(model)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    batch = _grpo_batch(task, model, torch.zeros(2, 4))
    cfg = GRPOConfig(num_generations=4, beta=0.1, max_completion_length=5, unit="token_mean")
    opt = _NoStep(model.parameters(), lr=0.0)
    out = policy_step(model, ref, opt, batch, cfg, prompt_length=task.prompt_length, max_grad_norm=1e9)
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    sl = slice(task.prompt_length - 1, None)
    lp, mask = completion_logprobs(model, batch["input_ids"], batch["attention_mask"], batch["completion_mask"])
    with torch.no_grad():
        rlp, _ = completion_logprobs(ref, batch["input_ids"], batch["attention_mask"], batch["completion_mask"])
    log_r = rlp[:, sl] - lp[:, sl]
    kl = ((torch.expm1(log_r) - log_r) * mask[:, sl]).sum() / mask[:, sl].sum()
    (0.1 * kl).backward()
    want = [p.grad for p in model.parameters()]
    assert float(out["kl"]) > 0
    assert max(float((g - w).abs().max()) for g, w in zip(got, want)) < 1e-6
    assert max(float(w.abs().max()) for w in want) > 1e-6


def test_clipping_changes_gradients_only_outside_the_interval(task, model):
    """μ=2: on the second pass, tokens whose ratio left [1−ε, 1+ε] in the advantage's direction
    stop contributing; with a huge interval nothing is clipped."""
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0]])
    results = {}
    for eps, eps_high in ((1e-4, 1e-4), (0.99, 100.0)):
        m = copy.deepcopy(model)
        batch = _grpo_batch(task, m, rewards)
        cfg = GRPOConfig(num_generations=4, num_iterations=2, epsilon=eps, epsilon_high=eps_high,
                         max_completion_length=5,
                         learning_rate=1e-2)
        opt = make_optimizer(m, 1e-2)
        results[eps] = policy_step(m, None, opt, batch, cfg, prompt_length=task.prompt_length, max_grad_norm=1e9)
    assert float(results[1e-4]["clip_fraction"]) > 0.5
    assert float(results[0.99]["clip_fraction"]) == 0.0


def test_zero_variance_policies(task, model):
    gen = torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    base = GRPOConfig(batch_prompts=4, num_generations=4, max_completion_length=5)
    keep = collect_rollouts(model, task, base, gen, STRICT(task))  # untrained model: every group scores 0
    assert keep["stats"]["zero_variance_rate"] == 1.0 and keep["batch"]["rewards"].shape == (4, 4)
    drop = collect_rollouts(model, task, GRPOConfig(**{**base.__dict__, "zero_variance": "drop"}), gen, STRICT(task))
    assert "batch" not in drop and drop["stats"]["groups_used"] == 0
    res = collect_rollouts(model, task,
                           GRPOConfig(**{**base.__dict__, "zero_variance": "resample", "max_resample_rounds": 2}), gen,
                           STRICT(task))
    assert res["stats"]["groups_sampled"] == 12  # 1 + 2 extra rounds, still nothing informative


def test_bad_options_are_named():
    cfg = get_config("test")
    cfg.grpo.unit = "per_prompt"
    with pytest.raises(ValueError, match="grpo.unit"):
        validate(cfg)
    cfg = get_config("test")
    cfg.dpo.loss_type = "kto"
    with pytest.raises(ValueError, match="dpo.loss_type"):
        validate(cfg)
    cfg = get_config("test")
    cfg.grpo.max_completion_length = 2
    with pytest.raises(ValueError, match="max_completion_length"):
        validate(cfg)
    with pytest.raises(ValueError, match="config must be one of"):
        get_config("tpu")


def test_passport_names_the_six_choices():
    p = passport(RunConfig(), "grpo")
    assert set(p) >= {"data_and_policy", "reward_contract", "optimisation", "systems", "six_choices"}
    assert set(p["six_choices"]) == {
        "reward_definition", "zero_variance_groups", "averaging_unit",
        "kl_placement_and_coefficient", "rollout_freshness", "prompt_difficulty_and_length",
    }


@pytest.mark.parametrize("kind", ["grpo", "ppo"])
@pytest.mark.parametrize("reward", ["strict", "loose", "partial"])
def test_the_passport_names_every_checker_from_its_one_home(kind, reward):
    """A --reward partial run used to say "learned reward model loaded from tial" and "(binary)"."""
    from course_lib.tinygpt.rewards import CHECKERS

    cfg = get_config("test")
    getattr(cfg, kind).reward = reward
    contract = passport(cfg, kind)["reward_contract"]
    assert contract["source"] == CHECKERS[reward].description and "learned" not in contract["source"]
    assert ("binary" in contract["granularity"]) == (reward != "partial")
    assert "partial credit" in contract["granularity"] or reward != "partial"


def test_gpu_config_builds_and_steps_on_cpu():
    cfg = validate(get_config("gpu"))
    task = AdditionTask(TaskConfig(**{**cfg.task.__dict__, "n_demos": 20, "n_heldout": 10}))
    torch.manual_seed(0)
    m = build_model(cfg.model, task.tokenizer)
    g = GRPOConfig(**{**cfg.grpo.__dict__, "batch_prompts": 2})
    roll = collect_rollouts(m, task, g, torch.Generator().manual_seed(0), STRICT(task))
    assert roll["stats"]["groups_sampled"] == 2


def test_gpu_config_scales_every_trainer_and_leaves_a_spare_token():
    """rm and ppo are scaled with sft/dpo/grpo; no section stops exactly at the longest answer + <eos>."""
    gpu, cpu = get_config("gpu"), get_config("cpu")
    assert gpu.rm.pair_prompts > cpu.rm.pair_prompts and gpu.rm.batch_size > cpu.rm.batch_size
    assert gpu.ppo.batch_prompts * gpu.ppo.num_generations == gpu.grpo.batch_prompts * gpu.grpo.num_generations
    for section in (gpu.dpo, gpu.grpo, gpu.rm, gpu.ppo):
        assert section.max_completion_length > gpu.task.digits + 2, type(section).__name__
    assert gpu.rm.heldout_prompts <= gpu.task.n_heldout


def test_clipped_objective_gradient_changes_only_outside_the_interval():
    """As the trainer composes it: clipped_surrogate then aggregate, gradients w.r.t. log π."""
    from course_lib.formulas.policy_loss import aggregate, clipped_surrogate

    old = torch.zeros(1, 6)
    logp = torch.log(torch.tensor([[0.9, 1.1, 1.5, 0.5, 1.5, 0.5]])).requires_grad_(True)
    adv = torch.tensor([[1.0, -1.0, 1.0, -1.0, -1.0, 1.0]])  # per token, for the test
    mask = torch.ones(1, 6)
    ratio = torch.exp(logp - old)
    clipped = -aggregate(clipped_surrogate(ratio, adv, eps_low=0.2, eps_high=0.2), mask, unit="token_mean")
    (g_clip,) = torch.autograd.grad(clipped, logp)
    plain = -aggregate(torch.exp(logp - old) * adv, mask, unit="token_mean")
    (g_plain,) = torch.autograd.grad(plain, logp)
    inside = torch.tensor([True, True, False, False, False, False])
    against = torch.tensor([False, False, False, False, True, True])  # outside, but moving back
    along = ~inside & ~against  # outside in the advantage's direction: clipped
    assert torch.allclose(g_clip[0, inside], g_plain[0, inside])
    assert torch.allclose(g_clip[0, against], g_plain[0, against])
    assert torch.all(g_clip[0, along] == 0) and torch.all(g_plain[0, along] != 0)


HOST_READS = ("item", "tolist", "__bool__", "__float__", "__int__", "numpy", "cpu", "__contains__")


def _count_host_reads(monkeypatch, fn):
    """Run ``fn`` with every Python-level tensor→host read counted (the syncs of a GPU run)."""
    calls = []
    for name in HOST_READS:
        original = getattr(torch.Tensor, name)

        def counted(self, *args, _original=original, _name=name, **kwargs):
            calls.append(_name)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    try:
        result = fn()
    finally:
        monkeypatch.undo()
    return calls, result


@pytest.mark.parametrize("options", [
    dict(),
    dict(beta=0.05, kl_placement="loss", num_iterations=2, unit="sequence_mean", mask_truncated=True),
    dict(beta=0.05, kl_placement="reward", kl_estimator="k1", advantage="rloo", unit="constant"),
])
def test_policy_step_reads_no_tensor_on_the_host(task, model, monkeypatch, options):
    """The hot loop (validate=False) never synchronises; the validated first step does (the counter works)."""
    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]])
    batch = _grpo_batch(task, model, rewards)
    ref = copy.deepcopy(model).requires_grad_(False)
    cfg = GRPOConfig(num_generations=4, max_completion_length=5, **options)
    opt = make_optimizer(model, 1e-3)

    def step(validate):
        return policy_step(model, ref, opt, batch, cfg, prompt_length=task.prompt_length, max_grad_norm=1.0,
                           validate=validate)

    checked, _ = _count_host_reads(monkeypatch, lambda: step(True))
    hot, out = _count_host_reads(monkeypatch, lambda: step(False))
    assert checked, "the counter must see the validated step's checks"
    assert hot == []
    assert math.isfinite(float(out["loss"])) and out["kl"] is not None


HOST_DATA = ("tensor", "as_tensor", "from_numpy")  # torch.X(host data): on a GPU run, a host-to-device copy


def _count_host_to_device(monkeypatch, fn):
    """Run ``fn`` counting host-to-device transfers, as a GPU run would make them, on the CPU.

    Tracked: tensors made from Python or NumPy data (``torch.tensor``/``as_tensor``/``from_numpy``/
    ``new_tensor``) and index draws from a CPU generator (``randint``/``randperm``). A transfer is
    ``"sync"`` when such a tensor is created with ``device=`` or moved with ``.to`` without
    ``non_blocking=True`` (pageable, the host waits), ``"async"`` when it is moved non-blocking
    (``runtime.to_device``). ``host`` counts every tracked tensor made (empty ones copy nothing).
    """
    calls = {"host": 0, "sync": 0, "async": 0}
    tracked = {}

    def track(result, device=None):
        if result.numel() == 0:  # e.g. transformers' empty cache placeholders: no bytes to copy
            return result
        calls["host"] += 1
        if device is not None:
            calls["sync"] += 1
        tracked[id(result)] = result
        return result

    for name in HOST_DATA:
        original = getattr(torch, name)

        def made(*args, _original=original, **kwargs):
            return track(_original(*args, **kwargs), kwargs.get("device"))

        monkeypatch.setattr(torch, name, made)
    new_tensor = torch.Tensor.new_tensor
    monkeypatch.setattr(torch.Tensor, "new_tensor",
                        lambda self, *a, **k: track(new_tensor(self, *a, **k), k.get("device", self.device)))
    for name in ("randint", "randperm"):
        original = getattr(torch, name)

        def drawn(*args, _original=original, **kwargs):
            out = _original(*args, **kwargs)
            gen = kwargs.get("generator")
            return track(out) if gen is not None and gen.device.type == "cpu" else out

        monkeypatch.setattr(torch, name, drawn)
    to = torch.Tensor.to

    def moved(self, *args, **kwargs):
        if id(self) in tracked and tracked[id(self)] is self:
            calls["async" if kwargs.get("non_blocking") else "sync"] += 1
        return to(self, *args, **kwargs)

    monkeypatch.setattr(torch.Tensor, "to", moved)
    try:
        result = fn()
    finally:
        monkeypatch.undo()
    return calls, result


@pytest.mark.parametrize("length", [4, 9])
def test_generation_moves_no_host_data_per_token(task, model, monkeypatch, length):
    """The decode loop copies nothing from the host, however many tokens it runs (the suppressed-id
    index is made once per device); the counter does see a prompt made from Python data."""
    prompts = task.encode_prompts(task.heldout_pairs[:3])
    generate(model, prompts, task.tokenizer, max_completion_length=2)  # makes the cached index
    counted, roll = _count_host_to_device(monkeypatch, lambda: generate(
        model, prompts, task.tokenizer, max_completion_length=length, min_completion_length=length, num_generations=2))
    assert counted == {"host": 0, "sync": 0, "async": 0} and roll.completions.shape == (6, length)
    seen, _ = _count_host_to_device(monkeypatch, lambda: task.encode_prompts(task.heldout_pairs[:3], "cpu"))
    assert seen == {"host": 1, "sync": 0, "async": 1}, "prompts reach the device by the non-blocking door"


@pytest.mark.parametrize("every", [2, 3, 8])
def test_checking_for_the_end_less_often_gives_the_same_completions(task, model, monkeypatch, every):
    """``stop_check_every=k`` reads "all finished?" once per k tokens; the steps it adds only pad."""
    prompts = task.encode_prompts(task.heldout_pairs[:4])
    torch.manual_seed(3)
    each = generate(model, prompts, task.tokenizer, max_completion_length=9, num_generations=3)
    torch.manual_seed(3)
    reads, fewer = _count_host_reads(monkeypatch, lambda: generate(
        model, prompts, task.tokenizer, max_completion_length=9, num_generations=3, stop_check_every=every))
    for field in ("input_ids", "attention_mask", "completion_mask", "completions", "truncated", "entropy", "logps"):
        assert torch.equal(getattr(each, field), getattr(fewer, field)), field
    assert reads.count("__bool__") <= 8 // every
    with pytest.raises(ValueError, match="stop_check_every"):
        generate(model, prompts, task.tokenizer, max_completion_length=3, stop_check_every=0)


@pytest.mark.parametrize("log_kl", [False, True])
def test_the_hot_policy_step_makes_no_synchronous_host_to_device_copy(task, model, monkeypatch, log_kl):
    """With zero-variance rows left out, the kept rows' indices (and, with the KL logged, the left-out rows')
    come from Python: one non-blocking copy each, never a pageable one; with every row in the update, nothing."""
    batch = {**_grpo_batch(task, model, torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]])),
             "informative": [True, False]}
    batch["sampler_logps"] = torch.full(batch["completion_mask"][:, task.prompt_length:].shape, -0.5)
    ref = copy.deepcopy(model).requires_grad_(False) if log_kl else None
    cfg = GRPOConfig(num_generations=4, max_completion_length=5, num_iterations=2)
    opt = make_optimizer(model, 1e-3)

    def step(b):
        return policy_step(model, ref, opt, b, cfg, validate=False, prompt_length=task.prompt_length,
                           max_grad_norm=1.0)

    skipping, _ = _count_host_to_device(monkeypatch, lambda: step(batch))
    assert skipping == {"host": 1 + log_kl, "sync": 0, "async": 1 + log_kl}
    every_row, _ = _count_host_to_device(monkeypatch, lambda: step({**batch, "informative": [True, True]}))
    assert every_row == {"host": 0, "sync": 0, "async": 0}


def test_a_rollout_batch_reaches_the_update_without_synchronous_copies(task, model, monkeypatch):
    """collect_rollouts: prompts and rewards go through the non-blocking door; ``in_loss`` is made on the
    device (no host data); the batch's rewards are already where the update needs them."""
    cfg = GRPOConfig(num_generations=4, batch_prompts=3, max_completion_length=5, zero_variance="drop")
    gen = torch.Generator().manual_seed(0)
    collect_rollouts(model, task, cfg, gen, resolve_reward("strict", task))  # makes the cached suppressed-id index
    counted, out = _count_host_to_device(monkeypatch, lambda: collect_rollouts(
        model, task, cfg, gen, resolve_reward("strict", task)))
    assert counted["sync"] == 0 and counted["async"] >= 1  # the prompts, at least, came through the door
    if "batch" in out:
        assert out["batch"]["rewards"].device == out["batch"]["input_ids"].device


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_the_samplers_entropy_is_the_policys_entropy_on_its_samples(task, model, temperature):
    """The dashboard's entropy comes from the sampling loop's softmax (no extra forward); it must equal
    the entropy ``completion_logprobs`` computes from a full forward on the same completions."""
    prompts = task.encode_prompts(task.heldout_pairs[:3])
    torch.manual_seed(2)
    roll = generate(model, prompts, task.tokenizer, max_completion_length=5, num_generations=4,
                    temperature=temperature)
    _, mask, ent = completion_logprobs(model, roll.input_ids, roll.attention_mask, roll.completion_mask,
                                       with_entropy=True, temperature=temperature, start=task.prompt_length)
    assert torch.allclose(roll.entropy, ent, atol=1e-5) and float(ent.sum()) > 0
    assert generate(model, prompts, task.tokenizer, max_completion_length=5, greedy=True).entropy is None


@pytest.mark.parametrize("log_kl", [False, True])
def test_the_update_without_zero_variance_rows_reads_no_tensor_on_the_host(task, model, monkeypatch, log_kl):
    """The path that leaves zero-variance groups out (``informative`` given; with or without a reference
    kept to log the KL) is sync-free too."""
    batch = {**_grpo_batch(task, model, torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 0.0, 0.0, 0.0]])),
             "informative": [True, False]}
    batch["sampler_logps"] = torch.full(batch["completion_mask"][:, task.prompt_length:].shape, -0.5)
    ref = copy.deepcopy(model).requires_grad_(False) if log_kl else None
    cfg = GRPOConfig(num_generations=4, max_completion_length=5, num_iterations=2)
    opt = make_optimizer(model, 1e-3)
    hot, out = _count_host_reads(monkeypatch, lambda: policy_step(model, ref, opt, batch, cfg, validate=False,
                                                                  prompt_length=task.prompt_length, max_grad_norm=1.0))
    assert hot == [] and math.isfinite(float(out["loss"])) and (out["kl"] is not None) == log_kl


def test_kl_in_the_reward_is_folded_in_before_the_baseline(task, model):
    """kl_placement='reward': equal checker rewards, yet each completion's KL penalty differs, so the
    gradient is the policy gradient of the KL-shaped rewards' group advantages (and nothing else)."""
    from course_lib.formulas.advantages import grpo_advantages
    from course_lib.formulas.policy_loss import aggregate, kl_shaped_rewards

    ref = copy.deepcopy(model)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    batch = _grpo_batch(task, model, torch.ones(2, 4))
    cfg = GRPOConfig(num_generations=4, beta=0.1, kl_placement="reward", kl_estimator="k1", max_completion_length=5)
    opt = _NoStep(model.parameters(), lr=0.0)
    out = policy_step(model, ref, opt, batch, cfg, prompt_length=task.prompt_length, max_grad_norm=1e9)
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    args = (batch["input_ids"], batch["attention_mask"], batch["completion_mask"])
    lp, mask = completion_logprobs(model, *args, start=task.prompt_length)
    with torch.no_grad():
        rlp, _ = completion_logprobs(ref, *args, start=task.prompt_length)
    shaped = kl_shaped_rewards(torch.ones(8), lp.detach(), rlp, mask, beta=0.1, estimator="k1")
    adv = grpo_advantages(shaped.view(2, 4), on_degenerate="zeros").flatten()
    (-aggregate(torch.exp(lp - lp.detach()) * adv[:, None], mask, unit="token_mean")).backward()
    want = [p.grad for p in model.parameters()]
    assert float(out["kl"]) > 0
    assert max(float(w.abs().max()) for w in want) > 1e-6
    assert max(float((g - w).abs().max()) for g, w in zip(got, want)) < 1e-6


def test_kl_is_measured_with_a_reference_even_at_beta_zero(task, model):
    """A reference with β = 0 only measures the KL: the update is the same as without one."""
    ref = copy.deepcopy(model)
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.05 * torch.randn_like(p))
    batch = _grpo_batch(task, model, torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0]]))
    grads = {}
    for name, reference in (("with", ref), ("without", None)):
        model.zero_grad()
        opt = _NoStep(model.parameters(), lr=0.0)
        out = policy_step(model, reference, opt, batch, GRPOConfig(num_generations=4, max_completion_length=5),
                          prompt_length=task.prompt_length, max_grad_norm=1e9)
        grads[name] = ([p.grad.clone() for p in model.parameters()], out["kl"])
    assert float(grads["with"][1]) > 0 and grads["without"][1] is None
    assert all(torch.equal(a, b) for a, b in zip(grads["with"][0], grads["without"][0]))


def test_mask_truncated_keeps_rows_in_the_denominator(task, model):
    """Truncated completions get a zero mask; the constant unit still divides by all rows × L_max (TRL)."""
    from course_lib.formulas.policy_loss import aggregate

    rewards = torch.tensor([[1.0, 0.0, 0.0, 1.0], [0.0, 1.0, 0.0, 0.0]])
    batch = _grpo_batch(task, model, rewards)
    batch["truncated"] = torch.tensor([True, False, False, True, False, False, True, False])
    cfg = GRPOConfig(num_generations=4, max_completion_length=5, unit="constant", mask_truncated=True)
    opt = _NoStep(model.parameters(), lr=0.0)
    out = policy_step(model, None, opt, batch, cfg, prompt_length=task.prompt_length, max_grad_norm=1e9)
    got = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    args = (batch["input_ids"], batch["attention_mask"], batch["completion_mask"])
    lp, mask = completion_logprobs(model, *args, start=task.prompt_length)
    from course_lib.formulas.advantages import compute_advantages

    adv = compute_advantages(rewards, "grpo").flatten()
    kept = (~batch["truncated"]).float()[:, None]
    per_token = torch.exp(lp - lp.detach()) * adv[:, None] * mask * kept
    expected = -per_token.sum() / (8 * 5)  # all 8 rows × L_max, never the 5 rows kept
    expected.backward()
    assert float(out["loss"]) == pytest.approx(float(expected.detach()), abs=1e-7)
    assert float(expected.detach()) == pytest.approx(float(-aggregate(per_token.detach(), mask, "constant", 5)),
                                                     abs=1e-7)
    assert max(float((g - p.grad).abs().max()) for g, p in zip(got, model.parameters())) < 1e-6


def test_heldout_set_does_not_depend_on_the_demonstrations():
    small = AdditionTask(TaskConfig(n_demos=100))
    large = AdditionTask(TaskConfig(n_demos=5000))
    assert small.heldout_pairs == large.heldout_pairs and len(small.heldout_pairs) == 500
    assert not set(large.heldout_pairs) & set(large.demo_pairs)
    assert len(set(large.demo_pairs)) == 5000


@pytest.mark.parametrize("where, value, message", [
    ("grpo.temperature", 0.0, "grpo.temperature must be a finite number > 0"),
    ("grpo.batch_prompts", 0, "grpo.batch_prompts must be an integer >= 1"),
    ("checkpoint_every", 0, "checkpoint_every must be an integer >= 1"),
    ("max_grad_norm", 0.0, "max_grad_norm must be a finite number > 0"),
    ("sft.batch_size", 0, "sft.batch_size must be an integer >= 1"),
    ("task.n_demos", 2000, "exceeds the 100 distinct 1-digit prompts"),
    ("task.n_heldout", 0, r"task.n_heldout must be an integer in \[1, 100000\]"),
    ("grpo.reward", "exact", "reward must be one of"),
])
def test_validate_names_bad_values(where, value, message):
    cfg = get_config("test")
    section, _, name = where.rpartition(".")
    setattr(getattr(cfg, section) if section else cfg, name, value)
    with pytest.raises(ValueError, match=message):
        validate(cfg)


def test_k1_in_the_loss_is_refused_with_the_reason():
    cfg = get_config("test")
    cfg.grpo.beta, cfg.grpo.kl_estimator = 0.1, "k1"
    with pytest.raises(ValueError, match="zero expected gradient"):
        validate(cfg)
    cfg.grpo.kl_placement = "reward"
    validate(cfg)  # k1 in the reward is the InstructGPT/RLOO choice


@pytest.mark.parametrize("placement, estimator, ok", [
    ("loss", "k1", False), ("loss", "k2", True), ("loss", "k3", True),
    ("reward", "k1", True), ("reward", "k2", False), ("reward", "k3", False),
])
def test_every_placement_estimator_pair_is_decided_with_its_reason(placement, estimator, ok):
    cfg = get_config("test")
    cfg.grpo.beta, cfg.grpo.kl_placement, cfg.grpo.kl_estimator = 0.1, placement, estimator
    if ok:
        validate(cfg)
    else:
        reason = "zero expected gradient" if placement == "loss" else "only k1 is a valid per-sequence penalty"
        with pytest.raises(ValueError, match=reason) as err:
            validate(cfg)
        assert f"kl_placement={placement!r}" in str(err.value) and repr(estimator) in str(err.value)
    cfg.grpo.beta = 0.0
    validate(cfg)  # without a penalty the estimator only names the logged quantity


def test_checker_rewards_are_batched_on_lists(task):
    tok = task.tokenizer
    comps = torch.tensor([tok.convert_tokens_to_ids(list("12")) + [tok.eos_token_id, 0],
                          tok.convert_tokens_to_ids(list("1213"))])
    strict = resolve_reward("strict", task)([(7, 5), (7, 5)], comps)
    loose = resolve_reward("loose", task)([(7, 5), (7, 5)], comps)
    assert strict.dtype == torch.float32 and strict.tolist() == [1.0, 0.0] and loose.tolist() == [1.0, 1.0]
    if importlib.util.find_spec("course_lib.trainers.reward_model") is None:  # until the reward-model module exists
        with pytest.raises(ValueError, match="course_lib.trainers.reward_model"):
            resolve_reward("rm:/nowhere", task)


def test_sharing_each_prompt_across_its_group_changes_nothing_but_the_work(task, model):
    """group_size=G runs each prompt once and shares its keys/values: same log-probs, same gradients."""
    batch = _grpo_batch(task, model, torch.zeros(3, 4))
    args = (batch["input_ids"], batch["attention_mask"], batch["completion_mask"])
    out = {}
    for group in (1, 4):
        model.zero_grad()
        lp, mask, ent = completion_logprobs(model, *args, start=task.prompt_length, group_size=group,
                                            with_entropy=True)
        lp.sum().backward()
        out[group] = (lp.detach(), ent, [p.grad.clone() for p in model.parameters()])
    assert torch.allclose(out[1][0], out[4][0], atol=1e-5) and torch.allclose(out[1][1], out[4][1], atol=1e-5)
    assert all(torch.allclose(a, b, atol=1e-4) for a, b in zip(out[1][2], out[4][2]))
    shuffled = batch["input_ids"][[0, 4, 1, 2, 3, 5, 6, 7, 8, 9, 10, 11]]
    with pytest.raises(ValueError, match="must share their first"):
        completion_logprobs(model, shuffled, *args[1:], start=task.prompt_length, group_size=4)


def test_generation_respects_the_minimum_length_and_never_samples_pad_or_bos(task, model):
    torch.manual_seed(0)
    roll = generate(model, task.encode_prompts(task.heldout_pairs[:8]), task.tokenizer, max_completion_length=6,
                    num_generations=4, min_completion_length=3)
    tok = task.tokenizer
    assert not bool((roll.completions[:, :3] == tok.eos_token_id).any())
    assert not bool((roll.completions == tok.bos_token_id).any())
    ended = ~roll.truncated
    assert bool((roll.completion_mask.sum(-1)[ended] >= 4).all())
    assert torch.equal(roll.input_ids[:, : task.prompt_length],
                       task.encode_prompts(task.heldout_pairs[:8]).repeat_interleave(4, 0))


@pytest.mark.parametrize("unit", ["sequence_mean", "token_mean", "constant"])
def test_zero_variance_keep_drop_and_resample_differ_as_documented(task, model, unit):
    """keep: zero-variance rows stay in the batch with zero advantage, inside every denominator;
    drop: they leave the batch, so the same informative rows are divided by fewer rows (sequence_mean,
    constant: the gradient grows by rows/rows left) or fewer tokens (token_mean); resample: fresh
    prompts refill the batch with informative groups (more groups sampled)."""
    def reward(pairs, completions):  # in every draw the first group is informative, the others all zero
        return torch.tensor([float(i % 4 < 2) if i < 4 else 0.0 for i in range(len(pairs))])

    def rollout(zero_variance):
        cfg = GRPOConfig(batch_prompts=3, num_generations=4, max_completion_length=5, zero_variance=zero_variance,
                         unit=unit)
        torch.manual_seed(0)
        return cfg, collect_rollouts(model, task, cfg, torch.Generator().manual_seed(0), reward)

    grads = {}
    for choice in ("keep", "drop", "resample"):
        cfg, out = rollout(choice)
        grads[choice, "out"] = out
        m = copy.deepcopy(model)
        policy_step(m, None, _NoStep(m.parameters(), lr=0.0), out["batch"], cfg, prompt_length=task.prompt_length,
                    max_grad_norm=1e9)
        grads[choice] = torch.cat([p.grad.flatten() for p in m.parameters()])
    keep, drop, resample = (grads[c, "out"] for c in ("keep", "drop", "resample"))
    assert keep["batch"]["rewards"].shape == (3, 4) and keep["batch"]["informative"] == [True, False, False]
    assert drop["batch"]["rewards"].shape == (1, 4) and drop["batch"]["input_ids"].shape[0] == 4
    assert resample["batch"]["rewards"].shape == (3, 4) and resample["batch"]["informative"] == [True] * 3
    assert resample["stats"]["groups_sampled"] == 9 and keep["stats"]["groups_sampled"] == 3
    assert torch.equal(drop["batch"]["input_ids"], keep["batch"]["input_ids"][:4])  # the same informative rows
    if unit == "token_mean":
        tokens = keep["batch"]["completion_mask"][:, task.prompt_length:].sum(-1).float()
        scale = float(tokens.sum() / tokens[:4].sum())
    else:
        scale = 3.0  # 12 rows → 4 rows
    assert scale > 1.5 and grads["keep"].abs().max() > 0
    torch.testing.assert_close(grads["drop"], scale * grads["keep"], rtol=1e-4,
                               atol=1e-6 * float(grads["drop"].abs().max()))


def test_sft_steps_copy_their_batch_indices_without_a_sync(task, model, monkeypatch):
    """The CPU generator keeps the data order the same on every device; its indices reach the device
    through the non-blocking door, one copy per step."""
    from course_lib.trainers.configs import SFTConfig
    from course_lib.trainers.sft import train_sft

    def run(steps):
        cfg = SFTConfig(steps=steps, batch_size=4, eval_every=1000)
        return _count_host_to_device(monkeypatch, lambda: train_sft(model, task, cfg,
                                                                    TrainContext(show_progress=False, threads=None),
                                                                    eval_at_end=False))[0]

    run(1)  # the first run may copy and cache the demonstrations
    two, five = run(2), run(5)
    assert five["sync"] == two["sync"], "no synchronous copy per step (setup may copy the data once)"
    assert five["async"] - two["async"] == 3


@pytest.mark.parametrize("group_size", [1, 4])
def test_right_padded_batches_need_no_attention_mask(task, model, monkeypatch, group_size):
    """Causal attention with no mask (SDPA's is_causal, fused) gives the scored positions exactly the
    dense (N, 1, L, L) pattern's log-probs, entropies and gradients; the hot path never builds it."""
    import course_lib.tinygpt.model as model_module

    prompts = task.encode_prompts(task.heldout_pairs[:4])
    torch.manual_seed(1)
    roll = generate(model, prompts, task.tokenizer, max_completion_length=6, num_generations=4)
    assert bool((roll.attention_mask == 0).any()), "the batch must hold right padding for the test to mean anything"
    args = (roll.input_ids, roll.attention_mask, roll.completion_mask)

    def run(**kw):
        model.zero_grad()
        lp, mask, ent = completion_logprobs(model, *args, start=task.prompt_length, group_size=group_size,
                                            with_entropy=True, **kw)
        lp.sum().backward()
        return lp.detach(), ent, [p.grad.clone() for p in model.parameters()]

    def dense_only(mask):
        raise AssertionError("the hot path must not build the dense mask")

    real = model_module.causal_attention
    monkeypatch.setattr(model_module, "causal_attention", dense_only)
    fused = run(validate=False)
    checked = run(validate=True)  # validated: right padding detected, still no dense mask
    monkeypatch.setattr(model_module, "causal_attention", real)
    monkeypatch.setattr(model_module, "right_padded", lambda mask: False)  # force the dense path
    dense = run(validate=True)
    for a, b in ((fused, dense), (checked, dense)):
        assert torch.allclose(a[0], b[0], atol=1e-6) and torch.allclose(a[1], b[1], atol=1e-6)
        assert all(torch.allclose(x, y, atol=1e-6) for x, y in zip(a[2], b[2]))


def test_a_mask_that_is_not_right_padded_keeps_the_dense_pattern(task, model):
    """Left padding (a hole before the tokens) is detected when validating and masked densely: the
    scores equal those of the same row without its padding."""
    from course_lib.tinygpt.model import right_padded

    ids = torch.cat([task.encode_prompts([(3, 4)]), torch.tensor([[task.tokenizer.eos_token_id]])], dim=1)
    pad = torch.tensor([[task.tokenizer.pad_token_id]])
    left = torch.cat([pad, ids], dim=1)
    attn = torch.cat([torch.zeros(1, 1, dtype=torch.long), torch.ones_like(ids)], dim=1)
    assert not right_padded(attn) and right_padded(torch.ones_like(ids))
    cm_plain = torch.zeros_like(ids)
    cm_plain[:, -1] = 1
    cm_left = torch.cat([torch.zeros(1, 1, dtype=torch.long), cm_plain], dim=1)
    with torch.no_grad():
        plain, _ = completion_logprobs(model, ids, torch.ones_like(ids), cm_plain, start=ids.shape[1] - 1)
        shifted, _ = completion_logprobs(model, left, attn, cm_left, start=left.shape[1] - 1)
    assert torch.allclose(plain, shifted, atol=1e-5)


def test_a_ppo_update_reads_nothing_on_the_host_and_a_step_reads_its_numbers_once(task, model, monkeypatch):
    """PPO's own code keeps its numbers as tensors (the step reads them in one transfer, read_metrics),
    and no forward hands transformers a 2-D mask to prepare on the host (right-padded rollouts run
    with no mask, the critic's too). What is left is transformers' own check for packed sequences,
    one read per forward without a cache: 1 old log-prob + 1 old value + 1 reference forward, then
    a policy and a critic forward per epoch. Every read is attributed to where it happens."""
    import sys

    from course_lib.tinygpt.runtime import read_metrics
    from course_lib.trainers.configs import PPOConfig
    from course_lib.trainers.ppo import build_critic, collect, ppo_update

    cfg = PPOConfig(batch_prompts=4, num_generations=2, max_completion_length=4, num_ppo_epochs=2)
    policy = copy.deepcopy(model)
    torch.manual_seed(0)
    critic = build_critic(policy, task.tokenizer)
    ref = copy.deepcopy(policy).requires_grad_(False)
    batch = collect(policy, task, cfg, resolve_reward("strict", task), torch.Generator().manual_seed(0))
    opts = make_optimizer(policy, 1e-4), make_optimizer(critic, 1e-4)
    readers = []
    for name in HOST_READS:
        original = getattr(torch.Tensor, name)

        def counted(self, *args, _original=original, **kwargs):
            frame = sys._getframe(1)
            while frame is not None and "/torch/" in frame.f_code.co_filename:
                frame = frame.f_back
            readers.append(f"transformers.{frame.f_code.co_name}" if frame
                           and "/transformers/" in frame.f_code.co_filename
                           else (frame.f_code.co_filename if frame else "?"))
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(torch.Tensor, name, counted)
    try:
        upd = ppo_update(policy, critic, ref, *opts, batch["roll"], batch["scores"], cfg,
                         prompt_length=task.prompt_length)
        update_reads = list(readers)
        readers.clear()
        numbers = read_metrics({**upd, "gen_seconds": 0.5})
    finally:
        monkeypatch.undo()
    forwards = 3 + 2 * cfg.num_ppo_epochs
    assert update_reads == ["transformers.find_packed_sequence_indices"] * forwards, update_reads
    assert len(readers) == 1 and readers[0].endswith("course_lib/tinygpt/runtime.py"), readers  # one tolist per step
    assert all(isinstance(v, float) for v in numbers.values() if v is not None)
    assert 0 <= numbers["clip_fraction"] <= 1 and numbers["gen_seconds"] == 0.5
