"""A tiny verifiable task for smoke tests and the CPU example: answer the prompt's letter, repeated.

Prompt `"c="`; the right answer starts with `"ccc"` (`length` letters; what follows is ignored). Score = share of
the first `length` characters that are right, in [0, 1]; passed = all of them are. The feedback hints at the
letter, so a second turn can repair a wrong first one. A randomly initialised character model scores about
1/|charset| and learns it in a few dozen GRPO steps on a CPU.

Harder variants (all off by default; `toy_tasks_from_config` reads them from the `env.toy_*` fields), so that the
situations the RL stabilisers are for actually occur:

- `pattern="ascend"`: the answer is the letters from the prompt's letter on, cycling through the alphabet
  (`"c="` → `"cdefgh"` for length 6), a different character at every position.
- `credit`: `"share"` (the share of right positions), `"prefix"` (the length of the right prefix / length) or
  `"binary"` (1 only for a pass). With long answers, a sparse credit leaves many groups with no pass at all, the
  case Buffered Dynamic Retry replays.
- `feedback="positions"`: the feedback shows the right character at each wrong position (a space where the answer was
  right), `"|  e  h|c="`, so a second turn (or a replayed repair prompt) that copies it passes: multi-turn repair
  is easy, which is what PrimeEcho's first-turn anchor is for.
- `flip_prob` / `score_noise`: a noisy reward. With probability `flip_prob` the score is replaced by 1 − score, and
  Gaussian noise of std `score_noise` is added. Only the score (the reward) is noisy; `passed` stays the truth, so
  pass rates, early stopping and the retry buffer see the real outcome.
"""

from __future__ import annotations

from dataclasses import dataclass

from musacoder.candidates import strip_think
from musacoder.rl.env import EpisodeEnv
from musacoder.rl.records import Outcome

TOY_LETTERS = "abcdefgh"
TOY_CHARSET = TOY_LETTERS + "=|\n "  # what a CharTokenizer for this task needs
TOY_PATTERNS = ("repeat", "ascend")
TOY_CREDITS = ("share", "prefix", "binary")
TOY_FEEDBACKS = ("letter", "positions")


@dataclass(frozen=True)
class ToyTask:
    letter: str
    length: int = 3
    pattern: str = "repeat"
    credit: str = "share"
    feedback: str = "letter"
    flip_prob: float = 0.0
    score_noise: float = 0.0
    alphabet: str = TOY_LETTERS  # the cycle of pattern "ascend"

    def __post_init__(self):
        for value, allowed, what in ((self.pattern, TOY_PATTERNS, "pattern"), (self.credit, TOY_CREDITS, "credit"),
                                     (self.feedback, TOY_FEEDBACKS, "feedback")):
            if value not in allowed:
                raise ValueError(f"toy task {what} must be one of {allowed}, got {value!r}")
        if self.pattern == "ascend" and self.letter not in self.alphabet:
            raise ValueError(f"toy task letter {self.letter!r} is not in its alphabet {self.alphabet!r}")
        if not 0.0 <= self.flip_prob <= 1.0 or self.score_noise < 0:
            raise ValueError(f"toy task noise out of range: flip_prob={self.flip_prob}, score_noise={self.score_noise}")

    @property
    def name(self) -> str:
        return f"toy_{self.letter}"

    @property
    def answer(self) -> str:
        if self.pattern == "repeat":
            return self.letter * self.length
        start = self.alphabet.index(self.letter)
        return "".join(self.alphabet[(start + i) % len(self.alphabet)] for i in range(self.length))

    @property
    def noisy(self) -> bool:
        return self.flip_prob > 0 or self.score_noise > 0


def toy_tasks(letters: str = TOY_LETTERS, length: int = 3, **options) -> list[ToyTask]:
    """One task per letter; `options` are the other `ToyTask` fields (pattern, credit, feedback, noise)."""
    if options.get("pattern") == "ascend":
        options.setdefault("alphabet", letters)
    return [ToyTask(c, length, **options) for c in letters]


def toy_tasks_from_config(env) -> list[ToyTask]:
    """The tasks an `EnvConfig` with kind 'toy' describes (its `toy_*` fields)."""
    return toy_tasks(env.toy_letters, env.toy_length, pattern=env.toy_pattern, credit=env.toy_credit,
                     feedback=env.toy_feedback, flip_prob=env.toy_flip_prob, score_noise=env.toy_score_noise)


def _answer_text(response: str) -> str:
    return strip_think(response).strip()


def toy_score(task: ToyTask, response: str) -> tuple[float, bool]:
    """(score, passed), noise-free. With a = task.answer, L = task.length and r the stripped response:
    share: #{i < L : r[i] = a[i]} / L; prefix: max{k : r[:k] = a[:k]} / L; binary: [r[:L] = a];
    passed ⇔ r[:L] = a under every credit."""
    text, answer = _answer_text(response), task.answer
    right = [i < len(text) and text[i] == answer[i] for i in range(task.length)]
    passed = all(right)
    if task.credit == "share":
        score = sum(right) / task.length
    elif task.credit == "prefix":
        score = next((i for i, ok in enumerate(right) if not ok), task.length) / task.length
    else:
        score = float(passed)
    return score, passed


def noisy_score(score: float, flip_prob: float, score_noise: float, u: float, z: float) -> float:
    """The reward's noise, given a uniform draw u in [0, 1) and a standard normal draw z:
    s' = (1 − s if u < flip_prob else s) + score_noise · z."""
    flipped = 1.0 - score if u < flip_prob else score
    return flipped + score_noise * z


def toy_feedback(task: ToyTask, response: str) -> str:
    """The feedback message. letter: `"|c="`. positions: `"|" + hint + "|c="`, the hint holding the right character
    at each wrong position of the first L and a space at each right one."""
    if task.feedback == "letter":
        return f"|{task.letter}="
    text, answer = _answer_text(response), task.answer
    hint = "".join(" " if i < len(text) and text[i] == a else a for i, a in enumerate(answer))
    return f"|{hint}|{task.letter}="


class ToyEnv(EpisodeEnv):
    """The letter task as an episode; messages stay in the toy alphabet (no round header).

    The reward noise of a noisy task is drawn from torch's global generator, which the trainer seeds with
    `run.seed` and checkpoints, so a run is repeatable; noise-free tasks draw nothing."""

    def first_messages(self, task: ToyTask) -> list[dict[str, str]]:
        return [{"role": "user", "content": f"{task.letter}="}]

    def evaluate(self, task: ToyTask, response: str) -> Outcome:
        score, passed = toy_score(task, response)
        if task.noisy:
            import torch

            score = noisy_score(score, task.flip_prob, task.score_noise, float(torch.rand(())), float(torch.randn(())))
        return Outcome(score=score, passed=passed, feedback=toy_feedback(task, response),
                       status="ok" if passed else "incorrect")

    def feedback_message(self, round_n: int, outcome: Outcome) -> str:
        return outcome.feedback

    def repair_prompt(self, entry) -> str:
        return f"{entry.failed_response.strip()}{entry.feedback}"
