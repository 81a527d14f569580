"""GPU pool scheduling with logical devices (no GPU needed): one verification per device at a time."""

import threading
import time

from musacoder.judge.slots import DeviceSlots


def _started(target, args: list[tuple]) -> list[threading.Thread]:
    """One started thread running `target(*a)` for each `a` of `args`."""
    threads = [threading.Thread(target=target, args=a) for a in args]
    for t in threads:
        t.start()
    return threads


def test_each_gpu_has_one_holder_and_all_are_used():
    slots = DeviceSlots(cuda_count=3)
    active: dict[str, int] = {}
    seen, clashes = set(), []
    lock = threading.Lock()

    def job():
        with slots.hold("cuda") as dev:
            with lock:
                active[dev] = active.get(dev, 0) + 1
                if active[dev] > 1:
                    clashes.append(dev)
                seen.add(dev)
            time.sleep(0.02)
            with lock:
                active[dev] -= 1

    threads = _started(job, [()] * 12)
    for t in threads:
        t.join()
    assert clashes == [] and seen == {"cuda:0", "cuda:1", "cuda:2"}


def test_named_gpu_waits_for_the_pool_holder():
    slots = DeviceSlots(cuda_count=1)
    order = []
    with slots.hold("cuda") as dev:
        assert dev == "cuda:0"
        t = threading.Thread(target=lambda: slots.hold("cuda:0").__enter__() and order.append("second"))
        t.start()
        time.sleep(0.05)
        order.append("first-released")
    t.join(timeout=2)
    assert order == ["first-released", "second"]


def test_cpu_is_one_slot():
    slots = DeviceSlots()
    with slots.hold("cpu") as d:
        assert d == "cpu"
        got = []
        t = threading.Thread(target=lambda: got.append(slots.hold("cpu").__enter__()))
        t.start()
        t.join(timeout=0.1)
        assert got == []
    t.join(timeout=2)
    assert got == ["cpu"]


def test_shared_holders_overlap_and_timing_has_the_device_alone():
    slots = DeviceSlots(cuda_count=1, max_shared=3)
    lock = threading.Lock()
    state = {"shared": 0, "exclusive": 0, "max_shared": 0}
    clashes = []

    def job(exclusive: bool):
        with slots.hold("cuda:0", exclusive=exclusive):
            with lock:
                key = "exclusive" if exclusive else "shared"
                state[key] += 1
                state["max_shared"] = max(state["max_shared"], state["shared"])
                if state["exclusive"] > 1 or (state["exclusive"] and state["shared"]):
                    clashes.append(dict(state))
            time.sleep(0.03)
            with lock:
                state[key] -= 1

    threads = _started(job, [(i % 3 == 0,) for i in range(18)])
    for t in threads:
        t.join()
    assert clashes == []
    assert 1 < state["max_shared"] <= 3


def test_waiting_timing_blocks_new_shared_holders():
    slots = DeviceSlots(cuda_count=1)
    order = []
    first = slots.hold("cuda:0", exclusive=False)
    first.__enter__()

    def timing():
        with slots.hold("cuda:0", exclusive=True):
            order.append("timing")

    def late_shared():
        with slots.hold("cuda:0", exclusive=False):
            order.append("late shared")

    t1 = threading.Thread(target=timing)
    t1.start()
    time.sleep(0.05)
    t2 = threading.Thread(target=late_shared)
    t2.start()
    time.sleep(0.05)
    assert order == []  # timing waits for the first holder; the late shared holder waits behind timing
    first.__exit__(None, None, None)
    t1.join(timeout=2)
    t2.join(timeout=2)
    assert order == ["timing", "late shared"]


def test_assign_spreads_verifications_over_gpus():
    slots = DeviceSlots(cuda_count=2)
    with slots.assign("cuda") as a, slots.assign("cuda") as b, slots.assign("cuda") as c:
        assert {a, b} == {"cuda:0", "cuda:1"} and c in {"cuda:0", "cuda:1"}
    with slots.assign("cuda:1") as d:
        assert d == "cuda:1"
    with slots.assign("cpu") as e:
        assert e == "cpu"


