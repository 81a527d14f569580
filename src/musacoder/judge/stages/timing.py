"""Stage 6, timing: the candidate and the eager reference timed in interleaved rounds in the candidate's worker (with
the device held exclusively), secretly chosen rounds profiled and their outputs re-checked here, an outlier speedup
re-timed, the optional `torch.compile` baseline; and, after the candidate's worker is gone, the reference timed again
in a clean reference-only worker (`clean_reference`). The timing method itself is `musacoder.judge.timing`."""

from __future__ import annotations

import contextlib
import statistics
import threading

from musacoder.judge.baseline import (BaselineError, clean_reference_ms, compile_baseline_ms, recent_figure,
                                     remember_figure, store_figure, stored_figure)
from musacoder.judge.inputs import seed_for, spec_bytes
from musacoder.judge.messages import (WINDOW_PARTS, OutputsReply, ReservedReply, ReserveHostRequest, TakeOutputsRequest,
                                      TimeReply, TimeRequest)
from musacoder.judge.sandbox import WorkerDied, WorkerStartFailed, WorkerTimeout
from musacoder.judge.slots import (DEVICE_SLOTS, HOST_AHEAD, HOST_HOLD_BYTES, WORKER_FIXED, give_back_cached,
                                   meta_output_spec)
from musacoder.judge.stages import rpc
from musacoder.judge.stages.context import RunContext, Stop, TimedInputs
from musacoder.judge.stages.correctness import add_harness_parts, add_parts, judge_trial, reference_case
from musacoder.judge.stages.runtime import call_violations, memory_violations_of
from musacoder.judge.stopping import StoppingRule, speedup_interval
from musacoder.records import Timing

# the chance that a timing round after the first few is profiled (an audit round), decided in the worker before
# the call: over ~100 such rounds a candidate idle or falling back outside the first rounds meets one almost surely
LATE_AUDIT_P = 0.05
# the reference timed in the candidate's worker this much slower than in a clean one is flagged; the flag is a note
# for the reader (the lower figure counts either way), and on a busy 2-core CPU an honest candidate's gap has reached
# 1.7x, so it is no evidence of a hack on its own
SLOWED_REFERENCE = 1.25
# τ on the CPU backend (`VerifyConfig.clean_reference_tolerance`): there the clean figure is taken at another moment of
# a busy host, and capping the paired figure at it alone made the same kernel's speedup vary by a third between runs
CPU_TOLERANCE = 1.25


def summarize(xs: list[float]) -> Timing:
    """Median, mean, spread and count of timed rounds (ms)."""
    return Timing(median_ms=statistics.median(xs), mean_ms=statistics.fmean(xs),
                  stdev_ms=statistics.stdev(xs) if len(xs) > 1 else 0.0, min_ms=min(xs), max_ms=max(xs),
                  repeats=len(xs))


def ratio(reference_ms: float, candidate_ms: float) -> float:
    """Speedup: reference median over candidate median (infinite for a candidate timed at 0)."""
    return reference_ms / candidate_ms if candidate_ms > 0 else float("inf")


def timing_perturb(cfg, center_ok: bool | None) -> str | None:
    """The perturbation of every timed round's inputs (`VerifyConfig.timing_inputs`). "center" puts the timed
    rounds on zero-mean inputs, where the re-check after timing has the precision rule's power and skipped work
    misses by the order of the result, so a kernel that tells the task's own inputs (often non-negative, where
    fp16 arithmetic passes the tolerances and ReLU is the identity) from the checked ones gains nothing: the
    inputs it is timed on are checked as strictly as any. The task's own inputs where its domain forbids
    zero-mean ones (`center_ok` false: the reference was not finite on the "center" trial) or no such trial ran."""
    if cfg.timing_inputs == "task" or not cfg.perturb_inputs or not center_ok:
        return None
    return "center"


