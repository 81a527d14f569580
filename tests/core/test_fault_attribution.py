"""Whose fault an error is (both directions), and that a verifier fault carries no reward.

The candidates reuse `examples/candidates/relu_cpu.py`'s extension unchanged (one cached build), so only ModelNew's
forward differs. Harness faults are provoked through the task, which is trusted code that the worker's harness runs
(its `get_inputs()`), only inside the worker (where the candidate module exists)."""

from __future__ import annotations

from pathlib import Path

import pytest

from musacoder import verify
from musacoder.config import VerifyConfig
from musacoder.reward import kernel_reward

ROOT = Path(__file__).resolve().parents[2]
RELU_CPU = (ROOT / "examples" / "candidates" / "relu_cpu.py").read_text()
ORIGINAL_FORWARD = "        return relu_ext.relu_forward(x)\n"

TASK = '''
import sys
import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x)


def get_inputs():
    if "candidate" in sys.modules:  # inside the candidate's worker: the harness making inputs fails
        {fail}
    return [torch.randn(16, 256)]


def get_init_inputs():
    return []
'''


def _task(tmp_path: Path, fail: str) -> Path:
    p = tmp_path / "relu_task.py"
    p.write_text(TASK.replace("{fail}", fail))
    return p


def _candidate(forward_body: str) -> str:
    assert ORIGINAL_FORWARD in RELU_CPU
    return RELU_CPU.replace(ORIGINAL_FORWARD, forward_body)


def test_infra_error_has_no_reward_anywhere():
    assert kernel_reward("infra_error", 1.0, True, 2.0) is None
    assert kernel_reward("runtime_error", 0.0, True, None) == -1.0
    from musacoder.records import Verdict

    assert Verdict(status="infra_error").reward is None  # however a verdict is made


@pytest.mark.slow
def test_harness_out_of_memory_is_an_infra_error_retried_alone_with_the_memory_it_needs(tmp_path):
    task = _task(tmp_path, 'raise RuntimeError("CUDA out of memory. Tried to allocate 6.00 GiB")')
    v = verify(task, RELU_CPU, backend="cpu", config=VerifyConfig(time_candidate=False))
    assert v.status == "infra_error" and v.reward is None
    assert any("re-run with the device to itself" in f for f in v.flags)
    assert "ran out of device memory in the worker" in v.error and "The task needs" in v.error
    assert v.model_dump(mode="json")["reward"] is None  # `null` in verify --json


@pytest.mark.slow
def test_any_other_harness_fault_is_an_infra_error_not_the_candidates(tmp_path):
    task = _task(tmp_path, 'raise ValueError("the harness could not make inputs")')
    v = verify(task, RELU_CPU, backend="cpu", config=VerifyConfig(time_candidate=False))
    assert v.status == "infra_error" and v.reward is None
    assert "the harness could not make inputs" in v.error
    assert not any("device to itself" in f for f in v.flags)  # only running out of memory is retried


@pytest.mark.slow
def test_what_the_candidate_raises_is_its_own_runtime_error_even_out_of_memory(tmp_path):
    task = _task(tmp_path, "pass")
    cand = _candidate("        y = relu_ext.relu_forward(x)\n"
                      "        if y.numel() > 0:\n"
                      "            raise MemoryError(\"out of memory: the candidate asked for too much\")\n"
                      "        return y\n")
    v = verify(task, cand, backend="cpu", config=VerifyConfig(time_candidate=False))
    assert v.status == "runtime_error" and v.reward == -1.0
    assert "the candidate asked for too much" in v.error


def test_memory_reservation_is_held_until_the_worker_is_gone(monkeypatch, tmp_path):
    """The next verification may be admitted to the device only after this one's worker is gone: a worker of a large
    task that is still tearing down holds its memory (admitting the next one earlier ran the GPU out). The verdict
    does not wait for the reaping; the reservation does."""
    import time

    from musacoder.judge.sandbox import Sandbox
    from musacoder.judge.slots import DEVICE_SLOTS

    import gc

    gc.collect()  # sandboxes earlier tests left to the collector close now, not under the spy
    seen = []
    reap = Sandbox._reap

    def spy(self, proc, cgroups):
        time.sleep(0.3)  # a slow teardown, after the verdict
        seen.append(DEVICE_SLOTS.holding("cpu"))  # not gone yet: the reservation is still held
        reap(self, proc, cgroups)

    monkeypatch.setattr(Sandbox, "_reap", spy)
    task = tmp_path / "t.py"
    task.write_text(TASK.replace("{fail}", "pass"))
    v = verify(task, RELU_CPU, backend="cpu", config=VerifyConfig(timeout_s=120, time_budget_s=0.2, repeats=3))
    assert v.status == "ok", v.error
    deadline = time.monotonic() + 20
    while DEVICE_SLOTS.holding("cpu") and time.monotonic() < deadline:
        time.sleep(0.05)
    # each worker was reaped while a reservation was still held (the verification's, and for the clean reference's
    # worker, started in the background, its own)
    assert seen and all(n >= 1 for n in seen)
    assert DEVICE_SLOTS.holding("cpu") == 0  # and the reservation ended once it was gone


def test_a_candidates_exception_is_formatted_without_failing_the_harness():
    """The worker formats what candidate code raised (into a `runtime_error`): a message of gigabytes is cut before
    the traceback is built around it, and an exception whose message cannot be made still gives a text, not an
    error in the harness (which would be the verifier's fault and carry no reward)."""
    from musacoder.judge.worker import CandidateError, _is_oom, _trim_tb

    def raise_(e):
        raise e

    try:
        raise_(RuntimeError("x" * 10_000_000))
    except RuntimeError as e:
        text = _trim_tb(e)
    assert len(text) <= 4001 and "RuntimeError: xxx" in text and "characters left out" in text and "raise_" in text

    class Mute(Exception):
        def __str__(self):
            raise ValueError("no text")

    e = Mute()
    assert _trim_tb(e) == "test_a_candidates_exception_is_formatted_without_failing_the_harness.<locals>.Mute " \
                          "(its message could not be formatted)"
    assert _is_oom(e) is False
    assert CandidateError(e).error is e
