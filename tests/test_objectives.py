"""GSPO, CISPO and DAPO's overlong shaping inside the GRPO trainer, and the verifier-failure count.

The trainer is run for a few steps on the ``test`` config (after a short SFT); every step's batch
and starting weights are recorded, and the loss it reports is recomputed from the library
functions alone (``sequence_ratio``, ``cispo_objective``, ``clipped_surrogate``, ``aggregate``,
``overlong_penalty``) on the same tensors — so a trainer that ignored an option would fail.
"""

from __future__ import annotations

import copy
import dataclasses

import pytest
import torch

from course_lib.__main__ import apply_overrides, build_parser
from course_lib.formulas.advantages import compute_advantages
from course_lib.formulas.policy_loss import aggregate, cispo_objective, clipped_surrogate, sequence_ratio
from course_lib.tinygpt.model import build_model, completion_logprobs
from course_lib.tinygpt.rewards import CheckerReward, OverlongShaped, overlong_penalty, resolve_reward
from course_lib.tinygpt.rollout import collect_rollouts
from course_lib.tinygpt.task import AdditionTask
from course_lib.trainers import grpo as grpo_module
from course_lib.trainers.configs import get_config, validate
from course_lib.trainers.grpo import train_grpo
from course_lib.trainers.sft import train_sft
from course_lib.trainers.trainer import TrainContext

LR = 0.2  # large enough that the second inner epoch's ratios leave 1 and the clip or cap acts


@pytest.fixture(scope="module")
def start():
    """The test config's task and a short-SFT policy (varied rewards, so advantages are not all zero)."""
    cfg = get_config("test")
    task = AdditionTask(cfg.task)
    torch.manual_seed(0)
    model = build_model(cfg.model, task.tokenizer)
    train_sft(model, task, cfg.sft, TrainContext(show_progress=False), seed=0)
    return cfg, task, model


def _run(start, monkeypatch, **options):
    """Three GRPO steps with ``options``; each policy step's (batch, weights before, reported loss)."""
    cfg, task, model = start
    g = dataclasses.replace(cfg.grpo, steps=3, eval_every=100, num_iterations=2, learning_rate=LR, **options)
    validate(dataclasses.replace(cfg, grpo=g))
    real, calls = grpo_module.policy_step, []

    def recording(m, ref, opt, batch, c, **kw):
        before = copy.deepcopy(m.state_dict())
        out = real(m, ref, torch.optim.SGD(m.parameters(), lr=LR), batch, c, **{**kw, "max_grad_norm": 1e9})
        calls.append((batch, before, float(out["loss"]), float(out["clip_fraction"])))
        return out

    monkeypatch.setattr(grpo_module, "policy_step", recording)
    train_grpo(copy.deepcopy(model), task, g, TrainContext(show_progress=False),
               generator=torch.Generator().manual_seed(0), eval_fn=lambda m: {"accuracy": 0.0})
    return g, calls


def _library_loss(start, g, batch, before):
    """μ inner epochs of plain SGD on the library's objective: the mean loss and the clip fraction of the last."""
    _, task, model = start
    m = copy.deepcopy(model)
    m.load_state_dict(before)
    m.train()
    opt = torch.optim.SGD(m.parameters(), lr=LR)
    plen = task.prompt_length
    args = (batch["input_ids"], batch["attention_mask"], batch["completion_mask"])
    loss_mask = batch["completion_mask"][:, plen:].float()
    adv = compute_advantages(batch["rewards"], g.advantage).flatten()
    old, losses = None, []
    for _ in range(g.num_iterations):
        logps, mask = completion_logprobs(m, *args, start=plen)
        old = logps.detach() if old is None else old
        if g.importance_sampling_level == "sequence":
            obj, clipped = clipped_surrogate(sequence_ratio(logps, old, mask), adv, g.epsilon, g.epsilon_high,
                                             return_clipped=True)
            obj, clipped = obj[:, None].expand_as(logps), clipped[:, None].expand_as(logps)
        elif g.loss_type == "cispo":
            obj, clipped = cispo_objective(torch.exp(logps - old), adv, logps, g.epsilon_high, return_clipped=True)
        else:
            obj, clipped = clipped_surrogate(torch.exp(logps - old), adv, g.epsilon, g.epsilon_high,
                                             return_clipped=True)
        loss = -aggregate(obj, loss_mask, unit=g.unit, max_length=g.max_completion_length)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    return sum(losses) / len(losses), float(aggregate(clipped.float(), loss_mask, "token_mean"))


