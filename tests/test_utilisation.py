"""MFU's FLOP count against a hand count on a tiny config, and the peak table (issue 29)."""

import pytest

from course_lib.configs import get_config
from course_lib.model import ModelConfig
from course_lib.utilisation import (
    body_flops,
    grpo_step_flops,
    mfu_entry,
    peak_flops,
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

    cfg = SimpleNamespace(task=SimpleNamespace(digits=1), model=TINY, orpo=SimpleNamespace(batch_size=4),
                          kto=SimpleNamespace(batch_size=4))
    assert run_flops("orpo", cfg, [{}], vocab=V) == 3 * 8 * 932
    assert run_flops("kto", cfg, [{}, {}], vocab=V) == 2 * (3 * 4 * 932 + 4 * 932)


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
    assert run_flops("rm", cfg, [row], vocab=V) is None and run_flops("ppo", cfg, [row], vocab=V) is None


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
    """Capability mocked: an H200 is measured against its bf16 peak, a T4 against fp32 (what the course runs there)."""
    import torch

    from course_lib.passport import format_passport, passport

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: name)
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    cfg = get_config("test")
    row = {"groups_sampled": 4, "groups_used": 4, "zero_variance_rate": 0.25, "completion_length": 3.0, "skipped": 0}
    entry = mfu_entry("grpo", cfg, [row] * 3, 2.0, "cuda", vocab=V)
    assert entry["dtype"] == dtype and entry["peak_flops"] == pytest.approx(peak)
    assert entry["mfu"] == pytest.approx(run_flops("grpo", cfg, [row] * 3, vocab=V) / 2.0 / peak)
    pp = passport(cfg, "grpo", device="cuda", utilisation=entry)
    assert pp["systems"]["mfu"] is entry and "mfu" in format_passport(pp)
    assert mfu_entry("ppo", cfg, [row], 2.0, "cuda", vocab=V)["mfu"] is None  # not counted: no MFU claimed
