import math

import pytest

from musacoder.feedback import FEEDBACK_HEADER, render_feedback, trim_compiler_log
from musacoder.records import TrialResult, Verdict
from musacoder.reward import kernel_reward


@pytest.mark.parametrize("status", ["extract_error", "compile_error", "runtime_error", "timeout", "crashed", "illegal"])
def test_failures_score_minus_one(status):
    assert kernel_reward(status, 1.0, status != "illegal", 3.0) == -1.0


def test_partial_and_zero():
    assert kernel_reward("incorrect", 0.0, True, None) == -1.0
    assert kernel_reward("incorrect", 0.6, True, None) == pytest.approx(-0.5 + 0.5 * 0.6)
    assert kernel_reward("incorrect", 0.6, False, None) == -1.0


def test_correct_speedup_term():
    assert kernel_reward("ok", 1.0, True, 0.5) == 1.0  # slower: no bonus, no penalty
    assert kernel_reward("ok", 1.0, True, 2.0) == pytest.approx(1.5)  # 1 + 0.5 * (2 - 1)
    assert kernel_reward("ok", 1.0, True, 100.0) == pytest.approx(3.0)  # capped at nu_max = 4
    assert kernel_reward("ok", 1.0, True, 3.0, lam=1.0, nu_max=1.0) == pytest.approx(2.0)
    assert kernel_reward("ok", 1.0, True, None) == 1.0
    assert kernel_reward("ok", 1.0, True, math.nan) == 1.0


def test_bad_pass_fraction():
    with pytest.raises(ValueError):
        kernel_reward("incorrect", 1.5, True, None)


def test_feedback_branches():
    ok = Verdict(status="ok", compiled=True, legal=True, correct=True, pass_fraction=1.0, speedup=2.0,
                 speedup_vs_eager=2.0, runtime_ms=1.0, ref_runtime_ms=2.0)
    text = render_feedback(ok, 2)
    assert text.startswith(FEEDBACK_HEADER.format(n=2))
    assert "optimise" in text and "2x" in text
    bad = Verdict(status="incorrect", compiled=True, legal=True, pass_fraction=0.4,
                  trials=[TrialResult(trial=0, passed=False, message="output: 3/10 elements outside atol"),
                          TrialResult(trial=1, passed=True)])
    text = render_feedback(bad)
    assert "fix correctness first" in text and "trial 0" in text and "1/2 trials passed" in text
    ill = Verdict(status="illegal", violations=["illegal PyTorch op aten::mm (called from inside extension function f (C++))"])
    assert "aten::mm" in render_feedback(ill)


def test_compiler_log_trimmed():
    log = "\n".join(["[1/2] c++ -MMD -MF main.o.d -DTORCH_EXTENSION_NAME=x ..."] * 40 +
                    ["/root/.cache/musacoder/ext/ab/abc/main.cpp:12:5: error: 'foo' was not declared in this scope",
                     "   12 |     foo(x);", "ninja: build stopped: subcommand failed."])
    out = trim_compiler_log(log)
    assert "main.cpp:12:5: error: 'foo' was not declared" in out
    assert "-DTORCH_EXTENSION_NAME" not in out
    assert len(out.splitlines()) <= 31


@pytest.mark.parametrize("status", ["extract_error", "illegal", "compile_error", "runtime_error", "timeout", "crashed"])
def test_only_incorrect_is_told_to_fix_correctness_first(status):
    text = render_feedback(Verdict(status=status, error="boom"))
    assert "fix correctness first" not in text
    assert text.splitlines()[-1].startswith("Next:")


def test_crash_feedback_points_at_bounds_and_infra_error_gives_no_advice():
    assert "bounds" in render_feedback(Verdict(status="crashed", error="illegal memory access"))
    assert "fix correctness first" in render_feedback(Verdict(status="incorrect", pass_fraction=0.0))
    assert "Next:" not in render_feedback(Verdict(status="infra_error", error="worker failed to start"))


def test_a_systematic_failure_earns_no_partial_credit():
    # 6 of 7 trials passed, but the one that failed was built to expose a systematic defect: q counts as 0
    assert kernel_reward("incorrect", 6 / 7, True, None, systematic=True) == -1.0
    assert kernel_reward("incorrect", 6 / 7, True, None) == pytest.approx(-0.5 + 0.5 * 6 / 7)
    assert kernel_reward("ok", 1.0, True, 2.0, systematic=True) == pytest.approx(1.5)  # nothing failed: no effect


def test_feedback_names_a_systematic_defect():
    from musacoder.records import TrialResult, Verdict

    v = Verdict(status="incorrect", legal=True, pass_fraction=6 / 7, systematic_defect="reduced precision: error 40x",
                trials=[TrialResult(trial=0, passed=False, message="error", kind="center",
                                    systematic="reduced precision: error 40x")])
    text = render_feedback(v)
    assert "Systematic defect (no partial credit): reduced precision: error 40x." in text
