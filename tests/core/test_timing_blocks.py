"""The worker's timed rounds in blocks (`worker.timing_ops`): on the host clock the candidate's calls of a block run back
to back and then the reference's, each right after its round's inputs were filled, on the same contents; on a GPU a
block is one round, as before."""

import types

import torch

from musacoder.judge import messages
from musacoder.judge.worker import timing_ops


class _Task(types.ModuleType):
    def __init__(self):
        super().__init__("block_task")

    @staticmethod
    def get_inputs():
        return [torch.rand(8, 16)]


class _Worker:
    """What `_TimedRun` asks of a worker, recording every call in order: ("cand"|"ref", contents' sum)."""

    def __init__(self):
        self.torch, self.device, self.task_module = torch, "cpu", _Task()
        self.calls: list[tuple[str, float]] = []
        self._launches = 0
        self.guard = types.SimpleNamespace(moved=set())
        self.device_clocks: set = set()
        self.held = {}

        def model(x):
            self._launches += 1
            self.calls.append(("cand", float(x.sum())))
            x.mul_(0)  # changes its inputs' contents in place (not their layout)
            return torch.relu(x)

        def ref_model(x):
            self.calls.append(("ref", float(x.sum())))
            return torch.relu(x)

        self.model, self.ref_model = model, ref_model

    def launches(self):
        return self._launches

    def check_harness(self):
        return False

    def device_mem_peak(self):
        return 0

    def forward(self, args, profile, **_):
        self._launches += 1
        self.calls.append(("audit", float(args[0].sum())))
        return torch.relu(args[0]), {"launches": 1}


def _request(**kw) -> messages.TimeRequest:
    base = dict(master_seed=123, input_sets=4, perturb=None, warmup=1, repeats=8, max_repeats=8, budget_s=60.0,
                ratio_precision=1e-9, audit_rounds=[], check_keep=0, late_audit_p=0.0, cap_repeats=8)
    return messages.TimeRequest(**{**base, **kw})


def test_on_the_host_clock_a_block_of_candidate_calls_then_the_references_on_the_same_contents():
    w = _Worker()
    rep = timing_ops.handle_time(w, _request())
    assert rep["ok"] and len(rep["candidate_ms"]) == len(rep["reference_ms"]) == 8
    timed = [c for c in w.calls if c[0] != "audit"]
    kinds = "".join("c" if k == "cand" else "r" for k, _ in timed)
    assert kinds.startswith("ccccrrrrccccrrrr"), kinds  # blocks of the 4 input sets
    cands = [s for k, s in timed if k == "cand"]
    refs = [s for k, s in timed if k == "ref"]
    # each reference saw its round's inputs as the candidate's call found them, although the call zeroed them
    assert refs[:8] == cands[:8] and all(s != 0 for s in refs)
    assert len(set(cands)) == len(cands)  # fresh contents every round


def test_on_a_gpu_a_block_is_one_round():
    assert timing_ops._TimedRun(_Worker(), _request()).block == 4
    gpu = _Worker()
    gpu.device = "cuda:0"  # a device timer (events per call; no flush buffer asked for here, so no GPU needed)
    assert timing_ops._TimedRun(gpu, _request(l2_flush_bytes=0)).block == 1


def test_a_block_ends_early_rather_than_time_more_rounds_than_asked():
    w = _Worker()
    rep = timing_ops.handle_time(w, _request(repeats=6, max_repeats=6, cap_repeats=6))
    assert len(rep["candidate_ms"]) == len(rep["reference_ms"]) == 6
    assert sum(k == "cand" for k, _ in w.calls) == 7  # the warm-up round and six timed ones


def test_asking_again_for_a_round_refills_its_set_in_place_with_the_same_contents():
    w = _Worker()
    sets = timing_ops.RotatingInputs(w, master=7, n_sets=2)
    a0 = sets(0)[0]
    first = a0.clone()
    a0.zero_()
    assert sets(0)[0] is a0 and torch.equal(a0, first)  # the same tensor, the round's contents again
    a1 = sets(1)[0]
    a2 = sets(2)[0]
    assert a2 is a0 and not torch.equal(a2, first)  # round 2 reuses set 0 with its own contents
    assert len(sets.sets) == 2 and a1 is not a0


