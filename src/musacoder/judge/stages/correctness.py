"""Stage 4, correctness: the reference model and its weights made here from the secret master seed, one profiled
trial of the candidate per input distribution (the task's own, log-normally rescaled, and the structured zero-mean
ones, in a secret order), each output compared with the reference's under the tolerances and the precision rule
(`musacoder.judge.compare`); then, for a correct and legal candidate, the extra shapes in fresh workers.

The worker makes the same inputs from the same seed; it never sees a reference output.
"""

from __future__ import annotations

import contextlib
import copy
import dataclasses
import threading
import time
from concurrent.futures import Future, wait

import torch

from musacoder.judge.compare import (Precision, Yardstick, compare_outputs, float_leaves, max_abs_error, ref64_delta,
                                     ref64_from_delta, rel_error, round_mantissa, round_mantissa_, task_audit)
from musacoder.judge.inputs import (HostTensor, make_init_inputs, make_inputs, nbytes, output_spec, seed_for, seeded,
                                    to_cpu, to_device, to_host)
from musacoder.judge.messages import HARNESS_PARTS, CallReport, InitReply, InitRequest, TrialReply, TrialRequest
from musacoder.judge.sandbox import Sandbox
from musacoder.judge.slots import give_back_cached, is_oom
from musacoder.judge.stages import rpc
from musacoder.judge.stages.build import load_candidate
from musacoder.judge.stages.context import Correctness, ReferenceWeights, RunContext, Stop, task_with_overrides
from musacoder.judge.stages.runtime import call_violations, memory_violations_of
from musacoder.records import TrialResult
from musacoder.tasks import load_module


def run_trials(ctx: RunContext) -> Correctness:
    """The main trials (`cfg.trials` plus the structured ones) with the device shared; fills the verdict's trials,
    pass fraction and correctness. Runtime legality is judged next, before an incorrect verdict is given."""
    v = ctx.verdict
    got = trials(ctx, ctx.sandbox, ctx.module, trial_plan(ctx), 0)  # the device held shared trial by trial
    v.trials = got.trials
    passed = sum(t.passed for t in got.trials)
    v.pass_fraction = passed / len(got.trials)
    v.systematic_defect = first_defect(got.trials)
    v.correct = passed == len(got.trials)
    v.stages["correctness"] = "ok" if v.correct else "failed"
    return got


def require_correct(ctx: RunContext) -> None:
    """`Stop("incorrect")` when a trial failed (with notes on how the state dicts lined up)."""
    v = ctx.verdict
    if not v.correct:
        v.flags += [f"state dict: {n}" for n in ctx.correctness.notes[:5]]
        raise Stop("incorrect")


def trial_plan(ctx: RunContext) -> list[str | None]:
    """The input distribution of each correctness trial (see `musacoder.judge.inputs`): the task's own, every other
    one rescaled log-normally, plus the structured ones (zero-mean, and zero-mean with one offset slice), in a secret
    order."""
    cfg = ctx.cfg
    plan = ["scale" if cfg.perturb_inputs and i % 2 == 1 else None for i in range(cfg.trials)]
    plan += ["center", "slice"][:cfg.structured_trials] if cfg.perturb_inputs else []
    ctx.rng.shuffle(plan)
    return plan


def trials(ctx: RunContext, sb: Sandbox, module, plan: list[str | None], label: int) -> Correctness:
    """Reference weights and one profiled trial per entry of `plan` in `sb` (`label` 0: the main trials, which also
    set the memory budget and the timing's output spec; k: the k-th extra shape). The device is held shared
    (stage `correctness`, its waits `correctness_wait`) as `per_trial_holds` says."""
    def hold():
        return ctx.stage("correctness", "shared")

    if per_trial_holds(ctx.device):
        return _trials_held(ctx, sb, module, plan, label, hold)
    with hold():
        return _trials_held(ctx, sb, module, plan, label, contextlib.nullcontext)


