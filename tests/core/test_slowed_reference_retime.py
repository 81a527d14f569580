"""The timing stage's rule for a reference that ran much slower beside the candidate than in a clean worker
(`musacoder.judge.stages.timing.time_candidate`): the candidate is timed again and the attempt whose reference ran
nearer its clean figure is kept. A whole host slow for a moment then no longer sets a quiet moment's clean figure
against a candidate timed in the slow one (the same kernel got 1.2x and 0.69x so on a 2-core CPU), while a reference
the candidate's process keeps slow stays slow in both attempts and is capped as before."""

from types import SimpleNamespace

import pytest

from musacoder.config import VerifyConfig
from musacoder.judge.stages import timing
from musacoder.records import Timing, Verdict


def _t(ms: float) -> Timing:
    return Timing(median_ms=ms, mean_ms=ms, stdev_ms=0.0, min_ms=ms, max_ms=ms, repeats=100)


def _run(monkeypatch, attempts: list[tuple[float, float]], clean_ms: float | None, device: str = "cpu",
         clean_started: bool = False):
    """time_candidate on a stand-in context whose attempts give (reference ms, candidate ms) in turn."""
    queue = list(attempts)
    calls = []

    def once(ctx):
        ref, cand = queue.pop(0)
        calls.append((ref, cand))
        s = ref / cand
        return _t(cand), _t(ref), (s * 0.99, s * 1.01)  # a precise interval: no other reason to time again

    monkeypatch.setattr(timing, "_time_once", once)
    monkeypatch.setattr(timing, "_clean_figure_now", lambda ctx: clean_ms)
    ctx = SimpleNamespace(verdict=Verdict(status="ok", task="t"), cfg=VerifyConfig(), device=device,
                          clean_started=clean_started)
    timing.time_candidate(ctx)
    return ctx.verdict, calls


def test_a_moment_of_a_slow_host_is_timed_again_and_the_quiet_attempt_kept(monkeypatch):
    v, calls = _run(monkeypatch, [(0.322, 0.287), (0.200, 0.170)], clean_ms=0.1587)
    assert len(calls) == 2
    assert v.reference_timing.median_ms == 0.200 and v.runtime_ms == 0.170
    assert v.speedup == pytest.approx(0.200 / 0.170)
    assert any("its clean figure beside the candidate" in f for f in v.flags)


def test_a_reference_kept_slow_by_the_candidate_stays_slow_in_both_attempts(monkeypatch):
    v, calls = _run(monkeypatch, [(0.320, 0.170), (0.330, 0.160)], clean_ms=0.1587)
    assert len(calls) == 2
    # the attempt with the lower reference is kept; the clean figure's cap (clean_reference) then applies to it
    assert v.reference_timing.median_ms == 0.320 and v.runtime_ms == 0.170


@pytest.mark.parametrize("ref, clean, device", [
    (0.19, 0.1587, "cpu"),  # 1.2x its clean figure: within the CPU's tolerance, timed once
    (0.19, None, "cpu"),  # no clean figure known yet (the task's first candidate times it at its end)
    (0.104, 0.100, "cuda:0"),  # a GPU's usual few percent: timed once (the cap takes the lower figure)
])
def test_a_reference_near_its_clean_figure_is_timed_once(monkeypatch, ref, clean, device):
    v, calls = _run(monkeypatch, [(ref, 0.17)], clean_ms=clean, device=device)
    assert len(calls) == 1 and not v.flags


def test_the_candidate_that_started_the_clean_figure_right_after_its_timing_is_timed_once(monkeypatch):
    v, calls = _run(monkeypatch, [(0.322, 0.287)], clean_ms=0.1587, clean_started=True)
    assert len(calls) == 1 and not v.flags


def test_the_threshold_is_the_flag_or_the_tolerance_with_the_precision():
    assert timing.retime_above(1.0, 0.02) == timing.SLOWED_REFERENCE == 1.25
    assert timing.retime_above(1.25, 0.02) == pytest.approx(1.3)


