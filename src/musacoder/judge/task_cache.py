"""Reference work shared by every candidate of one task: the per-task cache.

In RL the same task is verified 8–64 times per step (a GRPO group). The reference's side of a verification — its
weights, the trials' reference outputs and precision yardsticks, the clean reference's timing — depends only on the
task and on the inputs, never on the candidate. A `TaskCache` computes each once and hands it to every candidate of
the task.

What makes a figure differ is in the key (`TaskKey`): the task's source with its size overrides (hashed), the device
model, the driver and torch versions, and every setting that changes the inputs (trials, perturbations, timing
inputs, input sets). Inputs stay unpredictable: each key gets its own master seed, drawn from `os.urandom` when the
key is first seen and never written anywhere a candidate can read; `rotate()` (per batch, per RL step) draws new seeds
and drops every entry, so no candidate can learn the inputs of one batch from an earlier one. Within a batch every
candidate of a task sees the same inputs, each in its own worker; a candidate that caches results across *calls*
still meets fresh inputs in every trial and timed round of its own verification.

Entries are computed at most once (concurrent askers of one entry wait for the first), kept within a byte budget
(other tasks' entries out first, least recently used first; an entry that would need its own task's entries out, or
is larger than the budget, is computed and handed back, never kept), and each hand-out says whether it was reused,
which the verdict reports (`reference_reused`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any, Callable, Hashable

# the default byte budget of a cache (host memory for reference outputs and yardsticks) is a quarter of the host's
# memory, at least this; MUSACODER_TASK_CACHE_GB sets it. The seven trials of a full-size convolution with 2 GiB
# outputs (`level2/4_Conv2d_Mish_Mish`) keep 28 GiB of outputs and float64 yardsticks (kept as float32 differences;
# 41 GiB as whole float64 tensors): under a smaller budget the first are evicted before the task's later candidates
# ask for them, and each recomputes every float64 convolution (docs/benchmarks.md)
DEFAULT_BUDGET_BYTES = 8 << 30


def default_budget() -> int:
    """A quarter of the host's physical memory, at least `DEFAULT_BUDGET_BYTES`."""
    try:
        physical = os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return DEFAULT_BUDGET_BYTES
    return max(DEFAULT_BUDGET_BYTES, physical // 4)


# the process-wide cache (`shared_cache`, used by a `verify` given no cache of its own) rotates at least this often;
# MUSACODER_TASK_CACHE_ROTATE_S
DEFAULT_ROTATE_S = 600.0


@dataclass(frozen=True)
class TaskKey:
    """Everything that can change a task's reference figures."""

    source_sha256: str  # the task's source with its overrides applied
    device_model: str  # "cpu" or the GPU's name
    runtime: str  # torch version, CUDA/driver version
    inputs_policy: tuple  # (trials, perturb_inputs, structured_trials, timing_inputs, input_sets, ...)

    @staticmethod
    def of(source: str, device_model: str, runtime: str, inputs_policy: tuple) -> "TaskKey":
        return TaskKey(hashlib.sha256(source.encode()).hexdigest(), device_model, runtime, tuple(inputs_policy))

    def digest(self, *name) -> str:
        """A file name for this key and an entry `name` (strings and numbers): the key of a figure stored on disk."""
        raw = json.dumps([self.source_sha256, self.device_model, self.runtime, list(self.inputs_policy),
                          [str(x) for x in name]])
        return hashlib.sha256(raw.encode()).hexdigest()


def budget_from_env(name: str = "MUSACODER_TASK_CACHE_GB") -> int:
    """The environment variable `name` (GiB of host memory) as bytes, 0 turning its use off; unset or empty:
    `default_budget()`. The task cache's budget, and the page-locking done while waiting for device memory
    (`slots.host_ahead_bytes`)."""
    raw = os.environ.get(name)
    if raw is None or raw.strip() == "":
        return default_budget()
    try:
        gb = float(raw)
    except ValueError:
        raise ValueError(f"{name} must be a number of GiB, got {raw!r}") from None
    if not gb >= 0:  # NaN too
        raise ValueError(f"{name} must be >= 0, got {raw!r}")
    return int(gb * (1 << 30))


class _Pending:
    def __init__(self):
        self.done = threading.Event()
        self.value: Any = None
        self.error: BaseException | None = None


class TaskCache:
    """Secret per-task master seeds and computed-once reference entries (module docstring). Thread-safe."""

    def __init__(self, budget_bytes: int | None = None, rotate_s: float | None = None):
        self.budget_bytes = budget_from_env() if budget_bytes is None else max(0, int(budget_bytes))
        self.rotate_s = rotate_s  # None: only `rotate()` rotates
        self._rotated_at = time.monotonic()
        self._lock = threading.Lock()
        self._seeds: dict[TaskKey, int] = {}
        self._entries: OrderedDict[tuple, tuple[Any, int]] = OrderedDict()
        self._pending: dict[tuple, _Pending] = {}
        self._bytes = 0
        self._in_use: dict[TaskKey, int] = {}  # verifications in flight per task (`in_use`)
        self.generation = 0
        self.hits = 0
        self.misses = 0

    def master_seed(self, key: TaskKey) -> int:
        """The task's secret master seed in this generation (drawn once, from os.urandom)."""
        if self.rotate_s is not None and time.monotonic() - self._rotated_at > self.rotate_s:
            self.rotate()
        with self._lock:
            seed = self._seeds.get(key)
            if seed is None:
                seed = self._seeds[key] = int.from_bytes(os.urandom(8), "little") >> 1
            return seed

    def rotate(self) -> None:
        """New secret seeds for every task and no entries: what one batch or RL step computed is gone."""
        with self._lock:
            self._seeds.clear()
            self._entries.clear()
            self._bytes = 0
            self.generation += 1
            self._rotated_at = time.monotonic()

    @contextlib.contextmanager
    def in_use(self, key: TaskKey):
        """While the block runs (one verification of the task), `key`'s entries are not evicted to make room for
        another task's: a new entry that only an in-flight task's entries could make room for is handed back, not
        kept. Without it, two large tasks verified at once (two full-size convolutions whose cases fill the budget
        together) evicted each other's entries, each just before that task's next candidate asked for it, and every
        candidate of both recomputed all its float64 references (docs/benchmarks.md)."""
        with self._lock:
            self._in_use[key] = self._in_use.get(key, 0) + 1
        try:
            yield
        finally:
            with self._lock:
                self._in_use[key] -= 1
                if not self._in_use[key]:
                    del self._in_use[key]

    def get(self, key: TaskKey, name: Hashable, compute: Callable[[], Any],
            size: Callable[[Any], int] = lambda _v: 0) -> tuple[Any, bool]:
        """(value, reused): the entry `name` of `key`, computed by `compute()` the first time (concurrent askers wait
        for it; an exception reaches every waiter and nothing is kept, so the next asker computes again). `size`
        gives a value's bytes against the budget."""
        full = (key, self.generation, name)
        with self._lock:
            if full in self._entries:
                self._entries.move_to_end(full)
                self.hits += 1
                return self._entries[full][0], True
            pending = self._pending.get(full)
            owner = pending is None
            if owner:
                pending = self._pending[full] = _Pending()
                self.misses += 1
        if not owner:
            pending.done.wait()
            if pending.error is not None:
                raise pending.error
            with self._lock:
                self.hits += 1
            return pending.value, True
        return self._compute(full, pending, compute, size), False

    def peek(self, key: TaskKey, name: Hashable, wait: bool = False) -> Any:
        """The entry `name` of `key` if it is kept (or, with `wait`, once it is computed where it is being computed
        now), else None; never computes it, and an error in its computation gives None."""
        full = (key, self.generation, name)
        with self._lock:
            if full in self._entries:
                return self._entries[full][0]
            pending = self._pending.get(full)
        if pending is None or not wait:
            return None
        pending.done.wait()
        return pending.value if pending.error is None else None

    def started(self, key: TaskKey, name: Hashable) -> bool:
        """Whether the entry `name` of `key` is kept or being computed in this generation."""
        full = (key, self.generation, name)
        with self._lock:
            return full in self._entries or full in self._pending

    def claim(self, key: TaskKey, name: Hashable, compute: Callable[[], Any],
              size: Callable[[Any], int] = lambda _v: 0) -> bool:
        """Compute the entry `name` of `key` here, as `get` would, unless it is kept or being computed already (then
        return False at once, without waiting): work started ahead of the candidates that will ask for it."""
        full = (key, self.generation, name)
        with self._lock:
            if full in self._entries or full in self._pending:
                return False
            pending = self._pending[full] = _Pending()
            self.misses += 1
        self._compute(full, pending, compute, size)
        return True

    def _compute(self, full: tuple, pending: _Pending, compute: Callable[[], Any], size: Callable[[Any], int]) -> Any:
        try:
            value = compute()
        except BaseException as e:
            pending.error = e
            with self._lock:
                self._pending.pop(full, None)
            pending.done.set()
            raise
        pending.value = value
        self._keep(full, value, int(size(value)))
        with self._lock:
            self._pending.pop(full, None)
        pending.done.set()
        return value

    def _keep(self, full: tuple, value: Any, nbytes: int) -> None:
        """Keep an entry within the budget: other tasks' entries go first, least recently used first, but never those
        of a task with verifications in flight (`in_use`); a task's own entries are never evicted for another of its
        entries, which is then not kept. Every candidate of a task asks
        for its entries in the same order, round after round (its trials), and a least-recently-used cache smaller
        than that set evicts each entry just before it is asked for again: every candidate then recomputed all seven
        float64 convolutions of a task whose seven cases are 42 GB (docs/benchmarks.md). Kept this way, the first
        cases that fit are reused and only the rest recomputed."""
        with self._lock:
            if full[1] != self.generation or nbytes > self.budget_bytes:
                return  # rotated meanwhile, or too large to keep: handed back once, never kept
            # least recently used first; a task verified now keeps its entries
            others = [k for k in self._entries if k[0] != full[0] and k[0] not in self._in_use]
            need = self._bytes + nbytes - self.budget_bytes
            if need > sum(self._entries[k][1] for k in others):
                return  # only its own task's entries could make room: not kept
            for k in others:
                if self._bytes + nbytes <= self.budget_bytes:
                    break
                _, b = self._entries.pop(k)
                self._bytes -= b
            self._entries[full] = (value, nbytes)
            self._bytes += nbytes

    @property
    def bytes_kept(self) -> int:
        with self._lock:
            return self._bytes

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)


_SHARED: TaskCache | None = None
_SHARED_LOCK = threading.Lock()


def shared_cache() -> TaskCache:
    """The process's own cache, for verifications given none (the service, an RL environment's episodes, the Ray pool's
    actors): it rotates every `MUSACODER_TASK_CACHE_ROTATE_S` seconds (default `DEFAULT_ROTATE_S`)."""
    global _SHARED
    with _SHARED_LOCK:
        if _SHARED is None:
            raw = os.environ.get("MUSACODER_TASK_CACHE_ROTATE_S", "")
            try:
                rotate_s = float(raw) if raw.strip() else DEFAULT_ROTATE_S
            except ValueError:
                raise ValueError(f"MUSACODER_TASK_CACHE_ROTATE_S must be seconds, got {raw!r}") from None
            _SHARED = TaskCache(rotate_s=rotate_s)
        return _SHARED
