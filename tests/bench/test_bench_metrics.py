import math

import pytest

from musacoder.bench.metrics import (
    SampleOutcome,
    TurnScore,
    best_turn_index,
    geomean,
    pass_at_k,
    share_faster,
    summarize,
)

P = TurnScore  # shorthand


def test_pass_at_k_hand_computed():
    assert pass_at_k(8, 0, 8) == 0.0
    assert pass_at_k(8, 1, 8) == 1.0
    assert pass_at_k(8, 1, 1) == pytest.approx(1 / 8)
    assert pass_at_k(10, 3, 2) == pytest.approx(1 - 21 / 45)  # 1 - C(7,2)/C(10,2)
    assert pass_at_k(5, 2, 3) == pytest.approx(1 - 1 / 10)  # 1 - C(3,3)/C(5,3)
    assert pass_at_k(4, 1, 8) == 1.0  # fewer samples than k: plain pass@n
    assert pass_at_k(4, 0, 8) == 0.0
    assert pass_at_k(0, 0, 8) == 0.0
    with pytest.raises(ValueError):
        pass_at_k(3, 4, 1)


def test_geomean_and_share_faster():
    assert geomean([2.0, 8.0]) == pytest.approx(4.0)
    assert geomean([]) is None
    scores = [P(True, 2.0, 1.0), P(True, 1.1, None), P(False, 5.0, 5.0), P(True, None, None)]
    assert share_faster(scores, 1.1) == pytest.approx(1 / 4)  # 1.1 is not > 1.1; the failing 5x does not count
    assert share_faster(scores, 0.0) == pytest.approx(3 / 4)  # fast_0 counts every passing sample, timed or not
    assert share_faster(scores, 0.9, vs="compile") == pytest.approx(1 / 4)


def test_best_turn_prefers_fastest_passing_then_earliest():
    assert best_turn_index([P(False), P(True, 1.5), P(True, 3.0)]) == 2
    assert best_turn_index([P(True, 2.0), P(True, 2.0)]) == 0
    assert best_turn_index([P(False), P(False)]) == 1
    o = SampleOutcome("t", "level1", (P(False), P(True, 1.2), P(True, 0.9)))
    assert o.turns_to_success == 2 and o.best.speedup_vs_eager == 1.2 and not o.first.passed


def test_summarize_hand_computed():
    outcomes = [
        SampleOutcome("A", "level1", (P(False), P(True, 2.0, 1.05))),
        SampleOutcome("A", "level1", (P(True, 1.0, None),)),
        SampleOutcome("B", "level1", (P(False), P(False))),
        SampleOutcome("B", "level1", (P(False),)),
        SampleOutcome("C", "level2", (P(True, 4.0, 3.0),)),
    ]
    s = summarize(outcomes, k=2, tasks={"A": "level1", "B": "level1", "C": "level2", "D": "level2"})
    assert list(s) == ["level1", "level2", "overall"]
    l1, l2, ov = s["level1"], s["level2"], s["overall"]
    assert l1["pass_at_k"] == pytest.approx(0.5)
    assert l1["avg_at_k"] == pytest.approx(0.5)
    assert l1["faster_rate_eager"] == pytest.approx(0.25)
    assert l1["faster_rate_compile"] == pytest.approx(0.0)
    assert l1["geomean_speedup"] == pytest.approx(math.sqrt(2))
    assert l1["fast_p"] == pytest.approx({"0.0": 0.5, "0.5": 0.5, "0.8": 0.5, "1.0": 0.25, "1.2": 0.25,
                                          "1.5": 0.25, "2.0": 0.0})
    assert l1["first_turn"]["pass_at_k"] == pytest.approx(0.5)
    assert l1["first_turn"]["avg_at_k"] == pytest.approx(0.25)
    assert l1["first_turn"]["faster_rate_eager"] == 0.0
    assert l1["first_turn"]["faster_rate_compile"] is None  # no first-turn compile timing at all
    assert l1["mean_turns_to_success"] == pytest.approx(1.5)
    assert l1["turns_to_success_hist"] == {"1": 1, "2": 1}
    # level2: C passes its only sample (n < k), D has no sample and counts as failed
    assert l2["pass_at_k"] == pytest.approx(0.5) and l2["avg_at_k"] == pytest.approx(0.5)
    assert l2["faster_rate_compile"] == pytest.approx(0.5) and l2["geomean_speedup"] == pytest.approx(4.0)
    assert l2["tasks_short_of_k"] == 2 and l2["n_tasks"] == 2 and l2["n_samples"] == 1
    # overall is task-weighted over A, B, C, D
    assert ov["pass_at_k"] == pytest.approx(0.5)
    assert ov["avg_at_k"] == pytest.approx(0.5)
    assert ov["faster_rate_eager"] == pytest.approx(0.375)
    assert ov["faster_rate_compile"] == pytest.approx(0.25)
    assert ov["fast_p"]["1.0"] == pytest.approx(0.375)
    assert ov["fast_p"]["0.0"] == pytest.approx(ov["avg_at_k"])
    assert ov["geomean_speedup"] == pytest.approx(2.0)


def test_compile_rate_is_zero_not_null_when_timed_but_nothing_passed():
    outcomes = [SampleOutcome("A", "level1", (P(False),))]
    assert summarize(outcomes, k=1)["overall"]["faster_rate_compile"] is None
    assert summarize(outcomes, k=1, compile_timed=True)["overall"]["faster_rate_compile"] == 0.0
