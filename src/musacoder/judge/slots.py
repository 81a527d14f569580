"""The run pool's scheduler and the verifier's device-memory arithmetic.

`DeviceSlots` decides which verification may use which device, and how (shared for correctness, exclusive for
timing), and admits verifications to a GPU by their estimated footprint (`Footprint`), so a batch of full-size tasks
cannot run the GPU out of memory. `DEVICE_SLOTS` is the process's one instance.
"""

from __future__ import annotations

import contextlib
import gc
import hashlib
import threading
import time
import weakref
from dataclasses import dataclass, field
from typing import Callable

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves

from musacoder.judge.inputs import make_init_inputs, nbytes, output_spec
from musacoder.judge.task_cache import budget_from_env


def is_oom(e: BaseException) -> bool:
    """Whether an exception is running out of device memory, by its type or its message (an extension's own error
    names it only in text). The one rule for both sides of the pipe; in the worker, `e` may be a candidate's exception
    whose `str` raises, which counts as not out of memory."""
    if isinstance(e, torch.OutOfMemoryError):
        return True
    try:
        text = f"{type(e).__name__}: {str(e)[:4000]}"
    except BaseException:  # noqa: BLE001 - a candidate's exception whose message cannot be made
        return False
    return "OutOfMemoryError" in text or "out of memory" in text


# How long a verification waiting for device memory lets later ones that fit be admitted before it freely; after
# that, only those that cannot delay it (`DeviceSlots._overtaken_too_long`)
OVERTAKE_S = 20.0


