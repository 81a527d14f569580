"""The batch pool and memory admission on a modelled GPU, no GPU needed: what the footprint estimates cost a batch.

    python benchmarks/admission_sim.py --kernelbench-dir ../shared/kernelbench --only 'level2/*' --tasks 16 \
        --copies 8 --workers 16 --estimate 2,1,4,4 --estimate now --peak 'level2/4_*=8.9' --json sim.json

Each job stands for one verification and goes through the real scheduler (`musacoder.judge.batch.bounded`,
`musacoder.judge.slots.DeviceSlots`): it is pinned, spends `--start-s` starting and building outside admission,
reserves its task's estimated footprint (`slots.footprint` from the task file on the meta device) on a device of
`--gpu-gib` GiB (85 % usable, as admission counts it), then holds it for a modelled run time,
`--run-s` + `--per-gib-s` × the task's inputs and outputs in GiB, and lets it go. Times are scaled by `--scale` so
a round takes seconds. Each `--estimate` is one row: `now` (the verifier's estimator: the constants in
`musacoder.judge.slots`, the float64 forward's temporaries traced on meta tensors and, with `--peak`, the worker's
side learned from the task's earlier verifications) or `WORKER_FIXED,TRUSTED_FIXED,SLACK,TRUSTED_SLACK` (GiB, GiB,
factors: the static estimator, nothing traced or learned). Only the schedule is real here: the run times are a model,
so the figures are predictions to set beside a GPU run (`benchmarks/rl_load.py`), not measurements. What bounds such
a batch is the sum over its verifications of footprint × admitted time against the GPU's usable memory.

With `--times ROWS` (an `rl_load.py` run's `.rows.jsonl`, its first round) each job replays the seconds one of the
task's measured verifications spent before admission (static checks, footprint, worker start, build, binary rule:
the pool place held, no memory) and after it (`wall_s` less those and the admission wait), the task's slowest start
given to its first job; and the jobs run in the order a batch gives them (`batch.by_task`, each task's first job
started ahead). That replays a measured load under another order or rule, rather than the 6 s + 4 s/GiB model. It
then prints the measured run's reservations × admitted seconds and the bound they set, as reserved and with the
trusted side's trial part held only in the trials and re-checks (`reservation_seconds`).
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import json
import os
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from rl_load import task_pairs  # noqa: E402


def load_footprints(kb: Path, cands: Path, only: list[str], n_tasks: int) -> list[tuple[str, object]]:
    from musacoder.judge.slots import footprint

    out = []
    for tid, task_path, _ in task_pairs(kb, cands, only, n_tasks):
        spec = importlib.util.spec_from_file_location(f"task_{len(out)}", task_path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        fp = footprint(module)
        if fp is None:
            print(f"skipped {tid}: its footprint cannot be estimated on meta tensors", file=sys.stderr)
            continue
        out.append((tid, fp))
    return out


# the stages a verification passes before it asks for device memory (`pipeline._attempt`): what `--times` replays
# outside admission
BEFORE_ADMISSION = ("static", "task_key", "reference_load", "footprint", "worker_start", "ipc_probe", "build",
                    "build_wait", "binary_legality", "load")


def before_and_admitted(row: dict, ahead: bool = False) -> tuple[float, float]:
    """One measured verification's seconds before admission (`BEFORE_ADMISSION`) and admitted: its wall less those
    and its admission wait. With `ahead`, its `host_reserve` (the page-locking of its kept outputs, measured after its
    trials) counts before admission, as `stages.timing.host_reserved_ahead` does it for a verification that waits:
    a replay of the code before that change under it."""
    st = row.get("stage_s") or {}
    before = sum(float(st.get(k, 0.0)) for k in BEFORE_ADMISSION)
    moved = float(st.get("host_reserve", 0.0)) + float(st.get("host_reserve_wait", 0.0)) if ahead else 0.0
    admitted = max(0.0, float(row["wall_s"]) - before - float(st.get("admission_wait", 0.0)))
    return before + min(moved, admitted), max(0.0, admitted - moved)


def measured_times(rows_path: Path, ahead: bool = False) -> dict[str, list[tuple[float, float]]]:
    """Per task id: (seconds before admission, seconds admitted) of each verification of the run's first round, the
    largest start first (the task's first job pays its build and reference work); `ahead`: `before_and_admitted`'s."""
    out: dict[str, list[tuple[float, float]]] = {}
    for line in rows_path.read_text().splitlines():
        if not line.strip():
            continue
        r = json.loads(line)
        if r.get("round", 1) != 1 or r.get("wall_s") is None:
            continue
        out.setdefault(r["id"].split("#")[0], []).append(before_and_admitted(r, ahead))
    for times in out.values():
        times.sort(key=lambda t: -t[0])
    return out


# the stages in which the trusted side holds a trial's reference case, the candidate's outputs and their comparison
# on the device: the correctness trials and the re-check rounds
TRIAL_STAGES = ("correctness.reference", "correctness.calls", "correctness.compare", "recheck.outputs",
                "recheck.reference", "recheck.compare")


def reservation_seconds(rows: list[dict], footprints: dict) -> tuple[float, float]:
    """GiB·s the verifications of a run's first round (`rows`, an `rl_load.py` run's) reserved, Σ reservation ×
    admitted seconds, two ways: as admission reserves today (the worker's side as reserved, `memory_estimate_gb`,
    plus `Footprint.trusted`, for the whole admitted time), and with the trusted side's trial part, trusted −
    TRUSTED_FIXED − 4·W (a case's inputs, outputs and temporaries), reserved only for the seconds of `TRIAL_STAGES`.
    The second applies to large tasks only (`slots.is_large`): their trusted side gives its cached blocks back after
    each trial, while a smaller task's stay cached on its stream and would be counted free while held. 60 · n ·
    capacity / GiB·s bounds the verdicts a minute either way. `footprints`: task id → `Footprint`."""
    from musacoder.judge.slots import GiB, TRUSTED_FIXED, is_large

    whole = split = 0.0
    for r in rows:
        if r.get("round", 1) != 1 or r.get("wall_s") is None or not r.get("memory_estimate_gb"):
            continue
        fp, st = footprints[r["task"]], r.get("stage_s") or {}
        admitted = before_and_admitted(r)[1]
        worker = float(r["memory_estimate_gb"]["worker"]) * GiB
        whole += (worker + fp.trusted) * admitted
        if is_large(fp):
            trial = fp.trusted - TRUSTED_FIXED - 4 * fp.weights
            held = min(admitted, sum(float(st.get(k, 0.0)) for k in TRIAL_STAGES))
            split += (worker + fp.trusted - trial) * admitted + trial * held
        else:
            split += (worker + fp.trusted) * admitted
    return whole / GiB, split / GiB


def batch_order(tasks: list[tuple[str, object]], copies: int, workers: int) -> list[tuple[str, object, int]]:
    """(task id, footprint, copy) in the order `batch.by_task` runs a batch of `copies` jobs per task."""
    from types import SimpleNamespace

    from musacoder.judge.batch import by_task

    jobs = [SimpleNamespace(task=SimpleNamespace(key=tid, source=tid), overrides={}, item=(tid, fp, k))
            for tid, fp in tasks for k in range(copies)]
    return [j.item for j in by_task(jobs, workers)]


def simulate(tasks: list[tuple[str, object]], copies: int, workers: int, gpu_gib: float, start_s: float,
             run_s: float, per_gib_s: float, scale: float, overtake_s: float,
             peaks: dict[str, float] | None = None,
             times: dict[str, list[tuple[float, float]]] | None = None) -> dict:
    """`peaks`: the worker allocator peak (GiB) each task's verifications report; once one of a task has ended, its
    later ones reserve the learned worker side (`slots.worker_need`), as the verifier does. `times`: the measured
    seconds to replay per task (`measured_times`), in the batch's own order."""
    from musacoder.judge.batch import bounded
    from musacoder.judge.slots import GiB, DeviceSlots, worker_need

    learned: dict[str, int] = {}

    slots = DeviceSlots(cuda_count=1, memory={"cuda:0": int(0.85 * gpu_gib * GiB)})
    slots.overtake_s = overtake_s * scale
    waits: list[float] = []
    lock = threading.Lock()

    def seconds(tid: str, fp, k: int) -> tuple[float, float]:
        if times is not None:
            measured = times[tid]
            return measured[k % len(measured)]
        return start_s, run_s + per_gib_s * (fp.inputs + fp.outputs) / GiB

    def job(item):
        tid, fp, k = item
        before, admitted = seconds(tid, fp, k)
        with slots.pin("cuda", fp.total) as dev:
            time.sleep(before * scale)
            t0 = time.monotonic()
            # asked again on each wake, as the verifier's admission does (`DeviceLease.admit`)
            with slots.reserve(dev, lambda: fp.trusted + worker_need(fp, learned.get(tid))):
                with lock:
                    waits.append((time.monotonic() - t0) / scale)
                time.sleep(admitted * scale)
        if peaks and (peak := _peak_of(tid, peaks)) is not None:
            with lock:
                learned[tid] = max(learned.get(tid, 0), int(peak * GiB))
        return tid

    jobs = batch_order(tasks, copies, workers) if times is not None else \
        [(tid, fp, k) for tid, fp in tasks for k in range(copies)]
    t0 = time.monotonic()
    done = [tid for tid, _ in bounded(job, jobs, workers)]
    seconds = (time.monotonic() - t0) / scale
    assert len(done) == len(jobs)
    return {"verdicts": len(done), "model_seconds": round(seconds, 1),
            "verdicts_per_min": round(60 * len(done) / seconds, 1),
            "admission_wait_s_total": round(sum(waits), 1), "admission_wait_s_median": round(statistics.median(waits), 2),
            "most_reserved_gib": round(slots.peak["cuda:0"][1] / GiB, 1), "most_holding": slots.peak["cuda:0"][0]}


def _peak_of(tid: str, peaks: dict[str, float]) -> float | None:
    import fnmatch

    return next((gib for glob, gib in peaks.items() if fnmatch.fnmatch(tid, glob)), None)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernelbench-dir", type=Path,
                    default=Path(os.environ.get("KERNELBENCH_DIR", "../shared/kernelbench")))
    ap.add_argument("--candidates", type=Path, default=Path("benchmarks/candidates/cuda"))
    ap.add_argument("--only", default="level2/*", help="comma-separated globs over ids")
    ap.add_argument("--tasks", type=int, default=16)
    ap.add_argument("--copies", type=int, default=8)
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--estimate", action="append", default=[],
                    help="now, or WORKER_FIXED_GIB,TRUSTED_FIXED_GIB,SLACK,TRUSTED_SLACK to model (repeatable)")
    ap.add_argument("--peak", action="append", default=[], metavar="GLOB=GIB",
                    help="the worker allocator peak the matching tasks' verifications report (repeatable; the first "
                         "glob that matches counts): later candidates of a task reserve the learned worker side")
    ap.add_argument("--order", choices=("given", "largest"), default="given",
                    help="tasks in the order given (as batches run them), or the largest inputs and weights first")
    ap.add_argument("--gpu-gib", type=float, default=79.2, help="the modelled GPU's memory (H100 80GB: 79.2 GiB)")
    ap.add_argument("--start-s", type=float, default=1.0, help="modelled worker start and warm build, outside admission")
    ap.add_argument("--run-s", type=float, default=6.0, help="modelled admitted time of a light task")
    ap.add_argument("--per-gib-s", type=float, default=4.0, help="modelled admitted seconds per GiB of inputs+outputs")
    ap.add_argument("--overtake-s", type=float, default=None, help="DeviceSlots.overtake_s (default slots.OVERTAKE_S)")
    ap.add_argument("--times", type=Path, default=None, metavar="ROWS",
                    help="replay each task's measured seconds before and after admission from an rl_load.py run's "
                         ".rows.jsonl (first round), jobs in the batch's own order")
    ap.add_argument("--reserve-ahead", action="store_true",
                    help="with --times: each verification's measured host_reserve replayed before its admission, as "
                         "the page-locking done while waiting for memory (stages.timing.host_reserved_ahead) has it")
    ap.add_argument("--scale", type=float, default=0.02, help="wall seconds per modelled second")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    from musacoder.judge import slots
    from musacoder.judge.slots import GiB, OVERTAKE_S

    tasks = load_footprints(args.kernelbench_dir, args.candidates, [g for g in args.only.split(",") if g], args.tasks)
    if not tasks:
        sys.exit(f"no task with a candidate under {args.candidates} matches {args.only!r} in {args.kernelbench_dir}")
    now = (slots.WORKER_FIXED / GiB, slots.TRUSTED_FIXED / GiB, slots.SLACK, slots.TRUSTED_SLACK)
    estimates = []
    for e in args.estimate or ["now"]:
        try:
            estimates.append(now if e == "now" else tuple(float(x) for x in e.split(",")))
        except ValueError:
            ap.error(f"--estimate {e!r}: now, or four numbers WORKER_FIXED_GIB,TRUSTED_FIXED_GIB,SLACK,TRUSTED_SLACK")
        if len(estimates[-1]) != 4:
            ap.error(f"--estimate {e!r}: four numbers, got {len(estimates[-1])}")
    if args.order == "largest":  # by inputs and weights (`batch.device_bytes`)
        tasks.sort(key=lambda t: -(t[1].inputs + t[1].weights))
    times = None
    if args.times is not None:
        if not args.times.is_file():
            ap.error(f"--times {args.times}: no such file (an rl_load.py run's .rows.jsonl)")
        times = measured_times(args.times, args.reserve_ahead)
        missing = [tid for tid, _ in tasks if tid not in times]
        if missing:
            ap.error(f"--times {args.times} has no verification of {', '.join(missing[:3])}: run it on the same "
                     "tasks (--only, --tasks)")
    peaks = {}
    for item in args.peak:
        glob, _, gib = item.partition("=")
        try:
            peaks[glob] = float(gib)
        except ValueError:
            ap.error(f"--peak {item!r}: GLOB=GIB, e.g. 'level2/4_*=8.9'")
    print(f"{len(tasks)} tasks x {args.copies}, {args.workers} workers, a {args.gpu_gib:g} GiB GPU (modelled)")
    print("\n| estimate (now: fixed GiB per side; else worker fixed GiB, trusted fixed GiB, slack, trusted slack) "
          "| footprints GiB | verdicts/min "
          "(model) | model s | admission wait s (total, median) | most reserved GiB | most admitted at once |\n"
          "|---|---|---|---|---|---|---|")
    results = []
    for spec, (wf, tf, slack, tslack) in zip(args.estimate or ["now"], estimates):
        # Footprint reads these module constants whenever its properties are asked
        slots.WORKER_FIXED, slots.TRUSTED_FIXED = int(wf * GiB), int(tf * GiB)
        slots.SLACK, slots.TRUSTED_SLACK = slack, tslack
        today = spec == "now"  # the verifier's estimator; four numbers: the static one (no tracing, no learning)
        rows = tasks if today else [(tid, dataclasses.replace(fp, transient=None)) for tid, fp in tasks]
        r = simulate(rows, args.copies, args.workers, args.gpu_gib, args.start_s, args.run_s, args.per_gib_s,
                     args.scale, OVERTAKE_S if args.overtake_s is None else args.overtake_s, peaks if today else None,
                     times)
        sizes = [fp.total / GiB for _, fp in rows]
        r.update(estimate=spec, footprint_gib=[round(min(sizes), 1), round(max(sizes), 1)])
        results.append(r)
        label = f"now: {wf:g}, {tf:g}, traced{', learned' if peaks else ''}" if today else \
            f"{wf:g}, {tf:g}, {slack:g}, {tslack:g}"
        print(f"| {label} | {min(sizes):.1f}-{max(sizes):.1f} | {r['verdicts_per_min']} | "
              f"{r['model_seconds']} | {r['admission_wait_s_total']}, {r['admission_wait_s_median']} | "
              f"{r['most_reserved_gib']} | {r['most_holding']} |", flush=True)
    slots.WORKER_FIXED, slots.TRUSTED_FIXED = int(now[0] * GiB), int(now[1] * GiB)
    slots.SLACK, slots.TRUSTED_SLACK = now[2], now[3]
    if args.times is not None:
        rows = [json.loads(line) for line in args.times.read_text().splitlines() if line.strip()]
        n = sum(1 for r in rows if r.get("round", 1) == 1)
        whole, split = reservation_seconds(rows, dict(tasks))
        cap = 0.85 * args.gpu_gib
        print(f"\nReservations x admitted seconds of the {n} measured verifications: {whole:,.0f} GiB*s as reserved "
              f"(at most {60 * n * cap / whole:.1f} verdicts/min on {cap:.0f} GiB usable), {split:,.0f} GiB*s with "
              f"the trusted side's trial part held only in the trials and re-check rounds of large tasks (at most "
              f"{60 * n * cap / split:.1f})")
        results.append({"reservation_gib_s": round(whole), "reservation_gib_s_trial_part": round(split)})
    if args.json:
        args.json.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()}, "results": results},
                                        indent=1))


if __name__ == "__main__":
    main()
