"""Checks for the coding lab ``lab14``; expected values come from solutions/lab14.

One entry per autograded test cell, as for module14 (see instructor/checks/module14.py): the visible
checks are the numbers the notebook's own test cells show, the hidden ones use inputs drawn from
``rng`` for each grading run, plus fixed edge cases and bad input. The lab's functions take and return
``torch`` tensors; the expressions convert the inputs (NumPy arrays) with ``torch.tensor`` and the
results back to NumPy, so only plain data crosses the boundary.

``DRIVEN`` names the two training cells. Their probe only checks that the functions exist; the points
are decided by instructor/lab_grading.py, which trains the tiny GPT through the student's kernel
(course_lib/run/lab_check.py) while the notebook is being graded.
"""

from __future__ import annotations

import math

import numpy as np

from instructor.grading import check

DRIVEN = {"lab_train_dpo": "dpo", "lab_train_grpo": "grpo"}

F32 = {"tol": 1e-5, "rtol": 1e-5}  # the lab computes in float32
LP = "completion_logprobs(torch.tensor(logits), torch.tensor(ids), torch.tensor(cmask))"
DPO = "dpo_batch_loss(torch.tensor(logits), torch.tensor(ids), torch.tensor(cmask), torch.tensor(ref), beta)"
GRPO = ("grpo_loss(torch.tensor(logits), torch.tensor(ids), torch.tensor(cmask), torch.tensor(old), "
        "torch.tensor(adv), 0.2, 0.28, unit, max_length)")


def _batch(rng, n: int, length: int = 7, vocab: int = 6, prompt: int = 2):
    """Random logits, token ids and completion masks: a prompt, completions of random length, padding."""
    logits = rng.normal(0, 2, size=(n, length, vocab)).astype(np.float32)
    ids = rng.integers(0, vocab, size=(n, length)).astype(np.int64)
    cmask = np.zeros((n, length), dtype=np.int64)
    for i in range(n):
        cmask[i, prompt: prompt + int(rng.integers(1, length - prompt + 1))] = 1
    return logits, ids, cmask


def _logprobs(rng) -> list:
    v_logits = np.array([[[0.0, 0.0, 0.0], [math.log(2.0), 0.0, 0.0], [5.0, 5.0, 5.0]]], dtype=np.float32)
    v_ids = np.array([[2, 0, 1]])
    logits, ids, cmask = _batch(rng, 3)
    never = logits.copy()
    never[:, :, 0] = -1e9  # like the grader's <pad>: padding positions target token 0
    pad_ids = np.where(cmask == 1, np.maximum(ids, 1), 0)
    return [
        check(LP + "[0].detach().numpy()", "log 1/3 and log 1/4 for the notebook's example", visible=True,
              logits=v_logits, ids=v_ids, cmask=np.array([[0, 1, 1]]), **F32),
        check(LP + "[0].detach().numpy()", "0 outside the completion", visible=True,
              logits=v_logits, ids=v_ids, cmask=np.array([[0, 0, 1]]), **F32),
        check(LP + "[0].detach().numpy()", "token log-probs of a random batch with prompts and padding",
              logits=logits, ids=ids, cmask=cmask, **F32),
        check(LP + "[1].detach().numpy()", "the mask of a random batch", logits=logits, ids=ids, cmask=cmask),
        check(LP + "[0].detach().numpy()", "exactly 0 on padding whose token has logit -1e9 (no -1e9 leaks)",
              logits=never, ids=pad_ids, cmask=cmask, tol=0.0, rtol=1e-5),
        check("torch.autograd.grad(completion_logprobs((x := torch.tensor(logits, requires_grad=True)), "
              "torch.tensor(ids), torch.tensor(cmask))[0].sum(), x)[0].numpy()",
              "the gradient of the summed log-probs with respect to the logits", logits=logits, ids=ids,
              cmask=cmask, **F32),
        check(LP, "completion_mask[:, 0] = 1 must raise ValueError", logits=v_logits, ids=v_ids,
              cmask=np.array([[1, 1, 1]])),
        check(LP, "ids shorter than the logits must raise ValueError", logits=v_logits, ids=v_ids[:, :2],
              cmask=np.array([[0, 1]])),
        check(LP, "a mask value other than 0 and 1 must raise ValueError", logits=v_logits, ids=v_ids,
              cmask=np.array([[0, 2, 1]])),
        check(LP, "2-D logits must raise ValueError", logits=v_logits[0], ids=v_ids, cmask=np.array([[0, 1, 1]])),
    ]


