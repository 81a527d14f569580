"""Worker replies are typed records checked on arrival: a reply candidate code tampered with is refused as malformed
(the verdict is then `crashed`, the candidate's doing), never read with defaults or left to crash the trusted side."""

import pytest
import torch

from musacoder.judge.messages import (CallReport, Fault, LoadReply, MalformedReply, TimeReply, TrialReply, parse)


def test_a_well_formed_reply_becomes_its_record_and_unknown_fields_are_ignored():
    out = torch.ones(3)
    got = parse({"ok": True, "outputs": out, "report": {"launches": 2, "illegal_ops": ["aten::mm"]}, "extra": 1},
                TrialReply)
    assert isinstance(got, TrialReply) and got.outputs is out  # tensors pass through untouched
    assert got.report == CallReport(launches=2, illegal_ops=["aten::mm"])
    assert parse({"ok": True}, LoadReply) == LoadReply()


def test_a_fault_says_whose_it_is():
    f = parse({"ok": False, "kind": "infra_error", "error": "x", "where": "trial", "oom": True,
               "mem_allocated": 5, "mem_free": 7}, TrialReply)
    assert isinstance(f, Fault) and f.kind == "infra_error" and f.oom and f.mem_allocated == 5


@pytest.mark.parametrize("raw", [
    None, [], {"ok": "yes"}, {"outputs": 1},                                  # no boolean ok
    {"ok": True},                                                             # a trial reply without its report
    {"ok": True, "report": {"launches": "many"}},                             # wrong type inside the report
    {"ok": True, "report": {"illegal_ops": "aten::mm"}},                      # a string where a list belongs
    {"ok": False, "kind": "not_my_fault"},                                    # a fault kind that does not exist
])
def test_a_malformed_trial_reply_is_refused(raw):
    with pytest.raises(MalformedReply):
        parse(raw, TrialReply)


def test_a_time_reply_needs_its_timings_and_typed_rounds():
    ok = parse({"ok": True, "candidate_ms": [0.1], "reference_ms": [0.2], "audits": {3: {"report": {}}}}, TimeReply)
    assert ok.audits[3].report.launches == 0
    with pytest.raises(MalformedReply):
        parse({"ok": True, "candidate_ms": "fast", "reference_ms": [0.2], "audits": {}}, TimeReply)
    with pytest.raises(MalformedReply):
        parse({"ok": True, "candidate_ms": [0.1], "reference_ms": [0.2], "audits": {"r": {}}}, TimeReply)


def test_the_workers_own_trial_timings_are_kept_only_where_plausible():
    """`CallReport.harness_s` is written by the candidate's process: known parts with finite seconds within the
    verification's limit are added up in `stage_s` as `trial.<part>`; anything else is left out (never judged)."""
    from musacoder.config import VerifyConfig
    from musacoder.judge.stages.context import RunContext
    from musacoder.judge.stages.correctness import add_harness_parts
    from musacoder.records import Task

    ctx = RunContext.new(Task(name="t", source=""), "", "cpu", VerifyConfig(timeout_s=60.0))
    add_harness_parts(ctx, CallReport(harness_s={"call": 0.25, "guard": 0.5}))
    add_harness_parts(ctx, CallReport(harness_s={"call": 0.25, "guard": float("nan"), "inputs": -1.0,
                                                 "reply": 1e9, "steal": 3.0}))
    assert ctx.verdict.stage_s == {"trial.call": 0.5, "trial.guard": 0.5}
    with pytest.raises(MalformedReply):
        parse({"ok": True, "report": {"harness_s": {"call": "slow"}}}, TrialReply)
