"""The timing requests: `time` (interleaved rounds of the candidate and the eager reference, with secret audited and
re-checked rounds), `take_outputs` (what those rounds kept), and the reference-only worker's `time_reference`,
`compile_reference` and `time_compile`. How one call is timed is `musacoder.judge.timing`'s; this module decides
which rounds run, what each round checks and what is kept.
"""

from __future__ import annotations

import random
import time

from musacoder.judge import messages
from musacoder.judge.messages import WINDOW_PARTS
from musacoder.judge.stopping import StoppingRule, should_stop
from musacoder.judge.worker.errors import CandidateError, candidate_error, guarded
from musacoder.judge.worker.guard import layout


class RotatingInputs:
    """The inputs of timing round r: set r mod P, refilled in place from seed(master, r) before reuse, so contents
    never repeat while pointers do (the same for the candidate's rounds and the reference's), drawn with the
    perturbation the trusted side chose for timing (`musacoder.judge.inputs`)."""

    def __init__(self, worker, master: int, n_sets: int, perturb: str | None = None):
        self.worker, self.master, self.n_sets, self.sets = worker, master, max(1, n_sets), []
        self.perturb = perturb

    def __call__(self, r: int):
        from musacoder.judge.inputs import make_inputs, seed_for

        w = self.worker
        fresh = make_inputs(w.task_module, seed_for(self.master, r), perturb=self.perturb, device=w.device)
        if r % self.n_sets == len(self.sets):
            self.sets.append(fresh)
            return fresh
        cur = self.sets[r % self.n_sets]  # asked again for the same round: the same contents, in place
        with w.torch.no_grad():
            for dst, src in zip(cur, fresh):
                if isinstance(dst, w.torch.Tensor):
                    dst.copy_(src)
        return cur

    def clear(self) -> None:
        self.sets.clear()