def _dpo(rng) -> list:
    v_logits = np.zeros((2, 3, 3), dtype=np.float32)
    v = {"logits": v_logits, "ids": np.array([[2, 0, 1], [2, 1, 1]]), "cmask": np.array([[0, 1, 1], [0, 0, 1]]),
         "ref": np.array([[-1.0, -1.0], [0.0, -0.5]], dtype=np.float32)}
    swapped = {k: val[[1, 0]] for k, val in v.items()}
    logits, ids, cmask = _batch(rng, 6)
    ref = (rng.normal(-2, 1, size=(6, 6)) * cmask[:, 1:]).astype(np.float32)
    beta = float(rng.uniform(0.05, 2.0))
    return [
        check(DPO + ".item()", "the notebook's pair, beta = 1", visible=True, beta=1.0, **v, **F32),
        check(DPO + ".item()", "the notebook's pair, beta = 0.5", visible=True, beta=0.5, **v, **F32),
        check(DPO + ".item()", "a huge positive margin gives a loss of about 0", visible=True, beta=1e4,
              **v, tol=1e-6, rtol=0.0),
        check(DPO + ".item()", "a huge negative margin gives |z|, not inf", visible=True, beta=1e4,
              **swapped, tol=1e-2, rtol=0.0),
        check(DPO + ".item()", "mean loss of a random batch of 3 pairs", beta=beta, logits=logits, ids=ids,
              cmask=cmask, ref=ref, **F32),
        check("torch.autograd.grad(dpo_batch_loss((x := torch.tensor(logits, requires_grad=True)), "
              "torch.tensor(ids), torch.tensor(cmask), torch.tensor(ref), beta), x)[0].numpy()",
              "the gradient of the loss with respect to the logits", beta=beta, logits=logits, ids=ids,
              cmask=cmask, ref=ref, **F32),
        check(DPO, "beta = 0 must raise ValueError", beta=0.0, **v),
        check(DPO, "beta = nan must raise ValueError", beta=float("nan"), **v),
        check(DPO, "an odd number of rows must raise ValueError", beta=1.0, logits=logits[:5], ids=ids[:5],
              cmask=cmask[:5], ref=ref[:5]),
        check(DPO, "ref_token_logps of the wrong shape must raise ValueError", beta=1.0, logits=logits, ids=ids,
              cmask=cmask, ref=ref[:, :3]),
    ]


