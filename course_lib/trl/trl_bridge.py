"""From the course's trainers to Hugging Face TRL: the same recipe, TRL's configs and trainers.

A course ``RunConfig`` (SFT, the DPO family, the GRPO family, RLOO, KTO, ORPO) becomes

- ``translate(cfg, kind)``: the keyword arguments of the equivalent TRL config, which trainer
  takes them, and every course option without an exact TRL equivalent. It lives in
  ``course_lib.trl.trl_translate`` (pure data, no TRL needed; its simplifications are said there)
  and is re-exported here;
- ``trl_config(bridged)``: the TRL config object itself (imports TRL);
- datasets (``prompt_dataset``, ``preference_dataset``, ``sft_dataset``, ``kto_dataset``) and reward
  functions (``reward_function``) in TRL's formats, built from the course's task and checkers;
- ``make_trainer(...)``: a ready TRL trainer on the tiny GPT and its character tokenizer, with a
  callback (``HeldoutAccuracy``) that logs the course's held-out exact match while TRL trains;
- ``instruct_recipe(...)`` and ``tiny_instruct_standin()``: the same GRPO recipe on a chat
  model (a real small instruct model on a GPU; in tests a tiny random one built from a config).

TRL is optional (``pip install -e .[trl]``): importing ``course_lib`` and this module never
imports TRL; only ``trl_config`` and the functions that build TRL objects do, and they say how to
install it when it is missing. Which settings reproduce TRL exactly, formula by formula, is
pinned by ``tests/test_trl_parity.py`` (TRL's own loss and advantage code on identical tensors).

Simplifications, said out loud (the translation's own are in ``course_lib.trl.trl_translate``):
- TRL iterates over a finite dataset; the bridge draws exactly ``steps × B`` fresh training
  prompts up front with the course's prompt sampler (held-out prompts excluded).
"""
from __future__ import annotations

import importlib
import importlib.util

import torch
from transformers import TrainerCallback

from course_lib.tinygpt.task import AdditionTask
from course_lib.trainers.configs import RunConfig
from course_lib.trainers.trainer import TrainContext
from course_lib.trl.trl_translate import Bridged, Unmatched, kinds, row, translate  # noqa: F401 - re-exported

INSTALL_HINT = "TRL is not installed: pip install -e '.[trl]' (or make test, which installs it)"


def trl_available() -> bool:
    return importlib.util.find_spec("trl") is not None


def require_trl():
    """Import TRL or raise ``ImportError`` saying how to install it."""
    if not trl_available():
        raise ImportError(INSTALL_HINT)
    import trl

    return trl


def quiet() -> None:
    """Silence what TRL 1.16 + transformers 5 print on every run but a student cannot act on.

    ``datasets``' progress bars (stderr), transformers' info/warning log lines (among them a
    padding hint raised while TRL's ``generate`` pads finished rows), and the ``FutureWarning``
    TRL triggers by calling transformers' deprecated ``*gradient_checkpointing*`` names — only
    those: any other warning still shows.
    """
    import warnings

    import transformers

    transformers.logging.set_verbosity_error()
    warnings.filterwarnings("ignore", message=r".*gradient_checkpointing.* is deprecated", category=FutureWarning)
    if importlib.util.find_spec("datasets") is not None:
        import datasets

        datasets.disable_progress_bars()


def for_installed_transformers(config: dict, fields=None) -> dict:
    """``config`` with activation checkpointing under the name the installed transformers' ``TrainingArguments``
    has (``fields``: its dataclass fields): ``activation_checkpointing``, or, before transformers renamed
    it (Colab's 5.15), ``gradient_checkpointing``."""
    if fields is None:
        from transformers import TrainingArguments

        fields = TrainingArguments.__dataclass_fields__
    if "activation_checkpointing" in fields or "activation_checkpointing" not in config:
        return config
    out = {k: v for k, v in config.items() if k != "activation_checkpointing"}
    out["gradient_checkpointing"] = config["activation_checkpointing"]
    return out


def trl_config(bridged: Bridged):
    """Instantiate the TRL config object (``trl.GRPOConfig(**bridged.config)``, ...)."""
    require_trl()
    config_class = getattr(importlib.import_module(bridged.module), bridged.config_class)
    return config_class(**for_installed_transformers(bridged.config))


# ---- data and rewards in TRL's formats --------------------------------------------------------
def _datasets():
    try:
        import datasets
    except ImportError as err:  # datasets comes with TRL
        raise ImportError(INSTALL_HINT) from err
    return datasets


