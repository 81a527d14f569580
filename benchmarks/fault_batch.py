"""Faults among goldens: how long a crashing, a hanging and an out-of-memory candidate delay the honest ones.

    python benchmarks/fault_batch.py --kernelbench-dir ../shared/kernelbench --candidates benchmarks/candidates/cuda \
        --goldens 12 --workers 8 --json fault_batch.json                     # a GPU, the task files' own sizes
    python benchmarks/fault_batch.py --backend cpu --goldens 0 --honest examples/candidates/relu_cpu.py --copies 4 \
        --workers 2                                                          # the CPU backend

The same honest verifications run in batches of their own and in batches with the faulty candidates first (so they
are in flight while the honest ones run), alternating (phases `clean,faults,clean` by default: the first batch also
fills the build cache). The faults are verified on the fault task (`examples/tasks/relu.py` by default): on CUDA an
illegal memory access, a kernel that never returns and an allocation far beyond the device
(`tests/gpu/candidates`), on the CPU a crash and a hang (`tests/adversarial/candidates`).

Prints a table and writes JSON: per batch its seconds, the honest verdicts' statuses, median wall and when the last
one came, and each fault's status and wall; then the delay, the faults batch's seconds against the mean of the clean
ones. Sizes are the task files' own unless --max-input-mb shrinks the honest tasks (the table then says so).
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
from rl_load import task_pairs  # noqa: E402
from throughput import shrink_overrides, verify_fields  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
FAULTS = {
    "cuda": [REPO / "tests/gpu/candidates" / f"{n}.py" for n in ("illegal_address", "infinite_loop",
                                                                  "absurd_allocation")],
    "cpu": [REPO / "tests/adversarial/candidates" / f"{n}.py" for n in ("crash", "hang")],
}


def honest_jobs(args) -> list:
    """The honest verifications: the first `--goldens` golden candidates with their KernelBench tasks, plus
    `--copies` of `--honest` on the fault task."""
    from musacoder.judge.batch import VerifyJob
    from musacoder.tasks import load_task

    jobs = []
    if args.goldens:
        for tid, t, c in task_pairs(args.kernelbench_dir, args.candidates, [g for g in args.only.split(",") if g],
                                    args.goldens):
            over = shrink_overrides(t, int(args.max_input_mb * 2**20)) if args.max_input_mb else {}
            if over is None:
                print(f"skipped {tid}: it does not run once shrunk to {args.max_input_mb} MB", file=sys.stderr)
                continue
            jobs.append(VerifyJob(tid, load_task(t, over or None), c.read_text(), args.backend))
    if args.honest:
        task = load_task(args.fault_task)
        jobs += [VerifyJob(f"{args.honest.stem}#{k}", task, args.honest.read_text(), args.backend)
                 for k in range(args.copies)]
    return jobs


def run_batch(jobs: list, faults: list, args, cfg) -> dict:
    """One batch, faults first; what it took and what each verification got."""
    from musacoder.judge.batch import verify_many

    t0, rows = time.monotonic(), []
    for job, v in verify_many(faults + jobs, workers=args.workers, config=cfg):
        rows.append({"id": job.id, "fault": job in faults, "status": v.status, "wall_s": round(v.wall_s, 2),
                     "done_s": round(time.monotonic() - t0, 2), "error": (v.error or "")[:200]})
        print(f"  {job.id:44s} {v.status:13s} wall {v.wall_s:6.1f}s", flush=True)
    honest = [r for r in rows if not r["fault"]]
    statuses: dict[str, int] = {}
    for r in honest:
        statuses[r["status"]] = statuses.get(r["status"], 0) + 1
    return {"seconds": round(time.monotonic() - t0, 1), "honest_statuses": statuses,
            "honest_wall_median": round(statistics.median(r["wall_s"] for r in honest), 2) if honest else None,
            "honest_last_done_s": max((r["done_s"] for r in honest), default=None),
            "faults": {r["id"]: [r["status"], r["wall_s"]] for r in rows if r["fault"]}, "rows": rows}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernelbench-dir", type=Path,
                    default=Path(os.environ.get("KERNELBENCH_DIR", "../shared/kernelbench")))
    ap.add_argument("--candidates", type=Path, default=Path("benchmarks/candidates/cuda"))
    ap.add_argument("--only", default="", help="comma-separated globs over golden ids (level1/*)")
    ap.add_argument("--goldens", type=int, default=12, help="golden candidates (0: none)")
    ap.add_argument("--honest", type=Path, default=None, help="an honest candidate for the fault task")
    ap.add_argument("--copies", type=int, default=4, help="copies of --honest")
    ap.add_argument("--fault-task", type=Path, default=REPO / "examples/tasks/relu.py")
    ap.add_argument("--faults", default="", help="comma-separated candidate files (default: by backend)")
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--max-input-mb", type=float, default=0, help="shrink the honest tasks (0: their own sizes)")
    ap.add_argument("--phases", default="clean,faults,clean")
    ap.add_argument("--verify", action="append", default=[], metavar="FIELD=VALUE", help="VerifyConfig fields")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args()

    from musacoder.config import VerifyConfig
    from musacoder.judge.batch import VerifyJob
    from musacoder.tasks import load_task

    fault_files = [Path(f) for f in args.faults.split(",") if f] or FAULTS.get(args.backend, [])
    for f in fault_files + ([args.honest] if args.honest else []):
        if not f.is_file():
            sys.exit(f"candidate file not found: {f}")
    phases = [p for p in args.phases.split(",") if p]
    if bad := [p for p in phases if p not in ("clean", "faults")]:
        sys.exit(f"--phases takes clean and faults, got {bad}")
    cfg = VerifyConfig(**verify_fields(args.verify, ap.error))
    jobs = honest_jobs(args)
    if not jobs:
        sys.exit("no honest verification: give --goldens with a KernelBench folder, or --honest")
    fault_task = load_task(args.fault_task)
    faults = [VerifyJob(f"fault/{f.stem}", fault_task, f.read_text(), args.backend) for f in fault_files]
    print(f"{len(jobs)} honest verifications, {len(faults)} faults, {args.workers} workers, backend {args.backend}, "
          f"sizes {'shrunk to %g MB' % args.max_input_mb if args.max_input_mb else 'the task files own'}", flush=True)
    batches = []
    for phase in phases:
        print(f"{phase}:", flush=True)
        got = run_batch(jobs, faults if phase == "faults" else [], args, cfg)
        batches.append({"phase": phase, **got})
        if args.json:  # after every batch: a cut run keeps what it measured
            args.json.write_text(json.dumps({"batches": batches}, indent=1))
    clean = [b["seconds"] for b in batches if b["phase"] == "clean"]
    with_faults = [b["seconds"] for b in batches if b["phase"] == "faults"]
    delay = round(statistics.mean(with_faults) - statistics.mean(clean), 1) if clean and with_faults else None
    print("\n| batch | seconds | honest statuses | honest wall s (median) | last honest verdict at s | faults |")
    print("|---|---|---|---|---|---|")
    for b in batches:
        faults_txt = "; ".join(f"{k.split('/')[-1]} {s} {w} s" for k, (s, w) in b["faults"].items()) or "–"
        print(f"| {b['phase']} | {b['seconds']} | {b['honest_statuses']} | {b['honest_wall_median']} | "
              f"{b['honest_last_done_s']} | {faults_txt} |")
    print(f"delay: the faults batch took {delay} s longer than the clean ones (mean)")
    if args.json:
        args.json.write_text(json.dumps({"batches": batches, "delay_s": delay, "workers": args.workers,
                                         "backend": args.backend, "max_input_mb": args.max_input_mb or None},
                                        indent=1))


if __name__ == "__main__":
    main()