def _advantages(rng) -> list:
    adv = "torch.as_tensor(group_advantages(r, G, scale=scale)).detach().double().numpy()"
    G = int(rng.integers(3, 7))
    real = rng.normal(0, 1, size=3 * G)
    real[:G] = float(rng.uniform(-1, 1))  # one zero-variance group of equal floats
    binary = (rng.random(4 * G) < 0.5).astype(float)
    return [
        check(adv, "[1,0,0,1,0,0,1,0] with the population std", visible=True, r=[1, 0, 0, 1, 0, 0, 1, 0], G=8,
              scale="group", tol=1e-6, rtol=1e-6),
        check(adv, "a zero-variance group next to an informative one", visible=True,
              r=[1.0, 1.0, 1.0, 1.0, 0.0, 1.0, 0.0, 0.0], G=4, scale="group", tol=1e-6, rtol=1e-6),
        check(adv, "[0.1, 0.1, 0.1] has zero variance: exactly 0", visible=True, r=[0.1, 0.1, 0.1], G=3,
              scale="group", tol=0.0, rtol=0.0),
        check(adv, "scale='none' (Dr. GRPO)", visible=True, r=[1, 0, 0, 1, 0, 0, 1, 0], G=8, scale="none",
              tol=1e-6, rtol=1e-6),
        check(adv, "real-valued rewards in three groups, one of them without variance", r=real, G=G,
              scale="group", tol=1e-5, rtol=1e-5),
        check(adv, "0/1 rewards in four groups", r=binary, G=G, scale="group", tol=1e-5, rtol=1e-5),
        check(adv, "scale='none' on real-valued rewards", r=real, G=G, scale="none", tol=1e-5, rtol=1e-5),
        check(adv, "an integer-valued float group size is accepted", r=binary, G=float(G), scale="group",
              tol=1e-5, rtol=1e-5),
        check(adv, "a length that is not a multiple of group_size must raise ValueError", r=[1.0, 0.0, 1.0],
              G=2, scale="group"),
        check(adv, "group_size = 2.5 must raise ValueError", r=[1.0, 0.0], G=2.5, scale="group"),
        check(adv, "group_size = True must raise ValueError", r=[1.0, 0.0], G=True, scale="group"),
        check(adv, "group_size = 1 must raise ValueError", r=[1.0, 0.0], G=1, scale="group"),
        check(adv, "a nan reward must raise ValueError", r=[1.0, float("nan")], G=2, scale="group"),
        check(adv, "an unknown scale must raise ValueError", r=[1.0, 0.0], G=2, scale="batch"),
        check(adv, "2-D rewards must raise ValueError", r=[[1.0, 0.0], [0.0, 1.0]], G=2, scale="group"),
    ]


def _clip(rng) -> list:
    clip = "clipped_objective(torch.tensor(ratio), torch.tensor(adv), lo, hi).detach().numpy()"
    ratio = rng.uniform(0.3, 1.8, size=(4, 5))
    adv = rng.normal(0, 1, size=4)
    return [
        check(clip, "the notebook's two rows", visible=True, ratio=[[0.5, 1.0, 1.5], [0.5, 1.0, 1.5]],
              adv=[1.0, -1.0], lo=0.2, hi=0.28, tol=1e-6, rtol=1e-6),
        check(clip, "random ratios and advantages, clip-higher", ratio=ratio, adv=adv,
              lo=0.2, hi=float(rng.uniform(0.25, 0.4)), tol=1e-9, rtol=1e-9),
        check(clip, "random ratios and advantages, symmetric clip", ratio=ratio, adv=adv, lo=0.1, hi=0.1,
              tol=1e-9, rtol=1e-9),
        check("torch.autograd.grad(clipped_objective((x := torch.tensor(ratio, requires_grad=True)), "
              "torch.tensor(adv), 0.2, 0.28).sum(), x)[0].numpy()",
              "the gradient is 0 exactly where the clip is active", ratio=ratio, adv=adv, tol=1e-9, rtol=1e-9),
        check(clip, "epsilon_low = 1 must raise ValueError", ratio=ratio, adv=adv, lo=1.0, hi=0.2),
        check(clip, "a negative epsilon_high must raise ValueError", ratio=ratio, adv=adv, lo=0.2, hi=-0.1),
    ]