def prompt_text(task: AdditionTask, a: int, b: int) -> str:
    """The prompt as TRL tokenizes it: ``<bos>07+58=`` (the character tokenizer maps <bos> to its id)."""
    return task.tokenizer.bos_token + task.prompt_text(a, b)


def prompt_dataset(task: AdditionTask, n: int, generator: torch.Generator):
    """``n`` fresh training prompts (held-out ones excluded) with their operands as columns."""
    pairs = task.sample_pairs(n, generator)
    return _datasets().Dataset.from_dict({
        "prompt": [prompt_text(task, a, b) for a, b in pairs],
        "a": [a for a, _ in pairs],
        "b": [b for _, b in pairs],
    })


def sft_dataset(task: AdditionTask):
    """The task's demonstrations (flawed teacher included) as prompt/completion text; TRL appends <eos>."""
    return _datasets().Dataset.from_dict({
        "prompt": [prompt_text(task, a, b) for a, b in task.demo_pairs],
        "completion": list(task.demo_answers),
    })


def preference_dataset(task: AdditionTask, pairs: dict):
    """``train.build_preference_pairs`` output as TRL's prompt/chosen/rejected text (with <eos>)."""
    tok, plen = task.tokenizer, task.prompt_length
    rows = {"prompt": [], "chosen": [], "rejected": []}
    for i in range(pairs["n_pairs"]):
        chosen = pairs["chosen_ids"][i][pairs["chosen_attention"][i].bool()].tolist()
        rejected = pairs["rejected_ids"][i][pairs["rejected_attention"][i].bool()].tolist()
        rows["prompt"].append(tok.decode(chosen[:plen]))
        rows["chosen"].append(tok.decode(chosen[plen:]))
        rows["rejected"].append(tok.decode(rejected[plen:]))
    return _datasets().Dataset.from_dict(rows)


def kto_dataset(task: AdditionTask, answers: dict):
    """``kto.kto_answers`` output as TRL's unpaired prompt/completion/label text, in the course's training order.

    ``KTOTrainer`` walks it sequentially (``train_sampling_strategy="sequential"``) in batches of
    ``kto.batch_size``, so its batch s is the course's batch s, and its collator pairs each prompt
    with the previous row's completion as the course does for z0.
    """
    tok, plen = task.tokenizer, task.prompt_length
    rows = {"prompt": [], "completion": [], "label": []}
    for ids, attention, label in zip(answers["ids"], answers["attention"], answers["label"]):
        kept = ids[attention.bool()].tolist()
        rows["prompt"].append(tok.decode(kept[:plen]))
        rows["completion"].append(tok.decode(kept[plen:]))
        rows["label"].append(bool(label))
    return _datasets().Dataset.from_dict(rows)


def reward_function(task: AdditionTask, spec: str = "strict"):
    """The course reward (``rewards.resolve_reward``: a checker or ``rm:DIR``) as a TRL reward function.

    It scores token ids, not decoded text, so ``<eos>`` and truncation count exactly as in the
    course trainer (TRL hands over each completion's ids up to and including its ``<eos>``).
    """
    from course_lib.tinygpt.rewards import resolve_reward

    batched = resolve_reward(spec, task)
    pad = task.tokenizer.pad_token_id

    def reward(prompts, completions, completion_ids, a, b, **kwargs):
        width = max(len(ids) for ids in completion_ids)
        padded = torch.tensor([list(ids) + [pad] * (width - len(ids)) for ids in completion_ids], dtype=torch.long)
        return batched(list(zip(a, b)), padded).tolist()

    reward.__name__ = spec.split(":", 1)[0]  # TRL logs rewards/<name>/mean
    return reward


class HeldoutAccuracy(TrainerCallback):
    """Greedy held-out exact match (``train.evaluate``) every ``every`` steps and at the end.

    Each row is ``{"step", "accuracy", "loose_accuracy", ...}``; the first is taken before
    training (step 0). Evaluation time is excluded from ``train_seconds`` (wall time of steps).
    """

    def __init__(self, task: AdditionTask, every: int, *, max_completion_length: int | None = None):
        if every < 1:
            raise ValueError(f"every must be >= 1; got {every}")
        self.task, self.every, self.length = task, every, max_completion_length
        self.rows: list[dict] = []

    def _eval(self, model, step):
        from course_lib.tinygpt.evaluation import evaluate

        was_training = model.training
        self.rows.append({"step": step, **evaluate(model, self.task, max_completion_length=self.length)})
        model.train(was_training)

    def on_train_begin(self, args, state, control, model=None, **kwargs):
        if args.process_index == 0:
            self._eval(model, 0)

    def on_step_end(self, args, state, control, model=None, **kwargs):
        done = state.global_step == state.max_steps
        if args.process_index == 0 and (state.global_step % self.every == 0 or done):
            self._eval(model, state.global_step)


