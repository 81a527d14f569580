"""Issue 6: MooreEval's GPU run pool on all visible GPUs against one GPU, in one run.

UNVERIFIED ON HARDWARE: written against the real pool code (the pieces it relies on, `DeviceSlots.trace`,
`trace_overlaps`, `Verdict.device` and the worker pre-start pool, are tested on the CPU with logical devices), but no
machine with 2 or more GPUs has been lent yet, so this script has never run end to end.

    python benchmarks/multi_gpu.py --kernelbench-dir .kb --candidates benchmarks/candidates/cuda --workers 16 \
        --limit 32 --json multi_gpu.json

1. warm-up pass (fills the build cache, not counted);
2. one GPU: every verification pinned to cuda:0;
3. all GPUs (`cuda`): the device slots record every hold, and one busy worker process is killed (SIGKILL) after a
   quarter of the verdicts. The killed job must come back as a verdict of its own (crashed) and pass when re-run.
Prints a table and writes JSON with: verdicts/min for 1 and N GPUs and their ratio, the GPUs used, overlaps of a
timing stage with any other hold on its GPU (must be none), candidates whose status differs between the phases (must
be none, apart from the killed one), and how many jobs got no verdict (must be 0).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from throughput import runnable_pairs  # noqa: E402  (sibling script)


def busy_worker_pids() -> list[int]:
    """Candidate workers that are serving a verification (not idle ones started ahead)."""
    from musacoder.judge.forkserver import FORK_SERVERS
    from musacoder.judge.sandbox import PRESTART

    idle = {w.proc.pid for ws in PRESTART._idle.values() for w in ws}
    servers = {str(s.proc.pid) for s in FORK_SERVERS._servers.values() if s is not None}
    pids = []
    for d in Path("/proc").iterdir():
        if d.name.isdigit() and int(d.name) not in idle:
            try:
                cmd = (d / "cmdline").read_bytes()
                ppid = (d / "stat").read_text().rsplit(")", 1)[1].split()[1]
            except (OSError, IndexError):
                continue
            forked = ppid in servers  # forked by a fork server: a worker (the servers fork nothing else)
            if forked or (b"musacoder.judge.worker" in cmd and b"unshare" not in cmd):
                pids.append(int(d.name))
    return pids


def run_phase(jobs, workers: int, cfg, kill_after: int | None = None):
    from musacoder.judge.batch import verify_many

    killed: list[int] = []
    out = {}
    t0 = time.monotonic()
    for job, v in verify_many(jobs, workers=workers, config=cfg):
        out[job.id] = v
        if kill_after is not None and len(out) == kill_after and not killed:
            pids = busy_worker_pids()
            if pids:
                os.kill(pids[0], signal.SIGKILL)
                killed.append(pids[0])
        print(f"  {job.id:45s} {v.status:12s} {v.device or '-':8s} speedup {v.speedup or 0:6.2f}", flush=True)
    return out, time.monotonic() - t0, killed


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--kernelbench-dir", type=Path, default=Path(os.environ.get("KERNELBENCH_DIR", "../shared/kernelbench")))
    ap.add_argument("--candidates", type=Path, default=Path("benchmarks/candidates/cuda"))
    ap.add_argument("--workers", type=int, default=16)
    ap.add_argument("--limit", type=int, default=32)
    ap.add_argument("--max-input-mb", type=float, default=64)
    ap.add_argument("--json", type=Path, default=None)
    a = ap.parse_args()

    import torch

    from musacoder.config import VerifyConfig
    from musacoder.judge.batch import VerifyJob
    from musacoder.judge.slots import DEVICE_SLOTS, trace_overlaps
    from musacoder.tasks import load_task

    n_gpus = torch.cuda.device_count()
    if n_gpus < 2:
        raise SystemExit(f"needs 2 or more GPUs; {n_gpus} visible")
    chosen = runnable_pairs(a.kernelbench_dir, a.candidates, a.max_input_mb, limit=a.limit)
    jobs = lambda: [VerifyJob(i, load_task(t, o), c.read_text(), "cuda") for i, t, c, o in chosen]  # noqa: E731
    base = dict(repeats=20, max_repeats=100, time_budget_s=3.0)
    print(f"== warm-up: {len(chosen)} candidates on {n_gpus} GPUs")
    run_phase(jobs(), a.workers, VerifyConfig(**base))
    print("== one GPU (cuda:0)")
    one, one_s, _ = run_phase(jobs(), a.workers, VerifyConfig(device="cuda:0", **base))
    print(f"== all {n_gpus} GPUs, one busy worker killed after {len(chosen) // 4} verdicts")
    DEVICE_SLOTS.trace = []
    many, many_s, killed = run_phase(jobs(), a.workers, VerifyConfig(**base), kill_after=len(chosen) // 4)
    overlaps = trace_overlaps(DEVICE_SLOTS.trace)
    DEVICE_SLOTS.trace = None
    lost = sorted({i for i, *_ in chosen} - set(many))
    differ = sorted(k for k in one if k in many and one[k].status != many[k].status)
    rerun = {}
    for k in differ:  # the killed job: it must pass on its own
        (v,) = [v for _, v in run_phase([j for j in jobs() if j.id == k], 1, VerifyConfig(**base))[0].items()]
        rerun[k] = v.status
    res = {
        "gpus": n_gpus, "candidates": len(chosen), "workers": a.workers,
        "one_gpu_verdicts_per_min": 60 * len(one) / one_s, "all_gpus_verdicts_per_min": 60 * len(many) / many_s,
        "devices_used": sorted({v.device for v in many.values() if v.device}),
        "timing_overlaps": overlaps, "killed_pids": killed, "status_differs": {k: [one[k].status, many[k].status] for k in differ},
        "rerun_of_differing": rerun, "jobs_without_verdict": lost,
    }
    res["scaling"] = res["all_gpus_verdicts_per_min"] / res["one_gpu_verdicts_per_min"]
    print("\n| GPUs | verdicts/min | scaling | GPUs used | timing overlaps | status differs | no verdict |")
    print("|---|---|---|---|---|---|---|")
    print(f"| 1 | {res['one_gpu_verdicts_per_min']:.1f} | 1.00 | cuda:0 | – | – | – |")
    print(f"| {n_gpus} | {res['all_gpus_verdicts_per_min']:.1f} | {res['scaling']:.2f} | {', '.join(res['devices_used'])} | "
          f"{len(overlaps)} | {res['status_differs']} (re-run: {rerun}) | {len(lost)} |")
    if a.json:
        a.json.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main()