class _TimedRun:
    """One `time` request's rounds (see `handle_time`): what each round ran, saw and kept."""

    def __init__(self, worker, req: messages.TimeRequest):
        from musacoder.judge.timing import RoundTrip, Timer

        torch, device = worker.torch, worker.device
        self.worker, self.req = worker, req
        self.audits = set(req.audit_rounds)
        # late audits: after the pool the fixed ones are drawn from, each round is profiled with probability
        # `late_audit_p` (a secret key; at most `late_audit_max` of them), decided before the call, so a candidate
        # cannot count calls to be honest only in the rounds the profiler sees
        self.late_picker, self.late = random.Random(req.late_audit_key), 0
        # the checked rounds: a reservoir sample (secret key) over every timed round of the run, however long it
        # runs, decided after each round's clock stopped; so no round, early or late, is safe from the re-check
        self.picker, self.kept, self.timed_rounds = random.Random(req.check_key), [], 0
        self.checked, self.audit_out = {}, {}
        self.no_launch, self.relaid, self.patched = [], [], []  # `patched`: the call changed what the harness runs
        self.cand_ms, self.ref_ms = [], []
        # where the exclusive window's wall goes, part by part (`messages.WINDOW_PARTS`; a diagnostic, never judged)
        self.parts_s = dict.fromkeys(WINDOW_PARTS, 0.0)
        self.inputs_for = RotatingInputs(worker, req.master_seed, req.input_sets, req.perturb)
        self.timer = Timer(torch, device, req.l2_flush_bytes)
        lo = max(2, req.repeats)
        hi = max(lo, req.max_repeats)
        self.rule = StoppingRule(min_rounds=lo, cap_rounds=min(max(lo, req.cap_repeats), hi), max_rounds=hi,
                                 rel_halfwidth=req.ratio_precision)
        self.trip = RoundTrip(torch) if device.startswith("cuda") else \
            RoundTrip(torch, "musa") if device.startswith("musa") else RoundTrip(None)
        # the rounds run in blocks: the candidate's calls of a block, then the reference's on the same inputs. On a GPU
        # a block is one round (device events time each call from a flushed L2; alternating cancels drift best). On
        # the host clock a block is the P input sets, and each call, the candidate's and the reference's, comes right
        # after its round's set is filled, as a clean reference-only worker times the reference
        # (`handle_time_reference`): interleaved round by round, each side woke its thread pool cold after the
        # other's, the reference ran 1.3-1.8x its clean figure beside an honest candidate, and that figure's cap
        # decided the speedup (docs/benchmarks.md, *One task, many candidates*)
        self.block = 1 if self.timer.cuda else self.inputs_for.n_sets
        self.pending: list[tuple[int, object, object]] = []  # (round, candidate's time, inputs) awaiting the reference
        worker.held = {}

    def keep(self, out):
        from musacoder.judge.inputs import nbytes

        return _clone(out) if nbytes(out) < self.req.host_hold_bytes else _to_host(out)

    def is_audit(self, r: int, final_round) -> bool:
        req = self.req
        if r in self.audits or r == final_round:
            return True
        if r >= req.late_audit_from and self.late < req.late_audit_max and self.late_picker.random() < req.late_audit_p:
            self.late += 1
            return True
        return False

    def audit_round(self, r: int, args) -> None:
        """The candidate's call under the profiler, untimed; its output kept for the trusted side's re-check."""
        from musacoder.judge.inputs import seed_for

        self.timer.flush()  # the profiler's device time is taken from the L2 state the timed rounds start from
        out, report = self.worker.forward(args, profile=True, seed=seed_for(self.req.master_seed, r),
                                          perturb=self.req.perturb, expect=self.req.expect, exact=False,
                                          check_state=False)  # once after the timing (`take_outputs`)
        self.audit_out[r] = {"report": report}
        self.worker.held[r] = self.keep(out)

    def timed_round(self, r: int, args) -> bool:
        """The candidate's call timed; the reference's on the same inputs at the end of the round's block
        (`run_references`). False when the round showed the call illegal in a way that must end the timing (nothing
        more runs on inputs or harness code it changed)."""
        w = self.worker
        launches0, layout0 = w.launches(), layout(args)
        t_c, out = guarded(self.timer.timed, w.model, args)
        if w.check_harness():
            self.patched.append(r)
        if w.launches() == launches0:
            self.no_launch.append(r)
        if layout(args) != layout0:  # the reference runs on these same tensors next
            self.relaid.append(r)
        if self.relaid[-1:] == [r] or self.patched[-1:] == [r]:
            return False
        self.timed_rounds += 1
        self.clocked("keep", self.maybe_keep, r, out)
        del out
        self.pending.append((r, t_c, args))
        return True

    def block_ends(self, r: int) -> bool:
        """Whether the rounds before `r` end a block: every `block` rounds, or once the pairs counted so far and
        those waiting for their reference make `max_repeats` (no more rounds than the request allows)."""
        waiting = sum(q >= self.req.warmup for q, _, _ in self.pending)
        return r % self.block == 0 or len(self.cand_ms) + waiting >= self.req.max_repeats

    def run_references(self) -> None:
        """The reference timed on the inputs of each candidate round of the block, in the same order (in blocks of
        several rounds, each set filled again from its round's seed right before: the same contents, in the state
        the candidate's call found them); each pair of figures is kept once both are there."""
        for r, t_c, args in self.pending:
            if self.block > 1:
                args = self.inputs_for(r)
            t_r, ref_out = self.timer.timed(self.worker.ref_model, args)
            del ref_out
            if r >= self.req.warmup:
                self.cand_ms.append(t_c)
                self.ref_ms.append(t_r.stream_ms)  # trusted eager PyTorch: its work is on the stream it was called on
                self.trip.sample([t.stream_ms for t in self.cand_ms])
        self.pending.clear()

    def maybe_keep(self, r: int, out) -> None:
        """Keep round r's output if the reservoir sample picks it (a timed round like any other: decided only after
        the clock stopped)."""
        from musacoder.judge.inputs import output_problem

        keep_n = self.req.check_keep
        slot = len(self.kept) if len(self.kept) < keep_n else self.picker.randrange(self.timed_rounds)
        if slot >= keep_n:
            return
        if slot < len(self.kept):
            self.checked.pop(self.kept[slot], None)
            self.worker.held.pop(self.kept[slot], None)
            self.kept[slot] = r
        else:
            self.kept.append(r)
        bad = output_problem(out, self.req.expect, exact=False)
        self.checked[r] = {"report": {"output_type_error": bad} if bad else {}}
        self.worker.held[r] = None if bad else self.keep(out)

    def enough(self, r: int, started_ns: int) -> bool:
        """Whether the timed rounds so far meet the stopping rule (after every fixed audit and `repeats` rounds: at
        `max_repeats`, past the time budget, or once the speedup's interval is narrow enough: `musacoder.judge.stopping`)."""
        req, n = self.req, len(self.cand_ms)
        if r <= max(self.audits, default=0) or n < req.repeats:
            return False
        if n >= req.max_repeats or (time.perf_counter_ns() - started_ns) > req.budget_s * 1e9:
            return True
        return should_stop(self.trip.charge(self.cand_ms), self.ref_ms, self.rule)

    def clocked(self, part: str, fn, *args):
        """`fn(*args)`, its wall added to `parts_s[part]`."""
        t0 = time.perf_counter()
        try:
            return fn(*args)
        finally:
            self.parts_s[part] += time.perf_counter() - t0

    def reply(self, final_round) -> dict:
        w = self.worker
        self.parts_s["candidate"] -= self.parts_s["keep"]  # the keeps ran inside the candidate's rounds
        return {"ok": True, "candidate_ms": self.trip.charge(self.cand_ms), "reference_ms": self.ref_ms,
                "parts_s": {k: round(max(0.0, x), 4) for k, x in self.parts_s.items()},
                "audits": self.audit_out, "checks": self.checked, "device_mem_peak": w.device_mem_peak(),
                "timer_overhead_ms": self.trip.ms(), "no_launch_rounds": self.no_launch,
                "relaid_rounds": self.relaid, "final_round": final_round, "patched_rounds": self.patched,
                "patched": sorted(w.guard.moved)[:5], "device_clocks": sorted(w.device_clocks)}