def time_candidate(ctx: RunContext) -> None:
    """Time a correct, legal candidate (skipped when `cfg.time_candidate` is off); fills the verdict's timings and
    speedups. A figure that cannot be trusted as it stands — an outlier, or one whose 95 % interval is still wider than
    the stopping rule accepts (`musacoder.judge.stopping`) — is timed again and the lower of the two speedups kept."""
    v, cfg = ctx.verdict, ctx.cfg
    if not cfg.time_candidate:
        v.stages["timing"] = "skipped"
        return
    cand, ref, interval = _time_once(ctx)
    speedup = ratio(ref.median_ms, cand.median_ms)
    width = interval[1] / interval[0] - 1 if interval[0] > 0 else float("inf")
    why = "outlier" if speedup > cfg.outlier_speedup else \
        "imprecise" if width > 2 * cfg.ratio_precision * StoppingRule.wide else None
    # the task's clean figure, unless this verification started it right after its own timing (the same moment)
    clean_ms = None if why or ctx.clean_started else _clean_figure_now(ctx)
    if why:
        cand2, ref2, interval2 = _time_once(ctx)
        s2 = ratio(ref2.median_ms, cand2.median_ms)
        v.flags.append(f"{why} speedup {speedup:.3g}x (95 % interval {interval[0]:.3g}–{interval[1]:.3g}x) "
                       f"re-timed: {s2:.3g}x; the lower is kept")
        if s2 < speedup:
            cand, ref, speedup, interval = cand2, ref2, s2, interval2
    elif clean_ms and ref.median_ms > clean_ms * retime_above(_tolerance(ctx), cfg.ratio_precision):
        # the reference ran so much slower beside the candidate than in a clean worker that the clean figure would
        # cap it: where the whole host was slow for a moment, the candidate was timed in that moment too, and the
        # cap would set a quiet moment's reference against it (on a 2-core CPU the same kernel's speedup moved from
        # 1.2x to 0.69x so). Timed again; the attempt whose reference ran nearer its clean figure is kept (the cap
        # still applies to it, `clean_reference`), so a reference slowed by the candidate's own process is capped
        # either way.
        cand2, ref2, interval2 = _time_once(ctx)
        s2 = ratio(ref2.median_ms, cand2.median_ms)
        v.flags.append(f"the reference ran {ref.median_ms / clean_ms:.2f}x its clean figure beside the candidate "
                       f"(speedup {speedup:.3g}x); re-timed: {ref2.median_ms / clean_ms:.2f}x, speedup {s2:.3g}x; "
                       "the attempt with the reference nearer its clean figure is kept")
        if ref2.median_ms < ref.median_ms:
            cand, ref, speedup, interval = cand2, ref2, s2, interval2
    v.speedup_interval = [round(interval[0], 6), round(interval[1], 6)]
    v.candidate_timing, v.reference_timing = cand, ref
    v.runtime_ms, v.ref_runtime_ms = cand.median_ms, ref.median_ms
    v.ref_runtime_ms_in_process = ref.median_ms
    v.speedup_vs_eager = speedup
    if cfg.time_compile_baseline or cfg.baseline == "compile":
        w = ctx.weights
        try:
            v.compile_runtime_ms = compile_baseline_ms(
                ctx.task, ctx.device, cfg, state=w.state, init_inputs=w.init_inputs, seed=w.seed,
                perturb=timing_perturb(cfg, ctx.center_ok), reap=ctx.lease.end_after, flush_bytes=ctx.flush_bytes,
                hold=_holds(ctx, "compile_baseline", "compile_build"), worker=lambda: rpc.reference_worker(ctx))
            v.speedup_vs_compile = v.compile_runtime_ms / cand.median_ms
        except (BaselineError, WorkerTimeout, WorkerDied, WorkerStartFailed) as e:
            v.flags.append(f"torch.compile baseline unavailable: {e}")
    v.speedup = v.speedup_vs_compile if cfg.baseline == "compile" else v.speedup_vs_eager
    v.stages["timing"] = "ok"


