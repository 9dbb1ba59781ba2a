"""The tiny GPT's world: a character tokenizer, a verifiable addition task, two checkers.

Lecture §15 (verifiable rewards), §6 and §9 (what SFT, DPO and GRPO consume). The task is
n-digit addition with zero-padded operands, so every prompt has the same length and no
left padding is ever needed:

    prompt      <bos>123+045=          (always 3 + 2·digits tokens)
    completion  168<eos>               (the sum without leading zeros, then end-of-sequence)

Why the setting is built this way (an honest advantage for RL)
--------------------------------------------------------------
If correct demonstrations are free and unlimited, RL is the wrong tool: continuing SFT on
more labels beats GRPO at a fraction of the cost (measured while designing this course:
96% in 15 s of extra SFT versus 81–91% after 180 s of GRPO). RL earns its place when
*labels are scarce or wrong but checking is cheap*. So:

- **scarce demonstrations**: SFT sees a small, fixed set of worked examples
  (``TaskConfig.n_demos``), not an endless stream;
- **an imperfect teacher**: a fraction of those demonstrations (``teacher_error_rate``)
  come from a teacher with a systematic error — it forgets the carry out of the ones
  column — a mistake the student copies;
- **a cheap exact checker**: ``strict_reward`` scores *any* prompt, so GRPO can draw fresh
  prompts forever and is graded against the truth, not against the teacher.

The SFT baseline lands well short of perfect (roughly 20–60% held-out exact match with
the ``cpu`` config), which leaves room for DPO and GRPO to help, and the "same wall-clock
spent on more SFT" control shows that extra epochs on the same scarce, flawed labels do
not buy the same gain.

Two checkers
------------
``strict_reward`` is the exact-answer checker: the completion must be the sum's digits
followed by ``<eos>``; a truncated completion (no ``<eos>`` within the length budget)
scores 0. ``loose_reward`` is deliberately exploitable (notebook 11_reward_hacking): it accepts when the
answer's digits appear in order *anywhere* in the generated characters, with anything in
between, truncated or not — a policy can learn to spray digits instead of adding.

A third checker, ``partial_reward``, gives partial credit (the share of digit places that
are right): the denser signal of "where GRPO's baseline matters" in notebook 09_tiny_gpt_grpo.

Simplifications, said out loud: the strict and loose rewards are binary (1 correct / 0 not); the held-out set
is drawn first, from its own random stream (seed + 1, so it does not depend on ``n_demos``),
and the demonstrations are drawn from the remaining prompts. Training prompts for RL skip it too.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass

import torch
from transformers import PreTrainedTokenizer

from course_lib.tinygpt.runtime import to_device

PAD, BOS, EOS = "<pad>", "<bos>", "<eos>"
CHARS = "0123456789+="


class CharTokenizer(PreTrainedTokenizer):
    """One token per character of ``0123456789+=`` plus ``<pad>``, ``<bos>``, ``<eos>``.

    A real ``transformers`` tokenizer (``__call__``, ``pad``, ``decode``, ``batch_decode``,
    ``save_pretrained``), with ids pad=0, bos=1, eos=2. Padding is on the left by default,
    the convention for decoder-only generation; our prompts have equal lengths anyway.
    ``extra_chars`` appends characters after the usual ones (an environment's tool syntax,
    ``course_lib.tinygpt.environments``), so every other id stays what it was.
    """

    vocab_files_names = {"vocab_file": "vocab.json"}
    model_input_names = ["input_ids", "attention_mask"]

    def __init__(self, vocab_file: str | None = None, extra_chars: str = "", **kwargs):
        if set(extra_chars) & set(CHARS) or len(set(extra_chars)) != len(extra_chars):
            raise ValueError(f"extra_chars must be new, distinct characters (not in {CHARS!r}); got {extra_chars!r}")
        tokens = [PAD, BOS, EOS, *CHARS, *extra_chars]
        if vocab_file is not None:
            with open(vocab_file, encoding="utf-8") as fh:
                tokens = [t for t, _ in sorted(json.load(fh).items(), key=lambda kv: kv[1])]
        self._vocab = {t: i for i, t in enumerate(tokens)}
        self._inv = dict(enumerate(tokens))
        kwargs.setdefault("padding_side", "left")
        super().__init__(pad_token=PAD, bos_token=BOS, eos_token=EOS, **kwargs)

    @property
    def vocab_size(self) -> int:
        return len(self._vocab)

    def get_vocab(self) -> dict[str, int]:
        return dict(self._vocab)

    def _tokenize(self, text: str, **kwargs) -> list[str]:
        known = "".join(t for t in self._vocab if len(t) == 1)
        unknown = sorted(set(text) - set(known))
        if unknown:
            raise ValueError(f"text contains characters outside {known!r}: {unknown}")
        return list(text)

    def _convert_token_to_id(self, token: str) -> int:
        return self._vocab[token]

    def _convert_id_to_token(self, index: int) -> str:
        return self._inv[int(index)]

    def convert_tokens_to_string(self, tokens: list[str]) -> str:
        return "".join(tokens)

    def save_vocabulary(self, save_directory: str, filename_prefix: str | None = None):
        path = os.path.join(save_directory, (filename_prefix or "") + "vocab.json")
        with open(path, "w", encoding="utf-8") as fh:
            json.dump(self._vocab, fh)
        return (path,)


@dataclass
class TaskConfig:
    digits: int = 2  # operand width; prompts are "<bos>aa+bb="
    n_demos: int = 2000  # the fixed set of demonstrations available to SFT
    teacher_error_rate: float = 0.7  # share of demonstrations written by the flawed teacher
    n_heldout: int = 500  # held-out prompts for exact-match accuracy
    seed: int = 1234  # the task's own data seed (independent of the training seed)
    env: str = ""  # an environment with tools (course_lib.tinygpt.environments.ENVIRONMENTS); "" for none
    tool_demos: int = 100  # with an environment: carry demonstrations the teacher writes with the tool
    # what those demonstrations ask the tool: "ones" (the ones column) or "sum" (the whole sum)
    tool_call: str = "ones"

    @property
    def prompt_length(self) -> int:
        """Tokens of a prompt: <bos>, a, '+', b, '=' (3 + 2·digits)."""
        return 3 + 2 * self.digits

    @property
    def answer_length(self) -> int:
        """Tokens of the longest answer: the most digits of a sum, plus <eos> (digits + 2)."""
        return self.digits + 2


class AdditionTask:
    """Prompts, demonstrations and checkers for ``digits``-digit addition."""

    def __init__(self, config: TaskConfig | None = None, tokenizer: CharTokenizer | None = None):
        self.config = config or TaskConfig()
        if self.config.digits < 1:
            raise ValueError(f"digits must be >= 1, got {self.config.digits}")
        if not 0 <= self.config.teacher_error_rate <= 1:
            raise ValueError("teacher_error_rate must lie in [0, 1]")
        self.tokenizer = tokenizer or CharTokenizer()
        self.high = 10**self.config.digits
        self.prompt_length, self.answer_length = self.config.prompt_length, self.config.answer_length
        if self.config.n_heldout < 1 or self.config.n_demos < 1:
            raise ValueError("n_heldout and n_demos must be >= 1")
        if self.config.n_demos + self.config.n_heldout > self.high**2:
            raise ValueError(
                f"n_demos + n_heldout ({self.config.n_demos} + {self.config.n_heldout}) exceeds the {self.high**2} "
                f"distinct {self.config.digits}-digit prompts"
            )
        # The held-out set is drawn first, from its own stream: it does not depend on n_demos.
        # The demonstrations keep the task seed's stream (and its first draw's size), so they are
        # the ones the course's numbers were measured with, minus any held-out prompt.
        heldout_stream = torch.Generator().manual_seed(self.config.seed + 1)
        self.heldout_pairs = self._distinct(self.config.n_heldout, heldout_stream, set())
        self._heldout_set = frozenset(self.heldout_pairs)
        g = torch.Generator().manual_seed(self.config.seed)
        first_draw = self.config.n_demos + 4 * self.config.n_heldout
        self.demo_pairs = self._distinct(self.config.n_demos, g, set(self.heldout_pairs), chunk=first_draw)
        flawed = torch.rand(len(self.demo_pairs), generator=g) < self.config.teacher_error_rate
        self.demo_answers = [
            self.flawed_teacher(a, b) if bad else str(a + b) for (a, b), bad in zip(self.demo_pairs, flawed.tolist())
        ]

    def _distinct(self, n: int, generator: torch.Generator, exclude: set, chunk: int | None = None):
        """``n`` distinct prompts ``(a, b)`` not in ``exclude``, drawn uniformly ``chunk`` at a time."""
        seen, out = set(exclude), []
        while len(out) < n:
            for a, b in torch.randint(0, self.high, (chunk or 2 * n + 16, 2), generator=generator).tolist():
                if (a, b) not in seen and len(out) < n:
                    seen.add((a, b))
                    out.append((a, b))
        return out

    # ---- text -------------------------------------------------------------------------
    def prompt_text(self, a: int, b: int) -> str:
        d = self.config.digits
        return f"{a:0{d}d}+{b:0{d}d}="

    @staticmethod
    def ones_carry(a: int, b: int) -> bool:
        """Does the ones column carry? (Exactly where the flawed teacher goes wrong.)"""
        return (a % 10 + b % 10) >= 10

    @staticmethod
    def flawed_teacher(a: int, b: int) -> str:
        """The imperfect teacher: adds correctly but forgets the carry out of the ones column."""
        return str(a + b - 10 * AdditionTask.ones_carry(a, b))

    def parse_prompt(self, text: str) -> tuple[int, int]:
        left, right = text.rstrip("=").split("+")
        return int(left), int(right)

    # ---- tensors ------------------------------------------------------------------------
    def encode_prompts(self, pairs, device=None) -> torch.Tensor:
        """Token ids of shape (n, prompt_length), each starting with <bos>."""
        tok = self.tokenizer
        ids = [[tok.bos_token_id, *tok.convert_tokens_to_ids(list(self.prompt_text(a, b)))] for a, b in pairs]
        return to_device(ids, device or "cpu", torch.long)  # pinned and non-blocking on a GPU

    def demonstrations(self, device=None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """SFT data: ``(input_ids, attention_mask, completion_mask)``, right-padded."""
        return self.encode_pairs(self.demo_pairs, self.demo_answers, device=device)

    def encode_pairs(self, pairs, answers, device=None):
        """Prompt + answer + <eos>, right-padded to prompt_length + answer_length."""
        tok = self.tokenizer
        width = self.prompt_length + self.answer_length
        prompts = self.encode_prompts(pairs).tolist()
        ids = torch.full((len(pairs), width), tok.pad_token_id, dtype=torch.long)
        completion = torch.zeros((len(pairs), width), dtype=torch.long)
        for i, (p, ans) in enumerate(zip(prompts, answers)):
            if len(ans) > self.answer_length - 1:
                raise ValueError(f"answer {ans!r} is longer than {self.answer_length - 1} digits")
            row = p + tok.convert_tokens_to_ids(list(ans)) + [tok.eos_token_id]
            ids[i, : len(row)] = torch.tensor(row)
            completion[i, len(p) : len(row)] = 1
        attention = (ids != tok.pad_token_id).long()
        return ids.to(device), attention.to(device), completion.to(device)

    def sample_pairs(self, n: int, generator: torch.Generator) -> list[tuple[int, int]]:
        """Fresh training prompts for RL (any prompt can be checked; held-out ones are skipped)."""
        heldout = self._heldout_set
        out = []
        while len(out) < n:
            a, b = torch.randint(0, self.high, (2,), generator=generator).tolist()
            if (a, b) not in heldout:
                out.append((a, b))
        return out

    # ---- checkers -----------------------------------------------------------------------
    def completion_text(self, completion_ids) -> tuple[str, bool]:
        """Characters before the first <eos> (pad and bos dropped), and whether <eos> was seen."""
        tok = self.tokenizer
        chars, ended = [], False
        for t in completion_ids:
            t = int(t)
            if t == tok.eos_token_id:
                ended = True
                break
            if t in (tok.pad_token_id, tok.bos_token_id):
                continue
            chars.append(tok._inv[t])
        return "".join(chars), ended

    def parse_answer(self, completion_ids) -> int | None:
        """The answer a completion states (its digits before ``<eos>``), or None when it states none.

        None when the completion has no ``<eos>`` (truncated: it never finished its answer), is
        empty, or holds a character that is not a digit. What the strict and partial checkers read;
        a verifier that cannot parse is counted as a verifier failure (``rewards.CheckerReward``).
        """
        text, ended = self.completion_text(completion_ids)
        return int(text) if ended and text.isdigit() and text.isascii() else None

    def strict_reward(self, pair, completion_ids) -> float:
        """Exact answer: the sum's digits then <eos>. Truncated completions score 0."""
        text, ended = self.completion_text(completion_ids)
        return float(ended and text == str(pair[0] + pair[1]))

    def loose_reward(self, pair, completion_ids) -> float:
        """Deliberately exploitable: the answer's digits appear in order anywhere, <eos> or not.

        A "lenient" matcher that skips characters it does not expect — the kind written to
        tolerate formatting noise. ``65`` passes, and so do ``5565`` and ``1637095``.
        """
        text, _ = self.completion_text(completion_ids)
        chars = iter(text)
        return float(all(digit in chars for digit in str(pair[0] + pair[1])))

    def partial_reward(self, pair, completion_ids) -> float:
        """Partial credit: the share of digit places that are right, 0 when truncated.

        Places are compared by place value (ones with ones, tens with tens), over the longer
        of the answer and the output, so extra or missing digits cost credit: for 07+58 (= 65)
        ``65`` earns 1, the flawed teacher's ``55`` earns 0.5, ``165`` earns 2/3.
        """
        text, ended = self.completion_text(completion_ids)
        answer = str(pair[0] + pair[1])
        if not ended or not text:
            return 0.0
        right = sum(x == y for x, y in zip(reversed(text), reversed(answer)))
        return right / max(len(text), len(answer))