OPTIONS = {
    "gspo": dict(importance_sampling_level="sequence", unit="sequence_mean"),
    "cispo": dict(loss_type="cispo", epsilon_high=1.0),  # ε_max = 1: the cap acts on the second epoch
    "dapo_overlong": dict(soft_punish_cache=1, epsilon_high=0.28, zero_variance="resample"),
}


@pytest.mark.parametrize("name", OPTIONS)
def test_the_trainer_reports_the_loss_the_library_computes(start, monkeypatch, name):
    g, calls = _run(start, monkeypatch, **OPTIONS[name])
    informative = [c for c in calls if float(c[0]["rewards"].std(dim=1).max()) > 0]
    assert calls and informative, "no informative group: the test would not see the objective"
    for batch, before, loss, clip in calls:
        want_loss, want_clip = _library_loss(start, g, batch, before)
        assert loss == pytest.approx(want_loss, abs=1e-6)
        assert clip == pytest.approx(want_clip, abs=1e-6)
    # the option matters: the token-level clipped GRPO loss on the same batch is another number
    plain = dataclasses.replace(g, importance_sampling_level="token", loss_type="clipped", unit="token_mean",
                                epsilon_high=0.2)
    batch, before, loss, _ = informative[0]
    if name != "dapo_overlong":
        other = _library_loss(start, plain, batch, before)[0]
        assert abs(other - loss) > 1e-5  # ten times the tolerance of the equality above


def test_overlong_shaping_reaches_the_rewards_the_trainer_learns_from(start):
    cfg, task, model = start
    g = dataclasses.replace(cfg.grpo, soft_punish_cache=1, temperature=3.0)  # hot sampling: long, truncated rows
    shaped = grpo_module.grpo_reward(g, task)
    assert isinstance(shaped, OverlongShaped) and grpo_module.grpo_reward(cfg.grpo, task).__class__ is CheckerReward
    out = collect_rollouts(model, task, g, torch.Generator().manual_seed(0), shaped)
    b = out["batch"]
    lengths = b["completion_mask"][:, task.prompt_length:].sum(-1)
    plain = resolve_reward("strict", task)(
        [p for p in out["pairs"] for _ in range(g.num_generations)], b["input_ids"][:, task.prompt_length:])
    penalty = overlong_penalty(lengths, g.max_completion_length, 1)
    assert float(penalty.min()) == -1.0  # some completions were truncated
    assert torch.allclose(b["rewards"].flatten(), plain + penalty)
    assert out["stats"]["overlong_penalty"] == pytest.approx(float(penalty.mean()))  # keep: every row is in the batch


@pytest.mark.parametrize(("options", "match"), [
    (dict(importance_sampling_level="sequence"), r"accepted: unit='sequence_mean'; got unit='token_mean'"),
    (dict(importance_sampling_level="sequence", unit="sequence_mean", loss_type="cispo", epsilon_high=5.0),
     "accepted loss_type='clipped'"),
    (dict(importance_sampling_level="per_token"), r"importance_sampling_level must be one of \('token', 'sequence'\)"),
    (dict(loss_type="cispo"), r"epsilon_high as ε_max.*must be >= 1.*got 0.2"),
    (dict(loss_type="cispo", epsilon_high=5.0, unit="constant"), "accepted unit='token_mean'; got unit='constant'"),
    (dict(loss_type="dr_grpo"), r"TRL's name for the averaging unit: set unit='constant'"),
    (dict(loss_type="sapo"), r"grpo.loss_type must be one of \('clipped', 'cispo'\)"),
    (dict(soft_punish_cache=2),
     r"soft_punish_cache must be an integer in \[0, max_completion_length − \(digits \+ 2\)\] = \[0, 1\].*got 2"),
    (dict(soft_punish_cache=-1), r"= \[0, 1\]"),
])
def test_each_option_is_refused_where_it_has_no_meaning(options, match):
    cfg = get_config("test")
    with pytest.raises(ValueError, match=match):  # by the section when it is built, or by validate (with the task)
        cfg.grpo = dataclasses.replace(cfg.grpo, **options)
        validate(cfg)


def test_the_command_line_takes_trl_names_per_section():
    args = vars(build_parser().parse_args(["train", "grpo", "--config", "test", "--loss-type", "cispo",
                                           "--epsilon-high", "5", "--soft-punish-cache", "1"]))
    cfg = apply_overrides(get_config("test"), {k: v for k, v in args.items() if "." in k and v is not None})
    assert (cfg.grpo.loss_type, cfg.grpo.epsilon_high, cfg.grpo.soft_punish_cache) == ("cispo", 5.0, 1)
    validate(cfg)
    gspo = vars(build_parser().parse_args(["train", "grpo", "--importance-sampling-level", "sequence"]))
    assert gspo["grpo.importance_sampling_level"] == "sequence"
    assert vars(build_parser().parse_args(["train", "dpo", "--loss-type", "ipo"]))["dpo.loss_type"] == "ipo"
    for argv in (["train", "dpo", "--loss-type", "cispo"], ["train", "grpo", "--loss-type", "ipo"]):
        with pytest.raises(SystemExit):
            build_parser().parse_args(argv)