def _time_once(ctx: RunContext) -> tuple[Timing, Timing, tuple[float, float]]:
    """One `time` request with the device held exclusively, its rounds' evidence judged, then the re-check."""
    cfg = ctx.cfg
    master_t = ctx.timing_rng.getrandbits(62)
    perturb = timing_perturb(cfg, ctx.center_ok)
    pool = list(range(cfg.warmup, cfg.warmup + cfg.repeats + cfg.rechecks))
    audits = sorted(ctx.timing_rng.sample(pool, min(cfg.rechecks, len(pool))))
    input_sets = ctx.fp.input_sets if ctx.fp else cfg.input_sets
    ctx.timed_with = TimedInputs(master_t, input_sets, perturb)
    request = TimeRequest(
        master_seed=master_t, input_sets=input_sets, perturb=perturb, warmup=cfg.warmup, repeats=cfg.repeats,
        max_repeats=cfg.max_repeats, budget_s=cfg.time_budget_s, ratio_precision=cfg.ratio_precision, audit_rounds=audits,
        check_keep=cfg.rechecks, check_key=ctx.timing_rng.getrandbits(62),
        late_audit_from=pool[-1] + 1 if pool else cfg.warmup, late_audit_p=LATE_AUDIT_P,
        late_audit_max=cfg.rechecks, late_audit_key=ctx.timing_rng.getrandbits(62), host_hold_bytes=HOST_HOLD_BYTES,
        expect=ctx.expect, cap_repeats=cfg.cap_repeats, l2_flush_bytes=ctx.flush_bytes)
    _reserve_host(ctx)
    with ctx.stage("timing", "exclusive"):  # nothing else on the device while timing
        # the loop ends at its budget at the latest, then one more audited round: a candidate call or two past it
        limit = ctx.call_limit(extra_s=cfg.time_budget_s * 2 + cfg.call_limit_factor * ctx.ref_forward_s)
        rep = rpc.ask(ctx, request, limit, TimeReply, "timing")
    for audit in rep.audits.values():  # where the exclusive window goes besides the timed rounds
        add_harness_parts(ctx, audit.report, "timing.audit")
    add_parts(ctx, rep.parts_s, WINDOW_PARTS, "timing.window")  # and the window's wall, part by part
    _judge_rounds(ctx, rep)
    start_clean_reference(ctx)  # the task's first timed candidate: it queues among the others' timings
    # Re-check the audited rounds (secretly chosen profiled ones plus the final one) and the checked timed rounds
    # against the reference; the outputs were kept in the worker and are fetched with the device shared again.
    with ctx.stage("recheck", "shared"):
        return _recheck(ctx, master_t, perturb, rep)


def _reserve_host(ctx: RunContext) -> None:
    """On a GPU, where the timed rounds' kept outputs go to host memory (`HOST_HOLD_BYTES` or more), have the worker
    page-lock what they will take before the exclusive window (`ReserveHostRequest`): as many as the window keeps at
    once at most, the checked rounds, the fixed audited ones and the final one (late audits page-lock their own). With
    the device shared, since the window it shortens holds every other verification still. Not again where the worker
    page-locked outputs of this spec while the verification waited for device memory (`host_reserved_ahead`)."""
    cfg = ctx.cfg
    if not ctx.device.startswith("cuda") or spec_bytes(ctx.expect) < HOST_HOLD_BYTES \
            or ctx.host_reserved == ctx.expect:
        return
    _page_lock(ctx, "host_reserve", ctx.expect, _kept_copies(cfg))


def _page_lock(ctx: RunContext, stage: str, spec, copies: int) -> None:
    """The worker page-locks `copies` kept outputs like `spec` (`ReserveHostRequest`), with the device shared."""
    with ctx.stage(stage, "shared"):
        rpc.ask(ctx, ReserveHostRequest(expect=spec, copies=copies), ctx.cfg.timeout_s, ReservedReply, "timing")


def _kept_copies(cfg) -> int:
    """The kept outputs the window holds at once at most: the checked rounds, the fixed audited ones, the final one."""
    return 2 * cfg.rechecks + 1


@contextlib.contextmanager
def host_reserved_ahead(ctx: RunContext):
    """Around the wait for device memory (`pipeline._admit`), the work to do while it waits
    (`DeviceSlots.reserve`'s `while_waiting`): the worker page-locks the host memory its timing window's kept outputs
    will take (`_reserve_host`'s request, for the output spec the task's forward gives on the meta device,
    `slots.meta_output_spec`), so the page-locking (4-6 s for a 2 GiB output's five copies on an H100) is not part of
    the seconds it holds its device memory. Within `slots.HOST_AHEAD` (asked again on each wake while the budget is
    spent), given back when the block ends: admitted, the verification holds what `_reserve_host` would have
    page-locked after its trials. Nothing is done for small outputs, an untimed candidate, off a GPU, where the spec is
    unknown, or where the verification is admitted without waiting: `_reserve_host` page-locks after the trials then.
    With the device shared, as there, a copy at a time."""
    cfg, taken, specs = ctx.cfg, [], []

    def reserve() -> bool:
        if not (cfg.time_candidate and ctx.device.startswith("cuda") and ctx.fp is not None
                and ctx.fp.outputs >= HOST_HOLD_BYTES):
            return True
        if not specs:  # once, not on each wake
            specs.append(meta_output_spec(ctx.module))
        spec = specs[0]
        if spec is None or spec_bytes(spec) < HOST_HOLD_BYTES:
            return True
        need = spec_bytes(spec) * _kept_copies(cfg)
        if need > HOST_AHEAD.total:
            return True  # never fits (or page-locking ahead is off): not asked again
        if not HOST_AHEAD.take(need):
            return False  # asked again on the next wake
        taken.append(need)
        # one copy more per request, each with the device shared on its own: the worker takes back the copies it
        # page-locked before (torch's host allocator keeps them) and page-locks one fresh one, so a timing that asks
        # for the device meanwhile waits for one copy's page-locking, not all of them
        for copies in range(1, _kept_copies(cfg) + 1):
            _page_lock(ctx, "host_reserve_ahead", spec, copies)
        ctx.host_reserved = spec
        return True

    try:
        yield reserve
    finally:
        HOST_AHEAD.give(sum(taken))