def test_the_reply_splits_the_window_wall_by_part():
    """`parts_s`: where the exclusive window's wall went (every part of `WINDOW_PARTS`, seconds), the slow parts
    where they ran: a slow reference shows under `reference`, a slow audited call under `audit`, a slow keep under
    `keep` and not under `candidate`, whose calls made the keeps."""
    import time

    w = _Worker()
    ref = w.ref_model

    def slow_ref(x):
        time.sleep(0.02)
        return ref(x)

    w.ref_model = slow_ref
    real_forward = w.forward

    def slow_forward(args, profile, **kw):
        time.sleep(0.05)
        return real_forward(args, profile, **kw)

    w.forward = slow_forward
    run_keep = timing_ops._TimedRun.keep

    def slow_keep(self, out):
        time.sleep(0.03)
        return run_keep(self, out)

    timing_ops._TimedRun.keep = slow_keep
    try:
        rep = timing_ops.handle_time(w, _request(audit_rounds=[2], check_keep=2))
    finally:
        timing_ops._TimedRun.keep = run_keep
    parts = rep["parts_s"]
    assert set(parts) == set(messages.WINDOW_PARTS) and all(x >= 0 for x in parts.values())
    assert parts["reference"] >= 8 * 0.02  # eight timed rounds and the warm-up's reference
    assert parts["audit"] >= 2 * 0.05  # the fixed audit and the final one
    assert parts["keep"] >= 2 * 0.03 and parts["candidate"] < parts["keep"] + 0.05
    assert messages.TimeReply(**rep).parts_s == parts


def _page_lock_recorder(monkeypatch):
    """The `reserve_host` requests a timing stage sends (`rpc.ask`, answered as granted) and the stages it holds the
    device for, recorded: (requests, (stage, slot) pairs, a `ctx.stage` stand-in)."""
    import contextlib

    from musacoder.judge.stages import timing as timing_stage

    asked, holds = [], []

    def ask(ctx, request, timeout_s, record, stage):
        asked.append(request)
        return record(ok=True, reserved_bytes=1)

    @contextlib.contextmanager
    def stage(name, slot=None):
        holds.append((name, slot))
        yield

    monkeypatch.setattr(timing_stage.rpc, "ask", ask)
    return asked, holds, stage