def handle_time(worker, req: messages.TimeRequest) -> dict:
    """Interleaved timing of candidate and reference over rotating input sets, with secret audit rounds.

    Round r uses input set r mod P, refilled in place from seed(master, r) before reuse, so contents never repeat
    while pointers do. Rounds run in blocks (`_TimedRun.block`: one round on a GPU, the P sets on the host clock):
    the candidate's calls of the block, then the reference's on the same inputs in the same order, so the candidate
    runs before the reference on every set. Audit rounds run the candidate under
    the profiler (untimed) and keep its output for the trusted side to re-check; check rounds are ordinary timed
    rounds whose output is also kept (after the clock stopped, so nothing tells them apart from the others),
    `check_keep` of them drawn by reservoir sampling over every timed round of the run (a secret `check_key`), so a
    late round is as likely to be re-checked as an early one. Outputs of `host_hold_bytes` or more are kept in host
    memory rather than on the device. Every timed round must call the candidate's own kernels (counted by the build
    hook). Once the stopping rule is met (`_TimedRun.enough`), one more audited round ends the run."""
    run = _TimedRun(worker, req)
    started = time.perf_counter_ns()
    r, final_round = 0, None
    while True:
        args = run.clocked("inputs", run.inputs_for, r)
        try:
            if run.is_audit(r, final_round):
                run.clocked("audit", run.audit_round, r, args)
                if r == final_round:
                    break
            elif not run.clocked("candidate", run.timed_round, r, args):
                break  # illegal already
        except CandidateError as e:
            return candidate_error(e.error, f"forward (timing round {r})")
        r += 1
        if run.block_ends(r):
            run.clocked("reference", run.run_references)
        if final_round is None and not run.pending and run.clocked("rule", run.enough, r, started):
            final_round = r
    run.inputs_for.clear()
    return run.reply(final_round)


def handle_reserve_host(worker, req: messages.ReserveHostRequest) -> dict:
    """Page-lock the host memory the next `time` request's kept outputs will take (`inputs.reserve_host`), with the
    device shared: fresh page-locking of a 2 GiB output took most of a second, and the window keeps one per audited
    and checked round."""
    from musacoder.judge.inputs import reserve_host

    return {"ok": True, "reserved_bytes": reserve_host(req.expect, max(0, min(req.copies, 16)))}


def handle_take_outputs(worker, req: messages.TakeOutputsRequest) -> dict:
    """The outputs kept from the last `time` request's audit and check rounds (those of `rounds`, default all),
    handed over and forgotten here: the trusted side fetches them after the device's timing slot is released, one
    round at a time for large outputs. With `ipc`, each goes over CUDA IPC, an output kept in host memory moved back
    to the device first (one at a time)."""
    from musacoder.judge.inputs import to_cpu, to_device

    held = worker.held
    state = {"global_state": worker.guard.changes()} if req.state_check else {}
    picked = {r: held.pop(r) for r in (list(held) if req.rounds is None else req.rounds) if r in held}
    if req.ipc:
        from musacoder.judge import ipc as cuda_ipc

        picked = {r: _to_device(o, worker.device) for r, o in picked.items()}
        worker.last_outputs = picked
        return {"ok": True, "outputs": {r: to_cpu(cuda_ipc.export_outputs(o, worker.exports)) if o is not None
                                        else None for r, o in picked.items()}, **state}
    picked = {r: to_device(o, "cpu") if o is not None else None for r, o in picked.items()}  # host chunks whole
    worker.last_outputs = picked
    return {"ok": True, "outputs": picked, **state}


