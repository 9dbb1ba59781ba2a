"""Every trainer, the starts, evaluation, the reward model, the judge, recipes and the environment run
with the model on ``DEVICE`` without mixing devices, checked on the CPU by
``device_clash.DeviceClash``: it tags what the code puts on the device it was given and refuses an
op that mixes a device tensor with a host tensor, as CUDA does. What it does not cover is in its
docstring (CUDA-only branches, generator devices, another process).

Short runs on the ``test`` config; ``DEVICE`` is ``torch.device("cpu")`` made outside the mode, playing the
accelerator.
"""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch
from device_clash import Clash, DeviceClash

from course_lib.run.pipeline import KINDS, run, sft_policy
from course_lib.tinygpt.model import build_model
from course_lib.tinygpt.task import AdditionTask
from course_lib.trainers.configs import get_config
from course_lib.trainers.trainer import TrainContext

DEVICE = torch.device("cpu")  # the accelerator's stand-in: what resolve_device returns


def short(cfg):
    """The ``test`` config cut to two steps per trainer (the SFT stage to 20)."""
    for kind in KINDS:
        section = getattr(cfg, kind)
        setattr(cfg, kind, dataclasses.replace(section, steps=20 if kind == "sft" else 2,
                                               eval_every=20 if kind == "sft" else 2))
    return cfg


# ---- the checker itself can fail ----------------------------------------------------------------------------
def test_the_checker_refuses_what_cuda_refuses():
    cfg = get_config("test")
    task = AdditionTask(cfg.task)
    with DeviceClash() as clash:
        model = build_model(cfg.model, task.tokenizer).to(DEVICE)
        with pytest.raises(Clash, match="mixes a device tensor"):
            model(input_ids=task.encode_prompts(task.heldout_pairs[:2]))  # host ids into a device model
        logits = model(input_ids=task.encode_prompts(task.heldout_pairs[:2], DEVICE)).logits  # moved: fine
        with pytest.raises(Clash):
            torch.cat([logits[:, 0], torch.zeros(2, logits.shape[-1])])  # a new host tensor beside a device one
        # a host scalar: allowed
        assert float(logits.detach().sum() * torch.tensor(2.0)) == float(logits.detach().sum()) * 2
        on_host = logits.cpu()
        with pytest.raises(Clash, match="numpy"):
            logits.detach().numpy()
        assert on_host.detach().numpy().shape == tuple(logits.shape)
        with pytest.raises(Clash):
            on_host + logits
        same = torch.zeros(3, device=on_host.device)  # made where a host tensor lives: the host
        assert (same + on_host[0, 0, :3]).shape == (3,)
        twin = copy.deepcopy(model)  # a copy of a device model is on the device
        with pytest.raises(Clash):
            twin(input_ids=task.encode_prompts(task.heldout_pairs[:2]))
        left = build_model(cfg.model, task.tokenizer)  # never moved
        with pytest.raises(Clash):
            left(input_ids=task.encode_prompts(task.heldout_pairs[:2], DEVICE))
    assert clash.checked > 100


# ---- the trainers, end to end -------------------------------------------------------------------------------
@pytest.mark.parametrize("kind,control", [(k, "rft" if k == "grpo" else None) for k in KINDS] + [("dpo", "sft")])
def test_every_trainer_runs_on_one_device(kind, control, tmp_path):
    with DeviceClash() as clash:
        summary = run(kind, short(get_config("test")), tmp_path / kind, device=DEVICE, control=control,
                      show_progress=False, verbose=False, threads=1)
    assert summary["steps"] == (20 if kind == "sft" else 2)
    assert clash.checked > 1000, clash.checked


def test_grpo_with_the_calculator_runs_on_one_device(tmp_path):
    cfg = short(get_config("test"))
    cfg.task = dataclasses.replace(cfg.task, env="calculator", tool_demos=5)
    with DeviceClash() as clash:
        run("grpo", cfg, tmp_path / "env", device=DEVICE, show_progress=False, verbose=False, threads=1)
    assert clash.checked > 1000