def per_trial_holds(device: str) -> bool:
    """Whether correctness holds its device for each part on its own (the models' making, then each trial) rather
    than for the whole stage. On a GPU it does: a timing that waits for the device then waits for one trial, not a
    whole stage of seven (a full-size convolution's, with its float64 references, is 10-13 s: GEMM verifications
    beside it waited 10-14 s to be timed, holding their memory, docs/benchmarks.md). On the CPU backend the host's
    cores are the device, and a worker's own work right after a trial's reply would run beside another verification's
    timing: on 2 cores, held trial by trial, the same-8 speedup spread went from 7.4 % to 10.0 % (medians of 14
    rounds each, alternated), above the 15 % bar in 2 rounds of 14 against none, so the whole stage holds it there."""
    return device != "cpu"


def _trials_held(ctx: RunContext, sb: Sandbox, module, plan: list[str | None], label: int, part) -> Correctness:
    """`trials`, each part (the models' making, then each trial) inside `part()`."""
    cfg, device = ctx.cfg, ctx.device
    init_seed = seed_for(ctx.master_seed, 0, label)
    with part():
        with ctx.stage("correctness.weights"):
            init_inputs, build, state = reference_model(ctx, module, init_seed, shared=label == 0)
            if label == 0:
                ctx.weights = ReferenceWeights(state, init_inputs, init_seed)
        # the reference on the device and its precision yardsticks are made here while the worker makes its models
        models = _in_background(lambda: _device_models(ctx, build), device)
        try:
            with ctx.stage("correctness.init"):
                init = rpc.ask(ctx, InitRequest(init_inputs=init_inputs, state_dict=state, seed=init_seed,
                                                device=device, release_memory=ctx.large),
                               cfg.timeout_s, InitReply, "correctness", sb)
        except BaseException:
            wait([models])  # its device memory is given back with the attempt's; its own error, if any, is not this one
            raise
        with ctx.stage("correctness.weights"):  # what of it the worker's init did not hide
            ref_model, ctx.precision_models = models.result()
    got = Correctness(ref_model, [], notes=list(init.notes))
    weight_bytes = nbytes(list(state.values()))
    for i, asked in enumerate(plan):
        with part():
            _trial(ctx, sb, module, got, i, asked, label, len(plan), weight_bytes, init.device_mem_peak)
    return got


def _trial(ctx: RunContext, sb: Sandbox, module, got: Correctness, i: int, asked: str | None, label: int, n: int,
           weight_bytes: int, init_peak) -> None:
    """Trial `i` of `n` (`trials`): its reference case, the candidate's call, the comparison, added to `got`."""
    v = ctx.verdict
    seed = seed_for(ctx.master_seed, 1 + label, i)
    with ctx.stage("correctness.reference"):
        perturb, ref_out, precision = shared_reference_case(ctx, module, got.ref_model, seed, asked, label)
    if asked == "center" and label == 0:
        ctx.center_ok = perturb == "center"
    expect = output_spec(ref_out)
    if i == 0 and label == 0:  # the task's own footprint: the memory budget and the call limits
        ctx.task_bytes = weight_bytes + nbytes(ref_out) + _input_bytes(ctx, module, seed, ref_out)
    with ctx.stage("correctness.calls"):
        reply = rpc.ask(ctx, TrialRequest(seed=seed, perturb=perturb, profile=True, ipc=ctx.ipc, expect=expect,
                                          dispatcher_check=i in (0, n - 1)),
                        ctx.call_limit(first=i == 0), TrialReply, "correctness", sb)
        outputs = rpc.received(ctx, reply.outputs, sb)
    if i == 0 and label == 0:
        ctx.expect = expect  # the timing rounds' outputs are held to it too (`output_problem`)
        got.illegal += memory_violations_of(ctx, init_peak)
        v.flags += task_audit(ref_out)
    add_harness_parts(ctx, reply.report)
    got.illegal += call_violations(ctx, reply.report, i)
    got.launches += reply.report.launches
    kind = "shape" if label else (perturb or "task")
    with ctx.stage("correctness.compare"):
        got.trials.append(judge_trial(ctx, i, ref_out, outputs, reply.report, precision, kind))
        del outputs, ref_out, precision
        give_back_cached(ctx.device, ctx.large)