def _judge_rounds(ctx: RunContext, rep: TimeReply) -> None:
    """The first of these that the timed rounds show makes the verdict illegal (a round that changed the harness's
    code or its inputs ends the timing there, before the reference runs); no timed rounds at all is `crashed`."""
    v = ctx.verdict
    for why in (memory_violations_of(ctx, rep.device_mem_peak),
                rep.patched_rounds and [
                    f"the code the harness runs in the worker was changed as the candidate's call returned in "
                    f"{len(rep.patched_rounds)} timed round(s): {', '.join(rep.patched)} (PyTorch's classes and "
                    "functions, the verifier's own and the interpreter's hooks may not be patched)"],
                rep.relaid_rounds and [
                    f"forward changed the shape, strides or storage of its inputs in {len(rep.relaid_rounds)} "
                    "timed round(s) (inputs are read-only)"],
                rep.no_launch_rounds and [
                    f"the candidate's own kernels did not run in {len(rep.no_launch_rounds)} timed round(s) "
                    "(cached or fallback results while timing)"],
                rep.device_clocks):
        if why:
            v.violations += why
            v.legal = False
            v.stages["timing"] = "failed"
            raise Stop("illegal")
    if not rep.candidate_ms or not rep.reference_ms:
        v.stages["timing"] = "error"
        v.error = "the candidate's worker returned no timed rounds"
        raise Stop("crashed")


def _recheck(ctx: RunContext, master_t: int, perturb: str | None,
             rep: TimeReply) -> tuple[Timing, Timing, tuple[float, float]]:
    """Judge the kept outputs of the audited and checked rounds, one at a time (at full sizes each can be gigabytes
    on both sides): a wrong one is `incorrect` and illegal (stale or cached results), an audited round's runtime
    violations `illegal`. Returns the candidate's and the reference's timings."""
    v, module, ref_model = ctx.verdict, ctx.module, ctx.correctness.ref_model
    rounds = sorted(list(rep.audits.items()) + list(rep.checks.items()), key=lambda rc: rc[0])
    for k, (r, audit) in enumerate(rounds or [(None, None)]):
        with ctx.stage("recheck.outputs"):
            taken = rpc.ask(ctx, TakeOutputsRequest(ipc=ctx.ipc, rounds=[] if r is None else [r], state_check=k == 0),
                            ctx.cfg.timeout_s, OutputsReply, "timing")
            outputs = rpc.received(ctx, taken.outputs)
        if k == 0 and taken.global_state:  # read once, after the last timed round, with the device shared again
            v.violations = list(dict.fromkeys(v.violations + [f"forward changed global state while timed: {c}"
                                                              for c in taken.global_state]))
            v.legal = False
            v.stages["timing"] = "failed"
            raise Stop("illegal")
        if r is None:
            break
        if not isinstance(outputs, dict):
            v.stages["timing"] = "error"
            v.error = "the candidate's worker returned the kept outputs in a malformed reply"
            raise Stop("crashed")
        with ctx.stage("recheck.reference"):
            _, ref_out, precision = reference_case(ctx, module, ref_model, seed_for(master_t, r), perturb,
                                                   fallback=False)
        with ctx.stage("recheck.compare"):
            t = judge_trial(ctx, r, ref_out, outputs.pop(r, None), audit.report, precision, "timed")
            del ref_out, precision, outputs
            give_back_cached(ctx.device, ctx.large)
        if not t.passed:
            t.message = f"re-check after timing (round {r}): {t.message}"
            v.trials.append(t)
            v.correct = False
            v.legal = False  # stale/cached outputs while timing are a hack, not a partial solution: s = -1
            v.pass_fraction = sum(x.passed for x in v.trials) / len(v.trials)
            v.stages["timing"] = "failed"
            v.violations.append("outputs produced while timing were wrong (stale or cached results)")
            raise Stop("incorrect")
        if r not in rep.audits:
            continue  # a checked timed round: output only
        bad = call_violations(ctx, audit.report, r)
        if audit.report.launches == 0:
            bad.append("none of the candidate's own kernels ran in a timed round (fallback while timing)")
        if bad:
            v.violations = list(dict.fromkeys(v.violations + bad))
            v.legal = False
            v.stages["timing"] = "failed"
            raise Stop("illegal")
    dev = [a.report.device_time_ms for a in rep.audits.values() if a.report.device_time_ms]
    if dev:
        v.candidate_device_ms = statistics.median(dev)
    v.timer_overhead_ms = rep.timer_overhead_ms
    if rep.device_mem_peak:
        v.device_mem_gb = round(rep.device_mem_peak / 2**30, 3)
    return summarize(rep.candidate_ms), summarize(rep.reference_ms), speedup_interval(rep.candidate_ms, rep.reference_ms)