def test_host_memory_is_reserved_before_the_window_only_for_large_outputs_on_a_gpu(monkeypatch):
    """`stages.timing._reserve_host`: one `reserve_host` request, with the device shared, where the kept outputs go to
    host memory (`HOST_HOLD_BYTES` or more) on a GPU; nothing for small outputs or on the CPU."""
    from musacoder.config import VerifyConfig
    from musacoder.judge.stages import timing as timing_stage

    asked, holds, stage = _page_lock_recorder(monkeypatch)
    big = ["tensor", [timing_stage.HOST_HOLD_BYTES // 4], "float32"]
    small = ["tensor", [timing_stage.HOST_HOLD_BYTES // 4 - 1], "float32"]
    for device, expect in (("cuda:0", big), ("cuda:0", small), ("cpu", big)):
        ctx = types.SimpleNamespace(device=device, expect=expect, cfg=VerifyConfig(rechecks=3), stage=stage,
                                    host_reserved=None)
        timing_stage._reserve_host(ctx)
    assert [(r.op, r.expect, r.copies) for r in asked] == [("reserve_host", big, 7)]
    assert holds == [("host_reserve", "shared")]
    # page-locked already while it waited for device memory, for this spec: not again; for another spec: again
    for reserved in (big, small):
        ctx = types.SimpleNamespace(device="cuda:0", expect=big, cfg=VerifyConfig(rechecks=3), stage=stage,
                                    host_reserved=reserved)
        timing_stage._reserve_host(ctx)
    assert len(asked) == 2 and asked[-1].expect == big


def test_host_memory_is_page_locked_while_waiting_for_the_device_within_the_budget(monkeypatch):
    """`stages.timing.host_reserved_ahead`: the work a verification waiting for device memory does meanwhile: its
    worker page-locks the kept outputs' host memory (the spec from the task's forward on meta tensors), within
    `HOST_AHEAD`, which it gets back when the block ends, even on an error; with the budget spent it is asked again
    (False), and it has nothing to do (True) for small outputs, an untimed candidate, off a GPU or without a spec
    (then `_reserve_host` page-locks after the trials)."""
    import pytest

    from musacoder.config import VerifyConfig
    from musacoder.judge import slots
    from musacoder.judge.stages import timing as timing_stage

    asked, holds, stage = _page_lock_recorder(monkeypatch)
    big = ["tensor", [slots.HOST_HOLD_BYTES // 4], "float32"]  # 1 GiB
    spec = {"value": big}
    budget = slots.HostBudget(total=12 * slots.HOST_HOLD_BYTES)
    monkeypatch.setattr(timing_stage, "meta_output_spec", lambda module: spec["value"])
    monkeypatch.setattr(timing_stage, "HOST_AHEAD", budget)
    fp_big = slots.Footprint(inputs=1, outputs=slots.HOST_HOLD_BYTES, weights=0)

    def ctx(device="cuda:0", fp=fp_big, **cfg):
        return types.SimpleNamespace(device=device, fp=fp, module=None, cfg=VerifyConfig(rechecks=2, **cfg),
                                     stage=stage, host_reserved=None)

    waiting = ctx()
    with timing_stage.host_reserved_ahead(waiting) as work:
        assert waiting.host_reserved is None  # nothing before the wait asks for it
        assert work() is True
        assert budget.held == 5 * slots.HOST_HOLD_BYTES  # five kept copies of 1 GiB, held while it waits
    assert budget.held == 0 and waiting.host_reserved == big
    # one fresh copy per request (the earlier ones taken back from torch's host allocator), each its own shared hold
    assert [(r.op, r.expect, r.copies) for r in asked] == [("reserve_host", big, k) for k in range(1, 6)]
    assert holds == [("host_reserve_ahead", "shared")] * 5

    fp_small = slots.Footprint(inputs=1, outputs=slots.HOST_HOLD_BYTES - 1, weights=0)
    for c in (ctx(fp=fp_small), ctx(device="cpu"), ctx(fp=None), ctx(time_candidate=False)):
        with timing_stage.host_reserved_ahead(c) as work:
            assert work() is True
        assert c.host_reserved is None
    spec["value"] = None  # the forward does not run on meta tensors
    with timing_stage.host_reserved_ahead(ctx()) as work:
        assert work() is True
    assert len(asked) == 5 and budget.held == 0

    spec["value"] = big
    first, second, third = ctx(), ctx(), ctx()
    with pytest.raises(RuntimeError):
        with timing_stage.host_reserved_ahead(first) as w1, timing_stage.host_reserved_ahead(second) as w2, \
                timing_stage.host_reserved_ahead(third) as w3:
            assert w1() and w2()
            assert w3() is False and third.host_reserved is None  # 15 GiB > 12: asked again on the next wake
            assert budget.held == 10 * slots.HOST_HOLD_BYTES
            raise RuntimeError("the attempt ended")
    assert budget.held == 0  # given back on the way out
    assert (first.host_reserved, second.host_reserved) == (big, big) and len(asked) == 15

    # more than the whole budget (or a budget of 0: off) never fits: nothing to do, not asked again
    monkeypatch.setattr(timing_stage, "HOST_AHEAD", slots.HostBudget(total=4 * slots.HOST_HOLD_BYTES))
    with timing_stage.host_reserved_ahead(ctx()) as work:
        assert work() is True
    assert len(asked) == 15