def _in_background(fn, device: str) -> Future:
    """`fn()` in a thread of its own, on the calling thread's current CUDA stream of `device` (the verification's)."""
    done: Future = Future()
    cuda = device.startswith("cuda") and torch.cuda.is_available() and torch.cuda.is_initialized()
    stream = torch.cuda.current_stream(torch.device(device)) if cuda else None

    def run() -> None:
        try:
            with torch.cuda.stream(stream) if stream is not None else contextlib.nullcontext():
                done.set_result(fn())
        except BaseException as e:  # noqa: BLE001 - handed to the caller by `result()`
            done.set_exception(e)

    threading.Thread(target=run, name="musacoder-reference-models", daemon=True).start()
    return done


def _device_models(ctx: RunContext, build):
    """(the reference model on the verification's device, its precision yardstick models)."""
    ref_model = build()
    return ref_model, precision_models(ctx, ref_model)


def reference_model(ctx: RunContext, module, init_seed: int, shared: bool):
    """(init inputs, a function that makes the reference model on the verification's device, its weights on the
    host), made from `init_seed` on the host, where the seeded initialisation is the same on every device. With
    `shared` and a task cache, the task's candidates share one pristine host copy (the master seed, so the weights,
    are the task's): each gets a deep copy of it, not a fresh initialisation (a large model's is seconds of host time
    per candidate, many initialising at once: docs/benchmarks.md). A model that cannot be deep-copied is made afresh
    each time."""
    def make():
        init_inputs = make_init_inputs(module, init_seed)
        with seeded(init_seed):
            model = module.Model(*init_inputs)
        # a copy, not the host model's own tensors: the model's forwards (batch-norm statistics) must not reach it
        return init_inputs, model, {k: t.detach().to("cpu", copy=True) for k, t in model.state_dict().items()}

    if not shared or ctx.cache is None:
        init_inputs, model, state = make()
        return init_inputs, lambda: model.to(ctx.device), state
    own: list = []

    def compute():
        init_inputs, model, state = make()
        own.append(model)
        try:
            pristine = copy.deepcopy(model)  # never run: the task's later candidates copy it
        except Exception:  # noqa: BLE001 - a model that cannot be deep-copied is made afresh by each
            pristine = None
        return init_inputs, pristine, state

    init_inputs, pristine, state = ctx.cached(("reference_model", init_seed), compute,
                                              lambda got: 2 * nbytes(list(got[2].values())))
    if own:
        return copy.deepcopy(init_inputs), lambda: own[0].to(ctx.device), state
    if pristine is not None:
        return copy.deepcopy(init_inputs), lambda: copy.deepcopy(pristine).to(ctx.device), state
    init_inputs, model, state = make()
    return init_inputs, lambda: model.to(ctx.device), state


def add_harness_parts(ctx: RunContext, report: CallReport, prefix: str = "trial") -> None:
    """The worker's own seconds for the parts of a trial (or of a timing round it audited), added up in `stage_s` as
    `<prefix>.<part>` (where a call's time goes inside the worker; a diagnostic the candidate's process writes, so
    only the known parts, as finite seconds within the stage's own length, and never judged)."""
    add_parts(ctx, report.harness_s, HARNESS_PARTS, prefix)


def add_parts(ctx: RunContext, seconds: dict, parts: tuple[str, ...], prefix: str) -> None:
    """Add the worker's reported `seconds` of the known `parts` to `stage_s` as `<prefix>.<part>`, each only as finite
    seconds within a stage's limit (the candidate's process writes them; diagnostics, never judged)."""
    stage_s = ctx.verdict.stage_s
    for part in parts:
        x = seconds.get(part)
        if isinstance(x, (int, float)) and 0.0 <= x <= ctx.cfg.timeout_s:
            stage_s[f"{prefix}.{part}"] = round(stage_s.get(f"{prefix}.{part}", 0.0) + float(x), 4)