def test_verifier_failures_are_a_checker_that_raises_or_cannot_parse(start):
    _, task, _ = start
    tok = task.tokenizer

    def ids(text, eos=True):
        return tok.convert_tokens_to_ids(list(text)) + ([tok.eos_token_id] if eos else [tok.pad_token_id])

    rows = torch.tensor([ids("12"), ids("13"), ids("12", eos=False), ids("1+"), ids("3+")])
    pairs = [(7, 5)] * 5
    strict = resolve_reward("strict", task).score(pairs, rows)
    assert strict.rewards.tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert strict.verifier_failed.tolist() == [False, False, True, True, True]  # a wrong answer is a verdict
    assert resolve_reward("loose", task).score(pairs, rows).verifier_failed.tolist() == [False] * 5  # reads any text

    def fragile(pair, completion):
        if completion[0] == tok.convert_tokens_to_ids(["3"])[0]:
            raise RuntimeError("verifier crashed")
        return task.strict_reward(pair, completion)

    crashing = CheckerReward(fragile).score(pairs, rows)
    assert crashing.rewards.tolist() == [1.0, 0.0, 0.0, 0.0, 0.0]
    assert crashing.verifier_failed.tolist() == [False, False, False, False, True]


def test_verifier_failures_are_counted_per_step_and_drawn(start, matplotlib_ready):
    import matplotlib

    matplotlib.use("Agg")
    from course_lib.run.dashboard import dashboard

    cfg, task, model = start
    g = dataclasses.replace(cfg.grpo, temperature=3.0)
    out = collect_rollouts(model, task, g, torch.Generator().manual_seed(0), resolve_reward("strict", task))
    b = out["batch"]
    completions = b["input_ids"][:, task.prompt_length:]
    unparsable = sum(task.parse_answer(c) is None for c in completions.tolist())
    assert out["stats"]["verifier_failures"] == unparsable > 0
    assert out["stats"]["verifier_failure_rate"] == pytest.approx(unparsable / len(completions))
    rows = [{"step": s, "verifier_failure_rate": r} for s, r in ((1, 0.5), (2, 0.25))]
    fig = dashboard(rows)
    (ax,) = [a for a in fig.axes if a.get_title() == "verifier failures"]
    assert list(ax.lines[0].get_ydata()) == [0.5, 0.25]
    empty = dashboard([{"step": 1, "reward_mean": 0.5}], panels=["verifier failures"])
    assert "not logged" in empty.axes[0].texts[0].get_text()


def test_the_passport_discloses_the_objective_and_the_shaping():
    from course_lib.run.passport import passport

    cfg = get_config("test")
    plain = passport(cfg, "grpo")
    cfg.grpo = dataclasses.replace(cfg.grpo, loss_type="cispo", epsilon_high=5.0, soft_punish_cache=1)
    shaped = passport(cfg, "grpo")
    assert plain["optimisation"]["clip"] == "epsilon=0.2, epsilon_high=0.2" and "overlong" not in str(plain)
    assert shaped["optimisation"]["clip"].startswith("CISPO: importance weight capped at epsilon_high=5.0")
    assert "over the last 1 token(s) up to 4" in shaped["reward_contract"]["truncation"]
    cfg.grpo = dataclasses.replace(cfg.grpo, loss_type="clipped", importance_sampling_level="sequence",
                                   unit="sequence_mean", epsilon=0.2, epsilon_high=0.2)
    gspo = passport(cfg, "grpo")["optimisation"]["clip"]
    assert gspo.startswith("GSPO: one length-normalised ratio") and "the GSPO paper and TRL's docs clip at " \
        "epsilon=0.0003, epsilon_high=0.0004" in gspo  # GRPO's 0.2 is not GSPO's range: said where it is used
    cfg.grpo = dataclasses.replace(cfg.grpo, epsilon=3e-4, epsilon_high=4e-4)
    assert passport(cfg, "grpo")["optimisation"]["clip"] == "GSPO: one length-normalised ratio per completion, " \
                                                            "clipped; epsilon=0.0003, epsilon_high=0.0004"