class DeviceSlots:
    """The run pool's scheduler: which verification may use which device, and how.

    Each device is a readers-writer slot. Correctness trials hold it *shared* (at most `max_shared` verifications at
    once: their speed does not matter, only their outputs), timing holds it *exclusively* (nothing else runs on the
    device while a candidate or a baseline is timed). Timings come first: a shared waiter waits while any exclusive
    waiter is queued for its device (and behind earlier shared waiters), exclusive waiters are served in arrival order.
    So once a device has been drained for one timing, every timing then waiting runs back to back before the shared
    holders come back: one drain of the shared holders per batch of timings instead of per timing. Shared waiters are
    not starved: while they wait, new exclusive requests come only from verifications already past their shared stage,
    so each batch ends. `assign` pins a verification to one concrete device (the least loaded) before its worker starts,
    so the worker can create its CUDA context outside the slot; `cuda` means any visible GPU, `cuda:N` that GPU, `cpu`
    the host. `cuda_count` fixes the number of GPUs (tests)."""

    def __init__(self, cuda_count: int | None = None, max_shared: int = 8, memory: dict[str, int] | None = None):
        self._cv = threading.Condition()
        self._memory = dict(memory or {})  # usable bytes per device (tests); else 85 % of the GPU's total
        self._shared: dict[str, int] = {}
        self._exclusive: set[str] = set()
        self._queue: dict[int, tuple[set[str], bool]] = {}  # waiters by arrival ticket → (devices, exclusive?)
        self._next_ticket = 0
        self._assigned: dict[str, int] = {}
        self._alone: set[str] = set()  # devices a verification holds alone (or waits to)
        self._cuda_count = cuda_count
        self.max_shared = max_shared
        self.trace: list[tuple[str, str, float, float]] | None = None  # set to [] to record (device, kind, start, end)
        # the reservations held on each device, one entry per verification holding one (`reserved`, `holding`)
        self._sizes: dict[str, list[int]] = {}
        # per device: most verifications holding reservations at once, most bytes reserved
        self.peak: dict[str, tuple[int, int]] = {}
        # verifications waiting in `reserve` for their memory, by ticket → (device, monotonic time they began waiting,
        # the bytes they wait for)
        self._admission: dict[int, tuple[str, float, int]] = {}
        self.overtake_s = OVERTAKE_S

    def devices_for(self, device: str) -> list[str]:
        if device == "cuda":
            n = self._cuda_count if self._cuda_count is not None else max(1, torch.cuda.device_count())
            return [f"cuda:{i}" for i in range(n)]
        return [device]

    def reserved(self, dev: str) -> int:
        """Device memory reserved now by the verifications pinned to `dev`."""
        return sum(self._sizes.get(dev, ()))

    def holding(self, dev: str) -> int:
        """How many verifications hold a reservation on `dev` now."""
        return len(self._sizes.get(dev, ()))

    def capacity(self, dev: str) -> int | None:
        """Usable memory of a device in bytes (None: not accounted, e.g. the CPU)."""
        if dev in self._memory:
            return self._memory[dev]
        if dev.startswith("cuda") and torch.cuda.is_available():
            self._memory[dev] = int(0.85 * torch.cuda.get_device_properties(torch.device(dev)).total_memory)
            return self._memory[dev]
        return None

    def _fits(self, dev: str, need: int) -> bool:
        cap = self.capacity(dev)
        held = self.reserved(dev)
        return cap is None or held == 0 or held + need <= cap

    def _overtaken_too_long(self, dev: str, ticket: int | None, need: int) -> bool:
        """Whether admitting `need` bytes on `dev` now could delay a verification that began waiting there before
        `ticket` (None: one arriving now) and has waited `overtake_s` or longer, so a large footprint is not starved by
        small ones that keep fitting beside the others. A later one may still go first where it fits beside that
        waiter once the largest reservation held now has ended (reserved − largest + need + its need ≤ capacity): it
        then cannot be why the waiter waits longer, which is what a waiter for the same large task's previous
        candidate waits for (backfilling: small verifications run beside a chain of large ones instead of idling
        the memory the chain leaves)."""
        now = time.monotonic()
        cap = self.capacity(dev)
        sizes = self._sizes.get(dev, [])
        beside = sum(sizes) - max(sizes, default=0) + need
        return any(d == dev and (ticket is None or t < ticket) and now - since >= self.overtake_s
                   and (cap is None or beside + waiting > cap)
                   for t, (d, since, waiting) in self._admission.items())

    @contextlib.contextmanager
    def assign(self, device: str, need_bytes: int = 0, alone: bool = False):
        """Pin one verification to a concrete device and reserve `need_bytes` of its memory at once, until the block
        ends (`pin` then `reserve`; see there)."""
        with self.pin(device, need_bytes) as dev, self.reserve(dev, need_bytes, alone=alone):
            yield dev

    @contextlib.contextmanager
    def pin(self, device: str, need_bytes: int = 0):
        """Pin one verification to the concrete device with the fewest verifications pinned to it (among those where
        `need_bytes` fits now, if any), reserving nothing yet: its worker starts and its candidate builds there while
        other verifications run, and `reserve` admits it to the device's memory before it runs. A verification pinned
        alone (see `reserve`) keeps newcomers out until it ends."""
        with self._cv:
            while True:
                free = [d for d in self.devices_for(device) if d not in self._alone]
                if free:
                    fits = [d for d in free if self._fits(d, need_bytes)] or free
                    dev = min(fits, key=lambda d: self._assigned.get(d, 0))
                    break
                self._cv.wait()
            self._assigned[dev] = self._assigned.get(dev, 0) + 1
        try:
            yield dev
        finally:
            with self._cv:
                self._assigned[dev] -= 1
                self._cv.notify_all()

    @contextlib.contextmanager
    def reserve(self, dev: str, need_bytes: int | Callable[[], int] = 0, alone: bool = False,
                while_waiting: Callable[[], bool] | None = None):
        """Reserve `need_bytes` of the memory of `dev` (a device the verification is pinned to) until the block ends:
        it waits until its estimate fits beside the others' reservations (one always runs, however large), so
        concurrent verifications cannot run a GPU out of memory. Later verifications that fit may be admitted before
        one that waits, until it has waited `overtake_s`; then only those that fit beside it once the largest
        reservation now held has ended (`_overtaken_too_long`: no large footprint starves). With
        `alone` (the retry of a verification whose harness ran out of device memory), it waits until no other
        verification holds a reservation there, reserves all of the device and keeps other verifications from pinning
        it until the block ends (those pinned before may finish their builds, which hold only their worker's CUDA
        context, but reserve nothing until it ends). A callable `need_bytes` is asked again each time the waiter
        wakes (an estimate that an ending verification made smaller, `WorkerPeaks`); it must not take this lock.
        `while_waiting`: work to do while the reservation waits (`stages.timing.host_reserved_ahead`), run without
        this lock but with the waiter's place in the queue kept; asked again on each wake (at least once a second)
        until it returns True (done, or nothing to do), never once the reservation fits."""
        asked = need_bytes
        with self._cv:
            ticket = None
            try:
                while True:
                    need_bytes = asked() if callable(asked) else asked
                    if alone:
                        need_bytes = max(need_bytes, self.capacity(dev) or 0)
                    # alone: no newcomer pins the device while this one waits for it to empty, or holds it (marked
                    # again after each wake, since another verification alone may have unmarked it on leaving)
                    if alone:
                        self._alone.add(dev)
                    # alone: no other verification holds a reservation there; else it fits, and no verification that
                    # waits longer has waited too long (`_overtaken_too_long`)
                    if self._fits(dev, need_bytes) and not self._overtaken_too_long(dev, ticket, need_bytes):
                        break
                    if ticket is None:
                        ticket = self._next_ticket
                        self._next_ticket += 1
                        self._admission[ticket] = (dev, time.monotonic(), need_bytes)
                    else:
                        self._admission[ticket] = (dev, self._admission[ticket][1], need_bytes)
                    if while_waiting is not None:
                        self._cv.release()  # its place in the queue kept (the ticket) while it works
                        try:
                            done = while_waiting()
                        finally:
                            self._cv.acquire()
                        if done:
                            while_waiting = None
                            continue  # things moved while it worked: look again before sleeping
                    self._cv.wait(1.0 if while_waiting is not None else None)
            finally:
                if ticket is not None:
                    del self._admission[ticket]
                    self._cv.notify_all()
            self._sizes.setdefault(dev, []).append(need_bytes)
            most_holding, most_reserved = self.peak.get(dev, (0, 0))
            self.peak[dev] = (max(most_holding, self.holding(dev)), max(most_reserved, self.reserved(dev)))
        try:
            yield dev
        finally:
            with self._cv:
                self._sizes[dev].remove(need_bytes)
                if alone:
                    self._alone.discard(dev)
                self._cv.notify_all()

    def try_reserve(self, dev: str, need_bytes: int) -> contextlib.ExitStack | None:
        """`reserve` without waiting: the reservation (closed by the caller, from any thread), or None when
        `need_bytes` does not fit beside the others' now or a verification holds the device alone."""
        with self._cv:  # a re-entrant lock: `reserve` takes it again, and nothing moves in between
            cap = self.capacity(dev)  # unlike `reserve`, never one alone that is larger than the device
            if dev in self._alone or (cap is not None and self.reserved(dev) + need_bytes > cap) \
                    or self._overtaken_too_long(dev, None, need_bytes):
                return None
            stack = contextlib.ExitStack()
            stack.enter_context(self.reserve(dev, need_bytes))
            return stack

    def _can_take(self, dev: str, exclusive: bool) -> bool:
        if dev in self._exclusive:
            return False
        if exclusive:
            return self._shared.get(dev, 0) == 0
        return self._shared.get(dev, 0) < self.max_shared

    @contextlib.contextmanager
    def hold(self, device: str, exclusive: bool = True):
        """Hold a device (shared or exclusive); `device` may be a pool name (`cuda`): the first free one is taken.
        A shared waiter waits while an exclusive waiter is queued for the device and behind earlier shared waiters;
        an exclusive one only behind earlier exclusive waiters (timings run in batches, see the class)."""
        choices = self.devices_for(device)
        with self._cv:
            ticket = self._next_ticket
            self._next_ticket += 1
            self._queue[ticket] = (set(choices), exclusive)
            try:
                while True:
                    free = [d for d in choices if self._can_take(d, exclusive)
                            and not any(d in ds and (ex and t < ticket if exclusive else ex or t < ticket)
                                        for t, (ds, ex) in self._queue.items())]
                    if free:
                        dev = free[0]
                        break
                    self._cv.wait()
            finally:
                del self._queue[ticket]
                self._cv.notify_all()
            if exclusive:
                self._exclusive.add(dev)
            else:
                self._shared[dev] = self._shared.get(dev, 0) + 1
        t0 = time.monotonic()
        try:
            yield dev
        finally:
            with self._cv:
                if exclusive:
                    self._exclusive.discard(dev)
                else:
                    self._shared[dev] -= 1
                if self.trace is not None:
                    self.trace.append((dev, "exclusive" if exclusive else "shared", t0, time.monotonic()))
                self._cv.notify_all()


