"""The GPU memory budget of a candidate's worker (pure logic; the GPU test `memory_hog` exercises it end to end)."""

from musacoder.config import VerifyConfig
from musacoder.judge.pipeline import _Run
from musacoder.records import Task


def _run(**cfg) -> _Run:
    return _Run(Task(name="t", source=""), "", "cuda", VerifyConfig(**cfg))


def test_default_budget_scales_with_the_task():
    r = _run()
    r._task_bytes = 1 << 30  # weights + one input set + output = 1 GiB
    assert r._memory_budget() == (8 << 30) + 16 * (1 << 30)
    assert r._memory_violations((24 << 30) - 1) == []
    (msg,) = r._memory_violations(25 << 30)
    assert "25.0 GiB" in msg and "24.0 GiB" in msg


def test_explicit_budget_and_cpu_reports():
    r = _run(max_device_memory_gb=2)
    assert r._memory_violations(3 << 30) and not r._memory_violations(1 << 30)
    assert r._memory_violations(0) == [] and r._memory_violations(None) == []  # CPU workers report 0
