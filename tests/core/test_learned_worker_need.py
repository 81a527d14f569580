"""The worker's reservation learned from a task's earlier verifications (`slots.worker_need`, `slots.WORKER_PEAKS`)."""

import threading
from types import SimpleNamespace

from musacoder.judge import pipeline, slots
from musacoder.judge.slots import GiB, LEARNED_MARGIN, WORKER_FIXED, DeviceSlots, Footprint, WorkerPeaks, lease

# a full-size convolution's shape of footprint: 1 GiB in, 2 GiB out, kept outputs on the host, two input sets
CONV = Footprint(inputs=GiB, outputs=2 * GiB, weights=0)


def test_without_a_report_the_static_estimate_is_reserved():
    assert slots.worker_need(CONV, None) == CONV.worker
    assert slots.trusted_need(CONV, True, None) == CONV.total


def test_a_reported_peak_lowers_the_worker_side_to_margin_times_it():
    peak = 9 * GiB  # what the H100 load measured for this task's workers (8.9 of 21.8 GiB)
    need = slots.worker_need(CONV, peak)
    assert need == WORKER_FIXED + int(LEARNED_MARGIN * peak)
    assert CONV.harness < need < CONV.worker
    assert slots.trusted_need(CONV, True, peak) == CONV.trusted + need


def test_an_under_report_cannot_take_it_below_what_the_harness_itself_allocates():
    assert slots.worker_need(CONV, 1) == CONV.harness
    assert slots.worker_need(CONV, 64 << 20) == CONV.harness


def test_an_over_report_cannot_take_it_above_the_static_estimate():
    assert slots.worker_need(CONV, 1000 * GiB) == CONV.worker


def test_the_largest_report_of_a_task_counts_and_tasks_are_apart():
    book = WorkerPeaks()
    assert book.get("a") is None
    book.record("a", 3 * GiB)
    book.record("a", 1 * GiB)  # a later, lower report (or one that lies low) does not undo the larger one
    book.record("b", 2 * GiB)
    book.record("c", 0)  # nothing reported: nothing learned
    assert book.get("a") == 3 * GiB and book.get("b") == 2 * GiB and book.get("c") is None
    book.clear()
    assert book.get("a") is None


def test_a_lease_admits_with_the_need_known_at_admission():
    """Pinned with the static estimate, admitted with the learned one: two of the task's later candidates fit beside
    each other where two static estimates would not."""
    learned = slots.trusted_need(CONV, True, 9 * GiB)
    dev = DeviceSlots(cuda_count=1, memory={"cuda:0": 2 * learned})
    assert dev.capacity("cuda:0") < 2 * CONV.total
    admitted = threading.Barrier(2, timeout=5)

    def candidate():
        with lease("cuda", CONV.total, slots=dev) as held:
            held.admit(lambda: learned)
            assert held.need == learned
            admitted.wait()  # both are admitted at once

    threads = [threading.Thread(target=candidate) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert dev.peak["cuda:0"] == (2, 2 * learned)
    assert dev.reserved("cuda:0") == 0


def test_a_verification_records_its_workers_peak_for_its_task(monkeypatch):
    book = WorkerPeaks()
    monkeypatch.setattr(slots, "WORKER_PEAKS", book)
    ctx = SimpleNamespace(fp=CONV, verdict=SimpleNamespace(device_mem_gb=8.5), task_key=lambda: "task")
    pipeline._learn_worker_peak(ctx)
    assert book.get("task") == int(8.5 * GiB)
    ctx.verdict.device_mem_gb = None  # stopped before its timing: no whole-verification peak to learn from
    ctx.task_key = lambda: "other"
    pipeline._learn_worker_peak(ctx)
    assert book.get("other") is None


def test_a_waiting_candidate_is_admitted_once_an_ending_one_has_taught_a_smaller_need():
    """The task's later candidates queue with the static estimate before its first has ended; their need is asked
    again when it ends, so the learned worker side lets them in where the static one would still wait."""
    book = WorkerPeaks()
    learned = slots.trusted_need(CONV, True, 9 * GiB)
    dev = DeviceSlots(cuda_count=1, memory={"cuda:0": CONV.total + learned})
    admitted = threading.Event()
    first = dev.reserve("cuda:0", CONV.total)
    first.__enter__()

    def later():
        with lease("cuda", CONV.total, slots=dev) as held:
            held.admit(lambda: slots.trusted_need(CONV, True, book.get("task")))
            admitted.set()
            assert held.need == learned

    t = threading.Thread(target=later)
    t.start()
    assert not admitted.wait(0.2)  # the static estimate does not fit beside the first
    with dev._cv:  # the first reports its worker's peak; any wake of the waiter asks its need again
        book.record("task", 9 * GiB)
        dev._cv.notify_all()
    assert admitted.wait(5)  # admitted beside the first, which still holds its reservation
    t.join()
    first.__exit__(None, None, None)
    assert dev.reserved("cuda:0") == 0