def _save_reference(model, task: AdditionTask, path: str) -> None:
    """Write the starting weights where TRL will load its reference model from (β > 0).

    TRL creates the reference with ``from_pretrained(model.config._name_or_path)``; a model built
    from a config has no path, so the current weights (the course's reference: the SFT start) are
    saved and the path recorded in the config.
    """
    model.save_pretrained(path)
    task.tokenizer.save_pretrained(path)
    model.config._name_or_path = path


def make_trainer(
    kind: str,
    model,
    task: AdditionTask,
    cfg: RunConfig,
    *,
    seed: int = 0,
    output_dir: str = "trl-out",
    checkpointing: bool = False,
    pairs: dict | None = None,
    num_processes: int = 1,
    callbacks: list | None = None,
    generator: torch.Generator | None = None,
):
    """A TRL trainer for the tiny GPT on the course's task, configured by ``translate``.

    ``kind``: 'sft' (demonstrations), 'dpo' or 'orpo' (need ``pairs`` from
    ``dpo.build_preference_pairs``), 'kto' (the same ``pairs`` taken apart by ``kto.kto_answers``,
    shuffled with ``generator``, default seeded with ``seed``), 'grpo' or 'rloo' (fresh prompts,
    the course checker as reward). ORPO trains the model it is given: the course's ORPO starts
    from the base initialisation (``orpo.base_weights``). Returns ``(trainer, bridged)``;
    ``trainer.train()`` runs it.
    """
    require_trl()
    trainer, bridged = _build_trainer(kind, model, task, cfg, seed=seed, output_dir=output_dir,
                                      checkpointing=checkpointing, pairs=pairs, num_processes=num_processes,
                                      callbacks=callbacks, generator=generator)
    from transformers.trainer_callback import PrinterCallback

    trainer.remove_callback(PrinterCallback)  # metrics stay in trainer.state.log_history
    return trainer, bridged


def _build_trainer(kind, model, task, cfg, *, seed, output_dir, checkpointing, pairs, num_processes, callbacks,
                   generator=None):
    cuda = next(model.parameters()).device.type == "cuda"
    bridged = translate(cfg, kind, output_dir=output_dir, seed=seed, cuda=cuda,
                        checkpointing=checkpointing, num_processes=num_processes)
    r = row(kind)
    if r.data in PAIRED and pairs is None:
        raise ValueError(f"pairs is required for kind={kind!r} (dpo.build_preference_pairs)")
    args = trl_config(bridged)
    section = getattr(cfg, r.section)
    if r.data == "demonstrations":
        data = dict(train_dataset=sft_dataset(task))
    elif r.data == "pairs":
        data = dict(train_dataset=preference_dataset(task, pairs))
    elif r.data == "answers":
        generator = generator if generator is not None else torch.Generator().manual_seed(seed)
        data = dict(train_dataset=kto_dataset(task, r.prepare(task, pairs, section, generator=generator)))
    else:
        data = _online_data(model, task, section, seed=seed, output_dir=output_dir)
    trainer_class = getattr(importlib.import_module(bridged.module), bridged.trainer)
    return trainer_class(model=model, args=args, processing_class=task.tokenizer, callbacks=callbacks,
                         **data), bridged


PAIRED = ("pairs", "answers")  # the TRLRow data built from DPO's preference pairs


def _online_data(model, task: AdditionTask, g, *, seed: int, output_dir: str) -> dict:
    """A ``"prompts"`` row's trainer arguments: ``steps × batch_prompts`` fresh prompts and the section's reward."""
    if g.beta > 0:  # TRL builds its frozen reference by loading the policy's checkpoint path
        _save_reference(model, task, f"{output_dir}/reference")
    prompts = prompt_dataset(task, g.steps * g.batch_prompts, torch.Generator().manual_seed(seed))
    reward = reward_function(task, g.reward)
    if g.soft_punish_cache > 0:  # DAPO's overlong shaping: TRL's own reward function, summed with the checker's
        from trl.rewards import get_soft_overlong_punishment

        reward = [reward, get_soft_overlong_punishment(g.max_completion_length, g.soft_punish_cache)]
    return dict(reward_funcs=reward, train_dataset=prompts)


# ---- the same recipe on a chat model ------------------------------------------------------------
INSTRUCT_MODEL = "Qwen/Qwen2.5-0.5B-Instruct"  # a small instruct model for a Colab GPU
CHATML = (
    "{% for m in messages %}<|im_start|>{{ m['role'] }}\n{{ m['content'] }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}"
)


