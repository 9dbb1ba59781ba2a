"""MFU's FLOP count against a hand count on a tiny config, and the peak table."""

import pytest

from course_lib.tinygpt.model import ModelConfig
from course_lib.tinygpt.task import TaskConfig
from course_lib.trainers.configs import get_config
from course_lib.trainers.utilisation import (
    body_flops,
    grpo_step_flops,
    mfu_entry,
    peak_flops,
    ppo_step_flops,
    reward_model_step_flops,
    run_flops,
    supervised_step_flops,
)

TINY = ModelConfig(n_layer=1, n_embd=2, n_head=1, n_positions=8)  # d = 2: 24·d² = 96 per token
V = 3  # head: 2·d·V = 12 per scored position


def test_body_flops_by_hand():
    # positions 0, 1 (prompt of 2): 2·96 + 4·d·(1 + 2) = 192 + 24 = 216; position 2 alone: 96 + 8·3 = 120
    assert body_flops(TINY, 0, 2) == 216 and body_flops(TINY, 2, 3) == 120 and body_flops(TINY, 2, 2) == 0


def test_grpo_step_flops_by_hand():
    """P = 2, completions of c = 2 tokens, one group of G = 2, μ = 1.

    One completion, prompt shared: body of the prompt 216 (once per group), body of the first
    completion token (fed on; the second is never fed) 120, head on 2 scored positions 24.
    Per group: 216 + 2·(120 + 24) = 504. Sampling 504, reference 504, update 3·504 = 1512.
    """
    args = dict(prompt_length=2, completion_length=2, groups_sampled=1, batch_groups=1, num_generations=2)
    assert grpo_step_flops(TINY, V, update_groups=1, **args) == 504 + 504 + 1512
    # the group has zero variance and the update skips it: sampling and reference only
    assert grpo_step_flops(TINY, V, update_groups=0, **args) == 504 + 504
    # no reference kept: no reference forward
    assert grpo_step_flops(TINY, V, update_groups=1, reference=False, **args) == 504 + 1512
    # μ = 2 inner epochs: two updates
    assert grpo_step_flops(TINY, V, update_groups=1, num_iterations=2, **args) == 504 + 504 + 2 * 1512


def test_supervised_step_flops_by_hand():
    # one sequence, no prompt sharing: 216 + 120 + 24 = 360; forward + backward on 4 sequences
    assert supervised_step_flops(TINY, V, prompt_length=2, completion_length=2, sequences=4) == 3 * 4 * 360


def test_orpo_and_kto_step_flops_by_hand():
    """digits = 1: prompt P = 5, completions of 2 + <eos> = 3 tokens. One scored completion: body of
    positions 0–4: 24·4·5 + 8·(1+2+3+4+5) = 600; positions 5, 6: 24·4·2 + 8·(6+7) = 296; head on 3: 36.
    ORPO, 4 pairs: 3 · 8 · 932; KTO, 4 answers: 3 · 4 · 932 + 4 · 932 (z0's no-gradient forward)."""
    from types import SimpleNamespace

    cfg = SimpleNamespace(task=TaskConfig(digits=1), model=TINY, orpo=SimpleNamespace(batch_size=4),
                          kto=SimpleNamespace(batch_size=4))
    assert run_flops("orpo", cfg, [{}], vocab=V) == 3 * 8 * 932
    assert run_flops("kto", cfg, [{}, {}], vocab=V) == 2 * (3 * 4 * 932 + 4 * 932)


def test_reward_model_step_flops_by_hand():
    """Sequences of 3 real tokens, all fed on (the reward is read at the last): body 24·4·3 + 8·(1+2+3) = 336,
    scalar head 2·d·1 on 3 positions = 12. Forward + backward on chosen and rejected of 2 pairs: 3·4·348."""
    assert reward_model_step_flops(TINY, sequence_length=3, pairs=2) == 3 * 4 * 348 == 4176


def test_reward_model_run_flops_by_hand():
    """Rows carry the batch's pairs and mean length; an older row without them counts the batch size and
    the longest sample (P = 5, max_completion_length 3: 8 tokens, body 96·8 + 8·36 = 1056, head 32)."""
    from types import SimpleNamespace

    cfg = SimpleNamespace(task=TaskConfig(digits=1), model=TINY,
                          rm=SimpleNamespace(batch_size=4, max_completion_length=3))
    assert run_flops("rm", cfg, [{"batch_pairs": 2, "sequence_length": 3.0}], vocab=V) == 4176
    assert run_flops("rm", cfg, [{}], vocab=V) == 3 * 8 * (1056 + 32)


