"""The timing method, in one place: how one call is timed, what a candidate is charged, when to stop repeating.

Used inside the candidate worker (`musacoder.judge.worker`) for the candidate, the eager reference and the
`torch.compile` baseline alike. On the CPU a call is timed with the host clock around a synchronised call. On CUDA:

1. `cuda_region`: after an L2 flush (`Timer`), the device is synchronised, a ~200 µs GPU spin is queued (so the GPU
   is busy while the host issues the call and the launch latency of the first kernel is not timed; host work beyond
   that is), then a start event, the call, an event on the calling stream, a whole-device synchronise and an end
   event. The region's two ends: `stream_ms` (the calling stream's work) and `device_ms` (every stream, plus the
   host's round trip through the synchronise).
2. `RoundTrip`: the candidate is charged `stream_ms + max(0, (device_ms − stream_ms) − R)` per round, so work it
   leaves on another stream is charged beyond the host round trip R. R is measured in the timing loop: after each
   timed round a GPU spin as long as the candidate's median stream time is timed the same way, and R is the 75th
   percentile of those spins' device-minus-stream gaps, at most 0.15 ms. (The round trip grows with how long the host
   waited and how busy the CPU is, so taking off one empty region's latency left short kernels 5 % over the profiler's
   kernel time; docs/benchmarks.md has the measurements.) The trusted reference and the compile baseline are timed
   by their calling stream alone.
3. `rel_sem`: the adaptive stopping rule's statistic, the relative standard error of the mean.

Timers (`torch.cuda.Event`, `torch.cuda._sleep`, the host clock) are captured by `capture` before any candidate
code is imported into the process; on CUDA, so are the C methods a region calls after the candidate's call returns
(`_CudaCalls`), so no patch of a Python attribute reaches the figures.
"""

from __future__ import annotations

import math
import statistics
import time
from typing import NamedTuple

_perf_ns = time.perf_counter_ns  # captured at import, before candidate code exists
_EVENT = None
_SLEEP = None


class _CudaCalls(NamedTuple):
    """The C functions a timed CUDA region calls after the candidate's call returns, bound by `capture` (not looked up
    on `torch.cuda.Event` or `torch.cuda` at run time): a patch of those Python attributes, even one that undoes
    itself before the worker's check of what the harness runs, cannot reach the figures."""

    record: object  # torch._C._CudaEventBase.record(event, stream)
    synchronize: object  # torch._C._CudaEventBase.synchronize(event)
    elapsed_time: object  # torch._C._CudaEventBase.elapsed_time(start, end)
    device_synchronize: object  # torch._C._cuda_synchronize()


_CUDA: _CudaCalls | None = None
_CAPTURED: dict[str, tuple] = {}  # other device families ("musa": torch.musa.Event, torch.musa._sleep)

# Timed CUDA regions start behind a ~200 us GPU spin (at about 2 GHz) so the host's launch latency of the timed call is
# hidden, as it would be in a stream of work; whatever the call's host side costs beyond that is still counted.
# Host work cannot hide computation behind it: reading the inputs back waits for it.
PREROLL_CYCLES = 400_000
MIN_TIMED_MS = 1e-3


def capture(torch, family: str = "cuda") -> None:
    """Keep torch.cuda.Event and torch.cuda._sleep (torch.musa's for family "musa", from torch_musa) as they are now
    (call before any candidate code is imported)."""
    global _EVENT, _SLEEP, _CUDA
    if family == "cuda":
        _EVENT, _SLEEP = torch.cuda.Event, torch.cuda._sleep
        base, sync = getattr(torch._C, "_CudaEventBase", None), getattr(torch._C, "_cuda_synchronize", None)
        if base is not None and sync is not None:  # a CUDA build of torch
            _CUDA = _CudaCalls(base.record, base.synchronize, base.elapsed_time, sync)
    else:
        mod = getattr(torch, family)
        _CAPTURED[family] = (mod.Event, mod._sleep)


def _event_class(torch, family: str = "cuda"):
    if family != "cuda":
        return _CAPTURED[family][0] if family in _CAPTURED else getattr(torch, family).Event
    return _EVENT or torch.cuda.Event


def cuda_sleep(torch, family: str = "cuda"):
    """torch.cuda._sleep (a GPU spin of N cycles; torch.musa._sleep for "musa") as it was before the candidate was
    imported."""
    if family != "cuda":
        return _CAPTURED[family][1] if family in _CAPTURED else getattr(torch, family)._sleep
    return _SLEEP or torch.cuda._sleep


def device_family(device: str) -> str | None:
    """"cuda" or "musa" for a GPU device string, None for the CPU."""
    return "cuda" if device.startswith("cuda") else "musa" if device.startswith("musa") else None


class Region(NamedTuple):
    """One timed call, in ms from the start event: to the end of the work on the stream it was called on
    (`stream_ms`), and to an event recorded after the whole device was synchronised (`device_ms`)."""

    device_ms: float
    stream_ms: float