def _clean(monkeypatch, ref_ms: float, cand_ms: float, shared: float, fresh: float | None, own: bool = False,
           clean_started: bool = False):
    """clean_reference on a stand-in context: the task's shared clean figure is `shared` ms (another candidate's, or
    this one's own with `own`), and timing the clean reference again gives `fresh` ms."""
    import contextlib

    from musacoder.judge.stages.context import TimedInputs

    fresh_calls = []

    def clean_reference_ms(*a, **k):
        fresh_calls.append(k["master_seed"])
        return [fresh] * 10

    monkeypatch.setattr(timing, "clean_reference_ms", clean_reference_ms)
    monkeypatch.setattr(timing, "_clean_entry", lambda ctx: (("clean_reference",), 10))
    monkeypatch.setattr(timing, "_earlier_figure", lambda ctx, name, repeats: None)
    v = Verdict(status="ok", task="t", runtime_ms=cand_ms, ref_runtime_ms=ref_ms, reference_timing=_t(ref_ms),
                candidate_timing=_t(cand_ms), speedup=ref_ms / cand_ms, speedup_vs_eager=ref_ms / cand_ms)
    v.stages["timing"] = "ok"
    ctx = SimpleNamespace(
        verdict=v, cfg=VerifyConfig(), device="cpu", timed_with=TimedInputs(7, 4, None), flush_bytes=0, task=None,
        clean_started=clean_started,
        weights=SimpleNamespace(state={}, init_inputs=[], seed=0),
        lease=SimpleNamespace(wait_gone=lambda: None, end_after=lambda gone: None),
        stage=lambda *a, **k: contextlib.nullcontext(),
        cached=lambda name, compute, **k: compute() if own else ([shared] * 10, None))
    if own:
        monkeypatch.setattr(timing, "_time_clean", lambda *a, **k: [shared] * 10)
    timing.clean_reference(ctx)
    return v, fresh_calls


def test_a_shared_clean_figure_that_would_cap_hard_is_timed_again_now_and_counts_bounded(monkeypatch):
    # the host slow while this candidate ran: its own fresh clean figure is slow too, and counts up to 1.3x the
    # shared one (so the cap is 1.25 x 1.3 x 0.1587 ms, not 1.25 x 0.1587 ms)
    v, calls = _clean(monkeypatch, ref_ms=0.322, cand_ms=0.287, shared=0.1587, fresh=0.30)
    assert calls == [7]  # on this candidate's own timed inputs
    assert v.ref_runtime_ms_clean == pytest.approx(0.1587 * 1.3)
    assert v.speedup == pytest.approx(1.25 * 0.1587 * 1.3 / 0.287)
    assert any("timed again in a clean worker now" in f for f in v.flags)


def test_a_reference_slowed_in_the_candidates_process_is_capped_by_the_fresh_figure_too(monkeypatch):
    v, calls = _clean(monkeypatch, ref_ms=0.322, cand_ms=0.17, shared=0.1587, fresh=0.16)
    assert calls == [7] and v.ref_runtime_ms == pytest.approx(1.25 * 0.16)
    assert v.speedup == pytest.approx(1.25 * 0.16 / 0.17)


@pytest.mark.parametrize("ref_ms, own, started", [(0.19, False, False), (0.322, True, False), (0.322, False, True)])
def test_no_second_clean_figure_near_the_shared_one_or_for_the_candidate_that_timed_it(monkeypatch, ref_ms, own,
                                                                                       started):
    v, calls = _clean(monkeypatch, ref_ms=ref_ms, cand_ms=0.17, shared=0.1587, fresh=0.30, own=own,
                      clean_started=started)
    assert calls == [] and v.ref_runtime_ms_clean == pytest.approx(0.1587)


def test_a_stored_clean_figure_is_read_once_per_verification(monkeypatch, tmp_path):
    """`_earlier_figure` is asked while the worker runs and again at the verification's end: one file read."""
    reads = []

    def stored(cache_dir, key, repeats, max_age):
        reads.append(key)
        return [0.5] * repeats, 120.0

    monkeypatch.setattr(timing, "stored_figure", stored)
    ctx = SimpleNamespace(cfg=VerifyConfig(stored_reference_max_age_s=3600, cache_dir=tmp_path), cache=None,
                          task_key=lambda: SimpleNamespace(digest=lambda *name: "k" + repr(name)), earlier_figures={})
    first = timing._earlier_figure(ctx, ("clean_reference", "cpu"), 3)
    again = timing._earlier_figure(ctx, ("clean_reference", "cpu"), 3)
    assert first == again and first[0] == [0.5] * 3 and "min ago" in first[1]
    assert len(reads) == 1
    other = SimpleNamespace(**{**vars(ctx), "earlier_figures": {}})  # another verification reads it for itself
    timing._earlier_figure(other, ("clean_reference", "cpu"), 3)
    assert len(reads) == 2
