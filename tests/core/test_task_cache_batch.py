"""The per-task cache in a batch: candidates of one task share the task's reference work, and a candidate's own
timed rounds still get inputs of their own."""

from pathlib import Path

import pytest

from musacoder.config import VerifyConfig
from musacoder.judge.batch import VerifyJob, by_task, verify_many
from musacoder.tasks import load_task

pytest.importorskip("triton", reason="the Triton interpreter runs these candidates on the CPU: pip install -e '.[triton]'")

ROOT = Path(__file__).resolve().parents[2]
# each batch times its clean reference (the reuse across batches of a process has a test of its own)
CFG = VerifyConfig(timeout_s=120.0, warmup=1, repeats=5, cap_repeats=10, max_repeats=20, time_budget_s=2.0,
                   clean_reference_reuse_s=0)


def timed_now(v) -> bool:
    """The verdict's clean reference was timed for its batch (by it or by the task's background start), not taken
    from an earlier batch or run."""
    return v.ref_runtime_ms_clean is not None and not any("was reused from" in f for f in v.flags)


def retimed(v) -> bool:
    """The shared clean figure would have capped this verdict's reference hard (a host slow while it ran) and the
    clean reference was timed again for it alone (`timing._clean_now`)."""
    return any("timed again in a clean worker now" in f for f in v.flags)


def first(got: dict):
    return next(iter(got.values()))


def _jobs(n: int, task: str = "relu.py") -> list[VerifyJob]:
    t = load_task(ROOT / "examples" / "tasks" / task)
    text = (ROOT / "examples" / "candidates" / "relu_triton.py").read_text()
    return [VerifyJob(f"{task}#{i}", t, text, "triton") for i in range(n)]


def test_four_identical_candidates_of_one_task_reuse_its_reference_work():
    got = {job.id: v for job, v in verify_many(_jobs(4), workers=2, config=CFG)}
    assert all(v.status == "ok" for v in got.values()), {k: (v.status, v.error) for k, v in got.items()}
    assert sum(v.reference_reused for v in got.values()) == 3  # the first computes it, once
    for v in got.values():  # each verdict carries the 95 % interval of its speedup
        lo, hi = v.speedup_interval
        assert 0 < lo <= hi
    # each candidate's timed rounds had inputs of its own: the interleaved reference figures are not all one value
    assert len({v.ref_runtime_ms_in_process for v in got.values()}) > 1
    # one clean reference for the task, started in the background right after the first candidate's timing: no
    # candidate timed it at its own end, each waited for the shared figure (timed), all capped by the same figure
    # (unless a busy host slowed a candidate's reference so much that the shared figure was timed again for it alone)
    assert not any("clean_reference" in v.stage_s and not retimed(v) for v in got.values())
    assert all("clean_reference_reuse" in v.stage_s for v in got.values())
    assert len({v.ref_runtime_ms_clean for v in got.values() if not retimed(v)}) == 1
    assert first(got).ref_runtime_ms_clean > 0


@pytest.mark.parametrize("backend, device", [("cuda", "cuda:1"), ("triton", "cpu"), ("cpp", "cpu")])
def test_the_reference_only_worker_is_made_as_the_candidates_worker_is(backend, device):
    """Same environment, layers and memory limit, so the same fork server and (on a GPU) the workers started ahead:
    made otherwise, the first clean reference of a process started a fork server of its own."""
    from musacoder.judge.stages import rpc
    from musacoder.judge.stages.context import RunContext

    cfg = VerifyConfig(memory_limit_gb=3.0, isolate_network=False)
    ctx = RunContext.new(load_task(ROOT / "examples" / "tasks" / "relu.py"), "", backend, cfg)
    ctx.backend, ctx.device = backend, device
    candidate, reference = rpc.open_worker(ctx, device), rpc.reference_worker(ctx)
    assert reference.extra_env == candidate.extra_env and "MUSACODER_AS_LIMIT" in reference.extra_env
    assert (reference.isolate_network, reference.cache_dir) == (candidate.isolate_network, candidate.cache_dir)
    assert reference.use_prestarted and ("MUSACODER_PREWARM_DEVICE" in reference.extra_env) == (device != "cpu")


