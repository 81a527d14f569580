import threading
import time

import pytest

from musacoder.judge.task_cache import TaskCache, TaskKey, budget_from_env

KEY = TaskKey.of("class Model: ...", "cpu", "torch-x", (5, True, 2, "center", 4))


def test_key_changes_with_anything_that_changes_the_figures():
    base = TaskKey.of("src", "cpu", "torch-x", (5,))
    assert base == TaskKey.of("src", "cpu", "torch-x", (5,))
    for other in (TaskKey.of("src2", "cpu", "torch-x", (5,)), TaskKey.of("src", "NVIDIA H100", "torch-x", (5,)),
                  TaskKey.of("src", "cpu", "torch-y", (5,)), TaskKey.of("src", "cpu", "torch-x", (6,))):
        assert other != base


def test_an_entry_is_computed_once_and_reported_reused_after():
    cache, calls = TaskCache(budget_bytes=1 << 20), []
    first = cache.get(KEY, "ref", lambda: calls.append(1) or "out", size=lambda v: 10)
    second = cache.get(KEY, "ref", lambda: calls.append(1) or "other", size=lambda v: 10)
    assert first == ("out", False) and second == ("out", True) and len(calls) == 1
    assert cache.hits == 1 and cache.misses == 1 and cache.bytes_kept == 10