def cuda_region(torch, fn, args, family: str = "cuda"):
    """One timed CUDA region (module docstring, step 1; the same on MUSA with torch.musa's events and spin). Returns
    (Region, output)."""
    runtime = getattr(torch, family)
    runtime.synchronize()
    event = _event_class(torch, family)
    start, on_stream, end = event(enable_timing=True), event(enable_timing=True), event(enable_timing=True)
    cuda_sleep(torch, family)(PREROLL_CYCLES)
    c = _CUDA if family == "cuda" else None
    if c is None:  # torch_musa's events (or a torch without CUDA's C event class): through the captured class
        start.record()
        with torch.no_grad():
            out = fn(*args)
        on_stream.record()
        runtime.synchronize()
        end.record()
        end.synchronize()
        return Region(start.elapsed_time(end), start.elapsed_time(on_stream)), out
    stream = runtime.current_stream()
    c.record(start, stream)
    with torch.no_grad():
        out = fn(*args)
    c.record(on_stream, stream)
    c.device_synchronize()
    c.record(end, stream)
    c.synchronize(end)
    return Region(c.elapsed_time(start, end), c.elapsed_time(start, on_stream)), out


# the L2 flush before each timed call writes this many times the device's L2 cache; it is skipped where the task's
# inputs and outputs are `L2_DWARFED` times the L2 or more (a call then streams its data through the cache, and what
# the previous call left there is a sliver of it)
L2_FLUSH_FACTOR = 2
L2_DWARFED = 16


def l2_flush_bytes(l2_bytes: int | None, data_bytes: int | None, default: int = 256 << 20) -> int:
    """Bytes of the flush before each timed call, for a device with an L2 cache of `l2_bytes` (None: unknown, then
    `default`) and a task whose inputs and outputs take `data_bytes` (None: unknown): 0 where the data dwarf the L2."""
    if not l2_bytes or l2_bytes <= 0:
        return default
    if data_bytes is not None and data_bytes >= L2_DWARFED * l2_bytes:
        return 0
    return L2_FLUSH_FACTOR * l2_bytes


class Timer:
    """`timed(fn, args) -> (Region, out)` and `flush()` (evicts the L2 cache as `timed` does before each call) for
    one device: host clock on the CPU, `cuda_region` after an L2 flush on CUDA. Audit rounds call `flush` too, so
    the profiler's device time is measured from the same cold L2 as the timed rounds."""

    def __init__(self, torch, device: str, l2_flush_bytes: int = 256 << 20):
        self.torch, self.family = torch, device_family(device)
        self.cuda = self.family is not None  # a GPU (CUDA or MUSA): device events, not the host clock
        # no flush (0 bytes) where the task's data dwarf the L2 (`l2_flush_bytes`)
        self.scratch = torch.empty(l2_flush_bytes, dtype=torch.uint8, device=device) \
            if self.cuda and l2_flush_bytes > 0 else None

    def flush(self) -> None:
        if self.scratch is not None:
            self.scratch.zero_()

    def timed(self, fn, args, _clock=_perf_ns):
        """(Region, out) of one call. The host clock is bound when this module is imported (a default argument), so
        nothing candidate code does to this module's names changes the clock a timed call reads."""
        torch = self.torch
        if self.cuda:
            self.flush()
            if self.family == "cuda":
                return cuda_region(torch, fn, args)
            return cuda_region(torch, fn, args, self.family)
        t0 = _clock()
        with torch.no_grad():
            out = fn(*args)
        ms = (_clock() - t0) / 1e6
        return Region(ms, ms), out


class RoundTrip:
    """What a candidate's time is (module docstring, step 2). `torch` None: host-clock timing, nothing charged."""

    QUANTILE = 0.75
    MAX_MS = 0.15  # R never exceeds this, however busy the host (a longer round trip is charged: the safe direction)
    CYCLES_PER_MS = 1.98e6  # the spin's first guess (an H200's SM clock); then measured from the spins themselves

    def __init__(self, torch, family: str = "cuda"):
        self.torch, self.family = torch, family
        self.gaps: list[float] = []
        self.rates: list[float] = []

    def sample(self, cand_stream_ms: list[float]) -> None:
        """Time one GPU spin as long as the candidate's median stream time and keep its round trip."""
        if self.torch is None or not cand_stream_ms:
            return
        rate = statistics.median(self.rates) if self.rates else self.CYCLES_PER_MS
        cycles = int(min(max(statistics.median(cand_stream_ms), 1e-3) * rate, 2**31 - 1))
        if self.family == "cuda":
            t, _ = cuda_region(self.torch, cuda_sleep(self.torch), (cycles,))
        else:
            t, _ = cuda_region(self.torch, cuda_sleep(self.torch, self.family), (cycles,), self.family)
        self.gaps.append(max(0.0, t.device_ms - t.stream_ms))
        if t.stream_ms > 0.01:
            self.rates.append(cycles / t.stream_ms)

    def ms(self) -> float | None:
        """R: the round trip allowed between the calling stream's end and the whole device's end."""
        if self.torch is None or not self.gaps:
            return None
        xs = sorted(self.gaps)
        return min(xs[min(len(xs) - 1, int(self.QUANTILE * len(xs)))], self.MAX_MS)

    def charge(self, regions: list[Region]) -> list[float]:
        """Each round's charged time: `stream_ms + max(0, device_ms − stream_ms − R)` (device_ms on the CPU)."""
        if self.torch is None:
            return [t.device_ms for t in regions]
        rt = self.ms() or 0.0
        return [max(t.stream_ms + max(0.0, t.device_ms - t.stream_ms - rt), MIN_TIMED_MS) for t in regions]


def rel_sem(xs: list[float]) -> float:
    """Relative standard error of the mean (inf for fewer than two samples or a non-positive mean)."""
    n = len(xs)
    if n < 2:
        return math.inf
    m = sum(xs) / n
    var = sum((x - m) ** 2 for x in xs) / (n - 1)
    return math.sqrt(var / n) / m if m > 0 else math.inf