def clean_reference(ctx: RunContext) -> None:
    """After the candidate's worker is gone (killed and reaped, its memory back), within the verification's
    device reservation: the eager reference timed again in a fresh reference-only worker, `cap_repeats` rounds on
    inputs drawn as the candidate's timed rounds were (the same distribution and sets; with a shared task cache, the
    first candidate's inputs, the figure then reused by every candidate of the task, and usually started right after
    that candidate's timing, `start_clean_reference`). The lower of that and the candidate's worker's figure is the
    speedup's reference, so a reference slowed by whatever the candidate left in its process (allocator, threads,
    scheduling, patched functions) earns nothing, while the interleaved figure, which cancels drift, is kept when it
    is the lower. A worker that cannot give the figure leaves the interleaved one, flagged."""
    v, cfg = ctx.verdict, ctx.cfg
    ref = v.reference_timing
    entry = _clean_entry(ctx)
    if entry is None or v.stages.get("timing") != "ok" or ref is None:
        return
    name, repeats = entry

    def measure() -> tuple[list[float], str | None]:
        """(ms, where a figure measured earlier came from: None when timed now)."""
        if earlier := _earlier_figure(ctx, name, repeats):
            return earlier
        with ctx.stage("worker_stop"):  # the candidate's worker gone, its memory back, before the device is timed
            ctx.lease.wait_gone()
        hold = _holds(ctx, "clean_reference", "clean_reference_start")
        ctx.clean_started = True
        return _time_clean(ctx, name, repeats, ctx.lease.end_after, hold, ctx.timed_with), None

    try:
        ms, earlier = ctx.cached(name, measure, wait_stage="clean_reference_reuse")
        if earlier:
            v.flags.append(earlier)
        shared = statistics.median(ms)
        if not ctx.clean_started and ref.median_ms > shared * retime_above(_tolerance(ctx), cfg.ratio_precision):
            # a figure of another moment (the task's first candidate's, or an earlier batch's) that would cap this
            # one's reference hard: the clean reference timed again now, right after this candidate's worker is gone,
            # so that a host slow for longer than the re-timing (time_candidate) is slow for both figures, while a
            # reference slowed only inside the candidate's process is still capped by a clean one
            with ctx.stage("worker_stop"):
                ctx.lease.wait_gone()
            ms = _clean_now(ctx, repeats, shared, ref.median_ms) or ms
    except (BaselineError, WorkerTimeout, WorkerDied, WorkerStartFailed) as e:
        v.flags.append(f"the reference was not re-timed in a clean worker ({str(e).splitlines()[0][:160]}); "
                       "the figure from the candidate's worker is used")
        return
    clean = summarize(ms)
    v.ref_runtime_ms_clean = clean.median_ms
    tau = _tolerance(ctx)
    cap = tau * clean.median_ms
    if ref.median_ms > clean.median_ms * SLOWED_REFERENCE:
        v.flags.append(f"the reference ran {ref.median_ms / clean.median_ms:.2f}x slower in the candidate's worker "
                       f"than in a clean one; it counts as {tau:g}x the clean figure")
    if cap < ref.median_ms:
        v.ref_runtime_ms = cap
        if tau == 1.0:
            v.reference_timing = clean
        v.speedup_vs_eager = ratio(cap, v.runtime_ms)
        if cfg.baseline == "eager":
            v.speedup = v.speedup_vs_eager


