import math
import random

import pytest

from musacoder.judge.stopping import (StoppingRule, log_ratios, median_interval, relative_width, should_stop,
                                      speedup_interval)


def test_median_interval_order_statistics_by_hand():
    # n = 16, z = 1.96: half = 1.96 * 4 / 2 = 3.92; j = floor(8 - 3.92) = 4, k = ceil(8 + 3.92) = 12
    xs = list(range(16, 0, -1))  # 16..1, sorted 1..16
    assert median_interval(xs) == (4, 12)
    assert median_interval([]) == (-math.inf, math.inf)
    assert median_interval([5.0]) == (5.0, 5.0)


def test_log_ratios_skip_non_positive_times():
    assert log_ratios([1.0, 0.0, 2.0], [2.0, 1.0, 2.0]) == [math.log(2.0), 0.0]


def test_speedup_interval_contains_the_true_ratio_of_constant_rounds():
    lo, hi = speedup_interval([2.0] * 20, [3.0] * 20)
    assert lo == pytest.approx(1.5) and hi == pytest.approx(1.5)
    assert relative_width([2.0] * 20, [3.0] * 20) == pytest.approx(0.0)


def test_quiet_rounds_stop_at_the_minimum_and_never_before():
    rule = StoppingRule(min_rounds=10)
    cand, ref = [1.0] * 9, [2.0] * 9
    assert not should_stop(cand, ref, rule)
    assert should_stop(cand + [1.0], ref + [2.0], rule)


def test_noisy_rounds_run_past_the_cap_until_the_interval_is_narrow_enough():
    rng = random.Random(0)
    rule = StoppingRule(min_rounds=10, cap_rounds=100, max_rounds=200, rel_halfwidth=0.005, wide=1.5)
    cand = [1.0 * math.exp(rng.gauss(0, 0.2)) for _ in range(200)]
    ref = [2.0 * math.exp(rng.gauss(0, 0.2)) for _ in range(200)]
    stopped = next(n for n in range(1, 201) if should_stop(cand[:n], ref[:n], rule))
    assert stopped == 200  # a ~28 % spread per log-ratio never narrows to 1 % in 200 rounds: the hard cap ends it
    loose = StoppingRule(min_rounds=10, cap_rounds=100, max_rounds=200, rel_halfwidth=0.2)
    stopped_loose = next(n for n in range(1, 201) if should_stop(cand[:n], ref[:n], loose))
    assert 10 <= stopped_loose < 100


def test_one_stretched_round_does_not_move_the_decision():
    cand, ref = [1.0] * 30, [2.0] * 30
    cand[5] = 50.0  # the host stretched one candidate round
    assert should_stop(cand, ref, StoppingRule(min_rounds=10))
    lo, hi = speedup_interval(cand, ref)
    assert lo == pytest.approx(2.0) and hi == pytest.approx(2.0)


def test_rule_parameters_are_checked():
    with pytest.raises(ValueError):
        StoppingRule(min_rounds=50, cap_rounds=10)
    with pytest.raises(ValueError):
        StoppingRule(rel_halfwidth=0)
