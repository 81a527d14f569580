"""An RL-shaped load on MooreEval: N tasks × K candidates each, scheduled task by task as a GRPO group is.

    python benchmarks/rl_load.py --kernelbench-dir ../shared/kernelbench --candidates benchmarks/candidates/cuda \
        --tasks 16 --copies 8 --workers 8 --json rl_load.json              # (b) RL-shaped load, full task sizes
    python benchmarks/rl_load.py --only level2/76_Gemm_Add_ReLU --copies 8 --identical --json same8.json
                                                                           # (d) one candidate 8 times: speedup spread
    python benchmarks/rl_load.py --backend cpu --task examples/tasks/relu.py \
        --candidate examples/candidates/relu_cpu.py --copies 8 --identical --workers 2   # the CPU backend (2 cores)
    python benchmarks/rl_load.py ... --rounds 3     # the same batch 3 times in one process, as RL steps are
    python benchmarks/rl_load.py --backend cpu --task examples/tasks/relu.py --candidate examples/candidates/relu_cpu.py \
        --task examples/tasks/linear_gelu.py --candidate examples/candidates/linear_gelu_cpu.py --copies 4 \
        --workers 4 --schedule grouped --cache $(mktemp -d)   # two tasks, cold builds, without the leaders ahead

With --rounds R the batch is verified R times by one process, one row per round: the first round pays what a
verifier pays once (its CUDA start, the fork server, workers started ahead), the later ones are what a long-lived
verifier (the RL environment, the service) pays per step; each round is a batch of its own, so the per-task cache
and its seeds rotate between rounds as they do between RL steps.

Each task's K candidates are its golden kernel and K−1 variants of it (a comment added: the same kernel, another
response text), or K identical copies with --identical. Sizes are the task files' own unless --max-input-mb shrinks
them (the table then says so). Prints a table and writes JSON: verdicts per minute, per-verdict exclusive device
seconds (the stages that hold the device alone: timing, the clean reference, the compile baseline; median and p90),
wall per verdict and the part of it no stage timed, how many verdicts reused their task's reference work (`reference_reused`), status counts, and per
task the spread of the speedup over its K copies (max/min − 1).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from throughput import shrink_overrides, verify_fields  # noqa: E402

EXCLUSIVE_STAGES = ("timing", "clean_reference", "compile_baseline")


def p90(xs: list[float]) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(round(0.9 * (len(s) - 1))))] if s else float("nan")


def task_pairs(kb: Path, cands: Path, only: list[str], n_tasks: int):
    """(id, task path, candidate path) of the candidates whose task exists, `only` globs first, at most n_tasks."""
    import fnmatch

    out = []
    for c in sorted(cands.glob("**/*.py")):
        rel = c.relative_to(cands).with_suffix("").as_posix()
        t = kb / (rel + ".py")
        if not t.exists() or (only and not any(fnmatch.fnmatch(rel, g) for g in only)):
            continue
        out.append((rel, t, c))
        if n_tasks and len(out) >= n_tasks:
            break
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernelbench-dir", type=Path,
                    default=Path(os.environ.get("KERNELBENCH_DIR", "../shared/kernelbench")))
    ap.add_argument("--candidates", type=Path, default=Path("benchmarks/candidates/cuda"))
    ap.add_argument("--only", default="", help="comma-separated globs over ids (level2/76_*)")
    ap.add_argument("--task", type=Path, action="append", default=[],
                    help="a task file (each with a --candidate, in order) instead of the folders; repeatable")
    ap.add_argument("--candidate", type=Path, action="append", default=[])
    ap.add_argument("--tasks", type=int, default=16, help="at most this many tasks (0: all that match)")
    ap.add_argument("--copies", type=int, default=8, help="candidates per task")
    ap.add_argument("--identical", action="store_true", help="K identical copies instead of the golden + variants")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--max-input-mb", type=float, default=0, help="shrink tasks to this (0: the task files' own sizes)")
    ap.add_argument("--cache", type=Path, default=None, help="build cache (default: MUSACODER_CACHE_DIR)")
    ap.add_argument("--verify", action="append", default=[], metavar="FIELD=VALUE", help="VerifyConfig fields")
    ap.add_argument("--rounds", type=int, default=1, help="verify the same batch this many times in one process")
    ap.add_argument("--schedule", choices=("largest", "ahead", "grouped"), default="largest",
                    help="verify_many's default: the tasks of the most inputs and weights first, each task's first "
                         "job started ahead of the tasks before it; the same in the order given (largest_first off); "
                         "or the order given with every task's jobs strictly one task after another")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    from musacoder.config import VerifyConfig
    from musacoder.judge.batch import VerifyJob
    from musacoder.tasks import load_task

    if args.task or args.candidate:
        if len(args.task) != len(args.candidate) or not all(p.is_file() for p in args.task + args.candidate):
            sys.exit("each --task goes with a --candidate, and all must be files")
        pairs = [(t.stem, t, c) for t, c in zip(args.task, args.candidate)]
    else:
        pairs = task_pairs(args.kernelbench_dir, args.candidates, [g for g in args.only.split(",") if g], args.tasks)
    if not pairs:
        sys.exit(f"no candidate under {args.candidates} has a task under {args.kernelbench_dir} (--only {args.only!r})")
    extra = verify_fields(args.verify, ap.error)
    cfg = VerifyConfig(**({"cache_dir": args.cache} if args.cache else {}), **extra)
    jobs = []
    for tid, t, c in pairs:
        over = shrink_overrides(t, int(args.max_input_mb * 2**20)) if args.max_input_mb else {}
        if over is None:
            print(f"skipped {tid}: it does not run once shrunk to {args.max_input_mb} MB", file=sys.stderr)
            continue
        task, text = load_task(t, over or None), c.read_text()
        for k in range(args.copies):
            variant = text if args.identical or k == 0 else f"{text}\n# variant {k}: the same kernel, another response\n"
            jobs.append(VerifyJob(f"{tid}#{k}", task, variant, args.backend))
    print(f"{len(jobs)} verifications: {len(jobs) // args.copies} tasks x {args.copies} "
          f"({'identical' if args.identical else 'golden + variants'}), {args.workers} workers, backend "
          f"{args.backend}, sizes {'shrunk to %g MB' % args.max_input_mb if args.max_input_mb else 'the task files own'}",
          flush=True)
    print("\n| round | verdicts | seconds | verdicts/min | exclusive s (median, p90) | wall s (median) | untimed s "
          "(median) | reused | max speedup spread | statuses |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    rounds = []
    for rnd in range(1, max(1, args.rounds) + 1):
        summary, rows = run_round(jobs, args, cfg, rnd)
        rounds.append({"round": rnd, "summary": summary, "rows": rows})
        print(f"| {rnd} | {summary['verifications']} | {summary['seconds']} | {summary['verdicts_per_min']} | "
              f"{summary['exclusive_s_median']}, {summary['exclusive_s_p90']} | {summary['wall_s_median']} | "
              f"{summary['untimed_s_median']} | {summary['reference_reused']} | {summary['speedup_spread_max']} | {summary['statuses']} |",
              flush=True)
        print("  stage medians (s): " + ", ".join(f"{k} {x}" for k, x in summary["stage_s_median"].items()), flush=True)
        if args.json:  # after every round: a cut run keeps what it measured
            last = rounds[-1]
            args.json.write_text(json.dumps({"summary": last["summary"], "rows": last["rows"], "rounds": rounds},
                                            indent=1))


def run_round(jobs: list, args, cfg, rnd: int = 1) -> tuple[dict, list[dict]]:
    """One batch of `jobs` through `verify_many`: (summary, one row per verdict), each verdict printed as it comes and
    appended to `<json>.rows.jsonl` with its round `rnd`."""
    from musacoder.judge.batch import verify_many

    t0, rows = time.monotonic(), []
    sink = args.json.with_suffix(".rows.jsonl") if args.json else None  # every verdict as it comes: a cut run keeps it
    for job, v in verify_many(jobs, workers=args.workers, config=cfg, leaders_ahead=args.schedule != "grouped",
                              largest_first=args.schedule == "largest"):
        excl = sum(v.stage_s.get(s, 0.0) for s in EXCLUSIVE_STAGES)
        # the wall no stage timed (dotted names, `worker.*`, `binary.*`, `correctness.*`, are parts of stages)
        untimed = v.wall_s - sum(x for k, x in v.stage_s.items() if "." not in k)
        rows.append({"untimed_s": round(untimed, 3), "id": job.id, "task": job.id.split("#")[0], "status": v.status, "speedup": v.speedup,
                     "reward": v.reward, "wall_s": v.wall_s, "exclusive_s": excl, "done_s": time.monotonic() - t0,
                     "reference_reused": getattr(v, "reference_reused", None), "stage_s": v.stage_s,
                     "error": (v.error or "")[-300:], "violations": v.violations[:3],
                     "worker_mem_gb": v.device_mem_gb, "trusted_mem_gb": v.trusted_mem_gb,
                     "memory_estimate_gb": v.memory_estimate_gb,
                     # where a speedup comes from: the candidate's median, the reference beside it and clean, the
                     # figure that counted, the paired 95 % interval, and what was flagged
                     "runtime_ms": v.runtime_ms, "ref_runtime_ms": v.ref_runtime_ms,
                     "ref_in_process_ms": v.ref_runtime_ms_in_process, "ref_clean_ms": v.ref_runtime_ms_clean,
                     "speedup_interval": v.speedup_interval, "flags": [f[:200] for f in v.flags],
                     "timed_rounds": v.candidate_timing.repeats if v.candidate_timing else None,
                     "failed_trials": [t.message[:300] for t in v.trials if not t.passed][:3]})
        if sink is not None:
            with sink.open("a") as f:
                f.write(json.dumps({**rows[-1], "round": rnd, "done_s": round(rows[-1]["done_s"], 2)}) + "\n")
        print(f"  {job.id:50s} {v.status:12s} speedup {v.speedup or 0:7.3f} wall {v.wall_s:6.1f}s "
              f"exclusive {excl:5.2f}s reused {rows[-1]['reference_reused']}", flush=True)
    total = time.monotonic() - t0
    spreads = {}
    for tid in dict.fromkeys(r["task"] for r in rows):
        sp = [r["speedup"] for r in rows if r["task"] == tid and r["status"] == "ok" and r["speedup"]]
        if len(sp) >= 2:
            spreads[tid] = max(sp) / min(sp) - 1
    excl = [r["exclusive_s"] for r in rows if r["status"] == "ok"]
    walls = [r["wall_s"] for r in rows]
    statuses: dict[str, int] = {}
    for r in rows:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    summary = {
        "verifications": len(rows), "seconds": round(total, 1), "verdicts_per_min": round(60 * len(rows) / total, 2),
        "exclusive_s_median": round(statistics.median(excl), 3) if excl else None,
        "exclusive_s_p90": round(p90(excl), 3) if excl else None,
        "wall_s_median": round(statistics.median(walls), 2) if walls else None,
        "untimed_s_median": round(statistics.median(r["untimed_s"] for r in rows), 2) if rows else None,
        "reference_reused": sum(1 for r in rows if r["reference_reused"]),
        "stage_s_median": stage_medians(rows),
        "statuses": statuses, "speedup_spread": {k: round(s, 4) for k, s in spreads.items()},
        "speedup_spread_max": round(max(spreads.values()), 4) if spreads else None,
        "workers": args.workers, "copies": args.copies, "identical": args.identical, "backend": args.backend,
        "max_input_mb": args.max_input_mb or None, "schedule": args.schedule,
        "reserved_peak_gb": reserved_peak(),
    }
    return summary, rows


def reserved_peak() -> dict[str, tuple[int, float]]:
    """Per device: the most verifications holding memory reservations at once, and the most GiB reserved (the
    admission's own account, to set beside the device's used memory)."""
    from musacoder.judge.slots import DEVICE_SLOTS, GiB

    return {d: (n, round(b / GiB, 2)) for d, (n, b) in DEVICE_SLOTS.peak.items()}


def stage_medians(rows: list[dict]) -> dict[str, float]:
    """Where a verdict's wall goes: the median of each `stage_s` entry over the verdicts that have it (absent counts
    as 0), the untimed remainder last; entries under 5 ms everywhere left out."""
    keys = list(dict.fromkeys(k for r in rows for k in r["stage_s"]))
    out = {k: round(statistics.median(r["stage_s"].get(k, 0.0) for r in rows), 3) for k in keys}
    out = {k: x for k, x in out.items() if x >= 0.005 or any(r["stage_s"].get(k, 0.0) >= 0.005 for r in rows)}
    if rows:
        out["untimed"] = round(statistics.median(r["untimed_s"] for r in rows), 3)
    return out


if __name__ == "__main__":
    main()