def test_concurrent_askers_wait_for_one_computation():
    cache, calls = TaskCache(budget_bytes=1 << 20), []

    def slow():
        calls.append(1)
        time.sleep(0.2)
        return 42

    got = []
    threads = [threading.Thread(target=lambda: got.append(cache.get(KEY, "t", slow))) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(calls) == 1 and sorted(r for _, r in got) == [False, True, True, True]
    assert all(v == 42 for v, _ in got)


def test_a_failed_computation_reaches_its_waiters_and_is_not_kept():
    cache = TaskCache(budget_bytes=1 << 20)
    with pytest.raises(RuntimeError):
        cache.get(KEY, "x", lambda: (_ for _ in ()).throw(RuntimeError("boom")))
    assert cache.get(KEY, "x", lambda: 1) == (1, False)


def test_rotation_draws_new_secret_seeds_and_drops_entries():
    cache = TaskCache(budget_bytes=1 << 20)
    s1 = cache.master_seed(KEY)
    assert cache.master_seed(KEY) == s1
    cache.get(KEY, "ref", lambda: 1)
    cache.rotate()
    assert cache.master_seed(KEY) != s1
    assert cache.get(KEY, "ref", lambda: 2) == (2, False) and len(cache) == 1


def test_budget_evicts_other_tasks_least_recently_used_and_never_keeps_an_oversized_entry():
    other = TaskKey.of("class Other: ...", "cpu", "torch-x", (5,))
    cache = TaskCache(budget_bytes=100)
    cache.get(other, "a", lambda: "a", size=lambda v: 40)
    cache.get(other, "b", lambda: "b", size=lambda v: 30)
    cache.get(other, "a", lambda: "A")  # touch a: b is now the oldest
    cache.get(KEY, "c", lambda: "c", size=lambda v: 50)  # another task's entry: b goes
    assert cache.get(other, "a", lambda: "A2")[1] is True
    assert cache.get(KEY, "c", lambda: "c2")[1] is True
    assert cache.get(other, "b", lambda: "b2") == ("b2", False)  # recomputed, and kept in place of nothing of KEY's
    assert cache.get(KEY, "big", lambda: "big", size=lambda v: 1000) == ("big", False)
    assert cache.get(KEY, "big", lambda: "big2", size=lambda v: 1000) == ("big2", False)


def test_a_task_whose_entries_outgrow_the_budget_keeps_its_first_ones_for_every_later_candidate():
    """Candidates ask for a task's trial cases in the same order every time: least recently used, a budget of 3.5
    cases kept none of 5 for the next candidate (each was evicted just before it was asked for again); now the first 3
    are reused by every later candidate and only the last 2 recomputed."""
    cache, computed = TaskCache(budget_bytes=350), []

    def case(i):
        return lambda: computed.append(i) or f"case {i}"

    for candidate in range(4):
        for i in range(5):
            cache.get(KEY, ("reference_case", i), case(i), size=lambda v: 100)
    assert computed[:5] == [0, 1, 2, 3, 4]  # the first candidate computes all
    assert computed[5:] == [3, 4] * 3  # each later one only the two that did not fit
    assert cache.bytes_kept == 300 and len(cache) == 3


def test_two_tasks_verified_at_once_do_not_evict_each_other_s_cases():
    """Two large tasks in flight whose cases together outgrow the budget: least recently used across tasks, each
    task's candidate evicted the other's cases just before its next candidate asked (every candidate recomputed all).
    While a task has verifications in flight its entries stay; the other's that do not fit are handed back, and the
    first task's later candidates reuse all of theirs."""
    other = TaskKey.of("class Other: ...", "cpu", "torch-x", (5,))
    cache, computed = TaskCache(budget_bytes=500), []

    def case(key, i):
        return lambda: computed.append((key is KEY, i)) or i

    with cache.in_use(KEY), cache.in_use(other):
        for candidate in range(3):  # the two tasks' candidates interleaved
            for key in (KEY, other):
                for i in range(3):
                    cache.get(key, ("reference_case", i), case(key, i), size=lambda v: 100)
    assert computed.count((True, 0)) == 1 and [c for c in computed if c[0]] == [(True, 0), (True, 1), (True, 2)]
    assert computed.count((False, 2)) == 3  # the other task's last case found no room for it: recomputed
    assert computed.count((False, 0)) == computed.count((False, 1)) == 1
    # once no candidate of KEY is in flight, its entries make room as any other's
    cache.get(other, ("reference_case", 2), case(other, 2), size=lambda v: 100)
    assert cache.get(other, ("reference_case", 2), case(other, 2))[1] is True


def test_budget_from_environment(monkeypatch):
    monkeypatch.setenv("MUSACODER_TASK_CACHE_GB", "0.5")
    assert budget_from_env() == 1 << 29
    monkeypatch.setenv("MUSACODER_TASK_CACHE_GB", "lots")
    with pytest.raises(ValueError, match="MUSACODER_TASK_CACHE_GB"):
        budget_from_env()
    monkeypatch.delenv("MUSACODER_TASK_CACHE_GB")
    assert budget_from_env() > 0


def test_the_default_budget_is_a_quarter_of_the_host_at_least_8_gib(monkeypatch):
    import os

    from musacoder.judge import task_cache

    pages = {"SC_PAGE_SIZE": 4096}
    monkeypatch.setattr(os, "sysconf", lambda name: pages[name])
    pages["SC_PHYS_PAGES"] = (128 << 30) // 4096  # the H100 hosts: a convolution's seven cases fit
    assert task_cache.default_budget() == 32 << 30
    pages["SC_PHYS_PAGES"] = (16 << 30) // 4096
    assert task_cache.default_budget() == task_cache.DEFAULT_BUDGET_BYTES


def test_a_cache_with_a_rotation_period_rotates_by_itself():
    cache = TaskCache(budget_bytes=1 << 20, rotate_s=0.05)
    s1 = cache.master_seed(KEY)
    time.sleep(0.1)
    assert cache.master_seed(KEY) != s1 and cache.generation == 1


def test_a_claim_computes_ahead_of_the_askers_and_never_waits():
    """`claim`: work started ahead (the clean reference, right after a task's first timing) computes the entry the
    candidates will ask for, unless it is kept or being computed already; an asker meanwhile waits for it."""
    cache, started, release = TaskCache(budget_bytes=1 << 20), threading.Event(), threading.Event()

    def slow():
        started.set()
        release.wait(5)
        return "figure"

    assert not cache.started(KEY, "clean")
    claimer = threading.Thread(target=lambda: cache.claim(KEY, "clean", slow))
    claimer.start()
    started.wait(5)
    assert cache.started(KEY, "clean")
    assert cache.claim(KEY, "clean", lambda: "other") is False  # being computed: returns at once
    got: list = []
    asker = threading.Thread(target=lambda: got.append(cache.get(KEY, "clean", lambda: "asker's")))
    asker.start()
    time.sleep(0.05)
    assert not got  # waits for the claim's value
    release.set()
    claimer.join(5), asker.join(5)
    assert got == [("figure", True)] and cache.claim(KEY, "clean", lambda: "again") is False  # kept now


def test_peek_never_computes_and_waits_only_when_asked():
    """`peek`: the kept entry, or None; with `wait`, the value being computed once it is there (None if its
    computation failed), never a computation of its own."""
    cache, started, release = TaskCache(budget_bytes=1 << 20), threading.Event(), threading.Event()
    assert cache.peek(KEY, "clean") is None and cache.peek(KEY, "clean", wait=True) is None
    assert not cache.started(KEY, "clean")  # peeking started nothing

    def slow():
        started.set()
        release.wait(5)
        return "figure"

    claimer = threading.Thread(target=lambda: cache.claim(KEY, "clean", slow))
    claimer.start()
    started.wait(5)
    assert cache.peek(KEY, "clean") is None  # being computed, and not waited for
    got: list = []
    waiter = threading.Thread(target=lambda: got.append(cache.peek(KEY, "clean", wait=True)))
    waiter.start()
    time.sleep(0.05)
    assert not got
    release.set()
    claimer.join(5), waiter.join(5)
    assert got == ["figure"] and cache.peek(KEY, "clean") == "figure"

    def fail():
        raise RuntimeError("no figure")

    with pytest.raises(RuntimeError):
        cache.get(KEY, "broken", fail)
    assert cache.peek(KEY, "broken", wait=True) is None


def test_a_verification_keeps_its_task_in_use_while_its_stages_run(monkeypatch):
    """The pipeline marks the task in use from the reference's load to the verdict (`TaskCache.in_use`), and not after:
    its kept cases then make room like any other task's."""
    from musacoder.judge import pipeline
    from musacoder.records import Verdict

    cache, seen = TaskCache(), []

    def stages(ctx):
        seen.append(dict(cache._in_use))
        return Verdict(status="ok", task=ctx.task.key)

    monkeypatch.setattr(pipeline, "_stages", stages)
    root = __import__("pathlib").Path(__file__).resolve().parents[2]
    v = pipeline.verify(root / "examples" / "tasks" / "relu.py", root / "examples" / "candidates" / "relu_cpu.py",
                        cache=cache)
    assert v.status == "ok" and len(seen) == 1 and list(seen[0].values()) == [1]
    assert cache._in_use == {}