def start_clean_reference(ctx: RunContext) -> None:
    """Right after the first candidate of a task is timed (before its re-check): the task's clean reference
    (`clean_reference`) started in a thread of its own, with a device reservation of its own for the reference-only
    worker, so it queues for the device among the other candidates' timings instead of after this candidate's
    re-check and worker's end, and the task's candidates do not wait for it at their end. Only where the per-task
    cache shares it and has not started it yet, no earlier figure is there to reuse, and its memory fits now (else
    the first candidate times it at its end, as before)."""
    entry = _clean_entry(ctx)
    if entry is None or ctx.cache is None or ctx.alone:
        return
    name, repeats = entry
    if ctx.cache.started(ctx.task_key(), name) or _earlier_figure(ctx, name, repeats):
        return
    need = ctx.fp.worker if ctx.fp else WORKER_FIXED
    reservation = DEVICE_SLOTS.try_reserve(ctx.device, need if ctx.device_pool.startswith(("cuda", "musa")) else 0)
    if reservation is None:
        return
    key, cache, timed = ctx.task_key(), ctx.cache, ctx.timed_with

    def hold(slot: str):
        return contextlib.nullcontext() if slot == "start" else DEVICE_SLOTS.hold(ctx.device, slot == "exclusive")

    def run() -> None:
        workers: list[threading.Event] = []
        try:
            cache.claim(key, name, lambda: (_time_clean(ctx, name, repeats, workers.append, hold, timed), None))
        except Exception:  # noqa: BLE001 - the waiters get the error (`TaskCache.get`) and flag it
            pass
        finally:
            for gone in workers:  # the reservation lasts until the reference-only worker is gone
                gone.wait()
            reservation.close()

    threading.Thread(target=run, name="musacoder-clean-reference", daemon=True).start()
    ctx.clean_started = True


def _clean_now(ctx: RunContext, repeats: int, shared: float, beside: float) -> list[float] | None:
    """The clean reference timed again for this candidate alone, now (its worker gone), on its own timed inputs, each
    round counted at most `retime_above` times the shared figure; None (flagged) where that fails, and the shared
    figure counts."""
    cfg = ctx.cfg
    try:
        ms = _clean_ms(ctx, repeats, ctx.lease.end_after, _holds(ctx, "clean_reference", "clean_reference_start"),
                       ctx.timed_with)
    except (BaselineError, WorkerTimeout, WorkerDied, WorkerStartFailed) as e:
        ctx.verdict.flags.append(f"the clean reference was not timed again ({str(e).splitlines()[0][:160]}); the "
                                 "shared figure counts")
        return None
    # what counts is bounded: at most retime_above × the shared figure, so a host kept busy on purpose (another
    # candidate's threads) while this figure is timed relaxes the cap by that much at most
    most = shared * retime_above(_tolerance(ctx), cfg.ratio_precision)
    counted = [min(x, most) for x in ms]
    ctx.verdict.flags.append(f"the shared clean reference figure ({shared:.4g} ms) would have capped a reference "
                             f"timed at {beside:.4g} ms beside the candidate; timed again in a clean worker now: "
                             f"{statistics.median(ms):.4g} ms, which counts up to {most:.4g} ms")
    return counted


def retime_above(tau: float, precision: float) -> float:
    """How many times its clean figure the reference may run beside the candidate before the candidate is timed
    again: max(1.25, τ·(1 + 2·precision)) (`SLOWED_REFERENCE`; 1.25 on a GPU, 1.3 on the CPU backend by default)."""
    return max(SLOWED_REFERENCE, tau * (1 + 2 * precision))


def _tolerance(ctx: RunContext) -> float:
    """τ: the reference timed beside the candidate counts at most τ times its clean figure."""
    return ctx.cfg.clean_reference_tolerance or (1.0 if ctx.device.startswith(("cuda", "musa")) else CPU_TOLERANCE)


