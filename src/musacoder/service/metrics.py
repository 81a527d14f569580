"""The service's counters and histograms, rendered in the Prometheus text format (version 0.0.4).

Kept by hand (no client library): a handful of series, each a dict from label values to numbers under one lock.
"""

from __future__ import annotations

import math
import threading
from typing import Callable

SECONDS_BUCKETS = (0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800)


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\"", "\\\"").replace("\n", "\\n")


def _labels(names: tuple[str, ...], values: tuple[str, ...], extra: str = "") -> str:
    parts = [f'{n}="{_escape(str(v))}"' for n, v in zip(names, values)]
    if extra:
        parts.append(extra)
    return "{" + ",".join(parts) + "}" if parts else ""


def _num(x: float) -> str:
    if math.isinf(x):
        return "+Inf" if x > 0 else "-Inf"
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(float(x))


class _Series:
    def __init__(self, name: str, kind: str, help_text: str, labels: tuple[str, ...] = ()):
        self.name, self.kind, self.help, self.labels = name, kind, help_text, labels
        self.values: dict[tuple[str, ...], float] = {}


class _Histogram(_Series):
    def __init__(self, name: str, help_text: str, labels: tuple[str, ...], buckets=SECONDS_BUCKETS):
        super().__init__(name, "histogram", help_text, labels)
        self.buckets = tuple(buckets)
        self.counts: dict[tuple[str, ...], list[int]] = {}
        self.sums: dict[tuple[str, ...], float] = {}


class Metrics:
    """What `GET /v1/metrics` reports. Gauges read live values through callables (`add_gauge`)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._gauges: dict[str, tuple[str, Callable[[], float]]] = {}
        self.submitted = _Series("musacoder_jobs_submitted_total", "counter",
                                 "Jobs accepted, by how they were served: new (queued), in_flight (joined an "
                                 "identical running or queued job) or cached (an identical job's verdict).",
                                 ("outcome",))
        self.rejected = _Series("musacoder_requests_rejected_total", "counter",
                                "Requests refused, by reason (queue_full, body_too_large, unauthorized, "
                                "bad_request, not_found, invalid).", ("reason",))
        self.verdicts = _Series("musacoder_verdicts_total", "counter", "Verdicts reached, by status.", ("status",))
        self.deadlines = _Series("musacoder_deadline_exceeded_total", "counter",
                                 "Jobs answered infra_error at their deadline, by where they were (queued, running).",
                                 ("phase",))
        self.device_busy = _Series("musacoder_device_busy_seconds_total", "counter",
                                   "Seconds the worker threads spent verifying, by the device the verdict names "
                                   "(cpu, cuda:N, or none when no candidate ran).", ("device",))
        self.stage = _Histogram("musacoder_stage_seconds", "Seconds per verification stage and slot wait, from "
                                "the verdicts' stage_s.", ("stage",))
        self.job = _Histogram("musacoder_job_seconds", "Seconds per job: queue_wait (submission to start), "
                              "run (start to verdict) and total (submission to verdict).", ("phase",))
        self._series = [self.submitted, self.rejected, self.verdicts, self.deadlines, self.device_busy]
        self._histograms = [self.stage, self.job]

    def add_gauge(self, name: str, help_text: str, read: Callable[[], float]) -> None:
        self._gauges[name] = (help_text, read)

    def inc(self, series: _Series, *labels: str, by: float = 1.0) -> None:
        with self._lock:
            series.values[labels] = series.values.get(labels, 0.0) + by

    def observe(self, hist: _Histogram, value: float, *labels: str) -> None:
        with self._lock:
            counts = hist.counts.setdefault(labels, [0] * (len(hist.buckets) + 1))
            for i, b in enumerate(hist.buckets):
                if value <= b:
                    counts[i] += 1
            counts[-1] += 1
            hist.sums[labels] = hist.sums.get(labels, 0.0) + value

    def count(self, series: _Series, *labels: str) -> float:
        with self._lock:
            return series.values.get(labels, 0.0)

    def render(self) -> str:
        out: list[str] = []
        for name, (help_text, read) in self._gauges.items():
            out += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge", f"{name} {_num(read())}"]
        with self._lock:
            for s in self._series:
                out += [f"# HELP {s.name} {s.help}", f"# TYPE {s.name} {s.kind}"]
                for labels, v in sorted(s.values.items()):
                    out.append(f"{s.name}{_labels(s.labels, labels)} {_num(v)}")
            for h in self._histograms:
                out += [f"# HELP {h.name} {h.help}", f"# TYPE {h.name} histogram"]
                for labels, counts in sorted(h.counts.items()):
                    for b, c in [*zip(h.buckets, counts), (math.inf, counts[-1])]:
                        le = 'le="' + _num(b) + '"'
                        out.append(f"{h.name}_bucket{_labels(h.labels, labels, le)} {c}")
                    out.append(f"{h.name}_sum{_labels(h.labels, labels)} {_num(h.sums[labels])}")
                    out.append(f"{h.name}_count{_labels(h.labels, labels)} {counts[-1]}")
        return "\n".join(out) + "\n"