def _input_bytes(ctx: RunContext, module, seed: int, ref_out) -> int:
    """Bytes of the task's inputs for `seed`: the footprint's figure on a GPU; on the CPU the inputs themselves, made
    again (the reference case of this trial made the same ones, so this adds a fraction of what the trials cost, and
    no meta tensor, whose first use imports PyTorch's symbolic-shape machinery, slower than a small task's trials);
    elsewhere on the meta device. Four times the output where they cannot be made."""
    if ctx.fp is not None:
        return ctx.fp.inputs
    try:
        return nbytes(make_inputs(module, seed, device="cpu" if str(ctx.device) == "cpu" else "meta"))
    except Exception:  # noqa: BLE001 - an op meta does not implement
        return 4 * nbytes(ref_out)


def precision_models(ctx: RunContext, ref_model):
    """The reference in float64, and in fp32 with every floating weight rounded to a 10-bit mantissa: the
    precision rule's yardsticks (`musacoder.judge.compare`). None (with a flag) where the model cannot be copied or
    converted."""
    try:
        model64 = copy.deepcopy(ref_model).double()
        low = copy.deepcopy(ref_model)
        with torch.no_grad():
            for t in list(low.parameters()) + list(low.buffers()):
                if t.dtype == torch.float32:
                    t.copy_(round_mantissa(t))
        return model64, low
    except Exception as e:  # noqa: BLE001 - models that cannot be deep-copied or converted
        if is_oom(e):
            raise
        ctx.verdict.flags.append(
            f"precision rule not applied: the reference model could not be copied to float64 ({e})")
        return None


# A kept case goes to the host once, into fresh memory (1.5-2.8 GiB/s on an H100, docs/benchmarks.md *The host
# link*), and comes back to the GPU from page-locked memory for each later candidate of its task (51 GiB/s). Shared
# over a GRPO group's seven later candidates that is about 11 GiB/s a candidate; a case the GPU computes again faster
# than at this rate is not kept (`worth_keeping`).
HOST_LINK_BYTES_S = 8 * 2**30
RECOMPUTE = "recompute"  # the task cache's entry for a case each candidate computes itself


def worth_keeping(compute_s: float, case_bytes: int, over_host_link: bool) -> bool:
    """Whether a reference case is kept in the task cache for the task's later candidates: always where it is
    compared on the host (the CPU backend: no copy back), else where computing it took longer than its `case_bytes`
    take over the host link, `case_bytes / HOST_LINK_BYTES_S`. At full size a 6.4 GB elementwise output's case is
    13 GiB (1.6 s at that rate; 8.7 s to the host once, measured) while the GPU computes it in 0.35 s; a
    convolution's takes seconds for a 4 GiB case."""
    return not over_host_link or compute_s > case_bytes / HOST_LINK_BYTES_S


def shared_reference_case(ctx: RunContext, module, ref_model, seed: int, perturb: str | None, label: int):
    """`reference_case` for a main trial, from the task's shared cache where the verification has one: the outputs
    and yardsticks kept on the host (page-locked where they are compared on a GPU: in the 16 x 8 load each later
    candidate of a convolution spent 16-17 s getting its seven kept cases back from pageable memory, of which the idle
    link accounts for 3.5 s; the trusted process's other copies ran beside them), and copied to the comparison device
    for each candidate that reuses them. The
    float64 references are kept as their float32 differences from the fp32 outputs (`compare.ref64_delta`: a case
    is 2·O bytes instead of 3·O, so a full-size convolution's seven cases fit a cache they overflowed). The
    candidate that computes an entry compares against its own originals (no round trip through the host). Extra
    shapes are not shared, nor are cases too large for the cache's budget: they would cross to the host and back
    for nothing (a 6.4 GB output and its float64 difference are 13 GB each way, seconds a trial), nor cases the GPU
    computes faster than they would come back (`worth_keeping`): the cache then keeps `RECOMPUTE` for the case, and
    each later candidate computes its own."""
    if ctx.cache is None or label != 0 or not _fits_cache(ctx):
        return reference_case(ctx, module, ref_model, seed, perturb)
    mine: list = []
    over = ctx.compare_device != "cpu"  # compared on a GPU: kept page-locked, for the way back (`to_host`)

    def compute():
        t0 = time.perf_counter()  # the case's forwards and yardsticks end in synchronising reads
        kept, out, precision = reference_case(ctx, module, ref_model, seed, perturb)
        mine.append((kept, out, precision))
        case_bytes = nbytes(out) * (2 if precision is not None and precision.leaves else 1)
        if not worth_keeping(time.perf_counter() - t0, case_bytes, over):
            return RECOMPUTE
        host_out = to_host(out, pinned=True) if over else to_cpu(out)
        return kept, host_out, _kept_yardsticks(precision, out, over), ctx.ref_forward_s

    def size(value) -> int:
        if value is RECOMPUTE:
            return 0
        _, out, precision, _ = value
        return nbytes(out) + (sum(nbytes(y.ref64) for y in precision.leaves.values()) if precision else 0)

    got = ctx.cached(("reference_case", ctx.device, seed, perturb), compute, size)
    if mine:  # computed here: the device originals are this verification's alone
        return mine[0]
    if got is RECOMPUTE:
        return reference_case(ctx, module, ref_model, seed, perturb)
    kept, out, precision, ref_s = got
    ctx.ref_forward_s = max(ctx.ref_forward_s, ref_s)
    cmp = ctx.compare_device  # each verification gets copies: the kept ones are shared with the task's others
    out = to_device(out, cmp)
    return kept, out, _yardsticks_back(precision, out, cmp)


