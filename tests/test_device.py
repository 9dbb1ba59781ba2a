import pytest
import torch

from course_lib.tinygpt.device import environment_report, resolve_device


def test_auto_picks_what_is_there():
    expected = "cuda" if torch.cuda.is_available() else None
    device = resolve_device("auto")
    if expected:
        assert device.type == expected
    assert resolve_device("cpu") == torch.device("cpu")


def test_report_names_versions_and_device():
    report = environment_report()
    assert report["torch"] == torch.__version__
    assert report["device"] in ("cpu", "cuda", "mps")
    assert report["colab"] in ("yes", "no")


def test_bad_device_names():
    with pytest.raises(ValueError, match="device"):
        resolve_device("tpu")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="cuda"):
            resolve_device("cuda")


# ---- precision by compute capability: the capability is mocked, no GPU needed -----------
CAPABILITIES = {"T4": (7, 5), "A100": (8, 0), "H100": (9, 0)}


def _fake_cuda(monkeypatch, capability):
    monkeypatch.setattr(torch.cuda, "get_device_capability", lambda device=None: capability)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "mocked GPU")
    monkeypatch.setattr(torch.cuda, "is_bf16_supported", lambda *a, **k: True)  # a T4 says True too (emulated)


@pytest.mark.parametrize(("gpu", "course", "trl"),
                         [("T4", "fp32", "fp16"), ("A100", "bf16", "bf16"), ("H100", "bf16", "bf16")])
def test_precision_follows_the_compute_capability(monkeypatch, gpu, course, trl):
    """bf16 only with bf16 tensor cores (sm_80+); a T4 (sm_75) trains the tiny GPT in fp32, TRL in fp16."""
    from course_lib.tinygpt import runtime

    _fake_cuda(monkeypatch, CAPABILITIES[gpu])
    cuda = torch.device("cuda")
    assert runtime.precision(cuda) == course and runtime.trl_precision(cuda) == trl
    ctx = runtime.autocast(cuda)
    if course == "bf16":
        assert isinstance(ctx, torch.autocast) and ctx.fast_dtype == torch.bfloat16
    else:
        assert not isinstance(ctx, torch.autocast)
    sm = "sm_{}{}".format(*CAPABILITIES[gpu])
    assert runtime.describe_precision(cuda).startswith(f"{course} ") and sm in runtime.describe_precision(cuda)


def test_precision_on_the_cpu_is_fp32_and_never_asks_cuda(monkeypatch):
    from course_lib.tinygpt import runtime

    def no_cuda(device=None):
        raise AssertionError("the CPU path must not query a CUDA capability")

    monkeypatch.setattr(torch.cuda, "get_device_capability", no_cuda)
    cpu = torch.device("cpu")
    assert (runtime.precision(cpu), runtime.trl_precision(cpu), runtime.cuda_capability(cpu)) == ("fp32", "fp32", None)
    assert not isinstance(runtime.autocast(cpu), torch.autocast)


@pytest.mark.parametrize(("gpu", "bf16", "fp16"), [("T4", False, True), ("A100", True, False), ("H100", True, False)])
def test_the_trl_bridge_sets_its_precision_flags_by_capability(monkeypatch, gpu, bf16, fp16):
    from course_lib.trainers.configs import get_config
    from course_lib.trl import trl_bridge

    _fake_cuda(monkeypatch, CAPABILITIES[gpu])
    c = trl_bridge.translate(get_config("test"), "grpo", cuda=True).config
    assert (c["bf16"], c["fp16"], c["use_cpu"]) == (bf16, fp16, False)
    cpu = trl_bridge.translate(get_config("test"), "grpo", cuda=False).config
    assert (cpu["bf16"], cpu["fp16"]) == (False, False)


@pytest.mark.parametrize("gpu", ["T4", "H100"])
def test_environment_report_and_passport_name_the_precision(monkeypatch, gpu):
    from course_lib.run.passport import format_passport, passport
    from course_lib.trainers.configs import get_config

    _fake_cuda(monkeypatch, CAPABILITIES[gpu])
    report = environment_report()
    expected = "fp32" if gpu == "T4" else "bf16"
    assert report["device"] == "cuda" and report["compute_capability"] == "{}.{}".format(*CAPABILITIES[gpu])
    assert report["precision"].startswith(expected)
    pp = passport(get_config("test"), "grpo", device="cuda")
    assert pp["systems"]["precision"].startswith(expected) and "precision" in format_passport(pp)
    assert passport(get_config("test"), "grpo", device="cpu")["systems"]["precision"].startswith("fp32")


def test_reward_scores_stay_fp32_inside_a_policy_autocast():
    """Roles: the reward model scores in float32 even when a caller holds a bf16 autocast."""
    from course_lib.tinygpt.runtime import full_precision
    from course_lib.tinygpt.task import AdditionTask
    from course_lib.trainers.configs import get_config
    from course_lib.trainers.reward_model import build_reward_model, scores

    task = AdditionTask(get_config("test").task)
    torch.manual_seed(0)
    rm = build_reward_model(get_config("test").model, task.tokenizer).eval()
    ids = task.encode_prompts([(1, 2), (3, 4), (5, 6)])
    attention = torch.ones_like(ids)
    with torch.no_grad():
        plain = scores(rm, ids, attention)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            inside = scores(rm, ids, attention)
            lowered = rm(input_ids=ids, attention_mask=attention).logits.squeeze(-1).float()
            with full_precision("cpu"):
                assert torch.is_autocast_enabled("cpu") is False
    assert torch.equal(plain, inside)
    assert not torch.equal(plain, lowered), "bf16 autocast must change the unprotected scores (the test's premise)"


def test_full_precision_turns_tf32_off_on_cuda_and_restores_it():
    """The flags are global torch settings, so this runs without a GPU: a caller's TF32 is off inside, back after."""
    from course_lib.tinygpt.runtime import full_precision

    matmul = torch.backends.cuda.matmul
    name, on, off = (("fp32_precision", "tf32", "ieee") if hasattr(matmul, "fp32_precision")
                     else ("allow_tf32", True, False))
    saved = getattr(matmul, name)
    setattr(matmul, name, on)
    try:
        with full_precision("cuda"):
            assert getattr(matmul, name) == off and getattr(torch.backends.cudnn, name) == off
            assert not torch.is_autocast_enabled("cuda")
        assert getattr(matmul, name) == on
    finally:
        setattr(matmul, name, saved)


@pytest.mark.parametrize(("gpu", "dtype"), [("T4", torch.float32), ("A100", torch.bfloat16), ("H100", torch.bfloat16)])
def test_the_instruct_model_loads_in_the_dtype_trl_trains_in(monkeypatch, gpu, dtype):
    """A T4 gets float32 weights (TRL's fp16 autocast and GradScaler), not emulated bf16; notebook 18 asks the
    bridge."""
    from conftest import ROOT

    from course_lib.trl import trl_bridge

    _fake_cuda(monkeypatch, CAPABILITIES[gpu])
    assert (trl_bridge.instruct_dtype(torch.device("cuda")) == dtype
            and trl_bridge.instruct_dtype("cpu") == torch.float32)
    source = (ROOT / "notebooks" / "18_graduating_to_trl.py").read_text()
    assert "dtype=trl_bridge.instruct_dtype(DEVICE)" in source and "dtype=torch.bfloat16" not in source
