"""Timing fidelity: the same candidates evaluated several times; spread of the speedup, and measured time against the
GPU kernel time the profiler reports for the audited calls of the same runs.

    python benchmarks/timing_fidelity.py --kernelbench-dir ../shared/kernelbench --candidates benchmarks/candidates/cuda \
        --limit 10 --repeats 5 --json fidelity.json

Goals (issue 3): coefficient of variation of the speedup ≤ 2 %; measured time within 5 % of the profiler's device time.
Prints a table and writes JSON. Sizes are shrunk as in benchmarks/throughput.py.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
from pathlib import Path


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernelbench-dir", type=Path, default=Path(os.environ.get("KERNELBENCH_DIR", "../shared/kernelbench")))
    ap.add_argument("--candidates", type=Path, default=Path("benchmarks/candidates/cuda"))
    ap.add_argument("--limit", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-input-mb", type=float, default=1024, help="inputs shrunk to at most this (large enough "
                    "that a kernel runs far longer than a launch)")
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--backend", default="cuda")
    ap.add_argument("--json", type=Path, default=None)
    ap.add_argument("--every", type=int, default=1, help="take every N-th candidate (a spread of tasks)")
    a = ap.parse_args()

    from benchmarks_throughput import runnable_pairs  # noqa: E402  (sibling script)
    from musacoder.config import VerifyConfig
    from musacoder.judge.batch import VerifyJob, verify_many
    from musacoder.tasks import load_task

    cfg = VerifyConfig(trials=2, repeats=30, max_repeats=300, time_budget_s=5.0)
    chosen = runnable_pairs(a.kernelbench_dir, a.candidates, a.max_input_mb, every=a.every, limit=a.limit)
    jobs = []
    for name, task_path, cand, over in chosen:
        task = load_task(task_path, over)
        jobs += [VerifyJob(f"{name}#{k}", task, cand.read_text(), a.backend) for k in range(a.repeats)]
    # Builds and correctness overlap across workers; every timing stage has the device to itself (DeviceSlots).
    runs: dict[str, list] = {name: [] for name, _, _, _ in chosen}
    for job, v in verify_many(jobs, workers=a.workers, config=cfg):
        runs[job.id.split("#")[0]].append(v)
        print(f"  {job.id:50s} {v.status:10s} speedup {v.speedup or 0:7.3f} measured {v.runtime_ms or 0:8.4f} ms "
              f"profiler {v.candidate_device_ms or 0:8.4f} ms round trip allowed {v.timer_overhead_ms or 0:.4f} ms "
              f"{'' if v.status == 'ok' else (v.violations or [v.error or ''])[0][:120]}", flush=True)
    rows = []
    for name, vs in runs.items():
        sp = [v.speedup for v in vs if v.status == "ok" and v.speedup]
        dev = [(v.runtime_ms, v.candidate_device_ms) for v in vs if v.runtime_ms and v.candidate_device_ms]
        rows.append({"candidate": name, "ok_runs": len(sp),
                     "speedup_mean": statistics.fmean(sp) if sp else None,
                     "speedup_cv": statistics.stdev(sp) / statistics.fmean(sp) if len(sp) > 1 else None,
                     "measured_ms": statistics.median(m for m, _ in dev) if dev else None,
                     "measured_over_device": statistics.median(m / d for m, d in dev) if dev else None,
                     "round_trip_ms": statistics.median(v.timer_overhead_ms for v in vs if v.timer_overhead_ms is not None)
                     if any(v.timer_overhead_ms is not None for v in vs) else None})
    print("\n| candidate | ok runs | mean speedup | CV | measured ms | measured / profiler device time | round trip "
          "allowed ms |\n|---|---|---|---|---|---|---|")
    for r in rows:
        f = lambda x, p="{:.3f}": p.format(x) if x is not None else "-"  # noqa: E731
        print(f"| {r['candidate']} | {r['ok_runs']} | {f(r['speedup_mean'])} | {f(r['speedup_cv'], '{:.2%}')} | "
              f"{f(r['measured_ms'], '{:.4f}')} | {f(r['measured_over_device'])} | "
              f"{f(r['round_trip_ms'], '{:.4f}')} |")
    if a.json:
        a.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    import sys

    sys.path.insert(0, str(Path(__file__).parent))
    import throughput as benchmarks_throughput  # noqa: E402

    sys.modules["benchmarks_throughput"] = benchmarks_throughput
    main()