def _fits_cache(ctx: RunContext) -> bool:
    """Whether a trial's reference case can be kept in the task cache: its estimated bytes (the output, and its
    float64 reference's float32 difference from it, `_kept_yardsticks`) within the cache's budget. Unknown off a GPU
    (no footprint), where tasks are small and the budget decides after the fact."""
    if ctx.fp is None or ctx.cache is None:
        return True
    return 2 * ctx.fp.outputs <= ctx.cache.budget_bytes


def _kept_yardsticks(precision: Precision | None, out, pinned: bool = False) -> Precision | None:
    """The yardsticks as the task cache keeps them, on the host (page-locked chunks with `pinned`, `to_host`): each
    leaf's float64 reference as its float32 difference from the fp32 output leaf `out` holds at the same path
    (`compare.ref64_delta`), or the float64 tensor itself where the difference cannot stand for it. The dtype tells
    which (`_yardsticks_back`)."""
    if precision is None:
        return None
    outs = dict(float_leaves(out))
    kept = Precision()
    for path, y in precision.leaves.items():
        r32 = outs.get(path)
        # on a GPU the difference goes straight into page-locked chunks, not through a pageable copy first
        into = HostTensor.empty(tuple(y.ref64.shape), torch.float32, pinned=True) if pinned and r32 is not None \
            else None
        d = ref64_delta(r32, y.ref64, into) if r32 is not None else None
        if d is None:
            d = to_host(y.ref64, pinned=True) if pinned else to_cpu(y.ref64)
        kept.leaves[path] = dataclasses.replace(y, ref64=d)
    return kept


def _yardsticks_back(kept: Precision | None, out, device: str) -> Precision | None:
    """The kept yardsticks (`_kept_yardsticks`) on `device`, each float64 reference whole again: from its float32
    difference and the output leaf of `out` (already on `device`), or copied as it was kept."""
    if kept is None:
        return None
    outs = dict(float_leaves(out))
    back = Precision()
    for path, y in kept.leaves.items():
        ref64 = (ref64_from_delta(outs[path], to_device(y.ref64, device), device) if y.ref64.dtype == torch.float32
                 else to_device(y.ref64, device))
        back.leaves[path] = dataclasses.replace(y, ref64=ref64)
    return back


def reference_case(ctx: RunContext, module, ref_model, seed: int, perturb: str | None, fallback: bool = True):
    """Reference output for the inputs made from `seed` and `perturb` (the worker makes the same inputs);
    returns (the perturbation kept: None when the task's domain forbids it, the output on the comparison
    device, the precision rule's yardsticks or None). With `fallback` False the perturbation is kept whatever
    the output (the worker made its inputs already: a timed round's)."""
    device = ctx.device
    with torch.no_grad():
        xs = make_inputs(module, seed, perturb=perturb, device=device)
        ref_out = _timed_forward(ctx, ref_model, xs)
        if fallback and perturb and not _all_finite(ref_out):
            perturb = None  # the task's domain forbids the perturbation
            ref_out = _timed_forward(ctx, ref_model, make_inputs(module, seed, device=device))
        del xs
    precision = _yardsticks(ctx, module, seed, perturb, ref_out)
    # the yardsticks' temporaries, gigabytes at full size, go back before the worker runs
    give_back_cached(ctx.device, ctx.large)
    return perturb, ref_out if ctx.compare_device != "cpu" else to_cpu(ref_out), precision