DEVICE_SLOTS = DeviceSlots()

GiB = 1 << 30
# What one verification holds on its GPU at peak, per side, in units of the task's bytes: I (one input set), O (the
# outputs of one call), W (weights). docs/benchmarks.md compares these estimates with measured peaks.
#   worker:  P input sets + a fresh draw + a pristine copy (P + 2)·I; the candidate's output and the reference's
#            2·O; the outputs kept from audited and checked rounds, 5·O, when each is under `HOST_HOLD_BYTES` (larger
#            ones are kept in host memory); the candidate's model and the reference copy 2·W; the candidate's own
#            temporaries and the caching allocator's slack, SLACK·(I + O); a CUDA context, the L2 flush buffer and the
#            NaN poison block. (docs/benchmarks.md, golden set: measured worker peaks reached 1.2–1.5× the estimate
#            with a slack of 2, on 6 GB elementwise tasks and mid-sized GEMM/conv tasks, hence 4.)
#   trusted: the reference's inputs in fp32 and fp64, 3·I (converted one tensor at a time); its fp32 output, its
#            float64 output (the precision rule's yardstick, 2·O), the candidate's output copied in for comparison
#            and the rounded model's output, 5·O; the reference model, its float64 copy and its rounded copy, 4·W;
#            the models' own temporaries (float64 activations, cuDNN workspaces) and comparison chunks,
#            TRUSTED_SLACK·(I + O). (docs/benchmarks.md, golden set at full size: without that term the trusted side
#            reached 1.2–2.5× its estimate on 8 GB norms, reductions and convolutions; with 4 every one fits but the
#            2D convolutions, whose float64 workspace is larger still and which run alone anyway.)
#            Where the reference's float64 forward runs on meta tensors, its intermediates are traced there as well
#            (`forward_transient`: the most bytes they hold at once, T) and the term is the larger of the two,
#            max(TRUSTED_SLACK·(I + O), T + TRACED_SLACK·(I + O)): a convolution reduced over its channels holds a
#            float64 intermediate 400x its output, beyond the static term (8 GiB where it counted 4); the static term
#            stays the floor, since the measured peaks above include what no forward's tensor shows (the harness's
#            own conversions and comparisons, library workspaces): traced alone, the trusted side of 8 GB norms and
#            reductions came to 0.6-0.75x of what they were measured at.
#   fixed:   a worker's CUDA context (0.6 GiB bare, 0.6-0.9 GiB with cuBLAS loaded, nvidia-smi per process on the
#            H100) and the L2 flush buffer and NaN poison block (tens of MB); the trusted side's per-verification part
#            (its stream's workspaces: its CUDA context is one for the whole process, not one per verification).
WORKER_FIXED, TRUSTED_FIXED = int(1.25 * GiB), GiB // 2
HOST_HOLD_BYTES = 1 * GiB
KEPT_OUTPUTS = 5
SLACK = 4
TRUSTED_SLACK = 4
TRACED_SLACK = 1
INPUT_SET_BUDGET = 2 * GiB  # timing rotates through at most this many bytes of input sets (at least one set)