def test_shared_waiters_keep_arrival_order_and_waiting_timings_run_back_to_back():
    """Timings come first: a shared waiter waits while any timing is queued, exclusive waiters keep their order among
    themselves, so the timings waiting when the device drains run one after another, then the shared waiters in
    their arrival order."""
    slots = DeviceSlots(cuda_count=1, max_shared=1)
    order = []
    first = slots.hold("cuda:0", exclusive=False)
    first.__enter__()

    def waiter(name, exclusive):
        with slots.hold("cuda:0", exclusive=exclusive):
            order.append(name)
            time.sleep(0.01)

    threads = []
    for name, ex in (("a", False), ("b", True), ("c", False), ("d", True), ("e", False)):
        t = threading.Thread(target=waiter, args=(name, ex))
        t.start()
        threads.append(t)
        time.sleep(0.03)  # arrival order a, b, c, d, e
    first.__exit__(None, None, None)
    for t in threads:
        t.join(timeout=5)
    # b and d (timings) run back to back once the first holder leaves; a, c and e then keep their arrival order
    assert order == ["b", "d", "a", "c", "e"]


def test_a_batch_of_timings_is_bounded_by_the_verifications_that_ask():
    """Shared waiters are not starved: once the waiting timings have run, the shared waiters behind them get the
    device even while new verifications keep arriving (each asks for shared first)."""
    slots = DeviceSlots(cuda_count=1, max_shared=2)
    slots.trace = []
    done = []

    def verification(i):
        with slots.hold("cuda:0", exclusive=False):
            time.sleep(0.005)
        with slots.hold("cuda:0", exclusive=True):
            time.sleep(0.002)
        with slots.hold("cuda:0", exclusive=False):
            time.sleep(0.005)
        done.append(i)

    threads = _started(verification, [(i,) for i in range(24)])
    for t in threads:
        t.join(timeout=10)
    from musacoder.judge.slots import trace_overlaps

    assert sorted(done) == list(range(24)) and trace_overlaps(slots.trace) == []


def test_trace_shows_timing_alone_on_each_device():
    from musacoder.judge.slots import trace_overlaps

    slots = DeviceSlots(cuda_count=2, max_shared=3)
    slots.trace = []

    def job(i):
        with slots.assign("cuda") as dev:
            with slots.hold(dev, exclusive=False):
                time.sleep(0.01)
            with slots.hold(dev, exclusive=True):
                time.sleep(0.01)

    threads = _started(job, [(i,) for i in range(12)])
    for t in threads:
        t.join()
    assert {d for d, *_ in slots.trace} == {"cuda:0", "cuda:1"} and len(slots.trace) == 24
    assert trace_overlaps(slots.trace) == []
    # the checker itself finds a violation
    assert trace_overlaps([("cuda:0", "exclusive", 0.0, 1.0), ("cuda:0", "shared", 0.5, 0.7)])


def test_memory_reservations_never_overcommit_a_device_and_one_always_runs():
    """Verifications reserve their estimated device memory for their lifetime: on a 10-unit device, 6-unit jobs run
    one at a time, 3-unit jobs three at a time, and a 50-unit job still runs (alone)."""
    slots = DeviceSlots(cuda_count=1, memory={"cuda:0": 10})
    lock = threading.Lock()
    in_use, peak, ran = [0], [0], []

    def job(need):
        with slots.assign("cuda", need) as dev:
            with lock:
                in_use[0] += need
                peak[0] = max(peak[0], in_use[0] if need <= 10 else 0)
                ran.append((dev, need))
            time.sleep(0.03)
            with lock:
                in_use[0] -= need

    threads = _started(job, [(n,) for n in (6, 6, 3, 3, 3, 50, 6)])
    for t in threads:
        t.join()
    assert len(ran) == 7 and peak[0] <= 10
    assert slots.reserved("cuda:0") == 0
    most_holding, most_reserved = slots.peak["cuda:0"]
    assert most_reserved == 50 and 1 <= most_holding <= 3  # the big job ran alone; at most three 3-unit jobs at once