def _timed_forward(ctx: RunContext, ref_model, xs):
    """The reference's output on `xs`, its wall time (synchronised on a GPU) kept as the slowest seen
    (`RunContext.ref_forward_s`, which sets the candidate's call limits)."""
    t0 = time.perf_counter()
    out = ref_model(*xs)
    if ctx.device.startswith("cuda") and torch.cuda.is_available():
        torch.cuda.current_stream(ctx.device).synchronize()
    ctx.ref_forward_s = max(ctx.ref_forward_s, time.perf_counter() - t0)
    return out


def _yardsticks(ctx: RunContext, module, seed: int, perturb: str | None, ref_out) -> Precision | None:
    """e_t and e_low per fp32 output leaf (the precision rule in `musacoder.judge.compare`)."""
    leaves = [(p, t) for p, t in float_leaves(ref_out) if t.dtype == torch.float32]
    if not leaves or ctx.precision_models is None:
        return None
    model64, low = ctx.precision_models
    cmp, device = ctx.compare_device, ctx.device
    try:
        with torch.no_grad():  # inputs converted one at a time and rounded in place: no copies of their size
            xs = make_inputs(module, seed, perturb=perturb, device=device)
            for k in range(len(xs)):
                if _is_f32(xs[k]):
                    xs[k] = xs[k].double()
            out64 = model64(*xs)
            del xs
            ref64 = dict(float_leaves(out64))
            del out64
            xs = [round_mantissa_(x) if _is_f32(x) else x
                  for x in make_inputs(module, seed, perturb=perturb, device=device)]
            out_low = low(*xs)
            del xs
            low_leaves = dict(float_leaves(out_low))
            del out_low
    except Exception as e:  # noqa: BLE001 - ops without float64 kernels, float32 constants inside forward, …
        if is_oom(e):
            raise
        ctx.precision_models = None
        ctx.verdict.flags.append(f"precision rule not applied: the reference does not run in float64 "
                                 f"({type(e).__name__}: {str(e).splitlines()[0][:160]})")
        return None
    out = Precision()
    for path, r32 in leaves:
        r64, rl = ref64.get(path), low_leaves.get(path)
        if r64 is None or rl is None or r64.shape != r32.shape or rl.shape != r32.shape:
            continue
        out.leaves[path] = Yardstick(r64 if cmp != "cpu" else r64.cpu(), rel_error(r32, r64, cmp),
                                     rel_error(rl, r64, cmp), max_abs_error(r32, r64, cmp),
                                     max_abs_error(rl, r64, cmp))
    return out


def judge_trial(ctx: RunContext, i: int, ref_out, cand_out, rep: CallReport,
                precision: Precision | None = None, kind: str | None = None) -> TrialResult:
    """One trial's result: the worker's own findings on the output's type and the inputs first, then the comparison;
    a failure the trial was built to expose names its systematic defect (`systematic_defect`)."""
    if rep.output_type_error:
        return TrialResult(trial=i, passed=False, message=rep.output_type_error, kind=kind)
    if rep.input_mutation:  # found bit for bit against a fresh copy: never noise
        return TrialResult(trial=i, passed=False, message=rep.input_mutation, kind=kind, systematic=INPUT_MUTATION)
    c = compare_outputs(ref_out, cand_out, ctx.cfg.rel_l2_tol, device=ctx.compare_device, precision=precision)
    t = TrialResult(trial=i, passed=c.passed, max_abs_error=c.max_abs_error, rel_l2_error=c.rel_l2_error,
                    precision_error=c.precision_error, precision_bound=c.precision_bound, message=c.message,
                    kind=kind)
    if not t.passed:
        t.systematic = systematic_defect(t, precision)
    return t