def instruct_prompt_dataset(task: AdditionTask, n: int, generator: torch.Generator):
    """``n`` fresh prompts as chat messages a real instruct model understands."""
    pairs = task.sample_pairs(n, generator)
    return _datasets().Dataset.from_dict({
        "prompt": [[{"role": "user", "content": f"What is {a} + {b}? Reply with the number only."}] for a, b in pairs],
        "a": [a for a, _ in pairs],
        "b": [b for _, b in pairs],
    })


def text_reward_function(name: str = "strict"):
    """The task's two checkers on a chat model's text.

    ``strict``: the reply, stripped of surrounding white space, is exactly the sum's digits (a
    truncated reply never is, unless it stopped exactly there). ``loose``: the sum's digits appear
    in order anywhere in the reply — exploitable, as notebook 11_reward_hacking shows on the tiny GPT.
    """
    if name not in ("strict", "loose"):
        raise ValueError(f"name must be 'strict' or 'loose'; got {name!r}")

    def reward(prompts, completions, a, b, **kwargs):
        out = []
        for completion, x, y in zip(completions, a, b):
            text = completion[-1]["content"] if isinstance(completion, list) else completion
            answer = str(x + y)
            if name == "strict":
                out.append(float(text.strip() == answer))
            else:
                chars = iter(text)
                out.append(float(all(d in chars for d in answer)))
        return out

    reward.__name__ = name
    return reward


def instruct_dtype(device) -> torch.dtype:
    """The dtype to load ``INSTRUCT_MODEL``'s weights in on ``device`` (``runtime.trl_precision``).

    bf16 where the GPU has bf16 tensor cores (sm_80+); float32 elsewhere: on a T4 (sm_75) TRL
    trains in fp16 autocast with a GradScaler, which expects float32 weights (bf16 weights there
    would run emulated bf16 matmuls), and the CPU runs float32.
    """
    from course_lib.tinygpt.runtime import trl_precision

    return torch.bfloat16 if trl_precision(device) == "bf16" else torch.float32


def instruct_recipe(model, tokenizer, task: AdditionTask, cfg: RunConfig, *, seed: int = 0,
                    output_dir: str = "trl-instruct", checkpointing: bool = True, callbacks: list | None = None):
    """The course's GRPO recipe (``cfg.grpo``) on a chat model: TRL's GRPOTrainer, ready to train.

    ``model`` is a ``transformers`` causal LM (e.g. ``AutoModelForCausalLM.from_pretrained(
    INSTRUCT_MODEL)`` on a GPU) and ``tokenizer`` its tokenizer with a chat template. Same
    options as the tiny GPT's recipe; gradient checkpointing is on by default here (a real model's
    activations, not its speed, are what runs out first on a Colab GPU).
    """
    require_trl()
    from transformers.trainer_callback import PrinterCallback
    from trl import GRPOTrainer

    cuda = next(model.parameters()).device.type == "cuda" or torch.cuda.is_available()
    bridged = translate(cfg, "grpo", output_dir=output_dir, seed=seed, cuda=cuda, checkpointing=checkpointing)
    g = cfg.grpo
    prompts = instruct_prompt_dataset(task, g.steps * g.batch_prompts, torch.Generator().manual_seed(seed))
    trainer = GRPOTrainer(model=model, reward_funcs=text_reward_function(g.reward), args=trl_config(bridged),
                          train_dataset=prompts, processing_class=tokenizer, callbacks=callbacks)
    trainer.remove_callback(PrinterCallback)
    return trainer, bridged


def tiny_instruct_standin(seed: int = 0):
    """A tiny random chat model and tokenizer built from configs (no download): a stand-in for
    ``INSTRUCT_MODEL`` that runs ``instruct_recipe``'s exact code path on a CPU in seconds.

    The tokenizer is byte-level (every UTF-8 byte a token, ChatML special tokens, a chat template);
    the model a 1-layer Qwen2 — the architecture family of Qwen2.5-Instruct.
    """
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast, Qwen2Config, Qwen2ForCausalLM

    alphabet = pre_tokenizers.ByteLevel.alphabet()
    vocab = {ch: i for i, ch in enumerate(sorted(alphabet))}
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    tokenizer = PreTrainedTokenizerFast(
        tokenizer_object=backend, eos_token="<|im_end|>", pad_token="<|endoftext|>",
        additional_special_tokens=["<|im_start|>"], chat_template=CHATML,
    )
    torch.manual_seed(seed)
    config = Qwen2Config(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=1,
                         num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=256,
                         eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id,
                         bos_token_id=None, tie_word_embeddings=True)
    model = Qwen2ForCausalLM(config)
    model.generation_config.eos_token_id = tokenizer.eos_token_id
    model.generation_config.pad_token_id = tokenizer.pad_token_id
    return model, tokenizer