def test_later_small_reservations_overtake_a_large_one_only_until_it_waited_too_long():
    """A 9-unit verification waits on a 10-unit device beside a 5-unit holder: 1-unit ones arriving early are admitted
    before it (they fit), but once it has waited `overtake_s` a newcomer that would not fit beside it after the
    holder has ended (2 units: 2 + 9 > 10) waits until it has run."""
    slots = DeviceSlots(cuda_count=1, memory={"cuda:0": 10})
    slots.overtake_s = 0.3
    order, lock = [], threading.Lock()

    def job(name, need, hold_s):
        with slots.assign("cuda", need):
            with lock:
                order.append(name)
            time.sleep(hold_s)

    first = _started(job, [("holder", 5, 0.6)])
    time.sleep(0.05)
    large = _started(job, [("large", 9, 0.05)])
    time.sleep(0.05)
    assert len(slots._admission) == 1
    early = _started(job, [("early", 1, 0.05)])  # fits, and the large one has waited only 0.05 s
    for t in early:
        t.join(timeout=2)
    assert order == ["holder", "early"]
    time.sleep(0.35)  # the large one has now waited past overtake_s
    late = _started(job, [("late", 2, 0.05)])
    time.sleep(0.05)
    assert "late" not in order and len(slots._admission) == 2
    assert slots.try_reserve("cuda:0", 2) is None  # nor does anything else of its size get in without waiting
    for t in first + large + late:
        t.join(timeout=3)
    assert order == ["holder", "early", "large", "late"] and len(slots._admission) == 0


def test_memory_reservations_spread_over_devices():
    slots = DeviceSlots(cuda_count=2, memory={"cuda:0": 10, "cuda:1": 10})
    with slots.assign("cuda", 8) as a, slots.assign("cuda", 8) as b:
        assert {a, b} == {"cuda:0", "cuda:1"}  # the second does not fit beside the first


def test_footprint_counts_inputs_outputs_and_weights_on_meta_per_side():
    import dataclasses
    from pathlib import Path

    from musacoder.judge.slots import (GiB, TRACED_SLACK, TRUSTED_FIXED, TRUSTED_SLACK, WORKER_FIXED, Footprint,
                                       footprint)
    from musacoder.tasks import load_module, load_task

    relu = load_task(Path(__file__).resolve().parents[2] / "examples" / "tasks" / "relu.py")
    fp = footprint(load_module(relu))
    n = fp.inputs
    assert n and fp.outputs == n and fp.weights == 0  # ReLU: output as large as the input, no weights
    assert fp.input_sets == 4
    # worker: 4 sets + fresh draw + pristine, candidate's and reference's outputs, 5 kept outputs, temporaries 4(I + O)
    assert fp.worker == WORKER_FIXED + 6 * n + 2 * n + 5 * n + 8 * n
    # fp32 and fp64 inputs; fp32, fp64, rounded-model and candidate outputs; the models' temporaries: the static
    # term, since the traced float64 forward (ReLU makes nothing besides its output) holds less
    assert fp.transient == 0
    assert fp.trusted == TRUSTED_FIXED + 3 * n + 5 * n + TRUSTED_SLACK * 2 * n
    assert dataclasses.replace(fp, transient=None).trusted == fp.trusted
    # a forward whose intermediates outgrow the static term counts them
    wide = dataclasses.replace(fp, transient=10 * n)
    assert wide.trusted == TRUSTED_FIXED + 3 * n + 5 * n + 10 * n + TRACED_SLACK * 2 * n
    assert fp.total == fp.worker + fp.trusted

    # KernelBench's level-1 ReLU at its own size: 6.4 GB in and out. One input set while timing, kept outputs on
    # the host: ~180 GB in all (the measured peaks were ~73 GB in the worker, ~59 GB on the trusted side), so one such
    # verification at a time on a 141 GB GPU (85 % usable; one verification is always admitted, however large)
    big = Footprint(inputs=4096 * 393216 * 4, outputs=4096 * 393216 * 4, weights=0)
    assert big.input_sets == 1
    assert 73 * GiB < big.worker and 131 * GiB < big.total < 185 * GiB
    assert "GiB" in big.describe()

    class Broken:  # a task that does not run on meta tensors has no estimate
        @staticmethod
        def get_init_inputs():
            raise RuntimeError("no")

    assert footprint(Broken) is None