def handle_time_reference(worker, req: messages.TimeReferenceRequest) -> dict:
    """Time the eager reference alone, in a reference-only worker (no candidate code was ever loaded here), on
    rotating input sets from `master_seed` as `time` makes them: `warmup` untimed rounds, then `repeats` timed
    ones. The candidate's worker times the reference beside its own rounds; this figure is the one nothing the
    candidate left in its process (allocator, thread and scheduling state, patched functions) can slow down."""
    from musacoder.judge.timing import Timer

    if worker.candidate is not None or worker.ref_model is None:
        raise RuntimeError("time_reference runs only in a reference-only worker after init")
    timer = Timer(worker.torch, worker.device, req.l2_flush_bytes)
    inputs_for = RotatingInputs(worker, req.master_seed, req.input_sets, req.perturb)
    times: list[float] = []
    for r in range(req.warmup + req.repeats):
        t, out = timer.timed(worker.ref_model, inputs_for(r))
        del out
        if r >= req.warmup:
            times.append(t.stream_ms)
    inputs_for.clear()
    return {"ok": True, "reference_ms": times}


def handle_compile_reference(worker, req: messages.CompileReferenceRequest) -> dict:
    """Compile the reference with torch.compile and run it once on each input set (the compile and its warm-up are
    host work: the device need not be held exclusively for them)."""
    from musacoder.judge.inputs import make_inputs, seed_for

    torch = worker.torch
    worker.compiled = torch.compile(worker.ref_model, mode=req.mode or None)
    worker.compile_sets = [make_inputs(worker.task_module, seed_for(req.master_seed, 7_000_000 + i),
                                       perturb=req.perturb, device=worker.device)
                           for i in range(req.input_sets)]
    with torch.no_grad():
        for inputs in worker.compile_sets:
            worker.compiled(*inputs)
    worker.sync()
    return {"ok": True}


def handle_time_compile(worker, req: messages.TimeCompileRequest) -> dict:
    """Time the compiled reference (`compile_reference` first) on rotating inputs: the `torch.compile` baseline."""
    from musacoder.judge.timing import Timer

    timer = Timer(worker.torch, worker.device, req.l2_flush_bytes)
    sets, times = worker.compile_sets, []
    for r in range(req.warmup + req.repeats):
        t, _ = timer.timed(worker.compiled, sets[r % len(sets)])
        if r >= req.warmup:
            times.append(t.stream_ms)  # trusted code (inductor's kernels), timed like the eager reference
    return {"ok": True, "compile_ms": times}


def _to_host(out):
    """A host copy of a kept output too large to hold on the device, in page-locked byte chunks (`inputs.to_host`): a
    copy into fresh pageable memory of a 6.4 GB output took seconds (the driver stages it and the pages fault in),
    and the timing loop keeps one per audited and checked round, in every fresh worker; page-locking is paid per
    byte (2-2.8 GiB/s fresh on an H100, docs/benchmarks.md *The host link*), and whole tensors would be page-locked in
    power-of-two blocks (8 GiB for a 6 GiB output). A replaced output's chunks go back to torch's host allocator for
    the next kept one. Pageable where page-locked memory cannot be had."""
    from musacoder.judge.inputs import to_host

    return to_host(out, pinned=True)


def _to_device(out, device: str):
    """Kept outputs whole on `device` (for a CUDA IPC export): host chunks (`_to_host`) and large host tensors moved
    there, everything else as it is."""
    import torch

    from musacoder.judge.inputs import HostTensor, map_tensors

    def one(t):
        if isinstance(t, HostTensor):
            return t.to_device(device)
        big = t.numel() * t.element_size() >= (64 << 20)
        return t.to(device) if not t.is_cuda and device.startswith("cuda") and big else t

    return map_tensors(one, out, (torch.Tensor, HostTensor))


def _clone(out):
    """A copy on the same device, so a candidate that reuses one output buffer cannot change a kept output later."""
    from musacoder.judge.inputs import map_tensors

    return map_tensors(lambda t: t.detach().clone(), out)