@dataclass(frozen=True)
class Footprint:
    """Estimated peak device bytes of one verification, from its task's bytes (see the table above)."""

    inputs: int
    outputs: int
    weights: int
    max_input_sets: int = 4
    transient: int | None = None  # T: the float64 reference forward's intermediates at most at once (None: unknown)

    @property
    def input_sets(self) -> int:
        """P, the input sets timing rotates through: fewer for large inputs (each is refilled from a fresh seed before
        reuse, so contents never repeat; beyond the L2 cache, more sets buy nothing)."""
        if self.inputs <= 0:
            return self.max_input_sets
        return max(1, min(self.max_input_sets, INPUT_SET_BUDGET // self.inputs))

    @property
    def harness(self) -> int:
        """What the worker's harness itself holds between candidate calls: its fixed part, the input sets and the
        pristine copy, outputs, the kept ones held on the device, the weights."""
        kept = KEPT_OUTPUTS * self.outputs if self.outputs < HOST_HOLD_BYTES else 0
        return WORKER_FIXED + (self.input_sets + 2) * self.inputs + 2 * self.outputs + kept + 2 * self.weights

    @property
    def worker(self) -> int:
        """The worker's estimate: the harness's part and room for the candidate's temporaries during a call."""
        return self.harness + SLACK * (self.inputs + self.outputs)

    @property
    def trusted(self) -> int:
        temporaries = TRUSTED_SLACK * (self.inputs + self.outputs)
        if self.transient is not None:
            temporaries = max(temporaries, self.transient + TRACED_SLACK * (self.inputs + self.outputs))
        return TRUSTED_FIXED + 3 * self.inputs + 5 * self.outputs + 4 * self.weights + temporaries

    @property
    def total(self) -> int:
        return self.worker + self.trusted

    def describe(self) -> str:
        return (f"~{self.total / GiB:.1f} GiB on the device (verifier side {self.trusted / GiB:.1f} GiB, candidate's "
                f"worker {self.worker / GiB:.1f} GiB; inputs {self.inputs / GiB:.2f} GiB, outputs "
                f"{self.outputs / GiB:.2f} GiB, weights {self.weights / GiB:.2f} GiB per call)")


def memory_budget(limit_gb: float | None, task_bytes: int) -> int:
    """Bytes of GPU memory a candidate's worker may reserve at peak: `limit_gb` when set, else 8 GiB + 16 × the task's
    weights, inputs and outputs (`VerifyConfig.max_device_memory_gb`). More is rejected as illegal: memory held back
    starves the reference timed in the same process and inflates the speedup."""
    if limit_gb is not None:
        return int(limit_gb * GiB)
    return 8 * GiB + 16 * task_bytes


def memory_violations(peak: int | None, budget: int) -> list[str]:
    """The violation a worker's peak reserved memory makes against `budget` (none on the CPU, where it is 0)."""
    if not peak or peak <= budget:
        return []
    return [f"the candidate's worker reserved {peak / GiB:.1f} GiB of GPU memory at peak; the limit for this task is "
            f"{budget / GiB:.1f} GiB (memory held back starves the reference and inflates the speedup)"]


def meta_bytes(module, forward: bool = True) -> tuple[int, int, int]:
    """Bytes of the task's (inputs, outputs, weights) for one call, from its shapes on the meta device (no memory is
    allocated); with `forward` off the outputs are not made (0: a recurrent task's forward takes tens of seconds
    there). Raises whatever the task raises there (ops without meta kernels, data-dependent shapes)."""
    with torch.device("meta"), torch.no_grad():
        model = module.Model(*make_init_inputs(module, 0))
        inputs = list(module.get_inputs())
        out = model(*inputs) if forward else None
    return nbytes(inputs), nbytes(out), nbytes(list(model.state_dict().values()))


class _LiveBytes(TorchDispatchMode):
    """Bytes of the storages that tensors made under this mode hold, now and at most (`peak`): each storage counted
    once however many tensors view it, and let go when the last of them is freed."""

    def __init__(self, held: list[torch.Tensor]):
        super().__init__()
        self._live: dict[int, list[int]] = {}  # storage → [bytes, tensors alive on it]
        self._held = {t.untyped_storage()._cdata for t in held}  # counted elsewhere: views of them are not new bytes
        self.now = self.peak = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_leaves(out):
            if isinstance(t, torch.Tensor):
                self._track(t)
        return out

    def _track(self, t: torch.Tensor) -> None:
        storage = t.untyped_storage()
        key = storage._cdata
        if key in self._held:
            return
        if key in self._live:
            self._live[key][1] += 1
        else:
            self._live[key] = [storage.nbytes(), 1]
            self.now += storage.nbytes()
            self.peak = max(self.peak, self.now)
        weakref.finalize(t, self._drop, key)

    def _drop(self, key: int) -> None:
        entry = self._live.get(key)
        if entry is not None:
            entry[1] -= 1
            if entry[1] == 0:
                self.now -= entry[0]
                del self._live[key]


def forward_transient(module) -> int:
    """T: the most bytes the reference's intermediate tensors hold at once in its float64 forward (the trusted
    side's precision yardstick, its largest run), beyond its output; traced on the meta device (nothing allocated).
    Raises whatever the task raises there. The float32 forward's are half of it and do not run beside it."""
    with torch.device("meta"), torch.no_grad():
        model = module.Model(*make_init_inputs(module, 0)).double()
        inputs = [x.double() if isinstance(x, torch.Tensor) and x.is_floating_point() else x
                  for x in module.get_inputs()]
        held = [x for x in inputs if isinstance(x, torch.Tensor)] + list(model.parameters()) + list(model.buffers())
        live = _LiveBytes(held)
        with live:
            out = model(*inputs)
        return max(0, live.peak - nbytes(out))


def footprint(module, max_input_sets: int = 4) -> Footprint | None:
    """The task's `Footprint`, or None when it does not run on meta tensors (data-dependent shapes and the like); its
    float64 forward's temporaries traced where they can be (`forward_transient`)."""
    try:
        sizes = meta_bytes(module)
    except Exception:  # noqa: BLE001 - whatever the task raises on meta tensors
        return None
    try:
        transient = forward_transient(module)
    except Exception:  # noqa: BLE001 - a forward that runs on meta in float32 but not in float64
        transient = None
    return Footprint(*sizes, max_input_sets=max_input_sets, transient=transient)


class _Footprints:
    """`footprint` once per task source (with its overrides) and input-set cap in this process: on the meta device a
    recurrent task's forward takes tens of seconds (KernelBench's bidirectional LSTM: about 24 s, twice that traced),
    and every candidate of a task asked for it again. Concurrent askers of one task wait for the first."""

    def __init__(self, most: int = 512):
        self._lock = threading.Lock()
        self._done: dict[tuple, Footprint | None] = {}
        self._busy: dict[tuple, threading.Lock] = {}
        self.most = most

    def get(self, source: str, module, max_input_sets: int = 4) -> Footprint | None:
        key = (hashlib.sha256(source.encode()).hexdigest(), max_input_sets)
        with self._lock:
            if key in self._done:
                return self._done[key]
            busy = self._busy.setdefault(key, threading.Lock())
        with busy:
            with self._lock:
                if key in self._done:
                    return self._done[key]
            fp = footprint(module, max_input_sets)
            with self._lock:
                if len(self._done) >= self.most:
                    self._done.pop(next(iter(self._done)))
                self._done[key] = fp
                self._busy.pop(key, None)
            return fp


FOOTPRINTS = _Footprints()


def trace_overlaps(trace: list[tuple[str, str, float, float]]) -> list[str]:
    """Pairs of holds in a `DeviceSlots.trace` that broke the rules: an exclusive hold overlapping any other hold on
    the same device. Empty when every timing stage had its device to itself."""
    bad = []
    by_dev: dict[str, list] = {}
    for dev, kind, t0, t1 in trace:
        by_dev.setdefault(dev, []).append((t0, t1, kind))
    for dev, holds in by_dev.items():
        holds.sort()
        for i, (a0, a1, ak) in enumerate(holds):
            for b0, b1, bk in holds[i + 1:]:
                if b0 >= a1:
                    break
                if "exclusive" in (ak, bk):
                    bad.append(f"{dev}: {ak} [{a0:.3f}, {a1:.3f}] overlaps {bk} [{b0:.3f}, {b1:.3f}]")
    return bad


# -- one verification's hold on its device -------------------------------------------------------------------------

@dataclass
class DeviceLease:
    """One attempt's hold on its device (`lease`): pinned from the start (its worker starts and its candidate builds
    while other verifications run), its memory reserved by `admit` before anything of it runs on the device, both
    given back only when the `lease` block ends, after its worker was killed and reaped (a worker of a large task
    still tearing down holds its gigabytes, so the next verification must not be admitted before it is gone)."""

    device: str  # the concrete device (`cuda:0`, `cpu`)
    need: int  # device bytes reserved while the stages run
    alone: bool  # the whole device, no other verification beside it (a retry after running out of memory)
    slots: DeviceSlots
    _reservation: contextlib.ExitStack = field(repr=False)
    pending: list = field(default_factory=list)  # events of workers still being reaped (`end_after`)

    def end_after(self, gone: threading.Event) -> None:
        """Hold the reservation and the pin past the `lease` block until `gone` is set: a killed worker still being
        reaped holds its device memory until it is gone, while the verification has its verdict already."""
        self.pending.append(gone)

    def wait_gone(self) -> None:
        """Wait until every worker of this lease is gone (before timing anything on the device without them)."""
        for gone in self.pending:
            gone.wait()

    def admit(self, need: Callable[[], int] | None = None, while_waiting: Callable[[], bool] | None = None) -> float:
        """Take the memory reservation (waiting until the footprint fits beside the others'; with `alone`, the whole
        device); returns the seconds waited. `need`: the bytes as known when admission is granted, asked again on
        each wake while waiting, where they may be fewer than the estimate the lease was pinned with (the worker's
        side learned from the task's earlier verifications); `self.need` is what was reserved. On a GPU the peak
        statistics start here, and alone, what earlier verifications left cached in this process goes back to the
        device first. `while_waiting`: work done while it waits (`DeviceSlots.reserve`), its seconds in those
        returned."""
        def need_now() -> int:
            self.need = need()
            return self.need

        t0 = time.monotonic()
        self._reservation.enter_context(self.slots.reserve(self.device, self.need if need is None else need_now,
                                                           alone=self.alone, while_waiting=while_waiting))
        waited = time.monotonic() - t0
        if self.device.startswith("cuda") and torch.cuda.is_available():
            if self.alone:
                gc.collect()
                torch.cuda.empty_cache()
            torch.cuda.reset_peak_memory_stats(torch.device(self.device))
        return waited


@contextlib.contextmanager
def lease(device: str, need: int, alone: bool = False, slots: DeviceSlots | None = None):
    """Pin one attempt to a concrete device of `device` (a pool name such as `cuda`, or one device) and yield its
    `DeviceLease`; the reservation `admit` takes ends before the pin does, both when the block ends, or, where
    workers of the lease are still being reaped (`DeviceLease.end_after`), once they are gone."""
    slots = slots or DEVICE_SLOTS
    stack = contextlib.ExitStack()
    dev = stack.enter_context(slots.pin(device, need))
    held = DeviceLease(dev, need, alone, slots, stack.enter_context(contextlib.ExitStack()))
    try:
        yield held
    finally:
        if any(not gone.is_set() for gone in held.pending):  # ends in a thread once its workers are gone
            threading.Thread(target=_end_after, args=(stack, held.pending), name="musacoder-lease").start()
        else:
            stack.close()


def _end_after(stack: contextlib.ExitStack, pending: list) -> None:
    for gone in pending:
        gone.wait()
    stack.close()


class HostBudget:
    """Host bytes that workers of verifications still waiting for device memory may hold page-locked ahead of their
    timing (`stages.timing.host_reserved_ahead`). Taken before a worker page-locks, given back once the verification
    is admitted (from then on it holds what it would have page-locked itself right before its timing window) or
    when its attempt ends: so waiting workers add at most `total` bytes of page-locked memory to the host's load.
    Thread-safe; one per process (`HOST_AHEAD`)."""

    def __init__(self, total: int | None = None):
        self._lock = threading.Lock()
        self._total = total
        self.held = 0

    @property
    def total(self) -> int:
        if self._total is None:
            self._total = host_ahead_bytes()
        return self._total

    def take(self, n: int) -> bool:
        """Take `n` bytes if they fit beside those taken now; whether they did."""
        with self._lock:
            if n <= 0 or self.held + n > self.total:
                return False
            self.held += n
            return True

    def give(self, n: int) -> None:
        with self._lock:
            self.held = max(0, self.held - n)


def host_ahead_bytes() -> int:
    """`MUSACODER_HOST_AHEAD_GB` as bytes (0 turns page-locking ahead off), else a quarter of the host's physical
    memory (`task_cache.default_budget`, as the per-task cache's: the two together stay within half of it)."""
    return budget_from_env("MUSACODER_HOST_AHEAD_GB")


HOST_AHEAD = HostBudget()


def meta_output_spec(module):
    """The task's `inputs.output_spec` (shapes and dtypes) from its forward on the meta device, as its reference will
    return them; None where its forward does not run there (ops without meta kernels, data-dependent shapes)."""
    try:
        with torch.device("meta"), torch.no_grad():
            model = module.Model(*make_init_inputs(module, 0))
            return output_spec(model(*module.get_inputs()))
    except Exception:  # noqa: BLE001 - the task's own code on meta tensors; the spec is then learned from a trial
        return None


# The worker side learned from the task's earlier verifications. Each reports its worker's allocator peak over the
# whole verification (`device_mem_peak`); a later candidate of the same task (`TaskKey`: its sizes, the device model)
# reserves for its worker
#     min(Footprint.worker, max(Footprint.harness, WORKER_FIXED + LEARNED_MARGIN · P_max))
# where P_max is the largest peak reported so far. The harness part is what the verifier's own code allocates there,
# so a worker that under-reports cannot take it below that; the largest report counts, so one cannot undo another's;
# and never above the static estimate. Under the static estimate's slack, candidates of one task were measured at
# 1.3-3x below it (docs/benchmarks.md, 16 x 8 load); one that needs more than its reservation runs out of memory
# and is verified again with the device to itself, as under the static estimate.
LEARNED_MARGIN = 1.25


class WorkerPeaks:
    """Per task (any hashable key, a `TaskKey`): the largest worker allocator peak an earlier verification of it
    reported. Thread-safe; one per process (`WORKER_PEAKS`)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._peaks: dict = {}

    def record(self, key, peak_bytes: int) -> None:
        if peak_bytes > 0:
            with self._lock:
                self._peaks[key] = max(self._peaks.get(key, 0), int(peak_bytes))

    def get(self, key) -> int | None:
        with self._lock:
            return self._peaks.get(key)

    def clear(self) -> None:
        with self._lock:
            self._peaks.clear()


WORKER_PEAKS = WorkerPeaks()


def worker_need(fp: Footprint, learned_peak: int | None = None) -> int:
    """Device bytes reserved for the candidate's worker: `fp.worker`, or less where the task's earlier workers
    reported `learned_peak` at most (see `LEARNED_MARGIN`)."""
    if not learned_peak:
        return fp.worker
    return min(fp.worker, max(fp.harness, WORKER_FIXED + int(LEARNED_MARGIN * learned_peak)))


def trusted_need(fp: Footprint | None, cuda: bool, learned_peak: int | None = None) -> int:
    """Device bytes one verification reserves: its footprint (the worker's side as `worker_need` has it), or only
    the fixed parts when the task cannot be estimated on meta tensors (nothing on the CPU)."""
    if fp is not None:
        return fp.trusted + worker_need(fp, learned_peak)
    return WORKER_FIXED + TRUSTED_FIXED if cuda else 0


def is_large(fp: Footprint | None) -> bool:
    """A task of a gigabyte or more of inputs and outputs: both sides give their allocator's cached blocks back to the
    device between steps, so the verifier's peak is nearer the larger side's than the sum of both sides' peaks."""
    return fp is not None and fp.inputs + fp.outputs >= HOST_HOLD_BYTES


def give_back_cached(device: str, large: bool) -> None:
    """Return this process's cached device blocks to the GPU, for a large task (`is_large`)."""
    if large and device.startswith("cuda") and torch.cuda.is_available():
        torch.cuda.empty_cache()


def release_trusted(device: str, large: bool) -> float | None:
    """Give the trusted side's device memory back when an attempt ends; returns its peak reserved GiB (None off a
    GPU). For a large task, tensors an error's traceback still holds (reference cycles) go back now, not later."""
    if not (device.startswith("cuda") and torch.cuda.is_available()):
        return None
    if large:
        gc.collect()
    d = torch.device(device)
    peak = round(torch.cuda.max_memory_reserved(d) / GiB, 3)
    torch.cuda.empty_cache()
    return peak


def worker_cap_too_small(fp: Footprint | None, cap_mb: int) -> bool:
    """Whether a worker memory cap of `cap_mb` leaves less than twice the task's own data in the worker (its estimated
    footprint without the fixed part for a device context: inputs, outputs, weights, the harness's copies): a kill
    at that cap may then be the verifier's, not the candidate's. A task that cannot be estimated counts as fitting."""
    return fp is not None and 2 * (fp.worker - WORKER_FIXED) > cap_mb << 20


def memory_advice(fp: Footprint | None, capacity: int | None, device: str) -> str:
    """What a task that did not fit needs and what the verifier had, for the error of an `infra_error`."""
    have = f"{capacity / GiB:.1f} GiB usable on {device}" if capacity else "no accounted device memory"
    need = fp.describe() if fp else "an amount that could not be estimated on meta tensors"
    return f"The task needs {need}; the verifier had {have}. Verify it on a larger GPU or with smaller sizes (--set)."