# ---- command line: one recipe, one or many processes -------------------------------------------
def main(argv: list[str] | None = None) -> dict:
    """``python -m course_lib.trl.trl_bridge {dpo,grpo,rloo,kto,orpo} [--config test] [--steps N] [--out DIR]``.

    Trains the course's SFT start (deterministic on a CPU: every process trains the same one),
    then the bridged TRL recipe (every TRL row but SFT's: DPO, KTO and ORPO on DPO's pairs sampled
    from it; ORPO, as the course's stage, from the base initialisation: its row's ``start``), and
    writes ``summary.json`` (held-out accuracy before and after, seconds, number of processes) from
    the main process. Runs unchanged under
    ``accelerate launch --num_processes N`` (see ``configs/accelerate/multi_gpu.yaml``).
    """
    import argparse
    import dataclasses
    import json
    import os
    import time
    from pathlib import Path

    from course_lib.run.pipeline import rl_generator, sft_policy
    from course_lib.tinygpt.evaluation import evaluate
    from course_lib.trainers.configs import get_config
    from course_lib.trainers.dpo import build_preference_pairs

    parser = argparse.ArgumentParser(prog="python -m course_lib.trl.trl_bridge",
                                     description=main.__doc__.splitlines()[0])
    parser.add_argument("kind", choices=tuple(k for k in kinds() if row(k).data != "demonstrations"))
    parser.add_argument("--config", default="cpu")
    parser.add_argument("--steps", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="runs/trl")
    args = parser.parse_args(argv)
    require_trl()
    quiet()
    torch.set_num_threads(args.threads)
    world = int(os.environ.get("WORLD_SIZE", "1"))
    main_process = int(os.environ.get("RANK", "0")) == 0
    cfg = get_config(args.config)
    r = row(args.kind)
    steps = {} if args.steps is None else {"steps": args.steps}
    setattr(cfg, r.section, dataclasses.replace(getattr(cfg, r.section), **steps, **r.requires))
    task, model, _ = sft_policy(cfg, TrainContext(show_progress=False, threads=args.threads), seed=args.seed,
                                device="cpu")
    rl_generator(args.seed)  # the RL stage's torch seed, as a course run sets it
    # the length the completions were sampled with: DPO's pairs', or the online section's own
    length = (cfg.dpo if r.data in PAIRED else getattr(cfg, r.section)).max_completion_length
    pairs = None
    if r.data in PAIRED:
        pairs = build_preference_pairs(model, task, cfg.dpo, generator=torch.Generator().manual_seed(args.seed + 1))
    if r.start is not None:  # e.g. ORPO: one stage from the base model, as the course's ORPO stage
        model.load_state_dict(r.start(cfg, task, args.seed))
    before = evaluate(model, task, max_completion_length=length)["accuracy"]
    trainer, bridged = make_trainer(args.kind, model, task, cfg, seed=args.seed, output_dir=args.out,
                                    pairs=pairs, num_processes=world)
    def checksum():
        weights = [p.detach().flatten().double() for p in trainer.accelerator.unwrap_model(trainer.model).parameters()]
        return float(torch.cat(weights).sum())

    start_sum = checksum()
    start = time.perf_counter()
    trainer.train()
    seconds = time.perf_counter() - start
    summary = {
        "kind": args.kind, "config": args.config, "trainer": bridged.trainer, "num_processes": world,
        "per_device_train_batch_size": bridged.config["per_device_train_batch_size"],
        "steps": trainer.state.global_step, "train_seconds": seconds,
        "baseline_accuracy": before,
        "final_accuracy": evaluate(trainer.accelerator.unwrap_model(trainer.model), task,
                                   max_completion_length=length)["accuracy"],
        "unmatched": [str(u) for u in bridged.unmatched],
    }
    Path(args.out).mkdir(parents=True, exist_ok=True)
    rank = int(os.environ.get("RANK", "0"))  # each process records its weights: DDP keeps them identical
    (Path(args.out) / f"weights_rank{rank}.json").write_text(json.dumps({"before": start_sum, "after": checksum()}))
    if main_process:
        (Path(args.out) / "summary.json").write_text(json.dumps(summary, indent=2))
        print(f"{bridged.trainer} on {world} process(es): held-out {before:.1%} -> {summary['final_accuracy']:.1%} "
              f"in {seconds:.0f} s ({summary['steps']} steps)")
    return summary


if __name__ == "__main__":
    main()
