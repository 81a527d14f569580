"""The GPU memory budget of a candidate's worker (pure logic; the GPU test `memory_hog` exercises it end to end)."""

from musacoder.judge.slots import GiB, memory_budget, memory_violations


def test_default_budget_scales_with_the_task():
    budget = memory_budget(None, 1 * GiB)  # weights + one input set + output = 1 GiB
    assert budget == 8 * GiB + 16 * GiB
    assert memory_violations(24 * GiB - 1, budget) == []
    (msg,) = memory_violations(25 * GiB, budget)
    assert "25.0 GiB" in msg and "24.0 GiB" in msg


def test_explicit_budget_and_cpu_reports():
    budget = memory_budget(2, 123 * GiB)  # an explicit limit wins over the task's size
    assert memory_violations(3 * GiB, budget) and not memory_violations(1 * GiB, budget)
    assert memory_violations(0, budget) == [] and memory_violations(None, budget) == []  # CPU workers report 0