def test_alone_waits_for_an_empty_device_and_keeps_it():
    import threading
    import time

    slots = DeviceSlots(cuda_count=1, memory={"cuda:0": 100})
    order = []
    with slots.assign("cuda", 10):
        def lone():
            with slots.assign("cuda", 10, alone=True):
                order.append("alone in")
                time.sleep(0.05)
                order.append("alone out")

        t = threading.Thread(target=lone)
        t.start()
        time.sleep(0.05)
        assert order == []  # waits while another verification is pinned
    t.join(0.02) if False else None
    time.sleep(0.01)

    def small():
        with slots.assign("cuda", 1):
            order.append("small")

    s = threading.Thread(target=small)
    s.start()
    t.join()
    s.join()
    assert order[:2] == ["alone in", "alone out"] and order[2] == "small"  # nothing joins it while it runs


def test_pinned_verifications_build_while_a_large_one_holds_the_memory():
    """`pin` reserves nothing: while a verification larger than the device holds its memory, the next ones pin the
    device (their workers start and their candidates build) but reserve, and so run, only after it ends."""
    slots = DeviceSlots(cuda_count=1, memory={"cuda:0": 10})
    events = []
    with slots.assign("cuda", 50):
        def nxt(i):
            with slots.pin("cuda", 50) as dev:
                events.append(f"pinned {i}")
                with slots.reserve(dev, 50):
                    events.append(f"runs {i}")
                    time.sleep(0.02)
                    events.append(f"ends {i}")

        threads = _started(nxt, [(i,) for i in range(2)])
        time.sleep(0.1)
        assert sorted(events) == ["pinned 0", "pinned 1"]  # built beside the large one, not yet running
    for t in threads:
        t.join()
    runs = [e for e in events if not e.startswith("pinned")]
    assert runs in (["runs 0", "ends 0", "runs 1", "ends 1"], ["runs 1", "ends 1", "runs 0", "ends 0"])
    assert slots.reserved("cuda:0") == 0 and slots._assigned["cuda:0"] == 0


def test_two_retries_alone_do_not_wait_for_each_other_forever():
    slots = DeviceSlots(cuda_count=1, memory={"cuda:0": 100})
    order = []

    def lone(i):
        with slots.pin("cuda", 10) as dev:
            time.sleep(0.02)  # both pinned before either reserves
            with slots.reserve(dev, 10, alone=True):
                order.append(f"in {i}")
                time.sleep(0.02)
                order.append(f"out {i}")

    threads = _started(lone, [(i,) for i in range(2)])
    for t in threads:
        t.join(5)
    assert not any(t.is_alive() for t in threads)
    assert order[0][3:] == order[1][4:] and order[2][3:] == order[3][4:]  # one after the other, never overlapping


def test_a_lease_holds_its_memory_until_its_workers_are_reaped():
    """A verification returns once its worker is killed; the worker's reaping goes on in the background and the
    lease's reservation (and pin) ends only when it is gone, so the next large verification is not admitted beside a
    worker still giving its device memory back."""
    from musacoder.judge.slots import lease

    slots = DeviceSlots(cuda_count=1, memory={"cuda:0": 10})
    gone = threading.Event()
    with lease("cuda", 8, slots=slots) as held:
        held.admit()
        held.end_after(gone)
    assert slots.reserved("cuda:0") == 8  # the block ended, the worker is not yet gone
    admitted = threading.Event()

    def next_one():
        with lease("cuda", 8, slots=slots) as nxt:
            nxt.admit()
            admitted.set()

    t = threading.Thread(target=next_one)
    t.start()
    assert not admitted.wait(0.2)
    gone.set()
    assert admitted.wait(5)
    t.join()
    assert slots.reserved("cuda:0") == 0
    with lease("cuda", 8, slots=slots) as held:  # nothing pending: ends with the block
        held.admit()
    assert slots.reserved("cuda:0") == 0