def first_defect(trials: list[TrialResult]) -> str | None:
    """The systematic defect to report: the precision witness's first (the most specific), else the first other."""
    found = [t.systematic for t in trials if not t.passed and t.systematic]
    return next((d for d in found if d.startswith("reduced precision")), found[0] if found else None)


# what a failed trial of each decisive kind shows (the structured trials of `musacoder.judge.inputs`, an extra size)
DECISIVE_KINDS = {
    "center": "wrong on zero-mean inputs, where cancellation exposes skipped work and reduced-precision arithmetic",
    "slice": "wrong when one slice of the input is offset: the output does not depend on all of the input "
             "(skipped or partial work)",
    "shape": "wrong at another size of the task: shapes or sizes hard-coded",
}


# a trial whose inputs were found changed by the call: the check compares them bit for bit with a fresh copy, so the
# trials where it passed are ones where the write changed nothing (an in-place ReLU on a task's non-negative inputs),
# luck of the draw like a decisive trial's, not partial correctness
INPUT_MUTATION = "writes into its inputs (inputs must be left unchanged): allocate the output"


def systematic_defect(t: TrialResult, precision: Precision | None) -> str | None:
    """The defect a failed trial exposes when it was built to expose one (docs/reward.md): the precision witness (an
    error against the float64 reference beyond the precision rule's bound, in any trial), or a failure on a
    structured or extra-size trial. None for a failure of an ordinary random trial (a race, a data-dependent bug),
    which keeps the paper's partial credit."""
    if t.precision_error is not None and t.precision_bound and t.precision_error > t.precision_bound:
        torch_err = max((y.torch_error for y in precision.leaves.values()), default=0.0) if precision else 0.0
        times = f", {t.precision_error / torch_err:.0f}x fp32 torch's ({torch_err:.2g})" if torch_err > 0 else ""
        return (f"reduced precision: error against a float64 reference {t.precision_error:.3g}{times}, beyond the "
                f"bound {t.precision_bound:.3g}; compute in the task's precision (no fp16/bf16/TF32 operands)")
    return DECISIVE_KINDS.get(t.kind or "")


def extra_shapes(ctx: RunContext) -> None:
    """Re-run the candidate at each of `cfg.extra_shapes` (size overrides) in a fresh worker, 2 trials each; a
    candidate that hard-codes its shapes fails here (`incorrect`), one that runs no kernel of its own there is
    `illegal`."""
    v = ctx.verdict
    for k, shape in enumerate(ctx.cfg.extra_shapes, start=1):
        task = task_with_overrides(ctx.task, shape)
        module = load_module(task)
        with rpc.open_worker(ctx, ctx.device) as sb:
            main_ipc, ctx.ipc = ctx.ipc, False  # this worker was not probed: its outputs use the pipe
            try:
                load_candidate(ctx, sb, task)
                got = trials(ctx, sb, module, [None, "center"], 100 * k)
            except Stop:
                v.error = f"at extra shape {shape}: {v.error}"
                raise
            finally:
                ctx.ipc = main_ipc
        if got.illegal or got.launches == 0:
            v.violations = list(dict.fromkeys(got.illegal or ["no kernel of the candidate ran"]))
            v.legal = False
            v.stages["runtime_legality"] = "failed"
            raise Stop("illegal")
        failed = [t for t in got.trials if not t.passed]
        if failed:
            for t in failed:
                t.message = f"at extra shape {shape}: {t.message}"
            v.trials += got.trials
            v.correct = False
            v.pass_fraction = sum(t.passed for t in v.trials) / len(v.trials)
            v.systematic_defect = first_defect(failed)
            v.stages["correctness"] = "failed"
            raise Stop("incorrect")


def _is_f32(x) -> bool:
    return isinstance(x, torch.Tensor) and x.dtype == torch.float32


def _all_finite(obj) -> bool:
    if isinstance(obj, torch.Tensor):
        return not obj.is_floating_point() or bool(torch.isfinite(obj).all())
    if isinstance(obj, (list, tuple)):
        return all(_all_finite(x) for x in obj)
    return True