def test_judge_run_flops_by_hand():
    """One row per pair, prompt | A | B | <eos>, every position fed on (the pads in the slots too): P = 5 and slots
    of 1 token make 8 tokens, 1056 + 32 as the reward model's longest sample above; a row's pairs, else the batch."""
    from types import SimpleNamespace

    cfg = SimpleNamespace(task=TaskConfig(digits=1), model=TINY,
                          judge=SimpleNamespace(batch_size=4, max_completion_length=1))
    assert run_flops("judge", cfg, [{"batch_pairs": 2}, {}], vocab=V) == 3 * 2 * 1088 + 3 * 4 * 1088


def test_reward_model_rows_carry_what_the_count_needs():
    """The trainer logs each step's pairs and mean real length: one-digit against two-digit answers, P = 5,
    so every (chosen, rejected) pair averages 5 + (2 + 3)/2 = 7.5 tokens whatever the draw."""
    import dataclasses

    import torch

    from course_lib.tinygpt.task import AdditionTask
    from course_lib.trainers.reward_model import build_reward_model, train_reward_model

    cfg = get_config("test")
    task = AdditionTask(cfg.task)
    pairs = [(1, 2), (2, 3), (5, 7)]
    a_ids = task.encode_pairs(pairs, ["3", "5", "9"])[0]
    b_ids = task.encode_pairs(pairs, ["12", "15", "13"])[0]
    data = {"a_ids": a_ids, "b_ids": b_ids, "label": torch.tensor([True, False, True]), "n_pairs": 3}
    torch.manual_seed(0)
    rm = build_reward_model(cfg.model, task.tokenizer)
    rows = train_reward_model(rm, data, dataclasses.replace(cfg.rm, steps=2),
                              generator=torch.Generator().manual_seed(0))
    assert [(r["batch_pairs"], r["sequence_length"]) for r in rows] == [(3, 7.5), (3, 7.5)]
    assert run_flops("rm", cfg, rows, vocab=V) == 2 * reward_model_step_flops(cfg.model, sequence_length=7.5, pairs=3)


def test_ppo_step_flops_by_hand():
    """P = 2, completions of c = 2 tokens, one prompt, G = 2, one epoch.

    Sampling as GRPO's group: 504. The update's forwards share no prompt and run positions 0–2 (the
    last token is never fed on): body 216 + 120 = 336; the policy's head from position 0 on 3
    positions: 36 → 372; the critic's scalar head on all 4 positions: 2·2·4 = 16 → 352.
    Forward only (old policy, reference, critic): 2 · (372 + 372 + 352) = 2192; one epoch of
    forward + backward of both: 3 · 2 · (372 + 352) = 4344.
    """
    args = dict(prompt_length=2, completion_length=2, prompts=1, num_generations=2)
    assert ppo_step_flops(TINY, V, num_ppo_epochs=1, reference=True, **args) == 504 + 2192 + 4344
    assert ppo_step_flops(TINY, V, num_ppo_epochs=1, reference=False, **args) == 504 + 2192 - 2 * 372 + 4344
    assert ppo_step_flops(TINY, V, num_ppo_epochs=2, reference=True, **args) == 504 + 2192 + 2 * 4344


def test_ppo_run_flops_follows_the_rows_and_the_reference():
    """One count per row at its mean completion length; the reference forward only when kl_coef > 0 keeps one."""
    import dataclasses

    cfg = get_config("test")
    p, P = cfg.ppo, 3 + 2 * cfg.task.digits
    rows = [{"completion_length": 3.0}, {"completion_length": 2.5}]

    def step(c, reference):
        return ppo_step_flops(cfg.model, V, prompt_length=P, completion_length=c, prompts=p.batch_prompts,
                              num_generations=p.num_generations, num_ppo_epochs=p.num_ppo_epochs, reference=reference)

    assert p.kl_coef == 0 and run_flops("ppo", cfg, rows, vocab=V) == step(3.0, False) + step(2.5, False)
    cfg.ppo = dataclasses.replace(p, kl_coef=0.05)
    assert run_flops("ppo", cfg, rows, vocab=V) == step(3.0, True) + step(2.5, True)
    assert run_flops("ppo", cfg, rows, vocab=V, reference=False) == step(3.0, False) + step(2.5, False)


def test_run_flops_follows_the_rows():
    """Skipped steps cost only their sampling; zero-variance groups leave the update (β = 0)."""
    cfg = get_config("test")
    row = {"groups_sampled": 4, "groups_used": 4, "zero_variance_rate": 0.5, "completion_length": 3.0, "skipped": 0}
    one = run_flops("grpo", cfg, [row], vocab=V)
    P = 3 + 2 * cfg.task.digits
    g = cfg.grpo
    expected = grpo_step_flops(cfg.model, V, prompt_length=P, completion_length=3.0, groups_sampled=4, batch_groups=4,
                               update_groups=2, num_generations=g.num_generations)
    assert one == expected and run_flops("grpo", cfg, [row, row], vocab=V) == 2 * one
    assert run_flops("rft", cfg, [row], vocab=V) is None  # not a pipeline trainer: not counted


