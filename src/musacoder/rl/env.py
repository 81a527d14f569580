"""Episode environments for RL: `KernelEnv` over MooreEval, with verification off the generation path.

An environment object is one episode: `reset(task) -> prompt`, then `step(response) -> (feedback, score, done)`
until `done` (a pass, or `max_turns` responses). For batched rollouts the step is split in two: `submit(response)`
starts the verification on a shared thread pool and returns a future at once (each `musacoder.verify` runs its own
subprocesses, so threads are enough), and `record(response, outcome)` advances the episode once the future has
resolved. The trainer submits a chunk's verifications and goes on generating the next chunk while they build.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Executor, Future, ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any

from musacoder.candidates import strip_think
from musacoder.rl.records import Outcome
from musacoder.rl.retry import RetryEntry, repair_prompt


def make_verifier_pool(max_workers: int = 2) -> ThreadPoolExecutor:
    """The thread pool verifications run on; share one between all episodes of a run."""
    return ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="musacoder-verify")


def verifier_from_config(env_config) -> Callable | None:
    """The verifier an `EnvConfig` names: a `RemoteVerifier` of `env_config.verifier_url` (one HTTP client shared by
    every episode of the run), or None for the in-process `musacoder.verify`."""
    if not getattr(env_config, "verifier_url", None):
        return None
    from musacoder.client import RemoteVerifier

    return RemoteVerifier(env_config.verifier_url, env_config.verifier_token,
                          timeout_s=env_config.verifier_timeout_s, max_connections=max(8, 2 * env_config.max_workers))


def _done_future(value) -> Future:
    f: Future = Future()
    f.set_result(value)
    return f


class EpisodeEnv:
    """Conversation bookkeeping shared by the environments; subclasses implement `first_messages` and `evaluate`,
    and may change `feedback_message`.

    `messages` is the context of the next turn: the first-turn messages, then each earlier response with its
    `<think>` blocks stripped, followed by the feedback it received. `history` holds the outcomes so far.
    """

    def __init__(self, max_turns: int = 3, executor: Executor | None = None):
        if max_turns < 1:
            raise ValueError(f"max_turns must be >= 1, got {max_turns}")
        self.max_turns = max_turns
        self.executor = executor  # None: verify in the calling thread
        self.task: Any = None
        self.messages: list[dict[str, str]] = []
        self.history: list[Outcome] = []
        self.done = True

    # --- to implement -------------------------------------------------------------------------------------------
    def first_messages(self, task) -> list[dict[str, str]]:
        """The first-turn conversation; its last message is the user prompt."""
        raise NotImplementedError

    def evaluate(self, task, response: str) -> Outcome:
        """Verify one response (runs on a worker thread; must not touch episode state)."""
        raise NotImplementedError

    def feedback_message(self, round_n: int, outcome: Outcome) -> str:
        """The user message after round `round_n` (1-based)."""
        return f"=== System Feedback for Round {round_n} ===\n{outcome.feedback.strip()}"

    # --- episode API --------------------------------------------------------------------------------------------
    def reset(self, task, prompt: str | None = None) -> str:
        """Start an episode on `task` and return its prompt; `prompt` replaces the task's own user prompt (used for
        repair replays)."""
        self.task = task
        self.history = []
        self.done = False
        self.messages = [dict(m) for m in self.first_messages(task)]
        if prompt is not None:
            self.messages[-1]["content"] = prompt
        return self.messages[-1]["content"]

    def submit(self, response: str) -> Future:
        """Start verifying `response`; returns a Future of an `Outcome` (a verifier crash becomes an infra_error
        outcome with score −1)."""
        if self.done:
            raise RuntimeError("step on a finished episode: call reset(task) first")
        if self.executor is None:
            return _done_future(self._safe_evaluate(self.task, response))
        return self.executor.submit(self._safe_evaluate, self.task, response)

    def record(self, response: str, outcome: Outcome) -> tuple[str, float, bool]:
        """Advance the episode with a verified response; returns (feedback, score, done)."""
        self.history.append(outcome)
        n = len(self.history)
        self.done = outcome.passed or n >= self.max_turns
        feedback = self.feedback_message(n, outcome)
        self.messages.append({"role": "assistant", "content": strip_think(response).strip()})
        if not self.done:
            self.messages.append({"role": "user", "content": feedback})
        return feedback, outcome.score, self.done

    def step(self, response: str) -> tuple[str, float, bool]:
        return self.record(response, self.submit(response).result())

    def repair_prompt(self, entry: RetryEntry) -> str:
        """The user prompt a Buffered Dynamic Retry replay of `entry` starts from."""
        shown = self.feedback_message(1, Outcome(score=entry.score, passed=False, feedback=entry.feedback))
        return repair_prompt(replace(entry, feedback=shown))

    def _safe_evaluate(self, task, response: str) -> Outcome:
        try:
            return self.evaluate(task, response)
        except Exception as e:  # a verifier crash must not kill the rollout: score it as an infrastructure error
            name = getattr(task, "name", task)
            return Outcome(score=-1.0, passed=False, status="infra_error",
                           feedback=f"The verifier failed on task {name}: {type(e).__name__}: {e}")


class KernelEnv(EpisodeEnv):
    """One multi-turn kernel-writing episode scored by MooreEval.

    Prompts are those of the SFT/RFT data (`musacoder.data.solutions.stage2_messages`: the bench prompt of
    `musacoder.prompts`, with the reference's shape/stride/dtype metadata when `metadata`, the six-step solution
    scheme when `six_step`, a worked example when `few_shot`); feedback messages come from `musacoder.prompts`.
    `prompt_cache` (a dict shared by the episodes of a run) keeps each task's first-turn messages, so the metadata
    is worked out once per task. `verifier` is called as
    `verifier(task, response, backend=..., overrides=..., config=...)` and returns a `Verdict` (default:
    `musacoder.verify`; a `musacoder.client.RemoteVerifier` verifies through `musacoder serve`, see
    `verifier_from_config`): score = `verdict.reward`, passed = `verdict.correct and verdict.legal`, feedback =
    `verdict.feedback`.
    """

    def __init__(
        self,
        verifier: Callable | None = None,
        *,
        backend: str | None = None,
        overrides: dict | None = None,
        config=None,
        max_turns: int = 3,
        executor: Executor | None = None,
        few_shot: bool = False,
        metadata: bool = False,
        six_step: bool = False,
        prompt_cache: dict | None = None,
    ):
        super().__init__(max_turns=max_turns, executor=executor)
        self.verifier = verifier
        self.backend = backend
        self.overrides = overrides
        self.config = config
        self.few_shot = few_shot
        self.metadata = metadata
        self.six_step = six_step
        self.prompt_cache = prompt_cache

    def reset(self, task, prompt: str | None = None) -> str:
        if isinstance(task, (str, Path)):
            from musacoder.tasks import load_task

            task = load_task(task, overrides=self.overrides)
        return super().reset(task, prompt)

    def first_messages(self, task) -> list[dict[str, str]]:
        # the prompt needs a target; MooreEval infers the backend from the code when `backend` is None
        backend = self.backend or "cuda"
        key = (task.name, hash(task.source), backend, self.metadata, self.six_step, self.few_shot)
        if self.prompt_cache is not None and key in self.prompt_cache:
            return [dict(m) for m in self.prompt_cache[key]]
        meta = None
        if self.metadata:
            from musacoder.prompts.metadata import task_metadata

            meta = task_metadata(task) or None
        from musacoder.prompts import first_turn_messages

        messages = first_turn_messages(task.source, backend, metadata=meta, few_shot=self.few_shot,
                                       six_step=self.six_step)
        if self.prompt_cache is not None:
            self.prompt_cache[key] = [dict(m) for m in messages]
        return messages

    def feedback_message(self, round_n: int, outcome: Outcome) -> str:
        from musacoder.prompts import feedback_message

        return feedback_message(round_n, outcome.feedback, outcome.passed)

    def evaluate(self, task, response: str) -> Outcome:
        verifier = self.verifier
        if verifier is None:
            from musacoder import verify as verifier
        verdict = verifier(task, response, backend=self.backend, overrides=self.overrides, config=self.config)
        # an infra_error has no reward (None); its −1 here is never learned from: the trainer drops its group
        score = -1.0 if verdict.reward is None else float(verdict.reward)
        passed = bool(verdict.correct and verdict.legal)
        return Outcome(score=score, passed=passed, feedback=verdict.feedback or f"status: {verdict.status}",
                       status=verdict.status, speedup=verdict.speedup if passed else None)
