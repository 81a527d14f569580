"""benchmarks/admission_sim.py's memory × time figures from a run's rows: what the verifications reserved over their
admitted seconds, and what they would with the trusted side's trial part held only in the trials and re-checks."""

import pytest

from musacoder.judge.slots import GiB, TRUSTED_FIXED, Footprint


@pytest.fixture
def sim(benchmark_script):
    return benchmark_script("admission_sim")


def row(task, wall, before, wait, trial_s, worker_gib, rnd=1):
    stage_s = {"build": before, "admission_wait": wait, "correctness.reference": trial_s / 2,
               "recheck.compare": trial_s / 2, "timing": 1.0}
    return {"task": task, "round": rnd, "wall_s": wall, "stage_s": stage_s, "memory_estimate_gb": {"worker": worker_gib}}


def test_only_large_tasks_hold_their_trial_part_for_the_trial_seconds_alone(sim):
    large = Footprint(inputs=GiB, outputs=GiB, weights=0)  # a gigabyte or more of inputs and outputs
    small = Footprint(inputs=GiB // 64, outputs=GiB // 64, weights=GiB // 64)
    fps = {"big": large, "small": small}
    rows = [row("big", wall=30.0, before=5.0, wait=5.0, trial_s=4.0, worker_gib=10.0),  # admitted 20 s
            row("small", wall=12.0, before=1.0, wait=1.0, trial_s=2.0, worker_gib=2.0),  # admitted 10 s
            row("big", wall=99.0, before=0.0, wait=0.0, trial_s=1.0, worker_gib=10.0, rnd=2)]  # a later round: left out
    whole, split = sim.reservation_seconds(rows, fps)
    big_whole = (10 * GiB + large.trusted) * 20 / GiB
    small_whole = (2 * GiB + small.trusted) * 10 / GiB
    assert whole == pytest.approx(big_whole + small_whole)
    trial = large.trusted - TRUSTED_FIXED  # no weights
    assert trial > 0
    assert split == pytest.approx(big_whole - trial * (20 - 4) / GiB + small_whole)


def test_trial_seconds_count_at_most_the_admitted_ones(sim):
    large = Footprint(inputs=GiB, outputs=GiB, weights=0)
    rows = [row("big", wall=10.0, before=2.0, wait=2.0, trial_s=50.0, worker_gib=4.0)]  # admitted 6 s
    whole, split = sim.reservation_seconds(rows, {"big": large})
    assert split == pytest.approx(whole)


def test_a_replay_with_page_locking_ahead_moves_it_out_of_the_admitted_seconds(sim):
    r = row("big", wall=30.0, before=5.0, wait=5.0, trial_s=4.0, worker_gib=10.0)  # admitted 20 s
    assert sim.before_and_admitted(r) == (5.0, 20.0)
    r["stage_s"].update(host_reserve=4.5, host_reserve_wait=0.5)
    assert sim.before_and_admitted(r) == (5.0, 20.0)  # as measured: after the trials, admitted
    assert sim.before_and_admitted(r, ahead=True) == (10.0, 15.0)  # replayed while it waits for memory
    r["stage_s"]["host_reserve"] = 40.0  # never more than it was admitted
    assert sim.before_and_admitted(r, ahead=True) == (25.0, 0.0)