def test_try_reserve_takes_what_fits_now_and_never_waits():
    slots = DeviceSlots(cuda_count=1, memory={"cuda:0": 10})
    with slots.reserve("cuda:0", 6):
        assert slots.try_reserve("cuda:0", 5) is None  # 6 + 5 > 10: not now, and no wait
        held = slots.try_reserve("cuda:0", 4)
        assert held is not None
        assert slots.try_reserve("cuda:0", 1) is None  # 6 + 4 already
        held.close()  # from any thread, whenever its work is done
        assert slots.try_reserve("cuda:0", 4) is not None
    assert slots.try_reserve("cuda:0", 11) is None  # larger than the device: `reserve` would run it alone; this never


def test_work_while_waiting_keeps_the_waiters_place_and_runs_until_done():
    """`DeviceSlots.reserve(while_waiting=...)`: run without the lock while the reservation waits, with its ticket
    kept (a later arrival that does not fit cannot take its place), asked again on each wake until it returns True,
    and never where the reservation fits at once."""
    slots = DeviceSlots(cuda_count=1, memory={"cuda:0": 10})
    calls, events = [], []

    def work():
        calls.append(len(slots._admission))  # its ticket is in the queue while it works
        with slots.hold("cuda:0", exclusive=False):  # the lock is free: the work may hold the device shared
            pass
        return len(calls) >= 2  # not done the first time (a budget spent), done the second

    with slots.reserve("cuda:0", 1, while_waiting=work):
        pass
    assert calls == []  # admitted at once: nothing to do while waiting

    def waiter():
        with slots.reserve("cuda:0", 5, while_waiting=work):
            events.append("admitted")

    def holder():
        with slots.reserve("cuda:0", 6):
            events.append("holding")
            time.sleep(0.2)
            with slots.reserve("cuda:0", 1):  # a change in the reservations wakes the waiter
                pass
            time.sleep(0.3)

    threads = _started(holder, [()])
    time.sleep(0.05)
    threads += _started(waiter, [()])
    for t in threads:
        t.join(timeout=5)
    assert events == ["holding", "admitted"]
    assert calls[:2] == [1, 1] and len(calls) == 2  # asked on a wake after the first refusal, then never again
    assert slots.reserved("cuda:0") == 0 and not slots._admission


def test_host_budget_takes_what_fits_and_gets_it_back(monkeypatch):
    import pytest

    from musacoder.judge.slots import GiB, HostBudget, host_ahead_bytes

    budget = HostBudget(total=10)
    assert budget.take(6) and not budget.take(5) and budget.take(4)
    assert not budget.take(0)  # nothing to page-lock takes nothing
    budget.give(6)
    assert budget.held == 4 and budget.take(6)
    monkeypatch.setenv("MUSACODER_HOST_AHEAD_GB", "1.5")
    assert host_ahead_bytes() == int(1.5 * GiB)
    monkeypatch.setenv("MUSACODER_HOST_AHEAD_GB", "0")
    assert host_ahead_bytes() == 0 and not HostBudget().take(1)  # 0: never page-lock ahead
    for bad in ("lots", "-1", "nan"):
        monkeypatch.setenv("MUSACODER_HOST_AHEAD_GB", bad)
        with pytest.raises(ValueError, match="MUSACODER_HOST_AHEAD_GB"):
            host_ahead_bytes()
    monkeypatch.delenv("MUSACODER_HOST_AHEAD_GB")
    assert host_ahead_bytes() >= 8 * GiB  # a quarter of the host's memory, at least the task cache's floor


def test_a_tasks_output_spec_comes_from_its_forward_on_meta_tensors():
    import types
    from pathlib import Path

    import torch

    from musacoder.judge.inputs import output_spec
    from musacoder.judge.slots import meta_output_spec
    from musacoder.tasks import load_module, load_task

    relu = load_module(load_task(Path(__file__).resolve().parents[2] / "examples" / "tasks" / "relu.py"))
    xs = relu.get_inputs()
    assert meta_output_spec(relu) == output_spec(torch.relu(xs[0])) == ["tensor", list(xs[0].shape), "float32"]

    class Model(torch.nn.Module):
        def forward(self, x):
            return x[x > 0]  # a data-dependent shape: no meta kernel gives it

    shapeless = types.SimpleNamespace(Model=Model, get_inputs=lambda: [torch.randn(4)], get_init_inputs=lambda: [])
    assert meta_output_spec(shapeless) is None