def test_no_sharing_when_the_config_turns_it_off_or_fixes_the_seed():
    for cfg in (CFG.model_copy(update={"share_reference": False}), CFG.model_copy(update={"seed": 5})):
        got = [v for _, v in verify_many(_jobs(2), workers=1, config=cfg)]
        assert [v.status for v in got] == ["ok", "ok"] and not any(v.reference_reused for v in got)


def test_jobs_of_one_task_are_scheduled_together_in_first_seen_order():
    a, b = _jobs(2, "relu.py"), _jobs(2, "linear_gelu.py")
    order = [j.id for j in by_task([a[0], b[0], a[1], b[1]])]
    assert order == ["relu.py#0", "relu.py#1", "linear_gelu.py#0", "linear_gelu.py#1"]


def test_a_later_batch_of_the_process_reuses_the_clean_reference_while_it_is_recent():
    """`clean_reference_reuse_s`: a later batch (a new per-task cache, new secrets) takes the clean reference's figure
    a reference-only worker of this process measured for the same task key, and says so; not once it is older, not
    with 0, and not where the config shares no reference work."""
    cfg = CFG.model_copy(update={"clean_reference_reuse_s": 3600.0, "repeats": 6})  # a key no other test measured
    first = [v for _, v in verify_many(_jobs(1), workers=1, config=cfg)][0]
    assert first.status == "ok" and timed_now(first)
    second = [v for _, v in verify_many(_jobs(2), workers=1, config=cfg)]
    assert [v.status for v in second] == ["ok", "ok"]
    assert all(not timed_now(v) and (v.ref_runtime_ms_clean == first.ref_runtime_ms_clean or retimed(v))
               for v in second)
    assert all(any("from an earlier batch" in f for f in v.flags) for v in second)
    # the batches' own secrets still differ: the candidates' in-worker reference figures are their own
    assert len({first.ref_runtime_ms_in_process, *(v.ref_runtime_ms_in_process for v in second)}) > 1
    for update in ({"clean_reference_reuse_s": 0}, {"clean_reference_reuse_s": 1e-6}, {"share_reference": False}):
        again = [v for _, v in verify_many(_jobs(1), workers=1, config=cfg.model_copy(update=update))][0]
        assert again.status == "ok" and timed_now(again), update
        assert not any("from an earlier batch" in f for f in again.flags)


def test_a_stored_clean_reference_is_reused_by_a_later_run_only_when_opted_in_and_fresh(tmp_path):
    """`stored_reference_max_age_s`: the clean reference's timing outlives the batch on disk; a later batch (a new
    per-task cache, new secrets) takes it instead of starting a reference-only worker, and says so."""
    import json

    from musacoder.judge.baseline import stored_figure

    cfg = CFG.model_copy(update={"cache_dir": tmp_path, "stored_reference_max_age_s": 3600.0})
    first = [v for _, v in verify_many(_jobs(1), workers=1, config=cfg)][0]
    assert first.status == "ok" and timed_now(first)
    stored = list((tmp_path / "baselines").glob("stored-*.json"))
    assert len(stored) == 1
    second = [v for _, v in verify_many(_jobs(1), workers=1, config=cfg)][0]
    assert second.status == "ok" and not timed_now(second)
    assert any("reused from a run" in f for f in second.flags)
    assert second.ref_runtime_ms_clean == first.ref_runtime_ms_clean or retimed(second)
    # not opted in: timed again
    off = [v for _, v in verify_many(_jobs(1), workers=1, config=CFG.model_copy(update={"cache_dir": tmp_path}))][0]
    assert timed_now(off)
    # too old, from the future, or not what was asked for: never taken
    key = stored[0].name.removeprefix("stored-").removesuffix(".json")
    count = len(json.loads(stored[0].read_text())["ms"])
    assert stored_figure(tmp_path, key, count, 3600.0) is not None
    assert stored_figure(tmp_path, key, count + 1, 3600.0) is None
    data = json.loads(stored[0].read_text())
    for bad in ({**data, "at": data["at"] - 7200}, {**data, "at": data["at"] + 7200},
                {**data, "ms": [-1.0] * count}, {**data, "ms": "fast"}):
        stored[0].write_text(json.dumps(bad))
        assert stored_figure(tmp_path, key, count, 3600.0) is None