@pytest.mark.parametrize(("name", "dtype", "tflops"), [
    ("NVIDIA H100 80GB HBM3", "bf16", 989), ("NVIDIA H100 PCIe", "bf16", 756), ("NVIDIA H200", "bf16", 989),
    ("NVIDIA A100-SXM4-80GB", "bf16", 312), ("NVIDIA L4", "bf16", 121), ("Tesla T4", "fp32", 8.1),
    ("Tesla T4", "fp16", 65), ("Tesla T4", "bf16", None), ("NVIDIA H100 NVL", "bf16", None),
])
def test_peaks_by_exact_device_name(name, dtype, tflops):
    got = peak_flops(name, dtype)
    assert (got is None) if tflops is None else got == pytest.approx(tflops * 1e12)


def test_bad_precision_and_no_mfu_off_cuda():
    with pytest.raises(ValueError, match="precision"):
        peak_flops("NVIDIA H200", "tf32")
    assert mfu_entry("grpo", get_config("test"), [], 1.0, "cpu", vocab=V) is None


@pytest.mark.parametrize(("name", "capability", "dtype", "peak"), [
    ("NVIDIA H200", (9, 0), "bf16", 989e12), ("Tesla T4", (7, 5), "fp32", 8.1e12)])
def test_the_passport_entry_on_cuda_uses_the_dtype_the_run_used(monkeypatch, name, capability, dtype, peak):
    """Capability mocked: an H200 is measured against its bf16 peak, a T4 against fp32 (what the course runs there);
    every pipeline trainer gets a number, the reward model against the fp32 peak."""
    import torch

    from course_lib.run.passport import format_passport, passport

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    cfg = get_config("test")
    row = {"groups_sampled": 4, "groups_used": 4, "zero_variance_rate": 0.25, "completion_length": 3.0, "skipped": 0}
    entry = mfu_entry("grpo", cfg, [row] * 3, 2.0, "cuda", vocab=V)
    assert entry["dtype"] == dtype and entry["peak_flops"] == pytest.approx(peak)
    assert entry["mfu"] == pytest.approx(run_flops("grpo", cfg, [row] * 3, vocab=V) / 2.0 / peak)
    pp = passport(cfg, "grpo", device="cuda", utilisation=entry)
    assert pp["systems"]["mfu"] is entry and "mfu" in format_passport(pp)
    ppo = mfu_entry("ppo", cfg, [row] * 3, 2.0, "cuda", vocab=V)
    assert ppo["dtype"] == dtype and ppo["mfu"] > 0
    assert ppo["mfu"] == pytest.approx(run_flops("ppo", cfg, [row] * 3, vocab=V) / 2.0 / peak)
    # the reward model scores in float32 with TF32 off: measured against the fp32 peak on every device
    rm_rows = [{"batch_pairs": 16, "sequence_length": 7.5}] * 3
    rm = mfu_entry("rm", cfg, rm_rows, 2.0, "cuda", vocab=V)
    fp32 = peak_flops(name, "fp32")
    assert rm["dtype"] == "fp32" and rm["mfu"] > 0
    assert rm["mfu"] == pytest.approx(run_flops("rm", cfg, rm_rows, vocab=V) / 2.0 / fp32)
    assert passport(cfg, "rm", device="cuda", utilisation=rm)["systems"]["mfu"]["mfu"] == rm["mfu"]


def test_the_compute_dtype_is_fp32_only_for_a_trainer_registered_with_full_precision(monkeypatch):
    """On a bf16 device the policy trainers compute in bf16; the reward model and the judge
    (``register(full_precision=True)``) in fp32, so their MFU is against the fp32 peak; an unregistered kind follows
    the device."""
    from course_lib.tinygpt import runtime
    from course_lib.trainers.trainer import trainers
    from course_lib.trainers.utilisation import compute_dtype

    monkeypatch.setattr(runtime, "precision", lambda device: "bf16")
    assert [k for k, e in trainers().items() if e.full_precision] == ["rm", "judge"]
    assert compute_dtype("rm", "cuda") == compute_dtype("judge", "cuda") == "fp32"
    assert compute_dtype("grpo", "cuda") == compute_dtype("sft", "cuda") == compute_dtype("toy", "cuda") == "bf16"