def test_the_float64_forwards_intermediates_are_traced_at_their_most_at_once():
    """`forward_transient`: a reduction over a large intermediate (KernelBench's convolution-then-min tasks) holds far
    more than its output; views of the inputs and weights are not new bytes, and freed intermediates go back."""
    from types import SimpleNamespace

    import torch

    from musacoder.judge.slots import footprint, forward_transient

    n = 1 << 20

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.w = torch.nn.Parameter(torch.ones(n))

        def forward(self, x):
            x = x.view(-1)  # a view of the input: nothing new
            y = x * self.w.t()  # float64: 8n bytes
            z = y + 1  # 8n more while y lives
            del y
            u = z * 2  # 8n: z and u at once, y gone
            return u.sum()

    task = SimpleNamespace(Model=Model, get_init_inputs=lambda: [], get_inputs=lambda: [torch.rand(n)])
    t = forward_transient(task)
    assert 16 * n <= t <= 16 * n + 64  # two intermediates at once, not three; the scalar output is not counted
    fp = footprint(task)
    assert fp.transient == t and fp.outputs == 4  # the float32 output: one scalar


def test_after_the_bound_a_small_one_still_goes_first_where_it_cannot_delay_the_waiter():
    """A chain of large verifications (each waits for the previous one, the same task's) leaves memory beside it: a
    small one that fits beside the waiter once the running large one ends is admitted at once (backfilling), and
    the waiter is admitted the moment the large one ends, not later."""
    slots = DeviceSlots(cuda_count=1, memory={"cuda:0": 10})
    slots.overtake_s = 0.05
    order, lock = [], threading.Lock()
    t0 = time.monotonic()
    admitted_at = {}

    def job(name, need, hold_s):
        with slots.assign("cuda", need):
            with lock:
                order.append(name)
                admitted_at[name] = time.monotonic() - t0
            time.sleep(hold_s)

    first = _started(job, [("large1", 6, 0.5)])
    time.sleep(0.05)
    second = _started(job, [("large2", 6, 0.05)])
    time.sleep(0.15)  # large2 has waited past the bound
    small = _started(job, [("small", 3, 1.0)])  # 6 - 6 + 3 + 6 <= 10: fits beside large2 once large1 ends
    time.sleep(0.05)
    assert order == ["large1", "small"]
    one = slots.try_reserve("cuda:0", 1)
    assert one is not None  # 3 + 1 beside large2 still fit
    assert slots.try_reserve("cuda:0", 1) is None  # 3 + 1 + 1 + 6 > 10: it could delay large2
    one.close()
    for t in first + second + small:
        t.join(timeout=3)
    assert order == ["large1", "small", "large2"]
    assert admitted_at["large2"] < 0.5 + 0.3  # right after large1 ended (at 0.5 s), not after the small one (1.2 s)


def test_a_tasks_footprint_is_traced_once_per_source_and_input_sets(monkeypatch):
    """Every candidate of a task asked for its footprint, tens of seconds on meta tensors for a recurrent task: now the
    first asker computes it, concurrent ones wait for it, later ones reuse it."""
    import threading

    from musacoder.judge import slots

    calls = []
    gate = threading.Event()

    def slow(module, max_input_sets=4):
        calls.append((module, max_input_sets))
        gate.wait(2)
        return slots.Footprint(inputs=1, outputs=1, weights=0, max_input_sets=max_input_sets)

    monkeypatch.setattr(slots, "footprint", slow)
    book = slots._Footprints(most=2)
    got = []
    threads = [threading.Thread(target=lambda: got.append(book.get("task a", "module a"))) for _ in range(3)]
    for t in threads:
        t.start()
    gate.set()
    for t in threads:
        t.join()
    assert len(calls) == 1 and len(got) == 3 and got[0] is got[1] is got[2]
    assert book.get("task a", "module a") is got[0] and len(calls) == 1
    book.get("task a", "module a", max_input_sets=2)  # another input-set cap: another footprint
    book.get("task b", "module b")
    assert len(calls) == 3
    book.get("task a", "module a")  # the oldest went out (at most 2 kept)
    assert len(calls) == 4
