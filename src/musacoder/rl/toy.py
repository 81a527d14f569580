"""A tiny verifiable task for smoke tests and the CPU example: answer the prompt's letter, repeated.

Prompt `"c="`; the right answer starts with `"ccc"` (`length` letters; what follows is ignored). Score = share of
the first `length` characters that are right, in [0, 1]; passed = all of them are. The feedback hints at the
letter, so a second turn can repair a wrong first one. A randomly initialised character model scores about
1/|charset| and learns it in a few dozen GRPO steps on a CPU.
"""

from __future__ import annotations

from dataclasses import dataclass

from musacoder.candidates import strip_think
from musacoder.rl.env import EpisodeEnv
from musacoder.rl.records import Outcome

TOY_LETTERS = "abcdefgh"
TOY_CHARSET = TOY_LETTERS + "=|\n "  # what a CharTokenizer for this task needs


@dataclass(frozen=True)
class ToyTask:
    letter: str
    length: int = 3

    @property
    def name(self) -> str:
        return f"toy_{self.letter}"


def toy_tasks(letters: str = TOY_LETTERS, length: int = 3) -> list[ToyTask]:
    return [ToyTask(c, length) for c in letters]


def toy_score(task: ToyTask, response: str) -> tuple[float, bool]:
    """(score, passed): score = #{i < L : response[i] = letter} / L; passed ⇔ score = 1."""
    text = strip_think(response).strip()
    hits = sum(1 for c in text[: task.length] if c == task.letter)
    return hits / task.length, hits == task.length


class ToyEnv(EpisodeEnv):
    """The letter task as an episode; messages stay in the toy alphabet (no round header)."""

    def first_messages(self, task: ToyTask) -> list[dict[str, str]]:
        return [{"role": "user", "content": f"{task.letter}="}]

    def evaluate(self, task: ToyTask, response: str) -> Outcome:
        score, passed = toy_score(task, response)
        return Outcome(score=score, passed=passed, feedback=f"|{task.letter}=", status="ok" if passed else "incorrect")

    def feedback_message(self, round_n: int, outcome: Outcome) -> str:
        return outcome.feedback

    def repair_prompt(self, entry) -> str:
        return f"{entry.failed_response.strip()}{entry.feedback}"