def _aggregate(rng) -> list:
    agg = "aggregate(torch.tensor(values), torch.tensor(mask), unit, max_length).item()"
    v_values = [[2.0, 9.0, 9.0], [0.0, 0.0, 0.0]]
    v_mask = [[1.0, 0.0, 0.0], [1.0, 1.0, 1.0]]
    n, t = 5, 6
    values = rng.normal(0, 1, size=(n, t))
    lengths = rng.integers(1, t + 1, size=n)
    mask = (np.arange(t)[None, :] < lengths[:, None]).astype(float)
    values = np.where(mask > 0, values, 1e3)  # padding holds garbage that must never count
    out = [check(agg, f"{unit} of the notebook's example", visible=True, values=v_values, mask=v_mask, unit=unit,
                 max_length=4, tol=1e-9, rtol=1e-9) for unit in ("sequence_mean", "token_mean", "constant")]
    out += [check(agg, f"{unit} of a random batch with padding", values=values, mask=mask, unit=unit,
                  max_length=t + 2, tol=1e-9, rtol=1e-9) for unit in ("sequence_mean", "token_mean", "constant")]
    out += [
        check(agg, "an unknown unit must raise ValueError", values=v_values, mask=v_mask, unit="tokens",
              max_length=None),
        check(agg, "an empty response must raise ValueError", values=v_values,
              mask=[[0.0, 0.0, 0.0], [1.0, 1.0, 1.0]], unit="token_mean", max_length=None),
        check(agg, "'constant' without max_length must raise ValueError", values=v_values, mask=v_mask,
              unit="constant", max_length=None),
        check(agg, "max_length shorter than the longest response must raise ValueError", values=v_values,
              mask=v_mask, unit="constant", max_length=2),
    ]
    return out


def _grpo(rng) -> list:
    v = {"logits": np.zeros((2, 3, 3), dtype=np.float32), "ids": np.array([[2, 0, 1], [2, 1, 0]]),
         "cmask": np.array([[0, 1, 1], [0, 0, 1]]), "adv": np.array([1.0, -1.0], dtype=np.float32),
         "old": np.array([[math.log(1 / 3), math.log(1 / 3)], [0.0, math.log(1 / 3)]], dtype=np.float32)}
    logits, ids, cmask = _batch(rng, 6)
    with np.errstate(all="ignore"):
        shifted = logits[:, :-1] - logits[:, :-1].max(-1, keepdims=True)
        logp = shifted - np.log(np.exp(shifted).sum(-1, keepdims=True))
    tok = np.take_along_axis(logp, ids[:, 1:, None], -1)[..., 0]
    old = ((tok + rng.normal(0, 0.3, size=tok.shape)) * cmask[:, 1:]).astype(np.float32)
    adv = rng.normal(0, 1, size=6).astype(np.float32)
    out = [check(GRPO + ".item()", f"{unit} of the notebook's example", visible=True, unit=unit, max_length=2,
                 **v, **F32) for unit in ("token_mean", "sequence_mean", "constant")]
    for unit in ("token_mean", "sequence_mean", "constant"):
        out.append(check(GRPO + ".item()", f"{unit} loss of a random batch (ratios on both sides of the clip)",
                         unit=unit, max_length=8, logits=logits, ids=ids, cmask=cmask, old=old, adv=adv, **F32))
    out.append(check(
        "torch.autograd.grad(grpo_loss((x := torch.tensor(logits, requires_grad=True)), torch.tensor(ids), "
        "torch.tensor(cmask), torch.tensor(old), torch.tensor(adv), 0.2, 0.28, 'token_mean', 8), x)[0].numpy()",
        "the gradient of the loss with respect to the logits", logits=logits, ids=ids, cmask=cmask, old=old,
        adv=adv, **F32))
    return out


def checks(rng) -> dict:
    return {
        "lab_test_logprobs": _logprobs(rng),
        "lab_test_dpo": _dpo(rng),
        "lab_test_advantages": _advantages(rng),
        "lab_test_clip": _clip(rng),
        "lab_test_aggregate": _aggregate(rng),
        "lab_test_grpo_loss": _grpo(rng),
        "lab_train_dpo": [check("all(callable(f) for f in (completion_logprobs, dpo_batch_loss))",
                                "the DPO functions are defined", visible=True)],
        "lab_train_grpo": [check("all(callable(f) for f in (completion_logprobs, group_advantages, "
                                 "clipped_objective, aggregate, grpo_loss))",
                                 "the GRPO functions are defined", visible=True)],
    }