# ---- what the notebooks call besides the trainers -----------------------------------------------------------
def test_the_starts_evaluation_and_the_notebooks_direct_calls_on_one_device(tmp_path, monkeypatch):
    """As notebooks 09, 10 and 15 call them: the starts, evaluation, GRPO with a reference and a KL term, the KL
    to the reference."""
    from course_lib.run.starts import env_start, sft_start
    from course_lib.tinygpt.evaluation import evaluate, reference_kl, sample_completions
    from course_lib.trainers.grpo import train_grpo

    monkeypatch.setenv("COURSE_CACHE", str(tmp_path))
    cfg = short(get_config("test"))
    env_cfg = dataclasses.replace(cfg, task=dataclasses.replace(cfg.task, env="calculator", tool_demos=5))
    with DeviceClash() as clash:
        for _ in range(2):  # trained, then read from the cache
            task, model, _ = sft_start(cfg, device=DEVICE, verbose=False)
            evaluate(model, task)
            sample_completions(model, task, task.heldout_pairs[:2], n=2)
            env_task, tool_model, _ = env_start(env_cfg, steps=2, device=DEVICE, verbose=False)
            evaluate(tool_model, env_task)
        weights = copy.deepcopy(model.state_dict())
        reference = copy.deepcopy(model).eval().requires_grad_(False)
        torch.manual_seed(0)
        train_grpo(model, task, dataclasses.replace(cfg.grpo, beta=0.04, kl_estimator="k3"),
                   TrainContext(show_progress=False), generator=torch.Generator().manual_seed(1),
                   reference_state=weights)
        reference_kl(model, reference, task, max_completion_length=4)
    assert clash.checked > 1000


def test_reward_model_best_of_n_and_the_judge_on_one_device():
    from course_lib.run.ai_feedback import fit_reward_model_on_judge, rl_against
    from course_lib.tinygpt.rewards import resolve_reward
    from course_lib.trainers.configs import PPOConfig
    from course_lib.trainers.judge import fit_judge
    from course_lib.trainers.ppo import build_critic, train_ppo
    from course_lib.trainers.reward_model import (
        RewardModelScorer,
        best_of_n_curve,
        best_of_n_scores,
        fit_reward_model,
    )

    cfg = short(get_config("test"))
    with DeviceClash() as clash:
        quiet = TrainContext(show_progress=False)
        task, policy, _ = sft_policy(get_config("test"), quiet, seed=0, device=DEVICE)  # it must answer
        rm = fit_reward_model(policy, task, cfg.rm, seed=0)
        scorer = RewardModelScorer(rm["model"], task)
        proxy, gold, ids = best_of_n_scores(policy, task, task.heldout_pairs[:2], scorer, k=4, max_completion_length=4)
        best_of_n_curve(proxy, gold, [1, 2, 4], ids=ids)
        torch.manual_seed(0)
        train_ppo(policy, build_critic(policy, task.tokenizer), task,
                  PPOConfig(steps=1, batch_prompts=4, max_completion_length=4,
                  eval_every=1), scorer,
                  TrainContext(show_progress=False), generator=torch.Generator().manual_seed(1),
                  gold_fn=resolve_reward("strict", task), track_kl=True)
        jc = get_config("test").judge  # its 20 steps: fewer leave the judge abstaining on every pair
        judge = fit_judge(policy, task, jc, seed=0)
        # no abstaining
        on_judge = fit_reward_model_on_judge(policy, task, judge["judge_fn"], cfg.rm, tie_margin=0.0, seed=0)
        rl_against(policy, task, on_judge["model"], PPOConfig(steps=1, batch_prompts=4, max_completion_length=4,
                                                              eval_every=1), seed=0)
    assert clash.checked > 1000


def test_a_recipe_on_one_device(tmp_path):
    from course_lib.run import recipes

    with DeviceClash() as clash:
        recipes.run_recipe("pretrain:steps=2,sft:steps=2,grpo:steps=1", get_config("test"), tmp_path, device=DEVICE,
                           show_progress=False, verbose=False, threads=1, kl_samples=1)
    assert clash.checked > 100


def test_a_forgotten_move_in_a_trainer_is_caught(tmp_path, monkeypatch):
    """The same short SFT run with one move taken out (the demonstrations stay on the host) fails, as on CUDA."""
    original = AdditionTask.demonstrations
    monkeypatch.setattr(AdditionTask, "demonstrations", lambda self, device=None: original(self))
    with DeviceClash(), pytest.raises(Clash, match="indexing a host tensor"):
        run("sft", short(get_config("test")), tmp_path / "sft", device=DEVICE, show_progress=False, verbose=False,
            threads=1)
