"""A worker that runs out of device memory in the harness's code while holding far more than the harness's own part
is the candidate's doing (it kept allocations across calls): `runtime_error`, not `infra_error`. The style corpus's
output cache at 19_ReLU's own size (6 GiB in and out) held 48 GiB on an 80 GB H100 and was `infra_error`, no reward."""

from types import SimpleNamespace

import pytest

from musacoder.judge.messages import Fault
from musacoder.judge.slots import Footprint, GiB
from musacoder.judge.stages.context import RetryAlone, Stop
from musacoder.judge.stages.rpc import fault
from musacoder.records import Verdict

RELU_FULL = Footprint(inputs=6 * GiB, outputs=6 * GiB, weights=0)


def _ctx(alone: bool = True):
    return SimpleNamespace(verdict=Verdict(status="incorrect"), device="cuda:0", alone=alone, fp=RELU_FULL)


def _oom(held_gib: float) -> Fault:
    return Fault(ok=False, kind="infra_error", error="CUDA out of memory", where="trial", oom=True,
                 mem_allocated=int(held_gib * GiB), mem_free=int(3.7 * GiB))


def test_a_hoarder_at_full_size_is_the_candidates_fault():
    # the whole estimate fills the card as admission counts it (85 % usable): it cannot be the yardstick
    assert RELU_FULL.worker >= 0.85 * 80 * GiB
    ctx = _ctx()
    with pytest.raises(Stop) as e:
        fault(ctx, _oom(48.0), "correctness")
    assert e.value.status == "runtime_error"
    assert "held 48.0 GiB" in ctx.verdict.error and "must not keep large allocations" in ctx.verdict.error


def test_a_worker_within_the_harness_part_is_the_verifiers():
    held = (RELU_FULL.harness + RELU_FULL.inputs + RELU_FULL.outputs) / GiB  # at the bound: not beyond it
    with pytest.raises(RetryAlone):
        fault(_ctx(), _oom(held), "correctness")


def test_while_sharing_the_device_the_same_worker_is_retried_alone_first():
    """Other verifications' memory may be why it ran out: not the candidate's fault until it happens alone."""
    with pytest.raises(RetryAlone):
        fault(_ctx(alone=False), _oom(48.0), "correctness")