def _clean_figure_now(ctx: RunContext) -> float | None:
    """The task's clean reference median (ms) where it is known while the candidate's worker still runs: measured
    earlier (`_earlier_figure`), kept in the per-task cache, or being timed for the task's first candidate (then
    waited for: that candidate would wait for it at its end anyway). None otherwise (the candidate that times it
    itself, at its end)."""
    entry = _clean_entry(ctx)
    if entry is None:
        return None
    name, repeats = entry
    if earlier := _earlier_figure(ctx, name, repeats):
        ms = earlier[0]
    elif ctx.cache is not None and ctx.cache_key is not None:
        with ctx.stage("clean_reference_reuse"):
            got = ctx.cache.peek(ctx.cache_key, name, wait=True)
        if got is None:
            return None
        ms = got[0]
    else:
        return None
    return statistics.median(ms) if ms else None


def _clean_entry(ctx: RunContext) -> tuple[tuple, int] | None:
    """(the clean reference's entry in the per-task cache, its timed rounds), None where it is not timed."""
    cfg, timed = ctx.cfg, ctx.timed_with
    if not cfg.clean_reference or timed is None:
        return None
    repeats = max(cfg.repeats, cfg.cap_repeats)
    name = ("clean_reference", ctx.device, timed.input_sets, timed.perturb, cfg.warmup, repeats, ctx.flush_bytes)
    return name, repeats


def _earlier_figure(ctx: RunContext, name: tuple, repeats: int) -> tuple[list[float], str] | None:
    """A clean reference figure measured before for this task key: by this process in an earlier batch
    (`clean_reference_reuse_s`, where the task cache shares reference work) or stored by an earlier run (opted in:
    `stored_reference_max_age_s`), with the flag that says so. Looked up once per verification (a stored figure is
    a file read): while its worker runs (`_clean_figure_now`) and at its end (`clean_reference`) it is the same."""
    memo = ctx.earlier_figures
    if (name, repeats) not in memo:
        memo[(name, repeats)] = _look_up_earlier(ctx, name, repeats)
    return memo[(name, repeats)]


def _look_up_earlier(ctx: RunContext, name: tuple, repeats: int) -> tuple[list[float], str] | None:
    cfg, key = ctx.cfg, ctx.task_key().digest(*name)
    recent = cfg.clean_reference_reuse_s if ctx.cache is not None else 0
    if recent and (got := recent_figure(key, repeats, recent)):
        return got[0], (f"the clean reference's timing was reused from an earlier batch {got[1]:.0f} s ago "
                        "(clean_reference_reuse_s)")
    stored = cfg.stored_reference_max_age_s
    if stored and (got := stored_figure(cfg.cache_dir, key, repeats, stored)):
        return got[0], (f"the clean reference's timing was reused from a run {got[1] / 60:.0f} min ago "
                        "(stored_reference_max_age_s)")
    return None


def _clean_ms(ctx: RunContext, repeats: int, reap, hold, timed: TimedInputs) -> list[float]:
    """The clean reference timed now in a reference-only worker (`baseline.clean_reference_ms`) on inputs drawn as
    `timed` drew them."""
    cfg, w = ctx.cfg, ctx.weights
    return clean_reference_ms(
        ctx.task, ctx.device, cfg, state=w.state, init_inputs=w.init_inputs, seed=w.seed,
        master_seed=timed.master_seed, input_sets=timed.input_sets, warmup=cfg.warmup, repeats=repeats,
        perturb=timed.perturb, reap=reap, flush_bytes=ctx.flush_bytes, hold=hold,
        worker=lambda: rpc.reference_worker(ctx))


def _time_clean(ctx: RunContext, name: tuple, repeats: int, reap, hold, timed: TimedInputs) -> list[float]:
    """`_clean_ms`, kept for later batches of this process and, opted in, stored for later runs."""
    cfg = ctx.cfg
    ms = _clean_ms(ctx, repeats, reap, hold, timed)
    key = ctx.task_key().digest(*name)
    remember_figure(key, ms)
    if cfg.stored_reference_max_age_s:
        store_figure(cfg.cache_dir, key, ms, {"task": ctx.task.key, "entry": list(name)})
    return ms


def _holds(ctx: RunContext, timed: str, shared: str):
    """The stages of a reference-only worker (`baseline`'s `hold`): its start (`<timed>_worker`, no device slot),
    what runs with the device shared (`shared`), the timing with it held alone (`timed`)."""
    def hold(slot: str):
        if slot == "start":
            return ctx.stage(f"{timed}_worker")
        return ctx.stage(timed if slot == "exclusive" else shared, slot)

    return hold
