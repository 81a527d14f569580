"""A hang costs seconds, not `timeout_s`: each candidate call is limited by the reference's own time
(`VerifyConfig.call_limit_factor`), with a floor, and the first call by a larger floor (it may compile)."""

from pathlib import Path

import pytest

from musacoder import verify
from musacoder.config import VerifyConfig
from musacoder.judge.stages.context import LIMIT_S_PER_GIB, RunContext
from musacoder.records import Task

ROOT = Path(__file__).resolve().parents[2]
HANG = ROOT / "tests" / "adversarial" / "candidates" / "hang.py"


def _ctx(backend: str, ref_s: float, **cfg) -> RunContext:
    ctx = RunContext.new(Task(name="t", source=""), "", backend, VerifyConfig(**cfg))
    ctx.backend, ctx.ref_forward_s = backend, ref_s
    return ctx


def test_the_call_limit_follows_the_reference_with_floors_and_the_timeout_as_ceiling():
    assert _ctx("cpu", 0.001).call_limit() == 10.0  # floor
    assert _ctx("cpu", 0.5).call_limit() == pytest.approx(50.0)  # 100 x the reference
    assert _ctx("cpu", 5.0).call_limit() == 180.0  # never past timeout_s
    assert _ctx("cpu", 0.001).call_limit(first=True) == 20.0
    assert _ctx("triton", 0.001).call_limit(first=True) == 60.0
    assert _ctx("cpu", 0.001, first_call_s=5.0).call_limit(first=True) == 5.0
    assert _ctx("cpu", 0.001).call_limit(extra_s=20.0) == pytest.approx(30.0)


def test_the_floor_grows_with_the_tasks_own_data():
    """At full size the harness moves gigabytes around each call; that time is not the candidate's."""
    ctx = _ctx("cuda", 0.0045)
    ctx.task_bytes = 13 << 30  # a 6.4 GB input and its output
    assert ctx.call_limit() == pytest.approx(10.0 + LIMIT_S_PER_GIB * 13)
    assert ctx.call_limit(first=True) == pytest.approx(20.0 + LIMIT_S_PER_GIB * 13)


@pytest.mark.slow
def test_a_hanging_kernel_costs_the_first_calls_floor_not_the_timeout():
    v = verify(ROOT / "examples" / "tasks" / "relu.py", HANG.read_text(), backend="cpu",
               config=VerifyConfig(first_call_s=8.0, timeout_s=180.0), overrides={"batch_size": 1, "dim": 256})
    assert v.status == "timeout" and v.reward == -1.0, (v.status, v.error)
    assert v.wall_s < 60, v.wall_s
    assert "100x the reference's own" in v.error
