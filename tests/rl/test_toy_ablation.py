"""benchmarks/ablation.py's figures from metrics rows: final pass@1, steps to threshold, keep rate, buffer."""

import math

import pytest


@pytest.fixture
def ablation(benchmark_script):
    return benchmark_script("ablation")


def rows(evals):
    out = [{"step": 0, "eval_pass1": evals[0]}]
    for s in range(1, 11):
        row = {"step": s, "mirrorpop_checked": 10, "mirrorpop_popped": 2 if s <= 5 else 0,
               "mirrorpop_popped_signed_rule": 1, "retry_buffer": s, "retry_replays": 1,
               "retry_recovered": s % 2, "groups": 8, "groups_dropped": 2, "pass_first": 0.1 * s}
        if s % 5 == 0:
            row["eval_pass1"] = evals[s // 5]
        out.append(row)
    return out


def test_run_stats(ablation):
    st = ablation.run_stats(rows([0.0, 0.6, 0.8]), threshold=0.5, final_evals=2)
    assert st["final_pass1"] == pytest.approx(0.7)
    assert st["steps_to_threshold"] == 5
    assert st["mirrorpop_keep_rate"] == pytest.approx(1 - 10 / 100)
    assert (st["retry_buffer_mean"], st["retry_buffer_end"], st["retry_replays"]) == (5.5, 10, 10)
    assert st["retry_recovered_share"] == pytest.approx(0.5)
    assert st["groups_dropped_share"] == pytest.approx(0.25)
    never = ablation.run_stats(rows([0.0, 0.1, 0.2]), threshold=0.5, final_evals=3)
    assert never["steps_to_threshold"] is None and never["final_pass1"] == pytest.approx(0.1)


def test_variant_summary_and_table(ablation):
    per_seed = [ablation.run_stats(rows(e), 0.5, 1) for e in ([0, 0.6, 0.8], [0, 0.2, 0.6], [0, 0.1, 0.2])]
    summary = ablation.variant_summary(per_seed)
    assert summary["final_pass1"]["mean"] == pytest.approx(1.6 / 3)
    assert summary["final_pass1"]["std"] == pytest.approx(math.sqrt(((0.8 - 1.6 / 3) ** 2 + (0.6 - 1.6 / 3) ** 2
                                                                        + (0.2 - 1.6 / 3) ** 2) / 2))
    assert summary["steps_to_threshold"] == {"mean": 7.5, "reached": 2, "values": [5, 10, None]}
    text = ablation.table({"all": summary}, 0.5)
    assert "| all | 0.53 ± 0.31 | 8 (2/3) | 0.900 ± 0.000 |" in text
